//! Loader tests: claim, restore through the storage worker, kept saves.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use serde_json::json;
use zonekeep_core::{
    Claims, Ctx, InputRefusal, ManualClock, PlayerId, Principal, Role, Zone, ZoneError,
};
use zonekeep_store::SqliteStore;

use super::*;
use crate::persist::{StorageConfig, StorageWorker};

/// Sums inputs, emits a fact per input, saves its sum.
struct Summer(i64);

impl Zone for Summer {
    type Input = i64;
    fn create(_init: &ZoneInit, _ctx: &mut Ctx<'_>) -> Result<Self, ZoneError> {
        Ok(Summer(0))
    }
    fn sanitize(&mut self, _p: PlayerId, payload: &[u8]) -> Result<i64, InputRefusal> {
        let b: [u8; 8] = payload
            .try_into()
            .map_err(|_| InputRefusal::new(1, "8 bytes"))?;
        Ok(i64::from_le_bytes(b))
    }
    fn on_input(&mut self, ctx: &mut Ctx<'_>, _p: PlayerId, v: i64) {
        self.0 += v;
        ctx.emit_fact("add", json!({"v": v}), None, None).unwrap();
    }
    fn tick(&mut self, _ctx: &mut Ctx<'_>) {}
    fn save(&self) -> Option<Vec<u8>> {
        Some(self.0.to_le_bytes().to_vec())
    }
    fn restore(_i: &ZoneInit, _c: &mut Ctx<'_>, bytes: &[u8]) -> Result<Self, ZoneError> {
        let b: [u8; 8] = bytes
            .try_into()
            .map_err(|_| ZoneError::Restore("state schema changed".into()))?;
        Ok(Summer(i64::from_le_bytes(b)))
    }
}

fn init(kind: &str) -> ZoneInit {
    ZoneInit {
        zone_id: "z".into(),
        kind: kind.into(),
        params: serde_json::Value::Null,
    }
}

fn kinds() -> ZoneKinds {
    let mut k = ZoneKinds::new();
    k.register::<Summer>("summer");
    k.register::<Summer>("other");
    k
}

async fn loader() -> (ZoneLoader, Arc<SqliteStore>) {
    let store = Arc::new(SqliteStore::open(":memory:").await.unwrap());
    let metrics = PersistMetrics::new();
    let storage = StorageWorker::start(store.clone(), StorageConfig::default(), metrics.clone());
    (ZoneLoader::new(store.clone(), storage, metrics), store)
}

#[tokio::test]
async fn a_saved_zone_is_restored_under_a_new_epoch_with_its_facts() {
    let (loader, _store) = loader().await;
    let clock = ManualClock::new();
    let claimed = loader.claim("z").await.unwrap();
    assert_eq!((claimed.epoch, claimed.last.is_none()), (1, true));
    let mut host = loader
        .build(
            &kinds(),
            init("summer"),
            ZoneConfig::default(),
            Arc::new(clock.clone()),
            &claimed,
        )
        .unwrap();
    let p = host
        .handle_join(Principal::new("a"), Claims::new(), Role::Player)
        .unwrap();
    assert!(host
        .handle_input(p, 1, 0, &41i64.to_le_bytes())
        .is_accepted());
    clock.advance(Duration::from_millis(40));
    host.advance(clock.now());
    let sent = host.drain_facts();
    assert_eq!(sent[0].key.as_str(), "z:1:0");

    // Hibernate: final snapshot, close, unload. The next claim waits for the write.
    let storage = loader.storage().clone();
    storage.try_submit("z", host.snapshot().unwrap()).unwrap();
    storage.close("z");
    drop(host);

    let claimed = loader.claim("z").await.unwrap();
    assert_eq!(claimed.epoch, 2);
    assert_eq!(claimed.last.as_ref().map(|s| s.epoch), Some(1));
    let mut host = loader
        .build(
            &kinds(),
            init("summer"),
            ZoneConfig::default(),
            Arc::new(clock.clone()),
            &claimed,
        )
        .unwrap();
    assert_eq!(host.boot_epoch(), 2);
    assert_eq!(
        host.drain_facts(),
        sent,
        "in-flight facts re-sent under the same keys"
    );
    assert_eq!(host.zone::<Summer>().unwrap().0, 41);
    assert_eq!(storage.status("z").unwrap().epoch, 2);
}

#[tokio::test]
async fn an_unrestorable_save_is_kept_and_the_reason_recorded() {
    let (loader, store) = loader().await;
    let epoch = store.claim("z").await.unwrap().epoch;
    store
        .write("z", epoch, 1, "summer", b"old format")
        .await
        .unwrap();
    let claimed = loader.claim("z").await.unwrap();
    let clock: Arc<dyn Clock> = Arc::new(ManualClock::new());
    let err = loader
        .build(
            &kinds(),
            init("summer"),
            ZoneConfig::default(),
            clock.clone(),
            &claimed,
        )
        .err()
        .unwrap();
    assert!(
        err.reason.contains("Restore") || err.reason.contains("restore"),
        "{}",
        err.reason
    );
    assert_eq!(err.save, Some((epoch, 1)));
    assert_eq!(loader.failures().get("z"), Some(err));
    let kept = store.load("z").await.unwrap().unwrap();
    assert_eq!(kept.bytes, b"old format".to_vec(), "never deleted");
    assert!(
        loader.storage().status("z").is_none(),
        "not registered: nothing may overwrite it"
    );

    // A kind mismatch is refused the same way.
    let err = loader
        .build(
            &kinds(),
            init("other"),
            ZoneConfig::default(),
            clock,
            &claimed,
        )
        .err()
        .unwrap();
    assert!(err.reason.contains("written by kind"), "{}", err.reason);
}

#[test]
fn start_failures_are_bounded() {
    let f = StartFailures::default();
    for i in 0..MAX_START_FAILURES + 5 {
        f.record(StartFailure {
            zone_id: format!("z{i}"),
            kind: "k".into(),
            reason: "r".into(),
            save: None,
            at_ms: 0,
            params_refused: false,
        });
    }
    assert_eq!(f.all().len(), MAX_START_FAILURES);
    assert!(f.get("z0").is_none(), "oldest forgotten first");
    f.clear("z7");
    assert!(f.get("z7").is_none());
}
