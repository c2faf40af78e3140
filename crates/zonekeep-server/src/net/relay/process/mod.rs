//! The relay process (`zonekeep relay --origin URL`): it serves a zone's clients for the zone's
//! host.
//!
//! Clients connect to the relay exactly as to a host (`GET /zones/{zone_id}`, the same
//! protocol). For each zone with clients here the relay keeps one link to the origin
//! (`link`), and one thread that holds the zone's replica and replicator ([`RelayZone`]) and
//! writes every client's frames. A client's session (`session`) forwards what it sends to
//! the origin, except what the relay answers itself: Pings, and Resyncs (its frames are built
//! here).
//!
//! Nothing upstream waits on a client: a client that does not read fills its bounded outbox and
//! is kicked as a slow consumer, as a host kicks it, while the link and every other client go
//! on. A link that closes (the origin went away, or refused a patch) ends its clients'
//! connections with `ZONE_MOVED`: each resumes through its entry URLs with its reconnect token.
//!
//! [`RelayZone`]: zonekeep_core::relay::RelayZone

mod link;
mod session;

use std::collections::HashMap;
use std::future::Future;
use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::extract::ws::WebSocketUpgrade;
use axum::extract::{Path, State};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use tokio::net::TcpListener;

use crate::config::Secret;
use crate::error::SessionError;

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
            public_url: None,
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
        ] {
            if v == 0 || v > 1 << 24 {
                return Err(format!("{name} must be 1..=16777216"));
            }
        }
        Ok(())
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
            }),
        })
    }

    /// The relay's routes: `GET /zones/{zone_id}` (clients), `GET /relay/status`, `GET /healthz`.
    pub fn router(&self) -> Router {
        Router::new()
            .route("/zones/{zone_id}", get(client_handler))
            .route("/relay/status", get(status_handler))
            .route("/healthz", get(|| async { "ok" }))
            .with_state(Arc::clone(&self.shared))
    }

    /// How many clients it serves now.
    pub fn status(&self) -> RelayStatus {
        status(&self.shared)
    }

    /// Serves until `shutdown` resolves; then every client is told SHUTTING_DOWN.
    pub async fn serve(
        self,
        listener: TcpListener,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> std::io::Result<()> {
        let shared = Arc::clone(&self.shared);
        let url = match &shared.cfg.public_url {
            Some(u) => u.trim_end_matches('/').to_owned(),
            None => format!("ws://{}", listener.local_addr()?),
        };
        let _ = shared.public_url.set(url);
        tracing::info!(addr = %listener.local_addr()?, origin = %shared.cfg.origin, "zonekeep relay listening");
        use axum::serve::ListenerExt as _;
        let send_buffer = shared.cfg.socket_send_buffer;
        let listener = listener.tap_io(move |tcp| {
            let _ = tcp.set_nodelay(true);
            if send_buffer > 0 {
                let _ = socket2::SockRef::from(&*tcp).set_send_buffer_size(send_buffer);
            }
        });
        let r = axum::serve(listener, self.router())
            .with_graceful_shutdown(shutdown)
            .await;
        let links: Vec<_> = shared
            .zones
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .drain()
            .map(|(_, l)| l)
            .collect();
        for l in links {
            l.shut_down();
        }
        r
    }
}

fn status(shared: &RelayShared) -> RelayStatus {
    RelayStatus {
        clients: shared.clients.load(Ordering::Relaxed),
        max_clients: shared.cfg.max_clients,
        zones: shared.zones.lock().map(|z| z.len()).unwrap_or(0),
    }
}

async fn status_handler(State(shared): State<Arc<RelayShared>>) -> Json<RelayStatus> {
    Json(status(&shared))
}

async fn client_handler(
    State(shared): State<Arc<RelayShared>>,
    Path(zone_id): Path<String>,
    ws: WebSocketUpgrade,
) -> Response {
    // The same bound a host puts on what a client sends.
    let max = zonekeep_protocol::limits::MAX_CLIENT_MESSAGE;
    ws.max_message_size(max.saturating_mul(2))
        .max_frame_size(max.saturating_mul(2))
        .on_upgrade(move |socket| async move {
            if !crate::host::valid_zone_id(&zone_id) {
                session::refuse(&shared, socket, SessionError::BadZoneId).await;
                return;
            }
            session::run(shared, zone_id, socket).await;
        })
        .into_response()
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
