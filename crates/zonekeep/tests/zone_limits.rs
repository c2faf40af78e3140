//! Hostile modules against a real `zonekeep serve`'s per-zone limits: a module spawning without
//! end fails alone, naming the entity cap; modules emitting oversized facts, or facts faster than
//! the rate allows, are refused (counted in `/metrics`) with nothing oversized stored; a native
//! zone on the same simulation thread keeps every tick.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::path::Path;
use std::time::Duration;

use serde_json::json;
use support::{Server, StoreSpec, ADMIN_TOKEN};

/// Where a module writes its command buffer (above the host's input buffer at 4096).
const OUT: u32 = 65_536;

/// A module that declares one kind (no fields) at CREATE and runs `tick` at every TICK; `tick`
/// writes commands from `$p = OUT` on and leaves `$p` at their end.
fn module(tick: &str) -> Vec<u8> {
    wat::parse_str(format!(
        r#"(module
            (import "zonekeep" "log" (func $log (param i32 i32 i32)))
            (memory (export "memory") 8)
            (func (export "zk_abi") (result i32) i32.const 5)
            (func (export "zk_alloc") (param i32) (result i32) i32.const 4096)
            (func (export "zk_call") (param $op i32) (param $len i32) (result i64)
                (local $p i32) (local $i i32)
                (local.set $p (i32.const {OUT}))
                (if (i32.eq (local.get $op) (i32.const 1))
                    (then
                        ;; DECLARE_KIND "m", no fields
                        (i32.store8 (local.get $p) (i32.const 1))
                        (i32.store offset=1 (local.get $p) (i32.const 1))
                        (i32.store8 offset=5 (local.get $p) (i32.const 109))
                        (i32.store8 offset=6 (local.get $p) (i32.const 0))
                        (local.set $p (i32.add (local.get $p) (i32.const 7)))))
                (if (i32.eq (local.get $op) (i32.const 8)) (then {tick}))
                (i64.or
                    (i64.shl (i64.const {OUT}) (i64.const 32))
                    (i64.extend_i32_u (i32.sub (local.get $p) (i32.const {OUT})))))
        )"#
    ))
    .unwrap()
}

/// Spawns 2,000 entities every tick (handles counted at address 200).
fn spawner() -> Vec<u8> {
    module(
        r#"
        (local.set $i (i32.const 0))
        (block $done (loop $l
            (br_if $done (i32.ge_u (local.get $i) (i32.const 2000)))
            (i32.store (i32.const 200) (i32.add (i32.load (i32.const 200)) (i32.const 1)))
            (i32.store8 (local.get $p) (i32.const 2))
            (i32.store offset=1 (local.get $p) (i32.load (i32.const 200)))
            (i32.store16 offset=5 (local.get $p) (i32.const 0))
            (f32.store offset=7 (local.get $p) (f32.const 0))
            (f32.store offset=11 (local.get $p) (f32.const 0))
            (local.set $p (i32.add (local.get $p) (i32.const 15)))
            (local.set $i (i32.add (local.get $i) (i32.const 1)))
            (br $l)))"#,
    )
}

/// Emits `count` facts of kind "k" for principal "p" every tick, each payload `{"x":"xx…"}` of
/// `len` bytes of JSON.
fn facts(count: u32, len: u32) -> Vec<u8> {
    let inner = len - 8;
    module(&format!(
        r#"
        (local.set $i (i32.const 0))
        (block $done (loop $l
            (br_if $done (i32.ge_u (local.get $i) (i32.const {count})))
            (i32.store8 (local.get $p) (i32.const 19))
            (i32.store offset=1 (local.get $p) (i32.const 1))
            (i32.store8 offset=5 (local.get $p) (i32.const 107))
            (i32.store offset=6 (local.get $p) (i32.const {len}))
            ;; {{"x":"
            (i32.store8 offset=10 (local.get $p) (i32.const 123))
            (i32.store8 offset=11 (local.get $p) (i32.const 34))
            (i32.store8 offset=12 (local.get $p) (i32.const 120))
            (i32.store8 offset=13 (local.get $p) (i32.const 34))
            (i32.store8 offset=14 (local.get $p) (i32.const 58))
            (i32.store8 offset=15 (local.get $p) (i32.const 34))
            (memory.fill (i32.add (local.get $p) (i32.const 16)) (i32.const 120) (i32.const {inner}))
            (local.set $p (i32.add (local.get $p) (i32.const {after_text})))
            ;; "}}, then principal "p" and an empty key (the host makes one)
            (i32.store8 (local.get $p) (i32.const 34))
            (i32.store8 offset=1 (local.get $p) (i32.const 125))
            (i32.store offset=2 (local.get $p) (i32.const 1))
            (i32.store8 offset=6 (local.get $p) (i32.const 112))
            (i32.store offset=7 (local.get $p) (i32.const 0))
            (local.set $p (i32.add (local.get $p) (i32.const 11)))
            (local.set $i (i32.add (local.get $i) (i32.const 1)))
            (br $l)))"#,
        after_text = 16 + inner,
    ))
}

fn write(dir: &Path, name: &str, bytes: &[u8]) -> String {
    let path = dir.join(name);
    std::fs::write(&path, bytes).unwrap();
    path.display().to_string()
}

/// Re-reads `f` until it holds; only a guard against a hang bounds it.
async fn eventually<F, Fut>(what: &str, mut f: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    while !f().await {
        assert!(
            tokio::time::Instant::now() < deadline,
            "still waiting for: {what}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_modules_meet_the_zone_limits_while_a_native_zone_keeps_its_tick() {
    let dir = tempfile::tempdir().unwrap();
    let modules = [
        ("spawner", spawner()),
        // 64 KiB facts: four times the default limit of 16 KiB.
        ("bigfact", facts(1, 64 * 1024)),
        // 20 small facts a tick at 30 Hz: 600 a second, over the 256 allowed.
        ("manyfacts", facts(20, 16)),
    ];
    let mut args: Vec<String> = vec![
        "--admin-token".into(),
        ADMIN_TOKEN.into(),
        "--zone-max-entities".into(),
        "5000".into(),
    ];
    for (kind, bytes) in &modules {
        args.push("--module".into());
        args.push(format!(
            "{kind}={}",
            write(dir.path(), &format!("{kind}.wasm"), bytes)
        ));
    }
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let store = StoreSpec::Sqlite(dir.path().join("data"));
    // One simulation thread: every zone below shares it with the native one.
    let server = Server::start(&store, &args, &dir.path().join("host.log")).await;
    for (id, kind) in [
        ("native-1", "dots"),
        ("spawner-1", "spawner"),
        ("bigfact-1", "bigfact"),
        ("manyfacts-1", "manyfacts"),
    ] {
        let created = server
            .post_admin("/admin/zones", &json!({"id": id, "kind": kind}))
            .await;
        assert_eq!(created["id"], id, "{created}");
    }

    // The spawner stops at the host's cap: its zone fails alone, the reason naming the cap.
    eventually("the spawner's zone fails at the entity cap", || async {
        server.admin("/admin/zones/spawner-1").await["failed"]["reason"]
            .as_str()
            .is_some_and(|r| r.contains("max_entities of 5000"))
    })
    .await;

    // Oversized and too frequent facts are refused and counted; the zones run on.
    eventually("fact refusals are counted by limit", || async {
        server
            .metric("zonekeep_zone_facts_refused_total{limit=\"too_large\"}")
            .await
            >= 10.0
            && server
                .metric("zonekeep_zone_facts_refused_total{limit=\"rate\"}")
                .await
                >= 10.0
    })
    .await;
    eventually("accepted facts reach the ledger", || async {
        !store.facts("manyfacts-1").await.is_empty()
    })
    .await;
    for zone in ["bigfact-1", "manyfacts-1"] {
        let detail = server.admin(&format!("/admin/zones/{zone}")).await;
        assert_eq!(detail["running"], true, "{detail}");
    }
    assert!(
        store.facts("bigfact-1").await.is_empty(),
        "no oversized fact is stored"
    );
    assert!(server.metric("zonekeep_zone_spawns_refused_total").await >= 1.0);

    // The native zone on the same thread ran on, dropping no tick.
    let native = server.admin("/admin/zones/native-1").await;
    assert_eq!(native["running"], true, "{native}");
    assert_eq!(native["ticks_dropped"], 0, "{native}");
    assert!(native["tick"].as_u64().unwrap() > 0, "{native}");

    // The host logs a zone's refusals once per ten seconds of its ticks (30 Hz), each line
    // carrying the counts, never a line per refusal.
    let ticks = server.admin("/admin/zones/manyfacts-1").await["tick"]
        .as_u64()
        .unwrap();
    let log_path = server.log.clone();
    server.terminate().await;
    let log = std::fs::read_to_string(log_path).unwrap();
    let lines = log
        .lines()
        .filter(|l| l.contains("hit its limits") && l.contains("manyfacts-1"))
        .count() as u64;
    assert!(
        (1..=2 + ticks / 300).contains(&lines),
        "{lines} limit lines in {ticks} ticks"
    );
}
