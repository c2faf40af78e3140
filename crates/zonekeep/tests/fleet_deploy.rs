//! A rolling deploy of a fleet of real `zonekeep serve` processes on PostgreSQL: each of three
//! hosts gets SIGTERM in turn (and comes back) while players play, through the Rust SDK, behind
//! one entry host. Every player stays in its zone — its socket moves, the player does not: no
//! fresh join, the same player id, and no acknowledged input lost.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

mod support;

use std::time::Duration;

use serde_json::json;
use support::sdk::{player, until};
use support::{Server, StoreSpec, ADMIN_TOKEN};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rolling_deploy_keeps_every_player_in_its_zone() {
    let Some(url) = support::service_url(
        "ZONEKEEP_TEST_POSTGRES",
        "a_rolling_deploy_keeps_every_player_in_its_zone",
    ) else {
        return;
    };
    let run = support::unique_run();
    let store = StoreSpec::postgres_isolated(&url, &run).await;
    let dir = tempfile::tempdir().unwrap();
    let args = |i: usize| {
        let log = dir.path().join(format!("h{i}.log"));
        (log, ["--admin-token", ADMIN_TOKEN, "--save-every", "200ms"])
    };
    let mut hosts = Vec::new();
    for i in 1..=3 {
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

    // One zone on each serving host, one player in each.
    let mut players = Vec::new();
    for (i, h) in hosts.iter().enumerate() {
        let zone = format!("roll-{i}");
        let host = h.admin("/admin/hosts").await["self"]
            .as_str()
            .unwrap()
            .to_owned();
        let created = entry
            .post_admin(
                "/admin/zones",
                &json!({"id": zone, "kind": "ledger-test", "host": host}),
            )
            .await;
        assert_eq!(created["host"], host, "{created}");
        players.push(player(entry.addr.clone(), zone, format!("r{i}-{run}")).await);
    }
    for p in &mut players {
        until(p, "inputs acknowledged", |s| s.acked >= 10).await;
    }

    // Deploy: each serving host in turn gets SIGTERM and comes back under the same id.
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
    }

    for (i, p) in players.iter().enumerate() {
        let s = p.borrow().clone();
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
    // No acknowledged input was lost: each zone counted at least every input its player saw
    // acknowledged (inputs are consumed in order, one count each).
    for (i, p) in players.iter().enumerate() {
        let acked = u64::from(p.borrow().acked);
        let zone = format!("roll-{i}");
        let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
        loop {
            let (_, state) = store.last_save(&zone).await.unwrap();
            if state["inputs"].as_u64().unwrap() >= acked {
                break;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "zone {zone}: saved {state}, player saw {acked} acknowledged"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    for h in hosts {
        h.terminate().await;
    }
    entry.terminate().await;
}
