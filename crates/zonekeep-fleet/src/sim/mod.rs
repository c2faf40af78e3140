//! A deterministic simulation of the lease and fencing protocol, to find the interleavings of
//! pauses, partitions, slow queries and crashes under which two hosts would act on one zone, a
//! stale write would be accepted, or a zone would stay orphaned.
//!
//! One seed chooses everything: 3–5 hosts (by default), each machine's clock offset and drift,
//! the faults and every message's latency. The run is event-driven in simulated real time (ms),
//! on one thread, with no wall clock, so a seed reproduces a run exactly. The model:
//!
//! - **The database** has its own clock, a directory of hosts (incarnation, last heartbeat, left)
//!   and a zone table (owner, epoch). It decides each claim with [`claim::decide`](crate::claim::decide)
//!   and [`Timing::is_alive`](crate::Timing::is_alive), refuses writes whose epoch is below the
//!   zone's, refuses heartbeats from an incarnation that is already dead, and lets a restarted
//!   host register only once its old incarnation has been silent for `dead_after` (or left).
//! - **Hosts** run the protocol with a [`Lease`](crate::lease::Lease) on a drifting monotonic
//!   clock. Each heartbeat round a host heartbeats and reads the directory, then claims the zones
//!   assigned to it that it is not running, and the orphaned zones (owner dead or none) whose
//!   [`rendezvous`](crate::failover::rendezvous) winner among live hosts it is. Every tick it
//!   writes each owned zone at its epoch while its lease holds. Whenever it wakes up it first
//!   checks its lease and stops all its zones if it lapsed; a refused write stops that zone.
//! - **Faults**, inside a fault window: pauses (SIGSTOP) of up to 30 s, partitions from the
//!   database (queries hang, then fail or land late), slow queries (up to 3 s), queries that hang
//!   5–30 s, lost answers, crashes and graceful stops followed by restarts under the same host
//!   id, and clock drift (±2 % by default).
//!
//! The invariants, checked as the run goes (see [`ViolationKind`]): (a) never two hosts acting
//! on one zone at once; (b) every accepted write carries the zone's epoch and comes from the
//! host granted it; (c) after faults stop, every zone is served within `dead_after` plus a few
//! heartbeats. The first violation ends the run with the seed and the trace of the last events.
//!
//! [`Breakage`] breaks the protocol on purpose, to show the checker catches it.

mod db;
mod faults;
mod host;
mod invariants;
mod rng;
mod trace;
mod world;

use std::time::Duration;

pub use invariants::{Violation, ViolationKind};

use crate::Timing;

/// A deliberate protocol bug, for showing that the invariant checks can fail.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Breakage {
    /// The protocol as specified.
    #[default]
    None,
    /// Hosts act and claim whatever their lease says, and never stop zones when it lapses.
    HostsIgnoreLease,
    /// The database accepts writes whatever their epoch.
    DatabaseIgnoresEpoch,
    /// Hosts never reclaim a zone the directory still assigns to them (after their lease lapsed
    /// or a claim's answer was lost), so such zones stay orphaned.
    HostsNeverReload,
}

/// What to simulate. [`Default`] is the product's timing with faults on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SimConfig {
    /// The protocol's timing. Not checked with [`Timing::is_safe`]: an unsafe timing is a way to
    /// watch the invariants fail.
    pub timing: Timing,
    /// The fewest hosts a seed may choose (at least 1).
    pub min_hosts: usize,
    /// The most hosts a seed may choose.
    pub max_hosts: usize,
    /// How many zones the fleet runs.
    pub zones: usize,
    /// How often a host acts on (writes) each zone it owns.
    pub tick_every: Duration,
    /// How long faults are injected, from the start of the run. The run ends `dead_after` and
    /// five heartbeats after the last fault, with the liveness check.
    pub fault_window: Duration,
    /// The largest clock drift a host may have, in parts per million (20,000 = 2 %).
    pub max_drift_ppm: u32,
    /// A deliberate bug, or [`Breakage::None`].
    pub breakage: Breakage,
    /// How many of the last events a violation reports (writes get a quarter more).
    pub trace_len: usize,
}

impl Default for SimConfig {
    fn default() -> Self {
        SimConfig {
            timing: Timing::default(),
            min_hosts: 3,
            max_hosts: 5,
            zones: 8,
            tick_every: Duration::from_millis(50),
            fault_window: Duration::from_secs(45),
            max_drift_ppm: 20_000,
            breakage: Breakage::None,
            trace_len: 160,
        }
    }
}

/// What happened in one run that kept every invariant.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SimReport {
    /// The run's seed.
    pub seed: u64,
    /// How many hosts the seed chose.
    pub hosts: usize,
    /// Simulated time the run covered, in ms.
    pub simulated_ms: u64,
    /// Events processed.
    pub events: u64,
    /// Claims that took a zone from another host (which was dead or had left).
    pub takeovers: u64,
    /// Claims by the directory's owner of a zone it was not running (after its lease lapsed, a
    /// lost answer, or a restart).
    pub reloads: u64,
    /// Claims of zones nobody owned yet.
    pub first_claims: u64,
    /// Claims the database turned down (owner alive, lease lost, claimant dead).
    pub claims_refused: u64,
    /// Writes the database accepted.
    pub writes_accepted: u64,
    /// Writes the database refused because their epoch was stale.
    pub stale_writes_refused: u64,
    /// Zones a host stopped after learning its write was refused.
    pub fenced_drops: u64,
    /// Times a host stopped its zones because its lease lapsed.
    pub lease_lapses: u64,
    /// Heartbeats (or registrations) refused because the incarnation was dead: the host started
    /// over under a new one.
    pub expulsions: u64,
    /// Registrations told to wait for the old incarnation to go silent.
    pub registrations_delayed: u64,
    /// Process pauses.
    pub pauses: u64,
    /// Partitions between a host and the database.
    pub partitions: u64,
    /// Crashes.
    pub crashes: u64,
    /// Graceful stops (leave the directory, then exit).
    pub leaves: u64,
    /// Restarts after a crash or stop.
    pub restarts: u64,
    /// Messages delayed by up to 3 s.
    pub slow_queries: u64,
    /// Messages that hung for 5–30 s, then arrived.
    pub hung_queries: u64,
    /// Messages lost (the sender saw the query fail).
    pub lost_queries: u64,
}

/// Runs the simulation for `seed`. `Ok` with what happened when every invariant held, or the
/// first [`Violation`].
pub fn run(seed: u64, config: &SimConfig) -> Result<SimReport, Violation> {
    world::World::new(seed, config).run()
}
