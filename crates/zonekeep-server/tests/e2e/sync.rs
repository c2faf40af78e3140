//! The protocol's feedback paths against the real host: a refused input is reported, a client
//! whose known set drifted is told so by a KnownSetCheck and repaired by Resync → BASELINE, and the
//! WebSocket close after a Kick carries the Kick's code.

use futures_util::StreamExt;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::Message;
use zonekeep_protocol::delta::{Delta, Spawn};
use zonekeep_protocol::messages::{ClientMessage, Hello, Resync, ServerMessage};
use zonekeep_protocol::mirror::Mirror;

use crate::common::*;

#[tokio::test]
async fn a_refused_input_is_reported_and_a_drifted_known_set_is_repaired() {
    let server = TestServer::start().await;
    let (mut ws, welcome) = join(&server, "sync-1", &ticket("alice", "sync-1")).await;
    let schema = welcome.schema.clone();
    let mut mirror = Mirror::new();

    // The dots zone takes two-byte inputs only (refusal code 1).
    send_input(&mut ws, 1, &[1]).await;
    loop {
        match next_applied(&mut ws, &mut mirror, &schema).await {
            ServerMessage::InputRefused(r) => {
                assert_eq!((r.seq, r.code), (1, 1));
                break;
            }
            ServerMessage::Delta(_) | ServerMessage::KnownSetCheck(_) => {}
            other => panic!("unexpected {other:?}"),
        }
    }

    // Corrupt the client's known set: it now holds an entity the host never sent.
    mirror
        .apply(&Delta {
            base: None,
            tick: mirror.tick(),
            ack: 0,
            baseline: false,
            control: None,
            despawns: vec![],
            updates: vec![],
            spawns: vec![Spawn {
                id: 77,
                kind: 0,
                qx: 0,
                qy: 0,
                fields: vec![],
            }],
            events: None,
        })
        .unwrap();
    // The next check exposes it; a Resync brings a BASELINE that repairs it. Each Delta is
    // answered with an input so the ack moves and Deltas keep flowing (quiet ones are not sent).
    let mut resynced = false;
    let mut repaired = false;
    let mut seq = 1;
    for _ in 0..1000 {
        match next_applied(&mut ws, &mut mirror, &schema).await {
            ServerMessage::KnownSetCheck(c) => {
                if mirror.matches(&c) {
                    if resynced {
                        repaired = true;
                        break;
                    }
                } else {
                    assert!(!resynced, "the BASELINE repaired the known set");
                    let r = ClientMessage::Resync(Resync {
                        tick: mirror.tick(),
                    });
                    send(&mut ws, r.to_bytes().unwrap()).await;
                    resynced = true;
                }
            }
            ServerMessage::Delta(d) => {
                seq += 1;
                send_input(&mut ws, seq, &[1, 0]).await;
                if d.baseline {
                    assert!(resynced, "a BASELINE only when asked for");
                    assert!(mirror.get(77).is_none());
                }
            }
            other => panic!("unexpected {other:?}"),
        }
    }
    assert!(resynced && repaired, "detected and repaired");
    assert!(
        metric(
            &server,
            "zonekeep_sync_notices_total{kind=\"resync_honoured\"}"
        )
        .await
            >= 1.0
    );
    server.stop().await;
}

#[tokio::test]
async fn the_close_after_a_kick_carries_the_kick_code() {
    let server = TestServer::start().await;
    let mut ws = connect(&server, "close-1").await;
    let old = ClientMessage::Hello(Hello {
        versions: vec![1],
        ticket: "t".into(),
        reconnect_token: vec![],
        content_version: String::new(),
        resume_from: None,
    });
    send(&mut ws, old.to_bytes().unwrap()).await;
    let mut close = None;
    while let Some(Ok(m)) = ws.next().await {
        if let Message::Close(c) = m {
            close = c;
            break;
        }
    }
    let close = close.expect("a Close frame with a code");
    // VERSION_MISMATCH is Kick code 10.
    assert_eq!(close.code, CloseCode::from(4010));
    server.stop().await;
}
