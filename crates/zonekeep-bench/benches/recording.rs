//! What recording a zone costs its tick, on arena A (docs/WORKLOADS.md arena §1, scenario A:
//! M = 1,000 NPCs, N = 100 players, 20 Hz, one patch per tick, broadcast), and how large its
//! recording grows per simulated minute.
//!
//! Three identical hosts of the `arena-workload` zone (the kind `zonekeep serve` registers) on one
//! manual clock, one of them recorded from its creation and a third as a control (two hosts not
//! recorded differ by this much: the noise floor), are stepped in lockstep as a host's
//! simulation thread steps a zone: the tick's inputs offered (`handle_input`), `advance`,
//! `drain_frames` (every frame copied out, as the thread copies it into its connection's
//! outbox), `drain_facts` and
//! `take_recorded` (the bytes a writer thread would get). Each step of each host is timed alone;
//! the order the hosts go in rotates every tick, so none is favoured by the cache or by load
//! from other processes. Bots send as §3 says: 10 inputs a second each, bot `b`'s first
//! `b · 1 ms` after the period starts — bots 0–49 on even ticks, 50–99 on odd ones — input `j`
//! being `(5 cos(h + 0.05 j), 5 sin(h + 0.05 j))`.
//!
//! After a 5 s warm-up, one simulated minute (1,200 ticks) is measured, `--minutes` times
//! (default 3); the figures are over all of them. The state-hash part of the recorded tick is
//! timed separately on the plain host (`ZoneHost::state_hash`, what the recorder calls after
//! each tick), so the report says what dominates.
//!
//! Run: `cargo bench -p zonekeep-bench --bench recording [-- --minutes N]`

// A benchmark binary: a failed setup step should abort loudly.
#![allow(clippy::expect_used, clippy::unwrap_used, missing_docs)]

use std::collections::BTreeMap;
use std::hint::black_box;
use std::sync::Arc;
use std::time::{Duration, Instant};

use zonekeep_bench::arena::local::LocalBots;
use zonekeep_bench::arena::zone::{zone_config, ArenaZone};
use zonekeep_bench::arena::{ArenaParams, KIND};
use zonekeep_core::recording::{Record, RecordLimits, RecordReader};
use zonekeep_core::{Clock, ManualClock, ZoneHost, ZoneInit};

/// Bots (arena §1 `N`).
const BOTS: u32 = 100;
/// Ticks per second (arena §1).
const TICK_HZ: u64 = 20;
/// Warm-up ticks (arena §6: 5 s).
const WARMUP: u64 = 5 * TICK_HZ;
/// Ticks in one simulated minute.
const MINUTE: u64 = 60 * TICK_HZ;

/// One arena host and its bots.
struct Arena {
    host: ZoneHost,
    bots: LocalBots,
}

impl Arena {
    fn new(clock: &ManualClock, recorded: bool) -> Arena {
        let init = ZoneInit {
            zone_id: "arena-a".into(),
            kind: KIND.into(),
            params: serde_json::Value::Null,
        };
        let mut host =
            ZoneHost::new::<ArenaZone>(init, zone_config(None), Arc::new(clock.clone())).unwrap();
        if recorded {
            host.start_recording(RecordLimits::default()).unwrap();
        }
        let bots = LocalBots::join(&mut host, BOTS);
        Arena { host, bots }
    }

    /// One step of the simulation thread at `now` (tick `k` next): the frame bytes read and the
    /// recorded bytes taken (which a writer thread would free, not this one).
    fn step(&mut self, k: u64, now: Duration) -> (usize, Vec<u8>) {
        self.bots.offer(&mut self.host, k);
        let report = self.host.advance(now);
        assert_eq!(report.ticks_run, 1, "one tick per step");
        // Each frame is copied out as the simulation thread copies it into its connection's
        // outbox (`Bytes::copy_from_slice`); the outboxes themselves are not modelled.
        let mut read = 0;
        let mut outboxes = Vec::with_capacity(self.bots.players.len());
        for f in self.host.drain_frames().unwrap() {
            read += f.bytes.len();
            outboxes.push(bytes::Bytes::copy_from_slice(f.bytes));
        }
        black_box(outboxes);
        black_box(self.host.drain_facts());
        (read, self.host.take_recorded())
    }
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn main() {
    let mut minutes = 3u64;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        if a == "--minutes" {
            minutes = args
                .next()
                .and_then(|v| v.parse().ok())
                .expect("--minutes N");
        }
        // cargo bench passes `--bench`; other flags are not ours.
    }
    let clock = ManualClock::new();
    let dt = Duration::from_nanos(1_000_000_000 / TICK_HZ);
    let mut plain = Arena::new(&clock, false);
    let mut recorded = Arena::new(&clock, true);
    // A second host not recorded: how far two identical hosts' steps differ is the noise floor
    // the recording's overhead is read against.
    let mut control = Arena::new(&clock, false);
    let mut file = recorded.host.take_recorded();
    let mut k = 1;
    for _ in 0..WARMUP {
        clock.advance(dt);
        plain.step(k, clock.now());
        file.extend(recorded.step(k, clock.now()).1);
        control.step(k, clock.now());
        k += 1;
    }
    let warm_bytes = recorded.host.recording_status().unwrap().bytes;
    let measured_from = file.len();

    let mut t_plain = Vec::new();
    let mut t_rec = Vec::new();
    let mut t_control = Vec::new();
    let mut t_hash = Vec::new();
    let mut frame_bytes = 0usize;
    for _ in 0..minutes * MINUTE {
        clock.advance(dt);
        let now = clock.now();
        // Which host steps first, second and last rotates every tick.
        for turn in 0..3 {
            let which = (k + turn) % 3;
            let a = match which {
                0 => &mut plain,
                1 => &mut recorded,
                _ => &mut control,
            };
            let t = Instant::now();
            let (n, taken) = a.step(k, now);
            let d = t.elapsed();
            // Outside the timed step: what a writer thread would have been handed.
            file.extend_from_slice(&taken);
            match which {
                0 => {
                    t_plain.push(d);
                    frame_bytes += n;
                }
                1 => t_rec.push(d),
                _ => t_control.push(d),
            }
        }
        let t = Instant::now();
        black_box(plain.host.state_hash());
        t_hash.push(t.elapsed());
        k += 1;
    }
    let status = recorded.host.recording_status().unwrap();
    assert_eq!(status.stopped, None, "the recording ran throughout");

    // Records of the measured ticks, by kind.
    let (_, mut reader) = RecordReader::open(&file).unwrap();
    let mut kinds: BTreeMap<&'static str, (u64, usize)> = BTreeMap::new();
    loop {
        let at = reader.offset();
        let Some(r) = reader.next_record().unwrap() else {
            break;
        };
        if at < measured_from {
            continue;
        }
        let len = reader.offset() - at;
        let name = match r {
            Record::Input { .. } => "input",
            Record::Advance(_) => "advance",
            Record::DrainFrames => "drain frames",
            Record::DrainFacts => "drain facts",
            Record::Clock(_) => "clock reading",
            Record::Outcome(_) => "outcome",
            Record::Tick { .. } => "tick (state hash)",
            Record::Frames { .. } => "frames digest",
            Record::Facts { .. } => "facts digest",
            _ => "other",
        };
        let e = kinds.entry(name).or_default();
        e.0 += 1;
        e.1 += len;
    }

    let ticks = t_plain.len();
    let sum = |v: &[Duration]| v.iter().sum::<Duration>();
    let (sp, sr, sh, sc) = (sum(&t_plain), sum(&t_rec), sum(&t_hash), sum(&t_control));
    t_plain.sort();
    t_rec.sort();
    t_control.sort();
    t_hash.sort();
    let mean = |s: Duration| ms(s) / ticks as f64;
    println!(
        "arena A recording cost: {BOTS} players, {} NPCs, {TICK_HZ} Hz, {minutes} simulated minute(s) = {ticks} ticks after {WARMUP} warm-up ticks",
        ArenaParams::default().npcs
    );
    println!(
        "frames per tick: {BOTS}, {:.0} bytes",
        frame_bytes as f64 / ticks as f64
    );
    println!("| step (inputs + advance + drain_frames + drain_facts + take_recorded) | mean ms | p50 ms | p99 ms |");
    println!("| --- | --- | --- | --- |");
    for (name, s, v) in [
        ("not recorded", sp, &t_plain),
        ("recorded", sr, &t_rec),
        ("control (a second host, not recorded)", sc, &t_control),
    ] {
        println!(
            "| {name} | {:.4} | {:.4} | {:.4} |",
            mean(s),
            ms(percentile(v, 0.5)),
            ms(percentile(v, 0.99))
        );
    }
    println!(
        "| state hash alone (`state_hash`, once per tick) | {:.4} | {:.4} | {:.4} |",
        mean(sh),
        ms(percentile(&t_hash, 0.5)),
        ms(percentile(&t_hash, 0.99))
    );
    let over = |a: f64, b: f64| (a / b - 1.0) * 100.0;
    // The baseline is both hosts not recorded: each differs from the other by the noise floor.
    let base = (mean(sp) + mean(sc)) / 2.0;
    let base_p50 = (ms(percentile(&t_plain, 0.5)) + ms(percentile(&t_control, 0.5))) / 2.0;
    // Shares of the added time are meaningful only when recording added any (a noisy run may
    // measure the recorded steps faster on average).
    let added = mean(sr) - base;
    let share = if added > 0.0 {
        format!("{:.0} %", mean(sh) / added * 100.0)
    } else {
        "n/a (nothing added on average)".to_owned()
    };
    println!(
        "overhead against the two hosts not recorded: mean {:+.1} %, p50 {:+.1} % (goal <= 5 %), {:.1} us per tick; state hash = {share} of it",
        over(mean(sr), base),
        over(ms(percentile(&t_rec, 0.5)), base_p50),
        added * 1e3,
    );
    println!(
        "noise floor: the two hosts not recorded differ by mean {:+.1} %, p50 {:+.1} %",
        over(mean(sc), mean(sp)),
        over(
            ms(percentile(&t_control, 0.5)),
            ms(percentile(&t_plain, 0.5))
        ),
    );
    let measured_bytes = status.bytes - warm_bytes;
    println!(
        "recorded: {:.0} bytes per simulated minute ({:.1} per tick); header and warm-up {warm_bytes} bytes",
        measured_bytes as f64 / minutes as f64,
        measured_bytes as f64 / ticks as f64
    );
    // Starting a recording of a running zone takes its image on the simulation thread: that
    // tick waits for it. How long, how large, and how long a replay takes to build it back.
    let mut take = Vec::new();
    let mut build = Vec::new();
    let mut image_bytes = 0;
    for _ in 0..20 {
        let t = Instant::now();
        let image = plain
            .host
            .image()
            .expect("the arena workload keeps an image");
        take.push(t.elapsed());
        image_bytes = image.len();
        let t = Instant::now();
        let copy = ZoneHost::from_image::<ArenaZone>(
            plain.host.init().clone(),
            plain.host.config().clone(),
            Arc::new(clock.clone()),
            &image,
        )
        .expect("the image builds a host");
        build.push(t.elapsed());
        assert_eq!(copy.state_hash(), plain.host.state_hash());
    }
    take.sort();
    build.sort();
    println!(
        "image (what a recording of the running zone starts from): {image_bytes} bytes, taken in {:.2} ms (p50 of 20, max {:.2}), built back in {:.2} ms",
        ms(percentile(&take, 0.5)),
        ms(percentile(&take, 1.0)),
        ms(percentile(&build, 0.5)),
    );
    let records: u64 = kinds.values().map(|v| v.0).sum();
    println!("records per tick: {:.2}", records as f64 / ticks as f64);
    println!("| record | per tick | bytes per tick |");
    println!("| --- | --- | --- |");
    for (name, (n, b)) in &kinds {
        println!(
            "| {name} | {:.2} | {:.1} |",
            *n as f64 / ticks as f64,
            *b as f64 / ticks as f64
        );
    }
}
