//! The WebTransport endpoint (PROTOCOL.md §1.1): HTTP/3 over QUIC on a UDP port, serving the same
//! zones, tickets and sessions as the WebSocket path, with States and Inputs in datagrams so that a
//! lost packet never holds back the next frame.
//!
//! The endpoint owns its certificate: a configured PEM chain and key, or in dev mode one it makes
//! at start (ECDSA P-256, valid for 14 days, the longest a browser accepts for a pinned hash), whose
//! SHA-256 hash `GET /webtransport` publishes for the SDK's `serverCertificateHashes`.
//!
//! UDP source addresses can be forged, so the endpoint keeps nothing for an address that has not
//! proved it receives: a first Initial from one is answered with a stateless Retry (a few hundred
//! bytes, within RFC 9000 §8.1's 3x), and only the Initial carrying the Retry's token (or an
//! address validation token from an earlier connection) starts a handshake. Handshakes in progress
//! are bounded on their own (`webtransport_max_handshakes`, per address `max_connections_per_ip`)
//! and hold none of the connection slots TCP clients use; a session takes one when its CONNECT
//! request arrives, as a TCP socket does at accept.
//!
//! - `endpoint`: the certificate, the QUIC settings and the accept loop, which a relay's
//!   endpoint (`net::relay::process`) is too.
//! - `control`: the control stream up to the Hello, and the closing Kick (a host's and a relay's).
//! - `framing`: stream messages, which frames go as datagrams, Inputs datagrams.
//! - `reader`: the datagram reader's task, the idle clock and the direct State path (a host's
//!   and a relay's sessions).
//! - `session`: a host's session.

pub(crate) mod control;
pub(crate) mod endpoint;
pub(crate) mod framing;
pub(crate) mod reader;
mod session;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::Serialize;

use crate::host::Shared;
use crate::net::conn_limit::ConnLimiter;

/// The only versions a WebTransport session speaks (PROTOCOL.md §1.1), at a host or a relay.
pub(crate) const VERSIONS: [u32; 6] = [
    zonekeep_protocol::limits::DATAGRAM_VERSION,
    zonekeep_protocol::messages::ENTRIES_PROTOCOL,
    zonekeep_protocol::messages::TRANSFER_PROTOCOL,
    zonekeep_protocol::messages::HALT_PROTOCOL,
    zonekeep_protocol::messages::CHARACTER_PROTOCOL,
    zonekeep_protocol::messages::CHAT_PROTOCOL,
];

/// How long QUIC waits before it gives a silent connection up: longer than the session's own
/// idle timeout by the time its IDLE_TIMEOUT Kick and close may take (twice the Kick's write
/// timeout) and a second, so a client that stopped talking is told why, and QUIC's timeout only
/// ends a connection whose client vanished.
pub(crate) fn quic_idle(idle_timeout_ms: u64, kick_write_timeout_ms: u64) -> Duration {
    Duration::from_millis(
        idle_timeout_ms
            .saturating_add(kick_write_timeout_ms.saturating_mul(2))
            .saturating_add(1_000),
    )
}

/// What `GET /webtransport` tells a client: where to open a session and which certificate to pin.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Published {
    /// The endpoint's port; the route answers with the address the request came to.
    #[serde(skip)]
    pub port: u16,
    /// SHA-256 hashes of a self-signed development certificate (empty for a configured one).
    pub certificate_hashes: Vec<CertificateHash>,
}

/// One `serverCertificateHashes` entry.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct CertificateHash {
    /// Always `sha-256`.
    pub algorithm: &'static str,
    /// The hash, base64.
    pub value: String,
}

/// Why the endpoint did not start.
#[derive(Debug, thiserror::Error)]
pub enum WebTransportError {
    /// The development certificate could not be made.
    #[error("webtransport: making the development certificate: {0}")]
    Certificate(String),
    /// The configured certificate or key could not be read.
    #[error("webtransport: loading {path}: {error}")]
    Pem {
        /// The file.
        path: String,
        /// What went wrong.
        error: String,
    },
    /// The UDP socket could not be bound.
    #[error("webtransport: binding udp {addr}: {error}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// What went wrong.
        error: std::io::Error,
    },
}

/// Binds the endpoint at `addr` (when its port is taken and `addr` shares the HTTP listener's
/// port by default, any free port), publishes it, and serves sessions until shutdown.
pub(crate) async fn start(
    shared: &Arc<Shared>,
    addr: SocketAddr,
    limiter: ConnLimiter,
    tasks: &tokio_util::task::TaskTracker,
) -> Result<SocketAddr, WebTransportError> {
    let cfg = &shared.config;
    let settings = endpoint::EndpointSettings {
        cert: cfg.webtransport_cert.clone(),
        key: cfg.webtransport_key.clone(),
        idle: quic_idle(cfg.idle_timeout_ms, cfg.kick_write_timeout_ms),
        max_handshakes: cfg.webtransport_max_handshakes,
        max_handshakes_per_ip: cfg.max_connections_per_ip,
        any_port_if_taken: cfg.webtransport.is_none(),
        threads: cfg.webtransport_thread_count(),
    };
    let netsim = Arc::clone(shared);
    let serving = Arc::clone(shared);
    let published = endpoint::start(
        &settings,
        addr,
        Arc::clone(&shared.metrics),
        shared.shutdown.clone(),
        tasks,
        move || netsim.netsim.get().block_udp,
        move |incoming, handshake| {
            session::run(incoming, Arc::clone(&serving), limiter.clone(), handshake)
        },
    )
    .await?;
    let local = SocketAddr::new(addr.ip(), published.port);
    let _ = shared.webtransport.set(published);
    Ok(local)
}

/// The answer to `GET /webtransport` (PROTOCOL.md §1.1): where the endpoint listens, named from
/// the host the request was sent to, and which certificate hash to pin; 404 when WebTransport is
/// off. A host and a relay answer alike.
pub(crate) fn published_answer(published: Option<&Published>, headers: &HeaderMap) -> Response {
    let Some(p) = published else {
        return crate::host::json_error(
            StatusCode::NOT_FOUND,
            "webtransport_off",
            "this host does not serve WebTransport",
        );
    };
    // The name the client reached this host by (what its certificate must name too), without
    // the HTTP port; brackets stay around an IPv6 literal.
    let host = headers
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .map(|h| match h.rsplit_once(':') {
            Some((name, port)) if port.bytes().all(|b| b.is_ascii_digit()) => name,
            _ => h,
        })
        .filter(|h| !h.is_empty())
        .unwrap_or("127.0.0.1")
        .to_owned();
    let body = serde_json::json!({
        "url": format!("https://{host}:{}", p.port),
        "certificate_hashes": p.certificate_hashes,
    });
    axum::Json(body).into_response()
}
