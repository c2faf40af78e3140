//! One WebTransport session: the control stream's Hello and the handshake the WebSocket path
//! uses, then a stream reader (Pings), a datagram reader (Inputs: acknowledgements and inputs),
//! and a writer that sends everything else on the stream. Once the Welcome is out, the zone hands
//! States to the QUIC connection itself (`DatagramPath::open_direct`); before that, and while a
//! dev host's NetSim is in use, the writer sends them as datagrams too.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use tokio::time::Instant;
use wtransport::endpoint::IncomingSession;
use wtransport::{Connection, RecvStream, SendStream};
use zonekeep_protocol::messages::{tag, KickCode, Redirect, ServerMessage};

use super::control::{self, control_stream, read_hello, Control};
use super::framing::{goes_as_datagram, take_inputs, write_message, StreamReader};
use super::reader::{direct_send, DatagramReader, LastSeen};
use super::VERSIONS;
use crate::error::SessionError;
use crate::host::{redirect_hops, valid_zone_id, Shared};
use crate::net::conn::{ConnEnds, ConnHandle, DatagramPath, KickNotice};
use crate::net::conn_limit::{Admission, ConnGuard, ConnLimiter};
use crate::net::netsim::{Datagram, DatagramDelay, DelayQueue, Direction};
use crate::session::{
    accept_input, admit_hello, handle_message, report_round_trip, Attached, Handshake, Limits,
};
use crate::sim::SimCommand;

/// Serves one incoming session to its end. `handshake` holds its place among the handshakes in
/// progress until the CONNECT request arrives; from then on the session holds a connection slot
/// of `limiter` instead. One deadline, `handshake_timeout_ms` from the Initial that started the
/// handshake, bounds everything up to the Hello (the QUIC and TLS handshake, the CONNECT request
/// and its answer, the control stream, the Hello itself), as the WebSocket path bounds the time
/// from the upgrade to the Hello.
pub(super) async fn run(
    incoming: IncomingSession,
    shared: Arc<Shared>,
    limiter: ConnLimiter,
    handshake: ConnGuard,
) {
    let _track = shared.sessions.token();
    let deadline = Instant::now() + Duration::from_millis(shared.config.handshake_timeout_ms);
    let Ok(Ok(request)) = tokio::time::timeout_at(deadline, incoming).await else {
        shared.metrics.disconnect("dropped");
        return;
    };
    drop(handshake);
    let admission = limiter.admit(request.remote_address().ip().to_canonical());
    let (path, query) = match request.path().split_once('?') {
        Some((p, q)) => (p.to_owned(), Some(q.to_owned())),
        None => (request.path().to_owned(), None),
    };
    let zone_id = match path.strip_prefix("/zones/") {
        Some(z) if valid_zone_id(z) => z.to_owned(),
        _ => {
            let _ = tokio::time::timeout_at(deadline, request.not_found()).await;
            return;
        }
    };
    let hops = redirect_hops(query.as_deref());
    let (guard, over_ip_cap): (Option<ConnGuard>, bool) = match admission {
        Admission::Normal(g) => (Some(g), false),
        Admission::OverIpCap(g) => {
            shared.metrics.connection_refused("per_ip");
            (Some(g), true)
        }
        Admission::Refuse(reason) => {
            shared.metrics.connection_refused(reason);
            let _ = tokio::time::timeout_at(deadline, request.too_many_requests()).await;
            return;
        }
    };
    let _guard = guard;
    let Ok(Ok(connection)) = tokio::time::timeout_at(deadline, request.accept()).await else {
        shared.metrics.disconnect("dropped");
        return;
    };
    let conn_id = shared
        .next_conn
        .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let (mut conn, ends) = ConnHandle::new(conn_id, shared.config.outbox_frames);
    conn.datagrams = connection
        .max_datagram_size()
        .map(|m| Arc::new(DatagramPath::new(m)));
    let opened = control_stream(&shared.shutdown, &shared.metrics, &connection, deadline).await;
    let (mut send, mut recv) = match opened {
        Control::Opened(send, recv, None) => (send, recv),
        Control::Opened(mut send, _, Some(e)) => {
            close(&shared, &connection, Some(&mut send), Some(e.kick())).await;
            return;
        }
        Control::Missing(Some(e)) => {
            close(&shared, &connection, None, Some(e.kick())).await;
            return;
        }
        Control::Missing(None) => return,
    };
    if over_ip_cap {
        let k = Some(SessionError::TooManyConnections.kick());
        close(&shared, &connection, Some(&mut send), k).await;
        return;
    }
    let attached = match hello(&shared, &zone_id, &connection, &mut recv, &conn, deadline).await {
        Ok(Handshake::Attached(a)) => a,
        Ok(Handshake::Gone) => return,
        Ok(Handshake::Elsewhere(moved)) => {
            let k = redirect(&shared, &zone_id, hops, &moved.url, &mut send).await;
            close(&shared, &connection, Some(&mut send), k).await;
            return;
        }
        // Only WebSocket players are placed on relays.
        Ok(Handshake::ToRelay(_)) => {
            let kick = crate::error::SessionError::Protocol("placed on a relay".into()).kick();
            close(&shared, &connection, Some(&mut send), Some(kick)).await;
            return;
        }
        Ok(Handshake::Transferred(frame)) => {
            // Sent again to a moved player that came back: no Kick, it goes on to the target.
            let bound = Duration::from_millis(shared.config.kick_write_timeout_ms);
            let _ = tokio::time::timeout(bound, write_message(&mut send, &frame)).await;
            close(&shared, &connection, Some(&mut send), None).await;
            return;
        }
        Err(e) => {
            tracing::debug!(zone = %zone_id, conn = conn_id, error = %e, "webtransport handshake refused");
            close(&shared, &connection, Some(&mut send), Some(e.kick())).await;
            return;
        }
    };
    tracing::debug!(zone = %zone_id, conn = conn_id, player = %attached.player, "webtransport session attached");
    let attached = Arc::new(attached);
    let kick = serve(
        &shared,
        &attached,
        &connection,
        &mut send,
        recv,
        &conn,
        ends,
    )
    .await;
    let kick = kick.map(|k| k.for_version(attached.version));
    close(&shared, &connection, Some(&mut send), kick).await;
    let cmd = SimCommand::Disconnected {
        zone_id,
        player: attached.player,
        conn_id,
    };
    shared.pool.send_eventually(attached.entry.thread, cmd);
}

/// Reads the Hello from the control stream and runs the shared handshake.
async fn hello(
    shared: &Arc<Shared>,
    zone_id: &str,
    connection: &Connection,
    recv: &mut RecvStream,
    conn: &ConnHandle,
    deadline: Instant,
) -> Result<Handshake, SessionError> {
    let max = shared.config.max_message_bytes;
    let first = read_hello(
        &shared.shutdown,
        &shared.metrics,
        connection,
        recv,
        max,
        deadline,
    )
    .await?;
    let Some(bytes) = first else {
        return Ok(Handshake::Gone);
    };
    admit_hello(shared, zone_id, bytes, &VERSIONS, conn).await
}

/// A Redirect to the zone's owner (its WebSocket URL: the client continues there), or the Kick
/// that refuses one hop too many or a host outside a fleet.
async fn redirect(
    shared: &Shared,
    zone_id: &str,
    hops: u32,
    owner: &str,
    send: &mut SendStream,
) -> Option<KickNotice> {
    let url = crate::fleet::Fleet::zone_url(owner, zone_id, hops.saturating_add(1));
    let kick = |code, reason: String| Some(KickNotice { code, reason });
    let Some(fleet) = shared.fleet() else {
        return kick(KickCode::ZONE_MOVED, format!("the zone is served at {url}"));
    };
    if hops >= crate::fleet::forward::MAX_HOPS {
        fleet.metrics.redirect_loops.inc();
        return kick(
            KickCode::TOO_MANY_REDIRECTS,
            format!("{hops} redirects without reaching the zone's owner; retry shortly"),
        );
    }
    fleet.metrics.redirects.inc();
    let msg = ServerMessage::Redirect(Redirect {
        url,
        zone_id: zone_id.to_owned(),
    });
    match msg.to_bytes(None) {
        Ok(bytes) => {
            let bound = Duration::from_millis(shared.config.kick_write_timeout_ms);
            let _ = tokio::time::timeout(bound, write_message(send, &bytes)).await;
            None
        }
        Err(e) => kick(
            KickCode::INTERNAL_ERROR,
            format!("cannot redirect to the zone's owner: {e}"),
        ),
    }
}

/// Sends the Kick and closes the session (see [`control::close`]), each step bounded by
/// `kick_write_timeout_ms`.
async fn close(
    shared: &Shared,
    connection: &Connection,
    send: Option<&mut SendStream>,
    kick: Option<KickNotice>,
) {
    let bound = Duration::from_millis(shared.config.kick_write_timeout_ms);
    control::close(&shared.metrics, bound, connection, send, kick).await;
}

/// Runs the readers (the datagram reader on a task of its own) and the writer until one ends the
/// session (or the client opens a stream it must not); the Kick to send, if any. The zone's
/// States go to the closed outbox from then on.
async fn serve(
    shared: &Arc<Shared>,
    a: &Arc<Attached>,
    connection: &Connection,
    send: &mut SendStream,
    recv: RecvStream,
    conn: &ConnHandle,
    ends: ConnEnds,
) -> Option<KickNotice> {
    let limits = Arc::new(Limits::new(&shared.config));
    let seen = Arc::new(LastSeen::new());
    let mut datagrams = DatagramReader::spawn(datagram_loop(
        Arc::clone(shared),
        Arc::clone(a),
        connection.clone(),
        Arc::clone(&limits),
        Arc::clone(&seen),
        conn.datagrams.clone(),
    ));
    // The writer's end carries its Kick; a reader's, the error to kick with.
    let ended: Result<Option<KickNotice>, Option<SessionError>> = tokio::select! {
        r = read_loop(shared, a, connection, recv, conn, &limits, &seen) => Err(r.err()),
        r = datagrams.ended() => {
            if r.is_none() {
                shared.metrics.disconnect("dropped");
            }
            Err(r)
        }
        k = write_loop(shared, a, connection, send, ends, conn) => Ok(k),
        _ = connection.accept_bi() => Err(Some(SessionError::Protocol("a second stream".into()))),
        _ = connection.accept_uni() => Err(Some(SessionError::Protocol("a unidirectional stream".into()))),
    };
    if let Some(path) = conn.datagrams.as_deref() {
        path.close_direct();
    }
    match ended {
        Ok(k) => k,
        Err(e) => e.map(|e| {
            conn.kick(e.code(), e.to_string());
            e.kick()
        }),
    }
}

/// Reads the control stream (Pings) until the client leaves or breaks a rule, and ends an idle
/// session: every message and datagram resets the idle timer.
async fn read_loop(
    shared: &Arc<Shared>,
    a: &Attached,
    connection: &Connection,
    recv: RecvStream,
    conn: &ConnHandle,
    limits: &Limits,
    seen: &LastSeen,
) -> Result<(), SessionError> {
    let cfg = &shared.config;
    let max = cfg.max_message_bytes;
    let mut recv = StreamReader::new(recv, max);
    let idle = Duration::from_millis(cfg.idle_timeout_ms);
    // Client → host control stream messages (Pings) held back by NetSim as the WebSocket's are:
    // in order, a loss holding the rest back. Without it a Ping crossed the simulated link one
    // way only and the page measured half the round trip. Reading stops while it is full.
    let mut stream_delayed: DelayQueue<Bytes> = DelayQueue::new(
        a.conn_id.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ 0x7755,
        cfg.outbox_frames,
    );
    seen.heard(Instant::now());
    let idle_timer = tokio::time::sleep(idle);
    tokio::pin!(idle_timer);
    // The zone's lag compensation reaches back by the round trip: QUIC measures it.
    let mut rtt_report = tokio::time::interval(Duration::from_secs(1));
    rtt_report.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        let stream_release = stream_delayed.next_release();
        tokio::select! {
            biased;
            _ = rtt_report.tick() => report_round_trip(shared, a, connection.rtt()),
            _ = tokio::time::sleep_until(stream_release.unwrap_or_else(Instant::now)),
                if stream_release.is_some() =>
            {
                while let Some(bytes) = stream_delayed.pop_due(Instant::now()) {
                    if let Some(pong) = handle_message(shared, a, limits, &bytes)? {
                        conn.send_own(pong).await;
                    }
                }
            }
            () = &mut idle_timer => {
                let due = seen.at() + idle;
                if Instant::now() >= due {
                    return Err(SessionError::IdleTimeout);
                }
                idle_timer.as_mut().reset(due);
            }
            m = recv.next(), if !stream_delayed.is_full() => {
                let Some(bytes) = m? else {
                    shared.metrics.disconnect("closed");
                    return Ok(());
                };
                let now = Instant::now();
                seen.heard(now);
                match bytes.first() {
                    Some(&(tag::INPUT | tag::RESYNC | tag::INPUTS)) => {
                        return Err(SessionError::Protocol(
                            "Input, Resync and Inputs are not sent on a WebTransport stream".into(),
                        ));
                    }
                    _ => match stream_delayed.offer(&a.netsim.get(), now, bytes) {
                        Some(bytes) => {
                            if let Some(pong) = handle_message(shared, a, limits, &bytes)? {
                                conn.send_own(pong).await;
                            }
                        }
                        None => a.netsim.held(Direction::FromClient, stream_delayed.last_delay()),
                    },
                }
            }
        }
    }
}

/// Reads the client's datagrams (Inputs) until it leaves (`Ok`) or breaks a rule.
async fn datagram_loop(
    shared: Arc<Shared>,
    a: Arc<Attached>,
    connection: Connection,
    limits: Arc<Limits>,
    seen: Arc<LastSeen>,
    path: Option<Arc<DatagramPath>>,
) -> Result<(), SessionError> {
    let max = shared.config.max_message_bytes;
    // Client → host datagrams held back by NetSim (dev): lost, delayed and reordered.
    let mut delayed: DatagramDelay<Bytes> = DatagramDelay::new(
        a.conn_id.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ 0x77,
        shared.config.outbox_frames,
    );
    // The highest input sequence handed to the zone: repeats cost nothing.
    let mut forwarded = 0u32;
    loop {
        let release = delayed.next_release();
        tokio::select! {
            biased;
            _ = tokio::time::sleep_until(release.unwrap_or_else(Instant::now)), if release.is_some() => {
                while let Some(d) = delayed.pop_due(Instant::now()) {
                    datagram(&shared, &a, &limits, path.as_deref(), &mut forwarded, &d)?;
                }
            }
            d = connection.receive_datagram() => {
                let Ok(d) = d else {
                    return Ok(());
                };
                let now = Instant::now();
                seen.heard(now);
                let bytes = d.payload();
                if bytes.len() > max {
                    return Err(SessionError::TooLarge { len: bytes.len(), max });
                }
                match delayed.offer(&a.netsim.get(), now, bytes) {
                    Datagram::Now(b) => datagram(&shared, &a, &limits, path.as_deref(), &mut forwarded, &b)?,
                    Datagram::Held => a.netsim.held(Direction::FromClient, None),
                    Datagram::Dropped => {
                        a.netsim.held(Direction::FromClient, None);
                        shared.metrics.netsim_dropped();
                    }
                }
            }
        }
    }
}

/// Acts on one client datagram: it must be an Inputs (§4.5). The acknowledgement is noted for
/// the zone; inputs it has not forwarded yet go through the input rate limit into the inbox; a
/// datagram that brings nothing new spends a datagram token instead.
fn datagram(
    shared: &Shared,
    a: &Attached,
    limits: &Limits,
    path: Option<&DatagramPath>,
    forwarded: &mut u32,
    bytes: &[u8],
) -> Result<(), SessionError> {
    if shared.fleet().is_some_and(|f| !f.gate.holds_now()) {
        return Err(crate::sim::JoinFailure::Fenced.into());
    }
    take_inputs(bytes, path, forwarded, limits, &shared.metrics, |i| {
        accept_input(shared, a, limits, i)
    })
}

/// Sends the zone's frames: a State (§5.8) as a datagram when it fits one, everything else (and
/// a State too large for a datagram) on the control stream, in order.
async fn write_loop(
    shared: &Arc<Shared>,
    a: &Attached,
    connection: &Connection,
    send: &mut SendStream,
    ends: ConnEnds,
    conn: &ConnHandle,
) -> Option<KickNotice> {
    let ConnEnds {
        mut outbox,
        mut kick,
    } = ends;
    let conn_id = conn.id;
    // Host → client traffic held back by NetSim: the stream keeps its order (one lost packet
    // holds back the rest, as on TCP); datagrams are lost and reordered on their own.
    let mut stream_delay: DelayQueue<Bytes> = DelayQueue::new(
        conn_id.wrapping_mul(0xd1b5_4a32_d192_ed03) ^ 0xa5,
        shared.config.outbox_frames,
    );
    let mut datagram_delay: DatagramDelay<Bytes> = DatagramDelay::new(
        conn_id.wrapping_mul(0x2545_f491_4f6c_dd1d) ^ 0x5a,
        shared.config.outbox_frames,
    );
    let stop = async {
        tokio::select! {
            biased;
            k = kick.wait_for(Option::is_some) => k.ok().and_then(|k| k.clone()),
            _ = shared.sessions_end.cancelled() => Some(SessionError::ShuttingDown.kick()),
        }
    };
    tokio::pin!(stop);
    // Whether a message went on the stream yet (the first is the Welcome), and whether States
    // skip this writer yet.
    let (mut wrote, mut direct) = (false, false);
    loop {
        if wrote && !direct {
            // The Welcome is out: a State can no longer overtake it.
            if let Some(path) = conn.datagrams.as_deref() {
                let netsim = shared.netsim.clone();
                let metrics = Arc::clone(&shared.metrics);
                path.open_direct(direct_send(connection, metrics, move || netsim.in_use()));
            }
            direct = true;
        }
        let next = match (stream_delay.next_release(), datagram_delay.next_release()) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        let room = !stream_delay.is_full();
        tokio::select! {
            biased;
            k = &mut stop => return k,
            _ = tokio::time::sleep_until(next.unwrap_or_else(Instant::now)), if next.is_some() => {
                let now = Instant::now();
                while let Some(d) = datagram_delay.pop_due(now) {
                    let _ = connection.send_datagram(d);
                }
                while let Some(m) = stream_delay.pop_due(now) {
                    tokio::select! {
                        biased;
                        k = &mut stop => return k,
                        ok = write_message(send, &m) => if ok { wrote = true } else { return None },
                    }
                }
            }
            f = outbox.recv(), if room => {
                let frame = f?;
                let now = Instant::now();
                let netsim = a.netsim.get();
                if goes_as_datagram(&frame, conn.datagrams.as_deref()) {
                    match datagram_delay.offer(&netsim, now, frame) {
                        Datagram::Now(d) => {
                            if connection.send_datagram(d).is_err() {
                                shared.metrics.datagram_send_failed();
                            }
                        }
                        Datagram::Held => a.netsim.held(Direction::ToClient, None),
                        Datagram::Dropped => {
                            a.netsim.held(Direction::ToClient, None);
                            shared.metrics.netsim_dropped();
                        }
                    }
                    continue;
                }
                let Some(m) = stream_delay.offer(&netsim, now, frame) else {
                    a.netsim.held(Direction::ToClient, stream_delay.last_delay());
                    continue;
                };
                // Racing the write against a kick: a client that stopped reading blocks this
                // write, and the slow-consumer kick must still end the session.
                tokio::select! {
                    biased;
                    k = &mut stop => return k,
                    ok = write_message(send, &m) => if ok { wrote = true } else { return None },
                }
            }
        }
    }
}
