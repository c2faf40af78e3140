//! Durable calls with real processes: `zonekeep serve` runs a `call-test` zone whose every input
//! makes a call to the call webhook (a local HTTP server here, applying each Idempotency-Key
//! once, as a payment API does), and is killed with SIGKILL at seeded random moments while a
//! client drives it, then restarted on the same SQLite store. At the end, after the calls still in
//! flight were sent again and answered: every effect the webhook applied is one the zone's save
//! knows, each result is in the save exactly once, nothing is left in flight, and the journal
//! holds every answered call, counted in SQL.
//!
//! Set `ZONEKEEP_CRASH_SEED` to try other kill points.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{json, Value};
use support::*;
use zonekeep_client::{connect, ConnectOptions, Event};

/// Kill rounds before the final one.
const KILLS: usize = 6;
/// Longest wait for the host; only a guard against a hang.
const WAIT: Duration = Duration::from_secs(60);

fn seed() -> u64 {
    std::env::var("ZONEKEEP_CRASH_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0xca11_c0de)
}

/// xorshift64*: enough for seeded kill points.
fn next(state: &mut u64) -> u64 {
    *state ^= *state >> 12;
    *state ^= *state << 25;
    *state ^= *state >> 27;
    state.wrapping_mul(0x2545_f491_4f6c_dd1d)
}

/// What the webhook saw: attempts per key, and the keys it applied (once each).
#[derive(Default)]
struct Bank {
    attempts: BTreeMap<String, u32>,
    applied: BTreeSet<String>,
}

/// The call webhook: `grant` applies its key once and answers 10 gold per `n`.
async fn webhook() -> (String, Arc<Mutex<Bank>>) {
    use axum::http::HeaderMap;
    let bank: Arc<Mutex<Bank>> = Arc::default();
    let b = Arc::clone(&bank);
    let app = axum::Router::new().route(
        "/calls",
        axum::routing::post(move |headers: HeaderMap, body: axum::Json<Value>| {
            let bank = Arc::clone(&b);
            async move {
                let key = headers["idempotency-key"].to_str().unwrap().to_owned();
                let mut bank = bank.lock().unwrap();
                *bank.attempts.entry(key.clone()).or_insert(0) += 1;
                bank.applied.insert(key);
                axum::Json(json!({"ok": {"gold": body["args"]["n"].as_i64().unwrap() * 10}}))
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (format!("http://{addr}/calls"), bank)
}

static JOINS: AtomicU64 = AtomicU64::new(0);

/// Joins the shop; answers the connection once the zone's first Delta arrived.
async fn join(addr: &str) -> Option<zonekeep_client::Connection> {
    let exp = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
        + 120;
    let ticket = sign(&json!({
        "sub": "ann", "zone": "shop", "kind": "call-test", "exp": exp,
        "jti": format!("shop-{}-{}", unique_run(), JOINS.fetch_add(1, Ordering::Relaxed)),
    }));
    let mut options = ConnectOptions::new(ticket);
    options.reconnect.enabled = false;
    let (mut conn, _) = connect(&format!("ws://{addr}/zones/shop"), options)
        .await
        .ok()?;
    while let Some(ev) = conn.recv().await {
        if let Event::Delta(_) = ev {
            return Some(conn);
        }
    }
    None
}

/// The shop's last save: (answered keys, gold, calls still in flight).
async fn saved(store: &StoreSpec) -> (Vec<String>, i64, usize) {
    let Some((snap, state)) = store.last_save("shop").await else {
        return (Vec::new(), 0, 0);
    };
    let answered = state["answered"]
        .as_array()
        .unwrap()
        .iter()
        .map(|k| k.as_str().unwrap().to_owned())
        .collect();
    (answered, state["gold"].as_i64().unwrap(), snap.calls.len())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_hosts_apply_each_call_once_and_deliver_each_result_once() {
    let dir = tempfile::tempdir().unwrap();
    let store = StoreSpec::Sqlite(dir.path().to_path_buf());
    let log = dir.path().join("host.log");
    let (url, bank) = webhook().await;
    let args = ["--call-webhook", url.as_str(), "--save-every", "200ms"];
    let mut rng = seed();
    let mut n: u64 = 0;
    for _ in 0..KILLS {
        let server = Server::start(&store, &args, &log).await;
        let conn = tokio::time::timeout(WAIT, join(&server.addr))
            .await
            .expect("joined")
            .expect("joined");
        let kill_after = Duration::from_millis(200 + next(&mut rng) % 1200);
        let _ = tokio::time::timeout(kill_after, async {
            loop {
                n += 1;
                if conn.send_input(&n.to_le_bytes()).is_err() {
                    return;
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        })
        .await;
        server.kill().await;
    }

    // The last life: no new input; the calls the save holds in flight go out again and are
    // answered; then a graceful stop writes the final save.
    let server = Server::start(&store, &args, &log).await;
    let conn = tokio::time::timeout(WAIT, join(&server.addr))
        .await
        .expect("joined")
        .expect("joined");
    tokio::time::timeout(WAIT, async {
        loop {
            let (_, _, in_flight) = saved(&store).await;
            if in_flight == 0 {
                return;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    })
    .await
    .expect("every call in flight was answered and saved");
    conn.close().await;
    server.terminate().await;

    let (answered, gold, in_flight) = saved(&store).await;
    let bank = bank.lock().unwrap();
    assert_eq!(in_flight, 0);
    assert!(!answered.is_empty(), "no call was ever answered");
    let unique: BTreeSet<&String> = answered.iter().collect();
    assert_eq!(unique.len(), answered.len(), "a result was delivered twice");
    // The webhook sees keys as `<zone>/<key>`.
    let applied: BTreeSet<String> = bank
        .applied
        .iter()
        .map(|k| k.strip_prefix("shop/").unwrap().to_owned())
        .collect();
    let known: BTreeSet<String> = unique.iter().map(|k| (*k).clone()).collect();
    let unknown: Vec<&String> = applied.difference(&known).collect();
    let never_applied: Vec<&String> = known.difference(&applied).collect();
    assert!(
        unknown.is_empty(),
        "effects applied for calls the zone does not know: {unknown:?}"
    );
    assert!(
        never_applied.is_empty(),
        "results for calls never applied: {never_applied:?}"
    );
    let expected_gold: i64 = applied
        .iter()
        .map(|k| k.strip_prefix("buy-").unwrap().parse::<i64>().unwrap() * 10)
        .sum();
    assert_eq!(gold, expected_gold);
    // Counted in SQL: the journal answered exactly these calls.
    let db = rusqlite::Connection::open(dir.path().join(zonekeep_store::SQLITE_FILE_NAME)).unwrap();
    let journaled: i64 = db
        .query_row(
            "SELECT count(*) FROM zone_calls WHERE zone_id = 'shop' AND answer_kind = 'ok'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(usize::try_from(journaled).unwrap(), applied.len());
    let attempts: u32 = bank.attempts.values().sum();
    println!(
        "{KILLS} kills: {n} inputs sent, {} calls applied and answered once each, {attempts} webhook attempts",
        applied.len()
    );
}
