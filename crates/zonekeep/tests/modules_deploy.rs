//! Deploying zone modules to running hosts: a hot deploy under players' load with nobody
//! disconnected and the frozen inputs reported, a deploy whose new module refuses the zones'
//! saves rolled back, and (on PostgreSQL) a module pushed through one host loaded by another.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "../../zonekeep-wasm/tests/support/guest_build.rs"]
mod guest_build;
mod support;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use serde_json::{json, Value};
use support::{hello_at, ticket_for, unique_run, Server, StoreSpec, ADMIN_TOKEN};
use tokio_tungstenite::tungstenite::Message;
use zonekeep_protocol::messages::{ClientMessage, Input, ServerMessage};

/// `bytes` with a custom section appended: another module (another digest) with the same code,
/// as a rebuild of the same game would be.
fn another_build(bytes: &[u8], label: &str) -> Vec<u8> {
    let name = b"zonekeep-build";
    let mut section = vec![u8::try_from(name.len()).unwrap()];
    section.extend_from_slice(name);
    section.extend_from_slice(label.as_bytes());
    let mut out = bytes.to_vec();
    out.push(0); // custom section
    out.push(u8::try_from(section.len()).unwrap());
    out.extend_from_slice(&section);
    out
}

/// A module that creates fine and refuses every save it is asked to restore (op 11 traps).
fn refuses_saves() -> Vec<u8> {
    support::push::trapping_in(11)
}

/// POSTs the module to `/admin/modules/{kind}`: status and answer.
async fn push(server: &Server, kind: &str, query: &str, module: &[u8]) -> (u16, Value) {
    support::push::push_module(&server.addr, kind, query, module, None).await
}

/// What one player saw.
#[derive(Debug, Default)]
struct Seen {
    deltas: AtomicU64,
    ended: AtomicBool,
}

/// A player of `zone` that joins at `url` (following redirects), then moves every 30 ms and
/// counts Deltas until `stop`; `ended` records a Kick or a closed connection.
async fn player(url: String, zone: String, who: String, seen: Arc<Seen>, stop: Arc<AtomicBool>) {
    let mut ws = hello_at(
        &format!("{url}/zones/{zone}"),
        ticket_for(&who, &zone, "tag"),
    )
    .await;
    let mut welcomed = false;
    let mut seq = 0u32;
    let mut every = tokio::time::interval(Duration::from_millis(30));
    while !stop.load(Ordering::Relaxed) {
        tokio::select! {
            m = ws.next() => {
                let b = match m {
                    Some(Ok(Message::Binary(b))) => b,
                    Some(Ok(_)) => continue,
                    _ => { seen.ended.store(true, Ordering::Relaxed); return; }
                };
                match b.first() {
                    Some(0x81) => welcomed = true,
                    Some(0x82) => { seen.deltas.fetch_add(1, Ordering::Relaxed); }
                    Some(0x84) => { seen.ended.store(true, Ordering::Relaxed); return; }
                    Some(0x85) => {
                        let Ok(ServerMessage::Redirect(r)) = ServerMessage::decode(&b, None) else { panic!("bad Redirect") };
                        ws = hello_at(&r.url, ticket_for(&who, &zone, "tag")).await;
                    }
                    _ => {}
                }
            }
            _ = every.tick(), if welcomed => {
                seq += 1;
                let dir = if seq % 40 < 20 { 1u8 } else { 0xff };
                let m = ClientMessage::Input(Input { seq, view_tick: 0, payload: vec![dir, 0] });
                if ws.send(Message::Binary(m.to_bytes().unwrap().into())).await.is_err() {
                    seen.ended.store(true, Ordering::Relaxed);
                    return;
                }
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hot_deploy_under_load_disconnects_nobody_and_a_refused_one_rolls_back() {
    let dir = tempfile::tempdir().unwrap();
    let tag = std::fs::read(guest_build::tag_module()).unwrap();
    let file = dir.path().join("tag.wasm");
    std::fs::write(&file, &tag).unwrap();
    let module = format!("tag={}", file.display());
    let server = Server::with_module(dir.path(), &module).await;
    let url = format!("ws://{}", server.addr);
    let stop = Arc::new(AtomicBool::new(false));
    let mut players = Vec::new();
    let mut seen = Vec::new();
    for i in 0..6 {
        let s = Arc::new(Seen::default());
        seen.push(s.clone());
        players.push(tokio::spawn(player(
            url.clone(),
            format!("tag-{}", i % 2),
            format!("p{i}"),
            s,
            stop.clone(),
        )));
    }
    let wait_deltas = |n: u64| {
        let seen = seen.clone();
        async move {
            let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
            while seen.iter().any(|s| s.deltas.load(Ordering::Relaxed) < n) {
                assert!(
                    tokio::time::Instant::now() < deadline,
                    "players stopped receiving"
                );
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
    };
    wait_deltas(20).await;

    // A new build of the game reaches both running zones; the players stay connected.
    let v2 = another_build(&tag, "v2");
    let (status, out) = push(&server, "tag", "", &v2).await;
    assert_eq!(status, 200, "{out}");
    assert_eq!(out["rolled_back"], false, "{out}");
    let zones = out["upgrade"]["zones"].as_array().unwrap();
    assert_eq!(zones.len(), 2, "{out}");
    for z in zones {
        assert_eq!(z["upgraded"], true, "{z}");
        assert_eq!(z["kept"], 3, "every player kept its connection: {z}");
        assert_eq!(z["resumed"], 0, "{z}");
        assert!(
            z["frozen_inputs"].is_u64(),
            "the frozen inputs are reported: {z}"
        );
        assert!(
            z["frozen_us"].as_u64().unwrap() > 0,
            "and how long the zone was frozen: {z}"
        );
    }
    assert_eq!(out["version"], 1, "{out}");
    let after: Vec<u64> = seen
        .iter()
        .map(|s| s.deltas.load(Ordering::Relaxed))
        .collect();
    wait_deltas(after.iter().max().copied().unwrap_or(0) + 20).await;
    let modules = server.admin("/admin/modules").await;
    assert_eq!(modules["kinds"][0]["sha256"], out["sha256"], "{modules}");
    assert_eq!(server.metric("zonekeep_zones_upgraded_total").await, 2.0);

    // A module that refuses the zones' saves: every zone stays on v2.
    let (status, out) = push(&server, "tag", "", &refuses_saves()).await;
    assert_eq!(status, 200, "{out}");
    assert_eq!(out["rolled_back"], true, "{out}");
    for z in out["upgrade"]["zones"].as_array().unwrap() {
        assert_eq!(z["upgraded"], false, "{z}");
        let refused = z["refused"].as_str().unwrap();
        assert!(refused.contains("cannot be restored"), "{z}");
        assert!(
            refused.contains("implements save and restore"),
            "the refusal says what to implement: {z}"
        );
    }
    let modules = server.admin("/admin/modules").await;
    assert_eq!(
        modules["kinds"][0]["sha256"],
        json!(sha256_hex(&v2)),
        "{modules}"
    );
    assert_eq!(
        modules["deploys"][0]["version"], 1,
        "the store keeps v2: {modules}"
    );

    // A module that does not load is refused before any zone is touched.
    let (status, out) = push(&server, "tag", "", b"\0asm\x01\0\0\0garbage").await;
    assert_eq!(status, 422, "{out}");
    let (status, _) = push(&server, "nope", "", &v2).await;
    assert_eq!(status, 404);

    // The operator aborts the v2 deploy: every zone goes back to the first build, players still
    // connected, and the store records it; there is nothing before that to go back to.
    let module_cmd = |args: &[&str], expect: i32| {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_zonekeep"))
            .arg("module")
            .args(args)
            .args(["--kind", "tag", "--url"])
            .arg(format!("http://{}", server.addr))
            .env("ZONEKEEP_ADMIN_TOKEN", ADMIN_TOKEN)
            .output()
            .unwrap();
        assert_eq!(
            out.status.code(),
            Some(expect),
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice::<Value>(&out.stdout).unwrap_or(Value::Null)
    };
    let rollback = |expect: i32| module_cmd(&["rollback"], expect);
    let out = rollback(0);
    assert_eq!(out["sha256"], json!(sha256_hex(&tag)), "{out}");
    assert_eq!(out["version"], 2, "{out}");
    for z in out["upgrade"]["zones"].as_array().unwrap() {
        assert_eq!(z["upgraded"], true, "{z}");
        assert_eq!(z["kept"], 3, "{z}");
    }
    let modules = server.admin("/admin/modules").await;
    assert_eq!(
        modules["kinds"][0]["sha256"],
        json!(sha256_hex(&tag)),
        "{modules}"
    );
    assert_eq!(modules["deploys"][0]["version"], 2, "{modules}");
    assert_eq!(modules["deploys"][0]["cause"], "rollback", "{modules}");
    rollback(2);

    // The kind's history: the operator's rollback, then the push of v2.
    let history = module_cmd(&["history"], 0);
    let entries = history["history"].as_array().unwrap();
    let listed: Vec<(u64, &str, &str)> = entries
        .iter()
        .map(|d| {
            (
                d["version"].as_u64().unwrap(),
                d["cause"].as_str().unwrap(),
                d["sha256"].as_str().unwrap(),
            )
        })
        .collect();
    let (v1_sha, v2_sha) = (sha256_hex(&tag), sha256_hex(&v2));
    assert_eq!(
        listed,
        vec![
            (2, "rollback", v1_sha.as_str()),
            (1, "push", v2_sha.as_str())
        ],
        "{history}"
    );
    assert_eq!(history["running"], json!(v1_sha), "{history}");

    // Any entry of it can be gone back to: v2 again, loaded from the store, every zone upgraded
    // with its players, recorded as the kind's third deploy.
    let out = module_cmd(&["rollback", "--to-version", "1"], 0);
    assert_eq!(out["rolled_back"], true, "{out}");
    assert_eq!(out["sha256"], json!(v2_sha), "{out}");
    assert_eq!(out["version"], 3, "{out}");
    for z in out["upgrade"]["zones"].as_array().unwrap() {
        assert_eq!(z["upgraded"], true, "{z}");
        assert_eq!(z["kept"], 3, "{z}");
    }
    let history = server.admin("/admin/modules/tag/history?limit=1").await;
    assert_eq!(history["history"].as_array().map(Vec::len), Some(1));
    assert_eq!(history["history"][0]["version"], 3, "{history}");
    assert_eq!(history["history"][0]["cause"], "rollback", "{history}");
    assert_eq!(history["running"], json!(v2_sha), "{history}");
    // The module it runs already, and a version the history does not hold, are refused.
    module_cmd(&["rollback", "--to-version", "3"], 2);
    module_cmd(&["rollback", "--to-version", "99"], 2);
    let (status, out) = push(&server, "tag/rollback", "?version=99", b"").await;
    assert_eq!(status, 404, "{out}");
    assert_eq!(out["error"]["code"], "unknown_version", "{out}");
    let (status, out) = push(&server, "tag/rollback", "?version=3", b"").await;
    assert_eq!(status, 409, "{out}");
    assert_eq!(out["error"]["code"], "already_running", "{out}");

    let last: Vec<u64> = seen
        .iter()
        .map(|s| s.deltas.load(Ordering::Relaxed))
        .collect();
    wait_deltas(last.iter().max().copied().unwrap_or(0) + 10).await;
    stop.store(true, Ordering::Relaxed);
    for p in players {
        p.await.unwrap();
    }
    for (i, s) in seen.iter().enumerate() {
        assert!(
            !s.ended.load(Ordering::Relaxed),
            "player {i} was disconnected"
        );
    }
    server.terminate().await;
}

fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::{Digest, Sha256};
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_module_pushed_through_one_host_is_loaded_by_another() {
    let Some(pg) = support::service_url(
        "ZONEKEEP_TEST_POSTGRES",
        "a_module_pushed_through_one_host_is_loaded_by_another",
    ) else {
        return;
    };
    let store = StoreSpec::postgres_isolated(&pg, &unique_run()).await;
    let dir = tempfile::tempdir().unwrap();
    let args = ["--admin-token", ADMIN_TOKEN, "--module", "tag"];
    let a = Server::start(&store, &args, &dir.path().join("a.log")).await;
    let b = Server::start(&store, &args, &dir.path().join("b.log")).await;
    // Nothing deployed yet: the kind exists, its zones cannot start.
    assert!(b.admin("/admin/modules").await["kinds"][0]["sha256"].is_null());

    let file = guest_build::tag_module();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_zonekeep"))
        .args(["module", "push"])
        .arg(&file)
        .args(["--kind", "tag", "--url", &format!("http://{}", a.addr)])
        .env("ZONEKEEP_ADMIN_TOKEN", ADMIN_TOKEN)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let digest = sha256_hex(&std::fs::read(&file).unwrap());
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        let m = b.admin("/admin/modules").await;
        if m["kinds"][0]["sha256"] == json!(digest) {
            assert_eq!(m["deploys"][0]["version"], 1, "{m}");
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "host b never loaded the module: {m}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // A player entering through b plays the pushed game (wherever the fleet places the zone).
    let seen = Arc::new(Seen::default());
    let stop = Arc::new(AtomicBool::new(false));
    let p = tokio::spawn(player(
        format!("ws://{}", b.addr),
        "fleet-tag-1".into(),
        "ann".into(),
        seen.clone(),
        stop.clone(),
    ));
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while seen.deltas.load(Ordering::Relaxed) < 10 {
        assert!(!seen.ended.load(Ordering::Relaxed), "the player was kicked");
        assert!(
            tokio::time::Instant::now() < deadline,
            "no Deltas from the pushed module"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    stop.store(true, Ordering::Relaxed);
    p.await.unwrap();
    a.terminate().await;
    b.terminate().await;
}
