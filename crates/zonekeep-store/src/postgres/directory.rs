//! Fleet directory operations on PostgreSQL (see [`crate::Directory`] for the contract and the
//! module docs of [`super`] for the locking pattern).
//!
//! Every change to a zone's entry (claim, move, release, forget) first locks the zone's fence row,
//! the lock every save, fact check and claim of that zone takes, so directory changes of one zone
//! are serialized with each other and with its fenced writes across all hosts. Host rows are never
//! locked by zone operations (only by a registration of the same id), so there is no lock cycle.
//! Heartbeats are stamped and ages computed by the server's clock (`clock_timestamp()`, which
//! advances within a transaction, unlike `now()`), in SQL. Listings sort with `COLLATE "C"`, i.e.
//! by bytes, as SQLite and Rust strings do, whatever the database's default collation.

use std::time::Duration;

use async_trait::async_trait;
use tokio_postgres::{Client, GenericClient, Row, Transaction};
use zonekeep_fleet::claim::Decision;
use zonekeep_fleet::Timing;

use super::saves::{lock_current_fence, lock_fence, raise_fence};
use super::{col, PgErr, PostgresStore};
use crate::directory::{
    ClaimRequest, Directory, HostRecord, HostRegistration, ZoneClaim, ZoneLocation,
};
use crate::directory_rows::{
    check_claim, check_host_id_free, check_move, check_registration, count_u32, decide_claim,
    duration_ms, may_release, unchanged, HostRow, LocationRow,
};
use crate::error::{Result, StoreError};
use crate::validate::{check_id, from_db, to_db};

/// A zone's entry joined with its owner's host row and its fence. The age is NULL when the owner
/// has no host row (`GREATEST` alone would turn that NULL into 0).
macro_rules! select_location {
    () => {
        concat!(
            "SELECT d.zone_id, d.kind, d.params, d.owner, h.url, h.has_left,
                    CASE WHEN h.host_id IS NULL THEN NULL
                         ELSE GREATEST(0, ",
            db_now_ms!(),
            " - h.heartbeat_ms) END,
                    GREATEST(coalesce(f.epoch, 0), coalesce(s.epoch, 0))
             FROM zone_directory d
             LEFT JOIN fleet_hosts h ON h.host_id = d.owner
             LEFT JOIN zone_fences f ON f.zone_id = d.zone_id
             LEFT JOIN zone_saves s ON s.zone_id = d.zone_id"
        )
    };
}

fn to_location(row: &Row, timing: &Timing) -> Result<ZoneLocation> {
    LocationRow {
        zone_id: col(row, 0)?,
        kind: col(row, 1)?,
        params: col(row, 2)?,
        owner: col(row, 3)?,
        owner_url: col(row, 4)?,
        owner_left: col(row, 5)?,
        owner_age_ms: col(row, 6)?,
        epoch: col(row, 7)?,
    }
    .into_location(timing)
}

async fn location<C: GenericClient + Sync>(
    client: &C,
    zone_id: &str,
    timing: &Timing,
    err: &PgErr,
) -> Result<Option<ZoneLocation>> {
    client
        .query_opt(
            concat!(select_location!(), " WHERE d.zone_id = $1"),
            &[&zone_id],
        )
        .await
        .map_err(|e| err.map(e))?
        .map(|row| to_location(&row, timing))
        .transpose()
}

async fn host_row(tx: &Transaction<'_>, host_id: &str, err: &PgErr) -> Result<Option<HostRow>> {
    let Some(row) = tx
        .query_opt(
            concat!(
                "SELECT incarnation, has_left, draining, GREATEST(0, ",
                db_now_ms!(),
                " - heartbeat_ms) FROM fleet_hosts WHERE host_id = $1"
            ),
            &[&host_id],
        )
        .await
        .map_err(|e| err.map(e))?
    else {
        return Ok(None);
    };
    Ok(Some(HostRow {
        incarnation: col(&row, 0)?,
        left: col(&row, 1)?,
        draining: col(&row, 2)?,
        age_ms: col(&row, 3)?,
    }))
}

async fn owner_of(tx: &Transaction<'_>, zone_id: &str, err: &PgErr) -> Result<Option<String>> {
    Ok(tx
        .query_opt(
            "SELECT owner FROM zone_directory WHERE zone_id = $1",
            &[&zone_id],
        )
        .await
        .map_err(|e| err.map(e))?
        .map(|row| col::<Option<String>>(&row, 0))
        .transpose()?
        .flatten())
}

/// Registers `host` (already checked by `check_registration`).
pub(super) async fn register_host(
    tx: Transaction<'_>,
    host: &HostRegistration,
    silent_after: Duration,
    err: &PgErr,
) -> Result<()> {
    let capacity = i64::from(host.capacity);
    // A new id is inserted outright; a racing registration of the same id waits on the primary
    // key until this one commits, then finds the row and is judged against it below.
    let inserted = tx
        .execute(
            concat!(
                "INSERT INTO fleet_hosts
                     (host_id, incarnation, url, capacity, region, draining, has_left,
                      heartbeat_ms)
                 VALUES ($1, $2, $3, $4, $5, false, false, ",
                db_now_ms!(),
                ") ON CONFLICT (host_id) DO NOTHING"
            ),
            &[
                &host.host_id,
                &host.incarnation,
                &host.url,
                &capacity,
                &host.region,
            ],
        )
        .await
        .map_err(|e| err.map(e))?;
    if inserted == 0 {
        // Lock the row first, then read its age: the age must be measured after any wait.
        tx.execute(
            "SELECT 1 FROM fleet_hosts WHERE host_id = $1 FOR UPDATE",
            &[&host.host_id],
        )
        .await
        .map_err(|e| err.map(e))?;
        let existing = host_row(&tx, &host.host_id, err).await?;
        check_host_id_free(existing.as_ref(), host, silent_after)?;
        tx.execute(
            concat!(
                "UPDATE fleet_hosts SET incarnation = $2, url = $3, capacity = $4, region = $5,
                     draining = false, has_left = false, heartbeat_ms = ",
                db_now_ms!(),
                " WHERE host_id = $1"
            ),
            &[
                &host.host_id,
                &host.incarnation,
                &host.url,
                &capacity,
                &host.region,
            ],
        )
        .await
        .map_err(|e| err.map(e))?;
    }
    tx.commit().await.map_err(|e| err.map(e))
}

pub(super) async fn heartbeat(
    client: &Client,
    host_id: &str,
    incarnation: &str,
    draining: bool,
    timing: Timing,
    err: &PgErr,
) -> Result<()> {
    let dead_after = duration_ms(timing.dead_after);
    let updated = client
        .execute(
            concat!(
                "UPDATE fleet_hosts SET heartbeat_ms = ",
                db_now_ms!(),
                ", draining = $3
                 WHERE host_id = $1 AND incarnation = $2 AND NOT has_left
                   AND ",
                db_now_ms!(),
                " - heartbeat_ms <= $4"
            ),
            &[&host_id, &incarnation, &draining, &dead_after],
        )
        .await
        .map_err(|e| err.map(e))?;
    if updated == 0 {
        return Err(StoreError::LeaseLost {
            host_id: host_id.to_owned(),
        });
    }
    Ok(())
}

pub(super) async fn leave_host(
    client: &Client,
    host_id: &str,
    incarnation: &str,
    err: &PgErr,
) -> Result<()> {
    client
        .execute(
            "UPDATE fleet_hosts SET has_left = true WHERE host_id = $1 AND incarnation = $2",
            &[&host_id, &incarnation],
        )
        .await
        .map_err(|e| err.map(e))?;
    Ok(())
}

pub(super) async fn hosts(client: &Client, err: &PgErr) -> Result<Vec<HostRecord>> {
    let rows = client
        .query(
            concat!(
                "SELECT host_id, incarnation, url, capacity, draining, has_left, GREATEST(0, ",
                db_now_ms!(),
                " - heartbeat_ms),
                        (SELECT count(*) FROM zone_directory d WHERE d.owner = h.host_id),
                        region
                 FROM fleet_hosts h ORDER BY host_id COLLATE \"C\""
            ),
            &[],
        )
        .await
        .map_err(|e| err.map(e))?;
    rows.iter()
        .map(|row| {
            let capacity: i64 = col(row, 3)?;
            Ok(HostRecord {
                host_id: col(row, 0)?,
                incarnation: col(row, 1)?,
                url: col(row, 2)?,
                capacity: u32::try_from(capacity)
                    .map_err(|_| StoreError::Corrupt(format!("host capacity {capacity}")))?,
                region: col(row, 8)?,
                draining: col(row, 4)?,
                left: col(row, 5)?,
                heartbeat_age_ms: from_db("heartbeat age", col(row, 6)?)?,
                zones: count_u32("zone count", col(row, 7)?)?,
            })
        })
        .collect()
}

pub(super) async fn locate(
    client: &Client,
    zone_id: &str,
    timing: &Timing,
    err: &PgErr,
) -> Result<Option<ZoneLocation>> {
    location(client, zone_id, timing, err).await
}

pub(super) async fn zones(
    client: &Client,
    timing: &Timing,
    limit: u32,
    err: &PgErr,
) -> Result<Vec<ZoneLocation>> {
    let rows = client
        .query(
            concat!(
                select_location!(),
                " ORDER BY d.zone_id COLLATE \"C\" LIMIT $1"
            ),
            &[&i64::from(limit)],
        )
        .await
        .map_err(|e| err.map(e))?;
    rows.iter().map(|row| to_location(row, timing)).collect()
}

pub(super) async fn orphans(
    client: &Client,
    timing: &Timing,
    limit: u32,
    err: &PgErr,
) -> Result<Vec<ZoneLocation>> {
    // The filter is Timing::is_alive negated, in SQL so LIMIT counts orphans only; the owner's
    // liveness is then judged again by is_alive itself.
    let rows = client
        .query(
            concat!(
                select_location!(),
                " WHERE d.owner IS NOT NULL
                    AND (h.host_id IS NULL OR h.has_left OR ",
                db_now_ms!(),
                " - h.heartbeat_ms > $1)
                  ORDER BY d.zone_id COLLATE \"C\" LIMIT $2"
            ),
            &[&duration_ms(timing.dead_after), &i64::from(limit)],
        )
        .await
        .map_err(|e| err.map(e))?;
    let mut out = Vec::new();
    for row in &rows {
        let loc = to_location(row, timing)?;
        if !loc.owner_alive {
            out.push(loc);
        }
    }
    Ok(out)
}

/// Carries out a claim already checked by `check_claim`.
pub(super) async fn claim_zone(
    tx: Transaction<'_>,
    req: &ClaimRequest<'_>,
    err: &PgErr,
) -> Result<ZoneClaim> {
    let fence = lock_fence(&tx, req.zone_id, err).await?;
    let by = host_row(&tx, req.by, err).await?;
    let to = if req.to == req.by {
        by.clone()
    } else {
        host_row(&tx, req.to, err).await?
    };
    let current = location(&tx, req.zone_id, &req.timing, err).await?;
    let decision = decide_claim(req, by.as_ref(), to.as_ref(), current.as_ref())?;
    if decision != Decision::Take {
        // Dropping the transaction rolls it back, with the fence row it may have created.
        return unchanged(decision, req, current);
    }
    // An existing entry keeps its kind and params: only the owner changes.
    tx.execute(
        "INSERT INTO zone_directory (zone_id, kind, params, owner) VALUES ($1, $2, $3, $4)
         ON CONFLICT (zone_id) DO UPDATE SET owner = EXCLUDED.owner",
        &[&req.zone_id, &req.kind, req.params, &req.to],
    )
    .await
    .map_err(|e| err.map(e))?;
    let claim = raise_fence(&tx, req.zone_id, fence, err).await?;
    let location = location(&tx, req.zone_id, &req.timing, err)
        .await?
        .ok_or_else(|| {
            StoreError::Corrupt(format!("zone {:?} lost its directory entry", req.zone_id))
        })?;
    tx.commit().await.map_err(|e| err.map(e))?;
    Ok(ZoneClaim::Claimed {
        epoch: claim.epoch,
        last: claim.last,
        location,
    })
}

pub(super) async fn move_zone(
    tx: Transaction<'_>,
    zone_id: &str,
    from: &str,
    from_epoch: u64,
    to: &str,
    err: &PgErr,
) -> Result<u64> {
    let fence = lock_current_fence(&tx, zone_id, err).await?;
    let owner = owner_of(&tx, zone_id, err).await?;
    check_move(zone_id, fence, owner.as_deref(), from, from_epoch)?;
    tx.execute(
        "UPDATE zone_directory SET owner = $2 WHERE zone_id = $1",
        &[&zone_id, &to],
    )
    .await
    .map_err(|e| err.map(e))?;
    let claim = raise_fence(&tx, zone_id, to_db("epoch", fence)?, err).await?;
    tx.commit().await.map_err(|e| err.map(e))?;
    Ok(claim.epoch)
}

pub(super) async fn release_zone(
    tx: Transaction<'_>,
    zone_id: &str,
    host: &str,
    epoch: u64,
    err: &PgErr,
) -> Result<bool> {
    let fence = lock_current_fence(&tx, zone_id, err).await?;
    let owner = owner_of(&tx, zone_id, err).await?;
    if !may_release(fence, owner.as_deref(), host, epoch) {
        return Ok(false);
    }
    tx.execute(
        "UPDATE zone_directory SET owner = NULL WHERE zone_id = $1",
        &[&zone_id],
    )
    .await
    .map_err(|e| err.map(e))?;
    tx.commit().await.map_err(|e| err.map(e))?;
    Ok(true)
}

pub(super) async fn spend_ticket(
    client: &Client,
    jti: &str,
    expires_at_ms: u64,
    err: &PgErr,
) -> Result<bool> {
    crate::directory::check_jti(jti)?;
    let expires = to_db("ticket expiry", expires_at_ms)?;
    client
        .execute(
            concat!(
                "DELETE FROM spent_tickets WHERE jti IN (SELECT jti FROM spent_tickets WHERE expires_ms < ",
                db_now_ms!(),
                " LIMIT 64)"
            ),
            &[],
        )
        .await
        .map_err(|e| err.map(e))?;
    let added = client
        .execute(
            "INSERT INTO spent_tickets (jti, expires_ms) VALUES ($1, $2) ON CONFLICT (jti) DO NOTHING",
            &[&jti, &expires],
        )
        .await
        .map_err(|e| err.map(e))?;
    Ok(added == 1)
}

pub(super) async fn forget_zone(tx: Transaction<'_>, zone_id: &str, err: &PgErr) -> Result<bool> {
    lock_fence(&tx, zone_id, err).await?;
    let deleted = tx
        .execute("DELETE FROM zone_directory WHERE zone_id = $1", &[&zone_id])
        .await
        .map_err(|e| err.map(e))?;
    tx.commit().await.map_err(|e| err.map(e))?;
    Ok(deleted > 0)
}

#[async_trait]
impl Directory for PostgresStore {
    async fn register_host(&self, host: &HostRegistration, silent_after: Duration) -> Result<()> {
        check_registration(host)?;
        let mut client = self.client().await?;
        let tx = self.begin(&mut client).await?;
        register_host(tx, host, silent_after, &self.err).await
    }

    async fn heartbeat(
        &self,
        host_id: &str,
        incarnation: &str,
        draining: bool,
        timing: Timing,
    ) -> Result<()> {
        check_id("host id", host_id)?;
        check_id("host incarnation", incarnation)?;
        let client = self.client().await?;
        heartbeat(&client, host_id, incarnation, draining, timing, &self.err).await
    }

    async fn leave_host(&self, host_id: &str, incarnation: &str) -> Result<()> {
        check_id("host id", host_id)?;
        check_id("host incarnation", incarnation)?;
        let client = self.client().await?;
        leave_host(&client, host_id, incarnation, &self.err).await
    }

    async fn hosts(&self) -> Result<Vec<HostRecord>> {
        let client = self.client().await?;
        hosts(&client, &self.err).await
    }

    async fn locate(&self, zone_id: &str, timing: Timing) -> Result<Option<ZoneLocation>> {
        check_id("zone id", zone_id)?;
        let client = self.client().await?;
        locate(&client, zone_id, &timing, &self.err).await
    }

    async fn zones(&self, timing: Timing, limit: u32) -> Result<Vec<ZoneLocation>> {
        let client = self.client().await?;
        zones(&client, &timing, limit, &self.err).await
    }

    async fn claim_zone(&self, req: &ClaimRequest<'_>) -> Result<ZoneClaim> {
        // The params are stored as JSONB from the value itself; the text only bounds their size.
        check_claim(req)?;
        let mut client = self.client().await?;
        let tx = self.begin(&mut client).await?;
        claim_zone(tx, req, &self.err).await
    }

    async fn move_zone(&self, zone_id: &str, from: &str, from_epoch: u64, to: &str) -> Result<u64> {
        check_id("zone id", zone_id)?;
        check_id("host id", from)?;
        check_id("host id", to)?;
        to_db("epoch", from_epoch)?;
        let mut client = self.client().await?;
        let tx = self.begin(&mut client).await?;
        move_zone(tx, zone_id, from, from_epoch, to, &self.err).await
    }

    async fn release_zone(&self, zone_id: &str, host: &str, epoch: u64) -> Result<bool> {
        check_id("zone id", zone_id)?;
        check_id("host id", host)?;
        let mut client = self.client().await?;
        let tx = self.begin(&mut client).await?;
        release_zone(tx, zone_id, host, epoch, &self.err).await
    }

    async fn orphans(&self, timing: Timing, limit: u32) -> Result<Vec<ZoneLocation>> {
        let client = self.client().await?;
        orphans(&client, &timing, limit, &self.err).await
    }

    async fn forget_zone(&self, zone_id: &str) -> Result<bool> {
        check_id("zone id", zone_id)?;
        let mut client = self.client().await?;
        let tx = self.begin(&mut client).await?;
        forget_zone(tx, zone_id, &self.err).await
    }

    async fn spend_ticket(&self, jti: &str, expires_at_ms: u64) -> Result<bool> {
        let client = self.client().await?;
        spend_ticket(&client, jti, expires_at_ms, &self.err).await
    }
}
