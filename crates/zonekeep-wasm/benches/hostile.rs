//! The full hostile-module set, run the way a host runs it: each hostile module is loaded (or
//! refused) and its zone ticks at 30 Hz in real time on one thread beside an innocent zone — the
//! tag game, as a module, with players sending inputs every tick. For each case the run reports
//! how the hostile zone ended (or how its load was refused), how long that took, the innocent
//! zone's ticks dropped and its longest gap between two ticks, and what the process's memory did.
//!
//! `cargo bench -p zonekeep-wasm --bench hostile [-- --seconds 3]`
//!
//! The library and process tests (`tests/sandbox.rs`, `crates/zonekeep/tests/modules*.rs`) run a
//! short form of each case in CI; this is the long form, for BENCHMARKS.md and docs/MODULES.md.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "../tests/support/guest_build.rs"]
mod guest_build;
#[path = "../tests/support/timer_storm.rs"]
mod timer_storm;

use std::sync::Arc;
use std::time::{Duration, Instant};

use zonekeep_core::{
    Claims, Clock, PlayerId, Principal, Role, SystemClock, ZoneConfig, ZoneHost, ZoneInit,
    ZoneKinds,
};
use zonekeep_wasm::{register, ModuleEngine, ModuleKind, Sandbox, ZoneModule};

/// A module whose CREATE answers `create` (a command buffer) and whose TICK runs `tick`, a body
/// that leaves nothing on the stack and may `return` an output (`(ptr << 32) | len`). Memory of
/// `pages` pages; `extra` adds functions, globals or data.
fn module(create: &[u8], tick: &str, pages: u32, extra: &str) -> Vec<u8> {
    let data: String = create.iter().map(|b| format!("\\{b:02x}")).collect();
    wat::parse_str(format!(
        r#"(module
            (import "zonekeep" "log" (func $log (param i32 i32 i32)))
            (memory (export "memory") {pages})
            (data (i32.const 1024) "{data}")
            (global $n (mut i32) (i32.const 0))
            {extra}
            (func (export "zk_abi") (result i32) i32.const 5)
            (func (export "zk_alloc") (param i32) (result i32) i32.const 4096)
            (func (export "zk_call") (param $op i32) (param $len i32) (result i64)
                (local $i i32) (local $p i32)
                (if (i32.eq (local.get $op) (i32.const 1))
                    (then (return (i64.const {packed}))))
                (if (i32.eq (local.get $op) (i32.const 8)) (then {tick}))
                i64.const 0))"#,
        packed = (1024i64 << 32) | create.len() as i64,
    ))
    .unwrap()
}

fn str_bytes(out: &mut Vec<u8>, s: &[u8]) {
    out.extend_from_slice(&(s.len() as u32).to_le_bytes());
    out.extend_from_slice(s);
}

/// DECLARE_KIND "e" with no fields.
fn declare_kind() -> Vec<u8> {
    let mut out = vec![1u8];
    str_bytes(&mut out, b"e");
    out.push(0);
    out
}

/// `(ptr << 32) | len` of an output at `ptr` with length in local `$p` minus `ptr`.
fn ret_from(ptr: u32) -> String {
    format!(
        "(return (i64.or (i64.shl (i64.const {ptr}) (i64.const 32)) (i64.extend_i32_u (i32.sub (local.get $p) (i32.const {ptr})))))"
    )
}

/// Each tick spawns `n` entities with fresh handles (SPAWN: u8 2, u32 handle, u16 kind, f32, f32).
fn entity_flood(n: u32) -> Vec<u8> {
    let tick = format!(
        "(local.set $p (i32.const 65536)) (local.set $i (i32.const {n}))
         (loop $l
            (global.set $n (i32.add (global.get $n) (i32.const 1)))
            (i32.store8 (local.get $p) (i32.const 2))
            (i32.store (i32.add (local.get $p) (i32.const 1)) (global.get $n))
            (i32.store16 (i32.add (local.get $p) (i32.const 5)) (i32.const 0))
            (i64.store (i32.add (local.get $p) (i32.const 7)) (i64.const 0))
            (local.set $p (i32.add (local.get $p) (i32.const 15)))
            (local.set $i (i32.sub (local.get $i) (i32.const 1)))
            (br_if $l (local.get $i)))
         {}",
        ret_from(65536)
    );
    module(&declare_kind(), &tick, 16, "")
}

/// Each tick emits `n` events to everyone of `size` bytes (EVENT: u8 14, u32 0, u16 topic,
/// u32 len, payload).
fn event_flood(n: u32, size: u32) -> Vec<u8> {
    let stride = 11 + size;
    let pages = (65536 + n * stride) / 65536 + 2;
    let tick = format!(
        "(local.set $p (i32.const 65536)) (local.set $i (i32.const {n}))
         (loop $l
            (i32.store8 (local.get $p) (i32.const 14))
            (i32.store (i32.add (local.get $p) (i32.const 1)) (i32.const 0))
            (i32.store16 (i32.add (local.get $p) (i32.const 5)) (i32.const 1))
            (i32.store (i32.add (local.get $p) (i32.const 7)) (i32.const {size}))
            (local.set $p (i32.add (local.get $p) (i32.const {stride})))
            (local.set $i (i32.sub (local.get $i) (i32.const 1)))
            (br_if $l (local.get $i)))
         {}",
        ret_from(65536)
    );
    module(&[], &tick, pages, "")
}

/// Each tick emits `n` facts whose JSON payload is a string of `size` bytes (FACT: u8 19,
/// str kind, str payload, str principal, str key; keys left to the host).
fn fact_flood(n: u32, size: u32) -> Vec<u8> {
    let mut one = vec![19u8];
    str_bytes(&mut one, b"x");
    let mut payload = vec![b'"'];
    payload.resize(size as usize - 1, b'a');
    payload.push(b'"');
    str_bytes(&mut one, &payload);
    str_bytes(&mut one, b"");
    str_bytes(&mut one, b"");
    let len = one.len() as u32;
    let pages = (65536 + n * len) / 65536 + 2;
    // The fact is built in a data segment at 64 KiB, and copied n times from there.
    let data: String = one.iter().map(|b| format!("\\{b:02x}")).collect();
    // The output starts past the fact's copy, on a page of its own.
    let out = (65536 + len).div_ceil(65536) * 65536;
    let tick = format!(
        "(local.set $p (i32.const {out})) (local.set $i (i32.const {n}))
         (loop $l
            (memory.copy (local.get $p) (i32.const 65536) (i32.const {len}))
            (local.set $p (i32.add (local.get $p) (i32.const {len})))
            (local.set $i (i32.sub (local.get $i) (i32.const 1)))
            (br_if $l (local.get $i)))
         {}",
        ret_from(out)
    );
    module(
        &[],
        &tick,
        pages + 2,
        &format!(r#"(data (i32.const 65536) "{data}")"#),
    )
}

const PANIC: &str = "panicked at src/lib.rs:1:1: out of cheese";

/// (name, module bytes) of every hostile case.
fn cases() -> Vec<(&'static str, Vec<u8>)> {
    let panic_data = format!(r#"(data (i32.const 0) "{PANIC}")"#);
    let log = |level: i32| {
        format!(
            "(call $log (i32.const {level}) (i32.const 0) (i32.const {}))",
            PANIC.len()
        )
    };
    let mut v: Vec<(&'static str, Vec<u8>)> = vec![
        ("runaway loop", module(&[], "(loop $l (br $l))", 1, "")),
        (
            "runaway loop in create",
            wat::parse_str(
                r#"(module (memory (export "memory") 1)
                    (func (export "zk_abi") (result i32) i32.const 5)
                    (func (export "zk_alloc") (param i32) (result i32) i32.const 4096)
                    (func (export "zk_call") (param i32 i32) (result i64)
                        (if (i32.eq (local.get 0) (i32.const 1)) (then (loop $l (br $l))))
                        i64.const 0))"#,
            )
            .unwrap(),
        ),
        (
            "memory bomb, trapping when refused",
            module(
                &[],
                "(loop $l (br_if $l (i32.ne (memory.grow (i32.const 64)) (i32.const -1)))) unreachable",
                1,
                "",
            ),
        ),
        (
            "memory bomb, ignoring refusals",
            module(&[], "(loop $l (drop (memory.grow (i32.const 64))) (br $l))", 1, ""),
        ),
        (
            "deep recursion",
            module(
                &[],
                "(drop (call $r (i32.const 0)))",
                1,
                "(func $r (param i32) (result i32) (call $r (i32.add (local.get 0) (i32.const 1))))",
            ),
        ),
        (
            "panic",
            module(&[], &format!("{} unreachable", log(5)), 1, &panic_data),
        ),
        (
            "forged panic line, later trap",
            module(
                &[],
                &format!(
                    "(global.set $n (i32.add (global.get $n) (i32.const 1)))
                     (if (i32.lt_u (global.get $n) (i32.const 3)) (then {} (return (i64.const 0))))
                     unreachable",
                    log(5)
                ),
                1,
                &panic_data,
            ),
        ),
        (
            "log flood",
            module(&[], &format!("(loop $l {} (br $l))", log(2)), 1, &panic_data),
        ),
        (
            "chatty, 100 lines a tick",
            module(
                &[],
                &format!(
                    "(local.set $i (i32.const 100)) (loop $l {} (local.set $i (i32.sub (local.get $i) (i32.const 1))) (br_if $l (local.get $i)))",
                    log(2)
                ),
                1,
                &panic_data,
            ),
        ),
        (
            "timer storm, 100 timers a tick",
            timer_storm::timer_storm(100, &timer_storm::spin(300_000), ""),
        ),
        ("entity flood, 20k spawns a tick", entity_flood(20_000)),
        ("event flood, 1000 x 16 KiB a tick", event_flood(1000, 16 << 10)),
        ("fact flood, 64 KiB facts", fact_flood(1, 64 << 10)),
        ("fact flood, 1000 facts a tick", fact_flood(1000, 2)),
        (
            "output outside memory",
            module(&[], "(return (i64.const 0x0001000000000004))", 1, ""),
        ),
        (
            "unknown command",
            module(
                &[],
                "(i32.store8 (i32.const 0) (i32.const 200)) (return (i64.const 1))",
                1,
                "",
            ),
        ),
        (
            "looping start function",
            module(&[], "", 1, "(func $s (loop $l (br $l))) (start $s)"),
        ),
        (
            "20,001 functions",
            module(&[], "", 1, &"(func)".repeat(20_001)),
        ),
        (
            "a 300 KiB function",
            module(
                &[],
                "",
                1,
                &format!("(func {})", "(drop (i32.const 1))".repeat(100_000)),
            ),
        ),
        (
            "5,000 locals",
            module(&[], "", 1, &format!("(func {})", "(local i64)".repeat(5000))),
        ),
        (
            "imports WASI",
            wat::parse_str(
                r#"(module (import "wasi_snapshot_preview1" "fd_write" (func (param i32 i32 i32 i32) (result i32)))
                    (memory (export "memory") 1))"#,
            )
            .unwrap(),
        ),
    ];
    for (name, config) in [
        ("1000 Hz", [1000u32.to_le_bytes(), [0; 4], [0; 4], [0; 4]]),
        (
            "120 Hz, a patch every tick",
            [120u32.to_le_bytes(), 1u32.to_le_bytes(), [0; 4], [0; 4]],
        ),
    ] {
        let mut bytes: Vec<u8> = config.concat();
        bytes.extend_from_slice(&[0; 12]);
        v.push((name, settings_module(&bytes)));
    }
    for (name, f) in [
        ("view radius +inf", [0.0f32, f32::INFINITY, 0.0]),
        ("position step 1e-30", [1.0e-30, 0.0, 0.0]),
        ("cell size 1e-30", [0.0, 0.0, 1.0e-30]),
    ] {
        let mut bytes = vec![0u8; 16];
        for x in f {
            bytes.extend_from_slice(&x.to_le_bytes());
        }
        v.push((name, settings_module(&bytes)));
    }
    v
}

/// A module answering CONFIG (op 14) with `settings`.
fn settings_module(settings: &[u8]) -> Vec<u8> {
    let data: String = settings.iter().map(|b| format!("\\{b:02x}")).collect();
    wat::parse_str(format!(
        r#"(module (memory (export "memory") 1)
            (data (i32.const 1024) "{data}")
            (func (export "zk_abi") (result i32) i32.const 5)
            (func (export "zk_alloc") (param i32) (result i32) i32.const 4096)
            (func (export "zk_call") (param $op i32) (param $len i32) (result i64)
                (if (i32.eq (local.get $op) (i32.const 14)) (then (return (i64.const {packed}))))
                i64.const 0))"#,
        packed = (1024i64 << 32) | settings.len() as i64
    ))
    .unwrap()
}

fn rss_mb() -> f64 {
    std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|s| s.split_whitespace().nth(1)?.parse::<f64>().ok())
        .map_or(0.0, |pages| pages * 4096.0 / (1 << 20) as f64)
}

fn init(kind: &str, id: &str) -> ZoneInit {
    ZoneInit {
        zone_id: id.into(),
        kind: kind.into(),
        params: zonekeep_core::serde_json::json!({}),
    }
}

/// The innocent zone: the tag game with `players` players sending an input every tick.
struct Innocent {
    zone: ZoneHost,
    players: Vec<PlayerId>,
    seq: u32,
}

impl Innocent {
    fn new(kinds: &ZoneKinds, clock: Arc<dyn Clock>, players: usize) -> Self {
        let mut zone = kinds
            .create(init("tag", "innocent"), ZoneConfig::default(), clock)
            .unwrap();
        let players = (0..players)
            .map(|i| {
                zone.handle_join(Principal::new(format!("p{i}")), Claims::new(), Role::Player)
                    .unwrap()
            })
            .collect();
        Self {
            zone,
            players,
            seq: 0,
        }
    }

    fn advance(&mut self, now: Duration) -> u64 {
        self.seq += 1;
        for (i, p) in self.players.iter().enumerate() {
            // The tag game's input: a direction and a flag.
            let dir = ((self.seq as usize + i) % 4) as u8;
            let _ = self.zone.handle_input(*p, self.seq, 0, &[dir, 0]);
        }
        self.zone.advance(now).ticks_dropped
    }
}

fn main() {
    let mut seconds = 3.0f64;
    let args: Vec<String> = std::env::args().collect();
    if let Some(i) = args.iter().position(|a| a == "--seconds") {
        seconds = args.get(i + 1).and_then(|s| s.parse().ok()).unwrap_or(3.0);
    }
    let engine = ModuleEngine::new(Sandbox::default()).unwrap();
    let tag =
        ZoneModule::load(&engine, &std::fs::read(guest_build::tag_module()).unwrap()).unwrap();
    let dt = ZoneConfig::default().dt();
    println!("| case | outcome | stopped after | innocent zone: ticks dropped | longest gap between its ticks | RSS before → after |");
    println!("| --- | --- | --- | --- | --- | --- |");
    for (name, bytes) in cases() {
        let rss0 = rss_mb();
        let started = Instant::now();
        let module = match ZoneModule::load(&engine, &bytes) {
            Ok(m) => m,
            Err(e) => {
                println!(
                    "| {name} | refused at load: {e} | {:.0} ms | 0 | — | {rss0:.0} → {:.0} MB |",
                    started.elapsed().as_secs_f64() * 1e3,
                    rss_mb()
                );
                continue;
            }
        };
        let mut kinds = ZoneKinds::new();
        register(&mut kinds, &ModuleKind::new("tag", tag.clone()));
        register(&mut kinds, &ModuleKind::new("hostile", module));
        let clock: Arc<dyn Clock> = Arc::new(SystemClock::new());
        let mut innocent = Innocent::new(&kinds, clock.clone(), 20);
        let mut hostile =
            match kinds.create(init("hostile", "h"), ZoneConfig::default(), clock.clone()) {
                Ok(z) => Some(z),
                Err(e) => {
                    println!(
                    "| {name} | refused at create: {e} | {:.0} ms | 0 | — | {rss0:.0} → {:.0} MB |",
                    started.elapsed().as_secs_f64() * 1e3,
                    rss_mb()
                );
                    continue;
                }
            };
        let (mut dropped, mut gap, mut last) = (0u64, Duration::ZERO, Instant::now());
        let mut outcome = "still running (within every limit)".to_owned();
        let mut stopped_after = None;
        let end = Instant::now() + Duration::from_secs_f64(seconds);
        let mut next = Instant::now();
        while Instant::now() < end {
            if let Some(h) = hostile.as_mut() {
                h.advance(clock.now());
                if let Some(f) = h.failure() {
                    outcome = format!("failed: {f}");
                    stopped_after = Some(started.elapsed());
                    hostile = None;
                }
            }
            dropped += innocent.advance(clock.now());
            let now = Instant::now();
            gap = gap.max(now - last);
            last = now;
            next += dt;
            if let Some(wait) = next.checked_duration_since(Instant::now()) {
                std::thread::sleep(wait);
            }
        }
        if let Some(h) = &hostile {
            let r = format!("{} entities", h.world().len());
            outcome = format!("{outcome}; {r}");
        }
        println!(
            "| {name} | {outcome} | {} | {dropped} | {:.0} ms | {rss0:.0} → {:.0} MB |",
            stopped_after.map_or("—".to_owned(), |d| format!(
                "{:.0} ms",
                d.as_secs_f64() * 1e3
            )),
            gap.as_secs_f64() * 1e3,
            rss_mb()
        );
    }
}
