//! Transfer records on a SQLite connection (see [`crate::TransferLedger`] for the contract).
//!
//! Every change runs under `BEGIN IMMEDIATE`: reading the writer's fence, reading the row and
//! writing its new status are one serialized step, so an accept and a return racing on one
//! transfer cannot both see it pending.

use rusqlite::{params, Connection, OptionalExtension, Row, Transaction, TransactionBehavior};

use super::connection::CachedSql;
use super::sql_err;
use crate::error::{Result, StoreError};
use crate::transfers::{self, Begin, Change, NewTransfer, Reclaim, StoredTransfer, TransferStatus};
use crate::validate::{check_id, from_db, now_ms, to_db};

const COLUMNS: &str = "id, principal, player, source_zone, source_epoch, target_zone, claims, \
     player_claims, state, status, target_epoch, reason, arrived, created_at_ms, resolved_at_ms";

fn to_stored(row: &Row<'_>) -> rusqlite::Result<(NewTransfer, Raw)> {
    let player: i64 = row.get(2)?;
    let source_epoch: i64 = row.get(4)?;
    Ok((
        NewTransfer {
            id: row.get(0)?,
            principal: row.get(1)?,
            player: u32::try_from(player).unwrap_or(u32::MAX),
            source_zone: row.get(3)?,
            source_epoch: u64::try_from(source_epoch).unwrap_or(0),
            target_zone: row.get(5)?,
            claims: row.get(6)?,
            player_claims: row.get(7)?,
            state: row.get(8)?,
        },
        Raw {
            player,
            source_epoch,
            status: row.get(9)?,
            target_epoch: row.get(10)?,
            reason: row.get(11)?,
            arrived: row.get(12)?,
            created_at_ms: row.get(13)?,
            resolved_at_ms: row.get(14)?,
        },
    ))
}

/// The columns that need checking on the way out.
struct Raw {
    player: i64,
    source_epoch: i64,
    status: String,
    target_epoch: Option<i64>,
    reason: Option<String>,
    arrived: i64,
    created_at_ms: i64,
    resolved_at_ms: Option<i64>,
}

fn finish((transfer, raw): (NewTransfer, Raw)) -> Result<StoredTransfer> {
    if u32::try_from(raw.player).is_err() {
        return Err(StoreError::Corrupt(format!(
            "transfer {:?}: player id {} out of range",
            transfer.id, raw.player
        )));
    }
    from_db("source epoch", raw.source_epoch)?;
    Ok(StoredTransfer {
        transfer,
        status: TransferStatus::parse(&raw.status)?,
        target_epoch: raw
            .target_epoch
            .map(|e| from_db("target epoch", e))
            .transpose()?,
        reason: raw.reason,
        arrived: raw.arrived != 0,
        created_at_ms: from_db("created_at_ms", raw.created_at_ms)?,
        resolved_at_ms: raw
            .resolved_at_ms
            .map(|t| from_db("resolved_at_ms", t))
            .transpose()?,
    })
}

fn read(conn: &Connection, id: &str) -> Result<Option<StoredTransfer>> {
    conn.query_row_cached(
        &format!("SELECT {COLUMNS} FROM zone_transfers WHERE id = ?1"),
        params![id],
        to_stored,
    )
    .optional()
    .map_err(sql_err)?
    .map(finish)
    .transpose()
}

fn read_known(tx: &Transaction<'_>, id: &str) -> Result<StoredTransfer> {
    read(tx, id)?.ok_or_else(|| StoreError::UnknownTransfer(id.to_owned()))
}

fn fence_of(tx: &Transaction<'_>, zone_id: &str) -> Result<u64> {
    from_db("epoch", super::saves::current_fence(tx, zone_id)?)
}

pub(super) fn begin(conn: &mut Connection, new: &NewTransfer) -> Result<StoredTransfer> {
    transfers::check_new(new)?;
    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(sql_err)?;
    let fence = fence_of(&tx, &new.source_zone)?;
    let stored = read(&tx, &new.id)?;
    match transfers::decide_begin(fence, new, stored.as_ref())? {
        Begin::Stored => stored.ok_or_else(|| StoreError::Backend("transfer vanished".into())),
        Begin::Insert => {
            tx.execute_cached(
                "INSERT INTO zone_transfers (id, principal, player, source_zone, source_epoch,
                     target_zone, claims, player_claims, state, status, created_at_ms)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, 'pending', ?10)",
                params![
                    new.id,
                    new.principal,
                    i64::from(new.player),
                    new.source_zone,
                    to_db("source epoch", new.source_epoch)?,
                    new.target_zone,
                    new.claims,
                    new.player_claims,
                    new.state,
                    now_ms(),
                ],
            )
            .map_err(sql_err)?;
            let row = read_known(&tx, &new.id)?;
            tx.commit().map_err(sql_err)?;
            Ok(row)
        }
    }
}

pub(super) fn accept(conn: &mut Connection, id: &str, epoch: u64) -> Result<StoredTransfer> {
    transfers::check_transfer_id(id)?;
    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(sql_err)?;
    let stored = read_known(&tx, id)?;
    let fence = fence_of(&tx, &stored.transfer.target_zone)?;
    if transfers::decide_accept(fence, epoch, &stored)? == Change::Stored {
        return Ok(stored);
    }
    tx.execute_cached(
        "UPDATE zone_transfers SET status = 'accepted', target_epoch = ?2, resolved_at_ms = ?3
         WHERE id = ?1",
        params![id, to_db("target epoch", epoch)?, now_ms()],
    )
    .map_err(sql_err)?;
    let row = read_known(&tx, id)?;
    tx.commit().map_err(sql_err)?;
    Ok(row)
}

pub(super) fn give_back(
    conn: &mut Connection,
    id: &str,
    zone_id: &str,
    epoch: u64,
    reason: &str,
) -> Result<StoredTransfer> {
    transfers::check_transfer_id(id)?;
    check_id("zone id", zone_id)?;
    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(sql_err)?;
    let stored = read_known(&tx, id)?;
    let fence = fence_of(&tx, zone_id)?;
    if transfers::decide_return(fence, zone_id, epoch, &stored)? == Change::Stored {
        return Ok(stored);
    }
    tx.execute_cached(
        "UPDATE zone_transfers SET status = 'returned', reason = ?2, resolved_at_ms = ?3
         WHERE id = ?1",
        params![id, transfers::clip_reason(reason), now_ms()],
    )
    .map_err(sql_err)?;
    let row = read_known(&tx, id)?;
    tx.commit().map_err(sql_err)?;
    Ok(row)
}

pub(super) fn arrive(conn: &mut Connection, id: &str, epoch: u64) -> Result<StoredTransfer> {
    let target = |t: &StoredTransfer| t.transfer.target_zone.clone();
    set_arrived(conn, id, epoch, target, transfers::decide_arrive, true).map(|(row, _)| row)
}

pub(super) fn reclaim(conn: &mut Connection, id: &str, epoch: u64) -> Result<Reclaim> {
    let source = |t: &StoredTransfer| t.transfer.source_zone.clone();
    let (transfer, by_this_call) =
        set_arrived(conn, id, epoch, source, transfers::decide_reclaim, true)?;
    Ok(Reclaim {
        transfer,
        by_this_call,
    })
}

pub(super) fn release_reclaim(
    conn: &mut Connection,
    id: &str,
    epoch: u64,
) -> Result<StoredTransfer> {
    let source = |t: &StoredTransfer| t.transfer.source_zone.clone();
    set_arrived(conn, id, epoch, source, transfers::decide_release, false).map(|(row, _)| row)
}

/// The fenced writes of the `arrived` column (an arrival, a reclaim, its release): `decide`
/// checks `epoch` against the fence of the zone `zone_of` names and says whether anything is
/// left to write. Answers the row and whether this call wrote it.
fn set_arrived(
    conn: &mut Connection,
    id: &str,
    epoch: u64,
    zone_of: impl FnOnce(&StoredTransfer) -> String,
    decide: fn(u64, u64, &StoredTransfer) -> Result<Change>,
    arrived: bool,
) -> Result<(StoredTransfer, bool)> {
    transfers::check_transfer_id(id)?;
    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(sql_err)?;
    let stored = read_known(&tx, id)?;
    let fence = fence_of(&tx, &zone_of(&stored))?;
    if decide(fence, epoch, &stored)? == Change::Stored {
        return Ok((stored, false));
    }
    tx.execute_cached(
        "UPDATE zone_transfers SET arrived = ?2 WHERE id = ?1",
        params![id, arrived],
    )
    .map_err(sql_err)?;
    let row = read_known(&tx, id)?;
    tx.commit().map_err(sql_err)?;
    Ok((row, true))
}

pub(super) fn unclaimed_return(
    conn: &Connection,
    source_zone: &str,
    principal: &str,
    since_ms: u64,
) -> Result<Option<StoredTransfer>> {
    let which = "status = 'returned' AND arrived = 0";
    newest_from(conn, source_zone, principal, since_ms, which)
}

pub(super) fn get(conn: &Connection, id: &str) -> Result<Option<StoredTransfer>> {
    transfers::check_transfer_id(id)?;
    read(conn, id)
}

pub(super) fn open(conn: &Connection, zone_id: &str) -> Result<Vec<StoredTransfer>> {
    check_id("zone id", zone_id)?;
    let mut stmt = conn
        .prepare_cached(&format!(
            "SELECT {COLUMNS} FROM zone_transfers
             WHERE (status = 'pending' AND (source_zone = ?1 OR target_zone = ?1))
                OR (status = 'accepted' AND arrived = 0 AND target_zone = ?1)
             ORDER BY created_at_ms, id"
        ))
        .map_err(sql_err)?;
    let rows = stmt
        .query_map(params![zone_id], to_stored)
        .map_err(sql_err)?;
    rows.map(|r| r.map_err(sql_err).and_then(finish)).collect()
}

pub(super) fn latest_from(
    conn: &Connection,
    source_zone: &str,
    principal: &str,
    since_ms: u64,
) -> Result<Option<StoredTransfer>> {
    newest_from(
        conn,
        source_zone,
        principal,
        since_ms,
        "status = 'accepted'",
    )
}

/// The newest transfer of `principal` out of `source_zone` written at or after `since_ms` that
/// also matches `which` (a fixed condition of this module, never input).
fn newest_from(
    conn: &Connection,
    source_zone: &str,
    principal: &str,
    since_ms: u64,
    which: &'static str,
) -> Result<Option<StoredTransfer>> {
    check_id("zone id", source_zone)?;
    check_id("principal", principal)?;
    conn.query_row_cached(
        &format!(
            "SELECT {COLUMNS} FROM zone_transfers
             WHERE source_zone = ?1 AND principal = ?2 AND {which}
               AND created_at_ms >= ?3
             ORDER BY created_at_ms DESC, id DESC LIMIT 1"
        ),
        params![source_zone, principal, to_db("since", since_ms)?],
        to_stored,
    )
    .optional()
    .map_err(sql_err)?
    .map(finish)
    .transpose()
}

pub(super) fn prune(conn: &Connection, before_ms: u64) -> Result<u64> {
    let n = conn
        .execute_cached(
            "DELETE FROM zone_transfers WHERE status <> 'pending' AND created_at_ms < ?1",
            params![to_db("before", before_ms)?],
        )
        .map_err(sql_err)?;
    Ok(u64::try_from(n).unwrap_or(u64::MAX))
}
