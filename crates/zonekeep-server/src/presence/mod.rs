//! Presence (docs/PRESENCE.md): who is online, in which zone and since when, fleet-wide.
//!
//! Each host writes who is in the zones it runs (`report`), and the store decides what is live
//! ([`zonekeep_store::PresenceStore`]): a row lives while the host that wrote it does. The
//! application's back end asks with its credential; a game client watches the principals its
//! ticket names (its friends, as the back end decided) and is pushed their changes (`watch`).
//!
//! | route | auth | answer |
//! | --- | --- | --- |
//! | `GET /presence?principals=a,b` | the back-end (lobby) credential | `{"presence": [Presence]}` |
//! | `GET /presence/watch` | a ticket for `@presence` whose `params.watch` lists the principals | an event stream: `snapshot`, then `presence` per change |

mod report;
mod watch;

use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use futures_util::stream::{self, Stream};
use serde::Deserialize;
use serde_json::json;
use zonekeep_store::MAX_PRESENCE_QUERY;

use crate::fleet::Fleet;
use crate::host::{json_error, Shared};
pub(crate) use watch::Hub;
use watch::{Push, WatchRefusal};

/// The ticket `zone` claim that admits its principal to watch presence. Not a valid zone id.
pub const PRESENCE_AUDIENCE: &str = "@presence";
/// Most principals one watcher watches.
pub const MAX_WATCH: usize = 200;
/// How often an idle watch stream carries a keep-alive comment.
const KEEP_ALIVE: Duration = Duration::from_secs(15);

/// Starts the presence writer and the watchers' poller (hosts with a store, once they joined
/// the fleet).
pub(crate) fn start(shared: &Arc<Shared>, fleet: &Arc<Fleet>) {
    let Some(persist) = shared.sim.persist.clone() else {
        return;
    };
    tokio::spawn(report::run(Arc::clone(shared), Arc::clone(fleet)));
    let dead_after_ms = u64::try_from(fleet.timing.dead_after.as_millis()).unwrap_or(u64::MAX);
    tokio::spawn(watch::run(
        shared.presence.clone(),
        persist.store().clone(),
        dead_after_ms,
        shared.fleet_stop.clone(),
    ));
}

/// The routes (a host without a store answers `presence_off`).
pub(crate) fn router(shared: &Arc<Shared>) -> Router<Arc<Shared>> {
    Router::new()
        .route(
            "/presence",
            get(query).layer(axum::middleware::from_fn_with_state(
                shared.clone(),
                crate::lobby::backend_auth,
            )),
        )
        .route(
            "/presence/watch",
            get(watch_stream).layer(axum::middleware::from_fn(crate::matchmaker::any_origin)),
        )
}

fn refuse(status: StatusCode, code: &str, message: impl Into<String>) -> Response {
    json_error(status, code, message)
}

fn off() -> Response {
    refuse(
        StatusCode::NOT_FOUND,
        "presence_off",
        "presence needs a store: this host keeps nothing",
    )
}

/// The fleet's takeover bound, ms: how long a host may be silent before its rows stop counting.
fn dead_after_ms(shared: &Shared) -> Option<u64> {
    shared
        .fleet
        .get()
        .map(|f| u64::try_from(f.timing.dead_after.as_millis()).unwrap_or(u64::MAX))
}

#[derive(Debug, Deserialize)]
struct PresenceQuery {
    principals: Option<String>,
}

/// Splits and checks a comma-separated principal list (distinct, 1..=`max`, each 1..=256 bytes).
fn principal_list(text: &str, max: usize) -> Result<Vec<String>, String> {
    let mut out: Vec<String> = Vec::new();
    for p in text.split(',') {
        add_principal(&mut out, p)?;
        if out.len() > max {
            return Err(format!("at most {max} principals"));
        }
    }
    Ok(out)
}

/// Adds `p` to `out` unless it is there already; refuses a principal outside 1..=256 bytes (a
/// ticket's subject).
fn add_principal(out: &mut Vec<String>, p: &str) -> Result<(), String> {
    if p.is_empty() || p.len() > crate::ticket::MAX_SUB_LEN {
        return Err(format!(
            "each principal is 1..={} bytes",
            crate::ticket::MAX_SUB_LEN
        ));
    }
    if !out.iter().any(|o| o == p) {
        out.push(p.to_owned());
    }
    Ok(())
}

async fn query(
    State(shared): State<Arc<Shared>>,
    q: Result<Query<PresenceQuery>, axum::extract::rejection::QueryRejection>,
) -> Response {
    let (Some(persist), Some(dead_after)) = (shared.sim.persist.clone(), dead_after_ms(&shared))
    else {
        return off();
    };
    let Ok(Query(q)) = q else {
        return refuse(StatusCode::BAD_REQUEST, "bad_request", "malformed query");
    };
    let Some(text) = q.principals else {
        return refuse(
            StatusCode::BAD_REQUEST,
            "bad_request",
            "principals=a,b,... is required",
        );
    };
    let principals = match principal_list(&text, MAX_PRESENCE_QUERY) {
        Ok(p) => p,
        Err(m) => return refuse(StatusCode::BAD_REQUEST, "bad_request", m),
    };
    let call = persist
        .store()
        .presence
        .presence_of(&principals, dead_after);
    match crate::host::bounded_store_call(call).await {
        Ok(rows) => {
            Json(json!({ "presence": watch::presence_of(&principals, &rows) })).into_response()
        }
        Err(crate::host::StoreCallError::Store(e)) if !e.is_retryable() => {
            refuse(StatusCode::BAD_REQUEST, "bad_request", e.to_string())
        }
        Err(crate::host::StoreCallError::Store(e)) => refuse(
            StatusCode::SERVICE_UNAVAILABLE,
            "unavailable",
            e.to_string(),
        ),
        Err(crate::host::StoreCallError::Timeout(m)) => {
            refuse(StatusCode::SERVICE_UNAVAILABLE, "unavailable", m)
        }
    }
}

/// The principals a verified `@presence` ticket lets its holder watch: `params.watch`.
fn watch_list(params: Option<&serde_json::Value>) -> Result<Vec<String>, String> {
    let Some(list) = params
        .and_then(|p| p.get("watch"))
        .and_then(|w| w.as_array())
    else {
        return Err("the ticket's params.watch lists the principals to watch".into());
    };
    let mut out: Vec<String> = Vec::new();
    for v in list {
        let Some(p) = v.as_str() else {
            return Err("params.watch holds principals (strings)".into());
        };
        add_principal(&mut out, p)?;
    }
    if out.is_empty() {
        return Err("params.watch names no principal".into());
    }
    if out.len() > MAX_WATCH {
        return Err(format!(
            "params.watch names at most {MAX_WATCH} principals, not {}",
            out.len()
        ));
    }
    Ok(out)
}

async fn watch_stream(State(shared): State<Arc<Shared>>, headers: HeaderMap) -> Response {
    if shared.sim.persist.is_none() || shared.fleet.get().is_none() {
        return off();
    }
    let ticket =
        match crate::matchmaker::verify_audience_ticket(&shared, &headers, PRESENCE_AUDIENCE).await
        {
            Ok(t) => t,
            Err(e) => {
                let (status, code) = e.code();
                return refuse(status, code, e.to_string());
            }
        };
    let principals = match watch_list(ticket.params.as_ref()) {
        Ok(p) => p,
        Err(m) => {
            if m.starts_with("params.watch names at most") {
                shared.metrics.presence().dropped("too_many_principals");
            }
            return refuse(StatusCode::BAD_REQUEST, "bad_request", m);
        }
    };
    let (sub, rx) = match shared.presence.watch(principals) {
        Ok(s) => s,
        Err(WatchRefusal::Full) => {
            return refuse(
                StatusCode::SERVICE_UNAVAILABLE,
                "presence_full",
                "this host serves as many presence watchers as it may; try another host",
            )
        }
    };
    Sse::new(events(sub, rx, shared.shutdown.clone()))
        .keep_alive(KeepAlive::new().interval(KEEP_ALIVE))
        .into_response()
}

/// The watcher's pushes as server-sent events; the subscription lives as long as the stream.
/// The stream ends when the host begins to shut down (a drain waits for every connection to
/// close; the watcher reconnects to another host and gets a fresh snapshot there).
fn events(
    sub: watch::Subscription,
    rx: tokio::sync::mpsc::Receiver<Push>,
    shutdown: tokio_util::sync::CancellationToken,
) -> impl Stream<Item = Result<Event, std::convert::Infallible>> {
    stream::unfold((sub, rx, shutdown), |(sub, mut rx, shutdown)| async move {
        let push = tokio::select! {
            p = rx.recv() => p?,
            () = shutdown.cancelled() => return None,
        };
        let event = match &push {
            Push::Snapshot(all) => Event::default()
                .event("snapshot")
                .json_data(json!({ "presence": all })),
            Push::Changed(p) => Event::default().event("presence").json_data(p),
        };
        // Serializing plain data cannot fail; an event that could not be written ends the
        // stream.
        let event = event.ok()?;
        Some((Ok(event), (sub, rx, shutdown)))
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn principal_lists_are_bounded_and_distinct() {
        assert_eq!(principal_list("a,b,a", 3).unwrap(), ["a", "b"]);
        assert!(principal_list("a,,b", 3).is_err());
        assert!(principal_list("a,b,c,d", 3).is_err());
        assert!(principal_list(&"p".repeat(257), 3).is_err());
    }

    #[test]
    fn a_watch_list_comes_from_the_tickets_params() {
        assert_eq!(
            watch_list(Some(&json!({"watch": ["a", "b", "a"]}))).unwrap(),
            ["a", "b"]
        );
        assert!(watch_list(None).is_err());
        assert!(watch_list(Some(&json!({"watch": []}))).is_err());
        assert!(watch_list(Some(&json!({"watch": [1]}))).is_err());
        let many: Vec<String> = (0..=MAX_WATCH).map(|i| format!("p{i}")).collect();
        assert!(watch_list(Some(&json!({ "watch": many }))).is_err());
    }
}
