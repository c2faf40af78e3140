//! Dev-mode routes (they exist only with `--dev`):
//! `GET /dev/ticket?zone=..&name=..[&role=observer][&kind=..]` mints a short guest
//! ticket (`zone=@match`: one for the matchmaker; `kind`: the zone kind to create the zone as, if it is not running; one this host
//! serves); `GET`/`POST`/`DELETE /dev/netsim?sub=SUBJECT` reads, sets or clears the NetSim
//! setting of one subject's connections (a page's own: the subject of its ticket), and
//! `GET /dev/netsim` reads the host-wide one (which only `POST /admin/netsim` changes).
//!
//! `/dev/ticket` answers any origin (`Access-Control-Allow-Origin: *`): a game page served
//! elsewhere during development (a bundler's dev server, `serve --static`) fetches its guest
//! ticket from the host. It mints for anyone anyway; this only lets a page read the answer.

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{Query, State};
use axum::http::header::ACCESS_CONTROL_ALLOW_ORIGIN;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use serde::Deserialize;
use serde_json::json;
use zonekeep_core::{Claims, Role};

use crate::host::{json_error, valid_zone_id, Shared};
use crate::net::netsim::{NetSimConfig, TOO_MANY_OWN};
use crate::ticket::{mint, unix_now, MintRequest};

/// Guest tickets live this long (or the host's maximum, if shorter).
const GUEST_TTL_SECS: u64 = 300;

pub(crate) fn router() -> Router<Arc<Shared>> {
    Router::new()
        .route("/dev/ticket", get(ticket_any_origin))
        .route(
            "/dev/netsim",
            get(get_netsim).post(set_netsim).delete(clear_netsim),
        )
}

#[derive(Deserialize)]
struct TicketQuery {
    zone: String,
    name: Option<String>,
    role: Option<String>,
    kind: Option<String>,
}

/// [`ticket`], readable by a page of any origin.
async fn ticket_any_origin(shared: State<Arc<Shared>>, q: Query<TicketQuery>) -> Response {
    (
        [(ACCESS_CONTROL_ALLOW_ORIGIN, "*")],
        ticket(shared, q).await,
    )
        .into_response()
}

async fn ticket(State(shared): State<Arc<Shared>>, Query(q): Query<TicketQuery>) -> Response {
    // `@match` is the matchmaker's audience (docs/MATCHMAKING.md): a guest may ask for a match.
    if !valid_zone_id(&q.zone) && q.zone != crate::matchmaker::MATCH_AUDIENCE {
        return json_error(StatusCode::BAD_REQUEST, "bad_request", "invalid zone id");
    }
    let name = q.name.unwrap_or_else(|| "guest".into());
    if name.is_empty()
        || name.len() > 32
        || !name
            .chars()
            .all(|c| c.is_alphanumeric() || c == '-' || c == '_')
    {
        return json_error(
            StatusCode::BAD_REQUEST,
            "bad_request",
            "name must be 1..=32 letters, digits, - or _",
        );
    }
    let role = match q.role.as_deref() {
        None | Some("player") => Role::Player,
        Some("observer") => Role::Observer,
        Some(_) => {
            return json_error(
                StatusCode::BAD_REQUEST,
                "bad_request",
                "role must be player or observer",
            )
        }
    };
    // A kind this host cannot create is refused here, where the page can say so, rather than at
    // the join.
    if let Some(kind) = &q.kind {
        if !shared.sim.specs.contains_key(kind) {
            return json_error(
                StatusCode::BAD_REQUEST,
                "bad_request",
                shared.unknown_kind(kind),
            );
        }
    }
    let mut nonce = [0u8; 6];
    if getrandom::fill(&mut nonce).is_err() {
        return json_error(
            StatusCode::INTERNAL_SERVER_ERROR,
            "internal",
            "random source unavailable",
        );
    }
    let suffix: String = nonce.iter().map(|b| format!("{b:02x}")).collect();
    let sub = format!("guest:{name}:{suffix}");
    let mut claims = Claims::new();
    claims.insert("name".into(), json!(name));
    if let Some(kind) = &q.kind {
        claims.insert("kind".into(), json!(kind));
    }
    let ttl = GUEST_TTL_SECS.min(shared.config.ticket_max_lifetime_secs);
    let req = MintRequest {
        sub: sub.clone(),
        zone: q.zone.clone(),
        role,
        ttl_secs: ttl,
        params: None,
        claims,
    };
    let Some(key) = shared.verifier.keys().primary() else {
        return json_error(
            StatusCode::SERVICE_UNAVAILABLE,
            "unavailable",
            "no active ticket key",
        );
    };
    match mint(key, &req, unix_now()) {
        Ok(t) => Json(json!({"ticket": t, "zone": q.zone, "sub": sub, "expires_in": ttl}))
            .into_response(),
        Err(e) => json_error(StatusCode::INTERNAL_SERVER_ERROR, "internal", e.to_string()),
    }
}

/// Whose NetSim setting a `/dev/netsim` request is about.
#[derive(Deserialize)]
struct NetSimQuery {
    sub: Option<String>,
}

async fn get_netsim(State(shared): State<Arc<Shared>>, Query(q): Query<NetSimQuery>) -> Response {
    match q.sub {
        Some(sub) => Json(shared.netsim.report(&sub)).into_response(),
        None => Json(shared.netsim.get()).into_response(),
    }
}

/// The refusal of a `/dev/netsim` change that names no subject.
fn whose() -> Response {
    json_error(
        StatusCode::BAD_REQUEST,
        "bad_request",
        "say whose connections: /dev/netsim?sub=SUBJECT (the subject of the page's ticket); \
         the host-wide setting is an admin action: POST /admin/netsim",
    )
}

async fn set_netsim(
    State(shared): State<Arc<Shared>>,
    Query(q): Query<NetSimQuery>,
    body: Bytes,
) -> Response {
    let Some(sub) = q.sub else {
        return whose();
    };
    let cfg: NetSimConfig = match serde_json::from_slice(&body) {
        Ok(c) => c,
        Err(e) => return json_error(StatusCode::BAD_REQUEST, "bad_request", e.to_string()),
    };
    match shared.netsim.set_own(&sub, Some(cfg)) {
        Ok(()) => Json(shared.netsim.report(&sub)).into_response(),
        Err(e) if e.0 == TOO_MANY_OWN => json_error(
            StatusCode::SERVICE_UNAVAILABLE,
            "unavailable",
            e.to_string(),
        ),
        Err(e) => json_error(StatusCode::BAD_REQUEST, "bad_request", e.to_string()),
    }
}

async fn clear_netsim(State(shared): State<Arc<Shared>>, Query(q): Query<NetSimQuery>) -> Response {
    let Some(sub) = q.sub else {
        return whose();
    };
    match shared.netsim.set_own(&sub, None) {
        Ok(()) => Json(shared.netsim.report(&sub)).into_response(),
        Err(e) => json_error(StatusCode::BAD_REQUEST, "bad_request", e.to_string()),
    }
}

/// `GET /admin/netsim`: the host-wide setting.
pub(crate) async fn get_host_netsim(State(shared): State<Arc<Shared>>) -> Response {
    Json(shared.netsim.get()).into_response()
}

/// `POST /admin/netsim`: replace the host-wide setting (every connection without its own).
pub(crate) async fn set_host_netsim(State(shared): State<Arc<Shared>>, body: Bytes) -> Response {
    if !shared.config.dev {
        return json_error(
            StatusCode::NOT_FOUND,
            "not_found",
            "NetSim exists only on a host started with --dev",
        );
    }
    let cfg: NetSimConfig = match serde_json::from_slice(&body) {
        Ok(c) => c,
        Err(e) => return json_error(StatusCode::BAD_REQUEST, "bad_request", e.to_string()),
    };
    match shared.netsim.set(cfg) {
        Ok(()) => Json(cfg).into_response(),
        Err(e) => json_error(StatusCode::BAD_REQUEST, "bad_request", e.to_string()),
    }
}
