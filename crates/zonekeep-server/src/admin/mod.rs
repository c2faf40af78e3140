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
//! The module routes (`/admin/modules`) are in `modules.rs`, the recording routes in
//! `recording.rs`, the fleet proxy in `proxy.rs`, the move and the drain in `fleet_ops.rs`.
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

use std::sync::Arc;
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::{Path, Request, State};
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
use zonekeep_core::PlayerId;

use crate::host::{json_error, params_refusal, valid_zone_id, Shared};
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
        .route("/admin/zones", get(list).post(create))
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
        .route("/admin/zones/{id}", get(detail))
        .route("/admin/zones/{id}/kick", post(kick))
        .route("/admin/zones/{id}/stop", post(stop))
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

/// Every zone this host runs, then every other zone of the fleet's directory, each naming its
/// owner (`host`) and `epoch`; any host answers for the whole fleet. When the directory does not
/// answer (the store is down: what an operator most needs this list for), the host still answers
/// what it knows itself, and `directory_error` says what is missing.
async fn list(State(shared): State<Arc<Shared>>) -> Response {
    let failures = shared
        .sim
        .persist
        .as_ref()
        .map(|p| p.failures().all())
        .unwrap_or_default();
    let me = shared.fleet().map(|f| f.host_id.clone());
    let mut zones: Vec<Value> = Vec::new();
    let mut here = std::collections::HashSet::new();
    for z in shared.registry.summaries() {
        here.insert(z.id.clone());
        let mut v = serde_json::to_value(&z).unwrap_or(Value::Null);
        if let Value::Object(m) = &mut v {
            m.insert("host".into(), json!(me));
            m.insert("epoch".into(), json!(local_epoch(&shared, &z.id)));
            m.insert("running".into(), json!(true));
        }
        zones.push(v);
    }
    let mut directory_error = None;
    if let Some(fleet) = shared.fleet() {
        match crate::fleet::query(
            &fleet.metrics,
            "zones",
            fleet.directory.zones(fleet.timing, ADMIN_LIST_LIMIT),
        )
        .await
        {
            Ok(listed) => zones.extend(
                listed
                    .into_iter()
                    .filter(|l| !here.contains(&l.zone_id))
                    .map(|l| directory_entry(&l)),
            ),
            Err(e) => directory_error = Some(format!("fleet directory: {e}")),
        }
    }
    Json(json!({
        "host": me,
        "zones": zones,
        "start_failures": failures,
        "failed_zones": shared.registry.failures(),
        "halted_worlds": shared.sim.halts.all(),
        "fresh_starts": shared.sim.persist.as_ref().map(|p| p.fresh_starts().all()).unwrap_or_default(),
        "directory_error": directory_error,
    }))
    .into_response()
}

/// Directory entries listed by `GET /admin/zones` at most.
const ADMIN_LIST_LIMIT: u32 = 10_000;

/// The owner epoch of a zone running here (from its save registration).
fn local_epoch(shared: &Shared, zone_id: &str) -> Option<u64> {
    let p = shared.sim.persist.as_ref()?;
    p.storage().status(zone_id).map(|s| s.epoch)
}

/// A zone of the directory that does not run on this host.
fn directory_entry(l: &zonekeep_store::ZoneLocation) -> Value {
    json!({
        "id": l.zone_id,
        "kind": l.kind,
        "host": l.owner,
        "epoch": l.epoch,
        "url": l.owner_url,
        "host_alive": l.owner_alive,
        "running": false,
    })
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

/// The detail of a zone that is not running but failed to start: why, and
/// which save was kept.
fn start_failure(shared: &Shared, id: &str) -> Option<Response> {
    let f = shared.sim.persist.as_ref()?.failures().get(id)?;
    Some(
        Json(json!({"id": id, "kind": f.kind, "running": false, "start_failure": f}))
            .into_response(),
    )
}

async fn detail(State(shared): State<Arc<Shared>>, Path(id): Path<String>) -> Response {
    let zone = id.clone();
    match ask(&shared, &id, |reply| SimCommand::Inspect {
        zone_id: zone,
        reply,
    })
    .await
    {
        Ok(Some(d)) => {
            let mut v = serde_json::to_value(&d).unwrap_or(Value::Null);
            if let Value::Object(m) = &mut v {
                m.insert("host".into(), json!(shared.fleet().map(|f| &f.host_id)));
                m.insert("epoch".into(), json!(local_epoch(&shared, &id)));
                m.insert("running".into(), json!(true));
                let fresh = shared
                    .sim
                    .persist
                    .as_ref()
                    .and_then(|p| p.fresh_starts().get(&id));
                m.insert("fresh_start".into(), json!(fresh));
            }
            Json(v).into_response()
        }
        Ok(None) | Err(AdminFailure::NoZone(_)) => {
            if let Some(f) = shared.registry.failure(&id) {
                // With the kept save's details when the failure was a restore.
                let kept = shared
                    .sim
                    .persist
                    .as_ref()
                    .and_then(|p| p.failures().get(&id));
                let mut v = json!({"id": id, "kind": f.kind, "running": false, "failed": f});
                if let (Some(k), Value::Object(m)) = (kept, &mut v) {
                    m.insert("start_failure".into(), json!(k));
                }
                return Json(v).into_response();
            }
            if let Some(h) = shared.sim.halts.get(&id) {
                return Json(json!({"id": id, "kind": h.kind, "running": false, "halted": h}))
                    .into_response();
            }
            if let Some(r) = start_failure(&shared, &id) {
                return r;
            }
            match remote_detail(&shared, &id).await {
                Some(r) => r,
                None => failure(AdminFailure::NoZone(id)),
            }
        }
        Err(f) => failure(f),
    }
}

/// The directory's entry for a zone this host does not run.
async fn remote_detail(shared: &Shared, id: &str) -> Option<Response> {
    let fleet = shared.fleet()?;
    match crate::fleet::query(
        &fleet.metrics,
        "locate",
        fleet.directory.locate(id, fleet.timing),
    )
    .await
    {
        Ok(Some(l)) => Some(Json(directory_entry(&l)).into_response()),
        Ok(None) => None,
        Err(e) => Some(failure(AdminFailure::Unavailable(format!(
            "fleet directory: {e}"
        )))),
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CreateBody {
    id: String,
    kind: String,
    #[serde(default)]
    params: Value,
    /// Place the zone on this host of the fleet (default: placement).
    #[serde(default)]
    host: Option<String>,
    /// Record the zone from its creation (on this host only).
    #[serde(default)]
    record: Option<recording::RecordBody>,
}

async fn create(State(shared): State<Arc<Shared>>, body: Bytes) -> Response {
    let b: CreateBody = match parse(&body) {
        Ok(b) => b,
        Err(e) => return bad_body(e),
    };
    if !valid_zone_id(&b.id) {
        return failure(AdminFailure::BadRequest(
            "zone id must be 1..=128 bytes of [A-Za-z0-9._:-]".into(),
        ));
    }
    if b.host.as_deref().is_some_and(|h| !valid_zone_id(h)) {
        return failure(AdminFailure::BadRequest(
            "host must be a host id: 1..=128 bytes of [A-Za-z0-9._:-]".into(),
        ));
    }
    if !shared.sim.specs.contains_key(&b.kind) {
        return failure(AdminFailure::BadRequest(shared.unknown_kind(&b.kind)));
    }
    if let Some(refusal) = params_refusal(&b.params) {
        return failure(AdminFailure::BadRequest(refusal));
    }
    // Known here without the directory, which a failing store may not answer.
    if let Some(h) = shared.sim.halts.get(&b.id) {
        return failure(AdminFailure::Halted(h.message()));
    }
    if let Some(fleet) = shared.fleet() {
        let found = match crate::fleet::query(
            &fleet.metrics,
            "locate",
            fleet.directory.locate(&b.id, fleet.timing),
        )
        .await
        {
            Ok(f) => f,
            Err(e) => return failure(AdminFailure::Unavailable(format!("fleet directory: {e}"))),
        };
        if let Some(l) = found.filter(|l| l.owner_alive) {
            let owner = l.owner.unwrap_or_default();
            if owner != fleet.host_id || shared.registry.get(&b.id).is_some() {
                return failure(AdminFailure::Exists(format!("{} (on host {owner})", b.id)));
            }
        }
        match &b.host {
            Some(h) if *h != fleet.host_id && b.record.is_some() => {
                return failure(AdminFailure::BadRequest(
                    "a zone is recorded from its creation only on the host asked to create it"
                        .into(),
                ))
            }
            Some(h) if *h != fleet.host_id => {
                return place_on(fleet, &b.id, &b.kind, &b.params, h).await
            }
            Some(_) => {}
            None => match fleet.route(&b.id, &b.kind, &b.params).await {
                Ok(crate::fleet::route::Route::Here(_)) => {}
                Ok(crate::fleet::route::Route::Owner { host, .. }) => {
                    return (
                        StatusCode::CREATED,
                        Json(json!({"id": b.id, "kind": b.kind, "host": host})),
                    )
                        .into_response()
                }
                Err(e) => return failure(AdminFailure::Unavailable(e.to_string())),
            },
        }
    }
    let record = match b.record.map(|r| r.limits()).transpose() {
        Ok(r) => r,
        Err(e) => return failure(AdminFailure::BadRequest(e)),
    };
    match shared.start_zone(&b.id, &b.kind, b.params, record, false).await {
        Ok(()) => (
            StatusCode::CREATED,
            Json(json!({"id": b.id, "kind": b.kind, "host": shared.fleet().map(|f| &f.host_id), "epoch": local_epoch(&shared, &b.id)})),
        )
            .into_response(),
        Err(f) => failure(f),
    }
}

/// Assigns a new zone to another host of the fleet; that host starts it within a heartbeat.
async fn place_on(
    fleet: &crate::fleet::Fleet,
    id: &str,
    kind: &str,
    params: &Value,
    host: &str,
) -> Response {
    match fleet.claim_for(id, kind, params, host).await {
        Ok(zonekeep_store::ZoneClaim::Claimed { epoch, .. }) => (
            StatusCode::CREATED,
            Json(json!({"id": id, "kind": kind, "host": host, "epoch": epoch})),
        )
            .into_response(),
        Ok(zonekeep_store::ZoneClaim::Owned(l)) => failure(AdminFailure::Exists(format!(
            "{id} (on host {})",
            l.owner.unwrap_or_default()
        ))),
        Err(crate::fleet::FleetError::Store(zonekeep_store::StoreError::HostUnavailable {
            ..
        })) => failure(AdminFailure::BadRequest(format!(
            "host {host:?} is not a live, non-draining host of the fleet"
        ))),
        Err(e) => failure(AdminFailure::Unavailable(e.to_string())),
    }
}

/// Starts zone `id` of `kind` on this host without a join (admin create, fleet reconcile): the
/// one admission path, then waits for the zone's thread to have it.
pub(crate) async fn start_here(
    shared: &Arc<Shared>,
    id: &str,
    kind: &str,
    params: Value,
) -> Result<(), AdminFailure> {
    shared.start_zone(id, kind, params, None, false).await
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct KickBody {
    player: PlayerRef,
    #[serde(default)]
    reason: Option<String>,
}

/// Who to kick: the id the admin detail lists, or what an operator knows a player by.
#[derive(Deserialize)]
#[serde(untagged)]
enum PlayerRef {
    Id(u32),
    Name(String),
}

/// The id of the one participant whose principal or `name` claim is `name`.
async fn resolve_player(shared: &Shared, zone: &str, name: &str) -> Result<u32, Response> {
    let detail = ask(shared, zone, |reply| SimCommand::Inspect {
        zone_id: zone.to_owned(),
        reply,
    })
    .await
    .map_err(failure)?
    .ok_or_else(|| failure(AdminFailure::NoZone(zone.to_owned())))?;
    let ids: Vec<u32> = detail
        .participants
        .iter()
        .filter(|p| p.principal == name || p.name.as_deref() == Some(name))
        .map(|p| p.id)
        .collect();
    match ids[..] {
        [id] => Ok(id),
        [] => Err(json_error(
            StatusCode::NOT_FOUND,
            "not_found",
            format!("no participant of zone {zone:?} has the principal or name {name:?}"),
        )),
        _ => Err(json_error(
            StatusCode::CONFLICT,
            "ambiguous",
            format!("participants {ids:?} are all named {name:?}: kick one by id"),
        )),
    }
}

async fn kick(State(shared): State<Arc<Shared>>, Path(id): Path<String>, body: Bytes) -> Response {
    let b: KickBody = match parse(&body) {
        Ok(b) => b,
        Err(e) => return bad_body(e),
    };
    let player = match b.player {
        PlayerRef::Id(p) => p,
        PlayerRef::Name(name) => match resolve_player(&shared, &id, &name).await {
            Ok(p) => p,
            Err(r) => return r,
        },
    };
    let zone = id.clone();
    let reason = b
        .reason
        .unwrap_or_else(|| "removed by an administrator".into());
    let r = ask(&shared, &id, |reply| SimCommand::Kick {
        zone_id: zone,
        player: PlayerId(player),
        reason,
        reply,
    })
    .await;
    match r.and_then(|x| x) {
        Ok(()) => Json(json!({"kicked": player})).into_response(),
        Err(f) => failure(f),
    }
}

/// The body of a stop: empty, or `{"force": true}` to stop a lasting world.
#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct StopBody {
    #[serde(default)]
    force: bool,
}

async fn stop(State(shared): State<Arc<Shared>>, Path(id): Path<String>, body: Bytes) -> Response {
    let b: StopBody = if body.is_empty() {
        StopBody::default()
    } else {
        match parse(&body) {
            Ok(b) => b,
            Err(e) => return bad_body(e),
        }
    };
    // A failed zone is no longer running: stopping it removes the failure, so it may run again
    // (from its last save) when next joined or created.
    if shared.registry.remove_failed(&id) {
        if let Some(p) = &shared.sim.persist {
            p.failures().clear(&id);
        }
        release_failed(&shared, &id).await;
        return Json(json!({"stopped": id, "removed_failure": true})).into_response();
    }
    let zone = id.clone();
    match ask(&shared, &id, |reply| SimCommand::Stop {
        zone_id: zone,
        force: b.force,
        reply,
    })
    .await
    .and_then(|x| x)
    {
        Ok(()) => Json(json!({"stopped": id})).into_response(),
        Err(f) => failure(f),
    }
}

/// Gives up this host's directory ownership of a failed zone an operator stopped, so the
/// reconcile pass does not start it again at once: the next join or create places it afresh.
async fn release_failed(shared: &Shared, id: &str) {
    let Some(fleet) = shared.fleet() else {
        return;
    };
    let located = crate::fleet::query(
        &fleet.metrics,
        "locate",
        fleet.directory.locate(id, fleet.timing),
    )
    .await;
    match located {
        Ok(Some(l)) if l.owner.as_deref() == Some(fleet.host_id.as_str()) => {
            fleet.release(id, l.epoch).await;
        }
        Ok(_) => {}
        Err(e) => {
            tracing::warn!(zone = %id, error = %e, "could not release the stopped failed zone; this host may start it again");
        }
    }
}
