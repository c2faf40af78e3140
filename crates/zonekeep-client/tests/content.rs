//! Content versions (PROTOCOL.md §4.1.2): the Hello carries the client's, the Welcome the host's,
//! and Kick CONTENT_OUTDATED is final — at the handshake (`ClientError::ContentOutdated`) and on a
//! reconnect (`CloseReason::ContentOutdated`, no further attempt) — against a hand-driven host and
//! the real one.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::time::Duration;

use support::{guarded, options, welcome, TestHost};
use zonekeep_client::{connect, ClientError, CloseReason, ConnectOptions, Connection, Event};
use zonekeep_core::Role;
use zonekeep_protocol::messages::{KickCode, ServerMessage};
use zonekeep_server::examples::Dots;
use zonekeep_server::ticket::MintRequest;
use zonekeep_server::{Host, Secret, ServerConfig};

async fn next(conn: &mut Connection) -> Event {
    conn.recv().await.expect("event channel ended")
}

fn with_content(ticket: &str, content_version: &str) -> ConnectOptions {
    let mut o = options(ticket);
    o.content_version = content_version.into();
    o
}

#[tokio::test]
async fn the_hello_and_welcome_carry_content_versions_and_an_outdated_client_stops_at_once() {
    guarded(async {
        let mut host = TestHost::start().await;
        // The Hello offers the newest version with the client's content; the Welcome's is exposed.
        let url = host.url.clone();
        let client = tokio::spawn(async move { connect(&url, with_content("t1", "1.4.0")).await });
        let mut hc = host.accept().await;
        let hello = hc.hello().await;
        assert_eq!(hello.versions, vec![5, 7, 8, 9, 10]);
        assert_eq!(hello.content_version, "1.4.0");
        let mut w = welcome(7, b"tok-1", 100);
        w.content_version = "1.4.2".into();
        hc.send(&ServerMessage::Welcome(w), None).await;
        hc.delta(support::baseline(100), &[]).await;
        let (conn, welcome) = client.await.unwrap().unwrap();
        assert_eq!(welcome.content_version, "1.4.2");
        hc.drain();
        conn.close().await;

        // Refused at the handshake: a typed error, and no second attempt.
        let url = host.url.clone();
        let client = tokio::spawn(async move { connect(&url, with_content("t2", "1.3")).await });
        let mut hc = host.accept().await;
        hc.hello().await;
        hc.kick(
            KickCode::CONTENT_OUTDATED,
            "this host needs content version 1.4 or newer",
        )
        .await;
        hc.drain();
        let e = client.await.unwrap().unwrap_err();
        assert!(e.to_string().contains("1.4 or newer"), "{e}");
        let ClientError::ContentOutdated(k) = e else {
            panic!("expected ContentOutdated, got {e:?}")
        };
        assert_eq!(k.code, KickCode::CONTENT_OUTDATED);
    })
    .await;
}

#[tokio::test]
async fn content_outdated_on_a_reconnect_ends_the_connection_without_retrying() {
    guarded(async {
        let mut host = TestHost::start().await;
        let url = host.url.clone();
        let client = tokio::spawn(async move {
            connect(
                &url,
                with_content("t1", "1.3")
                    .with_fresh_ticket(|| async { Ok::<_, String>("fresh".to_owned()) }),
            )
            .await
        });
        let mut hc = host.accept().await;
        hc.hello().await;
        hc.admit(7, b"tok-1", 100).await;
        let (mut conn, _) = client.await.unwrap().unwrap();
        assert!(matches!(next(&mut conn).await, Event::Delta(_)));

        // The game was updated while the transport was down: the new host refuses the resume.
        conn.drop_transport().await.unwrap();
        drop(hc);
        assert!(matches!(next(&mut conn).await, Event::Disconnected { .. }));
        let mut hc = host.accept().await;
        let hello = hc.hello().await;
        assert_eq!(hello.reconnect_token, b"tok-1");
        assert_eq!(hello.content_version, "1.3");
        hc.kick(
            KickCode::CONTENT_OUTDATED,
            "this host needs content version 1.4 or newer",
        )
        .await;
        hc.drain();
        match next(&mut conn).await {
            Event::Closed(CloseReason::ContentOutdated(k)) => {
                assert_eq!(k.code, KickCode::CONTENT_OUTDATED);
                assert!(k.reason.contains("1.4"), "{}", k.reason);
            }
            other => panic!("expected Closed(ContentOutdated), got {other:?}"),
        }
        assert!(conn.recv().await.is_none(), "nothing after Closed");
        // Neither a fresh join nor another resume was attempted.
        assert!(
            tokio::time::timeout(Duration::from_millis(200), host.accept())
                .await
                .is_err(),
            "no further connection attempt"
        );
        assert_eq!(conn.counters().reconnects, 0);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_real_host_refuses_outdated_content_and_welcomes_current_content() {
    let config = ServerConfig {
        listen: "127.0.0.1:0".parse().unwrap(),
        sim_threads: 1,
        ticket_secret: Some(Secret::new("e2e-client-secret-0123456789abcdef")),
        content_version: "1.5.0".into(),
        min_content_version: Some("1.4".into()),
        ..ServerConfig::default()
    };
    let host = Host::builder()
        .config(config)
        .zone::<Dots>("dots")
        .build()
        .unwrap();
    let ticket = host
        .mint_ticket(&MintRequest {
            sub: "alice".into(),
            zone: "shelf".into(),
            role: Role::Player,
            ttl_secs: 60,
            params: None,
            claims: Default::default(),
        })
        .unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("ws://{}/zones/shelf", listener.local_addr().unwrap());
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(async move {
        host.serve(listener, async {
            let _ = stop_rx.await;
        })
        .await
        .unwrap();
    });

    let body = async {
        match connect(&url, with_content(&ticket, "1.3.9")).await {
            Err(ClientError::ContentOutdated(k)) => {
                assert!(k.reason.contains("1.4 or newer"), "{}", k.reason)
            }
            other => panic!("expected ContentOutdated, got {other:?}"),
        }
        // The refused ticket was not spent: the updated client joins with it.
        let (conn, welcome) = connect(&url, with_content(&ticket, "1.4.1")).await.unwrap();
        // The newest version this client offers: the host speaks chat's version 11 too, which
        // this client does not offer yet.
        assert_eq!(
            welcome.version,
            zonekeep_protocol::messages::CHARACTER_PROTOCOL
        );
        assert_eq!(welcome.content_version, "1.5.0");
        conn.close().await;
    };
    tokio::time::timeout(Duration::from_secs(30), body)
        .await
        .expect("test hung");
    let _ = stop_tx.send(());
    server.await.unwrap();
}
