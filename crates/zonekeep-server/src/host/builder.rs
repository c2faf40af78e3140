//! [`HostBuilder`]: the zone kinds, persistence and settings a host is made of.

use std::collections::HashMap;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use zonekeep_core::{Clock, SystemClock, Zone, ZoneConfig, ZoneHost, ZoneKinds};

use crate::admin;
use crate::config::{ConfigError, ServerConfig};
use crate::metrics::Metrics;
use crate::net::netsim::NetSim;
use crate::persist::Persistence;
use crate::reconnect::ReconnectStore;
use crate::sim::{DisposeHook, Registry, SimContext, SimPool};
use crate::ticket::{KeyRing, TicketKey, Verifier};

use super::{Host, HostError, Shared};

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
    call_handlers: Vec<(String, Arc<dyn crate::persist::CallHandler>)>,
}

impl HostBuilder {
    /// A builder with no kinds, no persistence and the default settings.
    pub(super) fn new() -> Self {
        HostBuilder {
            config: ServerConfig::default(),
            kinds: ZoneKinds::new(),
            specs: HashMap::new(),
            order: Vec::new(),
            default_kind: None,
            dispose_hook: None,
            persistence: None,
            code: None,
            call_handlers: Vec::new(),
        }
    }

    /// Answers zones' durable calls of `function` ([`Ctx::call`](zonekeep_core::Ctx::call)) in
    /// this process with `handler` (see [`CallHandler`](crate::persist::CallHandler) for what it
    /// must guarantee); calls of functions without a handler go to the call webhook. Needs
    /// [`persistence`](Self::persistence): calls are journaled in the store.
    pub fn call_handler(
        mut self,
        function: &str,
        handler: Arc<dyn crate::persist::CallHandler>,
    ) -> Self {
        self.call_handlers.push((function.to_owned(), handler));
        self
    }

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

    /// What the clients of `kind` see: the entity schema a zone of it declares and its client
    /// contract. A throwaway zone is created with the kind's default params and this host's
    /// limits, on a clock that never moves, and dropped; nothing is stored and no thread runs.
    /// `zonekeep codegen` writes typed client code from the answer.
    pub fn describe(
        &self,
        kind: &str,
    ) -> Result<(zonekeep_protocol::Schema, zonekeep_protocol::Contract), HostError> {
        let spec = self
            .specs
            .get(kind)
            .ok_or_else(|| HostError::UnknownKind(kind.to_owned()))?;
        let config = self.config.zone_limits(spec.config.clone());
        let init = zonekeep_core::ZoneInit {
            zone_id: format!("{kind}-described"),
            kind: kind.to_owned(),
            params: spec.default_params.clone(),
        };
        let clock: Arc<dyn Clock> = Arc::new(zonekeep_core::ManualClock::new());
        let zone =
            self.kinds
                .create(init, config, clock)
                .map_err(|error| HostError::CreateZone {
                    kind: kind.to_owned(),
                    error,
                })?;
        Ok((zone.schema(), zone.contract()))
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
            if spec.config.lasting && self.persistence.is_none() {
                return Err(HostError::LastingWithoutStore(kind.clone()));
            }
            if spec.config.characters && self.persistence.is_none() {
                return Err(HostError::CharactersWithoutStore(kind.clone()));
            }
        }
        match (&self.persistence, self.call_handlers.first()) {
            (Some(p), _) => {
                for (function, handler) in self.call_handlers.drain(..) {
                    p.calls().sinks().register(&function, handler);
                }
            }
            (None, Some((function, _))) => {
                return Err(HostError::CallsWithoutStore(function.clone()))
            }
            (None, None) => {}
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
            halts: Arc::new(crate::halt::Halts::new(metrics.clone())),
            // A clock of their own, read from the cycle counter: a tick reads it many times, and
            // its readings are not the zone's, so never recorded.
            stage_clock: config
                .stage_timing
                .then(|| Arc::new(zonekeep_core::CycleClock::new()) as Arc<dyn Clock>),
            lifecycle: crate::sim::Lifecycle::new(config.lifecycle_log),
        });
        let pool = SimPool::start(config.sim_thread_count(), config.sim_queue, sim.clone())?;
        let admin_token_hash = config
            .admin_token
            .as_ref()
            .map(|t| admin::hash_token(t.expose()));
        let lobby_token_hash = config
            .lobby_token
            .as_ref()
            .map(|t| admin::hash_token(t.expose()));
        let relay_token_hash = config
            .relay_token
            .as_ref()
            .map(|t| admin::hash_token(t.expose()));
        let presence = crate::presence::Hub::new(metrics.clone());
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
                drain_requested: CancellationToken::new(),
                sessions_end: CancellationToken::new(),
                sessions: TaskTracker::new(),
                next_conn: AtomicU64::new(1),
                ws_io: std::sync::OnceLock::new(),
                default_kind,
                sim,
                admin_token_hash,
                lobby_token_hash,
                relay_token_hash,
                relay_places: Default::default(),
                config,
                fleet: std::sync::OnceLock::new(),
                fleet_metrics,
                fleet_stop: CancellationToken::new(),
                code: self.code,
                compiler,
                webtransport: std::sync::OnceLock::new(),
                base_url: std::sync::OnceLock::new(),
                memory_transfers: std::sync::OnceLock::new(),
                character_locks: crate::session::PrincipalLocks::default(),
                matchmaker: std::sync::OnceLock::new(),
                probes: crate::matchmaker::Probes::default(),
                boards: std::sync::OnceLock::new(),
                chat: std::sync::OnceLock::new(),
                presence,
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
