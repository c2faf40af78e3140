//! The host: builder, shared state, HTTP routes and the accept loop.

use std::collections::HashMap;
use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use axum::extract::ws::WebSocketUpgrade;
use axum::extract::{Path, RawQuery, State};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Extension, Router};
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use serde_json::Value;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tower::ServiceExt;
use zonekeep_core::{Clock, SystemClock, Zone, ZoneConfig, ZoneHost, ZoneKinds};

use crate::config::{ConfigError, ServerConfig};
use crate::error::SessionError;
use crate::metrics::Metrics;
use crate::net::conn_limit::{Admission, ConnGuard, ConnLimiter};
use crate::net::netsim::NetSim;
use crate::persist::Persistence;
use crate::reconnect::ReconnectStore;
use crate::sim::{
    DisposeHook, JoinFailure, Registry, SimContext, SimPool, Startup, ZoneCreate, ZoneEntry,
};
use crate::ticket::{KeyRing, TicketKey, Verifier};
use crate::{admin, dev};

/// Why a host could not be built or served.
#[derive(Debug, thiserror::Error)]
pub enum HostError {
    /// The configuration is invalid.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// No zone kind registered.
    #[error("no zone kind registered")]
    NoKinds,
    /// The default kind is not registered.
    #[error("default zone kind {0:?} is not registered")]
    UnknownDefaultKind(String),
    /// A zone kind's config is invalid.
    #[error("zone kind {kind:?}: {error}")]
    KindConfig {
        /// The kind.
        kind: String,
        /// What is wrong.
        error: zonekeep_core::ConfigError,
    },
    /// No ticket key and not in dev mode.
    #[error(
        "no ticket key configured: set ZONEKEEP_TICKET_SECRET (or ticket_keys), or run with --dev"
    )]
    NoTicketKey,
    /// An I/O failure (thread spawn, socket).
    #[error("io: {0}")]
    Io(#[from] std::io::Error),
    /// The host could not join the fleet (register, or land its first heartbeat).
    #[error("joining the fleet: {0}")]
    Fleet(#[from] crate::fleet::FleetError),
    /// Dev mode could not load or create its ticket key in the data directory.
    #[error(transparent)]
    DevKey(#[from] crate::dev_key::DevKeyError),
    /// Graceful shutdown could not make every zone's acknowledged state durable:
    /// a final save was refused, dropped or not confirmed within the shutdown bound.
    #[error("shutdown lost state: final saves not written for zones {unsaved:?}{}", if *unfrozen_threads > 0 { format!(", {unfrozen_threads} simulation thread(s) did not freeze in time") } else { String::new() })]
    StateLost {
        /// Zones whose final save is not durable.
        unsaved: Vec<String>,
        /// Simulation threads whose zones could not be frozen in time.
        unfrozen_threads: usize,
    },
}

/// What the accept loop knows about a connection, passed to handlers.
#[derive(Debug, Clone)]
pub(crate) struct ConnInfo {
    pub over_ip_cap: bool,
    pub guard: Arc<ConnGuard>,
}

/// State shared by every task of the host.
pub(crate) struct Shared {
    pub config: ServerConfig,
    pub verifier: Verifier,
    pub metrics: Arc<Metrics>,
    pub registry: Arc<Registry>,
    pub pool: SimPool,
    pub reconnect: Arc<ReconnectStore>,
    pub clock: Arc<dyn Clock>,
    pub netsim: NetSim,
    /// Cancelled when shutdown starts: no new joins or zones.
    pub shutdown: CancellationToken,
    /// Cancelled once the zones' final saves are confirmed (or the deadline
    /// passed): every session still open is told SHUTTING_DOWN.
    pub sessions_end: CancellationToken,
    pub sessions: TaskTracker,
    pub next_conn: AtomicU64,
    pub default_kind: String,
    pub sim: Arc<SimContext>,
    pub admin_token_hash: Option<[u8; 32]>,
    /// This host's fleet membership, set once it joined (hosts with a store).
    pub fleet: std::sync::OnceLock<Arc<crate::fleet::Fleet>>,
    /// Fleet metrics (registered on `/metrics` for hosts with a store).
    pub fleet_metrics: crate::fleet::FleetMetrics,
    /// Stops the fleet's heartbeat, reconcile and watchdog when the host has left.
    pub fleet_stop: CancellationToken,
    /// The module kinds, when the host has any (see [`crate::code`]).
    pub code: Option<Arc<dyn crate::code::CodeKinds>>,
    /// Where modules are compiled (see [`crate::code::Compiler`]).
    pub compiler: crate::code::Compiler,
    /// The WebTransport endpoint, once it listens (`GET /webtransport` publishes it).
    pub webtransport: std::sync::OnceLock<crate::net::webtransport::Published>,
    /// This host's advertised base URL (`ws://host:port`), once it listens: a Transfer names a
    /// target zone here by it.
    pub base_url: std::sync::OnceLock<String>,
    /// The transfer records of a host that keeps nothing (no persistence): in memory.
    pub memory_transfers: std::sync::OnceLock<Arc<dyn zonekeep_store::TransferLedger>>,
}

/// True for zone ids of 1..=128 bytes of `[A-Za-z0-9._:-]`.
pub fn valid_zone_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= zonekeep_protocol::limits::MAX_ZONE_ID
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b':'))
}

/// Why zone create params (a ticket's `params` claim, an admin create's body) are refused: their
/// JSON text is over [`zonekeep_store::MAX_PARAMS_LEN`] bytes, the most the fleet directory keeps
/// with a zone. `None` when they fit. Checked before anything is claimed or stored, so the
/// refusal is the caller's (a 400, JOIN_REFUSED), never a store failure.
pub(crate) fn params_refusal(params: &Value) -> Option<String> {
    /// Counts the bytes written, and stops once they pass the limit.
    struct Count(usize);
    impl std::io::Write for Count {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0 += buf.len();
            if self.0 > zonekeep_store::MAX_PARAMS_LEN {
                return Err(std::io::Error::other("over the limit"));
            }
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut count = Count(0);
    match serde_json::to_writer(&mut count, params) {
        Ok(()) => None,
        Err(_) => Some(format!(
            "zone params must encode to at most {} bytes of JSON (64 KiB); these take more",
            zonekeep_store::MAX_PARAMS_LEN
        )),
    }
}

impl Shared {
    /// This host's fleet membership, once joined.
    pub fn fleet(&self) -> Option<&Arc<crate::fleet::Fleet>> {
        self.fleet.get()
    }

    fn new_entry(&self, zone_id: &str, kind: &str, params: Value) -> (Arc<ZoneEntry>, ZoneCreate) {
        // Unbounded channel, bounded by the sessions at `zone_inbox` (see `session::inputs`):
        // its blocks are allocated as inputs arrive instead of all 8,192 slots up front.
        let (tx, rx) = crossbeam_channel::unbounded();
        let metrics = self.metrics.zone(zone_id);
        let entry = Arc::new(ZoneEntry {
            zone_id: zone_id.to_owned(),
            thread: self.pool.pick_thread(),
            inbox: tx,
            tick: AtomicU64::new(0),
            epoch: AtomicU64::new(0),
            summary: Default::default(),
            rate_limited: metrics.input_counter("rate_limited").unwrap_or_default(),
            inbox_full: metrics.input_counter("inbox_full").unwrap_or_default(),
            ready: tokio::sync::watch::Sender::new(Startup::Starting),
        });
        let create = ZoneCreate {
            kind: kind.to_owned(),
            params,
            inbox: rx,
            metrics,
        };
        (entry, create)
    }

    /// "unknown zone kind", naming the kinds this host has, so the fix is in the message.
    pub(crate) fn unknown_kind(&self, kind: &str) -> String {
        let mut known: Vec<&str> = self.sim.specs.keys().map(String::as_str).collect();
        known.sort_unstable();
        format!(
            "unknown zone kind {kind:?} (this host serves: {})",
            known.join(", ")
        )
    }

    /// Find the zone for a join, registering it (to be created by its thread) if it is new.
    pub fn route_join(
        &self,
        zone_id: &str,
        kind: Option<&str>,
        params: Option<Value>,
    ) -> Result<(Arc<ZoneEntry>, Option<ZoneCreate>), JoinFailure> {
        let mut zones = self.registry.lock();
        if let Some(e) = zones.get(zone_id) {
            return Ok((e.clone(), None));
        }
        if self.shutdown.is_cancelled() {
            return Err(JoinFailure::ShuttingDown);
        }
        if self.registry.is_fenced(zone_id) {
            return Err(JoinFailure::Fenced);
        }
        if let Some(f) = self.registry.failure(zone_id) {
            return Err(JoinFailure::Failed(f.message()));
        }
        if zones.len() >= self.config.max_zones {
            return Err(JoinFailure::TooManyZones);
        }
        let kind = kind.unwrap_or(&self.default_kind);
        let spec = self
            .sim
            .specs
            .get(kind)
            .ok_or_else(|| JoinFailure::Unavailable(self.unknown_kind(kind)))?;
        let params = params.unwrap_or_else(|| spec.default_params.clone());
        let (entry, create) = self.new_entry(zone_id, kind, params);
        zones.insert(zone_id.to_owned(), entry.clone());
        Ok((entry, Some(create)))
    }

    /// Register a zone for an admin create.
    pub fn register_new(
        &self,
        zone_id: &str,
        kind: &str,
        params: Value,
    ) -> Result<(Arc<ZoneEntry>, ZoneCreate), crate::sim::AdminFailure> {
        use crate::sim::AdminFailure;
        let mut zones = self.registry.lock();
        if zones.contains_key(zone_id) {
            return Err(AdminFailure::Exists(zone_id.to_owned()));
        }
        if self.shutdown.is_cancelled() {
            return Err(AdminFailure::Unavailable("shutting down".into()));
        }
        if self.registry.is_fenced(zone_id) {
            return Err(AdminFailure::Unavailable(format!(
                "zone {zone_id:?} moved to another host; restart this host to serve it here again"
            )));
        }
        if let Some(f) = self.registry.failure(zone_id) {
            return Err(AdminFailure::Failed(f.message()));
        }
        if zones.len() >= self.config.max_zones {
            return Err(AdminFailure::Unavailable(
                "the host runs its maximum number of zones".into(),
            ));
        }
        if !self.sim.specs.contains_key(kind) {
            return Err(AdminFailure::BadRequest(self.unknown_kind(kind)));
        }
        let (entry, create) = self.new_entry(zone_id, kind, params);
        zones.insert(zone_id.to_owned(), entry.clone());
        Ok((entry, create))
    }
}

/// Builds a [`Host`].
pub struct HostBuilder {
    config: ServerConfig,
    kinds: ZoneKinds,
    specs: HashMap<String, crate::sim::KindSpec>,
    order: Vec<String>,
    default_kind: Option<String>,
    dispose_hook: Option<DisposeHook>,
    persistence: Option<Arc<Persistence>>,
    code: Option<Arc<dyn crate::code::CodeKinds>>,
}

impl HostBuilder {
    /// The host's module kinds (registered with [`zone_factory`](Self::zone_factory) too):
    /// deployable through the admin API, and kept in step with the store's deploys.
    pub fn code_kinds(mut self, code: Arc<dyn crate::code::CodeKinds>) -> Self {
        self.code = Some(code);
        self
    }

    /// Persist zones and facts with `persistence` (opened with
    /// [`Persistence::open`]): zones are claimed and restored from their
    /// last save when they start, saved periodically, when they go Dormant
    /// (then unloaded) and on graceful shutdown; facts are committed to the
    /// configured sink. Without it zones live in memory only.
    pub fn persistence(mut self, persistence: Arc<Persistence>) -> Self {
        self.persistence = Some(persistence);
        self
    }

    /// Use `config` (validated in [`build`](Self::build)).
    pub fn config(mut self, config: ServerConfig) -> Self {
        self.config = config;
        self
    }

    /// Register zone kind `Z` under `kind` with the default [`ZoneConfig`] and null params.
    pub fn zone<Z: Zone>(self, kind: &str) -> Self {
        self.zone_with::<Z>(kind, ZoneConfig::default(), Value::Null)
    }

    /// Register zone kind `Z` with its runtime config and the params used when
    /// a join creates a zone without `params` in its ticket.
    pub fn zone_with<Z: Zone>(
        mut self,
        kind: &str,
        config: ZoneConfig,
        default_params: Value,
    ) -> Self {
        self.kinds.register::<Z>(kind);
        self.kind_spec(kind, config, default_params)
    }

    /// Register a zone kind whose zones are made by factories rather than a Rust type (a
    /// module's, see `zonekeep-wasm`): `register` puts them on the registry under `kind`.
    pub fn zone_factory(
        mut self,
        kind: &str,
        config: ZoneConfig,
        default_params: Value,
        register: impl FnOnce(&mut ZoneKinds),
    ) -> Self {
        register(&mut self.kinds);
        self.kind_spec(kind, config, default_params)
    }

    fn kind_spec(mut self, kind: &str, config: ZoneConfig, default_params: Value) -> Self {
        if !self.order.iter().any(|k| k == kind) {
            self.order.push(kind.to_owned());
        }
        self.specs.insert(
            kind.to_owned(),
            crate::sim::KindSpec {
                config,
                default_params,
            },
        );
        self
    }

    /// The zone kinds registered so far (a replay creates its zones from the same registry).
    pub fn kinds(&self) -> &ZoneKinds {
        &self.kinds
    }

    /// The kind created when a ticket names none (default: the first registered).
    pub fn default_kind(mut self, kind: &str) -> Self {
        self.default_kind = Some(kind.to_owned());
        self
    }

    /// Called on the zone's thread when the zone stops for good (shutdown, admin
    /// stop, dormant unload), after its last tick and before its clients are
    /// kicked: the persistence hook where a zone is saved.
    pub fn on_dispose(
        mut self,
        hook: impl Fn(&str, &mut ZoneHost) + Send + Sync + 'static,
    ) -> Self {
        self.dispose_hook = Some(Arc::new(hook));
        self
    }

    /// Validate and start the simulation threads.
    pub fn build(mut self) -> Result<Host, HostError> {
        let config = self.config;
        config.validate()?;
        for spec in self.specs.values_mut() {
            spec.config = config.zone_limits(spec.config.clone());
        }
        let default_kind = match self.default_kind {
            Some(k) if self.specs.contains_key(&k) => k,
            Some(k) => return Err(HostError::UnknownDefaultKind(k)),
            None => self.order.first().cloned().ok_or(HostError::NoKinds)?,
        };
        for (kind, spec) in &self.specs {
            spec.config
                .validate()
                .map_err(|error| HostError::KindConfig {
                    kind: kind.clone(),
                    error,
                })?;
        }
        let ring = match config.key_ring()? {
            Some(r) => r,
            None if config.dev => dev_key_ring(&config.data_dir)?,
            None => return Err(HostError::NoTicketKey),
        };
        let verifier = Verifier::new(ring, config.ticket_policy(), config.ticket_replay_capacity);
        let mut metrics = Metrics::new(config.metrics_zone_labels);
        let fleet_metrics = crate::fleet::FleetMetrics::default();
        if let Some(p) = &self.persistence {
            p.metrics().register(metrics.registry_mut());
            fleet_metrics.register(metrics.registry_mut());
        }
        let compiler = crate::code::Compiler::new(
            Duration::from_millis(config.module_compile_timeout_ms),
            metrics.registry_mut(),
        );
        let metrics = Arc::new(metrics);
        let registry = Arc::new(Registry::default());
        // Signed with the ticket keys, so a player's token is good at every host of the fleet.
        let reconnect = Arc::new(ReconnectStore::with_signer(
            config.reconnect_capacity,
            crate::reconnect::TokenSigner::new(verifier.keys()),
        ));
        let clock: Arc<dyn Clock> = Arc::new(SystemClock::new());
        let sim = Arc::new(SimContext {
            kinds: self.kinds,
            specs: self.specs,
            clock: clock.clone(),
            metrics: metrics.clone(),
            reconnect: reconnect.clone(),
            registry: registry.clone(),
            dispose_hook: self.dispose_hook,
            zone_inbox: config.zone_inbox,
            timeouts: crate::sim::SessionTimeouts {
                idle_ms: u32::try_from(config.idle_timeout_ms).unwrap_or(u32::MAX),
                handshake_ms: u32::try_from(config.handshake_timeout_ms).unwrap_or(u32::MAX),
            },
            content: config.content_policy()?,
            persist: self.persistence,
            entries: Arc::default(),
            recordings: Arc::new(crate::recording::Recordings::new(
                config.data_dir.join("recordings"),
                metrics.clone(),
            )),
            interrupts: Arc::default(),
            code: self.code.clone(),
            transfers: Arc::default(),
            bus: Arc::default(),
        });
        let pool = SimPool::start(config.sim_thread_count(), config.sim_queue, sim.clone())?;
        let admin_token_hash = config
            .admin_token
            .as_ref()
            .map(|t| admin::hash_token(t.expose()));
        Ok(Host {
            shared: Arc::new(Shared {
                verifier,
                metrics,
                registry,
                pool,
                reconnect,
                clock,
                netsim: NetSim::default(),
                shutdown: CancellationToken::new(),
                sessions_end: CancellationToken::new(),
                sessions: TaskTracker::new(),
                next_conn: AtomicU64::new(1),
                default_kind,
                sim,
                admin_token_hash,
                config,
                fleet: std::sync::OnceLock::new(),
                fleet_metrics,
                fleet_stop: CancellationToken::new(),
                code: self.code,
                compiler,
                webtransport: std::sync::OnceLock::new(),
                base_url: std::sync::OnceLock::new(),
                memory_transfers: std::sync::OnceLock::new(),
            }),
        })
    }
}

/// The dev-mode key when none is configured: kept in the data directory, so the tickets a page
/// holds stay valid across a restart of the host.
fn dev_key_ring(data_dir: &std::path::Path) -> Result<KeyRing, HostError> {
    let secret = crate::dev_key::load_or_create(data_dir)?;
    let key = TicketKey::new("dev", secret, false).map_err(ConfigError::from)?;
    Ok(KeyRing::new(vec![key]).map_err(ConfigError::from)?)
}

/// A Zonekeep host.
pub struct Host {
    shared: Arc<Shared>,
}

impl Host {
    /// Starts the host's cross-zone bus: NATS with `--bus`, in process otherwise (in a fleet
    /// without `--bus`, one WARN: other hosts' zones cannot be messaged).
    async fn start_bus(&self) -> Result<(), HostError> {
        let shared = &self.shared;
        if shared.sim.bus.get().is_some() {
            return Ok(());
        }
        let save_every = shared
            .sim
            .persist
            .as_ref()
            .map(|p| p.config().save_every)
            .unwrap_or(Duration::from_secs(5));
        let host = shared
            .fleet
            .get()
            .map(|f| f.host_id.clone())
            .unwrap_or_else(|| "local".to_owned());
        let config = zonekeep_bus::BusConfig {
            host,
            // Zones acknowledge at their saves: a redelivery before the next save is waste.
            ack_wait: (save_every * 3).max(Duration::from_secs(10)),
            inbox_capacity: zonekeep_core::message::MAX_INBOX,
            ..zonekeep_bus::BusConfig::default()
        };
        let bus = match &shared.config.bus {
            Some(url) => {
                let bus = zonekeep_bus::BusHandle::connect(url, config)
                    .await
                    .map_err(|e| HostError::Io(std::io::Error::other(e.to_string())))?;
                tracing::info!(url = %url, "cross-zone bus on NATS JetStream");
                bus
            }
            None => {
                let fleet = shared.fleet.get().is_some();
                if fleet {
                    tracing::warn!("no bus configured: zone messages reach only this host's zones; start every host with --bus nats://…");
                }
                let locator = Arc::new(crate::bus::HostLocator {
                    registry: shared.registry.clone(),
                    fleet,
                });
                zonekeep_bus::BusHandle::local(config, locator)
                    .map_err(|e| HostError::Io(std::io::Error::other(e.to_string())))?
            }
        };
        let _ = shared.sim.bus.set(bus);
        Ok(())
    }

    /// Installs the store's module deploys for this host's module kinds now, then follows them
    /// (see [`crate::code`]) until the host leaves. Nothing to do without a store or modules.
    async fn follow_module_deploys(&self) {
        let shared = &self.shared;
        let (Some(code), Some(p)) = (shared.code.clone(), shared.sim.persist.as_ref()) else {
            return;
        };
        let store = p.store().clone();
        if let Err(e) = crate::code::sync_once(&code, &store, &self.upgrader()).await {
            tracing::warn!(error = %e, "reading module deploys from the store");
        }
        tokio::spawn(crate::code::follow(
            code,
            store,
            self.upgrader(),
            shared.fleet_stop.clone(),
        ));
    }

    /// A handle that upgrades this host's running zones to their kind's current game code
    /// (see [`crate::upgrade`]).
    pub fn upgrader(&self) -> crate::upgrade::Upgrader {
        crate::upgrade::Upgrader {
            shared: self.shared.clone(),
        }
    }

    /// Start building a host.
    pub fn builder() -> HostBuilder {
        HostBuilder {
            config: ServerConfig::default(),
            kinds: ZoneKinds::new(),
            specs: HashMap::new(),
            order: Vec::new(),
            default_kind: None,
            dispose_hook: None,
            persistence: None,
            code: None,
        }
    }

    /// The configuration in force.
    pub fn config(&self) -> &ServerConfig {
        &self.shared.config
    }

    /// The metrics registry (also served at `/metrics`).
    pub fn metrics(&self) -> &Metrics {
        &self.shared.metrics
    }

    /// The host's persistence, if it has one.
    pub fn persistence(&self) -> Option<&Arc<Persistence>> {
        self.shared.sim.persist.as_ref()
    }

    /// Mint a ticket with the host's first active key.
    pub fn mint_ticket(
        &self,
        req: &crate::ticket::MintRequest,
    ) -> Result<String, crate::ticket::MintError> {
        let key = self
            .shared
            .verifier
            .keys()
            .primary()
            .ok_or(crate::ticket::MintError::Random)?;
        crate::ticket::mint(key, req, crate::ticket::unix_now())
    }

    /// Starts the transfer worker (once), with transfer records in memory for a host that keeps
    /// nothing.
    async fn start_transfers(&self) -> Result<(), HostError> {
        let shared = &self.shared;
        if shared.sim.persist.is_none() && shared.memory_transfers.get().is_none() {
            let store = zonekeep_store::SqliteStore::open(":memory:")
                .await
                .map_err(|e| {
                    HostError::Io(std::io::Error::other(format!("transfer records: {e}")))
                })?;
            let _ = shared.memory_transfers.set(Arc::new(store));
        }
        if let Some(jobs) = shared.sim.transfers.take_receiver() {
            tokio::spawn(crate::transfer::run(Arc::clone(shared), jobs));
        }
        // Moves between hosts: the notes the bus brings this host's zones.
        if let Some(notes) = shared
            .sim
            .bus
            .get()
            .and_then(|b| b.take_transfer_deliveries())
        {
            tokio::spawn(crate::transfer::serve_notes(Arc::clone(shared), notes));
        }
        // Messages waiting for a zone that does not run here wake it, or are refused.
        tokio::spawn(crate::bus::wake::run(Arc::clone(shared)));
        Ok(())
    }

    /// Joins the fleet (a host with a store): registers in the directory with `bound` as the
    /// default advertised address and lands the first heartbeat. [`serve`](Self::serve) does it
    /// when it was not done before; call it first to know the host is a fleet member before
    /// announcing it.
    pub async fn join_fleet(&self, bound: std::net::SocketAddr) -> Result<(), HostError> {
        if self.shared.fleet().is_none() {
            crate::fleet::start(&self.shared, bound).await?;
        }
        Ok(())
    }

    /// Every route of the host (zones, metrics, admin, dev).
    pub fn router(&self) -> Router {
        let shared = self.shared.clone();
        let mut r = Router::new()
            .route("/zones/{zone_id}", get(ws_handler))
            .route("/metrics", get(metrics_handler))
            .route(
                "/admin/zones/{id}/messages",
                axum::routing::post(crate::bus::post_message).layer(
                    axum::middleware::from_fn_with_state(shared.clone(), crate::admin::auth),
                ),
            )
            .route("/healthz", get(|| async { "ok" }))
            .route("/webtransport", get(webtransport_handler))
            .merge(admin::router(&shared));
        if shared.config.dev {
            r = r.merge(dev::router());
        }
        r.with_state(shared)
    }

    /// Serve until `shutdown` resolves, then shut down gracefully: each zone
    /// stops ticking, its final save is confirmed by the store, and only then
    /// are its clients kicked with SHUTTING_DOWN, all within
    /// `shutdown_timeout_ms`. Returns [`HostError::StateLost`] when a final
    /// save was refused, dropped or not confirmed in time.
    pub async fn serve(
        self,
        listener: TcpListener,
        shutdown: impl Future<Output = ()>,
    ) -> Result<(), HostError> {
        self.serve_with(listener, Router::new(), shutdown).await
    }

    /// Like [`serve`](Self::serve), with `extra` routes merged in (e.g. static pages).
    ///
    /// HTTP/1.1 only: the WebSocket endpoint and the small JSON routes gain nothing from HTTP/2,
    /// and HTTP/1.1 alone lets one timer bound every socket until it has sent a request head
    /// (`header_read_timeout_ms`, from accept and between kept-alive requests). An HTTP/2
    /// preface is refused by closing the connection.
    pub async fn serve_with(
        self,
        listener: TcpListener,
        extra: Router,
        shutdown: impl Future<Output = ()>,
    ) -> Result<(), HostError> {
        let shared = self.shared.clone();
        let cfg = &shared.config;
        let app = self
            .router()
            .merge(extra)
            .layer(axum::middleware::from_fn_with_state(
                Duration::from_millis(cfg.request_timeout_ms),
                bound_plain_requests,
            ));
        let limiter = ConnLimiter::new(
            cfg.max_connections,
            cfg.max_connections_per_ip,
            shared.metrics.connections_gauge(),
        );
        let mut builder = http1::Builder::new();
        builder
            .timer(TokioTimer::new())
            .header_read_timeout(Duration::from_millis(cfg.header_read_timeout_ms));
        let conns = TaskTracker::new();
        // A host with a store serves only as a fleet member holding a lease.
        self.join_fleet(listener.local_addr()?).await?;
        let base = match shared.fleet() {
            Some(f) => f.url.clone(),
            None => crate::fleet::config::advertise_url(cfg, listener.local_addr()?),
        };
        let _ = shared.base_url.set(base);
        // WebTransport on UDP: where configured, or in dev mode on the HTTP port's number.
        let wt_addr = cfg
            .webtransport
            .or_else(|| cfg.dev.then(|| listener.local_addr().ok()).flatten());
        if let Some(addr) = wt_addr {
            crate::net::webtransport::start(&shared, addr, limiter.clone(), &conns)
                .await
                .map_err(|e| HostError::Io(std::io::Error::other(e.to_string())))?;
        }
        self.follow_module_deploys().await;
        self.start_bus().await?;
        self.start_transfers().await?;
        tracing::info!(addr = %listener.local_addr()?, "zonekeep host listening");
        tokio::pin!(shutdown);
        loop {
            let (stream, peer) = tokio::select! {
                _ = &mut shutdown => break,
                r = listener.accept() => match r {
                    Ok(x) => x,
                    Err(e) => {
                        // EMFILE and friends: back off briefly instead of spinning.
                        tracing::warn!(error = %e, "accept failed");
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        continue;
                    }
                },
            };
            let (guard, over_ip_cap) = match limiter.admit(peer.ip()) {
                Admission::Normal(g) => (g, false),
                Admission::OverIpCap(g) => {
                    shared.metrics.connection_refused("per_ip");
                    (g, true)
                }
                Admission::Refuse(reason) => {
                    shared.metrics.connection_refused(reason);
                    continue;
                }
            };
            let _ = stream.set_nodelay(true);
            if cfg.socket_send_buffer > 0 {
                let _ =
                    socket2::SockRef::from(&stream).set_send_buffer_size(cfg.socket_send_buffer);
            }
            let info = ConnInfo {
                over_ip_cap,
                guard: Arc::new(guard),
            };
            let app = app.clone();
            // Whether a request head ever arrived: a header timeout before the first one is a
            // silent socket (counted), after it an idle kept-alive connection closing (not).
            let served = Arc::new(AtomicBool::new(false));
            let seen = served.clone();
            let svc = hyper::service::service_fn(move |mut req: hyper::Request<Incoming>| {
                seen.store(true, Ordering::Relaxed);
                req.extensions_mut().insert(info.clone());
                app.clone().oneshot(req)
            });
            let conn = builder
                .serve_connection(TokioIo::new(stream), svc)
                .with_upgrades();
            let stop = shared.shutdown.clone();
            let metrics = shared.metrics.clone();
            conns.spawn(async move {
                tokio::pin!(conn);
                let r = tokio::select! {
                    r = conn.as_mut() => r,
                    _ = stop.cancelled() => {
                        // Finish the request in flight, then close; an idle socket closes now.
                        conn.as_mut().graceful_shutdown();
                        conn.await
                    }
                };
                if let Err(e) = r {
                    if e.is_timeout() && !served.load(Ordering::Relaxed) {
                        metrics.connection_refused("header_timeout");
                    } else if e.is_parse_version_h2() {
                        metrics.connection_refused("http2");
                    }
                    tracing::debug!(%peer, error = %e, "http connection ended with an error");
                }
            });
        }
        drop(listener);
        conns.close();
        // Leaving the fleet is the drain's last phase, within the same bound.
        let report = crate::drain::shutdown_host(&shared, &conns).await;
        shared.fleet_stop.cancel();
        if report.is_complete() {
            Ok(())
        } else {
            Err(HostError::StateLost {
                unsaved: report.unsaved,
                unfrozen_threads: report.unfrozen_threads,
            })
        }
    }
}

/// Plain HTTP requests (a WebSocket upgrade is let through: its session has its own bounds and
/// tells an over-cap client with `Kick(TOO_MANY_CONNECTIONS)`): from an address over its
/// connection cap they answer 429; otherwise they must be answered within `limit`, body read
/// included, or get 408. Either way the connection then closes.
async fn bound_plain_requests(
    State(limit): State<Duration>,
    req: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    // A module push or rollback bounds its own time (see `admin::modules`), so that its answer
    // always says what happened; the request's address cap still applies below.
    let bounds_itself =
        req.method() == axum::http::Method::POST && req.uri().path().starts_with("/admin/modules/");
    if req.headers().contains_key(header::UPGRADE) {
        return next.run(req).await;
    }
    let over = req
        .extensions()
        .get::<ConnInfo>()
        .is_some_and(|i| i.over_ip_cap);
    let mut r = if over {
        json_error(
            StatusCode::TOO_MANY_REQUESTS,
            "too_many_connections",
            "too many connections from this address",
        )
    } else {
        if bounds_itself {
            return next.run(req).await;
        }
        match tokio::time::timeout(limit, next.run(req)).await {
            Ok(r) => return r,
            Err(_) => json_error(
                StatusCode::REQUEST_TIMEOUT,
                "request_timeout",
                "the request was not completed in time",
            ),
        }
    };
    r.headers_mut().insert(
        header::CONNECTION,
        header::HeaderValue::from_static("close"),
    );
    r
}

async fn metrics_handler(State(shared): State<Arc<Shared>>) -> Response {
    let mut text = shared.metrics.encode();
    if let Some(bus) = shared.sim.bus.get() {
        crate::bus::encode_metrics(bus.stats(), &mut text);
    }
    (
        [(
            header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        text,
    )
        .into_response()
}

/// Where the WebTransport endpoint listens and which certificate hash to pin (PROTOCOL.md §1.1),
/// named from the host the request was sent to; 404 when WebTransport is off.
async fn webtransport_handler(
    State(shared): State<Arc<Shared>>,
    headers: axum::http::HeaderMap,
) -> Response {
    let Some(p) = shared.webtransport.get() else {
        return json_error(
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

async fn ws_handler(
    State(shared): State<Arc<Shared>>,
    Path(zone_id): Path<String>,
    RawQuery(query): RawQuery,
    info: Option<Extension<ConnInfo>>,
    ws: WebSocketUpgrade,
) -> Response {
    let hops = redirect_hops(query.as_deref());
    let cfg = &shared.config;
    // tungstenite's own caps sit at twice the host limit so that messages a
    // little over it arrive whole and get a precise MESSAGE_TOO_LARGE.
    let hard = cfg.max_message_bytes.saturating_mul(2);
    let ws = ws
        .max_message_size(hard)
        .max_frame_size(hard)
        .read_buffer_size(cfg.read_buffer_bytes)
        .write_buffer_size(cfg.write_buffer_bytes)
        .max_write_buffer_size(cfg.max_write_buffer_bytes);
    let (over, guard) = match info {
        Some(Extension(i)) => (i.over_ip_cap, Some(i.guard)),
        None => (false, None),
    };
    if !valid_zone_id(&zone_id) {
        return ws.on_upgrade(move |s| async move {
            let _guard = guard;
            crate::net::ws::refuse(s, shared, SessionError::BadZoneId).await;
        });
    }
    ws.on_upgrade(move |socket| async move {
        let _guard = guard;
        crate::net::ws::run(socket, zone_id, shared, over, hops).await;
    })
}

/// The `hops` query parameter hosts put on a Redirect's URL (0 when absent or unreadable: a
/// client that forges it only loops itself, and at most three more times).
pub(crate) fn redirect_hops(query: Option<&str>) -> u32 {
    query
        .into_iter()
        .flat_map(|q| q.split('&'))
        .find_map(|kv| kv.strip_prefix("hops="))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

/// A JSON error body `{"error": {"code", "message"}}`.
pub(crate) fn json_error(status: StatusCode, code: &str, message: impl Into<String>) -> Response {
    let body = serde_json::json!({"error": {"code": code, "message": message.into()}});
    (status, axum::Json(body)).into_response()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::params_refusal;
    use zonekeep_store::MAX_PARAMS_LEN;

    #[test]
    fn params_are_refused_past_the_directory_limit_and_the_refusal_names_it() {
        // `{"p":"…"}` is 8 bytes around the text.
        let fits = serde_json::json!({"p": "x".repeat(MAX_PARAMS_LEN - 8)});
        assert_eq!(serde_json::to_string(&fits).unwrap().len(), MAX_PARAMS_LEN);
        assert_eq!(params_refusal(&fits), None);
        let over = serde_json::json!({"p": "x".repeat(MAX_PARAMS_LEN - 7)});
        let refusal = params_refusal(&over).unwrap();
        assert!(refusal.contains("65536"), "{refusal}");
    }
}
