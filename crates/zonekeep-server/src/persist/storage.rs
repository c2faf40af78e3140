//! The storage worker: latest-wins save slots, fenced writes, retries.
//!
//! Each registered zone has one slot holding at most one unwritten snapshot
//! and one writer task. A simulation thread calls
//! [`StorageHandle::try_submit`], which swaps the snapshot into the slot under
//! a short mutex (no I/O, no await) and wakes the writer; a newer snapshot
//! replaces an unwritten older one (counted). Memory is therefore bounded by
//! two snapshots per zone: the one being written and the newest waiting.
//!
//! Every write carries the zone's owner epoch (from
//! [`ZoneLoader`](super::ZoneLoader)'s claim) and a sequence number that
//! increases with each submission. Backend errors retry with capped
//! exponential backoff, always with the newest snapshot; a fencing refusal
//! means another owner has the zone, so the writer stops for good and raises
//! the registration's [`FenceAlarm`](super::FenceAlarm), which tells the
//! zone's simulation thread to unload it.
//!
//! Each registration also knows since when its newest state has waited
//! unsaved ([`SaveWatch::unsaved_for`]): a lasting world halts when that
//! passes its bound, and [`StorageHandle::halt`] then drops what was never
//! written, so the last committed save stays the world's state.
//!
//! The writer task each registration runs is in `writer`.

mod writer;
use writer::run_zone;

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use tokio::runtime::Handle;
use tokio::sync::{watch, Notify, Semaphore};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use zonekeep_store::SaveStore;

use super::backoff::Backoff;
use super::fence::FenceAlarm;
use super::metrics::PersistMetrics;
use super::status::SaveStatus;
use crate::fleet::LeaseGate;

/// Storage worker settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StorageConfig {
    /// Retry delays for failed writes.
    pub backoff: Backoff,
    /// Most store writes in progress at once across all zones (a slow store
    /// then queues zones here, not connections in the store's pool).
    pub max_concurrent_writes: usize,
}

impl Default for StorageConfig {
    fn default() -> Self {
        StorageConfig {
            backoff: Backoff::default(),
            max_concurrent_writes: 4,
        }
    }
}

/// Why a snapshot was not queued.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SubmitError {
    /// The zone was never registered with the worker (or was replaced).
    #[error("zone {0:?} is not registered for saving")]
    UnknownZone(String),
    /// The zone was closed (unloaded or shutting down): no more saves.
    #[error("zone {0:?} is closed for saving")]
    Closed(String),
    /// A newer owner holds the zone; this host must not save it.
    #[error("zone {0:?} is fenced by a newer owner")]
    Fenced(String),
}

/// A queued snapshot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Submitted {
    /// The sequence number it will be written with.
    pub seq: u64,
    /// Whether it replaced an older unwritten snapshot.
    pub replaced: bool,
}

/// What a graceful shutdown achieved.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ShutdownReport {
    /// Zones whose newest snapshot was written.
    pub saved: usize,
    /// Zones with a snapshot still unwritten when the timeout passed, sorted.
    pub unsaved: Vec<String>,
}

struct ZoneState {
    status: SaveStatus,
    next_seq: u64,
    pending: Option<(u64, Vec<u8>)>,
    writing: bool,
    closed: bool,
    /// When the oldest snapshot submitted since the last committed write was submitted; only
    /// a committed write moves it (failures and dropped snapshots do not). `None` when every
    /// submitted snapshot is written.
    unsaved_since: Option<Instant>,
    /// When the oldest snapshot merged into `pending` was submitted (kept across replacements).
    pending_since: Option<Instant>,
    /// `pending_since` of the snapshot being written.
    writing_since: Option<Instant>,
}

struct ZoneEntry {
    zone_id: String,
    state: Mutex<ZoneState>,
    wake: Notify,
    /// `true` while nothing is waiting or being written.
    idle: watch::Sender<bool>,
    /// Raised when the store refuses a save of this registration as fenced.
    alarm: FenceAlarm,
}

impl ZoneEntry {
    fn lock(&self) -> MutexGuard<'_, ZoneState> {
        // The state is plain data updated in single statements; a panic
        // elsewhere cannot leave it half-changed, so poisoning is ignored.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

struct Shared {
    saves: Arc<dyn SaveStore>,
    config: StorageConfig,
    metrics: PersistMetrics,
    zones: Mutex<HashMap<String, Arc<ZoneEntry>>>,
    writes: Semaphore,
    tracker: TaskTracker,
    cancel: CancellationToken,
    runtime: Handle,
    closing: AtomicBool,
    /// The host's lease: no save is written for a zone whose lease generation ended.
    gate: Arc<LeaseGate>,
    /// Called for a retired zone whose last save is durable, before it is forgotten (the fleet
    /// gives up its ownership there, so the next join anywhere may place it).
    on_retired: std::sync::OnceLock<RetiredHook>,
}

/// See [`StorageHandle::on_retired`]: the zone id and the epoch it was saved under.
pub type RetiredHook =
    Arc<dyn Fn(String, u64) -> futures_util::future::BoxFuture<'static, ()> + Send + Sync>;

impl Shared {
    fn zones(&self) -> MutexGuard<'_, HashMap<String, Arc<ZoneEntry>>> {
        self.zones.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn entry(&self, zone_id: &str) -> Option<Arc<ZoneEntry>> {
        self.zones().get(zone_id).cloned()
    }
}

/// Starts the storage worker.
#[derive(Debug, Clone, Copy)]
pub struct StorageWorker;

impl StorageWorker {
    /// Starts a worker writing to `saves`. Must be called within a tokio
    /// runtime (writer tasks are spawned on it); the returned handle can then
    /// be used from any thread.
    pub fn start(
        saves: Arc<dyn SaveStore>,
        config: StorageConfig,
        metrics: PersistMetrics,
    ) -> StorageHandle {
        Self::start_leased(saves, config, metrics, Arc::new(LeaseGate::new()))
    }

    /// Like [`start`](Self::start), writing only while `gate` holds for the zone's lease
    /// generation (captured when the zone is registered, right after its claim).
    pub fn start_leased(
        saves: Arc<dyn SaveStore>,
        config: StorageConfig,
        metrics: PersistMetrics,
        gate: Arc<LeaseGate>,
    ) -> StorageHandle {
        StorageHandle {
            shared: Arc::new(Shared {
                saves,
                config,
                metrics,
                zones: Mutex::new(HashMap::new()),
                writes: Semaphore::new(config.max_concurrent_writes.max(1)),
                tracker: TaskTracker::new(),
                cancel: CancellationToken::new(),
                runtime: Handle::current(),
                closing: AtomicBool::new(false),
                gate,
                on_retired: std::sync::OnceLock::new(),
            }),
        }
    }
}

/// The shareable handle to the storage worker.
#[derive(Clone)]
pub struct StorageHandle {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for StorageHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StorageHandle")
            .field("zones", &self.shared.zones().len())
            .finish_non_exhaustive()
    }
}

impl StorageHandle {
    /// Starts saving `zone_id` (of `kind`) with the owner `epoch` from its
    /// claim. Sequence numbers restart at 1. A previous registration of the
    /// zone is closed (its unwritten snapshot, from an older epoch, is still
    /// attempted and will be fenced if the new epoch was claimed).
    pub fn register(&self, zone_id: &str, kind: &str, epoch: u64) {
        let (idle, _) = watch::channel(true);
        let entry = Arc::new(ZoneEntry {
            zone_id: zone_id.to_owned(),
            state: Mutex::new(ZoneState {
                status: SaveStatus {
                    zone_id: zone_id.to_owned(),
                    kind: kind.to_owned(),
                    epoch,
                    ..SaveStatus::default()
                },
                next_seq: 1,
                pending: None,
                writing: false,
                closed: self.shared.closing.load(Ordering::Acquire),
                unsaved_since: None,
                pending_since: None,
                writing_since: None,
            }),
            wake: Notify::new(),
            idle,
            alarm: FenceAlarm::leased(Arc::clone(&self.shared.gate)),
        });
        let old = self
            .shared
            .zones()
            .insert(zone_id.to_owned(), Arc::clone(&entry));
        if let Some(old) = old {
            old.lock().closed = true;
            old.wake.notify_one();
        }
        let shared = Arc::clone(&self.shared);
        let task = self.shared.tracker.track_future(run_zone(shared, entry));
        self.shared.runtime.spawn(task);
    }

    /// Queues `snapshot` as the zone's newest save. Never waits: it swaps the
    /// bytes into the zone's slot and wakes the writer. An unwritten older
    /// snapshot is replaced (latest wins) and counted.
    pub fn try_submit(&self, zone_id: &str, snapshot: Vec<u8>) -> Result<Submitted, SubmitError> {
        let result = self.submit_inner(zone_id, snapshot);
        if result.is_err() {
            self.shared.metrics.saves_rejected.inc();
        }
        result
    }

    fn submit_inner(&self, zone_id: &str, snapshot: Vec<u8>) -> Result<Submitted, SubmitError> {
        let entry = self
            .shared
            .entry(zone_id)
            .ok_or_else(|| SubmitError::UnknownZone(zone_id.to_owned()))?;
        let mut st = entry.lock();
        if st.status.fenced {
            return Err(SubmitError::Fenced(zone_id.to_owned()));
        }
        if st.closed {
            return Err(SubmitError::Closed(zone_id.to_owned()));
        }
        let seq = st.next_seq;
        st.next_seq = st.next_seq.saturating_add(1);
        let replaced = st.pending.replace((seq, snapshot)).is_some();
        let now = Instant::now();
        st.unsaved_since.get_or_insert(now);
        st.pending_since.get_or_insert(now);
        if replaced {
            st.status.replaced = st.status.replaced.saturating_add(1);
            self.shared.metrics.save_replaced.inc();
        }
        st.status.last_submitted_seq = Some(seq);
        st.status.pending = true;
        entry.idle.send_replace(false);
        drop(st);
        entry.wake.notify_one();
        Ok(Submitted { seq, replaced })
    }

    /// Stops accepting snapshots for the zone; what is queued is still
    /// written. Used when a zone is unloaded (hibernation) after its final save.
    pub fn close(&self, zone_id: &str) {
        if let Some(entry) = self.shared.entry(zone_id) {
            entry.lock().closed = true;
            entry.wake.notify_one();
        }
    }

    /// The zone was unloaded after its final snapshot was submitted: stops
    /// accepting snapshots, and once what is queued has been written (or
    /// given up on) forgets the zone, so a host that loads many zones over its
    /// life keeps no entry per zone it ever ran. A newer registration of the
    /// zone (it was loaded again meanwhile) is left alone.
    pub fn retire(&self, zone_id: &str) {
        let Some(entry) = self.shared.entry(zone_id) else {
            return;
        };
        entry.lock().closed = true;
        entry.wake.notify_one();
        let shared = Arc::clone(&self.shared);
        let task = async move {
            let mut rx = entry.idle.subscribe();
            tokio::select! {
                _ = rx.wait_for(|idle| *idle) => {}
                () = shared.cancel.cancelled() => return,
            }
            let saved = {
                let st = entry.lock();
                (!st.status.fenced && st.pending.is_none() && !entry.alarm.is_raised())
                    .then_some(st.status.epoch)
            };
            if let (Some(epoch), Some(hook)) = (saved, shared.on_retired.get()) {
                let still_current = shared
                    .entry(&entry.zone_id)
                    .is_some_and(|e| Arc::ptr_eq(&e, &entry));
                if still_current {
                    hook(entry.zone_id.clone(), epoch).await;
                }
            }
            let mut zones = shared.zones();
            if zones
                .get(&entry.zone_id)
                .is_some_and(|e| Arc::ptr_eq(e, &entry))
            {
                zones.remove(&entry.zone_id);
            }
        };
        self.shared
            .runtime
            .spawn(self.shared.tracker.track_future(task));
    }

    /// Sets the hook called for each retired zone whose last save is durable, while the worker
    /// still knows the zone (so [`knows`](Self::knows) is true until the hook returned). Set once.
    pub fn on_retired(&self, hook: RetiredHook) {
        let _ = self.shared.on_retired.set(hook);
    }

    /// Whether the worker still knows the zone (registered, or retired and not yet forgotten).
    pub fn knows(&self, zone_id: &str) -> bool {
        self.shared.entry(zone_id).is_some()
    }

    /// Zones the worker currently knows (registered and not yet forgotten).
    pub fn zone_count(&self) -> usize {
        self.shared.zones().len()
    }

    /// Waits until the zone has nothing waiting or being written (its newest
    /// snapshot is saved, given up on, or fenced). Returns at once for a zone
    /// this worker does not know.
    pub async fn flush(&self, zone_id: &str) {
        let Some(entry) = self.shared.entry(zone_id) else {
            return;
        };
        let mut rx = entry.idle.subscribe();
        // Errors only if the sender is gone, which it cannot be while we hold the entry.
        let _ = rx.wait_for(|idle| *idle).await;
    }

    /// The zone's save status.
    pub fn status(&self, zone_id: &str) -> Option<SaveStatus> {
        self.shared.entry(zone_id).map(|e| e.status())
    }

    /// A watch on the current registration's saves, for its simulation thread: reading it takes
    /// the zone's own lock only, never the worker's map.
    pub fn watch(&self, zone_id: &str) -> Option<SaveWatch> {
        self.shared.entry(zone_id).map(|entry| SaveWatch { entry })
    }

    /// The zone is a lasting world that halted because its saves failed: the snapshot waiting
    /// is dropped unwritten and no other is accepted, so the store keeps the last committed
    /// save as the world's state (a write already sent to the store may still land; the world's
    /// next owner claims a new epoch first, which fences it if it lands later). Then the zone
    /// is forgotten as [`retire`](Self::retire) does, without the retired hook: the zone is not
    /// given up, it resumes here.
    pub fn halt(&self, zone_id: &str) {
        let Some(entry) = self.shared.entry(zone_id) else {
            return;
        };
        {
            let mut st = entry.lock();
            st.closed = true;
            st.status.halted = true;
            if st.pending.take().is_some() {
                self.shared.metrics.saves_dropped_halted.inc();
            }
            st.pending_since = None;
            st.status.pending = st.writing;
            if !st.writing {
                entry.idle.send_replace(true);
            }
        }
        entry.wake.notify_one();
        let mut zones = self.shared.zones();
        if zones.get(zone_id).is_some_and(|e| Arc::ptr_eq(e, &entry)) {
            zones.remove(zone_id);
        }
    }

    /// The fence alarm of the zone's current registration: raised when the
    /// store refuses one of its saves as fenced.
    pub fn alarm(&self, zone_id: &str) -> Option<FenceAlarm> {
        self.shared.entry(zone_id).map(|e| e.alarm.clone())
    }

    /// Every known zone's save status, sorted by zone id.
    pub fn statuses(&self) -> Vec<SaveStatus> {
        let entries: Vec<Arc<ZoneEntry>> = self.shared.zones().values().cloned().collect();
        let mut out: Vec<SaveStatus> = entries.iter().map(|e| e.status()).collect();
        out.sort_by(|a, b| a.zone_id.cmp(&b.zone_id));
        out
    }

    /// A drain writes every zone's final save at once, and each zone's
    /// clients wait for their own: allow `more` writes in flight from now on
    /// (the store's connection pool still bounds them).
    pub fn widen_for_drain(&self, more: usize) {
        self.shared.writes.add_permits(more);
    }

    /// Graceful shutdown: refuses new snapshots, waits (at most `timeout`)
    /// for every queued snapshot to be written, then stops the writers.
    /// Submit each zone's final snapshot before calling this.
    pub async fn shutdown(&self, timeout: Duration) -> ShutdownReport {
        self.shared.closing.store(true, Ordering::Release);
        let entries: Vec<Arc<ZoneEntry>> = self.shared.zones().values().cloned().collect();
        for e in &entries {
            e.lock().closed = true;
            e.wake.notify_one();
        }
        self.shared.tracker.close();
        let finished = tokio::time::timeout(timeout, self.shared.tracker.wait())
            .await
            .is_ok();
        if !finished {
            self.shared.cancel.cancel();
        }
        let mut report = ShutdownReport::default();
        for e in &entries {
            let st = e.lock();
            if st.pending.is_some() || st.writing {
                report.unsaved.push(e.zone_id.clone());
            } else if st.status.last_saved_seq.is_some() {
                report.saved += 1;
            }
        }
        report.unsaved.sort();
        report
    }
}

/// A simulation thread's view of its zone's saves (see [`StorageHandle::watch`]).
#[derive(Clone)]
pub struct SaveWatch {
    entry: Arc<ZoneEntry>,
}

impl std::fmt::Debug for SaveWatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SaveWatch")
            .field("zone_id", &self.entry.zone_id)
            .finish_non_exhaustive()
    }
}

impl SaveWatch {
    /// How long the zone's oldest unsaved snapshot has waited for a committed write (failing
    /// writes are retried meanwhile); `None` when everything submitted is written.
    pub fn unsaved_for(&self) -> Option<Duration> {
        self.entry
            .lock()
            .unsaved_since
            .map(|t| Instant::now().saturating_duration_since(t))
    }
}

impl ZoneEntry {
    fn status(&self) -> SaveStatus {
        let st = self.lock();
        let mut status = st.status.clone();
        status.unsaved_ms = st.unsaved_since.map(|t| {
            u64::try_from(Instant::now().saturating_duration_since(t).as_millis())
                .unwrap_or(u64::MAX)
        });
        status
    }
}

#[cfg(test)]
#[path = "storage_tests.rs"]
mod tests;
