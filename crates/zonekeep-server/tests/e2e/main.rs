//! End-to-end tests: a real host on 127.0.0.1:0 and real WebSocket clients.
//! One test binary with a module per topic (one link, shared helpers).
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

mod admin;
mod calls;
mod character_moves;
mod character_moves_fleet;
mod characters;
mod common;
mod content;
mod hardening;
mod join;
mod lasting;
mod limits;
mod metrics;
mod persist;
mod refusals;
mod resume;
mod sync;
mod tally;
mod webtransport;
mod wire_rules;
