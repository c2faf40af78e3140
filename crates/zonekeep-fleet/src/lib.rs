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

#![deny(missing_docs)]
#![forbid(unsafe_code)]

pub mod claim;
pub mod failover;
pub mod lease;
pub mod place;
mod timing;

pub use timing::Timing;
