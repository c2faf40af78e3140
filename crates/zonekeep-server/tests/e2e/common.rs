//! Test harness: start a host, mint tickets, speak the protocol.

use std::net::SocketAddr;
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use serde_json::{json, Value};
use tokio::net::TcpStream;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};
use zonekeep_core::{
    Ctx, EventTarget, InputRefusal, PlayerId, Zone, ZoneConfig, ZoneError, ZoneInit,
};
use zonekeep_protocol::messages::{
    ClientMessage, DeltaContext, Hello, Input, KickCode, Ping, ServerMessage, Welcome,
};
use zonekeep_protocol::schema::Schema;
use zonekeep_server::config::KeyConfig;
use zonekeep_server::examples::Dots;
use zonekeep_server::ticket::sign_parts;
use zonekeep_server::{Host, Secret, ServerConfig};

pub const SECRET: &str = "test-secret-0123456789abcdef-0123456789";
pub const SECRET2: &str = "test-secret-second-key-0123456789abcdef";
pub const RETIRED: &str = "test-secret-retired-key-0123456789abcdef";
pub const ADMIN: &str = "admin-token-0123456789";

pub type Ws = WebSocketStream<MaybeTlsStream<TcpStream>>;

/// A zone that emits a large event to everyone on every tick (to fill slow readers).
pub struct Blob;

impl Zone for Blob {
    type Input = ();
    fn create(_init: &ZoneInit, _ctx: &mut Ctx<'_>) -> Result<Self, ZoneError> {
        Ok(Blob)
    }
    fn sanitize(&mut self, _p: PlayerId, _payload: &[u8]) -> Result<(), InputRefusal> {
        Ok(())
    }
    fn tick(&mut self, ctx: &mut Ctx<'_>) {
        let tick = ctx.tick();
        let mut payload = vec![0u8; 16 * 1024];
        payload[..8].copy_from_slice(&tick.to_le_bytes());
        ctx.emit_event(EventTarget::All, 9, payload);
    }
}

pub fn base_config() -> ServerConfig {
    ServerConfig {
        listen: "127.0.0.1:0".parse().unwrap(),
        sim_threads: 2,
        handshake_timeout_ms: 300,
        idle_timeout_ms: 5_000,
        kick_write_timeout_ms: 2_000,
        shutdown_timeout_ms: 5_000,
        max_message_bytes: 1024,
        ticket_secret: Some(Secret::new(SECRET)),
        ticket_kid: "k1".into(),
        ticket_keys: vec![
            KeyConfig {
                kid: "k2".into(),
                secret: Secret::new(SECRET2),
                retired: false,
            },
            KeyConfig {
                kid: "k0".into(),
                secret: Secret::new(RETIRED),
                retired: true,
            },
        ],
        admin_token: Some(Secret::new(ADMIN)),
        dev: true,
        ..ServerConfig::default()
    }
}

pub struct TestServer {
    pub addr: SocketAddr,
    stop: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<()>>,
}

impl TestServer {
    pub async fn start() -> Self {
        Self::start_with(base_config()).await
    }

    pub async fn start_with(config: ServerConfig) -> Self {
        let dots = ZoneConfig {
            reconnect_grace: Duration::from_secs(30),
            ..ZoneConfig::default()
        };
        let brief = ZoneConfig {
            reconnect_grace: Duration::from_millis(200),
            ..ZoneConfig::default()
        };
        let solo = ZoneConfig {
            max_players: 1,
            max_observers: 1,
            ..ZoneConfig::default()
        };
        let blob = ZoneConfig {
            tick_hz: 100,
            ..ZoneConfig::default()
        };
        let host = Host::builder()
            .config(config)
            .zone_with::<Dots>("dots", dots, Value::Null)
            .zone_with::<Dots>("brief", brief, Value::Null)
            .zone_with::<Dots>("solo", solo, Value::Null)
            .zone_with::<Blob>("blob", blob, Value::Null)
            .build()
            .unwrap();
        Self::serve(host).await
    }

    /// Serve an already built host on 127.0.0.1:0.
    pub async fn serve(host: Host) -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (tx, rx) = oneshot::channel::<()>();
        let task = tokio::spawn(async move {
            host.serve(listener, async {
                let _ = rx.await;
            })
            .await
            .unwrap();
        });
        Self {
            addr,
            stop: Some(tx),
            task: Some(task),
        }
    }

    pub fn url(&self, zone: &str) -> String {
        format!("ws://{}/zones/{zone}", self.addr)
    }

    /// Shut the host down and wait for it.
    pub async fn stop(mut self) {
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(());
        }
        if let Some(t) = self.task.take() {
            t.await.unwrap();
        }
    }
}

pub fn now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

static NEXT_JTI: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

pub fn jti() -> String {
    format!(
        "jti-{}",
        NEXT_JTI.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    )
}

/// Claims for `sub` in `zone` valid for a minute.
pub fn claims(sub: &str, zone: &str) -> Value {
    json!({"sub": sub, "zone": zone, "exp": now() + 60, "nbf": now() - 1, "jti": jti()})
}

pub fn sign(claims: &Value) -> String {
    sign_parts(
        SECRET.as_bytes(),
        &json!({"alg": "HS256", "kid": "k1"}),
        claims,
    )
}

pub fn ticket(sub: &str, zone: &str) -> String {
    sign(&claims(sub, zone))
}

pub async fn connect(server: &TestServer, zone: &str) -> Ws {
    let (ws, _) = tokio_tungstenite::connect_async(server.url(zone))
        .await
        .unwrap();
    ws
}

pub fn hello_bytes(ticket: &str, token: &[u8]) -> Vec<u8> {
    ClientMessage::Hello(Hello {
        versions: vec![zonekeep_protocol::limits::PROTOCOL_VERSION],
        ticket: ticket.into(),
        reconnect_token: token.to_vec(),
        content_version: String::new(),
        resume_from: None,
    })
    .to_bytes()
    .unwrap()
}

pub async fn send(ws: &mut Ws, bytes: Vec<u8>) {
    ws.send(Message::Binary(bytes.into())).await.unwrap();
}

pub async fn send_input(ws: &mut Ws, seq: u32, payload: &[u8]) {
    let b = ClientMessage::Input(Input {
        seq,
        view_tick: 0,
        payload: payload.to_vec(),
    })
    .to_bytes()
    .unwrap();
    send(ws, b).await;
}

pub async fn send_ping(ws: &mut Ws, t: u64) {
    send(
        ws,
        ClientMessage::Ping(Ping { client_time: t })
            .to_bytes()
            .unwrap(),
    )
    .await;
}

/// What a client sees.
#[derive(Debug)]
pub enum Seen {
    Msg(ServerMessage),
    Closed,
}

/// The next server message other than chat (Deltas decoded against an empty known set: no
/// entities yet). A version 11 session is sent its channels' history as it attaches and the
/// lines said after; tests of other things pass over them (chat's own use [`recv_any`]).
pub async fn recv(ws: &mut Ws, schema: &Schema) -> Seen {
    loop {
        match recv_any(ws, schema).await {
            Seen::Msg(ServerMessage::ChatLines(_) | ServerMessage::ChatReply(_)) => continue,
            seen => return seen,
        }
    }
}

/// The next server message, whatever it is.
pub async fn recv_any(ws: &mut Ws, schema: &Schema) -> Seen {
    loop {
        let m = tokio::time::timeout(HANG_GUARD, ws.next())
            .await
            .expect("no message from the host within the hang guard");
        match m {
            None | Some(Err(_)) | Some(Ok(Message::Close(_))) => return Seen::Closed,
            Some(Ok(Message::Binary(b))) => {
                let ctx = DeltaContext { schema, known: &[] };
                return Seen::Msg(
                    ServerMessage::decode(&b, Some(ctx))
                        .expect("server sent an undecodable message"),
                );
            }
            Some(Ok(_)) => continue,
        }
    }
}

/// The next server message, a Delta decoded against `mirror`'s known set and applied to it.
pub async fn next_applied(
    ws: &mut Ws,
    mirror: &mut zonekeep_protocol::mirror::Mirror,
    schema: &Schema,
) -> ServerMessage {
    loop {
        // Guards against a hang (a bug), as `recv` does; not a performance bound.
        let m = tokio::time::timeout(Duration::from_secs(10), ws.next())
            .await
            .expect("no message within 10 s")
            .expect("closed")
            .expect("socket error");
        let Message::Binary(b) = m else { continue };
        // Chat (a version 11 session's history and lines) is not what these tests follow.
        if matches!(b.first(), Some(&0x8c) | Some(&0x8d)) {
            continue;
        }
        if b.first() == Some(&0x82) {
            return ServerMessage::Delta(mirror.decode_apply(&b, schema).expect("Delta applies"));
        }
        return ServerMessage::decode(&b, None).expect("decodable");
    }
}

pub fn empty_schema() -> Schema {
    Schema {
        pos_step: 0.01,
        kinds: Vec::new(),
    }
}

/// Connect, send Hello and expect a Welcome and a BASELINE Delta.
pub async fn join(server: &TestServer, zone: &str, ticket: &str) -> (Ws, Welcome) {
    join_with_token(server, zone, ticket, &[]).await
}

pub async fn join_with_token(
    server: &TestServer,
    zone: &str,
    ticket: &str,
    token: &[u8],
) -> (Ws, Welcome) {
    let mut ws = connect(server, zone).await;
    send(&mut ws, hello_bytes(ticket, token)).await;
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

/// Read until a Kick arrives; returns its code (and checks the socket then closes).
pub async fn expect_kick(ws: &mut Ws) -> KickCode {
    let schema = empty_schema();
    loop {
        match recv(ws, &schema).await {
            Seen::Msg(ServerMessage::Kick(k)) => {
                assert!(
                    matches!(recv(ws, &schema).await, Seen::Closed),
                    "closed after Kick"
                );
                // Complete the closing handshake as a well-behaved client does (the server
                // lingers for our Close so that its Kick is never lost to a TCP reset).
                let _ = ws.close(None).await;
                return k.code;
            }
            Seen::Msg(_) => continue,
            Seen::Closed => panic!("closed without a Kick"),
        }
    }
}

/// Connect with `hello` bytes and expect a Kick with `code`.
pub async fn refused(server: &TestServer, zone: &str, hello: Vec<u8>) -> KickCode {
    let mut ws = connect(server, zone).await;
    send(&mut ws, hello).await;
    expect_kick(&mut ws).await
}

/// Minimal HTTP/1.1 client (GET/POST with optional bearer and JSON body).
pub async fn http(
    server: &TestServer,
    method: &str,
    path: &str,
    bearer: Option<&str>,
    body: Option<Value>,
) -> (u16, String) {
    http_from(server, LOOPBACK, method, path, bearer, body).await
}

/// [`http`], with the body read as JSON (`null` when it is not JSON).
pub async fn call(
    server: &TestServer,
    method: &str,
    path: &str,
    bearer: Option<&str>,
    body: Option<Value>,
) -> (u16, Value) {
    let (status, text) = http(server, method, path, bearer, body).await;
    (status, serde_json::from_str(&text).unwrap_or(Value::Null))
}

/// The error code of a JSON refusal (`{"error": {"code"}}`), empty when there is none.
pub fn code(v: &Value) -> &str {
    v["error"]["code"].as_str().unwrap_or("")
}

/// The client address of most tests.
pub const LOOPBACK: [u8; 4] = [127, 0, 0, 1];

/// A TCP connection to the host from the loopback address `from` (another address of
/// 127.0.0.0/8 has its own per-IP slots, so a test can fill one address and observe from another).
pub async fn tcp_from(server: &TestServer, from: [u8; 4]) -> TcpStream {
    let sock = tokio::net::TcpSocket::new_v4().unwrap();
    sock.bind((std::net::Ipv4Addr::from(from), 0).into())
        .unwrap();
    sock.connect(server.addr).await.unwrap()
}

/// Like [`http`], from the loopback address `from`.
pub async fn http_from(
    server: &TestServer,
    from: [u8; 4],
    method: &str,
    path: &str,
    bearer: Option<&str>,
    body: Option<Value>,
) -> (u16, String) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut s = tcp_from(server, from).await;
    let body = body.map(|b| b.to_string()).unwrap_or_default();
    let auth = bearer
        .map(|t| format!("Authorization: Bearer {t}\r\n"))
        .unwrap_or_default();
    let req = format!(
        "{method} {path} HTTP/1.1\r\nHost: test\r\nConnection: close\r\n{auth}Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    s.write_all(req.as_bytes()).await.unwrap();
    let mut out = Vec::new();
    tokio::time::timeout(HANG_GUARD, s.read_to_end(&mut out))
        .await
        .expect("no HTTP answer from the host within the hang guard")
        .unwrap();
    let text = String::from_utf8_lossy(&out).to_string();
    let status: u16 = text.split_whitespace().nth(1).unwrap().parse().unwrap();
    let (head, rest) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let body = if head
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked")
    {
        dechunk(rest)
    } else {
        rest.to_string()
    };
    (status, body)
}

fn dechunk(s: &str) -> String {
    let mut out = String::new();
    let mut rest = s;
    while let Some((len, after)) = rest.split_once("\r\n") {
        let n = usize::from_str_radix(len.trim(), 16).unwrap_or(0);
        if n == 0 {
            break;
        }
        out.push_str(&after[..n]);
        rest = &after[n + 2..];
    }
    out
}

/// Parse Prometheus text into (name{labels}, value) pairs.
pub fn parse_metrics(text: &str) -> Vec<(String, f64)> {
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(|l| {
            let (k, v) = l.rsplit_once(' ').expect("sample line");
            (k.to_string(), v.parse::<f64>().expect("numeric value"))
        })
        .collect()
}

pub async fn metric(server: &TestServer, key: &str) -> f64 {
    let (status, body) = http(server, "GET", "/metrics", None, None).await;
    assert_eq!(status, 200);
    parse_metrics(&body)
        .into_iter()
        .find(|(k, _)| k == key)
        .map(|(_, v)| v)
        .unwrap_or(0.0)
}

/// Longest [`eventually`] waits before failing. Only a guard against a hang: conditions are
/// checked as soon as they can hold, so a passing test never comes near it, and a slow machine
/// does not turn a correct host into a failure.
pub const HANG_GUARD: Duration = Duration::from_secs(60);

/// Re-checks `f` until it holds. Used for what the host reports only through `/metrics` or the
/// admin API (counters, the zone list), which have no change notification to wait on; every other
/// wait in these tests is on the event itself (a frame, a close). Fails with `what` after
/// [`HANG_GUARD`].
pub async fn eventually<F, Fut>(what: &str, mut f: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = tokio::time::Instant::now() + HANG_GUARD;
    while !f().await {
        assert!(
            tokio::time::Instant::now() < deadline,
            "still waiting after {HANG_GUARD:?} for: {what}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}
