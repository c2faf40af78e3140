//! Fact worker tests against the real SQLite ledger, wrapped to inject failures.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Mutex;

use async_trait::async_trait;
use serde_json::json;
use tokio::sync::Notify;
use zonekeep_core::FactKey;
use zonekeep_store::{
    FactLedger, FactRecord, FactResult, Result as StoreResult, SaveStore, SqliteStore, StoreError,
    StoredFact,
};

use super::*;
use crate::persist::LedgerSink;

/// The SQLite ledger, failing the first `fail` records with a backend error.
struct FlakyLedger {
    inner: SqliteStore,
    fail: AtomicU32,
}

#[async_trait]
impl FactLedger for FlakyLedger {
    async fn record(&self, fact: &FactRecord) -> StoreResult<FactResult> {
        if self
            .fail
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
            .is_ok()
        {
            return Err(StoreError::Backend("injected".into()));
        }
        self.inner.record(fact).await
    }
    async fn get(&self, key: &str) -> StoreResult<Option<StoredFact>> {
        self.inner.get(key).await
    }
    async fn totals(&self, principal: &str) -> StoreResult<BTreeMap<String, i64>> {
        self.inner.totals(principal).await
    }
    async fn count(&self) -> StoreResult<u64> {
        self.inner.count().await
    }
}

/// Collects settlements; `loaded` says which zones accept them.
#[derive(Default)]
struct Inbox {
    got: Mutex<Vec<(String, Settlement)>>,
    arrived: Notify,
    unloaded: Mutex<Vec<String>>,
}

impl SettlementInbox for Inbox {
    fn deliver(&self, zone_id: &str, settlement: Settlement) -> bool {
        if self.unloaded.lock().unwrap().iter().any(|z| z == zone_id) {
            self.arrived.notify_one();
            return false;
        }
        self.got
            .lock()
            .unwrap()
            .push((zone_id.to_owned(), settlement));
        self.arrived.notify_one();
        true
    }
}

impl Inbox {
    async fn wait_for(&self, n: usize) -> Vec<(String, Settlement)> {
        loop {
            let notified = self.arrived.notified();
            {
                let got = self.got.lock().unwrap();
                if got.len() >= n {
                    return got.clone();
                }
            }
            notified.await;
        }
    }
}

fn fact(key: &str, principal: &str, score: i64) -> Fact {
    Fact {
        key: FactKey(key.into()),
        kind: "kill".into(),
        payload: json!({"add": {"score": score}}),
        principal: Some(principal.into()),
        tick: 1,
    }
}

fn config(queue: usize) -> FactWorkerConfig {
    FactWorkerConfig {
        queue_per_zone: queue,
        max_concurrent: 4,
        backoff: Backoff {
            initial: Duration::from_millis(1),
            max: Duration::from_millis(4),
        },
    }
}

async fn setup(
    fail: u32,
    queue: usize,
) -> (FactWorker, Arc<Inbox>, Arc<FlakyLedger>, PersistMetrics) {
    let ledger = Arc::new(FlakyLedger {
        inner: SqliteStore::open(":memory:").await.unwrap(),
        fail: AtomicU32::new(fail),
    });
    let metrics = PersistMetrics::new();
    let sink = Arc::new(LedgerSink::new(ledger.clone(), metrics.clone()));
    let inbox = Arc::new(Inbox::default());
    let worker = FactWorker::start(sink, inbox.clone(), config(queue), metrics.clone());
    (worker, inbox, ledger, metrics)
}

#[tokio::test]
async fn facts_settle_back_to_their_zone_after_retries() {
    let (worker, inbox, ledger, metrics) = setup(3, 16).await;
    let qa = worker.open_zone("a", None, FenceAlarm::new());
    let qb = worker.open_zone("b", None, FenceAlarm::new());
    qa.try_send(fact("a:1:0", "alice", 10)).unwrap();
    qa.try_send(fact("a:1:1", "alice", 5)).unwrap();
    qb.try_send(fact("b:1:0", "bob", 7)).unwrap();
    let mut got = inbox.wait_for(3).await;
    got.sort_by(|x, y| x.1.key.cmp(&y.1.key));
    let zones: Vec<&str> = got.iter().map(|(z, _)| z.as_str()).collect();
    assert_eq!(zones, ["a", "a", "b"]);
    assert!(got
        .iter()
        .all(|(_, s)| matches!(s.outcome, FactOutcome::Ok(_))));
    assert_eq!(
        ledger.totals("alice").await.unwrap().get("score"),
        Some(&15)
    );
    assert_eq!(ledger.count().await.unwrap(), 3);
    assert_eq!(metrics.fact_retries.get(), 3);
    assert_eq!(metrics.facts_settled.get(), 3);
    assert_eq!(metrics.store_errors.get(), 3);
    assert_eq!(worker.pending(), 0);
}

/// Waits until no fact is queued or being committed. The fact worker reports
/// a fenced commit only through its alarm and counters, so this re-checks.
async fn until_idle(worker: &FactWorker) {
    let guard = tokio::time::Instant::now() + Duration::from_secs(60);
    while worker.pending() > 0 {
        assert!(tokio::time::Instant::now() < guard, "facts never drained");
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
}

#[tokio::test]
async fn a_fenced_owner_s_facts_are_refused_not_retried_and_raise_the_alarm() {
    let (worker, inbox, ledger, metrics) = setup(0, 16).await;
    let epoch = ledger.inner.claim("z").await.unwrap().epoch;
    let alarm = FenceAlarm::new();
    let q = worker.open_zone("z", Some(epoch), alarm.clone());
    q.try_send(fact("z:1:0", "alice", 10)).unwrap();
    inbox.wait_for(1).await;
    assert!(!alarm.is_raised(), "the current owner commits");

    // Another host claims the zone: this owner's next fact is refused, once.
    ledger.inner.claim("z").await.unwrap();
    q.try_send(fact("z:1:1", "alice", 5)).unwrap();
    until_idle(&worker).await;
    assert!(alarm.is_raised());
    assert_eq!(ledger.get("z:1:1").await.unwrap(), None);
    assert_eq!(
        metrics.fact_retries.get(),
        0,
        "a fenced commit is not retried"
    );
    let fenced = || {
        metrics
            .fenced_writes_refused
            .get_or_create(&vec![("write", "fact".to_owned())])
            .get()
    };
    assert_eq!(fenced(), 1);

    // Later facts of the fenced owner are not even offered to the sink.
    q.try_send(fact("z:1:2", "alice", 1)).unwrap();
    until_idle(&worker).await;
    assert_eq!(fenced(), 1);
    assert_eq!(ledger.count().await.unwrap(), 1);
    assert_eq!(
        ledger.totals("alice").await.unwrap().get("score"),
        Some(&10)
    );
    assert_eq!(
        inbox.got.lock().unwrap().len(),
        1,
        "nothing settles for them"
    );
}

#[tokio::test]
async fn invalid_facts_are_refused_not_retried() {
    let (worker, inbox, _ledger, metrics) = setup(0, 16).await;
    let q = worker.open_zone("z", None, FenceAlarm::new());
    let mut bad = fact("z:1:0", "p", 1);
    bad.principal = None;
    q.try_send(bad).unwrap();
    let got = inbox.wait_for(1).await;
    assert!(matches!(got[0].1.outcome, FactOutcome::Refused(_)));
    assert_eq!(metrics.facts_refused.get(), 1);
    assert_eq!(metrics.fact_retries.get(), 0);
}

#[tokio::test]
async fn a_re_sent_key_takes_effect_once() {
    let (worker, inbox, ledger, _m) = setup(0, 16).await;
    let q = worker.open_zone("z", None, FenceAlarm::new());
    q.try_send(fact("z:1:0", "p", 50)).unwrap();
    let first = inbox.wait_for(1).await;
    // As after a restore: the same fact again, through a reopened queue.
    let q = worker.open_zone("z", None, FenceAlarm::new());
    q.try_send(fact("z:1:0", "p", 50)).unwrap();
    let both = inbox.wait_for(2).await;
    assert_eq!(both[1].1, first[0].1, "same key, same result");
    assert_eq!(ledger.totals("p").await.unwrap().get("score"), Some(&50));
}

#[tokio::test]
async fn the_queue_is_bounded_and_hands_the_fact_back() {
    let (worker, _inbox, _ledger, metrics) = setup(0, 2).await;
    let q = worker.open_zone("z", None, FenceAlarm::new());
    // The test runtime is single-threaded: the pump cannot run between these calls.
    q.try_send(fact("k0", "p", 1)).unwrap();
    q.try_send(fact("k1", "p", 1)).unwrap();
    let err = q.try_send(fact("k2", "p", 1)).unwrap_err();
    assert_eq!(err, FactQueueError::Full(fact("k2", "p", 1)));
    assert_eq!(metrics.facts_queue_full.get(), 1);
}

#[tokio::test]
async fn settlements_for_unloaded_zones_are_counted() {
    let (worker, inbox, _ledger, metrics) = setup(0, 4).await;
    inbox.unloaded.lock().unwrap().push("gone".into());
    let q = worker.open_zone("gone", None, FenceAlarm::new());
    q.try_send(fact("g:1:0", "p", 1)).unwrap();
    inbox.arrived.notified().await;
    let left = worker.shutdown(Duration::from_secs(30)).await;
    assert_eq!(left, 0);
    assert_eq!(metrics.settlements_orphaned.get(), 1);
    assert!(matches!(
        q.try_send(fact("g:1:1", "p", 1)),
        Err(FactQueueError::Closed(_))
    ));
}

#[tokio::test]
async fn shutdown_abandons_unsettled_facts_after_its_timeout() {
    let (worker, _inbox, _ledger, metrics) = setup(u32::MAX, 4).await;
    let q = worker.open_zone("z", None, FenceAlarm::new());
    q.try_send(fact("z:1:0", "p", 1)).unwrap();
    let left = worker.shutdown(Duration::from_millis(20)).await;
    assert_eq!(
        left, 1,
        "the retried fact is abandoned (its zone's snapshot keeps it)"
    );
    assert_eq!(metrics.facts_pending.get(), 0);
    assert_eq!(metrics.facts_settled.get(), 0);
}
