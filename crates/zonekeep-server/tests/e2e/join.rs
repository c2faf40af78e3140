//! Joining, inputs and acks, seeing each other, observers, reconnect, ping.

use serde_json::json;
use zonekeep_protocol::delta::Delta;
use zonekeep_protocol::messages::{KickCode, ServerMessage};
use zonekeep_server::examples::{Dots, TOPIC_DOTS};

use crate::common::*;

/// Next Delta (skipping other messages).
async fn next_delta(ws: &mut Ws) -> Delta {
    loop {
        match recv(ws, &empty_schema()).await {
            Seen::Msg(ServerMessage::Delta(d)) => return d,
            Seen::Msg(_) => continue,
            Seen::Closed => panic!("closed while waiting for a Delta"),
        }
    }
}

/// Read Deltas until one carries a dots event where `pred` holds.
async fn until_dots(
    ws: &mut Ws,
    pred: impl Fn(&[(u32, i32, i32)]) -> bool,
) -> Vec<(u32, i32, i32)> {
    for _ in 0..300 {
        let d = next_delta(ws).await;
        for e in d.events.unwrap_or_default() {
            if e.topic == TOPIC_DOTS {
                let dots = Dots::decode_dots(&e.payload);
                if pred(&dots) {
                    return dots;
                }
            }
        }
    }
    panic!("the expected dots never arrived");
}

#[tokio::test]
async fn join_send_inputs_and_see_the_ack_advance() {
    let server = TestServer::start().await;
    let (mut ws, welcome) = join(&server, "join-1", &ticket("alice", "join-1")).await;
    assert_eq!(welcome.zone_id, "join-1");
    assert_eq!(welcome.version, zonekeep_protocol::limits::PROTOCOL_VERSION);
    assert_eq!(welcome.idle_timeout_ms, 5_000, "the host's idle timeout");
    assert_eq!(
        welcome.handshake_timeout_ms, 300,
        "the host's handshake timeout"
    );
    assert_eq!(
        welcome.reconnect_grace_ms, 30_000,
        "the dots zone's grace window"
    );
    assert_eq!(welcome.reconnect_token.len(), 32);
    for seq in 1..=5 {
        send_input(&mut ws, seq, &[1, 0]).await;
    }
    let mut last_ack = 0;
    let mut last_tick = 0;
    let mut dots = Vec::new();
    while last_ack < 5 || !dots.contains(&(welcome.player_id, 5, 0)) {
        let d = next_delta(&mut ws).await;
        assert!(d.ack >= last_ack, "ack never goes back");
        assert!(d.tick >= last_tick, "ticks never go back");
        assert!(!d.baseline, "only the first Delta is a BASELINE");
        last_ack = d.ack;
        last_tick = d.tick;
        for e in d.events.unwrap_or_default() {
            if e.topic == TOPIC_DOTS {
                dots = Dots::decode_dots(&e.payload);
            }
        }
    }
    assert_eq!(dots.len(), 1);
    server.stop().await;
}

#[tokio::test]
async fn two_players_see_each_other_and_an_observer_cannot_act() {
    let server = TestServer::start().await;
    let (mut a, wa) = join(&server, "pair", &ticket("alice", "pair")).await;
    let (mut b, wb) = join(&server, "pair", &ticket("bob", "pair")).await;
    assert_ne!(wa.player_id, wb.player_id);
    let mut oc = claims("carol", "pair");
    oc["role"] = json!("observer");
    let (mut o, wo) = join(&server, "pair", &sign(&oc)).await;
    assert_eq!(wo.role, zonekeep_protocol::messages::Role::Observer);

    for seq in 1..=3 {
        send_input(&mut a, seq, &[1, 0]).await;
        send_input(&mut b, seq, &[0, 1]).await;
    }
    // The observer tries to act: its input is refused by the zone host.
    send_input(&mut o, 1, &[1, 1]).await;
    let want = |d: &[(u32, i32, i32)]| {
        d.contains(&(wa.player_id, 3, 0)) && d.contains(&(wb.player_id, 0, 3))
    };
    until_dots(&mut b, want).await;
    until_dots(&mut a, want).await;
    let seen = until_dots(&mut o, want).await;
    assert_eq!(seen.len(), 2, "the observer has no dot: {seen:?}");
    // The observer's ack never moves.
    let d = next_delta(&mut o).await;
    assert_eq!(d.ack, 0);
    eventually("observer input counted as unroutable", || async {
        metric(
            &server,
            "zonekeep_inputs_total{zone=\"pair\",outcome=\"unroutable\"}",
        )
        .await
            >= 1.0
    })
    .await;
    server.stop().await;
}

#[tokio::test]
async fn reconnect_within_grace_keeps_the_player() {
    let server = TestServer::start().await;
    let t = ticket("dave", "keep");
    let (mut ws, w1) = join(&server, "keep", &t).await;
    send_input(&mut ws, 1, &[1, 1]).await;
    until_dots(&mut ws, |d| d.contains(&(w1.player_id, 1, 1))).await;
    drop(ws);
    // Someone else holding the token cannot use it.
    let stolen = hello_bytes(&ticket("mallory", "keep"), &w1.reconnect_token);
    assert_eq!(
        refused(&server, "keep", stolen).await,
        KickCode::RECONNECT_REFUSED
    );
    // The owner resumes with the same (already used) ticket and the token.
    let (mut ws, w2) = join_with_token(&server, "keep", &t, &w1.reconnect_token).await;
    assert_eq!(w2.player_id, w1.player_id, "same player");
    assert_ne!(w2.reconnect_token, w1.reconnect_token, "a fresh token");
    send_input(&mut ws, 2, &[1, 0]).await;
    until_dots(&mut ws, |d| d.contains(&(w1.player_id, 2, 1))).await;
    // The old token is spent.
    let reuse = hello_bytes(&ticket("dave", "keep"), &w1.reconnect_token);
    assert_eq!(
        refused(&server, "keep", reuse).await,
        KickCode::RECONNECT_REFUSED
    );
    server.stop().await;
}

#[tokio::test]
async fn reconnect_after_grace_is_refused_and_the_player_left() {
    let server = TestServer::start().await;
    let mut c = claims("erin", "short");
    c["kind"] = json!("brief"); // 200 ms reconnect grace
    let (ws, w) = join(&server, "short", &sign(&c)).await;
    drop(ws);
    eventually("the dropped player leaves after the grace", || async {
        let (_, body) = http(&server, "GET", "/admin/zones/short", Some(ADMIN), None).await;
        let v: serde_json::Value = serde_json::from_str(&body).unwrap();
        v["participants"].as_array().is_some_and(|p| p.is_empty())
    })
    .await;
    let late = hello_bytes(&ticket("erin", "short"), &w.reconnect_token);
    assert_eq!(
        refused(&server, "short", late).await,
        KickCode::RECONNECT_REFUSED
    );
    server.stop().await;
}

#[tokio::test]
async fn ping_gets_pong_with_server_time_and_tick() {
    let server = TestServer::start().await;
    let (mut ws, _) = join(&server, "ping", &ticket("frank", "ping")).await;
    send_ping(&mut ws, 42).await;
    let first = loop {
        if let Seen::Msg(ServerMessage::Pong(p)) = recv(&mut ws, &empty_schema()).await {
            break p;
        }
    };
    assert_eq!(first.client_time, 42);
    send_ping(&mut ws, 43).await;
    let second = loop {
        if let Seen::Msg(ServerMessage::Pong(p)) = recv(&mut ws, &empty_schema()).await {
            break p;
        }
    };
    assert_eq!(second.client_time, 43);
    assert!(
        second.server_time_us >= first.server_time_us,
        "monotonic server time"
    );
    assert!(second.tick >= first.tick);
    server.stop().await;
}
