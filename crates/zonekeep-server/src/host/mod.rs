//! The host: its shared state, and what each part of it is.
//!
//! - `builder`: [`HostBuilder`], the zone kinds, persistence and settings a host is made of.
//! - `serve`: [`Host`], its bus, transfers and fleet membership, and the accept loop.
//! - `routes`: the HTTP routes a client or a scraper reaches (zone upgrades, `/metrics`, the
//!   WebTransport discovery) and the bounds on plain requests.

mod builder;
mod routes;
mod serve;

use std::sync::atomic::{AtomicU64, AtomicUsize};
use std::sync::Arc;
use std::time::Duration;

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::Value;
use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use zonekeep_core::Clock;

use crate::config::{ConfigError, ServerConfig};
use crate::metrics::Metrics;
use crate::net::conn_limit::ConnGuard;
use crate::net::netsim::NetSim;
use crate::reconnect::ReconnectStore;
use crate::sim::{
    admit_zone, AdminFailure, AdmitError, Arrival, JoinFailure, Registry, SimCommand, SimContext,
    SimPool, StartError, Startup, ZoneCreate, ZoneEntry,
};
use crate::ticket::Verifier;

pub use builder::HostBuilder;
pub(crate) use routes::redirect_hops;
pub use serve::Host;

/// Why a host could not be built or served.
#[derive(Debug, thiserror::Error)]
pub enum HostError {
    /// The configuration is invalid.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// No zone kind registered.
    #[error("no zone kind registered")]
    NoKinds,
    /// A kind asked for by name is not registered.
    #[error("zone kind {0:?} is not registered")]
    UnknownKind(String),
    /// A zone of the kind could not be created with its default params.
    #[error("creating a zone of kind {kind:?}: {error}")]
    CreateZone {
        /// The kind.
        kind: String,
        /// Why the zone refused to start.
        error: zonekeep_core::ZoneError,
    },
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
    /// A kind whose players bring characters (`ZoneConfig::characters`) on a host that keeps
    /// nothing: there is no store to hold the characters' leases in.
    #[error("zone kind {0:?} keeps characters, and this host has no store to hold them in")]
    CharactersWithoutStore(String),
    /// A call handler was registered but the host has no persistence: calls are journaled in
    /// the store.
    #[error("call handler {0:?} needs persistence: durable calls are journaled in the store")]
    CallsWithoutStore(String),
    /// A lasting kind on a host that saves nothing: its worlds would be lost at every restart.
    #[error("zone kind {0:?} is a lasting world, and this host has no store to keep it in")]
    LastingWithoutStore(String),
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
    /// Cancelled to start the graceful shutdown from inside the host (`POST /admin/drain`):
    /// [`Host::serve`] stops accepting on it exactly as when its `shutdown` future resolves.
    pub drain_requested: CancellationToken,
    /// Cancelled once the zones' final saves are confirmed (or the deadline
    /// passed): every session still open is told SHUTTING_DOWN.
    pub sessions_end: CancellationToken,
    pub sessions: TaskTracker,
    pub next_conn: AtomicU64,
    /// The WebSocket I/O threads, started when the host starts serving.
    pub ws_io: std::sync::OnceLock<crate::net::ws::io::WsIo>,
    pub default_kind: String,
    pub sim: Arc<SimContext>,
    pub admin_token_hash: Option<[u8; 32]>,
    /// The lobby token's hash; `None` when the lobby is off.
    pub lobby_token_hash: Option<[u8; 32]>,
    /// The relay token's hash; `None` when the host takes no relays.
    pub relay_token_hash: Option<[u8; 32]>,
    /// What each relay link reports of its relay, for placing new players.
    pub(crate) relay_places: crate::net::relay::placement::Places,
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
    /// Character acquisitions of one principal on this host take turns.
    pub character_locks: crate::session::PrincipalLocks,
    /// This host's matchmaker replica, once it joined the fleet with `--match-queue`.
    pub matchmaker: std::sync::OnceLock<Arc<crate::matchmaker::Matchmaker>>,
    /// The probes this host is measuring for its region.
    pub probes: crate::matchmaker::Probes,
    /// The leaderboards, once the host joined the fleet (hosts with a store).
    pub boards: std::sync::OnceLock<Arc<crate::boards::Boards>>,
    /// The presence watchers of this host.
    pub presence: crate::presence::Hub,
    /// Chat, once the host joined the fleet (hosts with a store).
    pub chat: std::sync::OnceLock<Arc<crate::chat::Chat>>,
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

/// Where [`Shared::route_join`] sends a join: the zone, its start when this join is what starts
/// it here, and the join's [`Arrival`] there (held until the zone's thread has the join).
pub(crate) struct Routed {
    pub entry: Arc<ZoneEntry>,
    pub create: Option<ZoneCreate>,
    pub arrival: Arrival,
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
            present: Default::default(),
            listing: Default::default(),
            rate_limited: metrics.input_counter("rate_limited").unwrap_or_default(),
            inbox_full: metrics.input_counter("inbox_full").unwrap_or_default(),
            ready: tokio::sync::watch::Sender::new(Startup::Starting),
            groups: Default::default(),
            arriving: AtomicUsize::new(0),
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
    ) -> Result<Routed, JoinFailure> {
        let mut zones = self.registry.lock();
        if let Some(e) = zones.get(zone_id) {
            let entry = e.clone();
            let arrival = Registry::arrival(&zones, &entry);
            return Ok(Routed {
                entry,
                create: None,
                arrival,
            });
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
        if let Some(h) = self.sim.halts.get(zone_id) {
            return Err(JoinFailure::Halted(h.message()));
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
        let arrival = Registry::arrival(&zones, &entry);
        Ok(Routed {
            entry,
            create: Some(create),
            arrival,
        })
    }

    /// Starts zone `id` of `kind` on this host without a join (admin create, fleet reconcile,
    /// the resumer of a halted lasting world when `resuming`), recording it from its creation
    /// when `record` is set: the one admission path, then waits for the zone's thread to have it.
    pub(crate) async fn start_zone(
        &self,
        id: &str,
        kind: &str,
        params: Value,
        record: Option<zonekeep_core::recording::RecordLimits>,
        resuming: bool,
    ) -> Result<(), AdminFailure> {
        /// How long the zone's thread may take to answer once it has the zone.
        const REPLY_TIMEOUT: Duration = Duration::from_secs(5);
        let (entry, create) = self.register_new(id, kind, params, resuming)?;
        // Built here (claim and restore with persistence), never on the sim thread.
        let (tx, rx) = oneshot::channel();
        let hand_over = |mut start: crate::sim::ZoneStart| {
            start.record = record;
            SimCommand::Create {
                zone_id: id.to_owned(),
                create: start,
                reply: tx,
            }
        };
        match admit_zone(&self.sim, &self.pool, &entry, create, hand_over).await {
            Ok(()) => {}
            Err(AdmitError::Start(StartError::Invalid(reason))) => {
                return Err(AdminFailure::BadRequest(reason))
            }
            Err(AdmitError::Start(StartError::Failed(reason))) => {
                let message = self.registry.failure(id).map_or(reason, |f| f.message());
                return Err(AdminFailure::Failed(message));
            }
            Err(e) => return Err(AdminFailure::Unavailable(e.to_string())),
        }
        match tokio::time::timeout(REPLY_TIMEOUT, rx).await {
            Ok(Ok(r)) => r,
            _ => Err(AdminFailure::Unavailable(
                "the zone's thread did not answer".into(),
            )),
        }
    }

    /// Register a zone for an admin create (or, with `resuming`, for the resumer of a halted
    /// lasting world, which the halt does not refuse).
    pub fn register_new(
        &self,
        zone_id: &str,
        kind: &str,
        params: Value,
        resuming: bool,
    ) -> Result<(Arc<ZoneEntry>, ZoneCreate), crate::sim::AdminFailure> {
        use crate::sim::AdminFailure;
        let mut zones = self.registry.lock();
        if zones.contains_key(zone_id) {
            return Err(AdminFailure::Exists(zone_id.to_owned()));
        }
        if let Some(h) = self.sim.halts.get(zone_id).filter(|_| !resuming) {
            return Err(AdminFailure::Halted(h.message()));
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

/// A JSON error body `{"error": {"code", "message"}}`.
/// The longest a request waits on the store before it is answered 503: a database that stopped
/// answering is told to the client, never waited on.
pub const STORE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(3);

/// Why a bounded store call gave no answer.
#[derive(Debug)]
pub(crate) enum StoreCallError {
    /// The store answered with an error.
    Store(zonekeep_store::StoreError),
    /// The store did not answer within [`STORE_TIMEOUT`] (the message says so).
    Timeout(String),
}

/// One store call a request makes, bounded by [`STORE_TIMEOUT`].
pub(crate) async fn bounded_store_call<T>(
    call: impl std::future::Future<Output = Result<T, zonekeep_store::StoreError>>,
) -> Result<T, StoreCallError> {
    match tokio::time::timeout(STORE_TIMEOUT, call).await {
        Ok(r) => r.map_err(StoreCallError::Store),
        Err(_) => Err(StoreCallError::Timeout(format!(
            "the store did not answer within {} s",
            STORE_TIMEOUT.as_secs()
        ))),
    }
}

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
