//! Everything persistence needs in one host: the store, the storage and fact
//! workers, the loader and the settlement routes, opened from a
//! [`PersistConfig`] and handed to the host builder.

use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use zonekeep_core::{Clock, ZoneConfig, ZoneHost, ZoneInit, ZoneKinds};
use zonekeep_store::Store;

use super::calls::CallWorker;
use super::characters::CharacterWorker;
use super::config::{open, ConfigError, PersistConfig};
use super::facts::FactWorker;
use super::loader::{ClaimedZone, StartFailure, StartFailures, ZoneLoader};
use super::metrics::PersistMetrics;
use super::route::SettlementRouter;
use super::storage::{ShutdownReport, StorageHandle, StorageWorker};
use super::zone::ZonePersist;
use crate::fleet::{Fleet, LeaseGate};

/// What graceful shutdown of persistence achieved.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PersistShutdown {
    /// Final saves written and zones left unsaved.
    pub saves: ShutdownReport,
    /// Facts still uncommitted when the bound passed (they are in flight in
    /// the final saves and are re-sent after the restart).
    pub facts_abandoned: i64,
}

/// The host's persistence: open it with [`Persistence::open`] inside the
/// tokio runtime, then pass it to
/// [`HostBuilder::persistence`](crate::HostBuilder::persistence).
pub struct Persistence {
    config: PersistConfig,
    store: Store,
    storage: StorageHandle,
    loader: ZoneLoader,
    facts: FactWorker,
    characters: CharacterWorker,
    calls: CallWorker,
    router: SettlementRouter,
    metrics: PersistMetrics,
    /// The host's lease; every save and fact of a zone checks it.
    gate: Arc<LeaseGate>,
    /// The fleet membership, once the host has joined: claims go through its directory.
    fleet: std::sync::OnceLock<Arc<Fleet>>,
}

/// Why [`Persistence::claim`] did not hand out the zone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClaimRefusal {
    /// The store failed or refused; recorded as the zone's start failure.
    Failed(StartFailure),
    /// Another live host of the fleet owns the zone.
    Moved {
        /// Its host id.
        host: String,
        /// Its advertised base URL.
        url: String,
    },
}

impl Persistence {
    /// The host's lease gate (armed by the fleet when the host joins).
    pub fn gate(&self) -> &Arc<LeaseGate> {
        &self.gate
    }

    /// From now on zones are claimed through `fleet`'s directory, and a zone retired after its
    /// final save gives its ownership up there. Set once, when the host joins the fleet.
    pub fn set_fleet(&self, fleet: Arc<Fleet>) {
        let release = Arc::clone(&fleet);
        self.storage
            .on_retired(Arc::new(move |zone_id: String, epoch: u64| {
                let fleet = Arc::clone(&release);
                Box::pin(async move { fleet.release(&zone_id, epoch).await })
            }));
        let _ = self.fleet.set(fleet);
    }
}

impl std::fmt::Debug for Persistence {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Persistence")
            .field("store", &self.store.description)
            .field("sink", &self.facts.sink_description())
            .finish_non_exhaustive()
    }
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

impl Persistence {
    /// Opens the store and the sink (migrations applied) and starts the
    /// workers. Must be called within a tokio runtime.
    pub async fn open(config: PersistConfig) -> Result<Arc<Persistence>, ConfigError> {
        let metrics = PersistMetrics::new();
        let (store, sink, call_sinks) = open(&config, &metrics).await?;
        let gate = Arc::new(LeaseGate::new());
        let storage = StorageWorker::start_leased(
            store.saves.clone(),
            config.storage,
            metrics.clone(),
            Arc::clone(&gate),
        );
        let loader = ZoneLoader::new(store.saves.clone(), storage.clone(), metrics.clone());
        let router = SettlementRouter::new();
        let facts = FactWorker::start(
            sink,
            Arc::new(router.clone()),
            config.facts,
            metrics.clone(),
        );
        let characters =
            CharacterWorker::start(store.characters.clone(), metrics.characters.clone());
        let calls = CallWorker::start(
            store.calls.clone(),
            call_sinks,
            Arc::new(router.clone()),
            config.calls,
            metrics.calls.clone(),
        );
        tracing::info!(store = %store.description, sink = %facts.sink_description(), save_every = ?config.save_every, "persistence on");
        Ok(Arc::new(Persistence {
            config,
            store,
            storage,
            loader,
            facts,
            characters,
            calls,
            router,
            metrics,
            gate,
            fleet: std::sync::OnceLock::new(),
        }))
    }

    /// The settings in force.
    pub fn config(&self) -> &PersistConfig {
        &self.config
    }

    /// The opened store (saves and ledger).
    pub fn store(&self) -> &Store {
        &self.store
    }

    /// The storage worker.
    pub fn storage(&self) -> &StorageHandle {
        &self.storage
    }

    /// The fact worker.
    pub fn facts(&self) -> &FactWorker {
        &self.facts
    }

    /// The call worker (register in-process call handlers on its [`CallWorker::sinks`]).
    pub fn calls(&self) -> &CallWorker {
        &self.calls
    }

    /// The character worker.
    pub fn characters(&self) -> &CharacterWorker {
        &self.characters
    }

    /// The counters (registered on `/metrics` by the host).
    pub fn metrics(&self) -> &PersistMetrics {
        &self.metrics
    }

    /// Zones that did not start, and why.
    pub fn failures(&self) -> &StartFailures {
        self.loader.failures()
    }

    /// Zones started afresh because their save's state version changed.
    pub fn fresh_starts(&self) -> &super::ZoneRecords<super::FreshStart> {
        self.loader.fresh_starts()
    }

    /// Waits for this host's unwritten save of the zone, then claims it (a
    /// new owner epoch) — through the fleet directory once the host joined
    /// one, where another live owner answers [`ClaimRefusal::Moved`]. A store
    /// failure is recorded as the zone's start failure.
    pub async fn claim(
        &self,
        zone_id: &str,
        kind: &str,
        params: &serde_json::Value,
    ) -> Result<ClaimedZone, ClaimRefusal> {
        let failed = |reason: String| {
            let f = StartFailure {
                zone_id: zone_id.to_owned(),
                kind: kind.to_owned(),
                reason,
                save: None,
                at_ms: now_ms(),
                params_refused: false,
            };
            tracing::error!(zone = %zone_id, reason = %f.reason, "zone did not start");
            self.loader.failures().record(f.clone());
            ClaimRefusal::Failed(f)
        };
        let Some(fleet) = self.fleet.get() else {
            return self
                .loader
                .claim(zone_id)
                .await
                .map_err(|e| failed(e.to_string()));
        };
        self.storage.flush(zone_id).await;
        match fleet.claim_here(zone_id, kind, params).await {
            Ok(zonekeep_store::ZoneClaim::Claimed { epoch, last, .. }) => {
                Ok(ClaimedZone { epoch, last })
            }
            Ok(zonekeep_store::ZoneClaim::Owned(loc)) => match (loc.owner, loc.owner_url) {
                (Some(host), Some(url)) if loc.owner_alive => {
                    Err(ClaimRefusal::Moved { host, url })
                }
                _ => Err(failed(
                    "the zone's owner could not be settled; retry".into(),
                )),
            },
            Err(e) => {
                self.metrics.store_errors.inc();
                Err(failed(format!("claiming the zone failed: {e}")))
            }
        }
    }

    /// Forgets the fleet directory's entry for `zone_id`, which this host claimed and its kind
    /// then refused to create for its params (it has no save and never ran): nothing of the
    /// refused request stays behind to be started again, and the id is free for a later create.
    pub async fn forget_refused(&self, zone_id: &str) {
        if let Some(fleet) = self.fleet.get() {
            fleet.forget_unstarted(zone_id).await;
        }
    }

    /// Builds the zone from its claim (restoring its last save, if any) and
    /// ties it to the workers. CPU work: call it off the simulation threads.
    /// On failure the save is kept and the reason recorded.
    pub fn build(
        &self,
        kinds: &ZoneKinds,
        init: ZoneInit,
        config: ZoneConfig,
        clock: Arc<dyn Clock>,
        claimed: &ClaimedZone,
    ) -> Result<(ZoneHost, ZonePersist), StartFailure> {
        let zone_id = init.zone_id.clone();
        let save_every = self.config.save_every_for(&init.kind);
        let settle_budget = config
            .max_facts_in_flight
            .saturating_add(config.max_calls_in_flight);
        let now = clock.now();
        let host = self.loader.build(kinds, init, config, clock, claimed)?;
        if let Some(save) = &claimed.last {
            tracing::info!(zone = %zone_id, epoch = claimed.epoch, from_epoch = save.epoch, seq = save.seq, facts_in_flight = host.facts_in_flight(), "zone restored from its save");
        }
        let route = self.router.open(&zone_id, settle_budget);
        let halt_after = host
            .config()
            .lasting
            .then(|| self.config.lasting_halt_after_for(host.kind()));
        let persist = ZonePersist::new(
            &zone_id,
            claimed.epoch,
            self.storage.clone(),
            self.facts.clone(),
            route,
            save_every,
            settle_budget,
            now,
        )
        .halting_after(halt_after)
        .writing_characters(self.characters.clone())
        .making_calls(self.calls.clone());
        Ok((host, persist))
    }

    /// Graceful shutdown, after every zone's final snapshot was submitted:
    /// waits for the saves, then for the facts being committed, all by one
    /// `deadline` (a slow store cannot stretch the shutdown past it).
    pub async fn shutdown(&self, deadline: tokio::time::Instant) -> PersistShutdown {
        let left = || deadline.saturating_duration_since(tokio::time::Instant::now());
        let saves = self.storage.shutdown(left()).await;
        if tokio::time::timeout(left(), self.characters.flush())
            .await
            .is_err()
        {
            tracing::error!("characters not all written by the shutdown deadline");
        }
        if saves.unsaved.is_empty() {
            tracing::info!(saved = saves.saved, "final saves written");
        } else {
            tracing::error!(saved = saves.saved, unsaved = ?saves.unsaved, "some zones' final saves were not written in time");
        }
        let facts_abandoned = self.facts.shutdown(left()).await;
        // Calls in progress stay in flight in the final saves; the restart sends them again.
        self.calls.shutdown(left()).await;
        if facts_abandoned > 0 {
            tracing::warn!(
                facts_abandoned,
                "facts left uncommitted; they are re-sent after the restart"
            );
        }
        PersistShutdown {
            saves,
            facts_abandoned,
        }
    }
}
