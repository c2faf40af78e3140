//! Characters on a SQLite connection (see [`crate::CharacterStore`] for the contract).
//!
//! Every acquisition and write runs under `BEGIN IMMEDIATE`: reading the character's lease, the
//! zones' fences and writing the row are one serialized step, so two zones asking for one
//! character cannot both be granted, and a claim of a zone lands either before a write's check
//! (which is then fenced) or after its commit.

use rusqlite::{params, Connection, OptionalExtension, Transaction, TransactionBehavior};

use super::connection::CachedSql;
use super::sql_err;
use crate::characters::{
    self, check_args, check_principal, Acquire, CharacterAcquire, Holder, StoredCharacter,
};
use crate::error::{Result, StoreError};
use crate::validate::{from_db, to_db};

const COLUMNS: &str = "principal, data, version, holder_zone, holder_epoch, updated_at_ms";

type Raw = (String, Vec<u8>, i64, Option<String>, Option<i64>, i64);

fn finish(raw: Raw) -> Result<StoredCharacter> {
    let (principal, data, version, holder_zone, holder_epoch, updated_at_ms) = raw;
    let holder = match (holder_zone, holder_epoch) {
        (Some(zone), Some(epoch)) => Some((zone, from_db("holder epoch", epoch)?)),
        (None, None) => None,
        _ => {
            return Err(StoreError::Corrupt(format!(
                "character {principal:?}: holder zone and epoch must be set together"
            )))
        }
    };
    Ok(StoredCharacter {
        version: from_db("character version", version)?,
        updated_at_ms: from_db("updated_at_ms", updated_at_ms)?,
        principal,
        data,
        holder,
    })
}

fn read(conn: &Connection, principal: &str) -> Result<Option<StoredCharacter>> {
    conn.query_row_cached(
        &format!("SELECT {COLUMNS} FROM characters WHERE principal = ?1"),
        params![principal],
        |r| {
            Ok((
                r.get(0)?,
                r.get(1)?,
                r.get(2)?,
                r.get(3)?,
                r.get(4)?,
                r.get(5)?,
            ))
        },
    )
    .optional()
    .map_err(sql_err)?
    .map(finish)
    .transpose()
}

/// The stored lease holder alone (no data), if the character exists and is held.
fn read_holder(tx: &Transaction<'_>, principal: &str) -> Result<Option<(String, u64)>> {
    let row: Option<(Option<String>, Option<i64>)> = tx
        .query_row_cached(
            "SELECT holder_zone, holder_epoch FROM characters WHERE principal = ?1",
            params![principal],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .optional()
        .map_err(sql_err)?;
    match row {
        None | Some((None, None)) => Ok(None),
        Some((Some(zone), Some(epoch))) => Ok(Some((zone, from_db("holder epoch", epoch)?))),
        Some(_) => Err(StoreError::Corrupt(format!(
            "character {principal:?}: holder zone and epoch must be set together"
        ))),
    }
}

fn fence_of(tx: &Transaction<'_>, zone: &str) -> Result<u64> {
    from_db("epoch", super::saves::current_fence(tx, zone)?)
}

pub(super) fn acquire(
    conn: &mut Connection,
    principal: &str,
    zone: &str,
    epoch: u64,
) -> Result<CharacterAcquire> {
    check_args(principal, zone, epoch, None)?;
    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(sql_err)?;
    let fence = fence_of(&tx, zone)?;
    let stored = read(&tx, principal)?;
    let holder_fence = match stored.as_ref().and_then(|c| c.holder.as_ref()) {
        Some((holder_zone, _)) if holder_zone == zone => fence,
        Some((holder_zone, _)) => fence_of(&tx, holder_zone)?,
        None => 0,
    };
    let holder = stored
        .as_ref()
        .and_then(|c| c.holder.as_ref())
        .map(|(z, e)| Holder {
            zone: z,
            epoch: *e,
            fence: holder_fence,
        });
    match characters::decide_acquire(zone, epoch, fence, holder)? {
        Acquire::Held { zone, epoch } => Ok(CharacterAcquire::Held { zone, epoch }),
        Acquire::Grant { from } => {
            tx.execute_cached(
                concat!(
                    "INSERT INTO characters
                         (principal, data, version, holder_zone, holder_epoch, updated_at_ms)
                     VALUES (?1, X'', 0, ?2, ?3, ",
                    db_now_ms!(),
                    ")
                     ON CONFLICT (principal) DO UPDATE SET holder_zone = excluded.holder_zone,
                         holder_epoch = excluded.holder_epoch,
                         updated_at_ms = excluded.updated_at_ms"
                ),
                params![principal, zone, to_db("epoch", epoch)?],
            )
            .map_err(sql_err)?;
            let character = read(&tx, principal)?
                .ok_or_else(|| StoreError::Backend("character vanished".into()))?;
            tx.commit().map_err(sql_err)?;
            Ok(CharacterAcquire::Granted { character, from })
        }
    }
}

pub(super) fn commit(
    conn: &mut Connection,
    principal: &str,
    zone: &str,
    epoch: u64,
    data: &[u8],
) -> Result<u64> {
    write(conn, principal, zone, epoch, Some(data), false)
}

pub(super) fn release(
    conn: &mut Connection,
    principal: &str,
    zone: &str,
    epoch: u64,
    data: Option<&[u8]>,
) -> Result<u64> {
    write(conn, principal, zone, epoch, data, true)
}

/// A write by the holder: stores `data` when given (raising the version) and frees the lease when
/// `free`; answers the version after it.
fn write(
    conn: &mut Connection,
    principal: &str,
    zone: &str,
    epoch: u64,
    data: Option<&[u8]>,
    free: bool,
) -> Result<u64> {
    check_args(principal, zone, epoch, data)?;
    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(sql_err)?;
    let fence = fence_of(&tx, zone)?;
    let holder = read_holder(&tx, principal)?;
    characters::decide_write(
        principal,
        zone,
        epoch,
        fence,
        holder.as_ref().map(|(z, e)| (z.as_str(), *e)),
    )?;
    if let Some(data) = data {
        tx.execute_cached(
            concat!(
                "UPDATE characters SET data = ?2, version = version + 1, updated_at_ms = ",
                db_now_ms!(),
                " WHERE principal = ?1"
            ),
            params![principal, data],
        )
        .map_err(sql_err)?;
    }
    if free {
        tx.execute_cached(
            concat!(
                "UPDATE characters SET holder_zone = NULL, holder_epoch = NULL, updated_at_ms = ",
                db_now_ms!(),
                " WHERE principal = ?1"
            ),
            params![principal],
        )
        .map_err(sql_err)?;
    }
    let version: i64 = tx
        .query_row_cached(
            "SELECT version FROM characters WHERE principal = ?1",
            params![principal],
            |r| r.get(0),
        )
        .map_err(sql_err)?;
    tx.commit().map_err(sql_err)?;
    from_db("character version", version)
}

pub(super) fn load(conn: &Connection, principal: &str) -> Result<Option<StoredCharacter>> {
    check_principal(principal)?;
    read(conn, principal)
}
