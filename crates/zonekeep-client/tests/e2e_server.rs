//! The client against the real host (in process, on 127.0.0.1:0) running the built-in `Dots` zone:
//! join, inputs acknowledged, clock sync, zone events, an abrupt transport drop resumed with the
//! reconnect token, and a clean close.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use zonekeep_client::{connect, ConnectOptions, Connection, Event, Patch, ReconnectPolicy};
use zonekeep_core::{Role, ZoneConfig};
use zonekeep_server::examples::{Dots, TOPIC_DOTS};
use zonekeep_server::ticket::MintRequest;
use zonekeep_server::{Host, Secret, ServerConfig};

const ZONE: &str = "dots-e2e";

fn mint(host: &Host, sub: &str) -> String {
    host.mint_ticket(&MintRequest {
        sub: sub.into(),
        zone: ZONE.into(),
        role: Role::Player,
        ttl_secs: 60,
        params: None,
        claims: Default::default(),
    })
    .unwrap()
}

/// The next Delta, collecting zone events and skipping nothing else.
async fn next_delta(conn: &mut Connection, dots: &mut Vec<(u32, i32, i32)>) -> Patch {
    loop {
        match conn.recv().await.expect("connection ended") {
            Event::Delta(p) => return p,
            Event::Event { topic, payload, .. } if topic == TOPIC_DOTS => {
                *dots = Dots::decode_dots(&payload);
            }
            Event::Event { .. } => {}
            other => panic!("unexpected event {other:?}"),
        }
    }
}

/// Deltas until one acknowledges `seq` (the host sends one per patch while the ack moves).
async fn until_acked(conn: &mut Connection, seq: u32, dots: &mut Vec<(u32, i32, i32)>) -> Patch {
    loop {
        let p = next_delta(conn, dots).await;
        if p.ack >= seq {
            return p;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn joins_acks_syncs_and_resumes_against_the_real_host() {
    let config = ServerConfig {
        listen: "127.0.0.1:0".parse().unwrap(),
        sim_threads: 1,
        ticket_secret: Some(Secret::new("e2e-client-secret-0123456789abcdef")),
        ..ServerConfig::default()
    };
    let zone = ZoneConfig {
        reconnect_grace: Duration::from_secs(30),
        ..ZoneConfig::default()
    };
    let host = Host::builder()
        .config(config)
        .zone_with::<Dots>("dots", zone, serde_json::Value::Null)
        .default_kind("dots")
        .build()
        .unwrap();
    let ticket = mint(&host, "alice");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("ws://{}/zones/{ZONE}", listener.local_addr().unwrap());
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(async move {
        host.serve(listener, async {
            let _ = stop_rx.await;
        })
        .await
        .unwrap();
    });

    let body = async {
        let mut opts = ConnectOptions::new(ticket);
        opts.reconnect = ReconnectPolicy {
            backoff_min: Duration::from_millis(5),
            backoff_max: Duration::from_millis(50),
            ..ReconnectPolicy::default()
        };
        let (mut conn, welcome) = connect(&url, opts).await.unwrap();
        // The newest version this client offers: the host speaks chat's version 11 too, which
        // this client does not offer yet.
        assert_eq!(
            welcome.version,
            zonekeep_protocol::messages::CHARACTER_PROTOCOL
        );
        assert_eq!(welcome.zone_id, ZONE);
        let me = welcome.player_id;
        let mut dots = Vec::new();
        let base = next_delta(&mut conn, &mut dots).await;
        assert!(base.baseline, "a BASELINE Delta follows Welcome");

        // Two steps right: the zone moves the dot and acknowledges both inputs.
        assert_eq!(conn.send_input(&[1, 0]).unwrap(), 1);
        assert_eq!(conn.send_input(&[1, 0]).unwrap(), 2);
        let acked = until_acked(&mut conn, 2, &mut dots).await;
        assert_eq!(acked.ack, 2);
        while !dots.contains(&(me, 2, 0)) {
            until_acked(&mut conn, 2, &mut dots).await;
        }
        let c = conn.counters();
        assert_eq!(c.inputs_sent, 2);
        assert!(c.deltas >= 2 && c.delta_bytes > 0);
        assert!(c.frame_bytes_in >= 2 * c.messages_in);

        // The first Ping left right after the handshake, before the inputs; its Pong is back.
        let clock = conn.clock();
        assert!(clock.pongs() >= 1);
        assert!(clock.rtt_us().is_some());
        let est = conn.server_tick_now().unwrap();
        assert!(
            est >= acked.tick as f64 - 2.0,
            "estimate {est} far behind tick {}",
            acked.tick
        );

        // An abrupt drop: the token resumes the same player, the dot stays where it was.
        conn.drop_transport().await.unwrap();
        loop {
            match conn.recv().await.unwrap() {
                Event::Disconnected { .. } => break,
                // Read before the drop, not yet taken by the application.
                Event::Delta(_) | Event::Event { .. } => {}
                other => panic!("expected Disconnected, got {other:?}"),
            }
        }
        loop {
            match conn.recv().await.unwrap() {
                Event::Welcome { welcome, resumed } => {
                    assert!(resumed, "resumed with the token");
                    assert_eq!(welcome.player_id, me);
                    break;
                }
                // Events already on their way before the drop.
                Event::Delta(_) | Event::Event { .. } => {}
                other => panic!("expected Welcome, got {other:?}"),
            }
        }
        // The host still holds what it last sent this player and the client said it holds
        // exactly that (protocol version 4): no BASELINE, an ordinary Delta.
        assert!(!next_delta(&mut conn, &mut dots).await.baseline);
        assert_eq!(
            conn.send_input(&[0, 1]).unwrap(),
            3,
            "the resumed player continues its sequence"
        );
        until_acked(&mut conn, 3, &mut dots).await;
        while !dots.contains(&(me, 2, 1)) {
            until_acked(&mut conn, 3, &mut dots).await;
        }
        let c = conn.counters();
        assert_eq!((c.reconnects, c.resumes, c.resyncs), (1, 1, 0));
        conn.close().await;
    };
    tokio::time::timeout(Duration::from_secs(60), body)
        .await
        .expect("test hung");
    let _ = stop_tx.send(());
    server.await.unwrap();
}
