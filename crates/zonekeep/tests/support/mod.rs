//! Helpers for tests that run the real `zonekeep serve` process with
//! persistence: start/kill/stop it, drive `ledger-test` clients over
//! WebSocket, and read the store behind it (SQLite file or PostgreSQL).
#![allow(clippy::unwrap_used, clippy::expect_used, dead_code, unused_imports)]

pub mod courier;
pub mod doors;
pub mod proxy;
pub mod push;
pub mod quic_prober;
pub mod raw_wt;
pub mod redis;
pub mod relay;
pub mod replay_cli;
pub mod sdk;
mod service;
pub mod view;
pub use service::service_url;

use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use serde_json::{json, Value};
use tokio::sync::watch;
use tokio_tungstenite::tungstenite::Message;
use zonekeep_core::Snapshot;
use zonekeep_protocol::messages::{ClientMessage, DeltaContext, Hello, Input, ServerMessage};
use zonekeep_protocol::schema::Schema;

pub const SECRET: &str = "persist-test-secret-0123456789abcdef";
/// The admin token hosts get with `--admin-token` in tests that read the admin API.
pub const ADMIN_TOKEN: &str = "fleet-admin-token-0123456789abcdef";
/// The lobby credential the lobby tests start hosts with (`--lobby-token`).
pub const LOBBY_TOKEN: &str = "fleet-lobby-token-0123456789abcdef";
/// ledger-test event topics (see crates/zonekeep/src/kinds/ledger.rs).
pub const TOPIC_STATE: u16 = 1;
pub const TOPIC_SETTLED: u16 = 2;

/// Which store the server runs on.
#[derive(Debug, Clone)]
pub enum StoreSpec {
    Sqlite(PathBuf),
    Postgres(String),
}

impl StoreSpec {
    /// A PostgreSQL store in a schema of its own (created here), so this test's hosts, zones and
    /// facts meet no other run's in the shared database.
    pub async fn postgres_isolated(url: &str, run: &str) -> StoreSpec {
        let schema: String = format!("t_{run}")
            .to_ascii_lowercase()
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
            .take(63)
            .collect();
        let client = pg(url).await;
        client
            .batch_execute(&format!("CREATE SCHEMA IF NOT EXISTS {schema}"))
            .await
            .unwrap();
        let sep = if url.contains('?') { '&' } else { '?' };
        StoreSpec::Postgres(format!("{url}{sep}options=-csearch_path%3D{schema}"))
    }

    /// The `serve` flags selecting this store.
    pub fn args(&self) -> Vec<String> {
        match self {
            StoreSpec::Sqlite(dir) => vec![
                "--store".into(),
                "sqlite".into(),
                "--data-dir".into(),
                dir.display().to_string(),
            ],
            StoreSpec::Postgres(url) => vec!["--store".into(), url.clone()],
        }
    }

    fn spec_and_dir(&self) -> (String, PathBuf) {
        match self {
            StoreSpec::Sqlite(dir) => ("sqlite".into(), dir.clone()),
            StoreSpec::Postgres(url) => (url.clone(), std::env::temp_dir()),
        }
    }

    /// The zone's last save, decoded: (envelope, ledger-test state JSON).
    pub async fn last_save(&self, zone: &str) -> Option<(Snapshot, Value)> {
        let (spec, dir) = self.spec_and_dir();
        let store = zonekeep_store::open_store(&spec, &dir).await.unwrap();
        let rec = store.saves.load(zone).await.unwrap()?;
        let snap = Snapshot::decode(&rec.bytes).unwrap();
        let state: Value = serde_json::from_slice(&snap.zone).unwrap();
        Some((snap, state))
    }

    /// Every ledger row of `zone`: (key, principal, payload).
    pub async fn facts(&self, zone: &str) -> Vec<(String, String, Value)> {
        match self {
            StoreSpec::Sqlite(dir) => {
                let db =
                    rusqlite::Connection::open(dir.join(zonekeep_store::SQLITE_FILE_NAME)).unwrap();
                let mut q = db
                    .prepare("SELECT key, principal, payload FROM facts WHERE zone_id = ?1")
                    .unwrap();
                let rows = q
                    .query_map([zone], |r| {
                        Ok((
                            r.get::<_, String>(0)?,
                            r.get::<_, String>(1)?,
                            r.get::<_, String>(2)?,
                        ))
                    })
                    .unwrap()
                    .map(|r| {
                        let (k, p, v) = r.unwrap();
                        (k, p, serde_json::from_str(&v).unwrap())
                    })
                    .collect();
                rows
            }
            StoreSpec::Postgres(url) => {
                let client = pg(url).await;
                client
                    .query(
                        "SELECT key, principal, payload::text FROM facts WHERE zone_id = $1",
                        &[&zone],
                    )
                    .await
                    .unwrap()
                    .iter()
                    .map(|r| {
                        let v: String = r.get(2);
                        (r.get(0), r.get(1), serde_json::from_str(&v).unwrap())
                    })
                    .collect()
            }
        }
    }

    /// The ledger's running total `name` of `principal`.
    pub async fn total(&self, principal: &str, name: &str) -> i64 {
        let (spec, dir) = self.spec_and_dir();
        let store = zonekeep_store::open_store(&spec, &dir).await.unwrap();
        store
            .facts
            .totals(principal)
            .await
            .unwrap()
            .get(name)
            .copied()
            .unwrap_or(0)
    }

    /// `PRAGMA integrity_check` for SQLite (PostgreSQL has no equivalent to check here).
    pub fn integrity(&self) -> Option<String> {
        let StoreSpec::Sqlite(dir) = self else {
            return None;
        };
        let db = rusqlite::Connection::open(dir.join(zonekeep_store::SQLITE_FILE_NAME)).unwrap();
        Some(
            db.query_row("PRAGMA integrity_check", [], |r| r.get(0))
                .unwrap(),
        )
    }
}

async fn pg(url: &str) -> tokio_postgres::Client {
    let (client, conn) = tokio_postgres::connect(url, tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(conn);
    client
}

/// The host id [`Server::start`] gives a host logging to `log`: the log's name and its
/// directory's, which tests make unique (a temporary directory).
pub fn host_id_for(log: &Path) -> String {
    let name = |p: Option<&std::ffi::OsStr>| p.map(|s| s.to_string_lossy().into_owned());
    let raw = format!(
        "{}-{}",
        name(log.file_stem()).unwrap_or_default(),
        name(log.parent().and_then(Path::file_name)).unwrap_or_default()
    );
    raw.chars()
        .filter(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
        .take(100)
        .collect()
}

/// A running `zonekeep serve`.
pub struct Server {
    child: Option<Child>,
    pub addr: String,
    pub log: PathBuf,
}

impl Server {
    /// Starts `zonekeep serve` on a SQLite store in `dir`, with the admin token and
    /// `--module SPEC` (`KIND=FILE`); its log is `dir/host.log`.
    pub async fn with_module(dir: &Path, spec: &str) -> Server {
        let store = StoreSpec::Sqlite(dir.join("zonekeep.db"));
        let extra = ["--admin-token", ADMIN_TOKEN, "--module", spec];
        Server::start(&store, &extra, &dir.join("host.log")).await
    }

    /// Starts `zonekeep serve` on 127.0.0.1:0 with `store` and `extra` flags;
    /// its log goes to `log`.
    pub async fn start(store: &StoreSpec, extra: &[&str], log: &Path) -> Server {
        Server::start_env(store, extra, log, &[]).await
    }

    /// Like [`Server::start`], with `env` set in the process's environment (test knobs).
    pub async fn start_env(
        store: &StoreSpec,
        extra: &[&str],
        log: &Path,
        env: &[(&str, &str)],
    ) -> Server {
        let mut args: Vec<String> = vec![
            "serve".into(),
            "--listen".into(),
            "127.0.0.1:0".into(),
            "--sim-threads".into(),
            "1".into(),
            // `ledger-test` is a dev kind.
            "--dev-kinds".into(),
        ];
        args.extend(store.args());
        if !extra.contains(&"--host-id") {
            // One host id per log file: a restart writing to the same log is the same host (it
            // waits for its previous process's lease), two hosts of one test are two hosts.
            args.push("--host-id".into());
            args.push(host_id_for(log));
        }
        args.extend(extra.iter().map(|s| (*s).to_owned()));
        let log_file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(log)
            .unwrap();
        let mut child = Command::new(env!("CARGO_BIN_EXE_zonekeep"))
            .args(&args)
            .env("ZONEKEEP_TICKET_SECRET", SECRET)
            .env("RUST_LOG", "info")
            .envs(env.iter().copied())
            .stdout(Stdio::piped())
            .stderr(Stdio::from(log_file))
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let addr = match listen_addr(stdout).await {
            Ok(addr) => addr,
            Err(line) => {
                let log = std::fs::read_to_string(log).unwrap_or_default();
                panic!("server did not start: {line:?}\n{log}");
            }
        };
        Server {
            addr,
            child: Some(child),
            log: log.to_path_buf(),
        }
    }

    /// `kill -9`.
    pub async fn kill(mut self) {
        let mut child = self.child.take().unwrap();
        tokio::task::spawn_blocking(move || {
            child.kill().unwrap();
            child.wait().unwrap();
        })
        .await
        .unwrap();
    }

    /// SIGTERM, then wait for a clean exit.
    pub async fn terminate(mut self) {
        let mut child = self.child.take().unwrap();
        let pid = child.id().to_string();
        let status = tokio::task::spawn_blocking(move || {
            assert!(Command::new("kill")
                .args(["-TERM", &pid])
                .status()
                .unwrap()
                .success());
            child.wait().unwrap()
        })
        .await
        .unwrap();
        let log = std::fs::read_to_string(&self.log).unwrap_or_default();
        assert!(status.success(), "exit status {status}\n{log}");
        assert!(log.contains("final saves written"), "{log}");
    }

    /// Sends SIGTERM without waiting for the exit.
    pub fn sigterm(&self) {
        self.signal("-TERM");
    }

    /// Waits for the process to exit; returns its status and its log.
    pub async fn wait(mut self) -> (std::process::ExitStatus, String) {
        let mut child = self.child.take().unwrap();
        let status = tokio::task::spawn_blocking(move || child.wait().unwrap())
            .await
            .unwrap();
        (
            status,
            std::fs::read_to_string(&self.log).unwrap_or_default(),
        )
    }

    /// An admin request with [`ADMIN_TOKEN`] (the host must run with `--admin-token`): the
    /// status and the body as JSON (`null` when it is not JSON).
    pub async fn admin_request(
        &self,
        method: &str,
        path: &str,
        body: Option<&Value>,
    ) -> (u16, Value) {
        let (status, bytes) = self.admin_bytes(method, path, body).await;
        (
            status,
            serde_json::from_slice(&bytes).unwrap_or(Value::Null),
        )
    }

    /// An admin request with [`ADMIN_TOKEN`]: the status and the body's bytes (a download).
    pub async fn admin_bytes(
        &self,
        method: &str,
        path: &str,
        body: Option<&Value>,
    ) -> (u16, Vec<u8>) {
        self.bearer_bytes(method, path, body, ADMIN_TOKEN).await
    }

    /// A request with the lobby credential [`LOBBY_TOKEN`]: the status and the answer as JSON.
    pub async fn lobby_request(
        &self,
        method: &str,
        path: &str,
        body: Option<&Value>,
    ) -> (u16, Value) {
        let (status, bytes) = self.bearer_bytes(method, path, body, LOBBY_TOKEN).await;
        (
            status,
            serde_json::from_slice(&bytes).unwrap_or(Value::Null),
        )
    }

    /// A request bearing `token`: the status and the body's bytes.
    pub async fn bearer_bytes(
        &self,
        method: &str,
        path: &str,
        body: Option<&Value>,
        token: &str,
    ) -> (u16, Vec<u8>) {
        bearer_request(&self.addr, method, path, body, token).await
    }

    /// GET an admin path; the answer as JSON.
    pub async fn admin(&self, path: &str) -> Value {
        self.admin_request("GET", path, None).await.1
    }

    /// POSTs `body` to an admin path; the answer as JSON.
    pub async fn post_admin(&self, path: &str, body: &Value) -> Value {
        self.admin_request("POST", path, Some(body)).await.1
    }

    /// This host's id in the fleet (from its admin API).
    pub async fn host_id(&self) -> String {
        self.admin("/admin/hosts").await["self"]
            .as_str()
            .unwrap()
            .to_owned()
    }

    /// A Prometheus counter or gauge of this host, 0 when absent.
    pub async fn metric(&self, name: &str) -> f64 {
        let text = self.get("/metrics").await;
        text.lines()
            .find_map(|l| l.strip_prefix(name)?.trim().parse().ok())
            .unwrap_or(0.0)
    }

    /// The process id.
    pub fn pid(&self) -> u32 {
        self.child.as_ref().unwrap().id()
    }

    /// Sends `signal` (e.g. `-STOP`, `-CONT`) to the process.
    pub fn signal(&self, signal: &str) {
        send_signal(self.pid(), signal);
    }

    /// GET a path; returns the body.
    pub async fn get(&self, path: &str) -> String {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let mut s = tokio::net::TcpStream::connect(&self.addr).await.unwrap();
        let req = format!("GET {path} HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n");
        s.write_all(req.as_bytes()).await.unwrap();
        let mut out = Vec::new();
        s.read_to_end(&mut out).await.unwrap();
        let text = String::from_utf8_lossy(&out).to_string();
        text.split_once("\r\n\r\n")
            .map(|(_, b)| b.to_owned())
            .unwrap_or_default()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

fn now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

/// A signed ledger-test ticket.
pub fn ticket(sub: &str, zone: &str) -> String {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let claims = json!({
        "sub": sub, "zone": zone, "exp": now() + 120, "kind": "ledger-test",
        "jti": format!("persist-{}-{n}", unique_run()),
    });
    sign(&claims)
}

/// A signed ticket for `sub` to zone `zone` of kind `kind`, single-use.
pub fn ticket_for(sub: &str, zone: &str, kind: &str) -> String {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    sign(&json!({
        "sub": sub, "zone": zone, "kind": kind, "exp": now() + 120,
        "jti": format!("{kind}-{}-{n}", unique_run()),
    }))
}

/// Kill the child if the test fails before it exits.
pub struct Reap(pub std::process::Child);

impl Drop for Reap {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts `zonekeep serve` on 127.0.0.1:0 over the data directory `data`, with `extra` flags,
/// [`SECRET`] and `RUST_LOG=info`; returns the process, its stderr (the log) and its address.
pub async fn serve_piped(data: &Path, extra: &[&str]) -> (Reap, std::process::ChildStderr, String) {
    let mut args = vec![
        "serve",
        "--data-dir",
        data.to_str().unwrap(),
        "--listen",
        "127.0.0.1:0",
        "--sim-threads",
        "1",
    ];
    args.extend_from_slice(extra);
    let mut child = Command::new(env!("CARGO_BIN_EXE_zonekeep"))
        .args(&args)
        .env("ZONEKEEP_TICKET_SECRET", SECRET)
        .env("RUST_LOG", "info")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let stderr = child.stderr.take().unwrap();
    let child = Reap(child);
    let addr = listen_addr(stdout)
        .await
        .unwrap_or_else(|line| panic!("the listen line is not a URL: {line:?}"));
    (child, stderr, addr)
}

/// A request to the host at `addr` (`HOST:PORT`) bearing `token`: the status and the body's bytes.
pub async fn bearer_request(
    addr: &str,
    method: &str,
    path: &str,
    body: Option<&Value>,
    token: &str,
) -> (u16, Vec<u8>) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let body = body.map(Value::to_string).unwrap_or_default();
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    let req = format!(
        "{method} {path} HTTP/1.1\r\nHost: t\r\nAuthorization: Bearer {token}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    s.write_all(req.as_bytes()).await.unwrap();
    let mut out = Vec::new();
    s.read_to_end(&mut out).await.unwrap();
    let split = out
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .unwrap_or_else(|| panic!("{path}: no header end: {}", String::from_utf8_lossy(&out)));
    let head = String::from_utf8_lossy(&out[..split]).to_string();
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("{path}: no status line: {head}"));
    (status, out[split + 4..].to_vec())
}

/// A suffix unique to this test run (process id and clock), for zone ids and principals in a
/// database shared between runs.
pub fn unique_run() -> String {
    format!(
        "{}-{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos()
    )
}

/// `claims` signed with [`SECRET`] under the default key id.
pub fn sign(claims: &Value) -> String {
    zonekeep_server::ticket::sign_parts(
        SECRET.as_bytes(),
        &json!({"alg": "HS256", "kid": "default"}),
        claims,
    )
}

/// The address from the host's first stdout line (`zonekeep listening on http://ADDR`), or the
/// line itself when it is something else.
pub async fn listen_addr(stdout: std::process::ChildStdout) -> Result<String, String> {
    let line = tokio::task::spawn_blocking(move || {
        let mut line = String::new();
        BufReader::new(stdout).read_line(&mut line).unwrap();
        line
    })
    .await
    .unwrap();
    match line.trim().strip_prefix("zonekeep listening on http://") {
        Some(addr) => Ok(addr.to_owned()),
        None => Err(line),
    }
}

/// A WebSocket to `zone` at `addr` that has sent its Hello with `ticket` (current protocol version).
pub async fn hello(
    addr: &str,
    zone: &str,
    ticket: String,
) -> tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>> {
    hello_at(&format!("ws://{addr}/zones/{zone}"), ticket).await
}

/// A WebSocket to the zone URL `url` that has sent its Hello with `ticket`.
pub async fn hello_at(
    url: &str,
    ticket: String,
) -> tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>> {
    let (mut ws, _) = tokio_tungstenite::connect_async(url).await.unwrap();
    let hello = ClientMessage::Hello(Hello {
        versions: vec![zonekeep_protocol::limits::PROTOCOL_VERSION],
        ticket,
        reconnect_token: vec![],
        content_version: String::new(),
        resume_from: None,
    });
    ws.send(Message::Binary(hello.to_bytes().unwrap().into()))
        .await
        .unwrap();
    ws
}

/// What one ledger-test client has seen so far.
#[derive(Debug, Clone, Default)]
pub struct ClientLog {
    /// The zone's counters sent on join.
    pub state: Option<Value>,
    /// Numbers sent (`n` of each input), this connection.
    pub sent: Vec<u64>,
    /// Highest input seq the server acknowledged.
    pub acked: u32,
    /// Settled facts: key → n.
    pub settled: BTreeMap<String, u64>,
    /// The Kick (code, reason) or None.
    pub kicked: Option<(u16, String)>,
    /// The socket closed.
    pub closed: bool,
    /// Redirects followed before the Welcome.
    pub redirects: u32,
    /// The URL the client was welcomed at.
    pub landed: Option<String>,
}

/// A connected ledger-test client sending inputs on a timer.
pub struct LedgerClient {
    pub log: watch::Receiver<ClientLog>,
    task: tokio::task::JoinHandle<()>,
}

impl LedgerClient {
    /// Joins `zone` as `principal` and sends `count` inputs numbered from
    /// `first` every `every`, while reading everything the server sends.
    pub async fn start(
        addr: &str,
        zone: &str,
        principal: &str,
        first: u64,
        count: u64,
        every: Duration,
    ) -> LedgerClient {
        let url = format!("ws://{addr}/zones/{zone}");
        let (ws, _) = tokio_tungstenite::connect_async(url.as_str())
            .await
            .unwrap();
        let (tx, rx) = watch::channel(ClientLog::default());
        let hello = ClientMessage::Hello(Hello {
            versions: vec![zonekeep_protocol::limits::PROTOCOL_VERSION],
            ticket: ticket(principal, zone),
            reconnect_token: vec![],
            content_version: String::new(),
            resume_from: None,
        });
        let task = tokio::spawn(run(ws, url, hello, tx, first, count, every));
        LedgerClient { log: rx, task }
    }

    /// Waits (bounded) until `f` holds for the log; returns a copy.
    pub async fn until(&mut self, what: &str, f: impl Fn(&ClientLog) -> bool) -> ClientLog {
        let r = tokio::time::timeout(Duration::from_secs(20), self.log.wait_for(|l| f(l)))
            .await
            .map(|r| r.map(|l| l.clone()));
        match r {
            Ok(Ok(l)) => l,
            _ => panic!("timed out waiting for {what}: {:?}", *self.log.borrow()),
        }
    }

    /// The log now.
    pub fn snapshot(&self) -> ClientLog {
        self.log.borrow().clone()
    }

    /// Closes the client.
    pub fn stop(self) -> ClientLog {
        self.task.abort();
        let l = self.log.borrow().clone();
        l
    }
}

type Ws =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

async fn run(
    mut ws: Ws,
    mut url: String,
    hello: ClientMessage,
    log: watch::Sender<ClientLog>,
    first: u64,
    count: u64,
    every: Duration,
) {
    if ws
        .send(Message::Binary(hello.to_bytes().unwrap().into()))
        .await
        .is_err()
    {
        log.send_modify(|l| l.closed = true);
        return;
    }
    let mut schema = Schema {
        pos_step: 0.01,
        kinds: vec![],
    };
    let mut welcomed = false;
    let mut next = 0u64;
    let mut timer = tokio::time::interval(every);
    loop {
        tokio::select! {
            _ = timer.tick(), if welcomed && next < count => {
                let n = first + next;
                next += 1;
                let seq = u32::try_from(next).unwrap();
                let msg = ClientMessage::Input(Input { seq, view_tick: 0, payload: n.to_le_bytes().to_vec() });
                if ws.send(Message::Binary(msg.to_bytes().unwrap().into())).await.is_err() {
                    break;
                }
                log.send_modify(|l| l.sent.push(n));
            }
            m = ws.next() => {
                let b = match m {
                    Some(Ok(Message::Binary(b))) => b,
                    Some(Ok(_)) => continue,
                    _ => break,
                };
                let ctx = DeltaContext { schema: &schema, known: &[] };
                match ServerMessage::decode(&b, Some(ctx)) {
                    Ok(ServerMessage::Welcome(w)) => {
                        schema = w.schema;
                        welcomed = true;
                        let at = url.clone();
                        log.send_modify(|l| l.landed = Some(at));
                    }
                    Ok(ServerMessage::Redirect(r)) => {
                        // As the SDKs do: the same Hello, at the owner.
                        let Ok((next, _)) = tokio_tungstenite::connect_async(r.url.as_str()).await else {
                            break;
                        };
                        ws = next;
                        url = r.url;
                        log.send_modify(|l| l.redirects += 1);
                        if ws
                            .send(Message::Binary(hello.to_bytes().unwrap().into()))
                            .await
                            .is_err()
                        {
                            break;
                        }
                    }
                    Ok(ServerMessage::Delta(d)) => log.send_modify(|l| {
                        l.acked = l.acked.max(d.ack);
                        for e in d.events.iter().flatten() {
                            let v: Value = serde_json::from_slice(&e.payload).unwrap();
                            match e.topic {
                                TOPIC_STATE => l.state = Some(v),
                                TOPIC_SETTLED => {
                                    assert_eq!(v["ok"], true, "fact refused: {v}");
                                    l.settled.insert(
                                        v["key"].as_str().unwrap().to_owned(),
                                        v["seq"].as_u64().unwrap(),
                                    );
                                }
                                _ => {}
                            }
                        }
                    }),
                    Ok(ServerMessage::Kick(k)) => {
                        log.send_modify(|l| l.kicked = Some((k.code.0, k.reason.clone())));
                    }
                    Ok(_) => {}
                    Err(e) => panic!("undecodable server message: {e}"),
                }
            }
        }
    }
    log.send_modify(|l| l.closed = true);
}

/// Keys and numbers of the facts in flight in a save.
pub fn in_flight(snap: &Snapshot) -> BTreeMap<String, (String, u64)> {
    snap.facts
        .iter()
        .map(|f| {
            (
                f.key.as_str().to_owned(),
                (
                    f.principal.clone().unwrap_or_default(),
                    f.payload["seq"].as_u64().unwrap(),
                ),
            )
        })
        .collect()
}

/// Checks the ledger for `zone`: every `must` key present, no number of a
/// principal recorded twice, every number one that was sent, and each
/// principal's `score` total equal to its rows. Returns rows per principal.
pub async fn check_ledger(
    store: &StoreSpec,
    zone: &str,
    must: &BTreeSet<String>,
    sent: &BTreeMap<String, BTreeSet<u64>>,
) -> BTreeMap<String, usize> {
    let rows = store.facts(zone).await;
    let keys: BTreeSet<&str> = rows.iter().map(|(k, _, _)| k.as_str()).collect();
    for k in must {
        assert!(
            keys.contains(k.as_str()),
            "fact {k} is missing from the ledger"
        );
    }
    let mut seen: BTreeMap<String, BTreeSet<u64>> = BTreeMap::new();
    for (key, principal, payload) in &rows {
        let n = payload["seq"].as_u64().unwrap();
        assert!(
            seen.entry(principal.clone()).or_default().insert(n),
            "input {n} of {principal} recorded twice (second key {key})"
        );
        assert!(
            sent.get(principal).is_some_and(|s| s.contains(&n)),
            "ledger holds input {n} of {principal} that was never sent"
        );
    }
    let mut out = BTreeMap::new();
    for (principal, ns) in &seen {
        let total = store.total(principal, "score").await;
        assert_eq!(
            total,
            i64::try_from(ns.len()).unwrap(),
            "{principal}: score total equals its facts (none applied twice)"
        );
        out.insert(principal.clone(), ns.len());
    }
    out
}

/// The zone entry named `zone` in an `/admin/zones` answer.
pub fn zone_entry<'a>(list: &'a Value, zone: &str) -> Option<&'a Value> {
    list["zones"]
        .as_array()?
        .iter()
        .find(|z| z["id"].as_str() == Some(zone))
}

/// One server-sent event: its `event:` name (empty without one) and its `data:` lines, joined
/// by `\n`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SseEvent {
    pub event: String,
    pub data: String,
}

/// An HTTP/1.1 answer whose body is read as it arrives (a stream of server-sent events), from
/// [`get_streamed`].
pub struct Streamed {
    pub status: u16,
    pub headers: hyper::HeaderMap,
    body: hyper::body::Incoming,
    buf: Vec<u8>,
    /// The event being read: its name and data lines so far (kept here, so a `next_event`
    /// dropped by a timeout loses nothing).
    event: String,
    data: Option<String>,
}

/// GET `path` at `addr` (`HOST:PORT`), bearing `Authorization: Bearer <token>` when given: the
/// answer's status and type, its body left to read.
pub async fn get_streamed(addr: &str, path: &str, token: Option<&str>) -> Streamed {
    let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
    let (mut send, conn) = hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(tcp))
        .await
        .unwrap();
    tokio::spawn(conn);
    let mut req = hyper::Request::get(path).header("host", addr);
    if let Some(t) = token {
        req = req.header("authorization", format!("Bearer {t}"));
    }
    let res = send
        .send_request(
            req.body(http_body_util::Empty::<bytes::Bytes>::new())
                .unwrap(),
        )
        .await
        .unwrap();
    Streamed {
        status: res.status().as_u16(),
        headers: res.headers().clone(),
        body: res.into_body(),
        buf: Vec::new(),
        event: String::new(),
        data: None,
    }
}

impl Streamed {
    /// The answer's header `name`, empty without one.
    pub fn header(&self, name: &str) -> &str {
        self.headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
    }

    /// The rest of the body as JSON (`null` when it is not JSON): for a short answer, a refusal.
    pub async fn json(mut self) -> Value {
        use http_body_util::BodyExt;
        while let Some(Ok(frame)) = self.body.frame().await {
            if let Ok(d) = frame.into_data() {
                self.buf.extend_from_slice(&d);
            }
        }
        serde_json::from_slice(&self.buf).unwrap_or(Value::Null)
    }

    /// The next event (comments skipped), or `None` once the stream has ended.
    pub async fn next_event(&mut self) -> Option<SseEvent> {
        use http_body_util::BodyExt;
        loop {
            while let Some(end) = self.buf.iter().position(|b| *b == b'\n') {
                let raw: Vec<u8> = self.buf.drain(..=end).collect();
                let line = String::from_utf8(raw).unwrap();
                let line = line.trim_end_matches('\n').trim_end_matches('\r');
                if line.is_empty() {
                    if let Some(data) = self.data.take() {
                        let event = std::mem::take(&mut self.event);
                        return Some(SseEvent { event, data });
                    }
                    self.event.clear();
                    continue;
                }
                if line.starts_with(':') {
                    continue;
                }
                let (field, value) = line.split_once(':').unwrap_or((line, ""));
                let value = value.strip_prefix(' ').unwrap_or(value);
                match field {
                    "event" => value.clone_into(&mut self.event),
                    "data" => match &mut self.data {
                        Some(d) => {
                            d.push('\n');
                            d.push_str(value);
                        }
                        None => self.data = Some(value.to_owned()),
                    },
                    _ => {}
                }
            }
            match self.body.frame().await {
                Some(Ok(frame)) => {
                    if let Ok(d) = frame.into_data() {
                        self.buf.extend_from_slice(&d);
                    }
                }
                _ => return None,
            }
        }
    }
}

/// Runs `cmd` to completion on a blocking thread (so a host served by this test's runtime keeps
/// answering it) and answers its output.
pub async fn output_off_runtime(mut cmd: std::process::Command) -> std::process::Output {
    tokio::task::spawn_blocking(move || cmd.output().unwrap())
        .await
        .unwrap()
}

/// Sends `signal` (e.g. `-TERM`, `-STOP`) to process `pid` with `kill`.
pub fn send_signal(pid: u32, signal: &str) {
    assert!(Command::new("kill")
        .args([signal, &pid.to_string()])
        .status()
        .unwrap()
        .success());
}
