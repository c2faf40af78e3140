//! Relays: processes that serve a zone's clients for its host (the origin), for zones with more
//! clients than one host can write to.
//!
//! A relay keeps one link per zone to the zone's host (`GET /relay/{zone_id}`, a WebSocket
//! opened with the relay credential). Over it the relay forwards each client's Hello and later
//! messages; the origin admits the client exactly as a direct one (its ticket verified there,
//! its reconnect token spent there) and answers over the link. The origin builds no frames for
//! a relayed client: each patch it sends the link the world feed and what changed of the
//! link's participants ([`zonekeep_core::relay`]), and the relay's own replicator builds every
//! client's frame from its replica of the world. So the origin's cost per patch is the feed's
//! once per link, whatever the number of clients behind it.
//!
//! - `wire`: the link's messages.
//! - `origin`: the origin's end of a link.
//! - [`process`]: the relay process (`zonekeep relay`).
//!
//! A relay cannot forge a principal: it never says who a client is; it forwards the client's
//! own Hello, whose ticket the origin verifies. It cannot open a link without the relay
//! credential, which the origin compares in constant time.

pub(crate) mod origin;
pub(crate) mod placement;
pub mod process;
pub(crate) mod wire;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use bytes::Bytes;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use zonekeep_protocol::messages::KickCode;

use crate::net::conn::Offer;

/// The origin's end of one relay link: the bounded queue of messages its writer sends the
/// relay. Nothing waits on it: a full queue closes the link (the relay is not keeping up), and
/// the relay's clients resume.
#[derive(Debug)]
pub struct LinkOut {
    id: u64,
    tx: mpsc::Sender<Bytes>,
    closed: CancellationToken,
    /// Messages refused because the queue was full (the link then closed).
    overflowed: AtomicU64,
    /// Its zone follows it (a relayed player was admitted over it): new players may be placed
    /// on its relay.
    followed: AtomicBool,
}

impl LinkOut {
    /// A link's end whose writer reads `tx`'s receiver.
    pub(crate) fn new(id: u64, tx: mpsc::Sender<Bytes>) -> Self {
        Self {
            id,
            tx,
            closed: CancellationToken::new(),
            overflowed: AtomicU64::new(0),
            followed: AtomicBool::new(false),
        }
    }

    /// Its zone follows it.
    pub(crate) fn mark_followed(&self) {
        self.followed.store(true, Ordering::Relaxed);
    }

    /// Whether its zone follows it.
    pub(crate) fn is_followed(&self) -> bool {
        self.followed.load(Ordering::Relaxed)
    }

    /// The link's host-unique id.
    pub fn id(&self) -> u64 {
        self.id
    }

    /// Queue a message without waiting; false when the link is closed or its queue full (which
    /// closes it).
    pub(crate) fn send(&self, msg: Bytes) -> bool {
        if self.closed.is_cancelled() {
            return false;
        }
        match self.tx.try_send(msg) {
            Ok(()) => true,
            Err(mpsc::error::TrySendError::Full(_)) => {
                self.overflowed.fetch_add(1, Ordering::Relaxed);
                self.closed.cancel();
                false
            }
            Err(mpsc::error::TrySendError::Closed(_)) => {
                self.closed.cancel();
                false
            }
        }
    }

    /// Whether the link is closed (ended, or overflowed).
    pub fn is_closed(&self) -> bool {
        self.closed.is_cancelled()
    }

    /// Closes the link.
    pub(crate) fn close(&self) {
        self.closed.cancel();
    }

    /// Resolves once the link is closed.
    pub(crate) async fn closed(&self) {
        self.closed.cancelled().await
    }
}

/// A client of a relay as its zone holds it: its messages go over the link, addressed to it.
#[derive(Debug)]
pub struct RelayedClient {
    link: Arc<LinkOut>,
    client: u32,
    kicked: AtomicBool,
}

impl RelayedClient {
    /// Client `client` of the relay at the other end of `link`.
    pub(crate) fn new(link: Arc<LinkOut>, client: u32) -> Self {
        Self {
            link,
            client,
            kicked: AtomicBool::new(false),
        }
    }

    /// The link its relay serves it over.
    pub(crate) fn link(&self) -> &Arc<LinkOut> {
        &self.link
    }

    /// Queue one server message for the client.
    pub(crate) fn offer(&self, frame: &[u8]) -> Offer {
        if self.kicked.load(Ordering::Relaxed) || self.link.is_closed() {
            return Offer::Closed;
        }
        match self.link.send(wire::to_client(self.client, frame)) {
            true => Offer::Queued,
            false => Offer::Overflowed,
        }
    }

    /// Close the client with a Kick; the first kick wins.
    pub(crate) fn kick(&self, code: KickCode, reason: &str) {
        if !self.kicked.swap(true, Ordering::Relaxed) {
            let _ = self.link.send(wire::kick(self.client, code, reason));
        }
    }

    /// Whether the client was kicked.
    pub(crate) fn is_kicked(&self) -> bool {
        self.kicked.load(Ordering::Relaxed)
    }
}
