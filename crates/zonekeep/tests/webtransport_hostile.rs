//! The WebTransport endpoint (PROTOCOL.md §1.1) of the real binary under hostile QUIC traffic:
//! Initials from addresses that never answer (as a forged source address never does), handshakes
//! that stall after proving their address, clients slow to send their Hello, a datagram sent
//! before the Hello, a control-stream message split around datagrams, and streams opened past
//! the endpoint's bound.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use serde_json::{json, Value};
use tokio_tungstenite::tungstenite::Message;
use wtransport::{ClientConfig, Connection, Endpoint};
use zonekeep_protocol::messages::{ClientMessage, Hello, KickCode, ServerMessage};

use support::quic_prober::{is_retry, Prober};
use support::raw_wt::RawSession;
use support::{Server, StoreSpec};

/// A host in dev mode (WebTransport on, with a pinned development certificate) with `extra` flags.
async fn host(dir: &tempfile::TempDir, extra: &[&str]) -> Server {
    let mut flags = vec!["--dev"];
    flags.extend_from_slice(extra);
    let store = StoreSpec::Sqlite(dir.path().join("zonekeep.db"));
    Server::start(&store, &flags, &dir.path().join("host.log")).await
}

/// The endpoint the host publishes: its UDP address and the certificate hash to pin.
async fn published(server: &Server) -> (SocketAddr, [u8; 32]) {
    use base64::Engine;
    let info: Value = serde_json::from_str(&server.get("/webtransport").await).unwrap();
    let url = info["url"].as_str().unwrap();
    let port: u16 = url.rsplit(':').next().unwrap().parse().unwrap();
    let hash = base64::engine::general_purpose::STANDARD
        .decode(info["certificate_hashes"][0]["value"].as_str().unwrap())
        .unwrap()
        .try_into()
        .unwrap();
    (SocketAddr::from(([127, 0, 0, 1], port)), hash)
}

/// A ticket for the dev `dots` zone `zone`.
fn dots_ticket(sub: &str, zone: &str) -> String {
    let exp = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
        + 120;
    support::sign(&json!({"sub": sub, "zone": zone, "exp": exp, "jti": sub, "kind": "dots"}))
}

/// Whether a WebSocket player is admitted: it gets its Welcome.
async fn websocket_player_admitted(server: &Server, sub: &str) -> Result<(), String> {
    let url = format!("ws://{}/zones/d-ws", server.addr);
    let (mut ws, _) = tokio_tungstenite::connect_async(&url)
        .await
        .map_err(|e| format!("refused at connect: {e}"))?;
    let hello = ClientMessage::Hello(Hello {
        versions: vec![zonekeep_protocol::limits::PROTOCOL_VERSION],
        ticket: dots_ticket(sub, "d-ws"),
        reconnect_token: vec![],
        content_version: String::new(),
        resume_from: None,
    });
    use futures_util::SinkExt;
    ws.send(Message::Binary(hello.to_bytes().unwrap().into()))
        .await
        .map_err(|e| format!("refused at Hello: {e}"))?;
    loop {
        match tokio::time::timeout(Duration::from_secs(10), ws.next()).await {
            Ok(Some(Ok(Message::Binary(b)))) => match ServerMessage::decode(&b, None) {
                Ok(ServerMessage::Welcome(_)) => return Ok(()),
                other => return Err(format!("not welcomed: {other:?}")),
            },
            Ok(Some(Ok(_))) => {}
            other => return Err(format!("closed before a Welcome: {other:?}")),
        }
    }
}

/// Polls `cond` every 50 ms until it holds, for at most 10 s.
async fn eventually<F, Fut>(what: &str, mut cond: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = Instant::now() + Duration::from_secs(10);
    while !cond().await {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn initials_that_never_answer_take_no_connection_slot() {
    let dir = tempfile::tempdir().unwrap();
    let server = host(&dir, &["--max-connections", "64"]).await;
    let (udp, _) = published(&server).await;

    // 100 Initials, 120 kB, none ever answered: on a forged source address the answers go to
    // someone else.
    // Ten at a time, each ten's answers read before the next, so no socket buffer overflows.
    let mut prober = Prober::new(udp).await;
    let mut replies = Vec::new();
    for _ in 0..10 {
        for _ in 0..10 {
            prober.initial().await;
        }
        let wanted = replies.len() + 10;
        while replies.len() < wanted {
            match prober.receive(Duration::from_secs(5)).await {
                Some(d) => replies.push(d),
                None => break,
            }
        }
    }

    // Players are still served, and the host still answers.
    websocket_player_admitted(&server, "ws-after-initials")
        .await
        .expect("a WebSocket player is admitted while Initials arrive");
    assert_eq!(server.get("/healthz").await, "ok", "/healthz answers");
    // Each Initial was answered with a Retry and nothing else: the host keeps no state for an
    // address that has not proved it receives.
    assert_eq!(replies.len(), 100, "every Initial is answered");
    assert!(replies.iter().all(|d| is_retry(d)), "answered with Retries");
    assert_eq!(
        server.metric("zonekeep_webtransport_retries_total").await,
        100.0
    );
    assert_eq!(server.metric("zonekeep_webtransport_handshakes").await, 0.0);
}

#[tokio::test]
async fn an_unvalidated_address_gets_at_most_three_times_its_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let server = host(&dir, &["--handshake-timeout-ms", "2000"]).await;
    let (udp, _) = published(&server).await;
    let mut prober = Prober::new(udp).await;
    for _ in 0..4 {
        prober.initial().await;
    }
    // Everything the host sends to this address until it has certainly given up on it: no
    // handshake outlives the handshake timeout, and its closing packets leave right after (RFC
    // 9000 §8.1 counts every byte: the first flight, its retransmission after a probe timeout of
    // about a second, and those). Nothing signals "no more packets", so the test listens that long.
    let until = Instant::now() + Duration::from_millis(2000 + 2000);
    let mut received = 0usize;
    while let Some(d) = prober
        .receive(until.saturating_duration_since(Instant::now()))
        .await
    {
        received += d.len();
    }
    assert!(received > 0, "the host answers");
    assert!(
        received <= 3 * prober.sent,
        "RFC 9000 §8.1: at most 3x to an unvalidated address; sent {}, received {received}",
        prober.sent
    );
}

#[tokio::test]
async fn stalled_handshakes_are_bounded_counted_and_released() {
    let dir = tempfile::tempdir().unwrap();
    let server = host(
        &dir,
        &[
            "--webtransport-max-handshakes",
            "4",
            "--handshake-timeout-ms",
            "2000",
        ],
    )
    .await;
    let (udp, hash) = published(&server).await;

    // Ten clients prove their address (they answer the Retry) and then stall mid-handshake.
    let mut prober = Prober::new(udp).await;
    for _ in 0..10 {
        prober.initial().await;
        let retry = prober
            .receive_retry(Duration::from_secs(5))
            .await
            .expect("an unvalidated Initial gets a Retry");
        prober.answer(retry).await;
    }
    eventually("the stalled handshakes to be counted", || async {
        server
            .metric("zonekeep_connections_refused_total{reason=\"handshakes\"}")
            .await
            >= 6.0
    })
    .await;
    assert_eq!(
        server.metric("zonekeep_webtransport_handshakes").await,
        4.0,
        "pending handshakes stay within their bound"
    );
    // They hold nothing of the TCP side: a WebSocket player joins.
    websocket_player_admitted(&server, "ws-beside-stalled")
        .await
        .unwrap();

    // The handshake timeout releases them, and a WebTransport player joins.
    eventually("the stalled handshakes to time out", || async {
        server.metric("zonekeep_webtransport_handshakes").await == 0.0
    })
    .await;
    let conn = connect(udp, hash, "d-wt").await.unwrap();
    let (send, recv) = conn.open_bi().await.unwrap().await.unwrap();
    let mut wt = RawSession { conn, send, recv };
    let versions = vec![zonekeep_protocol::limits::PROTOCOL_VERSION];
    wt.send_hello(dots_ticket("wt-after-stall", "d-wt"), versions)
        .await;
    assert!(matches!(
        tokio::time::timeout(Duration::from_secs(10), wt.next())
            .await
            .unwrap(),
        Some(ServerMessage::Welcome(_))
    ));
}

#[tokio::test]
async fn a_slow_client_is_closed_within_the_handshake_timeout() {
    let dir = tempfile::tempdir().unwrap();
    let server = host(&dir, &["--handshake-timeout-ms", "3000"]).await;
    let (udp, hash) = published(&server).await;
    let start = Instant::now();
    let conn = connect(udp, hash, "d-slow").await.unwrap();
    // The client opens its control stream just before the timeout and then trickles its Hello.
    tokio::time::sleep_until((start + Duration::from_millis(2700)).into()).await;
    let (mut send, recv) = conn.open_bi().await.unwrap().await.unwrap();
    send.write_all(&[0x80]).await.unwrap();
    let mut wt = RawSession { conn, send, recv };
    let kick = tokio::time::timeout(Duration::from_secs(15), wt.next())
        .await
        .expect("the session ends");
    // A client that read its Kick leaves.
    wt.conn.close(wtransport::VarInt::from_u32(0), b"");
    let held = start.elapsed();
    assert!(
        matches!(kick, Some(ServerMessage::Kick(ref k)) if k.code == KickCode::HANDSHAKE_TIMEOUT),
        "{kick:?}"
    );
    // The whole way from the first Initial to the Hello is bounded by the one timeout (the margin
    // is for a busy machine, well short of a second timeout's worth).
    assert!(
        held < Duration::from_millis(3000 + 1500),
        "held {held:?} with a 3 s handshake timeout"
    );
}

#[tokio::test]
async fn a_datagram_before_the_hello_is_kicked_before_the_close() {
    let dir = tempfile::tempdir().unwrap();
    let server = host(&dir, &[]).await;
    let (udp, hash) = published(&server).await;
    for round in 0..6u64 {
        let conn = connect(udp, hash, "d-early").await.unwrap();
        conn.send_datagram(vec![0x05, 0x00, 0x00]).unwrap();
        if round % 2 == 1 {
            // The datagram arrives well before the control stream (nothing tells the client when
            // it has arrived; either order must end the same way).
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let opened = match conn.open_bi().await {
            Ok(opening) => opening.await.ok(),
            Err(_) => None,
        };
        let Some((mut send, recv)) = opened else {
            panic!("round {round}: the session closed before its control stream opened");
        };
        let _ = send.write_all(&[0x00]).await;
        let mut wt = RawSession { conn, send, recv };
        let (kick, code) = tokio::time::timeout(Duration::from_secs(10), wt.kicked())
            .await
            .unwrap();
        assert_eq!(kick, Some(KickCode::PROTOCOL_ERROR), "round {round}");
        assert_eq!(code, 4000 + u64::from(KickCode::PROTOCOL_ERROR.0));
    }
}

/// A client can have at most eight streams open each way (the CONNECT request is one of them),
/// where QUIC's default lets it open a hundred, each with a window of data the host would hold:
/// the next one waits for credit the host does not give. Counted on the client, which knows the
/// host's limits from the handshake (streams opened and not written send nothing, so the session
/// does not end for them first).
#[tokio::test]
async fn a_client_opens_at_most_eight_streams_each_way() {
    let dir = tempfile::tempdir().unwrap();
    let server = host(&dir, &[]).await;
    let (udp, hash) = published(&server).await;
    let conn = connect(udp, hash, "d-streams").await.unwrap();
    let mut bidi = Vec::new();
    while bidi.len() < 200 {
        match tokio::time::timeout(Duration::ZERO, conn.open_bi()).await {
            Ok(opened) => bidi.push(opened.expect("the connection is open")),
            Err(_) => break,
        }
    }
    assert_eq!(
        bidi.len(),
        7,
        "bidirectional streams opened besides the CONNECT request"
    );
    let mut uni = Vec::new();
    while uni.len() < 200 {
        match tokio::time::timeout(Duration::ZERO, conn.open_uni()).await {
            Ok(opened) => uni.push(opened.expect("the connection is open")),
            Err(_) => break,
        }
    }
    // HTTP/3's own control stream is one of the eight.
    assert!(
        (1..8).contains(&uni.len()),
        "unidirectional streams opened: {}",
        uni.len()
    );
}

/// A WebTransport session to `zone` at `udp`, pinning `hash`.
async fn connect(udp: SocketAddr, hash: [u8; 32], zone: &str) -> Result<Connection, String> {
    let cfg = ClientConfig::builder()
        .with_bind_default()
        .with_server_certificate_hashes([wtransport::tls::Sha256Digest::new(hash)])
        .build();
    Endpoint::client(cfg)
        .unwrap()
        .connect(format!("https://{udp}/zones/{zone}"))
        .await
        .map_err(|e| e.to_string())
}

/// A control-stream message that arrives in pieces, with datagrams arriving between them, is read
/// whole: the session takes datagrams while it waits for the rest of a message and keeps its
/// place in the stream (a client under loss, or a large chat line, sends exactly this).
#[tokio::test]
async fn a_message_split_around_datagrams_is_read_whole() {
    use zonekeep_protocol::messages::{tag, Inputs, Ping};
    let dir = tempfile::tempdir().unwrap();
    let server = host(&dir, &[]).await;
    let mut wt = RawSession::hello(&server.addr, "d-split", dots_ticket("split", "d-split")).await;
    assert!(matches!(wt.next().await, Some(ServerMessage::Welcome(_))));
    let ping = ClientMessage::Ping(Ping {
        client_time: 0x0123_4567_89ab,
    })
    .to_bytes()
    .unwrap();
    // The length and the first two bytes of the Ping, then nothing more of it for a while.
    let mut framed = Vec::new();
    zonekeep_protocol::wire::put_varint(&mut framed, ping.len() as u64);
    framed.extend_from_slice(&ping);
    let (head, tail) = framed.split_at(3);
    wt.send.write_all(head).await.unwrap();
    // Twenty patches long, an acknowledgement datagram after each State that comes: the session
    // reads each while the Ping is half there.
    for _ in 0..20 {
        let state = tokio::time::timeout(Duration::from_secs(10), wt.conn.receive_datagram())
            .await
            .expect("a State datagram")
            .unwrap();
        let payload = state.payload();
        assert_eq!(payload.first(), Some(&tag::STATE));
        let ack = ClientMessage::Inputs(Inputs {
            state_ack: 0,
            inputs: vec![],
        })
        .to_bytes()
        .unwrap();
        wt.conn.send_datagram(ack).unwrap();
    }
    wt.send.write_all(tail).await.unwrap();
    let pong = tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            match wt.next().await {
                Some(ServerMessage::Pong(p)) => break p,
                Some(ServerMessage::Kick(k)) => panic!("kicked: {k:?}"),
                Some(_) => continue,
                None => panic!("the session ended"),
            }
        }
    })
    .await
    .expect("a Pong");
    assert_eq!(pong.client_time, 0x0123_4567_89ab);
}
