//! The relay process (`zonekeep relay --origin URL`): it serves a zone's clients for the zone's
//! host.
//!
//! Clients connect to the relay exactly as to a host (`GET /zones/{zone_id}`, the same
//! protocol). For each zone with clients here the relay keeps one link to the origin
//! (`link`), and one thread that holds the zone's replica and replicator ([`RelayZone`]) and
//! queues every client's frames. The clients' sockets are served by the same I/O threads a host
//! serves its WebSockets with (`net/ws/io`): each thread owns many connections and
//! writes a patch's frames to all of them when woken once. A client's session (`session`)
//! forwards what it sends to the origin, except what the relay answers itself: Pings, and
//! Resyncs (its frames are built here).
//!
//! A relay with a WebTransport endpoint (`--webtransport`, or `--dev`) serves WebTransport clients
//! too (`wt`), on the host's endpoint code (`net::webtransport`): their States go as datagrams,
//! built against what they acknowledged, and their Inputs datagrams go to the origin as the Input
//! messages a WebSocket client sends. The zone's thread queues either kind's frames through one
//! bounded `out::ClientOut`.
//!
//! Nothing upstream waits on a client: a client that does not read fills its bounded outbox and
//! is kicked as a slow consumer, as a host kicks it, while the link and every other client go
//! on. A link that closes (the origin went away, or refused a patch) ends its clients'
//! connections with `ZONE_MOVED`: each resumes through its entry URLs with its reconnect token.
//!
//! [`RelayZone`]: zonekeep_core::relay::RelayZone

mod link;
mod out;
mod session;
mod wt;

use std::collections::HashMap;
use std::future::Future;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::extract::{Path, State};
use axum::http::header;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tower::ServiceExt as _;

use crate::config::{Secret, ServerConfig};
use crate::metrics::Metrics;
use crate::net::ws::io::{IoSettings, WsIo};

/// Silence after which QUIC ends a relayed WebTransport session (the endpoint sends keep-alives
/// every 3 s, so only a peer that is gone stays silent this long). A relay may be killed, and its
/// clients must notice within their reconnect grace at the zone's host (15 s by default), which
/// starts when the relay's link drops: the session's own idle timeout, by the client's messages,
/// is the relay's `idle_timeout` still.
const QUIC_IDLE: Duration = Duration::from_secs(10);

/// A relay's settings.
#[derive(Debug, Clone)]
pub struct RelayConfig {
    /// The origin's base URL (`http://host:port` or `https://…`; `ws`/`wss` too): links go to
    /// `{origin}/relay/{zone_id}`.
    pub origin: String,
    /// The relay credential the origin was given (`ZONEKEEP_RELAY_TOKEN`).
    pub token: Secret,
    /// Most clients connected at once; more are refused with TOO_MANY_CONNECTIONS.
    pub max_clients: usize,
    /// Frames queued to one client before it counts as not reading (SLOW_CONSUMER).
    pub outbox_frames: usize,
    /// Link messages from the origin waiting for the zone's thread before the link counts as
    /// overloaded and is closed.
    pub link_queue: usize,
    /// How long a client has to send its Hello.
    pub handshake_timeout: Duration,
    /// A client that sends nothing for this long is closed (IDLE_TIMEOUT); the SDKs ping well
    /// within the host's own timeout, which this defaults to.
    pub idle_timeout: Duration,
    /// How long a write to a client or the origin may take before its connection is dropped.
    pub write_timeout: Duration,
    /// Most entities a zone's replica holds, whatever its link says.
    pub max_entities: usize,
    /// Where its clients connect (`ws://host:port`), as the origin tells new players placed on
    /// it; `None`: `ws://` and the address it listens on.
    pub public_url: Option<String>,
    /// Each client socket's kernel send buffer, bytes (0: the system's). Bounded, a client that
    /// stops reading fills it and then its outbox soon, and is let go, instead of parking
    /// megabytes in the kernel first.
    pub socket_send_buffer: usize,
    /// I/O threads serving the clients' sockets (0: one per two cores, at least one).
    pub io_threads: usize,
    /// UDP address of its WebTransport endpoint (PROTOCOL.md §1.1), `None` = off; with
    /// `dev_certificate` and none given, the listen address's IP and port number.
    pub webtransport: Option<SocketAddr>,
    /// PEM certificate chain of the WebTransport endpoint.
    pub webtransport_cert: Option<PathBuf>,
    /// PEM private key of the WebTransport endpoint.
    pub webtransport_key: Option<PathBuf>,
    /// The WebTransport endpoint makes its own self-signed certificate, whose hash
    /// `GET /webtransport` publishes (development: browsers pin it for at most 14 days).
    pub dev_certificate: bool,
    /// WebTransport handshakes in progress at most (per address, a host's
    /// `max_connections_per_ip`); more are refused. They hold no client slot.
    pub webtransport_max_handshakes: usize,
    /// Threads of the WebTransport endpoint's own runtime; 0 = one per two cores (at least one).
    pub webtransport_threads: usize,
}

impl RelayConfig {
    /// The settings for relaying `origin` with `token`, defaults elsewhere.
    pub fn new(origin: impl Into<String>, token: Secret) -> Self {
        Self {
            origin: origin.into(),
            token,
            max_clients: 20_000,
            outbox_frames: 256,
            link_queue: 4096,
            handshake_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_millis(
                crate::config::ServerConfig::default().idle_timeout_ms,
            ),
            write_timeout: Duration::from_secs(2),
            max_entities: 1 << 20,
            socket_send_buffer: 128 << 10,
            io_threads: 0,
            public_url: None,
            webtransport: None,
            webtransport_cert: None,
            webtransport_key: None,
            dev_certificate: false,
            webtransport_max_handshakes: ServerConfig::default().webtransport_max_handshakes,
            webtransport_threads: 0,
        }
    }

    /// Checks the settings.
    pub fn validate(&self) -> Result<(), String> {
        let origin = self.origin.trim_end_matches('/');
        let ok = ["http://", "https://", "ws://", "wss://"]
            .iter()
            .any(|s| origin.starts_with(s) && origin.len() > s.len());
        if !ok {
            return Err(format!(
                "origin {:?} is not an http(s) or ws(s) URL",
                self.origin
            ));
        }
        if let Some(u) = &self.public_url {
            let ok = (u.starts_with("ws://") || u.starts_with("wss://"))
                && u.len() <= zonekeep_protocol::limits::MAX_URL;
            if !ok {
                return Err(format!(
                    "public URL {u:?} is not a ws(s) URL of at most 512 bytes"
                ));
            }
        }
        if self.token.expose().len() < 16 {
            return Err("the relay token must be at least 16 bytes".into());
        }
        for (name, v) in [
            ("max_clients", self.max_clients),
            ("outbox_frames", self.outbox_frames),
            ("link_queue", self.link_queue),
            ("max_entities", self.max_entities),
            ("io_threads", self.io_threads.max(1)),
            (
                "webtransport_max_handshakes",
                self.webtransport_max_handshakes,
            ),
        ] {
            if v == 0 || v > 1 << 24 {
                return Err(format!("{name} must be 1..=16777216"));
            }
        }
        if self.webtransport_cert.is_some() != self.webtransport_key.is_some() {
            return Err(
                "webtransport_cert and webtransport_key go together (a certificate chain and \
                 its private key)"
                    .into(),
            );
        }
        if self.webtransport.is_some() && !self.dev_certificate && self.webtransport_cert.is_none()
        {
            return Err(
                "webtransport needs webtransport_cert and webtransport_key, or the development \
                 certificate"
                    .into(),
            );
        }
        Ok(())
    }

    /// Where its WebTransport endpoint listens, if it serves WebTransport: where configured, or
    /// with the development certificate on the listen address's port number (`true`: that
    /// default, which another port may replace when it is taken).
    fn webtransport_addr(&self, listen: SocketAddr) -> Option<(SocketAddr, bool)> {
        match (self.webtransport, self.dev_certificate) {
            (Some(a), _) => Some((a, false)),
            (None, true) => Some((listen, true)),
            (None, false) => None,
        }
    }

    /// The link URL of `zone_id`.
    fn link_url(&self, zone_id: &str) -> String {
        let base = self.origin.trim_end_matches('/');
        let base = match base.split_once("://") {
            Some(("https", rest)) => format!("wss://{rest}"),
            Some(("http", rest)) => format!("ws://{rest}"),
            _ => base.to_owned(),
        };
        format!("{base}/relay/{zone_id}")
    }
}

/// What every session and link of a relay shares.
pub(crate) struct RelayShared {
    cfg: RelayConfig,
    /// The zones with clients here, each with its link.
    zones: Mutex<HashMap<String, Arc<link::ZoneLink>>>,
    /// Clients connected now.
    clients: AtomicUsize,
    /// The next client number (unique for the relay's life, so on every link).
    next_client: AtomicU32,
    /// The relay's clock origin: Pongs carry microseconds since it.
    started: Instant,
    /// Where its clients connect, once it listens.
    public_url: std::sync::OnceLock<String>,
    /// The I/O threads serving the clients' sockets, once it serves.
    io: std::sync::OnceLock<WsIo>,
    /// Kicks, disconnects and refusals (`GET /metrics`).
    metrics: Arc<Metrics>,
    /// The client sessions: shutting down waits (bounded) for their last Kick to go out.
    sessions: TaskTracker,
    /// Cancelled when the relay shuts down: its WebTransport endpoint takes no more sessions,
    /// and those still in their handshake are refused (SHUTTING_DOWN).
    stop: CancellationToken,
    /// Its WebTransport endpoint, once it listens (`GET /webtransport` publishes it).
    webtransport: std::sync::OnceLock<crate::net::webtransport::Published>,
}

/// A relay: serve it with [`Relay::serve`].
pub struct Relay {
    shared: Arc<RelayShared>,
}

/// How many clients a relay serves, as `GET /relay/status` answers (for placing players).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct RelayStatus {
    /// Clients connected now.
    pub clients: usize,
    /// Most clients it takes.
    pub max_clients: usize,
    /// Zones it holds a link for.
    pub zones: usize,
}

impl Relay {
    /// A relay with `cfg`; refused when the settings are not valid.
    pub fn new(cfg: RelayConfig) -> Result<Self, String> {
        cfg.validate()?;
        Ok(Self {
            shared: Arc::new(RelayShared {
                cfg,
                zones: Mutex::new(HashMap::new()),
                clients: AtomicUsize::new(0),
                next_client: AtomicU32::new(1),
                started: Instant::now(),
                public_url: std::sync::OnceLock::new(),
                io: std::sync::OnceLock::new(),
                metrics: Arc::new(Metrics::new(0)),
                sessions: TaskTracker::new(),
                stop: CancellationToken::new(),
                webtransport: std::sync::OnceLock::new(),
            }),
        })
    }

    /// The relay's routes: `GET /zones/{zone_id}` (clients), `GET /webtransport` (where its
    /// WebTransport endpoint is, as a host answers), `GET /relay/status`, `GET /metrics`,
    /// `GET /healthz`.
    pub fn router(&self) -> Router {
        Router::new()
            .route("/zones/{zone_id}", get(client_handler))
            .route("/webtransport", get(webtransport_handler))
            .route("/relay/status", get(status_handler))
            .route("/metrics", get(metrics_handler))
            .route("/healthz", get(|| async { "ok" }))
            .with_state(Arc::clone(&self.shared))
    }

    /// How many clients it serves now.
    pub fn status(&self) -> RelayStatus {
        status(&self.shared)
    }

    /// Serves until `shutdown` resolves; then every client is told to resume elsewhere
    /// (ZONE_MOVED), and the relay waits (bounded) for those Kicks to go out.
    pub async fn serve(
        self,
        listener: TcpListener,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> std::io::Result<()> {
        let shared = Arc::clone(&self.shared);
        let cfg = &shared.cfg;
        let url = match &cfg.public_url {
            Some(u) => u.trim_end_matches('/').to_owned(),
            None => format!("ws://{}", listener.local_addr()?),
        };
        let _ = shared.public_url.set(url);
        if shared.io.get().is_none() {
            let io = WsIo::start(
                crate::config::io_thread_count(cfg.io_threads),
                "zonekeep-relay-io",
                io_settings(cfg),
                &shared.metrics,
                &shared,
                tokio::runtime::Handle::current(),
            )?;
            let _ = shared.io.set(io);
        }
        if let Some((addr, defaulted)) = cfg.webtransport_addr(listener.local_addr()?) {
            start_webtransport(&shared, addr, defaulted).await?;
        }
        tracing::info!(addr = %listener.local_addr()?, origin = %cfg.origin, "zonekeep relay listening");
        let app = self.router();
        let mut builder = http1::Builder::new();
        builder
            .timer(TokioTimer::new())
            .header_read_timeout(Duration::from_millis(
                ServerConfig::default().header_read_timeout_ms,
            ));
        let stop = CancellationToken::new();
        let conns = TaskTracker::new();
        tokio::pin!(shutdown);
        loop {
            let (stream, _) = tokio::select! {
                () = &mut shutdown => break,
                x = crate::net::accept(&listener) => x,
            };
            let _ = stream.set_nodelay(true);
            if cfg.socket_send_buffer > 0 {
                let _ =
                    socket2::SockRef::from(&stream).set_send_buffer_size(cfg.socket_send_buffer);
            }
            let app = app.clone();
            let svc = hyper::service::service_fn(move |req: hyper::Request<Incoming>| {
                app.clone().oneshot(req)
            });
            let conn = builder
                .serve_connection(TokioIo::new(stream), svc)
                .with_upgrades();
            let stop = stop.clone();
            conns.spawn(async move {
                tokio::pin!(conn);
                tokio::select! {
                    _ = conn.as_mut() => {}
                    () = stop.cancelled() => {
                        conn.as_mut().graceful_shutdown();
                        let _ = conn.await;
                    }
                }
            });
        }
        drop(listener);
        stop.cancel();
        shared.stop.cancel();
        conns.close();
        let links: Vec<_> = shared
            .zones
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .drain()
            .map(|(_, l)| l)
            .collect();
        for l in &links {
            l.shut_down();
        }
        // The zone threads queue each client's ZONE_MOVED before the I/O threads stop: a
        // WebSocket the I/O thread ends first would be told SHUTTING_DOWN instead.
        let kicked = futures_util::future::join_all(links.iter().map(|l| l.finished()));
        let _ = tokio::time::timeout(cfg.write_timeout, kicked).await;
        if let Some(io) = shared.io.get() {
            io.shutdown();
        }
        shared.sessions.close();
        // A session's end takes its Kick's write and the client's Close, each bounded.
        let bound = cfg.write_timeout * 3;
        let _ = tokio::time::timeout(bound, shared.sessions.wait()).await;
        let _ = tokio::time::timeout(bound, conns.wait()).await;
        Ok(())
    }
}

/// Starts the relay's WebTransport endpoint at `addr` (any free port instead when `any_port` and
/// that one is taken), as a host's: the same certificate choice, Retry validation and handshake
/// bounds; its sessions are relayed clients.
async fn start_webtransport(
    shared: &Arc<RelayShared>,
    addr: SocketAddr,
    any_port: bool,
) -> std::io::Result<()> {
    let cfg = &shared.cfg;
    let settings = crate::net::webtransport::endpoint::EndpointSettings {
        cert: cfg.webtransport_cert.clone(),
        key: cfg.webtransport_key.clone(),
        // Past the session's own idle timeout by its Kick's writes (as at a host), so a
        // silent client is told why; never past QUIC_IDLE.
        idle: crate::net::webtransport::quic_idle(
            u64::try_from(cfg.idle_timeout.as_millis()).unwrap_or(u64::MAX),
            u64::try_from(cfg.write_timeout.as_millis()).unwrap_or(u64::MAX),
        )
        .min(QUIC_IDLE),
        max_handshakes: cfg.webtransport_max_handshakes,
        max_handshakes_per_ip: ServerConfig::default().max_connections_per_ip,
        any_port_if_taken: any_port,
        threads: crate::config::io_thread_count(cfg.webtransport_threads),
    };
    let serving = Arc::clone(shared);
    let published = crate::net::webtransport::endpoint::start(
        &settings,
        addr,
        Arc::clone(&shared.metrics),
        shared.stop.clone(),
        &shared.sessions,
        || false,
        move |incoming, handshake| wt::run(incoming, Arc::clone(&serving), handshake),
    )
    .await
    .map_err(|e| std::io::Error::other(e.to_string()))?;
    let _ = shared.webtransport.set(published);
    Ok(())
}

/// The relay's client connections: a host's defaults, with the relay's own timeouts and the
/// client message limit every host applies.
fn io_settings(cfg: &RelayConfig) -> IoSettings {
    let host = ServerConfig::default();
    IoSettings {
        max_message_bytes: zonekeep_protocol::limits::MAX_CLIENT_MESSAGE,
        idle_timeout: cfg.idle_timeout,
        close_timeout: cfg.write_timeout,
        ..IoSettings::of(&host)
    }
}

fn status(shared: &RelayShared) -> RelayStatus {
    RelayStatus {
        clients: shared.clients.load(Ordering::Relaxed),
        max_clients: shared.cfg.max_clients,
        zones: shared.zones.lock().map(|z| z.len()).unwrap_or(0),
    }
}

async fn webtransport_handler(
    State(shared): State<Arc<RelayShared>>,
    headers: axum::http::HeaderMap,
) -> Response {
    crate::net::webtransport::published_answer(shared.webtransport.get(), &headers)
}

async fn status_handler(State(shared): State<Arc<RelayShared>>) -> Json<RelayStatus> {
    Json(status(&shared))
}

async fn metrics_handler(State(shared): State<Arc<RelayShared>>) -> Response {
    (
        [(
            header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        shared.metrics.encode(),
    )
        .into_response()
}

async fn client_handler(
    State(shared): State<Arc<RelayShared>>,
    Path(zone_id): Path<String>,
    mut req: axum::extract::Request,
) -> Response {
    let on_upgrade = req.extensions_mut().remove::<hyper::upgrade::OnUpgrade>();
    let (response, on_upgrade) =
        match crate::net::ws::upgrade::accept(req.method(), req.headers(), on_upgrade) {
            Ok(x) => x,
            Err(refused) => return refused.into_response(),
        };
    tokio::spawn(async move {
        let upgraded = match on_upgrade.await {
            Ok(u) => u,
            Err(e) => {
                tracing::debug!(error = %e, "WebSocket upgrade failed");
                return;
            }
        };
        let Some((tcp, pre)) = crate::net::ws::upgrade::into_tcp(upgraded) else {
            tracing::error!("an upgraded connection is not this relay's TCP socket");
            return;
        };
        session::run(shared, zone_id, tcp, pre).await;
    });
    response
}

impl RelayShared {
    /// The link of `zone_id`, opened when it has none (or its last one closed).
    async fn link(self: &Arc<Self>, zone_id: &str) -> Result<Arc<link::ZoneLink>, String> {
        {
            let zones = self.zones.lock().unwrap_or_else(|p| p.into_inner());
            if let Some(l) = zones.get(zone_id).filter(|l| !l.is_closed()) {
                return Ok(Arc::clone(l));
            }
        }
        let opened = link::ZoneLink::open(Arc::clone(self), zone_id).await?;
        let mut zones = self.zones.lock().unwrap_or_else(|p| p.into_inner());
        // Two first clients of a zone may open a link each; the first one kept wins.
        match zones.get(zone_id).filter(|l| !l.is_closed()) {
            Some(l) => {
                opened.shut_down();
                Ok(Arc::clone(l))
            }
            None => {
                zones.insert(zone_id.to_owned(), Arc::clone(&opened));
                Ok(opened)
            }
        }
    }

    /// Forgets a closed link.
    fn forget(&self, zone_id: &str, link: &link::ZoneLink) {
        let mut zones = self.zones.lock().unwrap_or_else(|p| p.into_inner());
        if zones
            .get(zone_id)
            .is_some_and(|l| std::ptr::eq(Arc::as_ptr(l), link))
        {
            zones.remove(zone_id);
        }
    }
}
