//! NetSim (dev) is a page's own: a setting made for one ticket subject's connections
//! (`/dev/netsim?sub=`) delays those and nobody else's, and the host-wide setting is an admin
//! action (`/admin/netsim`, behind the admin token). Checked on the real `zonekeep serve --dev`
//! by what the host reports it applied to each subject's connections.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

mod support;

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use futures_util::{SinkExt, StreamExt};
use serde_json::{json, Value};
use support::{hello, ticket, Server, StoreSpec, ADMIN_TOKEN};
use tokio_tungstenite::tungstenite::Message;
use wtransport::{ClientConfig, Endpoint, RecvStream};
use zonekeep_protocol::messages::{tag, ClientMessage, Hello, Ping};
use zonekeep_protocol::wire::put_varint;

type Ws =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// An HTTP request without credentials: the status and the body as JSON (`null` if it is not).
async fn request(server: &Server, method: &str, path: &str, body: Option<&Value>) -> (u16, Value) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let body = body.map(Value::to_string).unwrap_or_default();
    let mut s = tokio::net::TcpStream::connect(&server.addr).await.unwrap();
    let req = format!(
        "{method} {path} HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    s.write_all(req.as_bytes()).await.unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).await.unwrap();
    let (head, body) = out.split_once("\r\n\r\n").unwrap();
    let status = head.split_whitespace().nth(1).unwrap().parse().unwrap();
    (status, serde_json::from_str(body).unwrap_or(Value::Null))
}

/// Sends Pings and waits for each one's Pong: traffic both ways through the connection's NetSim.
async fn ping_pong(ws: &mut Ws, pings: u64) {
    for t in 1..=pings {
        let ping = ClientMessage::Ping(Ping { client_time: t });
        ws.send(Message::Binary(ping.to_bytes().unwrap().into()))
            .await
            .unwrap();
        let answered = async {
            loop {
                match ws.next().await {
                    Some(Ok(Message::Binary(b))) if b.first() == Some(&tag::PONG) => return,
                    Some(Ok(_)) => {}
                    other => panic!("the connection ended: {other:?}"),
                }
            }
        };
        tokio::time::timeout(Duration::from_secs(20), answered)
            .await
            .expect("a Pong");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pages_netsim_delays_its_own_connection_only_and_the_host_wide_one_is_an_admin_action() {
    let dir = tempfile::tempdir().unwrap();
    let store = StoreSpec::Sqlite(dir.path().join("zonekeep.db"));
    let server = Server::start(
        &store,
        &["--dev", "--admin-token", ADMIN_TOKEN],
        &dir.path().join("host.log"),
    )
    .await;
    let mut slow = hello(&server.addr, "netsim-1", ticket("slow-page", "netsim-1")).await;
    let mut quick = hello(&server.addr, "netsim-1", ticket("quick-page", "netsim-1")).await;

    // The slow page moves its own slider.
    let (status, body) = request(
        &server,
        "POST",
        "/dev/netsim?sub=slow-page",
        Some(&json!({"latency_ms": 120})),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    ping_pong(&mut slow, 3).await;
    ping_pong(&mut quick, 3).await;

    let (_, slow_sim) = request(&server, "GET", "/dev/netsim?sub=slow-page", None).await;
    let (_, quick_sim) = request(&server, "GET", "/dev/netsim?sub=quick-page", None).await;
    assert_eq!(
        quick_sim["applies"]["latency_ms"],
        json!(0),
        "the other page's connection goes through no NetSim: {quick_sim}"
    );
    assert_eq!(
        (
            quick_sim["held_to_client"].clone(),
            quick_sim["held_from_client"].clone()
        ),
        (json!(0), json!(0)),
        "nothing of the other page's was held back: {quick_sim}"
    );
    assert_eq!(quick_sim["connections"], json!(1), "{quick_sim}");
    assert_eq!(slow_sim["applies"]["latency_ms"], json!(120), "{slow_sim}");
    assert!(
        slow_sim["held_from_client"].as_u64().unwrap() >= 3
            && slow_sim["held_to_client"].as_u64().unwrap() >= 3,
        "the slow page's Pings and Pongs were held back: {slow_sim}"
    );

    // The host-wide setting is not a page's to change.
    let (status, body) = request(
        &server,
        "POST",
        "/dev/netsim",
        Some(&json!({"latency_ms": 50})),
    )
    .await;
    assert_eq!(status, 400, "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("/admin/netsim"),
        "{body}"
    );
    let (status, _) = request(
        &server,
        "POST",
        "/admin/netsim",
        Some(&json!({"latency_ms": 50})),
    )
    .await;
    assert_eq!(status, 401, "the admin route wants the admin token");
    let (status, body) = server
        .admin_request("POST", "/admin/netsim", Some(&json!({"latency_ms": 50})))
        .await;
    assert_eq!(status, 200, "{body}");
    ping_pong(&mut quick, 2).await;
    let (_, quick_sim) = request(&server, "GET", "/dev/netsim?sub=quick-page", None).await;
    assert_eq!(quick_sim["applies"]["latency_ms"], json!(50), "{quick_sim}");
    assert!(
        quick_sim["held_to_client"].as_u64().unwrap() >= 2,
        "{quick_sim}"
    );
    let (_, slow_sim) = request(&server, "GET", "/dev/netsim?sub=slow-page", None).await;
    assert_eq!(
        slow_sim["applies"]["latency_ms"],
        json!(120),
        "a page's own setting wins over the host-wide one: {slow_sim}"
    );

    // Cleared, the page goes back to the host-wide setting.
    let (status, body) = request(&server, "DELETE", "/dev/netsim?sub=slow-page", None).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["own"], Value::Null, "{body}");
    assert_eq!(body["applies"]["latency_ms"], json!(50), "{body}");
    server.terminate().await;
}

/// The WebTransport endpoint the host publishes: its UDP address and the certificate hash to pin.
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

/// One length-prefixed message of a WebTransport control stream, raw.
async fn next_frame(recv: &mut RecvStream) -> Vec<u8> {
    let mut len = 0u64;
    for i in 0..5 {
        let mut b = [0u8; 1];
        recv.read_exact(&mut b).await.unwrap();
        len |= u64::from(b[0] & 0x7f) << (7 * i);
        if b[0] & 0x80 == 0 {
            break;
        }
    }
    let mut body = vec![0u8; usize::try_from(len).unwrap()];
    recv.read_exact(&mut body).await.unwrap();
    body
}

fn framed(message: &ClientMessage) -> Vec<u8> {
    let bytes = message.to_bytes().unwrap();
    let mut out = Vec::new();
    put_varint(&mut out, bytes.len() as u64);
    out.extend_from_slice(&bytes);
    out
}

/// Over WebTransport a Ping on the control stream crosses the simulated link both ways, as over
/// a WebSocket: its Pong comes back no sooner than twice the one-way latency, and the host counts
/// the Pings it held back on their way in.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn netsim_delays_webtransport_pings_both_ways() {
    const LATENCY_MS: u64 = 150;
    let dir = tempfile::tempdir().unwrap();
    let store = StoreSpec::Sqlite(dir.path().join("zonekeep.db"));
    let server = Server::start(&store, &["--dev"], &dir.path().join("host.log")).await;
    let (udp, hash) = published(&server).await;
    let (status, body) = request(
        &server,
        "POST",
        "/dev/netsim?sub=wt-page",
        Some(&json!({"latency_ms": LATENCY_MS})),
    )
    .await;
    assert_eq!(status, 200, "{body}");

    let cfg = ClientConfig::builder()
        .with_bind_default()
        .with_server_certificate_hashes([wtransport::tls::Sha256Digest::new(hash)])
        .build();
    let conn = Endpoint::client(cfg)
        .unwrap()
        .connect(format!("https://{udp}/zones/netsim-wt"))
        .await
        .unwrap();
    let (mut send, mut recv) = conn.open_bi().await.unwrap().await.unwrap();
    let hello = ClientMessage::Hello(Hello {
        versions: vec![zonekeep_protocol::limits::PROTOCOL_VERSION],
        ticket: ticket("wt-page", "netsim-wt"),
        reconnect_token: vec![],
        content_version: String::new(),
        resume_from: None,
    });
    send.write_all(&framed(&hello)).await.unwrap();
    loop {
        if next_frame(&mut recv).await.first() == Some(&tag::WELCOME) {
            break;
        }
    }
    for t in 1..=3u64 {
        let sent = Instant::now();
        send.write_all(&framed(&ClientMessage::Ping(Ping { client_time: t })))
            .await
            .unwrap();
        let answered = async { while next_frame(&mut recv).await.first() != Some(&tag::PONG) {} };
        tokio::time::timeout(Duration::from_secs(20), answered)
            .await
            .expect("a Pong");
        let rtt = sent.elapsed();
        assert!(
            rtt >= Duration::from_millis(2 * LATENCY_MS),
            "Ping {t}: the Pong came after {rtt:?}, less than the simulated round trip"
        );
    }
    let (_, sim) = request(&server, "GET", "/dev/netsim?sub=wt-page", None).await;
    assert!(
        sim["held_from_client"].as_u64().unwrap() >= 3,
        "the Pings were held back on their way in: {sim}"
    );
    server.terminate().await;
}
