//! The matchmaker's searches on a SQLite connection (see [`crate::MatchStore`] for the contract).
//!
//! Every call that writes runs under `BEGIN IMMEDIATE`: it holds the database's write lock from
//! its first read, so it reads the searches it changes as no other writer can change them, applies
//! the shared rule ([`crate::matchmaking`]) and writes them back. Times are SQLite's own clock,
//! read once per transaction.

use async_trait::async_trait;
use rusqlite::{params, params_from_iter, Connection, Row, TransactionBehavior};
use serde_json::Value;

use super::connection::CachedSql;
use super::{sql_err, SqliteStore};
use crate::error::{Result, StoreError};
use crate::matchmaking::{
    advance, answer_change, apply_lapse, assigned_with, assignments_by_id, beat, cancel, candidate,
    check_new, enqueue, fresh, json_columns, lapse, search_of, seat_seen, take_into, Candidate,
    Lapses, MatchStore, NewSearch, ProbeAnswer, Proposal, RawSearch, SearchChange, SearchRecord,
    SearchState, Settled, COLUMNS, FORGET, LIVE_KEYS, MAX_CANDIDATES, QUEUED, SAVE, SETTLE,
};
use crate::validate::check_id;

/// `sql` with PostgreSQL's `$N` parameters as SQLite's `?N`.
fn q(sql: &str) -> String {
    sql.replace('$', "?")
}

/// The database's now, in milliseconds since the Unix epoch.
fn now_ms(conn: &Connection) -> Result<u64> {
    let v: i64 = conn
        .query_row_cached(concat!("SELECT ", db_now_ms!()), [], |r| r.get(0))
        .map_err(sql_err)?;
    Ok(u64::try_from(v).unwrap_or(0))
}

fn ms(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

/// A search row read from the columns of [`COLUMNS`] (from index 0).
fn raw(r: &Row<'_>) -> rusqlite::Result<RawSearch> {
    Ok(RawSearch {
        search_id: r.get(0)?,
        queue: r.get(1)?,
        principal: r.get(2)?,
        name: r.get(3)?,
        token_hash: r.get(4)?,
        state: r.get(5)?,
        reason: r.get(6)?,
        probes: r.get(7)?,
        rtts: r.get(8)?,
        region: r.get(9)?,
        match_id: r.get(10)?,
        zone_id: r.get(11)?,
        kid: r.get(12)?,
        assignment: r.get(13)?,
        created_ms: r.get(14)?,
        queued_ms: r.get(15)?,
        heartbeat_ms: r.get(16)?,
        changed_ms: r.get(17)?,
    })
}

/// Searches `WHERE clause` (with `args`).
fn read(
    conn: &Connection,
    clause: &str,
    args: &[&dyn rusqlite::ToSql],
) -> Result<Vec<SearchRecord>> {
    let sql = q(&format!(
        "SELECT {COLUMNS} FROM match_searches WHERE {clause}"
    ));
    let mut stmt = conn.prepare_cached(&sql).map_err(sql_err)?;
    let rows = stmt
        .query_map(params_from_iter(args.iter()), raw)
        .map_err(sql_err)?;
    let mut out = Vec::new();
    for r in rows {
        out.push(r.map_err(sql_err)?.parse()?);
    }
    Ok(out)
}

fn read_one(conn: &Connection, search_id: &str) -> Result<Option<SearchRecord>> {
    Ok(read(conn, "search_id = $1", &[&search_id])?
        .into_iter()
        .next())
}

/// Writes `rec`'s changeable columns.
fn save(conn: &Connection, rec: &SearchRecord) -> Result<()> {
    let j = json_columns(rec)?;
    conn.execute_cached(
        &q(SAVE),
        params![
            rec.search_id,
            rec.state.as_str(),
            rec.reason,
            j.probes,
            j.rtts,
            rec.region,
            rec.match_id,
            rec.zone_id,
            rec.kid,
            j.assignment,
            rec.queued_at_ms.map(ms),
            ms(rec.heartbeat_at_ms),
            ms(rec.changed_at_ms),
        ],
    )
    .map_err(sql_err)?;
    Ok(())
}

/// Runs `f` on search `search_id` under the write lock, saving what it changed.
fn with_search(
    conn: &mut Connection,
    search_id: &str,
    f: impl FnOnce(SearchRecord, u64) -> SearchChange,
) -> Result<SearchChange> {
    check_id("search id", search_id)?;
    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(sql_err)?;
    let now = now_ms(&tx)?;
    let Some(rec) = read_one(&tx, search_id)? else {
        return Ok(SearchChange::NoSearch);
    };
    let change = f(rec, now);
    if let SearchChange::Changed(rec) = &change {
        save(&tx, rec)?;
    }
    tx.commit().map_err(sql_err)?;
    Ok(change)
}

fn create(conn: &mut Connection, s: &NewSearch) -> Result<SearchRecord> {
    check_new(s)?;
    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(sql_err)?;
    let now = now_ms(&tx)?;
    let rec = fresh(s, now);
    let j = json_columns(&rec)?;
    let inserted = tx
        .execute_cached(
            "INSERT INTO match_searches (search_id, queue, principal, name, token_hash, state,
                 probes, rtts, created_ms, heartbeat_ms, changed_ms)
             VALUES (?1, ?2, ?3, ?4, ?5, 'probing', ?6, ?7, ?8, ?8, ?8)
             ON CONFLICT (search_id) DO NOTHING",
            params![
                rec.search_id,
                rec.queue,
                rec.principal,
                rec.name,
                rec.token_hash,
                j.probes,
                j.rtts,
                ms(now)
            ],
        )
        .map_err(sql_err)?;
    if inserted == 0 {
        return Err(StoreError::InvalidArgument(format!(
            "search {:?} exists",
            s.search_id
        )));
    }
    tx.commit().map_err(sql_err)?;
    Ok(rec)
}

fn answer_probe(
    conn: &mut Connection,
    challenge: &str,
    region: &str,
    rtt_ms: u32,
    window_ms: u64,
) -> Result<ProbeAnswer> {
    let Some(search_id) = search_of(challenge).filter(|s| check_id("search id", s).is_ok()) else {
        return Ok(ProbeAnswer::Unknown);
    };
    let mut outcome = ProbeAnswer::Unknown;
    with_search(conn, search_id, |rec, now| {
        let (answered, change) = answer_change(rec, challenge, region, rtt_ms, now, window_ms);
        outcome = answered;
        change
    })?;
    Ok(outcome)
}

fn queued(conn: &mut Connection, queue: &str, limit: usize) -> Result<Vec<Candidate>> {
    check_id("queue", queue)?;
    let limit = i64::try_from(limit.min(MAX_CANDIDATES)).unwrap_or(0);
    let mut stmt = conn.prepare_cached(&q(QUEUED)).map_err(sql_err)?;
    let rows = stmt
        .query_map(params![queue, limit], |r| {
            Ok((
                r.get::<_, String>(0)?,
                r.get::<_, String>(1)?,
                r.get::<_, String>(2)?,
                r.get::<_, Option<i64>>(3)?,
            ))
        })
        .map_err(sql_err)?;
    let mut out = Vec::new();
    for r in rows {
        let (id, principal, rtts, at) = r.map_err(sql_err)?;
        out.push(candidate(id, principal, &rtts, at)?);
    }
    Ok(out)
}

/// The searches named by `ids`, in that order (a missing one is left out).
fn members(conn: &Connection, ids: &[String]) -> Result<Vec<SearchRecord>> {
    let marks = (1..=ids.len())
        .map(|i| format!("${i}"))
        .collect::<Vec<_>>()
        .join(", ");
    let args: Vec<&dyn rusqlite::ToSql> = ids.iter().map(|i| i as &dyn rusqlite::ToSql).collect();
    let mut found = read(conn, &format!("search_id IN ({marks})"), &args)?;
    found.sort_by_key(|r| ids.iter().position(|i| *i == r.search_id));
    Ok(found)
}

fn propose(conn: &mut Connection, queue: &str, proposals: &[Proposal]) -> Result<Vec<String>> {
    check_id("queue", queue)?;
    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(sql_err)?;
    let now = now_ms(&tx)?;
    let mut made = Vec::new();
    for p in proposals {
        check_id("match id", &p.match_id)?;
        check_id("region", &p.region)?;
        let mut found = members(&tx, &p.search_ids)?;
        if take_into(&mut found, queue, p, now) {
            for m in &found {
                save(&tx, m)?;
            }
            made.push(p.match_id.clone());
        }
    }
    tx.commit().map_err(sql_err)?;
    Ok(made)
}

/// Runs `f` over the searches of match `match_id` under the write lock, saving them after.
fn with_match<T>(
    conn: &mut Connection,
    match_id: &str,
    f: impl FnOnce(&mut [SearchRecord], u64) -> T,
) -> Result<T> {
    check_id("match id", match_id)?;
    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(sql_err)?;
    let now = now_ms(&tx)?;
    let mut found = read(&tx, "match_id = $1", &[&match_id])?;
    let before = found.clone();
    let out = f(&mut found, now);
    for (m, b) in found.iter().zip(&before) {
        if m != b {
            save(&tx, m)?;
        }
    }
    tx.commit().map_err(sql_err)?;
    Ok(out)
}

fn settle(conn: &mut Connection, lapses: &Lapses) -> Result<Settled> {
    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(sql_err)?;
    let now = now_ms(&tx)?;
    let mut due = Vec::new();
    {
        let mut stmt = tx.prepare_cached(&q(SETTLE)).map_err(sql_err)?;
        let rows = stmt
            .query_map(
                params![
                    ms(now),
                    ms(lapses.probing_ms),
                    ms(lapses.heartbeat_ms),
                    ms(lapses.stuck_ms)
                ],
                |r| Ok((raw(r)?, r.get::<_, Option<String>>(18)?)),
            )
            .map_err(sql_err)?;
        for r in rows {
            let (raw, seat) = r.map_err(sql_err)?;
            due.push((raw.parse()?, seat));
        }
    }
    let mut out = Settled::default();
    for (mut rec, seat) in due {
        if let Some(to) = lapse(&rec, seat_seen(seat.as_deref()), lapses, now) {
            match to.0 {
                SearchState::Connected => out.connected += 1,
                SearchState::Queued => out.requeued += 1,
                _ => out.expired += 1,
            }
            apply_lapse(&mut rec, to, now);
            save(&tx, &rec)?;
        }
    }
    let gone = tx
        .execute_cached(
            &q(FORGET),
            params![ms(now.saturating_sub(lapses.forget_ms))],
        )
        .map_err(sql_err)?;
    out.forgotten = u64::try_from(gone).unwrap_or(0);
    tx.commit().map_err(sql_err)?;
    Ok(out)
}

fn changed_since(conn: &mut Connection, since_ms: u64) -> Result<(Vec<String>, u64)> {
    let now = now_ms(conn)?;
    let mut stmt = conn
        .prepare_cached("SELECT search_id FROM match_searches WHERE changed_ms >= ?1 LIMIT 20000")
        .map_err(sql_err)?;
    let ids = stmt
        .query_map(params![ms(since_ms)], |r| r.get::<_, String>(0))
        .map_err(sql_err)?
        .collect::<rusqlite::Result<Vec<_>>>()
        .map_err(sql_err)?;
    Ok((ids, now))
}

fn live_keys(conn: &mut Connection) -> Result<Vec<(String, u64)>> {
    let mut stmt = conn.prepare_cached(LIVE_KEYS).map_err(sql_err)?;
    let rows = stmt
        .query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, i64>(1)?)))
        .map_err(sql_err)?
        .collect::<rusqlite::Result<Vec<_>>>()
        .map_err(sql_err)?;
    Ok(rows
        .into_iter()
        .map(|(k, n)| (k, u64::try_from(n).unwrap_or(0)))
        .collect())
}

#[async_trait]
impl MatchStore for SqliteStore {
    async fn create_search(&self, search: &NewSearch) -> Result<SearchRecord> {
        let search = search.clone();
        self.run(move |conn| create(conn, &search)).await
    }

    async fn search(&self, search_id: &str) -> Result<Option<SearchRecord>> {
        let id = search_id.to_owned();
        self.run(move |conn| {
            check_id("search id", &id)?;
            read_one(conn, &id)
        })
        .await
    }

    async fn answer_probe(
        &self,
        challenge: &str,
        region: &str,
        rtt_ms: u32,
        window_ms: u64,
    ) -> Result<ProbeAnswer> {
        let (c, r) = (challenge.to_owned(), region.to_owned());
        self.run(move |conn| answer_probe(conn, &c, &r, rtt_ms, window_ms))
            .await
    }

    async fn queue_search(&self, search_id: &str) -> Result<SearchChange> {
        let id = search_id.to_owned();
        self.run(move |conn| with_search(conn, &id, enqueue)).await
    }

    async fn heartbeat(&self, search_id: &str) -> Result<SearchChange> {
        let id = search_id.to_owned();
        self.run(move |conn| with_search(conn, &id, beat)).await
    }

    async fn cancel_search(&self, search_id: &str) -> Result<SearchChange> {
        let id = search_id.to_owned();
        self.run(move |conn| with_search(conn, &id, cancel)).await
    }

    async fn queued(&self, queue: &str, limit: usize) -> Result<Vec<Candidate>> {
        let queue = queue.to_owned();
        self.run(move |conn| queued(conn, &queue, limit)).await
    }

    async fn propose(&self, queue: &str, proposals: &[Proposal]) -> Result<Vec<String>> {
        let (queue, proposals) = (queue.to_owned(), proposals.to_vec());
        self.run(move |conn| propose(conn, &queue, &proposals))
            .await
    }

    async fn allocate(&self, match_id: &str, zone_id: &str, search_ids: &[String]) -> Result<bool> {
        let (match_id, zone_id, ids) =
            (match_id.to_owned(), zone_id.to_owned(), search_ids.to_vec());
        self.run(move |conn| {
            check_id("zone id", &zone_id)?;
            with_match(conn, &match_id, |found, now| {
                advance(
                    found,
                    &ids,
                    SearchState::Proposed,
                    |m| {
                        m.state = SearchState::Allocated;
                        m.zone_id = Some(zone_id.clone());
                    },
                    now,
                )
            })
        })
        .await
    }

    async fn assign(
        &self,
        match_id: &str,
        kid: &str,
        assignments: &[(String, Value)],
    ) -> Result<bool> {
        let (match_id, kid) = (match_id.to_owned(), kid.to_owned());
        let by_id = assignments_by_id(assignments)?;
        let ids: Vec<String> = assignments.iter().map(|(id, _)| id.clone()).collect();
        self.run(move |conn| {
            check_id("key id", &kid)?;
            with_match(conn, &match_id, |found, now| {
                advance(
                    found,
                    &ids,
                    SearchState::Allocated,
                    assigned_with(&kid, &by_id),
                    now,
                )
            })
        })
        .await
    }

    async fn requeue(&self, match_id: &str, reason: &str) -> Result<u64> {
        let (match_id, reason) = (match_id.to_owned(), reason.to_owned());
        self.run(move |conn| {
            with_match(conn, &match_id, |found, now| {
                crate::matchmaking::requeue_all(found, &reason, now)
            })
        })
        .await
    }

    async fn settle(&self, lapses: &Lapses) -> Result<Settled> {
        let lapses = *lapses;
        self.run(move |conn| settle(conn, &lapses)).await
    }

    async fn changed_since(&self, since_ms: u64) -> Result<(Vec<String>, u64)> {
        self.run(move |conn| changed_since(conn, since_ms)).await
    }

    async fn live_keys(&self) -> Result<Vec<(String, u64)>> {
        self.run(live_keys).await
    }
}
