//! The fleet protocol's rules, as pure functions and state machines: how long a host's lease
//! lasts, when a host counts as dead, who may claim a zone, where a new zone goes and which host
//! takes over a dead host's zone.
//!
//! This crate owns those decisions and nothing else. It does no I/O, reads no clock and depends on
//! no other Zonekeep crate: the store applies [`claim::decide`] inside its own transaction (so the
//! SQL backends and the deterministic simulation of the protocol obey one rule), and the host
//! drives [`lease`] with its monotonic clock. It must never depend on the store, the server, a
//! database driver or an async runtime.
//!
//! # The protocol in one paragraph
//! Hosts register in the store's directory and heartbeat about once per
//! [`Timing::heartbeat_every`], stamped by the database's clock. A host may act on its zones
//! (tick them, acknowledge inputs, write) only while its lease holds: for [`Timing::fence_after`]
//! after it *sent* the last heartbeat that landed, measured on its own monotonic clock. Another host
//! may take a zone only once the owner has had no landed heartbeat for [`Timing::dead_after`] by
//! the database's clock, and taking it raises the zone's epoch, which the store checks on every
//! durable write. Because `fence_after` is well below `dead_after`, the old owner has stopped
//! acting before anyone else may start, even when its process was paused or its queries hang.
//!
//! # The pieces
//! - [`lease`]: the host's lease as a state machine on its monotonic clock ([`lease::Lease`]).
//! - [`claim`]: the one rule deciding who may claim a zone ([`claim::decide`]).
//! - [`failover`]: which live host takes over an orphaned zone ([`failover::rendezvous`], a
//!   hash pinned forever so hosts of different versions agree).
//! - [`place`]: which host a new zone goes to ([`place::place`]).
//! - [`sim`]: a deterministic simulation of the whole protocol under faults.
//!
//! # What the store must enforce
//! Besides [`claim::decide`] and the epoch fence on writes, two directory rules keep the lease
//! sound, and the simulation's model database applies them: a heartbeat lands only for the
//! registered incarnation while it is still alive (a late heartbeat must never revive a host the
//! database already counts dead, whose zones others may own), and a restarted host registers a
//! new incarnation only once the old one has left or been silent for [`Timing::dead_after`].
//!
//! # The simulation
//! [`sim::run`] plays one seeded run: a model database applying [`claim::decide`] and the epoch
//! fence, 3–5 model hosts with drifting clocks and [`lease::Lease`]s, and faults chosen by the
//! seed (pauses, partitions, slow and hanging queries, crashes and restarts under the same id).
//! It checks, as it goes, that no two hosts ever act on one zone at once, that no write below a
//! zone's epoch is accepted, and that every zone is served again soon after faults stop; a
//! violation comes back with its seed and the trace of the events before it. The crate's
//! `tests/sim.rs` runs 300 seeds on every `cargo test`, and shows each check fail when the
//! protocol is broken on purpose ([`sim::Breakage`]). For many seeds:
//!
//! ```text
//! cargo run --release -p zonekeep-fleet --example lease_sim -- --seeds 10000 [--start S]
//! ```
//!
//! prints how many seeds ran, the violations (each with the seed that reproduces it: rerun it
//! with `--start SEED --seeds 1`) and totals of takeovers, pauses, refused stale writes and the
//! rest, and the time taken.

#![deny(missing_docs)]
#![forbid(unsafe_code)]

pub mod claim;
pub mod failover;
pub mod lease;
pub mod place;
pub mod sim;
mod timing;

pub use timing::Timing;
