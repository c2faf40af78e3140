//! What the simulation side holds of a connection: its bounded outbox and a
//! one-shot kick signal. The sim thread only ever `try_send`s, or hands a WebTransport State to
//! QUIC's bounded datagram queue; it never waits.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};

use bytes::Bytes;
use tokio::sync::{mpsc, watch};
use zonekeep_protocol::messages::{tag, KickCode};

/// A request to close a connection with a Kick.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KickNotice {
    /// Kick code.
    pub code: KickCode,
    /// Reason shown to the client.
    pub reason: String,
}

impl KickNotice {
    /// The notice as a session of protocol `version` is sent it (see [`KickCode::for_version`]).
    pub fn for_version(self, version: u32) -> KickNotice {
        KickNotice {
            code: self.code.for_version(version),
            reason: self.reason,
        }
    }
}

/// Outcome of handing a frame to a connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Offer {
    /// Queued.
    Queued,
    /// The outbox was full: the connection has been kicked as a slow consumer.
    Overflowed,
    /// The connection is gone.
    Closed,
}

/// Hands a State to the client's QUIC connection at once. It answers the frame back when it
/// cannot take it (NetSim may hold it back, or the connection is gone), and it then goes through
/// the session's writer as any other frame.
pub type DirectSend = Box<dyn Fn(Bytes) -> Result<(), Bytes> + Send + Sync>;

/// What a connection with a datagram path (a WebTransport session) shares with its zone: the
/// newest State its client acknowledged, written by the session as Inputs datagrams arrive and
/// read by the simulation before each patch (no queue, no waiting either way), the largest
/// State a datagram carries, and, once the session has written its Welcome, a way for States to
/// skip its writer.
pub struct DatagramPath {
    acked: AtomicU64,
    max_frame: AtomicUsize,
    /// Set once the session's Welcome is written: a State sent before it could overtake it.
    direct: OnceLock<DirectSend>,
    /// Cleared when the session ends: what is still sent goes to its closed outbox.
    direct_open: AtomicBool,
}

impl std::fmt::Debug for DatagramPath {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DatagramPath")
            .field("acked", &self.acked)
            .field("max_frame", &self.max_frame)
            .field("direct", &self.direct_open)
            .finish()
    }
}

impl DatagramPath {
    /// A path whose datagrams carry at most `max_frame` bytes.
    pub fn new(max_frame: usize) -> Self {
        Self {
            acked: AtomicU64::new(0),
            max_frame: AtomicUsize::new(max_frame),
            direct: OnceLock::new(),
            direct_open: AtomicBool::new(false),
        }
    }

    /// Whether `frame` goes to the client as a datagram: a State (§5.8) that fits one.
    /// Everything else (and a State too large) goes on the control stream, in order.
    pub fn carries(&self, frame: &[u8]) -> bool {
        frame.first() == Some(&tag::STATE) && frame.len() <= self.max_frame()
    }

    /// From now on, States the zone sends go to `send` instead of through the session's writer:
    /// a wake-up and a channel hop less per State. The first call wins.
    pub fn open_direct(&self, send: DirectSend) {
        if self.direct.set(send).is_ok() {
            self.direct_open.store(true, Ordering::Release);
        }
    }

    /// The session ended: States go to its (closed) outbox again.
    pub fn close_direct(&self) {
        self.direct_open.store(false, Ordering::Release);
    }

    /// Sends a State straight to the client when the direct path is open and it fits a
    /// datagram; otherwise answers the frame back.
    pub(crate) fn send_direct(&self, frame: Bytes) -> Result<(), Bytes> {
        match self.direct.get() {
            Some(send) if self.direct_open.load(Ordering::Acquire) && self.carries(&frame) => {
                send(frame)
            }
            _ => Err(frame),
        }
    }

    /// Notes an acknowledgement (an older one than already noted changes nothing).
    pub fn acknowledge(&self, tick: u64) {
        self.acked.fetch_max(tick, Ordering::Relaxed);
    }

    /// The newest acknowledged tick (0 = none).
    pub fn acked(&self) -> u64 {
        self.acked.load(Ordering::Relaxed)
    }

    /// The largest State a datagram carries now.
    pub fn max_frame(&self) -> usize {
        self.max_frame.load(Ordering::Relaxed)
    }
}

/// Where a connection's frames go.
#[derive(Debug, Clone)]
enum Outbox {
    /// A session task of its own reads them from a channel (WebTransport).
    Channel {
        tx: mpsc::Sender<Bytes>,
        kick: watch::Sender<Option<KickNotice>>,
    },
    /// An I/O thread takes them from the connection's link (WebSocket).
    Link(Arc<crate::net::ws::io::Link>),
    /// A client of a relay: they go over the relay's link, addressed to it.
    Relay(Arc<crate::net::relay::RelayedClient>),
}

/// The transport a connection came over, as the admin API names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transport {
    /// A WebSocket (`GET /zones/{zone_id}`), served by the I/O threads.
    WebSocket,
    /// A WebTransport session (HTTP/3 over QUIC).
    WebTransport,
    /// A client of a relay (`GET /relay/{zone_id}`), whose frames the relay builds.
    Relay,
}

impl Transport {
    /// `websocket` or `webtransport`.
    pub fn name(self) -> &'static str {
        match self {
            Transport::WebSocket => "websocket",
            Transport::WebTransport => "webtransport",
            Transport::Relay => "relay",
        }
    }
}

/// The sim side's handle on one connection.
#[derive(Debug, Clone)]
pub struct ConnHandle {
    /// Host-unique connection id.
    pub id: u64,
    outbox: Outbox,
    /// Bytes of the frames its zone queued to the connection so far (see [`Self::bytes_out`]).
    bytes_out: Arc<AtomicU64>,
    /// Present for a WebTransport session: its zone sends it States against acknowledged ticks.
    pub datagrams: Option<Arc<DatagramPath>>,
}

/// The session side's ends.
#[derive(Debug)]
pub struct ConnEnds {
    /// Frames to write, in order.
    pub outbox: mpsc::Receiver<Bytes>,
    /// Becomes `Some` when someone kicks the connection.
    pub kick: watch::Receiver<Option<KickNotice>>,
}

impl ConnHandle {
    /// A connection with an outbox of `capacity` frames.
    pub fn new(id: u64, capacity: usize) -> (Self, ConnEnds) {
        let (tx, rx) = mpsc::channel(capacity.max(1));
        let (ktx, krx) = watch::channel(None);
        (
            Self {
                id,
                outbox: Outbox::Channel { tx, kick: ktx },
                bytes_out: Arc::default(),
                datagrams: None,
            },
            ConnEnds {
                outbox: rx,
                kick: krx,
            },
        )
    }

    /// A connection whose frames an I/O thread takes from `link`.
    pub(crate) fn linked(id: u64, link: Arc<crate::net::ws::io::Link>) -> Self {
        Self {
            id,
            outbox: Outbox::Link(link),
            bytes_out: Arc::default(),
            datagrams: None,
        }
    }

    /// A client of a relay, whose messages go over the relay's link.
    pub(crate) fn relayed(id: u64, client: Arc<crate::net::relay::RelayedClient>) -> Self {
        Self {
            id,
            outbox: Outbox::Relay(client),
            bytes_out: Arc::default(),
            datagrams: None,
        }
    }

    /// The transport the connection came over: an I/O thread's link is a WebSocket, a session
    /// task's channel a WebTransport session.
    pub fn transport(&self) -> Transport {
        match self.outbox {
            Outbox::Channel { .. } => Transport::WebTransport,
            Outbox::Link(_) => Transport::WebSocket,
            Outbox::Relay(_) => Transport::Relay,
        }
    }

    /// For a client of a relay: the link its relay serves it over.
    pub(crate) fn relay_link(&self) -> Option<&Arc<crate::net::relay::LinkOut>> {
        match &self.outbox {
            Outbox::Relay(c) => Some(c.link()),
            _ => None,
        }
    }

    /// Bytes of the frames queued to the connection through [`offer`](Self::offer) so far: what
    /// its zone sent it (Welcome, Deltas and States, events, notices), not the Pongs its session
    /// answers Pings with itself (a WebSocket's never pass through here); a frame refused by a
    /// full outbox or a closed connection is not counted.
    pub fn bytes_out(&self) -> u64 {
        self.bytes_out.load(Ordering::Relaxed)
    }

    /// Counts `len` bytes queued when `offer` is [`Offer::Queued`]; answers `offer`.
    fn counted(&self, offer: Offer, len: usize) -> Offer {
        if offer == Offer::Queued {
            self.bytes_out.fetch_add(len as u64, Ordering::Relaxed);
        }
        offer
    }

    /// Queue a frame without waiting; a full outbox kicks the connection.
    pub fn offer(&self, frame: Bytes) -> Offer {
        let len = frame.len();
        let (tx, kick) = match &self.outbox {
            Outbox::Channel { tx, kick } => (tx, kick),
            Outbox::Link(link) => return self.counted(link.offer(frame), len),
            Outbox::Relay(c) => return self.counted(c.offer(&frame), len),
        };
        let frame = match self.datagrams.as_deref() {
            // A kicked session's writer is writing its Kick: nothing more goes to the client.
            Some(path) if kick.borrow().is_none() => match path.send_direct(frame) {
                Ok(()) => return self.counted(Offer::Queued, len),
                Err(frame) => frame,
            },
            _ => frame,
        };
        match tx.try_send(frame) {
            Ok(()) => self.counted(Offer::Queued, len),
            Err(mpsc::error::TrySendError::Full(_)) => {
                self.kick(
                    KickCode::SLOW_CONSUMER,
                    "outbox overflowed: the client is not reading fast enough",
                );
                Offer::Overflowed
            }
            Err(mpsc::error::TrySendError::Closed(_)) => Offer::Closed,
        }
    }

    /// Queue a frame the session itself answers with (a Pong), waiting while the outbox is full.
    ///
    /// Pongs share the outbox instead of a channel of their own (a tokio channel allocates a
    /// 32-slot block up front: ~1 kB per connection). Waiting here when the writer is behind (the
    /// client does not read) stops the session's reader too, so a client that pings without
    /// reading is slowed by TCP backpressure instead of losing pongs; the simulation's frames then
    /// overflow the outbox and the slow-consumer kick still ends such a session.
    pub async fn send_own(&self, frame: Bytes) {
        match &self.outbox {
            Outbox::Channel { tx, .. } => {
                let _ = tx.send(frame).await;
            }
            Outbox::Link(link) => {
                let _ = link.offer(frame);
            }
            Outbox::Relay(c) => {
                let _ = c.offer(&frame);
            }
        }
    }

    /// Ask the session to send a Kick and close. The first kick wins.
    pub fn kick(&self, code: KickCode, reason: impl Into<String>) {
        let reason = reason.into();
        let kick = match &self.outbox {
            Outbox::Channel { kick, .. } => kick,
            Outbox::Link(link) => return link.kick(KickNotice { code, reason }),
            Outbox::Relay(c) => return c.kick(code, &reason),
        };
        kick.send_if_modified(|slot| {
            if slot.is_none() {
                *slot = Some(KickNotice { code, reason });
                true
            } else {
                false
            }
        });
    }

    /// Whether a kick has been requested.
    pub fn is_kicked(&self) -> bool {
        match &self.outbox {
            Outbox::Channel { kick, .. } => kick.borrow().is_some(),
            Outbox::Link(link) => link.is_kicked(),
            Outbox::Relay(c) => c.is_kicked(),
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use std::sync::Mutex;

    use super::*;

    fn state(len: usize) -> Bytes {
        let mut b = vec![0u8; len];
        b[0] = tag::STATE;
        Bytes::from(b)
    }

    /// A session whose direct path records what it was handed.
    fn session(max_frame: usize) -> (ConnHandle, ConnEnds, Arc<Mutex<Vec<Bytes>>>) {
        let (mut conn, ends) = ConnHandle::new(1, 8);
        let path = Arc::new(DatagramPath::new(max_frame));
        let sent = Arc::new(Mutex::new(Vec::new()));
        let seen = Arc::clone(&sent);
        path.open_direct(Box::new(move |f| {
            seen.lock().unwrap().push(f);
            Ok(())
        }));
        conn.datagrams = Some(path);
        (conn, ends, sent)
    }

    #[test]
    fn states_that_fit_a_datagram_skip_the_writer_and_everything_else_keeps_its_order() {
        let (conn, mut ends, sent) = session(100);
        assert_eq!(conn.offer(state(100)), Offer::Queued);
        // Too large for a datagram, or no State: the writer sends it on the stream.
        assert_eq!(conn.offer(state(101)), Offer::Queued);
        assert_eq!(conn.offer(Bytes::from_static(&[0x83, 1])), Offer::Queued);
        assert_eq!(sent.lock().unwrap().len(), 1);
        assert_eq!(ends.outbox.try_recv().unwrap().len(), 101);
        assert_eq!(ends.outbox.try_recv().unwrap()[0], 0x83);
        assert_eq!(conn.bytes_out(), 203, "every frame counted once");
    }

    #[test]
    fn a_kicked_or_ended_session_sends_no_more_states_past_its_writer() {
        let (conn, mut ends, sent) = session(100);
        conn.kick(KickCode::SLOW_CONSUMER, "test");
        assert_eq!(conn.offer(state(10)), Offer::Queued);
        assert!(sent.lock().unwrap().is_empty(), "a Kick is being written");
        assert_eq!(ends.outbox.try_recv().unwrap().len(), 10);

        let (conn, ends, sent) = session(100);
        conn.datagrams.as_deref().unwrap().close_direct();
        drop(ends);
        assert_eq!(conn.offer(state(10)), Offer::Closed, "the session is gone");
        assert!(sent.lock().unwrap().is_empty());
    }

    #[test]
    fn a_state_the_direct_path_refuses_goes_through_the_writer() {
        let (mut conn, mut ends) = ConnHandle::new(1, 8);
        let path = Arc::new(DatagramPath::new(100));
        // Not open yet (the Welcome is not written): the writer keeps the order.
        conn.datagrams = Some(Arc::clone(&path));
        assert_eq!(conn.offer(state(10)), Offer::Queued);
        assert_eq!(ends.outbox.try_recv().unwrap().len(), 10);
        // Open, but refusing (NetSim in use): the writer again.
        path.open_direct(Box::new(Err));
        assert_eq!(conn.offer(state(11)), Offer::Queued);
        assert_eq!(ends.outbox.try_recv().unwrap().len(), 11);
    }
}
