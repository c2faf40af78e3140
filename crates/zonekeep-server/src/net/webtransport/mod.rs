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

mod framing;
mod session;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use base64::Engine;
use serde::Serialize;
use wtransport::{Endpoint, Identity, ServerConfig};

use crate::host::Shared;
use crate::net::conn_limit::{Admission, ConnLimiter};

/// Initials the QUIC endpoint holds before the accept loop decides on them (each holds its first
/// packet, about 1.2 kB; more are refused by the endpoint itself). The loop decides at once, so
/// these are only the ones arriving while it waits for a core.
const MAX_INCOMING: usize = 1024;
/// Further packets buffered for one undecided Initial (0-RTT data), and for all of them.
const INCOMING_BUFFER: u64 = 16 << 10;
const INCOMING_BUFFER_TOTAL: u64 = 1 << 20;

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

/// The identity the endpoint presents, and the hashes to publish for it.
async fn identity(shared: &Shared) -> Result<(Identity, Vec<CertificateHash>), WebTransportError> {
    let cfg = &shared.config;
    if let (Some(cert), Some(key)) = (&cfg.webtransport_cert, &cfg.webtransport_key) {
        let id = Identity::load_pemfiles(cert, key)
            .await
            .map_err(|e| WebTransportError::Pem {
                path: format!("{} / {}", cert.display(), key.display()),
                error: e.to_string(),
            })?;
        return Ok((id, Vec::new()));
    }
    let id = Identity::self_signed_builder()
        .subject_alt_names(["localhost", "127.0.0.1", "::1"])
        .from_now_utc()
        .validity_days(14)
        .build()
        .map_err(|e| WebTransportError::Certificate(e.to_string()))?;
    let hashes = id
        .certificate_chain()
        .as_slice()
        .iter()
        .take(1)
        .map(|c| CertificateHash {
            algorithm: "sha-256",
            value: base64::engine::general_purpose::STANDARD.encode(c.hash().as_ref()),
        })
        .collect();
    Ok((id, hashes))
}

/// Binds the endpoint at `addr` (when its port is taken and `addr` shares the HTTP listener's
/// port by default, any free port), publishes it, and serves sessions until shutdown.
pub(crate) async fn start(
    shared: &Arc<Shared>,
    addr: SocketAddr,
    limiter: ConnLimiter,
    tasks: &tokio_util::task::TaskTracker,
) -> Result<SocketAddr, WebTransportError> {
    let (identity, certificate_hashes) = identity(shared).await?;
    let idle = Duration::from_millis(shared.config.idle_timeout_ms);
    let config = |addr: SocketAddr, identity: Identity| {
        ServerConfig::builder()
            .with_bind_address(addr)
            .with_identity(identity)
            .keep_alive_interval(Some(Duration::from_secs(3)))
            .max_idle_timeout(Some(idle))
            .map(|b| {
                let mut config = b.build();
                config
                    .quic_config_mut()
                    .max_incoming(MAX_INCOMING)
                    .incoming_buffer_size(INCOMING_BUFFER)
                    .incoming_buffer_size_total(INCOMING_BUFFER_TOTAL);
                config
            })
    };
    let bind = |addr| {
        config(addr, identity.clone_identity())
            .map_err(|e| std::io::Error::other(e.to_string()))
            .and_then(Endpoint::server)
    };
    let endpoint = match bind(addr) {
        Ok(e) => e,
        Err(e) if addr.port() != 0 && shared.config.webtransport.is_none() => {
            tracing::info!(%addr, error = %e, "webtransport: port taken, using any free port");
            bind(SocketAddr::new(addr.ip(), 0))
                .map_err(|error| WebTransportError::Bind { addr, error })?
        }
        Err(error) => return Err(WebTransportError::Bind { addr, error }),
    };
    let local = endpoint
        .local_addr()
        .map_err(|error| WebTransportError::Bind { addr, error })?;
    let _ = shared.webtransport.set(Published {
        port: local.port(),
        certificate_hashes,
    });
    tracing::info!(addr = %local, "webtransport endpoint listening (udp)");
    let handshakes = ConnLimiter::new(
        shared.config.webtransport_max_handshakes,
        shared.config.max_connections_per_ip,
        shared.metrics.webtransport().handshakes_gauge(),
    );
    let shared = shared.clone();
    let sessions = tasks.clone();
    tasks.spawn(async move {
        loop {
            let incoming = tokio::select! {
                _ = shared.shutdown.cancelled() => break,
                i = endpoint.accept() => i,
            };
            // NetSim's blocked UDP (dev): the handshake gets no answer, as behind a firewall.
            if shared.netsim.get().block_udp {
                incoming.ignore();
                continue;
            }
            if !incoming.remote_address_validated() {
                // Stateless: the token comes back only from an address that receives. (An
                // unvalidated Initial may always be retried, so this cannot panic.)
                shared.metrics.webtransport().retried();
                incoming.retry();
                continue;
            }
            let handshake = match handshakes.admit(incoming.remote_address().ip().to_canonical()) {
                Admission::Normal(g) => g,
                Admission::OverIpCap(_) | Admission::Refuse(_) => {
                    shared.metrics.connection_refused("handshakes");
                    incoming.refuse();
                    continue;
                }
            };
            let shared = shared.clone();
            sessions.spawn(session::run(incoming, shared, limiter.clone(), handshake));
        }
        // No new sessions; those still open are ended by their zones (SHUTTING_DOWN, once the
        // final saves are durable) as on the WebSocket path, and keep the endpoint's driver
        // alive until then.
        drop(endpoint);
    });
    Ok(local)
}
