//! Zonekeep's load bots and benchmark workloads: what `zonekeep bench` runs.
//!
//! This crate owns the **arena workload** of `docs/WORKLOADS.md` (its formulas, the zone
//! kind a host runs, the probe client's checks), the **bot runner** (many bots over the Rust
//! client, with join pacing, input schedules, RTT and byte accounting), the **report** model with
//! its exact [`report::merge`], and the readers of the server's cost (`/proc/<pid>` and
//! `/metrics`). It sits above `zonekeep-client` (bots are ordinary clients) and `zonekeep-core`
//! (the workload zone) and mints tickets with `zonekeep-ticket`, the host's own ticket code; it
//! does not link the server (the `zonekeep` binary registers the workload kinds on a host). The
//! **aim** workload ([`aim`]) shoots at the shooting gallery of `zonekeep-arena` in its own wire
//! format.
//! Nothing below it may depend on it.
//!
//! # Running it
//!
//! `zonekeep bench` (the binary's subcommand) maps its flags onto a [`BenchConfig`] and calls
//! [`run()`]; `zonekeep bench merge a.json b.json` calls [`merge()`]. `run-pair.sh` beside this crate
//! runs a host and the bots as two processes, as the arena workload's §6 prescribes:
//!
//! ```text
//! crates/zonekeep-bench/run-pair.sh arena-a -- --workload arena --scenario a --zone arena-a --bots 100
//! ZONEKEEP_TICKET_SECRET=… zonekeep bench --url ws://host:7350 --zones 'room-{i}' --zone-count 50 \
//!     --bots 500 --rate 20 --input '["$int:-1:1","$int:-1:1"]' --input-format bytes --kind dots
//! ```
//!
//! # Bots
//!
//! Bots that decode ([`DecodeMode`]) run `zonekeep_client::Connection` with an interpolating
//! replica; the others are light protocol clients that read only Delta headers, so one process
//! holds tens of thousands of connections. Every bot answers the clock (Ping/Pong), stamps inputs
//! with the newest tick, reconnects with its reconnect token, and honours the client NetSim.
#![deny(missing_docs)]
#![forbid(unsafe_code)]

pub mod aim;
pub mod arena;
pub mod bot;
pub mod config;
pub mod error;
pub mod http;
pub mod procfs;
pub mod progress;
pub mod prom;
pub mod report;
pub mod run;
pub mod server_cost;
pub mod stats;
pub mod summary;
pub mod template;
pub mod tickets;

pub use aim::{AimCounts, AimTarget};
pub use config::{
    Auth, BenchConfig, DecodeMode, ServerSource, StateAcks, Transport, Workload, ZoneTarget,
};
pub use error::BenchError;
pub use report::{merge, Report};
pub use run::run;
