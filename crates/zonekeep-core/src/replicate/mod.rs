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
//!
//! [`ResumeFrom`]: zonekeep_protocol::ResumeFrom
//! [`STATE_RING`]: zonekeep_protocol::limits::STATE_RING

mod acked;
mod budget;
mod build;
mod cache;
mod frame;
mod registry;
mod share;
mod subscriber;

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

pub use frame::{BuildStats, FrameHead, FrameInput, MAX_FRAME_EVENT_BYTES};
pub use registry::ResumeOutcome;
pub(crate) use subscriber::SentView;
use subscriber::{clear_entries, swap_entries, Entry, Subscriber};

use crate::interest::Interest;
use crate::world::{EntityId, World};
use thiserror::Error;
use zonekeep_protocol::EncodeError;

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
