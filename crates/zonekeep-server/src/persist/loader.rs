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
use zonekeep_core::{Clock, ZoneConfig, ZoneError, ZoneHost, ZoneInit, ZoneKinds};
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

/// Failures by zone, and zone ids in insertion order (for eviction).
type FailureMap = (HashMap<String, StartFailure>, VecDeque<String>);

/// A bounded record of zones that failed to start.
#[derive(Debug, Clone, Default)]
pub struct StartFailures {
    inner: Arc<Mutex<FailureMap>>,
}

impl StartFailures {
    fn lock(&self) -> MutexGuard<'_, FailureMap> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Records (or replaces) the zone's failure.
    pub fn record(&self, failure: StartFailure) {
        let mut g = self.lock();
        let (map, order) = &mut *g;
        if map
            .insert(failure.zone_id.clone(), failure.clone())
            .is_none()
        {
            order.push_back(failure.zone_id);
            while order.len() > MAX_START_FAILURES {
                if let Some(old) = order.pop_front() {
                    map.remove(&old);
                }
            }
        }
    }

    /// Forgets the zone's failure (it started after all).
    pub fn clear(&self, zone_id: &str) {
        let mut g = self.lock();
        let (map, order) = &mut *g;
        if map.remove(zone_id).is_some() {
            order.retain(|z| z != zone_id);
        }
    }

    /// The zone's failure, if it has one.
    pub fn get(&self, zone_id: &str) -> Option<StartFailure> {
        self.lock().0.get(zone_id).cloned()
    }

    /// Every remembered failure, sorted by zone id.
    pub fn all(&self) -> Vec<StartFailure> {
        let mut v: Vec<StartFailure> = self.lock().0.values().cloned().collect();
        v.sort_by(|a, b| a.zone_id.cmp(&b.zone_id));
        v
    }
}

/// Claims zones and builds their hosts from the last save.
#[derive(Clone)]
pub struct ZoneLoader {
    saves: Arc<dyn SaveStore>,
    storage: StorageHandle,
    failures: StartFailures,
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
            metrics,
        }
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
            Some(save) => kinds
                .restore(init, config, clock, claimed.epoch, &save.bytes)
                .map_err(|e| fail(format!("cannot restore the zone's save: {e}"), Some(save)))?,
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
        self.failures.clear(&zone_id);
        self.storage.register(&zone_id, &kind, claimed.epoch);
        Ok(host)
    }
}

#[cfg(test)]
#[path = "loader_tests.rs"]
mod tests;
