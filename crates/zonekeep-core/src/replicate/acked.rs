//! Frames against acknowledged baselines (a WebTransport session, PROTOCOL.md §5.8): the ring
//! of states a subscriber's last frames left its client holding, the acknowledgements that
//! advance it, and the rebase onto the newest acknowledged state before each build.

use super::subscriber::{clear_entries, Entry, Subscriber};
use super::{share, ReplicateError, Replicator, SubscriberId};
use std::collections::VecDeque;
use std::sync::Arc;
use zonekeep_protocol::limits::STATE_RING;

/// A subscriber's kept states, for frames against acknowledged baselines.
#[derive(Debug, Clone)]
pub(super) struct Acked {
    /// What it was sent in its frames since the newest acknowledged one, oldest first, at most
    /// [`STATE_RING`].
    pub(super) ring: VecDeque<Kept>,
    /// The newest tick its client acknowledged (0 = none).
    pub(super) acked: u64,
    /// The base of the frame being built (0 = the empty state).
    pub(super) base: u64,
    /// Largest frame in bytes (the path's datagram size), lowering the budget.
    pub(super) max_frame: Option<usize>,
}

/// What one frame left its client holding.
#[derive(Debug, Clone)]
pub(super) struct Kept {
    tick: u64,
    entries: Arc<Vec<Entry>>,
    control_sent: Option<Option<u32>>,
    state: u64,
}

impl Subscriber {
    /// Before a build: restores what its client acknowledged (or starts over from the empty
    /// state) when it builds against acknowledged states.
    pub(super) fn rebase(&mut self) {
        let Some(a) = self.acked.as_deref_mut() else {
            return;
        };
        let newest = a.ring.back().map(|k| k.tick);
        match a
            .ring
            .iter()
            .rev()
            .find(|k| k.tick == a.acked && k.tick != 0)
        {
            Some(k) => {
                a.base = k.tick;
                if newest != Some(k.tick) {
                    self.entries = Arc::clone(&k.entries);
                    self.control_sent = k.control_sent;
                    self.state = k.state;
                    self.rebased = true;
                }
                self.baseline = false;
            }
            None => {
                a.base = 0;
                self.baseline = true;
                clear_entries(&mut self.entries);
                self.control_sent = None;
                self.state = share::EMPTY_STATE;
                self.rebased = true;
            }
        }
    }

    /// After a build: keeps what the frame of `tick` left its client holding.
    pub(super) fn keep(&mut self, tick: u64) {
        let Some(a) = self.acked.as_deref_mut() else {
            return;
        };
        if a.ring.len() >= STATE_RING {
            a.ring.pop_front();
        }
        a.ring.push_back(Kept {
            tick,
            entries: Arc::clone(&self.entries),
            control_sent: self.control_sent,
            state: self.state,
        });
    }
}

impl Replicator {
    /// Builds this subscriber's frames as States against the newest state its client
    /// acknowledged (see the [module docs](super)), each at most `max_frame` bytes where the
    /// budget allows (`None` = no limit beyond its budget). Its next frame is a BASELINE.
    pub fn acknowledge_states(
        &mut self,
        id: SubscriberId,
        max_frame: Option<usize>,
    ) -> Result<(), ReplicateError> {
        let i = self.find(id)?;
        let sub = &mut self.subs[i];
        sub.reset();
        sub.acked = Some(Box::new(Acked {
            ring: VecDeque::with_capacity(STATE_RING),
            acked: 0,
            base: 0,
            max_frame,
        }));
        Ok(())
    }

    /// Changes the frame limit of a subscriber that builds against acknowledged states (a path
    /// whose datagram size changed); other subscribers are unaffected.
    pub fn set_max_frame(
        &mut self,
        id: SubscriberId,
        max_frame: Option<usize>,
    ) -> Result<(), ReplicateError> {
        let i = self.find(id)?;
        if let Some(a) = self.subs[i].acked.as_deref_mut() {
            a.max_frame = max_frame;
        }
        Ok(())
    }

    /// Notes that the subscriber's client applied the State of `tick` (PROTOCOL.md §4.5). Older
    /// acknowledgements than one already noted are ignored (datagrams reorder), as is a tick
    /// never built for it (a client can only acknowledge what it was sent; anything else falls
    /// back to a BASELINE at the next build). Returns whether it was news.
    pub fn ack_state(&mut self, id: SubscriberId, tick: u64) -> Result<bool, ReplicateError> {
        let i = self.find(id)?;
        let sub = &mut self.subs[i];
        let Some(a) = sub.acked.as_deref_mut() else {
            return Ok(false);
        };
        if tick <= a.acked || tick > sub.built_tick {
            return Ok(false);
        }
        a.acked = tick;
        // Acknowledgements only advance, so no later frame is built against an older state:
        // the ring holds the states of about one round trip, not all 32.
        while a.ring.front().is_some_and(|k| k.tick < tick) {
            a.ring.pop_front();
        }
        Ok(true)
    }
}
