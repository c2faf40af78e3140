//! A rolling deploy of a fleet of real `zonekeep serve` processes on PostgreSQL: each of three
//! hosts gets SIGTERM in turn (and comes back) while players play, through the Rust SDK, behind
//! one entry host. Every player stays in its zone — its socket moves, the player does not: no
//! fresh join, the same player id — and the books are exact: every input a player saw
//! acknowledged is in the ledger, once.
//!
//! `a_rolling_deploy_keeps_every_player_in_its_zone` rolls over the fleet once (three drains);
//! `rolling_deploy_soak` (ignored; run with `--ignored --nocapture`) rolls over it
//! `ZONEKEEP_ROLL_ROUNDS` times (default 5) and prints what the players saw.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use serde_json::json;
use support::sdk::{player_every, until, Seen};
use support::{Server, StoreSpec, ADMIN_TOKEN};

/// Zones of the deploy: one placed on each serving host.
const ZONES: usize = 3;
/// Players in each zone.
const PLAYERS_PER_ZONE: usize = 3;
/// How often each player sends an input: 25 per second, under the zone's 30 ticks per second
/// (`ledger-test` takes one input per player per tick), so the books are exact only if the
/// deploy loses none — a faster player would overflow its input buffer, which drops by design.
const INPUT_EVERY: Duration = Duration::from_millis(40);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rolling_deploy_keeps_every_player_in_its_zone() {
    let Some(url) = support::service_url(
        "ZONEKEEP_TEST_POSTGRES",
        "a_rolling_deploy_keeps_every_player_in_its_zone",
    ) else {
        return;
    };
    rolling_deploy(&url, 1).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a soak of many rolls; run it on purpose"]
async fn rolling_deploy_soak() {
    let Some(url) = support::service_url("ZONEKEEP_TEST_POSTGRES", "rolling_deploy_soak") else {
        return;
    };
    let rounds = std::env::var("ZONEKEEP_ROLL_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(5);
    rolling_deploy(&url, rounds).await;
}

/// Three hosts and an entry on `url`; `rounds` times over, each serving host gets SIGTERM in turn
/// and comes back under the same id while the players play. Asserts that every player stayed in
/// its zone and that no acknowledged input was lost.
async fn rolling_deploy(url: &str, rounds: usize) {
    let run = support::unique_run();
    let store = StoreSpec::postgres_isolated(url, &run).await;
    let dir = tempfile::tempdir().unwrap();
    let args = |i: usize| {
        let log = dir.path().join(format!("h{i}.log"));
        (log, ["--admin-token", ADMIN_TOKEN, "--save-every", "200ms"])
    };
    let mut hosts = Vec::new();
    for i in 1..=ZONES {
        let (log, a) = args(i);
        hosts.push(Server::start(&store, &a, &log).await);
    }
    // The entry every player connects (and reconnects) through, as a load balancer would be
    // (it is a fleet member too, and may be handed a zone during the deploy).
    let entry_log = dir.path().join("entry.log");
    let entry = Server::start(
        &store,
        &["--admin-token", ADMIN_TOKEN, "--capacity", "1"],
        &entry_log,
    )
    .await;

    // One zone on each serving host, a few players in each.
    let mut players = Vec::new();
    let mut who = Vec::new();
    for (i, h) in hosts.iter().enumerate() {
        let zone = format!("roll-{i}");
        let host = h.host_id().await;
        let created = entry
            .post_admin(
                "/admin/zones",
                &json!({"id": zone, "kind": "ledger-test", "host": host}),
            )
            .await;
        assert_eq!(created["host"], host, "{created}");
        for j in 0..PLAYERS_PER_ZONE {
            let principal = format!("r{i}-{j}-{run}");
            players.push(
                player_every(
                    entry.addr.clone(),
                    zone.clone(),
                    principal.clone(),
                    INPUT_EVERY,
                )
                .await,
            );
            who.push((zone.clone(), principal));
        }
    }
    for p in &mut players {
        until(p, "inputs acknowledged", |s| s.acked >= 10).await;
    }

    // Deploy: each serving host in turn gets SIGTERM and comes back under the same id.
    for round in 0..rounds {
        for i in 0..hosts.len() {
            let before: Vec<u32> = players.iter().map(|p| p.borrow().acked).collect();
            let old = hosts.remove(i);
            old.terminate().await;
            let (log, a) = args(i + 1);
            hosts.insert(i, Server::start(&store, &a, &log).await);
            // Every player keeps playing: its acknowledgements carry on past what it saw before.
            for (p, b) in players.iter_mut().zip(&before) {
                let b = *b;
                until(p, "play to go on after the deploy step", |s| {
                    s.acked > b + 10
                })
                .await;
            }
            println!("round {round}: host {} rolled", i + 1);
        }
    }

    let seen: Vec<Seen> = players.iter().map(|p| p.borrow().clone()).collect();
    for (i, s) in seen.iter().enumerate() {
        println!(
            "player {i}: ids {:?}, {} resumes, longest gap {} ms, acked {}",
            s.players, s.resumed, s.longest_gap_ms, s.acked
        );
        assert_eq!(s.fresh_joins, 1, "player {i} never joined afresh: {s:?}");
        assert!(
            s.players.iter().all(|id| *id == s.players[0]),
            "player {i} kept its id: {s:?}"
        );
        assert!(
            s.resumed >= 1,
            "player {i}'s zone moved at least once: {s:?}"
        );
        assert_eq!(
            s.disconnects, 0,
            "a move is no disconnect to the game: each landed on its first attempt: {s:?}"
        );
        assert!(!s.closed);
    }
    // Exact books: each input carries its number, and each fact in the ledger names the number
    // of the input that made it. Every input up to a player's last acknowledgement must reach the
    // ledger (an acknowledgement vouches for every input before it), none twice, none never sent.
    // Facts settle a little after their input is acknowledged: the ledger is read until it holds
    // them all, within a bound.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    let lost = loop {
        let lost = lost_inputs(&store, &who, &seen).await;
        if lost.is_empty() || tokio::time::Instant::now() >= deadline {
            break lost;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    println!(
        "{rounds} rounds, {} resumes: {} acknowledged inputs lost",
        seen.iter().map(|s| s.resumed).sum::<u32>(),
        lost.iter().map(|(_, n)| n.len()).sum::<usize>()
    );
    assert!(
        lost.is_empty(),
        "every acknowledged input is in the ledger; missing (principal, inputs): {lost:?}"
    );
    for h in hosts {
        h.terminate().await;
    }
    entry.terminate().await;
    for zone in (0..ZONES).map(|i| format!("roll-{i}")) {
        let mut sent: BTreeMap<String, BTreeSet<u64>> = BTreeMap::new();
        for ((z, p), s) in who.iter().zip(&players) {
            if *z == zone {
                sent.insert(p.clone(), (1..=s.borrow().sent).collect());
            }
        }
        support::check_ledger(&store, &zone, &BTreeSet::new(), &sent).await;
    }
}

/// The inputs the players saw acknowledged that are not in the ledger: (principal, numbers).
async fn lost_inputs(
    store: &StoreSpec,
    who: &[(String, String)],
    seen: &[Seen],
) -> Vec<(String, Vec<u64>)> {
    let mut out = Vec::new();
    let mut rows: BTreeMap<&str, Vec<(String, String, serde_json::Value)>> = BTreeMap::new();
    for ((zone, principal), s) in who.iter().zip(seen) {
        if !rows.contains_key(zone.as_str()) {
            rows.insert(zone, store.facts(zone).await);
        }
        let counted: BTreeSet<u64> = rows[zone.as_str()]
            .iter()
            .filter(|(_, p, _)| p == principal)
            .filter_map(|(_, _, payload)| payload["seq"].as_u64())
            .collect();
        let lost: Vec<u64> = s
            .numbers
            .range(..=s.acked)
            .map(|(_, n)| *n)
            .filter(|n| !counted.contains(n))
            .collect();
        if !lost.is_empty() {
            out.push((principal.clone(), lost));
        }
    }
    out
}
