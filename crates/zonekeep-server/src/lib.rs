//! The Zonekeep host.
//!
//! `zonekeep-server` owns everything between the network and the zones: the
//! WebSocket endpoint (`GET /zones/{zone_id}`) with deliberate limits, tickets
//! and reconnect tokens, the simulation thread pool that runs zones (never on
//! the tokio runtime), the admin API, Prometheus metrics, NetSim and graceful
//! shutdown. It depends on `zonekeep-core` (zones) and `zonekeep-protocol`
//! (bytes); it must never be depended on by them, and it holds no game rules.
//!
//! A host with a store is a member of a fleet ([`fleet`]): it holds a lease in
//! the store's directory, runs the zones the directory gives it, and sends
//! clients of other hosts' zones there. The fleet's rules are
//! `zonekeep-fleet`'s; this crate drives them. Such a host also serves the
//! lobby (`/lobby`, behind a credential of its own): rooms and seats an
//! application's back end asks for, kept in the store for the whole fleet.
//!
//! ```no_run
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! use zonekeep_server::{examples::Dots, Host, ServerConfig};
//! let host = Host::builder()
//!     .config(ServerConfig { dev: true, ..ServerConfig::default() })
//!     .zone::<Dots>("dots")
//!     .build()?;
//! let listener = tokio::net::TcpListener::bind("127.0.0.1:7350").await?;
//! host.serve(listener, async { let _ = tokio::signal::ctrl_c().await; }).await?;
//! # Ok(()) }
//! ```
#![deny(missing_docs)]
#![forbid(unsafe_code)]

mod admin;
pub mod boards;
mod bus;
mod chat;
pub mod code;
pub mod config;
pub mod content;
mod dev;
pub mod dev_key;
mod drain;
pub mod error;
pub mod examples;
pub mod fleet;
mod halt;
mod host;
mod lobby;
pub mod matchmaker;
pub mod metrics;
pub mod net;
pub mod persist;
mod presence;
pub mod reconnect;
pub mod recording;
mod redis_link;
mod session;
pub mod sim;
mod transfer;
pub mod upgrade;
/// Tickets (minting, verification, keys, replay cache), re-exported from `zonekeep-ticket`.
pub use zonekeep_ticket as ticket;

pub use config::{Secret, ServerConfig};
pub use host::{valid_zone_id, Host, HostBuilder, HostError};
pub use sim::DisposeHook;
