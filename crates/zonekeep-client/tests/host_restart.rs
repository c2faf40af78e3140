//! The client across a restart of a dev host (in process, the same address each time): the host
//! forgets every reconnect token, and may come back with its ticket key (the same data directory)
//! or with another one. With a fresh-ticket source the client rejoins as a new player either way;
//! a fresh ticket the host refuses for its signature ends the connection instead of looping.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::net::SocketAddr;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use zonekeep_client::{connect, CloseReason, ConnectOptions, Connection, Event, ReconnectPolicy};
use zonekeep_core::{Role, ZoneConfig};
use zonekeep_protocol::messages::KickCode;
use zonekeep_server::examples::Dots;
use zonekeep_server::ticket::{mint, unix_now, MintRequest, TicketKey};
use zonekeep_server::{dev_key, Host, ServerConfig};

const ZONE: &str = "dots-restart";

/// A dev host (no configured key: it keeps its own in `data_dir`) serving on `addr`.
struct Running {
    stop: oneshot::Sender<()>,
    task: JoinHandle<()>,
}

async fn start(addr: SocketAddr, data_dir: &Path) -> (Running, SocketAddr) {
    let config = ServerConfig {
        listen: addr,
        sim_threads: 1,
        dev: true,
        data_dir: data_dir.to_path_buf(),
        ..ServerConfig::default()
    };
    let zone = ZoneConfig {
        reconnect_grace: Duration::from_secs(30),
        ..ZoneConfig::default()
    };
    let host = Host::builder()
        .config(config)
        .zone_with::<Dots>("dots", zone, serde_json::Value::Null)
        .default_kind("dots")
        .build()
        .unwrap();
    let listener = tokio::net::TcpListener::bind(addr).await.unwrap();
    let bound = listener.local_addr().unwrap();
    let (stop, stop_rx) = oneshot::channel::<()>();
    let task = tokio::spawn(async move {
        host.serve(listener, async {
            let _ = stop_rx.await;
        })
        .await
        .unwrap();
    });
    (Running { stop, task }, bound)
}

impl Running {
    /// Graceful shutdown: every client is kicked with SHUTTING_DOWN and the listener closes.
    async fn stop(self) {
        let _ = self.stop.send(());
        self.task.await.unwrap();
    }
}

/// Mints tickets with whichever secret `key` holds now, counting the calls.
#[derive(Clone)]
struct TicketDesk {
    key: Arc<Mutex<Vec<u8>>>,
    minted: Arc<AtomicUsize>,
}

impl TicketDesk {
    fn new(secret: Vec<u8>) -> Self {
        Self {
            key: Arc::new(Mutex::new(secret)),
            minted: Arc::new(AtomicUsize::new(0)),
        }
    }

    fn mint(&self) -> String {
        self.minted.fetch_add(1, Ordering::SeqCst);
        let key = TicketKey::new("dev", self.key.lock().unwrap().clone(), false).unwrap();
        let req = MintRequest {
            sub: "alice".into(),
            zone: ZONE.into(),
            role: Role::Player,
            ttl_secs: 60,
            params: None,
            claims: Default::default(),
        };
        mint(&key, &req, unix_now()).unwrap()
    }

    fn options(&self) -> ConnectOptions {
        let desk = self.clone();
        let mut opts = ConnectOptions::new(self.mint()).with_fresh_ticket(move || {
            let t = desk.mint();
            async move { Ok::<_, String>(t) }
        });
        opts.reconnect = ReconnectPolicy {
            // The host is down for a moment between the two runs: retry often enough to outlast it.
            max_attempts: 400,
            backoff_min: Duration::from_millis(5),
            backoff_max: Duration::from_millis(25),
            ..ReconnectPolicy::default()
        };
        opts
    }
}

/// Reads events until the next Welcome after a reconnect; returns whether it resumed.
async fn next_welcome(conn: &mut Connection) -> Result<(u32, bool), CloseReason> {
    loop {
        match conn.recv().await.expect("connection ended without Closed") {
            Event::Welcome { welcome, resumed } => return Ok((welcome.player_id, resumed)),
            Event::Closed(reason) => return Err(reason),
            _ => {}
        }
    }
}

/// Sends one input and waits for the Delta acknowledging it.
async fn input_acked(conn: &mut Connection) -> u32 {
    let seq = conn.send_input(&[1, 0]).unwrap();
    loop {
        match conn.recv().await.expect("connection ended") {
            Event::Delta(p) if p.ack >= seq => return seq,
            Event::Closed(r) => panic!("closed: {r:?}"),
            _ => {}
        }
    }
}

/// Joins a host on `first_dir`, plays, restarts the host on `second_dir` at the same address
/// (the desk then mints with `desk_key_after`), and returns the connection and what it saw.
async fn restart_under_client(
    first_dir: &Path,
    second_dir: &Path,
    desk_key_after: impl FnOnce() -> Vec<u8>,
) -> (
    Connection,
    TicketDesk,
    Result<(u32, bool), CloseReason>,
    u32,
) {
    let (host, addr) = start("127.0.0.1:0".parse().unwrap(), first_dir).await;
    let desk = TicketDesk::new(dev_key::load_or_create(first_dir).unwrap());
    let url = format!("ws://{addr}/zones/{ZONE}");
    let (mut conn, welcome) = connect(&url, desk.options()).await.unwrap();
    assert_eq!(input_acked(&mut conn).await, 1);

    host.stop().await;
    let (host, _) = start(addr, second_dir).await;
    *desk.key.lock().unwrap() = desk_key_after();
    let outcome = next_welcome(&mut conn).await;
    host.stop().await;
    (conn, desk, outcome, welcome.player_id)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rejoins_a_host_restarted_with_its_key_as_a_new_player() {
    let dir = tempfile_dir();
    let body = async {
        let (conn, desk, outcome, _) = restart_under_client(dir.path(), dir.path(), || {
            dev_key::load_or_create(dir.path()).unwrap()
        })
        .await;
        let (_, resumed) = outcome.expect("rejoined");
        // The old ticket still verifies (same key), but the restarted host forgot the token.
        assert!(!resumed, "the restarted host cannot resume the old player");
        assert_eq!(desk.minted.load(Ordering::SeqCst), 2, "one fresh ticket");
        let c = conn.counters();
        assert_eq!((c.reconnects, c.resumes), (1, 0));
        conn.close().await;
    };
    tokio::time::timeout(Duration::from_secs(60), body)
        .await
        .expect("test hung");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn renews_a_ticket_the_restarted_host_no_longer_verifies() {
    let first = tempfile_dir();
    let second = tempfile_dir();
    let body = async {
        let (conn, desk, outcome, _) = restart_under_client(first.path(), second.path(), || {
            dev_key::load_or_create(second.path()).unwrap()
        })
        .await;
        let (_, resumed) = outcome.expect("rejoined");
        assert!(!resumed);
        // BAD_TICKET on the resume → a new ticket with the token → RECONNECT_REFUSED → a new
        // ticket for a fresh join.
        assert_eq!(desk.minted.load(Ordering::SeqCst), 3);
        conn.close().await;
    };
    tokio::time::timeout(Duration::from_secs(60), body)
        .await
        .expect("test hung");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stops_when_a_fresh_ticket_is_refused_for_its_signature() {
    let first = tempfile_dir();
    let second = tempfile_dir();
    let body = async {
        // The ticket source keeps signing with the old key: its tickets can never be accepted.
        let (_conn, desk, outcome, _) = restart_under_client(first.path(), second.path(), || {
            dev_key::load_or_create(first.path()).unwrap()
        })
        .await;
        match outcome {
            Err(CloseReason::Kicked(k)) => assert_eq!(k.code, KickCode::BAD_TICKET),
            other => panic!("expected a BAD_TICKET close, got {other:?}"),
        }
        assert_eq!(
            desk.minted.load(Ordering::SeqCst),
            2,
            "one fresh ticket, then stop"
        );
    };
    tokio::time::timeout(Duration::from_secs(60), body)
        .await
        .expect("test hung");
}

fn tempfile_dir() -> tempfile::TempDir {
    tempfile::tempdir().unwrap()
}
