//! The WebSocket transport: one upgraded connection's handshake (its first message, the Hello,
//! admitted by [`crate::session`]), then a reader (inputs, pings) and a writer (outbox frames,
//! WebSocket Pings that prove the client reads, the final Kick) running side by side until one
//! of them ends the session.

mod probe;

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::ws::{CloseFrame, Message, WebSocket};
use bytes::Bytes;
use futures_util::stream::{SplitSink, SplitStream};
use futures_util::{SinkExt, StreamExt};
use tokio::sync::{mpsc, watch};
use zonekeep_protocol::limits::MIN_PROTOCOL_VERSION;

use self::probe::{ProbeStep, ReadProbe, ReadProgress};
use crate::error::{kick_label, SessionError};
use crate::host::Shared;
use crate::net::conn::{ConnEnds, ConnHandle, KickNotice};
use crate::net::netsim::{ConnNetSim, DelayQueue, Direction};
use crate::session::{admit_hello, handle_message, report_round_trip, Attached, Handshake, Limits};
use crate::sim::{kick_frame, SimCommand};
pub(crate) type Sink = SplitSink<WebSocket, Message>;
pub(crate) type Stream = SplitStream<WebSocket>;

/// Run one upgraded connection to its end.
pub(crate) async fn run(
    ws: WebSocket,
    zone_id: String,
    shared: Arc<Shared>,
    over_ip_cap: bool,
    hops: u32,
) {
    let _track = shared.sessions.token();
    let (mut sink, mut stream) = ws.split();
    if over_ip_cap {
        finish(
            &shared,
            &mut sink,
            &mut stream,
            Some(SessionError::TooManyConnections.kick()),
        )
        .await;
        return;
    }
    let conn_id = shared.next_conn.fetch_add(1, Ordering::Relaxed);
    let (conn, ends) = ConnHandle::new(conn_id, shared.config.outbox_frames);
    let attached = match handshake(&shared, &zone_id, &mut stream, &conn).await {
        Ok(Handshake::Attached(a)) => a,
        // The client left before its Hello: a disconnect (already counted), nobody to tell.
        Ok(Handshake::Gone) => return,
        Ok(Handshake::Elsewhere(moved)) => {
            crate::fleet::forward::send_elsewhere(&shared, &zone_id, hops, moved, sink, stream)
                .await;
            return;
        }
        Ok(Handshake::Transferred(frame)) => {
            // Sent again to a moved player that came back: it goes on to the target, so the
            // close carries no Kick.
            let bound = Duration::from_millis(shared.config.kick_write_timeout_ms);
            let _ = tokio::time::timeout(bound, sink.send(Message::Binary(frame))).await;
            finish(&shared, &mut sink, &mut stream, None).await;
            return;
        }
        Err(e) => {
            tracing::debug!(zone = %zone_id, conn = conn_id, error = %e, "handshake refused");
            finish(&shared, &mut sink, &mut stream, Some(e.kick())).await;
            return;
        }
    };
    tracing::debug!(zone = %zone_id, conn = conn_id, player = %attached.player, "session attached");
    let kick = serve(
        &shared,
        &attached,
        &mut sink,
        &mut stream,
        &conn,
        ends,
        conn_id,
    )
    .await;
    let kick = kick.map(|k| k.for_version(attached.version));
    finish(&shared, &mut sink, &mut stream, kick).await;
    let cmd = SimCommand::Disconnected {
        zone_id: zone_id.clone(),
        player: attached.player,
        conn_id,
    };
    shared.pool.send_eventually(attached.entry.thread, cmd);
}

/// Send the final Kick (bounded in time), close, and linger until the client closes too.
///
/// Dropping the socket while the client still has unread data in flight makes the kernel answer
/// with a TCP reset, which can destroy the Kick before the client reads it; so after our Close we
/// read and discard until the client's Close (or EOF), bounded by the same timeout.
pub(crate) async fn finish(
    shared: &Shared,
    sink: &mut Sink,
    stream: &mut Stream,
    kick: Option<KickNotice>,
) {
    let bound = Duration::from_millis(shared.config.kick_write_timeout_ms);
    let close = kick.as_ref().map(|k| CloseFrame {
        code: close_code(k.code),
        reason: "".into(),
    });
    if let Some(k) = kick {
        shared.metrics.kick(&kick_label(k.code));
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

/// The next binary message; `Ok(None)` when the client closed or the socket broke (counted in
/// `metrics` as a disconnect, not an error). WebSocket Pongs answering the host's read-progress
/// Pings are noted in `progress` (the highest sequence answered, and the round trip).
async fn next_message(
    stream: &mut Stream,
    max: usize,
    idle: Option<Duration>,
    progress: Option<&ReadProgress>,
    metrics: &crate::metrics::Metrics,
) -> Result<Option<Bytes>, SessionError> {
    loop {
        let item = match idle {
            Some(d) => tokio::time::timeout(d, stream.next())
                .await
                .map_err(|_| SessionError::IdleTimeout)?,
            None => stream.next().await,
        };
        match item {
            None => {
                metrics.disconnect("dropped");
                return Ok(None);
            }
            Some(Ok(Message::Close(_))) => {
                metrics.disconnect("closed");
                return Ok(None);
            }
            Some(Ok(Message::Binary(b))) => {
                if b.len() > max {
                    return Err(SessionError::TooLarge { len: b.len(), max });
                }
                return Ok(Some(b));
            }
            Some(Ok(Message::Text(_))) => {
                return Err(SessionError::Protocol("text frame (binary only)".into()))
            }
            Some(Ok(Message::Pong(p))) => {
                if let (Some(progress), Ok(seq)) = (progress, <[u8; 8]>::try_from(&p[..])) {
                    progress.answered(u64::from_be_bytes(seq));
                }
            }
            Some(Ok(Message::Ping(_))) => continue,
            Some(Err(e)) => return read_error(e, max, metrics),
        }
    }
}

/// A read error: the client's fault (an error Kick) or the connection just ending.
fn read_error(
    e: axum::Error,
    max: usize,
    metrics: &crate::metrics::Metrics,
) -> Result<Option<Bytes>, SessionError> {
    match e.into_inner().downcast::<tungstenite::Error>() {
        Ok(te) => match *te {
            tungstenite::Error::Capacity(_) => Err(SessionError::TooLarge { len: 0, max }),
            // A client that vanishes without a Close (a closed tab, a lost network) is a
            // disconnect like any other, not a protocol violation.
            tungstenite::Error::Protocol(
                tungstenite::error::ProtocolError::ResetWithoutClosingHandshake,
            ) => {
                metrics.disconnect("dropped");
                Ok(None)
            }
            tungstenite::Error::Protocol(p) => Err(SessionError::Protocol(p.to_string())),
            _ => {
                metrics.disconnect("dropped");
                Ok(None)
            }
        },
        Err(_) => {
            metrics.disconnect("dropped");
            Ok(None)
        }
    }
}

/// Protocol versions this host speaks: 3 adds Redirect and the fleet's Kick codes (a version-2
/// client is told ZONE_MOVED, with the owner's URL in the reason, instead of being redirected);
/// 4 adds a resuming Hello's `resume_from`; 5 adds Welcome's content version and CONTENT_OUTDATED;
/// 6 adds the WebTransport transport, and over WebSocket is version 5; 7 adds Welcome's entry URLs;
/// 8 adds Transfer, and with it the moves of players between zones; 9 adds the Kick code
/// WORLD_HALTED; 10 the Kick codes CHARACTER_MOVED and CHARACTER_ELSEWHERE.
const HOST_VERSIONS: [u32; 9] = [
    MIN_PROTOCOL_VERSION,
    3,
    4,
    5,
    6,
    zonekeep_protocol::messages::ENTRIES_PROTOCOL,
    zonekeep_protocol::messages::TRANSFER_PROTOCOL,
    zonekeep_protocol::messages::HALT_PROTOCOL,
    zonekeep_protocol::messages::CHARACTER_PROTOCOL,
];

async fn handshake(
    shared: &Arc<Shared>,
    zone_id: &str,
    stream: &mut Stream,
    conn: &ConnHandle,
) -> Result<Handshake, SessionError> {
    let timeout = Duration::from_millis(shared.config.handshake_timeout_ms);
    let max = shared.config.max_message_bytes;
    let first = tokio::select! {
        _ = shared.shutdown.cancelled() => return Err(SessionError::ShuttingDown),
        r = tokio::time::timeout(timeout, next_message(stream, max, None, None, &shared.metrics)) => {
            r.map_err(|_| SessionError::HandshakeTimeout)??
        }
    };
    let Some(bytes) = first else {
        return Ok(Handshake::Gone);
    };
    admit_hello(shared, zone_id, bytes, &HOST_VERSIONS, conn).await
}

/// Run reader and writer until one ends; the Kick to send, if any.
async fn serve(
    shared: &Arc<Shared>,
    a: &Attached,
    sink: &mut Sink,
    stream: &mut Stream,
    conn: &ConnHandle,
    ends: ConnEnds,
    conn_id: u64,
) -> Option<KickNotice> {
    let ConnEnds { outbox, kick } = ends;
    // The read-progress Pings sent and answered (see `ReadProbe`).
    let progress = ReadProgress::new();
    tokio::select! {
        r = read_loop(shared, a, stream, conn, conn_id, &progress) => match r {
            Ok(()) => None,
            Err(e) => {
                conn.kick(e.code(), e.to_string());
                Some(e.kick())
            }
        },
        k = write_loop(shared, &a.netsim, sink, outbox, kick, conn_id, &progress) => k,
    }
}

async fn read_loop(
    shared: &Arc<Shared>,
    a: &Attached,
    stream: &mut Stream,
    conn: &ConnHandle,
    conn_id: u64,
    progress: &ReadProgress,
) -> Result<(), SessionError> {
    let cfg = &shared.config;
    let max = cfg.max_message_bytes;
    let idle = Duration::from_millis(cfg.idle_timeout_ms);
    let limits = Limits::new(cfg);
    // Client → server messages held back by NetSim (dev); reading stops while it is full, which
    // is TCP's own backpressure.
    let mut delayed: DelayQueue<Bytes> = DelayQueue::new(
        conn_id.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ 0x5a5a,
        cfg.outbox_frames,
    );
    // The idle timeout is one timer armed for the whole session and moved only when it fires
    // early, not a timer registered and cancelled around every message read.
    let mut last_seen = tokio::time::Instant::now();
    let idle_timer = tokio::time::sleep(idle);
    tokio::pin!(idle_timer);
    loop {
        let release = delayed.next_release();
        tokio::select! {
            biased;
            () = &mut idle_timer => {
                let due = last_seen + idle;
                if tokio::time::Instant::now() >= due {
                    return Err(SessionError::IdleTimeout);
                }
                idle_timer.as_mut().reset(due);
            }
            _ = tokio::time::sleep_until(release.unwrap_or_else(tokio::time::Instant::now)),
                if release.is_some() =>
            {
                last_seen = tokio::time::Instant::now();
                while let Some(bytes) = delayed.pop_due(tokio::time::Instant::now()) {
                    if let Some(pong) = handle_message(shared, a, &limits, &bytes)? {
                        conn.send_own(pong).await;
                    }
                }
            }
            m = next_message(stream, max, None, Some(progress), &shared.metrics),
                if !delayed.is_full() =>
            {
                if let Some(rtt) = progress.take_round_trip() {
                    report_round_trip(shared, a, rtt);
                }
                let Some(bytes) = m? else { return Ok(()) };
                let now = tokio::time::Instant::now();
                last_seen = now;
                match delayed.offer(&a.netsim.get(), now, bytes) {
                    Some(bytes) => {
                        if let Some(pong) = handle_message(shared, a, &limits, &bytes)? {
                            conn.send_own(pong).await;
                        }
                    }
                    None => a.netsim.held(Direction::FromClient, delayed.last_delay()),
                }
            }
        }
    }
}

async fn write_loop(
    shared: &Arc<Shared>,
    netsim: &ConnNetSim,
    sink: &mut Sink,
    mut outbox: mpsc::Receiver<Bytes>,
    mut kick: watch::Receiver<Option<KickNotice>>,
    conn_id: u64,
    progress: &ReadProgress,
) -> Option<KickNotice> {
    let shutting_down = || Some(SessionError::ShuttingDown.kick());
    let mut probe = ReadProbe::new(
        Duration::from_millis(shared.config.read_progress_timeout_ms),
        tokio::time::Instant::now(),
    );
    let probe_timer = tokio::time::sleep_until(probe.next);
    tokio::pin!(probe_timer);
    // Server → client frames held back by NetSim (dev). While it is full the outbox is not
    // drained, so a client that cannot keep up still overflows its outbox and is kicked.
    let mut delayed = DelayQueue::new(
        conn_id.wrapping_mul(0xd1b5_4a32_d192_ed03) ^ 0xa5a5,
        shared.config.outbox_frames,
    );
    // One future for "stop now" (a kick or shutdown), registered once for the session instead of
    // twice per frame: the per-frame registrations were a visible share of the I/O cost.
    let stop = async {
        tokio::select! {
            biased;
            k = kick.wait_for(Option::is_some) => k.ok().and_then(|k| k.clone()),
            // Not `shutdown`: an attached client is kicked by its zone once the zone's final save
            // is durable, so that it reconnects to the state it saw acknowledged.
            _ = shared.sessions_end.cancelled() => shutting_down(),
        }
    };
    tokio::pin!(stop);
    loop {
        let release = delayed.next_release();
        let room = !delayed.is_full();
        let frame = tokio::select! {
            biased;
            k = &mut stop => return k,
            () = &mut probe_timer => {
                let now = tokio::time::Instant::now();
                match probe.step(progress.highest_answered(), now) {
                    ProbeStep::Wait => {}
                    ProbeStep::Stalled => return Some(stalled_kick()),
                    ProbeStep::Send(seq) => {
                        progress.sent(seq);
                        let ping = Message::Ping(Bytes::copy_from_slice(&seq.to_be_bytes()));
                        tokio::select! {
                            biased;
                            k = &mut stop => return k,
                            () = tokio::time::sleep_until(now + probe.timeout) => {
                                return Some(stalled_kick());
                            }
                            r = sink.send(ping) => if r.is_err() { return None },
                        }
                    }
                }
                probe_timer.as_mut().reset(probe.next);
                None
            }
            _ = tokio::time::sleep_until(release.unwrap_or_else(tokio::time::Instant::now)),
                if release.is_some() => delayed.pop_due(tokio::time::Instant::now()),
            f = outbox.recv(), if room => {
                let frame = delayed.offer(&netsim.get(), tokio::time::Instant::now(), f?);
                if frame.is_none() {
                    netsim.held(Direction::ToClient, delayed.last_delay());
                }
                frame
            }
        };
        let Some(frame) = frame else { continue };
        // Racing the write against a kick: a reader that stopped reading blocks
        // this send, and the slow-consumer kick must still end the session.
        tokio::select! {
            biased;
            k = &mut stop => return k,
            r = sink.send(Message::Binary(frame)) => if r.is_err() { return None },
        }
    }
}

/// The Kick for a client that stopped reading.
fn stalled_kick() -> KickNotice {
    KickNotice {
        code: zonekeep_protocol::messages::KickCode::SLOW_CONSUMER,
        reason: "the client stopped reading: no answer to a WebSocket Ping in time".into(),
    }
}

/// Refuse a session that never reached the handshake (bad zone id).
pub(crate) async fn refuse(ws: WebSocket, shared: Arc<Shared>, err: SessionError) {
    let _track = shared.sessions.token();
    let (mut sink, mut stream) = ws.split();
    finish(&shared, &mut sink, &mut stream, Some(err.kick())).await;
}
