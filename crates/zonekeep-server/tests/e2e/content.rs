//! Content versions (PROTOCOL.md §4.1.2): a host with a minimum refuses older content with
//! CONTENT_OUTDATED (and clients below protocol version 5 with VERSION_MISMATCH) before the ticket
//! is verified or spent; Welcome (version 5) carries the host's content version; a host without a
//! minimum admits everyone.

use futures_util::StreamExt;
use tokio_tungstenite::tungstenite::Message;
use zonekeep_protocol::messages::{ClientMessage, Hello, Kick, KickCode, ServerMessage, Welcome};
use zonekeep_server::ServerConfig;

use crate::common::*;

fn hello(versions: &[u32], ticket: &str, content_version: &str) -> Vec<u8> {
    ClientMessage::Hello(Hello {
        versions: versions.to_vec(),
        ticket: ticket.into(),
        reconnect_token: vec![],
        content_version: content_version.into(),
        resume_from: None,
    })
    .to_bytes()
    .unwrap()
}

/// A host running content 1.5.0 that admits clients from `min` on.
fn config(min: Option<&str>) -> ServerConfig {
    ServerConfig {
        content_version: "1.5.0".into(),
        min_content_version: min.map(str::to_owned),
        ..base_config()
    }
}

/// Sends `hello` and expects a Kick, then a Close with 4000 + its code (PROTOCOL.md §6).
async fn kicked(server: &TestServer, zone: &str, hello: Vec<u8>) -> Kick {
    let mut ws = connect(server, zone).await;
    send(&mut ws, hello).await;
    let kick = match recv(&mut ws, &empty_schema()).await {
        Seen::Msg(ServerMessage::Kick(k)) => k,
        other => panic!("expected a Kick, got {other:?}"),
    };
    let close = tokio::time::timeout(HANG_GUARD, ws.next())
        .await
        .expect("no Close from the host within the hang guard");
    match close {
        Some(Ok(Message::Close(Some(frame)))) => {
            assert_eq!(u16::from(frame.code), 4000 + kick.code.0, "close code")
        }
        other => panic!("expected a Close after the Kick, got {other:?}"),
    }
    let _ = ws.close(None).await;
    kick
}

/// Sends `hello` and expects a Welcome and a BASELINE Delta.
async fn welcomed(server: &TestServer, zone: &str, hello: Vec<u8>) -> (Ws, Welcome) {
    let mut ws = connect(server, zone).await;
    send(&mut ws, hello).await;
    let welcome = match recv(&mut ws, &empty_schema()).await {
        Seen::Msg(ServerMessage::Welcome(w)) => w,
        other => panic!("expected Welcome, got {other:?}"),
    };
    match recv(&mut ws, &welcome.schema).await {
        Seen::Msg(ServerMessage::Delta(d)) => assert!(d.baseline, "first Delta is a BASELINE"),
        other => panic!("expected a BASELINE Delta, got {other:?}"),
    }
    (ws, welcome)
}

const REFUSED: &str = "zonekeep_connections_refused_total{reason=\"content_outdated\"}";

#[tokio::test]
async fn outdated_content_is_refused_before_the_ticket_is_spent() {
    let server = TestServer::start_with(config(Some("1.4"))).await;
    let t = ticket("ada", "shelf");

    // Older, missing and malformed content: CONTENT_OUTDATED, naming the version the host needs.
    for (content, detail) in [
        ("1.3.9", "the client has 1.3.9"),
        ("", "sent none"),
        ("1.4-beta", "not a dotted number"),
    ] {
        let k = kicked(&server, "shelf", hello(&[5], &t, content)).await;
        assert_eq!(k.code, KickCode::CONTENT_OUTDATED, "{content:?}");
        assert!(
            k.reason.contains("needs content version 1.4 or newer") && k.reason.contains(detail),
            "{content:?}: {}",
            k.reason
        );
    }
    // Decided before the ticket is looked at: garbage is refused for its content, not its ticket.
    let k = kicked(&server, "shelf", hello(&[4, 5], "garbage", "1.0")).await;
    assert_eq!(k.code, KickCode::CONTENT_OUTDATED);
    assert_eq!(metric(&server, REFUSED).await, 4.0);
    assert_eq!(
        metric(&server, "zonekeep_kicks_total{code=\"content_outdated\"}").await,
        4.0
    );

    // The same ticket, its jti never spent, joins with current content (equal to the minimum,
    // written another way) and the Welcome says which content the host runs.
    let (_ws, w) = welcomed(&server, "shelf", hello(&[4, 5], &t, "1.4.0")).await;
    assert_eq!(w.version, 5);
    assert_eq!(w.content_version, "1.5.0");
    // Now it is spent: the join used it.
    let k = kicked(&server, "shelf", hello(&[5], &t, "1.5.0")).await;
    assert_eq!(k.code, KickCode::TICKET_REPLAYED);

    // Newer content than the host's is not the host's business: admitted.
    let (_newer, w) = welcomed(
        &server,
        "shelf",
        hello(&[5], &ticket("bo", "shelf"), "1.10"),
    )
    .await;
    assert_eq!(w.content_version, "1.5.0");
    assert_eq!(metric(&server, REFUSED).await, 4.0);
    server.stop().await;
}

#[tokio::test]
async fn a_client_below_version_5_gets_version_mismatch_from_a_host_that_checks_content() {
    let server = TestServer::start_with(config(Some("1.4"))).await;
    let t = ticket("cy", "shelf");
    // Even with good content: a version 4 client could not read CONTENT_OUTDATED.
    for versions in [&[4][..], &[2, 3, 4]] {
        let k = kicked(&server, "shelf", hello(versions, &t, "1.5.0")).await;
        assert_eq!(k.code, KickCode::VERSION_MISMATCH, "{versions:?}");
        assert!(k.reason.contains("protocol version 5"), "{}", k.reason);
    }
    assert_eq!(metric(&server, REFUSED).await, 2.0);
    // Its ticket was not spent either.
    let (_ws, w) = welcomed(&server, "shelf", hello(&[4, 5], &t, "1.5.0")).await;
    assert_eq!((w.version, w.content_version.as_str()), (5, "1.5.0"));
    server.stop().await;
}

#[tokio::test]
async fn a_host_without_a_minimum_admits_every_client() {
    let server = TestServer::start_with(config(None)).await;
    let mut sessions = Vec::new();
    for (i, (versions, content)) in [
        (&[5][..], ""),
        (&[5], "not a version"),
        (&[5], "0.1"),
        (&[4], "1.0"),
        (&[2], ""),
    ]
    .into_iter()
    .enumerate()
    {
        let t = ticket(&format!("p{i}"), "open");
        let (ws, w) = welcomed(&server, "open", hello(versions, &t, content)).await;
        let version = *versions.last().unwrap();
        assert_eq!(w.version, version);
        // Only a version 5 Welcome carries the host's content version.
        let expected = if version >= 5 { "1.5.0" } else { "" };
        assert_eq!(w.content_version, expected, "{versions:?} {content:?}");
        sessions.push(ws);
    }
    assert_eq!(metric(&server, REFUSED).await, 0.0);
    server.stop().await;

    // A host with no content version at all (the default) welcomes with none.
    let server = TestServer::start().await;
    let (_ws, w) = join(&server, "plain", &ticket("dee", "plain")).await;
    assert_eq!(
        (w.version, w.content_version.as_str()),
        (zonekeep_protocol::limits::PROTOCOL_VERSION, "")
    );
    server.stop().await;
}
