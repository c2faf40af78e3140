//! Opening a transport to a zone and the Hello → Welcome handshake, following Redirects: a
//! WebSocket here, a WebTransport session in [`super::webtransport`].

use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};
use zonekeep_protocol::limits::{MAX_REDIRECTS, MAX_SERVER_MESSAGE};
use zonekeep_protocol::messages::{
    ClientMessage, Hello, KickCode, Redirect, ServerMessage, Welcome,
};

use super::counters::{add, Counters};
use super::link::Link;
use super::Transport;
use crate::error::ClientError;

/// The client's socket type.
pub(crate) type Ws = WebSocketStream<MaybeTlsStream<TcpStream>>;

/// How long a redirected socket may take to send its Close frame before it is simply dropped.
const REDIRECT_CLOSE_WAIT: Duration = Duration::from_millis(250);

/// Connects to `entry`, sends `hello` and waits for Welcome (or Kick) within `timeout`, following up
/// to [`MAX_REDIRECTS`] Redirects with the same Hello (PROTOCOL.md §5.3.1). The timeout covers the
/// whole attempt, hops included.
pub(crate) async fn open(
    entry: &str,
    hello: &Hello,
    timeout: Duration,
    counters: &Counters,
    transport: Transport,
) -> Result<(Link, Welcome), ClientError> {
    let attempt = async {
        match transport {
            Transport::WebSocket => follow(entry, hello, counters)
                .await
                .map(|(ws, w)| (Link::WebSocket(Box::new(ws)), w)),
            Transport::WebTransport => super::webtransport::open(entry, hello, counters)
                .await
                .map(|(wt, w)| (Link::WebTransport(wt), w)),
        }
    };
    match tokio::time::timeout(timeout, attempt).await {
        Ok(r) => r,
        Err(_) => Err(ClientError::HandshakeTimeout),
    }
}

async fn follow(
    entry: &str,
    hello: &Hello,
    counters: &Counters,
) -> Result<(Ws, Welcome), ClientError> {
    // The Hello is encoded once: every hop receives exactly the same bytes (same ticket, same
    // reconnect token), as the owner must see the Hello the redirecting host checked.
    let bytes = ClientMessage::Hello(hello.clone()).to_bytes()?;
    let mut url = entry.to_owned();
    let mut followed = 0;
    loop {
        match handshake(&url, &bytes, hello, counters).await? {
            Answer::Welcome(ws, w) => return Ok((ws, w)),
            Answer::Redirect(mut ws, r) => {
                // The host closes after a Redirect; closing our side too is a courtesy, bounded.
                let _ = tokio::time::timeout(REDIRECT_CLOSE_WAIT, ws.close(None)).await;
                if followed >= MAX_REDIRECTS {
                    return Err(ClientError::TooManyRedirects(followed));
                }
                let Some(next) = r.websocket_url() else {
                    return Err(ClientError::RedirectScheme(r.url));
                };
                tracing::debug!(url = next, zone = %r.zone_id, hop = followed + 1, "redirected");
                followed += 1;
                add(&counters.redirects, 1);
                url = next.to_owned();
            }
        }
    }
}

/// How a host answered a Hello.
enum Answer {
    Welcome(Ws, Welcome),
    Redirect(Ws, Redirect),
}

async fn handshake(
    url: &str,
    hello_bytes: &[u8],
    hello: &Hello,
    counters: &Counters,
) -> Result<Answer, ClientError> {
    // The protocol caps server messages at 1 MiB; refuse anything larger at the frame layer too,
    // before it is buffered.
    let config = WebSocketConfig::default()
        .max_message_size(Some(MAX_SERVER_MESSAGE))
        .max_frame_size(Some(MAX_SERVER_MESSAGE));
    // Nagle off: inputs and pings are small and latency-sensitive.
    let (mut ws, _response) =
        tokio_tungstenite::connect_async_with_config(url, Some(config), true).await?;
    counters.sent(hello_bytes.len());
    ws.send(Message::binary(hello_bytes.to_vec())).await?;
    loop {
        let Some(msg) = ws.next().await else {
            return Err(ClientError::ClosedDuringHandshake);
        };
        match msg? {
            Message::Binary(b) => {
                counters.received(b.len());
                return match ServerMessage::decode(&b, None)? {
                    ServerMessage::Welcome(w) => {
                        if !hello.versions.contains(&w.version) {
                            return Err(ClientError::VersionMismatch(w.version));
                        }
                        Ok(Answer::Welcome(ws, w))
                    }
                    ServerMessage::Redirect(r) => Ok(Answer::Redirect(ws, r)),
                    ServerMessage::Kick(k) if k.code == KickCode::CONTENT_OUTDATED => {
                        Err(ClientError::ContentOutdated(k))
                    }
                    ServerMessage::Kick(k) => Err(ClientError::Kicked(k)),
                    _ => Err(ClientError::Protocol(
                        "expected Welcome, Redirect or Kick first",
                    )),
                };
            }
            Message::Text(_) => return Err(ClientError::Protocol("text frame")),
            Message::Close(_) => return Err(ClientError::ClosedDuringHandshake),
            // Control frames: tungstenite answers pings itself.
            Message::Ping(_) | Message::Pong(_) | Message::Frame(_) => {}
        }
    }
}
