//! The lobby's rooms and seats (see [`LobbyStore`]): the rules both backends share, so the
//! decision whether a seat may be taken is written once and each backend only reads and writes
//! rows inside its own transaction.
//!
//! A **room** is a zone listed for players to find: its kind, content version, capacity, whether
//! it accepts players, and metadata (a JSON object of at most [`MAX_METADATA_BYTES`]). A private
//! room has a **code** and is never listed; it is joined by its code. A **seat** is one
//! principal's place in a room: *reserved* when the lobby handed out a ticket for it (it lapses
//! at its expiry if the player never arrives), *present* once the room's owner reported the
//! principal in the zone. The owner host reports each of its rooms about once a second (players
//! and observers present, their principals, and what the zone publishes), fenced by its epoch.
//!
//! Seats taken by role = the players (observers) the owner reported + seats of that role still
//! reserved; a room is full when that reaches its capacity, so a burst of concurrent joins never
//! hands out more tickets than the room has seats. Seats per address (the client's address, as
//! the application's back end saw it) are capped per role, reserved and present alike.

use async_trait::async_trait;
use serde::Serialize;
use serde_json::Value;

use crate::error::{Result, StoreError};
use crate::validate::check_id;

/// Largest metadata object a room carries, as JSON text in bytes.
pub const MAX_METADATA_BYTES: usize = 4096;
/// Most rooms a listing answers.
pub const MAX_LISTED: usize = 200;
/// Most principals one room report names.
pub const MAX_REPORTED_PRINCIPALS: usize = 4096;
/// Longest private room code, in bytes.
pub const MAX_CODE_LEN: usize = 32;
/// Longest content version or address, in bytes.
pub const MAX_LABEL_LEN: usize = 128;
/// Rooms `join_or_create` considers, fullest first, before it creates one.
pub(crate) const CANDIDATES: usize = 64;

/// A player's seat or an observer's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SeatRole {
    /// Plays: counts against `max_players`.
    Player,
    /// Watches: counts against `max_observers`.
    Observer,
}

impl SeatRole {
    /// The role as stored (`player` or `observer`).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Player => "player",
            Self::Observer => "observer",
        }
    }

    pub(crate) fn from_db(s: &str) -> Result<Self> {
        match s {
            "player" => Ok(Self::Player),
            "observer" => Ok(Self::Observer),
            other => Err(StoreError::Corrupt(format!("unknown seat role {other:?}"))),
        }
    }
}

/// A room to create ([`LobbyStore::create_room`], [`LobbyStore::join_or_create`]).
#[derive(Debug, Clone, PartialEq)]
pub struct NewRoom {
    /// The zone the room is.
    pub zone_id: String,
    /// Its kind.
    pub kind: String,
    /// The content version its zone runs (clients filter on it; may be empty).
    pub content_version: String,
    /// A private room's code (it is then never listed); `None` for a listed room.
    pub code: Option<String>,
    /// Players it seats.
    pub max_players: u32,
    /// Observers it seats.
    pub max_observers: u32,
    /// What it says of itself until its zone publishes otherwise (a JSON object).
    pub metadata: Value,
}

/// A room as the lobby sees it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Room {
    /// The zone the room is.
    pub zone_id: String,
    /// Its kind.
    pub kind: String,
    /// The content version its zone runs.
    pub content_version: String,
    /// True for a private room (joined by code, never listed).
    pub private: bool,
    /// Players it seats.
    pub max_players: u32,
    /// Observers it seats.
    pub max_observers: u32,
    /// Players its owner reported present.
    pub players: u32,
    /// Observers its owner reported present.
    pub observers: u32,
    /// Player seats handed out and not yet taken up (nor lapsed).
    pub reserved_players: u32,
    /// Observer seats handed out and not yet taken up (nor lapsed).
    pub reserved_observers: u32,
    /// Whether it takes players (its zone may close itself, e.g. once a match starts).
    pub open: bool,
    /// What it says of itself (a JSON object).
    pub metadata: Value,
    /// When it was created, by the database's clock (ms since the Unix epoch).
    pub created_at_ms: u64,
}

impl Room {
    /// Seats of `role` still free.
    pub fn free(&self, role: SeatRole) -> u32 {
        match role {
            SeatRole::Player => self
                .max_players
                .saturating_sub(self.players.saturating_add(self.reserved_players)),
            SeatRole::Observer => self
                .max_observers
                .saturating_sub(self.observers.saturating_add(self.reserved_observers)),
        }
    }

    /// Whether every `(key, value)` of `want` is a top-level string (or number or boolean, as
    /// its JSON text) of the room's metadata.
    pub fn matches(&self, want: &[(String, String)]) -> bool {
        want.iter().all(|(k, v)| match self.metadata.get(k) {
            Some(Value::String(s)) => s == v,
            Some(Value::Bool(b)) => v.parse::<bool>() == Ok(*b),
            Some(Value::Number(n)) => match (n.as_i64(), n.as_f64()) {
                (Some(i), _) => v.parse::<i64>() == Ok(i),
                (None, Some(f)) => v.parse::<f64>() == Ok(f),
                _ => false,
            },
            _ => false,
        })
    }
}

/// One principal's request for a seat.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SeatRequest {
    /// Who sits.
    pub principal: String,
    /// As a player or an observer.
    pub role: SeatRole,
    /// The client's address as the application's back end saw it, when it gave one.
    pub address: Option<String>,
    /// Most seats of this role one address may hold in a room (0: no cap).
    pub max_per_address: u32,
    /// How long the seat stays reserved if the player never arrives, in milliseconds.
    pub hold_ms: u64,
}

/// Which rooms a listing or a `join_or_create` looks at.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RoomFilter {
    /// Rooms of this kind.
    pub kind: String,
    /// Only rooms running this content version, when given.
    pub content_version: Option<String>,
    /// Only rooms with at least this many free seats of `role`.
    pub min_free: u32,
    /// The role `min_free` counts.
    pub role: Option<SeatRole>,
    /// Only rooms whose metadata has each of these top-level values ([`Room::matches`]).
    pub metadata: Vec<(String, String)>,
    /// At most this many rooms (at most [`MAX_LISTED`]).
    pub limit: usize,
}

/// What became of a seat request for one room.
#[derive(Debug, Clone, PartialEq)]
pub enum SeatOutcome {
    /// Seated (or already seated there): the room as it is now.
    Seated(Room),
    /// Every seat of the role is taken.
    Full(Room),
    /// The address holds as many seats of the role as it may.
    AddressFull(Room),
    /// The room does not take players now.
    Closed(Room),
    /// No such room (or, by code, no room with that code).
    NoRoom,
}

/// What a room's owner reports about it.
#[derive(Debug, Clone, PartialEq)]
pub struct RoomReport {
    /// The zone.
    pub zone_id: String,
    /// The owner's epoch: a report from a host that no longer owns the zone is ignored.
    pub epoch: u64,
    /// Players present.
    pub players: u32,
    /// Observers present.
    pub observers: u32,
    /// The principals present (players and observers), at most [`MAX_REPORTED_PRINCIPALS`].
    pub present: Vec<String>,
    /// Whether it takes players, when its zone said.
    pub open: Option<bool>,
    /// Its metadata, when its zone published some (a JSON object).
    pub metadata: Option<Value>,
}

/// What a batch of reports did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReportOutcome {
    /// Zones reported that are rooms, and were updated.
    pub rooms: Vec<String>,
    /// Zones reported under an epoch that is not the zone's fence: the reporter no longer owns
    /// them.
    pub fenced: Vec<String>,
}

/// The lobby's rooms and seats, shared by every host of the fleet.
///
/// A seat is *reserved* when handed out (it lapses at its expiry if the player never arrives) and
/// *present* once the room's owner reported the principal in the zone. Seats taken by role are
/// the players (observers) reported plus the seats of that role still reserved; a room is full
/// when that reaches its capacity. Seats per client address are capped per role.
#[async_trait]
pub trait LobbyStore: Send + Sync {
    /// Creates `room`, seating `seat` in it when given. Refuses an id already a room, or a code
    /// already used, with [`StoreError::RoomExists`](crate::StoreError::RoomExists), and malformed
    /// arguments with [`StoreError::InvalidArgument`](crate::StoreError::InvalidArgument).
    async fn create_room(&self, room: &NewRoom, seat: Option<&SeatRequest>) -> Result<Room>;

    /// Seats `seat` in the fullest room `filter` admits that has a free seat of its role and
    /// room for its address, or else creates `room` and seats it there: the room, and whether it
    /// was created. Concurrent calls for one kind, from any hosts, are serialized, so a room never
    /// hands out more seats than it has.
    async fn join_or_create(
        &self,
        filter: &RoomFilter,
        seat: &SeatRequest,
        room: &NewRoom,
    ) -> Result<(Room, bool)>;

    /// Seats `seat` in the room `zone_id`.
    async fn take_seat(&self, zone_id: &str, seat: &SeatRequest) -> Result<SeatOutcome>;

    /// The private room with `code`, if any.
    async fn room_by_code(&self, code: &str) -> Result<Option<Room>>;

    /// The room `zone_id`, if it is one.
    async fn room(&self, zone_id: &str) -> Result<Option<Room>>;

    /// Listed (not private), open rooms `filter` admits, fullest first.
    async fn list_rooms(&self, filter: &RoomFilter) -> Result<Vec<Room>>;

    /// Applies owners' reports: each room's counts, its present principals' seats (reserved
    /// seats of principals now present become present; present seats of principals gone are
    /// freed), and what its zone published. Reports of zones that are not rooms are skipped.
    async fn report_rooms(&self, reports: &[RoomReport]) -> Result<ReportOutcome>;

    /// Forgets rooms nobody was in, nor held a seat in, for `idle_ms`, and seats that lapsed;
    /// answers how many rooms were forgotten.
    async fn forget_idle_rooms(&self, idle_ms: u64) -> Result<u64>;
}

/// Refuses a room that is malformed.
pub(crate) fn check_room(room: &NewRoom) -> Result<()> {
    check_id("zone id", &room.zone_id)?;
    check_id("kind", &room.kind)?;
    check_label("content version", &room.content_version, true)?;
    if let Some(code) = &room.code {
        check_code(code)?;
    }
    if room.max_players == 0 && room.max_observers == 0 {
        return Err(StoreError::InvalidArgument(
            "a room must seat at least one player or observer".into(),
        ));
    }
    check_metadata(&room.metadata)?;
    Ok(())
}

/// Refuses a private room code that is empty, too long or not `[A-Za-z0-9_-]`.
pub(crate) fn check_code(code: &str) -> Result<()> {
    if code.is_empty()
        || code.len() > MAX_CODE_LEN
        || !code
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
    {
        return Err(StoreError::InvalidArgument(format!(
            "a room code is 1..={MAX_CODE_LEN} bytes of [A-Za-z0-9_-]"
        )));
    }
    Ok(())
}

/// Refuses metadata that is not a JSON object or is too large.
pub(crate) fn check_metadata(metadata: &Value) -> Result<()> {
    if !metadata.is_object() {
        return Err(StoreError::InvalidArgument(
            "room metadata must be a JSON object".into(),
        ));
    }
    let len = metadata.to_string().len();
    if len > MAX_METADATA_BYTES {
        return Err(StoreError::InvalidArgument(format!(
            "room metadata is {len} bytes of JSON, at most {MAX_METADATA_BYTES}"
        )));
    }
    Ok(())
}

/// Refuses a label (content version, address) too long or with control characters.
fn check_label(what: &str, value: &str, may_be_empty: bool) -> Result<()> {
    if (!may_be_empty && value.is_empty())
        || value.len() > MAX_LABEL_LEN
        || value.chars().any(char::is_control)
    {
        return Err(StoreError::InvalidArgument(format!(
            "{what} must be at most {MAX_LABEL_LEN} bytes without control characters"
        )));
    }
    Ok(())
}

/// Refuses a malformed seat request.
pub(crate) fn check_seat(seat: &SeatRequest) -> Result<()> {
    check_id("principal", &seat.principal)?;
    if let Some(a) = &seat.address {
        check_label("address", a, false)?;
    }
    if seat.hold_ms == 0 || seat.hold_ms > 3_600_000 {
        return Err(StoreError::InvalidArgument(
            "a seat is held 1 ms to 1 hour".into(),
        ));
    }
    Ok(())
}

/// Refuses a malformed filter.
pub(crate) fn check_filter(filter: &RoomFilter) -> Result<()> {
    check_id("kind", &filter.kind)?;
    if let Some(v) = &filter.content_version {
        check_label("content version", v, true)?;
    }
    if filter.metadata.len() > 16 {
        return Err(StoreError::InvalidArgument(
            "at most 16 metadata filters".into(),
        ));
    }
    Ok(())
}

/// Refuses a malformed report.
pub(crate) fn check_report(r: &RoomReport) -> Result<()> {
    check_id("zone id", &r.zone_id)?;
    if r.present.len() > MAX_REPORTED_PRINCIPALS {
        return Err(StoreError::InvalidArgument(format!(
            "a room report names at most {MAX_REPORTED_PRINCIPALS} principals"
        )));
    }
    if let Some(m) = &r.metadata {
        check_metadata(m)?;
    }
    Ok(())
}

/// A principal's seat already in a room.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct HeldSeat {
    /// Its role.
    pub role: SeatRole,
    /// True once the principal was reported present.
    pub present: bool,
}

/// What to do with a seat request, given the room, the principal's seat there (if any) and how
/// many live seats of the request's role its address holds there.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Decision {
    /// Write (or refresh) the reservation.
    Reserve,
    /// The principal is present there already: nothing to write.
    AlreadyPresent,
    /// Refused: full.
    Full,
    /// Refused: the address holds its cap.
    AddressFull,
    /// Refused: closed.
    Closed,
}

/// The one rule for taking a seat.
pub(crate) fn decide(
    room: &Room,
    held: Option<HeldSeat>,
    address_seats: u32,
    seat: &SeatRequest,
) -> Decision {
    if let Some(h) = held {
        if h.present {
            return Decision::AlreadyPresent;
        }
        if h.role == seat.role {
            // A reservation of the same role is refreshed: it already holds its seat.
            return Decision::Reserve;
        }
    }
    if !room.open {
        return Decision::Closed;
    }
    if room.free(seat.role) == 0 {
        return Decision::Full;
    }
    if seat.address.is_some() && seat.max_per_address > 0 && address_seats >= seat.max_per_address {
        return Decision::AddressFull;
    }
    Decision::Reserve
}

/// `room` with `seat` newly reserved in it.
pub(crate) fn with_reserved(mut room: Room, seat: &SeatRequest, held: Option<HeldSeat>) -> Room {
    let refreshed = held.is_some_and(|h| !h.present && h.role == seat.role);
    if !refreshed {
        match seat.role {
            SeatRole::Player => room.reserved_players += 1,
            SeatRole::Observer => room.reserved_observers += 1,
        }
    }
    room
}

/// Every room with its reservations, as the columns [`Room`] is read from (both backends; `$1` is
/// the database's now in ms, read as a column so every query types it): zone_id, kind,
/// content_version, private, max_players, max_observers, players, observers, reserved_players,
/// reserved_observers, open, metadata (JSON text), created_at_ms, code, now. SQLite reads it with
/// `?N` for `$N`.
///
/// A room's reserved counts are kept in its row, recounted from its seats whenever one of them
/// changes ([`RECOUNT`]), so finding rooms never counts seats. A reservation that lapsed still
/// counts until the sweep removes it ([`LobbyStore::forget_idle_rooms`], every few seconds):
/// a room may look fuller than it is for that long, never emptier.
pub(crate) const ROOMS: &str = "
    SELECT * FROM (
        SELECT r.zone_id, r.kind, r.content_version, r.code IS NOT NULL AS private,
            r.max_players, r.max_observers, r.players, r.observers,
            r.reserved_players, r.reserved_observers,
            r.open = 1 AS open, r.metadata, r.created_at_ms, r.code,
            CAST($1 AS BIGINT) AS now_ms
        FROM lobby_rooms r
    ) rooms";

/// Recounts room `$1`'s reserved seats from its seat rows (both backends).
pub(crate) const RECOUNT: &str = "
    UPDATE lobby_rooms SET
        reserved_players = (SELECT count(*) FROM lobby_seats s WHERE s.zone_id = $1
            AND s.role = 'player' AND s.expires_ms IS NOT NULL),
        reserved_observers = (SELECT count(*) FROM lobby_seats s WHERE s.zone_id = $1
            AND s.role = 'observer' AND s.expires_ms IS NOT NULL)
    WHERE zone_id = $1";

/// The order rooms are offered in: fullest first (players present and coming), then oldest.
pub(crate) const FULLEST_FIRST: &str =
    " ORDER BY players + reserved_players DESC, created_at_ms, zone_id";

/// The room of kind `$2` where principal `$3` holds a live seat (after [`ROOMS`]).
pub(crate) const HELD_WHERE: &str = " WHERE kind = $2 AND zone_id IN (
        SELECT zone_id FROM lobby_seats WHERE principal = $3
            AND (expires_ms IS NULL OR expires_ms > $1))";

/// The candidates of a listing or a `join_or_create` (after [`ROOMS`]): listed, open rooms of
/// kind `$2`, of content version `$3` unless it is NULL, with a free seat of the role.
pub(crate) fn candidates_where(role: SeatRole) -> &'static str {
    match role {
        SeatRole::Player => {
            " WHERE kind = $2 AND code IS NULL AND open
                AND (CAST($3 AS TEXT) IS NULL OR content_version = CAST($3 AS TEXT))
                AND players + reserved_players < max_players"
        }
        SeatRole::Observer => {
            " WHERE kind = $2 AND code IS NULL AND open
                AND (CAST($3 AS TEXT) IS NULL OR content_version = CAST($3 AS TEXT))
                AND observers + reserved_observers < max_observers"
        }
    }
}

/// The limit a listing asks the database for: `limit` within 1..=[`MAX_LISTED`].
pub(crate) fn listing_limit(limit: usize) -> usize {
    limit.clamp(1, MAX_LISTED)
}

/// Rooms of `rows` (fullest first) that `filter` admits, at most its limit.
pub(crate) fn admitted(rows: Vec<Room>, filter: &RoomFilter) -> Vec<Room> {
    let role = filter.role.unwrap_or(SeatRole::Player);
    rows.into_iter()
        .filter(|r| r.free(role) >= filter.min_free.max(1) && r.matches(&filter.metadata))
        .take(listing_limit(filter.limit))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn room(players: u32, reserved: u32) -> Room {
        Room {
            zone_id: "r".into(),
            kind: "arena".into(),
            content_version: String::new(),
            private: false,
            max_players: 4,
            max_observers: 1,
            players,
            observers: 0,
            reserved_players: reserved,
            reserved_observers: 0,
            open: true,
            metadata: json!({"map": "dunes", "ranked": true, "size": 4}),
            created_at_ms: 0,
        }
    }

    fn seat(address: Option<&str>) -> SeatRequest {
        SeatRequest {
            principal: "ann".into(),
            role: SeatRole::Player,
            address: address.map(str::to_owned),
            max_per_address: 2,
            hold_ms: 30_000,
        }
    }

    #[test]
    fn seats_count_present_and_reserved_players() {
        assert_eq!(room(1, 1).free(SeatRole::Player), 2);
        assert_eq!(decide(&room(2, 1), None, 0, &seat(None)), Decision::Reserve);
        assert_eq!(decide(&room(3, 1), None, 0, &seat(None)), Decision::Full);
        assert_eq!(decide(&room(5, 0), None, 0, &seat(None)), Decision::Full);
        let closed = Room {
            open: false,
            ..room(0, 0)
        };
        assert_eq!(decide(&closed, None, 0, &seat(None)), Decision::Closed);
    }

    #[test]
    fn an_address_holds_at_most_its_cap() {
        assert_eq!(
            decide(&room(0, 0), None, 2, &seat(Some("10.0.0.1"))),
            Decision::AddressFull
        );
        assert_eq!(
            decide(&room(0, 0), None, 1, &seat(Some("10.0.0.1"))),
            Decision::Reserve
        );
        // Without an address (or a cap), no cap applies.
        assert_eq!(decide(&room(0, 0), None, 9, &seat(None)), Decision::Reserve);
    }

    #[test]
    fn a_principal_seated_already_keeps_its_seat() {
        let full = room(3, 1);
        let reserved = HeldSeat {
            role: SeatRole::Player,
            present: false,
        };
        assert_eq!(
            decide(&full, Some(reserved), 0, &seat(None)),
            Decision::Reserve
        );
        assert_eq!(
            with_reserved(full.clone(), &seat(None), Some(reserved)).reserved_players,
            1
        );
        let present = HeldSeat {
            role: SeatRole::Player,
            present: true,
        };
        assert_eq!(
            decide(&full, Some(present), 0, &seat(None)),
            Decision::AlreadyPresent
        );
    }

    #[test]
    fn metadata_filters_match_top_level_values() {
        let r = room(0, 0);
        let want = |pairs: &[(&str, &str)]| -> Vec<(String, String)> {
            pairs
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect()
        };
        assert!(r.matches(&want(&[
            ("map", "dunes"),
            ("ranked", "true"),
            ("size", "4")
        ])));
        assert!(!r.matches(&want(&[("map", "ice")])));
        assert!(!r.matches(&want(&[("mode", "ctf")])));
    }

    #[test]
    fn malformed_rooms_and_seats_are_refused() {
        let good = NewRoom {
            zone_id: "arena-1".into(),
            kind: "arena".into(),
            content_version: "v1".into(),
            code: None,
            max_players: 2,
            max_observers: 0,
            metadata: json!({}),
        };
        assert!(check_room(&good).is_ok());
        for bad in [
            NewRoom {
                metadata: json!([1]),
                ..good.clone()
            },
            NewRoom {
                metadata: json!({"x": "y".repeat(MAX_METADATA_BYTES)}),
                ..good.clone()
            },
            NewRoom {
                code: Some("has space".into()),
                ..good.clone()
            },
            NewRoom {
                max_players: 0,
                ..good.clone()
            },
            NewRoom {
                content_version: "a\nb".into(),
                ..good.clone()
            },
        ] {
            assert!(
                matches!(check_room(&bad), Err(StoreError::InvalidArgument(_))),
                "{bad:?}"
            );
        }
        assert!(check_seat(&seat(Some("10.0.0.1"))).is_ok());
        assert!(check_seat(&SeatRequest {
            hold_ms: 0,
            ..seat(None)
        })
        .is_err());
        assert!(check_seat(&SeatRequest {
            principal: String::new(),
            ..seat(None)
        })
        .is_err());
    }
}
