//! Slow readers, rate limits, idle timeout, per-IP cap, NetSim.

use futures_util::StreamExt;
use serde_json::json;
use tokio::net::TcpSocket;
use zonekeep_protocol::messages::{KickCode, ServerMessage};

use crate::common::*;

#[tokio::test]
async fn a_slow_reader_is_kicked_while_others_stay_on_time_and_memory_is_bounded() {
    const OUTBOX: usize = 8;
    let server = TestServer::start_with(zonekeep_server::ServerConfig {
        outbox_frames: OUTBOX,
        socket_send_buffer: 4096,
        kick_write_timeout_ms: 10_000,
        ..base_config()
    })
    .await;
    let mut c = claims("fast", "flood");
    c["kind"] = json!("blob"); // 100 Hz, a 16 KiB event every tick
    let (mut fast, _) = join(&server, "flood", &sign(&c)).await;

    // The slow client has a tiny receive buffer and stops reading after the handshake.
    let sock = TcpSocket::new_v4().unwrap();
    sock.set_recv_buffer_size(4096).unwrap();
    let stream = sock.connect(server.addr).await.unwrap();
    let (mut slow, _) = tokio_tungstenite::client_async(server.url("flood"), stream)
        .await
        .unwrap();
    futures_util::SinkExt::send(
        &mut slow,
        tokio_tungstenite::tungstenite::Message::Binary(
            hello_bytes(&ticket("slow", "flood"), &[]).into(),
        ),
    )
    .await
    .unwrap();

    // The fast client keeps receiving every frame in order while the slow one stalls.
    let mut last_tick = 0;
    let mut frames = 0usize;
    loop {
        for _ in 0..20 {
            match recv(&mut fast, &empty_schema()).await {
                Seen::Msg(ServerMessage::Delta(d)) => {
                    assert!(d.tick > last_tick, "ticks increase");
                    last_tick = d.tick;
                    frames += 1;
                }
                Seen::Msg(_) => {}
                Seen::Closed => panic!("the fast client was disconnected"),
            }
        }
        // Other messages (known-set checks) come between the Deltas: count Deltas only.
        if frames >= 20
            && metric(&server, "zonekeep_kicks_total{code=\"slow_consumer\"}").await >= 1.0
        {
            break;
        }
        assert!(frames < 5_000, "the slow consumer was never kicked");
    }
    assert!(frames >= 20);

    // Now the slow client reads what reached it: a bounded number of frames, then the Kick.
    let mut slow_frames = 0usize;
    let code = loop {
        let m = tokio::time::timeout(std::time::Duration::from_secs(10), slow.next())
            .await
            .unwrap();
        match m {
            Some(Ok(tokio_tungstenite::tungstenite::Message::Binary(b))) => {
                match ServerMessage::decode(
                    &b,
                    Some(zonekeep_protocol::messages::DeltaContext {
                        schema: &empty_schema(),
                        known: &[],
                    }),
                )
                .unwrap()
                {
                    ServerMessage::Kick(k) => break k.code,
                    _ => slow_frames += 1,
                }
            }
            Some(Ok(_)) => {}
            other => panic!("closed without a Kick: {other:?}"),
        }
    };
    assert_eq!(code, KickCode::SLOW_CONSUMER);
    // Welcome + baseline + the outbox + what fit in two small kernel buffers.
    assert!(
        slow_frames <= OUTBOX + 8,
        "memory for the slow connection stayed bounded (got {slow_frames} frames)"
    );
    // The fast client is still served.
    assert!(matches!(
        recv(&mut fast, &empty_schema()).await,
        Seen::Msg(_)
    ));
    server.stop().await;
}

#[tokio::test]
async fn excess_inputs_are_dropped_and_counted_then_abuse_is_kicked() {
    let server = TestServer::start_with(zonekeep_server::ServerConfig {
        input_rate: 0.01, // one token per 100 s: only the burst passes
        input_burst: 5,
        abuse_rate: 0.01,
        abuse_burst: 10,
        ..base_config()
    })
    .await;
    let (mut ws, _) = join(&server, "rl", &ticket("spammer", "rl")).await;
    for seq in 1..=8 {
        send_input(&mut ws, seq, &[1, 0]).await;
    }
    loop {
        if let Seen::Msg(ServerMessage::Delta(d)) = recv(&mut ws, &empty_schema()).await {
            assert!(d.ack <= 5, "rate-limited inputs never reach the zone");
            if d.ack == 5 {
                break;
            }
        }
    }
    eventually("three inputs counted as rate limited", || async {
        metric(
            &server,
            "zonekeep_inputs_total{zone=\"rl\",outcome=\"rate_limited\"}",
        )
        .await
            == 3.0
    })
    .await;
    // Sustained abuse: the drop budget (10) runs out and the connection is kicked.
    for seq in 9..=40 {
        send_input(&mut ws, seq, &[1, 0]).await;
    }
    assert_eq!(expect_kick(&mut ws).await, KickCode::RATE_LIMITED);
    server.stop().await;
}

#[tokio::test]
async fn a_silent_client_hits_the_idle_timeout() {
    let server = TestServer::start_with(zonekeep_server::ServerConfig {
        idle_timeout_ms: 300,
        ..base_config()
    })
    .await;
    let (mut ws, _) = join(&server, "idle", &ticket("quiet", "idle")).await;
    assert_eq!(expect_kick(&mut ws).await, KickCode::IDLE_TIMEOUT);
    server.stop().await;
}

#[tokio::test]
async fn per_ip_cap_refuses_with_its_code_and_frees_slots() {
    let server = TestServer::start_with(zonekeep_server::ServerConfig {
        max_connections_per_ip: 2,
        ..base_config()
    })
    .await;
    let (a, _) = join(&server, "cap", &ticket("a", "cap")).await;
    let (_b, _) = join(&server, "cap", &ticket("b", "cap")).await;
    let mut c = connect(&server, "cap").await;
    assert_eq!(expect_kick(&mut c).await, KickCode::TOO_MANY_CONNECTIONS);
    drop(c);
    drop(a);
    eventually("a slot frees up", || async {
        let Ok((mut ws, _)) = tokio_tungstenite::connect_async(server.url("cap")).await else {
            return false;
        };
        send(&mut ws, hello_bytes(&ticket("d", "cap"), &[])).await;
        matches!(
            recv(&mut ws, &empty_schema()).await,
            Seen::Msg(ServerMessage::Welcome(_))
        )
    })
    .await;
    server.stop().await;
}

#[tokio::test]
async fn netsim_delays_without_dropping_or_reordering() {
    let server = TestServer::start().await;
    // The page's own setting: its ticket subject's connections.
    let (status, body) = http(
        &server,
        "POST",
        "/dev/netsim?sub=laggy",
        None,
        Some(json!({"latency_ms": 20, "jitter_ms": 10, "loss": 0.2})),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let (status, _) = http(
        &server,
        "POST",
        "/dev/netsim?sub=laggy",
        None,
        Some(json!({"loss": 2.0})),
    )
    .await;
    assert_eq!(status, 400);
    let (mut ws, _) = join(&server, "lag", &ticket("laggy", "lag")).await;
    for t in 1..=10 {
        send_ping(&mut ws, t).await;
    }
    let mut next = 1;
    while next <= 10 {
        if let Seen::Msg(ServerMessage::Pong(p)) = recv(&mut ws, &empty_schema()).await {
            assert_eq!(p.client_time, next, "every pong, in order");
            next += 1;
        }
    }
    server.stop().await;
}
