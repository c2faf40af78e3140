//! Durable calls end to end, on SQLite and PostgreSQL: a shop zone buys through `ctx.call`, a
//! bank handler applies each purchase, and the host is crashed at seeded random steps (its
//! runtime torn down mid-flight: no flush, no final save, workers cut wherever they were) and
//! restarted from the same store. At the end every purchase the bank applied is one the zone
//! knows, each key's effect took place once and each result reached the zone's saved state once.
//! Also: the call journal answers a repeated key without asking the sink again, refuses a key
//! reused with other arguments, and the call webhook's answers map to results.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use serde_json::{json, Value};
use zonekeep_core::{
    CallAnswer, CallKey, CallResult, Claims, Clock, Ctx, InputRefusal, ManualClock, PlayerId,
    Principal, Role, Zone, ZoneConfig, ZoneError, ZoneHost, ZoneInit, ZoneKinds, KEY_REUSED,
};
use zonekeep_server::persist::{
    Backoff, CallHandler, CallInbox, CallMetrics, CallSinks, CallWorker, CallWorkerConfig,
    FenceAlarm, OutboundCall, PersistConfig, Persistence, SinkError, StorageConfig, WebhookSink,
    ZonePersist,
};

use crate::lasting::Backend;

/// Buys item `n` for its `n`-th input (`buy-{n}`, deterministic: a purchase made again after a
/// crash is the same call); keeps the gold each answered purchase granted and the keys answered.
#[derive(Debug, Default, serde::Serialize, serde::Deserialize)]
struct Shop {
    made: u64,
    gold: i64,
    answered: Vec<String>,
}

impl Zone for Shop {
    type Input = ();

    fn create(_init: &ZoneInit, _ctx: &mut Ctx<'_>) -> Result<Self, ZoneError> {
        Ok(Self::default())
    }

    fn sanitize(&mut self, _p: PlayerId, _payload: &[u8]) -> Result<(), InputRefusal> {
        Ok(())
    }

    fn on_input(&mut self, ctx: &mut Ctx<'_>, _p: PlayerId, _i: ()) {
        self.made += 1;
        let n = self.made;
        ctx.call(&format!("buy-{n}"), "grant", json!({ "item": n }))
            .unwrap();
    }

    fn tick(&mut self, _ctx: &mut Ctx<'_>) {}

    fn on_call_result(&mut self, _ctx: &mut Ctx<'_>, key: &CallKey, result: &CallResult) {
        match result {
            CallResult::Ok(v) => self.gold += v["gold"].as_i64().unwrap(),
            CallResult::Err { code, message } => panic!("{key}: {code}: {message}"),
        }
        self.answered.push(key.as_str().to_owned());
    }

    fn save(&self) -> Option<Vec<u8>> {
        serde_json::to_vec(self).ok()
    }

    fn restore(_i: &ZoneInit, _c: &mut Ctx<'_>, bytes: &[u8]) -> Result<Self, ZoneError> {
        serde_json::from_slice(bytes).map_err(|e| ZoneError::Restore(e.to_string()))
    }
}

/// The bank behind the `grant` function: applies a key once (as a payment API does, by its
/// idempotency key), answers the same grant to every attempt, and counts attempts.
#[derive(Default)]
struct Bank {
    applied: Mutex<BTreeMap<String, i64>>,
    attempts: AtomicU64,
}

#[async_trait]
impl CallHandler for Bank {
    async fn handle(&self, call: &OutboundCall) -> Result<CallResult, SinkError> {
        self.attempts.fetch_add(1, Ordering::Relaxed);
        let gold = call.call.args["item"].as_i64().unwrap_or(0) * 10;
        let mut applied = self.applied.lock().unwrap();
        let gold = *applied
            .entry(call.call.key.as_str().to_owned())
            .or_insert(gold);
        Ok(CallResult::Ok(json!({ "gold": gold })))
    }
}

fn fast() -> Backoff {
    Backoff {
        initial: Duration::from_millis(1),
        max: Duration::from_millis(20),
    }
}

/// Claims and builds `shop-1` on `p` (restored from its save, if any), with `bank` answering its
/// `grant` calls, and joins alice: the zone, its persistence, its clock and alice's id.
async fn open_shop(
    p: &Persistence,
    bank: &Arc<Bank>,
) -> (ZoneHost, ZonePersist, ManualClock, PlayerId) {
    p.calls()
        .sinks()
        .register("grant", Arc::clone(bank) as Arc<dyn CallHandler>);
    let mut kinds = ZoneKinds::new();
    kinds.register::<Shop>("shop");
    let claimed = p.claim("shop-1", "shop", &Value::Null).await.unwrap();
    let clock = ManualClock::new();
    let init = ZoneInit {
        zone_id: "shop-1".into(),
        kind: "shop".into(),
        params: Value::Null,
    };
    let config = ZoneConfig {
        max_catch_up: 1000,
        ..ZoneConfig::default()
    };
    let (mut host, persist) = p
        .build(&kinds, init, config, Arc::new(clock.clone()), &claimed)
        .unwrap();
    let player = host
        .handle_join(Principal::new("alice"), Claims::new(), Role::Player)
        .unwrap();
    (host, persist, clock, player)
}

/// One run of the host's persistence around the shop: `crash_after` steps of input then torn
/// down mid-flight, or `None`: no input, run until every call was answered, save, shut down.
fn incarnation(dir: &Path, store: &str, bank: &Arc<Bank>, crash_after: Option<u32>) -> Shop {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let shop = rt.block_on(async {
        let p = Persistence::open(PersistConfig {
            store: store.to_owned(),
            data_dir: dir.to_path_buf(),
            save_every: Duration::from_millis(50),
            storage: StorageConfig {
                backoff: fast(),
                max_concurrent_writes: 2,
            },
            calls: CallWorkerConfig {
                backoff: fast(),
                ..CallWorkerConfig::default()
            },
            ..PersistConfig::default()
        })
        .await
        .unwrap();
        let (mut host, mut persist, clock, player) = open_shop(&p, bank).await;
        let mut step: u32 = 0;
        loop {
            step += 1;
            if crash_after.is_some_and(|c| step <= c) {
                assert!(host.handle_input(player, step, 0, &[]).is_accepted());
            }
            persist.before_advance(&mut host);
            clock.advance(host.config().dt());
            host.advance(clock.now());
            persist.after_advance(&mut host, clock.now());
            if crash_after == Some(step) {
                // The crash: whatever the workers were doing is cut off below.
                return host.zone::<Shop>().map(|s| Shop {
                    made: s.made,
                    gold: s.gold,
                    answered: s.answered.clone(),
                });
            }
            if crash_after.is_none() && host.calls_in_flight() == 0 && step > 1 {
                persist.save(&host);
                let shop = host.zone::<Shop>().map(|s| Shop {
                    made: s.made,
                    gold: s.gold,
                    answered: s.answered.clone(),
                });
                let _ = persist.unload(&mut host, zonekeep_server::persist::Unload::Shutdown);
                p.shutdown(tokio::time::Instant::now() + Duration::from_secs(10))
                    .await;
                return shop;
            }
            assert!(step < 200_000, "calls never answered");
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    });
    rt.shutdown_background();
    shop.unwrap()
}

/// xorshift64*, enough for seeded crash points.
fn next(state: &mut u64) -> u64 {
    *state ^= *state >> 12;
    *state ^= *state << 25;
    *state ^= *state >> 27;
    state.wrapping_mul(0x2545_f491_4f6c_dd1d)
}

fn crashes_lose_no_call_and_apply_none_twice(dir: &Path, store: &str) {
    let bank = Arc::new(Bank::default());
    let mut rng = 0xca11_u64;
    for _ in 0..5 {
        let crash = 3 + u32::try_from(next(&mut rng) % 40).unwrap();
        incarnation(dir, store, &bank, Some(crash));
    }
    let shop = incarnation(dir, store, &bank, None);

    let applied = bank.applied.lock().unwrap().clone();
    assert!(!applied.is_empty(), "no purchase went through");
    // Each result reached the zone's saved state exactly once …
    let mut answered = shop.answered.clone();
    answered.sort();
    answered.dedup();
    assert_eq!(
        answered.len(),
        shop.answered.len(),
        "a result was delivered twice"
    );
    // … and every effect that took place is one the zone knows: a call leaves only once a save
    // holds it, so a crash never leaves an effect the zone forgot.
    let known: Vec<&String> = applied.keys().collect();
    assert_eq!(known, answered.iter().collect::<Vec<_>>());
    assert_eq!(shop.gold, applied.values().sum::<i64>());
    assert_eq!(
        u64::try_from(shop.answered.len()).unwrap(),
        shop.made,
        "every purchase the saved zone made was answered"
    );
    assert!(bank.attempts.load(Ordering::Relaxed) >= u64::try_from(applied.len()).unwrap());
}

#[test]
fn durable_calls_survive_crashes_on_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    crashes_lose_no_call_and_apply_none_twice(dir.path(), "sqlite");
}

#[test]
fn durable_calls_survive_crashes_on_postgres() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let Some(backend) = rt.block_on(Backend::postgres(
        "durable_calls_survive_crashes_on_postgres",
    )) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    crashes_lose_no_call_and_apply_none_twice(dir.path(), &backend.store());
    rt.block_on(backend.cleanup());
}

/// Collects the answers the worker routes.
#[derive(Default)]
struct Answers(Mutex<Vec<CallAnswer>>, tokio::sync::Notify);

impl CallInbox for Answers {
    fn deliver(&self, _zone_id: &str, answer: CallAnswer) -> bool {
        self.0.lock().unwrap().push(answer);
        self.1.notify_one();
        true
    }
}

impl Answers {
    async fn next(&self) -> CallAnswer {
        loop {
            let notified = self.1.notified();
            if let Some(a) = {
                let mut v = self.0.lock().unwrap();
                (!v.is_empty()).then(|| v.remove(0))
            } {
                return a;
            }
            tokio::time::timeout(Duration::from_secs(30), notified)
                .await
                .expect("no answer within 30 s");
        }
    }
}

/// The call webhook, a local axum server: `grant` answers `{"ok": …}`, `refund` an error body,
/// `flaky` fails twice with 503 then answers, `forbidden` is a 403. Counts requests per
/// Idempotency-Key.
async fn webhook() -> (String, Arc<Mutex<BTreeMap<String, u32>>>) {
    use axum::http::{HeaderMap, StatusCode};
    let seen: Arc<Mutex<BTreeMap<String, u32>>> = Arc::default();
    let s = Arc::clone(&seen);
    let app = axum::Router::new().route(
        "/calls",
        axum::routing::post(move |headers: HeaderMap, body: axum::Json<Value>| {
            let seen = Arc::clone(&s);
            async move {
                let key = headers["idempotency-key"].to_str().unwrap().to_owned();
                let n = {
                    let mut seen = seen.lock().unwrap();
                    let n = seen.entry(key).or_insert(0);
                    *n += 1;
                    *n
                };
                match body["function"].as_str().unwrap() {
                    "grant" => (
                        StatusCode::OK,
                        json!({"ok": {"gold": body["args"]["n"]}}).to_string(),
                    ),
                    "refund" => (
                        StatusCode::OK,
                        json!({"error": {"code": "NO_FUNDS", "message": "the till is empty"}})
                            .to_string(),
                    ),
                    "flaky" if n <= 2 => (StatusCode::SERVICE_UNAVAILABLE, "busy".into()),
                    "flaky" => (StatusCode::OK, "7".into()),
                    _ => (StatusCode::FORBIDDEN, "not for you".into()),
                }
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (format!("http://{addr}/calls"), seen)
}

#[tokio::test]
async fn the_journal_answers_repeats_refuses_reused_keys_and_the_webhook_maps_answers() {
    let dir = tempfile::tempdir().unwrap();
    let store = zonekeep_store::open_store("sqlite", dir.path())
        .await
        .unwrap();
    let (url, seen) = webhook().await;
    let answers = Arc::new(Answers::default());
    let worker = CallWorker::start(
        store.calls.clone(),
        CallSinks::new(Some(
            WebhookSink::new(&url, Duration::from_secs(5)).unwrap(),
        )),
        Arc::clone(&answers) as Arc<dyn CallInbox>,
        CallWorkerConfig {
            backoff: fast(),
            ..CallWorkerConfig::default()
        },
        CallMetrics::default(),
    );
    let alarm = FenceAlarm::new();
    let call = |key: &str, function: &str, args: Value| zonekeep_core::Call {
        key: CallKey(key.into()),
        function: function.into(),
        args,
        tick: 1,
    };
    let ask = |key: &str, function: &str, args: Value| {
        worker
            .try_send("z", None, &alarm, call(key, function, args))
            .unwrap();
    };

    ask("a", "grant", json!({"n": 5}));
    let a = answers.next().await;
    assert_eq!(a.result, CallResult::Ok(json!({"gold": 5})));
    // The same key again (a re-send after a crash): answered from the journal.
    ask("a", "grant", json!({"n": 5}));
    assert_eq!(
        answers.next().await.result,
        CallResult::Ok(json!({"gold": 5}))
    );
    assert_eq!(seen.lock().unwrap()["z/a"], 1, "the webhook was asked once");
    // The same key with other arguments: refused, and the webhook is not asked.
    ask("a", "grant", json!({"n": 6}));
    match answers.next().await.result {
        CallResult::Err { code, .. } => assert_eq!(code, KEY_REUSED),
        other => panic!("expected KEY_REUSED, got {other:?}"),
    }
    assert_eq!(seen.lock().unwrap()["z/a"], 1);

    ask("r", "refund", json!(null));
    assert_eq!(
        answers.next().await.result,
        CallResult::Err {
            code: "NO_FUNDS".into(),
            message: "the till is empty".into()
        }
    );
    ask("f", "flaky", json!(null));
    assert_eq!(answers.next().await.result, CallResult::Ok(json!(7)));
    assert_eq!(seen.lock().unwrap()["z/f"], 3, "retried after each 503");
    ask("x", "forbidden", json!(null));
    match answers.next().await.result {
        CallResult::Err { code, message } => {
            assert_eq!(code, "HTTP_403");
            assert_eq!(message, "not for you");
        }
        other => panic!("expected HTTP_403, got {other:?}"),
    }
    // Every answer is journaled: the error results too.
    let stored = store.calls.get_call("z", "r").await.unwrap().unwrap();
    assert!(stored.answer.is_some());
    assert_eq!(worker.metrics().count("journal"), 1);
    assert_eq!(worker.metrics().count("key_reused"), 1);
}

#[test]
fn a_call_goes_out_only_once_a_save_holding_it_is_committed() {
    let dir = tempfile::tempdir().unwrap();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        // Every store call takes 300 ms, so a save cannot commit within the step that took it.
        let p = Persistence::open(PersistConfig {
            data_dir: dir.path().to_path_buf(),
            save_every: Duration::from_secs(3600),
            store_delay: Some(Duration::from_millis(300)),
            ..PersistConfig::default()
        })
        .await
        .unwrap();
        let bank = Arc::new(Bank::default());
        let (mut host, mut persist, clock, player) = open_shop(&p, &bank).await;
        assert!(host.handle_input(player, 1, 0, &[]).is_accepted());
        clock.advance(host.config().dt());
        host.advance(clock.now());
        persist.after_advance(&mut host, clock.now());
        let held = persist.save_status().unwrap();
        assert!(
            held.last_saved_seq.is_none(),
            "the save holding the call is still being written"
        );
        assert_eq!(
            p.calls().metrics().pending.get(),
            0,
            "the call waits for it"
        );
        // Step on (no ticks are needed: the call waits only for the save) until it is answered.
        let mut steps = 0;
        while host.zone::<Shop>().unwrap().answered.is_empty() {
            persist.before_advance(&mut host);
            clock.advance(host.config().dt());
            host.advance(clock.now());
            persist.after_advance(&mut host, clock.now());
            if bank.attempts.load(Ordering::Relaxed) > 0 {
                assert!(
                    persist.last_saved_seq().is_some(),
                    "the bank was asked before the save holding the call committed"
                );
            }
            steps += 1;
            assert!(steps < 100_000, "never answered");
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        assert_eq!(host.zone::<Shop>().unwrap().gold, 10);
    });
    rt.shutdown_background();
}

/// Answers every call at once with its arguments (a sink that costs nothing, so the journal is
/// what is measured).
struct Echo;

#[async_trait]
impl CallHandler for Echo {
    async fn handle(&self, call: &OutboundCall) -> Result<CallResult, SinkError> {
        Ok(CallResult::Ok(call.call.args.clone()))
    }
}

/// Timestamps each answer as it is routed.
struct Clocked(
    Mutex<Vec<(String, std::time::Instant)>>,
    tokio::sync::Notify,
);

impl CallInbox for Clocked {
    fn deliver(&self, _zone_id: &str, answer: CallAnswer) -> bool {
        let mut v = self.0.lock().unwrap();
        v.push((answer.key.0, std::time::Instant::now()));
        self.1.notify_one();
        true
    }
}

async fn call_throughput(store: &str, dir: &Path, label: &str) {
    const CALLS: usize = 20_000;
    const ZONES: usize = 100;
    let store = zonekeep_store::open_store(store, dir).await.unwrap();
    let inbox = Arc::new(Clocked(Mutex::new(Vec::new()), tokio::sync::Notify::new()));
    let sinks = CallSinks::new(None);
    sinks.register("echo", Arc::new(Echo));
    let worker = CallWorker::start(
        store.calls.clone(),
        sinks,
        Arc::clone(&inbox) as Arc<dyn CallInbox>,
        CallWorkerConfig {
            queue: CALLS,
            ..CallWorkerConfig::default()
        },
        CallMetrics::default(),
    );
    let alarm = FenceAlarm::new();
    let mut sent = BTreeMap::new();
    let start = std::time::Instant::now();
    for i in 0..CALLS {
        let key = format!("k{i}");
        sent.insert(key.clone(), std::time::Instant::now());
        worker
            .try_send(
                &format!("zone-{}", i % ZONES),
                None,
                &alarm,
                zonekeep_core::Call {
                    key: CallKey(key),
                    function: "echo".into(),
                    args: json!({ "i": i }),
                    tick: 1,
                },
            )
            .unwrap();
    }
    loop {
        let notified = inbox.1.notified();
        if inbox.0.lock().unwrap().len() >= CALLS {
            break;
        }
        tokio::time::timeout(Duration::from_secs(600), notified)
            .await
            .expect("calls not answered");
    }
    let elapsed = start.elapsed();
    let answered = inbox.0.lock().unwrap().clone();
    let mut lat: Vec<f64> = answered
        .iter()
        .map(|(k, at)| at.duration_since(sent[k]).as_secs_f64() * 1e3)
        .collect();
    lat.sort_by(f64::total_cmp);
    let pct = |p: f64| lat[((lat.len() - 1) as f64 * p) as usize];
    println!(
        "{label}: {CALLS} calls over {ZONES} zones in {:.2} s = {:.0} calls/s (journal begin + handler + journal finish); burst latency p50 {:.1} ms, p99 {:.1} ms",
        elapsed.as_secs_f64(),
        CALLS as f64 / elapsed.as_secs_f64(),
        pct(0.5),
        pct(0.99),
    );
}

/// Durable call throughput of one host's call worker: 20,000 calls queued at once over 100
/// zones, each journaled, answered by an in-process handler and its answer journaled. Run with
/// `cargo test --release -p zonekeep-server --test e2e -- --ignored bench_durable_call_throughput
/// --nocapture` (PostgreSQL when `ZONEKEEP_TEST_POSTGRES` is set).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "benchmark: run on a quiet machine with --release"]
async fn bench_durable_call_throughput() {
    let dir = tempfile::tempdir().unwrap();
    call_throughput("sqlite", dir.path(), "sqlite").await;
    if let Some(backend) = Backend::postgres("bench_durable_call_throughput").await {
        call_throughput(&backend.store(), dir.path(), "postgres").await;
        backend.cleanup().await;
    }
}
