//! Helpers for tests that run the real `zonekeep serve` process with
//! persistence: start/kill/stop it, drive `ledger-test` clients over
//! WebSocket, and read the store behind it (SQLite file or PostgreSQL).
//!
//! The host process and the requests made of it are in `server`, the tickets it accepts in
//! `tickets`, WebSocket clients in `client`, the store and the ledger behind a host in `store`,
//! and server-sent event streams in `sse`, all re-exported here; the public modules serve a few
//! tests each, which name them in their paths.
#![allow(clippy::unwrap_used, clippy::expect_used, dead_code, unused_imports)]

mod client;
pub mod courier;
pub mod doors;
pub mod proxy;
pub mod push;
pub mod quic_prober;
pub mod raw_wt;
pub mod redis;
pub mod relay;
pub mod replay_cli;
pub mod sdk;
mod server;
mod service;
mod sse;
mod store;
mod tickets;
pub mod view;

pub use client::{hello, hello_at, ClientLog, LedgerClient, TOPIC_SETTLED, TOPIC_STATE};
pub use server::{
    bearer_request, host_id_for, listen_addr, output_off_runtime, send_signal, serve_piped,
    zone_entry, Reap, Server, ADMIN_TOKEN, LOBBY_TOKEN,
};
pub use service::service_url;
pub use sse::{get_streamed, SseEvent, Streamed};
pub use store::{check_ledger, in_flight, StoreSpec};
pub use tickets::{sign, ticket, ticket_for, unique_run, SECRET};
