//! Zone save operations on a SQLite connection (see [`crate::SaveStore`] for the contract).

use rusqlite::{params, Connection, OptionalExtension, Row, TransactionBehavior};

use super::connection::CachedSql;
use super::sql_err;
use crate::error::{Result, StoreError};
use crate::fence::{self, Decision, StoredSave};
use crate::types::{Claim, SaveMeta, SaveRecord, WriteOutcome};
use crate::validate::{check_id, from_db, now_ms, to_db};

const SELECT_SAVE: &str =
    "SELECT zone_id, kind, epoch, seq, bytes, saved_at_ms FROM zone_saves WHERE zone_id = ?1";

fn save_from_row(row: &Row<'_>) -> rusqlite::Result<(String, String, i64, i64, Vec<u8>, i64)> {
    Ok((
        row.get(0)?,
        row.get(1)?,
        row.get(2)?,
        row.get(3)?,
        row.get(4)?,
        row.get(5)?,
    ))
}

fn to_record(raw: (String, String, i64, i64, Vec<u8>, i64)) -> Result<SaveRecord> {
    let (zone_id, kind, epoch, seq, bytes, saved_at_ms) = raw;
    Ok(SaveRecord {
        zone_id,
        kind,
        epoch: from_db("epoch", epoch)?,
        seq: from_db("seq", seq)?,
        bytes,
        saved_at_ms: from_db("saved_at_ms", saved_at_ms)?,
    })
}

/// The zone's fence: its fence row, but never below its stored save's epoch.
pub(super) fn current_fence(conn: &Connection, zone_id: &str) -> Result<i64> {
    conn.query_row_cached(
        "SELECT max(
             coalesce((SELECT epoch FROM zone_fences WHERE zone_id = ?1), 0),
             coalesce((SELECT epoch FROM zone_saves WHERE zone_id = ?1), 0))",
        params![zone_id],
        |r| r.get(0),
    )
    .map_err(sql_err)
}

pub(super) fn claim(conn: &mut Connection, zone_id: &str) -> Result<Claim> {
    check_id("zone id", zone_id)?;
    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(sql_err)?;
    let claim = raise_fence(&tx, zone_id)?;
    tx.commit().map_err(sql_err)?;
    Ok(claim)
}

/// Raises the zone's fence to the next epoch and reads its latest save, inside the caller's write
/// transaction: the one fence raise behind both [`claim`] and the directory's claims and moves.
pub(super) fn raise_fence(tx: &Connection, zone_id: &str) -> Result<Claim> {
    let fence = current_fence(tx, zone_id)?;
    let epoch = fence
        .checked_add(1)
        .ok_or_else(|| StoreError::Corrupt(format!("epoch of zone {zone_id:?} exhausted")))?;
    tx.execute_cached(
        "INSERT INTO zone_fences (zone_id, epoch) VALUES (?1, ?2)
         ON CONFLICT (zone_id) DO UPDATE SET epoch = excluded.epoch",
        params![zone_id, epoch],
    )
    .map_err(sql_err)?;
    let last = tx
        .query_row_cached(SELECT_SAVE, params![zone_id], save_from_row)
        .optional()
        .map_err(sql_err)?
        .map(to_record)
        .transpose()?;
    Ok(Claim {
        epoch: from_db("epoch", epoch)?,
        last,
    })
}

pub(super) fn write(
    conn: &mut Connection,
    zone_id: &str,
    epoch: u64,
    seq: u64,
    kind: &str,
    bytes: &[u8],
) -> Result<WriteOutcome> {
    check_id("zone id", zone_id)?;
    check_id("zone kind", kind)?;
    let db_epoch = to_db("epoch", epoch)?;
    let db_seq = to_db("seq", seq)?;
    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(sql_err)?;
    let fence_row: Option<i64> = tx
        .query_row_cached(
            "SELECT epoch FROM zone_fences WHERE zone_id = ?1",
            params![zone_id],
            |r| r.get(0),
        )
        .optional()
        .map_err(sql_err)?;
    // Comparing in SQL avoids reading the stored blob back just to compare it.
    let stored: Option<(i64, i64, bool)> = tx
        .query_row_cached(
            "SELECT epoch, seq, (kind = ?2 AND bytes = ?3) FROM zone_saves WHERE zone_id = ?1",
            params![zone_id, kind, bytes],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
        )
        .optional()
        .map_err(sql_err)?;
    let stored = stored
        .map(|(e, s, same_content)| -> Result<StoredSave> {
            Ok(StoredSave {
                epoch: from_db("epoch", e)?,
                seq: from_db("seq", s)?,
                same_content,
            })
        })
        .transpose()?;
    let fence = fence_row
        .map(|f| from_db("epoch", f))
        .transpose()?
        .unwrap_or(0);
    match fence::decide(fence, stored, epoch, seq)? {
        Decision::AlreadyDone => Ok(WriteOutcome::AlreadyDone),
        Decision::Write { new_fence } => {
            tx.execute_cached(
                "INSERT INTO zone_fences (zone_id, epoch) VALUES (?1, ?2)
                 ON CONFLICT (zone_id) DO UPDATE SET epoch = max(epoch, excluded.epoch)",
                params![zone_id, to_db("epoch", new_fence)?],
            )
            .map_err(sql_err)?;
            tx.execute_cached(
                "INSERT INTO zone_saves (zone_id, kind, epoch, seq, bytes, saved_at_ms)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6)
                 ON CONFLICT (zone_id) DO UPDATE SET kind = excluded.kind,
                     epoch = excluded.epoch, seq = excluded.seq, bytes = excluded.bytes,
                     saved_at_ms = excluded.saved_at_ms",
                params![zone_id, kind, db_epoch, db_seq, bytes, now_ms()],
            )
            .map_err(sql_err)?;
            tx.commit().map_err(sql_err)?;
            Ok(WriteOutcome::Written)
        }
    }
}

pub(super) fn load(conn: &mut Connection, zone_id: &str) -> Result<Option<SaveRecord>> {
    check_id("zone id", zone_id)?;
    conn.query_row_cached(SELECT_SAVE, params![zone_id], save_from_row)
        .optional()
        .map_err(sql_err)?
        .map(to_record)
        .transpose()
}

pub(super) fn list(conn: &mut Connection) -> Result<Vec<SaveMeta>> {
    let mut stmt = conn
        .prepare_cached(
            "SELECT s.zone_id, s.kind, s.epoch, max(s.epoch, coalesce(f.epoch, 0)), s.seq,
                    length(s.bytes), s.saved_at_ms
             FROM zone_saves s LEFT JOIN zone_fences f ON f.zone_id = s.zone_id
             ORDER BY s.zone_id",
        )
        .map_err(sql_err)?;
    let rows = stmt
        .query_map([], |r| {
            Ok((
                r.get::<_, String>(0)?,
                r.get::<_, String>(1)?,
                r.get::<_, i64>(2)?,
                r.get::<_, i64>(3)?,
                r.get::<_, i64>(4)?,
                r.get::<_, i64>(5)?,
                r.get::<_, i64>(6)?,
            ))
        })
        .map_err(sql_err)?;
    let mut out = Vec::new();
    for row in rows {
        let (zone_id, kind, epoch, fence, seq, size, saved_at_ms) = row.map_err(sql_err)?;
        out.push(SaveMeta {
            zone_id,
            kind,
            epoch: from_db("epoch", epoch)?,
            fence_epoch: from_db("epoch", fence)?,
            seq: from_db("seq", seq)?,
            size: from_db("size", size)?,
            saved_at_ms: from_db("saved_at_ms", saved_at_ms)?,
        });
    }
    Ok(out)
}

pub(super) fn delete(conn: &mut Connection, zone_id: &str) -> Result<bool> {
    check_id("zone id", zone_id)?;
    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(sql_err)?;
    // Fold the save's epoch into the fence first, so deleting the save never lowers the fence.
    tx.execute_cached(
        "INSERT INTO zone_fences (zone_id, epoch)
         SELECT zone_id, epoch FROM zone_saves WHERE zone_id = ?1
         ON CONFLICT (zone_id) DO UPDATE SET epoch = max(epoch, excluded.epoch)",
        params![zone_id],
    )
    .map_err(sql_err)?;
    let deleted = tx
        .execute_cached(
            "DELETE FROM zone_saves WHERE zone_id = ?1",
            params![zone_id],
        )
        .map_err(sql_err)?;
    tx.commit().map_err(sql_err)?;
    Ok(deleted > 0)
}
