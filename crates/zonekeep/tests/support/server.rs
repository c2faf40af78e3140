//! A `zonekeep serve` process run by a test: starting it (on a store, with flags and test
//! knobs), stopping it by kill, SIGTERM or signal, and the requests a test makes of it (admin,
//! lobby, metrics, plain GET).

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use serde_json::Value;

use super::{StoreSpec, SECRET};

/// The admin token hosts get with `--admin-token` in tests that read the admin API.
pub const ADMIN_TOKEN: &str = "fleet-admin-token-0123456789abcdef";
/// The lobby credential the lobby tests start hosts with (`--lobby-token`).
pub const LOBBY_TOKEN: &str = "fleet-lobby-token-0123456789abcdef";

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

/// The zone entry named `zone` in an `/admin/zones` answer.
pub fn zone_entry<'a>(list: &'a Value, zone: &str) -> Option<&'a Value> {
    list["zones"]
        .as_array()?
        .iter()
        .find(|z| z["id"].as_str() == Some(zone))
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
