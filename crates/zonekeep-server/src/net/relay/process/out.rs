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

    /// Queue a frame without waiting (a State that fits a datagram goes to the client's QUIC
    /// connection at once, once its session opened the direct path); a full outbox ends the
    /// session as a slow consumer.
    pub(crate) fn offer(&self, frame: Bytes) -> Offer {
        if self.end.borrow().is_some() {
            return Offer::Closed;
        }
        let frame = match self.datagrams.as_deref() {
            Some(path) => match path.send_direct(frame) {
                Ok(()) => return Offer::Queued,
                Err(frame) => frame,
            },
            None => frame,
        };
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

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn frame(n: u8) -> Bytes {
        Bytes::from(vec![n])
    }

    #[test]
    fn a_full_outbox_ends_the_session_as_a_slow_consumer_without_waiting() {
        let (out, mut ends) = SessionOut::new(2, None);
        let out = ClientOut::WebTransport(out);
        assert_eq!(out.offer(frame(1)), Offer::Queued);
        assert_eq!(out.offer(frame(2)), Offer::Queued);
        assert_eq!(out.offer(frame(3)), Offer::Overflowed);
        let end = ends.end.borrow_and_update().clone();
        assert!(
            matches!(end, Some(End::Kick(ref k)) if k.code == KickCode::SLOW_CONSUMER),
            "{end:?}"
        );
        // Asked to end: nothing more is queued, and a later kick does not replace the first.
        assert_eq!(out.offer(frame(4)), Offer::Closed);
        out.kick(KickNotice {
            code: KickCode::ZONE_MOVED,
            reason: "later".into(),
        });
        let end = ends.end.borrow().clone();
        assert!(matches!(end, Some(End::Kick(ref k)) if k.code == KickCode::SLOW_CONSUMER));
        assert_eq!(ends.frames.try_recv().unwrap(), frame(1));
        assert_eq!(ends.frames.try_recv().unwrap(), frame(2));
        assert!(ends.frames.try_recv().is_err());
    }

    #[test]
    fn a_close_keeps_what_was_queued_before_it_and_wins_over_a_later_kick() {
        let (out, mut ends) = SessionOut::new(4, Some(Arc::new(DatagramPath::new(1200))));
        let out = ClientOut::WebTransport(out);
        assert_eq!(out.datagrams().map(DatagramPath::max_frame), Some(1200));
        assert_eq!(out.offer(frame(7)), Offer::Queued);
        out.close();
        out.kick(KickNotice {
            code: KickCode::ZONE_MOVED,
            reason: "later".into(),
        });
        assert!(matches!(*ends.end.borrow(), Some(End::Close)));
        assert_eq!(ends.frames.try_recv().unwrap(), frame(7));
    }

    #[test]
    fn states_skip_the_outbox_once_the_direct_path_opens_and_not_after_an_ending() {
        let path = Arc::new(DatagramPath::new(100));
        let (out, mut ends) = SessionOut::new(4, Some(Arc::clone(&path)));
        let client = ClientOut::WebTransport(Arc::clone(&out));
        let state = |len: usize| {
            let mut b = vec![0u8; len];
            b[0] = zonekeep_protocol::messages::tag::STATE;
            Bytes::from(b)
        };
        // Before the Welcome is written, a State keeps its place behind it.
        assert_eq!(client.offer(state(10)), Offer::Queued);
        assert_eq!(ends.frames.try_recv().unwrap().len(), 10);
        let sent = Arc::new(std::sync::Mutex::new(Vec::new()));
        let seen = Arc::clone(&sent);
        path.open_direct(Box::new(move |f| {
            seen.lock().unwrap().push(f.len());
            Ok(())
        }));
        assert_eq!(client.offer(state(100)), Offer::Queued);
        assert_eq!(
            client.offer(state(101)),
            Offer::Queued,
            "too large: the stream"
        );
        assert_eq!(
            client.offer(frame(7)),
            Offer::Queued,
            "no State: the stream"
        );
        assert_eq!(*sent.lock().unwrap(), vec![100]);
        assert_eq!(ends.frames.try_recv().unwrap().len(), 101);
        assert_eq!(ends.frames.try_recv().unwrap(), frame(7));
        // Asked to end: nothing more goes anywhere.
        client.kick(KickNotice {
            code: KickCode::SLOW_CONSUMER,
            reason: "test".into(),
        });
        assert_eq!(client.offer(state(10)), Offer::Closed);
        assert_eq!(sent.lock().unwrap().len(), 1);
    }
}
