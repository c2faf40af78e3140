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

/// Streams a client may have open at once, each way: a session needs the CONNECT request and
/// its control stream (bidirectional), and HTTP/3's control and QPACK streams (unidirectional).
/// A client that opens more is refused by the session; these keep it from holding more first.
const MAX_STREAMS: u32 = 8;
/// Bytes of one stream, and of all of a connection's streams, a client may send ahead of the
/// session's reading: a few of its largest messages.
const STREAM_WINDOW: u32 = 8 * zonekeep_protocol::limits::MAX_CLIENT_MESSAGE as u32;
const CONNECTION_WINDOW: u32 = 4 * STREAM_WINDOW;
/// Datagrams held for one connection, each way: Inputs not yet read (hundreds of them), and
/// States not yet sent (a datagram's worth each, at most a couple of seconds of them at 20 a
/// second). When full, QUIC drops the oldest: a State the client cannot take yet is worth less
/// than the next one.
const DATAGRAM_BUFFER: usize = 64 << 10;

/// QUIC's per-connection bounds, sized for one game session. quinn's defaults are a browser
/// page's: 100 streams each way with 1.25 MB windows, 1.25 MB of unread datagrams and 1 MB of
/// unsent ones, which across thousands of connections is gigabytes a hostile or stalled client
/// could make the host hold. None of it is allocated ahead, so a well-behaved session costs the
/// same either way (BENCHMARKS.md).
fn session_transport() -> wtransport::config::QuicTransportConfig {
    let mut transport = wtransport::config::QuicTransportConfig::default();
    transport
        .max_concurrent_bidi_streams(MAX_STREAMS.into())
        .max_concurrent_uni_streams(MAX_STREAMS.into())
        .stream_receive_window(STREAM_WINDOW.into())
        .receive_window(CONNECTION_WINDOW.into())
        .datagram_receive_buffer_size(Some(DATAGRAM_BUFFER))
        .datagram_send_buffer_size(DATAGRAM_BUFFER);
    transport
}

/// How an endpoint is set up.
#[derive(Debug, Clone)]
pub(crate) struct EndpointSettings {
    /// A PEM certificate chain and its key; without both, a development certificate is made.
    pub cert: Option<PathBuf>,
    /// The key of `cert`.
    pub key: Option<PathBuf>,
    /// A connection that sends nothing for this long is closed by QUIC itself.
    pub idle: Duration,
    /// Handshakes in progress at most (QUIC, TLS and the CONNECT request).
    pub max_handshakes: usize,
    /// Handshakes in progress from one address at most.
    pub max_handshakes_per_ip: usize,
    /// When `addr`'s port is taken, bind any free port of its IP instead (for a port that was
    /// not asked for, only defaulted).
    pub any_port_if_taken: bool,
    /// Threads of the endpoint's own runtime (at least one; see [`start`]).
    pub threads: usize,
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
/// holding its place among the handshakes in progress). Returns what `GET /webtransport`
/// publishes.
///
/// The endpoint, its connections and its sessions run on a runtime of their own, on
/// `settings.threads` threads named `zonekeep-wt`: with one (the default on two cores) every
/// QUIC connection driver, every session task and the UDP socket share one thread, so a datagram
/// handed from a session to its connection wakes nothing across threads. On the host's
/// work-stealing runtime each such hand-off woke another worker: 7–9 % of WebTransport's CPU in
/// the arena runs (BENCHMARKS.md). `tasks` tracks the endpoint until its last session ended
/// and its connections closed (bounded by [`CLOSE_GRACE`]), after `stop`.
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
    let rt = runtime(settings.threads).map_err(|error| WebTransportError::Bind { addr, error })?;
    let runtime = rt.handle().clone();
    let mut own = OwnRuntime(Some(rt));
    let idle = settings.idle;
    let config = |addr: SocketAddr, identity: Identity| {
        ServerConfig::builder()
            .with_bind_address(addr)
            .with_custom_transport(identity, session_transport())
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
        // The endpoint's driver is spawned where it is made: on its own runtime.
        let _on = runtime.enter();
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
    let sessions = TaskTracker::new();
    let spawner = sessions.clone();
    let accepting = runtime.spawn(async move {
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
            spawner.spawn(serve(incoming, handshake));
        }
        endpoint
    });
    // No new sessions after `stop`; those still open are ended by their owners (with a Kick).
    // Then the connections' closes go out before the runtime ends.
    let (ended, ended_rx) = tokio::sync::oneshot::channel::<()>();
    let thread = std::thread::Builder::new()
        .name("zonekeep-wt".into())
        .spawn(move || {
            let Some(runtime) = own.0.take() else {
                return;
            };
            runtime.block_on(async move {
                let endpoint = accepting.await;
                sessions.close();
                sessions.wait().await;
                if let Ok(endpoint) = endpoint {
                    let _ = tokio::time::timeout(CLOSE_GRACE, endpoint.wait_idle()).await;
                }
            });
            drop(runtime);
            let _ = ended.send(());
        });
    if let Err(error) = thread {
        return Err(WebTransportError::Bind { addr, error });
    }
    tasks.spawn(async move {
        let _ = ended_rx.await;
    });
    Ok(Published {
        port: local.port(),
        certificate_hashes,
    })
}

/// How long an endpoint that stopped waits for its connections' closes to go out.
const CLOSE_GRACE: Duration = Duration::from_secs(1);

/// The endpoint's runtime, shut down without waiting wherever it is dropped: an error path of
/// [`start`] drops it inside the caller's async context, where a runtime may not block.
struct OwnRuntime(Option<tokio::runtime::Runtime>);

impl Drop for OwnRuntime {
    fn drop(&mut self) {
        if let Some(rt) = self.0.take() {
            rt.shutdown_background();
        }
    }
}

/// The endpoint's own runtime: one thread runs everything on it, more share the work.
fn runtime(threads: usize) -> std::io::Result<tokio::runtime::Runtime> {
    let mut builder = match threads {
        0 | 1 => tokio::runtime::Builder::new_current_thread(),
        n => {
            let mut b = tokio::runtime::Builder::new_multi_thread();
            b.worker_threads(n);
            b
        }
    };
    builder.enable_all().thread_name("zonekeep-wt").build()
}
