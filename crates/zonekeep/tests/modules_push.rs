//! Pushing modules to a real `zonekeep serve`: every refusal names its cause and leaves nothing
//! stored or installed; compiling runs on the host's compiler, never on the network threads, and
//! is bounded in time; a deploy may not change a running zone's tick rate; the upgrade point is
//! saved at once.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "../../zonekeep-wasm/tests/support/guest_build.rs"]
mod guest_build;
mod support;

use std::path::Path;

use serde_json::{json, Value};
use support::push::push_module;
use support::{Server, StoreSpec, ADMIN_TOKEN};

async fn push(server: &Server, kind: &str, module: &[u8]) -> (u16, Value) {
    push_module(&server.addr, kind, "", module, None).await
}

/// Modules kept in the store of the SQLite host in `dir`.
fn stored_modules(dir: &Path) -> i64 {
    let db = rusqlite::Connection::open(dir.join(zonekeep_store::SQLITE_FILE_NAME)).unwrap();
    db.query_row("SELECT COUNT(*) FROM modules", [], |r| r.get(0))
        .unwrap()
}

/// A host running module kind `rules` from the store's deploys (none yet).
async fn host(dir: &Path, extra: &[&str]) -> Server {
    let store = StoreSpec::Sqlite(dir.to_path_buf());
    let mut args = vec!["--admin-token", ADMIN_TOKEN, "--module", "rules"];
    args.extend_from_slice(extra);
    Server::start(&store, &args, &dir.join("host.log")).await
}

/// A module of the ABI that keeps no state: its CONFIG answers `settings` (empty: the host's),
/// every other call nothing (an empty save restores). `extra` adds functions.
fn rules(settings: &[u8], extra: &str) -> Vec<u8> {
    let data: String = settings.iter().map(|b| format!("\\{b:02x}")).collect();
    wat::parse_str(format!(
        r#"(module
            (memory (export "memory") 1)
            (data (i32.const 1024) "{data}")
            (func (export "zk_abi") (result i32) i32.const 5)
            (func (export "zk_alloc") (param i32) (result i32) i32.const 4096)
            (func (export "zk_call") (param $op i32) (param $len i32) (result i64)
                (if (i32.eq (local.get $op) (i32.const 14))
                    (then (return (i64.const {packed}))))
                i64.const 0)
            {extra})"#,
        packed = (1024i64 << 32) | settings.len() as i64,
    ))
    .unwrap()
}

/// CONFIG's seven settings asking for `tick_hz` and leaving the rest to the host.
fn at_hz(tick_hz: u32) -> Vec<u8> {
    let mut out = tick_hz.to_le_bytes().to_vec();
    out.extend_from_slice(&[0; 24]);
    out
}

fn reason(answer: &Value) -> String {
    answer["error"]["message"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

/// True once the store of the SQLite host in `dir` holds a save of `zone`.
async fn saved(dir: &Path, zone: &str) -> bool {
    let store = zonekeep_store::open_store("sqlite", dir).await.unwrap();
    store.saves.load(zone).await.unwrap().is_some()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refused_pushes_name_their_cause_and_leave_nothing_stored() {
    let dir = tempfile::tempdir().unwrap();
    let server = host(dir.path(), &[]).await;

    let (status, out) = push(&server, "rules", b"").await;
    assert_eq!(status, 422, "{out}");
    assert!(reason(&out).contains("empty"), "{out}");

    let many = "(func)".repeat(20_001);
    let (status, out) = push(&server, "rules", &rules(&[], &many)).await;
    assert_eq!(status, 422, "{out}");
    assert!(reason(&out).contains("at most 20000"), "{out}");

    let (status, out) = push(&server, "rules", &rules(&at_hz(1000), "")).await;
    assert_eq!(status, 422, "{out}");
    assert!(reason(&out).contains("tick_hz 1000"), "{out}");

    let (status, out) = push(&server, "rules", b"not wasm at all").await;
    assert_eq!(status, 422, "{out}");

    // Past the 32 MiB limit (declared; the host answers without reading it).
    let (status, out) = push_module(&server.addr, "rules", "", b"", Some((32 << 20) + 1)).await;
    assert_eq!(status, 413, "{out}");
    assert!(reason(&out).contains("32 MiB"), "{out}");

    assert_eq!(
        stored_modules(dir.path()),
        0,
        "a refused module is never stored"
    );
    let modules = server.admin("/admin/modules").await;
    assert!(modules["kinds"][0]["sha256"].is_null(), "{modules}");
    assert_eq!(modules["deploys"], json!([]), "{modules}");

    // A module that loads is stored and installed.
    let (status, out) = push(&server, "rules", &rules(&[], "")).await;
    assert_eq!(status, 200, "{out}");
    assert_eq!(stored_modules(dir.path()), 1);
    server.terminate().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_compile_past_its_deadline_is_refused_and_installs_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let server = host(dir.path(), &["--module-compile-timeout-ms", "1"]).await;
    let tag = std::fs::read(guest_build::tag_module()).unwrap();
    let (status, out) = push(&server, "rules", &tag).await;
    assert_eq!(status, 503, "{out}");
    assert_eq!(out["error"]["code"], "compile_timeout", "{out}");
    assert!(reason(&out).contains("nothing was installed"), "{out}");
    assert_eq!(stored_modules(dir.path()), 0);
    let modules = server.admin("/admin/modules").await;
    assert!(modules["kinds"][0]["sha256"].is_null(), "{modules}");
    server.terminate().await;
}

/// A valid module that costs the compiler seconds: `functions` functions, each a long chain of
/// arithmetic.
fn costly(functions: usize) -> Vec<u8> {
    let chain = "(i32.add (local.get 0) (i32.mul (local.get 0) (i32.const 3))) i32.add ";
    let body = format!(
        "(func (param i32) (result i32) local.get 0 {})",
        chain.repeat(24)
    );
    rules(&[], &body.repeat(functions))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn compiling_never_holds_the_network_threads() {
    let dir = tempfile::tempdir().unwrap();
    let server = host(dir.path(), &[]).await;
    let module = costly(1_500);
    // Two pushes at once: on a two-thread network runtime, compiling there would hold both.
    let (a, b) = (server.addr.clone(), server.addr.clone());
    let (ma, mb) = (module.clone(), module.clone());
    let first = tokio::spawn(async move { push_module(&a, "rules", "", &ma, None).await });
    let second = tokio::spawn(async move { push_module(&b, "rules", "", &mb, None).await });
    // Wait until the host is compiling (the pushes' bodies are in), then ask for its health.
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(60);
    while server.metric("zonekeep_module_compiles_running").await < 1.0 {
        assert!(tokio::time::Instant::now() < deadline, "never compiled");
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    let health = server.get("/healthz").await;
    assert!(!health.is_empty(), "the host answers while it compiles");
    assert!(
        !first.is_finished() && !second.is_finished(),
        "both pushes were still compiling or waiting when the health check was answered"
    );
    let (sa, _) = first.await.unwrap();
    let (sb, _) = second.await.unwrap();
    assert!(sa == 200 || sa == 503, "{sa}");
    assert!(sb == 200 || sb == 503, "{sb}");
    server.terminate().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deploy_cannot_change_a_running_zones_tick_rate_and_its_upgrade_point_is_saved() {
    let dir = tempfile::tempdir().unwrap();
    let server = host(dir.path(), &["--save-every", "1h"]).await;
    let (status, out) = push(&server, "rules", &rules(&[], "")).await;
    assert_eq!(status, 200, "{out}");
    let created = server
        .post_admin("/admin/zones", &json!({"id": "r-1", "kind": "rules"}))
        .await;
    assert_eq!(created["id"], "r-1", "{created}");
    assert!(!saved(dir.path(), "r-1").await, "not saved yet");

    // Another build at the same rate upgrades the zone, and the upgrade point is saved.
    let (status, out) = push(&server, "rules", &rules(&[], "(func)")).await;
    assert_eq!(status, 200, "{out}");
    assert_eq!(out["upgrade"]["zones"][0]["upgraded"], true, "{out}");
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(20);
    while !saved(dir.path(), "r-1").await {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the upgrade point was never saved"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }

    // A build at 20 Hz may not take over a zone running at 30 Hz.
    let (status, out) = push(&server, "rules", &rules(&at_hz(20), "")).await;
    assert_eq!(status, 200, "{out}");
    assert_eq!(out["rolled_back"], true, "{out}");
    let zone = &out["upgrade"]["zones"][0];
    assert_eq!(zone["upgraded"], false, "{out}");
    let refused = zone["refused"].as_str().unwrap();
    assert!(
        refused.contains("20 Hz") && refused.contains("30 Hz"),
        "{refused}"
    );
    let detail = server.admin("/admin/zones/r-1").await;
    assert_eq!(
        detail["running"], true,
        "the zone runs on, on the module it had: {detail}"
    );
    server.terminate().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_zone_that_failed_to_start_stays_failed_until_a_new_version_is_deployed() {
    let dir = tempfile::tempdir().unwrap();
    let server = host(dir.path(), &[]).await;
    // CREATE (op 1) traps.
    let broken = support::push::trapping_in(1);
    let (status, out) = push(&server, "rules", &broken).await;
    assert_eq!(status, 200, "{out}");
    let (status, out) = server
        .admin_request(
            "POST",
            "/admin/zones",
            Some(&json!({"id": "b-1", "kind": "rules"})),
        )
        .await;
    assert!(status >= 400, "{status} {out}");
    let detail = server.admin("/admin/zones/b-1").await;
    assert!(detail["failed"].is_object(), "{detail}");

    // A new version of the kind: the failure is forgotten and the zone starts on it.
    let (status, out) = push(&server, "rules", &rules(&[], "")).await;
    assert_eq!(status, 200, "{out}");
    let detail = server.admin("/admin/zones/b-1").await;
    assert!(detail["failed"].is_null(), "{detail}");
    let created = server
        .post_admin("/admin/zones", &json!({"id": "b-1", "kind": "rules"}))
        .await;
    assert_eq!(created["id"], "b-1", "{created}");
    server.terminate().await;
}

/// Before the first push, a join to a zone of a store-mode module kind is refused without
/// claiming the zone (its epoch is not raised, nothing is recorded as failed, no ERROR is logged),
/// however often it is retried; after the push the zone starts at its first epoch.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn joins_before_the_first_push_claim_nothing_and_log_no_error() {
    let dir = tempfile::tempdir().unwrap();
    let server = host(dir.path(), &[]).await;
    for _ in 0..3 {
        let (status, out) = server
            .admin_request(
                "POST",
                "/admin/zones",
                Some(&json!({"id": "early-1", "kind": "rules"})),
            )
            .await;
        assert!(status >= 400, "{status} {out}");
        assert!(
            out.to_string().contains("no module deployed yet"),
            "the refusal says why: {out}"
        );
    }
    let detail = server.admin("/admin/zones/early-1").await;
    assert!(
        detail["failed"].is_null(),
        "not recorded as failed: {detail}"
    );
    let log = std::fs::read_to_string(&server.log).unwrap();
    assert!(!log.contains("ERROR"), "{log}");

    let (status, out) = push(&server, "rules", &rules(&[], "")).await;
    assert_eq!(status, 200, "{out}");
    let created = server
        .post_admin("/admin/zones", &json!({"id": "early-1", "kind": "rules"}))
        .await;
    assert_eq!(created["id"], "early-1", "{created}");
    let zones = server.admin("/admin/zones").await;
    let zone = support::zone_entry(&zones, "early-1").expect("listed");
    assert_eq!(
        zone["epoch"], 1,
        "the refused joins claimed nothing: {zones}"
    );
    server.terminate().await;
}
