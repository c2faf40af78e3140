//! The lobby across a fleet of three `zonekeep serve` processes sharing PostgreSQL: an
//! application back end asks each host in turn for seats, all at once; every room is placed on
//! the fleet and filled before another is made; the players join with the tickets the hosts
//! minted, and no zone ends up with more players than its room seats; any host lists and shows
//! the rooms the others run.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::collections::BTreeMap;
use std::time::Duration;

use futures_util::StreamExt;
use serde_json::json;
use support::{hello_at, unique_run, Server, StoreSpec, ADMIN_TOKEN, LOBBY_TOKEN};
use tokio_tungstenite::tungstenite::Message;
use zonekeep_protocol::messages::ServerMessage;

/// Players asking at once, and the seats of each room.
const PLAYERS: usize = 22;
const SEATS: usize = 4;

/// Reads frames until the Welcome; fails on anything else that ends the session.
async fn welcomed(
    ws: &mut tokio_tungstenite::WebSocketStream<
        tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>,
    >,
) {
    while let Some(msg) = ws.next().await {
        let Message::Binary(bytes) = msg.unwrap() else {
            continue;
        };
        match ServerMessage::decode(&bytes, None) {
            Ok(ServerMessage::Welcome(_)) => return,
            Ok(ServerMessage::Kick(k)) => panic!("kicked: {k:?}"),
            Ok(ServerMessage::Redirect(r)) => panic!("redirected, not at the owner: {r:?}"),
            _ => continue,
        }
    }
    panic!("closed before a Welcome");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_join_or_create_across_three_hosts_never_overfills_a_zone() {
    let Some(pg) = support::service_url(
        "ZONEKEEP_TEST_POSTGRES",
        "concurrent_join_or_create_across_three_hosts_never_overfills_a_zone",
    ) else {
        return;
    };
    let store = StoreSpec::postgres_isolated(&pg, &unique_run()).await;
    let dir = tempfile::tempdir().unwrap();
    let args = ["--admin-token", ADMIN_TOKEN, "--lobby-token", LOBBY_TOKEN];
    let mut hosts = Vec::new();
    for name in ["a", "b", "c"] {
        hosts.push(Server::start(&store, &args, &dir.path().join(format!("{name}.log"))).await);
    }
    let hosts = std::sync::Arc::new(hosts);

    // Everyone asks at once, each through one of the hosts.
    let mut asks = Vec::new();
    for i in 0..PLAYERS {
        let hosts = hosts.clone();
        asks.push(tokio::spawn(async move {
            let body = json!({
                "kind": "arena", "principal": format!("player-{i}"), "name": format!("P{i}"),
                "metadata": {"mode": "ffa"}, "max_players": SEATS,
            });
            let (status, seat) = hosts[i % 3]
                .lobby_request("POST", "/lobby/join_or_create", Some(&body))
                .await;
            assert!(status == 200 || status == 201, "{status} {seat}");
            seat
        }));
    }
    let mut seats = Vec::new();
    for a in asks {
        seats.push(a.await.unwrap());
    }
    let mut per_room: BTreeMap<String, usize> = BTreeMap::new();
    for s in &seats {
        *per_room
            .entry(s["zone"].as_str().unwrap().to_owned())
            .or_default() += 1;
    }
    assert!(per_room.values().all(|&n| n <= SEATS), "{per_room:?}");
    assert_eq!(
        per_room.len(),
        PLAYERS.div_ceil(SEATS),
        "rooms are filled first: {per_room:?}"
    );
    let created = seats.iter().filter(|s| s["created"] == true).count();
    assert_eq!(created, per_room.len());

    // Every player joins where its seat says, at the zone's owner, with the minted ticket.
    let mut sockets = Vec::new();
    for s in &seats {
        let mut ws = hello_at(
            s["url"].as_str().unwrap(),
            s["ticket"].as_str().unwrap().to_owned(),
        )
        .await;
        welcomed(&mut ws).await;
        sockets.push(ws);
    }
    // Each zone holds exactly its room's players, on the host the seat named.
    for (zone, n) in &per_room {
        let owner = seats
            .iter()
            .find(|s| s["zone"] == json!(zone))
            .map(|s| s["url"].as_str().unwrap().to_owned())
            .unwrap();
        let host = hosts
            .iter()
            .find(|h| owner.starts_with(&format!("ws://{}/", h.addr)))
            .expect("the seat names a host of the fleet");
        let detail = host.admin(&format!("/admin/zones/{zone}")).await;
        assert_eq!(detail["players"], json!(n), "{zone}: {detail}");
    }
    // The rooms spread over the fleet by free capacity.
    let owners: std::collections::BTreeSet<String> = seats
        .iter()
        .map(|s| s["host"].as_str().unwrap().to_owned())
        .collect();
    assert!(owners.len() >= 2, "every room on one host: {owners:?}");

    // Any host shows any room as its owner reported it: the players present, no seat pending.
    let (zone, n) = per_room.iter().next().unwrap();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let (_, room) = hosts[2]
            .lobby_request("GET", &format!("/lobby/rooms/{zone}"), None)
            .await;
        if room["players"] == json!(n) && room["reserved_players"] == 0 {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "never reported: {room}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // Listings from every host agree: the rooms with a free seat (the last, part-filled one).
    let free: Vec<&String> = per_room
        .iter()
        .filter(|(_, &n)| n < SEATS)
        .map(|(z, _)| z)
        .collect();
    for h in hosts.iter() {
        let (status, list) = h
            .lobby_request("GET", "/lobby/rooms?kind=arena&meta.mode=ffa", None)
            .await;
        assert_eq!(status, 200);
        let listed: Vec<&str> = list["rooms"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["zone_id"].as_str().unwrap())
            .collect();
        assert_eq!(listed, free, "{list}");
    }
    drop(sockets);
    for h in std::sync::Arc::try_unwrap(hosts).ok().unwrap() {
        h.terminate().await;
    }
}
