//! The lobby's rooms and seats on a SQLite connection (see [`crate::LobbyStore`] for the contract).
//!
//! Every call that writes runs under `BEGIN IMMEDIATE`, so it holds the database's write lock
//! from its first read: concurrent `join_or_create`s and seat takes (from this store or another on
//! the same file) serialize, and each sees the seats the one before it handed out. Times are
//! SQLite's own clock, read once per transaction.

use rusqlite::{params, params_from_iter, Connection, OptionalExtension, Row, TransactionBehavior};
use serde_json::Value;

use super::connection::CachedSql;
use super::sql_err;
use crate::error::{Result, StoreError};
use crate::lobby::{
    admitted, candidates_where, check_code, check_filter, check_report, check_room, check_seat,
    decide, with_reserved, Decision, HeldSeat, NewRoom, ReportOutcome, Room, RoomFilter,
    RoomReport, SeatOutcome, SeatRequest, SeatRole, CANDIDATES, FULLEST_FIRST, HELD_WHERE,
    MAX_LISTED, RECOUNT, ROOMS,
};
use crate::validate::{check_id, from_db, to_db};

/// `sql` with PostgreSQL's `$N` parameters as SQLite's `?N`.
fn q(sql: &str) -> String {
    sql.replace('$', "?")
}

/// The database's now, in milliseconds since the Unix epoch.
fn now_ms(conn: &Connection) -> Result<i64> {
    conn.query_row_cached(concat!("SELECT ", db_now_ms!()), [], |r| r.get(0))
        .map_err(sql_err)
}

/// A room read from the columns of [`ROOMS`].
fn room_from(r: &Row<'_>) -> rusqlite::Result<(Room, String)> {
    let metadata: String = r.get(11)?;
    let count = |i: usize| -> rusqlite::Result<u32> {
        let v: i64 = r.get(i)?;
        Ok(u32::try_from(v).unwrap_or(u32::MAX))
    };
    Ok((
        Room {
            zone_id: r.get(0)?,
            kind: r.get(1)?,
            content_version: r.get(2)?,
            private: r.get(3)?,
            max_players: count(4)?,
            max_observers: count(5)?,
            players: count(6)?,
            observers: count(7)?,
            reserved_players: count(8)?,
            reserved_observers: count(9)?,
            open: r.get(10)?,
            metadata: Value::Null,
            created_at_ms: u64::try_from(r.get::<_, i64>(12)?).unwrap_or(0),
        },
        metadata,
    ))
}

/// Parses a room's stored metadata.
fn with_metadata((mut room, text): (Room, String)) -> Result<Room> {
    room.metadata = serde_json::from_str(&text)
        .map_err(|e| StoreError::Corrupt(format!("room {:?} metadata: {e}", room.zone_id)))?;
    Ok(room)
}

/// Rooms matching `clause` (after [`ROOMS`]) with `args` after the now, fullest first.
fn rooms_where(
    conn: &Connection,
    now: i64,
    clause: &str,
    args: &[&dyn rusqlite::ToSql],
    limit: usize,
) -> Result<Vec<Room>> {
    let sql = q(&format!("{ROOMS}{clause}{FULLEST_FIRST} LIMIT {limit}"));
    let mut stmt = conn.prepare(&sql).map_err(sql_err)?;
    let mut all: Vec<&dyn rusqlite::ToSql> = vec![&now];
    all.extend_from_slice(args);
    let rows = stmt
        .query_map(params_from_iter(all), room_from)
        .map_err(sql_err)?;
    rows.map(|r| with_metadata(r.map_err(sql_err)?)).collect()
}

/// The room `zone_id`, if it is one.
fn room_by_id(conn: &Connection, now: i64, zone_id: &str) -> Result<Option<Room>> {
    Ok(
        rooms_where(conn, now, " WHERE zone_id = $2", &[&zone_id], 1)?
            .into_iter()
            .next(),
    )
}

/// The principal's seat in `zone_id`, if live, and how many live seats of `seat`'s role its
/// address holds there.
fn seat_state(
    conn: &Connection,
    now: i64,
    zone_id: &str,
    seat: &SeatRequest,
) -> Result<(Option<HeldSeat>, u32)> {
    let held = conn
        .query_row_cached(
            "SELECT role, expires_ms IS NULL FROM lobby_seats
             WHERE zone_id = ?1 AND principal = ?2 AND (expires_ms IS NULL OR expires_ms > ?3)",
            params![zone_id, seat.principal, now],
            |r| Ok((r.get::<_, String>(0)?, r.get::<_, bool>(1)?)),
        )
        .optional()
        .map_err(sql_err)?
        .map(|(role, present)| {
            Ok::<_, StoreError>(HeldSeat {
                role: SeatRole::from_db(&role)?,
                present,
            })
        })
        .transpose()?;
    let by_address = match &seat.address {
        Some(a) => conn
            .query_row_cached(
                "SELECT count(*) FROM lobby_seats WHERE zone_id = ?1 AND address = ?2
                 AND role = ?3 AND principal <> ?4 AND (expires_ms IS NULL OR expires_ms > ?5)",
                params![zone_id, a, seat.role.as_str(), seat.principal, now],
                |r| r.get::<_, i64>(0),
            )
            .map_err(sql_err)?,
        None => 0,
    };
    Ok((held, u32::try_from(by_address).unwrap_or(u32::MAX)))
}

/// Writes (or refreshes) `seat`'s reservation in `zone_id`, held until `now` + its hold.
fn reserve(conn: &Connection, now: i64, zone_id: &str, seat: &SeatRequest) -> Result<()> {
    let expires = now.saturating_add(to_db("seat hold", seat.hold_ms)?);
    conn.execute_cached(
        "INSERT INTO lobby_seats (zone_id, principal, role, address, expires_ms)
         VALUES (?1, ?2, ?3, ?4, ?5)
         ON CONFLICT (zone_id, principal) DO UPDATE SET role = excluded.role,
             address = excluded.address, expires_ms = excluded.expires_ms",
        params![
            zone_id,
            seat.principal,
            seat.role.as_str(),
            seat.address,
            expires
        ],
    )
    .map_err(sql_err)?;
    conn.execute_cached(
        "UPDATE lobby_rooms SET active_at_ms = ?2 WHERE zone_id = ?1",
        params![zone_id, now],
    )
    .map_err(sql_err)?;
    recount(conn, zone_id)
}

/// Recounts `zone_id`'s reserved seats ([`RECOUNT`]).
fn recount(conn: &Connection, zone_id: &str) -> Result<()> {
    conn.execute_cached(&q(RECOUNT), params![zone_id])
        .map_err(sql_err)?;
    Ok(())
}

/// Decides `seat` for `room` and writes it when it may sit.
fn seat_in(conn: &Connection, now: i64, room: Room, seat: &SeatRequest) -> Result<SeatOutcome> {
    let (held, by_address) = seat_state(conn, now, &room.zone_id, seat)?;
    Ok(match decide(&room, held, by_address, seat) {
        Decision::Reserve => {
            reserve(conn, now, &room.zone_id, seat)?;
            SeatOutcome::Seated(with_reserved(room, seat, held))
        }
        Decision::AlreadyPresent => SeatOutcome::Seated(room),
        Decision::Full => SeatOutcome::Full(room),
        Decision::AddressFull => SeatOutcome::AddressFull(room),
        Decision::Closed => SeatOutcome::Closed(room),
    })
}

/// Inserts `room` (already checked), refusing a taken id or code.
fn insert_room(conn: &Connection, now: i64, room: &NewRoom) -> Result<()> {
    let taken: bool = conn
        .query_row_cached(
            "SELECT EXISTS (SELECT 1 FROM lobby_rooms WHERE zone_id = ?1
                 OR (?2 IS NOT NULL AND code = ?2))",
            params![room.zone_id, room.code],
            |r| r.get(0),
        )
        .map_err(sql_err)?;
    if taken {
        return Err(StoreError::RoomExists(match &room.code {
            Some(_) => format!("{:?}, or its code", room.zone_id),
            None => format!("{:?}", room.zone_id),
        }));
    }
    conn.execute_cached(
        "INSERT INTO lobby_rooms (zone_id, kind, content_version, code, max_players,
             max_observers, players, observers, open, metadata, created_at_ms, active_at_ms)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, 0, 0, 1, ?7, ?8, ?8)",
        params![
            room.zone_id,
            room.kind,
            room.content_version,
            room.code,
            room.max_players,
            room.max_observers,
            room.metadata.to_string(),
            now
        ],
    )
    .map_err(sql_err)?;
    Ok(())
}

/// Creates `room` and seats `seat` in it: the room as it is then.
fn create_in(
    conn: &Connection,
    now: i64,
    room: &NewRoom,
    seat: Option<&SeatRequest>,
) -> Result<Room> {
    insert_room(conn, now, room)?;
    let created = room_by_id(conn, now, &room.zone_id)?
        .ok_or_else(|| StoreError::Corrupt(format!("room {:?} vanished", room.zone_id)))?;
    let Some(seat) = seat else {
        return Ok(created);
    };
    match seat_in(conn, now, created, seat)? {
        SeatOutcome::Seated(r) => Ok(r),
        // A new room seats its creator unless it has no seat of the role.
        _ => Err(StoreError::InvalidArgument(format!(
            "a new room with no {} seat cannot seat its creator",
            seat.role.as_str()
        ))),
    }
}

pub(super) fn create_room(
    conn: &mut Connection,
    room: &NewRoom,
    seat: Option<&SeatRequest>,
) -> Result<Room> {
    check_room(room)?;
    if let Some(s) = seat {
        check_seat(s)?;
    }
    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(sql_err)?;
    let now = now_ms(&tx)?;
    let created = create_in(&tx, now, room, seat)?;
    tx.commit().map_err(sql_err)?;
    Ok(created)
}

pub(super) fn join_or_create(
    conn: &mut Connection,
    filter: &RoomFilter,
    seat: &SeatRequest,
    room: &NewRoom,
) -> Result<(Room, bool)> {
    check_filter(filter)?;
    check_seat(seat)?;
    check_room(room)?;
    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(sql_err)?;
    let now = now_ms(&tx)?;
    // A principal seated in a room of the kind already keeps that seat.
    let held = rooms_where(&tx, now, HELD_WHERE, &[&filter.kind, &seat.principal], 1)?;
    for room in held {
        if let SeatOutcome::Seated(r) = seat_in(&tx, now, room, seat)? {
            tx.commit().map_err(sql_err)?;
            return Ok((r, false));
        }
    }
    let candidates = rooms_where(
        &tx,
        now,
        candidates_where(seat.role),
        &[&filter.kind, &filter.content_version],
        CANDIDATES,
    )?;
    let admitted = admitted(
        candidates,
        &RoomFilter {
            limit: CANDIDATES,
            role: Some(seat.role),
            ..filter.clone()
        },
    );
    for candidate in admitted {
        if let SeatOutcome::Seated(r) = seat_in(&tx, now, candidate, seat)? {
            tx.commit().map_err(sql_err)?;
            return Ok((r, false));
        }
    }
    let created = create_in(&tx, now, room, Some(seat))?;
    tx.commit().map_err(sql_err)?;
    Ok((created, true))
}

pub(super) fn take_seat(
    conn: &mut Connection,
    zone_id: &str,
    seat: &SeatRequest,
) -> Result<SeatOutcome> {
    check_id("zone id", zone_id)?;
    check_seat(seat)?;
    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(sql_err)?;
    let now = now_ms(&tx)?;
    let Some(room) = room_by_id(&tx, now, zone_id)? else {
        return Ok(SeatOutcome::NoRoom);
    };
    let outcome = seat_in(&tx, now, room, seat)?;
    tx.commit().map_err(sql_err)?;
    Ok(outcome)
}

pub(super) fn room_by_code(conn: &mut Connection, code: &str) -> Result<Option<Room>> {
    check_code(code)?;
    let now = now_ms(conn)?;
    Ok(rooms_where(conn, now, " WHERE code = $2", &[&code], 1)?
        .into_iter()
        .next())
}

pub(super) fn room(conn: &mut Connection, zone_id: &str) -> Result<Option<Room>> {
    check_id("zone id", zone_id)?;
    let now = now_ms(conn)?;
    room_by_id(conn, now, zone_id)
}

pub(super) fn list_rooms(conn: &mut Connection, filter: &RoomFilter) -> Result<Vec<Room>> {
    check_filter(filter)?;
    let now = now_ms(conn)?;
    let role = filter.role.unwrap_or(SeatRole::Player);
    // Metadata is matched here, so the database is asked for the most a listing answers.
    let rows = rooms_where(
        conn,
        now,
        candidates_where(role),
        &[&filter.kind, &filter.content_version],
        MAX_LISTED,
    )?;
    Ok(admitted(rows, filter))
}

pub(super) fn report_rooms(conn: &mut Connection, reports: &[RoomReport]) -> Result<ReportOutcome> {
    for r in reports {
        check_report(r)?;
    }
    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(sql_err)?;
    let now = now_ms(&tx)?;
    let mut out = ReportOutcome::default();
    for r in reports {
        let fence: Option<i64> = tx
            .query_row_cached(
                "SELECT epoch FROM zone_fences WHERE zone_id = ?1",
                params![r.zone_id],
                |row| row.get(0),
            )
            .optional()
            .map_err(sql_err)?;
        if fence != Some(to_db("epoch", r.epoch)?) {
            out.fenced.push(r.zone_id.clone());
            continue;
        }
        let metadata = r.metadata.as_ref().map(Value::to_string);
        let updated = tx
            .execute_cached(
                "UPDATE lobby_rooms SET players = ?2, observers = ?3,
                     open = coalesce(?4, open), metadata = coalesce(?5, metadata),
                     active_at_ms = CASE WHEN ?2 + ?3 > 0 THEN ?6 ELSE active_at_ms END
                 WHERE zone_id = ?1",
                params![r.zone_id, r.players, r.observers, r.open, metadata, now],
            )
            .map_err(sql_err)?;
        if updated == 0 {
            continue;
        }
        // The present principals' seats become present; present seats of principals gone are
        // freed. The list is bound as one JSON array, whatever its length.
        let present = serde_json::to_string(&r.present)
            .map_err(|e| StoreError::InvalidArgument(format!("present principals: {e}")))?;
        tx.execute_cached(
            "UPDATE lobby_seats SET expires_ms = NULL
             WHERE zone_id = ?1 AND principal IN (SELECT value FROM json_each(?2))",
            params![r.zone_id, present],
        )
        .map_err(sql_err)?;
        tx.execute_cached(
            "DELETE FROM lobby_seats WHERE zone_id = ?1 AND expires_ms IS NULL
                 AND principal NOT IN (SELECT value FROM json_each(?2))",
            params![r.zone_id, present],
        )
        .map_err(sql_err)?;
        recount(&tx, &r.zone_id)?;
        out.rooms.push(r.zone_id.clone());
    }
    tx.commit().map_err(sql_err)?;
    Ok(out)
}

pub(super) fn forget_idle_rooms(conn: &mut Connection, idle_ms: u64) -> Result<u64> {
    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(sql_err)?;
    let now = now_ms(&tx)?;
    let lapsed: std::collections::BTreeSet<String> = {
        let mut stmt = tx
            .prepare_cached(
                "DELETE FROM lobby_seats WHERE expires_ms IS NOT NULL AND expires_ms <= ?1
                 RETURNING zone_id",
            )
            .map_err(sql_err)?;
        let rows = stmt
            .query_map(params![now], |r| r.get::<_, String>(0))
            .map_err(sql_err)?;
        rows.collect::<rusqlite::Result<_>>().map_err(sql_err)?
    };
    for zone in &lapsed {
        recount(&tx, zone)?;
    }
    let before = now.saturating_sub(to_db("idle time", idle_ms)?);
    let idle = "zone_id IN (SELECT r.zone_id FROM lobby_rooms r
         WHERE r.players = 0 AND r.observers = 0 AND r.active_at_ms < ?1
           AND NOT EXISTS (SELECT 1 FROM lobby_seats s WHERE s.zone_id = r.zone_id))";
    let forgotten = tx
        .execute_cached(
            &format!("DELETE FROM lobby_rooms WHERE {idle}"),
            params![before],
        )
        .map_err(sql_err)?;
    tx.commit().map_err(sql_err)?;
    from_db(
        "rooms forgotten",
        i64::try_from(forgotten).unwrap_or(i64::MAX),
    )
}
