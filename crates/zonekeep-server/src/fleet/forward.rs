//! Sending a client to the host that owns its zone: a `Redirect` (the default), or forwarding the
//! WebSocket there (`--route proxy`, for deployments where only one address is public).
//!
//! Either way the Hello goes to the owner unchanged: this host checked the ticket's signature
//! but did not spend its single-use id or redeem a reconnect token, so the owner does both, once.
//! The URL carries a hop count; a Hello that arrives with [`MAX_HOPS`] hops already behind it is
//! refused with TOO_MANY_REDIRECTS rather than sent on, which cuts any loop (hosts that disagree
//! about an owner for a moment) after three hops.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures_util::{SinkExt, StreamExt};
use tokio_tungstenite::tungstenite;
use tokio_tungstenite::tungstenite::Message;
use zonekeep_protocol::limits::MAX_SERVER_MESSAGE;
use zonekeep_protocol::messages::{KickCode, Redirect, ServerMessage};

use super::{Fleet, RouteMode};
use crate::host::Shared;
use crate::net::conn::KickNotice;
use crate::net::ws::{finish, Sink, Stream};

/// Redirects (or proxy hops) a Hello may have behind it before it is refused.
pub(crate) const MAX_HOPS: u32 = 3;

/// Longest the proxy waits to open the connection to the owner.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// A Hello for a zone another host owns.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Moved {
    /// The owner's host id.
    pub host: String,
    /// The owner's advertised base URL.
    pub url: String,
    /// The negotiated protocol version.
    pub version: u32,
    /// The Hello exactly as the client sent it.
    pub hello: Bytes,
}

fn kick(code: KickCode, reason: impl Into<String>) -> Option<KickNotice> {
    Some(KickNotice {
        code,
        reason: reason.into(),
    })
}

/// Redirects or proxies the client to the owner, or refuses it when its hops are used up.
pub(crate) async fn send_elsewhere(
    shared: &Arc<Shared>,
    zone_id: &str,
    hops: u32,
    moved: Moved,
    mut sink: Sink,
    mut stream: Stream,
) {
    let url = Fleet::zone_url(&moved.url, zone_id, hops.saturating_add(1));
    let Some(fleet) = shared.fleet() else {
        let k = kick(KickCode::ZONE_MOVED, format!("the zone is served at {url}"));
        finish(shared, &mut sink, &mut stream, k).await;
        return;
    };
    if hops >= MAX_HOPS {
        fleet.metrics.redirect_loops.inc();
        tracing::warn!(zone = %zone_id, hops, owner = %moved.host, "Hello refused: too many redirects");
        let k = kick(
            KickCode::TOO_MANY_REDIRECTS,
            format!("{hops} redirects without reaching the zone's owner; retry shortly"),
        );
        finish(shared, &mut sink, &mut stream, k).await;
        return;
    }
    match fleet.route {
        RouteMode::Proxy => proxy(shared, fleet, &url, moved.hello, sink, stream).await,
        RouteMode::Redirect if moved.version >= 3 => {
            fleet.metrics.redirects.inc();
            let msg = ServerMessage::Redirect(Redirect {
                url,
                zone_id: zone_id.to_owned(),
            });
            match msg.to_bytes(None) {
                Ok(bytes) => {
                    let bound = Duration::from_millis(shared.config.kick_write_timeout_ms);
                    let _ =
                        tokio::time::timeout(bound, sink.send(Message::Binary(bytes.into()))).await;
                    finish(shared, &mut sink, &mut stream, None).await;
                }
                Err(e) => {
                    tracing::error!(zone = %zone_id, error = %e, "redirect does not encode");
                    let k = kick(
                        KickCode::INTERNAL_ERROR,
                        "cannot redirect to the zone's owner",
                    );
                    finish(shared, &mut sink, &mut stream, k).await;
                }
            }
        }
        RouteMode::Redirect => {
            fleet.metrics.redirects.inc();
            let k = kick(KickCode::ZONE_MOVED, format!("the zone is served at {url}"));
            finish(shared, &mut sink, &mut stream, k).await;
        }
    }
}

/// Forwards the connection to the owner at `url`, Hello first, until either side ends.
async fn proxy(
    shared: &Arc<Shared>,
    fleet: &Fleet,
    url: &str,
    hello: Bytes,
    mut sink: Sink,
    mut stream: Stream,
) {
    let config = tungstenite::protocol::WebSocketConfig::default()
        .max_message_size(Some(MAX_SERVER_MESSAGE))
        .max_frame_size(Some(MAX_SERVER_MESSAGE));
    let connect = tokio::time::timeout(
        CONNECT_TIMEOUT,
        tokio_tungstenite::connect_async_with_config(url, Some(config), true),
    )
    .await;
    let upstream = match connect {
        Ok(Ok((ws, _))) => ws,
        Ok(Err(e)) => {
            tracing::warn!(url, error = %e, "proxy: the zone's owner refused the connection");
            let k = kick(
                KickCode::INTERNAL_ERROR,
                "the zone's owner is unreachable; retry",
            );
            finish(shared, &mut sink, &mut stream, k).await;
            return;
        }
        Err(_) => {
            tracing::warn!(url, "proxy: the zone's owner did not answer in time");
            let k = kick(
                KickCode::INTERNAL_ERROR,
                "the zone's owner is unreachable; retry",
            );
            finish(shared, &mut sink, &mut stream, k).await;
            return;
        }
    };
    fleet.metrics.proxied.inc();
    let (mut up_tx, mut up_rx) = upstream.split();
    if up_tx.send(Message::Binary(hello)).await.is_err() {
        let k = kick(KickCode::INTERNAL_ERROR, "the zone's owner closed; retry");
        finish(shared, &mut sink, &mut stream, k).await;
        return;
    }
    // Each direction is its own loop, so a client that reads slowly holds back only what flows
    // to it; the owner's own limits (outbox, read progress, idle) still judge the client.
    let to_owner = async {
        while let Some(Ok(m)) = stream.next().await {
            // The owner judges anything odd (text, oversized) as on a direct connection; the
            // proxy's own WebSocket answers Pings.
            if matches!(m, Message::Ping(_) | Message::Pong(_) | Message::Frame(_)) {
                continue;
            }
            let close = matches!(m, Message::Close(_));
            if up_tx.send(m).await.is_err() || close {
                break;
            }
        }
        let _ = up_tx.close().await;
    };
    let to_client = async {
        while let Some(Ok(m)) = up_rx.next().await {
            if !matches!(m, Message::Binary(_) | Message::Close(_)) {
                continue;
            }
            let close = matches!(m, Message::Close(_));
            if sink.send(m).await.is_err() || close {
                break;
            }
        }
        let _ = sink.close().await;
    };
    tokio::select! {
        () = to_owner => {}
        () = to_client => {}
    }
}
