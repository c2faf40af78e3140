//! Zone modules end to end, on the tag example (`examples/module-tag`):
//! - the same game's tick run natively (its Rust source through the guest SDK's dispatch, in
//!   process) and as a module, both inside a `ZoneHost` applying the same command buffers;
//! - loading a module, and instantiating it per zone;
//! - memory per idle module zone, beside its linear memory;
//! - many module zones ticking on one thread.
//!
//! `cargo bench -p zonekeep-wasm --bench modules [-- --zones 1000 --players 100 --ticks 600]`
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "../tests/support/guest_build.rs"]
mod guest_build;

use std::sync::Arc;
use std::time::{Duration, Instant};

use zonekeep_core::rand_core::RngCore;
use zonekeep_core::{
    Claims, Clock, Ctx, InputRefusal, JoinRefusal, ManualClock, PlayerId, PlayerInfo, Principal,
    Role, TimerId, Zone, ZoneConfig, ZoneError, ZoneHost, ZoneInit, ZoneKinds,
};
use zonekeep_guest::testing::input;
use zonekeep_guest::{dispatch, Guest, Op};
use zonekeep_module_tag::Tag;
use zonekeep_wasm::{
    register, CommandApplier, ModuleEngine, ModuleKind, ModuleZone, Sandbox, ZoneModule,
};

/// The tag game's Rust code run natively: the same calls and command buffers as its module,
/// without WebAssembly.
struct NativeTag {
    guest: Guest<Tag>,
    out: Vec<u8>,
    applier: CommandApplier,
    /// The tick's inputs, delivered with its TICK as the module host does.
    inputs: Vec<(u32, Vec<u8>)>,
}

impl NativeTag {
    fn call(&mut self, ctx: &mut Ctx<'_>, op: Op, input: &[u8], join: bool) -> Option<JoinRefusal> {
        dispatch(&mut self.guest, op as u32, input, &mut self.out).unwrap();
        self.applier.apply(ctx, &self.out, join).unwrap()
    }

    fn make(init: &ZoneInit, ctx: &mut Ctx<'_>) -> Result<Self, ZoneError> {
        let mut z = Self {
            guest: Guest::new(),
            out: Vec::new(),
            applier: CommandApplier::default(),
            inputs: Vec::new(),
        };
        let seed = ctx.rng().next_u64();
        let create = input::create(ctx.tick(), seed, &init.zone_id, &init.params.to_string());
        z.call(ctx, Op::Create, &create, false);
        Ok(z)
    }
}

impl Zone for NativeTag {
    type Input = Vec<u8>;
    fn create(_: &ZoneInit, _: &mut Ctx<'_>) -> Result<Self, ZoneError> {
        Err(ZoneError::Failed("made by NativeTag::make".into()))
    }
    fn on_join(&mut self, ctx: &mut Ctx<'_>, p: &PlayerInfo) -> Result<(), JoinRefusal> {
        let join = input::join(
            ctx.tick(),
            p.id.0,
            p.principal.as_str(),
            zonekeep_guest::Role::Player,
            "{}",
            ctx.character(p.id).unwrap_or_default(),
        );
        self.call(ctx, Op::Join, &join, true).map_or(Ok(()), Err)
    }
    fn sanitize(&mut self, player: PlayerId, payload: &[u8]) -> Result<Vec<u8>, InputRefusal> {
        let sanitize = input::payload(0, player.0, payload);
        dispatch(
            &mut self.guest,
            Op::Sanitize as u32,
            &sanitize,
            &mut self.out,
        )
        .unwrap();
        if self.out.is_empty() {
            Ok(payload.to_vec())
        } else {
            Err(InputRefusal::new(1, "refused"))
        }
    }
    fn on_input(&mut self, _ctx: &mut Ctx<'_>, player: PlayerId, payload: Vec<u8>) {
        self.inputs.push((player.0, payload));
    }
    fn tick(&mut self, ctx: &mut Ctx<'_>) {
        let time_us = u64::try_from(ctx.time().as_micros()).unwrap();
        let dt_us = u32::try_from(ctx.dt().as_micros()).unwrap();
        let inputs: Vec<(u32, &[u8])> = self
            .inputs
            .iter()
            .map(|(p, b)| (*p, b.as_slice()))
            .collect();
        let t = input::tick_with(ctx.tick(), time_us, dt_us, &inputs);
        self.inputs.clear();
        self.call(ctx, Op::Tick, &t, false);
    }
    fn on_timer(&mut self, ctx: &mut Ctx<'_>, id: TimerId, tag: u64) {
        self.applier.timer_fired(id, tag);
        let t = input::timer(ctx.tick(), tag);
        self.call(ctx, Op::Timer, &t, false);
    }
}

fn arg(name: &str, default: u64) -> u64 {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn init(id: &str) -> ZoneInit {
    ZoneInit {
        zone_id: id.into(),
        kind: "tag".into(),
        params: zonekeep_core::serde_json::json!({}),
    }
}

/// Resident memory of this process, in bytes.
fn rss() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap_or_default();
    let pages: u64 = statm
        .split_whitespace()
        .nth(1)
        .and_then(|p| p.parse().ok())
        .unwrap_or(0);
    pages * 4096
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

fn us(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

/// Runs `players` players in one zone for `ticks` ticks, each moving every tick: the host's
/// advance times.
fn play(mut host: ZoneHost, clock: &ManualClock, players: u32, ticks: u32) -> Vec<Duration> {
    let ids: Vec<PlayerId> = (0..players)
        .map(|i| {
            host.handle_join(Principal::new(format!("p{i}")), Claims::new(), Role::Player)
                .unwrap()
        })
        .collect();
    let dt = host.config().dt();
    let mut times = Vec::with_capacity(ticks as usize);
    for t in 1..=ticks {
        for (i, p) in ids.iter().enumerate() {
            let dir = if (t as usize + i) % 60 < 30 { 1 } else { 0xff };
            host.handle_input(*p, t, 0, &[dir, (i % 3) as u8]);
        }
        clock.advance(dt);
        let start = Instant::now();
        host.advance(clock.now());
        times.push(start.elapsed());
    }
    assert_eq!(host.failure(), None);
    times
}

fn main() {
    let zones = arg("--zones", 1000) as usize;
    let players = arg("--players", 100) as u32;
    let ticks = arg("--ticks", 600) as u32;
    let wasm = std::fs::read(guest_build::tag_module()).unwrap();
    let engine = ModuleEngine::new(Sandbox::default()).unwrap();
    let config = ZoneConfig {
        max_players: players.max(1),
        ..ZoneConfig::default()
    };
    println!(
        "tag module: {} bytes; tick {} Hz",
        wasm.len(),
        config.tick_hz
    );

    // Loading: compile and check once per module version.
    let start = Instant::now();
    let module = ZoneModule::load(&engine, &wasm).unwrap();
    println!(
        "load (compile + checks): {:.1} ms",
        start.elapsed().as_secs_f64() * 1e3
    );
    let mut kinds = ZoneKinds::new();
    register(&mut kinds, &ModuleKind::new("tag", module));

    // The same game natively and as a module, `players` players moving every tick.
    for (label, native) in [("native", true), ("module", false)] {
        let clock = Arc::new(ManualClock::new());
        let host = if native {
            ZoneHost::create_with(
                init("bench"),
                config.clone(),
                clock.clone(),
                0,
                NativeTag::make,
            )
            .unwrap()
        } else {
            kinds
                .create(init("bench"), config.clone(), clock.clone())
                .unwrap()
        };
        let mut times = play(host, &clock, players, ticks);
        times.drain(..ticks as usize / 10); // warm-up
        times.sort();
        let mean = times.iter().sum::<Duration>() / times.len() as u32;
        println!(
            "{label:>6}: {players} players, host tick mean {:.1} µs, p50 {:.1}, p99 {:.1}",
            us(mean),
            us(percentile(&times, 0.5)),
            us(percentile(&times, 0.99))
        );
    }

    // A deploy's freeze: a zone of `players` players saved and restored into a new instance
    // (what the server's upgrade does between two ticks).
    {
        let clock = Arc::new(ManualClock::new());
        let mut host = kinds
            .create(init("freeze"), config.clone(), clock.clone())
            .unwrap();
        for i in 0..players {
            host.handle_join(Principal::new(format!("p{i}")), Claims::new(), Role::Player)
                .unwrap();
        }
        clock.advance(config.dt());
        host.advance(clock.now());
        let mut times = Vec::new();
        for _ in 0..50 {
            let start = Instant::now();
            let save = host.snapshot().unwrap();
            let next = kinds
                .restore(init("freeze"), config.clone(), clock.clone(), 1, &save)
                .unwrap();
            times.push(start.elapsed());
            assert_eq!(next.world().len(), players as usize);
        }
        times.sort();
        println!(
            "deploy freeze (save + new instance + restore), {players} players: p50 {:.0} µs, max {:.0} µs",
            us(percentile(&times, 0.5)),
            us(*times.last().unwrap())
        );
    }

    // Instantiation and memory: `zones` idle zones (created, one player each, nothing ticked).
    let clock = Arc::new(ManualClock::new());
    let before = rss();
    let mut created = Vec::with_capacity(zones);
    let mut times = Vec::with_capacity(zones);
    for i in 0..zones {
        let start = Instant::now();
        let host = kinds
            .create(init(&format!("z{i}")), config.clone(), clock.clone())
            .unwrap();
        times.push(start.elapsed());
        created.push(host);
    }
    let after = rss();
    let linear: usize = created
        .iter()
        .map(|h| h.zone::<ModuleZone>().unwrap().memory_bytes())
        .sum();
    times.sort();
    println!(
        "instantiate + CREATE, {zones} zones: p50 {:.0} µs, p99 {:.0} µs, max {:.0} µs",
        us(percentile(&times, 0.5)),
        us(percentile(&times, 0.99)),
        us(*times.last().unwrap())
    );
    let per_zone = (after.saturating_sub(before)) as f64 / zones as f64;
    let linear_per_zone = linear as f64 / zones as f64;
    println!(
        "resident memory per idle module zone: {:.0} kB (linear memory reserved {:.0} kB per zone, \
         of which only touched pages are resident)",
        per_zone / 1024.0,
        linear_per_zone / 1024.0
    );

    // Those zones ticking on this one thread, a player moving in each.
    for (i, host) in created.iter_mut().enumerate() {
        let p = host
            .handle_join(Principal::new(format!("p{i}")), Claims::new(), Role::Player)
            .unwrap();
        host.handle_input(p, 1, 0, &[1, 0]);
    }
    let dt = config.dt();
    let rounds = 60;
    let mut round_times = Vec::with_capacity(rounds);
    for _ in 0..rounds {
        clock.advance(dt);
        let start = Instant::now();
        for host in &mut created {
            host.advance(clock.now());
        }
        round_times.push(start.elapsed());
    }
    for host in &created {
        assert_eq!(host.tick(), rounds as u64, "every zone ran every tick");
        assert_eq!(host.world().len(), 1, "and holds its player");
    }
    round_times.drain(..6);
    round_times.sort();
    let p50 = percentile(&round_times, 0.5);
    println!(
        "{zones} zones ticking on one thread: one tick of every zone p50 {:.2} ms ({:.1} µs per \
         zone), p99 {:.2} ms; at {} Hz that is {:.0} % of one core",
        p50.as_secs_f64() * 1e3,
        us(p50) / zones as f64,
        percentile(&round_times, 0.99).as_secs_f64() * 1e3,
        config.tick_hz,
        p50.as_secs_f64() * f64::from(config.tick_hz) * 100.0
    );
}
