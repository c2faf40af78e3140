//! A host whose database stops answering — the connections stay open, nothing comes back — fences
//! itself: although every store call hangs, its lease lapses, its zones stop and their clients are
//! told HOST_FENCED, and only after that does another host take the zones over (after the takeover
//! bound, by the database's clock). Clients rejoining through that host play on, and the ledger
//! holds every fact once. The test asserts that order, the order that makes the takeover safe, and
//! prints how long each step took after the freeze rather than asserting wall-clock times. While
//! the host's store hangs, clients sent to it are told to retry (INTERNAL_ERROR), not refused, and
//! a client that retries lands once the zone moved.
//!
//! The hang is made by a TCP proxy (support::proxy) between one host and PostgreSQL that, when frozen,
//! neither reads nor writes any byte and closes no socket: the host sees neither an error nor a
//! closed connection, only silence — the case timeouts and the lease must cover on their own.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use serde_json::json;
use tokio::time::Instant;
use zonekeep_protocol::messages::KickCode;

use support::proxy::{FreezableProxy, PgUrl};
use support::{zone_entry, LedgerClient, Server, StoreSpec, ADMIN_TOKEN};

/// Inputs per client per second (under the host's default 60/s limit).
const INPUT_EVERY: Duration = Duration::from_millis(25);
/// Overall bound on each wait after the freeze: generous, only there so a broken host fails the
/// test instead of hanging it (the fence and takeover bounds are seconds).
const PATIENCE: Duration = Duration::from_secs(60);

/// Polls `server`'s `/admin/zones` until `zone` runs there; returns when the test saw it.
async fn running_on(server: &Server, zone: &str) -> Instant {
    let deadline = Instant::now() + PATIENCE;
    loop {
        let list = server.admin("/admin/zones").await;
        if zone_entry(&list, zone).is_some_and(|z| z["running"] == true) {
            return Instant::now();
        }
        assert!(
            Instant::now() < deadline,
            "{zone} never ran on the surviving host: {list}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Waits until `client` is kicked; returns when the test saw it and the client's log.
async fn kicked(client: &mut LedgerClient) -> (Instant, support::ClientLog) {
    let seen = tokio::time::timeout(PATIENCE, client.log.wait_for(|l| l.kicked.is_some()))
        .await
        .map(|r| r.map(|l| l.clone()));
    match seen {
        Ok(Ok(l)) => (Instant::now(), l),
        _ => panic!("the client was never kicked: {:?}", client.snapshot()),
    }
}

/// The lines of `log` about the lease, heartbeats and zones stopping (printed for the record).
fn fleet_lines(log: &str) -> String {
    log.lines()
        .filter(|l| {
            ["lease", "heartbeat", "fenced", "fleet", "final save"]
                .iter()
                .any(|w| l.contains(w))
        })
        .collect::<Vec<_>>()
        .join("\n")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_host_whose_database_hangs_fences_itself_within_the_bound() {
    let Some(url) = support::service_url(
        "ZONEKEEP_TEST_POSTGRES",
        "a_host_whose_database_hangs_fences_itself_within_the_bound",
    ) else {
        return;
    };
    let run = support::unique_run();
    let store = StoreSpec::postgres_isolated(&url, &run).await;
    let StoreSpec::Postgres(direct) = &store else {
        unreachable!("an isolated PostgreSQL store")
    };
    let url = PgUrl::parse(direct);
    let proxy = FreezableProxy::start(url.upstream()).await;
    // Host A reaches the database only through the proxy; B and the test reach it directly.
    let via_proxy = url.at(proxy.addr);
    let store_a = StoreSpec::Postgres(via_proxy);

    let dir = tempfile::tempdir().unwrap();
    let flags = ["--admin-token", ADMIN_TOKEN, "--save-every", "200ms"];
    let a = Server::start(&store_a, &flags, &dir.path().join("a.log")).await;
    let b = Server::start(&store, &flags, &dir.path().join("b.log")).await;
    let a_id = a.host_id().await;
    let zone = "hang-1";
    let (status, created) = a
        .admin_request(
            "POST",
            "/admin/zones",
            Some(&json!({"id": zone, "kind": "ledger-test", "host": a_id})),
        )
        .await;
    assert_eq!(status, 201, "{created}");
    let list = a.admin("/admin/zones").await;
    let entry = zone_entry(&list, zone).unwrap_or_else(|| panic!("{list}"));
    assert_eq!(entry["host"].as_str(), Some(a_id.as_str()), "{entry}");
    assert_eq!(entry["running"], true, "{entry}");

    let principals: Vec<String> = (0..2).map(|i| format!("h{i}-{run}")).collect();
    let mut clients = Vec::new();
    for p in &principals {
        clients.push(LedgerClient::start(&a.addr, zone, p, 1, u64::MAX / 2, INPUT_EVERY).await);
    }
    for c in &mut clients {
        let l = c.until("facts settled", |l| l.settled.len() >= 5).await;
        assert_eq!(l.redirects, 0, "the zone plays on A");
    }

    proxy.set_frozen(true);
    let frozen_at = Instant::now();
    // Watch A's clients and B's directory at once, so each instant is when the test saw it.
    let (kicks, served_at) = tokio::join!(
        futures_util::future::join_all(clients.iter_mut().map(kicked)),
        running_on(&b, zone),
    );
    let last_kick = kicks.iter().map(|(at, _)| *at).max().unwrap();
    println!(
        "freeze -> A's clients kicked: {:?} (last); freeze -> B serving: {:?}",
        last_kick - frozen_at,
        served_at - frozen_at
    );
    for (_, l) in &kicks {
        let (code, reason) = l.kicked.clone().unwrap();
        assert_eq!(code, KickCode::HOST_FENCED.0, "kicked with {reason:?}");
    }
    assert!(
        last_kick < served_at,
        "A stops its zone before B takes it over: kicks {:?}, B serving {:?} after the freeze",
        last_kick - frozen_at,
        served_at - frozen_at
    );
    let log_a = std::fs::read_to_string(&a.log).unwrap();
    assert!(log_a.contains("lease lapsed"), "{log_a}");
    // Read while the database still hangs: one lapse, not one per failed heartbeat.
    assert_eq!(
        a.metric("zonekeep_fleet_lease_lapses_total").await,
        1.0,
        "{log_a}"
    );
    let list = b.admin("/admin/zones").await;
    let entry = zone_entry(&list, zone).unwrap();
    assert_eq!(
        entry["host"].as_str(),
        Some(b.host_id().await.as_str()),
        "{entry}"
    );

    // Every fact a client was told settled must be in the ledger; every number sent may be.
    let mut sent: BTreeMap<String, BTreeSet<u64>> = BTreeMap::new();
    let mut settled: BTreeSet<String> = BTreeSet::new();
    for (c, p) in clients.into_iter().zip(&principals) {
        let l = c.stop();
        sent.entry(p.clone()).or_default().extend(&l.sent);
        settled.extend(l.settled.into_keys());
    }

    // The clients come back through B and play on.
    let mut back = Vec::new();
    for p in &principals {
        back.push(
            LedgerClient::start(&b.addr, zone, p, 1_000_000, u64::MAX / 2, INPUT_EVERY).await,
        );
    }
    for c in &mut back {
        let l = c
            .until("inputs acknowledged and facts settled on B", |l| {
                l.acked >= 10 && l.settled.len() >= 3
            })
            .await;
        assert!(
            l.landed.as_deref().is_some_and(|u| u.contains(&b.addr)),
            "{l:?}"
        );
    }
    for (c, p) in back.into_iter().zip(&principals) {
        let l = c.stop();
        sent.entry(p.clone()).or_default().extend(&l.sent);
        settled.extend(l.settled.into_keys());
    }

    // The database answers A again; A stops (its last writes may have failed: any exit status),
    // then B stops cleanly with its final saves.
    proxy.set_frozen(false);
    a.sigterm();
    let pid_a = a.pid();
    let mut a_exit = tokio::spawn(a.wait());
    let (status_a, log_a) = match tokio::time::timeout(PATIENCE, &mut a_exit).await {
        Ok(r) => r.unwrap(),
        Err(_) => {
            let _ = std::process::Command::new("kill")
                .args(["-KILL", &pid_a.to_string()])
                .status();
            let (_, log) = a_exit.await.unwrap();
            panic!("A did not exit after SIGTERM:\n{log}");
        }
    };
    println!(
        "A exited with {status_a}; its fleet log:\n{}",
        fleet_lines(&log_a)
    );
    // Writes queued behind the hung database when the lease lapsed were abandoned, not sent once
    // it answered again: the store never had to refuse an old-epoch write from A.
    assert!(
        !log_a.contains("fact refused as fenced") && !log_a.contains("zone save fenced"),
        "A sent writes under its old epoch after its lease ended:\n{}",
        fleet_lines(&log_a)
    );
    b.terminate().await;
    drop(proxy);

    let rows = support::check_ledger(&store, zone, &settled, &sent).await;
    for p in &principals {
        assert!(rows.get(p).copied().unwrap_or(0) >= 8, "{p}: {rows:?}");
    }
}

/// Joins `zone` through `entry` once (following Redirects): the Kick the attempt ended with, or
/// `None` when it was welcomed and acknowledged an input.
async fn attempt_join(entry: &Server, zone: &str, principal: &str) -> Option<(u16, String)> {
    let mut c =
        LedgerClient::start(&entry.addr, zone, principal, 1, u64::MAX / 2, INPUT_EVERY).await;
    let l = c
        .until("a Welcome or a Kick", |l| {
            l.acked >= 1 || l.kicked.is_some() || l.closed
        })
        .await;
    c.stop();
    if l.acked >= 1 {
        return None;
    }
    Some(
        l.kicked
            .clone()
            .unwrap_or_else(|| panic!("closed without a Kick: {l:?}")),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clients_sent_to_a_host_whose_database_hangs_are_told_to_retry() {
    let Some(url) = support::service_url(
        "ZONEKEEP_TEST_POSTGRES",
        "clients_sent_to_a_host_whose_database_hangs_are_told_to_retry",
    ) else {
        return;
    };
    let run = support::unique_run();
    let store = StoreSpec::postgres_isolated(&url, &run).await;
    let StoreSpec::Postgres(direct) = &store else {
        unreachable!("an isolated PostgreSQL store")
    };
    let url = PgUrl::parse(direct);
    let proxy = FreezableProxy::start(url.upstream()).await;
    let store_a = StoreSpec::Postgres(url.at(proxy.addr));
    let dir = tempfile::tempdir().unwrap();
    let flags = ["--admin-token", ADMIN_TOKEN, "--save-every", "200ms"];
    let a = Server::start(&store_a, &flags, &dir.path().join("a.log")).await;
    let b = Server::start(&store, &flags, &dir.path().join("b.log")).await;
    let a_id = a.host_id().await;
    let zone = "hang-retry";
    let (status, created) = a
        .admin_request(
            "POST",
            "/admin/zones",
            Some(&json!({"id": zone, "kind": "ledger-test", "host": a_id})),
        )
        .await;
    assert_eq!(status, 201, "{created}");
    assert_eq!(
        attempt_join(&b, zone, &format!("before-{run}")).await,
        None,
        "a client entering through B plays at A"
    );

    proxy.set_frozen(true);
    // A still owns the zone in the directory, so B sends the client there; A cannot reach the
    // store to admit it. That is no refusal of the join: the client is told to retry.
    let first = attempt_join(&b, zone, &format!("cut-{run}")).await;
    let (code, reason) = first.expect("no Welcome while the owner's store is unreachable");
    assert_eq!(
        code,
        KickCode::INTERNAL_ERROR.0,
        "a client sent to a host whose store does not answer is told to retry: {reason:?}"
    );
    // Retrying as the SDKs do (with backoff, here a fixed pause), the client lands — at B once
    // A has fenced itself and B has taken the zone over — and is never refused on the way.
    let deadline = Instant::now() + PATIENCE;
    let mut attempts = 1;
    loop {
        attempts += 1;
        match attempt_join(&b, zone, &format!("retry-{attempts}-{run}")).await {
            None => break,
            Some((code, reason)) => {
                assert!(
                    [
                        KickCode::INTERNAL_ERROR,
                        KickCode::HOST_FENCED,
                        KickCode::ZONE_MOVED,
                        KickCode::TOO_MANY_REDIRECTS
                    ]
                    .iter()
                    .any(|k| k.0 == code),
                    "attempt {attempts} ended with kick {code} ({reason:?}), which the SDKs do not retry"
                );
            }
        }
        assert!(
            Instant::now() < deadline,
            "no attempt landed in {PATIENCE:?}"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    println!("landed after {attempts} attempts");
    proxy.set_frozen(false);
    drop(a);
    b.terminate().await;
}
