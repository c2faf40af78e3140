//! One WebSocket connection: handshake (Hello → ticket → join or resume),
//! then a reader (inputs, pings) and a writer (outbox frames, pongs, the final
//! Kick) running side by side until one of them ends the session.

use std::num::NonZeroU32;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::extract::ws::{CloseFrame, Message, WebSocket};
use bytes::Bytes;
use futures_util::stream::{SplitSink, SplitStream};
use futures_util::{SinkExt, StreamExt};
use governor::{Quota, RateLimiter};
use serde_json::Value;
use tokio::sync::{mpsc, oneshot, watch};
use zonekeep_core::PlayerId;
use zonekeep_protocol::limits::MIN_PROTOCOL_VERSION;
use zonekeep_protocol::messages::{negotiate_version, ClientMessage, Hello, RESUME_FROM_VERSION};

use crate::conn::{ConnEnds, ConnHandle, KickNotice};
use crate::error::{kick_label, SessionError};
use crate::fleet::route::Route;
use crate::host::{params_refusal, Shared};
use crate::netsim::{ConnNetSim, DelayQueue, Direction};
use crate::sim::{
    admit_zone, kick_frame, pong_frame, wait_running, AdmitError, InboxInput, JoinFailure, Joined,
    SimCommand, StartError, ZoneCreate, ZoneEntry, ZoneStart,
};
use crate::ticket::unix_now;

pub(crate) type Sink = SplitSink<WebSocket, Message>;
pub(crate) type Stream = SplitStream<WebSocket>;

/// A session attached to a zone.
pub(crate) struct Attached {
    pub(crate) entry: Arc<ZoneEntry>,
    pub(crate) player: PlayerId,
    /// This connection's id (a Resync names it, so a replaced connection's request is ignored).
    pub(crate) conn_id: u64,
    /// The NetSim (dev) its messages go through: its ticket subject's own, else the host's.
    pub(crate) netsim: ConnNetSim,
}

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
/// 8 adds Transfer, and with it the moves of players between zones.
const HOST_VERSIONS: [u32; 7] = [
    MIN_PROTOCOL_VERSION,
    3,
    4,
    5,
    6,
    zonekeep_protocol::messages::ENTRIES_PROTOCOL,
    zonekeep_protocol::messages::TRANSFER_PROTOCOL,
];

/// How a handshake ended without an error.
pub(crate) enum Handshake {
    /// Joined or resumed here.
    Attached(Attached),
    /// The client left before its Hello.
    Gone,
    /// Another host owns the zone: redirect or proxy the client there.
    Elsewhere(crate::fleet::forward::Moved),
    /// The player was moved to another zone (PROTOCOL.md §5.3.2): send it this Transfer frame
    /// again and close.
    Transferred(Bytes),
}

/// Where an admitted Hello went.
pub(crate) enum Entered {
    /// Into a zone of this host: its thread, and the principal.
    Zone(usize, String),
    /// Nowhere: the player was moved to another zone; this is its Transfer frame.
    Moved(Bytes),
}

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

/// The rest of a handshake once the first message arrived: it must be a Hello offering one of
/// `versions`; then content, ticket, admission and the zone's Welcome (or a move elsewhere).
/// Shared by the WebSocket and WebTransport paths.
pub(crate) async fn admit_hello(
    shared: &Arc<Shared>,
    zone_id: &str,
    bytes: Bytes,
    versions: &[u32],
    conn: &ConnHandle,
) -> Result<Handshake, SessionError> {
    let hello = match ClientMessage::decode(&bytes) {
        Ok(ClientMessage::Hello(h)) => h,
        Ok(_) => {
            return Err(SessionError::Protocol(
                "the first message must be Hello".into(),
            ))
        }
        Err(e) => return Err(SessionError::Protocol(format!("undecodable Hello: {e}"))),
    };
    let version =
        negotiate_version(&hello.versions, versions).ok_or_else(|| SessionError::Version {
            min: versions.iter().copied().min().unwrap_or(0),
            max: versions.iter().copied().max().unwrap_or(0),
        })?;
    // A host that requires a minimum content version refuses older content here, before the
    // ticket is verified or its single-use id spent: the client reloads and presents it again.
    if let Err(refusal) = shared.sim.content.admit(version, &hello.content_version) {
        shared.metrics.connection_refused("content_outdated");
        return Err(refusal.into());
    }
    let (tx, rx) = oneshot::channel();
    // Admission may start the zone (claim and restore from the store): the
    // client waits for it, but shutdown does not.
    let admitted = tokio::select! {
        _ = shared.shutdown.cancelled() => return Err(SessionError::ShuttingDown),
        r = admit(shared, zone_id, &hello, version, conn, tx) => r,
    };
    let (thread, sub) = match admitted {
        Ok(Entered::Zone(thread, sub)) => (thread, sub),
        Ok(Entered::Moved(frame)) => return Ok(Handshake::Transferred(frame)),
        Err(SessionError::Join(JoinFailure::Moved { host, url })) => {
            return Ok(Handshake::Elsewhere(crate::fleet::forward::Moved {
                host,
                url,
                version,
                hello: bytes,
            }))
        }
        Err(e) => return Err(e),
    };
    let joined: Joined = tokio::select! {
        _ = shared.shutdown.cancelled() => return Err(SessionError::ShuttingDown),
        r = rx => match r.map_err(|_| JoinFailure::Unavailable("the zone's thread is gone".into()))? {
            Ok(joined) => joined,
            // A resume of a player that was moved to another zone: it is sent there again.
            Err(JoinFailure::ReconnectRefused(why)) => {
                return match crate::transfer::resend(shared, zone_id, &sub).await {
                    Some(frame) => Ok(Handshake::Transferred(frame)),
                    None => Err(JoinFailure::ReconnectRefused(why).into()),
                };
            }
            Err(e) => return Err(e.into()),
        },
    };
    let entry = shared
        .registry
        .get(zone_id)
        .filter(|e| e.thread == thread)
        .ok_or_else(|| JoinFailure::Unavailable("zone stopped".into()))?;
    Ok(Handshake::Attached(Attached {
        entry,
        player: joined.player,
        conn_id: conn.id,
        netsim: shared.netsim.connection(&sub),
    }))
}

/// Verify the ticket, start the zone if it is new (or wait for the join
/// that is starting it), and queue a join or resume; returns the zone's thread.
async fn admit(
    shared: &Arc<Shared>,
    zone_id: &str,
    hello: &Hello,
    version: u32,
    conn: &ConnHandle,
    reply: oneshot::Sender<Result<Joined, JoinFailure>>,
) -> Result<Entered, SessionError> {
    let now = unix_now();
    let ticket = shared.verifier.verify(&hello.ticket, zone_id, now)?;
    // Params the directory cannot keep are the ticket's fault, refused before anything is
    // claimed or the ticket spent.
    if let Some(refusal) = ticket.params.as_ref().and_then(params_refusal) {
        return Err(SessionError::Params(refusal));
    }
    let sub = ticket.sub.as_str().to_owned();
    // Where the zone lives, asked before a token or the ticket's single-use id
    // is spent: a client sent elsewhere presents both to the owner, which
    // spends them once, on admission.
    let listed = match shared.fleet() {
        Some(fleet) if shared.registry.get(zone_id).is_none() => {
            let kind = ticket.kind.as_deref().unwrap_or(&shared.default_kind);
            let params = ticket.params.clone().unwrap_or_else(|| {
                shared
                    .sim
                    .specs
                    .get(kind)
                    .map_or(Value::Null, |s| s.default_params.clone())
            });
            match fleet.route(zone_id, kind, &params).await {
                Ok(Route::Here(listed)) => listed,
                Ok(Route::Owner { host, url }) => {
                    return Err(JoinFailure::Moved { host, url }.into())
                }
                Err(e) => {
                    return Err(
                        JoinFailure::StoreUnreachable(format!("fleet directory: {e}")).into(),
                    )
                }
            }
        }
        _ => None,
    };
    // A zone another host claimed is not served here: refused before a token
    // or the ticket's single-use id is spent, so the client can use both there.
    if shared.registry.is_fenced(zone_id) {
        return Err(JoinFailure::Fenced.into());
    }
    if ticket.transfer().is_some() {
        // A transfer credential admits only as the arrival of the move it names.
        let (thread, sub) =
            crate::transfer::arrival(shared, zone_id, ticket, listed, version, conn, reply).await?;
        return Ok(Entered::Zone(thread, sub));
    }
    if !hello.reconnect_token.is_empty() {
        // A resume may present the same ticket again: the token, not the jti, is single-use here.
        let redeemed = shared.reconnect.redeem(
            &hello.reconnect_token,
            &ticket.sub,
            zone_id,
            ticket.role,
            Instant::now(),
        );
        let player = match redeemed {
            Ok(player) => player,
            Err(e) => {
                // A player moved to another zone that comes back here is sent there again.
                return match crate::transfer::resend(shared, zone_id, ticket.sub.as_str()).await {
                    Some(frame) => Ok(Entered::Moved(frame)),
                    None => Err(e.into()),
                };
            }
        };
        let resume = |create| SimCommand::Resume {
            zone_id: zone_id.to_owned(),
            create,
            player,
            principal: ticket.sub,
            version,
            // Only a version 4 session continues from what the client holds (§4.1.1).
            resume_from: hello.resume_from.filter(|_| version >= RESUME_FROM_VERSION),
            conn: conn.clone(),
            reply,
        };
        let (entry, create, took_over) = match shared.registry.get(zone_id) {
            Some(entry) => (entry, None, false),
            // The zone moved here (a drain, a failover) and has not started yet: start it from
            // its save, which holds the player, and resume there.
            None => {
                let took_over = is_takeover(shared, listed.as_ref());
                let Some(listed) = listed else {
                    return Err(JoinFailure::ReconnectRefused("zone is not running".into()).into());
                };
                let (entry, create) =
                    shared.route_join(zone_id, Some(&listed.kind), Some(listed.params))?;
                (entry, create, took_over)
            }
        };
        let refused = JoinFailure::ReconnectRefused;
        enter_zone(shared, &entry, create, took_over, refused, resume).await?;
        return Ok(Entered::Zone(entry.thread, sub));
    }
    spend_ticket(shared, &ticket).await?;
    // A zone the directory knows runs as the kind and params it was created with.
    let took_over = is_takeover(shared, listed.as_ref());
    let (kind, params) = match listed {
        Some(l) => (Some(l.kind), Some(l.params)),
        None => (ticket.kind.clone(), ticket.params.clone()),
    };
    let (entry, create) = shared.route_join(zone_id, kind.as_deref(), params)?;
    // A player whose move out of this zone a crash left undelivered gets its state back.
    let (reclaimed, create) = if ticket.role == zonekeep_core::Role::Player {
        crate::transfer::reclaim_on_join(
            shared,
            zone_id,
            ticket.sub.as_str(),
            &entry,
            create,
            took_over,
        )
        .await?
    } else {
        (None, create)
    };
    let reclaimed_id = reclaimed.as_ref().map(|r| r.transfer.id.clone());
    let join = |create| SimCommand::Join {
        zone_id: zone_id.to_owned(),
        create,
        principal: ticket.sub,
        claims: ticket.claims,
        role: ticket.role,
        version,
        conn: conn.clone(),
        reclaimed: reclaimed.map(Box::new),
        reply,
    };
    let unavailable = JoinFailure::Unavailable;
    if let Err(e) = enter_zone(shared, &entry, create, took_over, unavailable, join).await {
        // The join never reached the zone: a state it reclaimed waits for the player's next.
        if let Some(id) = reclaimed_id {
            let epoch = entry.epoch.load(std::sync::atomic::Ordering::Acquire);
            let job = crate::transfer::Job::Unclaimed { id, epoch };
            if shared.sim.transfers.submit(job).is_err() {
                tracing::warn!(zone = %zone_id, "the transfer worker is full: a refused join's reclaimed state is not given up");
            }
        }
        return Err(e.into());
    }
    Ok(Entered::Zone(entry.thread, sub))
}

/// Spends the ticket's single-use id, on this host and across the fleet: a ticket for `arena-*`
/// must not admit its bearer once per host, nor again at a zone's new owner after a move.
pub(crate) async fn spend_ticket(
    shared: &Shared,
    ticket: &crate::ticket::VerifiedTicket,
) -> Result<(), SessionError> {
    shared.verifier.consume(ticket, unix_now())?;
    if let Some(fleet) = shared.fleet() {
        let forget_after = ticket
            .exp
            .saturating_add(shared.config.ticket_leeway_secs)
            .saturating_mul(1000);
        match fleet.spend_ticket(&ticket.jti, forget_after).await {
            Ok(true) => {}
            Ok(false) => return Err(crate::ticket::TicketError::Replayed.into()),
            Err(e) => {
                return Err(JoinFailure::StoreUnreachable(format!("fleet directory: {e}")).into())
            }
        }
    }
    Ok(())
}

/// Hands a join or resume (`cmd`) to the zone's simulation thread: together with the zone's start
/// when this Hello is what starts it here (`create`), otherwise once the zone runs. `refused`
/// words a zone that cannot be started or is not running for the client.
pub(crate) async fn enter_zone(
    shared: &Arc<Shared>,
    entry: &Arc<ZoneEntry>,
    create: Option<ZoneCreate>,
    took_over: bool,
    refused: fn(String) -> JoinFailure,
    cmd: impl FnOnce(Option<ZoneStart>) -> SimCommand,
) -> Result<(), JoinFailure> {
    match create {
        Some(c) => {
            admit_zone(&shared.sim, &shared.pool, entry, c, |start| {
                cmd(Some(start))
            })
            .await
            .map_err(|e| start_failure(shared, entry, refused, e))?;
            count_takeover(shared, took_over);
        }
        None => {
            wait_running(entry).await.map_err(|why| {
                // The start this join waited on failed the zone: told as any join to it is.
                match shared.registry.failure(&entry.zone_id) {
                    Some(_) => failed(shared, entry, why),
                    None => refused(why),
                }
            })?;
            shared
                .pool
                .send(entry.thread, cmd(None))
                .map_err(|_| JoinFailure::Busy)?;
        }
    }
    Ok(())
}

/// How a start that a join waits on failing is told to the client.
pub(crate) fn start_failure(
    shared: &Shared,
    entry: &ZoneEntry,
    refused: fn(String) -> JoinFailure,
    e: AdmitError,
) -> JoinFailure {
    match e {
        AdmitError::Start(StartError::Moved { host, url }) => JoinFailure::Moved { host, url },
        AdmitError::Start(StartError::Failed(why)) => failed(shared, entry, why),
        // The store failed or the start timed out: nothing the client could change.
        AdmitError::Start(StartError::Unavailable(why)) => JoinFailure::StoreUnreachable(why),
        AdmitError::Start(e) => refused(e.to_string()),
        AdmitError::Busy => JoinFailure::Busy,
    }
}

/// The refusal of a join to a zone that failed (`why`, unless the failure is remembered).
fn failed(shared: &Shared, entry: &ZoneEntry, why: String) -> JoinFailure {
    JoinFailure::Failed(
        shared
            .registry
            .failure(&entry.zone_id)
            .map_or(why, |f| f.message()),
    )
}

/// Whether starting the zone listed so takes it from a dead or departed host.
fn is_takeover(shared: &Shared, listed: Option<&zonekeep_store::ZoneLocation>) -> bool {
    let me = shared.fleet().map(|f| f.host_id.as_str());
    listed.is_some_and(|l| l.owner.is_some() && l.owner.as_deref() != me && !l.owner_alive)
}

/// Counts a takeover that happened on a client's Hello (the reconcile pass counts its own).
pub(crate) fn count_takeover(shared: &Shared, took_over: bool) {
    if let (true, Some(f)) = (took_over, shared.fleet()) {
        f.metrics.takeovers.inc();
        tracing::info!("took over a dead host's zone on a client's Hello");
    }
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

pub(crate) type Limiter = RateLimiter<
    governor::state::NotKeyed,
    governor::state::InMemoryState,
    governor::clock::DefaultClock,
>;

/// A connection's rate limits: `inputs`, `pings` and `datagrams` drop the excess, `abuse` kicks
/// sustained excess of any.
pub(crate) struct Limits {
    inputs: Limiter,
    pings: Limiter,
    /// Datagrams that bring no new input (acknowledgements, repeats): twice the input rate.
    pub(crate) datagrams: Limiter,
    pub(crate) abuse: Limiter,
}

/// A limiter of `rate` per second in bursts of `burst`.
fn limiter(rate: f64, burst: u32) -> Limiter {
    let period = Duration::from_secs_f64(1.0 / rate);
    let burst = NonZeroU32::new(burst).unwrap_or(NonZeroU32::MIN);
    RateLimiter::direct(
        Quota::with_period(period)
            .unwrap_or_else(|| Quota::per_second(NonZeroU32::MIN))
            .allow_burst(burst),
    )
}

impl Limits {
    /// The host's configured rates.
    pub(crate) fn new(cfg: &crate::config::ServerConfig) -> Self {
        Self {
            inputs: limiter(cfg.input_rate, cfg.input_burst),
            pings: limiter(cfg.ping_rate, cfg.ping_burst),
            datagrams: limiter(cfg.input_rate * 2.0, cfg.input_burst.saturating_mul(2)),
            abuse: limiter(cfg.abuse_rate, cfg.abuse_burst),
        }
    }
}

/// Act on one client message after the handshake; a Ping's answer is returned for the writer.
pub(crate) fn handle_message(
    shared: &Shared,
    a: &Attached,
    limits: &Limits,
    bytes: &[u8],
) -> Result<Option<Bytes>, SessionError> {
    // A host whose lease lapsed (paused, cut off from its store) acts for no zone: the client is
    // sent to resume elsewhere before anything it sent is looked at — after a pause, what it sent
    // meanwhile arrives as one burst that is no fault of the client's.
    if shared.fleet().is_some_and(|f| !f.gate.holds_now()) {
        return Err(JoinFailure::Fenced.into());
    }
    match ClientMessage::decode(bytes) {
        Ok(ClientMessage::Input(i)) => {
            accept_input(shared, a, limits, i)?;
            Ok(None)
        }
        Ok(ClientMessage::Ping(p)) => {
            // A Pong costs the host a write: a client may not make it answer without bound.
            if limits.pings.check().is_err() {
                shared.metrics.ping_rate_limited();
                if limits.abuse.check().is_err() {
                    return Err(SessionError::RateLimited);
                }
                return Ok(None);
            }
            let now_us = u64::try_from(shared.clock.now().as_micros()).unwrap_or(u64::MAX);
            Ok(Some(pong_frame(p.client_time, now_us, a.entry.tick())))
        }
        Ok(ClientMessage::Resync(r)) => {
            // A Resync costs the zone a BASELINE: it spends an input token, so a client cannot
            // ask faster than it may send inputs (and the zone honours one a second).
            if limits.inputs.check().is_err() {
                if limits.abuse.check().is_err() {
                    return Err(SessionError::RateLimited);
                }
                return Ok(None);
            }
            tracing::debug!(zone = %a.entry.zone_id, player = %a.player, tick = r.tick, "client asked for a BASELINE");
            let cmd = SimCommand::Resync {
                zone_id: a.entry.zone_id.clone(),
                player: a.player,
                conn_id: a.conn_id,
            };
            // A full command queue drops it: the next failed check asks again.
            let _ = shared.pool.send(a.entry.thread, cmd);
            Ok(None)
        }
        Ok(ClientMessage::Hello(_)) => Err(SessionError::Protocol("Hello out of place".into())),
        Ok(ClientMessage::Inputs(_)) => Err(SessionError::Protocol(
            "Inputs is a WebTransport datagram, not a WebSocket message".into(),
        )),
        Err(e) => Err(SessionError::Protocol(format!("undecodable message: {e}"))),
    }
}

/// One input from the client, over its rate or into the zone's inbox (WebSocket Input and the
/// inputs of a WebTransport Inputs datagram alike).
pub(crate) fn accept_input(
    shared: &Shared,
    a: &Attached,
    limits: &Limits,
    i: zonekeep_protocol::messages::Input,
) -> Result<(), SessionError> {
    if limits.inputs.check().is_err() {
        a.entry.rate_limited.inc();
        if limits.abuse.check().is_err() {
            return Err(SessionError::RateLimited);
        }
        return Ok(());
    }
    let input = InboxInput {
        player: a.player,
        seq: i.seq,
        view_tick: u32::try_from(i.view_tick).unwrap_or(u32::MAX),
        payload: Bytes::from(i.payload),
    };
    if !offer_input(&a.entry.inbox, shared.config.zone_inbox, input) {
        a.entry.inbox_full.inc();
    }
    Ok(())
}

/// Queue an input for the zone unless its inbox already holds `cap`; false when refused.
///
/// The inbox is an unbounded (linked-block) channel bounded here: a preallocated bounded channel
/// of the default 8,192 slots costs ~460 kB per zone up front, ~9 kB per connection at 50 players
/// per zone. The length check and the send are not atomic, so concurrent senders (one per I/O
/// worker thread) may overshoot `cap` by at most their number.
fn offer_input(
    inbox: &crossbeam_channel::Sender<InboxInput>,
    cap: usize,
    input: InboxInput,
) -> bool {
    inbox.len() < cap && inbox.try_send(input).is_ok()
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

/// What the read-progress probe does when its timer fires.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ProbeStep {
    /// Send a WebSocket Ping carrying this sequence number.
    Send(u64),
    /// The last Ping is unanswered but still within its deadline.
    Wait,
    /// The last Ping went unanswered for the whole timeout: the client does not read.
    Stalled,
}

/// Proof that the client reads, independent of how much the zone sends.
///
/// Kernel buffers hide a client that never reads until hundreds of kilobytes are queued, which
/// takes minutes in a light zone. A WebSocket Pong is written by the client's stack only as it
/// reads, after every frame queued before the Ping, so an unanswered Ping after `timeout` means
/// the client stopped reading. One Ping is outstanding at a time, sent every `timeout / 2` while
/// answers come back: a client that stops reading is kicked within 1.5 × `timeout`.
#[derive(Debug)]
struct ReadProbe {
    timeout: Duration,
    /// Sequence of the last Ping sent (0 = none yet).
    sent: u64,
    sent_at: tokio::time::Instant,
    /// When the timer fires next.
    next: tokio::time::Instant,
}

impl ReadProbe {
    fn new(timeout: Duration, now: tokio::time::Instant) -> Self {
        Self {
            timeout,
            sent: 0,
            sent_at: now,
            // The first answer also gives the connection's round trip: asked for early.
            next: now + (timeout / 2).min(FIRST_PROBE),
        }
    }

    /// The timer fired at `now` with Pings up to `answered` answered.
    fn step(&mut self, answered: u64, now: tokio::time::Instant) -> ProbeStep {
        if answered >= self.sent {
            self.sent += 1;
            self.sent_at = now;
            self.next = now + self.timeout / 2;
            return ProbeStep::Send(self.sent);
        }
        let deadline = self.sent_at + self.timeout;
        if now >= deadline {
            return ProbeStep::Stalled;
        }
        self.next = deadline;
        ProbeStep::Wait
    }
}

/// When the first read-progress Ping goes out (later ones every half timeout).
const FIRST_PROBE: Duration = Duration::from_secs(1);

/// The read-progress Pings of one connection, shared by its writer (which sends them) and its
/// reader (which sees the Pongs): the highest sequence answered, and the round trip of the
/// latest answered Ping, timed by the host alone (a Pong's payload is only the sequence, so a
/// client cannot claim a longer round trip than it takes).
#[derive(Debug)]
struct ReadProgress {
    epoch: std::time::Instant,
    answered: AtomicU64,
    /// The highest sequence sent.
    last_sent: AtomicU64,
    /// The sequence of the Ping in flight and when it went out (µs after `epoch`).
    in_flight: std::sync::Mutex<(u64, u64)>,
    /// A round trip measured and not yet reported, µs (`u64::MAX` = none).
    fresh_rtt_us: AtomicU64,
}

impl ReadProgress {
    fn new() -> Self {
        Self {
            epoch: std::time::Instant::now(),
            answered: AtomicU64::new(0),
            last_sent: AtomicU64::new(0),
            in_flight: std::sync::Mutex::new((0, 0)),
            fresh_rtt_us: AtomicU64::new(u64::MAX),
        }
    }

    fn now_us(&self) -> u64 {
        u64::try_from(self.epoch.elapsed().as_micros()).unwrap_or(u64::MAX)
    }

    /// The writer sent Ping `seq`.
    fn sent(&self, seq: u64) {
        let now = self.now_us();
        *self.in_flight.lock().unwrap_or_else(|p| p.into_inner()) = (seq, now);
        self.last_sent.fetch_max(seq, Ordering::Relaxed);
    }

    /// The reader saw the Pong of `seq`.
    fn answered(&self, seq: u64) {
        let mut in_flight = self.in_flight.lock().unwrap_or_else(|p| p.into_inner());
        // A Pong for a Ping never sent proves nothing: a client must not answer ahead of the
        // probe and so stay unprobed while it stops reading.
        if seq <= self.last_sent.load(Ordering::Relaxed) {
            self.answered.fetch_max(seq, Ordering::Relaxed);
        }
        // Only the Ping in flight times a round trip, and only once (a repeated Pong is ignored).
        if seq == in_flight.0 && seq != 0 {
            let rtt = self.now_us().saturating_sub(in_flight.1);
            *in_flight = (0, 0);
            self.fresh_rtt_us.store(rtt, Ordering::Relaxed);
        }
    }

    fn highest_answered(&self) -> u64 {
        self.answered.load(Ordering::Relaxed)
    }

    /// The round trip measured since the last call, if any.
    fn take_round_trip(&self) -> Option<Duration> {
        match self.fresh_rtt_us.swap(u64::MAX, Ordering::Relaxed) {
            u64::MAX => None,
            us => Some(Duration::from_micros(us)),
        }
    }
}

/// Tell the zone a connection's round trip. NetSim (dev) delays messages but not the WebSocket
/// Ping and Pong (nor QUIC's own packets, whose round trip a WebTransport session reports), so
/// what it added is added: per direction the longest delay it applied to this connection since
/// the last report (a simulated loss holds every later message back until the retransmission),
/// or its mean one-way delay when it held nothing that way. Lag compensation then allows for the
/// network the player actually plays over. A full command queue drops it; the next measurement
/// brings another.
pub(crate) fn report_round_trip(shared: &Shared, a: &Attached, measured: Duration) {
    let added = a.netsim.take_added_round_trip();
    let cmd = SimCommand::RoundTrip {
        zone_id: a.entry.zone_id.clone(),
        player: a.player,
        conn_id: a.conn_id,
        rtt: measured + added,
    };
    let _ = shared.pool.send(a.entry.thread, cmd);
}

/// Refuse a session that never reached the handshake (bad zone id).
pub(crate) async fn refuse(ws: WebSocket, shared: Arc<Shared>, err: SessionError) {
    let _track = shared.sessions.token();
    let (mut sink, mut stream) = ws.split();
    finish(&shared, &mut sink, &mut stream, Some(err.kick())).await;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn input(seq: u32) -> InboxInput {
        InboxInput {
            player: PlayerId(1),
            seq,
            view_tick: 0,
            payload: Bytes::new(),
        }
    }

    #[test]
    fn the_read_probe_pings_while_answered_and_stalls_once_a_ping_goes_unanswered() {
        let t0 = tokio::time::Instant::now();
        let timeout = Duration::from_secs(10);
        let mut p = ReadProbe::new(timeout, t0);
        assert_eq!(p.next, t0 + FIRST_PROBE, "the first Ping goes out early");
        assert_eq!(p.step(0, p.next), ProbeStep::Send(1));
        let sent = p.sent_at;
        // Answered by the next firing: the next Ping goes out.
        assert_eq!(p.step(1, p.next), ProbeStep::Send(2));
        // Unanswered half-way: wait until the deadline, then give up.
        let half = p.next;
        assert_eq!(p.step(1, half), ProbeStep::Wait);
        assert_eq!(p.next, half - timeout / 2 + timeout);
        assert_eq!(p.step(1, p.next), ProbeStep::Stalled);
        // A late answer before the deadline keeps the connection.
        let mut q = ReadProbe::new(timeout, sent);
        assert_eq!(q.step(0, q.next), ProbeStep::Send(1));
        assert_eq!(q.step(0, q.next), ProbeStep::Wait);
        assert_eq!(
            q.step(1, q.next - Duration::from_millis(1)),
            ProbeStep::Send(2)
        );
    }

    #[test]
    fn a_round_trip_is_timed_by_the_host_from_the_ping_in_flight_once() {
        let p = ReadProgress::new();
        assert_eq!(p.take_round_trip(), None, "nothing measured before a Ping");
        p.sent(1);
        p.answered(1);
        assert_eq!(p.highest_answered(), 1);
        assert!(p.take_round_trip().is_some());
        assert_eq!(p.take_round_trip(), None, "reported once");
        p.answered(1);
        assert_eq!(p.take_round_trip(), None, "a repeated Pong times nothing");
        p.sent(2);
        p.answered(7);
        assert_eq!(
            p.highest_answered(),
            1,
            "a Pong for a Ping never sent is not an answer"
        );
        assert_eq!(
            p.take_round_trip(),
            None,
            "a Pong for another sequence than the Ping in flight times nothing"
        );
        p.answered(2);
        assert_eq!(p.highest_answered(), 2);
        assert!(p.take_round_trip().is_some());
    }

    #[test]
    fn the_inbox_bound_refuses_the_excess_and_frees_as_the_zone_drains() {
        let (tx, rx) = crossbeam_channel::unbounded();
        assert!(offer_input(&tx, 3, input(1)));
        assert!(offer_input(&tx, 3, input(2)));
        assert!(offer_input(&tx, 3, input(3)));
        assert!(!offer_input(&tx, 3, input(4)));
        assert_eq!(rx.len(), 3);
        assert_eq!(rx.try_recv().map(|i| i.seq).ok(), Some(1));
        assert!(offer_input(&tx, 3, input(5)));
        let seqs: Vec<u32> = rx.try_iter().map(|i| i.seq).collect();
        assert_eq!(seqs, vec![2, 3, 5]);
        drop(rx);
        assert!(
            !offer_input(&tx, 3, input(6)),
            "a stopped zone takes nothing"
        );
    }
}
