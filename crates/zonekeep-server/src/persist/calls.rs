//! The call worker: durable calls journaled in the store, delivered at least once to the call
//! sink, and answered back into their zones.
//!
//! A simulation thread hands the calls it took from a zone
//! ([`ZoneHost::drain_calls`](zonekeep_core::ZoneHost::drain_calls)) to [`CallWorker::try_send`]
//! (bounded, never waits; a full queue hands the call back and the zone keeps it for its next
//! step). For each call a task, at most [`CallWorkerConfig::max_concurrent`] host-wide:
//! 1. journals it ([`CallStore::begin_call`]) under the zone's owner epoch. A call answered
//!    before (a re-send after a crash or a move) is answered from the journal without asking
//!    the sink again; a key journaled with another function or other arguments is answered
//!    [`KEY_REUSED`];
//! 2. otherwise asks the sink ([`CallSinks`]: an in-process handler for the function, else the
//!    call webhook) until it answers, retrying failed attempts with capped backoff;
//! 3. records the answer ([`CallStore::finish_call`]; the first answer recorded wins, so two
//!    owners racing after a failover deliver the same one) and routes it to the zone through the
//!    [`CallInbox`].
//!
//! The zone keeps the call in flight, in every save, until its result is delivered on a tick,
//! so a crash anywhere in these steps loses nothing: the next owner re-sends it under the same
//! key. The sink sees a key at least once and must apply it at most once (the webhook carries it
//! as an `Idempotency-Key` header). A journal write refused as fenced raises the zone's
//! [`FenceAlarm`]: another host owns the zone and re-sends its calls from the save it restored.
//!
//! Answered calls stay in the journal for [`CallWorkerConfig::keep`] (7 days by default); a
//! sweeper removes older ones.

use std::sync::Arc;
use std::time::Duration;

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use serde_json::Value;
use tokio::sync::{mpsc, OwnedSemaphorePermit, Semaphore};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use zonekeep_core::{Call, CallAnswer, CallKey, CallResult, KEY_REUSED};
use zonekeep_store::{CallBegin, CallFinish, CallRecord, CallStore, StoreError};

use super::backoff::Backoff;
use super::call_sinks::{CallSinks, INVALID_CALL};
use super::fence::FenceAlarm;
use super::sink::SinkError;

/// A call on its way to the sink: the zone's [`Call`] and the zone it came from.
#[derive(Debug, Clone, PartialEq)]
pub struct OutboundCall {
    /// The calling zone.
    pub zone_id: String,
    /// The calling zone's owner epoch on this host.
    pub epoch: Option<u64>,
    /// The call, with its key.
    pub call: Call,
}

/// Where answers go: the server routes each to its zone's simulation thread.
pub trait CallInbox: Send + Sync {
    /// Delivers `answer` to `zone_id`'s thread; `false` when the zone is not loaded here (the
    /// answer is then dropped and counted: the zone's next owner asks again and the journal
    /// answers the same).
    fn deliver(&self, zone_id: &str, answer: CallAnswer) -> bool;
}

/// Call worker settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CallWorkerConfig {
    /// Calls waiting for a task, host-wide; a zone whose call finds it full keeps the call.
    pub queue: usize,
    /// Most calls being journaled or asked at once, host-wide.
    pub max_concurrent: usize,
    /// Retry delays for failed sink attempts and journal writes.
    pub backoff: Backoff,
    /// How long an answered call stays in the journal (a re-send within it is answered from
    /// there). Default 7 days.
    pub keep: Duration,
    /// How often the sweeper removes calls older than `keep`. Default 1 hour.
    pub sweep_every: Duration,
}

impl Default for CallWorkerConfig {
    fn default() -> Self {
        CallWorkerConfig {
            queue: 4096,
            max_concurrent: 64,
            backoff: Backoff::default(),
            keep: Duration::from_secs(7 * 24 * 3600),
            sweep_every: Duration::from_secs(3600),
        }
    }
}

/// Call counters (`zonekeep_calls`, `zonekeep_calls_pending`, `zonekeep_call_retries`).
#[derive(Debug, Clone, Default)]
pub struct CallMetrics {
    outcomes: Family<Vec<(String, String)>, Counter>,
    /// Calls queued or being journaled, asked or answered.
    pub pending: Gauge,
    /// Sink attempts and journal writes that failed and were retried.
    pub retries: Counter,
    /// Answered calls removed from the journal by the sweeper.
    pub swept: Counter,
}

impl CallMetrics {
    /// Registers the counters.
    pub fn register(&self, r: &mut Registry) {
        r.register(
            "zonekeep_calls",
            "Durable calls by outcome: `ok` and `error` (the sink answered), `journal` (answered \
             from the journal without asking the sink again: a re-send), `key_reused` (the key \
             was journaled with other arguments), `fenced` (another host owns the zone), \
             `orphaned` (answered after the zone left this host), `queue_full` (the zone kept \
             the call for its next step)",
            self.outcomes.clone(),
        );
        r.register(
            "zonekeep_calls_pending",
            "Durable calls queued or in progress on this host",
            self.pending.clone(),
        );
        r.register(
            "zonekeep_call_retries",
            "Call sink attempts and call journal writes that failed and were retried",
            self.retries.clone(),
        );
        r.register(
            "zonekeep_calls_swept",
            "Answered calls removed from the journal after their keep time",
            self.swept.clone(),
        );
    }

    /// Counts one outcome.
    pub fn outcome(&self, outcome: &str) {
        self.outcomes
            .get_or_create(&vec![("outcome".to_owned(), outcome.to_owned())])
            .inc();
    }

    /// How many calls ended with `outcome` (for tests and the admin API).
    pub fn count(&self, outcome: &str) -> u64 {
        self.outcomes
            .get_or_create(&vec![("outcome".to_owned(), outcome.to_owned())])
            .get()
    }
}

/// One call waiting for a task.
struct CallJob {
    out: OutboundCall,
    alarm: FenceAlarm,
}

struct Shared {
    journal: Arc<dyn CallStore>,
    sinks: CallSinks,
    inbox: Arc<dyn CallInbox>,
    config: CallWorkerConfig,
    metrics: CallMetrics,
    permits: Arc<Semaphore>,
    tracker: TaskTracker,
    cancel: CancellationToken,
}

/// The host's call worker. Cheap to clone.
#[derive(Clone)]
pub struct CallWorker {
    tx: mpsc::Sender<CallJob>,
    shared: Arc<Shared>,
}

impl std::fmt::Debug for CallWorker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CallWorker")
            .field("sinks", &self.shared.sinks)
            .field("config", &self.shared.config)
            .finish_non_exhaustive()
    }
}

impl CallWorker {
    /// Starts the worker and its sweeper. Must be called within a tokio runtime.
    pub fn start(
        journal: Arc<dyn CallStore>,
        sinks: CallSinks,
        inbox: Arc<dyn CallInbox>,
        config: CallWorkerConfig,
        metrics: CallMetrics,
    ) -> Self {
        let (tx, rx) = mpsc::channel(config.queue.max(1));
        let shared = Arc::new(Shared {
            journal,
            sinks,
            inbox,
            config,
            metrics,
            permits: Arc::new(Semaphore::new(config.max_concurrent.max(1))),
            tracker: TaskTracker::new(),
            cancel: CancellationToken::new(),
        });
        tokio::spawn(dispatch(Arc::clone(&shared), rx));
        tokio::spawn(sweep(Arc::clone(&shared)));
        CallWorker { tx, shared }
    }

    /// The sinks, to register in-process handlers on.
    pub fn sinks(&self) -> &CallSinks {
        &self.shared.sinks
    }

    /// The counters.
    pub fn metrics(&self) -> &CallMetrics {
        &self.shared.metrics
    }

    /// Queues `call` of `zone_id` (owner `epoch`, whose fence `alarm` a fenced journal write
    /// raises) without waiting; a full queue (or a stopped worker) hands it back.
    pub fn try_send(
        &self,
        zone_id: &str,
        epoch: Option<u64>,
        alarm: &FenceAlarm,
        call: Call,
    ) -> Result<(), Call> {
        let job = CallJob {
            out: OutboundCall {
                zone_id: zone_id.to_owned(),
                epoch,
                call,
            },
            alarm: alarm.clone(),
        };
        match self.tx.try_send(job) {
            Ok(()) => {
                self.shared.metrics.pending.inc();
                Ok(())
            }
            Err(mpsc::error::TrySendError::Full(job) | mpsc::error::TrySendError::Closed(job)) => {
                self.shared.metrics.outcome("queue_full");
                Err(job.out.call)
            }
        }
    }

    /// Stops taking calls and abandons those in progress (they stay in flight in their zones'
    /// saves and are sent again after the restart), waiting at most `timeout` for the tasks to
    /// end.
    pub async fn shutdown(&self, timeout: Duration) {
        self.shared.cancel.cancel();
        self.shared.tracker.close();
        let _ = tokio::time::timeout(timeout, self.shared.tracker.wait()).await;
    }
}

/// Moves queued calls into tasks, bounded by the host-wide permits.
async fn dispatch(shared: Arc<Shared>, mut rx: mpsc::Receiver<CallJob>) {
    loop {
        let job = tokio::select! {
            j = rx.recv() => j,
            () = shared.cancel.cancelled() => None,
        };
        let Some(job) = job else { break };
        let permit = tokio::select! {
            p = Arc::clone(&shared.permits).acquire_owned() => p,
            () = shared.cancel.cancelled() => {
                shared.metrics.pending.dec();
                break;
            }
        };
        let Ok(permit) = permit else {
            shared.metrics.pending.dec();
            break;
        };
        let task = run(Arc::clone(&shared), job, permit);
        tokio::spawn(shared.tracker.track_future(task));
    }
    rx.close();
    while rx.try_recv().is_ok() {
        shared.metrics.pending.dec();
    }
}

/// Removes answered calls older than the keep time, every `sweep_every`.
async fn sweep(shared: Arc<Shared>) {
    loop {
        tokio::select! {
            () = tokio::time::sleep(shared.config.sweep_every) => {}
            () = shared.cancel.cancelled() => return,
        }
        match shared.journal.sweep_calls(shared.config.keep).await {
            Ok(n) => {
                shared.metrics.swept.inc_by(n);
            }
            Err(e) => {
                tracing::warn!(error = %e, "sweeping the call journal failed; retried at the next sweep")
            }
        }
    }
}

/// Why a call's task stopped without an answer.
enum Stop {
    /// Another host owns the zone.
    Fenced,
    /// The host is shutting down.
    Cancelled,
}

/// Journals, asks and answers one call.
async fn run(shared: Arc<Shared>, job: CallJob, _permit: OwnedSemaphorePermit) {
    let m = &shared.metrics;
    let answer = answer(&shared, &job).await;
    m.pending.dec();
    let result = match answer {
        Ok((result, outcome)) => {
            m.outcome(outcome);
            result
        }
        Err(Stop::Fenced) => {
            m.outcome("fenced");
            tracing::warn!(zone = %job.out.zone_id, key = %job.out.call.key, epoch = ?job.out.epoch, "call journal refused as fenced: a newer owner holds the zone; this owner stops");
            job.alarm.raise();
            return;
        }
        Err(Stop::Cancelled) => return,
    };
    let delivered = shared.inbox.deliver(
        &job.out.zone_id,
        CallAnswer {
            key: job.out.call.key.clone(),
            result,
        },
    );
    if !delivered {
        m.outcome("orphaned");
    }
}

/// The call's result and the outcome it is counted under.
async fn answer(shared: &Shared, job: &CallJob) -> Result<(CallResult, &'static str), Stop> {
    let out = &job.out;
    let c = &out.call;
    let record = CallRecord {
        zone_id: out.zone_id.clone(),
        key: c.key.as_str().to_owned(),
        epoch: out.epoch,
        function: c.function.clone(),
        args: c.args.to_string(),
    };
    let begun = match journal(shared, job, || shared.journal.begin_call(&record)).await? {
        Ok(b) => b,
        Err(e) => return Ok((invalid(&c.key, &e), "error")),
    };
    match begun {
        CallBegin::Done(a) => return Ok((from_journal(a), "journal")),
        CallBegin::KeyReused { function } => {
            return Ok((
                CallResult::Err {
                    code: KEY_REUSED.into(),
                    message: format!(
                        "call key {:?} was used before for {function:?} with other arguments",
                        c.key.as_str()
                    ),
                },
                "key_reused",
            ))
        }
        CallBegin::Started | CallBegin::Pending => {}
    }
    let result = ask(shared, job).await?;
    let stored = to_journal(&result);
    let finish = || {
        shared
            .journal
            .finish_call(&out.zone_id, c.key.as_str(), out.epoch, &stored)
    };
    let outcome = match &result {
        CallResult::Ok(_) => "ok",
        CallResult::Err { .. } => "error",
    };
    match journal(shared, job, finish).await? {
        Ok(CallFinish::Recorded) => Ok((result, outcome)),
        // Another owner recorded its answer first (a failover raced this one): deliver that one.
        Ok(CallFinish::AlreadyDone(a)) => Ok((from_journal(a), "journal")),
        // The answer could not be recorded (over the journal's limits): the zone still gets it.
        Err(e) => {
            tracing::warn!(zone = %out.zone_id, key = %c.key, error = %e, "call answer not journaled");
            Ok((result, outcome))
        }
    }
}

/// Runs a journal write until it is answered: retryable store errors are retried with backoff,
/// a fenced owner stops; other errors (malformed input) are handed back.
async fn journal<T, F, Fut>(
    shared: &Shared,
    job: &CallJob,
    write: F,
) -> Result<Result<T, StoreError>, Stop>
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = Result<T, StoreError>>,
{
    let mut failures: u32 = 0;
    loop {
        if job.alarm.is_raised() {
            return Err(Stop::Fenced);
        }
        let attempt = tokio::select! {
            r = write() => r,
            () = shared.cancel.cancelled() => return Err(Stop::Cancelled),
        };
        match attempt {
            Ok(v) => return Ok(Ok(v)),
            Err(StoreError::Fenced { .. }) => return Err(Stop::Fenced),
            Err(e) if e.is_retryable() => {
                failures = failures.saturating_add(1);
                shared.metrics.retries.inc();
                tracing::warn!(zone = %job.out.zone_id, key = %job.out.call.key, failures, error = %e, "call journal write failed; retrying");
                wait(shared, failures).await?;
            }
            Err(e) => return Ok(Err(e)),
        }
    }
}

/// Asks the sink until it answers.
async fn ask(shared: &Shared, job: &CallJob) -> Result<CallResult, Stop> {
    let mut failures: u32 = 0;
    loop {
        if job.alarm.is_raised() {
            return Err(Stop::Fenced);
        }
        let attempt = tokio::select! {
            r = shared.sinks.invoke(&job.out) => r,
            () = shared.cancel.cancelled() => return Err(Stop::Cancelled),
            () = job.alarm.raised() => return Err(Stop::Fenced),
        };
        match attempt {
            Ok(r) => return Ok(r),
            Err(SinkError::Fenced(_)) => return Err(Stop::Fenced),
            Err(e @ SinkError::Unavailable(_)) => {
                failures = failures.saturating_add(1);
                shared.metrics.retries.inc();
                tracing::warn!(zone = %job.out.zone_id, key = %job.out.call.key, failures, error = %e, "call attempt failed; retrying");
                wait(shared, failures).await?;
            }
        }
    }
}

async fn wait(shared: &Shared, failures: u32) -> Result<(), Stop> {
    tokio::select! {
        () = tokio::time::sleep(shared.config.backoff.delay(failures)) => Ok(()),
        () = shared.cancel.cancelled() => Err(Stop::Cancelled),
    }
}

fn invalid(key: &CallKey, e: &StoreError) -> CallResult {
    tracing::warn!(key = %key, error = %e, "call refused by the journal");
    CallResult::Err {
        code: INVALID_CALL.into(),
        message: e.to_string(),
    }
}

fn to_journal(r: &CallResult) -> zonekeep_store::CallAnswer {
    match r {
        CallResult::Ok(v) => zonekeep_store::CallAnswer::Ok(v.to_string()),
        CallResult::Err { code, message } => zonekeep_store::CallAnswer::Failed {
            code: code.clone(),
            message: message.clone(),
        },
    }
}

fn from_journal(a: zonekeep_store::CallAnswer) -> CallResult {
    match a {
        zonekeep_store::CallAnswer::Ok(text) => {
            CallResult::Ok(serde_json::from_str(&text).unwrap_or(Value::String(text)))
        }
        zonekeep_store::CallAnswer::Failed { code, message } => CallResult::Err { code, message },
    }
}
