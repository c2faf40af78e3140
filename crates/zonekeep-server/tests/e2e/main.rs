//! End-to-end tests: a real host on 127.0.0.1:0 and real WebSocket clients.
//! One test binary with a module per topic (one link, shared helpers).
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

/// Two tests of the async test body `$body(backend)`: `$sqlite` on a SQLite file, `$postgres` on
/// the test PostgreSQL server (reported as skipped without one, a failure under `CI=true`).
macro_rules! on_both_backends {
    ($body:ident: $sqlite:ident, $postgres:ident) => {
        #[tokio::test]
        async fn $sqlite() {
            $body(crate::lasting::Backend::Sqlite).await;
        }

        #[tokio::test]
        async fn $postgres() {
            if let Some(backend) = crate::lasting::Backend::postgres(stringify!($postgres)).await {
                $body(backend).await;
            }
        }
    };
}

mod admin;
mod arriving;
mod boards;
mod calls;
mod character_moves;
mod character_moves_fleet;
mod characters;
mod chat;
mod common;
mod console_api;
mod content;
mod diagnostics;
mod hardening;
mod io_threads;
mod join;
mod lasting;
mod limits;
mod lobby;
mod matchmaking;
mod metrics;
mod persist;
mod presence;
mod refusals;
mod resume;
mod sync;
mod tally;
mod webtransport;
mod wire_rules;
