//! Presence on a SQLite connection (see [`crate::PresenceStore`] for the contract and
//! [`crate::presence`] for the rules both backends share).
//!
//! A host's batch runs under `BEGIN IMMEDIATE`, so the database's write lock serializes it with
//! every other write, and it reads the clock once: every row it writes carries the same stamp.
//! Liveness is never stored: reads and the sweep judge each row by its host's directory row in
//! the same statement, with the directory's rule and the database's clock.

use async_trait::async_trait;
use rusqlite::{params, params_from_iter, Connection, TransactionBehavior};

use super::connection::CachedSql;
use super::{sql_err, SqliteStore};
use crate::error::Result;
use crate::presence::{
    check_changes, check_query, dead_after, in_row_order, resume_window, PresenceChange,
    PresenceEvent, PresenceRow, PresenceStore,
};
use crate::validate::from_db;

/// Whether the presence row `p` is live: the directory holds its host under the row's
/// incarnation, not left, with a heartbeat no older than the takeover bound (`?1`) by the
/// database's clock. The directory's own rule (`Timing::is_alive`, as its `orphans` query
/// applies it, negated there), plus the incarnation.
macro_rules! live {
    () => {
        concat!(
            "EXISTS (SELECT 1 FROM fleet_hosts h
                     WHERE h.host_id = p.host_id AND h.incarnation = p.incarnation
                       AND h.has_left = 0 AND ",
            db_now_ms!(),
            " - h.heartbeat_ms <= ?1)"
        )
    };
}

/// A row that is not live but may still lend its `since` to a resume elsewhere: its host, under
/// the row's incarnation, heartbeated within the failover window `?2` (it died recently and did
/// not restart).
macro_rules! lending {
    () => {
        concat!(
            "EXISTS (SELECT 1 FROM fleet_hosts h
                     WHERE h.host_id = p.host_id AND h.incarnation = p.incarnation AND ",
            db_now_ms!(),
            " - h.heartbeat_ms <= ?2)"
        )
    };
}

/// A join: the row becomes this host's under this incarnation, stamped `?5`; it keeps its
/// `since` when its previous host (any incarnation, left or not) heartbeated within the
/// failover window `?6`, which also covers a row that was live.
const JOIN: &str = "
    INSERT INTO presence (principal, zone_id, host_id, incarnation, since_ms, updated_at_ms)
    VALUES (?1, ?2, ?3, ?4, ?5, ?5)
    ON CONFLICT (principal, zone_id) DO UPDATE SET
        host_id = excluded.host_id,
        incarnation = excluded.incarnation,
        since_ms = CASE
            WHEN EXISTS (SELECT 1 FROM fleet_hosts h
                         WHERE h.host_id = presence.host_id AND ?5 - h.heartbeat_ms <= ?6)
            THEN presence.since_ms
            ELSE excluded.since_ms
        END,
        updated_at_ms = excluded.updated_at_ms";

/// A leave: only the row this host holds under this incarnation.
const LEAVE: &str = "
    DELETE FROM presence
    WHERE principal = ?1 AND zone_id = ?2 AND host_id = ?3 AND incarnation = ?4";

fn apply_presence(
    conn: &mut Connection,
    host_id: &str,
    incarnation: &str,
    changes: &[PresenceChange],
    dead_after_ms: u64,
) -> Result<()> {
    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(sql_err)?;
    let now: i64 = tx
        .query_row_cached(concat!("SELECT ", db_now_ms!()), [], |r| r.get(0))
        .map_err(sql_err)?;
    let window = resume_window(dead_after_ms);
    {
        let mut join = tx.prepare_cached(JOIN).map_err(sql_err)?;
        let mut leave = tx.prepare_cached(LEAVE).map_err(sql_err)?;
        // The same order as PostgreSQL's (no lock order matters here, one writer at a time).
        for c in in_row_order(changes) {
            match c.event {
                PresenceEvent::Joined => join.execute(params![
                    c.principal,
                    c.zone_id,
                    host_id,
                    incarnation,
                    now,
                    window
                ]),
                PresenceEvent::Left => {
                    leave.execute(params![c.principal, c.zone_id, host_id, incarnation])
                }
            }
            .map_err(sql_err)?;
        }
    }
    tx.commit().map_err(sql_err)
}

fn presence_of(
    conn: &Connection,
    principals: &[String],
    dead_after_ms: u64,
) -> Result<Vec<PresenceRow>> {
    // `?1` is the takeover bound; the principals follow it (at most MAX_PRESENCE_QUERY, far
    // below SQLite's limit on parameters).
    let list = (2..principals.len() + 2)
        .map(|i| format!("?{i}"))
        .collect::<Vec<_>>()
        .join(", ");
    let sql = format!(
        concat!(
            "SELECT p.principal, p.zone_id, p.host_id, p.since_ms FROM presence p
             WHERE p.principal IN ({}) AND ",
            live!(),
            " ORDER BY p.principal, p.zone_id"
        ),
        list
    );
    let bound = dead_after(dead_after_ms);
    let mut args: Vec<&dyn rusqlite::ToSql> = Vec::with_capacity(principals.len() + 1);
    args.push(&bound);
    args.extend(principals.iter().map(|p| p as &dyn rusqlite::ToSql));
    let mut stmt = conn.prepare(&sql).map_err(sql_err)?;
    let rows = stmt
        .query_map(params_from_iter(args), |r| {
            Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get::<_, i64>(3)?))
        })
        .map_err(sql_err)?;
    let mut out = Vec::new();
    for row in rows {
        let (principal, zone_id, host_id, since) = row.map_err(sql_err)?;
        out.push(PresenceRow {
            principal,
            zone_id,
            host_id,
            since_ms: from_db("presence since_ms", since)?,
        });
    }
    Ok(out)
}

fn sweep_presence(conn: &Connection, dead_after_ms: u64) -> Result<u64> {
    let gone = conn
        .execute_cached(
            concat!(
                "DELETE FROM presence AS p WHERE NOT ",
                live!(),
                " AND NOT ",
                lending!()
            ),
            params![dead_after(dead_after_ms), resume_window(dead_after_ms)],
        )
        .map_err(sql_err)?;
    Ok(u64::try_from(gone).unwrap_or(u64::MAX))
}

#[async_trait]
impl PresenceStore for SqliteStore {
    async fn apply_presence(
        &self,
        host_id: &str,
        incarnation: &str,
        changes: &[PresenceChange],
        dead_after_ms: u64,
    ) -> Result<()> {
        check_changes(host_id, incarnation, changes)?;
        if changes.is_empty() {
            return Ok(());
        }
        let (host_id, incarnation) = (host_id.to_owned(), incarnation.to_owned());
        let changes = changes.to_vec();
        self.run(move |conn| apply_presence(conn, &host_id, &incarnation, &changes, dead_after_ms))
            .await
    }

    async fn presence_of(
        &self,
        principals: &[String],
        dead_after_ms: u64,
    ) -> Result<Vec<PresenceRow>> {
        check_query(principals)?;
        if principals.is_empty() {
            return Ok(Vec::new());
        }
        let principals = principals.to_vec();
        self.run(move |conn| presence_of(conn, &principals, dead_after_ms))
            .await
    }

    async fn sweep_presence(&self, dead_after_ms: u64) -> Result<u64> {
        self.run(move |conn| sweep_presence(conn, dead_after_ms))
            .await
    }
}
