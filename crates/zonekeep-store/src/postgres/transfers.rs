//! Transfer records on PostgreSQL (see [`crate::TransferLedger`] for the contract).
//!
//! A change locks the writer's zone fence row first (the lock saves, facts and claims take, so a
//! claim of that zone waits for it or fences it), then the transfer's row (`FOR UPDATE`), then asks
//! the shared decision. Locks are always taken in that order, so changes by the source and by the
//! target of one transfer cannot deadlock: each holds only its own zone's fence.

use async_trait::async_trait;
use tokio_postgres::{GenericClient, Row, Transaction};

use super::saves::lock_current_fence;
use super::{col, PgErr, PostgresStore};
use crate::error::{Result, StoreError};
use crate::transfers::{
    self, Begin, Change, NewTransfer, Reclaim, StoredTransfer, TransferLedger, TransferStatus,
};
use crate::validate::{check_id, from_db, now_ms, to_db};

const COLUMNS: &str = "id, principal, player, source_zone, source_epoch, target_zone, claims, \
     player_claims, state, status, target_epoch, reason, arrived, created_at_ms, resolved_at_ms";

fn to_stored(row: &Row) -> Result<StoredTransfer> {
    let id: String = col(row, 0)?;
    let player: i64 = col(row, 2)?;
    let player = u32::try_from(player).map_err(|_| {
        StoreError::Corrupt(format!("transfer {id:?}: player id {player} out of range"))
    })?;
    let status: String = col(row, 9)?;
    Ok(StoredTransfer {
        transfer: NewTransfer {
            principal: col(row, 1)?,
            player,
            source_zone: col(row, 3)?,
            source_epoch: from_db("source epoch", col(row, 4)?)?,
            target_zone: col(row, 5)?,
            claims: col(row, 6)?,
            player_claims: col(row, 7)?,
            state: col(row, 8)?,
            id,
        },
        status: TransferStatus::parse(&status)?,
        target_epoch: col::<Option<i64>>(row, 10)?
            .map(|e| from_db("target epoch", e))
            .transpose()?,
        reason: col(row, 11)?,
        arrived: col(row, 12)?,
        created_at_ms: from_db("created_at_ms", col(row, 13)?)?,
        resolved_at_ms: col::<Option<i64>>(row, 14)?
            .map(|t| from_db("resolved_at_ms", t))
            .transpose()?,
    })
}

async fn read<C: GenericClient + Sync>(
    client: &C,
    id: &str,
    lock: bool,
    err: &PgErr,
) -> Result<Option<StoredTransfer>> {
    let lock = if lock { " FOR UPDATE" } else { "" };
    client
        .query_opt(
            &format!("SELECT {COLUMNS} FROM zone_transfers WHERE id = $1{lock}"),
            &[&id],
        )
        .await
        .map_err(|e| err.map(e))?
        .as_ref()
        .map(to_stored)
        .transpose()
}

/// Locks `zone_id`'s fence, then the transfer's row, and answers both.
async fn lock(
    tx: &Transaction<'_>,
    id: &str,
    zone_of: impl Fn(&StoredTransfer) -> String,
    err: &PgErr,
) -> Result<(u64, StoredTransfer)> {
    // Which zone's fence to take depends on the row; read it unlocked first (its zones never
    // change), then lock in the fixed order: fence, row.
    let unlocked = read(tx, id, false, err)
        .await?
        .ok_or_else(|| StoreError::UnknownTransfer(id.to_owned()))?;
    let fence = lock_current_fence(tx, &zone_of(&unlocked), err).await?;
    let stored = read(tx, id, true, err)
        .await?
        .ok_or_else(|| StoreError::UnknownTransfer(id.to_owned()))?;
    Ok((fence, stored))
}

async fn finish(tx: Transaction<'_>, id: &str, err: &PgErr) -> Result<StoredTransfer> {
    let row = read(&tx, id, false, err)
        .await?
        .ok_or_else(|| StoreError::UnknownTransfer(id.to_owned()))?;
    tx.commit().await.map_err(|e| err.map(e))?;
    Ok(row)
}

pub(super) async fn begin(
    tx: Transaction<'_>,
    new: &NewTransfer,
    err: &PgErr,
) -> Result<StoredTransfer> {
    transfers::check_new(new)?;
    let fence = lock_current_fence(&tx, &new.source_zone, err).await?;
    let stored = read(&tx, &new.id, true, err).await?;
    match transfers::decide_begin(fence, new, stored.as_ref())? {
        Begin::Stored => stored.ok_or_else(|| StoreError::UnknownTransfer(new.id.clone())),
        Begin::Insert => {
            let inserted = tx
                .execute(
                    "INSERT INTO zone_transfers (id, principal, player, source_zone, source_epoch,
                         target_zone, claims, player_claims, state, status, created_at_ms)
                     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, 'pending', $10)
                     ON CONFLICT (id) DO NOTHING",
                    &[
                        &new.id,
                        &new.principal,
                        &i64::from(new.player),
                        &new.source_zone,
                        &to_db("source epoch", new.source_epoch)?,
                        &new.target_zone,
                        &new.claims,
                        &new.player_claims,
                        &new.state,
                        &now_ms(),
                    ],
                )
                .await
                .map_err(|e| err.map(e))?;
            if inserted == 0 {
                // Another begin of the same id committed between the read and the insert (both
                // held the source's fence lock in turn, so it is the same source): decide again.
                let stored = read(&tx, &new.id, true, err).await?;
                transfers::decide_begin(fence, new, stored.as_ref())?;
            }
            finish(tx, &new.id, err).await
        }
    }
}

pub(super) async fn accept(
    tx: Transaction<'_>,
    id: &str,
    epoch: u64,
    err: &PgErr,
) -> Result<StoredTransfer> {
    transfers::check_transfer_id(id)?;
    let (fence, stored) = lock(&tx, id, |t| t.transfer.target_zone.clone(), err).await?;
    if transfers::decide_accept(fence, epoch, &stored)? == Change::Stored {
        return Ok(stored);
    }
    tx.execute(
        "UPDATE zone_transfers SET status = 'accepted', target_epoch = $2, resolved_at_ms = $3
         WHERE id = $1",
        &[&id, &to_db("target epoch", epoch)?, &now_ms()],
    )
    .await
    .map_err(|e| err.map(e))?;
    finish(tx, id, err).await
}

pub(super) async fn give_back(
    tx: Transaction<'_>,
    id: &str,
    zone_id: &str,
    epoch: u64,
    reason: &str,
    err: &PgErr,
) -> Result<StoredTransfer> {
    transfers::check_transfer_id(id)?;
    check_id("zone id", zone_id)?;
    let zone = zone_id.to_owned();
    let (fence, stored) = lock(&tx, id, move |_| zone.clone(), err).await?;
    if transfers::decide_return(fence, zone_id, epoch, &stored)? == Change::Stored {
        return Ok(stored);
    }
    tx.execute(
        "UPDATE zone_transfers SET status = 'returned', reason = $2, resolved_at_ms = $3
         WHERE id = $1",
        &[&id, &transfers::clip_reason(reason), &now_ms()],
    )
    .await
    .map_err(|e| err.map(e))?;
    finish(tx, id, err).await
}

pub(super) async fn arrive(
    tx: Transaction<'_>,
    id: &str,
    epoch: u64,
    err: &PgErr,
) -> Result<StoredTransfer> {
    let target = |t: &StoredTransfer| t.transfer.target_zone.clone();
    let (row, _) = set_arrived(tx, id, epoch, target, transfers::decide_arrive, true, err).await?;
    Ok(row)
}

pub(super) async fn reclaim(
    tx: Transaction<'_>,
    id: &str,
    epoch: u64,
    err: &PgErr,
) -> Result<Reclaim> {
    let source = |t: &StoredTransfer| t.transfer.source_zone.clone();
    let (transfer, by_this_call) =
        set_arrived(tx, id, epoch, source, transfers::decide_reclaim, true, err).await?;
    Ok(Reclaim {
        transfer,
        by_this_call,
    })
}

pub(super) async fn release_reclaim(
    tx: Transaction<'_>,
    id: &str,
    epoch: u64,
    err: &PgErr,
) -> Result<StoredTransfer> {
    let source = |t: &StoredTransfer| t.transfer.source_zone.clone();
    let (row, _) =
        set_arrived(tx, id, epoch, source, transfers::decide_release, false, err).await?;
    Ok(row)
}

/// The fenced writes of the `arrived` column (an arrival, a reclaim, its release): `decide`
/// checks `epoch` against the fence of the zone `zone_of` names and says whether anything is
/// left to write. Answers the row and whether this call wrote it.
async fn set_arrived(
    tx: Transaction<'_>,
    id: &str,
    epoch: u64,
    zone_of: impl Fn(&StoredTransfer) -> String,
    decide: fn(u64, u64, &StoredTransfer) -> Result<Change>,
    arrived: bool,
    err: &PgErr,
) -> Result<(StoredTransfer, bool)> {
    transfers::check_transfer_id(id)?;
    let (fence, stored) = lock(&tx, id, zone_of, err).await?;
    if decide(fence, epoch, &stored)? == Change::Stored {
        return Ok((stored, false));
    }
    tx.execute(
        "UPDATE zone_transfers SET arrived = $2 WHERE id = $1",
        &[&id, &arrived],
    )
    .await
    .map_err(|e| err.map(e))?;
    Ok((finish(tx, id, err).await?, true))
}

pub(super) async fn unclaimed_return<C: GenericClient + Sync>(
    client: &C,
    source_zone: &str,
    principal: &str,
    since_ms: u64,
    err: &PgErr,
) -> Result<Option<StoredTransfer>> {
    let which = "status = 'returned' AND NOT arrived";
    newest_from(client, source_zone, principal, since_ms, which, err).await
}

pub(super) async fn get<C: GenericClient + Sync>(
    client: &C,
    id: &str,
    err: &PgErr,
) -> Result<Option<StoredTransfer>> {
    transfers::check_transfer_id(id)?;
    read(client, id, false, err).await
}

pub(super) async fn open<C: GenericClient + Sync>(
    client: &C,
    zone_id: &str,
    err: &PgErr,
) -> Result<Vec<StoredTransfer>> {
    check_id("zone id", zone_id)?;
    let rows = client
        .query(
            &format!(
                "SELECT {COLUMNS} FROM zone_transfers
                 WHERE (status = 'pending' AND (source_zone = $1 OR target_zone = $1))
                    OR (status = 'accepted' AND NOT arrived AND target_zone = $1)
                 ORDER BY created_at_ms, id"
            ),
            &[&zone_id],
        )
        .await
        .map_err(|e| err.map(e))?;
    rows.iter().map(to_stored).collect()
}

pub(super) async fn latest_from<C: GenericClient + Sync>(
    client: &C,
    source_zone: &str,
    principal: &str,
    since_ms: u64,
    err: &PgErr,
) -> Result<Option<StoredTransfer>> {
    newest_from(
        client,
        source_zone,
        principal,
        since_ms,
        "status = 'accepted'",
        err,
    )
    .await
}

/// The newest transfer of `principal` out of `source_zone` written at or after `since_ms` that
/// also matches `which` (a fixed condition of this module, never input).
async fn newest_from<C: GenericClient + Sync>(
    client: &C,
    source_zone: &str,
    principal: &str,
    since_ms: u64,
    which: &'static str,
    err: &PgErr,
) -> Result<Option<StoredTransfer>> {
    check_id("zone id", source_zone)?;
    check_id("principal", principal)?;
    client
        .query_opt(
            &format!(
                "SELECT {COLUMNS} FROM zone_transfers
                 WHERE source_zone = $1 AND principal = $2 AND {which}
                   AND created_at_ms >= $3
                 ORDER BY created_at_ms DESC, id DESC LIMIT 1"
            ),
            &[&source_zone, &principal, &to_db("since", since_ms)?],
        )
        .await
        .map_err(|e| err.map(e))?
        .as_ref()
        .map(to_stored)
        .transpose()
}

pub(super) async fn prune<C: GenericClient + Sync>(
    client: &C,
    before_ms: u64,
    err: &PgErr,
) -> Result<u64> {
    client
        .execute(
            "DELETE FROM zone_transfers WHERE status <> 'pending' AND created_at_ms < $1",
            &[&to_db("before", before_ms)?],
        )
        .await
        .map_err(|e| err.map(e))
}

#[async_trait]
impl TransferLedger for PostgresStore {
    async fn begin_transfer(&self, transfer: &NewTransfer) -> Result<StoredTransfer> {
        let mut client = self.client().await?;
        let tx = self.begin(&mut client).await?;
        begin(tx, transfer, &self.err).await
    }

    async fn accept_transfer(&self, id: &str, target_epoch: u64) -> Result<StoredTransfer> {
        let mut client = self.client().await?;
        let tx = self.begin(&mut client).await?;
        accept(tx, id, target_epoch, &self.err).await
    }

    async fn return_transfer(
        &self,
        id: &str,
        zone_id: &str,
        epoch: u64,
        reason: &str,
    ) -> Result<StoredTransfer> {
        let mut client = self.client().await?;
        let tx = self.begin(&mut client).await?;
        give_back(tx, id, zone_id, epoch, reason, &self.err).await
    }

    async fn arrive_transfer(&self, id: &str, target_epoch: u64) -> Result<StoredTransfer> {
        let mut client = self.client().await?;
        let tx = self.begin(&mut client).await?;
        arrive(tx, id, target_epoch, &self.err).await
    }

    async fn transfer(&self, id: &str) -> Result<Option<StoredTransfer>> {
        let client = self.client().await?;
        get(&**client, id, &self.err).await
    }

    async fn open_transfers(&self, zone_id: &str) -> Result<Vec<StoredTransfer>> {
        let client = self.client().await?;
        open(&**client, zone_id, &self.err).await
    }

    async fn latest_transfer_from(
        &self,
        source_zone: &str,
        principal: &str,
        since_ms: u64,
    ) -> Result<Option<StoredTransfer>> {
        let client = self.client().await?;
        latest_from(&**client, source_zone, principal, since_ms, &self.err).await
    }

    async fn reclaim_transfer(&self, id: &str, source_epoch: u64) -> Result<Reclaim> {
        let mut client = self.client().await?;
        let tx = self.begin(&mut client).await?;
        reclaim(tx, id, source_epoch, &self.err).await
    }

    async fn release_reclaim(&self, id: &str, source_epoch: u64) -> Result<StoredTransfer> {
        let mut client = self.client().await?;
        let tx = self.begin(&mut client).await?;
        release_reclaim(tx, id, source_epoch, &self.err).await
    }

    async fn unclaimed_return(
        &self,
        source_zone: &str,
        principal: &str,
        since_ms: u64,
    ) -> Result<Option<StoredTransfer>> {
        let client = self.client().await?;
        unclaimed_return(&**client, source_zone, principal, since_ms, &self.err).await
    }

    async fn prune_transfers(&self, before_ms: u64) -> Result<u64> {
        let client = self.client().await?;
        prune(&**client, before_ms, &self.err).await
    }
}
