//! Characters on PostgreSQL (see [`crate::CharacterStore`] for the contract).
//!
//! Every acquisition and write locks the character's row first (`INSERT .. ON CONFLICT DO
//! NOTHING` for an acquisition, so even a new principal has a row to lock, then
//! `SELECT .. FOR UPDATE`), which serializes everything done to one character across all hosts.
//! Then it reads the fences it needs `FOR SHARE` (the asking zone's, and for an acquisition the
//! holder zone's): a claim of one of those zones waits until this transaction ends, or, if it
//! committed first, is seen and fences the call. Fence rows are only ever shared here, and the
//! transactions that take them `FOR UPDATE` (claims, saves, directory changes) lock no character,
//! so character calls never wait on each other through a fence and cannot deadlock with claims.

use async_trait::async_trait;
use tokio_postgres::{Row, Transaction};

use super::saves::share_current_fence;
use super::{col, PgErr, PostgresStore};
use crate::characters::{
    self, check_args, check_principal, Acquire, CharacterAcquire, CharacterStore, Holder,
    StoredCharacter,
};
use crate::error::{Result, StoreError};
use crate::validate::{from_db, to_db};

const COLUMNS: &str = "principal, data, version, holder_zone, holder_epoch, updated_at_ms";

/// The holder columns at `zone_idx` and `zone_idx + 1`, checked to be set together.
fn holder_of(row: &Row, principal: &str, zone_idx: usize) -> Result<Option<(String, u64)>> {
    let zone: Option<String> = col(row, zone_idx)?;
    let epoch: Option<i64> = col(row, zone_idx + 1)?;
    match (zone, epoch) {
        (Some(zone), Some(epoch)) => Ok(Some((zone, from_db("holder epoch", epoch)?))),
        (None, None) => Ok(None),
        _ => Err(StoreError::Corrupt(format!(
            "character {principal:?}: holder zone and epoch must be set together"
        ))),
    }
}

fn to_stored(row: &Row) -> Result<StoredCharacter> {
    let principal: String = col(row, 0)?;
    Ok(StoredCharacter {
        data: col(row, 1)?,
        version: from_db("character version", col(row, 2)?)?,
        holder: holder_of(row, &principal, 3)?,
        updated_at_ms: from_db("updated_at_ms", col(row, 5)?)?,
        principal,
    })
}

pub(super) async fn acquire(
    tx: Transaction<'_>,
    principal: &str,
    zone: &str,
    epoch: u64,
    err: &PgErr,
) -> Result<CharacterAcquire> {
    check_args(principal, zone, epoch, None)?;
    // A new principal's row is created free and empty, so there is always a row to lock; if the
    // acquisition is refused, the transaction rolls back and the row was never there.
    tx.execute(
        concat!(
            "INSERT INTO characters
                 (principal, data, version, holder_zone, holder_epoch, updated_at_ms)
             VALUES ($1, ''::bytea, 0, NULL, NULL, ",
            db_now_ms!(),
            ") ON CONFLICT (principal) DO NOTHING"
        ),
        &[&principal],
    )
    .await
    .map_err(|e| err.map(e))?;
    let row = tx
        .query_one(
            &format!("SELECT {COLUMNS} FROM characters WHERE principal = $1 FOR UPDATE"),
            &[&principal],
        )
        .await
        .map_err(|e| err.map(e))?;
    let stored = to_stored(&row)?;
    let fence = share_current_fence(&tx, zone, err).await?;
    let holder_fence = match &stored.holder {
        Some((holder_zone, _)) if holder_zone == zone => fence,
        Some((holder_zone, _)) => share_current_fence(&tx, holder_zone, err).await?,
        None => 0,
    };
    let holder = stored.holder.as_ref().map(|(z, e)| Holder {
        zone: z,
        epoch: *e,
        fence: holder_fence,
    });
    match characters::decide_acquire(zone, epoch, fence, holder)? {
        Acquire::Held { zone, epoch } => Ok(CharacterAcquire::Held { zone, epoch }),
        Acquire::Grant { from } => {
            let row = tx
                .query_one(
                    &format!(
                        "UPDATE characters SET holder_zone = $2, holder_epoch = $3,
                             updated_at_ms = {}
                         WHERE principal = $1
                         RETURNING {COLUMNS}",
                        db_now_ms!()
                    ),
                    &[&principal, &zone, &to_db("epoch", epoch)?],
                )
                .await
                .map_err(|e| err.map(e))?;
            let character = to_stored(&row)?;
            tx.commit().await.map_err(|e| err.map(e))?;
            Ok(CharacterAcquire::Granted { character, from })
        }
    }
}

/// A write by the holder: stores `data` when given (raising the version) and frees the lease when
/// `free`, in one transaction; answers the version after it.
pub(super) async fn write(
    tx: Transaction<'_>,
    principal: &str,
    zone: &str,
    epoch: u64,
    data: Option<&[u8]>,
    free: bool,
    err: &PgErr,
) -> Result<u64> {
    check_args(principal, zone, epoch, data)?;
    let holder = match tx
        .query_opt(
            "SELECT holder_zone, holder_epoch FROM characters WHERE principal = $1 FOR UPDATE",
            &[&principal],
        )
        .await
        .map_err(|e| err.map(e))?
    {
        Some(row) => holder_of(&row, principal, 0)?,
        None => None,
    };
    let fence = share_current_fence(&tx, zone, err).await?;
    characters::decide_write(
        principal,
        zone,
        epoch,
        fence,
        holder.as_ref().map(|(z, e)| (z.as_str(), *e)),
    )?;
    let row = tx
        .query_one(
            &format!(
                "UPDATE characters SET
                     data = coalesce($2, data),
                     version = version + CASE WHEN $2::bytea IS NULL THEN 0 ELSE 1 END,
                     holder_zone = CASE WHEN $3 THEN NULL ELSE holder_zone END,
                     holder_epoch = CASE WHEN $3 THEN NULL ELSE holder_epoch END,
                     updated_at_ms = {}
                 WHERE principal = $1
                 RETURNING version",
                db_now_ms!()
            ),
            &[&principal, &data, &free],
        )
        .await
        .map_err(|e| err.map(e))?;
    let version = from_db("character version", col(&row, 0)?)?;
    tx.commit().await.map_err(|e| err.map(e))?;
    Ok(version)
}

pub(super) async fn load(
    client: &tokio_postgres::Client,
    principal: &str,
    err: &PgErr,
) -> Result<Option<StoredCharacter>> {
    check_principal(principal)?;
    client
        .query_opt(
            &format!("SELECT {COLUMNS} FROM characters WHERE principal = $1"),
            &[&principal],
        )
        .await
        .map_err(|e| err.map(e))?
        .as_ref()
        .map(to_stored)
        .transpose()
}

#[async_trait]
impl CharacterStore for PostgresStore {
    async fn acquire_character(
        &self,
        principal: &str,
        zone: &str,
        epoch: u64,
    ) -> Result<CharacterAcquire> {
        crate::characters::check_args(principal, zone, epoch, None)?;
        let mut client = self.client().await?;
        let tx = self.begin(&mut client).await?;
        acquire(tx, principal, zone, epoch, &self.err).await
    }

    async fn commit_character(
        &self,
        principal: &str,
        zone: &str,
        epoch: u64,
        data: &[u8],
    ) -> Result<u64> {
        crate::characters::check_args(principal, zone, epoch, Some(data))?;
        let mut client = self.client().await?;
        let tx = self.begin(&mut client).await?;
        write(tx, principal, zone, epoch, Some(data), false, &self.err).await
    }

    async fn release_character(
        &self,
        principal: &str,
        zone: &str,
        epoch: u64,
        data: Option<&[u8]>,
    ) -> Result<u64> {
        crate::characters::check_args(principal, zone, epoch, data)?;
        let mut client = self.client().await?;
        let tx = self.begin(&mut client).await?;
        write(tx, principal, zone, epoch, data, true, &self.err).await
    }

    async fn load_character(&self, principal: &str) -> Result<Option<StoredCharacter>> {
        crate::characters::check_principal(principal)?;
        let client = self.client().await?;
        load(&client, principal, &self.err).await
    }
}
