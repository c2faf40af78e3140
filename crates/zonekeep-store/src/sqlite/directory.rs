//! Fleet directory operations on a SQLite connection (see [`crate::Directory`] for the contract).
//!
//! Every operation that reads before it writes (registering, claiming, moving, releasing) runs
//! under `BEGIN IMMEDIATE`, i.e. holding the database's write lock from its first read: that lock
//! is also what every save, fact check and claim of any zone takes, so a directory claim
//! serializes with them as PostgreSQL's fence-row lock does. The rest are single statements,
//! atomic on their own. Heartbeats are stamped and ages computed by SQLite's own clock, in SQL.

use std::time::Duration;

use rusqlite::{params, Connection, OptionalExtension, Row, TransactionBehavior};
use serde_json::Value;
use zonekeep_fleet::claim::Decision;
use zonekeep_fleet::Timing;

use super::connection::CachedSql;
use super::saves::{current_fence, raise_fence};
use super::sql_err;
use crate::directory::{ClaimRequest, HostRecord, HostRegistration, ZoneClaim, ZoneLocation};
use crate::directory_rows::{
    check_host_id_free, check_move, check_registration, count_u32, decide_claim, duration_ms,
    may_release, unchanged, HostRow, LocationRow,
};
use crate::error::{Result, StoreError};
use crate::validate::{check_id, from_db, to_db};

/// A zone's entry joined with its owner's host row and its fence. The multi-argument `max` is NULL
/// when the owner has no host row, which is how that case reaches Rust.
macro_rules! select_location {
    () => {
        concat!(
            "SELECT d.zone_id, d.kind, d.params, d.owner, h.url, h.has_left,
                    max(0, ",
            db_now_ms!(),
            " - h.heartbeat_ms),
                    max(coalesce(f.epoch, 0), coalesce(s.epoch, 0))
             FROM zone_directory d
             LEFT JOIN fleet_hosts h ON h.host_id = d.owner
             LEFT JOIN zone_fences f ON f.zone_id = d.zone_id
             LEFT JOIN zone_saves s ON s.zone_id = d.zone_id"
        )
    };
}

fn location_row(row: &Row<'_>) -> rusqlite::Result<(LocationRow, String)> {
    let params: String = row.get(2)?;
    Ok((
        LocationRow {
            zone_id: row.get(0)?,
            kind: row.get(1)?,
            params: Value::Null,
            owner: row.get(3)?,
            owner_url: row.get(4)?,
            owner_left: row.get(5)?,
            owner_age_ms: row.get(6)?,
            epoch: row.get(7)?,
        },
        params,
    ))
}

/// Parses the stored params text into the row.
fn with_params(raw: (LocationRow, String), timing: &Timing) -> Result<ZoneLocation> {
    let (mut row, text) = raw;
    row.params = serde_json::from_str(&text).map_err(|e| {
        StoreError::Corrupt(format!(
            "zone {:?}: stored params are not JSON: {e}",
            row.zone_id
        ))
    })?;
    row.into_location(timing)
}

fn location(conn: &Connection, zone_id: &str, timing: &Timing) -> Result<Option<ZoneLocation>> {
    conn.query_row_cached(
        concat!(select_location!(), " WHERE d.zone_id = ?1"),
        params![zone_id],
        location_row,
    )
    .optional()
    .map_err(sql_err)?
    .map(|raw| with_params(raw, timing))
    .transpose()
}

fn host_row(conn: &Connection, host_id: &str) -> Result<Option<HostRow>> {
    conn.query_row_cached(
        concat!(
            "SELECT incarnation, has_left, draining, max(0, ",
            db_now_ms!(),
            " - heartbeat_ms) FROM fleet_hosts WHERE host_id = ?1"
        ),
        params![host_id],
        |r| {
            Ok(HostRow {
                incarnation: r.get(0)?,
                left: r.get(1)?,
                draining: r.get(2)?,
                age_ms: r.get(3)?,
            })
        },
    )
    .optional()
    .map_err(sql_err)
}

fn owner_of(conn: &Connection, zone_id: &str) -> Result<Option<String>> {
    Ok(conn
        .query_row_cached(
            "SELECT owner FROM zone_directory WHERE zone_id = ?1",
            params![zone_id],
            |r| r.get::<_, Option<String>>(0),
        )
        .optional()
        .map_err(sql_err)?
        .flatten())
}

pub(super) fn register_host(
    conn: &mut Connection,
    host: &HostRegistration,
    silent_after: Duration,
) -> Result<()> {
    check_registration(host)?;
    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(sql_err)?;
    check_host_id_free(host_row(&tx, &host.host_id)?.as_ref(), host, silent_after)?;
    tx.execute_cached(
        concat!(
            "INSERT INTO fleet_hosts
                 (host_id, incarnation, url, capacity, region, draining, has_left, heartbeat_ms)
             VALUES (?1, ?2, ?3, ?4, ?5, 0, 0, ",
            db_now_ms!(),
            ")
             ON CONFLICT (host_id) DO UPDATE SET incarnation = excluded.incarnation,
                 url = excluded.url, capacity = excluded.capacity, region = excluded.region,
                 draining = 0, has_left = 0,
                 heartbeat_ms = excluded.heartbeat_ms"
        ),
        params![
            host.host_id,
            host.incarnation,
            host.url,
            host.capacity,
            host.region
        ],
    )
    .map_err(sql_err)?;
    tx.commit().map_err(sql_err)
}

pub(super) fn heartbeat(
    conn: &mut Connection,
    host_id: &str,
    incarnation: &str,
    draining: bool,
    timing: Timing,
) -> Result<()> {
    check_id("host id", host_id)?;
    check_id("host incarnation", incarnation)?;
    let updated = conn
        .execute_cached(
            concat!(
                "UPDATE fleet_hosts SET heartbeat_ms = ",
                db_now_ms!(),
                ", draining = ?3
                 WHERE host_id = ?1 AND incarnation = ?2 AND has_left = 0
                   AND ",
                db_now_ms!(),
                " - heartbeat_ms <= ?4"
            ),
            params![
                host_id,
                incarnation,
                draining,
                duration_ms(timing.dead_after)
            ],
        )
        .map_err(sql_err)?;
    if updated == 0 {
        return Err(StoreError::LeaseLost {
            host_id: host_id.to_owned(),
        });
    }
    Ok(())
}

pub(super) fn leave_host(conn: &mut Connection, host_id: &str, incarnation: &str) -> Result<()> {
    check_id("host id", host_id)?;
    check_id("host incarnation", incarnation)?;
    conn.execute_cached(
        "UPDATE fleet_hosts SET has_left = 1 WHERE host_id = ?1 AND incarnation = ?2",
        params![host_id, incarnation],
    )
    .map_err(sql_err)?;
    Ok(())
}

pub(super) fn hosts(conn: &mut Connection) -> Result<Vec<HostRecord>> {
    let mut stmt = conn
        .prepare_cached(concat!(
            "SELECT host_id, incarnation, url, capacity, draining, has_left, max(0, ",
            db_now_ms!(),
            " - heartbeat_ms),
                    (SELECT count(*) FROM zone_directory d WHERE d.owner = h.host_id), region
             FROM fleet_hosts h ORDER BY host_id"
        ))
        .map_err(sql_err)?;
    let rows = stmt
        .query_map([], |r| {
            Ok((
                r.get::<_, String>(0)?,
                r.get::<_, String>(1)?,
                r.get::<_, String>(2)?,
                r.get::<_, i64>(3)?,
                r.get::<_, bool>(4)?,
                r.get::<_, bool>(5)?,
                r.get::<_, i64>(6)?,
                r.get::<_, i64>(7)?,
                r.get::<_, String>(8)?,
            ))
        })
        .map_err(sql_err)?;
    let mut out = Vec::new();
    for row in rows {
        let (host_id, incarnation, url, capacity, draining, left, age, zones, region) =
            row.map_err(sql_err)?;
        out.push(HostRecord {
            host_id,
            incarnation,
            url,
            capacity: u32::try_from(capacity)
                .map_err(|_| StoreError::Corrupt(format!("host capacity {capacity}")))?,
            region,
            draining,
            left,
            heartbeat_age_ms: from_db("heartbeat age", age)?,
            zones: count_u32("zone count", zones)?,
        });
    }
    Ok(out)
}

pub(super) fn locate(
    conn: &mut Connection,
    zone_id: &str,
    timing: &Timing,
) -> Result<Option<ZoneLocation>> {
    check_id("zone id", zone_id)?;
    location(conn, zone_id, timing)
}

pub(super) fn zones(
    conn: &mut Connection,
    timing: &Timing,
    limit: u32,
) -> Result<Vec<ZoneLocation>> {
    let mut stmt = conn
        .prepare_cached(concat!(select_location!(), " ORDER BY d.zone_id LIMIT ?1"))
        .map_err(sql_err)?;
    let rows = stmt
        .query_map(params![limit], location_row)
        .map_err(sql_err)?;
    rows.map(|raw| with_params(raw.map_err(sql_err)?, timing))
        .collect()
}

pub(super) fn orphans(
    conn: &mut Connection,
    timing: &Timing,
    limit: u32,
) -> Result<Vec<ZoneLocation>> {
    // The filter is Timing::is_alive negated, in SQL so LIMIT counts orphans only; the owner's
    // liveness is then judged again by is_alive itself.
    let mut stmt = conn
        .prepare_cached(concat!(
            select_location!(),
            " WHERE d.owner IS NOT NULL
                AND (h.host_id IS NULL OR h.has_left = 1 OR ",
            db_now_ms!(),
            " - h.heartbeat_ms > ?1)
              ORDER BY d.zone_id LIMIT ?2"
        ))
        .map_err(sql_err)?;
    let rows = stmt
        .query_map(params![duration_ms(timing.dead_after), limit], location_row)
        .map_err(sql_err)?;
    let mut out = Vec::new();
    for raw in rows {
        let loc = with_params(raw.map_err(sql_err)?, timing)?;
        if !loc.owner_alive {
            out.push(loc);
        }
    }
    Ok(out)
}

/// Carries out a claim already checked by `check_claim`, which gave `params_text`.
pub(super) fn claim_zone(
    conn: &mut Connection,
    req: &ClaimRequest<'_>,
    params_text: &str,
) -> Result<ZoneClaim> {
    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(sql_err)?;
    let by = host_row(&tx, req.by)?;
    let to = if req.to == req.by {
        by.clone()
    } else {
        host_row(&tx, req.to)?
    };
    let current = location(&tx, req.zone_id, &req.timing)?;
    let decision = decide_claim(req, by.as_ref(), to.as_ref(), current.as_ref())?;
    if decision != Decision::Take {
        return unchanged(decision, req, current);
    }
    // An existing entry keeps its kind and params: only the owner changes.
    tx.execute_cached(
        "INSERT INTO zone_directory (zone_id, kind, params, owner) VALUES (?1, ?2, ?3, ?4)
         ON CONFLICT (zone_id) DO UPDATE SET owner = excluded.owner",
        params![req.zone_id, req.kind, params_text, req.to],
    )
    .map_err(sql_err)?;
    let claim = raise_fence(&tx, req.zone_id)?;
    let location = location(&tx, req.zone_id, &req.timing)?.ok_or_else(|| {
        StoreError::Corrupt(format!("zone {:?} lost its directory entry", req.zone_id))
    })?;
    tx.commit().map_err(sql_err)?;
    Ok(ZoneClaim::Claimed {
        epoch: claim.epoch,
        last: claim.last,
        location,
    })
}

pub(super) fn move_zone(
    conn: &mut Connection,
    zone_id: &str,
    from: &str,
    from_epoch: u64,
    to: &str,
) -> Result<u64> {
    check_id("zone id", zone_id)?;
    check_id("host id", from)?;
    check_id("host id", to)?;
    to_db("epoch", from_epoch)?;
    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(sql_err)?;
    let fence = from_db("epoch", current_fence(&tx, zone_id)?)?;
    check_move(
        zone_id,
        fence,
        owner_of(&tx, zone_id)?.as_deref(),
        from,
        from_epoch,
    )?;
    tx.execute_cached(
        "UPDATE zone_directory SET owner = ?2 WHERE zone_id = ?1",
        params![zone_id, to],
    )
    .map_err(sql_err)?;
    let claim = raise_fence(&tx, zone_id)?;
    tx.commit().map_err(sql_err)?;
    Ok(claim.epoch)
}

pub(super) fn release_zone(
    conn: &mut Connection,
    zone_id: &str,
    host: &str,
    epoch: u64,
) -> Result<bool> {
    check_id("zone id", zone_id)?;
    check_id("host id", host)?;
    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(sql_err)?;
    let fence = from_db("epoch", current_fence(&tx, zone_id)?)?;
    if !may_release(fence, owner_of(&tx, zone_id)?.as_deref(), host, epoch) {
        return Ok(false);
    }
    tx.execute_cached(
        "UPDATE zone_directory SET owner = NULL WHERE zone_id = ?1",
        params![zone_id],
    )
    .map_err(sql_err)?;
    tx.commit().map_err(sql_err)?;
    Ok(true)
}

pub(super) fn spend_ticket(conn: &mut Connection, jti: &str, expires_at_ms: u64) -> Result<bool> {
    crate::directory::check_jti(jti)?;
    let expires = to_db("ticket expiry", expires_at_ms)?;
    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(sql_err)?;
    tx.execute_cached(
        concat!(
            "DELETE FROM spent_tickets WHERE rowid IN (SELECT rowid FROM spent_tickets WHERE expires_ms < ",
            db_now_ms!(),
            " LIMIT 64)"
        ),
        [],
    )
    .map_err(sql_err)?;
    let added = tx
        .execute_cached(
            "INSERT INTO spent_tickets (jti, expires_ms) VALUES (?1, ?2) ON CONFLICT (jti) DO NOTHING",
            params![jti, expires],
        )
        .map_err(sql_err)?;
    tx.commit().map_err(sql_err)?;
    Ok(added == 1)
}

pub(super) fn forget_zone(conn: &mut Connection, zone_id: &str) -> Result<bool> {
    check_id("zone id", zone_id)?;
    let deleted = conn
        .execute_cached(
            "DELETE FROM zone_directory WHERE zone_id = ?1",
            params![zone_id],
        )
        .map_err(sql_err)?;
    Ok(deleted > 0)
}
