//! A seat answered: who sits (a request's principal, name, role, address and claims, checked),
//! the ticket the host mints for them, the zone's owner placed and claimed on the fleet, and the
//! answer a back end gets.

use std::sync::Arc;

use axum::http::StatusCode;
use axum::response::IntoResponse;
use axum::Json;
use serde::Deserialize;
use serde_json::{json, Map, Value};
use zonekeep_core::{Claims, Role};
use zonekeep_store::{Room, SeatOutcome, SeatRequest, SeatRole};

use super::{Answer, LobbyFailure};
use crate::host::{valid_zone_id, Shared};
use crate::ticket::{mint, unix_now, MintRequest};

/// Ticket claims the lobby sets itself; a body's `claims` may not name them.
const RESERVED_CLAIMS: &[&str] = &[
    "sub", "zone", "role", "iat", "nbf", "exp", "jti", "kind", "name", "params",
];
/// Most extra claims a seat's ticket carries, as JSON text in bytes.
const MAX_CLAIMS_BYTES: usize = 2048;
/// Longest `name` claim, in bytes.
const MAX_NAME: usize = 64;

/// Who sits, as a request names them.
#[derive(Debug, Deserialize)]
pub(super) struct Sitter {
    principal: String,
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    role: Option<String>,
    #[serde(default)]
    address: Option<String>,
    #[serde(default)]
    claims: Option<Map<String, Value>>,
}

impl Sitter {
    pub(super) fn role(&self) -> Result<SeatRole, LobbyFailure> {
        match self.role.as_deref() {
            None | Some("player") => Ok(SeatRole::Player),
            Some("observer") => Ok(SeatRole::Observer),
            Some(other) => Err(LobbyFailure::BadRequest(format!(
                "role must be player or observer, not {other:?}"
            ))),
        }
    }

    /// The seat request, under the host's caps.
    pub(super) fn seat(&self, shared: &Shared) -> Result<SeatRequest, LobbyFailure> {
        let role = self.role()?;
        let cfg = &shared.config;
        Ok(SeatRequest {
            principal: self.principal.clone(),
            role,
            address: self.address.clone(),
            max_per_address: match role {
                SeatRole::Player => cfg.lobby_players_per_address,
                SeatRole::Observer => cfg.lobby_observers_per_address,
            },
            hold_ms: hold_secs(shared) * 1000,
        })
    }

    /// Checks the ticket's name and extra claims.
    pub(super) fn check(&self) -> Result<(), LobbyFailure> {
        if self.principal.is_empty() || self.principal.len() > 256 {
            return Err(LobbyFailure::BadRequest(
                "principal must be 1..=256 bytes".into(),
            ));
        }
        if let Some(n) = &self.name {
            if n.is_empty() || n.len() > MAX_NAME || n.chars().any(char::is_control) {
                return Err(LobbyFailure::BadRequest(format!(
                    "name must be 1..={MAX_NAME} bytes without control characters"
                )));
            }
        }
        if let Some(c) = &self.claims {
            if let Some(k) = c.keys().find(|k| RESERVED_CLAIMS.contains(&k.as_str())) {
                return Err(LobbyFailure::BadRequest(format!(
                    "claim {k:?} is the lobby's own; it may not be given"
                )));
            }
            if Value::Object(c.clone()).to_string().len() > MAX_CLAIMS_BYTES {
                return Err(LobbyFailure::BadRequest(format!(
                    "claims are at most {MAX_CLAIMS_BYTES} bytes of JSON"
                )));
            }
        }
        Ok(())
    }
}

/// How long a seat is held for a player who has not arrived, and its ticket lives: the host's
/// seat hold, within the longest ticket lifetime it accepts.
pub(crate) fn hold_secs(shared: &Shared) -> u64 {
    shared
        .config
        .lobby_seat_hold_secs
        .clamp(1, shared.config.ticket_max_lifetime_secs.max(1))
}

/// A new room's zone id: its kind and 12 random hex digits.
pub(super) fn new_zone_id(kind: &str) -> Result<String, LobbyFailure> {
    let suffix = crate::fleet::random_hex(6)
        .map_err(|e| LobbyFailure::Unavailable(format!("random source: {e}")))?;
    let id = format!("{kind}-{suffix}");
    if valid_zone_id(&id) {
        Ok(id)
    } else {
        Err(LobbyFailure::BadRequest(format!(
            "kind {kind:?} makes no valid zone id"
        )))
    }
}

/// A private room's code: 8 characters of an alphabet without look-alikes.
pub(super) fn new_code() -> Result<String, LobbyFailure> {
    const ALPHABET: &[u8] = b"ABCDEFGHJKLMNPQRSTUVWXYZ23456789";
    let mut bytes = [0u8; 8];
    getrandom::fill(&mut bytes)
        .map_err(|e| LobbyFailure::Unavailable(format!("random source: {e}")))?;
    Ok(bytes
        .iter()
        .map(|b| char::from(ALPHABET[usize::from(*b) % ALPHABET.len()]))
        .collect())
}

/// Where a room's players connect: its owner's URL, placing the zone on the fleet (by free
/// capacity) when it has no live owner yet.
pub(super) async fn entry(
    shared: &Arc<Shared>,
    zone: &str,
    kind: &str,
    params: &Value,
) -> Result<(String, Option<String>), LobbyFailure> {
    let Some(fleet) = shared.fleet() else {
        return Err(LobbyFailure::Unavailable(
            "this host is not a fleet member yet".into(),
        ));
    };
    let here = || {
        (
            format!("{}/zones/{zone}", fleet.url),
            Some(fleet.host_id.clone()),
        )
    };
    let owner = match fleet.route(zone, kind, params).await {
        Ok(crate::fleet::route::Route::Owner { host, url }) => {
            return Ok((format!("{url}/zones/{zone}"), Some(host)))
        }
        Ok(crate::fleet::route::Route::Here(found)) => found.and_then(|l| l.owner),
        Err(e) => return Err(LobbyFailure::Unavailable(e.to_string())),
    };
    if owner.as_deref() == Some(fleet.host_id.as_str()) {
        return Ok(here());
    }
    // Placement chose this host for a zone nobody owns: claim it now (this host loads it when
    // the first player arrives, or its reconcile does), so that every host answering a seat in
    // it names the same owner. A claim that lost to another host's names that host.
    match fleet.claim_for(zone, kind, params, &fleet.host_id).await {
        Ok(zonekeep_store::ZoneClaim::Claimed { .. }) => Ok(here()),
        Ok(zonekeep_store::ZoneClaim::Owned(l)) => match (l.owner, l.owner_url) {
            (Some(h), _) if h == fleet.host_id => Ok(here()),
            (Some(h), Some(url)) => Ok((format!("{url}/zones/{zone}"), Some(h))),
            _ => Ok(here()),
        },
        Err(e) => Err(LobbyFailure::Unavailable(e.to_string())),
    }
}

/// The answer for `sitter` seated in `room`: a ticket for the zone and where to use it.
pub(super) async fn seat_answer(
    shared: &Arc<Shared>,
    room: Room,
    sitter: &Sitter,
    created: bool,
    code: Option<String>,
    params: &Value,
) -> Answer {
    let role = match sitter.role()? {
        SeatRole::Player => Role::Player,
        SeatRole::Observer => Role::Observer,
    };
    let mut claims = Claims::new();
    claims.insert("kind".into(), Value::from(room.kind.clone()));
    if let Some(n) = &sitter.name {
        claims.insert("name".into(), Value::from(n.clone()));
    }
    for (k, v) in sitter.claims.iter().flatten() {
        claims.insert(k.clone(), v.clone());
    }
    let ttl = hold_secs(shared);
    let key = shared.verifier.keys().primary().ok_or_else(|| {
        LobbyFailure::Unavailable("this host has no ticket key to mint with".into())
    })?;
    let now = unix_now();
    let ticket = mint(
        key,
        &MintRequest {
            sub: sitter.principal.clone(),
            zone: room.zone_id.clone(),
            role,
            ttl_secs: ttl,
            params: (!params.is_null()).then(|| params.clone()),
            claims,
        },
        now,
    )
    .map_err(|e| LobbyFailure::Unavailable(format!("minting the ticket: {e}")))?;
    let (url, host) = entry(shared, &room.zone_id, &room.kind, params).await?;
    shared
        .metrics
        .lobby()
        .seated(if created { "created" } else { "joined" });
    let status = if created {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    Ok((
        status,
        Json(json!({
            "zone": room.zone_id,
            "kind": room.kind,
            "created": created,
            "code": code,
            "url": url,
            "host": host,
            "ticket": ticket,
            "expires_at": now.saturating_add(ttl),
            "room": room_view(&room),
        })),
    )
        .into_response())
}

/// A room as the lobby shows it: the stored room with its free seats.
pub(super) fn room_view(room: &Room) -> Value {
    let mut v = serde_json::to_value(room).unwrap_or_default();
    if let Value::Object(m) = &mut v {
        m.insert("free_players".into(), room.free(SeatRole::Player).into());
        m.insert(
            "free_observers".into(),
            room.free(SeatRole::Observer).into(),
        );
    }
    v
}

/// The answer to a seat taken in a named room.
pub(super) async fn seated(
    shared: &Arc<Shared>,
    outcome: SeatOutcome,
    sitter: &Sitter,
    zone: &str,
    code: Option<String>,
) -> Answer {
    match outcome {
        SeatOutcome::Seated(room) => {
            seat_answer(shared, room, sitter, false, code, &Value::Null).await
        }
        SeatOutcome::Full(_) => Err(LobbyFailure::Full(zone.to_owned())),
        SeatOutcome::AddressFull(_) => Err(LobbyFailure::AddressFull(zone.to_owned())),
        SeatOutcome::Closed(_) => Err(LobbyFailure::Closed(zone.to_owned())),
        SeatOutcome::NoRoom => Err(LobbyFailure::NoRoom(format!("no room {zone:?}"))),
    }
}
