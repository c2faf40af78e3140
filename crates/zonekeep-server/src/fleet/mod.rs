//! The fleet: this host's membership in the directory, its lease, and where zones live.
//!
//! A host with a store is always a fleet member (with the embedded SQLite default, a fleet of
//! one). On start it registers in the store's directory under its host id and advertised URL and
//! must land a heartbeat before it serves anyone. Then:
//! - a heartbeat task stamps the directory about once a second and publishes each
//!   landed heartbeat to the [`LeaseGate`]; every zone's storage and fact writes, and its
//!   simulation thread, check that gate, so a host whose heartbeats stop landing stops acting
//!   within the fence bound (5 s) even when store calls hang;
//! - a watchdog on its own OS thread notices the lapse even when the async runtime
//!   is stuck, logs it, counts it and wakes the simulation threads so they stop their zones;
//! - a reconcile task starts the zones the directory assigns to this host and
//!   takes over the zones of dead hosts for which this host is the failover winner;
//! - a Hello for a zone another host owns is redirected (or proxied) there.
//!
//! The rules themselves (timing, claims, placement, failover choice) are `zonekeep-fleet`'s; the
//! store applies the claim rule in its own transaction. This module only drives them.

pub(crate) mod config;
mod dir_lock;
mod entries;
pub(crate) mod forward;
mod gate;
pub(crate) mod heartbeat;
mod metrics;
pub(crate) mod reconcile;
pub(crate) mod route;
pub(crate) mod watchdog;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use zonekeep_fleet::Timing;
use zonekeep_store::{ClaimRequest, Directory, StoreError, ZoneClaim};

pub(crate) use config::{advertise_url, host_id, random_hex, validate_config};
pub use config::{RouteMode, HOST_ID_FILE};
pub use dir_lock::LOCK_FILE;
pub(crate) use entries::EntryUrls;
pub use gate::LeaseGate;
pub use metrics::FleetMetrics;

/// Longest a directory query may take before the host treats it as failed. Well under the fence
/// bound, so a hanging database is noticed long before the lease matters.
pub(crate) const QUERY_TIMEOUT: Duration = Duration::from_secs(2);

/// Why the host could not join the fleet or a directory call failed.
#[derive(Debug, Clone, thiserror::Error)]
pub enum FleetError {
    /// The store refused or failed the call.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The store did not answer within the query timeout.
    #[error("the store did not answer the fleet directory within {} s", QUERY_TIMEOUT.as_secs())]
    Timeout,
    /// Another live process holds this host id.
    #[error("host id {host_id:?} is in use by a live host (heartbeat {age_ms} ms ago): give each host its own --host-id")]
    IdInUse {
        /// The contested id.
        host_id: String,
        /// Age of the other process's last heartbeat.
        age_ms: u64,
    },
    /// The host id file or the random source failed.
    #[error("host identity: {0}")]
    Identity(String),
    /// A ticket key retired (or removed) in this host's configuration still signs the tickets
    /// of live matches: retiring it now would refuse their players.
    #[error(
        "ticket key {kid:?} is retired or gone here, but {matches} live matches still hold \
         tickets signed with it: keep it (not retired) until GET /admin/match/keys shows none"
    )]
    KeyInUse {
        /// The key id.
        kid: String,
        /// Live matches referencing it.
        matches: u64,
    },
}

/// This host as a fleet member.
pub struct Fleet {
    /// The host id.
    pub host_id: String,
    /// This process's incarnation of the id: random per start, and new again when the host
    /// rejoins after the database counted it dead.
    incarnation: std::sync::RwLock<String>,
    /// The advertised base URL (`ws://host:port`).
    pub url: String,
    /// Zones placement may put here.
    pub capacity: u32,
    /// The region this host serves (`--region`).
    pub region: String,
    /// Redirect or proxy.
    pub route: RouteMode,
    /// The protocol timing.
    pub timing: Timing,
    /// The store's directory.
    pub directory: Arc<dyn Directory>,
    /// The host's lease.
    pub gate: Arc<LeaseGate>,
    /// Fleet metrics.
    pub metrics: FleetMetrics,
    draining: AtomicBool,
    left: AtomicBool,
    /// The data directory's lock (embedded store only), held for the process's life: while it
    /// is held, a restart under this id knows this process still runs.
    dir_lock: Option<std::fs::File>,
}

impl std::fmt::Debug for Fleet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Fleet")
            .field("host_id", &self.host_id)
            .field("url", &self.url)
            .finish_non_exhaustive()
    }
}

/// Runs one directory query under [`QUERY_TIMEOUT`], counting it.
pub(crate) async fn query<T>(
    metrics: &FleetMetrics,
    op: &'static str,
    fut: impl std::future::Future<Output = Result<T, StoreError>>,
) -> Result<T, FleetError> {
    metrics.query(op);
    let r = match tokio::time::timeout(QUERY_TIMEOUT, fut).await {
        Ok(r) => r.map_err(FleetError::from),
        Err(_) => Err(FleetError::Timeout),
    };
    if r.is_err() {
        metrics.query_errors.inc();
    }
    r
}

impl Fleet {
    /// A member that has not registered yet (see [`heartbeat::join`]).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(
        host_id: String,
        incarnation: String,
        url: String,
        capacity: u32,
        region: String,
        route: RouteMode,
        directory: Arc<dyn Directory>,
        gate: Arc<LeaseGate>,
        metrics: FleetMetrics,
        dir_lock: Option<std::fs::File>,
    ) -> Self {
        Fleet {
            host_id,
            incarnation: std::sync::RwLock::new(incarnation),
            url,
            capacity,
            region,
            route,
            timing: Timing::default(),
            directory,
            gate,
            metrics,
            draining: AtomicBool::new(false),
            left: AtomicBool::new(false),
            dir_lock,
        }
    }

    /// This process's current incarnation of the host id.
    pub fn incarnation(&self) -> String {
        self.incarnation
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Takes a new incarnation (the database counted the old one dead).
    fn renew_incarnation(&self) -> Result<(), FleetError> {
        let fresh = random_hex(8).map_err(|e| FleetError::Identity(e.to_string()))?;
        *self.incarnation.write().unwrap_or_else(|p| p.into_inner()) = fresh;
        Ok(())
    }

    /// Whether this process holds its data directory's lock, which proves no earlier process of
    /// this host id on the embedded store still runs.
    pub fn holds_dir_lock(&self) -> bool {
        self.dir_lock.is_some()
    }

    /// Whether this host is draining (placement skips it).
    pub fn draining(&self) -> bool {
        self.draining.load(Ordering::Relaxed)
    }

    /// Marks the host draining and tells the directory at once (placement, failover and other
    /// hosts' drains stop choosing it); the heartbeats that follow keep saying so.
    pub async fn start_draining(&self) {
        self.draining.store(true, Ordering::Relaxed);
        let r = query(
            &self.metrics,
            "heartbeat",
            self.directory
                .heartbeat(&self.host_id, &self.incarnation(), true, self.timing),
        )
        .await;
        if let Err(e) = r {
            tracing::warn!(error = %e, "could not tell the directory this host is draining");
        }
    }

    /// Whether the host has left the fleet (heartbeats stopped for good).
    pub fn has_left(&self) -> bool {
        self.left.load(Ordering::SeqCst)
    }

    /// Claims `zone_id` for this host to load it now: a new epoch, and its latest save to restore
    /// from. `Owned` when another live host has it.
    pub async fn claim_here(
        &self,
        zone_id: &str,
        kind: &str,
        params: &Value,
    ) -> Result<ZoneClaim, FleetError> {
        self.claim_for(zone_id, kind, params, &self.host_id).await
    }

    /// Claims `zone_id` on behalf of `to` (placement or failover on another host).
    pub async fn claim_for(
        &self,
        zone_id: &str,
        kind: &str,
        params: &Value,
        to: &str,
    ) -> Result<ZoneClaim, FleetError> {
        let incarnation = self.incarnation();
        let req = ClaimRequest {
            zone_id,
            kind,
            params,
            by: &self.host_id,
            by_incarnation: &incarnation,
            to,
            timing: self.timing,
        };
        query(&self.metrics, "claim", self.directory.claim_zone(&req)).await
    }

    /// Removes the directory entry of a zone that never ran (its kind refused to create it), so
    /// no host's reconcile starts it and its id is free. A failure is logged; the entry then
    /// stays until the next refused start forgets it.
    pub async fn forget_unstarted(&self, zone_id: &str) {
        let r = query(&self.metrics, "forget", self.directory.forget_zone(zone_id)).await;
        if let Err(e) = r {
            tracing::warn!(zone = %zone_id, error = %e, "could not remove the refused zone from the directory");
        }
    }

    /// Gives up ownership of a zone this host saved and unloaded (dormant), so the next join
    /// anywhere places it afresh. A no-op when the zone has moved on meanwhile.
    pub async fn release(&self, zone_id: &str, epoch: u64) {
        let r = query(
            &self.metrics,
            "release",
            self.directory.release_zone(zone_id, &self.host_id, epoch),
        )
        .await;
        if let Err(e) = r {
            tracing::warn!(zone = %zone_id, error = %e, "could not release the dormant zone; it stays assigned to this host");
        }
    }

    /// Spends a ticket's single-use id in the directory: `true` the first time anywhere in the
    /// fleet.
    pub async fn spend_ticket(&self, jti: &str, forget_after_ms: u64) -> Result<bool, FleetError> {
        query(
            &self.metrics,
            "spend_ticket",
            self.directory.spend_ticket(jti, forget_after_ms),
        )
        .await
    }

    /// The host leaves the fleet: its zones may be taken at once. Called at the end of a graceful
    /// shutdown, after the final saves; the lease is revoked first, so nothing more is written.
    pub async fn leave(&self) {
        self.left.store(true, Ordering::SeqCst);
        self.gate.revoke();
        match query(
            &self.metrics,
            "leave",
            self.directory
                .leave_host(&self.host_id, &self.incarnation()),
        )
        .await
        {
            Ok(()) => tracing::info!(host = %self.host_id, "left the fleet"),
            Err(e) => {
                tracing::warn!(host = %self.host_id, error = %e, "could not mark the host as left; other hosts take its zones after the takeover bound")
            }
        }
    }

    /// The WebSocket URL of `zone_id` at the host whose base URL is `base`, carrying the hop count.
    pub fn zone_url(base: &str, zone_id: &str, hops: u32) -> String {
        format!("{base}/zones/{zone_id}?hops={hops}")
    }
}

/// Joins the fleet (hosts with a store): registers, lands the first heartbeat, routes claims
/// through the directory, and starts the heartbeat, reconcile and watchdog. `bound` is the
/// listening address (the default advertised URL). A host without a store has no fleet.
pub(crate) async fn start(
    shared: &Arc<crate::host::Shared>,
    bound: std::net::SocketAddr,
) -> Result<(), FleetError> {
    let Some(persist) = shared.sim.persist.clone() else {
        return Ok(());
    };
    crate::matchmaker::check_keys(shared).await?;
    let cfg = &shared.config;
    let identity = |e: std::io::Error| FleetError::Identity(e.to_string());
    let dir_lock = if dir_lock::is_embedded(cfg.store.expose()) {
        let dir = cfg.data_dir.clone();
        tokio::task::spawn_blocking(move || dir_lock::acquire(&dir))
            .await
            .unwrap_or(None)
    } else {
        None
    };
    let fleet = Arc::new(Fleet::new(
        host_id(cfg).map_err(identity)?,
        random_hex(8).map_err(identity)?,
        advertise_url(cfg, bound),
        cfg.capacity
            .unwrap_or_else(|| u32::try_from(cfg.max_zones).unwrap_or(u32::MAX)),
        cfg.region.clone(),
        cfg.route,
        Arc::clone(&persist.store().directory),
        Arc::clone(persist.gate()),
        shared.fleet_metrics.clone(),
        dir_lock,
    ));
    let lease = heartbeat::join(&fleet, fleet.holds_dir_lock()).await?;
    // Until the first reconcile pass lists the others, Welcomes name this host alone.
    shared.sim.entries.set(&fleet.url, []);
    persist.set_fleet(Arc::clone(&fleet));
    let _ = shared.fleet.set(Arc::clone(&fleet));
    let stop = shared.fleet_stop.clone();
    tokio::spawn(heartbeat::run(Arc::clone(&fleet), lease, stop.clone()));
    // The lobby rooms this host runs, reported to the store.
    tokio::spawn(crate::lobby::report::run(Arc::clone(shared)));
    crate::matchmaker::start(shared, &fleet).await?;
    crate::boards::start(shared).await?;
    crate::chat::start(shared, &fleet.host_id).await?;
    crate::presence::start(shared, &fleet);
    tokio::spawn(reconcile::run(
        Arc::clone(shared),
        Arc::clone(&fleet),
        stop.clone(),
    ));
    let halt = Arc::new(AtomicBool::new(false));
    let wakers = shared.pool.wakers();
    let interrupts = Arc::clone(&shared.sim.interrupts);
    watchdog::spawn(Arc::clone(&fleet), Arc::clone(&halt), move || {
        // A module call running now stops within an epoch rather than at its deadline.
        let stopped = interrupts.stop_all();
        if stopped > 0 {
            tracing::error!(stopped, "lease lapsed: stopping the running module calls");
        }
        for w in &wakers {
            let _ = w.try_send(crate::sim::SimCommand::Wake);
        }
    })
    .map_err(identity)?;
    tokio::spawn(async move {
        stop.cancelled().await;
        halt.store(true, Ordering::Relaxed);
    });
    Ok(())
}
