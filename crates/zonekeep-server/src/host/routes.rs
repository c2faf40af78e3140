//! The HTTP routes a client or a scraper reaches, and the bounds on plain requests.

use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Path, RawQuery, State};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Extension;

use crate::error::SessionError;

use super::{json_error, valid_zone_id, ConnInfo, Shared};

/// Plain HTTP requests (a WebSocket upgrade is let through: its session has its own bounds and
/// tells an over-cap client with `Kick(TOO_MANY_CONNECTIONS)`): from an address over its
/// connection cap they answer 429; otherwise they must be answered within `limit`, body read
/// included, or get 408. Either way the connection then closes.
pub(super) async fn bound_plain_requests(
    State(limit): State<Duration>,
    req: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    // A module push or rollback bounds its own time (see `admin::modules`), so that its answer
    // always says what happened; the request's address cap still applies below.
    let bounds_itself =
        req.method() == axum::http::Method::POST && req.uri().path().starts_with("/admin/modules/");
    if req.headers().contains_key(header::UPGRADE) {
        return next.run(req).await;
    }
    let over = req
        .extensions()
        .get::<ConnInfo>()
        .is_some_and(|i| i.over_ip_cap);
    let mut r = if over {
        json_error(
            StatusCode::TOO_MANY_REQUESTS,
            "too_many_connections",
            "too many connections from this address",
        )
    } else {
        if bounds_itself {
            return next.run(req).await;
        }
        match tokio::time::timeout(limit, next.run(req)).await {
            Ok(r) => return r,
            Err(_) => json_error(
                StatusCode::REQUEST_TIMEOUT,
                "request_timeout",
                "the request was not completed in time",
            ),
        }
    };
    r.headers_mut().insert(
        header::CONNECTION,
        header::HeaderValue::from_static("close"),
    );
    r
}

pub(super) async fn metrics_handler(State(shared): State<Arc<Shared>>) -> Response {
    let mut text = shared.metrics.encode();
    if let Some(bus) = shared.sim.bus.get() {
        crate::bus::encode_metrics(bus.stats(), &mut text);
    }
    (
        [(
            header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        text,
    )
        .into_response()
}

/// Where the WebTransport endpoint listens and which certificate hash to pin (PROTOCOL.md §1.1),
/// named from the host the request was sent to; 404 when WebTransport is off.
pub(super) async fn webtransport_handler(
    State(shared): State<Arc<Shared>>,
    headers: axum::http::HeaderMap,
) -> Response {
    crate::net::webtransport::published_answer(shared.webtransport.get(), &headers)
}

pub(super) async fn ws_handler(
    State(shared): State<Arc<Shared>>,
    Path(zone_id): Path<String>,
    RawQuery(query): RawQuery,
    info: Option<Extension<ConnInfo>>,
    mut req: axum::extract::Request,
) -> Response {
    let hops = redirect_hops(query.as_deref());
    let on_upgrade = req.extensions_mut().remove::<hyper::upgrade::OnUpgrade>();
    let (response, on_upgrade) =
        match crate::net::ws::upgrade::accept(req.method(), req.headers(), on_upgrade) {
            Ok(x) => x,
            Err(refused) => return refused.into_response(),
        };
    let (over, guard) = match info {
        Some(Extension(i)) => (i.over_ip_cap, Some(i.guard)),
        None => (false, None),
    };
    tokio::spawn(async move {
        let upgraded = match on_upgrade.await {
            Ok(u) => u,
            Err(e) => {
                tracing::debug!(error = %e, "WebSocket upgrade failed");
                return;
            }
        };
        let Some((tcp, pre)) = crate::net::ws::upgrade::into_tcp(upgraded) else {
            tracing::error!("an upgraded connection is not this host's TCP socket");
            return;
        };
        if !valid_zone_id(&zone_id) {
            let _guard = guard;
            crate::net::ws::refuse(tcp, pre, shared, SessionError::BadZoneId).await;
            return;
        }
        crate::net::ws::run(tcp, pre, zone_id, shared, over, hops, guard).await;
    });
    response
}

/// The `hops` query parameter hosts put on a Redirect's URL (0 when absent or unreadable: a
/// client that forges it only loops itself, and at most three more times).
pub(crate) fn redirect_hops(query: Option<&str>) -> u32 {
    query
        .into_iter()
        .flat_map(|q| q.split('&'))
        .find_map(|kv| kv.strip_prefix("hops="))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}
