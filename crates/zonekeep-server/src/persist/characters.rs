//! The character worker: writes the characters zones hand back to the store, under their
//! leases, in the order the zones produced them.
//!
//! A simulation thread hands each [`CharacterWrite`](zonekeep_core::CharacterWrite) of a zone to
//! [`CharacterWorker::try_send`] (never waiting: a full queue hands the job back, and the zone
//! keeps it for its next step). One task writes them one after another, so the writes of one
//! principal land in order (a commit before the release that follows it). Every write names the
//! zone and its owner epoch, which the store checks against the character's holder and the zone's
//! fence in the write's own transaction: a zone that lost its lease or its ownership writes
//! nothing. A write the store cannot take yet is retried with backoff for at most
//! [`RETRY_FOR`]; past it the character keeps its last committed state (the lease stays with the
//! zone until its next owner claims it, which makes the lease stale for any other zone).
//!
//! A job may carry a `done` sender, answered once the write is settled (`true` when it
//! committed): a recall waits on it before the character is acquired elsewhere.

use std::sync::Arc;
use std::time::Duration;

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::registry::Registry;
use tokio::sync::{mpsc, oneshot};
use zonekeep_store::{CharacterStore, StoreError};

use super::backoff::Backoff;

/// Jobs waiting for the worker, at most.
pub const CHARACTER_QUEUE: usize = 4096;

/// How long one write is retried while the store fails.
pub const RETRY_FOR: Duration = Duration::from_secs(30);

/// A character write for the worker.
#[derive(Debug)]
pub struct CharacterJob {
    /// The zone holding the lease.
    pub zone: String,
    /// Its owner epoch.
    pub epoch: u64,
    /// Whose character.
    pub principal: String,
    /// The bytes to commit; `None` to give the lease up leaving the last committed bytes (a zone
    /// whose code failed hands nothing back).
    pub data: Option<Vec<u8>>,
    /// Give the lease up after the write.
    pub release: bool,
    /// Answered once the write is settled: `true` when it committed.
    pub done: Option<oneshot::Sender<bool>>,
}

/// Character counters on `/metrics`.
#[derive(Debug, Clone, Default)]
pub struct CharacterMetrics {
    writes: Family<Vec<(String, String)>, Counter>,
    acquires: Family<Vec<(String, String)>, Counter>,
}

impl CharacterMetrics {
    /// Registers the counters.
    pub fn register(&self, r: &mut Registry) {
        r.register(
            "zonekeep_character_writes",
            "Character writes by outcome: `committed`, `released`, `lease_lost` (the zone no \
             longer held the lease or its ownership; nothing written), `gave_up` (the store \
             failed for the whole retry time), `queue_full` (a zone kept the write for its next \
             step)",
            self.writes.clone(),
        );
        r.register(
            "zonekeep_character_acquires",
            "Character acquisitions by joins: `granted`, `taken_stale` (the holder zone was \
             claimed since), `recalled` (another zone of this host gave it up first), `elsewhere` \
             (held by a zone that could not be asked; the join was refused with a retry hint)",
            self.acquires.clone(),
        );
    }

    /// Counts a write outcome.
    pub fn write(&self, outcome: &str) {
        self.writes
            .get_or_create(&vec![("outcome".to_owned(), outcome.to_owned())])
            .inc();
    }

    /// Counts an acquisition outcome.
    pub fn acquire(&self, outcome: &str) {
        self.acquires
            .get_or_create(&vec![("outcome".to_owned(), outcome.to_owned())])
            .inc();
    }
}

/// The handle simulation threads send jobs through; cheap to clone.
#[derive(Debug, Clone)]
pub struct CharacterWorker {
    tx: mpsc::Sender<CharacterJob>,
    metrics: CharacterMetrics,
}

impl CharacterWorker {
    /// Starts the worker writing to `store`. Must be called within a tokio runtime.
    pub fn start(store: Arc<dyn CharacterStore>, metrics: CharacterMetrics) -> Self {
        let (tx, rx) = mpsc::channel(CHARACTER_QUEUE);
        tokio::spawn(run(store, rx, metrics.clone()));
        CharacterWorker { tx, metrics }
    }

    /// Queues `job` without waiting; a full queue (or a stopped worker) hands it back.
    pub fn try_send(&self, job: CharacterJob) -> Result<(), CharacterJob> {
        self.tx.try_send(job).map_err(|e| {
            self.metrics.write("queue_full");
            match e {
                mpsc::error::TrySendError::Full(j) | mpsc::error::TrySendError::Closed(j) => j,
            }
        })
    }

    /// Waits until every write queued before this call is settled (written, refused or given
    /// up): a zone handed to another host must have handed its characters back first.
    pub async fn flush(&self) {
        let (done, settled) = oneshot::channel();
        // A job with nothing to write: settled as soon as the writes before it are.
        let marker = CharacterJob {
            zone: String::new(),
            epoch: 0,
            principal: String::new(),
            data: None,
            release: false,
            done: Some(done),
        };
        if self.tx.send(marker).await.is_ok() {
            let _ = settled.await;
        }
    }

    /// The counters.
    pub fn metrics(&self) -> &CharacterMetrics {
        &self.metrics
    }
}

async fn run(
    store: Arc<dyn CharacterStore>,
    mut rx: mpsc::Receiver<CharacterJob>,
    metrics: CharacterMetrics,
) {
    let backoff = Backoff::default();
    while let Some(job) = rx.recv().await {
        let deadline = tokio::time::Instant::now() + RETRY_FOR;
        let mut failures = 0;
        let committed = loop {
            let r = if job.release {
                store
                    .release_character(&job.principal, &job.zone, job.epoch, job.data.as_deref())
                    .await
            } else {
                match &job.data {
                    Some(d) => {
                        store
                            .commit_character(&job.principal, &job.zone, job.epoch, d)
                            .await
                    }
                    None => break true,
                }
            };
            match r {
                Ok(_) => {
                    metrics.write(if job.release { "released" } else { "committed" });
                    break true;
                }
                Err(e @ (StoreError::Fenced { .. } | StoreError::CharacterLeaseLost { .. })) => {
                    metrics.write("lease_lost");
                    tracing::warn!(zone = %job.zone, epoch = job.epoch, error = %e, "character not written: the zone no longer holds it");
                    break false;
                }
                Err(e) if e.is_retryable() && tokio::time::Instant::now() < deadline => {
                    failures += 1;
                    tracing::warn!(zone = %job.zone, failures, error = %e, "character write failed; retrying");
                    tokio::time::sleep(backoff.delay(failures)).await;
                }
                Err(e) => {
                    metrics.write("gave_up");
                    tracing::error!(zone = %job.zone, error = %e, "character write given up; the last committed character stands");
                    break false;
                }
            }
        };
        if let Some(done) = job.done {
            let _ = done.send(committed);
        }
    }
}
