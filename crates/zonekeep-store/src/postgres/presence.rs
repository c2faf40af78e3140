//! Presence on PostgreSQL (see [`crate::PresenceStore`] for the contract and [`crate::presence`]
//! for the rules both backends share).
//!
//! A host's batch is one transaction that reads the server's clock once, so every row it writes
//! carries the same stamp. Each join is one `INSERT .. ON CONFLICT DO UPDATE`, which locks the
//! existing row and decides its `since` from that row as committed, so a join racing another
//! host's join or leave of the same row waits for it and then sees it; each leave is one
//! `DELETE`, which locks the row it removes. Rows are taken in (principal, zone) order whatever
//! order the host gave (each row's own changes keep theirs), so two hosts' batches never wait on
//! each other in a cycle. Host rows are read, never locked, so presence writes wait on nothing but
//! presence writes. Liveness is never stored: reads and the sweep judge each row by its host's
//! directory row in the same statement, with the directory's rule and the server's clock.

use async_trait::async_trait;

use super::{col, PostgresStore};
use crate::error::Result;
use crate::presence::{
    check_changes, check_query, dead_after, in_row_order, resume_window, PresenceChange,
    PresenceEvent, PresenceRow, PresenceStore,
};
use crate::validate::from_db;

/// Whether the presence row `p` is live: the directory holds its host under the row's
/// incarnation, not left, with a heartbeat no older than the takeover bound (`$1`) by the
/// server's clock. The directory's own rule (`Timing::is_alive`, as its `orphans` query applies
/// it, negated there), plus the incarnation.
macro_rules! live {
    () => {
        concat!(
            "EXISTS (SELECT 1 FROM fleet_hosts h
                     WHERE h.host_id = p.host_id AND h.incarnation = p.incarnation
                       AND NOT h.has_left AND ",
            db_now_ms!(),
            " - h.heartbeat_ms <= $1)"
        )
    };
}

/// A row that is not live but may still lend its `since` to a resume elsewhere: its host, under
/// the row's incarnation, heartbeated within the failover window `$2` (it died recently and did
/// not restart).
macro_rules! lending {
    () => {
        concat!(
            "EXISTS (SELECT 1 FROM fleet_hosts h
                     WHERE h.host_id = p.host_id AND h.incarnation = p.incarnation AND ",
            db_now_ms!(),
            " - h.heartbeat_ms <= $2)"
        )
    };
}

/// A join: the row becomes this host's under this incarnation, stamped `$5`; it keeps its
/// `since` when its previous host (any incarnation, left or not) heartbeated within the
/// failover window `$6`, which also covers a row that was live.
const JOIN: &str = "
    INSERT INTO presence (principal, zone_id, host_id, incarnation, since_ms, updated_at_ms)
    VALUES ($1, $2, $3, $4, $5, $5)
    ON CONFLICT (principal, zone_id) DO UPDATE SET
        host_id = excluded.host_id,
        incarnation = excluded.incarnation,
        since_ms = CASE
            WHEN EXISTS (SELECT 1 FROM fleet_hosts h
                         WHERE h.host_id = presence.host_id
                           AND CAST($5 AS BIGINT) - h.heartbeat_ms <= CAST($6 AS BIGINT))
            THEN presence.since_ms
            ELSE excluded.since_ms
        END,
        updated_at_ms = excluded.updated_at_ms";

/// A leave: only the row this host holds under this incarnation.
const LEAVE: &str = "
    DELETE FROM presence
    WHERE principal = $1 AND zone_id = $2 AND host_id = $3 AND incarnation = $4";

#[async_trait]
impl PresenceStore for PostgresStore {
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
        let window = resume_window(dead_after_ms);
        let mut client = self.client().await?;
        let tx = self.begin(&mut client).await?;
        let now: i64 = col(
            &tx.query_one(concat!("SELECT ", db_now_ms!()), &[])
                .await
                .map_err(|e| self.err.map(e))?,
            0,
        )?;
        let join = tx.prepare(JOIN).await.map_err(|e| self.err.map(e))?;
        let leave = tx.prepare(LEAVE).await.map_err(|e| self.err.map(e))?;
        for c in in_row_order(changes) {
            match c.event {
                PresenceEvent::Joined => {
                    tx.execute(
                        &join,
                        &[
                            &c.principal,
                            &c.zone_id,
                            &host_id,
                            &incarnation,
                            &now,
                            &window,
                        ],
                    )
                    .await
                }
                PresenceEvent::Left => {
                    tx.execute(&leave, &[&c.principal, &c.zone_id, &host_id, &incarnation])
                        .await
                }
            }
            .map_err(|e| self.err.map(e))?;
        }
        tx.commit().await.map_err(|e| self.err.map(e))
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
        let client = self.client().await?;
        let rows = client
            .query(
                concat!(
                    "SELECT p.principal, p.zone_id, p.host_id, p.since_ms FROM presence p
                     WHERE p.principal = ANY($2) AND ",
                    live!(),
                    " ORDER BY p.principal, p.zone_id"
                ),
                &[&dead_after(dead_after_ms), &principals],
            )
            .await
            .map_err(|e| self.err.map(e))?;
        rows.iter()
            .map(|row| {
                Ok(PresenceRow {
                    principal: col(row, 0)?,
                    zone_id: col(row, 1)?,
                    host_id: col(row, 2)?,
                    since_ms: from_db("presence since_ms", col(row, 3)?)?,
                })
            })
            .collect()
    }

    async fn sweep_presence(&self, dead_after_ms: u64) -> Result<u64> {
        let client = self.client().await?;
        client
            .execute(
                concat!(
                    "DELETE FROM presence p WHERE NOT ",
                    live!(),
                    " AND NOT ",
                    lending!()
                ),
                &[&dead_after(dead_after_ms), &resume_window(dead_after_ms)],
            )
            .await
            .map_err(|e| self.err.map(e))
    }
}
