//! The admin API's zone routes (listed in [`crate::admin`]): the zone list, one zone's detail,
//! creating a zone (on this host or on another of the fleet), kicking a player and stopping a
//! zone, with the directory lookups they share; and [`start_here`], which starts a zone on this
//! host without a join.
use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Deserialize;
use serde_json::{json, Value};
use zonekeep_core::PlayerId;

use super::{ask, bad_body, failure, parse, recording};
use crate::host::{json_error, params_refusal, valid_zone_id, Shared};
use crate::sim::{AdminFailure, SimCommand};

/// Every zone this host runs, then every other zone of the fleet's directory, each naming its
/// owner (`host`) and `epoch`; any host answers for the whole fleet. When the directory does not
/// answer (the store is down: what an operator most needs this list for), the host still answers
/// what it knows itself, and `directory_error` says what is missing.
pub(super) async fn list(State(shared): State<Arc<Shared>>) -> Response {
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
/// The detail of a zone that is not running but failed to start: why, and
/// which save was kept.
fn start_failure(shared: &Shared, id: &str) -> Option<Response> {
    let f = shared.sim.persist.as_ref()?.failures().get(id)?;
    Some(
        Json(json!({"id": id, "kind": f.kind, "running": false, "start_failure": f}))
            .into_response(),
    )
}

pub(super) async fn detail(State(shared): State<Arc<Shared>>, Path(id): Path<String>) -> Response {
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

pub(super) async fn create(State(shared): State<Arc<Shared>>, body: Bytes) -> Response {
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

pub(super) async fn kick(
    State(shared): State<Arc<Shared>>,
    Path(id): Path<String>,
    body: Bytes,
) -> Response {
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

pub(super) async fn stop(
    State(shared): State<Arc<Shared>>,
    Path(id): Path<String>,
    body: Bytes,
) -> Response {
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
