//! What an I/O thread serves a connection for, and the settings every connection of its threads
//! shares.
//!
//! The I/O threads move bytes; what the bytes mean belongs to the connection's [`Peer`]. On a
//! host the peer is the participant's session (its inputs go to its zone); on a relay it is the
//! relayed client (its messages go over its zone's link to the origin). One poll loop, one set of
//! guarantees (slow readers kicked, read progress probed, hostile frames refused) serves both.

use std::time::Duration;

use bytes::Bytes;

use crate::config::ServerConfig;
use crate::error::SessionError;
use crate::net::conn::KickNotice;
use crate::net::netsim::ConnNetSim;

/// One connection's session, as its I/O thread drives it.
pub(crate) trait Peer: Send + 'static {
    /// One binary message from the client, within the size limit. `Ok(Some(frame))` is a reply
    /// (a Pong) that goes behind the frames already on their way; an error ends the connection
    /// with its Kick.
    fn message(&mut self, bytes: &[u8]) -> Result<Option<Bytes>, SessionError>;

    /// A read-progress Ping was answered after `rtt`.
    fn round_trip(&mut self, rtt: Duration) {
        let _ = rtt;
    }

    /// The protocol version the client speaks: a Kick is sent in its codes.
    fn version(&self) -> u32;

    /// NetSim (dev): what delays and drops this connection's messages; none by default.
    fn netsim(&self) -> Option<&ConnNetSim> {
        None
    }

    /// Looked at every timer scan (about 20 times a second): a reason to end the connection now
    /// that nothing else would deliver (its zone's link went away).
    fn check(&mut self) -> Option<KickNotice> {
        None
    }

    /// The connection ended, however it ended (called once).
    fn ended(&mut self);
}

/// The socket and WebSocket settings every connection of a set of I/O threads shares.
#[derive(Debug, Clone)]
pub(crate) struct IoSettings {
    /// Largest client message; over it the client is kicked with MESSAGE_TOO_LARGE.
    pub(crate) max_message_bytes: usize,
    /// tungstenite's read buffer.
    pub(crate) read_buffer_bytes: usize,
    /// Bytes gathered before a write (a batch is written at its end whatever its size).
    pub(crate) write_buffer_bytes: usize,
    /// Most bytes waiting in a connection's WebSocket write buffer; past it the reader is ended.
    pub(crate) max_write_buffer_bytes: usize,
    /// NetSim's per-direction queue bound (dev).
    pub(crate) outbox_frames: usize,
    /// A client that sends nothing for this long is closed (IDLE_TIMEOUT).
    pub(crate) idle_timeout: Duration,
    /// A client that leaves a read-progress Ping unanswered this long is kicked.
    pub(crate) read_progress_timeout: Duration,
    /// How long a closing connection lingers for the client's Close.
    pub(crate) close_timeout: Duration,
}

impl IoSettings {
    /// A host's settings.
    pub(crate) fn of(cfg: &ServerConfig) -> Self {
        Self {
            max_message_bytes: cfg.max_message_bytes,
            read_buffer_bytes: cfg.read_buffer_bytes,
            write_buffer_bytes: cfg.write_buffer_bytes,
            max_write_buffer_bytes: cfg.max_write_buffer_bytes,
            outbox_frames: cfg.outbox_frames,
            idle_timeout: Duration::from_millis(cfg.idle_timeout_ms),
            read_progress_timeout: Duration::from_millis(cfg.read_progress_timeout_ms),
            close_timeout: Duration::from_millis(cfg.kick_write_timeout_ms),
        }
    }

    /// tungstenite's configuration for a connection of these settings, with `write_buffer`
    /// bytes gathered before a write. Its own caps sit at twice the message limit, so that a
    /// message a little over it arrives whole and gets a precise MESSAGE_TOO_LARGE.
    pub(crate) fn websocket(&self, write_buffer: usize) -> tungstenite::protocol::WebSocketConfig {
        let hard = self.max_message_bytes.saturating_mul(2);
        tungstenite::protocol::WebSocketConfig::default()
            .max_message_size(Some(hard))
            .max_frame_size(Some(hard))
            .read_buffer_size(self.read_buffer_bytes)
            .write_buffer_size(write_buffer)
            .max_write_buffer_size(self.max_write_buffer_bytes.max(write_buffer + 1))
    }
}
