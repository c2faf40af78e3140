//! The WebSocket transport. The async runtime upgrades the HTTP request, reads the client's
//! first message exactly ([`hello`]) and admits it ([`crate::session`]); an admitted connection
//! then moves to an I/O thread ([`io`]) that reads its inputs and writes its frames until it ends.
//! Connections refused, redirected or proxied before that are finished here on the runtime.

pub(crate) mod hello;
pub(crate) mod io;
mod participant;
mod probe;
pub(crate) mod upgrade;

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures_util::stream::{SplitSink, SplitStream};
use futures_util::{SinkExt, StreamExt};
use tokio::net::TcpStream;
use tokio_tungstenite::WebSocketStream;
use tungstenite::protocol::frame::coding::CloseCode;
use tungstenite::protocol::{CloseFrame, Role};
use tungstenite::Message;
use zonekeep_protocol::limits::MIN_PROTOCOL_VERSION;

use self::hello::{read_hello, Prefixed};
use self::io::{Arrival, IoSettings};
use self::participant::{Hold, Participant};
use crate::error::{kick_label, SessionError};
use crate::host::Shared;
use crate::metrics::Metrics;
use crate::net::conn::{ConnHandle, KickNotice};
use crate::net::conn_limit::ConnGuard;
use crate::session::{admit_hello, Handshake};
use crate::sim::kick_frame;

/// A WebSocket finished on the runtime: its writing half.
pub(crate) type Sink = SplitSink<WebSocketStream<TcpStream>, Message>;
/// A WebSocket finished on the runtime: its reading half.
pub(crate) type Stream = SplitStream<WebSocketStream<TcpStream>>;

/// Run one upgraded connection: its handshake here, then its session on an I/O thread.
pub(crate) async fn run(
    tcp: TcpStream,
    pre: Bytes,
    zone_id: String,
    shared: Arc<Shared>,
    over_ip_cap: bool,
    hops: u32,
    guard: Option<Arc<ConnGuard>>,
) {
    let track = shared.sessions.token();
    let mut src = Prefixed::new(tcp, pre);
    if over_ip_cap {
        let kick = Some(SessionError::TooManyConnections.kick());
        finish_raw(&shared, src, kick).await;
        return;
    }
    let Some(io) = shared.ws_io.get() else {
        // Not reachable through `serve`, which starts the I/O threads before it accepts.
        finish_raw(&shared, src, Some(SessionError::ShuttingDown.kick())).await;
        return;
    };
    let conn_id = shared.next_conn.fetch_add(1, Ordering::Relaxed);
    let link = io.link(conn_id, shared.config.outbox_frames);
    let conn = ConnHandle::linked(conn_id, Arc::clone(&link));
    let outcome = handshake(&shared, &zone_id, &mut src, &conn).await;
    let outcome = match outcome {
        Ok(Handshake::Attached(attached)) => {
            tracing::debug!(zone = %zone_id, conn = conn_id, player = %attached.player, "session attached");
            let (tcp, leftover) = src.into_parts();
            let stream = match tcp.into_std() {
                Ok(s) => s,
                Err(e) => {
                    tracing::warn!(conn = conn_id, error = %e, "socket left the runtime broken");
                    io.forget(&link);
                    shared.metrics.disconnect("dropped");
                    crate::session::disconnected(&shared, &attached);
                    return;
                }
            };
            let hold = Hold {
                _guard: guard,
                _track: track,
            };
            io.attach(Arrival {
                link,
                stream,
                leftover,
                peer: Box::new(Participant::new(Arc::clone(&shared), attached, hold)),
            });
            return;
        }
        other => other,
    };
    io.forget(&link);
    match outcome {
        Ok(Handshake::Attached(_)) | Ok(Handshake::Gone) => {}
        Ok(Handshake::Elsewhere(moved)) => {
            let (sink, stream) = websocket(&shared, src).await;
            crate::fleet::forward::send_elsewhere(&shared, &zone_id, hops, moved, sink, stream)
                .await;
        }
        Ok(Handshake::ToRelay(base)) => {
            // A new player placed on one of the zone's relays: it joins there, with the ticket
            // it still holds unspent.
            let (mut sink, mut stream) = websocket(&shared, src).await;
            let msg = zonekeep_protocol::messages::ServerMessage::Redirect(
                zonekeep_protocol::messages::Redirect {
                    url: format!("{}/zones/{zone_id}", base.trim_end_matches('/')),
                    zone_id: zone_id.clone(),
                },
            );
            if let Ok(bytes) = msg.to_bytes(None) {
                let bound = Duration::from_millis(shared.config.kick_write_timeout_ms);
                let _ = tokio::time::timeout(bound, sink.send(Message::Binary(bytes.into()))).await;
            }
            finish(&shared, &mut sink, &mut stream, None).await;
        }
        Ok(Handshake::Transferred(frame)) => {
            // Sent again to a moved player that came back: it goes on to the target, so the
            // close carries no Kick.
            let (mut sink, mut stream) = websocket(&shared, src).await;
            let bound = Duration::from_millis(shared.config.kick_write_timeout_ms);
            let _ = tokio::time::timeout(bound, sink.send(Message::Binary(frame))).await;
            finish(&shared, &mut sink, &mut stream, None).await;
        }
        Err(e) => {
            tracing::debug!(zone = %zone_id, conn = conn_id, error = %e, "handshake refused");
            finish_raw(&shared, src, Some(e.kick())).await;
        }
    }
    drop(track);
}

/// The socket as a WebSocket of the async runtime, from where the Hello reader left it.
async fn websocket(shared: &Shared, src: Prefixed) -> (Sink, Stream) {
    websocket_in(&IoSettings::of(&shared.config), src).await
}

/// [`websocket`] for connections of `settings` (a host's or a relay's).
async fn websocket_in(settings: &IoSettings, src: Prefixed) -> (Sink, Stream) {
    let config = settings.websocket(settings.write_buffer_bytes);
    let (tcp, leftover) = src.into_parts();
    WebSocketStream::from_partially_read(tcp, leftover, Role::Server, Some(config))
        .await
        .split()
}

/// [`finish`] a socket whose Hello reader still holds it.
async fn finish_raw(shared: &Shared, src: Prefixed, kick: Option<KickNotice>) {
    finish_raw_in(&IoSettings::of(&shared.config), &shared.metrics, src, kick).await;
}

/// [`finish_raw`] for connections of `settings`, kicks counted in `metrics`.
pub(crate) async fn finish_raw_in(
    settings: &IoSettings,
    metrics: &Metrics,
    src: Prefixed,
    kick: Option<KickNotice>,
) {
    let (mut sink, mut stream) = websocket_in(settings, src).await;
    finish_in(
        settings.close_timeout,
        metrics,
        &mut sink,
        &mut stream,
        kick,
    )
    .await;
}

/// Send the final Kick (bounded in time), close, and linger until the client closes too.
pub(crate) async fn finish(
    shared: &Shared,
    sink: &mut Sink,
    stream: &mut Stream,
    kick: Option<KickNotice>,
) {
    let bound = Duration::from_millis(shared.config.kick_write_timeout_ms);
    finish_in(bound, &shared.metrics, sink, stream, kick).await;
}

/// [`finish`] bounded by `bound`, kicks counted in `metrics`.
///
/// Dropping the socket while the client still has unread data in flight makes the kernel answer
/// with a TCP reset, which can destroy the Kick before the client reads it; so after our Close we
/// read and discard until the client's Close (or EOF), bounded by the same timeout.
async fn finish_in(
    bound: Duration,
    metrics: &Metrics,
    sink: &mut Sink,
    stream: &mut Stream,
    kick: Option<KickNotice>,
) {
    let close = kick.as_ref().map(|k| CloseFrame {
        code: CloseCode::from(close_code(k.code)),
        reason: "".into(),
    });
    if let Some(k) = kick {
        metrics.kick(&kick_label(k.code));
        let frame = kick_frame(k.code, &k.reason);
        let _ = tokio::time::timeout(bound, sink.send(Message::Binary(frame))).await;
    }
    // The Close carries the Kick's code too (PROTOCOL.md §6), so a client that only sees the
    // close event (a browser's `CloseEvent.code`) still learns why.
    let _ = tokio::time::timeout(bound, sink.send(Message::Close(close))).await;
    let _ = tokio::time::timeout(bound, async {
        while let Some(Ok(m)) = stream.next().await {
            if matches!(m, Message::Close(_)) {
                break;
            }
        }
    })
    .await;
}

/// The WebSocket close code after a Kick (PROTOCOL.md §6): 4000 + the Kick code, in the range
/// RFC 6455 leaves to applications; a code above 999 (none is defined) maps to 4999.
pub(crate) fn close_code(code: zonekeep_protocol::messages::KickCode) -> u16 {
    4000 + code.0.min(999)
}

/// Protocol versions this host speaks: 3 adds Redirect and the fleet's Kick codes (a version-2
/// client is told ZONE_MOVED, with the owner's URL in the reason, instead of being redirected);
/// 4 adds a resuming Hello's `resume_from`; 5 adds Welcome's content version and CONTENT_OUTDATED;
/// 6 adds the WebTransport transport, and over WebSocket is version 5; 7 adds Welcome's entry URLs;
/// 8 adds Transfer, and with it the moves of players between zones; 9 adds the Kick code
/// WORLD_HALTED; 10 the Kick codes CHARACTER_MOVED and CHARACTER_ELSEWHERE; 11 chat (its
/// messages and the Kick code BANNED).
pub(crate) const HOST_VERSIONS: [u32; 10] = [
    MIN_PROTOCOL_VERSION,
    3,
    4,
    5,
    6,
    zonekeep_protocol::messages::ENTRIES_PROTOCOL,
    zonekeep_protocol::messages::TRANSFER_PROTOCOL,
    zonekeep_protocol::messages::HALT_PROTOCOL,
    zonekeep_protocol::messages::CHARACTER_PROTOCOL,
    zonekeep_protocol::messages::CHAT_PROTOCOL,
];

async fn handshake(
    shared: &Arc<Shared>,
    zone_id: &str,
    src: &mut Prefixed,
    conn: &ConnHandle,
) -> Result<Handshake, SessionError> {
    let timeout = Duration::from_millis(shared.config.handshake_timeout_ms);
    let max = shared.config.max_message_bytes;
    let first = tokio::select! {
        _ = shared.shutdown.cancelled() => return Err(SessionError::ShuttingDown),
        r = tokio::time::timeout(timeout, read_hello(src, max, &shared.metrics)) => {
            r.map_err(|_| SessionError::HandshakeTimeout)??
        }
    };
    let Some(bytes) = first else {
        return Ok(Handshake::Gone);
    };
    admit_hello(shared, zone_id, bytes, &HOST_VERSIONS, conn).await
}

/// Refuse a session that never reached the handshake (bad zone id).
pub(crate) async fn refuse(tcp: TcpStream, pre: Bytes, shared: Arc<Shared>, err: SessionError) {
    let _track = shared.sessions.token();
    finish_raw(&shared, Prefixed::new(tcp, pre), Some(err.kick())).await;
}
