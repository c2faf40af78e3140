//! The client against a hand-driven WebSocket host on loopback: handshake, inputs and acks, clock
//! sync, events, kicks, reconnect with the token and the fresh-ticket fallback, NetSim.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use support::{ack_only, guarded, options, TestHost, KNOWN};
use zonekeep_client::{
    connect, ClientError, CloseReason, Connection, Event, NetSimConfig, Patch, Replica,
    ReplicaConfig, Timing,
};
use zonekeep_protocol::delta::{Delta, Event as ZoneEvent, PosForm, Spawn, Update};
use zonekeep_protocol::known_set_hash;
use zonekeep_protocol::messages::{
    ClientMessage, InputRefused, KickCode, KnownSetCheck, ServerMessage,
};
use zonekeep_protocol::schema::FieldValue;

async fn next(conn: &mut Connection) -> Event {
    conn.recv().await.expect("event channel ended")
}

async fn next_delta(conn: &mut Connection) -> Patch {
    match next(conn).await {
        Event::Delta(p) => p,
        other => panic!("expected a Delta, got {other:?}"),
    }
}

fn close_to(a: f32, b: f32) -> bool {
    (a - b).abs() < 1e-4
}

#[tokio::test]
async fn handshake_inputs_acked_clock_events_and_counters() {
    guarded(async {
        let mut host = TestHost::start().await;
        let url = host.url.clone();
        let client = tokio::spawn(async move { connect(&url, options("t1")).await });
        let mut hc = host.accept().await;
        let hello = hc.hello().await;
        assert_eq!(hello.versions, vec![5, 7, 8, 9, 10]);
        assert_eq!(hello.ticket, "t1");
        assert!(hello.reconnect_token.is_empty());
        hc.admit(7, b"tok-1", 100).await;
        let (mut conn, welcome) = client.await.unwrap().unwrap();
        assert_eq!(welcome.player_id, 7);
        assert_eq!(conn.player_id(), 7);

        let base = next_delta(&mut conn).await;
        assert!(base.baseline);
        assert_eq!(base.tick, 100);
        assert_eq!(base.control, Some(Some(5)));
        assert_eq!(base.spawns.len(), 2);
        let s = &base.spawns[0];
        assert_eq!((s.id, s.kind), (5, 0));
        assert!(close_to(s.x, 1.0) && close_to(s.y, 2.0), "{s:?}");
        assert!(close_to(base.spawns[1].x, -3.0));

        // Inputs carry increasing sequences and the newest Delta's tick as view tick.
        assert_eq!(conn.send_input(b"up").unwrap(), 1);
        conn.set_view_tick(98);
        assert_eq!(conn.send_input(b"left").unwrap(), 2);
        hc.answer_ping(150).await;
        let i1 = hc.input(150).await;
        assert_eq!(
            (i1.seq, i1.view_tick, i1.payload.as_slice()),
            (1, 100, &b"up"[..])
        );
        let i2 = hc.input(150).await;
        assert_eq!((i2.seq, i2.view_tick), (2, 98));

        // The ack comes back with a tiny move of entity 5, a field change of 9 and a zone event.
        let mut d = ack_only(102, 2);
        d.updates = vec![
            Update {
                index: 0,
                id: 5,
                pos: Some(PosForm::Tiny { dx: 3, dy: -2 }),
                mask: 0,
                fields: vec![],
            },
            Update {
                index: 1,
                id: 9,
                pos: None,
                mask: 1,
                fields: vec![(0, FieldValue::U(2))],
            },
        ];
        d.events = Some(vec![ZoneEvent {
            topic: 3,
            payload: b"boom".to_vec(),
        }]);
        hc.delta(d, KNOWN).await;
        let p = next_delta(&mut conn).await;
        assert_eq!((p.tick, p.ack), (102, 2));
        let (x, y) = p.updates[0].pos.unwrap();
        assert!(close_to(x, 1.03) && close_to(y, 1.98), "{x} {y}");
        assert_eq!(p.updates[1].pos, None);
        assert_eq!(p.updates[1].fields, vec![(0, FieldValue::U(2))]);
        assert_eq!(
            next(&mut conn).await,
            Event::Event {
                tick: 102,
                topic: 3,
                payload: b"boom".to_vec()
            }
        );

        // The Pong was processed before that Delta: the clock is synced on the host's tick.
        let clock = conn.clock();
        assert_eq!(clock.pongs(), 1);
        assert!(clock.rtt_us().is_some());
        let est = conn.server_tick_now().unwrap();
        assert!(est >= 150.0, "estimate {est} behind the Pong's tick");

        // The patches drive a replica end to end.
        let mut replica = Replica::new(ReplicaConfig::for_zone(30, 2));
        replica.apply(&base);
        replica.apply(&p);
        replica.frame(Timing {
            server_tick: 104.0,
            one_way_ticks: 0.0,
            jitter_ticks: 0.0,
        });
        let e = replica.get(5).unwrap();
        assert!(close_to(e.x, 1.03));
        assert_eq!(replica.get(9).unwrap().fields[0], FieldValue::U(2));

        // Counters agree with what the host saw, byte for byte.
        let c = conn.counters();
        assert_eq!(c.deltas, 2);
        assert_eq!(c.pongs, 1);
        assert_eq!(c.inputs_sent, 2);
        assert_eq!(c.bytes_in, hc.bytes_out);
        assert_eq!(c.messages_in, hc.messages_out);
        assert_eq!(c.bytes_out, hc.bytes_in);
        assert_eq!(c.messages_out, hc.messages_in);
        assert_eq!(
            c.frame_bytes_in,
            2 * c.messages_in,
            "small unmasked frames: 2-byte headers"
        );
        assert_eq!(
            c.frame_bytes_out,
            6 * c.messages_out,
            "small masked frames: 6-byte headers"
        );
        assert!(c.delta_bytes > 0 && c.delta_bytes < c.bytes_in);

        let host_task = tokio::spawn(async move {
            // The client's close handshake ends the host's stream.
            while hc.recv().await.is_some() {}
        });
        conn.close().await;
        host_task.await.unwrap();
    })
    .await;
}

#[tokio::test]
async fn reconnect_with_token_resumes_the_same_player() {
    guarded(async {
        let mut host = TestHost::start().await;
        let url = host.url.clone();
        let client = tokio::spawn(async move { connect(&url, options("t1")).await });
        let mut hc = host.accept().await;
        hc.hello().await;
        hc.admit(7, b"tok-1", 100).await;
        let (mut conn, _) = client.await.unwrap().unwrap();
        next_delta(&mut conn).await;
        assert_eq!(conn.send_input(b"a").unwrap(), 1);
        assert_eq!(hc.input(100).await.seq, 1);
        hc.delta(ack_only(102, 1), KNOWN).await;
        assert_eq!(next_delta(&mut conn).await.ack, 1);

        // The host's side of the TCP connection vanishes without a Close frame.
        drop(hc);
        assert!(matches!(next(&mut conn).await, Event::Disconnected { .. }));

        let mut hc = host.accept().await;
        let hello = hc.hello().await;
        assert_eq!(hello.reconnect_token, b"tok-1");
        assert_eq!(
            hello.ticket, "t1",
            "the same ticket resumes (PROTOCOL.md §6.4)"
        );
        hc.admit(7, b"tok-2", 200).await;
        match next(&mut conn).await {
            Event::Welcome { welcome, resumed } => {
                assert!(resumed);
                assert_eq!(welcome.player_id, 7);
                assert_eq!(welcome.reconnect_token, b"tok-2");
            }
            other => panic!("expected Welcome, got {other:?}"),
        }
        let base = next_delta(&mut conn).await;
        assert!(base.baseline && base.tick == 200);
        // The same player continues its sequence.
        assert_eq!(conn.send_input(b"b").unwrap(), 2);
        let i = hc.input(200).await;
        assert_eq!((i.seq, i.view_tick), (2, 200));
        hc.delta(ack_only(202, 2), KNOWN).await;
        assert_eq!(next_delta(&mut conn).await.ack, 2);
        hc.drain();
        let c = conn.counters();
        assert_eq!((c.reconnects, c.resumes), (1, 1));

        // A second drop uses the newest token.
        conn.drop_transport().await.unwrap();
        assert!(matches!(next(&mut conn).await, Event::Disconnected { .. }));
        let mut hc = host.accept().await;
        assert_eq!(hc.hello().await.reconnect_token, b"tok-2");
        hc.admit(7, b"tok-3", 300).await;
        assert!(matches!(
            next(&mut conn).await,
            Event::Welcome { resumed: true, .. }
        ));
        hc.drain();
        conn.close().await;
    })
    .await;
}

#[tokio::test]
async fn refused_token_falls_back_to_a_fresh_ticket_as_a_new_player() {
    guarded(async {
        let mut host = TestHost::start().await;
        let url = host.url.clone();
        let fetched = Arc::new(AtomicUsize::new(0));
        let f = Arc::clone(&fetched);
        let opts = options("t1").with_fresh_ticket(move || {
            let n = f.fetch_add(1, Ordering::SeqCst) + 1;
            async move { Ok(format!("fresh-{n}")) }
        });
        let client = tokio::spawn(async move { connect(&url, opts).await });
        let mut hc = host.accept().await;
        hc.hello().await;
        hc.admit(7, b"tok-1", 100).await;
        let (mut conn, _) = client.await.unwrap().unwrap();
        next_delta(&mut conn).await;
        conn.send_input(b"a").unwrap();
        conn.send_input(b"b").unwrap();
        assert_eq!(hc.input(100).await.seq, 1);
        assert_eq!(hc.input(100).await.seq, 2);

        conn.drop_transport().await.unwrap();
        assert!(matches!(next(&mut conn).await, Event::Disconnected { .. }));
        // The token is refused (e.g. the host restarted) ...
        let mut hc = host.accept().await;
        assert_eq!(hc.hello().await.reconnect_token, b"tok-1");
        hc.kick(KickCode::RECONNECT_REFUSED, "unknown token").await;
        drop(hc);
        // ... so the client asks the application for a fresh ticket and joins without a token.
        let mut hc = host.accept().await;
        let hello = hc.hello().await;
        assert!(hello.reconnect_token.is_empty());
        assert_eq!(hello.ticket, "fresh-1");
        assert_eq!(fetched.load(Ordering::SeqCst), 1);
        hc.admit(8, b"tok-8", 500).await;
        match next(&mut conn).await {
            Event::Welcome { welcome, resumed } => {
                assert!(!resumed, "a new player");
                assert_eq!(welcome.player_id, 8);
            }
            other => panic!("expected Welcome, got {other:?}"),
        }
        assert_eq!(conn.player_id(), 8);
        // A new player's sequence starts over.
        assert_eq!(conn.send_input(b"c").unwrap(), 1);
        assert_eq!(hc.input(500).await.seq, 1);
        hc.drain();
        conn.close().await;
    })
    .await;
}

#[tokio::test]
async fn after_the_grace_window_the_token_is_not_tried() {
    guarded(async {
        let mut host = TestHost::start().await;
        let url = host.url.clone();
        let mut opts = options("t1").with_fresh_ticket(|| async { Ok("fresh".to_owned()) });
        opts.reconnect.grace = Duration::ZERO;
        let client = tokio::spawn(async move { connect(&url, opts).await });
        let mut hc = host.accept().await;
        hc.hello().await;
        hc.admit(7, b"tok-1", 100).await;
        let (mut conn, _) = client.await.unwrap().unwrap();
        next_delta(&mut conn).await;
        drop(hc);
        assert!(matches!(next(&mut conn).await, Event::Disconnected { .. }));
        let mut hc = host.accept().await;
        let hello = hc.hello().await;
        assert!(hello.reconnect_token.is_empty());
        assert_eq!(hello.ticket, "fresh");
        hc.admit(9, b"tok-9", 10).await;
        assert!(matches!(
            next(&mut conn).await,
            Event::Welcome { resumed: false, .. }
        ));
        hc.drain();
        conn.close().await;
    })
    .await;
}

#[tokio::test]
async fn without_a_ticket_source_a_lost_token_ends_the_connection() {
    guarded(async {
        let mut host = TestHost::start().await;
        let url = host.url.clone();
        let client = tokio::spawn(async move { connect(&url, options("t1")).await });
        let mut hc = host.accept().await;
        hc.hello().await;
        hc.admit(7, b"tok-1", 100).await;
        let (mut conn, _) = client.await.unwrap().unwrap();
        next_delta(&mut conn).await;
        drop(hc);
        assert!(matches!(next(&mut conn).await, Event::Disconnected { .. }));
        let mut hc = host.accept().await;
        hc.hello().await;
        hc.kick(KickCode::RECONNECT_REFUSED, "expired").await;
        match next(&mut conn).await {
            Event::Closed(CloseReason::Lost(reason)) => {
                assert!(reason.contains("fresh ticket"), "{reason}")
            }
            other => panic!("expected Closed, got {other:?}"),
        }
        assert!(conn.recv().await.is_none());
        assert!(matches!(conn.send_input(b"x"), Err(ClientError::Closed)));
    })
    .await;
}

#[tokio::test]
async fn kicks_at_handshake_and_in_session() {
    guarded(async {
        let mut host = TestHost::start().await;
        // At the handshake: an error carrying the code.
        let url = host.url.clone();
        let client = tokio::spawn(async move { connect(&url, options("bad")).await });
        let mut hc = host.accept().await;
        hc.hello().await;
        hc.kick(KickCode::BAD_TICKET, "tampered").await;
        match client.await.unwrap() {
            Err(ClientError::Kicked(k)) => assert_eq!(
                (k.code, k.reason.as_str()),
                (KickCode::BAD_TICKET, "tampered")
            ),
            other => panic!("expected a Kick, got {other:?}"),
        }

        // A version the client did not offer is refused.
        let url = host.url.clone();
        let client = tokio::spawn(async move { connect(&url, options("t")).await });
        let mut hc = host.accept().await;
        hc.hello().await;
        let mut w = support::welcome(1, b"", 0);
        w.version = 99;
        hc.send(
            &zonekeep_protocol::messages::ServerMessage::Welcome(w),
            None,
        )
        .await;
        assert!(matches!(
            client.await.unwrap(),
            Err(ClientError::VersionMismatch(99))
        ));

        // In session, a final Kick: the event, then Closed, and no reconnect.
        let url = host.url.clone();
        let client = tokio::spawn(async move { connect(&url, options("t1")).await });
        let mut hc = host.accept().await;
        hc.hello().await;
        hc.admit(7, b"tok-1", 100).await;
        let (mut conn, _) = client.await.unwrap().unwrap();
        next_delta(&mut conn).await;
        hc.kick(KickCode::KICKED, "by admin").await;
        // Like a real host: keep reading until the client goes (dropping a socket with unread
        // data sends a TCP reset, which may discard the Kick before the client reads it).
        hc.drain();
        match next(&mut conn).await {
            Event::Kick(k) => assert_eq!(k.code, KickCode::KICKED),
            other => panic!("expected Kick, got {other:?}"),
        }
        match next(&mut conn).await {
            Event::Closed(CloseReason::Kicked(k)) => assert_eq!(k.reason, "by admin"),
            other => panic!("expected Closed, got {other:?}"),
        }
        assert_eq!(conn.counters().reconnects, 0);
    })
    .await;
}

/// A lasting world halted because its saves failed (PROTOCOL.md §5.3, version 9): the Kick is
/// followed by attempts with the token, refused with WORLD_HALTED while the world stays halted,
/// and the same player resumes once it is back.
#[tokio::test]
async fn world_halted_is_retried_with_the_token_until_the_world_is_back() {
    guarded(async {
        let mut host = TestHost::start().await;
        let url = host.url.clone();
        let client = tokio::spawn(async move { connect(&url, options("t1")).await });
        let mut hc = host.accept().await;
        hc.hello().await;
        hc.admit(7, b"tok-1", 100).await;
        let (mut conn, _) = client.await.unwrap().unwrap();
        next_delta(&mut conn).await;

        hc.kick(KickCode::WORLD_HALTED, "saves failed for 3 s")
            .await;
        hc.drain();
        match next(&mut conn).await {
            Event::Kick(k) => assert_eq!(k.code, KickCode::WORLD_HALTED),
            other => panic!("expected Kick, got {other:?}"),
        }
        assert!(matches!(next(&mut conn).await, Event::Disconnected { .. }));

        // Still halted once more, then back from its last committed save.
        refused_then_resumed(&mut host, &mut conn, KickCode::WORLD_HALTED, 1).await;
        conn.close().await;
    })
    .await;
}

/// The player's character was taken into another zone (PROTOCOL.md §5.3 "Characters", version
/// 10): the Kick ends the session with a reason of its own, and no attempt follows.
#[tokio::test]
async fn character_moved_ends_the_session_without_a_reconnect() {
    guarded(async {
        let mut host = TestHost::start().await;
        let url = host.url.clone();
        let client = tokio::spawn(async move { connect(&url, options("t1")).await });
        let mut hc = host.accept().await;
        hc.hello().await;
        hc.admit_at(10, 7, b"tok-1", 100).await;
        let (mut conn, welcome) = client.await.unwrap().unwrap();
        assert_eq!(welcome.version, 10);
        next_delta(&mut conn).await;

        hc.kick(
            KickCode::CHARACTER_MOVED,
            "your character joined zone dungeon-2",
        )
        .await;
        hc.drain();
        match next(&mut conn).await {
            Event::Kick(k) => assert_eq!(k.code, KickCode::CHARACTER_MOVED),
            other => panic!("expected Kick, got {other:?}"),
        }
        match next(&mut conn).await {
            Event::Closed(CloseReason::CharacterMoved(k)) => {
                assert_eq!(k.code, KickCode::CHARACTER_MOVED);
                assert_eq!(k.reason, "your character joined zone dungeon-2");
            }
            other => panic!("expected Closed(CharacterMoved), got {other:?}"),
        }
        assert!(conn.recv().await.is_none(), "nothing follows Closed");
        // No attempt comes back to take the character from the other game.
        assert!(
            tokio::time::timeout(Duration::from_millis(500), host.accept())
                .await
                .is_err(),
            "no reconnect"
        );
        assert_eq!(conn.counters().reconnects, 0);
    })
    .await;
}

/// Another zone holds the player's character and could not give it back yet (PROTOCOL.md §5.3
/// "Characters", version 10): after a dropped transport, the attempts with the token are refused
/// with CHARACTER_ELSEWHERE and retried, and the same player resumes once the host admits it.
#[tokio::test]
async fn character_elsewhere_is_retried_with_the_token_until_the_host_admits_the_player() {
    guarded(async {
        let mut host = TestHost::start().await;
        let url = host.url.clone();
        let client = tokio::spawn(async move { connect(&url, options("t1")).await });
        let mut hc = host.accept().await;
        hc.hello().await;
        hc.admit(7, b"tok-1", 100).await;
        let (mut conn, _) = client.await.unwrap().unwrap();
        next_delta(&mut conn).await;
        drop(hc);
        assert!(matches!(next(&mut conn).await, Event::Disconnected { .. }));

        // Twice refused (the character is still held by a zone that cannot be asked), then given
        // back.
        refused_then_resumed(&mut host, &mut conn, KickCode::CHARACTER_ELSEWHERE, 2).await;
        conn.close().await;
    })
    .await;
}

#[tokio::test]
async fn a_corrupt_delta_is_not_applied_and_a_resync_brings_a_fresh_baseline() {
    guarded(async {
        let mut host = TestHost::start().await;
        let url = host.url.clone();
        let client = tokio::spawn(async move { connect(&url, options("t1")).await });
        let mut hc = host.accept().await;
        hc.hello().await;
        hc.admit(7, b"tok-1", 100).await;
        let (mut conn, _) = client.await.unwrap().unwrap();
        next_delta(&mut conn).await;
        // Despawns entity 6, which the client does not know.
        let mut bad: Delta = ack_only(102, 0);
        bad.despawns = vec![6];
        hc.delta(bad, &[(5, 0), (6, 0), (9, 0)]).await;
        // The client asks for a BASELINE on the same connection instead of reconnecting.
        match hc.recv_skip_pings(102).await {
            Some(ClientMessage::Resync(r)) => assert_eq!(r.tick, 100, "the last Delta it applied"),
            other => panic!("expected Resync, got {other:?}"),
        }
        // A Delta sent before the host saw the Resync is skipped, not applied to a bad known set.
        hc.delta(ack_only(104, 0), KNOWN).await;
        hc.delta(support::baseline(106), &[]).await;
        let p = next_delta(&mut conn).await;
        assert!(p.baseline);
        assert_eq!(p.tick, 106);
        let c = conn.counters();
        assert_eq!((c.resyncs, c.deltas_skipped, c.reconnects), (1, 1, 0));
        hc.drain();
        conn.close().await;
    })
    .await;
}

#[tokio::test]
async fn a_failed_known_set_check_is_repaired_by_a_baseline_and_refusals_reach_the_application() {
    guarded(async {
        let mut host = TestHost::start().await;
        let url = host.url.clone();
        let client = tokio::spawn(async move { connect(&url, options("t1")).await });
        let mut hc = host.accept().await;
        hc.hello().await;
        hc.welcome(7, b"tok-1", 100).await;
        // A Pong may come between Welcome and the BASELINE (the first Ping races the join).
        hc.answer_ping(100).await;
        hc.delta(support::baseline(100), &[]).await;
        let (mut conn, _) = client.await.unwrap().unwrap();
        assert!(next_delta(&mut conn).await.baseline);

        // The client's known set matches: nothing happens.
        let check = |tick, ids: &[u32]| {
            ServerMessage::KnownSetCheck(KnownSetCheck {
                tick,
                count: ids.len() as u32,
                hash: known_set_hash(ids.iter().copied()),
            })
        };
        hc.send(&check(100, &[5, 9]), None).await;

        // The client's mirror is corrupted: the host believes it also holds entity 12 (a spawn
        // the client never applied), so every later update index would name the wrong entity.
        hc.send(&check(102, &[5, 9, 12]), None).await;
        match hc.recv_skip_pings(102).await {
            Some(ClientMessage::Resync(r)) => assert_eq!(r.tick, 100),
            other => panic!("expected Resync, got {other:?}"),
        }
        let mut repaired = support::baseline(104);
        repaired.spawns.push(Spawn {
            id: 12,
            kind: 0,
            qx: 0,
            qy: 0,
            fields: vec![FieldValue::U(1), FieldValue::Q(0)],
        });
        hc.delta(repaired, &[]).await;
        let p = next_delta(&mut conn).await;
        assert!(p.baseline);
        assert_eq!(p.spawns.len(), 3);
        // Now the check agrees; the refusal of input 3 reaches the application.
        hc.send(&check(104, &[5, 9, 12]), None).await;
        hc.send(
            &ServerMessage::InputRefused(InputRefused { seq: 3, code: 1 }),
            None,
        )
        .await;
        match next(&mut conn).await {
            Event::InputRefused(r) => assert_eq!((r.seq, r.code), (3, 1)),
            other => panic!("expected InputRefused, got {other:?}"),
        }
        let c = conn.counters();
        assert_eq!(
            (c.resyncs, c.inputs_refused),
            (1, 1),
            "one Resync, after the bad check only"
        );
        hc.drain();
        conn.close().await;
    })
    .await;
}

#[tokio::test]
async fn netsim_delays_both_directions() {
    guarded(async {
        let mut host = TestHost::start().await;
        let url = host.url.clone();
        let mut opts = options("t1");
        opts.netsim = NetSimConfig {
            delay: Duration::from_millis(30),
            ..NetSimConfig::default()
        };
        let client = tokio::spawn(async move { connect(&url, opts).await });
        let mut hc = host.accept().await;
        hc.hello().await;
        hc.admit(7, b"tok-1", 100).await;
        let (mut conn, _) = client.await.unwrap().unwrap();
        next_delta(&mut conn).await;
        hc.answer_ping(120).await;
        hc.delta(ack_only(122, 0), KNOWN).await;
        next_delta(&mut conn).await;
        // The Ping waited 30 ms on the way out and the Pong 30 ms on the way in.
        let rtt = conn.clock().rtt_us().unwrap();
        assert!(rtt >= 60_000.0, "rtt {rtt} µs");
        // Inputs are delayed but arrive, in order.
        for _ in 0..5 {
            conn.send_input(b"i").unwrap();
        }
        for seq in 1..=5 {
            assert_eq!(hc.input(122).await.seq, seq);
        }
        hc.drain();
        conn.close().await;
    })
    .await;
}

#[tokio::test]
async fn outgoing_queue_is_bounded_while_reconnecting() {
    guarded(async {
        let mut host = TestHost::start().await;
        let url = host.url.clone();
        let mut opts = options("t1").with_fresh_ticket(|| async { Ok("fresh".to_owned()) });
        opts.outgoing_capacity = 2;
        let client = tokio::spawn(async move { connect(&url, opts).await });
        let mut hc = host.accept().await;
        hc.hello().await;
        hc.admit(7, b"tok-1", 100).await;
        let (mut conn, _) = client.await.unwrap().unwrap();
        next_delta(&mut conn).await;
        conn.send_input(b"a").unwrap();
        assert_eq!(hc.input(100).await.seq, 1);

        conn.drop_transport().await.unwrap();
        assert!(matches!(next(&mut conn).await, Event::Disconnected { .. }));
        // The task is in its handshake (the host has not answered): inputs queue up to the bound.
        let mut hc = host.accept().await;
        assert_eq!(hc.hello().await.reconnect_token, b"tok-1");
        assert_eq!(conn.send_input(b"b").unwrap(), 2);
        assert_eq!(conn.send_input(b"c").unwrap(), 3);
        assert!(matches!(
            conn.send_input(b"d"),
            Err(ClientError::Backpressure)
        ));
        assert_eq!(
            conn.next_seq(),
            4,
            "a refused input uses no sequence number"
        );
        assert_eq!(conn.counters().outgoing_full, 1);

        // The token is refused; the new player must not receive the old player's inputs.
        hc.kick(KickCode::RECONNECT_REFUSED, "gone").await;
        drop(hc);
        let mut hc = host.accept().await;
        assert_eq!(hc.hello().await.ticket, "fresh");
        hc.admit(11, b"tok-11", 400).await;
        assert!(matches!(
            next(&mut conn).await,
            Event::Welcome { resumed: false, .. }
        ));
        assert_eq!(conn.counters().inputs_discarded, 2);
        assert_eq!(conn.send_input(b"e").unwrap(), 1);
        let i = hc.input(400).await;
        assert_eq!((i.seq, i.payload.as_slice()), (1, &b"e"[..]));
        hc.drain();
        conn.close().await;
    })
    .await;
}

/// The client's next `refusals` attempts, each presenting its token, are refused with `code`
/// and retried; then the host admits it again, and the same player resumes.
async fn refused_then_resumed(
    host: &mut TestHost,
    conn: &mut Connection,
    code: KickCode,
    refusals: usize,
) {
    for _ in 0..refusals {
        let mut hc = host.accept().await;
        let hello = hc.hello().await;
        assert_eq!(
            (hello.ticket.as_str(), hello.reconnect_token.as_slice()),
            ("t1", &b"tok-1"[..])
        );
        hc.kick(code, "not yet; retry shortly").await;
        hc.drain();
    }
    let mut hc = host.accept().await;
    let hello = hc.hello().await;
    assert_eq!(
        (hello.ticket.as_str(), hello.reconnect_token.as_slice()),
        ("t1", &b"tok-1"[..])
    );
    hc.admit(7, b"tok-2", 200).await;
    match next(conn).await {
        Event::Welcome { welcome, resumed } => {
            assert!(resumed);
            assert_eq!(welcome.player_id, 7);
        }
        other => panic!("expected Welcome, got {other:?}"),
    }
    assert!(next_delta(conn).await.baseline);
    hc.drain();
    let c = conn.counters();
    assert_eq!((c.reconnects, c.resumes), (1, 1));
}
