//! What resuming from the last acknowledged frame (PROTOCOL.md §4.1.1) saves over a BASELINE, on
//! arena A (docs/WORKLOADS.md arena §1, scenario A: M = 1,000 NPCs moving every tick, N = 100
//! players, 20 Hz, one patch per tick, broadcast, no byte budget).
//!
//! One host of the `arena-workload` zone on a manual clock, stepped as a host's simulation thread
//! steps a zone; every player's client is a protocol `Mirror` fed every frame built for it. Each
//! round drops 10 players, runs the outage (their inputs stop, everyone else's go on), then
//! resumes them all the same way: from what their mirrors hold (`handle_rejoin_from`, an ordinary
//! Delta) or not (`handle_rejoin`, a BASELINE); the modes alternate round by round. Measured on the
//! tick after the resume:
//! - the bytes of each resumed player's first frame;
//! - the client's cost to take it (`Mirror::decode_apply` of those bytes);
//! - the host's patch for the whole zone (`advance` + `drain_frames`), next to the median patch of
//!   the ticks without a resume.
//!
//! Welcome → first frame over a real connection is, for both modes, the wait for the next patch
//! (at most one patch interval, 50 ms here) plus the host's patch plus the frame's transfer; the
//! bytes above are what differs in the transfer.
//!
//! Run: `cargo bench -p zonekeep-bench --bench resume [-- --rounds N]` (default 10 per mode and
//! outage).

// A benchmark binary: a failed setup step should abort loudly.
#![allow(clippy::expect_used, clippy::unwrap_used, missing_docs)]

use std::hint::black_box;
use std::sync::Arc;
use std::time::{Duration, Instant};

use zonekeep_bench::arena::local::join_bot;
use zonekeep_bench::arena::math::{encode_input, BotParams};
use zonekeep_bench::arena::zone::{zone_config, ArenaZone};
use zonekeep_bench::arena::{ArenaParams, KIND};
use zonekeep_core::{Clock, ManualClock, PlayerId, ResumeOutcome, ZoneHost, ZoneInit};
use zonekeep_protocol::{Mirror, Schema};

/// Bots (arena §1 `N`).
const BOTS: usize = 100;
/// Players dropped and resumed per round.
const GROUP: usize = 10;
/// Ticks per second (arena §1).
const TICK_HZ: u64 = 20;
/// Warm-up ticks (arena §6: 5 s).
const WARMUP: u64 = 5 * TICK_HZ;
/// Outages measured, in ticks: a reconnect at once, one second, five seconds.
const OUTAGES: [u64; 3] = [1, TICK_HZ, 5 * TICK_HZ];

struct Bot {
    id: PlayerId,
    params: BotParams,
    sent: u32,
    mirror: Mirror,
    away: bool,
}

struct Arena {
    host: ZoneHost,
    clock: ManualClock,
    schema: Schema,
    bots: Vec<Bot>,
    k: u64,
}

impl Arena {
    fn new() -> Arena {
        let clock = ManualClock::new();
        let init = ZoneInit {
            zone_id: "arena-a".into(),
            kind: KIND.into(),
            params: serde_json::Value::Null,
        };
        let mut host =
            ZoneHost::new::<ArenaZone>(init, zone_config(None), Arc::new(clock.clone())).unwrap();
        let params = ArenaParams::default();
        let bots = (0..BOTS)
            .map(|b| {
                let id = join_bot(&mut host, b as u32);
                Bot {
                    id,
                    params: BotParams::new(b as u32, params.consts.world),
                    sent: 0,
                    mirror: Mirror::new(),
                    away: false,
                }
            })
            .collect();
        let schema = host.schema();
        Arena {
            host,
            clock,
            schema,
            bots,
            k: 1,
        }
    }

    /// One tick: the inputs of the bots that are here, `advance`, `drain_frames` (timed
    /// together), then every frame applied to its client's mirror; the frames of `watched`
    /// players are returned as (player index, bytes) instead.
    fn step(&mut self, watched: &[usize]) -> (Duration, Vec<(usize, Vec<u8>)>) {
        let c = ArenaParams::default().consts;
        let k = self.k;
        for (b, bot) in self.bots.iter_mut().enumerate() {
            if bot.away || k % 2 != (b as u64 / 50) % 2 {
                continue;
            }
            let (dx, dy) = bot.params.input(&c, u64::from(bot.sent));
            bot.sent += 1;
            let view = u32::try_from(k.saturating_sub(1)).unwrap_or(u32::MAX);
            let outcome = self
                .host
                .handle_input(bot.id, bot.sent, view, &encode_input(dx, dy));
            assert!(outcome.is_accepted(), "input of bot {b}: {outcome:?}");
        }
        self.clock
            .advance(Duration::from_nanos(1_000_000_000 / TICK_HZ));
        let t = Instant::now();
        let report = self.host.advance(self.clock.now());
        let frames: Vec<(PlayerId, Vec<u8>)> = self
            .host
            .drain_frames()
            .unwrap()
            .map(|f| (f.player, f.bytes.to_vec()))
            .collect();
        let patch = t.elapsed();
        assert_eq!(report.ticks_run, 1, "one tick per step");
        black_box(self.host.drain_facts());
        self.k += 1;
        let mut out = Vec::new();
        for (player, bytes) in frames {
            let b = self.bots.iter().position(|x| x.id == player).unwrap();
            if watched.contains(&b) {
                out.push((b, bytes));
            } else {
                self.bots[b]
                    .mirror
                    .decode_apply(&bytes, &self.schema)
                    .unwrap();
            }
        }
        (patch, out)
    }
}

#[derive(Default)]
struct Tally {
    bytes: Vec<usize>,
    apply: Vec<Duration>,
    patch: Vec<Duration>,
}

fn median<T: Ord + Copy>(v: &mut [T]) -> T {
    v.sort_unstable();
    v[v.len() / 2]
}

fn main() {
    let mut rounds = 10usize;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        if a == "--rounds" {
            rounds = args
                .next()
                .and_then(|v| v.parse().ok())
                .expect("--rounds N");
        }
        // cargo bench passes `--bench`; other flags are not ours.
    }
    let mut arena = Arena::new();
    let mut quiet_patch = Vec::new();
    for _ in 0..WARMUP {
        arena.step(&[]);
    }
    let mut next_group = 0usize;
    println!(
        "arena A: {} NPCs, {BOTS} players, {TICK_HZ} Hz; {GROUP} players resumed per round, {rounds} rounds per mode and outage",
        ArenaParams::default().npcs
    );
    println!(
        "| outage | first frame: delta | first frame: BASELINE | client apply: delta | client apply: BASELINE | host patch: delta round | host patch: BASELINE round |"
    );
    println!("|---|---|---|---|---|---|---|");
    for outage in OUTAGES {
        let mut delta = Tally::default();
        let mut base = Tally::default();
        for round in 0..2 * rounds {
            let from_mirror = round % 2 == 0;
            let group: Vec<usize> = (0..GROUP).map(|i| (next_group + i) % BOTS).collect();
            next_group = (next_group + GROUP) % BOTS;
            for &b in &group {
                arena.host.handle_drop(arena.bots[b].id).unwrap();
                arena.bots[b].away = true;
            }
            for _ in 0..outage {
                let (patch, _) = arena.step(&[]);
                quiet_patch.push(patch);
            }
            for &b in &group {
                let bot = &mut arena.bots[b];
                bot.away = false;
                if from_mirror {
                    let from = bot.mirror.resume_from().unwrap();
                    let got = arena.host.handle_rejoin_from(bot.id, from).unwrap();
                    assert_eq!(got, ResumeOutcome::Delta);
                } else {
                    arena.host.handle_rejoin(bot.id).unwrap();
                }
            }
            let (patch, firsts) = arena.step(&group);
            let tally = if from_mirror { &mut delta } else { &mut base };
            tally.patch.push(patch);
            assert_eq!(firsts.len(), GROUP);
            for (b, bytes) in firsts {
                let id = arena.bots[b].id;
                let mirror = &mut arena.bots[b].mirror;
                let t = Instant::now();
                let d = mirror.decode_apply(&bytes, &arena.schema).unwrap();
                tally.apply.push(t.elapsed());
                assert_eq!(d.baseline, !from_mirror);
                let (count, hash) = arena.host.known_set_check(id).unwrap();
                assert_eq!(
                    (
                        mirror.len() as u32,
                        zonekeep_protocol::known_set_hash(mirror.known().iter().map(|e| e.0))
                    ),
                    (count, hash),
                    "the client holds what the host says it sent"
                );
                tally.bytes.push(bytes.len());
            }
        }
        let mean = |v: &[usize]| v.iter().sum::<usize>() as f64 / v.len() as f64;
        let us = |d: Duration| d.as_secs_f64() * 1e6;
        let ms = |d: Duration| d.as_secs_f64() * 1e3;
        println!(
            "| {} ms | {:.0} B | {:.0} B | {:.0} µs | {:.0} µs | {:.2} ms | {:.2} ms |",
            outage * 1000 / TICK_HZ,
            mean(&delta.bytes),
            mean(&base.bytes),
            us(median(&mut delta.apply)),
            us(median(&mut base.apply)),
            ms(median(&mut delta.patch)),
            ms(median(&mut base.patch)),
        );
    }
    println!(
        "median patch of the ticks without a resume: {:.2} ms ({} ticks)",
        median(&mut quiet_patch).as_secs_f64() * 1e3,
        quiet_patch.len()
    );
}
