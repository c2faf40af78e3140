//! The client's one error enum.

use zonekeep_protocol::messages::Kick;
use zonekeep_protocol::mirror::MirrorError;
use zonekeep_protocol::{DecodeError, EncodeError};

/// Everything that can go wrong talking to a zone.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The WebSocket transport failed (connect, read or write).
    #[error("websocket: {0}")]
    WebSocket(#[from] Box<tokio_tungstenite::tungstenite::Error>),
    /// The host sent Kick; it closes the connection after it.
    #[error("kicked: {} ({})", .0.code, .0.reason)]
    Kicked(Kick),
    /// The host refused this client's content version with Kick CONTENT_OUTDATED (PROTOCOL.md
    /// §4.1.2): it was built for older game content than the host accepts. Final: retrying cannot
    /// help, the application must update (or reload) the client. The reason names the content
    /// version the host needs; the ticket presented was not spent.
    #[error("the client's content is outdated, update or reload it: {}", .0.reason)]
    ContentOutdated(Kick),
    /// A server message could not be decoded.
    #[error("undecodable server message: {0}")]
    Decode(#[from] DecodeError),
    /// A Delta did not fit the known set.
    #[error("delta does not apply: {0}")]
    Mirror(#[from] MirrorError),
    /// A client message could not be encoded (e.g. an input payload over the limit).
    #[error("cannot encode: {0}")]
    Encode(#[from] EncodeError),
    /// No Welcome (or Kick) arrived within the handshake timeout.
    #[error("no Welcome within the handshake timeout")]
    HandshakeTimeout,
    /// A Redirect named a URL that is not an absolute `ws://` or `wss://` URL (PROTOCOL.md §5.3.1);
    /// it was not followed.
    #[error("redirected to a URL that is not ws:// or wss://: {0}")]
    RedirectScheme(String),
    /// The connection attempt was redirected more often than a client follows (PROTOCOL.md
    /// §5.3.1): this many Redirects were followed and one more arrived.
    #[error("too many redirects: another after {0}")]
    TooManyRedirects(u32),
    /// The host answered with a version the client did not offer.
    #[error("host chose protocol version {0}, which was not offered")]
    VersionMismatch(u32),
    /// A message that is valid but out of place (e.g. a Delta before Welcome, a text frame).
    #[error("protocol violation: {0}")]
    Protocol(&'static str),
    /// The host closed the connection during the handshake.
    #[error("connection closed during the handshake")]
    ClosedDuringHandshake,
    /// A WebTransport session could not be found or opened (PROTOCOL.md §1.1).
    #[error("webtransport: {0}")]
    WebTransport(String),
    /// The outgoing queue is full: the connection is reconnecting or the network is slower than
    /// the inputs. The input was not sent and no sequence number was used.
    #[error("outgoing queue full")]
    Backpressure,
    /// The connection is closed; nothing more can be sent.
    #[error("connection closed")]
    Closed,
    /// The application's fresh-ticket callback failed.
    #[error("fresh ticket unavailable: {0}")]
    Ticket(String),
}

impl From<tokio_tungstenite::tungstenite::Error> for ClientError {
    fn from(e: tokio_tungstenite::tungstenite::Error) -> Self {
        ClientError::WebSocket(Box::new(e))
    }
}
