//! A fleet of real `zonekeep serve` processes on one PostgreSQL store: any host accepts a client
//! and sends it to the zone's owner (a Redirect, or a forwarded WebSocket with `--route proxy`),
//! a redirect loop is cut, a killed owner's zone is taken over by a live host from its last save
//! with every fact committed once, and a paused owner fences itself before anyone takes over and
//! writes nothing under its old epoch when it resumes.
//!
//! Each test runs in a PostgreSQL schema of its own (the database is shared).
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::time::Duration;

use futures_util::StreamExt;
use serde_json::Value;
use tokio_tungstenite::tungstenite::Message;
use zonekeep_protocol::messages::{KickCode, ServerMessage};

use serde_json::json;
use support::{sdk, zone_entry, LedgerClient, Server, StoreSpec, ADMIN_TOKEN};

/// Inputs per client per second (under the host's default 60/s limit).
const INPUT_EVERY: Duration = Duration::from_millis(25);

/// `n` hosts named `h1`..`hn` on `store`, each with the admin API and `extra` flags.
async fn fleet(store: &StoreSpec, dir: &Path, n: usize, extra: &[&str]) -> Vec<Server> {
    let mut hosts = Vec::new();
    for i in 1..=n {
        let mut args = vec!["--admin-token", ADMIN_TOKEN, "--save-every", "200ms"];
        args.extend_from_slice(extra);
        hosts.push(Server::start(store, &args, &dir.join(format!("h{i}.log"))).await);
    }
    hosts
}

/// Polls `f` against the admin API of `server` until it holds (bounded), returning the value.
async fn admin_until(server: &Server, path: &str, what: &str, f: impl Fn(&Value) -> bool) -> Value {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(40);
    loop {
        let v = server.admin(path).await;
        if f(&v) {
            return v;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for {what}: {v}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clients_of_every_host_land_in_the_one_zone_by_redirect() {
    let Some(url) = support::service_url(
        "ZONEKEEP_TEST_POSTGRES",
        "clients_of_every_host_land_in_the_one_zone_by_redirect",
    ) else {
        return;
    };
    let run = support::unique_run();
    let store = StoreSpec::postgres_isolated(&url, &run).await;
    let dir = tempfile::tempdir().unwrap();
    let hosts = fleet(&store, dir.path(), 3, &[]).await;
    let zone = "route-1";
    let hosts_view = hosts[1].admin("/admin/hosts").await;
    assert_eq!(
        hosts_view["hosts"].as_array().unwrap().len(),
        3,
        "{hosts_view}"
    );
    assert!(
        hosts_view["hosts"]
            .as_array()
            .unwrap()
            .iter()
            .all(|h| h["alive"] == true),
        "{hosts_view}"
    );

    let mut clients = Vec::new();
    for (i, h) in hosts.iter().enumerate() {
        let who = format!("p{i}-{run}");
        clients.push(LedgerClient::start(&h.addr, zone, &who, 1, u64::MAX / 2, INPUT_EVERY).await);
    }
    let mut landed = BTreeSet::new();
    let mut redirected = 0;
    for c in &mut clients {
        let l = c.until("inputs acknowledged", |l| l.acked >= 3).await;
        // The host the client plays at (a redirected URL also carries its hop count).
        let at = l.landed.clone().unwrap();
        landed.insert(at.split('?').next().unwrap().to_owned());
        redirected += l.redirects;
    }
    assert_eq!(
        landed.len(),
        1,
        "every client plays at the same host: {landed:?}"
    );
    assert_eq!(
        redirected, 2,
        "the two clients of other hosts were redirected once each"
    );

    // Every host names the same owner and epoch for the zone.
    let mut owners = BTreeSet::new();
    for h in &hosts {
        let list = h.admin("/admin/zones").await;
        let z = zone_entry(&list, zone).unwrap_or_else(|| panic!("{list}"));
        owners.insert((z["host"].clone().to_string(), z["epoch"].to_string()));
    }
    assert_eq!(
        owners.len(),
        1,
        "one owner and epoch on every host: {owners:?}"
    );
    let mut redirects = 0.0;
    for h in &hosts {
        redirects += h.metric("zonekeep_fleet_redirects_total").await;
    }
    assert_eq!(redirects, 2.0);

    // A Hello that already took three hops is refused rather than sent on.
    let owner_addr = landed.iter().next().unwrap().clone();
    let other = hosts
        .iter()
        .find(|h| !owner_addr.contains(&h.addr))
        .unwrap();
    let code = hello_kick(
        &format!("ws://{}/zones/{zone}?hops=3", other.addr),
        support::ticket(&format!("loop-{run}"), zone),
    )
    .await;
    assert_eq!(code, KickCode::TOO_MANY_REDIRECTS);
    assert_eq!(
        other.metric("zonekeep_fleet_redirect_loops_total").await,
        1.0
    );

    // A ticket is single-use across the fleet: one for every zone `twice-*` admits its bearer to
    // one of them, not once per host.
    let pattern = support::sign(&json!({
        "sub": format!("twice-{run}"), "zone": "twice-*", "kind": "ledger-test",
        "exp": std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs() + 60,
        "jti": format!("twice-{run}"),
    }));
    for (i, h) in hosts.iter().enumerate() {
        let id = h.host_id().await;
        h.post_admin(
            "/admin/zones",
            &json!({"id": format!("twice-{i}"), "kind": "ledger-test", "host": id}),
        )
        .await;
    }
    let mut first = support::hello_at(
        &format!("ws://{}/zones/twice-0", hosts[0].addr),
        pattern.clone(),
    )
    .await;
    let welcomed = loop {
        match first.next().await {
            Some(Ok(Message::Binary(b))) => match ServerMessage::decode(&b, None) {
                Ok(ServerMessage::Welcome(_)) => break true,
                Ok(ServerMessage::Kick(_)) => break false,
                _ => {}
            },
            Some(Ok(_)) => {}
            _ => break false,
        }
    };
    assert!(welcomed, "the first use of the ticket is admitted");
    let code = hello_kick(&format!("ws://{}/zones/twice-1", hosts[1].addr), pattern).await;
    assert_eq!(
        code,
        KickCode::TICKET_REPLAYED,
        "the same ticket at another host"
    );
    drop(first);

    for c in clients {
        c.stop();
    }
    for h in hosts {
        h.terminate().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_route_proxy_a_host_forwards_the_connection_to_the_owner() {
    let Some(url) = support::service_url(
        "ZONEKEEP_TEST_POSTGRES",
        "with_route_proxy_a_host_forwards_the_connection_to_the_owner",
    ) else {
        return;
    };
    let run = support::unique_run();
    let store = StoreSpec::postgres_isolated(&url, &run).await;
    let dir = tempfile::tempdir().unwrap();
    let hosts = fleet(&store, dir.path(), 2, &["--route", "proxy"]).await;
    let zone = "proxied-1";
    let mut first = LedgerClient::start(
        &hosts[0].addr,
        zone,
        &format!("a-{run}"),
        1,
        u64::MAX / 2,
        INPUT_EVERY,
    )
    .await;
    first.until("inputs acknowledged", |l| l.acked >= 3).await;
    let mut second = LedgerClient::start(
        &hosts[1].addr,
        zone,
        &format!("b-{run}"),
        1,
        u64::MAX / 2,
        INPUT_EVERY,
    )
    .await;
    let l = second
        .until("inputs acknowledged through the proxy", |l| l.acked >= 3)
        .await;
    assert_eq!(l.redirects, 0, "no redirect: the connection is forwarded");
    let list = hosts[1].admin("/admin/zones").await;
    let z = zone_entry(&list, zone).unwrap();
    assert_eq!(
        z["running"], false,
        "the zone does not run on the proxying host: {z}"
    );
    assert_eq!(z["host"].as_str(), Some(hosts[0].host_id().await.as_str()));
    assert_eq!(
        hosts[1]
            .metric("zonekeep_fleet_proxied_connections_total")
            .await,
        1.0
    );
    first.stop();
    second.stop();
    for h in hosts {
        h.terminate().await;
    }
}

/// Connects to `url`, sends a Hello with `ticket` and returns the Kick it gets.
async fn hello_kick(url: &str, ticket: String) -> KickCode {
    let mut ws = support::hello_at(url, ticket).await;
    while let Some(Ok(m)) = ws.next().await {
        if let Message::Binary(b) = m {
            if let Ok(ServerMessage::Kick(k)) = ServerMessage::decode(&b, None) {
                return k.code;
            }
        }
    }
    panic!("closed without a Kick");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_owners_zone_is_taken_over_from_its_last_save_with_every_fact_once() {
    let Some(url) = support::service_url(
        "ZONEKEEP_TEST_POSTGRES",
        "a_killed_owners_zone_is_taken_over_from_its_last_save_with_every_fact_once",
    ) else {
        return;
    };
    let run = support::unique_run();
    let store = StoreSpec::postgres_isolated(&url, &run).await;
    let dir = tempfile::tempdir().unwrap();
    let mut hosts = fleet(&store, dir.path(), 3, &[]).await;
    let zone = "failover-1";
    // The zone lives on the first host; players enter through the second, which survives.
    let owner_id = hosts[0].host_id().await;
    let created = hosts[1]
        .post_admin(
            "/admin/zones",
            &json!({"id": zone, "kind": "ledger-test", "host": owner_id}),
        )
        .await;
    assert_eq!(created["host"], owner_id.as_str(), "{created}");
    let principals: Vec<String> = (0..3).map(|i| format!("f{i}-{run}")).collect();
    let mut players = Vec::new();
    for p in &principals {
        players.push(sdk::player(hosts[1].addr.clone(), zone.to_owned(), p.clone()).await);
    }
    for p in &mut players {
        sdk::until(p, "inputs acknowledged", |s| s.acked >= 20).await;
    }
    let before: Vec<u32> = players.iter().map(|p| p.borrow().acked).collect();

    let owner = hosts.remove(0);
    owner.kill().await;
    let killed_at = tokio::time::Instant::now();
    // A live host takes the zone over once the owner has been silent for the takeover bound, and
    // the players come back by themselves (through their entry host) and play on.
    for (p, b) in players.iter_mut().zip(&before) {
        let b = *b;
        sdk::until(p, "play to go on after the takeover", |s| s.acked > b + 10).await;
    }
    println!("playing again {:?} after the kill", killed_at.elapsed());
    let list = hosts[0].admin("/admin/zones").await;
    let z = zone_entry(&list, zone).unwrap();
    assert_ne!(z["host"].as_str(), Some(owner_id.as_str()), "{z}");
    let mut takeovers = 0.0;
    for h in &hosts {
        takeovers += h.metric("zonekeep_fleet_takeovers_total").await;
    }
    assert_eq!(takeovers, 1.0, "exactly one host took the zone over");
    for (i, p) in players.iter().enumerate() {
        let s = p.borrow().clone();
        println!(
            "player {i}: {} resumes, {} fresh joins, longest gap {} ms",
            s.resumed, s.fresh_joins, s.longest_gap_ms
        );
        assert!(!s.closed, "player {i} reconnected by itself: {s:?}");
    }
    let mut sent: BTreeMap<String, BTreeSet<u64>> = BTreeMap::new();
    for (p, w) in principals.iter().zip(&players) {
        sent.insert(p.clone(), (1..=w.borrow().sent).collect());
    }
    for h in hosts {
        h.terminate().await;
    }
    // Every fact committed once: no number of a principal twice, totals equal to the rows.
    let rows = support::check_ledger(&store, zone, &BTreeSet::new(), &sent).await;
    for p in &principals {
        assert!(rows.get(p).copied().unwrap_or(0) >= 20, "{p}: {rows:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paused_owner_fences_itself_and_writes_nothing_after_it_resumes() {
    let Some(url) = support::service_url(
        "ZONEKEEP_TEST_POSTGRES",
        "a_paused_owner_fences_itself_and_writes_nothing_after_it_resumes",
    ) else {
        return;
    };
    let run = support::unique_run();
    let store = StoreSpec::postgres_isolated(&url, &run).await;
    let dir = tempfile::tempdir().unwrap();
    let hosts = fleet(&store, dir.path(), 2, &[]).await;
    let zone = "paused-1";
    let p = format!("s-{run}");
    let mut c = LedgerClient::start(&hosts[0].addr, zone, &p, 1, u64::MAX / 2, INPUT_EVERY).await;
    let l = c.until("facts settled", |l| l.settled.len() >= 5).await;
    let owner_addr = l.landed.unwrap();
    let (owner, other) = if owner_addr.contains(&hosts[0].addr) {
        (&hosts[0], &hosts[1])
    } else {
        (&hosts[1], &hosts[0])
    };
    let owner_id = owner.host_id().await;

    owner.signal("-STOP");
    // The other host takes over after the takeover bound.
    admin_until(other, "/admin/zones", "the takeover", |v| {
        zone_entry(v, zone).is_some_and(|z| {
            z["host"].as_str().is_some_and(|h| h != owner_id) && z["running"] == true
        })
    })
    .await;
    owner.signal("-CONT");
    // After resuming, the paused host checks its lease before anything else: it stops the zone,
    // logs the lapse, and writes nothing under its old epoch.
    let lapses = {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
        loop {
            let n = owner.metric("zonekeep_fleet_lease_lapses_total").await;
            if n >= 1.0 {
                break n;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "no lease lapse counted"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    };
    assert_eq!(lapses, 1.0);
    let l = c
        .until("the client is told to resume elsewhere", |l| l.closed)
        .await;
    assert_eq!(l.kicked.map(|k| k.0), Some(KickCode::HOST_FENCED.0));
    let log = std::fs::read_to_string(&owner.log).unwrap();
    assert!(log.contains("lease lapsed"), "{log}");
    // The paused host stopped itself: it never even sent a save or a fact under its old epoch
    // for the store to refuse (the store would have: the takeover raised the epoch).
    assert!(!log.contains("zone save fenced"), "{log}");
    assert!(!log.contains("fact refused as fenced"), "{log}");
    c.stop();
    for h in hosts {
        h.terminate().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn when_every_host_drains_at_once_the_zones_start_on_the_first_host_back() {
    let Some(url) = support::service_url(
        "ZONEKEEP_TEST_POSTGRES",
        "when_every_host_drains_at_once_the_zones_start_on_the_first_host_back",
    ) else {
        return;
    };
    let run = support::unique_run();
    let store = StoreSpec::postgres_isolated(&url, &run).await;
    let dir = tempfile::tempdir().unwrap();
    let hosts = fleet(&store, dir.path(), 2, &[]).await;
    let zone = "alone-1";
    let p = format!("a-{run}");
    let mut c = LedgerClient::start(&hosts[0].addr, zone, &p, 1, u64::MAX / 2, INPUT_EVERY).await;
    let l = c.until("inputs acknowledged", |l| l.acked >= 10).await;
    println!("played at {:?}", l.landed);
    // Both hosts leave at once: nobody to hand the zone to. Each saves and exits 0.
    for h in &hosts {
        h.sigterm();
    }
    let closed = c.until("the Kick", |l| l.closed).await;
    let acked = u64::from(closed.acked);
    for h in hosts {
        let (status, log) = h.wait().await;
        assert!(status.success(), "exit status {status}\n{log}");
    }
    // The first host back starts the zone from its final save, without anyone joining.
    let back = Server::start(
        &store,
        &["--admin-token", ADMIN_TOKEN],
        &dir.path().join("h2.log"),
    )
    .await;
    admin_until(&back, "/admin/zones", "the zone to start", |v| {
        zone_entry(v, zone).is_some_and(|z| z["running"] == true)
    })
    .await;
    let (_, state) = store.last_save(zone).await.unwrap();
    assert!(
        state["inputs"].as_u64().unwrap() >= acked,
        "every acknowledged input is in the save: {state}, {acked} acknowledged"
    );
    back.terminate().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_host_restarting_under_its_id_waits_for_its_killed_process_to_go_silent() {
    let Some(url) = support::service_url(
        "ZONEKEEP_TEST_POSTGRES",
        "a_host_restarting_under_its_id_waits_for_its_killed_process_to_go_silent",
    ) else {
        return;
    };
    let run = support::unique_run();
    let store = StoreSpec::postgres_isolated(&url, &run).await;
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("h1.log");
    let first = Server::start(&store, &["--admin-token", ADMIN_TOKEN], &log).await;
    let id = first.host_id().await;
    first.kill().await;
    // The same id at once: the directory still counts the killed process alive, so the new one
    // waits until it has been silent for the takeover bound, then joins (and announces itself).
    let second = Server::start(&store, &["--admin-token", ADMIN_TOKEN], &log).await;
    assert_eq!(second.host_id().await, id);
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(
        text.contains("has not left; waiting until it has been silent"),
        "{text}"
    );
    let hosts = second.admin("/admin/hosts").await;
    assert_eq!(hosts["hosts"].as_array().unwrap().len(), 1, "{hosts}");
    assert_eq!(hosts["hosts"][0]["alive"], true);
    second.terminate().await;
}
