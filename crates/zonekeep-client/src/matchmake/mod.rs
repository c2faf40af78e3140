//! Matchmaking (docs/MATCHMAKING.md): ask a matchmaker for a match, let it measure how far this
//! client is from each region, wait in its queue, and receive the zone and ticket of the match.
//!
//! [`matchmake`] runs the whole flow against a matchmaker's `/match` routes:
//!
//! 1. **create** a search with a ticket for `@match` (from the game's back end), the queue, this
//!    crate's protocol version and optionally the game's content version;
//! 2. **probe** every region the answer lists, all at once: the region's host measures the round
//!    trips itself, the client only answers its echoes (a region whose probe fails is skipped; when
//!    none succeeds the search is cancelled and the outcome is [`MatchError::NoProbeResult`]);
//! 3. **queue** the search;
//! 4. **wait**: a heartbeat every `heartbeat_secs` keeps the search alive while long polls follow
//!    its state (a network failure or a busy matchmaker is retried with backoff: the assignment is
//!    never lost, a later read answers it again);
//! 5. the first answer that carries an **assignment** ends the flow with a [`Matched`]: the zone's
//!    URL and a single-use ticket for it. [`matchmake_and_connect`] then opens the zone
//!    connection with the crate's [`connect`].
//!
//! Answers from the heartbeat and from the long poll arrive concurrently, so one can be older than
//! another, and an assignment can arrive twice. A [`SearchTracker`] sees every answer: its state
//! only ever moves forward, and it hands the assignment out exactly once, so the zone is connected
//! to once per match.
//!
//! A search ends without a match as [`MatchError::Ended`] when the matchmaker expires, fails or
//! cancels it, and as [`MatchError::Outdated`] when the game is below the matchmaker's version
//! floor (HTTP 426): show "update to keep playing", never retry. [`MatchError::retryable`] tells
//! the other outcomes apart: whether searching again may succeed.
//!
//! ```no_run
//! use zonekeep_client::{matchmake_and_connect, ConnectOptions, MatchOptions};
//!
//! # async fn run() -> Result<(), zonekeep_client::MatchError> {
//! let opts = MatchOptions::new("http://127.0.0.1:7350", "<ticket for @match>", "duel")
//!     .with_content_version("1.4.0");
//! match matchmake_and_connect(opts, ConnectOptions::new("")).await {
//!     Ok((matched, _conn, _welcome)) => println!("playing in {}", matched.assignment.zone),
//!     Err(e) if e.is_outdated() => println!("update to keep playing"),
//!     Err(e) if e.retryable() => println!("no match yet ({e}): search again"),
//!     Err(e) => return Err(e),
//! }
//! # Ok(())
//! # }
//! ```

mod backoff;
mod flow;
mod http;
mod options;
mod search;
#[cfg(test)]
mod tests;

use std::sync::OnceLock;

use zonekeep_protocol::Welcome;

pub use http::{Matchmaker, MAX_BODY, MAX_WAIT_MS};
pub use options::{MatchCancel, MatchOptions, StateCallback};
pub use search::{Assignment, MatchError, Probe, Search, SearchState, SearchTracker};

use crate::connection::{connect, ConnectOptions, Connection};

/// A match was found: where to play.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Matched {
    /// The answer that carried the assignment.
    pub search: Search,
    /// The zone and the ticket to join it with.
    pub assignment: Assignment,
}

/// Searches for a match (see the [module docs](self)) and returns the first assignment: the zone's
/// URL and a single-use ticket to connect with. Cancel it with [`MatchOptions::cancel`]; dropping
/// the future instead abandons the search, which the matchmaker expires after three heartbeat
/// periods.
pub async fn matchmake(opts: MatchOptions) -> Result<Matched, MatchError> {
    let mm = Matchmaker::new(&opts.matchmaker)?.with_timeout(opts.request_timeout);
    let created = OnceLock::new();
    let result = match opts.cancel.clone() {
        Some(cancel) => {
            tokio::select! {
                biased;
                () = cancel.cancelled() => Err(MatchError::Cancelled),
                r = flow::search(&mm, &opts, &created) => r,
            }
        }
        None => flow::search(&mm, &opts, &created).await,
    };
    if let (Err(e), Some((id, token))) = (&result, created.get()) {
        // A search the matchmaker did not end is deleted rather than left to lapse.
        if !matches!(e, MatchError::Ended { .. }) {
            if let Err(why) = mm.cancel(id, token).await {
                tracing::debug!(search = %id, "cancelling the search failed: {why}");
            }
        }
    }
    result
}

/// [`matchmake`], then joins the match's zone with [`connect`] at the
/// assignment's URL, with `connect_opts` and the assignment's ticket (whatever ticket
/// `connect_opts` holds is replaced). A failed join is [`MatchError::Connect`].
pub async fn matchmake_and_connect(
    opts: MatchOptions,
    connect_opts: ConnectOptions,
) -> Result<(Matched, Connection, Welcome), MatchError> {
    let matched = matchmake(opts).await?;
    let mut connect_opts = connect_opts;
    connect_opts.ticket = matched.assignment.ticket.clone();
    let (conn, welcome) = connect(&matched.assignment.url, connect_opts)
        .await
        .map_err(MatchError::Connect)?;
    Ok((matched, conn, welcome))
}
