//! The matchmaker's searches on PostgreSQL (see [`crate::MatchStore`] for the contract).
//!
//! Every call that writes reads the searches it changes `FOR UPDATE` inside its transaction, so
//! two replicas changing one search serialize, applies the shared rule
//! ([`crate::matchmaking`]) and writes them back. Proposals of one queue also take an advisory
//! lock on the queue, so two replicas forming the same queue's matches take turns; the settle
//! sweep skips rows another transaction holds (`SKIP LOCKED`) rather than wait for them. Times
//! are the server's clock, read once per transaction.

use async_trait::async_trait;
use tokio_postgres::types::ToSql;
use tokio_postgres::{GenericClient, Row, Transaction};

use super::{col, PgErr, PostgresStore};
use crate::error::{Result, StoreError};
use crate::matchmaking::{
    advance, answer_change, apply_lapse, assigned_with, assignments_by_id, beat, cancel, candidate,
    check_new, enqueue, fresh, json_columns, lapse, requeue_all, search_of, seat_seen, take_into,
    Candidate, Lapses, MatchStore, NewSearch, ProbeAnswer, Proposal, RawSearch, SearchChange,
    SearchRecord, SearchState, Settled, COLUMNS, FORGET, LIVE_KEYS, MAX_CANDIDATES, QUEUED, SAVE,
    SETTLE,
};
use crate::validate::check_id;

type Arg<'a> = &'a (dyn ToSql + Sync);

fn ms(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

/// The server's now, in milliseconds since the Unix epoch.
async fn now_ms(c: &impl GenericClient, err: &PgErr) -> Result<u64> {
    let row = c
        .query_one(concat!("SELECT ", db_now_ms!()), &[])
        .await
        .map_err(|e| err.map(e))?;
    let v: i64 = col(&row, 0)?;
    Ok(u64::try_from(v).unwrap_or(0))
}

/// A search row read from the columns of [`COLUMNS`] (from index 0).
fn raw(row: &Row) -> Result<RawSearch> {
    Ok(RawSearch {
        search_id: col(row, 0)?,
        queue: col(row, 1)?,
        principal: col(row, 2)?,
        name: col(row, 3)?,
        token_hash: col(row, 4)?,
        state: col(row, 5)?,
        reason: col(row, 6)?,
        probes: col(row, 7)?,
        rtts: col(row, 8)?,
        region: col(row, 9)?,
        match_id: col(row, 10)?,
        zone_id: col(row, 11)?,
        kid: col(row, 12)?,
        assignment: col(row, 13)?,
        created_ms: col(row, 14)?,
        queued_ms: col(row, 15)?,
        heartbeat_ms: col(row, 16)?,
        changed_ms: col(row, 17)?,
    })
}

/// Searches `WHERE clause` (with `args`), locked for update when `lock`.
async fn read(
    c: &impl GenericClient,
    clause: &str,
    args: &[Arg<'_>],
    lock: bool,
    err: &PgErr,
) -> Result<Vec<SearchRecord>> {
    let sql = format!(
        "SELECT {COLUMNS} FROM match_searches WHERE {clause}{}",
        if lock { " FOR UPDATE" } else { "" }
    );
    let rows = c.query(&sql, args).await.map_err(|e| err.map(e))?;
    rows.iter().map(|r| raw(r)?.parse()).collect()
}

/// Writes `rec`'s changeable columns.
async fn save(c: &impl GenericClient, rec: &SearchRecord, err: &PgErr) -> Result<()> {
    let j = json_columns(rec)?;
    c.execute(
        SAVE,
        &[
            &rec.search_id,
            &rec.state.as_str(),
            &rec.reason,
            &j.probes,
            &j.rtts,
            &rec.region,
            &rec.match_id,
            &rec.zone_id,
            &rec.kid,
            &j.assignment,
            &rec.queued_at_ms.map(ms),
            &ms(rec.heartbeat_at_ms),
            &ms(rec.changed_at_ms),
        ],
    )
    .await
    .map_err(|e| err.map(e))?;
    Ok(())
}

impl PostgresStore {
    /// Runs `f` on search `search_id`, locked, saving what it changed.
    async fn with_search(
        &self,
        search_id: &str,
        f: impl FnOnce(SearchRecord, u64) -> SearchChange + Send,
    ) -> Result<SearchChange> {
        check_id("search id", search_id)?;
        let mut client = self.client().await?;
        let tx = self.begin(&mut client).await?;
        let now = now_ms(&tx, &self.err).await?;
        let Some(rec) = read(&tx, "search_id = $1", &[&search_id], true, &self.err)
            .await?
            .into_iter()
            .next()
        else {
            return Ok(SearchChange::NoSearch);
        };
        let change = f(rec, now);
        if let SearchChange::Changed(rec) = &change {
            save(&tx, rec, &self.err).await?;
        }
        tx.commit().await.map_err(|e| self.err.map(e))?;
        Ok(change)
    }

    /// Runs `f` over the searches of match `match_id`, locked, saving those it changed.
    async fn with_match<T: Send>(
        &self,
        match_id: &str,
        f: impl FnOnce(&mut [SearchRecord], u64) -> T + Send,
    ) -> Result<T> {
        check_id("match id", match_id)?;
        let mut client = self.client().await?;
        let tx = self.begin(&mut client).await?;
        let now = now_ms(&tx, &self.err).await?;
        let mut found = read(
            &tx,
            "match_id = $1 ORDER BY search_id",
            &[&match_id],
            true,
            &self.err,
        )
        .await?;
        let before = found.clone();
        let out = f(&mut found, now);
        for (m, b) in found.iter().zip(&before) {
            if m != b {
                save(&tx, m, &self.err).await?;
            }
        }
        tx.commit().await.map_err(|e| self.err.map(e))?;
        Ok(out)
    }
}

/// Locks the searches of one proposal and answers them in the proposal's order.
async fn members(tx: &Transaction<'_>, ids: &[String], err: &PgErr) -> Result<Vec<SearchRecord>> {
    let mut found = read(
        tx,
        "search_id = ANY($1) ORDER BY search_id",
        &[&ids],
        true,
        err,
    )
    .await?;
    found.sort_by_key(|r| ids.iter().position(|i| *i == r.search_id));
    Ok(found)
}

#[async_trait]
impl MatchStore for PostgresStore {
    async fn create_search(&self, search: &NewSearch) -> Result<SearchRecord> {
        check_new(search)?;
        let client = self.client().await?;
        let now = now_ms(&**client, &self.err).await?;
        let rec = fresh(search, now);
        let j = json_columns(&rec)?;
        let inserted = client
            .execute(
                "INSERT INTO match_searches (search_id, queue, principal, name, token_hash,
                     state, probes, rtts, created_ms, heartbeat_ms, changed_ms)
                 VALUES ($1, $2, $3, $4, $5, 'probing', $6, $7, $8, $8, $8)
                 ON CONFLICT (search_id) DO NOTHING",
                &[
                    &rec.search_id,
                    &rec.queue,
                    &rec.principal,
                    &rec.name,
                    &rec.token_hash,
                    &j.probes,
                    &j.rtts,
                    &ms(now),
                ],
            )
            .await
            .map_err(|e| self.err.map(e))?;
        if inserted == 0 {
            return Err(StoreError::InvalidArgument(format!(
                "search {:?} exists",
                search.search_id
            )));
        }
        Ok(rec)
    }

    async fn search(&self, search_id: &str) -> Result<Option<SearchRecord>> {
        check_id("search id", search_id)?;
        let client = self.client().await?;
        Ok(
            read(&**client, "search_id = $1", &[&search_id], false, &self.err)
                .await?
                .into_iter()
                .next(),
        )
    }

    async fn answer_probe(
        &self,
        challenge: &str,
        region: &str,
        rtt_ms: u32,
        window_ms: u64,
    ) -> Result<ProbeAnswer> {
        let Some(search_id) = search_of(challenge).filter(|s| check_id("search id", s).is_ok())
        else {
            return Ok(ProbeAnswer::Unknown);
        };
        let mut outcome = ProbeAnswer::Unknown;
        self.with_search(search_id, |rec, now| {
            let (answered, change) = answer_change(rec, challenge, region, rtt_ms, now, window_ms);
            outcome = answered;
            change
        })
        .await?;
        Ok(outcome)
    }

    async fn queue_search(&self, search_id: &str) -> Result<SearchChange> {
        self.with_search(search_id, enqueue).await
    }

    async fn heartbeat(&self, search_id: &str) -> Result<SearchChange> {
        self.with_search(search_id, beat).await
    }

    async fn cancel_search(&self, search_id: &str) -> Result<SearchChange> {
        self.with_search(search_id, cancel).await
    }

    async fn queued(&self, queue: &str, limit: usize) -> Result<Vec<Candidate>> {
        check_id("queue", queue)?;
        let limit = i64::try_from(limit.min(MAX_CANDIDATES)).unwrap_or(0);
        let client = self.client().await?;
        let rows = client
            .query(QUEUED, &[&queue, &limit])
            .await
            .map_err(|e| self.err.map(e))?;
        rows.iter()
            .map(|r| {
                let rtts: String = col(r, 2)?;
                candidate(col(r, 0)?, col(r, 1)?, &rtts, col(r, 3)?)
            })
            .collect()
    }

    async fn propose(&self, queue: &str, proposals: &[Proposal]) -> Result<Vec<String>> {
        check_id("queue", queue)?;
        for p in proposals {
            check_id("match id", &p.match_id)?;
            check_id("region", &p.region)?;
        }
        let mut client = self.client().await?;
        let tx = self.begin(&mut client).await?;
        tx.execute(
            "SELECT pg_advisory_xact_lock(hashtext('zonekeep.match:' || $1))",
            &[&queue],
        )
        .await
        .map_err(|e| self.err.map(e))?;
        let now = now_ms(&tx, &self.err).await?;
        let mut made = Vec::new();
        for p in proposals {
            let mut found = members(&tx, &p.search_ids, &self.err).await?;
            if take_into(&mut found, queue, p, now) {
                for m in &found {
                    save(&tx, m, &self.err).await?;
                }
                made.push(p.match_id.clone());
            }
        }
        tx.commit().await.map_err(|e| self.err.map(e))?;
        Ok(made)
    }

    async fn allocate(&self, match_id: &str, zone_id: &str, search_ids: &[String]) -> Result<bool> {
        check_id("zone id", zone_id)?;
        self.with_match(match_id, |found, now| {
            advance(
                found,
                search_ids,
                SearchState::Proposed,
                |m| {
                    m.state = SearchState::Allocated;
                    m.zone_id = Some(zone_id.to_owned());
                },
                now,
            )
        })
        .await
    }

    async fn assign(
        &self,
        match_id: &str,
        kid: &str,
        assignments: &[(String, serde_json::Value)],
    ) -> Result<bool> {
        check_id("key id", kid)?;
        let by_id = assignments_by_id(assignments)?;
        let ids: Vec<String> = assignments.iter().map(|(id, _)| id.clone()).collect();
        self.with_match(match_id, |found, now| {
            advance(
                found,
                &ids,
                SearchState::Allocated,
                assigned_with(kid, &by_id),
                now,
            )
        })
        .await
    }

    async fn requeue(&self, match_id: &str, reason: &str) -> Result<u64> {
        self.with_match(match_id, |found, now| requeue_all(found, reason, now))
            .await
    }

    async fn settle(&self, lapses: &Lapses) -> Result<Settled> {
        let mut client = self.client().await?;
        let tx = self.begin(&mut client).await?;
        let now = now_ms(&tx, &self.err).await?;
        let sql = format!("{SETTLE} FOR UPDATE OF m SKIP LOCKED");
        let rows = tx
            .query(
                &sql,
                &[
                    &ms(now),
                    &ms(lapses.probing_ms),
                    &ms(lapses.heartbeat_ms),
                    &ms(lapses.stuck_ms),
                ],
            )
            .await
            .map_err(|e| self.err.map(e))?;
        let mut out = Settled::default();
        for row in &rows {
            let mut rec = raw(row)?.parse()?;
            let seat: Option<String> = col(row, 18)?;
            if let Some(to) = lapse(&rec, seat_seen(seat.as_deref()), lapses, now) {
                match to.0 {
                    SearchState::Connected => out.connected += 1,
                    SearchState::Queued => out.requeued += 1,
                    _ => out.expired += 1,
                }
                apply_lapse(&mut rec, to, now);
                save(&tx, &rec, &self.err).await?;
            }
        }
        out.forgotten = tx
            .execute(FORGET, &[&ms(now.saturating_sub(lapses.forget_ms))])
            .await
            .map_err(|e| self.err.map(e))?;
        tx.commit().await.map_err(|e| self.err.map(e))?;
        Ok(out)
    }

    async fn changed_since(&self, since_ms: u64) -> Result<(Vec<String>, u64)> {
        let client = self.client().await?;
        let now = now_ms(&**client, &self.err).await?;
        let rows = client
            .query(
                "SELECT search_id FROM match_searches WHERE changed_ms >= $1 LIMIT 20000",
                &[&ms(since_ms)],
            )
            .await
            .map_err(|e| self.err.map(e))?;
        let ids = rows
            .iter()
            .map(|r| col::<String>(r, 0))
            .collect::<Result<Vec<_>>>()?;
        Ok((ids, now))
    }

    async fn live_keys(&self) -> Result<Vec<(String, u64)>> {
        let client = self.client().await?;
        let rows = client
            .query(LIVE_KEYS, &[])
            .await
            .map_err(|e| self.err.map(e))?;
        rows.iter()
            .map(|r| {
                let n: i64 = col(r, 1)?;
                Ok((col(r, 0)?, u64::try_from(n).unwrap_or(0)))
            })
            .collect()
    }
}
