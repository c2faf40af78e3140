//! One client of the relay: its Hello is read here, on the async runtime, and its connection then
//! moves to an I/O thread. Its later messages go to the origin over its zone's link (but Pings
//! and Resyncs, answered here), and what its zone's thread queues for it goes to it.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use bytes::Bytes;
use tokio::net::TcpStream;
use zonekeep_protocol::messages::{tag, ClientMessage, KickCode};
use zonekeep_protocol::ResumeFrom;

use super::link::{ZoneCmd, ZoneLink};
use super::out::ClientOut;
use super::RelayShared;
use crate::error::SessionError;
use crate::net::conn::KickNotice;
use crate::net::relay::wire;
use crate::net::ws::hello::{read_hello, Prefixed};
use crate::net::ws::io::{Arrival, Peer};
use crate::net::ws::{finish_raw_in, HOST_VERSIONS};
use crate::session::Limits;
use crate::sim::pong_frame;

/// Holds a client slot while the session lives (WebSocket and WebTransport clients alike).
pub(super) struct Slot(Arc<RelayShared>);

impl Slot {
    /// Takes one of the relay's client slots; `None` when it serves `max_clients` already (the
    /// refusal is counted).
    pub(super) fn take(shared: &Arc<RelayShared>) -> Option<Slot> {
        if shared.clients.fetch_add(1, Ordering::Relaxed) >= shared.cfg.max_clients {
            shared.clients.fetch_sub(1, Ordering::Relaxed);
            shared.metrics.connection_refused("max_clients");
            return None;
        }
        Some(Slot(Arc::clone(shared)))
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.0.clients.fetch_sub(1, Ordering::Relaxed);
    }
}

/// The Kick for a client whose zone's link is gone: it resumes through its entry URLs.
pub(super) fn link_lost() -> KickNotice {
    KickNotice {
        code: KickCode::ZONE_MOVED,
        reason: "the relay lost its link to the zone's host; resume".into(),
    }
}

/// Serve one upgraded client connection: its Hello here, then its session on an I/O thread.
pub(super) async fn run(shared: Arc<RelayShared>, zone_id: String, tcp: TcpStream, pre: Bytes) {
    let track = shared.sessions.token();
    let src = Prefixed::new(tcp, pre);
    let Some(io) = shared.io.get() else {
        // Not reachable through `serve`, which starts the I/O threads before it accepts.
        return;
    };
    let settings = io.settings();
    let metrics = &shared.metrics;
    if !crate::host::valid_zone_id(&zone_id) {
        let kick = SessionError::BadZoneId.kick();
        finish_raw_in(settings, metrics, src, Some(kick)).await;
        return;
    }
    let Some(slot) = Slot::take(&shared) else {
        let kick = SessionError::TooManyConnections.kick();
        finish_raw_in(settings, metrics, src, Some(kick)).await;
        return;
    };
    let mut src = src;
    let opening = tokio::time::timeout(
        shared.cfg.handshake_timeout,
        hello(&shared, &zone_id, &mut src),
    )
    .await;
    let opened = match opening {
        Ok(Ok(Some(o))) => o,
        Ok(Ok(None)) => return,
        Ok(Err(kick)) => {
            finish_raw_in(settings, metrics, src, Some(kick)).await;
            return;
        }
        Err(_) => {
            let kick = SessionError::HandshakeTimeout.kick();
            finish_raw_in(settings, metrics, src, Some(kick)).await;
            return;
        }
    };
    let Opened {
        link,
        hello,
        resume,
        version,
    } = opened;
    let client = shared.next_client.fetch_add(1, Ordering::Relaxed);
    let out = io.link(u64::from(client), shared.cfg.outbox_frames);
    let told = link.tell(ZoneCmd::Open {
        client,
        out: ClientOut::WebSocket(Arc::clone(&out)),
        resume,
    });
    if !told || !link.send_up(wire::hello(client, &hello)) {
        io.forget(&out);
        if told {
            link.tell(ZoneCmd::Gone { client });
        }
        finish_raw_in(settings, metrics, src, Some(link_lost())).await;
        return;
    }
    let mut peer = RelayClient {
        link,
        client,
        // The origin refuses a Hello of no version it speaks.
        version: version.unwrap_or(zonekeep_protocol::limits::MIN_PROTOCOL_VERSION),
        started: shared.started,
        limits: Limits::new(&crate::config::ServerConfig::default()),
        _slot: slot,
        _track: track,
    };
    let (tcp, leftover) = src.into_parts();
    let stream = match tcp.into_std() {
        Ok(s) => s,
        Err(e) => {
            tracing::warn!(client, error = %e, "socket left the runtime broken");
            io.forget(&out);
            metrics.disconnect("dropped");
            peer.ended();
            return;
        }
    };
    io.attach(Arrival {
        link: out,
        stream,
        leftover,
        peer: Box::new(peer),
    });
}

/// A client's Hello, read and looked at, and its zone's link.
pub(super) struct Opened {
    pub(super) link: Arc<ZoneLink>,
    /// The Hello's bytes, forwarded to the origin as they came.
    pub(super) hello: Bytes,
    /// `Some` when it resumes with a reconnect token, with what it says it holds.
    pub(super) resume: Option<Option<ResumeFrom>>,
    /// The protocol version the origin will pick (the highest both speak of `versions`), if any.
    pub(super) version: Option<u32>,
}

/// The Hello, read as a host reads it (the first message, binary, within the size limit), and
/// the link of its zone; `Ok(None)`: the client went away first. An error is the Kick that
/// refuses it.
async fn hello(
    shared: &Arc<RelayShared>,
    zone_id: &str,
    src: &mut Prefixed,
) -> Result<Option<Opened>, KickNotice> {
    let max = zonekeep_protocol::limits::MAX_CLIENT_MESSAGE;
    let Some(bytes) = read_hello(src, max, &shared.metrics)
        .await
        .map_err(|e| e.kick())?
    else {
        return Ok(None);
    };
    // The origin judges the versions of a WebSocket client's Hello (it speaks the same ones).
    opened(shared, zone_id, bytes, &HOST_VERSIONS, false)
        .await
        .map(Some)
}

/// Looks at a client's Hello (`bytes`, as it sent it) for what the relay needs of it, and finds
/// its zone's link; an error is the Kick that refuses it. `versions` are those its transport
/// speaks; with `refuse_unspoken`, a Hello of none of them is refused here (VERSION_MISMATCH, as
/// a host refuses it), before any link is opened for it.
pub(super) async fn opened(
    shared: &Arc<RelayShared>,
    zone_id: &str,
    bytes: Bytes,
    versions: &[u32],
    refuse_unspoken: bool,
) -> Result<Opened, KickNotice> {
    // What the relay needs of it: whether it resumes, and from what. Everything else (the
    // ticket above all) is the origin's to judge.
    let h = match ClientMessage::decode(&bytes) {
        Ok(ClientMessage::Hello(h)) => h,
        Ok(_) => {
            let e = SessionError::Protocol("the first message must be Hello".into());
            return Err(e.kick());
        }
        Err(e) => {
            let e = SessionError::Protocol(format!("undecodable Hello: {e}"));
            return Err(e.kick());
        }
    };
    let version = h
        .versions
        .iter()
        .copied()
        .filter(|v| versions.contains(v))
        .max();
    if version.is_none() && refuse_unspoken {
        let e = SessionError::Version {
            min: versions.iter().copied().min().unwrap_or(0),
            max: versions.iter().copied().max().unwrap_or(0),
        };
        return Err(e.kick());
    }
    let resume = (!h.reconnect_token.is_empty()).then_some(h.resume_from);
    let link = shared.link(zone_id).await.map_err(|why| {
        tracing::warn!(zone = %zone_id, error = %why, "no link to the origin");
        KickNotice {
            code: KickCode::INTERNAL_ERROR,
            reason: "the relay cannot reach the zone's host; retry".into(),
        }
    })?;
    Ok(Opened {
        link,
        hello: bytes,
        resume,
        version,
    })
}

/// A relayed client as its I/O thread serves it.
struct RelayClient {
    link: Arc<ZoneLink>,
    client: u32,
    version: u32,
    /// The relay's clock origin: Pongs carry microseconds since it.
    started: std::time::Instant,
    /// A Ping costs a Pong: the host's own per-connection rates bound them here too.
    limits: Limits,
    _slot: Slot,
    _track: tokio_util::task::task_tracker::TaskTrackerToken,
}

impl Peer for RelayClient {
    fn message(&mut self, bytes: &[u8]) -> Result<Option<Bytes>, SessionError> {
        // Inputs and chat are the origin's to read and judge, under its limits for this client
        // (an undecodable one gets its Kick over the link): they go on as they came, read once.
        if !matches!(
            bytes.first(),
            Some(&(tag::PING | tag::RESYNC | tag::HELLO)) | None
        ) {
            self.link.send_up(wire::from_client(self.client, bytes));
            return Ok(None);
        }
        match ClientMessage::decode(bytes) {
            Ok(ClientMessage::Ping(p)) => {
                if !self.limits.ping(|| {})? {
                    return Ok(None);
                }
                let us = u64::try_from(self.started.elapsed().as_micros()).unwrap_or(u64::MAX);
                Ok(Some(pong_frame(p.client_time, us, self.link.tick())))
            }
            // Its frames are built here: so is the BASELINE it asks for.
            Ok(ClientMessage::Resync(_)) => {
                self.link.tell(ZoneCmd::Resync {
                    client: self.client,
                });
                Ok(None)
            }
            Ok(ClientMessage::Hello(_)) => Err(SessionError::Protocol("Hello out of place".into())),
            // Not reached for other tags (above). A full link queue ends the link, and
            // [`Peer::check`] then sends the client on.
            Ok(_) => {
                self.link.send_up(wire::from_client(self.client, bytes));
                Ok(None)
            }
            Err(e) => Err(SessionError::Protocol(format!("undecodable message: {e}"))),
        }
    }

    fn version(&self) -> u32 {
        self.version
    }

    fn check(&mut self) -> Option<KickNotice> {
        self.link.is_closed().then(link_lost)
    }

    fn ended(&mut self) {
        self.link.tell(ZoneCmd::Gone {
            client: self.client,
        });
        let _ = self.link.send_up(wire::gone(self.client));
    }
}
