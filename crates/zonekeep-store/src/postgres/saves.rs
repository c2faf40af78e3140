//! Zone save operations on PostgreSQL (see [`crate::SaveStore`] for the contract and the module
//! docs of [`super`] for the locking pattern).

use async_trait::async_trait;
use tokio_postgres::{Client, Row, Transaction};

use super::{col, PgErr, PostgresStore};
use crate::error::{Result, StoreError};
use crate::fence::{self, Decision, StoredSave};
use crate::traits::SaveStore;
use crate::types::{Claim, SaveMeta, SaveRecord, WriteOutcome};
use crate::validate::{check_id, from_db, now_ms, to_db};

const SELECT_SAVE: &str =
    "SELECT zone_id, kind, epoch, seq, bytes, saved_at_ms FROM zone_saves WHERE zone_id = $1";

fn to_record(row: &Row) -> Result<SaveRecord> {
    let get_i64 = |i: usize| col::<i64>(row, i);
    Ok(SaveRecord {
        zone_id: col(row, 0)?,
        kind: col(row, 1)?,
        epoch: from_db("epoch", get_i64(2)?)?,
        seq: from_db("seq", get_i64(3)?)?,
        bytes: col(row, 4)?,
        saved_at_ms: from_db("saved_at_ms", get_i64(5)?)?,
    })
}

/// Makes sure the zone has a fence row and locks it for the rest of the transaction; returns the
/// fence. Every save operation starts here, which serializes them per zone across all hosts.
pub(super) async fn lock_fence(tx: &Transaction<'_>, zone_id: &str, err: &PgErr) -> Result<i64> {
    tx.execute(
        "INSERT INTO zone_fences (zone_id, epoch) VALUES ($1, 0) ON CONFLICT (zone_id) DO NOTHING",
        &[&zone_id],
    )
    .await
    .map_err(|e| err.map(e))?;
    tx.query_one(
        "SELECT epoch FROM zone_fences WHERE zone_id = $1 FOR UPDATE",
        &[&zone_id],
    )
    .await
    .map_err(|e| err.map(e))?
    .try_get(0)
    .map_err(super::corrupt_column)
}

pub(super) async fn claim(tx: Transaction<'_>, zone_id: &str, err: &PgErr) -> Result<Claim> {
    check_id("zone id", zone_id)?;
    let fence = lock_fence(&tx, zone_id, err).await?;
    let claim = raise_fence(&tx, zone_id, fence, err).await?;
    tx.commit().await.map_err(|e| err.map(e))?;
    Ok(claim)
}

/// Raises the zone's fence (`fence`, its row already locked by [`lock_fence`] in this transaction)
/// to the next epoch above it and above the stored save's, and reads that save: the one fence raise
/// behind both [`claim`] and the directory's claims and moves.
pub(super) async fn raise_fence(
    tx: &Transaction<'_>,
    zone_id: &str,
    fence: i64,
    err: &PgErr,
) -> Result<Claim> {
    let last = tx
        .query_opt(SELECT_SAVE, &[&zone_id])
        .await
        .map_err(|e| err.map(e))?
        .map(|row| to_record(&row))
        .transpose()?;
    let save_epoch = match &last {
        Some(save) => to_db("epoch", save.epoch)?,
        None => 0,
    };
    let epoch = fence
        .max(save_epoch)
        .checked_add(1)
        .ok_or_else(|| StoreError::Corrupt(format!("epoch of zone {zone_id:?} exhausted")))?;
    tx.execute(
        "UPDATE zone_fences SET epoch = $2 WHERE zone_id = $1",
        &[&zone_id, &epoch],
    )
    .await
    .map_err(|e| err.map(e))?;
    Ok(Claim {
        epoch: from_db("epoch", epoch)?,
        last,
    })
}

/// Locks the zone's fence row (see [`lock_fence`]) and returns the zone's fence: the row, but never
/// below the stored save's epoch.
pub(super) async fn lock_current_fence(
    tx: &Transaction<'_>,
    zone_id: &str,
    err: &PgErr,
) -> Result<u64> {
    let fence = lock_fence(tx, zone_id, err).await?;
    let save_epoch = stored_save_epoch(tx, zone_id, err).await?;
    from_db("epoch", fence.max(save_epoch.unwrap_or(0)))
}

/// Reads the zone's fence without taking it over: the fence row `FOR SHARE` (a claim, which locks
/// it `FOR UPDATE`, waits until this transaction ends, and this one waits for a claim in progress),
/// but never below the stored save's epoch; 0 for a zone never claimed or written. Writes that
/// only need to be fenced by the zone, and must not serialize with each other, start here.
pub(super) async fn share_current_fence(
    tx: &Transaction<'_>,
    zone_id: &str,
    err: &PgErr,
) -> Result<u64> {
    let fence_row: Option<i64> = tx
        .query_opt(
            "SELECT epoch FROM zone_fences WHERE zone_id = $1 FOR SHARE",
            &[&zone_id],
        )
        .await
        .map_err(|e| err.map(e))?
        .map(|row| col(&row, 0))
        .transpose()?;
    let save_epoch = stored_save_epoch(tx, zone_id, err).await?;
    from_db("epoch", fence_row.unwrap_or(0).max(save_epoch.unwrap_or(0)))
}

/// The epoch of the zone's stored save, if it has one.
async fn stored_save_epoch(
    tx: &Transaction<'_>,
    zone_id: &str,
    err: &PgErr,
) -> Result<Option<i64>> {
    tx.query_opt(
        "SELECT epoch FROM zone_saves WHERE zone_id = $1",
        &[&zone_id],
    )
    .await
    .map_err(|e| err.map(e))?
    .map(|row| col(&row, 0))
    .transpose()
}

pub(super) async fn write(
    tx: Transaction<'_>,
    zone_id: &str,
    epoch: u64,
    seq: u64,
    kind: &str,
    bytes: &[u8],
    err: &PgErr,
) -> Result<WriteOutcome> {
    check_id("zone id", zone_id)?;
    check_id("zone kind", kind)?;
    let db_epoch = to_db("epoch", epoch)?;
    let db_seq = to_db("seq", seq)?;
    let fence = from_db("epoch", lock_fence(&tx, zone_id, err).await?)?;
    // Comparing in SQL avoids reading the stored blob back just to compare it.
    let stored = tx
        .query_opt(
            "SELECT epoch, seq, (kind = $2 AND bytes = $3) FROM zone_saves WHERE zone_id = $1",
            &[&zone_id, &kind, &bytes],
        )
        .await
        .map_err(|e| err.map(e))?
        .map(|row| -> Result<StoredSave> {
            Ok(StoredSave {
                epoch: from_db("epoch", col(&row, 0)?)?,
                seq: from_db("seq", col(&row, 1)?)?,
                same_content: col(&row, 2)?,
            })
        })
        .transpose()?;
    match fence::decide(fence, stored, epoch, seq)? {
        Decision::AlreadyDone => Ok(WriteOutcome::AlreadyDone),
        Decision::Write { new_fence } => {
            tx.execute(
                "UPDATE zone_fences SET epoch = GREATEST(epoch, $2) WHERE zone_id = $1",
                &[&zone_id, &to_db("epoch", new_fence)?],
            )
            .await
            .map_err(|e| err.map(e))?;
            tx.execute(
                "INSERT INTO zone_saves (zone_id, kind, epoch, seq, bytes, saved_at_ms)
                 VALUES ($1, $2, $3, $4, $5, $6)
                 ON CONFLICT (zone_id) DO UPDATE SET kind = EXCLUDED.kind,
                     epoch = EXCLUDED.epoch, seq = EXCLUDED.seq, bytes = EXCLUDED.bytes,
                     saved_at_ms = EXCLUDED.saved_at_ms",
                &[&zone_id, &kind, &db_epoch, &db_seq, &bytes, &now_ms()],
            )
            .await
            .map_err(|e| err.map(e))?;
            tx.commit().await.map_err(|e| err.map(e))?;
            Ok(WriteOutcome::Written)
        }
    }
}

pub(super) async fn load(
    client: &Client,
    zone_id: &str,
    err: &PgErr,
) -> Result<Option<SaveRecord>> {
    check_id("zone id", zone_id)?;
    client
        .query_opt(SELECT_SAVE, &[&zone_id])
        .await
        .map_err(|e| err.map(e))?
        .map(|row| to_record(&row))
        .transpose()
}

pub(super) async fn list(client: &Client, err: &PgErr) -> Result<Vec<SaveMeta>> {
    let rows = client
        .query(
            "SELECT s.zone_id, s.kind, s.epoch, GREATEST(s.epoch, coalesce(f.epoch, 0)), s.seq,
                    octet_length(s.bytes)::BIGINT, s.saved_at_ms
             FROM zone_saves s LEFT JOIN zone_fences f ON f.zone_id = s.zone_id
             ORDER BY s.zone_id",
            &[],
        )
        .await
        .map_err(|e| err.map(e))?;
    rows.iter()
        .map(|row| {
            let get_i64 = |i: usize| col::<i64>(row, i);
            Ok(SaveMeta {
                zone_id: col(row, 0)?,
                kind: col(row, 1)?,
                epoch: from_db("epoch", get_i64(2)?)?,
                fence_epoch: from_db("epoch", get_i64(3)?)?,
                seq: from_db("seq", get_i64(4)?)?,
                size: from_db("size", get_i64(5)?)?,
                saved_at_ms: from_db("saved_at_ms", get_i64(6)?)?,
            })
        })
        .collect()
}

pub(super) async fn delete(tx: Transaction<'_>, zone_id: &str, err: &PgErr) -> Result<bool> {
    check_id("zone id", zone_id)?;
    lock_fence(&tx, zone_id, err).await?;
    let deleted = tx
        .query_opt(
            "DELETE FROM zone_saves WHERE zone_id = $1 RETURNING epoch",
            &[&zone_id],
        )
        .await
        .map_err(|e| err.map(e))?;
    let Some(row) = deleted else {
        tx.commit().await.map_err(|e| err.map(e))?;
        return Ok(false);
    };
    let epoch: i64 = col(&row, 0)?;
    // Keep the deleted save's epoch in the fence, so deleting never lets an old owner back in.
    tx.execute(
        "UPDATE zone_fences SET epoch = GREATEST(epoch, $2) WHERE zone_id = $1",
        &[&zone_id, &epoch],
    )
    .await
    .map_err(|e| err.map(e))?;
    tx.commit().await.map_err(|e| err.map(e))?;
    Ok(true)
}

#[async_trait]
impl SaveStore for PostgresStore {
    async fn claim(&self, zone_id: &str) -> Result<Claim> {
        let mut client = self.client().await?;
        let tx = self.begin(&mut client).await?;
        claim(tx, zone_id, &self.err).await
    }

    async fn write(
        &self,
        zone_id: &str,
        epoch: u64,
        seq: u64,
        kind: &str,
        bytes: &[u8],
    ) -> Result<WriteOutcome> {
        let mut client = self.client().await?;
        let tx = self.begin(&mut client).await?;
        write(tx, zone_id, epoch, seq, kind, bytes, &self.err).await
    }

    async fn load(&self, zone_id: &str) -> Result<Option<SaveRecord>> {
        let client = self.client().await?;
        load(&client, zone_id, &self.err).await
    }

    async fn list(&self) -> Result<Vec<SaveMeta>> {
        let client = self.client().await?;
        list(&client, &self.err).await
    }

    async fn delete(&self, zone_id: &str) -> Result<bool> {
        let mut client = self.client().await?;
        let tx = self.begin(&mut client).await?;
        delete(tx, zone_id, &self.err).await
    }
}
