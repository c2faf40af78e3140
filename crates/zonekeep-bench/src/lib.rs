//! Zonekeep's load bots and benchmark workloads: what `zonekeep bench` runs.
//!
//! This crate owns the **arena workload** of `shared/workloads/arena.md` (its formulas, the zone
//! kind a host runs, the probe client's checks), the **bot runner** (many bots over the Rust
//! client, with join pacing, input schedules, RTT and byte accounting), the **report** model with
//! its exact [`report::merge`], and the readers of the server's cost (`/proc/<pid>` and
//! `/metrics`). It sits above `zonekeep-client` (bots are ordinary clients) and `zonekeep-core`
//! (the workload zone); it depends on `zonekeep-server` only to mint tickets with the host's own
//! code. Nothing below it may depend on it.
#![deny(missing_docs)]
#![forbid(unsafe_code)]

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

pub use config::{Auth, BenchConfig, DecodeMode, ServerSource, Workload, ZoneTarget};
pub use error::BenchError;
pub use report::{merge, Report};
pub use run::run;
