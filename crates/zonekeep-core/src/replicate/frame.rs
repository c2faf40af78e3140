//! What a build takes and hands back per subscriber per patch: the caller's inputs (ack and
//! events, within a per-frame event cap), the head of every frame written, and the build's
//! counters for metrics.

/// Most event bytes (payloads with their topic and length) one frame carries: a quarter of
/// [`MAX_SERVER_MESSAGE`](zonekeep_protocol::limits::MAX_SERVER_MESSAGE), so events never crowd
/// a message past the protocol's cap; events beyond wait for a later patch.
pub const MAX_FRAME_EVENT_BYTES: usize = 256 * 1024;

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
    ///
    /// [`Replicator::acknowledge_states`]: super::Replicator::acknowledge_states
    pub base: Option<u64>,
}

/// Counters of one [`Replicator::build`], for metrics.
///
/// [`Replicator::build`]: super::Replicator::build
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
