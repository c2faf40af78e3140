//! The persistence pipeline end to end, in process: a zone emitting one fact
//! per input runs through the real loader, storage worker, fact worker and
//! SQLite file; each incarnation is "crashed" at a seeded random step by
//! tearing its runtime down mid-flight (no flush, no shutdown), then the next
//! one restores from the same file. At the end every fact that was
//! acknowledged or saved as in flight is in the ledger, each exactly once.
//!
//! (The real-process `kill -9` test lives with the binary; this one pins the
//! components' contract without a server.)
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeSet;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::json;
use zonekeep_core::{
    Claims, Clock, Ctx, FactOutcome, InputRefusal, ManualClock, PlayerId, Principal, Role,
    Settlement, Snapshot, Zone, ZoneConfig, ZoneError, ZoneInit, ZoneKinds,
};
use zonekeep_server::persist::{
    open, Backoff, FactWorker, FactWorkerConfig, FenceAlarm, PersistConfig, PersistMetrics,
    SettlementInbox, StorageConfig, StorageWorker, ZoneLoader,
};

/// Counts inputs; one fact `{"add": {"score": 1}}` per input, seq in the payload.
struct LedgerTest {
    inputs: u64,
}

impl Zone for LedgerTest {
    type Input = ();
    fn create(_i: &ZoneInit, _c: &mut Ctx<'_>) -> Result<Self, ZoneError> {
        Ok(LedgerTest { inputs: 0 })
    }
    fn sanitize(&mut self, _p: PlayerId, _payload: &[u8]) -> Result<(), InputRefusal> {
        Ok(())
    }
    fn on_input(&mut self, ctx: &mut Ctx<'_>, p: PlayerId, _i: ()) {
        self.inputs += 1;
        let seq = ctx.input_meta().map(|m| m.seq);
        let who = ctx.player(p).map(|i| i.principal.as_str().to_owned());
        ctx.emit_fact(
            "input",
            json!({"seq": seq, "add": {"score": 1}}),
            who.as_deref(),
            None,
        )
        .unwrap();
    }
    fn tick(&mut self, _c: &mut Ctx<'_>) {}
    fn save(&self) -> Option<Vec<u8>> {
        Some(self.inputs.to_le_bytes().to_vec())
    }
    fn restore(_i: &ZoneInit, _c: &mut Ctx<'_>, b: &[u8]) -> Result<Self, ZoneError> {
        let b: [u8; 8] = b.try_into().map_err(|_| ZoneError::Restore("len".into()))?;
        Ok(LedgerTest {
            inputs: u64::from_le_bytes(b),
        })
    }
}

struct Inbox(Mutex<Vec<Settlement>>);

impl SettlementInbox for Inbox {
    fn deliver(&self, _zone: &str, s: Settlement) -> bool {
        self.0.lock().unwrap().push(s);
        true
    }
}

#[derive(Default)]
struct Seen {
    acked: BTreeSet<String>,
    saved_in_flight: BTreeSet<String>,
}

/// Runs one incarnation; `crash_after` steps of input, or `None` to run to
/// quiescence (all facts settled) and save.
fn incarnation(dir: &Path, crash_after: Option<u32>, seen: &mut Seen) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let metrics = PersistMetrics::new();
        let config = PersistConfig {
            data_dir: dir.to_path_buf(),
            ..PersistConfig::default()
        };
        let (store, sink, _calls) = open(&config, &metrics).await.unwrap();
        let fast = Backoff {
            initial: Duration::from_millis(1),
            max: Duration::from_millis(10),
        };
        let storage = StorageWorker::start(
            store.saves.clone(),
            StorageConfig {
                backoff: fast,
                max_concurrent_writes: 2,
            },
            metrics.clone(),
        );
        let loader = ZoneLoader::new(store.saves.clone(), storage.clone(), metrics.clone());
        let inbox = Arc::new(Inbox(Mutex::new(Vec::new())));
        let facts = FactWorker::start(
            sink,
            inbox.clone(),
            FactWorkerConfig {
                backoff: fast,
                ..FactWorkerConfig::default()
            },
            metrics.clone(),
        );

        let claimed = loader.claim("z").await.unwrap();
        if let Some(save) = &claimed.last {
            let snap = Snapshot::decode(&save.bytes).unwrap();
            seen.saved_in_flight
                .extend(snap.facts.iter().map(|f| f.key.as_str().to_owned()));
        }
        let mut kinds = ZoneKinds::new();
        kinds.register::<LedgerTest>("ledger-test");
        let clock = ManualClock::new();
        let init = ZoneInit {
            zone_id: "z".into(),
            kind: "ledger-test".into(),
            params: serde_json::Value::Null,
        };
        let mut host = loader
            .build(
                &kinds,
                init,
                ZoneConfig::default(),
                Arc::new(clock.clone()),
                &claimed,
            )
            .unwrap();
        let queue = facts.open_zone("z", None, FenceAlarm::new());
        let p = host
            .handle_join(Principal::new("alice"), Claims::new(), Role::Player)
            .unwrap();

        let inputs = crash_after.unwrap_or(10);
        let mut step: u32 = 0;
        loop {
            step += 1;
            if step <= inputs {
                assert!(host.handle_input(p, step, 0, &[]).is_accepted());
            }
            clock.advance(host.config().dt());
            host.advance(clock.now());
            for f in host.drain_facts() {
                queue.try_send(f).unwrap();
            }
            for s in inbox.0.lock().unwrap().drain(..) {
                if matches!(s.outcome, FactOutcome::Ok(_)) {
                    seen.acked.insert(s.key.as_str().to_owned());
                }
                host.handle_settlement(s);
            }
            if step.is_multiple_of(3) {
                storage.try_submit("z", host.snapshot().unwrap()).unwrap();
            }
            if crash_after == Some(step) {
                return; // crash: the runtime is torn down below, mid-flight
            }
            if crash_after.is_none() && step > inputs && host.facts_in_flight() == 0 {
                storage.try_submit("z", host.snapshot().unwrap()).unwrap();
                storage.flush("z").await;
                return;
            }
            assert!(step < 100_000, "facts never settled");
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    });
    rt.shutdown_background();
}

/// xorshift64*, enough for seeded kill points.
fn next(state: &mut u64) -> u64 {
    *state ^= *state >> 12;
    *state ^= *state << 25;
    *state ^= *state >> 27;
    state.wrapping_mul(0x2545_f491_4f6c_dd1d)
}

#[test]
fn crashes_at_random_steps_lose_no_fact_and_apply_none_twice() {
    let dir = tempfile::tempdir().unwrap();
    let mut seen = Seen::default();
    let mut rng = 0x5eed_u64;
    for _ in 0..4 {
        let kill = 2 + u32::try_from(next(&mut rng) % 25).unwrap();
        incarnation(dir.path(), Some(kill), &mut seen);
    }
    incarnation(dir.path(), None, &mut seen);

    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let config = PersistConfig {
            data_dir: dir.path().to_path_buf(),
            ..PersistConfig::default()
        };
        let (store, _sink, _calls) = open(&config, &PersistMetrics::new()).await.unwrap();
        let must: BTreeSet<&String> = seen.acked.iter().chain(&seen.saved_in_flight).collect();
        assert!(!seen.acked.is_empty());
        for key in &must {
            assert!(
                store.facts.get(key).await.unwrap().is_some(),
                "fact {key} lost"
            );
        }
        // Each fact adds 1: the total equals the number of distinct facts
        // recorded, so none was applied twice.
        let count = store.facts.count().await.unwrap();
        let total = store.facts.totals("alice").await.unwrap();
        assert_eq!(
            total.get("score").copied(),
            Some(i64::try_from(count).unwrap())
        );
        assert!(count >= u64::try_from(must.len()).unwrap());
    });
    drop(rt);

    let db = rusqlite::Connection::open(dir.path().join(zonekeep_store::SQLITE_FILE_NAME)).unwrap();
    let ok: String = db
        .query_row("PRAGMA integrity_check", [], |r| r.get(0))
        .unwrap();
    assert_eq!(ok, "ok");
}
