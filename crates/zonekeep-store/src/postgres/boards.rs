//! Leaderboards on PostgreSQL (see [`crate::BoardStore`] for the contract and [`crate::boards`]
//! for the rules both backends share).
//!
//! Scores change only in [`feed`], inside the transaction that records a fact, after the ledger
//! row is claimed (so a repeated key changes nothing). It reads the boards it may change
//! `FOR KEY SHARE`, so deleting one of them waits for the facts changing it (and no score is
//! written to a board already deleted), then locks each score row `FOR UPDATE` in board name
//! order: every fact of a principal takes its rows in the same order, so facts never deadlock,
//! and two facts changing one score serialize. Times are the server's clock, read once per
//! transaction. Declarations take a transaction-scoped advisory lock, so two replicas declaring
//! boards at once take turns (and the store never passes [`MAX_BOARDS`]). A rank and the page
//! around it are read in one `REPEATABLE READ` snapshot.

use std::collections::BTreeMap;

use async_trait::async_trait;
use tokio_postgres::types::ToSql;
use tokio_postgres::{GenericClient, IsolationLevel, Row, Transaction};

use super::{col, PgErr, PostgresStore};
use crate::boards::{
    apply_all, changes, check_board_name, check_def, check_page, def_from_db, op_str, order_str,
    period_str, ranked, sort_key, BoardDef, BoardDefined, BoardEntry, BoardRow, BoardStore,
    MAX_BOARDS, MAX_BOARD_PAGE,
};
use crate::error::{Result, StoreError};
use crate::validate::{check_id, from_db, to_db};

type Arg<'a> = &'a (dyn ToSql + Sync);

/// A board's columns, in the order [`def_of`] reads them.
const DEF_COLUMNS: &str = "name, sort_order, op, period, total, keep_periods";
/// A score's columns, in the order [`row_of`] reads them.
const ROW_COLUMNS: &str = "board, period, principal, score, sort_key, version, updated_at_ms";
/// The rank order, best first.
const RANK_ORDER: &str = "ORDER BY sort_key ASC, principal ASC";
/// How often a fact tries to create a score row another transaction created first.
const UPSERT_ATTEMPTS: usize = 3;

/// The server's now, in milliseconds since the Unix epoch.
async fn now_ms(c: &impl GenericClient, err: &PgErr) -> Result<u64> {
    let row = c
        .query_one(concat!("SELECT ", db_now_ms!()), &[])
        .await
        .map_err(|e| err.map(e))?;
    let v: i64 = col(&row, 0)?;
    Ok(u64::try_from(v).unwrap_or(0))
}

fn def_of(row: &Row) -> Result<BoardDef> {
    let (order, op, period): (String, String, String) = (col(row, 1)?, col(row, 2)?, col(row, 3)?);
    def_from_db(
        col(row, 0)?,
        &order,
        &op,
        &period,
        col(row, 4)?,
        col(row, 5)?,
    )
}

fn row_of(row: &Row) -> Result<BoardRow> {
    Ok(BoardRow {
        board: col(row, 0)?,
        period: from_db("board period", col(row, 1)?)?,
        principal: col(row, 2)?,
        score: col(row, 3)?,
        sort_key: col(row, 4)?,
        version: from_db("board row version", col(row, 5)?)?,
        updated_at_ms: from_db("board row updated_at_ms", col(row, 6)?)?,
    })
}

/// Boards `WHERE clause` (with `args`), by name.
async fn read_defs(
    c: &impl GenericClient,
    clause: &str,
    args: &[Arg<'_>],
    err: &PgErr,
) -> Result<Vec<BoardDef>> {
    let sql = format!("SELECT {DEF_COLUMNS} FROM boards WHERE {clause}");
    let rows = c.query(&sql, args).await.map_err(|e| err.map(e))?;
    rows.iter().map(def_of).collect()
}

/// `(principal, score)` of scores `WHERE clause` (with `args`), as the query orders them.
async fn read_scores(
    c: &impl GenericClient,
    clause: &str,
    args: &[Arg<'_>],
    err: &PgErr,
) -> Result<Vec<(String, i64)>> {
    let sql = format!("SELECT principal, score FROM board_entries WHERE {clause}");
    let rows = c.query(&sql, args).await.map_err(|e| err.map(e))?;
    rows.iter().map(|r| Ok((col(r, 0)?, col(r, 1)?))).collect()
}

/// Whole rows `WHERE clause` (with `args`), as the query orders them.
async fn read_rows(
    c: &impl GenericClient,
    clause: &str,
    args: &[Arg<'_>],
    err: &PgErr,
) -> Result<Vec<BoardRow>> {
    let sql = format!("SELECT {ROW_COLUMNS} FROM board_entries WHERE {clause}");
    let rows = c.query(&sql, args).await.map_err(|e| err.map(e))?;
    rows.iter().map(row_of).collect()
}

fn page_len(limit: usize) -> i64 {
    i64::try_from(limit.min(MAX_BOARD_PAGE)).unwrap_or(0)
}

/// Applies a fact's board changes for `principal` inside the transaction `tx` recording it
/// (after its fence check, and only when its key is new): the boards following a total it adds
/// to and the boards it submits values to, in name order. A submitted board that is not
/// declared, or a score past the bound, refuses the fact (the caller drops the transaction).
pub(super) async fn feed(
    tx: &Transaction<'_>,
    key: &str,
    principal: &str,
    adds: &BTreeMap<String, i64>,
    submits: &BTreeMap<String, i64>,
    err: &PgErr,
) -> Result<()> {
    if adds.is_empty() && submits.is_empty() {
        return Ok(());
    }
    let named: Vec<&str> = submits.keys().map(String::as_str).collect();
    let followed: Vec<&str> = adds.keys().map(String::as_str).collect();
    let defs = read_defs(
        tx,
        "name = ANY($1) OR total = ANY($2) ORDER BY name FOR KEY SHARE",
        &[&named, &followed],
        err,
    )
    .await?;
    let changed = changes(key, &defs, adds, submits)?;
    if changed.is_empty() {
        return Ok(());
    }
    let now = now_ms(tx, err).await?;
    let now_db = to_db("now", now)?;
    for (name, (def, values)) in &changed {
        let period = to_db("board period", def.period.start_of(now))?;
        let mut written = false;
        for _ in 0..UPSERT_ATTEMPTS {
            let current = tx
                .query_opt(
                    "SELECT score, version FROM board_entries
                     WHERE board = $1 AND period = $2 AND principal = $3 FOR UPDATE",
                    &[name, &period, &principal],
                )
                .await
                .map_err(|e| err.map(e))?
                .map(|r| Ok::<_, StoreError>((col::<i64>(&r, 0)?, col::<i64>(&r, 1)?)))
                .transpose()?;
            let Some(score) = apply_all(key, def, current.map(|c| c.0), values)? else {
                written = true;
                break;
            };
            let key_of = sort_key(def.order, score);
            if let Some((_, version)) = current {
                tx.execute(
                    "UPDATE board_entries
                     SET score = $4, sort_key = $5, version = $6, updated_at_ms = $7
                     WHERE board = $1 AND period = $2 AND principal = $3",
                    &[
                        name,
                        &period,
                        &principal,
                        &score,
                        &key_of,
                        &version.saturating_add(1),
                        &now_db,
                    ],
                )
                .await
                .map_err(|e| err.map(e))?;
                written = true;
                break;
            }
            // A new row. A concurrent fact creating the same row first makes this insert wait
            // for it and then do nothing; the next attempt reads that row and changes it.
            let inserted = tx
                .execute(
                    "INSERT INTO board_entries
                         (board, period, principal, score, sort_key, version, updated_at_ms)
                     VALUES ($1, $2, $3, $4, $5, 1, $6)
                     ON CONFLICT (board, period, principal) DO NOTHING",
                    &[name, &period, &principal, &score, &key_of, &now_db],
                )
                .await
                .map_err(|e| err.map(e))?;
            if inserted == 1 {
                written = true;
                break;
            }
        }
        if !written {
            return Err(StoreError::Backend(format!(
                "board {name:?}: the score of {principal:?} kept changing under this fact"
            )));
        }
    }
    Ok(())
}

/// The principal's rank (1 for the best) and score, if it has a score.
async fn rank_of(
    c: &impl GenericClient,
    name: &str,
    period: i64,
    principal: &str,
    err: &PgErr,
) -> Result<Option<(u64, i64)>> {
    let row = c
        .query_opt(
            "SELECT e.score,
                    (SELECT count(*) FROM board_entries o
                     WHERE o.board = e.board AND o.period = e.period
                       AND (o.sort_key, o.principal) < (e.sort_key, e.principal))
             FROM board_entries e
             WHERE e.board = $1 AND e.period = $2 AND e.principal = $3",
            &[&name, &period, &principal],
        )
        .await
        .map_err(|e| err.map(e))?;
    row.map(|r| {
        let before: i64 = col(&r, 1)?;
        Ok((from_db("board rank", before)? + 1, col(&r, 0)?))
    })
    .transpose()
}

#[async_trait]
impl BoardStore for PostgresStore {
    async fn define_board(&self, def: &BoardDef) -> Result<BoardDefined> {
        check_def(def)?;
        let mut client = self.client().await?;
        let tx = self.begin(&mut client).await?;
        tx.execute(
            "SELECT pg_advisory_xact_lock(hashtext('zonekeep.boards'))",
            &[],
        )
        .await
        .map_err(|e| self.err.map(e))?;
        if let Some(existing) = read_defs(&tx, "name = $1", &[&def.name], &self.err)
            .await?
            .pop()
        {
            if existing == *def {
                return Ok(BoardDefined::Unchanged);
            }
            return Err(StoreError::BoardConflict(format!(
                "board {:?} exists with other settings (delete it first)",
                def.name
            )));
        }
        let count: i64 = col(
            &tx.query_one("SELECT count(*) FROM boards", &[])
                .await
                .map_err(|e| self.err.map(e))?,
            0,
        )?;
        if usize::try_from(count).map_or(true, |n| n >= MAX_BOARDS) {
            return Err(StoreError::BoardConflict(format!(
                "the store holds its most boards ({MAX_BOARDS})"
            )));
        }
        tx.execute(
            concat!(
                "INSERT INTO boards
                     (name, sort_order, op, period, total, keep_periods, created_at_ms)
                 VALUES ($1, $2, $3, $4, $5, $6, ",
                db_now_ms!(),
                ")"
            ),
            &[
                &def.name,
                &order_str(def.order),
                &op_str(def.op),
                &period_str(def.period),
                &def.total,
                &i64::from(def.keep_periods),
            ],
        )
        .await
        .map_err(|e| self.err.map(e))?;
        tx.commit().await.map_err(|e| self.err.map(e))?;
        Ok(BoardDefined::Created)
    }

    async fn board(&self, name: &str) -> Result<Option<BoardDef>> {
        check_board_name(name)?;
        let client = self.client().await?;
        Ok(read_defs(&**client, "name = $1", &[&name], &self.err)
            .await?
            .pop())
    }

    async fn boards(&self) -> Result<Vec<BoardDef>> {
        let client = self.client().await?;
        read_defs(&**client, "true ORDER BY name", &[], &self.err).await
    }

    async fn delete_board(&self, name: &str) -> Result<bool> {
        check_board_name(name)?;
        let mut client = self.client().await?;
        let tx = self.begin(&mut client).await?;
        // The board first: this waits for the facts changing it (they hold it `FOR KEY SHARE`),
        // and facts after it no longer see it, so no score is left behind.
        let gone = tx
            .execute("DELETE FROM boards WHERE name = $1", &[&name])
            .await
            .map_err(|e| self.err.map(e))?;
        tx.execute("DELETE FROM board_entries WHERE board = $1", &[&name])
            .await
            .map_err(|e| self.err.map(e))?;
        tx.commit().await.map_err(|e| self.err.map(e))?;
        Ok(gone > 0)
    }

    async fn reset_board(&self, name: &str, period: u64) -> Result<u64> {
        check_board_name(name)?;
        let period = to_db("board period", period)?;
        let client = self.client().await?;
        client
            .execute(
                "DELETE FROM board_entries WHERE board = $1 AND period = $2",
                &[&name, &period],
            )
            .await
            .map_err(|e| self.err.map(e))
    }

    async fn board_top(
        &self,
        name: &str,
        period: u64,
        offset: u64,
        limit: usize,
    ) -> Result<Vec<BoardEntry>> {
        check_board_name(name)?;
        check_page(limit)?;
        let (period_db, offset_db) = (to_db("board period", period)?, to_db("offset", offset)?);
        let client = self.client().await?;
        let rows = read_scores(
            &**client,
            &format!("board = $1 AND period = $2 {RANK_ORDER} LIMIT $3 OFFSET $4"),
            &[&name, &period_db, &page_len(limit), &offset_db],
            &self.err,
        )
        .await?;
        Ok(ranked(offset + 1, rows))
    }

    async fn board_rank(
        &self,
        name: &str,
        period: u64,
        principal: &str,
    ) -> Result<Option<BoardEntry>> {
        check_board_name(name)?;
        check_id("principal", principal)?;
        let period = to_db("board period", period)?;
        let client = self.client().await?;
        Ok(rank_of(&**client, name, period, principal, &self.err)
            .await?
            .map(|(rank, score)| BoardEntry {
                rank,
                principal: principal.to_owned(),
                score,
            }))
    }

    async fn board_around(
        &self,
        name: &str,
        period: u64,
        principal: &str,
        radius: usize,
    ) -> Result<Vec<BoardEntry>> {
        check_board_name(name)?;
        check_id("principal", principal)?;
        if radius > MAX_BOARD_PAGE / 2 {
            return Err(StoreError::InvalidArgument(format!(
                "a board read around a principal takes a radius of at most {}",
                MAX_BOARD_PAGE / 2
            )));
        }
        let period = to_db("board period", period)?;
        let mut client = self.client().await?;
        let client: &mut tokio_postgres::Client = &mut client;
        let tx = client
            .build_transaction()
            .isolation_level(IsolationLevel::RepeatableRead)
            .read_only(true)
            .start()
            .await
            .map_err(|e| self.err.map(e))?;
        let Some((rank, _)) = rank_of(&tx, name, period, principal, &self.err).await? else {
            return Ok(Vec::new());
        };
        let radius = u64::try_from(radius).unwrap_or(0);
        let start = (rank - 1).saturating_sub(radius);
        let len = (rank - 1 - start) + 1 + radius;
        let rows = read_scores(
            &tx,
            &format!("board = $1 AND period = $2 {RANK_ORDER} LIMIT $3 OFFSET $4"),
            &[
                &name,
                &period,
                &to_db("board page", len)?,
                &to_db("board offset", start)?,
            ],
            &self.err,
        )
        .await?;
        tx.commit().await.map_err(|e| self.err.map(e))?;
        Ok(ranked(start + 1, rows))
    }

    async fn board_size(&self, name: &str, period: u64) -> Result<u64> {
        check_board_name(name)?;
        let period = to_db("board period", period)?;
        let client = self.client().await?;
        let row = client
            .query_one(
                "SELECT count(*) FROM board_entries WHERE board = $1 AND period = $2",
                &[&name, &period],
            )
            .await
            .map_err(|e| self.err.map(e))?;
        from_db("board size", col(&row, 0)?)
    }

    async fn board_rows(
        &self,
        name: &str,
        period: u64,
        after: Option<&str>,
        limit: usize,
    ) -> Result<Vec<BoardRow>> {
        check_board_name(name)?;
        check_page(limit)?;
        if let Some(after) = after {
            check_id("principal", after)?;
        }
        let period = to_db("board period", period)?;
        let limit = page_len(limit);
        let client = self.client().await?;
        match after {
            Some(after) => {
                read_rows(
                    &**client,
                    "board = $1 AND period = $2 AND principal > $3 ORDER BY principal LIMIT $4",
                    &[&name, &period, &after, &limit],
                    &self.err,
                )
                .await
            }
            None => {
                read_rows(
                    &**client,
                    "board = $1 AND period = $2 ORDER BY principal LIMIT $3",
                    &[&name, &period, &limit],
                    &self.err,
                )
                .await
            }
        }
    }

    async fn board_row(
        &self,
        name: &str,
        period: u64,
        principal: &str,
    ) -> Result<Option<BoardRow>> {
        check_board_name(name)?;
        check_id("principal", principal)?;
        let period = to_db("board period", period)?;
        let client = self.client().await?;
        let rows = read_rows(
            &**client,
            "board = $1 AND period = $2 AND principal = $3",
            &[&name, &period, &principal],
            &self.err,
        )
        .await?;
        Ok(rows.into_iter().next())
    }

    async fn board_changes(&self, since_ms: u64, limit: usize) -> Result<(Vec<BoardRow>, u64)> {
        check_page(limit)?;
        let since = to_db("since_ms", since_ms)?;
        let client = self.client().await?;
        let now = now_ms(&**client, &self.err).await?;
        let rows = read_rows(
            &**client,
            "updated_at_ms >= $1 ORDER BY updated_at_ms, board, period, principal LIMIT $2",
            &[&since, &page_len(limit)],
            &self.err,
        )
        .await?;
        Ok((rows, now))
    }

    async fn prune_boards(&self) -> Result<u64> {
        let mut client = self.client().await?;
        let tx = self.begin(&mut client).await?;
        let now = now_ms(&tx, &self.err).await?;
        let mut gone = 0u64;
        // By name, the order facts lock scores in.
        let defs = read_defs(&tx, "period <> 'all' ORDER BY name", &[], &self.err).await?;
        for def in defs {
            let Some(oldest) = def
                .period
                .oldest_kept(def.period.start_of(now), def.keep_periods)
            else {
                continue;
            };
            let n = tx
                .execute(
                    "DELETE FROM board_entries WHERE board = $1 AND period < $2",
                    &[&def.name, &to_db("board period", oldest)?],
                )
                .await
                .map_err(|e| self.err.map(e))?;
            gone = gone.saturating_add(n);
        }
        tx.commit().await.map_err(|e| self.err.map(e))?;
        Ok(gone)
    }
}
