//! The client side of States (PROTOCOL.md §5.8): the states produced by the last [`STATE_RING`]
//! States applied, by tick, so that a State written against any of them applies, and a lost,
//! repeated or reordered datagram never corrupts what the client shows.

use std::collections::VecDeque;

use crate::delta::{decode_delta_head, Delta};
use crate::error::DecodeError;
use crate::limits::STATE_RING;
use crate::mirror::{Mirror, MirrorError};
use crate::schema::Schema;

/// What became of one State handed to [`StateRing::apply`].
#[derive(Debug, Clone, PartialEq)]
pub enum Applied {
    /// It produced the newest state, now [`StateRing::current`]; the decoded State is returned
    /// for its ack and control.
    Newer(Box<Delta>),
    /// Its tick is not newer than the newest state applied: a late or repeated datagram.
    Stale,
    /// Its base is not held (older than the ring, or never received): dropped; the host sends
    /// one against a state the client acknowledged, or a BASELINE.
    NoBase {
        /// The base it named.
        base: u64,
    },
}

/// Why a State could not be applied. The ring is unchanged when this is returned.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StateError {
    /// The bytes were not a State (or a Delta, see [`StateRing::apply`]).
    #[error(transparent)]
    Decode(#[from] DecodeError),
    /// It does not apply to its base.
    #[error(transparent)]
    Mirror(#[from] MirrorError),
}

/// The states a client keeps (see the [module docs](self)). The newest is what it shows.
#[derive(Debug, Clone, Default)]
pub struct StateRing {
    /// `(tick, state)`, oldest first, ticks ascending.
    states: VecDeque<(u64, Mirror)>,
    empty: Mirror,
}

impl StateRing {
    /// A ring holding nothing (what a client holds before its first BASELINE).
    pub fn new() -> Self {
        Self::default()
    }

    /// The newest state applied (empty before the first).
    pub fn current(&self) -> &Mirror {
        self.states.back().map_or(&self.empty, |(_, m)| m)
    }

    /// The tick to acknowledge: the newest State applied (0 = none).
    pub fn newest(&self) -> u64 {
        self.states.back().map_or(0, |(t, _)| *t)
    }

    /// Forgets every state (a new session: its first State is a BASELINE).
    pub fn clear(&mut self) {
        self.states.clear();
    }

    /// Applies a State (§5.8). A Delta (`0x82`, no base) is taken as a State against the newest
    /// state, which is what it is when a host sends one on a reliable path.
    pub fn apply(&mut self, bytes: &[u8], schema: &Schema) -> Result<Applied, StateError> {
        let head = decode_delta_head(bytes)?;
        let newest = self.newest();
        if head.tick <= newest && !self.states.is_empty() {
            return Ok(Applied::Stale);
        }
        let base = head.base.unwrap_or(newest);
        let from = if head.base == Some(0) {
            &self.empty
        } else {
            match self.states.iter().rev().find(|(t, _)| *t == base) {
                Some((_, m)) => m,
                None if head.base.is_none() && self.states.is_empty() => &self.empty,
                None => return Ok(Applied::NoBase { base }),
            }
        };
        let mut next = from.clone();
        let delta = next.decode_apply(bytes, schema)?;
        if self.states.len() >= STATE_RING {
            self.states.pop_front();
        }
        self.states.push_back((head.tick, next));
        Ok(Applied::Newer(Box::new(delta)))
    }
}
