//! The admin API's fleet operations: moving one zone to another host
//! (`POST /admin/zones/{id}/move`) and draining this host (`POST /admin/drain`).

use std::sync::Arc;
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Deserialize;
use serde_json::json;

use super::{bad_body, parse};
use crate::drain::MoveError;
use crate::host::{json_error, valid_zone_id, Shared};

/// The body of a move.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct MoveBody {
    /// The host to move the zone to.
    host: String,
}

/// 409 `not_moved`: the zone was not moved, and `why`.
fn not_moved(why: impl Into<String>) -> Response {
    json_error(StatusCode::CONFLICT, "not_moved", why)
}

/// `POST /admin/zones/{id}/move` `{"host"}`, on the zone's owner: the zone is frozen, its final
/// save confirmed, the directory moved to `host`, and its clients kicked with ZONE_MOVED (they
/// resume there); see [`crate::drain::move_zone`]. The target is checked first (a live,
/// non-draining host of the fleet other than this one), so a refused target leaves the zone
/// running untouched. The move runs on a task of its own: a client that goes away does not leave
/// the zone frozen.
pub(super) async fn move_zone(
    State(shared): State<Arc<Shared>>,
    Path(id): Path<String>,
    body: Bytes,
) -> Response {
    let b: MoveBody = match parse(&body) {
        Ok(b) => b,
        Err(e) => return bad_body(e),
    };
    if !valid_zone_id(&b.host) {
        return bad_body("host must be a host id: 1..=128 bytes of [A-Za-z0-9._:-]".into());
    }
    if shared.registry.get(&id).is_none() {
        return json_error(
            StatusCode::NOT_FOUND,
            "not_found",
            format!(
                "zone {id:?} does not run on this host: ask its owner (GET /admin/zones names it)"
            ),
        );
    }
    let Some(fleet) = shared.fleet() else {
        return not_moved("this host has no store, so no fleet to move the zone in");
    };
    if b.host == fleet.host_id {
        return not_moved(format!("zone {id:?} already runs on host {:?}", b.host));
    }
    if shared.shutdown.is_cancelled() {
        return not_moved("this host is shutting down: its drain hands its zones over");
    }
    let hosts = match crate::fleet::query(&fleet.metrics, "hosts", fleet.directory.hosts()).await {
        Ok(h) => h,
        Err(e) => {
            return json_error(
                StatusCode::SERVICE_UNAVAILABLE,
                "unavailable",
                format!("fleet directory: {e}"),
            )
        }
    };
    let Some(target) = hosts.iter().find(|h| h.host_id == b.host) else {
        return not_moved(format!("no host {:?} in the fleet", b.host));
    };
    let alive = fleet
        .timing
        .is_alive(Duration::from_millis(target.heartbeat_age_ms), target.left);
    if !alive || target.draining {
        return not_moved(format!(
            "host {:?} is not a live, non-draining host of the fleet (alive: {alive}, draining: {})",
            b.host, target.draining
        ));
    }
    tracing::info!(zone = %id, to = %b.host, "moving a zone (admin)");
    let bound = Duration::from_millis(shared.config.shutdown_timeout_ms);
    let task = {
        let (shared, id, to) = (Arc::clone(&shared), id.clone(), b.host.clone());
        tokio::spawn(async move { crate::drain::move_zone(&shared, &id, &to, bound).await })
    };
    match task.await {
        Ok(Ok(epoch)) => Json(json!({"moved": id, "to": b.host, "epoch": epoch})).into_response(),
        Ok(Err(e @ MoveError::Absent(_))) => {
            json_error(StatusCode::NOT_FOUND, "not_found", e.to_string())
        }
        Ok(Err(e)) => not_moved(e.to_string()),
        Err(e) => json_error(
            StatusCode::INTERNAL_SERVER_ERROR,
            "internal",
            format!("the move did not finish: {e}"),
        ),
    }
}

/// `POST /admin/drain`: starts this host's graceful shutdown exactly as SIGTERM does (its zones
/// handed to other hosts of the fleet, then the process exits with the status SIGTERM would
/// give); answered 202 at once, before the drain runs. Asking again changes nothing.
pub(super) async fn drain(State(shared): State<Arc<Shared>>) -> Response {
    let id = super::local_host_id(&shared);
    if !shared.drain_requested.is_cancelled() {
        tracing::info!(target: "zonekeep::audit", host = %id, "drain requested (admin)");
        shared.drain_requested.cancel();
    }
    (StatusCode::ACCEPTED, Json(json!({"draining": id}))).into_response()
}
