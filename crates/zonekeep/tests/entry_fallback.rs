//! A player whose entry host goes away is not stranded: the Welcome lists where else it may
//! enter (the zone's owner first, then the fleet's other live hosts, PROTOCOL.md §5.3.1), and the
//! SDK tries them when its entry URL is unreachable. Two real hosts on PostgreSQL; the zone lives
//! on the player's entry host, which is drained (SIGTERM) in one test and killed in the other.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

mod support;

use std::path::Path;
use std::time::Duration;

use futures_util::StreamExt;
use serde_json::json;
use support::{sdk, zone_entry, Server, StoreSpec, ADMIN_TOKEN};
use zonekeep_protocol::messages::ServerMessage;

/// `n` hosts on `store`, each with the admin API.
async fn fleet(store: &StoreSpec, dir: &Path, n: usize) -> Vec<Server> {
    let mut hosts = Vec::new();
    for i in 1..=n {
        let args = ["--admin-token", ADMIN_TOKEN, "--save-every", "200ms"];
        hosts.push(Server::start(store, &args, &dir.join(format!("h{i}.log"))).await);
    }
    hosts
}

/// The entry URLs a Welcome of `host` lists for `zone`, once they are at least `n` (bounded).
async fn listed_entries(host: &Server, zone: &str, n: usize) -> Vec<String> {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        let mut ws = support::hello(&host.addr, zone, support::ticket("probe", zone)).await;
        let m = ws.next().await.unwrap().unwrap();
        let Ok(ServerMessage::Welcome(w)) = ServerMessage::decode(&m.into_data(), None) else {
            panic!("no Welcome");
        };
        let _ = ws.close(None).await;
        if w.entries.len() >= n {
            return w.entries;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the Welcome never listed {n} entries: {:?}",
            w.entries
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// How the entry host goes away.
#[derive(Clone, Copy)]
enum Loss {
    Drain,
    Kill,
}

/// A player enters through the host that owns its zone; that host goes away, and the player
/// plays on at the zone's new owner by itself.
async fn entry_host_goes_away(test: &str, loss: Loss) {
    let Some(url) = support::service_url("ZONEKEEP_TEST_POSTGRES", test) else {
        return;
    };
    let run = support::unique_run();
    let store = StoreSpec::postgres_isolated(&url, &run).await;
    let dir = tempfile::tempdir().unwrap();
    let mut hosts = fleet(&store, dir.path(), 2).await;
    let zone = "entry-1";
    let entry_id = hosts[0].host_id().await;
    let created = hosts[0]
        .post_admin(
            "/admin/zones",
            &json!({"id": zone, "kind": "ledger-test", "host": entry_id}),
        )
        .await;
    assert_eq!(created["host"], entry_id.as_str(), "{created}");
    // Once the entry host has seen the whole fleet, its Welcomes list both hosts, itself first.
    let listed = listed_entries(&hosts[0], zone, 2).await;
    assert_eq!(listed[0], format!("ws://{}/zones/{zone}", hosts[0].addr));
    assert_eq!(listed[1], format!("ws://{}/zones/{zone}", hosts[1].addr));
    // The page came from the first host: its entry URL names it, and only it.
    let mut player = sdk::player(hosts[0].addr.clone(), zone.to_owned(), format!("e-{run}")).await;
    let before = sdk::until(&mut player, "inputs acknowledged", |s| s.acked >= 20)
        .await
        .acked;

    let entry = hosts.remove(0);
    match loss {
        Loss::Drain => entry.terminate().await,
        Loss::Kill => entry.kill().await,
    }
    // The entry URL is dead for good; the player must find the zone's new owner by itself.
    let after = sdk::until(&mut player, "play to go on at the zone's new owner", |s| {
        s.acked > before + 10 || s.closed
    })
    .await;
    assert!(!after.closed, "the player gave up: {after:?}");
    let list = hosts[0].admin("/admin/zones").await;
    let z = zone_entry(&list, zone).unwrap();
    assert_ne!(z["host"].as_str(), Some(entry_id.as_str()), "{z}");
    for h in hosts {
        h.terminate().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_player_whose_entry_host_drains_plays_on_at_the_zones_new_owner() {
    entry_host_goes_away(
        "a_player_whose_entry_host_drains_plays_on_at_the_zones_new_owner",
        Loss::Drain,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_player_whose_entry_host_is_killed_plays_on_at_the_zones_new_owner() {
    entry_host_goes_away(
        "a_player_whose_entry_host_is_killed_plays_on_at_the_zones_new_owner",
        Loss::Kill,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_is_told_of_a_host_that_joined_the_fleet_after_its_welcome() {
    let Some(url) = support::service_url(
        "ZONEKEEP_TEST_POSTGRES",
        "a_session_is_told_of_a_host_that_joined_the_fleet_after_its_welcome",
    ) else {
        return;
    };
    let run = support::unique_run();
    let store = StoreSpec::postgres_isolated(&url, &run).await;
    let dir = tempfile::tempdir().unwrap();
    let mut hosts = fleet(&store, dir.path(), 1).await;
    let zone = "entry-2";
    let mut ws = support::hello(&hosts[0].addr, zone, support::ticket("early", zone)).await;
    let m = ws.next().await.unwrap().unwrap();
    let Ok(ServerMessage::Welcome(w)) = ServerMessage::decode(&m.into_data(), None) else {
        panic!("no Welcome");
    };
    assert_eq!(w.entries, [format!("ws://{}/zones/{zone}", hosts[0].addr)]);
    // A second host joins: the session hears of it without waiting for another Welcome.
    let args = ["--admin-token", ADMIN_TOKEN, "--save-every", "200ms"];
    hosts.push(Server::start(&store, &args, &dir.path().join("h2.log")).await);
    let want = vec![
        format!("ws://{}/zones/{zone}", hosts[0].addr),
        format!("ws://{}/zones/{zone}", hosts[1].addr),
    ];
    let told = tokio::time::timeout(Duration::from_secs(20), async {
        loop {
            // Deltas need the schema to decode; only the Entries message matters here.
            let m = ws.next().await.unwrap().unwrap().into_data();
            if m.first() == Some(&zonekeep_protocol::messages::tag::ENTRIES) {
                if let Ok(ServerMessage::Entries(e)) = ServerMessage::decode(&m, None) {
                    if e.entries == want {
                        return e.entries;
                    }
                }
            }
        }
    })
    .await;
    assert!(told.is_ok(), "no Entries message naming both hosts");
    drop(ws);
    for h in hosts {
        h.terminate().await;
    }
}
