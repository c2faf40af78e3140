//! The matchmaker's searches (see [`MatchStore`]): the rules both backends share.
//!
//! A **search** is one principal's request for a match in a queue (what other matchmakers call a
//! ticket; here a ticket is the signed join credential). It carries the probe challenges issued
//! for it, one per region, and the round trips the regions' hosts measured; its state follows
//! `probing → queued → proposed → allocated → assigned → connected`, or ends `cancelled`,
//! `expired` or `failed` (docs/MATCHMAKING.md draws every edge). A **match** is the searches
//! sharing a match id: proposed together, allocated one zone, assigned tickets for it.
//!
//! Every write is the same three steps on both backends: read the rows it concerns under a lock
//! (the row itself, or every queued search of a queue while matches are proposed), apply one of
//! the rules (`rules`), write the rows back. The rules are written there once; a backend only
//! reads and writes rows inside its own transaction, with the SQL text and the row conversions
//! both backends share (`rows`).
//!
//! This file holds the contract: the limits, the types a search is made of and [`MatchStore`].

mod rows;
mod rules;
#[cfg(test)]
mod tests;

pub(crate) use rows::{
    candidate, json_columns, seat_seen, RawSearch, COLUMNS, FORGET, LIVE_KEYS, QUEUED, SAVE, SETTLE,
};
pub(crate) use rules::{
    advance, answer_change, apply_lapse, assigned_with, assignments_by_id, beat, cancel, check_new,
    enqueue, fresh, lapse, requeue_all, take_into,
};

use std::collections::BTreeMap;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::error::Result;

/// Most probe challenges (regions) one search carries.
pub const MAX_PROBES: usize = 32;
/// Most searches a proposal batch or a candidate read takes.
pub const MAX_CANDIDATES: usize = 20_000;
/// Longest assignment (JSON text) a search keeps, in bytes.
pub const MAX_ASSIGNMENT_BYTES: usize = 8192;

pub use zonekeep_protocol::matchmaking::SearchState;

/// One region's probe challenge of a search.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Probe {
    /// The single-use challenge: the search id, a dot, and random text.
    pub challenge: String,
    /// The region whose hosts answer it.
    pub region: String,
    /// The host of the region the client calls.
    pub url: String,
    /// The round trip the region's host measured, once answered.
    #[serde(default)]
    pub rtt_ms: Option<u32>,
}

/// A search to create ([`MatchStore::create_search`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewSearch {
    /// Its id (unique; the prefix of its challenges).
    pub search_id: String,
    /// The queue it waits in.
    pub queue: String,
    /// Whose it is: the verified ticket's principal.
    pub principal: String,
    /// The principal's name, from the ticket.
    pub name: Option<String>,
    /// Hex SHA-256 of the search's bearer token (the token itself is never stored).
    pub token_hash: String,
    /// One challenge per region.
    pub probes: Vec<Probe>,
}

/// A search as stored.
#[derive(Debug, Clone, PartialEq)]
pub struct SearchRecord {
    /// Its id.
    pub search_id: String,
    /// Its queue.
    pub queue: String,
    /// Whose it is.
    pub principal: String,
    /// The principal's name.
    pub name: Option<String>,
    /// Hex SHA-256 of its bearer token.
    pub token_hash: String,
    /// Its state.
    pub state: SearchState,
    /// Why it ended (or went back to the queue), when it did.
    pub reason: Option<String>,
    /// Its challenges, answered or not.
    pub probes: Vec<Probe>,
    /// The round trip per region, from its answered probes, once queued.
    pub rtt_ms: BTreeMap<String, u32>,
    /// The region of its match, from `proposed` on.
    pub region: Option<String>,
    /// Its match, from `proposed` on.
    pub match_id: Option<String>,
    /// Its match's zone, from `allocated` on.
    pub zone_id: Option<String>,
    /// The id of the ticket key its assignment's ticket was minted with.
    pub kid: Option<String>,
    /// Where and how to join, from `assigned` on (a JSON object).
    pub assignment: Option<Value>,
    /// When it was created (ms since the Unix epoch, the database's clock).
    pub created_at_ms: u64,
    /// When it was queued.
    pub queued_at_ms: Option<u64>,
    /// Its last heartbeat (or its creation).
    pub heartbeat_at_ms: u64,
    /// Its last change of state.
    pub changed_at_ms: u64,
}

/// A queued search as the forming of matches sees it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Candidate {
    /// The search.
    pub search_id: String,
    /// Whose it is.
    pub principal: String,
    /// Round trip per region.
    pub rtt_ms: BTreeMap<String, u32>,
    /// When it was queued (ms since the Unix epoch).
    pub queued_at_ms: u64,
}

/// Searches to take into one match.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Proposal {
    /// The new match's id.
    pub match_id: String,
    /// The region it plays in.
    pub region: String,
    /// Its searches.
    pub search_ids: Vec<String>,
}

/// What answering a probe did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProbeAnswer {
    /// The round trip is recorded.
    Recorded,
    /// No such challenge.
    Unknown,
    /// It was answered already, or its search is past probing.
    Spent,
    /// It lapsed before it was answered.
    Lapsed,
    /// It belongs to another region (named).
    WrongRegion(String),
}

/// What a state change asked of one search did.
#[derive(Debug, Clone, PartialEq)]
pub enum SearchChange {
    /// Done: the search as it is now.
    Changed(SearchRecord),
    /// Refused: the search is not in a state that allows it (as it is).
    WrongState(SearchRecord),
    /// Queueing refused: none of its probes was answered.
    NoProbeResult(SearchRecord),
    /// No such search.
    NoSearch,
}

/// How long each waiting state may last ([`MatchStore::settle`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Lapses {
    /// A search not queued this long after it was created expires (`no_probe_result`).
    pub probing_ms: u64,
    /// A queued search without a heartbeat this long expires (`no_heartbeat`).
    pub heartbeat_ms: u64,
    /// A search proposed or allocated this long (its replica died mid-way) is queued again.
    pub stuck_ms: u64,
    /// An assigned search whose player has not arrived this long expires (`no_show`).
    pub no_show_ms: u64,
    /// A final search is forgotten this long after it ended.
    pub forget_ms: u64,
}

/// What [`MatchStore::settle`] did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Settled {
    /// Searches whose player arrived.
    pub connected: u64,
    /// Searches that lapsed.
    pub expired: u64,
    /// Searches stuck mid-match, queued again.
    pub requeued: u64,
    /// Final searches forgotten.
    pub forgotten: u64,
}

/// Where an assigned search's principal is, as the lobby's seats of its zone say.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SeatSeen {
    /// Reported present by the zone's host.
    Present,
    /// Still reserved.
    Reserved,
    /// No seat (lapsed and swept, or never made).
    Gone,
}

/// The matchmaker's searches, shared by every replica.
///
/// Every method that changes a search reads it under a lock and applies the rules of this module,
/// so two replicas acting on one search at once serialize, and a search is taken into at most one
/// match.
#[async_trait]
pub trait MatchStore: Send + Sync {
    /// Creates a search in state `probing`. An id already used is refused with
    /// [`StoreError::InvalidArgument`](crate::StoreError::InvalidArgument).
    async fn create_search(&self, search: &NewSearch) -> Result<SearchRecord>;

    /// The search `search_id`, if any.
    async fn search(&self, search_id: &str) -> Result<Option<SearchRecord>>;

    /// Records the round trip a host of `region` measured for `challenge`, once, within
    /// `window_ms` of the search's creation.
    async fn answer_probe(
        &self,
        challenge: &str,
        region: &str,
        rtt_ms: u32,
        window_ms: u64,
    ) -> Result<ProbeAnswer>;

    /// Queues a search whose probes were answered.
    async fn queue_search(&self, search_id: &str) -> Result<SearchChange>;

    /// Notes a heartbeat of a search.
    async fn heartbeat(&self, search_id: &str) -> Result<SearchChange>;

    /// Cancels a search that is not over yet.
    async fn cancel_search(&self, search_id: &str) -> Result<SearchChange>;

    /// The queued searches of `queue`, oldest first, at most `limit`.
    async fn queued(&self, queue: &str, limit: usize) -> Result<Vec<Candidate>>;

    /// Takes each proposal's searches into its match, in one transaction under the queue's
    /// lock; a proposal any of whose searches is no longer queued is skipped, and its searches
    /// stay as they are. Answers the match ids made.
    async fn propose(&self, queue: &str, proposals: &[Proposal]) -> Result<Vec<String>>;

    /// Moves match `match_id` from proposed to allocated with its zone, if every one of
    /// `search_ids` (the searches it was formed with) is still in it and proposed; otherwise
    /// queues again those that are (a partner left) and answers false.
    async fn allocate(&self, match_id: &str, zone_id: &str, search_ids: &[String]) -> Result<bool>;

    /// Moves match `match_id` from allocated to assigned, each search with its assignment
    /// (`(search_id, assignment)`, one for every search the match was formed with) and the ticket
    /// key id, if every one of them is still in it and allocated; otherwise queues again those
    /// that are and answers false.
    async fn assign(
        &self,
        match_id: &str,
        kid: &str,
        assignments: &[(String, Value)],
    ) -> Result<bool>;

    /// Queues again the searches of match `match_id` still proposed or allocated (the match
    /// could not be placed), noting `reason`.
    async fn requeue(&self, match_id: &str, reason: &str) -> Result<u64>;

    /// Advances searches by time and by the lobby's seats: assigned searches whose principal is
    /// present in the zone become connected; waiting states past their lapse expire or go back
    /// to the queue; final searches past `forget_ms` are deleted.
    async fn settle(&self, lapses: &Lapses) -> Result<Settled>;

    /// Ids of searches changed at or after `since_ms` (the database's clock), and the
    /// database's now.
    async fn changed_since(&self, since_ms: u64) -> Result<(Vec<String>, u64)>;

    /// Ticket key ids referenced by live matches (some search assigned and not yet arrived),
    /// with how many matches reference each.
    async fn live_keys(&self) -> Result<Vec<(String, u64)>>;
}

/// The search a challenge belongs to: the text before its last dot.
pub fn search_of(challenge: &str) -> Option<&str> {
    challenge.rsplit_once('.').map(|(s, _)| s)
}
