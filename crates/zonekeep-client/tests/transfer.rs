//! Following a Transfer (PROTOCOL.md §5.3.2): a new connection with the credential while the old
//! one stays open, the new zone's Welcome and BASELINE in one event, the old connection closed
//! after it; a Transfer to a URL that is not a WebSocket URL is ignored, and one on a session
//! below version 8 is a protocol error. Hand-driven hosts on loopback play the source and the
//! target.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use support::{guarded, options, TestHost};
use zonekeep_client::{connect, Event, Replica, ReplicaConfig, TransferEvent};
use zonekeep_protocol::messages::{ClientMessage, ServerMessage, Transfer};

#[tokio::test]
async fn a_transfer_is_followed_and_arrives_in_one_event() {
    guarded(async {
        let mut source = TestHost::start().await;
        let mut target = TestHost::start().await;
        let url = source.url.clone();
        let client = tokio::spawn(async move { connect(&url, options("t1")).await });
        let mut hs = source.accept().await;
        hs.hello().await;
        hs.admit_at(8, 1, &[1; 4], 100).await;
        let (mut conn, _) = client.await.unwrap().unwrap();
        let Some(Event::Delta(first)) = conn.recv().await else {
            panic!("the BASELINE first")
        };
        let mut replica = Replica::new(ReplicaConfig::for_zone(30, 1));
        replica.apply(&first);

        let to = format!("{}/zones/lobby", target.base);
        hs.send(
            &ServerMessage::Transfer(Transfer {
                zone_id: "lobby".into(),
                ticket: "cred.e30.sig".into(),
                url: to.clone(),
            }),
            None,
        )
        .await;
        assert_eq!(
            conn.recv().await,
            Some(Event::Transfer(TransferEvent::Started {
                from: "z1".into(),
                to: "lobby".into()
            }))
        );
        let mut ht = target.accept().await;
        assert_eq!(ht.target, "/zones/lobby");
        let hello = ht.hello().await;
        assert_eq!(
            hello.ticket, "cred.e30.sig",
            "the credential, not the old ticket"
        );
        assert!(hello.reconnect_token.is_empty());
        assert_eq!(hello.versions, vec![5, 7, 8]);
        assert_eq!(hello.resume_from, None);
        // Until the new BASELINE, nothing reaches the application: it keeps its world.
        ht.welcome(7, &[2; 4], 5000).await;
        assert!(conn.try_recv().is_none());
        ht.delta(support::baseline(5000), &[]).await;
        let Some(Event::Transfer(TransferEvent::Arrived {
            from,
            welcome,
            baseline,
        })) = conn.recv().await
        else {
            panic!("the arrival, Welcome and BASELINE together")
        };
        assert_eq!(from, "z1");
        assert_eq!(welcome.player_id, 7);
        assert!(baseline.baseline);
        assert_eq!(conn.player_id(), 7);
        assert_eq!(conn.next_seq(), 1, "a new player in the new zone");
        // The new world is drawn from the next frame on.
        replica.enter_zone(ReplicaConfig::for_zone(30, 1), &baseline);
        assert_eq!(replica.held_len(), baseline.spawns.len());
        // The source connection is closed by the client.
        while let Some(m) = hs.recv().await {
            assert!(matches!(m, ClientMessage::Ping(_)), "{m:?}");
        }
    })
    .await;
}

#[tokio::test]
async fn a_transfer_to_a_non_websocket_url_is_ignored() {
    guarded(async {
        let mut source = TestHost::start().await;
        let url = source.url.clone();
        let client = tokio::spawn(async move { connect(&url, options("t1")).await });
        let mut hs = source.accept().await;
        hs.hello().await;
        hs.admit_at(8, 1, &[1; 4], 100).await;
        let (mut conn, _) = client.await.unwrap().unwrap();
        assert!(matches!(conn.recv().await, Some(Event::Delta(_))));
        hs.send(
            &ServerMessage::Transfer(Transfer {
                zone_id: "lobby".into(),
                ticket: "cred".into(),
                url: "https://elsewhere/zones/lobby".into(),
            }),
            None,
        )
        .await;
        let Some(Event::Transfer(TransferEvent::Failed { retrying, .. })) = conn.recv().await
        else {
            panic!("the refusal is reported")
        };
        assert!(retrying, "the session goes on where it was");
        // Still the same session: a Delta still arrives on it.
        hs.delta(support::ack_only(101, 0), &[(5, 0), (9, 0)]).await;
        assert!(matches!(conn.recv().await, Some(Event::Delta(_))));
    })
    .await;
}

#[tokio::test]
async fn a_transfer_on_a_session_below_version_8_is_out_of_place() {
    guarded(async {
        let mut source = TestHost::start().await;
        let target = TestHost::start().await;
        let url = source.url.clone();
        let client = tokio::spawn(async move { connect(&url, options("t1")).await });
        let mut hs = source.accept().await;
        hs.hello().await;
        hs.admit_at(7, 1, &[1; 4], 100).await;
        let (mut conn, _) = client.await.unwrap().unwrap();
        assert!(matches!(conn.recv().await, Some(Event::Delta(_))));
        hs.send(
            &ServerMessage::Transfer(Transfer {
                zone_id: "lobby".into(),
                ticket: "cred".into(),
                url: format!("{}/zones/lobby", target.base),
            }),
            None,
        )
        .await;
        // The session is dropped as broken and resumed at the source, never moved.
        let mut again = source.accept().await;
        let hello = again.hello().await;
        assert_eq!(hello.reconnect_token, vec![1; 4], "a resume at the source");
        assert_ne!(hello.ticket, "cred", "the credential is never used");
    })
    .await;
}
