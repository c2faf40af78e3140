//! The QUIC endpoint a host and a relay serve WebTransport on alike: its certificate, its QUIC
//! settings, and the accept loop that answers unvalidated addresses with a stateless Retry and
//! bounds the handshakes in progress. What a session is then served for is the caller's.

use std::future::Future;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use base64::Engine;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use wtransport::endpoint::IncomingSession;
use wtransport::{Endpoint, Identity, ServerConfig};

use super::{CertificateHash, Published, WebTransportError};
use crate::metrics::Metrics;
use crate::net::conn_limit::{Admission, ConnGuard, ConnLimiter};

/// Initials the QUIC endpoint holds before the accept loop decides on them (each holds its first
/// packet, about 1.2 kB; more are refused by the endpoint itself). The loop decides at once, so
/// these are only the ones arriving while it waits for a core.
const MAX_INCOMING: usize = 1024;
/// Further packets buffered for one undecided Initial (0-RTT data), and for all of them.
const INCOMING_BUFFER: u64 = 16 << 10;
const INCOMING_BUFFER_TOTAL: u64 = 1 << 20;

/// How an endpoint is set up.
#[derive(Debug, Clone)]
pub(crate) struct EndpointSettings {
    /// A PEM certificate chain and its key; without both, a development certificate is made.
    pub cert: Option<PathBuf>,
    /// The key of `cert`.
    pub key: Option<PathBuf>,
    /// A session that sends nothing for this long is closed by QUIC itself.
    pub idle: Duration,
    /// Handshakes in progress at most (QUIC, TLS and the CONNECT request).
    pub max_handshakes: usize,
    /// Handshakes in progress from one address at most.
    pub max_handshakes_per_ip: usize,
    /// When `addr`'s port is taken, bind any free port of its IP instead (for a port that was
    /// not asked for, only defaulted).
    pub any_port_if_taken: bool,
}

/// The identity the endpoint presents, and the hashes to publish for it.
async fn identity(
    settings: &EndpointSettings,
) -> Result<(Identity, Vec<CertificateHash>), WebTransportError> {
    if let (Some(cert), Some(key)) = (&settings.cert, &settings.key) {
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

/// Binds the endpoint at `addr` and accepts sessions until `stop`: each one whose address is
/// validated and that fits within the handshake bounds is handed to `serve` (with the guard
/// holding its place among the handshakes in progress) and run on `tasks`. Returns what
/// `GET /webtransport` publishes.
pub(crate) async fn start<S, F>(
    settings: &EndpointSettings,
    addr: SocketAddr,
    metrics: Arc<Metrics>,
    stop: CancellationToken,
    tasks: &TaskTracker,
    blocked: impl Fn() -> bool + Send + 'static,
    serve: S,
) -> Result<Published, WebTransportError>
where
    S: Fn(IncomingSession, ConnGuard) -> F + Send + 'static,
    F: Future<Output = ()> + Send + 'static,
{
    let (identity, certificate_hashes) = identity(settings).await?;
    let idle = settings.idle;
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
        Err(e) if addr.port() != 0 && settings.any_port_if_taken => {
            tracing::info!(%addr, error = %e, "webtransport: port taken, using any free port");
            bind(SocketAddr::new(addr.ip(), 0))
                .map_err(|error| WebTransportError::Bind { addr, error })?
        }
        Err(error) => return Err(WebTransportError::Bind { addr, error }),
    };
    let local = endpoint
        .local_addr()
        .map_err(|error| WebTransportError::Bind { addr, error })?;
    tracing::info!(addr = %local, "webtransport endpoint listening (udp)");
    let handshakes = ConnLimiter::new(
        settings.max_handshakes,
        settings.max_handshakes_per_ip,
        metrics.webtransport().handshakes_gauge(),
    );
    let sessions = tasks.clone();
    tasks.spawn(async move {
        loop {
            let incoming = tokio::select! {
                _ = stop.cancelled() => break,
                i = endpoint.accept() => i,
            };
            // NetSim's blocked UDP (dev): the handshake gets no answer, as behind a firewall.
            if blocked() {
                incoming.ignore();
                continue;
            }
            if !incoming.remote_address_validated() {
                // Stateless: the token comes back only from an address that receives. (An
                // unvalidated Initial may always be retried, so this cannot panic.)
                metrics.webtransport().retried();
                incoming.retry();
                continue;
            }
            let handshake = match handshakes.admit(incoming.remote_address().ip().to_canonical()) {
                Admission::Normal(g) => g,
                Admission::OverIpCap(_) | Admission::Refuse(_) => {
                    metrics.connection_refused("handshakes");
                    incoming.refuse();
                    continue;
                }
            };
            sessions.spawn(serve(incoming, handshake));
        }
        // No new sessions; those still open are ended by their owners (with a Kick) and keep the
        // endpoint's driver alive until then.
        drop(endpoint);
    });
    Ok(Published {
        port: local.port(),
        certificate_hashes,
    })
}
