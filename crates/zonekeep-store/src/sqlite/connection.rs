//! One SQLite connection as the store runs it: opened in WAL with its migrations applied, and
//! every statement it runs kept prepared.
//!
//! Parsing and planning SQL costs more than running the store's small indexed statements, and the
//! background passes of a host (chat feed, heartbeats, the directory) run a few of them every
//! second even when nobody plays. So every statement goes through the connection's cache
//! ([`CachedSql`] for `execute` and `query_row`), the cache holds them all, and the planner's
//! stability guarantee keeps a cached plan valid when its parameters change.

use std::path::Path;
use std::time::{Duration, Instant};

use rusqlite::config::DbConfig;
use rusqlite::Connection;

use super::{migrations, sql_err, SqliteOptions};
use crate::error::{Result, StoreError};

/// Opens the database at `path`: WAL, the durability `options` ask for, the statement cache and
/// the planner's stability guarantee, pending migrations applied.
pub(super) fn open(path: &Path, options: SqliteOptions) -> Result<Connection> {
    let mut conn = Connection::open(path).map_err(sql_err)?;
    conn.busy_timeout(options.busy_timeout).map_err(sql_err)?;
    let mode = switch_to_wal(&conn, options.busy_timeout)?;
    if !mode.eq_ignore_ascii_case("wal") && !mode.eq_ignore_ascii_case("memory") {
        return Err(StoreError::Backend(format!(
            "sqlite refused WAL journal mode (got {mode})"
        )));
    }
    conn.pragma_update(None, "synchronous", options.synchronous.pragma_value())
        .map_err(sql_err)?;
    // A plan that looked at a bound value (a `LIMIT ?`, a range on an indexed column) is thrown
    // away whenever that parameter is bound again, so without the planner's stability guarantee
    // every run of such a cached statement parses and plans its SQL anew. The store never runs
    // ANALYZE, so the bound values could not have chosen a better plan anyway.
    conn.set_db_config(DbConfig::SQLITE_DBCONFIG_ENABLE_QPSG, true)
        .map_err(sql_err)?;
    conn.set_prepared_statement_cache_capacity(STATEMENT_CACHE);
    migrations::migrate(&mut conn)?;
    Ok(conn)
}

/// Switches the file to WAL and answers the journal mode in force (an in-memory database stays
/// "memory").
///
/// Two connections converting a fresh file at once each hold a shared lock and want the exclusive
/// one; SQLite breaks that deadlock by answering `SQLITE_BUSY` to one of them at once, without
/// consulting the busy handler. So the switch is retried here, within the same busy timeout, and
/// once the other connection has finished, this one finds the file already in WAL.
fn switch_to_wal(conn: &Connection, busy_timeout: Duration) -> Result<String> {
    let deadline = Instant::now() + busy_timeout;
    let mut pause = Duration::from_millis(1);
    loop {
        match conn.query_row("PRAGMA journal_mode = WAL", [], |r| r.get(0)) {
            Ok(mode) => return Ok(mode),
            Err(e) if is_busy(&e) && Instant::now() < deadline => {
                std::thread::sleep(pause);
                pause = (pause * 2).min(Duration::from_millis(50));
            }
            Err(e) => return Err(sql_err(e)),
        }
    }
}

/// `execute` and `query_row` through the connection's statement cache (rusqlite's own parse and
/// plan their SQL on every call).
pub(crate) trait CachedSql {
    /// Runs one statement; the rows it changed.
    fn execute_cached<P: rusqlite::Params>(&self, sql: &str, params: P) -> rusqlite::Result<usize>;
    /// The first row of one statement, as `f` reads it.
    fn query_row_cached<T, P, F>(&self, sql: &str, params: P, f: F) -> rusqlite::Result<T>
    where
        P: rusqlite::Params,
        F: FnOnce(&rusqlite::Row<'_>) -> rusqlite::Result<T>;
}

impl CachedSql for Connection {
    fn execute_cached<P: rusqlite::Params>(&self, sql: &str, params: P) -> rusqlite::Result<usize> {
        self.prepare_cached(sql)?.execute(params)
    }

    fn query_row_cached<T, P, F>(&self, sql: &str, params: P, f: F) -> rusqlite::Result<T>
    where
        P: rusqlite::Params,
        F: FnOnce(&rusqlite::Row<'_>) -> rusqlite::Result<T>,
    {
        self.prepare_cached(sql)?.query_row(params, f)
    }
}

/// Statements each connection keeps prepared: more than the store has, so none is ever parsed
/// twice (rusqlite keeps 16 by default, fewer than the statements the store runs).
const STATEMENT_CACHE: usize = 512;

/// Whether SQLite refused for a lock another connection holds.
fn is_busy(e: &rusqlite::Error) -> bool {
    matches!(
        e.sqlite_error_code(),
        Some(rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked)
    )
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use rusqlite::StatementStatus;

    #[test]
    fn a_cached_statement_with_bound_limits_is_planned_once() {
        let dir = tempfile::tempdir().unwrap();
        let conn = open(&dir.path().join("plans.db"), SqliteOptions::default()).unwrap();
        let sql = "SELECT id FROM chat_lines WHERE id > ?1 ORDER BY id LIMIT ?2";
        for (after, limit) in [(0_i64, 10_i64), (5, 1000), (9, 3)] {
            let mut stmt = conn.prepare_cached(sql).unwrap();
            let rows: Vec<i64> = stmt
                .query_map([after, limit], |r| r.get(0))
                .unwrap()
                .collect::<rusqlite::Result<_>>()
                .unwrap();
            assert!(rows.is_empty());
            assert_eq!(
                stmt.get_status(StatementStatus::RePrepare),
                0,
                "binding another LIMIT must not throw the plan away"
            );
        }
        // Every run above used the one statement the cache kept.
        let stmt = conn.prepare_cached(sql).unwrap();
        assert_eq!(stmt.get_status(StatementStatus::Run), 3);
    }
}
