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

/// A zone whose code emits 1,000 events of 16 KiB to everyone every tick: about 16 MB a patch,
/// sixteen times what one message may carry.
struct EventFlood;

impl zonekeep_core::Zone for EventFlood {
    type Input = ();
    fn create(
        _init: &zonekeep_core::ZoneInit,
        _ctx: &mut zonekeep_core::Ctx<'_>,
    ) -> Result<Self, zonekeep_core::ZoneError> {
        Ok(EventFlood)
    }
    fn sanitize(
        &mut self,
        _p: zonekeep_core::PlayerId,
        _payload: &[u8],
    ) -> Result<(), zonekeep_core::InputRefusal> {
        Ok(())
    }
    fn tick(&mut self, ctx: &mut zonekeep_core::Ctx<'_>) {
        for _ in 0..1000 {
            ctx.emit_event(zonekeep_core::EventTarget::All, 1, vec![0xab; 16 * 1024]);
        }
    }
}

/// The next binary message, raw, or `None` once the connection closed.
async fn next_binary(ws: &mut Ws) -> Option<Vec<u8>> {
    use tokio_tungstenite::tungstenite::Message;
    loop {
        let m = tokio::time::timeout(HANG_GUARD, ws.next())
            .await
            .expect("no message from the host within the hang guard");
        match m {
            None | Some(Err(_)) | Some(Ok(Message::Close(_))) => return None,
            Some(Ok(Message::Binary(b))) => return Some(b.to_vec()),
            Some(Ok(_)) => continue,
        }
    }
}

#[tokio::test]
async fn a_zone_emitting_more_events_than_a_message_holds_keeps_its_players_and_the_innocent_zone()
{
    use zonekeep_protocol::limits::MAX_SERVER_MESSAGE;
    use zonekeep_protocol::messages::DeltaContext;

    let flood = zonekeep_core::ZoneConfig {
        tick_hz: 10,
        ..zonekeep_core::ZoneConfig::default()
    };
    let host = zonekeep_server::Host::builder()
        .config(zonekeep_server::ServerConfig {
            // One simulation thread: the flooding zone and the innocent one share it.
            sim_threads: 1,
            // The clients only read: silence is not what this test is about.
            idle_timeout_ms: 600_000,
            ..base_config()
        })
        .zone::<zonekeep_server::examples::Dots>("dots")
        .zone_with::<EventFlood>("flood", flood, serde_json::Value::Null)
        .build()
        .unwrap();
    let server = TestServer::serve(host).await;
    let (mut innocent, welcome) = join(&server, "calm", &ticket("bystander", "calm")).await;
    let mut f = claims("a", "flood-1");
    f["kind"] = json!("flood");
    let (mut a, _) = join(&server, "flood-1", &sign(&f)).await;
    let mut f = claims("b", "flood-1");
    f["kind"] = json!("flood");
    let (mut b, _) = join(&server, "flood-1", &sign(&f)).await;

    let schema = empty_schema();
    for ws in [&mut a, &mut b] {
        let mut with_events = 0;
        while with_events < 5 {
            let bytes = next_binary(ws)
                .await
                .expect("a flooded player stays connected");
            assert!(
                bytes.len() <= MAX_SERVER_MESSAGE,
                "a message of {} bytes is over the protocol's cap",
                bytes.len()
            );
            let ctx = DeltaContext {
                schema: &schema,
                known: &[],
            };
            match ServerMessage::decode(&bytes, Some(ctx)).expect("decodable") {
                ServerMessage::Delta(d) if d.events.as_ref().is_some_and(|e| !e.is_empty()) => {
                    with_events += 1;
                }
                ServerMessage::Kick(k) => panic!("a flooded player was kicked: {k:?}"),
                _ => {}
            }
        }
    }
    // The zone on the same thread keeps ticking and its player keeps its connection.
    let mut deltas = 0;
    while deltas < 5 {
        match recv(&mut innocent, &welcome.schema).await {
            Seen::Msg(ServerMessage::Delta(_)) => deltas += 1,
            Seen::Msg(ServerMessage::Kick(k)) => panic!("the innocent player was kicked: {k:?}"),
            Seen::Msg(_) => {}
            Seen::Closed => panic!("the innocent player was disconnected"),
        }
    }
    eventually("events the queue could not hold are counted", || async {
        metric(&server, "zonekeep_events_dropped_total").await > 0.0
            && metric(&server, "zonekeep_zone_events_deferred_total").await > 0.0
    })
    .await;
    assert_eq!(
        metric(&server, "zonekeep_kicks_total{code=\"internal_error\"}").await,
        0.0
    );
    server.stop().await;
}

/// A zone whose code spawns 5,000 entities a tick and emits, each tick, one fact of 4 KiB and
/// 100 small ones: more than a host's per-zone limits allow.
struct Hog {
    kind: zonekeep_core::KindId,
}

impl zonekeep_core::Zone for Hog {
    type Input = ();
    fn create(
        _init: &zonekeep_core::ZoneInit,
        ctx: &mut zonekeep_core::Ctx<'_>,
    ) -> Result<Self, zonekeep_core::ZoneError> {
        let kind = ctx
            .world()
            .declare_kind(zonekeep_protocol::schema::KindDef {
                name: "mote".into(),
                fields: vec![],
            })
            .map_err(|e| zonekeep_core::ZoneError::Failed(e.to_string()))?;
        Ok(Hog { kind })
    }
    fn sanitize(
        &mut self,
        _p: zonekeep_core::PlayerId,
        _payload: &[u8],
    ) -> Result<(), zonekeep_core::InputRefusal> {
        Ok(())
    }
    fn tick(&mut self, ctx: &mut zonekeep_core::Ctx<'_>) {
        for i in 0..5000 {
            let _ = ctx.world().spawn(self.kind, (i % 100) as f32, 0.0);
        }
        let _ = ctx.emit_fact("big", json!({ "blob": "x".repeat(4096) }), None, None);
        for _ in 0..100 {
            let _ = ctx.emit_fact("small", json!(1), None, None);
        }
    }
}

#[tokio::test]
async fn the_hosts_zone_limits_cap_entities_and_facts_and_count_the_refusals() {
    let hog = zonekeep_core::ZoneConfig {
        tick_hz: 10,
        max_facts_in_flight: 100_000,
        ..zonekeep_core::ZoneConfig::default()
    };
    let host = zonekeep_server::Host::builder()
        .config(zonekeep_server::ServerConfig {
            zone_max_entities: 2_000,
            zone_max_fact_bytes: 1024,
            zone_max_facts_per_second: 50,
            idle_timeout_ms: 600_000,
            ..base_config()
        })
        .zone_with::<Hog>("hog", hog, serde_json::Value::Null)
        .build()
        .unwrap();
    let server = TestServer::serve(host).await;
    let (mut ws, welcome) = join(&server, "hog-1", &ticket("a", "hog-1")).await;
    eventually("the world stops at the host's cap", || async {
        metric(&server, "zonekeep_entities{zone=\"hog-1\"}").await == 2_000.0
    })
    .await;
    eventually("each limit's refusals are counted", || async {
        metric(&server, "zonekeep_zone_spawns_refused_total").await > 0.0
            && metric(
                &server,
                "zonekeep_zone_facts_refused_total{limit=\"too_large\"}",
            )
            .await
                > 0.0
            && metric(&server, "zonekeep_zone_facts_refused_total{limit=\"rate\"}").await > 0.0
    })
    .await;
    // The zone runs on and its player keeps its connection.
    let mut deltas = 0;
    while deltas < 3 {
        match recv(&mut ws, &welcome.schema).await {
            Seen::Msg(ServerMessage::Delta(_)) => deltas += 1,
            Seen::Msg(ServerMessage::Kick(k)) => panic!("kicked: {k:?}"),
            Seen::Msg(_) => {}
            Seen::Closed => panic!("disconnected"),
        }
    }
    server.stop().await;
}
