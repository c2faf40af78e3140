//! Per-subscriber replication: turns the [`World`] into one Delta frame per subscriber per patch.
//!
//! Each subscriber is replicated against **what it was last sent**: its known set (ascending ids),
//! the quantized position it last received for each known entity, and the world version at which it
//! last received each entity's fields. Per patch a subscriber gets: despawns (left its view or the
//! world), updates (only changed fields; the position as a delta from the last one sent, in the
//! canonical form of PROTOCOL.md §5.5.3), spawns with full state (entered its view), plus its input
//! ack, its control entity when that changes, and the zone events addressed to it. The first frame
//! (and the first after [`Replicator::reset_subscriber`]) is a BASELINE.
//!
//! **Parked subscribers.** A subscriber whose client dropped is parked
//! ([`Replicator::park_subscriber`]): no frames are built for it, but what it was sent is kept, so
//! a client that comes back holding exactly that ([`Replicator::unpark_subscriber`] with a
//! [`ResumeFrom`] naming the tick of its last Delta and its known set's count and hash) continues
//! with an ordinary Delta; anything else starts over from a BASELINE. The diff across the pause is
//! the same diff as across one patch: entity ids are never reused, and every field change since
//! the last send is stamped with a later world version.
//!
//! **Acknowledged baselines** (a WebTransport session, PROTOCOL.md §5.8). A subscriber switched
//! to [`Replicator::acknowledge_states`] keeps what it was sent in each of its last
//! [`STATE_RING`] frames, and each new frame is a State written against the newest of them its
//! client acknowledged ([`Replicator::ack_state`]) instead of against the previous frame, so any
//! frame may be lost or reordered: every frame repeats what the client has not acknowledged. With
//! no acknowledged state in the ring (none yet, or too old) the frame is a BASELINE against the
//! empty state. Restoring a kept state is one reference-count copy: the kept entries are the same
//! copy-on-write vector the subscriber had. Two subscribers restored to the same kept state share
//! its id, so body sharing works for them as for any other. Such frames carry no events (events
//! must arrive; the caller sends them on a reliable path), and a frame limit (the path's largest
//! datagram) lowers the byte budget.
//!
//! **Encode once, share bytes.** An update record depends only on (entity, base position, field
//! mask), and a spawn body only on the entity, so both are encoded at most once per patch into a
//! shared arena and copied into every frame that needs them. In the steady state without a budget,
//! every subscriber shares one encoding per entity.
//!
//! **Byte budget.** With `budget: Some(n)` the whole Delta message stays within `n` bytes, with two
//! exceptions counted in [`BuildStats::over_budget`]: when even the header, despawns and events alone
//! exceed it, only those go; and when no pending item fits beside them, the most urgent one goes
//! alone (so an item larger than the budget is still sent eventually). Despawns and events always
//! go. Updates and spawns are candidates ordered by **accumulated priority**: each patch an entity has
//! something pending for this subscriber, its priority grows by
//! `w(d) = 1 / (1 + min(d, d_max) / priority_distance)`, where `d` is its distance from the view centre
//! and `d_max = radius + margin` (or `priority_distance × 1000` for unbounded views); it resets to 0
//! when the entity is sent. The fill takes candidates in that order while they fit and stops once
//! 16 in a row did not (the frame is then full to within a few bytes); only the candidates it
//! reads are encoded and put in order, and a subscriber whose last frame did not fit goes straight
//! to the choice instead of first building the whole frame. Every pending entity gains at least `w_min = w(d_max) > 0` per patch, so
//! nothing starves. **Bound:** with at most `N` entities pending, at least `k` of them fitting in
//! every frame, and `ρ = w_max / w_min = 1 + d_max / priority_distance`, every pending entity is sent
//! within `T = ⌈2 (N − 1)(1 + ρ) / k⌉ + 1` patches. Proof sketch: suppose `x` waits from patch `t0`
//! through `t0 + T`. For another entity `y` to be chosen over `x` at patch `s`, its priority (at most
//! `w_max` × patches since its own last send) must reach `x`'s (at least `w_min × (s − t0)`), so two
//! sends of `y` in the second half of the window are at least `T / (2ρ)` patches apart: at most
//! `1 + ρ` sends per entity there, `(N − 1)(1 + ρ)` in all, yet the `T / 2` patches each send `k`
//! entities, a contradiction. (An item bigger than the budget minus the frame's fixed part can
//! never be sent; such a budget is a misconfiguration.) An entity skipped this patch keeps its old
//! base position and its pending fields, so what it is sent later is still exact.
//!
//! **The message cap.** No frame passes the protocol's
//! [`MAX_SERVER_MESSAGE`](zonekeep_protocol::limits::MAX_SERVER_MESSAGE): a budget above it is
//! lowered to it, and an unbudgeted frame that would pass it (a view of tens of thousands of
//! entities with long fields) is replaced by a BASELINE of what fits, chosen by priority as
//! above; the rest follows in later patches. Events take at most [`MAX_FRAME_EVENT_BYTES`] of a
//! frame, so despawns and events alone never reach the cap.

mod budget;
mod build;
mod cache;
mod share;

#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_acked;
#[cfg(test)]
mod tests_budget;
#[cfg(test)]
mod tests_e2e;
#[cfg(test)]
mod tests_unfiltered;

use crate::interest::{Interest, View};
use crate::world::{EntityId, World};
use std::collections::VecDeque;
use std::sync::Arc;
use thiserror::Error;
use zonekeep_protocol::limits::STATE_RING;
use zonekeep_protocol::{EncodeError, ResumeFrom};

/// Most event bytes (payloads with their topic and length) one frame carries: a quarter of
/// [`MAX_SERVER_MESSAGE`](zonekeep_protocol::limits::MAX_SERVER_MESSAGE), so events never crowd
/// a message past the protocol's cap; events beyond wait for a later patch.
pub const MAX_FRAME_EVENT_BYTES: usize = 256 * 1024;

/// A subscriber (a player's or observer's connection) of one zone.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SubscriberId(pub u32);

/// Where a subscriber's view is centred.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Focus {
    /// Follow an entity (normally the one the player controls). If it is gone, the view stays at
    /// the last position seen.
    Entity(EntityId),
    /// A fixed point (an observer's focus area, a spectator camera).
    Point(f32, f32),
}

/// A subscriber's interest and bandwidth settings.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SubscriberConfig {
    /// View radius in world units (`f32::INFINITY` = sees every entity).
    pub radius: f32,
    /// Leave hysteresis: an entity in view leaves only beyond `radius + margin`.
    pub margin: f32,
    /// Byte budget per Delta, message header included (`None` = unlimited).
    pub budget: Option<usize>,
    /// View centre.
    pub focus: Focus,
    /// The entity this player controls (always visible to it; sent in the CONTROL field on change).
    pub control: Option<EntityId>,
}

/// Replicator-wide settings.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ReplicationConfig {
    /// Grid cell size for interest (about the typical view radius).
    pub cell_size: f32,
    /// Distance at which the priority weight halves (see the module docs).
    pub priority_distance: f32,
}

impl Default for ReplicationConfig {
    fn default() -> Self {
        Self {
            cell_size: 64.0,
            priority_distance: 16.0,
        }
    }
}

/// What the caller supplies per subscriber per patch.
#[derive(Debug, Clone, Copy, Default)]
pub struct FrameInput<'a> {
    /// The last input sequence the zone processed for this player (0 = none).
    pub ack: u32,
    /// Zone events for this subscriber, `(topic, payload)`. Over the protocol's limits (1,024 events,
    /// 16,384-byte payloads) or [`MAX_FRAME_EVENT_BYTES`] the excess is dropped and counted in
    /// [`BuildStats::events_dropped`] (a [`ZoneHost`](crate::ZoneHost) hands over no more than
    /// fits, keeping the rest for its next patch).
    pub events: &'a [(u16, &'a [u8])],
}

/// What the replicator knows about a frame it wrote, handed over with the bytes so that no
/// layer parses a header back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FrameHead {
    /// The input ack the header carries.
    pub ack: u32,
    /// The frame says nothing new: not a BASELINE, no CONTROL, no events, and no despawns,
    /// updates or spawns. A host may skip sending it when the ack did not change either.
    pub quiet: bool,
    /// `Some(base)` when the frame is a State (see [`Replicator::acknowledge_states`]): the tick
    /// of the acknowledged state it applies to, 0 for the empty state.
    pub base: Option<u64>,
}

/// Counters of one [`Replicator::build`], for metrics.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct BuildStats {
    /// Frames written.
    pub frames: u64,
    /// Total bytes of all frames.
    pub bytes: u64,
    /// Update records sent.
    pub updates: u64,
    /// Spawns sent.
    pub spawns: u64,
    /// Despawns sent.
    pub despawns: u64,
    /// Updates and spawns pending but left for a later patch by a budget.
    pub deferred: u64,
    /// Update records and spawn bodies copied from an encoding another subscriber already made.
    pub cache_hits: u64,
    /// Update records and spawn bodies encoded (once each, or per distinct base).
    pub encodings: u64,
    /// Frames whose whole body was copied from a subscriber in the identical state.
    pub shared_bodies: u64,
    /// Events dropped for exceeding protocol limits.
    pub events_dropped: u64,
    /// Events the patch could not carry, left queued for the next one (counted once per patch
    /// they wait).
    pub events_deferred: u64,
    /// Frames over budget because the header, despawns and events alone did not fit.
    pub over_budget: u64,
}

/// Replication failures. Encoding errors mean a broken invariant (the world only holds valid values).
#[derive(Debug, Error, Clone, PartialEq)]
pub enum ReplicateError {
    /// The subscriber id is already registered.
    #[error("subscriber {0:?} already exists")]
    DuplicateSubscriber(SubscriberId),
    /// No subscriber with this id.
    #[error("unknown subscriber {0:?}")]
    UnknownSubscriber(SubscriberId),
    /// A frame could not be encoded.
    #[error("encoding a delta failed: {0}")]
    Encode(#[from] EncodeError),
}

/// What a subscriber was last sent about one entity in (or entering) its view.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Entry {
    id: u32,
    /// Whether the client holds it (a spawn was sent and no despawn since).
    sent: bool,
    qx: i32,
    qy: i32,
    /// World version at the last send: fields stamped later are pending.
    version: u64,
    /// Accumulated priority (budgeted subscribers only).
    prio: f32,
}

#[derive(Debug, Clone)]
struct Subscriber {
    id: SubscriberId,
    cfg: SubscriberConfig,
    view: View,
    /// One per visible entity, ascending by id, aligned with `view.visible()` after each build.
    /// Shared (copy on write) between subscribers in the same sent state: a follower takes its
    /// leader's entries by reference count instead of copying tens of kilobytes per patch, and
    /// only the state's first subscriber to change them next patch pays one copy.
    entries: Arc<Vec<Entry>>,
    baseline: bool,
    /// The control value the client holds (`None` = never sent).
    control_sent: Option<Option<u32>>,
    centre: Option<(f32, f32)>,
    /// Sent-state id (see `share`).
    state: u64,
    /// Tick of the last frame built for it (0 = none since the last reset).
    built_tick: u64,
    /// Tick of the last frame built for it that was not quiet: one that changed what its client
    /// holds. A client whose last Delta is at or after this tick (and not after `built_tick`)
    /// holds exactly `entries`' sent state.
    changed_tick: u64,
    /// Frames against acknowledged states (a datagram path), when switched on.
    acked: Option<Box<Acked>>,
    /// `entries` were just restored from a kept state: the view's entered and left lists do not
    /// describe them, so the next alignment merges by id.
    rebased: bool,
    /// Its last budgeted frame did not fit the budget: the next is chosen by priority at once.
    over_budget: bool,
    /// How many candidates its last budget fill read (sizes the next fill's first ordering).
    fill_read: u32,
}

/// A subscriber's kept states, for frames against acknowledged baselines.
#[derive(Debug, Clone)]
struct Acked {
    /// What it was sent in its frames since the newest acknowledged one, oldest first, at most
    /// [`STATE_RING`].
    ring: VecDeque<Kept>,
    /// The newest tick its client acknowledged (0 = none).
    acked: u64,
    /// The base of the frame being built (0 = the empty state).
    base: u64,
    /// Largest frame in bytes (the path's datagram size), lowering the budget.
    max_frame: Option<usize>,
}

/// What one frame left its client holding.
#[derive(Debug, Clone)]
struct Kept {
    tick: u64,
    entries: Arc<Vec<Entry>>,
    control_sent: Option<Option<u32>>,
    state: u64,
}

/// How a parked subscriber came back ([`Replicator::unpark_subscriber`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResumeOutcome {
    /// The client holds what it was last sent: its next frame is an ordinary Delta.
    Delta,
    /// Its next frame is a BASELINE (no resume point, a mismatched one, or no state kept).
    Baseline,
}

impl Subscriber {
    /// A subscriber that was sent nothing: its first frame is a BASELINE.
    fn new(id: SubscriberId, cfg: SubscriberConfig) -> Self {
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
    fn budget(&self) -> Option<usize> {
        let limit = self.acked.as_ref().and_then(|a| a.max_frame);
        let budget = match (self.cfg.budget, limit) {
            (Some(b), Some(l)) => Some(b.min(l)),
            (b, l) => b.or(l),
        };
        // No frame may pass the protocol's message cap, whatever the budget.
        budget.map(|b| b.min(zonekeep_protocol::limits::MAX_SERVER_MESSAGE))
    }

    /// Before a build: restores what its client acknowledged (or starts over from the empty
    /// state) when it builds against acknowledged states.
    fn rebase(&mut self) {
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
    fn keep(&mut self, tick: u64) {
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

    /// Forgets what was sent: the next frame is a BASELINE.
    fn reset(&mut self) {
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
    fn known_check(&self) -> (u32, u32) {
        let sent = || self.entries.iter().filter(|e| e.sent).map(|e| e.id);
        let count = u32::try_from(sent().count()).unwrap_or(u32::MAX);
        (count, zonekeep_protocol::known_set_hash(sent()))
    }

    /// Whether a client resuming from `from` holds exactly what this subscriber was sent.
    fn resumes_from(&self, from: &ResumeFrom) -> bool {
        !self.baseline
            && self.built_tick != 0
            && (self.changed_tick..=self.built_tick).contains(&from.tick)
            && self.known_check() == (from.count, from.hash)
    }
}

/// Empties `entries`, keeping the allocation when no other subscriber shares it.
fn clear_entries(entries: &mut Arc<Vec<Entry>>) {
    match Arc::get_mut(entries) {
        Some(v) => v.clear(),
        None => *entries = Arc::default(),
    }
}

/// Makes `v` the subscriber's entries; `v` gets the old ones back when they were not shared
/// (so scratch buffers keep their capacity), and is left empty otherwise.
fn swap_entries(entries: &mut Arc<Vec<Entry>>, v: &mut Vec<Entry>) {
    match Arc::get_mut(entries) {
        Some(mine) => std::mem::swap(mine, v),
        None => *entries = Arc::new(std::mem::take(v)),
    }
}

/// What one subscriber's client holds after the last build, read by lag compensation's history.
#[derive(Debug, Clone, Copy)]
pub(crate) struct SentView<'a> {
    entries: &'a Arc<Vec<Entry>>,
    ranks: &'a [u32],
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

/// Builds every subscriber's Delta each patch. See the [module docs](self).
#[derive(Debug, Clone)]
pub struct Replicator {
    cfg: ReplicationConfig,
    interest: Interest,
    subs: Vec<Subscriber>,
    /// Subscribers whose clients dropped, kept for a resume; ascending by id, never built.
    parked: Vec<Subscriber>,
    cache: cache::Cache,
    scratch: build::Scratch,
    share: share::Share,
}

impl Replicator {
    /// A replicator with no subscribers.
    pub fn new(cfg: ReplicationConfig) -> Self {
        Self {
            cfg,
            interest: Interest::new(cfg.cell_size),
            subs: Vec::new(),
            parked: Vec::new(),
            cache: cache::Cache::default(),
            scratch: build::Scratch::default(),
            share: share::Share::default(),
        }
    }

    fn find(&self, id: SubscriberId) -> Result<usize, ReplicateError> {
        self.subs
            .binary_search_by_key(&id, |s| s.id)
            .map_err(|_| ReplicateError::UnknownSubscriber(id))
    }

    /// Adds a subscriber; its first frame is a BASELINE.
    pub fn add_subscriber(
        &mut self,
        id: SubscriberId,
        cfg: SubscriberConfig,
    ) -> Result<(), ReplicateError> {
        if self.parked.binary_search_by_key(&id, |s| s.id).is_ok() {
            return Err(ReplicateError::DuplicateSubscriber(id));
        }
        match self.subs.binary_search_by_key(&id, |s| s.id) {
            Ok(_) => Err(ReplicateError::DuplicateSubscriber(id)),
            Err(at) => {
                self.subs.insert(at, Subscriber::new(id, cfg));
                Ok(())
            }
        }
    }

    /// Changes a subscriber's settings (radius, focus, budget, control); takes effect next build.
    pub fn update_subscriber(
        &mut self,
        id: SubscriberId,
        cfg: SubscriberConfig,
    ) -> Result<(), ReplicateError> {
        let i = self.find(id)?;
        self.subs[i].cfg = cfg;
        Ok(())
    }

    /// Removes a subscriber, active or parked, with everything kept for it.
    pub fn remove_subscriber(&mut self, id: SubscriberId) -> Result<(), ReplicateError> {
        if let Ok(i) = self.parked.binary_search_by_key(&id, |s| s.id) {
            self.parked.remove(i);
            return Ok(());
        }
        let i = self.find(id)?;
        self.subs.remove(i);
        Ok(())
    }

    /// Stops building frames for a subscriber whose client dropped, keeping what it was sent
    /// for [`Replicator::unpark_subscriber`]. Until then it is not among the subscribers
    /// ([`Replicator::len`], [`Replicator::known`] and the like do not see it).
    pub fn park_subscriber(&mut self, id: SubscriberId) -> Result<(), ReplicateError> {
        let i = self.find(id)?;
        let sub = self.subs.remove(i);
        let at = self
            .parked
            .binary_search_by_key(&id, |s| s.id)
            .unwrap_or_else(|at| at);
        self.parked.insert(at, sub);
        Ok(())
    }

    /// Builds frames for a parked subscriber again, with settings `cfg`. With a `from` that
    /// matches what it was last sent (see [`ResumeFrom`] and the [module docs](self)) its next
    /// frame is an ordinary Delta against that state; otherwise it is reset and its next frame
    /// is a BASELINE. An unknown or active subscriber is an error.
    pub fn unpark_subscriber(
        &mut self,
        id: SubscriberId,
        cfg: SubscriberConfig,
        from: Option<&ResumeFrom>,
    ) -> Result<ResumeOutcome, ReplicateError> {
        let i = self
            .parked
            .binary_search_by_key(&id, |s| s.id)
            .map_err(|_| ReplicateError::UnknownSubscriber(id))?;
        let mut sub = self.parked.remove(i);
        // The new connection chooses its own path: frames against acknowledged states are
        // switched on again by whoever serves a datagram path.
        sub.acked = None;
        let outcome = if from.is_some_and(|f| sub.resumes_from(f)) {
            sub.cfg = cfg;
            ResumeOutcome::Delta
        } else {
            // Exactly as if it had never been here.
            sub = Subscriber::new(id, cfg);
            ResumeOutcome::Baseline
        };
        let at = self
            .subs
            .binary_search_by_key(&id, |s| s.id)
            .unwrap_or_else(|at| at);
        self.subs.insert(at, sub);
        Ok(outcome)
    }

    /// Builds frames for a parked subscriber again, continuing from what it was sent: its client
    /// kept it (the connection stayed open while the subscriber was parked, say during a
    /// transfer that came back), so its next frame is an ordinary Delta. Settings become `cfg`;
    /// a subscriber on acknowledged states stays on them. An unknown or active subscriber is an
    /// error.
    pub fn resume_subscriber(
        &mut self,
        id: SubscriberId,
        cfg: SubscriberConfig,
    ) -> Result<(), ReplicateError> {
        let i = self
            .parked
            .binary_search_by_key(&id, |s| s.id)
            .map_err(|_| ReplicateError::UnknownSubscriber(id))?;
        let mut sub = self.parked.remove(i);
        sub.cfg = cfg;
        let at = self
            .subs
            .binary_search_by_key(&id, |s| s.id)
            .unwrap_or_else(|at| at);
        self.subs.insert(at, sub);
        Ok(())
    }

    /// Builds this subscriber's frames as States against the newest state its client
    /// acknowledged (see the [module docs](self)), each at most `max_frame` bytes where the
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

    /// Whether a subscriber is parked.
    pub fn is_parked(&self, id: SubscriberId) -> bool {
        self.parked.binary_search_by_key(&id, |s| s.id).is_ok()
    }

    /// Forgets what the subscriber was sent: its next frame is a BASELINE (e.g. after a reconnect).
    pub fn reset_subscriber(&mut self, id: SubscriberId) -> Result<(), ReplicateError> {
        let i = self.find(id)?;
        self.subs[i].reset();
        Ok(())
    }

    /// The subscriber's settings.
    pub fn subscriber(&self, id: SubscriberId) -> Result<&SubscriberConfig, ReplicateError> {
        Ok(&self.subs[self.find(id)?].cfg)
    }

    /// Number of subscribers.
    pub fn len(&self) -> usize {
        self.subs.len()
    }

    /// Whether there are no subscribers.
    pub fn is_empty(&self) -> bool {
        self.subs.is_empty()
    }

    /// Ids the subscriber's client holds (sent and not despawned), ascending.
    pub fn known(&self, id: SubscriberId) -> Result<Vec<u32>, ReplicateError> {
        let s = &self.subs[self.find(id)?];
        Ok(s.entries.iter().filter(|e| e.sent).map(|e| e.id).collect())
    }

    /// The count and [`known_set_hash`](zonekeep_protocol::known_set_hash) of the ids the
    /// subscriber's client holds: what a KnownSetCheck (PROTOCOL.md §5.7) carries. Walks the
    /// entries without allocating, so a periodic check costs one pass over the known set.
    pub fn known_check(&self, id: SubscriberId) -> Result<(u32, u32), ReplicateError> {
        Ok(self.subs[self.find(id)?].known_check())
    }

    /// Every subscriber's sent state after the last build, in subscriber id order.
    pub(crate) fn sent_views(&self) -> impl Iterator<Item = (SubscriberId, SentView<'_>)> {
        self.subs.iter().map(|s| {
            (
                s.id,
                SentView {
                    entries: &s.entries,
                    ranks: s.view.visible_ranks(),
                },
            )
        })
    }

    /// Times interest and budget work on `clock` from now on (`None`: not at all).
    pub fn set_stage_clock(&mut self, clock: Option<crate::stages::StageClock>) {
        self.scratch.clock = clock;
    }

    /// Whether the next build times its interest and budget work (when a stage clock is set).
    pub fn time_next_build(&mut self, timed: bool) {
        self.scratch.timing = timed;
    }

    /// Time spent finding views and choosing updates under budgets since the last call.
    pub fn take_stage_times(&mut self) -> (std::time::Duration, std::time::Duration) {
        (
            std::mem::take(&mut self.scratch.interest),
            std::mem::take(&mut self.scratch.budget),
        )
    }

    /// Builds and hands every subscriber's Delta for this patch to `sink`, in subscriber id order.
    ///
    /// `can_see(subscriber, entity)` hides in-range entities (never the subscriber's own entity or a
    /// global one); `inputs(subscriber)` supplies the ack and events. The frame buffer passed to `sink`
    /// is reused, so copy it if you keep it.
    ///
    /// Pass the same [`World`] every patch: each subscriber's sent state refers to its ids and
    /// version. After replacing the world (say, restoring a save), reset every subscriber.
    pub fn build<'a, C, I, S>(
        &mut self,
        world: &World,
        tick: u64,
        can_see: C,
        inputs: I,
        sink: S,
    ) -> Result<BuildStats, ReplicateError>
    where
        C: FnMut(SubscriberId, EntityId) -> bool,
        I: FnMut(SubscriberId) -> FrameInput<'a>,
        S: FnMut(SubscriberId, &[u8]),
    {
        let mut sink = sink;
        let sink = move |sub, _head, bytes: &[u8]| sink(sub, bytes);
        build::build(self, world, tick, Some(can_see), |_| true, inputs, sink)
    }

    /// [`Replicator::build`] that also hands each frame's [`FrameHead`] to `sink`; with
    /// `can_see: None` it builds as [`Replicator::build_unfiltered`] does.
    pub fn build_with_heads<'a, C, I, S>(
        &mut self,
        world: &World,
        tick: u64,
        can_see: Option<C>,
        inputs: I,
        sink: S,
    ) -> Result<BuildStats, ReplicateError>
    where
        C: FnMut(SubscriberId, EntityId) -> bool,
        I: FnMut(SubscriberId) -> FrameInput<'a>,
        S: FnMut(SubscriberId, FrameHead, &[u8]),
    {
        build::build(self, world, tick, can_see, |_| true, inputs, sink)
    }

    /// [`Replicator::build_with_heads`] for a patch some subscribers sit out, so a host can
    /// serve some of them (a zone's observers) at a lower rate than the rest: `due(subscriber)`
    /// says whether it gets a frame this patch. One that sits out is not looked at: no frame,
    /// and its view and what it was sent stay as they were, so its next frame says everything
    /// that changed since its last one (the diff across a pause, see the [module docs](self)).
    /// `inputs` is asked only of the subscribers due.
    pub fn build_due<'a, C, D, I, S>(
        &mut self,
        world: &World,
        tick: u64,
        can_see: Option<C>,
        due: D,
        inputs: I,
        sink: S,
    ) -> Result<BuildStats, ReplicateError>
    where
        C: FnMut(SubscriberId, EntityId) -> bool,
        D: FnMut(SubscriberId) -> bool,
        I: FnMut(SubscriberId) -> FrameInput<'a>,
        S: FnMut(SubscriberId, FrameHead, &[u8]),
    {
        build::build(self, world, tick, can_see, due, inputs, sink)
    }

    /// [`Replicator::build`] for a zone with no `can_see` restriction (every in-range entity is
    /// visible). Same frames, cheaper: a subscriber with an unbounded radius (`f32::INFINITY`)
    /// sees every entity, so its view needs no grid query and no per-subscriber merge.
    pub fn build_unfiltered<'a, I, S>(
        &mut self,
        world: &World,
        tick: u64,
        inputs: I,
        sink: S,
    ) -> Result<BuildStats, ReplicateError>
    where
        I: FnMut(SubscriberId) -> FrameInput<'a>,
        S: FnMut(SubscriberId, &[u8]),
    {
        let mut sink = sink;
        build::build(
            self,
            world,
            tick,
            None::<fn(SubscriberId, EntityId) -> bool>,
            |_| true,
            inputs,
            move |sub, _head, bytes: &[u8]| sink(sub, bytes),
        )
    }
}
