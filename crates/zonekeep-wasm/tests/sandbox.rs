//! Hostile and broken modules, each stopped with its reason, while a native zone ticking beside
//! them on the same thread keeps every tick. The modules are written in the text format here and
//! compiled to binaries with `wat`: each one is a complete module of the ABI in docs/MODULES.md.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "support/guest_build.rs"]
mod guest_build;
#[path = "support/timer_storm.rs"]
mod timer_storm;

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use zonekeep_core::{
    Claims, Clock, Ctx, ManualClock, PlayerId, Principal, Role, Zone, ZoneConfig, ZoneError,
    ZoneInit, ZoneKinds,
};
use zonekeep_wasm::{register, LoadError, ModuleEngine, ModuleKind, Sandbox, ZoneModule};

/// A module that answers every call with an empty command buffer, except TICK (op 8), which runs
/// `tick`; `extra` adds functions, imports or data.
fn module(tick: &str, extra: &str) -> Vec<u8> {
    wat::parse_str(format!(
        r#"(module
            (import "zonekeep" "log" (func $log (param i32 i32 i32)))
            {extra}
            (memory (export "memory") 1)
            (func (export "zk_abi") (result i32) i32.const 5)
            (func (export "zk_alloc") (param i32) (result i32) i32.const 4096)
            (func (export "zk_call") (param $op i32) (param $len i32) (result i64)
                (if (i32.eq (local.get $op) (i32.const 8)) (then {tick}))
                i64.const 0))"#
    ))
    .unwrap()
}

fn engine(sandbox: Sandbox) -> Arc<ModuleEngine> {
    ModuleEngine::new(sandbox).unwrap()
}

/// A native zone that counts its ticks.
struct Native {
    ticks: u64,
}

impl Zone for Native {
    type Input = ();
    fn create(_: &ZoneInit, _: &mut Ctx<'_>) -> Result<Self, ZoneError> {
        Ok(Self { ticks: 0 })
    }
    fn sanitize(&mut self, _: PlayerId, _: &[u8]) -> Result<(), zonekeep_core::InputRefusal> {
        Ok(())
    }
    fn tick(&mut self, _: &mut Ctx<'_>) {
        self.ticks += 1;
    }
}

fn init(kind: &str, id: &str) -> ZoneInit {
    ZoneInit {
        zone_id: id.into(),
        kind: kind.into(),
        params: zonekeep_core::serde_json::json!({}),
    }
}

/// Runs a module zone of `bytes` beside a native zone on one clock until the module zone fails
/// (or 20 ticks pass): returns its failure. The native zone must have run every tick.
fn run_beside_native(engine: &Arc<ModuleEngine>, bytes: &[u8]) -> Option<String> {
    let module = ZoneModule::load(engine, bytes).unwrap();
    let mut kinds = ZoneKinds::new();
    register(&mut kinds, &ModuleKind::new("hostile", module));
    kinds.register::<Native>("native");
    let clock = Arc::new(ManualClock::new());
    let config = ZoneConfig::default();
    let dt = config.dt();
    let mut hostile = kinds
        .create(init("hostile", "h-1"), config.clone(), clock.clone())
        .unwrap();
    let mut native = kinds
        .create(init("native", "n-1"), config, clock.clone())
        .unwrap();
    let mut failure = None;
    for tick in 1..=20u64 {
        clock.advance(dt);
        if failure.is_none() {
            hostile.advance(clock.now());
            failure = hostile.failure().map(str::to_owned);
        }
        let report = native.advance(clock.now());
        assert_eq!(report.ticks_dropped, 0);
        assert_eq!(native.tick(), tick, "the native zone keeps its tick");
    }
    failure
}

#[test]
fn an_infinite_loop_runs_out_of_fuel() {
    let e = engine(Sandbox {
        fuel_per_call: 1_000_000,
        ..Sandbox::default()
    });
    let why = run_beside_native(&e, &module("(loop $l (br $l))", "")).unwrap();
    assert_eq!(
        why,
        "CPU budget exceeded: a call used more than 1000000 fuel"
    );
}

#[test]
fn memory_grow_past_the_cap_answers_minus_one_as_webassembly_does() {
    let e = engine(Sandbox {
        memory_bytes: 8 << 20,
        ..Sandbox::default()
    });
    // Asks for 16 MiB more; a refusal (-1) is handled and the zone goes on; a grant would trap.
    let polite = "(if (i32.ne (memory.grow (i32.const 256)) (i32.const -1)) (then unreachable))";
    assert_eq!(run_beside_native(&e, &module(polite, "")), None);
}

#[test]
fn a_module_asking_past_the_cap_again_and_again_is_stopped() {
    let e = engine(Sandbox {
        memory_bytes: 8 << 20,
        fuel_per_call: u64::MAX / 2,
        fuel_per_tick: u64::MAX / 2,
        ..Sandbox::default()
    });
    // Ignores every refusal and asks again: each refusal is a host call fuel does not price.
    let bomb = "(loop $l (drop (memory.grow (i32.const 256))) (br $l))";
    let why = run_beside_native(&e, &module(bomb, "")).unwrap();
    assert!(why.starts_with("memory cap exceeded"), "{why}");
}

#[test]
fn a_memory_bomb_stops_at_the_cap_and_its_trap_is_named_after_it() {
    let e = engine(Sandbox {
        memory_bytes: 8 << 20,
        ..Sandbox::default()
    });
    // Grows until refused, then traps, as an allocator out of memory does.
    let bomb =
        "(loop $l (br_if $l (i32.ne (memory.grow (i32.const 16)) (i32.const -1)))) unreachable";
    let why = run_beside_native(&e, &module(bomb, "")).unwrap();
    assert!(
        why == "memory cap exceeded: the module asked for 8454144 bytes, the cap is 8388608",
        "{why}"
    );
}

#[test]
fn deep_recursion_overflows_the_capped_stack() {
    let e = engine(Sandbox::default());
    let recurse =
        r#"(func $r (param i32) (result i32) (call $r (i32.add (local.get 0) (i32.const 1))))"#;
    let why = run_beside_native(&e, &module("(drop (call $r (i32.const 0)))", recurse)).unwrap();
    assert_eq!(why, "stack overflow (recursion too deep)");
}

#[test]
fn a_panic_stops_the_zone_with_its_message() {
    let e = engine(Sandbox::default());
    let msg = "panicked at src/lib.rs:7:5: the floor is lava";
    let data = format!(r#"(data (i32.const 0) "{msg}")"#);
    let panic = format!(
        "(call $log (i32.const 5) (i32.const 0) (i32.const {})) unreachable",
        msg.len()
    );
    let why = run_beside_native(&e, &module(&panic, &data)).unwrap();
    assert_eq!(why, format!("panicked: {msg}"));
}

#[test]
fn a_log_flood_is_stopped_and_the_rate_limit_drops_the_rest() {
    let e = engine(Sandbox::default());
    let flood = "(loop $l (call $log (i32.const 2) (i32.const 0) (i32.const 5)) (br $l))";
    let why = run_beside_native(&e, &module(flood, r#"(data (i32.const 0) "spam!")"#)).unwrap();
    assert_eq!(why, "log flood: more than 10000 log lines in one call");
}

#[test]
fn a_wasi_module_is_refused_at_load_naming_the_import() {
    let e = engine(Sandbox::default());
    let bytes = wat::parse_str(
        r#"(module
            (import "wasi_snapshot_preview1" "fd_write" (func (param i32 i32 i32 i32) (result i32)))
            (memory (export "memory") 1))"#,
    )
    .unwrap();
    let e = ZoneModule::load(&e, &bytes).unwrap_err();
    assert!(matches!(e, LoadError::ForbiddenImport { .. }));
    assert_eq!(
        e.to_string(),
        "the module imports wasi_snapshot_preview1.fd_write: a zone module may import only \
         zonekeep.log (it was built for WASI: build it for wasm32-unknown-unknown)"
    );
}

#[test]
fn any_other_import_is_refused_at_load_naming_it() {
    let e = engine(Sandbox::default());
    let bytes = module("", r#"(import "env" "now" (func (result i64)))"#);
    let e = ZoneModule::load(&e, &bytes).unwrap_err();
    assert_eq!(
        e.to_string(),
        "the module imports env.now: a zone module may import only zonekeep.log"
    );
    let bytes = wat::parse_str(
        r#"(module (import "zonekeep" "log" (func (param i64))) (memory (export "memory") 1))"#,
    )
    .unwrap();
    let e = ZoneModule::load(&engine(Sandbox::default()), &bytes).unwrap_err();
    assert!(matches!(e, LoadError::LogSignature(_)), "{e}");
}

#[test]
fn broken_modules_are_refused_at_load() {
    let e = engine(Sandbox {
        fuel_per_call: 1_000_000,
        ..Sandbox::default()
    });
    // Not WebAssembly, and the text format is not accepted either.
    assert!(matches!(
        ZoneModule::load(&e, b"hello"),
        Err(LoadError::Invalid(_))
    ));
    assert!(matches!(
        ZoneModule::load(&e, b"(module)"),
        Err(LoadError::Invalid(_))
    ));
    // Truncated binary.
    let good = module("", "");
    assert!(matches!(
        ZoneModule::load(&e, &good[..good.len() - 3]),
        Err(LoadError::Invalid(_))
    ));
    // Missing export.
    let no_call = wat::parse_str(r#"(module (memory (export "memory") 1) (func (export "zk_abi") (result i32) i32.const 5))"#).unwrap();
    assert_eq!(
        ZoneModule::load(&e, &no_call).unwrap_err().to_string(),
        "the module must export zk_alloc as a function (i32) -> i32"
    );
    // Modules built for an ABI version this host does not run (the first, the third, and the
    // one before the oldest it runs: 4, before characters), or a newer one, refused by the
    // version they name.
    for old in [
        1,
        3,
        zonekeep_abi::OLDEST_ABI_VERSION - 1,
        zonekeep_abi::ABI_VERSION + 1,
    ] {
        let other = wat::parse_str(format!(
            r#"(module (memory (export "memory") 1)
                (func (export "zk_abi") (result i32) i32.const {old})
                (func (export "zk_alloc") (param i32) (result i32) i32.const 0)
                (func (export "zk_call") (param i32 i32) (result i64) i64.const 0))"#
        ))
        .unwrap();
        let refused = ZoneModule::load(&e, &other).unwrap_err();
        assert_eq!(refused, LoadError::AbiVersion(old));
        assert!(refused.to_string().contains(&format!("ABI version {old}")));
    }
    // A start function that never returns is stopped by the fuel budget at load.
    let looping_start = module("", "(func $s (loop $l (br $l))) (start $s)");
    let err = ZoneModule::load(&e, &looping_start).unwrap_err();
    assert!(err.to_string().contains("CPU budget exceeded"), "{err}");
    // A memory declared larger than the cap never instantiates.
    let huge = wat::parse_str(
        r#"(module (memory (export "memory") 2000)
            (func (export "zk_abi") (result i32) i32.const 5)
            (func (export "zk_alloc") (param i32) (result i32) i32.const 0)
            (func (export "zk_call") (param i32 i32) (result i64) i64.const 0))"#,
    )
    .unwrap();
    let err = ZoneModule::load(&e, &huge).unwrap_err();
    assert!(err.to_string().contains("memory cap exceeded"), "{err}");
    // Too large to accept at all.
    let small = engine(Sandbox {
        module_bytes: 16,
        ..Sandbox::default()
    });
    assert!(matches!(
        ZoneModule::load(&small, &good),
        Err(LoadError::TooLarge { .. })
    ));
}

#[test]
fn an_output_outside_memory_or_an_undecodable_buffer_fails_the_zone() {
    let e = engine(Sandbox::default());
    // (ptr 0x10000 = one past the only page) << 32 | len 4
    let outside = "(return (i64.const 0x0001000000000004))";
    let why = run_beside_native(&e, &module(outside, "")).unwrap();
    assert_eq!(
        why,
        "bad command buffer: zk_call returned an output outside memory"
    );
    // Command tag 200 at address 0, length 1.
    let unknown = "(i32.store8 (i32.const 0) (i32.const 200)) (return (i64.const 1))";
    let why = run_beside_native(&e, &module(unknown, "")).unwrap();
    assert_eq!(why, "bad command buffer: unknown command tag 200");
    // DESPAWN (3) of handle 9, which was never spawned.
    let despawn = "(i32.store8 (i32.const 0) (i32.const 3)) (i32.store (i32.const 1) (i32.const 9)) (return (i64.const 5))";
    let why = run_beside_native(&e, &module(despawn, "")).unwrap();
    assert_eq!(why, "refused command: no live entity has handle 9");
}

#[test]
fn a_budget_trap_happens_at_the_same_tick_every_run() {
    // Work grows with the tick (the tick is the first 8 input bytes): 200k iterations per tick.
    let grows = r#"
        (local.set $len (i32.wrap_i64 (i64.mul (i64.load (i32.const 4096)) (i64.const 200000))))
        (loop $l (local.set $len (i32.sub (local.get $len) (i32.const 1)))
                 (br_if $l (i32.gt_s (local.get $len) (i32.const 0))))"#;
    let e = engine(Sandbox {
        fuel_per_call: 3_000_000,
        ..Sandbox::default()
    });
    let ticks_to_fail = || {
        let module = ZoneModule::load(&e, &module(grows, "")).unwrap();
        let mut kinds = ZoneKinds::new();
        register(&mut kinds, &ModuleKind::new("grows", module));
        let clock = Arc::new(ManualClock::new());
        let config = ZoneConfig::default();
        let mut z = kinds
            .create(init("grows", "g"), config.clone(), clock.clone())
            .unwrap();
        for _ in 0..40 {
            clock.advance(config.dt());
            z.advance(clock.now());
            if z.failure().is_some() {
                return z.tick();
            }
        }
        panic!("never ran out of fuel");
    };
    let first = ticks_to_fail();
    assert!(first > 1, "not at once: {first}");
    assert_eq!(ticks_to_fail(), first);
}

#[test]
fn the_host_stops_a_running_call_from_another_thread() {
    // Fuel enough for hours: only the stop handle can end this call.
    let e = engine(Sandbox {
        fuel_per_call: u64::MAX / 2,
        fuel_per_tick: u64::MAX / 2,
        call_deadline: Duration::from_secs(3600),
        tick_deadline: Duration::from_secs(3600),
        ..Sandbox::default()
    });
    let module = ZoneModule::load(&e, &module("(loop $l (br $l))", "")).unwrap();
    let mut kinds = ZoneKinds::new();
    register(&mut kinds, &ModuleKind::new("spin", module));
    let clock = Arc::new(ManualClock::new());
    let config = ZoneConfig::default();
    let mut z = kinds
        .create(init("spin", "s"), config.clone(), clock.clone())
        .unwrap();
    let stop = z.stop_handle().expect("a module zone can be stopped");
    // Whether the flag lands before the call or during it, the call ends within an epoch.
    let stopper = std::thread::spawn(move || stop.store(true, Ordering::Relaxed));
    clock.advance(config.dt());
    z.advance(clock.now());
    stopper.join().unwrap();
    assert_eq!(z.failure(), Some("stopped by the host"));
}

#[test]
fn a_call_past_its_wall_deadline_is_interrupted() {
    let e = engine(Sandbox {
        fuel_per_call: u64::MAX / 2,
        fuel_per_tick: u64::MAX / 2,
        call_deadline: Duration::from_millis(50),
        tick_deadline: Duration::from_secs(3600),
        ..Sandbox::default()
    });
    let why = run_beside_native(&e, &module("(loop $l (br $l))", "")).unwrap();
    assert_eq!(why, "a call ran longer than 50 ms");
}

#[test]
fn a_failed_zone_refuses_joins_and_inputs_with_the_reason() {
    let e = engine(Sandbox {
        fuel_per_call: 1_000_000,
        ..Sandbox::default()
    });
    let module = ZoneModule::load(&e, &module("(loop $l (br $l))", "")).unwrap();
    let mut kinds = ZoneKinds::new();
    register(&mut kinds, &ModuleKind::new("k", module));
    let clock = Arc::new(ManualClock::new());
    let config = ZoneConfig::default();
    let mut z = kinds
        .create(init("k", "z"), config.clone(), clock.clone())
        .unwrap();
    let p = z
        .handle_join(Principal::new("ann"), Claims::new(), Role::Player)
        .unwrap();
    clock.advance(config.dt());
    z.advance(clock.now());
    assert!(z.failure().is_some());
    let refused = z
        .handle_join(Principal::new("bob"), Claims::new(), Role::Player)
        .unwrap_err();
    assert!(
        refused
            .to_string()
            .contains("zone failed: CPU budget exceeded"),
        "{refused}"
    );
    assert!(matches!(
        z.handle_input(p, 1, 0, b"x"),
        zonekeep_core::InputOutcome::Refused(_)
    ));
    // No save is made of a failed zone: its last good save is what stays.
    assert_eq!(z.snapshot(), None);
}

#[test]
fn the_host_asks_for_an_input_buffer_only_when_an_input_outgrows_it() {
    // zk_alloc traps when asked a second time: calls whose input fits the first buffer (every
    // TICK, small joins and inputs) must not ask again; a larger input must.
    let bytes = wat::parse_str(
        r#"(module
            (memory (export "memory") 1)
            (global $asked (mut i32) (i32.const 0))
            (func (export "zk_abi") (result i32) i32.const 5)
            (func (export "zk_alloc") (param i32) (result i32)
                (if (global.get $asked) (then unreachable))
                (global.set $asked (i32.const 1))
                i32.const 4096)
            (func (export "zk_call") (param i32 i32) (result i64) i64.const 0))"#,
    )
    .unwrap();
    let e = engine(Sandbox::default());
    let mut kinds = ZoneKinds::new();
    register(
        &mut kinds,
        &ModuleKind::new("k", ZoneModule::load(&e, &bytes).unwrap()),
    );
    let clock = Arc::new(ManualClock::new());
    let config = ZoneConfig::default();
    // CREATE's input (the zone id, params and fact prefix) is the longest so far.
    let mut z = kinds
        .create(
            init("k", "a-zone-with-a-long-id"),
            config.clone(),
            clock.clone(),
        )
        .unwrap();
    let p = z
        .handle_join(Principal::new("ann"), Claims::new(), Role::Player)
        .unwrap();
    for seq in 1..=20 {
        assert!(z.handle_input(p, seq, 0, b"xy").is_accepted());
        clock.advance(config.dt());
        z.advance(clock.now());
    }
    assert_eq!(z.failure(), None);
    // An input longer than the buffer: the host asks for room, and this module traps.
    let _ = z.handle_input(p, 21, 0, &[0; 200]);
    assert!(
        z.failure().is_some_and(|f| f.contains("unreachable")),
        "{:?}",
        z.failure()
    );
}

#[test]
fn a_ticks_calls_share_one_budget_so_many_calls_buy_no_more_cpu() {
    // Each timer call spins ~100k iterations: well inside a call's budget, but 100 of them
    // are far past the tick's.
    let spin = timer_storm::spin(100_000);
    let e = engine(Sandbox {
        fuel_per_call: 5_000_000,
        fuel_per_tick: 10_000_000,
        ..Sandbox::default()
    });
    let why = run_beside_native(&e, &timer_storm::timer_storm(100, &spin, "")).unwrap();
    assert_eq!(
        why,
        "CPU budget per tick exceeded: the calls of one tick used more than 10000000 fuel"
    );
    // The same work in few enough calls fits, tick after tick.
    assert_eq!(
        run_beside_native(&e, &timer_storm::timer_storm(5, &spin, "")),
        None
    );
}

#[test]
fn a_ticks_calls_share_one_wall_deadline() {
    // Fuel for hours and a call deadline of an hour: only the tick's deadline ends it.
    let e = engine(Sandbox {
        fuel_per_call: u64::MAX / 2,
        fuel_per_tick: u64::MAX / 2,
        call_deadline: Duration::from_secs(3600),
        tick_deadline: Duration::from_millis(30),
        ..Sandbox::default()
    });
    let why = run_beside_native(&e, &module("(loop $l (br $l))", "")).unwrap();
    assert_eq!(why, "the calls of one tick ran longer than 30 ms");
}

#[test]
fn a_panic_line_without_a_trap_does_not_name_a_later_failure() {
    let e = engine(Sandbox::default());
    let msg = "panicked at forged.rs:1:1: not me";
    let data = format!(r#"(data (i32.const 0) "{msg}") (global $n (mut i32) (i32.const 0))"#);
    // The first tick logs a panic line and returns; the second traps for its own reason.
    let body = format!(
        "(global.set $n (i32.add (global.get $n) (i32.const 1)))
         (if (i32.eq (global.get $n) (i32.const 1))
            (then (call $log (i32.const 5) (i32.const 0) (i32.const {})) (return (i64.const 0))))
         unreachable",
        msg.len()
    );
    let why = run_beside_native(&e, &module(&body, &data)).unwrap();
    assert!(
        why.starts_with("trapped: ") && !why.contains("forged"),
        "{why}"
    );
}

/// A valid module of the ABI with `extra` functions of its own.
fn with_functions(extra: &str) -> Vec<u8> {
    module("", extra)
}

#[test]
fn modules_too_costly_to_compile_are_refused_before_compiling_naming_the_limit() {
    let e = engine(Sandbox {
        max_functions: 50,
        max_function_bytes: 1024,
        max_locals: 100,
        ..Sandbox::default()
    });
    let many = "(func)".repeat(60);
    let err = ZoneModule::load(&e, &with_functions(&many)).unwrap_err();
    assert!(matches!(err, LoadError::Shape(_)), "{err:?}");
    assert!(err.to_string().contains("at most 50"), "{err}");

    let big_body = format!("(func {})", "(drop (i32.const 1))".repeat(400));
    let err = ZoneModule::load(&e, &with_functions(&big_body)).unwrap_err();
    assert!(err.to_string().contains("at most 1024 bytes"), "{err}");

    let locals = format!("(func {})", "(local i64)".repeat(101));
    let err = ZoneModule::load(&e, &with_functions(&locals)).unwrap_err();
    assert!(err.to_string().contains("101 locals"), "{err}");

    // Within every limit: loads.
    assert!(ZoneModule::load(&e, &with_functions(&"(func)".repeat(40))).is_ok());
}

#[test]
fn the_default_shape_limits_admit_the_example_games() {
    let sandbox = Sandbox::default();
    let e = engine(sandbox);
    for file in [
        guest_build::tag_module(),
        guest_build::arena_module(),
        guest_build::workload_module(),
    ] {
        let bytes = std::fs::read(&file).unwrap();
        ZoneModule::load(&e, &bytes).unwrap_or_else(|err| panic!("{}: {err}", file.display()));
    }
}
