//! The lobby's rooms and seats on PostgreSQL (see [`crate::LobbyStore`] for the contract).
//!
//! Every call that hands out seats or creates rooms first takes a transaction-scoped advisory
//! lock on its kind, so concurrent `join_or_create`s, seat takes and room creations of one kind,
//! from any hosts, serialize: each sees the seats the one before it handed out, and no room is
//! given more seats than it has. Kinds do not wait on each other. Reports lock no kind: they read
//! the zone's fence `FOR SHARE` (a claim of the zone waits for them, or fences them) and change
//! each room's counts and seats in one statement each, so a seat decision reads either all of a
//! report or none of it. Times are the server's clock, read once per transaction.

use async_trait::async_trait;
use tokio_postgres::types::ToSql;
use tokio_postgres::{Client, GenericClient, Row, Transaction};

use super::{col, PgErr, PostgresStore};
use crate::error::{Result, StoreError};
use crate::lobby::{
    admitted, candidates_where, decide, with_reserved, Decision, HeldSeat, LobbyStore, NewRoom,
    ReportOutcome, Room, RoomFilter, RoomReport, SeatOutcome, SeatRequest, SeatRole, CANDIDATES,
    FULLEST_FIRST, HELD_WHERE, MAX_LISTED, RECOUNT, ROOMS,
};
use crate::validate::{check_id, from_db, to_db};

type Arg<'a> = &'a (dyn ToSql + Sync);

/// The server's now, in milliseconds since the Unix epoch.
async fn now_ms(c: &impl GenericClient, err: &PgErr) -> Result<i64> {
    let row = c
        .query_one(concat!("SELECT ", db_now_ms!()), &[])
        .await
        .map_err(|e| err.map(e))?;
    col(&row, 0)
}

/// Serializes seat handouts of `kind` until the transaction ends.
async fn lock_kind(tx: &Transaction<'_>, kind: &str, err: &PgErr) -> Result<()> {
    tx.execute(
        "SELECT pg_advisory_xact_lock(hashtext('zonekeep.lobby:' || $1))",
        &[&kind],
    )
    .await
    .map_err(|e| err.map(e))?;
    Ok(())
}

fn count(row: &Row, i: usize) -> Result<u32> {
    let v: i64 = col(row, i)?;
    Ok(u32::try_from(v).unwrap_or(u32::MAX))
}

/// A room read from the columns of [`ROOMS`].
fn room_from(row: &Row) -> Result<Room> {
    let zone_id: String = col(row, 0)?;
    let metadata: String = col(row, 11)?;
    let metadata = serde_json::from_str(&metadata)
        .map_err(|e| StoreError::Corrupt(format!("room {zone_id:?} metadata: {e}")))?;
    Ok(Room {
        kind: col(row, 1)?,
        content_version: col(row, 2)?,
        private: col(row, 3)?,
        max_players: count(row, 4)?,
        max_observers: count(row, 5)?,
        players: count(row, 6)?,
        observers: count(row, 7)?,
        reserved_players: count(row, 8)?,
        reserved_observers: count(row, 9)?,
        open: col(row, 10)?,
        metadata,
        created_at_ms: from_db("created_at_ms", col(row, 12)?)?,
        zone_id,
    })
}

/// Rooms matching `clause` (after [`ROOMS`]) with `args` after the now, fullest first.
async fn rooms_where(
    c: &impl GenericClient,
    now: i64,
    clause: &str,
    args: &[Arg<'_>],
    limit: usize,
    err: &PgErr,
) -> Result<Vec<Room>> {
    let sql = format!("{ROOMS}{clause}{FULLEST_FIRST} LIMIT {limit}");
    let mut all: Vec<Arg<'_>> = vec![&now];
    all.extend_from_slice(args);
    let rows = c.query(&sql, &all).await.map_err(|e| err.map(e))?;
    rows.iter().map(room_from).collect()
}

async fn room_by_id(
    c: &impl GenericClient,
    now: i64,
    zone_id: &str,
    err: &PgErr,
) -> Result<Option<Room>> {
    Ok(
        rooms_where(c, now, " WHERE zone_id = $2", &[&zone_id], 1, err)
            .await?
            .into_iter()
            .next(),
    )
}

/// The principal's live seat in `zone_id`, and the live seats of its role its address holds.
async fn seat_state(
    tx: &Transaction<'_>,
    now: i64,
    zone_id: &str,
    seat: &SeatRequest,
    err: &PgErr,
) -> Result<(Option<HeldSeat>, u32)> {
    let held = tx
        .query_opt(
            "SELECT role, expires_ms IS NULL FROM lobby_seats
             WHERE zone_id = $1 AND principal = $2 AND (expires_ms IS NULL OR expires_ms > $3)",
            &[&zone_id, &seat.principal, &now],
        )
        .await
        .map_err(|e| err.map(e))?
        .map(|row| {
            let role: String = col(&row, 0)?;
            Ok::<_, StoreError>(HeldSeat {
                role: SeatRole::from_db(&role)?,
                present: col(&row, 1)?,
            })
        })
        .transpose()?;
    let by_address = match &seat.address {
        Some(a) => {
            let row = tx
                .query_one(
                    "SELECT count(*) FROM lobby_seats WHERE zone_id = $1 AND address = $2
                     AND role = $3 AND principal <> $4
                     AND (expires_ms IS NULL OR expires_ms > $5)",
                    &[&zone_id, a, &seat.role.as_str(), &seat.principal, &now],
                )
                .await
                .map_err(|e| err.map(e))?;
            count(&row, 0)?
        }
        None => 0,
    };
    Ok((held, by_address))
}

async fn reserve(
    tx: &Transaction<'_>,
    now: i64,
    zone_id: &str,
    seat: &SeatRequest,
    err: &PgErr,
) -> Result<()> {
    let expires = now.saturating_add(to_db("seat hold", seat.hold_ms)?);
    tx.execute(
        "INSERT INTO lobby_seats (zone_id, principal, role, address, expires_ms)
         VALUES ($1, $2, $3, $4, $5)
         ON CONFLICT (zone_id, principal) DO UPDATE SET role = EXCLUDED.role,
             address = EXCLUDED.address, expires_ms = EXCLUDED.expires_ms",
        &[
            &zone_id,
            &seat.principal,
            &seat.role.as_str(),
            &seat.address,
            &expires,
        ],
    )
    .await
    .map_err(|e| err.map(e))?;
    tx.execute(
        "UPDATE lobby_rooms SET active_at_ms = $2 WHERE zone_id = $1",
        &[&zone_id, &now],
    )
    .await
    .map_err(|e| err.map(e))?;
    recount(tx, zone_id, err).await
}

/// Recounts `zone_id`'s reserved seats ([`RECOUNT`]).
async fn recount(tx: &Transaction<'_>, zone_id: &str, err: &PgErr) -> Result<()> {
    tx.execute(RECOUNT, &[&zone_id])
        .await
        .map_err(|e| err.map(e))?;
    Ok(())
}

async fn seat_in(
    tx: &Transaction<'_>,
    now: i64,
    room: Room,
    seat: &SeatRequest,
    err: &PgErr,
) -> Result<SeatOutcome> {
    let (held, by_address) = seat_state(tx, now, &room.zone_id, seat, err).await?;
    Ok(match decide(&room, held, by_address, seat) {
        Decision::Reserve => {
            reserve(tx, now, &room.zone_id, seat, err).await?;
            SeatOutcome::Seated(with_reserved(room, seat, held))
        }
        Decision::AlreadyPresent => SeatOutcome::Seated(room),
        Decision::Full => SeatOutcome::Full(room),
        Decision::AddressFull => SeatOutcome::AddressFull(room),
        Decision::Closed => SeatOutcome::Closed(room),
    })
}

async fn create_in(
    tx: &Transaction<'_>,
    now: i64,
    room: &NewRoom,
    seat: Option<&SeatRequest>,
    err: &PgErr,
) -> Result<Room> {
    let taken = tx
        .query_opt(
            "SELECT 1 FROM lobby_rooms WHERE zone_id = $1
                 OR (CAST($2 AS TEXT) IS NOT NULL AND code = CAST($2 AS TEXT))",
            &[&room.zone_id, &room.code],
        )
        .await
        .map_err(|e| err.map(e))?
        .is_some();
    if taken {
        return Err(StoreError::RoomExists(match &room.code {
            Some(_) => format!("{:?}, or its code", room.zone_id),
            None => format!("{:?}", room.zone_id),
        }));
    }
    let (max_players, max_observers) = (i64::from(room.max_players), i64::from(room.max_observers));
    // Two hosts creating the same id (or code) at once: the second insert conflicts and is
    // refused the same way.
    let inserted = tx
        .execute(
            "INSERT INTO lobby_rooms (zone_id, kind, content_version, code, max_players,
                 max_observers, players, observers, open, metadata, created_at_ms, active_at_ms)
             VALUES ($1, $2, $3, $4, $5, $6, 0, 0, 1, $7, $8, $8)
             ON CONFLICT DO NOTHING",
            &[
                &room.zone_id,
                &room.kind,
                &room.content_version,
                &room.code,
                &max_players,
                &max_observers,
                &room.metadata.to_string(),
                &now,
            ],
        )
        .await
        .map_err(|e| err.map(e))?;
    if inserted == 0 {
        return Err(StoreError::RoomExists(format!("{:?}", room.zone_id)));
    }
    let created = room_by_id(tx, now, &room.zone_id, err)
        .await?
        .ok_or_else(|| StoreError::Corrupt(format!("room {:?} vanished", room.zone_id)))?;
    let Some(seat) = seat else {
        return Ok(created);
    };
    match seat_in(tx, now, created, seat, err).await? {
        SeatOutcome::Seated(r) => Ok(r),
        _ => Err(StoreError::InvalidArgument(format!(
            "a new room with no {} seat cannot seat its creator",
            seat.role.as_str()
        ))),
    }
}

pub(super) async fn create_room(
    tx: Transaction<'_>,
    room: &NewRoom,
    seat: Option<&SeatRequest>,
    err: &PgErr,
) -> Result<Room> {
    lock_kind(&tx, &room.kind, err).await?;
    let now = now_ms(&tx, err).await?;
    let created = create_in(&tx, now, room, seat, err).await?;
    tx.commit().await.map_err(|e| err.map(e))?;
    Ok(created)
}

pub(super) async fn join_or_create(
    tx: Transaction<'_>,
    filter: &RoomFilter,
    seat: &SeatRequest,
    room: &NewRoom,
    err: &PgErr,
) -> Result<(Room, bool)> {
    lock_kind(&tx, &filter.kind, err).await?;
    let now = now_ms(&tx, err).await?;
    // A principal seated in a room of the kind already keeps that seat.
    let held = rooms_where(
        &tx,
        now,
        HELD_WHERE,
        &[&filter.kind, &seat.principal],
        1,
        err,
    )
    .await?;
    for room in held {
        if let SeatOutcome::Seated(r) = seat_in(&tx, now, room, seat, err).await? {
            tx.commit().await.map_err(|e| err.map(e))?;
            return Ok((r, false));
        }
    }
    let candidates = rooms_where(
        &tx,
        now,
        candidates_where(seat.role),
        &[&filter.kind, &filter.content_version],
        CANDIDATES,
        err,
    )
    .await?;
    let admitted = admitted(
        candidates,
        &RoomFilter {
            limit: CANDIDATES,
            role: Some(seat.role),
            ..filter.clone()
        },
    );
    for candidate in admitted {
        if let SeatOutcome::Seated(r) = seat_in(&tx, now, candidate, seat, err).await? {
            tx.commit().await.map_err(|e| err.map(e))?;
            return Ok((r, false));
        }
    }
    let created = create_in(&tx, now, room, Some(seat), err).await?;
    tx.commit().await.map_err(|e| err.map(e))?;
    Ok((created, true))
}

pub(super) async fn take_seat(
    tx: Transaction<'_>,
    zone_id: &str,
    seat: &SeatRequest,
    err: &PgErr,
) -> Result<SeatOutcome> {
    let Some(kind_row) = tx
        .query_opt(
            "SELECT kind FROM lobby_rooms WHERE zone_id = $1",
            &[&zone_id],
        )
        .await
        .map_err(|e| err.map(e))?
    else {
        return Ok(SeatOutcome::NoRoom);
    };
    let kind: String = col(&kind_row, 0)?;
    lock_kind(&tx, &kind, err).await?;
    let now = now_ms(&tx, err).await?;
    // Read again under the lock: the room may have been forgotten meanwhile.
    let Some(room) = room_by_id(&tx, now, zone_id, err).await? else {
        return Ok(SeatOutcome::NoRoom);
    };
    let outcome = seat_in(&tx, now, room, seat, err).await?;
    tx.commit().await.map_err(|e| err.map(e))?;
    Ok(outcome)
}

pub(super) async fn room_by_code(client: &Client, code: &str, err: &PgErr) -> Result<Option<Room>> {
    let now = now_ms(client, err).await?;
    Ok(
        rooms_where(client, now, " WHERE code = $2", &[&code], 1, err)
            .await?
            .into_iter()
            .next(),
    )
}

pub(super) async fn room(client: &Client, zone_id: &str, err: &PgErr) -> Result<Option<Room>> {
    let now = now_ms(client, err).await?;
    room_by_id(client, now, zone_id, err).await
}

pub(super) async fn list_rooms(
    client: &Client,
    filter: &RoomFilter,
    err: &PgErr,
) -> Result<Vec<Room>> {
    let now = now_ms(client, err).await?;
    let role = filter.role.unwrap_or(SeatRole::Player);
    let rows = rooms_where(
        client,
        now,
        candidates_where(role),
        &[&filter.kind, &filter.content_version],
        MAX_LISTED,
        err,
    )
    .await?;
    Ok(admitted(rows, filter))
}

pub(super) async fn report_rooms(
    tx: Transaction<'_>,
    reports: &[RoomReport],
    err: &PgErr,
) -> Result<ReportOutcome> {
    let now = now_ms(&tx, err).await?;
    let mut out = ReportOutcome::default();
    for r in reports {
        let fence: Option<i64> = tx
            .query_opt(
                "SELECT epoch FROM zone_fences WHERE zone_id = $1 FOR SHARE",
                &[&r.zone_id],
            )
            .await
            .map_err(|e| err.map(e))?
            .map(|row| col(&row, 0))
            .transpose()?;
        if fence != Some(to_db("epoch", r.epoch)?) {
            out.fenced.push(r.zone_id.clone());
            continue;
        }
        let metadata = r.metadata.as_ref().map(|m| m.to_string());
        let open = r.open.map(i64::from);
        let (players, observers) = (i64::from(r.players), i64::from(r.observers));
        let updated = tx
            .execute(
                "UPDATE lobby_rooms SET players = $2, observers = $3,
                     open = coalesce($4, open), metadata = coalesce($5, metadata),
                     active_at_ms = CASE WHEN CAST($2 AS BIGINT) + CAST($3 AS BIGINT) > 0
                         THEN $6 ELSE active_at_ms END
                 WHERE zone_id = $1",
                &[&r.zone_id, &players, &observers, &open, &metadata, &now],
            )
            .await
            .map_err(|e| err.map(e))?;
        if updated == 0 {
            continue;
        }
        tx.execute(
            "UPDATE lobby_seats SET expires_ms = NULL
             WHERE zone_id = $1 AND principal = ANY($2)",
            &[&r.zone_id, &r.present],
        )
        .await
        .map_err(|e| err.map(e))?;
        tx.execute(
            "DELETE FROM lobby_seats WHERE zone_id = $1 AND expires_ms IS NULL
                 AND NOT (principal = ANY($2))",
            &[&r.zone_id, &r.present],
        )
        .await
        .map_err(|e| err.map(e))?;
        recount(&tx, &r.zone_id, err).await?;
        out.rooms.push(r.zone_id.clone());
    }
    tx.commit().await.map_err(|e| err.map(e))?;
    Ok(out)
}

pub(super) async fn forget_idle_rooms(
    tx: Transaction<'_>,
    idle_ms: u64,
    err: &PgErr,
) -> Result<u64> {
    let now = now_ms(&tx, err).await?;
    let lapsed: std::collections::BTreeSet<String> = tx
        .query(
            "DELETE FROM lobby_seats WHERE expires_ms IS NOT NULL AND expires_ms <= $1
             RETURNING zone_id",
            &[&now],
        )
        .await
        .map_err(|e| err.map(e))?
        .iter()
        .map(|row| col(row, 0))
        .collect::<Result<_>>()?;
    for zone in &lapsed {
        recount(&tx, zone, err).await?;
    }
    let before = now.saturating_sub(to_db("idle time", idle_ms)?);
    let forgotten = tx
        .execute(
            "DELETE FROM lobby_rooms r WHERE r.players = 0 AND r.observers = 0
                 AND r.active_at_ms < $1
                 AND NOT EXISTS (SELECT 1 FROM lobby_seats s WHERE s.zone_id = r.zone_id)",
            &[&before],
        )
        .await
        .map_err(|e| err.map(e))?;
    tx.commit().await.map_err(|e| err.map(e))?;
    Ok(forgotten)
}

#[async_trait]
impl LobbyStore for PostgresStore {
    async fn create_room(&self, room: &NewRoom, seat: Option<&SeatRequest>) -> Result<Room> {
        crate::lobby::check_room(room)?;
        if let Some(s) = seat {
            crate::lobby::check_seat(s)?;
        }
        let mut client = self.client().await?;
        let tx = self.begin(&mut client).await?;
        create_room(tx, room, seat, &self.err).await
    }

    async fn join_or_create(
        &self,
        filter: &RoomFilter,
        seat: &SeatRequest,
        room: &NewRoom,
    ) -> Result<(Room, bool)> {
        crate::lobby::check_filter(filter)?;
        crate::lobby::check_seat(seat)?;
        crate::lobby::check_room(room)?;
        let mut client = self.client().await?;
        let tx = self.begin(&mut client).await?;
        join_or_create(tx, filter, seat, room, &self.err).await
    }

    async fn take_seat(&self, zone_id: &str, seat: &SeatRequest) -> Result<SeatOutcome> {
        check_id("zone id", zone_id)?;
        crate::lobby::check_seat(seat)?;
        let mut client = self.client().await?;
        let tx = self.begin(&mut client).await?;
        take_seat(tx, zone_id, seat, &self.err).await
    }

    async fn room_by_code(&self, code: &str) -> Result<Option<Room>> {
        crate::lobby::check_code(code)?;
        let client = self.client().await?;
        room_by_code(&client, code, &self.err).await
    }

    async fn room(&self, zone_id: &str) -> Result<Option<Room>> {
        check_id("zone id", zone_id)?;
        let client = self.client().await?;
        room(&client, zone_id, &self.err).await
    }

    async fn list_rooms(&self, filter: &RoomFilter) -> Result<Vec<Room>> {
        crate::lobby::check_filter(filter)?;
        let client = self.client().await?;
        list_rooms(&client, filter, &self.err).await
    }

    async fn report_rooms(&self, reports: &[RoomReport]) -> Result<ReportOutcome> {
        for r in reports {
            crate::lobby::check_report(r)?;
        }
        let mut client = self.client().await?;
        let tx = self.begin(&mut client).await?;
        report_rooms(tx, reports, &self.err).await
    }

    async fn forget_idle_rooms(&self, idle_ms: u64) -> Result<u64> {
        let mut client = self.client().await?;
        let tx = self.begin(&mut client).await?;
        forget_idle_rooms(tx, idle_ms, &self.err).await
    }
}
