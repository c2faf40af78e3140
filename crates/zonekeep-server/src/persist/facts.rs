//! The fact worker: per-zone bounded queues drained into a [`FactSink`].
//!
//! A simulation thread hands the facts it took from a zone
//! ([`ZoneHost::drain_facts`](zonekeep_core::ZoneHost::drain_facts)) to the
//! zone's [`FactQueue`] with a non-blocking `try_send`. A pump task per zone
//! moves them into commit tasks (at most
//! [`FactWorkerConfig::max_concurrent`] host-wide); each commit retries with
//! capped exponential backoff until the sink settles or refuses the fact, and
//! the [`Settlement`] goes back through the [`SettlementInbox`] to the zone's
//! inbox. Facts are never dropped here for good: a fact abandoned at shutdown
//! is still in flight in the zone's last snapshot and is re-sent after restart.
//!
//! Each fact carries its zone's owner epoch. When the sink refuses one as
//! fenced (another host claimed the zone), the commit is not retried: the
//! zone's [`FenceAlarm`] is raised so its simulation thread unloads it, and
//! the zone's remaining facts are dropped here without being offered to the
//! sink (the new owner re-sends them from the save it restored).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use tokio::runtime::Handle;
use tokio::sync::{mpsc, OwnedSemaphorePermit, Semaphore};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use zonekeep_core::{Fact, FactOutcome, Settlement};

use super::backoff::Backoff;
use super::fence::FenceAlarm;
use super::metrics::PersistMetrics;
use super::sink::{FactSink, OutboundFact, SinkError};

/// Where settlements go: the server routes each to its zone's inbox.
pub trait SettlementInbox: Send + Sync {
    /// Delivers a settlement to `zone_id`'s simulation thread; returns
    /// `false` when the zone is not loaded (the settlement is then dropped and
    /// counted: the zone's restore re-sends the fact, and the sink answers the
    /// same again).
    fn deliver(&self, zone_id: &str, settlement: Settlement) -> bool;
}

/// Fact worker settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FactWorkerConfig {
    /// Capacity of each zone's fact queue. Use at least the zone's
    /// `max_facts_in_flight`: then a zone can never fill its queue, because
    /// every queued fact is also in flight in the zone.
    pub queue_per_zone: usize,
    /// Most facts being committed at once, host-wide.
    pub max_concurrent: usize,
    /// Retry delays for failed commits.
    pub backoff: Backoff,
}

impl Default for FactWorkerConfig {
    fn default() -> Self {
        FactWorkerConfig {
            queue_per_zone: 1024,
            max_concurrent: 64,
            backoff: Backoff::default(),
        }
    }
}

/// Why [`FactQueue::try_send`] did not take a fact (which is handed back).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum FactQueueError {
    /// The zone's queue is full; try again on a later tick.
    #[error("fact queue full")]
    Full(Fact),
    /// The worker has stopped (shutdown) or the queue was replaced.
    #[error("fact queue closed")]
    Closed(Fact),
}

/// One zone's fact queue; cheap to clone, safe to use from any thread.
#[derive(Debug, Clone)]
pub struct FactQueue {
    tx: mpsc::Sender<Fact>,
    metrics: PersistMetrics,
}

impl FactQueue {
    /// Queues a fact without waiting.
    pub fn try_send(&self, fact: Fact) -> Result<(), FactQueueError> {
        match self.tx.try_send(fact) {
            Ok(()) => {
                self.metrics.facts_pending.inc();
                Ok(())
            }
            Err(mpsc::error::TrySendError::Full(f)) => {
                self.metrics.facts_queue_full.inc();
                Err(FactQueueError::Full(f))
            }
            Err(mpsc::error::TrySendError::Closed(f)) => Err(FactQueueError::Closed(f)),
        }
    }
}

struct Shared {
    sink: Arc<dyn FactSink>,
    inbox: Arc<dyn SettlementInbox>,
    config: FactWorkerConfig,
    metrics: PersistMetrics,
    commits: Arc<Semaphore>,
    tracker: TaskTracker,
    /// Stops the pumps taking new facts (graceful shutdown, step 1).
    intake: CancellationToken,
    /// Stops everything (graceful shutdown timed out).
    cancel: CancellationToken,
    runtime: Handle,
    queues: Mutex<HashMap<String, mpsc::Sender<Fact>>>,
}

impl Shared {
    fn queues(&self) -> MutexGuard<'_, HashMap<String, mpsc::Sender<Fact>>> {
        self.queues.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// The fact worker. Cheap to clone.
#[derive(Clone)]
pub struct FactWorker {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for FactWorker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FactWorker")
            .field("sink", &self.shared.sink.describe())
            .finish_non_exhaustive()
    }
}

impl FactWorker {
    /// Starts a worker committing to `sink` and settling through `inbox`.
    /// Must be called within a tokio runtime.
    pub fn start(
        sink: Arc<dyn FactSink>,
        inbox: Arc<dyn SettlementInbox>,
        config: FactWorkerConfig,
        metrics: PersistMetrics,
    ) -> FactWorker {
        FactWorker {
            shared: Arc::new(Shared {
                sink,
                inbox,
                config,
                metrics,
                commits: Arc::new(Semaphore::new(config.max_concurrent.max(1))),
                tracker: TaskTracker::new(),
                intake: CancellationToken::new(),
                cancel: CancellationToken::new(),
                runtime: Handle::current(),
                queues: Mutex::new(HashMap::new()),
            }),
        }
    }

    /// The sink's description, for logs.
    pub fn sink_description(&self) -> String {
        self.shared.sink.describe()
    }

    /// Opens (or reopens, after a restore) `zone_id`'s queue. A previous
    /// queue of the zone stops taking facts; what it holds is still committed.
    /// Its facts carry the owner `epoch` (`None`: the sink does not fence
    /// them); a fenced refusal raises `alarm`.
    pub fn open_zone(&self, zone_id: &str, epoch: Option<u64>, alarm: FenceAlarm) -> FactQueue {
        let (tx, rx) = mpsc::channel(self.shared.config.queue_per_zone.max(1));
        self.shared.queues().insert(zone_id.to_owned(), tx.clone());
        let owner = Owner {
            zone_id: zone_id.into(),
            epoch,
            alarm,
        };
        let pump = pump(Arc::clone(&self.shared), owner, rx);
        self.shared
            .runtime
            .spawn(self.shared.tracker.track_future(pump));
        FactQueue {
            tx,
            metrics: self.shared.metrics.clone(),
        }
    }

    /// Forgets the zone's queue (the zone was unloaded). Facts already queued
    /// are still committed once the zone's simulation thread drops its clone.
    pub fn close_zone(&self, zone_id: &str) {
        self.shared.queues().remove(zone_id);
    }

    /// Facts queued or being committed.
    pub fn pending(&self) -> i64 {
        self.shared.metrics.facts_pending.get()
    }

    /// Graceful shutdown: stops taking new facts, lets the queued ones and
    /// the commits in progress finish for at most `timeout`, then abandons the rest (they are in
    /// flight in the zones' final snapshots and are re-sent after restart).
    /// Returns how many facts were abandoned.
    pub async fn shutdown(&self, timeout: Duration) -> i64 {
        self.shared.intake.cancel();
        self.shared.queues().clear();
        self.shared.tracker.close();
        if tokio::time::timeout(timeout, self.shared.tracker.wait())
            .await
            .is_ok()
        {
            return 0;
        }
        let abandoned = self.pending();
        self.shared.cancel.cancel();
        self.shared.tracker.wait().await;
        abandoned
    }
}

/// Whose facts a pump moves: the zone, its owner epoch, its fence alarm.
#[derive(Clone)]
struct Owner {
    zone_id: Arc<str>,
    epoch: Option<u64>,
    alarm: FenceAlarm,
}

/// Moves a zone's facts into commit tasks, bounded by the host-wide permits.
async fn pump(shared: Arc<Shared>, owner: Owner, mut rx: mpsc::Receiver<Fact>) {
    loop {
        // After shutdown starts, drain what is already queued, then stop.
        let fact = tokio::select! {
            f = rx.recv() => f,
            () = shared.intake.cancelled() => rx.try_recv().ok(),
        };
        let Some(fact) = fact else { break };
        let permit = tokio::select! {
            p = Arc::clone(&shared.commits).acquire_owned() => p,
            () = shared.cancel.cancelled() => {
                shared.metrics.facts_pending.dec();
                break;
            }
        };
        // The semaphore is never closed; a closed one would mean shutdown.
        let Ok(permit) = permit else {
            shared.metrics.facts_pending.dec();
            break;
        };
        let out = OutboundFact {
            zone_id: owner.zone_id.to_string(),
            fact,
            epoch: owner.epoch,
        };
        let task = commit(Arc::clone(&shared), out, owner.alarm.clone(), permit);
        shared.runtime.spawn(shared.tracker.track_future(task));
    }
    rx.close();
    while rx.try_recv().is_ok() {
        shared.metrics.facts_pending.dec();
    }
}

/// Commits one fact until the sink settles or refuses it, or its owner is
/// found fenced.
async fn commit(
    shared: Arc<Shared>,
    out: OutboundFact,
    alarm: FenceAlarm,
    _permit: OwnedSemaphorePermit,
) {
    let m = &shared.metrics;
    let mut failures: u32 = 0;
    let outcome = loop {
        if alarm.is_raised() {
            // The owner is fenced: the sink would refuse this fact too.
            m.facts_pending.dec();
            return;
        }
        let attempt = tokio::select! {
            r = shared.sink.commit(&out) => r,
            () = shared.cancel.cancelled() => {
                m.facts_pending.dec();
                return;
            }
            // The lease lapsed (or the owner was fenced) while the commit waited: abandon it.
            () = alarm.raised() => {
                m.fenced_write_refused("fact");
                m.facts_pending.dec();
                return;
            }
        };
        match attempt {
            Ok(outcome) => break outcome,
            Err(e @ SinkError::Fenced(_)) => {
                m.fenced_write_refused("fact");
                tracing::warn!(zone = %out.zone_id, key = %out.fact.key, epoch = ?out.epoch, error = %e, "fact refused as fenced: a newer owner holds the zone; this owner stops");
                alarm.raise();
                m.facts_pending.dec();
                return;
            }
            Err(e @ SinkError::Unavailable(_)) => {
                failures = failures.saturating_add(1);
                m.fact_retries.inc();
                tracing::warn!(zone = %out.zone_id, key = %out.fact.key, failures, error = %e, "fact commit failed; retrying");
                tokio::select! {
                    () = tokio::time::sleep(shared.config.backoff.delay(failures)) => {}
                    () = shared.cancel.cancelled() => {
                        m.facts_pending.dec();
                        return;
                    }
                }
            }
        }
    };
    match &outcome {
        FactOutcome::Ok(_) => m.facts_settled.inc(),
        FactOutcome::Refused(why) => {
            tracing::info!(zone = %out.zone_id, key = %out.fact.key, reason = %why, "fact refused by sink");
            m.facts_refused.inc()
        }
    };
    m.facts_pending.dec();
    let settlement = Settlement {
        key: out.fact.key,
        outcome,
    };
    if !shared.inbox.deliver(&out.zone_id, settlement) {
        m.settlements_orphaned.inc();
    }
}

#[cfg(test)]
#[path = "facts_tests.rs"]
mod tests;
