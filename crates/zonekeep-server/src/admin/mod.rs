//! The admin API under `/admin`, guarded by a bearer token.
//!
//! Without `admin_token` configured the API is off: every `/admin` path
//! answers 404 `admin_disabled`. A missing or wrong token answers 401
//! `unauthorized`, counted in `zonekeep_admin_refused_total{reason="missing"|"wrong"}`. The
//! token is compared in constant time (SHA-256 of both
//! sides, then `subtle`), so neither its content nor its length leaks.
//!
//! | route | body | answer |
//! | --- | --- | --- |
//! | `GET /admin/hosts` | | `{"self", "hosts": [{"id", "url", "capacity", "zones", "draining", "left", "heartbeat_age_ms", "alive"}], "version", "build", "fleet": true}`: `version` and `build` are the answering host's (its crate version and build id); a host without a store answers itself alone, `"fleet": false`, with `self` its configured `host_id` (else `local`) |
//! | `ANY /admin/hosts/{host_id}/api/{*path}` | any (at most 1 MiB) | what host `host_id`'s `/{path}` answers (status, body of at most 4 MiB, content type), reached at its directory URL (`ws://` as `http://`; plain HTTP only) with the same method, query, body and `Authorization` within 10 s; this host's own id is served here without a network hop. `{path}` must start with `admin/` (and not be the proxy again): 400 `bad_request` otherwise; 404 `not_found` for a host the directory does not list; 502 `unreachable` when it does not answer (502 `too_large` for an answer over 4 MiB). See `proxy.rs` |
//! | `POST /admin/drain` | | 202 `{"draining": host id}`: the graceful shutdown starts as on SIGTERM (zones handed to the other hosts, then the process exits with the status SIGTERM gives) |
//! | `GET /admin/zones` | | `{"host", "zones": [...], "start_failures": [StartFailure], "failed_zones": [FailedZone], "halted_worlds": [HaltedWorld], "fresh_starts": [FreshStart], "directory_error"}`: the zones running here (`ZoneSummary` with `host`, `epoch`, `"running": true`), then the rest of the fleet's directory (`{"id", "kind", "host", "epoch", "url", "host_alive", "running": false}`); when the directory does not answer, only this host's own zones, with `directory_error` saying why (else `null`) |
//! | `GET /admin/zones/{id}` | | `ZoneDetail` (summary, participants (`{"id", "principal", "name"?, "role", "connected", "ack", "transport": "websocket"\|"webtransport"\|"relay"\|null (null while dropped), "bytes_out", "bytes_out_per_s" (over the last window of about a second the zone measured), "rtt_ms" (null until measured)}`), `persistence`: save status and facts, `stages`: `[{"stage", "count", "p50_us", "p95_us", "max_us"}]` over the last 30 to 60 s, `work` and `last_patch`: the zone's work counters) with `host`, `epoch` and `fresh_start` (`{"reason": "state-changed", "detail", "save", "at_ms"}` when the zone started afresh because its save held a state version its kind cannot read, else `null`); for a failed zone — its game code could not create it or restore its save, or trapped, panicked or overran its budget while it ran — `{"id", "kind", "running": false, "failed": {"id", "kind", "reason", "tick", "at_start", "at_ms"}}` (with `start_failure`, the kept save, when a restore failed), until it is stopped or its kind is deployed anew; for a zone that did not start for another reason (the store) `{"id", "kind", "running": false, "start_failure"}`; for a zone another host runs, its directory entry |
//! | `POST /admin/zones` | `{"id", "kind", "params"?, "host"?}` | 201 `{"id", "kind", "host", "epoch"}`: on the named host, or where placement puts it; 400 `bad_request` naming the param the kind refused, or for params over 64 KiB of JSON (nothing is kept: the id stays free); 409 `failed` when the zone's code failed to create it, or the zone is failed |
//! | `POST /admin/zones/{id}/kick` | `{"player", "reason"?}`: `player` is an id, or a principal or `name` claim naming exactly one participant | 200 `{"kicked": id}` |
//! | `POST /admin/zones/{id}/stop` | empty, or `{"force": true}` | 200 `{"stopped": id}` (the zone is saved and unloaded); 409 `lasting` for a lasting world unless forced (a forced stop is logged on the `zonekeep::audit` target); for a failed zone, clears the failure (`"removed_failure": true`) and releases the zone in the directory: the next join or create starts it afresh, from its last save |
//! | `POST /admin/zones/{id}/move` | `{"host"}` | 200 `{"moved": id, "to": host, "epoch"}` (the epoch the directory moved it under): on the zone's owner, the zone is frozen after its next tick, its final save confirmed, the directory moved to `host`, and its clients kicked ZONE_MOVED (they resume there); 404 `not_found` when the zone does not run here; 409 `not_moved` when `host` is not a live, non-draining other host of the fleet (the zone runs on untouched), or when its save was not confirmed in time or the directory refused (then it is released with SHUTTING_DOWN as a drain does: a frozen zone cannot run on, and its next join starts it again from its last save) |
//! | `POST /admin/zones/{id}/recording` | `{"max_bytes"?}` (default 64 MiB, at most 256 MiB) | 201 `RecordingInfo`: the running zone is recorded from its snapshot at the next tick boundary |
//! | `POST /admin/zones/{id}/recording/stop` | | 200 `RecordingInfo` |
//! | `GET /admin/zones/{id}/recording` | | `RecordingInfo` `{"zone", "state", "reason", "detail", "bytes", "ticks", "max_bytes", "file_complete"}` |
//! | `GET /admin/zones/{id}/recording/file` | | the recording (`application/octet-stream`) once it stopped; 409 `running` before |
//!
//! The zone routes (list, detail, create, kick, stop) are in `zones.rs`, the module routes
//! (`/admin/modules`) in `modules.rs`, the recording routes in `recording.rs`, the fleet proxy in
//! `proxy.rs`, the move and the drain in `fleet_ops.rs`.
//!
//! `POST /admin/zones` also takes `"record": {"max_bytes"?}` to record the new zone from its
//! creation (the one way to record a kind whose save leaves out state its hash covers).
//!
//! Errors: `{"error": {"code", "message"}}` with codes `unauthorized`,
//! `admin_disabled`, `bad_request`, `not_found`, `exists`, `failed`, `ambiguous`, `unavailable`,
//! `not_moved`, `unreachable`, `too_large`, `lasting`, `halted` (503: a lasting world halted because its saves failed; it resumes by
//! itself once its store answers).
//!
//! A halted lasting world is listed by `GET /admin/zones` under `halted_worlds`
//! (`{"id", "kind", "reason", "tick", "epoch", "last_saved_seq", "unsaved_ms", "at_ms",
//! "attempts"}`) and answered by `GET /admin/zones/{id}` as `{"id", "kind", "running": false,
//! "halted": {...}}` until it resumes.

pub(crate) mod console;
mod fleet_ops;
mod modules;
mod proxy;
mod recording;
mod zones;

pub(crate) use zones::start_here;

use std::sync::Arc;
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::{Request, State};
use axum::http::{header, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::Deserialize;
use serde_json::{json, Value};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;
use tokio::sync::oneshot;

use crate::host::{json_error, Shared};
use crate::sim::{AdminFailure, SimCommand};

/// How long an admin request waits for a zone's thread.
const SIM_REPLY_TIMEOUT: Duration = Duration::from_secs(5);

/// SHA-256 of a token (what is kept and compared).
pub(crate) fn hash_token(token: &str) -> [u8; 32] {
    Sha256::digest(token.as_bytes()).into()
}

pub(crate) fn router(shared: &Arc<Shared>) -> Router<Arc<Shared>> {
    if shared.admin_token_hash.is_none() {
        return Router::new()
            .route("/admin", axum::routing::any(disabled))
            .route("/admin/{*rest}", axum::routing::any(disabled));
    }
    Router::new()
        .route("/admin/zones", get(zones::list).post(zones::create))
        .route("/admin/hosts", get(hosts))
        .route(
            "/admin/hosts/{host_id}/api/{*path}",
            axum::routing::any(proxy::forward),
        )
        .route("/admin/drain", post(fleet_ops::drain))
        .route(
            "/admin/netsim",
            get(crate::dev::get_host_netsim).post(crate::dev::set_host_netsim),
        )
        .route("/admin/zones/{id}", get(zones::detail))
        .route("/admin/zones/{id}/kick", post(zones::kick))
        .route("/admin/zones/{id}/stop", post(zones::stop))
        .route("/admin/zones/{id}/move", post(fleet_ops::move_zone))
        .route(
            "/admin/zones/{id}/recording",
            get(recording::status).post(recording::start),
        )
        .route("/admin/zones/{id}/recording/stop", post(recording::stop))
        .route("/admin/zones/{id}/recording/file", get(recording::file))
        .merge(modules::routes())
        .route_layer(middleware::from_fn_with_state(shared.clone(), auth))
}

async fn disabled() -> Response {
    json_error(
        StatusCode::NOT_FOUND,
        "admin_disabled",
        "the admin API is off: configure an admin token (ZONEKEEP_ADMIN_TOKEN)",
    )
}

pub(crate) async fn auth(State(shared): State<Arc<Shared>>, req: Request, next: Next) -> Response {
    match check_bearer(req.headers(), shared.admin_token_hash.as_ref()) {
        Ok(()) => next.run(req).await,
        Err(why) => {
            shared.metrics.admin_refused(why);
            unauthorized()
        }
    }
}

/// Whether `headers` bear the token whose hash is `expected` (compared in constant time), or
/// why not: `missing` (no bearer token) or `wrong`.
pub(crate) fn check_bearer(
    headers: &header::HeaderMap,
    expected: Option<&[u8; 32]>,
) -> Result<(), &'static str> {
    let given = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "));
    match (given, expected) {
        (Some(t), Some(expected)) if bool::from(hash_token(t).ct_eq(expected)) => Ok(()),
        (Some(_), _) => Err("wrong"),
        (None, _) => Err("missing"),
    }
}

/// The answer to a request without the right bearer token.
pub(crate) fn unauthorized() -> Response {
    let mut r = json_error(
        StatusCode::UNAUTHORIZED,
        "unauthorized",
        "missing or wrong bearer token",
    );
    r.headers_mut().insert(
        header::WWW_AUTHENTICATE,
        header::HeaderValue::from_static("Bearer"),
    );
    r
}

pub(crate) fn failure(f: AdminFailure) -> Response {
    let (status, code) = match &f {
        AdminFailure::NoZone(_) | AdminFailure::NoPlayer(_) => (StatusCode::NOT_FOUND, "not_found"),
        AdminFailure::Exists(_) => (StatusCode::CONFLICT, "exists"),
        AdminFailure::Failed(_) => (StatusCode::CONFLICT, "failed"),
        AdminFailure::BadRequest(_) => (StatusCode::BAD_REQUEST, "bad_request"),
        AdminFailure::Unavailable(_) => (StatusCode::SERVICE_UNAVAILABLE, "unavailable"),
        AdminFailure::Lasting(_) => (StatusCode::CONFLICT, "lasting"),
        AdminFailure::Halted(_) => (StatusCode::SERVICE_UNAVAILABLE, "halted"),
    };
    json_error(status, code, f.to_string())
}

pub(crate) fn parse<T: for<'de> Deserialize<'de>>(body: &Bytes) -> Result<T, String> {
    serde_json::from_slice(body).map_err(|e| e.to_string())
}

pub(crate) fn bad_body(e: String) -> Response {
    json_error(StatusCode::BAD_REQUEST, "bad_request", e)
}

/// Send a command to the zone's thread and await its answer (bounded).
pub(crate) async fn ask<T>(
    shared: &Shared,
    zone_id: &str,
    make: impl FnOnce(oneshot::Sender<T>) -> SimCommand,
) -> Result<T, AdminFailure> {
    let entry = shared
        .registry
        .get(zone_id)
        .ok_or_else(|| AdminFailure::NoZone(zone_id.to_owned()))?;
    let (tx, rx) = oneshot::channel();
    shared
        .pool
        .send(entry.thread, make(tx))
        .map_err(|_| AdminFailure::Unavailable("the zone's thread is busy".into()))?;
    match tokio::time::timeout(SIM_REPLY_TIMEOUT, rx).await {
        Ok(Ok(v)) => Ok(v),
        _ => Err(AdminFailure::Unavailable(
            "the zone's thread did not answer".into(),
        )),
    }
}

/// This host's id: its fleet id, or for a host without a store the configured `host_id`
/// (`local` without one). The fleet proxy serves it without a network hop.
pub(crate) fn local_host_id(shared: &Shared) -> String {
    match shared.fleet() {
        Some(f) => f.host_id.clone(),
        None => shared
            .config
            .host_id
            .clone()
            .unwrap_or_else(|| "local".to_owned()),
    }
}

/// This build's id, as `GET /admin/hosts` names it: `ZONEKEEP_BUILD_ID` when the build set it
/// (say, to a commit), else the id native zone saves are stamped with (`zonekeep <version>`).
pub(crate) fn build_id() -> &'static str {
    option_env!("ZONEKEEP_BUILD_ID").unwrap_or(crate::persist::NATIVE_BUILD)
}

/// `GET /admin/hosts`: every host of the fleet, with its heartbeat age by the store's clock, and
/// the answering host's version and build. A host without a store lists itself alone
/// (`"fleet": false`).
async fn hosts(State(shared): State<Arc<Shared>>) -> Response {
    let version = env!("CARGO_PKG_VERSION");
    let Some(fleet) = shared.fleet() else {
        let me = json!({
            "id": local_host_id(&shared),
            "url": shared.base_url.get(),
            "capacity": shared.config.capacity.unwrap_or_else(|| u32::try_from(shared.config.max_zones).unwrap_or(u32::MAX)),
            "zones": shared.registry.lock().len(),
            "draining": shared.shutdown.is_cancelled(),
            "left": false,
            "heartbeat_age_ms": 0,
            "alive": true,
        });
        return Json(json!({
            "self": local_host_id(&shared),
            "hosts": [me],
            "version": version,
            "build": build_id(),
            "fleet": false,
        }))
        .into_response();
    };
    match crate::fleet::query(&fleet.metrics, "hosts", fleet.directory.hosts()).await {
        Ok(hosts) => {
            let list: Vec<Value> = hosts
                .iter()
                .map(|h| {
                    json!({
                        "id": h.host_id,
                        "url": h.url,
                        "capacity": h.capacity,
                        "zones": h.zones,
                        "draining": h.draining,
                        "left": h.left,
                        "heartbeat_age_ms": h.heartbeat_age_ms,
                        "alive": fleet.timing.is_alive(Duration::from_millis(h.heartbeat_age_ms), h.left),
                    })
                })
                .collect();
            Json(json!({
                "self": fleet.host_id,
                "hosts": list,
                "version": version,
                "build": build_id(),
                "fleet": true,
            }))
            .into_response()
        }
        Err(e) => failure(AdminFailure::Unavailable(format!("fleet directory: {e}"))),
    }
}
