//! One zone's link to its origin, and the thread that holds the zone's replica and writes its
//! clients' frames.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures_util::{SinkExt, StreamExt};
use tokio::sync::mpsc;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::Message;
use tokio_util::sync::CancellationToken;
use zonekeep_core::relay::RelayZone;
use zonekeep_core::PlayerId;
use zonekeep_protocol::messages::{tag, KickCode, ServerMessage};
use zonekeep_protocol::ResumeFrom;

use super::out::ClientOut;
use super::RelayShared;
use crate::net::conn::{KickNotice, Offer};
use crate::net::relay::wire::Down;
use crate::sim::notices::{known_set_check_frame, LastFrame, Notices};

/// What the zone's thread is told, in order.
pub(crate) enum ZoneCmd {
    /// A client sent its Hello (forwarded to the origin after this): `resume` is `Some` when it
    /// resumes with a reconnect token, with what it says it holds.
    Open {
        client: u32,
        out: ClientOut,
        resume: Option<Option<ResumeFrom>>,
    },
    /// A client's connection ended.
    Gone { client: u32 },
    /// A client asked for a BASELINE (PROTOCOL.md §4.4).
    Resync { client: u32 },
    /// A message from the origin.
    FromOrigin(Bytes),
    /// The link ended.
    Down,
}

/// One zone's link to its origin.
pub(crate) struct ZoneLink {
    zone_id: String,
    /// Messages to the origin, for the link's writer.
    up: mpsc::Sender<Bytes>,
    /// The zone's thread.
    cmds: crossbeam_channel::Sender<ZoneCmd>,
    closed: CancellationToken,
    /// Cancelled once the zone's thread ended, having told every client to resume elsewhere.
    finished: CancellationToken,
    /// The zone's tick as of the last patch (Pongs carry it).
    tick: AtomicU64,
}

impl ZoneLink {
    /// Opens `zone_id`'s link to the origin and starts its thread.
    pub(crate) async fn open(shared: Arc<RelayShared>, zone_id: &str) -> Result<Arc<Self>, String> {
        let cfg = &shared.cfg;
        let url = cfg.link_url(zone_id);
        let mut request = url
            .as_str()
            .into_client_request()
            .map_err(|e| format!("link URL {url}: {e}"))?;
        let bearer = format!("Bearer {}", cfg.token.expose());
        request.headers_mut().insert(
            "authorization",
            bearer
                .parse()
                .map_err(|_| "the relay token is not a valid header value".to_owned())?,
        );
        let ws_config = tokio_tungstenite::tungstenite::protocol::WebSocketConfig::default()
            .max_message_size(Some(zonekeep_protocol::limits::MAX_SERVER_MESSAGE * 4))
            .max_frame_size(Some(zonekeep_protocol::limits::MAX_SERVER_MESSAGE * 4));
        let connect = tokio_tungstenite::connect_async_with_config(request, Some(ws_config), true);
        let (socket, _) = tokio::time::timeout(cfg.handshake_timeout, connect)
            .await
            .map_err(|_| format!("the origin did not answer the link in time ({url})"))?
            .map_err(|e| format!("the origin refused the link ({url}): {e}"))?;
        let (mut sink, mut stream) = socket.split();
        let (up, mut up_rx) = mpsc::channel::<Bytes>(cfg.link_queue);
        let (cmds, cmd_rx) = crossbeam_channel::unbounded();
        let link = Arc::new(ZoneLink {
            zone_id: zone_id.to_owned(),
            up,
            cmds,
            closed: CancellationToken::new(),
            finished: CancellationToken::new(),
            tick: AtomicU64::new(0),
        });
        tracing::info!(zone = %zone_id, "relay link opened");

        // The writer: what the clients send, to the origin.
        let writer = Arc::clone(&link);
        let write_timeout = cfg.write_timeout;
        tokio::spawn(async move {
            loop {
                let msg = tokio::select! {
                    _ = writer.closed.cancelled() => break,
                    m = up_rx.recv() => match m { Some(m) => m, None => break },
                };
                match tokio::time::timeout(write_timeout, sink.send(Message::Binary(msg))).await {
                    Ok(Ok(())) => {}
                    _ => break,
                }
            }
            writer.shut_down();
            let _ = sink.close().await;
        });

        // The reader: the origin's messages, to the zone's thread, in order.
        let reader = Arc::clone(&link);
        let cap = cfg.link_queue;
        tokio::spawn(async move {
            loop {
                let msg = tokio::select! {
                    _ = reader.closed.cancelled() => break,
                    m = stream.next() => m,
                };
                match msg {
                    Some(Ok(Message::Binary(b))) => {
                        // The zone's thread keeps up with its origin, or the link ends: never
                        // an unbounded backlog.
                        if reader.cmds.len() >= cap {
                            tracing::warn!(zone = %reader.zone_id, "relay zone thread fell behind its link: closed");
                            break;
                        }
                        let _ = reader.cmds.send(ZoneCmd::FromOrigin(b));
                    }
                    Some(Ok(Message::Ping(_) | Message::Pong(_) | Message::Frame(_))) => {}
                    _ => break,
                }
            }
            reader.shut_down();
        });

        // The relay's load, for the origin's placement: now, then every second.
        let reporter = Arc::clone(&link);
        let load_of = Arc::clone(&shared);
        tokio::spawn(async move {
            let mut every = tokio::time::interval(Duration::from_secs(1));
            loop {
                tokio::select! {
                    _ = reporter.closed.cancelled() => break,
                    _ = every.tick() => {}
                }
                let Some(url) = load_of.public_url.get() else {
                    continue;
                };
                let clients = load_of.clients.load(Ordering::Relaxed);
                let clients = u32::try_from(clients).unwrap_or(u32::MAX);
                let max = u32::try_from(load_of.cfg.max_clients).unwrap_or(u32::MAX);
                if !reporter.send_up(crate::net::relay::wire::load(clients, max, url)) {
                    break;
                }
            }
        });

        let thread_link = Arc::clone(&link);
        let thread_shared = Arc::clone(&shared);
        std::thread::Builder::new()
            .name(format!("relay-{zone_id}"))
            .spawn(move || {
                // Even if the thread panics: a relay shutting down waits for this.
                let _finished = thread_link.finished.clone().drop_guard();
                ZoneThread::new(&thread_shared, Arc::clone(&thread_link)).run(cmd_rx);
                thread_shared.forget(&thread_link.zone_id, &thread_link);
            })
            .map_err(|e| format!("no thread for the zone: {e}"))?;
        Ok(link)
    }

    /// Whether the link ended.
    pub(crate) fn is_closed(&self) -> bool {
        self.closed.is_cancelled()
    }

    /// Resolves once the link ended.
    pub(crate) async fn closed(&self) {
        self.closed.cancelled().await
    }

    /// Resolves once the zone's thread ended: every client's Kick (ZONE_MOVED) is queued.
    pub(crate) async fn finished(&self) {
        self.finished.cancelled().await
    }

    /// Ends the link: its thread tells every client to resume elsewhere.
    pub(crate) fn shut_down(&self) {
        if !self.closed.is_cancelled() {
            self.closed.cancel();
            let _ = self.cmds.send(ZoneCmd::Down);
        }
    }

    /// Queue a message for the origin without waiting; a full queue ends the link.
    pub(crate) fn send_up(&self, msg: Bytes) -> bool {
        match self.up.try_send(msg) {
            Ok(()) => true,
            Err(_) => {
                self.shut_down();
                false
            }
        }
    }

    /// Tell the zone's thread something; false once it is gone.
    pub(crate) fn tell(&self, cmd: ZoneCmd) -> bool {
        self.cmds.send(cmd).is_ok()
    }

    /// The zone's tick as of the last patch.
    pub(crate) fn tick(&self) -> u64 {
        self.tick.load(Ordering::Relaxed)
    }
}

/// One client as the zone's thread knows it.
struct Client {
    /// Its connection's queue (on its I/O thread, or its WebTransport session's outbox); full
    /// means it is not reading (it is kicked).
    out: ClientOut,
    /// The newest State its client acknowledged that its replicator was told of (WebTransport).
    state_acked: u64,
    /// Its participant, once its Welcome came.
    player: Option<PlayerId>,
    /// `Some` while its resuming Hello waits for its Welcome.
    resume: Option<Option<ResumeFrom>>,
    last: LastFrame,
    notices: Notices,
}

/// The zone's thread: the replica, the clients, and the frames.
struct ZoneThread {
    link: Arc<ZoneLink>,
    zone: RelayZone,
    clients: HashMap<u32, Client>,
    /// Which client each participant is.
    players: BTreeMap<PlayerId, u32>,
    /// Participants whose client went away, with when their reconnect grace ends: what they
    /// were sent is kept until then, for a resume through this relay.
    away: VecDeque<(Instant, PlayerId)>,
    /// From the zone's Welcome: its tick rate (for the keep-alive and the Resync rate) and grace.
    tick_hz: u32,
    grace: Duration,
}

impl ZoneThread {
    fn new(shared: &RelayShared, link: Arc<ZoneLink>) -> Self {
        Self {
            link,
            zone: RelayZone::new(shared.cfg.max_entities, shared.cfg.max_clients),
            clients: HashMap::new(),
            players: BTreeMap::new(),
            away: VecDeque::new(),
            tick_hz: 20,
            grace: Duration::from_secs(30),
        }
    }

    fn run(mut self, cmds: crossbeam_channel::Receiver<ZoneCmd>) {
        while let Ok(cmd) = cmds.recv() {
            match cmd {
                ZoneCmd::Open {
                    client,
                    out,
                    resume,
                } => {
                    self.clients.insert(
                        client,
                        Client {
                            out,
                            state_acked: 0,
                            player: None,
                            resume,
                            last: LastFrame::default(),
                            notices: Notices::default(),
                        },
                    );
                }
                ZoneCmd::Gone { client } => self.gone(client),
                ZoneCmd::Resync { client } => {
                    let tick = self.zone.tick();
                    if let Some(c) = self.clients.get_mut(&client) {
                        if let Some(p) = c.player {
                            if c.notices.allow_resync(tick, self.tick_hz) {
                                self.zone.resync(p);
                            }
                        }
                    }
                }
                ZoneCmd::FromOrigin(bytes) => {
                    if let Err(why) = self.on_origin(&bytes) {
                        tracing::warn!(zone = %self.link.zone_id, error = %why, "relay link failed");
                        self.link.shut_down();
                    }
                }
                ZoneCmd::Down => break,
            }
            if self.link.is_closed() {
                break;
            }
        }
        // The link is gone: every client resumes through its entry URLs (and any host or relay
        // takes it from there with its reconnect token).
        for c in self.clients.values() {
            c.out.kick(KickNotice {
                code: KickCode::ZONE_MOVED,
                reason: "the relay lost its link to the zone's host; resume".into(),
            });
        }
        tracing::info!(zone = %self.link.zone_id, "relay link closed");
    }

    /// A client's connection ended: its participant's frames stop, kept for a resume here.
    fn gone(&mut self, client: u32) {
        let Some(c) = self.clients.remove(&client) else {
            return;
        };
        if let Some(p) = c.player {
            self.players.remove(&p);
            self.zone.detach(p);
            self.away.push_back((Instant::now() + self.grace, p));
        }
    }

    fn on_origin(&mut self, bytes: &[u8]) -> Result<(), String> {
        match Down::read(bytes).map_err(|e| e.to_string())? {
            Down::Patch(message) => {
                self.note_acks();
                self.zone.apply(message).map_err(|e| e.to_string())?;
                self.link.tick.store(self.zone.tick(), Ordering::Relaxed);
                self.deliver();
                self.forget_expired();
            }
            Down::ToClient { client, bytes } => self.for_client(client, bytes),
            Down::Kick {
                client,
                code,
                reason,
            } => {
                if let Some(c) = self.clients.get(&client) {
                    c.out.kick(KickNotice {
                        code,
                        reason: reason.to_owned(),
                    });
                }
            }
        }
        Ok(())
    }

    /// A message for one client. Its Welcome seats it here (as a resume of what it was sent
    /// here, when it resumes); a Transfer is its last message.
    fn for_client(&mut self, client: u32, bytes: &[u8]) {
        let Some(c) = self.clients.get_mut(&client) else {
            return;
        };
        let mut last = false;
        // Only a Welcome or a Transfer matters here: anything else (notices, chat) is passed on
        // without being decoded.
        let decoded = match bytes.first() {
            Some(&tag::WELCOME | &tag::TRANSFER) => ServerMessage::decode(bytes, None).ok(),
            _ => None,
        };
        match decoded {
            Some(ServerMessage::Welcome(w)) if c.player.is_none() => {
                let p = PlayerId(w.player_id);
                self.tick_hz = w.tick_hz.max(1);
                self.grace = Duration::from_millis(u64::from(w.reconnect_grace_ms));
                // Another client of the same participant (a half-open old connection here).
                if let Some(old) = self.players.insert(p, client) {
                    if let Some(o) = self.clients.get_mut(&old) {
                        o.player = None;
                        o.out.kick(KickNotice {
                            code: KickCode::KICKED,
                            reason: "resumed on another connection".into(),
                        });
                    }
                }
                let Some(c) = self.clients.get_mut(&client) else {
                    return;
                };
                c.player = Some(p);
                self.away.retain(|(_, a)| *a != p);
                let resumed = match c.resume.take() {
                    Some(from) => self.zone.reattach(p, from.as_ref()),
                    None => None,
                };
                if resumed.is_none() {
                    self.zone.attach(p);
                }
                // A WebTransport client: States against what it acknowledged, each fitting one
                // datagram (the frames of the next patch are built so).
                if let Some(path) = c.out.datagrams() {
                    c.state_acked = 0;
                    self.zone.use_datagrams(p, Some(path.max_frame()));
                }
            }
            Some(ServerMessage::Transfer(_)) => last = true,
            _ => {}
        }
        let Some(c) = self.clients.get(&client) else {
            return;
        };
        c.out.offer(Bytes::copy_from_slice(bytes));
        if last {
            // Sent to another zone: the client goes there; its connection here is over.
            c.out.close();
        }
    }

    /// Tells the replicator what datagram clients acknowledged since the last patch, before the
    /// next one's frames are built: their States build on it.
    fn note_acks(&mut self) {
        for c in self.clients.values_mut() {
            let (Some(p), Some(path)) = (c.player, c.out.datagrams()) else {
                continue;
            };
            let acked = path.acked();
            if acked > c.state_acked {
                c.state_acked = acked;
                self.zone.ack_state(p, acked);
            }
        }
    }

    /// The frames of the patch just applied, each to its client's outbox, as the zone's host
    /// delivers them: a quiet frame with the same ack skipped (but once a second), and a
    /// KnownSetCheck after every so many.
    fn deliver(&mut self) {
        let tick = self.zone.tick();
        let keepalive = u64::from(self.tick_hz);
        let mut checks: Vec<(u32, PlayerId)> = Vec::new();
        for frame in self.zone.drain_frames() {
            let Some(&client) = self.players.get(&frame.player) else {
                continue;
            };
            let Some(c) = self.clients.get_mut(&client) else {
                continue;
            };
            if c.last.skips(frame.quiet, frame.ack, tick, keepalive) {
                continue;
            }
            if !frame.events.is_empty() {
                c.out.offer(Bytes::copy_from_slice(frame.events));
            }
            if c.out.offer(Bytes::copy_from_slice(frame.bytes)) == Offer::Queued {
                c.last.sent(frame.ack, tick);
                if frame.base.is_none() && c.notices.frame_sent() {
                    checks.push((client, frame.player));
                }
            }
        }
        for (client, player) in checks {
            let (Some((count, hash)), Some(c)) =
                (self.zone.known_set_check(player), self.clients.get(&client))
            else {
                continue;
            };
            c.out.offer(known_set_check_frame(tick, count, hash));
        }
    }

    /// Forgets participants whose client did not come back within its grace.
    fn forget_expired(&mut self) {
        let now = Instant::now();
        while let Some(&(until, p)) = self.away.front() {
            if until > now {
                break;
            }
            self.away.pop_front();
            if !self.players.contains_key(&p) {
                self.zone.remove(p);
            }
        }
    }
}
