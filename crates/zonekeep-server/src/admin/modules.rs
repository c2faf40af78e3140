//! The admin API's module routes (under the same bearer token as the rest of `/admin`):
//!
//! | route | body | answer |
//! | --- | --- | --- |
//! | `GET /admin/modules` | | `{"kinds": [{"kind", "sha256"}], "deploys": [{"kind", "sha256", "version", "size", "deployed_at_ms"}]}`: this host's module kinds and what they run, and the store's record of every kind's deploy |
//! | `GET /admin/modules/{kind}/history?limit=N` | | `{"kind", "running", "history": [{"kind", "sha256", "version", "size", "deployed_at_ms", "cause"}]}`: what this host runs for the kind, and the kind's newest deploys from the store, newest first (`cause` is `push` or `rollback`; `limit` defaults to and is at most 64); empty on a host without a store |
//! | `POST /admin/modules/{kind}/rollback` | | 200 `DeployOutcome` (`"rolled_back": true`): the kind goes back to the module it ran before its last deploy on this host, through the same freeze barrier, and the store records it, so every host follows; 409 `nothing_to_roll_back` when there is none |
//! | `POST /admin/modules/{kind}/rollback?version=N` | | 200 `DeployOutcome` (`"rolled_back": true`): the kind goes back to the module of its stored deploy `N` (any entry of its history), loaded from the store, checked and installed as a push is, every zone upgraded through the freeze barrier, recorded as a new version caused by a rollback; 404 `unknown_version` when the history holds no `N`, 409 `already_running` when the kind runs that module, 409 `no_store` on a host without a store, 422 `refused` when a zone refuses its save in that module (every zone stays where it is) |
//! | `POST /admin/modules/{kind}?on_refusal=roll_back\|keep_upgraded` | the module (`application/wasm`, at most 32 MiB) | 200 `DeployOutcome`: the module is compiled (on the host's compiler, never the network threads), kept in the store, installed here, and every running zone of the kind is frozen, saved and restored into it; when a zone's new code refuses its save every zone goes back to the old code (`roll_back`, the default, answers `"rolled_back": true`) or only that zone stays on it (`keep_upgraded`). Other hosts of the fleet follow within a second. 422 `refused` for a module that does not load (the reason names the import, export, setting or limit; an empty body too); 413 `too_large` past 32 MiB; 408 `request_timeout` for a body not received within the request timeout; 503 `compile_timeout` when compiling takes longer than the compile timeout, 503 `busy` when the compiler has as much waiting as it takes. Every answer but 200 means nothing was stored or installed. |
//!
//! A deploy past its compile step runs to its end on a task of its own even if the client goes
//! away, and these two routes bound their own time (body within the request timeout, compile
//! within the compile timeout) rather than the host's plain-request timeout, so that an answer
//! always says what happened.

use std::sync::Arc;

use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use serde::Deserialize;
use serde_json::json;

use crate::code::{deploy, roll_back, roll_back_to, DeployError, OnRefusal};
use crate::host::{json_error, Shared};

/// The largest module body accepted (the store's limit).
const MAX_MODULE_BODY: usize = 32 << 20;

/// The module routes; the caller puts them behind the admin token.
pub(crate) fn routes() -> Router<Arc<Shared>> {
    Router::new()
        .route("/admin/modules", get(list))
        .route("/admin/modules/{kind}", axum::routing::post(push))
        .route("/admin/modules/{kind}/history", get(history))
        .route(
            "/admin/modules/{kind}/rollback",
            axum::routing::post(rollback),
        )
}

/// The answer of a host without module kinds.
fn no_module_kinds() -> Response {
    json_error(
        StatusCode::NOT_FOUND,
        "not_found",
        "this host runs no module kinds (start it with --module KIND)",
    )
}

async fn list(State(shared): State<Arc<Shared>>) -> Response {
    let kinds: Vec<_> = shared
        .code
        .as_ref()
        .map(|c| {
            c.kinds()
                .into_iter()
                .map(|k| json!({"sha256": c.current(&k), "kind": k}))
                .collect()
        })
        .unwrap_or_default();
    let deploys = match stored_deploys(&shared, None).await {
        Ok(d) => d,
        Err(r) => return r,
    };
    Json(json!({"kinds": kinds, "deploys": deploys})).into_response()
}

/// The store's deploys as JSON: every kind's current one, or `kind`'s newest `limit` (`[]` on a
/// host without a store); a 503 naming the store's error when it fails.
async fn stored_deploys(
    shared: &Shared,
    history: Option<(&str, usize)>,
) -> Result<serde_json::Value, Response> {
    let Some(p) = shared.sim.persist.as_ref() else {
        return Ok(json!([]));
    };
    let modules = &p.store().modules;
    let read = match history {
        None => modules.module_kinds().await,
        Some((kind, limit)) => modules.module_history(kind, limit).await,
    };
    read.map(|d| serde_json::to_value(d).unwrap_or_default())
        .map_err(|e| {
            json_error(
                StatusCode::SERVICE_UNAVAILABLE,
                "unavailable",
                e.to_string(),
            )
        })
}

#[derive(Debug, Deserialize)]
struct PushQuery {
    #[serde(default)]
    on_refusal: OnRefusal,
}

/// The answer to a module over [`MAX_MODULE_BODY`], naming the limit.
fn too_large() -> Response {
    json_error(
        StatusCode::PAYLOAD_TOO_LARGE,
        "too_large",
        format!(
            "a module may be at most {} MiB ({MAX_MODULE_BODY} bytes)",
            MAX_MODULE_BODY >> 20
        ),
    )
}

/// Reads a module body of at most [`MAX_MODULE_BODY`] bytes within `limit`.
async fn read_module(body: Body, limit: Duration) -> Result<Bytes, Response> {
    match tokio::time::timeout(limit, axum::body::to_bytes(body, MAX_MODULE_BODY)).await {
        Ok(Ok(bytes)) => Ok(bytes),
        Ok(Err(e)) => {
            // The body's own error, or the limit reached: the limit is what a client can fix.
            let limited = std::error::Error::source(&e)
                .is_some_and(|s| s.is::<http_body_util::LengthLimitError>());
            Err(if limited {
                too_large()
            } else {
                json_error(StatusCode::BAD_REQUEST, "bad_body", e.to_string())
            })
        }
        Err(_) => Err(json_error(
            StatusCode::REQUEST_TIMEOUT,
            "request_timeout",
            format!(
                "the module was not received within {} ms",
                limit.as_millis()
            ),
        )),
    }
}

async fn push(
    State(shared): State<Arc<Shared>>,
    Path(kind): Path<String>,
    Query(q): Query<PushQuery>,
    headers: axum::http::HeaderMap,
    body: Body,
) -> Response {
    let Some(code) = shared.code.clone() else {
        return no_module_kinds();
    };
    let declared = headers
        .get(axum::http::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > MAX_MODULE_BODY as u64) {
        return too_large();
    }
    let limit = Duration::from_millis(shared.config.request_timeout_ms);
    let bytes = match read_module(body, limit).await {
        Ok(b) => b,
        Err(r) => return r,
    };
    let store = shared.sim.persist.as_ref().map(|p| p.store().clone());
    let upgrader = crate::upgrade::Upgrader {
        shared: shared.clone(),
    };
    // On a task of its own: once past its compile step a deploy runs to its end, whether or
    // not this request is still there to hear it.
    let deployed = tokio::spawn(async move {
        deploy(
            &code,
            store.as_ref(),
            &upgrader,
            &kind,
            &bytes,
            q.on_refusal,
        )
        .await
    })
    .await;
    match deployed {
        Ok(outcome) => answer(outcome),
        Err(e) => json_error(
            StatusCode::INTERNAL_SERVER_ERROR,
            "internal",
            format!("the deploy task failed: {e}"),
        ),
    }
}

#[derive(Debug, Deserialize)]
struct HistoryQuery {
    limit: Option<usize>,
}

async fn history(
    State(shared): State<Arc<Shared>>,
    Path(kind): Path<String>,
    Query(q): Query<HistoryQuery>,
) -> Response {
    let Some(code) = shared.code.as_ref() else {
        return no_module_kinds();
    };
    if !code.kinds().contains(&kind) {
        return answer(Err(DeployError::UnknownKind(kind)));
    }
    let limit = q.limit.unwrap_or(zonekeep_store::MAX_DEPLOY_HISTORY);
    let history = match stored_deploys(&shared, Some((&kind, limit))).await {
        Ok(h) => h,
        Err(r) => return r,
    };
    Json(json!({"running": code.current(&kind), "kind": kind, "history": history})).into_response()
}

#[derive(Debug, Deserialize)]
struct RollbackQuery {
    version: Option<u64>,
}

async fn rollback(
    State(shared): State<Arc<Shared>>,
    Path(kind): Path<String>,
    Query(q): Query<RollbackQuery>,
) -> Response {
    let Some(code) = shared.code.clone() else {
        return no_module_kinds();
    };
    let store = shared.sim.persist.as_ref().map(|p| p.store().clone());
    let upgrader = crate::upgrade::Upgrader {
        shared: shared.clone(),
    };
    if let Some(version) = q.version {
        let Some(store) = store else {
            return json_error(
                StatusCode::CONFLICT,
                "no_store",
                "this host keeps no store, so no deploy history: roll back without a version to go back to the module before the last deploy",
            );
        };
        // On a task of its own, as a push: past its compile step it runs to its end.
        let rolled =
            tokio::spawn(
                async move { roll_back_to(&code, &store, &upgrader, &kind, version).await },
            )
            .await;
        return match rolled {
            Ok(outcome) => answer(outcome),
            Err(e) => json_error(
                StatusCode::INTERNAL_SERVER_ERROR,
                "internal",
                format!("the rollback task failed: {e}"),
            ),
        };
    }
    let rolled =
        tokio::spawn(async move { roll_back(&code, store.as_ref(), &upgrader, &kind).await }).await;
    match rolled {
        Ok(outcome) => answer(outcome),
        Err(e) => json_error(
            StatusCode::INTERNAL_SERVER_ERROR,
            "internal",
            format!("the rollback task failed: {e}"),
        ),
    }
}

/// A deploy's or rollback's answer.
fn answer(outcome: Result<crate::code::DeployOutcome, DeployError>) -> Response {
    match outcome {
        Ok(outcome) => Json(outcome).into_response(),
        Err(e @ DeployError::UnknownKind(_)) => {
            json_error(StatusCode::NOT_FOUND, "not_found", e.to_string())
        }
        Err(e @ DeployError::Refused(_)) => {
            json_error(StatusCode::UNPROCESSABLE_ENTITY, "refused", e.to_string())
        }
        Err(e @ DeployError::Store(_)) => json_error(
            StatusCode::SERVICE_UNAVAILABLE,
            "unavailable",
            e.to_string(),
        ),
        Err(e @ DeployError::CompileDeadline(_)) => json_error(
            StatusCode::SERVICE_UNAVAILABLE,
            "compile_timeout",
            e.to_string(),
        ),
        Err(e @ DeployError::Busy(_)) => {
            json_error(StatusCode::SERVICE_UNAVAILABLE, "busy", e.to_string())
        }
        Err(e @ DeployError::NothingToRollBack(_)) => {
            json_error(StatusCode::CONFLICT, "nothing_to_roll_back", e.to_string())
        }
        Err(e @ DeployError::UnknownVersion(..)) => {
            json_error(StatusCode::NOT_FOUND, "unknown_version", e.to_string())
        }
        Err(e @ DeployError::AlreadyRunning(..)) => {
            json_error(StatusCode::CONFLICT, "already_running", e.to_string())
        }
    }
}
