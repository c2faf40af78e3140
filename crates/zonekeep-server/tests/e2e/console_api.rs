//! The admin API the operator console reads, on one host without a store: `GET /admin/hosts`
//! answering for this host alone, the fleet proxy serving this host's own admin routes and
//! nothing else, each participant's transport, bytes and round trip, refused credentials counted
//! by reason, and `POST /admin/drain` starting the graceful shutdown. The fleet side (the proxy
//! to another host, a move, a drain handing zones over) is in `crates/zonekeep/tests/console_fleet.rs`.

use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use serde_json::{json, Value};
use tokio::sync::watch;
use tokio_tungstenite::tungstenite::Message;
use wtransport::{ClientConfig, Endpoint};
use zonekeep_core::ZoneConfig;
use zonekeep_protocol::messages::{tag, ClientMessage, Hello, KickCode, Ping, ServerMessage};
use zonekeep_protocol::wire::put_varint;
use zonekeep_server::examples::Dots;
use zonekeep_server::Host;

use crate::common::*;

fn parse(body: &str) -> Value {
    serde_json::from_str(body).unwrap_or_else(|e| panic!("not JSON ({e}): {body}"))
}

async fn admin(server: &TestServer, method: &str, path: &str, body: Option<Value>) -> (u16, Value) {
    let (status, body) = http(server, method, path, Some(ADMIN), body).await;
    (status, parse(&body))
}

#[tokio::test]
async fn a_host_without_a_store_answers_for_itself_with_its_version_and_build() {
    let server = TestServer::start().await;
    let (status, v) = admin(&server, "GET", "/admin/hosts", None).await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["fleet"], false, "{v}");
    assert_eq!(v["self"], "local", "{v}");
    assert_eq!(v["version"], env!("CARGO_PKG_VERSION"), "{v}");
    assert!(!v["build"].as_str().unwrap_or_default().is_empty(), "{v}");
    let hosts = v["hosts"].as_array().unwrap();
    assert_eq!(hosts.len(), 1, "{v}");
    assert_eq!(hosts[0]["id"], "local");
    assert_eq!(hosts[0]["alive"], true);
    assert_eq!(hosts[0]["draining"], false);
    assert_eq!(hosts[0]["url"], format!("ws://{}", server.addr));
    server.stop().await;
}

#[tokio::test]
async fn the_proxy_serves_this_hosts_own_admin_routes_and_refuses_the_rest() {
    let server = TestServer::start().await;
    let (s, v) = admin(
        &server,
        "POST",
        "/admin/hosts/local/api/admin/zones",
        Some(json!({"id": "via-proxy", "kind": "dots"})),
    )
    .await;
    assert_eq!(s, 201, "a POST goes through with its body: {v}");
    let (s, direct) = admin(&server, "GET", "/admin/zones/via-proxy", None).await;
    assert_eq!((s, &direct["running"]), (200, &json!(true)), "{direct}");
    let (s, proxied) = admin(&server, "GET", "/admin/hosts/local/api/admin/zones", None).await;
    assert_eq!(s, 200, "{proxied}");
    assert_eq!(proxied["zones"][0]["id"], "via-proxy", "{proxied}");
    // A host id as a page escapes it (`encodeURIComponent`) names the same host.
    let (s, escaped) = admin(&server, "GET", "/admin/hosts/loc%61l/api/admin/zones", None).await;
    assert_eq!((s, &escaped["zones"]), (200, &proxied["zones"]));
    // The target's own answers come back as they are.
    let (s, v) = admin(
        &server,
        "GET",
        "/admin/hosts/local/api/admin/zones/nowhere",
        None,
    )
    .await;
    assert_eq!((s, &v["error"]["code"]), (404, &json!("not_found")), "{v}");

    for path in [
        "/admin/hosts/local/api/metrics",
        "/admin/hosts/local/api/zones/via-proxy",
        "/admin/hosts/local/api/healthz",
        "/admin/hosts/local/api/admin/../metrics",
        "/admin/hosts/local/api/admin/hosts/local/api/admin/zones",
    ] {
        let (s, v) = admin(&server, "GET", path, None).await;
        assert_eq!(
            (s, &v["error"]["code"]),
            (400, &json!("bad_request")),
            "{path}: {v}"
        );
    }
    let (s, v) = admin(
        &server,
        "GET",
        "/admin/hosts/elsewhere/api/admin/zones",
        None,
    )
    .await;
    assert_eq!((s, &v["error"]["code"]), (404, &json!("not_found")), "{v}");
    // The proxy is an admin route: it needs the token like the rest.
    let (s, _) = http(
        &server,
        "GET",
        "/admin/hosts/local/api/admin/zones",
        None,
        None,
    )
    .await;
    assert_eq!(s, 401);
    server.stop().await;
}

#[tokio::test]
async fn refused_credentials_are_counted_by_reason() {
    let server = TestServer::start().await;
    let missing = "zonekeep_admin_refused_total{reason=\"missing\"}";
    let wrong = "zonekeep_admin_refused_total{reason=\"wrong\"}";
    let (_, text) = http(&server, "GET", "/metrics", None, None).await;
    assert!(
        text.contains(missing) && text.contains(wrong),
        "both series from the start:\n{text}"
    );
    assert_eq!(metric(&server, missing).await, 0.0);
    let (s, _) = http(&server, "GET", "/admin/zones", None, None).await;
    assert_eq!(s, 401);
    for _ in 0..2 {
        let (s, _) = http(
            &server,
            "GET",
            "/admin/hosts",
            Some("not-the-token-123"),
            None,
        )
        .await;
        assert_eq!(s, 401);
    }
    let (s, _) = http(
        &server,
        "POST",
        "/admin/drain",
        Some("not-the-token-123"),
        None,
    )
    .await;
    assert_eq!(s, 401, "a refused drain does nothing");
    let (s, _) = http(&server, "GET", "/admin/zones", Some(ADMIN), None).await;
    assert_eq!(s, 200, "the right token is not counted");
    assert_eq!(metric(&server, missing).await, 1.0);
    assert_eq!(metric(&server, wrong).await, 3.0);
    server.stop().await;
}

/// A WebSocket player of `zone` that keeps reading (so the host's read probe gets its Pongs) and
/// pings the zone every second (so it is never idle); `received` is the bytes of the frames its
/// zone sent that it has read. Dropping the handle's tasks drops the connection.
struct ReadingClient {
    received: watch::Receiver<u64>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl ReadingClient {
    async fn join(server: &TestServer, zone: &str, sub: &str) -> Self {
        let mut ws = connect(server, zone).await;
        send(&mut ws, hello_bytes(&ticket(sub, zone), &[])).await;
        // Every frame counts, the Welcome included.
        let (mut sink, mut stream) = ws.split();
        let (tx, received) = watch::channel(0u64);
        let reader = tokio::spawn(async move {
            while let Some(Ok(m)) = stream.next().await {
                // What the zone sent: the session's own Pongs are not counted by the host.
                match m {
                    Message::Binary(b) if b.first() != Some(&tag::PONG) => {
                        tx.send_modify(|n| *n += b.len() as u64);
                    }
                    _ => {}
                }
            }
        });
        let pinger = tokio::spawn(async move {
            let mut every = tokio::time::interval(Duration::from_secs(1));
            for t in 0.. {
                every.tick().await;
                let ping = ClientMessage::Ping(Ping { client_time: t })
                    .to_bytes()
                    .unwrap();
                if sink.send(Message::Binary(ping.into())).await.is_err() {
                    break;
                }
            }
        });
        Self {
            received,
            tasks: vec![reader, pinger],
        }
    }

    fn drop_connection(self) {
        for t in self.tasks {
            t.abort();
        }
    }
}

/// A WebTransport player of `zone` that keeps reading its control stream and pings every second.
async fn join_webtransport(server: &TestServer, zone: &str, sub: &str) -> wtransport::Connection {
    use base64::Engine;
    let (_, body) = http(server, "GET", "/webtransport", None, None).await;
    let info = parse(&body);
    let port = info["url"].as_str().unwrap().rsplit(':').next().unwrap();
    let hash: [u8; 32] = base64::engine::general_purpose::STANDARD
        .decode(info["certificate_hashes"][0]["value"].as_str().unwrap())
        .unwrap()
        .try_into()
        .unwrap();
    let cfg = ClientConfig::builder()
        .with_bind_default()
        .with_server_certificate_hashes([wtransport::tls::Sha256Digest::new(hash)])
        .build();
    let conn = Endpoint::client(cfg)
        .unwrap()
        .connect(format!("https://127.0.0.1:{port}/zones/{zone}"))
        .await
        .unwrap();
    let (mut send, mut recv) = conn.open_bi().await.unwrap().await.unwrap();
    let framed = |m: ClientMessage| {
        let bytes = m.to_bytes().unwrap();
        let mut out = Vec::new();
        put_varint(&mut out, bytes.len() as u64);
        out.extend_from_slice(&bytes);
        out
    };
    let hello = ClientMessage::Hello(Hello {
        versions: vec![zonekeep_protocol::limits::PROTOCOL_VERSION],
        ticket: ticket(sub, zone),
        reconnect_token: vec![],
        content_version: String::new(),
        resume_from: None,
    });
    send.write_all(&framed(hello)).await.unwrap();
    match read_message(&mut recv).await {
        ServerMessage::Welcome(_) => {}
        other => panic!("expected a Welcome, got {other:?}"),
    }
    tokio::spawn(async move {
        let mut sink = [0u8; 4096];
        while let Ok(Some(_)) = recv.read(&mut sink).await {}
    });
    tokio::spawn(async move {
        let mut every = tokio::time::interval(Duration::from_secs(1));
        for t in 0.. {
            every.tick().await;
            let ping = framed(ClientMessage::Ping(Ping { client_time: t }));
            if send.write_all(&ping).await.is_err() {
                break;
            }
        }
    });
    conn
}

/// The next message of a WebTransport control stream (a varint length, then the message).
async fn read_message(recv: &mut wtransport::RecvStream) -> ServerMessage {
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
    ServerMessage::decode(&body, None).unwrap()
}

/// The participants of `zone`'s detail, by principal.
async fn participants(server: &TestServer, zone: &str) -> Vec<Value> {
    let (s, v) = admin(server, "GET", &format!("/admin/zones/{zone}"), None).await;
    assert_eq!(s, 200, "{v}");
    v["participants"].as_array().unwrap().clone()
}

fn by_principal<'a>(ps: &'a [Value], principal: &str) -> &'a Value {
    ps.iter()
        .find(|p| p["principal"] == principal)
        .unwrap_or_else(|| panic!("no {principal} in {ps:?}"))
}

#[tokio::test]
async fn participants_show_their_transport_bytes_and_round_trip() {
    let server = TestServer::start().await;
    let zone = "wires";
    let ws = ReadingClient::join(&server, zone, "ws-player").await;
    let wt = join_webtransport(&server, zone, "wt-player").await;

    // Round trips come from the connections' own measurements (the WebSocket read probe's first
    // Ping, QUIC's estimate reported each second): the admin API has nothing to wait on.
    eventually("both round trips and a byte rate", || async {
        let ps = participants(&server, zone).await;
        ps.len() == 2
            && ps
                .iter()
                .all(|p| p["rtt_ms"].is_number() && p["bytes_out_per_s"].as_u64().unwrap_or(0) > 0)
    })
    .await;
    let before = *ws.received.borrow();
    let ps = participants(&server, zone).await;
    let w = by_principal(&ps, "ws-player");
    let t = by_principal(&ps, "wt-player");
    assert_eq!(w["transport"], "websocket", "{w}");
    assert_eq!(t["transport"], "webtransport", "{t}");
    assert!(t["bytes_out"].as_u64().unwrap() > 0, "{t}");
    assert!(w["rtt_ms"].as_f64().unwrap() >= 0.0, "{w}");
    // Every byte the client read was queued to its connection first, and every byte queued
    // reaches it.
    let queued = w["bytes_out"].as_u64().unwrap();
    assert!(before <= queued, "read {before}, queued {queued}");
    let mut received = ws.received.clone();
    tokio::time::timeout(HANG_GUARD, received.wait_for(|n| *n >= queued))
        .await
        .expect("the queued bytes arrive")
        .unwrap();

    // Dropped, within its grace: no transport and no round trip, its bytes kept.
    ws.drop_connection();
    eventually("the WebSocket player dropped", || async {
        by_principal(&participants(&server, zone).await, "ws-player")["connected"] == false
    })
    .await;
    let ps = participants(&server, zone).await;
    let w = by_principal(&ps, "ws-player");
    assert_eq!(w["transport"], Value::Null, "{w}");
    assert_eq!(w["rtt_ms"], Value::Null, "{w}");
    assert!(w["bytes_out"].as_u64().unwrap() >= queued, "{w}");
    wt.close(0u32.into(), b"done");
    server.stop().await;
}

#[tokio::test]
async fn post_admin_drain_starts_the_graceful_shutdown() {
    let dots = ZoneConfig {
        reconnect_grace: Duration::from_secs(30),
        ..ZoneConfig::default()
    };
    let host = Host::builder()
        .config(base_config())
        .zone_with::<Dots>("dots", dots, Value::Null)
        .build()
        .unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    // Nothing but the admin route ends this host.
    let serving = tokio::spawn(host.serve(listener, std::future::pending()));
    let (mut ws, _) = tokio_tungstenite::connect_async(format!("ws://{addr}/zones/dots"))
        .await
        .unwrap();
    send(&mut ws, hello_bytes(&ticket("stays", "dots"), &[])).await;
    match recv(&mut ws, &empty_schema()).await {
        Seen::Msg(ServerMessage::Welcome(_)) => {}
        other => panic!("expected a Welcome, got {other:?}"),
    }

    let (s, body) = post_without_test_server(addr, "/admin/drain").await;
    assert_eq!((s, parse(&body)), (202, json!({"draining": "local"})));
    // No other host to hand the zone to: its player is told the host is going away.
    assert_eq!(expect_kick(&mut ws).await, KickCode::SHUTTING_DOWN);
    let served = tokio::time::timeout(HANG_GUARD, serving)
        .await
        .expect("serve returns once drained")
        .unwrap();
    assert!(served.is_ok(), "a complete drain: {served:?}");
}

/// `POST path` with the admin token to the host at `addr`: the status and the body.
async fn post_without_test_server(addr: std::net::SocketAddr, path: &str) -> (u16, String) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    let req = format!(
        "POST {path} HTTP/1.1\r\nHost: test\r\nConnection: close\r\nAuthorization: Bearer {ADMIN}\r\nContent-Length: 0\r\n\r\n"
    );
    s.write_all(req.as_bytes()).await.unwrap();
    let mut out = Vec::new();
    tokio::time::timeout(HANG_GUARD, s.read_to_end(&mut out))
        .await
        .expect("an answer")
        .unwrap();
    let text = String::from_utf8_lossy(&out).to_string();
    let status = text.split_whitespace().nth(1).unwrap().parse().unwrap();
    let body = text
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_owned())
        .unwrap_or_default();
    (status, body)
}

#[tokio::test]
async fn a_move_on_a_host_without_a_fleet_is_refused_and_the_zone_runs_on() {
    let server = TestServer::start().await;
    let (mut ws, _) = join(&server, "stay", &ticket("p", "stay")).await;
    let (s, v) = admin(
        &server,
        "POST",
        "/admin/zones/stay/move",
        Some(json!({"host": "other"})),
    )
    .await;
    assert_eq!((s, &v["error"]["code"]), (409, &json!("not_moved")), "{v}");
    let (s, v) = admin(
        &server,
        "POST",
        "/admin/zones/absent/move",
        Some(json!({"host": "other"})),
    )
    .await;
    assert_eq!((s, &v["error"]["code"]), (404, &json!("not_found")), "{v}");
    let (s, v) = admin(
        &server,
        "POST",
        "/admin/zones/stay/move",
        Some(json!({"to": "other"})),
    )
    .await;
    assert_eq!(
        (s, &v["error"]["code"]),
        (400, &json!("bad_request")),
        "{v}"
    );
    // Still running: a Ping is answered by the zone's host.
    send_ping(&mut ws, 7).await;
    loop {
        match recv(&mut ws, &empty_schema()).await {
            Seen::Msg(ServerMessage::Pong(p)) => {
                assert_eq!(p.client_time, 7);
                break;
            }
            Seen::Msg(_) => {}
            Seen::Closed => panic!("the zone's player was let go"),
        }
    }
    ws.close(None).await.unwrap();
    server.stop().await;
}
