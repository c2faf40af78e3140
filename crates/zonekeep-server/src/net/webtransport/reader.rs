//! What a session's readers and the zone's thread share, at a host and at a relay alike: the
//! datagram reader on a task of its own, the clock of when the client was last heard from (the
//! idle timeout counts both readers), and the direct path a zone's States take to the QUIC
//! connection once the session's Welcome is out.
//!
//! The datagram reader is a task of its own because a datagram then wakes only it: in a
//! `select!` beside the stream reader and the writer, each datagram polled all three again.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use tokio::task::JoinHandle;
use tokio::time::Instant;
use wtransport::Connection;
use zonekeep_protocol::messages::KickCode;

use crate::error::SessionError;
use crate::metrics::Metrics;
use crate::net::conn::{DirectSend, KickNotice};

/// When the client was last heard from, on the control stream or in a datagram (for the idle
/// timeout), as microseconds since the session's start.
pub(crate) struct LastSeen {
    origin: Instant,
    micros: AtomicU64,
}

impl LastSeen {
    /// A clock that heard the client now.
    pub(crate) fn new() -> Self {
        Self {
            origin: Instant::now(),
            micros: AtomicU64::new(0),
        }
    }

    /// The client was heard from at `at`.
    pub(crate) fn heard(&self, at: Instant) {
        let us = u64::try_from(at.saturating_duration_since(self.origin).as_micros())
            .unwrap_or(u64::MAX);
        self.micros.fetch_max(us, Ordering::Relaxed);
    }

    /// When the client was last heard from.
    pub(crate) fn at(&self) -> Instant {
        self.origin + Duration::from_micros(self.micros.load(Ordering::Relaxed))
    }
}

/// A session's datagram reader, on a task of its own and ended with the session (dropping this
/// aborts it).
pub(crate) struct DatagramReader(JoinHandle<Result<(), SessionError>>);

impl DatagramReader {
    /// Runs `reader` on a task of its own.
    pub(crate) fn spawn(
        reader: impl std::future::Future<Output = Result<(), SessionError>> + Send + 'static,
    ) -> Self {
        Self(tokio::spawn(reader))
    }

    /// How the reader ended: the error that ends the session, or none when the client is gone.
    /// A reader that failed (a panic) is the server's fault, and the client is told so.
    pub(crate) async fn ended(&mut self) -> Option<SessionError> {
        match (&mut self.0).await {
            Ok(Ok(())) => None,
            Ok(Err(e)) => Some(e),
            Err(e) => {
                tracing::error!(error = %e, "a WebTransport session's datagram reader failed");
                Some(SessionError::Notice(KickNotice {
                    code: KickCode::INTERNAL_ERROR,
                    reason: "the server failed reading the session's datagrams".into(),
                }))
            }
        }
    }
}

impl Drop for DatagramReader {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// States straight to `connection` (see [`DirectSend`]) unless `held` says a State must go
/// through the session's writer (a dev host's NetSim holds them back there). A connection that
/// is gone answers the State back, to the writer's closed outbox; one QUIC refuses for another
/// reason is counted and dropped, as the writer drops it.
pub(crate) fn direct_send(
    connection: &Connection,
    metrics: Arc<Metrics>,
    held: impl Fn() -> bool + Send + Sync + 'static,
) -> DirectSend {
    let connection = connection.clone();
    Box::new(move |frame: Bytes| {
        if held() {
            return Err(frame);
        }
        match connection.send_datagram(&frame) {
            Ok(()) => Ok(()),
            Err(wtransport::error::SendDatagramError::NotConnected) => Err(frame),
            Err(_) => {
                metrics.datagram_send_failed();
                Ok(())
            }
        }
    })
}
