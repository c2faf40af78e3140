//! Storage worker tests against a real (in-memory SQLite) store, wrapped to
//! inject failures and hold writes.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use tokio::sync::{Notify, Semaphore};
use zonekeep_store::{
    Claim, Result as StoreResult, SaveMeta, SaveRecord, SaveStore, SqliteStore, StoreError,
    WriteOutcome,
};

use super::*;

/// Delegates to SQLite; fails the first `fail` writes with a backend error,
/// and makes each write wait for a permit of `gate` when one is set.
struct Faulty {
    inner: SqliteStore,
    fail: AtomicU32,
    failed: Notify,
    gate: Option<Arc<Semaphore>>,
    entered: Notify,
}

impl Faulty {
    async fn new(fail: u32, gate: Option<Arc<Semaphore>>) -> Arc<Faulty> {
        Arc::new(Faulty {
            inner: SqliteStore::open(":memory:").await.unwrap(),
            fail: AtomicU32::new(fail),
            failed: Notify::new(),
            gate,
            entered: Notify::new(),
        })
    }
}

#[async_trait]
impl SaveStore for Faulty {
    async fn claim(&self, zone_id: &str) -> StoreResult<Claim> {
        self.inner.claim(zone_id).await
    }
    async fn write(
        &self,
        zone_id: &str,
        epoch: u64,
        seq: u64,
        kind: &str,
        bytes: &[u8],
    ) -> StoreResult<WriteOutcome> {
        self.entered.notify_one();
        if let Some(gate) = &self.gate {
            gate.acquire().await.unwrap().forget();
        }
        if self
            .fail
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
            .is_ok()
        {
            self.failed.notify_one();
            return Err(StoreError::Backend("injected outage".into()));
        }
        self.inner.write(zone_id, epoch, seq, kind, bytes).await
    }
    async fn load(&self, zone_id: &str) -> StoreResult<Option<SaveRecord>> {
        self.inner.load(zone_id).await
    }
    async fn list(&self) -> StoreResult<Vec<SaveMeta>> {
        self.inner.list().await
    }
    async fn delete(&self, zone_id: &str) -> StoreResult<bool> {
        self.inner.delete(zone_id).await
    }
}

fn fast() -> StorageConfig {
    StorageConfig {
        backoff: Backoff {
            initial: Duration::from_millis(1),
            max: Duration::from_millis(4),
        },
        max_concurrent_writes: 2,
    }
}

async fn setup(store: Arc<Faulty>) -> (StorageHandle, PersistMetrics, u64) {
    let metrics = PersistMetrics::new();
    let epoch = store.claim("z").await.unwrap().epoch;
    let h = StorageWorker::start(store, fast(), metrics.clone());
    h.register("z", "kind", epoch);
    (h, metrics, epoch)
}

#[tokio::test]
async fn writes_with_the_epoch_and_increasing_seq() {
    let store = Faulty::new(0, None).await;
    let (h, metrics, epoch) = setup(Arc::clone(&store)).await;
    assert_eq!(h.try_submit("z", b"one".to_vec()).unwrap().seq, 1);
    h.flush("z").await;
    assert_eq!(h.try_submit("z", b"two".to_vec()).unwrap().seq, 2);
    h.flush("z").await;
    let saved = store.load("z").await.unwrap().unwrap();
    assert_eq!(
        (saved.epoch, saved.seq, saved.bytes),
        (epoch, 2, b"two".to_vec())
    );
    assert_eq!(saved.kind, "kind");
    let st = h.status("z").unwrap();
    assert_eq!(st.last_saved_seq, Some(2));
    assert!(st.last_saved_at_ms.is_some());
    assert!(!st.pending);
    assert_eq!(metrics.saves_ok.get(), 2);
    assert_eq!(
        h.try_submit("nope", vec![]),
        Err(SubmitError::UnknownZone("nope".into()))
    );
    assert_eq!(metrics.saves_rejected.get(), 1);
}

#[tokio::test]
async fn a_newer_snapshot_replaces_an_unwritten_one() {
    let gate = Arc::new(Semaphore::new(0));
    let store = Faulty::new(0, Some(Arc::clone(&gate))).await;
    let (h, metrics, _) = setup(Arc::clone(&store)).await;
    h.try_submit("z", b"s1".to_vec()).unwrap();
    store.entered.notified().await; // s1 is being written, held at the gate
    assert!(!h.try_submit("z", b"s2".to_vec()).unwrap().replaced);
    let s3 = h.try_submit("z", b"s3".to_vec()).unwrap();
    assert!(s3.replaced);
    assert!(h.status("z").unwrap().pending);
    gate.add_permits(10);
    h.flush("z").await;
    let saved = store.load("z").await.unwrap().unwrap();
    assert_eq!((saved.seq, saved.bytes), (3, b"s3".to_vec()));
    assert_eq!(h.status("z").unwrap().replaced, 1);
    assert_eq!(metrics.save_replaced.get(), 1);
    assert_eq!(metrics.saves_ok.get(), 2, "s1 and s3 written, s2 never");
}

#[tokio::test]
async fn failures_retry_with_backoff_and_show_in_status() {
    let store = Faulty::new(3, None).await;
    let (h, metrics, _) = setup(Arc::clone(&store)).await;
    h.try_submit("z", b"x".to_vec()).unwrap();
    h.flush("z").await;
    let saved = store.load("z").await.unwrap().unwrap();
    assert_eq!(saved.bytes, b"x".to_vec());
    assert_eq!(metrics.saves_failed.get(), 3);
    assert_eq!(metrics.store_errors.get(), 3);
    let st = h.status("z").unwrap();
    assert_eq!(st.consecutive_failures, 0, "reset by the success");
    assert_eq!(st.last_error, None);
}

#[tokio::test]
async fn an_outage_is_visible_while_it_lasts() {
    let store = Faulty::new(u32::MAX, None).await;
    let (h, metrics, _) = setup(Arc::clone(&store)).await;
    h.try_submit("z", b"x".to_vec()).unwrap();
    store.failed.notified().await;
    store.failed.notified().await;
    let st = h.status("z").unwrap();
    assert!(st.pending);
    assert!(st.consecutive_failures >= 1);
    assert!(st.last_error.unwrap().contains("injected outage"));
    // Storage comes back: the same snapshot is written.
    store.fail.store(0, Ordering::SeqCst);
    h.flush("z").await;
    assert_eq!(h.status("z").unwrap().last_saved_seq, Some(1));
    assert!(metrics.saves_failed.get() >= 2);
}

#[tokio::test]
async fn a_newer_owner_fences_this_writer() {
    let store = Faulty::new(0, None).await;
    let (h, metrics, _) = setup(Arc::clone(&store)).await;
    let alarm = h.alarm("z").unwrap();
    h.try_submit("z", b"mine".to_vec()).unwrap();
    h.flush("z").await;
    assert!(!alarm.is_raised());
    let successor = store.claim("z").await.unwrap();
    h.try_submit("z", b"stale".to_vec()).unwrap();
    h.flush("z").await;
    let st = h.status("z").unwrap();
    assert!(st.fenced);
    assert!(alarm.is_raised(), "the zone's thread is told to stop");
    assert_eq!(metrics.saves_fenced.get(), 1);
    assert_eq!(
        metrics
            .fenced_writes_refused
            .get_or_create(&vec![("write", "save".to_owned())])
            .get(),
        1
    );
    assert_eq!(
        h.try_submit("z", b"again".to_vec()),
        Err(SubmitError::Fenced("z".into()))
    );
    let saved = store.load("z").await.unwrap().unwrap();
    assert_eq!(
        saved.bytes,
        b"mine".to_vec(),
        "the stale write never landed"
    );
    assert!(successor.epoch > saved.epoch);
}

#[tokio::test]
async fn shutdown_waits_for_final_saves_within_its_timeout() {
    let store = Faulty::new(0, None).await;
    let (h, _, epoch) = setup(Arc::clone(&store)).await;
    let e2 = store.claim("y").await.unwrap().epoch;
    h.register("y", "kind", e2);
    h.try_submit("z", b"final-z".to_vec()).unwrap();
    h.try_submit("y", b"final-y".to_vec()).unwrap();
    let report = h.shutdown(Duration::from_secs(30)).await;
    assert_eq!(
        report,
        ShutdownReport {
            saved: 2,
            unsaved: vec![]
        }
    );
    assert_eq!(store.load("z").await.unwrap().unwrap().epoch, epoch);
    assert_eq!(
        store.load("y").await.unwrap().unwrap().bytes,
        b"final-y".to_vec()
    );
    assert_eq!(
        h.try_submit("z", vec![1]),
        Err(SubmitError::Closed("z".into()))
    );
}

#[tokio::test]
async fn shutdown_gives_up_after_the_timeout_and_names_the_zone() {
    let gate = Arc::new(Semaphore::new(0));
    let store = Faulty::new(0, Some(gate)).await;
    let (h, _, _) = setup(Arc::clone(&store)).await;
    h.try_submit("z", b"stuck".to_vec()).unwrap();
    store.entered.notified().await;
    let report = h.shutdown(Duration::from_millis(20)).await;
    assert_eq!(report.unsaved, vec!["z".to_owned()]);
    assert_eq!(report.saved, 0);
}

#[tokio::test]
async fn a_retired_zone_is_written_then_forgotten() {
    let gate = Arc::new(Semaphore::new(0));
    let store = Faulty::new(0, Some(Arc::clone(&gate))).await;
    let (h, _metrics, _) = setup(Arc::clone(&store)).await;
    h.try_submit("z", b"last".to_vec()).unwrap();
    store.entered.notified().await; // the final snapshot is being written
    h.retire("z");
    assert_eq!(
        h.try_submit("z", b"late".to_vec()),
        Err(SubmitError::Closed("z".into()))
    );
    assert_eq!(h.zone_count(), 1, "kept until its final save is written");
    gate.add_permits(10);
    // The worker forgets the zone right after its write returns; a long guard only against a hang.
    tokio::time::timeout(Duration::from_secs(60), async {
        while h.zone_count() != 0 {
            tokio::task::yield_now().await;
        }
    })
    .await
    .expect("the zone is still known 60 s after its final save was released");
    let saved = store.load("z").await.unwrap().unwrap();
    assert_eq!(saved.bytes, b"last".to_vec());
    assert!(h.status("z").is_none());
    h.flush("z").await; // a forgotten zone has nothing to wait for
}
