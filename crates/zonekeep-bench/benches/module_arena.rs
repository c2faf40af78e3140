//! What running a game as a WebAssembly module costs a host's tick, on the arena workload
//! (docs/WORKLOADS.md arena §1: M = 1,000 NPCs, N = 100 players, 20 Hz, one patch per tick;
//! scenario A broadcast or B interest).
//!
//! Three hosts of the same zone on one manual clock: the native `ArenaZone`, the same workload as
//! a module (`examples/workload-module`, built here for `wasm32-unknown-unknown` with the
//! `module` profile), and a second native host as a control (two native hosts differ by this
//! much: the noise floor). Their worlds are the same (the `workload_module` test checks it tick
//! by tick). They are stepped as a simulation thread steps a zone: the tick's inputs offered,
//! `advance` (the zone's own tick: for the module, one call and its command buffer applied) and
//! `drain_frames` (replication: every player's frame built and copied out). Each host's step is
//! timed alone, `advance` also on its own; the order rotates every tick. Bots send as §3 says:
//! 10 inputs a second each, half of them on even ticks and half on odd ones.
//!
//! Run: `cargo bench -p zonekeep-bench --bench module_arena [-- --scenario B --seconds 60]`

// A benchmark binary: a failed setup step should abort loudly.
#![allow(clippy::expect_used, clippy::unwrap_used, missing_docs)]

#[path = "../../zonekeep-wasm/tests/support/guest_build.rs"]
mod guest_build;

use std::hint::black_box;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::json;
use zonekeep_bench::arena::local::LocalBots;
use zonekeep_bench::arena::zone::{zone_config, ArenaZone};
use zonekeep_bench::arena::{module, ArenaParams, KIND};
use zonekeep_core::{Clock, ManualClock, ZoneHost, ZoneInit};

/// Bots (arena §1 `N`).
const BOTS: u32 = 100;
/// Ticks per second (arena §1).
const TICK_HZ: u64 = 20;
/// Warm-up ticks (arena §6: 5 s).
const WARMUP: u64 = 5 * TICK_HZ;

/// One host and its bots.
struct Arena {
    host: ZoneHost,
    bots: LocalBots,
}

impl Arena {
    fn new(mut host: ZoneHost) -> Arena {
        let bots = LocalBots::join(&mut host, BOTS);
        Arena { host, bots }
    }

    /// One step at `now` (tick `k` next): its time and the time of its `advance` alone.
    fn step(&mut self, k: u64, now: Duration) -> (Duration, Duration) {
        let start = Instant::now();
        self.bots.offer(&mut self.host, k);
        let t = Instant::now();
        let report = self.host.advance(now);
        let advance = t.elapsed();
        assert_eq!(report.ticks_run, 1, "one tick per step");
        let mut outboxes = Vec::with_capacity(self.bots.players.len());
        for f in self.host.drain_frames().unwrap() {
            outboxes.push(bytes::Bytes::copy_from_slice(f.bytes));
        }
        black_box(outboxes);
        (start.elapsed(), advance)
    }
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

fn us(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

/// Mean, p50 and p99, in µs.
type Stats = (f64, f64, f64);

/// A host's step and advance [`Stats`].
type Row = (Stats, Stats);

/// Mean, p50 and p99 of `v` (sorted here), in µs.
fn stats(v: &mut [Duration]) -> Stats {
    let mean = us(v.iter().sum::<Duration>()) / v.len() as f64;
    v.sort();
    (mean, us(percentile(v, 0.5)), us(percentile(v, 0.99)))
}

fn main() {
    let mut scenario = "A".to_owned();
    let mut seconds = 60u64;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--scenario" => scenario = args.next().expect("--scenario A|B"),
            "--seconds" => {
                seconds = args
                    .next()
                    .and_then(|v| v.parse().ok())
                    .expect("--seconds N")
            }
            // cargo bench passes `--bench`; other flags are not ours.
            _ => {}
        }
    }
    let params = match scenario.as_str() {
        "A" => serde_json::Value::Null,
        "B" => json!({ "scenario": "B" }),
        other => panic!("--scenario A or B, not {other}"),
    };
    let clock = ManualClock::new();
    let shared: Arc<dyn Clock> = Arc::new(clock.clone());
    let native_host = |id: &str| {
        let init = ZoneInit {
            zone_id: id.into(),
            kind: KIND.into(),
            params: params.clone(),
        };
        ZoneHost::new::<ArenaZone>(init, zone_config(None), shared.clone()).unwrap()
    };
    let bytes = std::fs::read(guest_build::workload_module()).unwrap();
    let m = module::load(&bytes).unwrap();
    let mut native = Arena::new(native_host("arena-n"));
    let mut wasm = Arena::new(module::host(&m, "arena-m", params.clone(), shared.clone()).unwrap());
    let mut control = Arena::new(native_host("arena-c"));

    let dt = Duration::from_nanos(1_000_000_000 / TICK_HZ);
    let mut k = 1;
    for _ in 0..WARMUP {
        clock.advance(dt);
        for a in [&mut native, &mut wasm, &mut control] {
            a.step(k, clock.now());
        }
        k += 1;
    }
    let mut steps: [Vec<Duration>; 3] = Default::default();
    let mut advances: [Vec<Duration>; 3] = Default::default();
    for _ in 0..seconds * TICK_HZ {
        clock.advance(dt);
        let now = clock.now();
        for turn in 0..3 {
            let which = ((k + turn) % 3) as usize;
            let a = match which {
                0 => &mut native,
                1 => &mut wasm,
                _ => &mut control,
            };
            let (step, advance) = a.step(k, now);
            steps[which].push(step);
            advances[which].push(advance);
        }
        k += 1;
    }

    let ticks = steps[0].len();
    println!(
        "arena {scenario} as a module vs native: {BOTS} players, {} NPCs, {TICK_HZ} Hz, {ticks} ticks after {WARMUP} warm-up ticks; module {} bytes",
        ArenaParams::default().npcs,
        bytes.len()
    );
    println!(
        "| | step mean µs | step p50 | step p99 | advance (the zone's tick) mean | p50 | p99 |"
    );
    println!("| --- | --- | --- | --- | --- | --- | --- |");
    let names = ["native", "module", "native, control"];
    let mut rows = Vec::new();
    for i in 0..3 {
        let s = stats(&mut steps[i]);
        let a = stats(&mut advances[i]);
        println!(
            "| {} | {:.1} | {:.1} | {:.1} | {:.1} | {:.1} | {:.1} |",
            names[i], s.0, s.1, s.2, a.0, a.1, a.2
        );
        rows.push((s, a));
    }
    let base = |f: fn(&Row) -> f64| (f(&rows[0]) + f(&rows[2])) / 2.0;
    println!(
        "module ÷ native, whole step: mean {:.2}×, p50 {:.2}× (goal ≤ 1.3×); the zone's tick alone: mean {:.2}×, p50 {:.2}×",
        rows[1].0 .0 / base(|r| r.0 .0),
        rows[1].0 .1 / base(|r| r.0 .1),
        rows[1].1 .0 / base(|r| r.1 .0),
        rows[1].1 .1 / base(|r| r.1 .1),
    );
    println!(
        "noise floor: the two native hosts' steps differ by mean {:+.1} %, p50 {:+.1} %",
        (rows[2].0 .0 / rows[0].0 .0 - 1.0) * 100.0,
        (rows[2].0 .1 / rows[0].0 .1 - 1.0) * 100.0,
    );
}
