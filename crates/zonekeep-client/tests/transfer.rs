//! Following a Transfer (PROTOCOL.md §5.3.2): a new connection with the credential while the old
//! one stays open, the new zone's Welcome and BASELINE in one event, the old connection closed
//! after it; a Transfer to a URL that is not a WebSocket URL is ignored, and one on a session
//! below version 8 is a protocol error. A failed attempt is retried through the session's entry
//! URL with the same credential (and the new zone's reconnect token once a Welcome gave one);
//! a credential already used, or past its expiry, ends the move. Hand-driven hosts on loopback
//! play the source and the target.

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
        let to = format!("{}/zones/lobby", target.base);
        let (mut conn, mut hs, first) = moving(&mut source, &to, "cred.e30.sig").await;
        let mut replica = Replica::new(ReplicaConfig::for_zone(30, 1));
        replica.apply(&first);
        let mut ht = target.accept().await;
        assert_eq!(ht.target, "/zones/lobby");
        let hello = ht.hello().await;
        assert_eq!(
            hello.ticket, "cred.e30.sig",
            "the credential, not the old ticket"
        );
        assert!(hello.reconnect_token.is_empty());
        assert_eq!(hello.versions, vec![5, 7, 8, 9, 10]);
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

/// A source session on protocol version 8 whose host then sends a Transfer to zone `lobby` at
/// `to` with `credential`; returns the client's connection (its Started event taken, from
/// `z1` to `lobby`), the source's end of the session and the session's first Delta.
async fn moving(
    source: &mut TestHost,
    to: &str,
    credential: &str,
) -> (
    zonekeep_client::Connection,
    support::HostConn,
    zonekeep_client::Patch,
) {
    let url = source.url.clone();
    let client = tokio::spawn(async move { connect(&url, options("t1")).await });
    let mut hs = source.accept().await;
    hs.hello().await;
    hs.admit_at(8, 1, &[1; 4], 100).await;
    let (mut conn, _) = client.await.unwrap().unwrap();
    let Some(Event::Delta(first)) = conn.recv().await else {
        panic!("the BASELINE first")
    };
    hs.send(
        &ServerMessage::Transfer(Transfer {
            zone_id: "lobby".into(),
            ticket: credential.into(),
            url: to.into(),
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
    (conn, hs, first)
}

/// A credential whose payload says it expires at `exp` (Unix seconds); the client reads the
/// claim to know how long it may retry, the host alone verifies it.
fn credential_expiring(exp: u64) -> String {
    use base64::Engine as _;
    let claims = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .encode(format!("{{\"exp\":{exp}}}").as_bytes());
    format!("e30.{claims}.sig")
}

fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

#[tokio::test]
async fn a_refused_attempt_is_retried_through_the_entry_and_a_dropped_arrival_resumes_with_its_token(
) {
    guarded(async {
        let mut source = TestHost::start().await;
        let mut target = TestHost::start().await;
        let credential = credential_expiring(unix_now() + 600);
        let to = format!("{}/zones/lobby", target.base);
        let (mut conn, mut hs, _) = moving(&mut source, &to, &credential).await;

        // The target is full for a moment: the attempt fails and is retried.
        let mut first = target.accept().await;
        assert_eq!(first.hello().await.ticket, credential);
        first
            .kick(zonekeep_protocol::messages::KickCode::ZONE_FULL, "full")
            .await;
        let Some(Event::Transfer(TransferEvent::Failed { retrying, reason })) = conn.recv().await
        else {
            panic!("the failed attempt is reported")
        };
        assert!(retrying, "{reason}");

        // The retry goes through the session's entry URL, now naming the new zone (a fleet's
        // host redirects it to the owner), with the same credential.
        let mut second = source.accept().await;
        assert_eq!(second.target, "/zones/lobby");
        let hello = second.hello().await;
        assert_eq!(hello.ticket, credential);
        assert!(hello.reconnect_token.is_empty());
        // Welcomed, then the connection drops before its BASELINE: the move goes on.
        second.welcome(7, &[7; 4], 5000).await;
        drop(second);
        let Some(Event::Transfer(TransferEvent::Failed { retrying, reason })) = conn.recv().await
        else {
            panic!("the lost arrival is reported")
        };
        assert!(retrying, "{reason}");

        // The next attempt carries the new zone's reconnect token: the same player resumes.
        let mut third = source.accept().await;
        let hello = third.hello().await;
        assert_eq!(hello.ticket, credential);
        assert_eq!(hello.reconnect_token, vec![7; 4]);
        third.admit_at(8, 7, &[7; 4], 5001).await;
        let Some(Event::Transfer(TransferEvent::Arrived { welcome, .. })) = conn.recv().await
        else {
            panic!("the arrival")
        };
        assert_eq!(welcome.player_id, 7);
        // Only then is the source connection closed by the client.
        while let Some(m) = hs.recv().await {
            assert!(matches!(m, ClientMessage::Ping(_)), "{m:?}");
        }
    })
    .await;
}

#[tokio::test]
async fn a_credential_already_used_ends_the_move() {
    guarded(async {
        let mut source = TestHost::start().await;
        let mut target = TestHost::start().await;
        let to = format!("{}/zones/lobby", target.base);
        let (mut conn, _hs, _) = moving(&mut source, &to, "cred.e30.sig").await;
        let mut ht = target.accept().await;
        ht.hello().await;
        ht.kick(
            zonekeep_protocol::messages::KickCode::TICKET_REPLAYED,
            "used",
        )
        .await;
        assert_eq!(
            conn.recv().await,
            Some(Event::Transfer(TransferEvent::Failed {
                reason: "the transfer credential was already used".into(),
                retrying: false,
            }))
        );
        let Some(Event::Closed(zonekeep_client::CloseReason::Kicked(k))) = conn.recv().await else {
            panic!("the connection ends with the host's kick")
        };
        assert_eq!(
            k.code,
            zonekeep_protocol::messages::KickCode::TICKET_REPLAYED
        );
    })
    .await;
}

/// The player's character went into another zone (another game or device) while the move was
/// under way (PROTOCOL.md §5.3 "Characters"): the move ends, and the session with it.
#[tokio::test]
async fn a_character_moved_elsewhere_ends_the_move_and_the_session() {
    guarded(async {
        let mut source = TestHost::start().await;
        let mut target = TestHost::start().await;
        let to = format!("{}/zones/lobby", target.base);
        let (mut conn, _hs, _) = moving(&mut source, &to, "cred.e30.sig").await;
        let mut ht = target.accept().await;
        ht.hello().await;
        ht.kick(
            zonekeep_protocol::messages::KickCode::CHARACTER_MOVED,
            "your character joined zone dungeon-2",
        )
        .await;
        let Some(Event::Transfer(TransferEvent::Failed { retrying, .. })) = conn.recv().await
        else {
            panic!("the move fails")
        };
        assert!(!retrying);
        let Some(Event::Closed(zonekeep_client::CloseReason::CharacterMoved(k))) =
            conn.recv().await
        else {
            panic!("the connection ends because the character moved")
        };
        assert_eq!(
            k.code,
            zonekeep_protocol::messages::KickCode::CHARACTER_MOVED
        );
        ht.drain();
        assert!(
            tokio::time::timeout(std::time::Duration::from_millis(300), target.accept())
                .await
                .is_err(),
            "no other attempt at the target"
        );
    })
    .await;
}

#[tokio::test]
async fn no_attempt_is_made_past_the_credentials_expiry() {
    guarded(async {
        let mut source = TestHost::start().await;
        let mut target = TestHost::start().await;
        let to = format!("{}/zones/lobby", target.base);
        let credential = credential_expiring(unix_now().saturating_sub(1));
        let (mut conn, _hs, _) = moving(&mut source, &to, &credential).await;
        let mut ht = target.accept().await;
        ht.hello().await;
        ht.kick(zonekeep_protocol::messages::KickCode::ZONE_FULL, "full")
            .await;
        assert_eq!(
            conn.recv().await,
            Some(Event::Transfer(TransferEvent::Failed {
                reason: "the transfer credential expired".into(),
                retrying: false,
            }))
        );
        assert!(matches!(conn.recv().await, Some(Event::Closed(_))));
    })
    .await;
}
