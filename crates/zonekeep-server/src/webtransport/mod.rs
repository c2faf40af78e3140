//! The WebTransport endpoint (PROTOCOL.md §1.1): HTTP/3 over QUIC on a UDP port, serving the same
//! zones, tickets and sessions as the WebSocket path, with States and Inputs in datagrams so that a
//! lost packet never holds back the next frame.
//!
//! The endpoint owns its certificate: a configured PEM chain and key, or in dev mode one it makes
//! at start (ECDSA P-256, valid for 14 days, the longest a browser accepts for a pinned hash), whose
//! SHA-256 hash `GET /webtransport` publishes for the SDK's `serverCertificateHashes`.

mod framing;
mod session;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use base64::Engine;
use serde::Serialize;
use wtransport::{Endpoint, Identity, ServerConfig};

use crate::conn_limit::ConnLimiter;
use crate::host::Shared;

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
            .map(|b| b.build())
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
            let admitted = limiter.admit(incoming.remote_address().ip());
            let shared = shared.clone();
            sessions.spawn(session::run(incoming, shared, admitted));
        }
        // No new sessions; those still open are ended by their zones (SHUTTING_DOWN, once the
        // final saves are durable) as on the WebSocket path, and keep the endpoint's driver
        // alive until then.
        drop(endpoint);
    });
    Ok(local)
}
