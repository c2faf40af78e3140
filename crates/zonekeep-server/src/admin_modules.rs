//! The admin API's module routes (under the same bearer token as the rest of `/admin`):
//!
//! | route | body | answer |
//! | --- | --- | --- |
//! | `GET /admin/modules` | | `{"kinds": [{"kind", "sha256"}], "deploys": [{"kind", "sha256", "version", "size", "deployed_at_ms"}]}`: this host's module kinds and what they run, and the store's record of every kind's deploy |
//! | `POST /admin/modules/{kind}/rollback` | | 200 `DeployOutcome` (`"rolled_back": true`): the kind goes back to the module it ran before its last deploy on this host, through the same freeze barrier, and the store records it, so every host follows; 409 `nothing_to_roll_back` when there is none |
//! | `POST /admin/modules/{kind}?on_refusal=roll_back\|keep_upgraded` | the module (`application/wasm`, at most 32 MiB) | 200 `DeployOutcome`: the module is kept in the store, installed here, and every running zone of the kind is frozen, saved and restored into it; when a zone's new code refuses its save every zone goes back to the old code (`roll_back`, the default, answers `"rolled_back": true`) or only that zone stays on it (`keep_upgraded`). Other hosts of the fleet follow within a second. 422 `refused` for a module that does not load (the reason names the import or export). |

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use serde::Deserialize;
use serde_json::json;

use crate::code::{deploy, roll_back, DeployError, OnRefusal};
use crate::host::{json_error, Shared};

/// The largest module body accepted (the store's limit).
const MAX_MODULE_BODY: usize = 32 << 20;

/// The module routes; the caller puts them behind the admin token.
pub(crate) fn routes() -> Router<Arc<Shared>> {
    Router::new()
        .route("/admin/modules", get(list))
        .route(
            "/admin/modules/{kind}",
            axum::routing::post(push).layer(DefaultBodyLimit::max(MAX_MODULE_BODY)),
        )
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
    let deploys = match shared.sim.persist.as_ref() {
        Some(p) => match p.store().modules.module_kinds().await {
            Ok(d) => serde_json::to_value(d).unwrap_or_default(),
            Err(e) => {
                return json_error(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "unavailable",
                    e.to_string(),
                )
            }
        },
        None => json!([]),
    };
    Json(json!({"kinds": kinds, "deploys": deploys})).into_response()
}

#[derive(Debug, Deserialize)]
struct PushQuery {
    #[serde(default)]
    on_refusal: OnRefusal,
}

async fn push(
    State(shared): State<Arc<Shared>>,
    Path(kind): Path<String>,
    Query(q): Query<PushQuery>,
    body: Bytes,
) -> Response {
    let Some(code) = shared.code.clone() else {
        return no_module_kinds();
    };
    let store = shared.sim.persist.as_ref().map(|p| p.store().clone());
    let upgrader = crate::upgrade::Upgrader {
        shared: shared.clone(),
    };
    let deployed = deploy(
        code.as_ref(),
        store.as_ref(),
        &upgrader,
        &kind,
        &body,
        q.on_refusal,
    )
    .await;
    answer(deployed)
}

async fn rollback(State(shared): State<Arc<Shared>>, Path(kind): Path<String>) -> Response {
    let Some(code) = shared.code.clone() else {
        return no_module_kinds();
    };
    let store = shared.sim.persist.as_ref().map(|p| p.store().clone());
    let upgrader = crate::upgrade::Upgrader {
        shared: shared.clone(),
    };
    answer(roll_back(code.as_ref(), store.as_ref(), &upgrader, &kind).await)
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
        Err(e @ DeployError::NothingToRollBack(_)) => {
            json_error(StatusCode::CONFLICT, "nothing_to_roll_back", e.to_string())
        }
    }
}
