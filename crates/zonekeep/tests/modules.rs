//! Zone modules in a real `zonekeep serve`: the tag example served from its `.wasm`, and hostile
//! modules stopped one by one with their reasons, their players kicked, the reasons in the admin
//! API until removed, while a native zone on the same simulation thread drops no tick.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "../../zonekeep-wasm/tests/support/guest_build.rs"]
mod guest_build;
mod support;
#[path = "../../zonekeep-wasm/tests/support/timer_storm.rs"]
mod timer_storm;

use std::path::Path;

use futures_util::StreamExt;
use serde_json::json;
use support::{hello, ticket_for, Server, StoreSpec, ADMIN_TOKEN};
use tokio_tungstenite::tungstenite::Message;
use zonekeep_protocol::messages::{KickCode, ServerMessage};

/// A module that fails at its first TICK after a player joined (so the player sees the kick):
/// JOIN (op 2) sets a flag at address 100; TICK (op 8) runs `body` once the flag is set.
fn hostile(body: &str, extra: &str) -> Vec<u8> {
    wat::parse_str(format!(
        r#"(module
            (import "zonekeep" "log" (func $log (param i32 i32 i32)))
            {extra}
            (memory (export "memory") 1)
            (func (export "zk_abi") (result i32) i32.const 5)
            (func (export "zk_alloc") (param i32) (result i32) i32.const 4096)
            (func (export "zk_call") (param $op i32) (param $len i32) (result i64)
                (if (i32.eq (local.get $op) (i32.const 2)) (then (i32.store8 (i32.const 100) (i32.const 1))))
                (if (i32.and (i32.eq (local.get $op) (i32.const 8)) (i32.load8_u (i32.const 100)))
                    (then {body}))
                i64.const 0))"#
    ))
    .unwrap()
}

const PANIC_MSG: &str = "panicked at src/lib.rs:3:9: out of cheese";

/// (kind, module, what its players' kick reason says)
fn hostiles() -> Vec<(&'static str, Vec<u8>, String)> {
    let panic = format!(
        "(call $log (i32.const 5) (i32.const 0) (i32.const {})) unreachable",
        PANIC_MSG.len()
    );
    vec![
        (
            "spin",
            hostile("(loop $l (br $l))", ""),
            "zone failed: CPU budget".into(),
        ),
        (
            "bomb",
            // Grows until refused (-1), then traps as an allocator out of memory does.
            hostile(
                "(loop $l (br_if $l (i32.ne (memory.grow (i32.const 64)) (i32.const -1)))) unreachable",
                "",
            ),
            "zone failed: memory cap exceeded".into(),
        ),
        (
            "deep",
            hostile(
                "(drop (call $r (i32.const 0)))",
                "(func $r (param i32) (result i32) (call $r (i32.add (local.get 0) (i32.const 1))))",
            ),
            "zone failed: stack overflow".into(),
        ),
        (
            "panic",
            hostile(&panic, &format!(r#"(data (i32.const 0) "{PANIC_MSG}")"#)),
            format!("zone failed: panicked: {PANIC_MSG}"),
        ),
        (
            "flood",
            hostile(
                "(loop $l (call $log (i32.const 2) (i32.const 0) (i32.const 4)) (br $l))",
                r#"(data (i32.const 0) "spam")"#,
            ),
            "zone failed: log flood".into(),
        ),
        (
            "timers",
            many_timers(),
            "zone failed: CPU budget per tick exceeded".into(),
        ),
    ]
}

/// A module whose every call is cheap but which makes a hundred of them a tick: each of its
/// 100 timers spins ~300k iterations once a player has joined. One call fits its budget many
/// times over; a tick's calls together do not.
fn many_timers() -> Vec<u8> {
    let on_timer = format!(
        "(if (i32.load8_u (i32.const 100)) (then {}))",
        timer_storm::spin(300_000)
    );
    timer_storm::timer_storm(100, &on_timer, "(i32.store8 (i32.const 100) (i32.const 1))")
}

/// Joins `zone` of `kind` and reads until the host's Kick: (Welcome seen, Deltas seen, Kick).
async fn join_until_kick(addr: &str, zone: &str, kind: &str) -> (bool, usize, KickCode, String) {
    let mut ws = hello(addr, zone, ticket_for("ann", zone, kind)).await;
    let (mut welcomed, mut deltas) = (false, 0);
    while let Some(Ok(m)) = ws.next().await {
        let Message::Binary(b) = m else { continue };
        match b.first() {
            Some(0x81) => welcomed = true,
            Some(0x82) => deltas += 1,
            Some(0x84) => {
                let Ok(ServerMessage::Kick(k)) = ServerMessage::decode(&b, None) else {
                    panic!("undecodable Kick");
                };
                return (welcomed, deltas, k.code, k.reason);
            }
            _ => {}
        }
    }
    panic!("the connection closed without a Kick");
}

fn write(dir: &Path, name: &str, bytes: &[u8]) -> String {
    let path = dir.join(name);
    std::fs::write(&path, bytes).unwrap();
    path.display().to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_modules_stop_alone_while_a_native_zone_keeps_every_tick() {
    let dir = tempfile::tempdir().unwrap();
    let tag = guest_build::tag_module().display().to_string();
    let mut args: Vec<String> = vec![
        "--admin-token".into(),
        ADMIN_TOKEN.into(),
        "--module".into(),
        format!("tag={tag}"),
    ];
    for (kind, bytes, _) in hostiles() {
        args.push("--module".into());
        args.push(format!(
            "{kind}={}",
            write(dir.path(), &format!("{kind}.wasm"), &bytes)
        ));
    }
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let store = StoreSpec::Sqlite(dir.path().join("zonekeep.db"));
    // One simulation thread: every zone below shares it with the native one.
    let server = Server::start(&store, &args, &dir.path().join("host.log")).await;
    let created = server
        .post_admin("/admin/zones", &json!({"id": "native-1", "kind": "dots"}))
        .await;
    assert_eq!(created["id"], "native-1", "{created}");

    // The tag game, from its Rust source, plays as any zone does.
    let mut ws = hello(&server.addr, "tag-1", ticket_for("ann", "tag-1", "tag")).await;
    let mut schema = None;
    let mut deltas = 0;
    while deltas < 3 {
        let b = match ws.next().await {
            Some(Ok(Message::Binary(b))) => b,
            Some(Ok(_)) => continue,
            other => panic!("tag connection ended: {other:?}"),
        };
        match ServerMessage::decode(&b, None) {
            Ok(ServerMessage::Welcome(w)) => schema = Some(w.schema),
            Ok(ServerMessage::Kick(k)) => panic!("kicked from tag: {k:?}"),
            _ if b.first() == Some(&0x82) => deltas += 1,
            _ => {}
        }
    }
    let schema = schema.expect("Welcome before Deltas");
    assert_eq!(schema.kinds[0].name, "player");

    for (kind, _, reason) in hostiles() {
        let zone = format!("{kind}-1");
        let (welcomed, _, code, said) = join_until_kick(&server.addr, &zone, kind).await;
        assert!(welcomed, "{kind}: joined before it failed");
        assert_eq!(code, KickCode::ZONE_STOPPED, "{kind}: {said}");
        assert!(said.starts_with(&reason), "{kind}: {said}");
        // Listed with its reason, and joins are refused, until an operator removes it.
        let detail = server.admin(&format!("/admin/zones/{zone}")).await;
        assert_eq!(detail["running"], false, "{detail}");
        assert!(
            detail["failed"]["reason"]
                .as_str()
                .unwrap()
                .starts_with(reason.trim_start_matches("zone failed: ")),
            "{detail}"
        );
        let (welcomed, _, code, said) = join_until_kick(&server.addr, &zone, kind).await;
        assert!(!welcomed);
        assert_eq!(code, KickCode::ZONE_STOPPED, "{said}");
        assert!(said.contains("failed at tick"), "{said}");
    }
    let list = server.admin("/admin/zones").await;
    assert_eq!(
        list["failed_zones"].as_array().unwrap().len(),
        hostiles().len(),
        "{list}"
    );
    assert_eq!(
        server.metric("zonekeep_zones_failed_total").await,
        hostiles().len() as f64
    );

    // Removing a failed zone lets it run again.
    let removed = server
        .post_admin("/admin/zones/spin-1/stop", &json!({}))
        .await;
    assert_eq!(removed["removed_failure"], true, "{removed}");
    assert!(server.admin("/admin/zones/spin-1").await["failed"].is_null());

    // The native zone on the same thread ran on, dropping no tick.
    let native = server.admin("/admin/zones/native-1").await;
    assert_eq!(native["running"], true, "{native}");
    assert_eq!(native["ticks_dropped"], 0, "{native}");
    assert!(native["tick"].as_u64().unwrap() > 0, "{native}");
    server.terminate().await;
}

#[tokio::test]
async fn a_module_importing_anything_but_the_log_keeps_the_host_from_starting() {
    let dir = tempfile::tempdir().unwrap();
    let wasi = wat::parse_str(
        r#"(module
            (import "wasi_snapshot_preview1" "fd_write" (func (param i32 i32 i32 i32) (result i32)))
            (memory (export "memory") 1))"#,
    )
    .unwrap();
    let file = write(dir.path(), "wasi.wasm", &wasi);
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_zonekeep"))
        .args(["serve", "--listen", "127.0.0.1:0", "--data-dir"])
        .arg(dir.path())
        .args(["--module", &format!("w={file}")])
        .env("ZONEKEEP_TICKET_SECRET", support::SECRET)
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("the module imports wasi_snapshot_preview1.fd_write: a zone module may import only zonekeep.log"),
        "{err}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_recorded_module_zone_replays_to_its_budget_trap_at_the_same_tick() {
    let dir = tempfile::tempdir().unwrap();
    // TICK's work grows with the tick (the tick is the first 8 input bytes, at 4096): it runs
    // out of its fuel a few ticks in, at a tick fuel alone decides.
    let grows = wat::parse_str(
        r#"(module
            (memory (export "memory") 1)
            (func (export "zk_abi") (result i32) i32.const 5)
            (func (export "zk_alloc") (param i32) (result i32) i32.const 4096)
            (func (export "zk_call") (param $op i32) (param $len i32) (result i64)
                (if (i32.eq (local.get $op) (i32.const 8)) (then
                    (local.set $len (i32.wrap_i64 (i64.mul (i64.load (i32.const 4096)) (i64.const 1000000))))
                    (loop $l (local.set $len (i32.sub (local.get $len) (i32.const 1)))
                             (br_if $l (i32.gt_s (local.get $len) (i32.const 0))))))
                i64.const 0))"#,
    )
    .unwrap();
    let file = write(dir.path(), "grows.wasm", &grows);
    let module = format!("grows={file}");
    let server = Server::with_module(dir.path(), &module).await;
    let created = server
        .post_admin(
            "/admin/zones",
            &json!({"id": "grows-1", "kind": "grows", "record": {}}),
        )
        .await;
    assert_eq!(created["id"], "grows-1", "{created}");
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(30);
    let failed = loop {
        let d = server.admin("/admin/zones/grows-1").await;
        if d["failed"].is_object() {
            break d["failed"].clone();
        }
        assert!(tokio::time::Instant::now() < deadline, "never failed: {d}");
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    };
    let reason = failed["reason"].as_str().unwrap().to_owned();
    assert!(reason.starts_with("CPU budget"), "{failed}");
    let (status, bytes) = server
        .admin_bytes("GET", "/admin/zones/grows-1/recording/file", None)
        .await;
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&bytes));
    let path = dir.path().join("grows.zkrec");
    std::fs::write(&path, &bytes).unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_zonekeep"))
        .arg("replay")
        .arg(&path)
        .args(["--module", &module])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains(&format!(
            "the zone's game code failed at tick {}: {reason}",
            failed["tick"]
        )),
        "the replay fails where the zone did ({failed}): {stdout}"
    );
    assert!(stdout.contains("MATCH"), "{stdout}");
    server.terminate().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_chatty_module_is_rate_limited_and_the_lines_dropped_are_counted() {
    // 150 log lines every tick: past the burst (100) and the refill (20 a second), far from a
    // flood (10,000 in one call).
    let chatty = wat::parse_str(
        r#"(module
            (import "zonekeep" "log" (func $log (param i32 i32 i32)))
            (data (i32.const 0) "chat")
            (memory (export "memory") 1)
            (func (export "zk_abi") (result i32) i32.const 5)
            (func (export "zk_alloc") (param i32) (result i32) i32.const 4096)
            (func (export "zk_call") (param $op i32) (param $len i32) (result i64)
                (local $n i32)
                (if (i32.eq (local.get $op) (i32.const 8))
                    (then (loop $l
                        (call $log (i32.const 2) (i32.const 0) (i32.const 4))
                        (local.set $n (i32.add (local.get $n) (i32.const 1)))
                        (br_if $l (i32.lt_u (local.get $n) (i32.const 150))))))
                i64.const 0))"#,
    )
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let module = format!("chatty={}", write(dir.path(), "chatty.wasm", &chatty));
    let server = Server::with_module(dir.path(), &module).await;
    let created = server
        .post_admin("/admin/zones", &json!({"id": "chatty-1", "kind": "chatty"}))
        .await;
    assert_eq!(created["id"], "chatty-1", "{created}");
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(20);
    let mut dropped = 0.0;
    while dropped < 1000.0 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "dropped lines not counted: {dropped}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        dropped = server
            .metric("zonekeep_module_log_lines_suppressed_total")
            .await;
    }
    // Chattiness is not a failure: the zone runs on.
    let detail = server.admin("/admin/zones/chatty-1").await;
    assert_eq!(detail["running"], true, "{detail}");
    assert!(detail["failed"].is_null(), "{detail}");
    server.terminate().await;
}
