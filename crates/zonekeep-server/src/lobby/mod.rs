//! The lobby: rooms players find and join, fleet-wide, for an application's own back end.
//!
//! Players never call it. The application's login service authenticates a player, then calls the
//! lobby of any host with the lobby credential (`--lobby-token`, a bearer token of its own, never
//! the admin one) naming the player's principal; the answer carries a join ticket the host minted
//! for that principal and the zone, and the URL to connect to. The store holds the rooms and the
//! seats handed out ([`zonekeep_store::LobbyStore`]), so every host answers alike, and a seat is
//! handed out under a lock per kind: concurrent joins never seat more players than a room has.
//! Each host reports the rooms it runs about once a second ([`report`]).
//!
//! | route | body | answer |
//! | --- | --- | --- |
//! | `GET /lobby/rooms?kind=K[&content_version=V][&min_free=N][&role=player\|observer][&meta.KEY=VALUE...][&limit=N]` | | `{"rooms": [Room]}`: listed (not private), open rooms of the kind with a free seat, fullest first |
//! | `POST /lobby/join_or_create` | `{"kind", "principal", "name"?, "role"?, "address"?, "content_version"?, "metadata"?, "max_players"?, "max_observers"?, "params"?, "claims"?}` | 200 `Seat`: a seat in the fullest room of the kind whose metadata has every value of `metadata` (and the content version, when given), or in a new room with that metadata |
//! | `POST /lobby/rooms` | `{"kind", "principal"?, "name"?, "private"?, "metadata"?, "max_players"?, "max_observers"?, "params"?, "claims"?}` | 201 `Seat` of the creator (`principal` given), or `{"room"}`; a private room's answer carries its `code` |
//! | `GET /lobby/rooms/{zone}` | | `Room`: any room, private ones too (its players and observers present, seats reserved, free seats, open, metadata); 404 `no_room` |
//! | `POST /lobby/rooms/{zone}/join` | `{"principal", "name"?, "role"?, "address"?, "claims"?}` | 200 `Seat` in that room |
//! | `POST /lobby/join_by_code` | `{"code", "principal", "name"?, "role"?, "address"?, "claims"?}` | 200 `Seat` in the private room with that code |
//!
//! A `Seat` is `{"zone", "kind", "created", "code"?, "url", "host", "ticket", "expires_at", "room"}`.
//! Refusals: 400 `bad_request` (malformed body or query, unknown kind, reserved claim), 401
//! `unauthorized`, 404 `no_room`, 409 `room_full`, `address_full`, `room_closed` and `exists`, 503
//! `unavailable` (no store, the store failing, no host with room), and 404 `lobby_off` on a host
//! without a lobby credential.

pub(crate) mod report;
mod seat;

pub(crate) use seat::hold_secs;
use seat::{entry, new_code, new_zone_id, room_view, seat_answer, seated, Sitter};

use std::collections::HashMap;
use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{Path, Query, Request, State};
use axum::http::StatusCode;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::Deserialize;
use serde_json::{json, Map, Value};
use zonekeep_store::{NewRoom, RoomFilter, SeatRole, StoreError};

use crate::host::{json_error, valid_zone_id, Shared};

/// The lobby's routes behind its credential, or a route answering `lobby_off` for all of them.
pub(crate) fn router(shared: &Arc<Shared>) -> Router<Arc<Shared>> {
    if shared.lobby_token_hash.is_none() {
        return Router::new().route("/lobby/{*rest}", axum::routing::any(off));
    }
    Router::new()
        .route("/lobby/rooms", get(list).post(create))
        .route("/lobby/rooms/{zone}", get(show))
        .route("/lobby/rooms/{zone}/join", post(join_room))
        .route("/lobby/join_or_create", post(join_or_create))
        .route("/lobby/join_by_code", post(join_by_code))
        .layer(axum::middleware::from_fn_with_state(shared.clone(), auth))
}

async fn off() -> Response {
    json_error(
        StatusCode::NOT_FOUND,
        "lobby_off",
        "the lobby is off on this host (start it with --lobby-token)",
    )
}

/// Admits a request bearing the lobby credential; counts and refuses any other.
async fn auth(State(shared): State<Arc<Shared>>, req: Request, next: Next) -> Response {
    match crate::admin::check_bearer(req.headers(), shared.lobby_token_hash.as_ref()) {
        Ok(()) => next.run(req).await,
        Err(why) => {
            shared.metrics.lobby().refused(why);
            crate::admin::unauthorized()
        }
    }
}

/// Admits a request bearing the application back end's credential (the lobby's) to a route
/// outside the lobby (scores, presence); a host without one answers `backend_off`.
pub(crate) async fn backend_auth(
    State(shared): State<Arc<Shared>>,
    req: Request,
    next: Next,
) -> Response {
    if shared.lobby_token_hash.is_none() {
        return json_error(
            StatusCode::NOT_FOUND,
            "backend_off",
            "this route takes the back end's credential: start the host with --lobby-token",
        );
    }
    auth(State(shared), req, next).await
}

/// Why the lobby refused a request.
#[derive(Debug, thiserror::Error)]
enum LobbyFailure {
    #[error("{0}")]
    BadRequest(String),
    #[error("{0}")]
    NoRoom(String),
    #[error("room {0} has no free seat")]
    Full(String),
    #[error("this address holds as many seats in room {0} as it may")]
    AddressFull(String),
    #[error("room {0} does not take players now")]
    Closed(String),
    #[error("{0}")]
    Exists(String),
    #[error("{0}")]
    Unavailable(String),
}

impl IntoResponse for LobbyFailure {
    fn into_response(self) -> Response {
        let (status, code) = match &self {
            Self::BadRequest(_) => (StatusCode::BAD_REQUEST, "bad_request"),
            Self::NoRoom(_) => (StatusCode::NOT_FOUND, "no_room"),
            Self::Full(_) => (StatusCode::CONFLICT, "room_full"),
            Self::AddressFull(_) => (StatusCode::CONFLICT, "address_full"),
            Self::Closed(_) => (StatusCode::CONFLICT, "room_closed"),
            Self::Exists(_) => (StatusCode::CONFLICT, "exists"),
            Self::Unavailable(_) => (StatusCode::SERVICE_UNAVAILABLE, "unavailable"),
        };
        json_error(status, code, self.to_string())
    }
}

impl From<StoreError> for LobbyFailure {
    fn from(e: StoreError) -> Self {
        match e {
            StoreError::InvalidArgument(m) => Self::BadRequest(m),
            StoreError::RoomExists(m) => Self::Exists(format!("a room exists: {m}")),
            e => Self::Unavailable(format!("store: {e}")),
        }
    }
}

type Answer = Result<Response, LobbyFailure>;

/// The store's lobby, or why there is none.
fn lobby(shared: &Shared) -> Result<&zonekeep_store::Store, LobbyFailure> {
    shared
        .sim
        .persist
        .as_ref()
        .map(|p| p.store())
        .ok_or_else(|| LobbyFailure::Unavailable("this host keeps no store, so no lobby".into()))
}

/// A body parsed as `T`, or a `bad_request`.
fn parse<T: serde::de::DeserializeOwned>(body: &Bytes) -> Result<T, LobbyFailure> {
    serde_json::from_slice(body).map_err(|e| LobbyFailure::BadRequest(format!("body: {e}")))
}

/// A room's capacity: what was asked, within the kind's own.
fn capacity(
    shared: &Shared,
    kind: &str,
    players: Option<u32>,
    observers: Option<u32>,
) -> (u32, u32) {
    let cfg = shared.sim.specs.get(kind).map(|s| &s.config);
    let (max_p, max_o) = cfg.map_or((0, 0), |c| (c.max_players, c.max_observers));
    (
        players.map_or(max_p, |p| p.min(max_p)),
        observers.map_or(max_o, |o| o.min(max_o)),
    )
}

/// Refuses a kind this host does not serve.
fn known_kind(shared: &Shared, kind: &str) -> Result<(), LobbyFailure> {
    if shared.sim.specs.contains_key(kind) {
        Ok(())
    } else {
        Err(LobbyFailure::BadRequest(shared.unknown_kind(kind)))
    }
}

/// Metadata as filter pairs: each top-level string, number or boolean value.
fn filter_pairs(metadata: &Map<String, Value>) -> Result<Vec<(String, String)>, LobbyFailure> {
    metadata
        .iter()
        .map(|(k, v)| match v {
            Value::String(s) => Ok((k.clone(), s.clone())),
            Value::Number(_) | Value::Bool(_) => Ok((k.clone(), v.to_string())),
            _ => Err(LobbyFailure::BadRequest(format!(
                "metadata {k:?}: only strings, numbers and booleans can be matched"
            ))),
        })
        .collect()
}

async fn list(
    State(shared): State<Arc<Shared>>,
    Query(q): Query<HashMap<String, String>>,
) -> Answer {
    let store = lobby(&shared)?;
    let kind = q
        .get("kind")
        .cloned()
        .ok_or_else(|| LobbyFailure::BadRequest("kind is required".into()))?;
    let number = |key: &str| -> Result<Option<u64>, LobbyFailure> {
        q.get(key)
            .map(|v| {
                v.parse::<u64>()
                    .map_err(|_| LobbyFailure::BadRequest(format!("{key} must be a number")))
            })
            .transpose()
    };
    let role = match q.get("role").map(String::as_str) {
        None | Some("player") => SeatRole::Player,
        Some("observer") => SeatRole::Observer,
        Some(other) => {
            return Err(LobbyFailure::BadRequest(format!(
                "role must be player or observer, not {other:?}"
            )))
        }
    };
    let mut metadata: Vec<(String, String)> = q
        .iter()
        .filter_map(|(k, v)| k.strip_prefix("meta.").map(|k| (k.to_owned(), v.clone())))
        .collect();
    metadata.sort();
    let filter = RoomFilter {
        kind,
        content_version: q.get("content_version").cloned(),
        min_free: u32::try_from(number("min_free")?.unwrap_or(1)).unwrap_or(u32::MAX),
        role: Some(role),
        metadata,
        limit: usize::try_from(number("limit")?.unwrap_or(50)).unwrap_or(usize::MAX),
    };
    let rooms = store.lobby.list_rooms(&filter).await?;
    let rooms: Vec<Value> = rooms.iter().map(room_view).collect();
    Ok(Json(json!({ "rooms": rooms })).into_response())
}

/// What a new room is to be: its metadata, capacity and zone params.
#[derive(Debug, Deserialize)]
struct RoomShape {
    #[serde(default)]
    metadata: Option<Map<String, Value>>,
    #[serde(default)]
    max_players: Option<u32>,
    #[serde(default)]
    max_observers: Option<u32>,
    #[serde(default)]
    params: Value,
}

#[derive(Debug, Deserialize)]
struct JoinOrCreate {
    kind: String,
    #[serde(flatten)]
    sitter: Sitter,
    #[serde(default)]
    content_version: Option<String>,
    #[serde(flatten)]
    shape: RoomShape,
}

async fn join_or_create(State(shared): State<Arc<Shared>>, body: Bytes) -> Answer {
    let b: JoinOrCreate = parse(&body)?;
    known_kind(&shared, &b.kind)?;
    b.sitter.check()?;
    params_ok(&b.shape.params)?;
    let store = lobby(&shared)?;
    let metadata = b.shape.metadata.clone().unwrap_or_default();
    let seat = b.sitter.seat(&shared)?;
    let filter = RoomFilter {
        kind: b.kind.clone(),
        content_version: b.content_version.clone(),
        min_free: 1,
        role: Some(seat.role),
        metadata: filter_pairs(&metadata)?,
        limit: 1,
    };
    let (max_players, max_observers) =
        capacity(&shared, &b.kind, b.shape.max_players, b.shape.max_observers);
    let room = NewRoom {
        zone_id: new_zone_id(&b.kind)?,
        kind: b.kind.clone(),
        content_version: b
            .content_version
            .clone()
            .unwrap_or_else(|| shared.config.content_version.clone()),
        code: None,
        max_players,
        max_observers,
        metadata: Value::Object(metadata),
    };
    let (room, created) = store.lobby.join_or_create(&filter, &seat, &room).await?;
    seat_answer(&shared, room, &b.sitter, created, None, &b.shape.params).await
}

/// Refuses zone params the directory would refuse.
fn params_ok(params: &Value) -> Result<(), LobbyFailure> {
    match crate::host::params_refusal(params) {
        Some(why) => Err(LobbyFailure::BadRequest(why)),
        None => Ok(()),
    }
}

#[derive(Debug, Deserialize)]
struct CreateRoom {
    kind: String,
    #[serde(default)]
    private: bool,
    /// The creator, seated in the new room when the body names a principal.
    #[serde(flatten)]
    creator: Option<Sitter>,
    #[serde(flatten)]
    shape: RoomShape,
}

async fn create(State(shared): State<Arc<Shared>>, body: Bytes) -> Answer {
    let b: CreateRoom = parse(&body)?;
    known_kind(&shared, &b.kind)?;
    params_ok(&b.shape.params)?;
    let store = lobby(&shared)?;
    let seat = match &b.creator {
        Some(s) => {
            s.check()?;
            Some(s.seat(&shared)?)
        }
        None => None,
    };
    let (max_players, max_observers) =
        capacity(&shared, &b.kind, b.shape.max_players, b.shape.max_observers);
    let code = if b.private { Some(new_code()?) } else { None };
    let room = NewRoom {
        zone_id: new_zone_id(&b.kind)?,
        kind: b.kind.clone(),
        content_version: shared.config.content_version.clone(),
        code: code.clone(),
        max_players,
        max_observers,
        metadata: Value::Object(b.shape.metadata.clone().unwrap_or_default()),
    };
    let created = store.lobby.create_room(&room, seat.as_ref()).await?;
    match &b.creator {
        Some(s) => seat_answer(&shared, created, s, true, code, &b.shape.params).await,
        None => {
            // Placed now, so the room's zone has an owner before anyone asks for it.
            let (url, host) =
                entry(&shared, &created.zone_id, &created.kind, &b.shape.params).await?;
            Ok((
                StatusCode::CREATED,
                Json(json!({"zone": created.zone_id, "code": code, "url": url, "host": host, "room": room_view(&created)})),
            )
                .into_response())
        }
    }
}

async fn show(State(shared): State<Arc<Shared>>, Path(zone): Path<String>) -> Answer {
    let store = lobby(&shared)?;
    if !valid_zone_id(&zone) {
        return Err(LobbyFailure::BadRequest("invalid zone id".into()));
    }
    match store.lobby.room(&zone).await? {
        Some(room) => Ok(Json(room_view(&room)).into_response()),
        None => Err(LobbyFailure::NoRoom(format!("no room {zone:?}"))),
    }
}

async fn join_room(
    State(shared): State<Arc<Shared>>,
    Path(zone): Path<String>,
    body: Bytes,
) -> Answer {
    let sitter: Sitter = parse(&body)?;
    sitter.check()?;
    let store = lobby(&shared)?;
    if !valid_zone_id(&zone) {
        return Err(LobbyFailure::BadRequest("invalid zone id".into()));
    }
    let outcome = store.lobby.take_seat(&zone, &sitter.seat(&shared)?).await?;
    seated(&shared, outcome, &sitter, &zone, None).await
}

#[derive(Debug, Deserialize)]
struct ByCode {
    code: String,
    #[serde(flatten)]
    sitter: Sitter,
}

async fn join_by_code(State(shared): State<Arc<Shared>>, body: Bytes) -> Answer {
    let b: ByCode = parse(&body)?;
    b.sitter.check()?;
    let store = lobby(&shared)?;
    let code = b.code.to_ascii_uppercase();
    let Some(room) = store.lobby.room_by_code(&code).await? else {
        return Err(LobbyFailure::NoRoom("no private room has that code".into()));
    };
    let outcome = store
        .lobby
        .take_seat(&room.zone_id, &b.sitter.seat(&shared)?)
        .await?;
    seated(&shared, outcome, &b.sitter, &room.zone_id, Some(code)).await
}
