//! Error types of the runtime, one per operation family.

use crate::player::{PlayerId, Role};
use crate::zone::JoinRefusal;

/// Why a zone could not be created or a host could not be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ZoneError {
    /// The zone's create params were malformed or out of range.
    #[error("invalid zone params: {0}")]
    InvalidParams(String),
    /// The zone failed to start for a reason of its own.
    #[error("zone failed: {0}")]
    Failed(String),
    /// The host configuration was invalid.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// No zone kind of that name is registered.
    #[error("unknown zone kind {0:?}")]
    UnknownKind(String),
    /// The kind does not implement [`Zone::restore`](crate::Zone::restore).
    #[error("zone kind {0:?} does not restore saved state")]
    NotRestorable(String),
    /// The kind's code cannot read these saved bytes (e.g. its state schema
    /// changed); the save is kept for an operator.
    #[error("saved state cannot be restored: {0}")]
    Restore(String),
    /// The kind has no migration from this older state version (see
    /// [`Zone::migrate`](crate::Zone::migrate)).
    #[error("no migration from state version {0}")]
    NoMigration(u32),
}

/// An invalid [`ZoneConfig`](crate::ZoneConfig).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    /// `tick_hz` must be in `1..=1000`.
    #[error("tick_hz must be in 1..=1000, got {0}")]
    TickHz(u32),
    /// `patch_every` must be at least 1.
    #[error("patch_every must be at least 1")]
    PatchEvery,
    /// `observer_patch_every` must be in `1..=1000`, and its product with `patch_every` (what
    /// an observer's Welcome says) must fit a `u32`.
    #[error("observer_patch_every must be in 1..=1000 and times patch_every fit a u32, got {0}")]
    ObserverPatchEvery(u32),
    /// `max_catch_up` must be at least 1.
    #[error("max_catch_up must be at least 1")]
    MaxCatchUp,
    /// A zone that admits nobody is useless.
    #[error("max_players and max_observers are both zero")]
    NoCapacity,
    /// `idle_after` must not exceed `dormant_after`.
    #[error("idle_after ({idle:?}) exceeds dormant_after ({dormant:?})")]
    TierOrder {
        /// The configured `idle_after`.
        idle: std::time::Duration,
        /// The configured `dormant_after`.
        dormant: std::time::Duration,
    },
    /// `IdlePolicy::Slow` needs a divisor of at least 1.
    #[error("IdlePolicy::Slow divisor must be at least 1")]
    SlowDivisor,
    /// `state_version` must be at least 1.
    #[error("state_version must be at least 1")]
    StateVersion,
    /// `input_buffer` must be at least 1.
    #[error("input_buffer must be at least 1")]
    InputBuffer,
    /// `max_timers` must be at least 1.
    #[error("max_timers must be at least 1")]
    MaxTimers,
    /// `max_pending_events` must be at least 1.
    #[error("max_pending_events must be at least 1")]
    MaxPendingEvents,
    /// `max_facts_in_flight` must be at least 1.
    #[error("max_facts_in_flight must be at least 1")]
    MaxFactsInFlight,
    /// `max_pending_event_bytes` must be at least 1.
    #[error("max_pending_event_bytes must be at least 1")]
    MaxPendingEventBytes,
    /// `max_entities` must be at least 1.
    #[error("max_entities must be at least 1")]
    MaxEntities,
    /// `max_fact_bytes` must be at least 1.
    #[error("max_fact_bytes must be at least 1")]
    MaxFactBytes,
    /// `max_facts_per_second` must be at least 1.
    #[error("max_facts_per_second must be at least 1")]
    MaxFactsPerSecond,
    /// `max_calls_in_flight` must be at least 1.
    #[error("max_calls_in_flight must be at least 1")]
    MaxCallsInFlight,
    /// `max_call_bytes` must be in 1..=64 KiB.
    #[error("max_call_bytes must be in 1..=65536, got {0}")]
    MaxCallBytes(usize),
    /// A replication setting is out of range (the message says which).
    #[error("replication: {0}")]
    Replication(&'static str),
    /// The world could not be created (e.g. an invalid position step).
    #[error("world: {0}")]
    World(String),
}

/// Why a join or observe was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum JoinError {
    /// The zone already holds its configured maximum for that role.
    #[error("zone is full for role {role:?}")]
    Full {
        /// The role that is at capacity.
        role: Role,
    },
    /// The zone's own `on_join`/`on_observe` refused.
    #[error("refused by zone: {0}")]
    Refused(JoinRefusal),
    /// The host has been disposed.
    #[error("zone is disposed")]
    Disposed,
    /// All `u32` player ids of this host have been used.
    #[error("player ids exhausted")]
    IdsExhausted,
}

/// Why a rejoin failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RejoinError {
    /// No such player in the zone (never joined, left, or grace already expired).
    #[error("unknown player {0}")]
    UnknownPlayer(PlayerId),
    /// The player is still connected; there is nothing to rejoin.
    #[error("player {0} is not dropped")]
    NotDropped(PlayerId),
    /// The grace window had passed; the player has now left with `Dropped`.
    #[error("reconnect grace expired for player {0}")]
    GraceExpired(PlayerId),
    /// The host has been disposed.
    #[error("zone is disposed")]
    Disposed,
}

/// A player id that is not in the zone.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("unknown player {0}")]
pub struct UnknownPlayer(pub PlayerId);

/// Why a timer could not be scheduled.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum TimerError {
    /// A delay or period of zero ticks (it would fire in the past).
    #[error("timer delay must be at least one tick")]
    ZeroTicks,
    /// The zone already has `capacity` timers scheduled.
    #[error("timer capacity {capacity} reached")]
    Full {
        /// The configured maximum number of live timers.
        capacity: usize,
    },
    /// The due tick would overflow `u64`.
    #[error("timer due tick overflows")]
    TooFar,
}
