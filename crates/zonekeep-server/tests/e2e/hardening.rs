//! What a hostile or broken client cannot do to the host: hold slots with silent sockets, speak
//! HTTP/2, make it answer Pings without bound, take a player slot back with an observer ticket,
//! or stop reading unnoticed; and what an ordinary vanished client is counted as.

use futures_util::SinkExt;
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_tungstenite::tungstenite::Message;
use zonekeep_protocol::messages::{KickCode, ServerMessage};
use zonekeep_server::ServerConfig;

use crate::common::*;

/// The address the misbehaving clients of these tests come from; metrics are read from
/// [`LOOPBACK`], which has slots of its own.
const OTHER: [u8; 4] = [127, 0, 0, 2];

/// Reads until the host closes the socket (EOF or reset); panics if it never does.
async fn closed_by_host(s: &mut tokio::net::TcpStream) {
    let mut buf = [0u8; 512];
    loop {
        let r = tokio::time::timeout(std::time::Duration::from_secs(10), s.read(&mut buf))
            .await
            .expect("the host never closed the socket");
        match r {
            Ok(0) | Err(_) => return,
            Ok(_) => continue,
        }
    }
}

#[tokio::test]
async fn silent_sockets_are_counted_then_closed_and_free_their_address() {
    const CAP: usize = 3;
    let server = TestServer::start_with(ServerConfig {
        max_connections_per_ip: CAP,
        header_read_timeout_ms: 200,
        ..base_config()
    })
    .await;
    // More silent sockets than the address may hold: 2 × CAP are admitted (CAP normal, CAP
    // courtesy slots), the rest closed at accept.
    let mut silent = Vec::new();
    for _ in 0..2 * CAP + 2 {
        silent.push(tcp_from(&server, OTHER).await);
    }
    eventually(
        "the admitted silent sockets are in the connections gauge",
        || async { metric(&server, "zonekeep_connections").await >= (2 * CAP) as f64 },
    )
    .await;
    for s in &mut silent {
        closed_by_host(s).await;
    }
    eventually(
        "every admitted silent socket is counted as timed out",
        || async {
            metric(
                &server,
                "zonekeep_connections_refused_total{reason=\"header_timeout\"}",
            )
            .await
                >= (2 * CAP) as f64
        },
    )
    .await;
    // The address has its slots back: a WebSocket from it joins.
    let stream = tokio_tungstenite::MaybeTlsStream::Plain(tcp_from(&server, OTHER).await);
    let (mut ws, _) = tokio_tungstenite::client_async(server.url("quiet"), stream)
        .await
        .unwrap();
    send(&mut ws, hello_bytes(&ticket("after", "quiet"), &[])).await;
    assert!(matches!(
        recv(&mut ws, &empty_schema()).await,
        Seen::Msg(ServerMessage::Welcome(_))
    ));
    server.stop().await;
}

#[tokio::test]
async fn an_http2_preface_is_refused_with_a_close() {
    let server = TestServer::start().await;
    let mut s = tcp_from(&server, OTHER).await;
    s.write_all(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")
        .await
        .unwrap();
    closed_by_host(&mut s).await;
    eventually("the refusal is counted", || async {
        metric(
            &server,
            "zonekeep_connections_refused_total{reason=\"http2\"}",
        )
        .await
            == 1.0
    })
    .await;
    server.stop().await;
}

#[tokio::test]
async fn plain_http_over_the_per_ip_cap_answers_429() {
    let server = TestServer::start_with(ServerConfig {
        max_connections_per_ip: 1,
        ..base_config()
    })
    .await;
    let stream = tokio_tungstenite::MaybeTlsStream::Plain(tcp_from(&server, OTHER).await);
    let (mut ws, _) = tokio_tungstenite::client_async(server.url("cap"), stream)
        .await
        .unwrap();
    send(&mut ws, hello_bytes(&ticket("holder", "cap"), &[])).await;
    assert!(matches!(
        recv(&mut ws, &empty_schema()).await,
        Seen::Msg(ServerMessage::Welcome(_))
    ));
    let (status, body) = http_from(&server, OTHER, "GET", "/healthz", None, None).await;
    assert_eq!(status, 429, "{body}");
    assert!(body.contains("too_many_connections"), "{body}");
    // Another address is served as usual.
    let (status, _) = http(&server, "GET", "/healthz", None, None).await;
    assert_eq!(status, 200);
    server.stop().await;
}

#[tokio::test]
async fn excess_pings_get_no_pong_and_sustained_ping_abuse_is_kicked() {
    let server = TestServer::start_with(ServerConfig {
        ping_rate: 0.01, // one token per 100 s: only the burst is answered
        ping_burst: 3,
        abuse_rate: 0.01,
        abuse_burst: 5,
        ..base_config()
    })
    .await;
    let (mut ws, _) = join(&server, "pings", &ticket("pinger", "pings")).await;
    for t in 1..=3 {
        send_ping(&mut ws, t).await;
    }
    let mut answered = 0;
    while answered < 3 {
        if let Seen::Msg(ServerMessage::Pong(_)) = recv(&mut ws, &empty_schema()).await {
            answered += 1;
        }
    }
    for t in 100..=103 {
        send_ping(&mut ws, t).await;
    }
    eventually("the excess pings are counted", || async {
        metric(&server, "zonekeep_pings_rate_limited_total").await == 4.0
    })
    .await;
    // Keep flooding: the abuse budget (5) runs out and the connection is kicked.
    for t in 200..=210 {
        send_ping(&mut ws, t).await;
    }
    let code = loop {
        match recv(&mut ws, &empty_schema()).await {
            Seen::Msg(ServerMessage::Pong(p)) => {
                panic!("a rate-limited ping was answered: {}", p.client_time)
            }
            Seen::Msg(ServerMessage::Kick(k)) => break k.code,
            Seen::Msg(_) => continue,
            Seen::Closed => panic!("closed without a Kick"),
        }
    };
    assert_eq!(code, KickCode::RATE_LIMITED);
    server.stop().await;
}

#[tokio::test]
async fn an_observer_ticket_does_not_resume_a_player() {
    let server = TestServer::start().await;
    let (mut ws, welcome) = join(&server, "roles", &ticket("rita", "roles")).await;
    ws.close(None).await.unwrap();
    drop(ws);
    let mut oc = claims("rita", "roles");
    oc["role"] = json!("observer");
    let code = refused(
        &server,
        "roles",
        hello_bytes(&sign(&oc), &welcome.reconnect_token),
    )
    .await;
    assert_eq!(code, KickCode::RECONNECT_REFUSED);
    // The token stays its owner's: a player ticket resumes the same player.
    let (_ws, again) = join_with_token(
        &server,
        "roles",
        &ticket("rita", "roles"),
        &welcome.reconnect_token,
    )
    .await;
    assert_eq!(again.player_id, welcome.player_id);
    assert_eq!(again.role, zonekeep_protocol::messages::Role::Player);
    server.stop().await;
}

#[tokio::test]
async fn a_client_that_vanishes_without_a_close_is_a_disconnect_not_a_protocol_error() {
    let server = TestServer::start().await;
    // Before its Hello, then after joining: no Close frame, the TCP connection just ends.
    drop(connect(&server, "gone").await);
    eventually("the early drop is counted as a disconnect", || async {
        metric(&server, "zonekeep_disconnects_total{how=\"dropped\"}").await == 1.0
    })
    .await;
    let (ws, _) = join(&server, "gone", &ticket("ghost", "gone")).await;
    drop(ws);
    eventually("the drop is counted as a disconnect", || async {
        metric(&server, "zonekeep_disconnects_total{how=\"dropped\"}").await == 2.0
    })
    .await;
    assert_eq!(
        metric(&server, "zonekeep_kicks_total{code=\"protocol_error\"}").await,
        0.0
    );
    let (mut ws, _) = join(&server, "gone", &ticket("polite", "gone")).await;
    ws.close(None).await.unwrap();
    eventually("a Close is counted as one too", || async {
        metric(&server, "zonekeep_disconnects_total{how=\"closed\"}").await == 1.0
    })
    .await;
    server.stop().await;
}

#[tokio::test]
async fn a_client_that_never_reads_is_kicked_as_a_slow_consumer_in_a_light_zone() {
    let server = TestServer::start_with(ServerConfig {
        read_progress_timeout_ms: 300,
        ..base_config()
    })
    .await;
    // `dots` sends little: the kernel buffers alone would take minutes to fill.
    let (mut ws, _) = join(&server, "light", &ticket("deaf", "light")).await;
    // Stop reading (the client's WebSocket stack answers Pings only as it reads); keep sending
    // so that the idle timeout is not what ends the session.
    let mut kicked = false;
    for seq in 1..=200 {
        let frame =
            zonekeep_protocol::messages::ClientMessage::Input(zonekeep_protocol::messages::Input {
                seq,
                view_tick: 0,
                payload: vec![1, 0],
            })
            .to_bytes()
            .unwrap();
        // `feed` + `flush` write without reading anything.
        let _ = ws.feed(Message::Binary(frame.into())).await;
        let _ = ws.flush().await;
        if metric(&server, "zonekeep_kicks_total{code=\"slow_consumer\"}").await == 1.0 {
            kicked = true;
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert!(kicked, "the client that stopped reading was never kicked");
    assert_eq!(expect_kick(&mut ws).await, KickCode::SLOW_CONSUMER);
    server.stop().await;
}

#[tokio::test]
async fn a_request_whose_body_never_arrives_is_answered_408_and_closed() {
    let server = TestServer::start_with(ServerConfig {
        request_timeout_ms: 300,
        ..base_config()
    })
    .await;
    let mut s = tcp_from(&server, OTHER).await;
    s.write_all(
        format!(
            "POST /admin/zones HTTP/1.1\r\nHost: test\r\nAuthorization: Bearer {ADMIN}\r\n\
             Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{{\"id\""
        )
        .as_bytes(),
    )
    .await
    .unwrap();
    let mut answer = Vec::new();
    // Read to the end: the host closes after answering (a reset after the answer is fine too).
    let _ = tokio::time::timeout(
        std::time::Duration::from_secs(10),
        s.read_to_end(&mut answer),
    )
    .await
    .expect("the host never answered the stalled request");
    let answer = String::from_utf8_lossy(&answer);
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
    server.stop().await;
}

#[tokio::test]
async fn an_idle_kept_alive_connection_is_closed_without_being_counted_as_silent() {
    let server = TestServer::start_with(ServerConfig {
        header_read_timeout_ms: 200,
        ..base_config()
    })
    .await;
    let mut s = tcp_from(&server, OTHER).await;
    s.write_all(b"GET /healthz HTTP/1.1\r\nHost: test\r\n\r\n")
        .await
        .unwrap();
    let mut head = [0u8; 12];
    s.read_exact(&mut head).await.unwrap();
    assert_eq!(&head, b"HTTP/1.1 200");
    // No second request: the connection idles and the host closes it.
    closed_by_host(&mut s).await;
    assert_eq!(
        metric(
            &server,
            "zonekeep_connections_refused_total{reason=\"header_timeout\"}"
        )
        .await,
        0.0
    );
    server.stop().await;
}
