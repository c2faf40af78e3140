//! A session's control stream up to its Hello, and its closing Kick (PROTOCOL.md §1.1): the same
//! rules wherever the session is served, a host or a relay.

use std::time::Duration;

use bytes::Bytes;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use wtransport::{Connection, RecvStream, SendStream, VarInt};

use super::framing::{read_message, write_message};
use crate::error::{kick_label, SessionError};
use crate::metrics::Metrics;
use crate::net::conn::KickNotice;
use crate::sim::kick_frame;

/// How the wait for the client's control stream ended.
pub(crate) enum Control {
    /// The stream, and the refusal to send on it when a datagram came first.
    Opened(SendStream, RecvStream, Option<SessionError>),
    /// No stream: the session ends, with this refusal (it has no stream to travel on) or, when
    /// the client left, none.
    Missing(Option<SessionError>),
}

/// The client's control stream, opened before the handshake deadline. A datagram before it is a
/// protocol error (there is no Hello yet), but its Kick must reach the client, and only the
/// stream carries one: a datagram overtakes the stream the client opened before it, so the
/// refusal waits for the stream (until the same deadline) and is sent on it. A second stream
/// later is refused by the reader.
pub(crate) async fn control_stream(
    shutdown: &CancellationToken,
    metrics: &Metrics,
    connection: &Connection,
    deadline: Instant,
) -> Control {
    let mut early = None;
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => {
                return Control::Missing(Some(early.unwrap_or(SessionError::ShuttingDown)));
            }
            () = tokio::time::sleep_until(deadline) => {
                return Control::Missing(Some(early.unwrap_or(SessionError::HandshakeTimeout)));
            }
            s = connection.accept_bi() => {
                return match s {
                    Ok((send, recv)) => Control::Opened(send, recv, early),
                    Err(_) => {
                        metrics.disconnect("dropped");
                        Control::Missing(None)
                    }
                };
            }
            d = connection.receive_datagram(), if early.is_none() => match d {
                Ok(_) => early = Some(SessionError::Protocol("a datagram before the Hello".into())),
                Err(_) => {
                    metrics.disconnect("dropped");
                    return Control::Missing(None);
                }
            },
        }
    }
}

/// The Hello's bytes, the first message on the control stream, at most `max` bytes, before the
/// deadline; `Ok(None)` when the client left first.
pub(crate) async fn read_hello(
    shutdown: &CancellationToken,
    metrics: &Metrics,
    connection: &Connection,
    recv: &mut RecvStream,
    max: usize,
    deadline: Instant,
) -> Result<Option<Bytes>, SessionError> {
    // Biased: a Hello that has arrived is read before a datagram that came with it (§1.1: only
    // a datagram that reaches the server before the Hello is refused).
    let first = tokio::select! {
        biased;
        _ = shutdown.cancelled() => return Err(SessionError::ShuttingDown),
        () = tokio::time::sleep_until(deadline) => return Err(SessionError::HandshakeTimeout),
        m = read_message(recv, max) => m?,
        d = connection.receive_datagram() => match d {
            Ok(_) => return Err(SessionError::Protocol("a datagram before the Hello".into())),
            Err(_) => None,
        },
    };
    if first.is_none() {
        metrics.disconnect("dropped");
    }
    Ok(first)
}

/// Sends the Kick (each step bounded by `bound`) and closes the session with 4000 + its code
/// (§1.1).
///
/// Closing a QUIC connection discards stream data not yet delivered, so the close waits until the
/// client's QUIC stack has acknowledged the finished stream, Kick included (`finish` completes
/// then), and then until the client, having read the Kick, closes the session itself, each for at
/// most `bound`. The WebTransport close capsule is not sent: the CONNECT stream belongs to
/// wtransport's driver, which offers no way to write on it.
pub(crate) async fn close(
    metrics: &Metrics,
    bound: Duration,
    connection: &Connection,
    send: Option<&mut SendStream>,
    kick: Option<KickNotice>,
) {
    let code = kick
        .as_ref()
        .map_or(0, |k| u32::from(crate::net::ws::close_code(k.code)));
    if let Some(send) = send {
        if let Some(k) = &kick {
            metrics.kick(&kick_label(k.code));
            let frame = kick_frame(k.code, &k.reason);
            let _ = tokio::time::timeout(bound, write_message(send, &frame)).await;
        }
        let _ = tokio::time::timeout(bound, send.finish()).await;
        if kick.is_some() {
            // The client's QUIC stack holds the Kick now, but a page may not have read it yet,
            // and a close reaching the page first would hide it: a client that read it closes
            // the session itself, so wait for that, within the same bound.
            let _ = tokio::time::timeout(bound, connection.closed()).await;
        }
    }
    connection.close(VarInt::from_u32(code), b"");
    // Let the close (and the Kick before it) leave before the endpoint forgets the session.
    let _ = tokio::time::timeout(bound, connection.closed()).await;
}
