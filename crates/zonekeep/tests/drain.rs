//! Graceful shutdown of real `zonekeep serve` processes never loses state a
//! client saw acknowledged: a zone stops ticking, its final save is confirmed
//! by the store, the zone is handed to a live host of the fleet, and only then
//! are its clients kicked (ZONE_MOVED: resume there), so a client that
//! reconnects at once (here: to the second host, as in a rolling deploy) finds
//! every input it saw acknowledged. One deadline
//! bounds the whole shutdown, and a final save that cannot be written makes
//! the process exit non-zero with an ERROR in its log.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

mod support;

use std::time::Duration;

use support::{LedgerClient, Server, StoreSpec};
use zonekeep_protocol::messages::KickCode;

/// Inputs per client per second (under the host's default 60/s limit).
const INPUT_EVERY: Duration = Duration::from_millis(25);

/// Index of the first log line containing every one of `parts`.
fn line_of(log: &str, parts: &[&str]) -> Option<usize> {
    log.lines()
        .position(|l| parts.iter().all(|p| l.contains(p)))
}

/// `left_ms` of the `shutting down` line of `phase`.
fn left_ms(log: &str, phase: &str) -> u64 {
    let pattern = format!("phase=\"{phase}\"");
    let line = log
        .lines()
        .find(|l| l.contains("shutting down") && l.contains(&pattern))
        .unwrap_or_else(|| panic!("no start of phase {phase}:\n{log}"));
    let v = line.split("left_ms=").nth(1).unwrap();
    v.split_whitespace().next().unwrap().parse().unwrap()
}

/// Clients play `zone` on one host under load; a second host on the same
/// store is up; the first gets SIGTERM and each client, once kicked, rejoins
/// the second at once and must find every input it saw acknowledged.
async fn rejoin_at_once_after_sigterm(store: StoreSpec, zone: &str, principals: [String; 3]) {
    let dir = tempfile::tempdir().unwrap();
    // Only the shutdown saves this zone (a 1 h period), on a slowed store.
    let old_host = Server::start(
        &store,
        &["--save-every", "1h", "--store-delay", "50"],
        &dir.path().join("old.log"),
    )
    .await;
    let mut clients = Vec::new();
    for p in &principals {
        clients
            .push(LedgerClient::start(&old_host.addr, zone, p, 1, u64::MAX / 2, INPUT_EVERY).await);
    }
    for c in &mut clients {
        c.until("inputs acknowledged under load", |l| l.acked >= 10)
            .await;
    }
    // The host the clients move to: the same store, running before the old one stops.
    let new_host =
        Server::start(&store, &["--save-every", "1h"], &dir.path().join("new.log")).await;

    old_host.sigterm();
    let mut acked = 0u64;
    let mut sent = 0u64;
    for (c, p) in clients.iter_mut().zip(&principals) {
        let l = c.until("the Kick", |l| l.closed).await;
        let (code, _) = l
            .kicked
            .clone()
            .unwrap_or_else(|| panic!("{p}: closed without a Kick"));
        // The second host is live: the drain hands the zone to it, and says so.
        assert_eq!(code, KickCode::ZONE_MOVED.0, "{p}");
        println!("{p}: sent {}, saw {} acknowledged", l.sent.len(), l.acked);
        acked += u64::from(l.acked);
        sent += l.sent.len() as u64;
    }
    // At once, as an SDK does on SHUTTING_DOWN: the new host claims the zone from the store.
    let mut back = LedgerClient::start(
        &new_host.addr,
        zone,
        &principals[0],
        1_000_000,
        0,
        INPUT_EVERY,
    )
    .await;
    let state = back
        .until("the restored zone's state", |l| l.state.is_some())
        .await
        .state
        .unwrap();
    let inputs = state["inputs"].as_u64().unwrap();
    assert!(
        inputs >= acked,
        "the restored zone holds {inputs} inputs, the clients saw {acked} acknowledged"
    );
    assert!(inputs <= sent, "{inputs} inputs restored, only {sent} sent");
    back.stop();

    let (status, log) = old_host.wait().await;
    assert!(status.success(), "exit status {status}\n{log}");
    let zone_field = format!("zone={zone}");
    let saved = line_of(&log, &["final save written", &zone_field])
        .unwrap_or_else(|| panic!("no final save logged:\n{log}"));
    let handed = line_of(&log, &["zone handed over", &zone_field])
        .unwrap_or_else(|| panic!("no hand-over logged:\n{log}"));
    let kicked = line_of(&log, &["zone released", &zone_field])
        .unwrap_or_else(|| panic!("no release logged:\n{log}"));
    assert!(
        saved < handed && handed < kicked,
        "the save is confirmed, then the zone handed over, then its clients told:\n{log}"
    );
    assert!(!log.contains("shutdown deadline reached"), "{log}");
    assert!(!log.contains(" ERROR "), "{log}");
    new_host.terminate().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_under_load_keeps_every_acknowledged_input_for_a_client_that_rejoins_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let principals = ["ada", "bo", "cy"].map(String::from);
    rejoin_at_once_after_sigterm(
        StoreSpec::Sqlite(dir.path().join("data")),
        "drain",
        principals,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_under_load_keeps_every_acknowledged_input_on_postgres() {
    let Some(url) = support::service_url(
        "ZONEKEEP_TEST_POSTGRES",
        "sigterm_under_load_keeps_every_acknowledged_input_on_postgres",
    ) else {
        return;
    };
    // The database is shared between runs: this run's zone and principals are unique.
    let run = support::unique_run();
    let principals = ["ada", "bo", "cy"].map(|p| format!("{p}-{run}"));
    rejoin_at_once_after_sigterm(
        StoreSpec::postgres_isolated(&url, &run).await,
        &format!("drain-{run}"),
        principals,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_deadline_bounds_the_whole_shutdown_and_names_the_phase_that_hit_it() {
    let dir = tempfile::tempdir().unwrap();
    let store = StoreSpec::Sqlite(dir.path().join("data"));
    // Every store call takes longer than the whole shutdown bound.
    let host = Server::start(
        &store,
        &[
            "--save-every",
            "1h",
            "--store-delay",
            "1500",
            "--shutdown-timeout-ms",
            "400",
        ],
        &dir.path().join("host.log"),
    )
    .await;
    let mut c = LedgerClient::start(&host.addr, "slow", "ada", 1, 5, INPUT_EVERY).await;
    c.until("inputs acknowledged", |l| l.acked >= 5).await;

    host.sigterm();
    let l = c.until("the Kick", |l| l.closed).await;
    assert_eq!(
        l.kicked.map(|k| k.0),
        Some(KickCode::SHUTTING_DOWN.0),
        "clients are still told when the saves run out of time"
    );
    let (status, log) = host.wait().await;
    assert!(!status.success(), "a lost final save fails the exit\n{log}");
    assert!(
        line_of(
            &log,
            &["shutdown deadline reached", "phase=\"final saves\""]
        )
        .is_some(),
        "{log}"
    );
    assert!(
        line_of(
            &log,
            &[
                "ERROR",
                "final save not written by the shutdown deadline",
                "zone=slow"
            ]
        )
        .is_some(),
        "{log}"
    );
    // One deadline, not one per phase: waiting for the saves stops a quarter of the bound
    // (400 ms) before the deadline, and every later phase starts with at most that left.
    assert!(left_ms(&log, "freeze") <= 400, "{log}");
    for later in ["closing connections", "stopping zones", "committing facts"] {
        assert!(left_ms(&log, later) <= 100, "{later}\n{log}");
    }
    assert!(log.contains("zonekeep: shutdown lost state"), "{log}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_final_save_the_store_refuses_fails_the_exit_with_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let store = StoreSpec::Sqlite(data.clone());
    let host = Server::start(
        &store,
        &["--save-every", "1h", "--shutdown-timeout-ms", "1000"],
        &dir.path().join("host.log"),
    )
    .await;
    let mut c = LedgerClient::start(&host.addr, "refused", "ada", 1, 5, INPUT_EVERY).await;
    c.until("inputs acknowledged", |l| l.acked >= 5).await;
    // The store stops taking saves, as a read-only database would.
    let db = rusqlite::Connection::open(data.join(zonekeep_store::SQLITE_FILE_NAME)).unwrap();
    db.execute_batch(
        "CREATE TRIGGER refuse_insert BEFORE INSERT ON zone_saves
             BEGIN SELECT RAISE(ABORT, 'attempt to write a readonly database'); END;
         CREATE TRIGGER refuse_update BEFORE UPDATE ON zone_saves
             BEGIN SELECT RAISE(ABORT, 'attempt to write a readonly database'); END;",
    )
    .unwrap();
    drop(db);

    host.sigterm();
    let l = c.until("the Kick", |l| l.closed).await;
    assert_eq!(l.kicked.map(|k| k.0), Some(KickCode::SHUTTING_DOWN.0));
    let (status, log) = host.wait().await;
    assert!(!status.success(), "exit status {status}\n{log}");
    assert!(
        line_of(&log, &["ERROR", "final save", "zone=refused"]).is_some(),
        "{log}"
    );
    assert!(log.contains("zonekeep: shutdown lost state"), "{log}");
    assert!(
        store.last_save("refused").await.is_none(),
        "nothing was saved"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_bound_holds_to_the_exit_however_slow_the_store() {
    let dir = tempfile::tempdir().unwrap();
    let store = StoreSpec::Sqlite(dir.path().join("data"));
    // Every store write takes longer than the whole shutdown bound (the fleet directory gives a
    // store 2 s to answer, so this is about as slow as a host can still start on).
    const BOUND_MS: u64 = 400;
    const STORE_MS: u64 = 1_500;
    let host = Server::start(
        &store,
        &[
            "--save-every",
            "1h",
            "--store-delay",
            &STORE_MS.to_string(),
            "--shutdown-timeout-ms",
            &BOUND_MS.to_string(),
        ],
        &dir.path().join("host.log"),
    )
    .await;
    let mut c = LedgerClient::start(&host.addr, "slower", "ada", 1, 5, INPUT_EVERY).await;
    c.until("inputs acknowledged", |l| l.acked >= 5).await;

    let signalled = tokio::time::Instant::now();
    host.sigterm();
    let (status, log) = host.wait().await;
    let took = signalled.elapsed();
    // The process is gone well before one more store write could have run past the bound (half
    // a write of slack for a loaded machine).
    assert!(
        took < Duration::from_millis(BOUND_MS + STORE_MS / 2),
        "exited {took:?} after SIGTERM with a {BOUND_MS} ms bound\n{log}"
    );
    // Every step after the final saves is bounded too: leaving the fleet (a store write) starts
    // with what is left of the bound and is cut at the deadline.
    assert!(left_ms(&log, "leaving the fleet") <= BOUND_MS, "{log}");
    assert!(
        line_of(
            &log,
            &["shutdown deadline reached", "phase=\"leaving the fleet\""]
        )
        .is_some(),
        "{log}"
    );
    // What the bound cost is said, and fails the exit: a store slower than the bound cannot
    // confirm the final save in it.
    assert!(!status.success(), "{log}");
    assert!(
        line_of(
            &log,
            &[
                "ERROR",
                "final save not written by the shutdown deadline",
                "zone=slower"
            ]
        )
        .is_some(),
        "{log}"
    );
    assert!(log.contains("zonekeep: shutdown lost state"), "{log}");
}
