//! Persistence with real processes: `zonekeep serve` is killed with SIGKILL
//! at seeded random moments while clients drive the `ledger-test` zone, and
//! restarted on the same store each time. After every restart the zone
//! resumes exactly from its last save; at the end every fact a client saw
//! settled, and every fact a save held in flight, is in the ledger exactly
//! once, and the database is intact. Graceful shutdown (SIGTERM) saves every
//! zone and a restart restores them.
//!
//! Set `ZONEKEEP_CRASH_SEED` to replay other kill points; the same crash test
//! runs against PostgreSQL when `ZONEKEEP_TEST_POSTGRES` is set.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::time::Duration;

use support::{check_ledger, in_flight, LedgerClient, Server, StoreSpec};

/// Kill rounds before the final, graceful one.
const KILLS: usize = 4;
/// Inputs per client per second (under the host's default 60/s limit).
const INPUT_EVERY: Duration = Duration::from_millis(25);

fn seed() -> u64 {
    std::env::var("ZONEKEEP_CRASH_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0x5eed_c0ffee)
}

/// xorshift64*: enough for seeded kill points.
fn next(state: &mut u64) -> u64 {
    *state ^= *state >> 12;
    *state ^= *state << 25;
    *state ^= *state >> 27;
    state.wrapping_mul(0x2545_f491_4f6c_dd1d)
}

/// Joins every principal in turn; checks that the first joiner sees the zone continuing from its
/// last save. The restarted host may already run the zone when the first joiner arrives (it
/// starts the zones the directory assigns it), so ticks may have passed and re-sent facts may
/// have settled since the restore; no input can have been applied, and no fact lost.
async fn join_all(
    server: &Server,
    store: &StoreSpec,
    zone: &str,
    principals: &[String],
    next_n: &BTreeMap<String, u64>,
    count: u64,
) -> Vec<LedgerClient> {
    let saved = store.last_save(zone).await;
    let mut clients = Vec::new();
    for (i, p) in principals.iter().enumerate() {
        let mut c = LedgerClient::start(&server.addr, zone, p, next_n[p], count, INPUT_EVERY).await;
        let log = c
            .until("the zone's state on join", |l| l.state.is_some())
            .await;
        if i == 0 {
            let state = log.state.unwrap();
            match &saved {
                None => assert_eq!(state["inputs"], 0, "a zone without a save starts fresh"),
                Some((snap, saved_state)) => {
                    assert_eq!(
                        state["inputs"], saved_state["inputs"],
                        "resumed from the last save"
                    );
                    let (settled, pending) = (
                        state["settled"].as_u64().unwrap(),
                        state["pending"].as_u64().unwrap(),
                    );
                    let saved_settled = saved_state["settled"].as_u64().unwrap();
                    assert!(settled >= saved_settled, "{state} after {saved_state}");
                    assert_eq!(
                        settled + pending,
                        saved_settled + snap.facts.len() as u64,
                        "every fact in flight at the save is still pending or settled once: {state}"
                    );
                    assert!(
                        state["tick"].as_u64().unwrap() >= snap.tick,
                        "the tick continues from the save: {state}, saved at {}",
                        snap.tick
                    );
                }
            }
        }
        clients.push(c);
    }
    clients
}

async fn crash_rounds(store: StoreSpec, zone: &str, principals: &[String], logs: &Path) {
    let mut rng = seed();
    println!("crash seed {} (ZONEKEEP_CRASH_SEED)", seed());
    let log = logs.join("server.log");
    let mut must: BTreeSet<String> = BTreeSet::new();
    let mut sent: BTreeMap<String, BTreeSet<u64>> = BTreeMap::new();
    let mut next_n: BTreeMap<String, u64> = principals.iter().map(|p| (p.clone(), 1)).collect();
    let save_every = ["--save-every", "150ms"];

    for round in 0..KILLS {
        if let Some((snap, _)) = store.last_save(zone).await {
            must.extend(in_flight(&snap).into_keys());
        }
        let server = Server::start(&store, &save_every, &log).await;
        let clients = join_all(&server, &store, zone, principals, &next_n, u64::MAX / 2).await;
        let kill_after = Duration::from_millis(200 + next(&mut rng) % 1000);
        // The kill point itself is what is being tested: a random moment, not a signal.
        tokio::time::sleep(kill_after).await;
        server.kill().await;
        for (c, p) in clients.into_iter().zip(principals) {
            let mut c = c;
            let l = c.until("the socket to close", |l| l.closed).await;
            println!(
                "round {round}: killed after {kill_after:?}; {p} sent {}, acked {}, saw {} settled",
                l.sent.len(),
                l.acked,
                l.settled.len()
            );
            assert!(!l.sent.is_empty(), "{p} sent inputs before the kill");
            must.extend(l.settled.keys().cloned());
            let s = sent.entry(p.clone()).or_default();
            s.extend(l.sent.iter().copied());
            next_n.insert(p.clone(), s.last().copied().unwrap_or(0) + 1);
        }
    }

    // Final round: restart, let every restored and new fact settle, stop gracefully.
    let (snap, _) = store
        .last_save(zone)
        .await
        .expect("the zone was saved at least once");
    let resent = in_flight(&snap);
    must.extend(resent.keys().cloned());
    let server = Server::start(&store, &save_every, &log).await;
    let per_client = 10;
    let mut clients = join_all(&server, &store, zone, principals, &next_n, per_client).await;
    for (c, p) in clients.iter_mut().zip(principals) {
        let first = next_n[p];
        let l = c
            .until("every new fact to settle", |l| {
                let ns: BTreeSet<u64> = l.settled.values().copied().collect();
                (first..first + per_client).all(|n| ns.contains(&n))
            })
            .await;
        must.extend(l.settled.keys().cloned());
        sent.entry(p.clone())
            .or_default()
            .extend(l.sent.iter().copied());
    }
    // Every fact the last save held in flight is committed. Its settlement may reach no client:
    // the restarted host starts the zone the directory assigns it at once, so a re-sent fact can
    // settle before its player is back; the ledger, not the client, is where it must be.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        let committed: BTreeSet<String> = store
            .facts(zone)
            .await
            .into_iter()
            .map(|(k, _, _)| k)
            .collect();
        let missing: Vec<&String> = resent.keys().filter(|k| !committed.contains(*k)).collect();
        if missing.is_empty() {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "re-sent facts never committed: {missing:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let on_join = clients[0].snapshot().state.unwrap();
    for c in clients {
        c.stop();
    }
    server.terminate().await;

    // The graceful save holds every input and nothing in flight.
    let (snap, state) = store.last_save(zone).await.unwrap();
    assert!(
        snap.facts.is_empty(),
        "all facts settled before the final save"
    );
    assert_eq!(
        state["inputs"].as_u64().unwrap(),
        on_join["inputs"].as_u64().unwrap() + per_client * principals.len() as u64,
    );

    let per_principal = check_ledger(&store, zone, &must, &sent).await;
    println!(
        "ledger: {per_principal:?}; {} facts had to be there",
        must.len()
    );
    if let Some(ok) = store.integrity() {
        assert_eq!(ok, "ok", "PRAGMA integrity_check");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_at_random_moments_loses_no_fact_and_applies_none_twice() {
    let dir = tempfile::tempdir().unwrap();
    let store = StoreSpec::Sqlite(dir.path().join("data"));
    let principals = vec!["alice".to_owned(), "bob".to_owned()];
    crash_rounds(store, "crash", &principals, dir.path()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_at_random_moments_on_postgres() {
    let Some(url) = support::service_url(
        "ZONEKEEP_TEST_POSTGRES",
        "kill_9_at_random_moments_on_postgres",
    ) else {
        return;
    };
    // The database is shared between runs: this run's zone and principals are unique.
    let run = support::unique_run();
    let dir = tempfile::tempdir().unwrap();
    let principals = vec![format!("alice-{run}"), format!("bob-{run}")];
    crash_rounds(
        StoreSpec::postgres_isolated(&url, &run).await,
        &format!("crash-{run}"),
        &principals,
        dir.path(),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_saves_every_zone_and_a_restart_restores_them() {
    let dir = tempfile::tempdir().unwrap();
    let store = StoreSpec::Sqlite(dir.path().join("data"));
    let log = dir.path().join("server.log");
    // A long period: only the shutdown can have saved these zones.
    let args = ["--save-every", "1h"];
    let zones = [("calm-1", 3u64), ("calm-2", 5), ("calm-3", 7)];

    let server = Server::start(&store, &args, &log).await;
    for (zone, count) in zones {
        let mut c = LedgerClient::start(&server.addr, zone, "sam", 1, count, INPUT_EVERY).await;
        c.until("every input's fact to settle", |l| {
            l.settled.len() as u64 == count
        })
        .await;
        c.stop();
    }
    for (zone, _) in zones {
        assert!(store.last_save(zone).await.is_none(), "not saved yet");
    }
    server.terminate().await;

    for (zone, count) in zones {
        let (snap, state) = store.last_save(zone).await.expect("saved on shutdown");
        assert_eq!(state["inputs"].as_u64(), Some(count), "{zone}");
        assert!(snap.facts.is_empty(), "{zone}: nothing in flight");
    }
    let server = Server::start(&store, &args, &log).await;
    for (zone, count) in zones {
        let mut c = LedgerClient::start(&server.addr, zone, "sam", 100, 0, INPUT_EVERY).await;
        let l = c.until("the zone's state", |l| l.state.is_some()).await;
        assert_eq!(
            l.state.unwrap()["inputs"].as_u64(),
            Some(count),
            "{zone} restored"
        );
        c.stop();
    }
    server.terminate().await;
    assert_eq!(store.integrity().as_deref(), Some("ok"));
}

/// A host on the embedded SQLite store restarted after `kill -9` under the same id and data
/// directory starts at once: the data directory's lock proves its predecessor has exited, so it
/// does not wait out the takeover bound, and it serves the zone from its last save.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sqlite_host_restarted_after_kill_9_takes_its_id_without_waiting() {
    let dir = tempfile::tempdir().unwrap();
    let store = StoreSpec::Sqlite(dir.path().join("data"));
    let log = dir.path().join("server.log");
    let args = [
        "--save-every",
        "100ms",
        "--admin-token",
        support::ADMIN_TOKEN,
    ];

    let first = Server::start(&store, &args, &log).await;
    let id = first.host_id().await;
    let mut c = LedgerClient::start(&first.addr, "restart-1", "sam", 1, 3, INPUT_EVERY).await;
    c.until("every input's fact to settle", |l| l.settled.len() == 3)
        .await;
    c.stop();
    first.kill().await;
    let (_, saved) = store
        .last_save("restart-1")
        .await
        .expect("saved before the kill");

    let second = Server::start(&store, &args, &log).await;
    assert_eq!(second.host_id().await, id, "the same host id");
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(!text.contains("has not left; waiting"), "{text}");
    let mut c = LedgerClient::start(&second.addr, "restart-1", "sam", 100, 0, INPUT_EVERY).await;
    let l = c.until("the zone's state", |l| l.state.is_some()).await;
    assert_eq!(l.state.unwrap()["inputs"], saved["inputs"], "restored");
    c.stop();
    second.terminate().await;
}
