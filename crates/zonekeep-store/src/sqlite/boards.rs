//! Leaderboards on a SQLite connection (see [`crate::BoardStore`] for the contract and
//! [`crate::boards`] for the rules both backends share).
//!
//! Scores change only in [`feed`], inside the `BEGIN IMMEDIATE` transaction that records a fact,
//! so the database's write lock serializes every change of every board. A read that takes more
//! than one statement (a rank and the page around it) runs in one transaction, so it sees one
//! state. Times are this host's clock, which is SQLite's.

use std::collections::BTreeMap;

use async_trait::async_trait;
use rusqlite::{params, params_from_iter, Connection, OptionalExtension, Row, TransactionBehavior};

use super::connection::CachedSql;
use super::{sql_err, SqliteStore};
use crate::boards::{
    apply_all, changes, check_board_name, check_def, check_page, def_from_db, op_str, order_str,
    period_str, ranked, sort_key, BoardDef, BoardDefined, BoardEntry, BoardRow, BoardStore,
    MAX_BOARDS, MAX_BOARD_PAGE,
};
use crate::error::{Result, StoreError};
use crate::validate::{check_id, from_db, now_ms, to_db};

/// A board's columns, in the order [`def_of`] reads them.
const DEF_COLUMNS: &str = "name, sort_order, op, period, total, keep_periods";
/// A score's columns, in the order [`row_of`] reads them.
const ROW_COLUMNS: &str = "board, period, principal, score, sort_key, version, updated_at_ms";
/// The rank order, best first.
const RANK_ORDER: &str = "ORDER BY sort_key ASC, principal ASC";

type RawDef = (String, String, String, String, Option<String>, i64);
type RawRow = (String, i64, String, i64, i64, i64, i64);

/// This host's clock (SQLite's), in ms since the Unix epoch.
fn now() -> u64 {
    u64::try_from(now_ms()).unwrap_or(0)
}

fn raw_def(r: &Row<'_>) -> rusqlite::Result<RawDef> {
    Ok((
        r.get(0)?,
        r.get(1)?,
        r.get(2)?,
        r.get(3)?,
        r.get(4)?,
        r.get(5)?,
    ))
}

fn def_of(raw: RawDef) -> Result<BoardDef> {
    let (name, order, op, period, total, keep) = raw;
    def_from_db(name, &order, &op, &period, total, keep)
}

fn raw_row(r: &Row<'_>) -> rusqlite::Result<RawRow> {
    Ok((
        r.get(0)?,
        r.get(1)?,
        r.get(2)?,
        r.get(3)?,
        r.get(4)?,
        r.get(5)?,
        r.get(6)?,
    ))
}

fn row_of(raw: RawRow) -> Result<BoardRow> {
    let (board, period, principal, score, sort_key, version, updated) = raw;
    Ok(BoardRow {
        board,
        period: from_db("board period", period)?,
        principal,
        score,
        sort_key,
        version: from_db("board row version", version)?,
        updated_at_ms: from_db("board row updated_at_ms", updated)?,
    })
}

/// Boards `WHERE clause` (with `args`), by name.
fn read_defs(
    conn: &Connection,
    clause: &str,
    args: &[&dyn rusqlite::ToSql],
) -> Result<Vec<BoardDef>> {
    let sql = format!("SELECT {DEF_COLUMNS} FROM boards WHERE {clause} ORDER BY name");
    read_parsed(conn, &sql, args, raw_def, def_of)
}

/// The rows of `sql` (with `args`), each read raw by `raw` and then checked by `parse`.
fn read_parsed<R, T>(
    conn: &Connection,
    sql: &str,
    args: &[&dyn rusqlite::ToSql],
    raw: fn(&rusqlite::Row<'_>) -> rusqlite::Result<R>,
    parse: fn(R) -> Result<T>,
) -> Result<Vec<T>> {
    let mut stmt = conn.prepare_cached(sql).map_err(sql_err)?;
    let rows = stmt
        .query_map(params_from_iter(args.iter()), raw)
        .map_err(sql_err)?;
    let mut out = Vec::new();
    for r in rows {
        out.push(parse(r.map_err(sql_err)?)?);
    }
    Ok(out)
}

/// `(principal, score)` of scores `WHERE clause` (with `args`), as the query orders them.
fn read_scores(
    conn: &Connection,
    clause: &str,
    args: &[&dyn rusqlite::ToSql],
) -> Result<Vec<(String, i64)>> {
    let sql = format!("SELECT principal, score FROM board_entries WHERE {clause}");
    let mut stmt = conn.prepare_cached(&sql).map_err(sql_err)?;
    let rows = stmt
        .query_map(params_from_iter(args.iter()), |r| {
            Ok((r.get(0)?, r.get(1)?))
        })
        .map_err(sql_err)?;
    rows.collect::<rusqlite::Result<Vec<_>>>().map_err(sql_err)
}

/// Whole rows `WHERE clause` (with `args`), as the query orders them.
fn read_rows(
    conn: &Connection,
    clause: &str,
    args: &[&dyn rusqlite::ToSql],
) -> Result<Vec<BoardRow>> {
    let sql = format!("SELECT {ROW_COLUMNS} FROM board_entries WHERE {clause}");
    read_parsed(conn, &sql, args, raw_row, row_of)
}

fn page_len(limit: usize) -> i64 {
    i64::try_from(limit.min(MAX_BOARD_PAGE)).unwrap_or(0)
}

/// Applies a fact's board changes for `principal` inside the transaction `tx` recording it
/// (after its fence check, and only when its key is new): the boards following a total it adds
/// to and the boards it submits values to, in name order. A submitted board that is not
/// declared, or a score past the bound, refuses the fact.
pub(super) fn feed(
    tx: &Connection,
    key: &str,
    principal: &str,
    adds: &BTreeMap<String, i64>,
    submits: &BTreeMap<String, i64>,
) -> Result<()> {
    if adds.is_empty() && submits.is_empty() {
        return Ok(());
    }
    // One query for every board the fact may change: those it names, and those following a
    // total it adds to.
    let mut args: Vec<&dyn rusqlite::ToSql> = Vec::new();
    let mut named = Vec::new();
    for name in submits.keys() {
        args.push(name);
        named.push(format!("?{}", args.len()));
    }
    let mut followed = Vec::new();
    for name in adds.keys() {
        args.push(name);
        followed.push(format!("?{}", args.len()));
    }
    let (named, followed) = (named.join(", "), followed.join(", "));
    let clause = match (named.is_empty(), followed.is_empty()) {
        (false, false) => format!("name IN ({named}) OR total IN ({followed})"),
        (false, true) => format!("name IN ({named})"),
        _ => format!("total IN ({followed})"),
    };
    let defs = read_defs(tx, &clause, &args)?;
    let changed = changes(key, &defs, adds, submits)?;
    if changed.is_empty() {
        return Ok(());
    }
    let now = now();
    let now_db = to_db("now", now)?;
    for (name, (def, values)) in &changed {
        let period = to_db("board period", def.period.start_of(now))?;
        let current: Option<(i64, i64)> = tx
            .query_row_cached(
                "SELECT score, version FROM board_entries
                 WHERE board = ?1 AND period = ?2 AND principal = ?3",
                params![name, period, principal],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .optional()
            .map_err(sql_err)?;
        let Some(score) = apply_all(key, def, current.map(|c| c.0), values)? else {
            continue;
        };
        let version = current.map_or(1, |c| c.1.saturating_add(1));
        tx.execute_cached(
            "INSERT INTO board_entries
                 (board, period, principal, score, sort_key, version, updated_at_ms)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)
             ON CONFLICT (board, period, principal) DO UPDATE SET
                 score = excluded.score, sort_key = excluded.sort_key,
                 version = excluded.version, updated_at_ms = excluded.updated_at_ms",
            params![
                name,
                period,
                principal,
                score,
                sort_key(def.order, score),
                version,
                now_db
            ],
        )
        .map_err(sql_err)?;
    }
    Ok(())
}

fn define_board(conn: &mut Connection, def: &BoardDef) -> Result<BoardDefined> {
    check_def(def)?;
    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(sql_err)?;
    if let Some(existing) = read_defs(&tx, "name = ?1", &[&def.name])?.pop() {
        if existing == *def {
            return Ok(BoardDefined::Unchanged);
        }
        return Err(StoreError::BoardConflict(format!(
            "board {:?} exists with other settings (delete it first)",
            def.name
        )));
    }
    let count: i64 = tx
        .query_row_cached("SELECT count(*) FROM boards", [], |r| r.get(0))
        .map_err(sql_err)?;
    if usize::try_from(count).map_or(true, |n| n >= MAX_BOARDS) {
        return Err(StoreError::BoardConflict(format!(
            "the store holds its most boards ({MAX_BOARDS})"
        )));
    }
    tx.execute_cached(
        "INSERT INTO boards (name, sort_order, op, period, total, keep_periods, created_at_ms)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
        params![
            def.name,
            order_str(def.order),
            op_str(def.op),
            period_str(def.period),
            def.total,
            i64::from(def.keep_periods),
            now_ms()
        ],
    )
    .map_err(sql_err)?;
    tx.commit().map_err(sql_err)?;
    Ok(BoardDefined::Created)
}

fn delete_board(conn: &mut Connection, name: &str) -> Result<bool> {
    check_board_name(name)?;
    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(sql_err)?;
    tx.execute_cached("DELETE FROM board_entries WHERE board = ?1", params![name])
        .map_err(sql_err)?;
    let gone = tx
        .execute_cached("DELETE FROM boards WHERE name = ?1", params![name])
        .map_err(sql_err)?;
    tx.commit().map_err(sql_err)?;
    Ok(gone > 0)
}

fn reset_board(conn: &mut Connection, name: &str, period: u64) -> Result<u64> {
    check_board_name(name)?;
    let period = to_db("board period", period)?;
    let gone = conn
        .execute_cached(
            "DELETE FROM board_entries WHERE board = ?1 AND period = ?2",
            params![name, period],
        )
        .map_err(sql_err)?;
    Ok(u64::try_from(gone).unwrap_or(u64::MAX))
}

/// The principal's rank (1 for the best) and score, if it has a score.
fn rank_of(
    conn: &Connection,
    name: &str,
    period: i64,
    principal: &str,
) -> Result<Option<(u64, i64)>> {
    let found: Option<(i64, i64)> = conn
        .query_row_cached(
            "SELECT e.score,
                    (SELECT count(*) FROM board_entries o
                     WHERE o.board = e.board AND o.period = e.period
                       AND (o.sort_key, o.principal) < (e.sort_key, e.principal))
             FROM board_entries e
             WHERE e.board = ?1 AND e.period = ?2 AND e.principal = ?3",
            params![name, period, principal],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .optional()
        .map_err(sql_err)?;
    found
        .map(|(score, before)| Ok((from_db("board rank", before)? + 1, score)))
        .transpose()
}

fn board_rank(
    conn: &Connection,
    name: &str,
    period: u64,
    principal: &str,
) -> Result<Option<BoardEntry>> {
    check_board_name(name)?;
    check_id("principal", principal)?;
    let period = to_db("board period", period)?;
    Ok(
        rank_of(conn, name, period, principal)?.map(|(rank, score)| BoardEntry {
            rank,
            principal: principal.to_owned(),
            score,
        }),
    )
}

fn board_top(
    conn: &Connection,
    name: &str,
    period: u64,
    offset: u64,
    limit: usize,
) -> Result<Vec<BoardEntry>> {
    check_board_name(name)?;
    check_page(limit)?;
    let (period_db, offset_db) = (to_db("board period", period)?, to_db("offset", offset)?);
    let rows = read_scores(
        conn,
        &format!("board = ?1 AND period = ?2 {RANK_ORDER} LIMIT ?3 OFFSET ?4"),
        &[&name, &period_db, &page_len(limit), &offset_db],
    )?;
    Ok(ranked(offset + 1, rows))
}

fn board_around(
    conn: &mut Connection,
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
    // One read transaction: the rank and the page come from the same state.
    let tx = conn.transaction().map_err(sql_err)?;
    let Some((rank, _)) = rank_of(&tx, name, period, principal)? else {
        return Ok(Vec::new());
    };
    let radius = u64::try_from(radius).unwrap_or(0);
    let start = (rank - 1).saturating_sub(radius);
    let len = (rank - 1 - start) + 1 + radius;
    let rows = read_scores(
        &tx,
        &format!("board = ?1 AND period = ?2 {RANK_ORDER} LIMIT ?3 OFFSET ?4"),
        &[
            &name,
            &period,
            &to_db("board page", len)?,
            &to_db("board offset", start)?,
        ],
    )?;
    tx.commit().map_err(sql_err)?;
    Ok(ranked(start + 1, rows))
}

fn board_size(conn: &Connection, name: &str, period: u64) -> Result<u64> {
    check_board_name(name)?;
    let period = to_db("board period", period)?;
    let n: i64 = conn
        .query_row_cached(
            "SELECT count(*) FROM board_entries WHERE board = ?1 AND period = ?2",
            params![name, period],
            |r| r.get(0),
        )
        .map_err(sql_err)?;
    from_db("board size", n)
}

fn board_rows(
    conn: &Connection,
    name: &str,
    period: u64,
    after: Option<&str>,
    limit: usize,
) -> Result<Vec<BoardRow>> {
    check_board_name(name)?;
    check_page(limit)?;
    let period = to_db("board period", period)?;
    let limit = page_len(limit);
    match after {
        Some(after) => {
            check_id("principal", after)?;
            read_rows(
                conn,
                "board = ?1 AND period = ?2 AND principal > ?3 ORDER BY principal LIMIT ?4",
                &[&name, &period, &after, &limit],
            )
        }
        None => read_rows(
            conn,
            "board = ?1 AND period = ?2 ORDER BY principal LIMIT ?3",
            &[&name, &period, &limit],
        ),
    }
}

fn board_changes(conn: &Connection, since_ms: u64, limit: usize) -> Result<(Vec<BoardRow>, u64)> {
    check_page(limit)?;
    let now = now();
    let rows = read_rows(
        conn,
        "updated_at_ms >= ?1 ORDER BY updated_at_ms, board, period, principal LIMIT ?2",
        &[&to_db("since_ms", since_ms)?, &page_len(limit)],
    )?;
    Ok((rows, now))
}

fn prune_boards(conn: &mut Connection) -> Result<u64> {
    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(sql_err)?;
    let now = now();
    let mut gone = 0u64;
    for def in read_defs(&tx, "period <> 'all'", &[])? {
        let Some(oldest) = def
            .period
            .oldest_kept(def.period.start_of(now), def.keep_periods)
        else {
            continue;
        };
        let n = tx
            .execute_cached(
                "DELETE FROM board_entries WHERE board = ?1 AND period < ?2",
                params![def.name, to_db("board period", oldest)?],
            )
            .map_err(sql_err)?;
        gone = gone.saturating_add(u64::try_from(n).unwrap_or(u64::MAX));
    }
    tx.commit().map_err(sql_err)?;
    Ok(gone)
}

#[async_trait]
impl BoardStore for SqliteStore {
    async fn define_board(&self, def: &BoardDef) -> Result<BoardDefined> {
        let def = def.clone();
        self.run(move |conn| define_board(conn, &def)).await
    }

    async fn board(&self, name: &str) -> Result<Option<BoardDef>> {
        check_board_name(name)?;
        let name = name.to_owned();
        self.run(move |conn| Ok(read_defs(conn, "name = ?1", &[&name])?.pop()))
            .await
    }

    async fn boards(&self) -> Result<Vec<BoardDef>> {
        self.run(|conn| read_defs(conn, "1 = 1", &[])).await
    }

    async fn delete_board(&self, name: &str) -> Result<bool> {
        let name = name.to_owned();
        self.run(move |conn| delete_board(conn, &name)).await
    }

    async fn reset_board(&self, name: &str, period: u64) -> Result<u64> {
        let name = name.to_owned();
        self.run(move |conn| reset_board(conn, &name, period)).await
    }

    async fn board_top(
        &self,
        name: &str,
        period: u64,
        offset: u64,
        limit: usize,
    ) -> Result<Vec<BoardEntry>> {
        let name = name.to_owned();
        self.run(move |conn| board_top(conn, &name, period, offset, limit))
            .await
    }

    async fn board_rank(
        &self,
        name: &str,
        period: u64,
        principal: &str,
    ) -> Result<Option<BoardEntry>> {
        let (name, principal) = (name.to_owned(), principal.to_owned());
        self.run(move |conn| board_rank(conn, &name, period, &principal))
            .await
    }

    async fn board_around(
        &self,
        name: &str,
        period: u64,
        principal: &str,
        radius: usize,
    ) -> Result<Vec<BoardEntry>> {
        let (name, principal) = (name.to_owned(), principal.to_owned());
        self.run(move |conn| board_around(conn, &name, period, &principal, radius))
            .await
    }

    async fn board_size(&self, name: &str, period: u64) -> Result<u64> {
        let name = name.to_owned();
        self.run(move |conn| board_size(conn, &name, period)).await
    }

    async fn board_rows(
        &self,
        name: &str,
        period: u64,
        after: Option<&str>,
        limit: usize,
    ) -> Result<Vec<BoardRow>> {
        let (name, after) = (name.to_owned(), after.map(str::to_owned));
        self.run(move |conn| board_rows(conn, &name, period, after.as_deref(), limit))
            .await
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
        let (name, principal) = (name.to_owned(), principal.to_owned());
        self.run(move |conn| {
            read_rows(
                conn,
                "board = ?1 AND period = ?2 AND principal = ?3",
                &[&name, &period, &principal],
            )
            .map(|rows| rows.into_iter().next())
        })
        .await
    }

    async fn board_changes(&self, since_ms: u64, limit: usize) -> Result<(Vec<BoardRow>, u64)> {
        self.run(move |conn| board_changes(conn, since_ms, limit))
            .await
    }

    async fn prune_boards(&self) -> Result<u64> {
        self.run(prune_boards).await
    }
}
