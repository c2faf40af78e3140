//! One I/O thread's poll loop and the WebSocket connections it owns.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, VecDeque};
use std::io::ErrorKind;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use tokio::time::Instant;
use tungstenite::error::ProtocolError;
use tungstenite::protocol::frame::coding::CloseCode;
use tungstenite::protocol::{CloseFrame, Role, WebSocketContext};
use tungstenite::{Error as WsError, Message};

use super::super::probe::{ProbeStep, ReadProbe, ReadProgress};
use super::{Inbox, IoSettings, IoThread, Link, Peer, WAKER};
use crate::error::{kick_label, SessionError};
use crate::metrics::Metrics;
use crate::net::conn::KickNotice;
use crate::net::netsim::{DelayQueue, Direction, NetSimConfig};
use crate::sim::kick_frame;

/// How often a thread looks at its connections' timers (idle, read progress, closing). They
/// run for seconds, so a scan every 50 ms is precise enough, and one pass over every connection
/// twenty times a second costs next to nothing.
const SCAN_EVERY: Duration = Duration::from_millis(50);

/// Messages read from one connection before the others get their turn.
const READ_BATCH: usize = 64;

/// Bytes a connection's frames gather in before they are written: a batch goes out in one
/// `write` (they are written at the end of every batch whatever their size).
const WRITE_BATCH_BYTES: usize = 64 << 10;

/// An admitted connection on its way to its I/O thread.
pub(crate) struct Arrival {
    /// Its link (the simulation may already have queued its Welcome there).
    pub(crate) link: Arc<Link>,
    /// The socket, still in the async runtime's non-blocking mode.
    pub(crate) stream: std::net::TcpStream,
    /// Bytes the client sent after its Hello that were already read.
    pub(crate) leftover: Vec<u8>,
    /// What its messages mean.
    pub(crate) peer: Box<dyn Peer>,
}

enum Phase {
    Serving,
    /// Our Kick and Close are written (or waiting to be); read and discard until the client's
    /// Close, EOF or `until`.
    Closing {
        until: Instant,
    },
    /// Finished: deregister, tell the zone, drop.
    Done,
}

struct Conn {
    link: Arc<Link>,
    stream: mio::net::TcpStream,
    ws: WebSocketContext,
    peer: Box<dyn Peer>,
    settings: Arc<IoSettings>,
    metrics: Arc<Metrics>,
    progress: ReadProgress,
    probe: ReadProbe,
    idle: Duration,
    last_seen: Instant,
    /// The socket took less than we had: no more frames are taken until it drains.
    blocked: bool,
    /// Readiness is edge-triggered: data may be waiting until a read answers WouldBlock.
    readable: bool,
    /// Bytes are in the WebSocket's write buffer.
    unflushed: bool,
    phase: Phase,
    /// NetSim (dev): frames to the client and messages from it held back.
    to_client: DelayQueue<Bytes>,
    from_client: DelayQueue<Bytes>,
    /// Frames taken from the link and not yet written (NetSim's queue was full).
    batch: VecDeque<Bytes>,
}

/// A thread's loop: runs until its owner (the host, the relay) is gone and its last connection
/// ended.
pub(super) fn run(home: &Arc<IoThread>, mut poll: mio::Poll, owner_alive: &dyn Fn() -> bool) {
    let mut conns: HashMap<u64, Conn> = HashMap::new();
    let mut events = mio::Events::with_capacity(1024);
    let mut inbox = Inbox::default();
    let mut due: Vec<u64> = Vec::new();
    let mut releases: BinaryHeap<Reverse<(Instant, u64)>> = BinaryHeap::new();
    let mut next_scan = Instant::now() + SCAN_EVERY;
    let mut shutting_down = false;
    loop {
        let now = Instant::now();
        let wake_at = releases
            .peek()
            .map_or(next_scan, |Reverse((at, _))| (*at).min(next_scan));
        let timeout = if !due.is_empty() {
            Some(Duration::ZERO)
        } else if conns.is_empty() && releases.is_empty() {
            // Nothing to time: sleep until a connection arrives or the owner goes (both wake
            // the thread), so an idle host's I/O threads cost nothing.
            None
        } else {
            Some(wake_at.saturating_duration_since(now))
        };
        if let Err(e) = poll.poll(&mut events, timeout) {
            if e.kind() != ErrorKind::Interrupted {
                tracing::error!(error = %e, "WebSocket I/O poll failed");
                std::thread::sleep(SCAN_EVERY);
            }
            continue;
        }
        for ev in events.iter() {
            if ev.token() == WAKER {
                continue;
            }
            let id = ev.token().0 as u64;
            if let Some(c) = conns.get_mut(&id) {
                if ev.is_readable() || ev.is_read_closed() || ev.is_error() {
                    c.readable = true;
                }
                if ev.is_writable() {
                    c.blocked = false;
                    c.unflushed = true;
                }
                due.push(id);
            }
        }
        home.take_inbox(&mut inbox);
        shutting_down |= inbox.shutdown;
        let now = Instant::now();
        for arrival in inbox.arrivals.drain(..) {
            let id = arrival.link.id;
            if let Some(mut c) = Conn::open(home, arrival, poll.registry(), now) {
                if shutting_down {
                    c.begin_close(Some(SessionError::ShuttingDown.kick()), now);
                }
                conns.insert(id, c);
                due.push(id);
            }
        }
        for link in inbox.ready.drain(..) {
            link.scheduled.store(false, Ordering::Release);
            if conns.contains_key(&link.id) {
                due.push(link.id);
            }
        }
        if inbox.shutdown {
            inbox.shutdown = false;
            for (id, c) in conns.iter_mut() {
                // What the connection's zone queued first goes out first: a drain's ZONE_MOVED
                // Kick, queued before the shutdown reached this thread, wins over SHUTTING_DOWN.
                c.pull(now, &mut releases);
                c.begin_close(Some(SessionError::ShuttingDown.kick()), now);
                due.push(*id);
            }
        }
        while let Some(&Reverse((at, id))) = releases.peek() {
            if at > now {
                break;
            }
            releases.pop();
            if let Some(c) = conns.get_mut(&id) {
                c.release_due(now, &mut releases);
                due.push(id);
            }
        }
        if now >= next_scan {
            next_scan = now + SCAN_EVERY;
            for (id, c) in conns.iter_mut() {
                if c.check_timers(now) {
                    due.push(*id);
                }
            }
        }
        due.sort_unstable();
        due.dedup();
        let work = std::mem::take(&mut due);
        for id in work {
            let Some(c) = conns.get_mut(&id) else {
                continue;
            };
            c.service(now, &mut releases);
            if matches!(c.phase, Phase::Done) {
                if let Some(c) = conns.remove(&id) {
                    c.end(poll.registry());
                }
            } else if c.readable && !c.from_client.is_full() {
                // More to read than one batch: come back after the others had their turn.
                due.push(id);
            }
        }
        if conns.is_empty() && !owner_alive() {
            return;
        }
    }
}

impl Conn {
    fn open(
        home: &IoThread,
        arrival: Arrival,
        registry: &mio::Registry,
        now: Instant,
    ) -> Option<Conn> {
        let Arrival {
            link,
            stream,
            leftover,
            mut peer,
        } = arrival;
        let opened = stream.set_nonblocking(true).and_then(|()| {
            let mut stream = mio::net::TcpStream::from_std(stream);
            let token = mio::Token(usize::try_from(link.id).unwrap_or(usize::MAX));
            registry
                .register(
                    &mut stream,
                    token,
                    mio::Interest::READABLE | mio::Interest::WRITABLE,
                )
                .map(|()| stream)
        });
        let stream = match opened {
            Ok(s) => s,
            Err(e) => {
                tracing::warn!(conn = link.id, error = %e, "a WebSocket could not join its I/O thread");
                home.metrics.disconnect("dropped");
                link.retire();
                peer.ended();
                return None;
            }
        };
        let cfg = &home.settings;
        let write_batch = WRITE_BATCH_BYTES
            .max(cfg.write_buffer_bytes)
            .min(cfg.max_write_buffer_bytes / 2);
        let ws_config = cfg.websocket(write_batch);
        let ws = if leftover.is_empty() {
            WebSocketContext::new(Role::Server, Some(ws_config))
        } else {
            WebSocketContext::from_partially_read(leftover, Role::Server, Some(ws_config))
        };
        let id = link.id;
        Some(Conn {
            stream,
            ws,
            progress: ReadProgress::new(),
            probe: ReadProbe::new(cfg.read_progress_timeout, now),
            idle: cfg.idle_timeout,
            last_seen: now,
            blocked: false,
            readable: true,
            unflushed: false,
            phase: Phase::Serving,
            to_client: DelayQueue::new(
                id.wrapping_mul(0xd1b5_4a32_d192_ed03) ^ 0xa5a5,
                cfg.outbox_frames,
            ),
            from_client: DelayQueue::new(
                id.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ 0x5a5a,
                cfg.outbox_frames,
            ),
            batch: VecDeque::new(),
            settings: Arc::clone(&home.settings),
            metrics: Arc::clone(&home.metrics),
            link,
            peer,
        })
    }

    /// Everything the connection has to do now: read, take and write frames, flush.
    fn service(&mut self, now: Instant, releases: &mut BinaryHeap<Reverse<(Instant, u64)>>) {
        if self.readable && !self.from_client.is_full() {
            self.read_batch(now, releases);
        }
        if !matches!(self.phase, Phase::Done) {
            self.pull(now, releases);
        }
        if self.unflushed && !matches!(self.phase, Phase::Done) {
            self.flush();
        }
    }

    /// Take the link's frames (unless the socket is full) and its kick.
    fn pull(&mut self, now: Instant, releases: &mut BinaryHeap<Reverse<(Instant, u64)>>) {
        let serving = matches!(self.phase, Phase::Serving);
        let take = serving && !self.blocked && self.batch.is_empty();
        let kick = self.link.take(&mut self.batch, take);
        if serving && !self.blocked {
            let cfg = self.sim();
            while let Some(frame) = self.batch.pop_front() {
                if self.to_client.is_full() {
                    self.batch.push_front(frame);
                    break;
                }
                self.deliver(&cfg, frame, now, releases);
            }
        } else if !serving {
            self.batch.clear();
        }
        if let Some(ending) = kick {
            self.begin_close(ending, now);
        }
    }

    /// NetSim's setting for this connection's next message (off without one).
    fn sim(&self) -> NetSimConfig {
        self.peer.netsim().map(|n| n.get()).unwrap_or_default()
    }

    /// A frame to the client, through NetSim (dev): written now, or held back until it is due.
    fn deliver(
        &mut self,
        cfg: &NetSimConfig,
        frame: Bytes,
        now: Instant,
        releases: &mut BinaryHeap<Reverse<(Instant, u64)>>,
    ) {
        match self.to_client.offer(cfg, now, frame) {
            Some(frame) => self.write(Message::Binary(frame)),
            None => {
                if let Some(n) = self.peer.netsim() {
                    n.held(Direction::ToClient, self.to_client.last_delay());
                }
                self.schedule_release(releases);
            }
        }
    }

    fn schedule_release(&self, releases: &mut BinaryHeap<Reverse<(Instant, u64)>>) {
        let next = [
            self.to_client.next_release(),
            self.from_client.next_release(),
        ]
        .into_iter()
        .flatten()
        .min();
        if let Some(at) = next {
            releases.push(Reverse((at, self.link.id)));
        }
    }

    /// NetSim (dev): what is due in either direction.
    fn release_due(&mut self, now: Instant, releases: &mut BinaryHeap<Reverse<(Instant, u64)>>) {
        if matches!(self.phase, Phase::Serving) {
            while let Some(frame) = self.to_client.pop_due(now) {
                self.write(Message::Binary(frame));
            }
            while let Some(bytes) = self.from_client.pop_due(now) {
                self.last_seen = now;
                self.handle(&bytes, now, releases);
                if !matches!(self.phase, Phase::Serving) {
                    break;
                }
            }
        }
        self.schedule_release(releases);
    }

    /// Read up to a batch of messages.
    fn read_batch(&mut self, now: Instant, releases: &mut BinaryHeap<Reverse<(Instant, u64)>>) {
        let max = self.settings.max_message_bytes;
        for _ in 0..READ_BATCH {
            if self.from_client.is_full() || matches!(self.phase, Phase::Done) {
                return;
            }
            let closing = !matches!(self.phase, Phase::Serving);
            match self.ws.read(&mut self.stream) {
                Ok(Message::Binary(b)) if !closing => {
                    if b.len() > max {
                        let e = SessionError::TooLarge { len: b.len(), max };
                        self.begin_close(Some(e.kick()), now);
                        continue;
                    }
                    self.last_seen = now;
                    let cfg = self.sim();
                    match self.from_client.offer(&cfg, now, b) {
                        Some(b) => self.handle(&b, now, releases),
                        None => {
                            if let Some(n) = self.peer.netsim() {
                                n.held(Direction::FromClient, self.from_client.last_delay());
                            }
                            self.schedule_release(releases);
                        }
                    }
                }
                Ok(Message::Text(_)) if !closing => {
                    let e = SessionError::Protocol("text frame (binary only)".into());
                    self.begin_close(Some(e.kick()), now);
                }
                Ok(Message::Pong(p)) => {
                    if let Ok(seq) = <[u8; 8]>::try_from(&p[..]) {
                        self.progress.answered(u64::from_be_bytes(seq));
                    }
                    if let Some(rtt) = self.progress.take_round_trip() {
                        self.peer.round_trip(rtt);
                    }
                }
                Ok(Message::Close(_)) => {
                    if !closing {
                        self.metrics.disconnect("closed");
                    }
                    // tungstenite queued the answering Close: send it, then we are done.
                    let _ = self.ws.flush(&mut self.stream);
                    self.phase = Phase::Done;
                }
                // A Ping is answered by tungstenite itself (on the next flush).
                Ok(_) => self.unflushed = true,
                Err(WsError::Io(e)) if e.kind() == ErrorKind::WouldBlock => {
                    self.readable = false;
                    return;
                }
                Err(e) => {
                    self.read_failed(e, max, now);
                    return;
                }
            }
        }
    }

    /// A read error: the client's fault (an error Kick) or the connection just ending.
    fn read_failed(&mut self, e: WsError, max: usize, now: Instant) {
        self.readable = false;
        if !matches!(self.phase, Phase::Serving) {
            self.phase = Phase::Done;
            return;
        }
        let fault = match e {
            WsError::Capacity(_) => Some(SessionError::TooLarge { len: 0, max }),
            // A client that vanishes without a Close (a closed tab, a lost network) is a
            // disconnect like any other, not a protocol violation.
            WsError::Protocol(ProtocolError::ResetWithoutClosingHandshake) => None,
            WsError::Protocol(p) => Some(SessionError::Protocol(p.to_string())),
            _ => None,
        };
        match fault {
            Some(e) => self.begin_close(Some(e.kick()), now),
            None => {
                self.metrics.disconnect("dropped");
                self.phase = Phase::Done;
            }
        }
    }

    /// One message from the client, through the session's limits; a Pong answering it goes
    /// behind the frames already on their way, through NetSim like them.
    fn handle(
        &mut self,
        bytes: &[u8],
        now: Instant,
        releases: &mut BinaryHeap<Reverse<(Instant, u64)>>,
    ) {
        match self.peer.message(bytes) {
            Ok(Some(pong)) => {
                let cfg = self.sim();
                self.deliver(&cfg, pong, now, releases);
            }
            Ok(None) => {}
            Err(e) => self.begin_close(Some(e.kick()), now),
        }
    }

    fn write(&mut self, message: Message) {
        match self.ws.write(&mut self.stream, message) {
            Ok(()) => self.unflushed = true,
            Err(e) => self.write_failed(e),
        }
    }

    fn flush(&mut self) {
        match self.ws.flush(&mut self.stream) {
            Ok(()) => {
                self.unflushed = false;
                self.blocked = false;
            }
            Err(e) => self.write_failed(e),
        }
    }

    fn write_failed(&mut self, e: WsError) {
        match e {
            // Kept in the write buffer: it goes when the socket is writable again.
            WsError::Io(e) if e.kind() == ErrorKind::WouldBlock => {
                self.blocked = true;
                self.unflushed = true;
            }
            // The socket cannot take even the bounded write buffer: a reader this slow is
            // ended without a Kick (there is no room for one).
            WsError::WriteBufferFull(_) => {
                self.metrics.kick(&kick_label(
                    zonekeep_protocol::messages::KickCode::SLOW_CONSUMER,
                ));
                self.phase = Phase::Done;
            }
            _ => {
                if matches!(self.phase, Phase::Serving) {
                    self.metrics.disconnect("dropped");
                }
                self.phase = Phase::Done;
            }
        }
    }

    /// Send the final Kick (if any) and our Close; then read until the client's Close, bounded
    /// in time. Dropping the socket while the client still has unread data in flight makes the
    /// kernel answer with a reset, which can destroy the Kick before the client reads it.
    fn begin_close(&mut self, kick: Option<KickNotice>, now: Instant) {
        if !matches!(self.phase, Phase::Serving) {
            return;
        }
        self.batch.clear();
        let kick = kick.map(|k| k.for_version(self.peer.version()));
        let close = kick.as_ref().map(|k| CloseFrame {
            code: CloseCode::from(super::super::close_code(k.code)),
            reason: "".into(),
        });
        if let Some(k) = &kick {
            self.metrics.kick(&kick_label(k.code));
            self.write(Message::Binary(kick_frame(k.code, &k.reason)));
        }
        let bound = self.settings.close_timeout;
        self.phase = Phase::Closing { until: now + bound };
        match self.ws.close(&mut self.stream, close) {
            Ok(()) => self.unflushed = false,
            Err(e) => self.write_failed(e),
        }
    }

    /// Idle timeout, read progress and the closing bound; whether the connection needs service.
    fn check_timers(&mut self, now: Instant) -> bool {
        match self.phase {
            Phase::Done => true,
            Phase::Closing { until } => {
                if now >= until {
                    self.phase = Phase::Done;
                    return true;
                }
                false
            }
            Phase::Serving => {
                if let Some(k) = self.peer.check() {
                    self.begin_close(Some(k), now);
                    return true;
                }
                if now >= self.last_seen + self.idle {
                    self.begin_close(Some(SessionError::IdleTimeout.kick()), now);
                    return true;
                }
                if now < self.probe.next {
                    return false;
                }
                match self.probe.step(self.progress.highest_answered(), now) {
                    ProbeStep::Wait => false,
                    ProbeStep::Stalled => {
                        self.begin_close(Some(stalled_kick()), now);
                        true
                    }
                    ProbeStep::Send(seq) => {
                        self.progress.sent(seq);
                        let ping = Bytes::copy_from_slice(&seq.to_be_bytes());
                        self.write(Message::Ping(ping));
                        true
                    }
                }
            }
        }
    }

    /// The connection is over: leave the poll, refuse its later frames, tell its zone.
    fn end(mut self, registry: &mio::Registry) {
        let _ = registry.deregister(&mut self.stream);
        self.link.retire();
        self.peer.ended();
    }
}

/// The Kick for a client that stopped reading.
fn stalled_kick() -> KickNotice {
    KickNotice {
        code: zonekeep_protocol::messages::KickCode::SLOW_CONSUMER,
        reason: "the client stopped reading: no answer to a WebSocket Ping in time".into(),
    }
}
