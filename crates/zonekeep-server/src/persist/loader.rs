//! Zone creation with persistence: claim, then restore or create.
//!
//! Runs on the tokio runtime before the zone is handed to a simulation
//! thread. The order matters:
//! 1. wait for this host's own unwritten save of the zone (a zone that just
//!    hibernated may still be writing its final snapshot; claiming first
//!    would fence that write and lose the state);
//! 2. `claim` the zone: a new owner epoch, which fences every older owner;
//! 3. restore from the last save with that epoch as the boot epoch, or create
//!    the zone fresh when there is no save.
//!
//! A save the code cannot restore is never deleted and never overwritten (the
//! zone does not start, so nothing saves it); the reason is kept in
//! [`StartFailures`] for the admin API, and joins are refused with it.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{SystemTime, UNIX_EPOCH};

use serde::Serialize;
use zonekeep_core::{Clock, RestoreError, ZoneConfig, ZoneError, ZoneHost, ZoneInit, ZoneKinds};
use zonekeep_store::{SaveRecord, SaveStore, StoreError};

use super::metrics::PersistMetrics;
use super::storage::StorageHandle;

/// Most zones whose start failure is remembered; the oldest is forgotten first.
pub const MAX_START_FAILURES: usize = 1024;

/// What a claim returned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClaimedZone {
    /// The owner epoch: write saves with it and use it as the boot epoch.
    pub epoch: u64,
    /// The zone's last save, if any.
    pub last: Option<SaveRecord>,
}

/// Why a zone could not be claimed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LoadError {
    /// The store refused or failed the claim.
    #[error("claiming the zone failed: {0}")]
    Store(#[from] StoreError),
}

/// Why a zone did not start, for the admin API and join refusals.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct StartFailure {
    /// The zone id.
    pub zone_id: String,
    /// The kind the zone was asked to run as.
    pub kind: String,
    /// Human-readable reason.
    pub reason: String,
    /// The kept save's epoch and sequence number, when a save is involved.
    pub save: Option<(u64, u64)>,
    /// When it happened, in milliseconds since the Unix epoch.
    pub at_ms: u64,
    /// The kind refused the zone's params ([`ZoneError::InvalidParams`]): the request was wrong,
    /// not the code, so the failure is not remembered and the zone id stays free.
    #[serde(skip)]
    pub params_refused: bool,
}

/// Records by zone, and zone ids in insertion order (for eviction).
type RecordMap<T> = (HashMap<String, T>, VecDeque<String>);

/// A bounded record of one item per zone (the oldest zone is forgotten first).
#[derive(Debug)]
pub struct ZoneRecords<T> {
    inner: Arc<Mutex<RecordMap<T>>>,
}

impl<T> Clone for ZoneRecords<T> {
    fn clone(&self) -> Self {
        ZoneRecords {
            inner: Arc::clone(&self.inner),
        }
    }
}

impl<T> Default for ZoneRecords<T> {
    fn default() -> Self {
        ZoneRecords {
            inner: Arc::new(Mutex::new((HashMap::new(), VecDeque::new()))),
        }
    }
}

/// The zones that failed to start, for the admin API and join refusals.
pub type StartFailures = ZoneRecords<StartFailure>;

impl<T: Clone> ZoneRecords<T> {
    fn lock(&self) -> MutexGuard<'_, RecordMap<T>> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Records (or replaces) the zone's item.
    pub fn record_for(&self, zone_id: &str, item: T) {
        let mut g = self.lock();
        let (map, order) = &mut *g;
        if map.insert(zone_id.to_owned(), item).is_none() {
            order.push_back(zone_id.to_owned());
            while order.len() > MAX_START_FAILURES {
                if let Some(old) = order.pop_front() {
                    map.remove(&old);
                }
            }
        }
    }

    /// Forgets the zone's item.
    pub fn clear(&self, zone_id: &str) {
        let mut g = self.lock();
        let (map, order) = &mut *g;
        if map.remove(zone_id).is_some() {
            order.retain(|z| z != zone_id);
        }
    }

    /// The zone's item, if it has one.
    pub fn get(&self, zone_id: &str) -> Option<T> {
        self.lock().0.get(zone_id).cloned()
    }

    /// Every remembered item, sorted by zone id.
    pub fn all(&self) -> Vec<T> {
        let g = self.lock();
        let mut ids: Vec<&String> = g.0.keys().collect();
        ids.sort();
        ids.into_iter()
            .filter_map(|id| g.0.get(id).cloned())
            .collect()
    }
}

impl ZoneRecords<StartFailure> {
    /// Records (or replaces) the zone's failure.
    pub fn record(&self, failure: StartFailure) {
        self.record_for(&failure.zone_id.clone(), failure);
    }
}

/// A zone that started afresh, its save set aside: the save holds a state version its kind
/// cannot read and has no migration from, and the zone is not a lasting world (a lasting world
/// does not start instead; see [`ZoneLoader::build`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FreshStart {
    /// The zone id.
    pub zone_id: String,
    /// Why: `state-changed`.
    pub reason: String,
    /// What the store's save held and who wrote it.
    pub detail: String,
    /// The replaced save's epoch and sequence number.
    pub save: (u64, u64),
    /// When, in milliseconds since the Unix epoch.
    pub at_ms: u64,
}

/// The build a native kind's saves are stamped with (a module names its own content hash).
pub const NATIVE_BUILD: &str = concat!("zonekeep ", env!("CARGO_PKG_VERSION"));

/// Claims zones and builds their hosts from the last save.
#[derive(Clone)]
pub struct ZoneLoader {
    saves: Arc<dyn SaveStore>,
    storage: StorageHandle,
    failures: StartFailures,
    fresh: ZoneRecords<FreshStart>,
    metrics: PersistMetrics,
}

impl std::fmt::Debug for ZoneLoader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ZoneLoader").finish_non_exhaustive()
    }
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

impl ZoneLoader {
    /// A loader claiming from `saves` and registering zones with `storage`.
    pub fn new(saves: Arc<dyn SaveStore>, storage: StorageHandle, metrics: PersistMetrics) -> Self {
        ZoneLoader {
            saves,
            storage,
            failures: StartFailures::default(),
            fresh: ZoneRecords::default(),
            metrics,
        }
    }

    /// The zones that started afresh because their save's state version changed.
    pub fn fresh_starts(&self) -> &ZoneRecords<FreshStart> {
        &self.fresh
    }

    /// The record of zones that failed to start.
    pub fn failures(&self) -> &StartFailures {
        &self.failures
    }

    /// The storage worker zones are registered with.
    pub fn storage(&self) -> &StorageHandle {
        &self.storage
    }

    /// Steps 1 and 2: waits for this host's unwritten save of the zone, then
    /// claims it.
    pub async fn claim(&self, zone_id: &str) -> Result<ClaimedZone, LoadError> {
        self.storage.flush(zone_id).await;
        let claim = self.saves.claim(zone_id).await.inspect_err(|_| {
            self.metrics.store_errors.inc();
        })?;
        Ok(ClaimedZone {
            epoch: claim.epoch,
            last: claim.last,
        })
    }

    /// Step 3: builds the zone's host from the claim (restoring its last save
    /// if it has one) and registers it with the storage worker under the
    /// claim's epoch. CPU work only; call it off the simulation thread. On
    /// failure the save is left untouched and the reason is recorded.
    pub fn build(
        &self,
        kinds: &ZoneKinds,
        init: ZoneInit,
        config: ZoneConfig,
        clock: Arc<dyn Clock>,
        claimed: &ClaimedZone,
    ) -> Result<ZoneHost, StartFailure> {
        let zone_id = init.zone_id.clone();
        let kind = init.kind.clone();
        let fail = |reason: String, save: Option<&SaveRecord>| {
            let f = StartFailure {
                zone_id: zone_id.clone(),
                kind: kind.clone(),
                reason,
                save: save.map(|s| (s.epoch, s.seq)),
                at_ms: now_ms(),
                params_refused: false,
            };
            // Once per failure: a zone that failed to start stays failed (nothing retries it).
            tracing::error!(zone = %f.zone_id, kind = %f.kind, reason = %f.reason, save = ?f.save, "zone did not start; any save it has is kept");
            self.failures.record(f.clone());
            f
        };
        let host = match &claimed.last {
            Some(save) if save.kind != init.kind => {
                return Err(fail(
                    format!(
                        "the zone's save was written by kind {:?}, not {:?}",
                        save.kind, init.kind
                    ),
                    Some(save),
                ));
            }
            Some(save) => {
                let restored = kinds.restore(
                    init.clone(),
                    config.clone(),
                    clock.clone(),
                    claimed.epoch,
                    &save.bytes,
                );
                match restored {
                    Ok(host) => host,
                    Err(changed @ RestoreError::StateChanged { .. }) => self
                        .start_fresh(kinds, init, config, clock, claimed, save, &changed)
                        .map_err(|reason| fail(reason, Some(save)))?,
                    Err(e) => {
                        return Err(fail(
                            format!("cannot restore the zone's save: {e}"),
                            Some(save),
                        ))
                    }
                }
            }
            None => match kinds.create_at(init, config, clock, claimed.epoch) {
                Ok(host) => host,
                Err(e @ ZoneError::InvalidParams(_)) => {
                    // The request's fault: said to whoever asked, neither kept nor an error here.
                    tracing::warn!(zone = %zone_id, kind = %kind, reason = %e, "zone not created: its kind refused the params");
                    return Err(StartFailure {
                        zone_id: zone_id.clone(),
                        kind: kind.clone(),
                        reason: e.to_string(),
                        save: None,
                        at_ms: now_ms(),
                        params_refused: true,
                    });
                }
                Err(e) => return Err(fail(format!("cannot create the zone: {e}"), None)),
            },
        };
        let mut host = host;
        if host.build_id().is_empty() {
            host.set_build_id(NATIVE_BUILD);
        }
        self.failures.clear(&zone_id);
        self.storage.register(&zone_id, &kind, claimed.epoch);
        Ok(host)
    }

    /// The zone's save holds a state version its kind cannot read (`changed`): an ordinary zone
    /// starts afresh, recorded as `state-changed`, and its next save replaces that one; a lasting
    /// world is never reset, so it does not start (the reason, for the failure, is returned) and
    /// its save stays as it is. Whether a kind is lasting may be known only once a zone of it is
    /// made (a module's settings say), so the fresh zone is made first and dropped unstarted for
    /// a lasting world.
    #[allow(clippy::too_many_arguments)]
    fn start_fresh(
        &self,
        kinds: &ZoneKinds,
        init: ZoneInit,
        config: ZoneConfig,
        clock: Arc<dyn Clock>,
        claimed: &ClaimedZone,
        save: &SaveRecord,
        changed: &RestoreError,
    ) -> Result<ZoneHost, String> {
        let zone_id = init.zone_id.clone();
        let mut fresh = kinds
            .create_at(init, config, clock, claimed.epoch)
            .map_err(|e| format!("{changed}; creating it afresh failed too: {e}"))?;
        if fresh.config().lasting {
            fresh.dispose();
            return Err(format!(
                "a lasting world is never started afresh, and {changed}; its save is kept"
            ));
        }
        tracing::warn!(zone = %zone_id, reason = "state-changed", save_epoch = save.epoch, save_seq = save.seq, detail = %changed, "zone started afresh: its save holds state its kind no longer reads; the next save replaces it");
        self.metrics.zones_started_fresh.inc();
        self.fresh.record_for(
            &zone_id,
            FreshStart {
                zone_id: zone_id.clone(),
                reason: "state-changed".into(),
                detail: changed.to_string(),
                save: (save.epoch, save.seq),
                at_ms: now_ms(),
            },
        );
        Ok(fresh)
    }
}

#[cfg(test)]
#[path = "loader_tests.rs"]
mod tests;
