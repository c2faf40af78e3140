//! A WebTransport client of the relay (PROTOCOL.md §1.1), served as a host serves one: its Hello
//! on the control stream, States in datagrams when they fit one, everything else on the stream,
//! Inputs in datagrams carrying its State acknowledgements.
//!
//! As for a WebSocket client, the Hello goes to the origin as it came (the origin verifies the
//! ticket and binds the principal), Pings are answered here, and the zone's thread builds the
//! client's frames, against the States the client acknowledged. An Inputs datagram is read here:
//! its acknowledgement is the zone thread's, and each input it brings for the first time goes to
//! the origin as the Input message a WebSocket client sends, judged there under the origin's
//! limits for this client. The origin names the player by the link's client number only, so
//! nothing the relay forwards can speak for another principal.
//!
//! As at a host, the datagram reader is a task of its own, and once the session has written the
//! client's Welcome the zone's thread hands States to the QUIC connection itself
//! (`DatagramPath::open_direct`) instead of through the session's writer.

use std::sync::Arc;

use bytes::Bytes;
use tokio::time::Instant;
use wtransport::endpoint::IncomingSession;
use wtransport::{Connection, RecvStream, SendStream};
use zonekeep_protocol::messages::{tag, ClientMessage};

use super::link::{ZoneCmd, ZoneLink};
use super::out::{ClientOut, End, SessionEnds, SessionOut};
use super::session::{link_lost, opened, Opened, Slot};
use super::RelayShared;
use crate::error::SessionError;
use crate::net::conn::{DatagramPath, KickNotice};
use crate::net::conn_limit::ConnGuard;
use crate::net::relay::wire;
use crate::net::webtransport::control::{self, control_stream, read_hello, Control};
use crate::net::webtransport::framing::{
    goes_as_datagram, take_inputs, write_message, StreamReader,
};
use crate::net::webtransport::reader::{direct_send, DatagramReader, LastSeen};
use crate::net::webtransport::VERSIONS;
use crate::session::Limits;
use crate::sim::pong_frame;

/// The largest message a client may send (as on the relay's WebSockets).
const MAX_MESSAGE: usize = zonekeep_protocol::limits::MAX_CLIENT_MESSAGE;

/// Serves one incoming session to its end. `handshake` holds its place among the handshakes in
/// progress until the CONNECT request arrives; one deadline, the relay's handshake timeout from
/// the Initial that started it, bounds everything up to the Hello.
pub(super) async fn run(incoming: IncomingSession, shared: Arc<RelayShared>, handshake: ConnGuard) {
    let _track = shared.sessions.token();
    let metrics = &shared.metrics;
    let deadline = Instant::now() + shared.cfg.handshake_timeout;
    let Ok(Ok(request)) = tokio::time::timeout_at(deadline, incoming).await else {
        metrics.disconnect("dropped");
        return;
    };
    drop(handshake);
    let zone_id = {
        let path = request.path();
        let path = path.split_once('?').map_or(path, |(p, _)| p);
        path.strip_prefix("/zones/")
            .filter(|z| crate::host::valid_zone_id(z))
            .map(str::to_owned)
    };
    let Some(zone_id) = zone_id else {
        let _ = tokio::time::timeout_at(deadline, request.not_found()).await;
        return;
    };
    // One of the relay's client slots, counted with its WebSocket clients; a full relay still
    // accepts the session, to say why on its control stream.
    let slot = Slot::take(&shared);
    let Ok(Ok(connection)) = tokio::time::timeout_at(deadline, request.accept()).await else {
        metrics.disconnect("dropped");
        return;
    };
    let bound = shared.cfg.write_timeout;
    let opened = control_stream(&shared.stop, metrics, &connection, deadline).await;
    let (mut send, mut recv) = match opened {
        Control::Opened(send, recv, None) => (send, recv),
        Control::Opened(mut send, _, Some(e)) => {
            control::close(metrics, bound, &connection, Some(&mut send), Some(e.kick())).await;
            return;
        }
        Control::Missing(e) => {
            control::close(metrics, bound, &connection, None, e.map(|e| e.kick())).await;
            return;
        }
    };
    let Some(slot) = slot else {
        let kick = Some(SessionError::TooManyConnections.kick());
        control::close(metrics, bound, &connection, Some(&mut send), kick).await;
        return;
    };
    let Opened {
        link,
        hello,
        resume,
        version,
    } = match hello(&shared, &zone_id, &connection, &mut recv, deadline).await {
        Ok(Some(o)) => o,
        Ok(None) => return,
        Err(kick) => {
            control::close(metrics, bound, &connection, Some(&mut send), Some(kick)).await;
            return;
        }
    };
    let client = shared
        .next_client
        .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let datagrams = connection
        .max_datagram_size()
        .map(|m| Arc::new(DatagramPath::new(m)));
    let (out, ends) = SessionOut::new(shared.cfg.outbox_frames, datagrams.clone());
    let told = link.tell(ZoneCmd::Open {
        client,
        out: ClientOut::WebTransport(Arc::clone(&out)),
        resume,
    });
    if !told || !link.send_up(wire::hello(client, &hello)) {
        if told {
            link.tell(ZoneCmd::Gone { client });
        }
        control::close(
            metrics,
            bound,
            &connection,
            Some(&mut send),
            Some(link_lost()),
        )
        .await;
        return;
    }
    tracing::debug!(zone = %zone_id, client, "relayed webtransport session opened");
    let session = Session {
        shared: &shared,
        link: &link,
        client,
        connection: &connection,
        out: &out,
        datagrams: datagrams.as_ref(),
    };
    let kick = session.serve(&mut send, recv, ends).await;
    // Some: a Hello of no WebTransport version was refused above.
    let version = version.unwrap_or(zonekeep_protocol::limits::DATAGRAM_VERSION);
    let kick = kick.map(|k| k.for_version(version));
    control::close(metrics, bound, &connection, Some(&mut send), kick).await;
    link.tell(ZoneCmd::Gone { client });
    let _ = link.send_up(wire::gone(client));
    drop(slot);
}

/// The Hello from the control stream, looked at, and its zone's link; `Ok(None)`: the client left
/// first. An error is the Kick that refuses it.
async fn hello(
    shared: &Arc<RelayShared>,
    zone_id: &str,
    connection: &Connection,
    recv: &mut RecvStream,
    deadline: Instant,
) -> Result<Option<Opened>, KickNotice> {
    let first = read_hello(
        &shared.stop,
        &shared.metrics,
        connection,
        recv,
        MAX_MESSAGE,
        deadline,
    )
    .await
    .map_err(|e| e.kick())?;
    let Some(bytes) = first else {
        return Ok(None);
    };
    // A Hello of no version a WebTransport session speaks is refused here, as a host refuses it:
    // the origin would admit it as a WebSocket client of an older version.
    let opened = opened(shared, zone_id, bytes, &VERSIONS, true).await?;
    Ok(Some(opened))
}

/// One admitted session's parts.
struct Session<'a> {
    shared: &'a Arc<RelayShared>,
    link: &'a Arc<ZoneLink>,
    client: u32,
    connection: &'a Connection,
    out: &'a Arc<SessionOut>,
    datagrams: Option<&'a Arc<DatagramPath>>,
}

impl Session<'_> {
    /// Runs the readers (the datagram reader on a task of its own) and the writer until one
    /// ends the session; the Kick to send, if any. The zone's States go to the closed outbox
    /// from then on.
    async fn serve(
        &self,
        send: &mut SendStream,
        recv: RecvStream,
        ends: SessionEnds,
    ) -> Option<KickNotice> {
        // A Ping costs a Pong and a datagram a decode: the host's own per-connection rates
        // bound them here too (inputs are rated at the origin).
        let limits = Arc::new(Limits::new(&crate::config::ServerConfig::default()));
        let seen = Arc::new(LastSeen::new());
        let mut datagrams = DatagramReader::spawn(datagram_loop(
            Forward {
                shared: Arc::clone(self.shared),
                link: Arc::clone(self.link),
                client: self.client,
            },
            self.connection.clone(),
            Arc::clone(&limits),
            Arc::clone(&seen),
            self.datagrams.cloned(),
        ));
        let kick = tokio::select! {
            r = self.read_loop(recv, &limits, &seen) => r.err().map(|e| e.kick()),
            r = datagrams.ended() => {
                if r.is_none() {
                    self.shared.metrics.disconnect("dropped");
                }
                r.map(|e| e.kick())
            }
            k = self.write_loop(send, ends) => k,
            () = self.link.closed() => Some(link_lost()),
            _ = self.connection.accept_bi() => {
                Some(SessionError::Protocol("a second stream".into()).kick())
            }
            _ = self.connection.accept_uni() => {
                Some(SessionError::Protocol("a unidirectional stream".into()).kick())
            }
        };
        if let Some(path) = self.datagrams {
            path.close_direct();
        }
        kick
    }

    /// Reads the control stream (Pings, and what goes to the origin as it came) until the
    /// client leaves or breaks a rule, and ends an idle session: every message and datagram
    /// resets the idle timer.
    async fn read_loop(
        &self,
        recv: RecvStream,
        limits: &Limits,
        seen: &LastSeen,
    ) -> Result<(), SessionError> {
        let idle = self.shared.cfg.idle_timeout;
        let mut recv = StreamReader::new(recv, MAX_MESSAGE);
        seen.heard(Instant::now());
        let idle_timer = tokio::time::sleep(idle);
        tokio::pin!(idle_timer);
        loop {
            tokio::select! {
                biased;
                () = &mut idle_timer => {
                    let due = seen.at() + idle;
                    if Instant::now() >= due {
                        return Err(SessionError::IdleTimeout);
                    }
                    idle_timer.as_mut().reset(due);
                }
                m = recv.next() => {
                    let Some(bytes) = m? else {
                        self.shared.metrics.disconnect("closed");
                        return Ok(());
                    };
                    seen.heard(Instant::now());
                    self.message(limits, &bytes).await?;
                }
            }
        }
    }

    /// One message from the control stream: a Ping answered here; what belongs on a datagram,
    /// or a second Hello, refused; anything else (chat) to the origin as it came, judged there.
    async fn message(&self, limits: &Limits, bytes: &[u8]) -> Result<(), SessionError> {
        match bytes.first() {
            Some(&(tag::INPUT | tag::RESYNC | tag::INPUTS)) => Err(SessionError::Protocol(
                "Input, Resync and Inputs are not sent on a WebTransport stream".into(),
            )),
            Some(&tag::HELLO) => Err(SessionError::Protocol("Hello out of place".into())),
            Some(&tag::PING) => {
                let ping = match ClientMessage::decode(bytes) {
                    Ok(ClientMessage::Ping(p)) => p,
                    _ => return Err(SessionError::Protocol("undecodable Ping".into())),
                };
                if !limits.ping(|| self.shared.metrics.ping_rate_limited())? {
                    return Ok(());
                }
                let us =
                    u64::try_from(self.shared.started.elapsed().as_micros()).unwrap_or(u64::MAX);
                let pong = pong_frame(ping.client_time, us, self.link.tick());
                self.out.send_own(pong).await;
                Ok(())
            }
            // A full link queue ends the link, and the session with it.
            _ => {
                self.link.send_up(wire::from_client(self.client, bytes));
                Ok(())
            }
        }
    }

    /// Sends the zone thread's frames: a State as a datagram when it fits one (until the
    /// Welcome is written; the zone's thread sends them itself from then on), everything else
    /// (and a State too large for a datagram) on the control stream, in order; until the session
    /// is asked to end (its Kick returned) or the client stops reading and the write is raced by
    /// that ending.
    async fn write_loop(&self, send: &mut SendStream, ends: SessionEnds) -> Option<KickNotice> {
        let SessionEnds {
            mut frames,
            mut end,
        } = ends;
        // A relay shutting down ends its links, and their zone threads end their clients
        // (ZONE_MOVED: they resume elsewhere at once), as for its WebSocket clients.
        let stop = async {
            end.wait_for(Option::is_some)
                .await
                .ok()
                .and_then(|e| e.clone())
        };
        tokio::pin!(stop);
        // Whether States skip this writer yet: not before the Welcome (the origin's answer,
        // which may come after a Pong) is written, or a State sent straight to the connection
        // could overtake it.
        let mut direct = false;
        loop {
            let frame = tokio::select! {
                biased;
                e = &mut stop => return self.ended(e, send, &mut frames).await,
                f = frames.recv() => f?,
            };
            if goes_as_datagram(&frame, self.datagrams.map(Arc::as_ref)) {
                if self.connection.send_datagram(frame).is_err() {
                    self.shared.metrics.datagram_send_failed();
                }
                continue;
            }
            // A client that stopped reading blocks this write, and the slow-consumer kick must
            // still end the session.
            tokio::select! {
                biased;
                e = &mut stop => return self.ended(e, send, &mut frames).await,
                ok = write_message(send, &frame) => if !ok { return None },
            }
            if !direct && frame.first() == Some(&tag::WELCOME) {
                if let Some(path) = self.datagrams {
                    let metrics = Arc::clone(&self.shared.metrics);
                    path.open_direct(direct_send(self.connection, metrics, || false));
                }
                direct = true;
            }
        }
    }

    /// The session is asked to end: with its Kick, or (closed after its last message) once what
    /// was queued before is sent, each write bounded.
    async fn ended(
        &self,
        end: Option<End>,
        send: &mut SendStream,
        frames: &mut tokio::sync::mpsc::Receiver<Bytes>,
    ) -> Option<KickNotice> {
        match end {
            Some(End::Kick(k)) => Some(k),
            Some(End::Close) | None => {
                let bound = self.shared.cfg.write_timeout;
                while let Ok(frame) = frames.try_recv() {
                    let sent = tokio::time::timeout(bound, write_message(send, &frame)).await;
                    if !matches!(sent, Ok(true)) {
                        break;
                    }
                }
                None
            }
        }
    }
}

/// Where a relayed client's inputs go: up its zone's link, as its client number.
struct Forward {
    shared: Arc<RelayShared>,
    link: Arc<ZoneLink>,
    client: u32,
}

/// Reads the client's datagrams (Inputs) until it leaves (`Ok`) or breaks a rule: each one's
/// acknowledgement is noted for the zone's thread, the inputs not forwarded yet go to the origin
/// as Input messages, and a datagram that brings nothing new spends a datagram token instead.
async fn datagram_loop(
    to: Forward,
    connection: Connection,
    limits: Arc<Limits>,
    seen: Arc<LastSeen>,
    path: Option<Arc<DatagramPath>>,
) -> Result<(), SessionError> {
    // The highest input sequence forwarded: repeats cost the origin nothing.
    let mut forwarded = 0u32;
    let metrics = &to.shared.metrics;
    loop {
        let Ok(d) = connection.receive_datagram().await else {
            return Ok(());
        };
        seen.heard(Instant::now());
        let bytes = d.payload();
        if bytes.len() > MAX_MESSAGE {
            return Err(SessionError::TooLarge {
                len: bytes.len(),
                max: MAX_MESSAGE,
            });
        }
        take_inputs(
            &bytes,
            path.as_deref(),
            &mut forwarded,
            &limits,
            metrics,
            |i| {
                let input = ClientMessage::Input(i)
                    .to_bytes()
                    .map_err(|e| SessionError::Protocol(format!("unencodable input: {e}")))?;
                // A full link queue ends the link, and the session with it.
                to.link.send_up(wire::from_client(to.client, &input));
                Ok(())
            },
        )?;
    }
}
