//! Where a zone's thread queues a client's frames, whatever the client's transport: a WebSocket
//! client's link on its I/O thread, or a WebTransport client's session outbox. Either way the
//! thread only pushes (never waits), a full queue kicks the client as a slow consumer, and a
//! kick or an ending is a request its transport carries out.

use std::sync::Arc;

use bytes::Bytes;
use tokio::sync::{mpsc, watch};
use zonekeep_protocol::messages::KickCode;

use crate::net::conn::{DatagramPath, KickNotice, Offer};
use crate::net::ws::io::Link;

/// A relayed client's outbound queue.
pub(crate) enum ClientOut {
    /// A WebSocket client: its connection's link on its I/O thread.
    WebSocket(Arc<Link>),
    /// A WebTransport client: its session's outbox.
    WebTransport(Arc<SessionOut>),
}

impl ClientOut {
    /// Queue a frame without waiting; a full queue kicks the client (SLOW_CONSUMER).
    pub(crate) fn offer(&self, frame: Bytes) -> Offer {
        match self {
            ClientOut::WebSocket(link) => link.offer(frame),
            ClientOut::WebTransport(s) => s.offer(frame),
        }
    }

    /// Close the client with a Kick; the first ending wins.
    pub(crate) fn kick(&self, notice: KickNotice) {
        match self {
            ClientOut::WebSocket(link) => link.kick(notice),
            ClientOut::WebTransport(s) => s.end(End::Kick(notice)),
        }
    }

    /// End the client's connection without a Kick once the frames queued before are sent (a
    /// Transfer was its last message); the first ending wins.
    pub(crate) fn close(&self) {
        match self {
            ClientOut::WebSocket(link) => link.close(),
            ClientOut::WebTransport(s) => s.end(End::Close),
        }
    }

    /// The client's datagram path, when it takes States in datagrams.
    pub(crate) fn datagrams(&self) -> Option<&DatagramPath> {
        match self {
            ClientOut::WebSocket(_) => None,
            ClientOut::WebTransport(s) => s.datagrams.as_deref(),
        }
    }
}

/// How a WebTransport client's session is asked to end.
#[derive(Debug, Clone)]
pub(crate) enum End {
    /// Send this Kick and close.
    Kick(KickNotice),
    /// Send what is queued, then close without a Kick.
    Close,
}

/// A WebTransport client's outbox as its zone's thread holds it: bounded, never waited on.
#[derive(Debug)]
pub(crate) struct SessionOut {
    frames: mpsc::Sender<Bytes>,
    end: watch::Sender<Option<End>>,
    /// What the client acknowledged (its Inputs datagrams) and the largest State a datagram
    /// carries; `None` when the session has no datagrams.
    datagrams: Option<Arc<DatagramPath>>,
}

/// The session's ends of a [`SessionOut`].
#[derive(Debug)]
pub(crate) struct SessionEnds {
    /// Frames to send, in order.
    pub frames: mpsc::Receiver<Bytes>,
    /// Becomes `Some` when the session is to end.
    pub end: watch::Receiver<Option<End>>,
}

impl SessionOut {
    /// An outbox of `capacity` frames for a session with `datagrams`.
    pub(crate) fn new(
        capacity: usize,
        datagrams: Option<Arc<DatagramPath>>,
    ) -> (Arc<Self>, SessionEnds) {
        let (tx, rx) = mpsc::channel(capacity.max(1));
        let (etx, erx) = watch::channel(None);
        let out = Arc::new(Self {
            frames: tx,
            end: etx,
            datagrams,
        });
        (
            out,
            SessionEnds {
                frames: rx,
                end: erx,
            },
        )
    }

    /// Queue a frame without waiting; a full outbox ends the session as a slow consumer.
    pub(crate) fn offer(&self, frame: Bytes) -> Offer {
        if self.end.borrow().is_some() {
            return Offer::Closed;
        }
        match self.frames.try_send(frame) {
            Ok(()) => Offer::Queued,
            Err(mpsc::error::TrySendError::Full(_)) => {
                self.end(End::Kick(KickNotice {
                    code: KickCode::SLOW_CONSUMER,
                    reason: "outbox overflowed: the client is not reading fast enough".into(),
                }));
                Offer::Overflowed
            }
            Err(mpsc::error::TrySendError::Closed(_)) => Offer::Closed,
        }
    }

    /// Queue a frame the session answers with itself (a Pong), waiting while the outbox is
    /// full: a client that pings without reading stops being read, and its frames then
    /// overflow the outbox and end it.
    pub(crate) async fn send_own(&self, frame: Bytes) {
        let _ = self.frames.send(frame).await;
    }

    /// Ask the session to end; the first ending wins.
    pub(crate) fn end(&self, how: End) {
        self.end.send_if_modified(|slot| {
            if slot.is_none() {
                *slot = Some(how);
                true
            } else {
                false
            }
        });
    }
}
