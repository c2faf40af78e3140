//! What one subscriber was sent, which its next frame is diffed against: an entry per entity
//! in (or entering) its view, shared copy-on-write between subscribers in the same sent state,
//! and the read-only view of it that lag compensation keeps.

use super::acked::Acked;
use super::{share, SubscriberConfig, SubscriberId};
use crate::interest::View;
use std::sync::Arc;
use zonekeep_protocol::ResumeFrom;

/// What a subscriber was last sent about one entity in (or entering) its view.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct Entry {
    pub(super) id: u32,
    /// Whether the client holds it (a spawn was sent and no despawn since).
    pub(super) sent: bool,
    pub(super) qx: i32,
    pub(super) qy: i32,
    /// World version at the last send: fields stamped later are pending.
    pub(super) version: u64,
    /// Accumulated priority (budgeted subscribers only).
    pub(super) prio: f32,
}

/// One subscriber: its settings, its view, and what it was sent, against which its next frame
/// is diffed.
#[derive(Debug, Clone)]
pub(super) struct Subscriber {
    pub(super) id: SubscriberId,
    pub(super) cfg: SubscriberConfig,
    pub(super) view: View,
    /// One per visible entity, ascending by id, aligned with `view.visible()` after each build.
    /// Shared (copy on write) between subscribers in the same sent state: a follower takes its
    /// leader's entries by reference count instead of copying tens of kilobytes per patch, and
    /// only the state's first subscriber to change them next patch pays one copy.
    pub(super) entries: Arc<Vec<Entry>>,
    pub(super) baseline: bool,
    /// The control value the client holds (`None` = never sent).
    pub(super) control_sent: Option<Option<u32>>,
    pub(super) centre: Option<(f32, f32)>,
    /// Sent-state id (see `share`).
    pub(super) state: u64,
    /// Tick of the last frame built for it (0 = none since the last reset).
    pub(super) built_tick: u64,
    /// Tick of the last frame built for it that was not quiet: one that changed what its client
    /// holds. A client whose last Delta is at or after this tick (and not after `built_tick`)
    /// holds exactly `entries`' sent state.
    pub(super) changed_tick: u64,
    /// Frames against acknowledged states (a datagram path), when switched on.
    pub(super) acked: Option<Box<Acked>>,
    /// `entries` were just restored from a kept state: the view's entered and left lists do not
    /// describe them, so the next alignment merges by id.
    pub(super) rebased: bool,
    /// Its last budgeted frame did not fit the budget: the next is chosen by priority at once.
    pub(super) over_budget: bool,
    /// How many candidates its last budget fill read (sizes the next fill's first ordering).
    pub(super) fill_read: u32,
}

impl Subscriber {
    /// A subscriber that was sent nothing: its first frame is a BASELINE.
    pub(super) fn new(id: SubscriberId, cfg: SubscriberConfig) -> Self {
        Subscriber {
            id,
            cfg,
            view: View::new(),
            entries: Arc::default(),
            baseline: true,
            control_sent: None,
            centre: None,
            state: share::EMPTY_STATE,
            built_tick: 0,
            changed_tick: 0,
            acked: None,
            rebased: false,
            over_budget: false,
            fill_read: 0,
        }
    }

    /// The byte budget of its frames: its own, lowered to the frame limit of a datagram path.
    pub(super) fn budget(&self) -> Option<usize> {
        let limit = self.acked.as_ref().and_then(|a| a.max_frame);
        let budget = match (self.cfg.budget, limit) {
            (Some(b), Some(l)) => Some(b.min(l)),
            (b, l) => b.or(l),
        };
        // No frame may pass the protocol's message cap, whatever the budget.
        budget.map(|b| b.min(zonekeep_protocol::limits::MAX_SERVER_MESSAGE))
    }

    /// Forgets what was sent: the next frame is a BASELINE.
    pub(super) fn reset(&mut self) {
        self.baseline = true;
        clear_entries(&mut self.entries);
        self.view.clear();
        self.control_sent = None;
        self.state = share::EMPTY_STATE;
        self.built_tick = 0;
        self.changed_tick = 0;
        if let Some(a) = self.acked.as_deref_mut() {
            a.ring.clear();
            a.acked = 0;
        }
    }

    /// The count and known-set hash of the ids its client holds (PROTOCOL.md §5.7).
    pub(super) fn known_check(&self) -> (u32, u32) {
        let sent = || self.entries.iter().filter(|e| e.sent).map(|e| e.id);
        let count = u32::try_from(sent().count()).unwrap_or(u32::MAX);
        (count, zonekeep_protocol::known_set_hash(sent()))
    }

    /// Whether a client resuming from `from` holds exactly what this subscriber was sent.
    pub(super) fn resumes_from(&self, from: &ResumeFrom) -> bool {
        !self.baseline
            && self.built_tick != 0
            && (self.changed_tick..=self.built_tick).contains(&from.tick)
            && self.known_check() == (from.count, from.hash)
    }
}

/// Empties `entries`, keeping the allocation when no other subscriber shares it.
pub(super) fn clear_entries(entries: &mut Arc<Vec<Entry>>) {
    match Arc::get_mut(entries) {
        Some(v) => v.clear(),
        None => *entries = Arc::default(),
    }
}

/// Makes `v` the subscriber's entries; `v` gets the old ones back when they were not shared
/// (so scratch buffers keep their capacity), and is left empty otherwise.
pub(super) fn swap_entries(entries: &mut Arc<Vec<Entry>>, v: &mut Vec<Entry>) {
    match Arc::get_mut(entries) {
        Some(mine) => std::mem::swap(mine, v),
        None => *entries = Arc::new(std::mem::take(v)),
    }
}

/// What one subscriber's client holds after the last build, read by lag compensation's history.
#[derive(Debug, Clone, Copy)]
pub(crate) struct SentView<'a> {
    pub(super) entries: &'a Arc<Vec<Entry>>,
    pub(super) ranks: &'a [u32],
}

impl<'a> SentView<'a> {
    /// Whether both are the one sent state the replicator shares between subscribers in it.
    pub(crate) fn same_as(&self, other: &SentView<'_>) -> bool {
        Arc::ptr_eq(self.entries, other.entries)
    }

    /// `(rank, qx, qy)` of every entity the client holds, as last sent, ascending by rank.
    pub(crate) fn held(&self) -> impl Iterator<Item = (u32, i32, i32)> + 'a {
        self.entries
            .iter()
            .zip(self.ranks)
            .filter(|(e, _)| e.sent)
            .map(|(e, &rank)| (rank, e.qx, e.qy))
    }
}
