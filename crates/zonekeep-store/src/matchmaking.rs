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
//! the rules below, write the rows back. The rules are written here once; a backend only reads
//! and writes rows inside its own transaction.

use std::collections::BTreeMap;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::error::{Result, StoreError};
use crate::validate::check_id;

/// Most probe challenges (regions) one search carries.
pub const MAX_PROBES: usize = 32;
/// Most searches a proposal batch or a candidate read takes.
pub const MAX_CANDIDATES: usize = 20_000;
/// Longest assignment (JSON text) a search keeps, in bytes.
pub const MAX_ASSIGNMENT_BYTES: usize = 8192;

pub use zonekeep_protocol::matchmaking::SearchState;

/// A stored state, parsed.
pub(crate) fn state_from_db(s: &str) -> Result<SearchState> {
    SearchState::parse(s).ok_or_else(|| StoreError::Corrupt(format!("unknown search state {s:?}")))
}

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

/// Refuses a malformed new search.
pub(crate) fn check_new(s: &NewSearch) -> Result<()> {
    check_id("search id", &s.search_id)?;
    check_id("queue", &s.queue)?;
    check_id("principal", &s.principal)?;
    if s.token_hash.len() != 64 || !s.token_hash.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(StoreError::InvalidArgument(
            "a search's token hash is 64 hex digits".into(),
        ));
    }
    if s.probes.len() > MAX_PROBES {
        return Err(StoreError::InvalidArgument(format!(
            "a search carries at most {MAX_PROBES} probes"
        )));
    }
    for p in &s.probes {
        if search_of(&p.challenge) != Some(s.search_id.as_str()) {
            return Err(StoreError::InvalidArgument(
                "a challenge starts with its search id and a dot".into(),
            ));
        }
        check_id("region", &p.region)?;
    }
    Ok(())
}

/// The search a challenge belongs to: the text before its last dot.
pub fn search_of(challenge: &str) -> Option<&str> {
    challenge.rsplit_once('.').map(|(s, _)| s)
}

/// The rule for a probe's answer: records `rtt_ms` on `rec` when the challenge is its own,
/// unanswered, of `region`, and within `window_ms` of the search's creation.
pub(crate) fn answer(
    rec: &mut SearchRecord,
    challenge: &str,
    region: &str,
    rtt_ms: u32,
    now: u64,
    window_ms: u64,
) -> ProbeAnswer {
    let state = rec.state;
    let created = rec.created_at_ms;
    let Some(p) = rec.probes.iter_mut().find(|p| p.challenge == challenge) else {
        return ProbeAnswer::Unknown;
    };
    if p.region != region {
        return ProbeAnswer::WrongRegion(p.region.clone());
    }
    if p.rtt_ms.is_some() || state != SearchState::Probing {
        return ProbeAnswer::Spent;
    }
    if now.saturating_sub(created) > window_ms {
        return ProbeAnswer::Lapsed;
    }
    p.rtt_ms = Some(rtt_ms);
    ProbeAnswer::Recorded
}

/// [`answer`] as a change of the search: saved only when the round trip was recorded.
pub(crate) fn answer_change(
    mut rec: SearchRecord,
    challenge: &str,
    region: &str,
    rtt_ms: u32,
    now: u64,
    window_ms: u64,
) -> (ProbeAnswer, SearchChange) {
    let outcome = answer(&mut rec, challenge, region, rtt_ms, now, window_ms);
    let change = if outcome == ProbeAnswer::Recorded {
        SearchChange::Changed(rec)
    } else {
        SearchChange::WrongState(rec)
    };
    (outcome, change)
}

/// The rule for queueing: a probing search with an answered probe is queued with its round
/// trips.
pub(crate) fn enqueue(mut rec: SearchRecord, now: u64) -> SearchChange {
    if rec.state != SearchState::Probing {
        return SearchChange::WrongState(rec);
    }
    let rtts: BTreeMap<String, u32> = rec
        .probes
        .iter()
        .filter_map(|p| p.rtt_ms.map(|r| (p.region.clone(), r)))
        .collect();
    if rtts.is_empty() {
        return SearchChange::NoProbeResult(rec);
    }
    rec.rtt_ms = rtts;
    rec.state = SearchState::Queued;
    rec.queued_at_ms = Some(now);
    rec.heartbeat_at_ms = now;
    rec.changed_at_ms = now;
    SearchChange::Changed(rec)
}

/// The rule for a heartbeat: any search not over notes it.
pub(crate) fn beat(mut rec: SearchRecord, now: u64) -> SearchChange {
    if rec.state.is_final() {
        return SearchChange::WrongState(rec);
    }
    rec.heartbeat_at_ms = now;
    SearchChange::Changed(rec)
}

/// The rule for a cancel: any search not over is cancelled (a match it was in loses it; its
/// partners are queued again when the match is next allocated or assigned).
pub(crate) fn cancel(mut rec: SearchRecord, now: u64) -> SearchChange {
    if rec.state.is_final() {
        return SearchChange::WrongState(rec);
    }
    set_state(&mut rec, SearchState::Cancelled, Some("cancelled"), now);
    SearchChange::Changed(rec)
}

/// Sets a search's state, its reason, and when it changed.
pub(crate) fn set_state(
    rec: &mut SearchRecord,
    state: SearchState,
    reason: Option<&str>,
    now: u64,
) {
    rec.state = state;
    rec.reason = reason.map(str::to_owned);
    rec.changed_at_ms = now;
}

/// Back to the queue (keeping its place: `queued_at_ms` is unchanged), out of its match.
pub(crate) fn back_to_queue(rec: &mut SearchRecord, reason: &str, now: u64) {
    set_state(rec, SearchState::Queued, Some(reason), now);
    rec.match_id = None;
    rec.region = None;
    rec.zone_id = None;
    rec.heartbeat_at_ms = now;
}

/// The rule for a proposal over its searches as read under the queue's lock: true (and each
/// moved to `proposed`) when every one of them is still queued in `queue`.
pub(crate) fn take_into(members: &mut [SearchRecord], queue: &str, p: &Proposal, now: u64) -> bool {
    if members.len() != p.search_ids.len()
        || members
            .iter()
            .any(|m| m.state != SearchState::Queued || m.queue != queue)
    {
        return false;
    }
    for m in members.iter_mut() {
        set_state(m, SearchState::Proposed, None, now);
        m.match_id = Some(p.match_id.clone());
        m.region = Some(p.region.clone());
    }
    true
}

/// The rule for advancing a match's searches from `from` to the next state: all or none. When
/// one of the `expected` searches left the match or `from` (cancelled, lapsed, or queued again),
/// those still in it are queued again and false is answered.
pub(crate) fn advance(
    members: &mut [SearchRecord],
    expected: &[String],
    from: SearchState,
    apply: impl Fn(&mut SearchRecord),
    now: u64,
) -> bool {
    // Every search the match was formed with must still be in it: one that left (sent back to
    // the queue meanwhile) is simply not among `members`, and the match must not go on without it.
    let whole = members.len() == expected.len()
        && expected
            .iter()
            .all(|id| members.iter().any(|m| m.search_id == *id));
    if whole && !members.is_empty() && members.iter().all(|m| m.state == from) {
        for m in members.iter_mut() {
            apply(m);
            m.changed_at_ms = now;
        }
        return true;
    }
    for m in members.iter_mut().filter(|m| m.state == from) {
        back_to_queue(m, "partner_left", now);
    }
    false
}

/// The rule of [`MatchStore::requeue`]: every search of the match still proposed or allocated
/// goes back to the queue; answers how many did.
pub(crate) fn requeue_all(members: &mut [SearchRecord], reason: &str, now: u64) -> u64 {
    let mut n = 0;
    for m in members
        .iter_mut()
        .filter(|m| matches!(m.state, SearchState::Proposed | SearchState::Allocated))
    {
        back_to_queue(m, reason, now);
        n += 1;
    }
    n
}

/// Refuses an assignment too large to keep.
pub(crate) fn check_assignment(a: &Value) -> Result<()> {
    if !a.is_object() || a.to_string().len() > MAX_ASSIGNMENT_BYTES {
        return Err(StoreError::InvalidArgument(format!(
            "an assignment is a JSON object of at most {MAX_ASSIGNMENT_BYTES} bytes"
        )));
    }
    Ok(())
}

/// The rule of [`MatchStore::settle`] for one search that is not over: its new state and
/// reason, if it changes. `seat` is what the lobby says of an assigned search's principal.
pub(crate) fn lapse(
    rec: &SearchRecord,
    seat: SeatSeen,
    lapses: &Lapses,
    now: u64,
) -> Option<(SearchState, Option<&'static str>)> {
    let since = |t: u64| now.saturating_sub(t);
    match rec.state {
        SearchState::Probing if since(rec.created_at_ms) >= lapses.probing_ms => {
            Some((SearchState::Expired, Some("no_probe_result")))
        }
        SearchState::Queued if since(rec.heartbeat_at_ms) >= lapses.heartbeat_ms => {
            Some((SearchState::Expired, Some("no_heartbeat")))
        }
        SearchState::Proposed | SearchState::Allocated
            if since(rec.changed_at_ms) >= lapses.stuck_ms =>
        {
            Some((SearchState::Queued, Some("stuck")))
        }
        SearchState::Assigned => match seat {
            SeatSeen::Present => Some((SearchState::Connected, None)),
            SeatSeen::Reserved | SeatSeen::Gone
                if since(rec.changed_at_ms) >= lapses.no_show_ms =>
            {
                Some((SearchState::Expired, Some("no_show")))
            }
            _ => None,
        },
        _ => None,
    }
}

/// Applies [`lapse`]'s answer to `rec`.
pub(crate) fn apply_lapse(
    rec: &mut SearchRecord,
    to: (SearchState, Option<&'static str>),
    now: u64,
) {
    match to {
        (SearchState::Queued, reason) => back_to_queue(rec, reason.unwrap_or("stuck"), now),
        (state, reason) => set_state(rec, state, reason, now),
    }
}

/// The columns a search is read from, in this order (both backends): search_id, queue,
/// principal, name, token_hash, state, reason, probes (JSON), rtts (JSON), region, match_id,
/// zone_id, kid, assignment (JSON or NULL), created_ms, queued_ms, heartbeat_ms, changed_ms.
pub(crate) const COLUMNS: &str = "search_id, queue, principal, name, token_hash, state, reason, \
    probes, rtts, region, match_id, zone_id, kid, assignment, created_ms, queued_ms, \
    heartbeat_ms, changed_ms";

/// Writes every changeable column of a search `$1` (both backends; `$2..$13` as named below).
pub(crate) const SAVE: &str = "UPDATE match_searches SET state = $2, reason = $3, probes = $4, \
    rtts = $5, region = $6, match_id = $7, zone_id = $8, kid = $9, assignment = $10, \
    queued_ms = $11, heartbeat_ms = $12, changed_ms = $13 WHERE search_id = $1";

/// Searches [`MatchStore::settle`] looks at: every one whose lapse may have come, with the lobby
/// seat of its principal in its zone (`present`, `reserved`, or NULL) as a last column. `$1` is
/// now, `$2..$4` the probing, heartbeat and stuck lapses.
pub(crate) const SETTLE: &str = "SELECT search_id, queue, principal, name, token_hash, state, \
    reason, probes, rtts, region, match_id, zone_id, kid, assignment, created_ms, queued_ms, \
    heartbeat_ms, changed_ms, \
    (SELECT CASE WHEN s.expires_ms IS NULL THEN 'present' ELSE 'reserved' END \
     FROM lobby_seats s WHERE s.zone_id = m.zone_id AND s.principal = m.principal) AS seat \
    FROM match_searches m \
    WHERE (m.state = 'probing' AND m.created_ms <= CAST($1 AS BIGINT) - CAST($2 AS BIGINT)) \
       OR (m.state = 'queued' AND m.heartbeat_ms <= CAST($1 AS BIGINT) - CAST($3 AS BIGINT)) \
       OR (m.state IN ('proposed', 'allocated') AND m.changed_ms <= CAST($1 AS BIGINT) - CAST($4 AS BIGINT)) \
       OR m.state = 'assigned' \
    ORDER BY m.changed_ms LIMIT 5000";

/// Deletes final searches that ended before `$1` (both backends).
pub(crate) const FORGET: &str = "DELETE FROM match_searches \
    WHERE state IN ('connected', 'cancelled', 'expired', 'failed') AND changed_ms <= $1";

/// Queued searches of queue `$1`, oldest first, at most `$2`: search_id, principal, rtts,
/// queued_ms.
pub(crate) const QUEUED: &str = "SELECT search_id, principal, rtts, queued_ms \
    FROM match_searches WHERE queue = $1 AND state = 'queued' \
    ORDER BY queued_ms, search_id LIMIT $2";

/// Ticket key ids of live matches, with their match counts.
pub(crate) const LIVE_KEYS: &str = "SELECT kid, count(DISTINCT match_id) FROM match_searches \
    WHERE state = 'assigned' AND kid IS NOT NULL GROUP BY kid ORDER BY kid";

/// A candidate from the columns of [`QUEUED`].
pub(crate) fn candidate(
    search_id: String,
    principal: String,
    rtts: &str,
    queued_ms: Option<i64>,
) -> Result<Candidate> {
    Ok(Candidate {
        rtt_ms: serde_json::from_str(rtts)
            .map_err(|e| StoreError::Corrupt(format!("search {search_id:?} round trips: {e}")))?,
        queued_at_ms: queued_ms.and_then(|v| u64::try_from(v).ok()).unwrap_or(0),
        search_id,
        principal,
    })
}

/// The assignments of `pairs` by search id, each checked.
pub(crate) fn assignments_by_id(
    pairs: &[(String, Value)],
) -> Result<std::collections::HashMap<String, Value>> {
    for (_, a) in pairs {
        check_assignment(a)?;
    }
    Ok(pairs.iter().cloned().collect())
}

/// The rule of [`MatchStore::assign`]'s change to one search.
pub(crate) fn assigned_with<'a>(
    kid: &'a str,
    by_id: &'a std::collections::HashMap<String, Value>,
) -> impl Fn(&mut SearchRecord) + 'a {
    move |m| {
        m.state = SearchState::Assigned;
        m.reason = None;
        m.kid = Some(kid.to_owned());
        m.assignment = by_id.get(&m.search_id).cloned();
    }
}

/// Parses the lobby seat column of [`SETTLE`].
pub(crate) fn seat_seen(s: Option<&str>) -> SeatSeen {
    match s {
        Some("present") => SeatSeen::Present,
        Some(_) => SeatSeen::Reserved,
        None => SeatSeen::Gone,
    }
}

/// Stored JSON text of a search's probes, round trips and assignment.
pub(crate) struct JsonColumns {
    pub probes: String,
    pub rtts: String,
    pub assignment: Option<String>,
}

/// A search's JSON columns as text.
pub(crate) fn json_columns(rec: &SearchRecord) -> Result<JsonColumns> {
    let enc = |v: Result<String, serde_json::Error>| {
        v.map_err(|e| StoreError::InvalidArgument(format!("search JSON: {e}")))
    };
    Ok(JsonColumns {
        probes: enc(serde_json::to_string(&rec.probes))?,
        rtts: enc(serde_json::to_string(&rec.rtt_ms))?,
        assignment: rec.assignment.as_ref().map(Value::to_string),
    })
}

/// The raw text and numbers of a search row, as both backends read them.
pub(crate) struct RawSearch {
    pub search_id: String,
    pub queue: String,
    pub principal: String,
    pub name: Option<String>,
    pub token_hash: String,
    pub state: String,
    pub reason: Option<String>,
    pub probes: String,
    pub rtts: String,
    pub region: Option<String>,
    pub match_id: Option<String>,
    pub zone_id: Option<String>,
    pub kid: Option<String>,
    pub assignment: Option<String>,
    pub created_ms: i64,
    pub queued_ms: Option<i64>,
    pub heartbeat_ms: i64,
    pub changed_ms: i64,
}

impl RawSearch {
    /// The record, its JSON parsed.
    pub(crate) fn parse(self) -> Result<SearchRecord> {
        let id = self.search_id.clone();
        let corrupt = |what: &str, e: serde_json::Error| {
            StoreError::Corrupt(format!("search {id:?} {what}: {e}"))
        };
        let ms = |v: i64| u64::try_from(v).unwrap_or(0);
        Ok(SearchRecord {
            state: state_from_db(&self.state)?,
            probes: serde_json::from_str(&self.probes).map_err(|e| corrupt("probes", e))?,
            rtt_ms: serde_json::from_str(&self.rtts).map_err(|e| corrupt("round trips", e))?,
            assignment: match &self.assignment {
                Some(a) => Some(serde_json::from_str(a).map_err(|e| corrupt("assignment", e))?),
                None => None,
            },
            search_id: self.search_id,
            queue: self.queue,
            principal: self.principal,
            name: self.name,
            token_hash: self.token_hash,
            reason: self.reason,
            region: self.region,
            match_id: self.match_id,
            zone_id: self.zone_id,
            kid: self.kid,
            created_at_ms: ms(self.created_ms),
            queued_at_ms: self.queued_ms.map(ms),
            heartbeat_at_ms: ms(self.heartbeat_ms),
            changed_at_ms: ms(self.changed_ms),
        })
    }
}

/// A fresh record for `s`, created at `now`.
pub(crate) fn fresh(s: &NewSearch, now: u64) -> SearchRecord {
    SearchRecord {
        search_id: s.search_id.clone(),
        queue: s.queue.clone(),
        principal: s.principal.clone(),
        name: s.name.clone(),
        token_hash: s.token_hash.clone(),
        state: SearchState::Probing,
        reason: None,
        probes: s
            .probes
            .iter()
            .map(|p| Probe {
                rtt_ms: None,
                ..p.clone()
            })
            .collect(),
        rtt_ms: BTreeMap::new(),
        region: None,
        match_id: None,
        zone_id: None,
        kid: None,
        assignment: None,
        created_at_ms: now,
        queued_at_ms: None,
        heartbeat_at_ms: now,
        changed_at_ms: now,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(state: SearchState) -> SearchRecord {
        let mut r = fresh(
            &NewSearch {
                search_id: "s1".into(),
                queue: "duel".into(),
                principal: "ada".into(),
                name: None,
                token_hash: "0".repeat(64),
                probes: vec![
                    Probe {
                        challenge: "s1.a".into(),
                        region: "eu".into(),
                        url: "http://eu".into(),
                        rtt_ms: None,
                    },
                    Probe {
                        challenge: "s1.b".into(),
                        region: "us".into(),
                        url: "http://us".into(),
                        rtt_ms: None,
                    },
                ],
            },
            1_000,
        );
        r.state = state;
        r
    }

    #[test]
    fn a_probe_is_answered_once_by_its_own_region_within_its_window() {
        let mut r = rec(SearchState::Probing);
        assert_eq!(
            answer(&mut r, "s1.x", "eu", 5, 1_100, 30_000),
            ProbeAnswer::Unknown
        );
        assert_eq!(
            answer(&mut r, "s1.a", "us", 5, 1_100, 30_000),
            ProbeAnswer::WrongRegion("eu".into())
        );
        assert_eq!(
            answer(&mut r, "s1.a", "eu", 5, 1_100, 30_000),
            ProbeAnswer::Recorded
        );
        assert_eq!(
            answer(&mut r, "s1.a", "eu", 1, 1_200, 30_000),
            ProbeAnswer::Spent
        );
        assert_eq!(r.probes[0].rtt_ms, Some(5));
        assert_eq!(
            answer(&mut r, "s1.b", "us", 9, 40_000, 30_000),
            ProbeAnswer::Lapsed
        );
    }

    #[test]
    fn queueing_needs_an_answered_probe_and_keeps_only_answered_regions() {
        let r = rec(SearchState::Probing);
        assert!(matches!(
            enqueue(r.clone(), 2_000),
            SearchChange::NoProbeResult(_)
        ));
        let mut r = r;
        r.probes[1].rtt_ms = Some(40);
        let SearchChange::Changed(q) = enqueue(r, 2_000) else {
            panic!("not queued")
        };
        assert_eq!(q.state, SearchState::Queued);
        assert_eq!(q.rtt_ms, BTreeMap::from([("us".to_owned(), 40)]));
        assert_eq!(q.queued_at_ms, Some(2_000));
        assert!(matches!(enqueue(q, 3_000), SearchChange::WrongState(_)));
    }

    #[test]
    fn a_match_advances_all_or_none_and_partners_of_a_leaver_queue_again() {
        let mut members = vec![rec(SearchState::Proposed), rec(SearchState::Proposed)];
        members[1].search_id = "s2".into();
        members[0].queued_at_ms = Some(5);
        let ids = ["s1".to_owned(), "s2".to_owned()];
        // Without one of the searches it was formed with, a match does not advance.
        let mut alone = vec![members[0].clone()];
        assert!(!advance(
            &mut alone,
            &ids,
            SearchState::Proposed,
            |m| m.state = SearchState::Allocated,
            9
        ));
        assert_eq!(alone[0].state, SearchState::Queued);
        assert!(advance(
            &mut members,
            &ids,
            SearchState::Proposed,
            |m| m.state = SearchState::Allocated,
            9
        ));
        assert!(members.iter().all(|m| m.state == SearchState::Allocated));
        members[1].state = SearchState::Cancelled;
        assert!(!advance(
            &mut members,
            &ids,
            SearchState::Allocated,
            |m| m.state = SearchState::Assigned,
            10
        ));
        assert_eq!(members[0].state, SearchState::Queued);
        assert_eq!(members[0].reason.as_deref(), Some("partner_left"));
        assert_eq!(members[0].match_id, None);
        assert_eq!(
            members[0].queued_at_ms,
            Some(5),
            "keeps its place in the queue"
        );
        assert_eq!(members[1].state, SearchState::Cancelled);
    }

    #[test]
    fn a_proposal_takes_only_searches_still_queued_in_its_queue() {
        let p = Proposal {
            match_id: "m1".into(),
            region: "eu".into(),
            search_ids: vec!["s1".into(), "s2".into()],
        };
        let mut members = vec![rec(SearchState::Queued), rec(SearchState::Cancelled)];
        assert!(!take_into(&mut members, "duel", &p, 5));
        assert_eq!(members[0].state, SearchState::Queued);
        let mut members = vec![rec(SearchState::Queued), rec(SearchState::Queued)];
        assert!(!take_into(&mut members, "other", &p, 5));
        assert!(take_into(&mut members, "duel", &p, 5));
        assert!(members
            .iter()
            .all(|m| m.state == SearchState::Proposed && m.match_id.as_deref() == Some("m1")));
        let mut short = vec![rec(SearchState::Queued)];
        assert!(
            !take_into(&mut short, "duel", &p, 5),
            "a search that vanished"
        );
    }

    #[test]
    fn lapses_expire_waiting_searches_and_connect_arrived_ones() {
        let l = Lapses {
            probing_ms: 60_000,
            heartbeat_ms: 30_000,
            stuck_ms: 15_000,
            no_show_ms: 60_000,
            forget_ms: 3_600_000,
        };
        let probing = rec(SearchState::Probing);
        assert_eq!(lapse(&probing, SeatSeen::Gone, &l, 30_000), None);
        assert_eq!(
            lapse(&probing, SeatSeen::Gone, &l, 70_000),
            Some((SearchState::Expired, Some("no_probe_result")))
        );
        let queued = rec(SearchState::Queued);
        assert_eq!(
            lapse(&queued, SeatSeen::Gone, &l, 40_000),
            Some((SearchState::Expired, Some("no_heartbeat")))
        );
        let proposed = rec(SearchState::Proposed);
        assert_eq!(
            lapse(&proposed, SeatSeen::Gone, &l, 20_000),
            Some((SearchState::Queued, Some("stuck")))
        );
        let assigned = rec(SearchState::Assigned);
        assert_eq!(
            lapse(&assigned, SeatSeen::Present, &l, 2_000),
            Some((SearchState::Connected, None))
        );
        assert_eq!(lapse(&assigned, SeatSeen::Reserved, &l, 2_000), None);
        assert_eq!(
            lapse(&assigned, SeatSeen::Gone, &l, 70_000),
            Some((SearchState::Expired, Some("no_show")))
        );
    }
}
