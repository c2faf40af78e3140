//! The rows both backends read and write: the SQL text they share (a search's columns, its save,
//! the settle sweep's read, the deletion of forgotten searches, a queue's candidates, live ticket
//! keys) and the conversions between a row's columns and a record. The text is PostgreSQL's; the
//! SQLite backend turns its `$N` parameters into `?N`.

use serde_json::Value;

use super::{Candidate, SearchRecord, SearchState, SeatSeen};
use crate::error::{Result, StoreError};

/// A stored state, parsed.
pub(crate) fn state_from_db(s: &str) -> Result<SearchState> {
    SearchState::parse(s).ok_or_else(|| StoreError::Corrupt(format!("unknown search state {s:?}")))
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
///
/// [`MatchStore::settle`]: super::MatchStore::settle
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
