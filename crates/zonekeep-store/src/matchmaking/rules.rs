//! The rules of a search's life, written once for both backends: what a new search must be and
//! the record it starts as, what answering a probe, queueing, a heartbeat and a cancel do to one
//! search, how a match takes its searches and advances them all or none (or sends them back to
//! the queue), and what time and the lobby's seats do to a search that waits. Each rule is a
//! plain function over records a backend has read under its lock; the backend writes back what
//! it answers.

use std::collections::BTreeMap;

use serde_json::Value;

use super::{
    search_of, Lapses, NewSearch, Probe, ProbeAnswer, Proposal, SearchChange, SearchRecord,
    SearchState, SeatSeen, MAX_ASSIGNMENT_BYTES, MAX_PROBES,
};
use crate::error::{Result, StoreError};
use crate::validate::check_id;

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
///
/// [`MatchStore::requeue`]: super::MatchStore::requeue
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
///
/// [`MatchStore::assign`]: super::MatchStore::assign
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

/// The rule of [`MatchStore::settle`] for one search that is not over: its new state and
/// reason, if it changes. `seat` is what the lobby says of an assigned search's principal.
///
/// [`MatchStore::settle`]: super::MatchStore::settle
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
