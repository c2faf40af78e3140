//! Where a module's replicated world lives, measured: what the command buffer costs the host per
//! changed entity, against the two other ways a host could learn a tick's changes.
//!
//! A zone of `--entities` entities moves `--moved` of them every tick (a different slice each
//! tick), inside a `ZoneHost`, three ways:
//! - **native**: the zone calls `World::set_pos` itself (the floor: any design pays it, or the
//!   equivalent write into whatever replication reads);
//! - **commands** (the design chosen, docs/MODULES.md): the "guest" writes one SET_POS command per
//!   change and the host's `CommandApplier` decodes and applies the buffer;
//! - **table** (the world in guest memory): the "guest" writes each position into a flat table in
//!   its memory, and the host, which cannot trust or be told what changed without a list (which
//!   would be the command buffer again), compares the whole table with its copy from the last
//!   tick and applies what differs.
//!
//! The guest's part runs natively here in all three (the module's WebAssembly would slow the
//! guest's writes alike in the last two); the host's part is the real code. Ticks are timed by
//! `advance`, with no players, so replication costs nothing and only the change path is seen.
//!
//! Run: `cargo bench -p zonekeep-wasm --bench world_location [-- --entities 10000 --moved 100]`

// A benchmark binary: a failed setup step should abort loudly.
#![allow(clippy::expect_used, clippy::unwrap_used, missing_docs)]

use std::hint::black_box;
use std::sync::Arc;
use std::time::{Duration, Instant};

use zonekeep_abi::tag;
use zonekeep_core::{
    Clock, Ctx, EntityId, InputRefusal, ManualClock, PlayerId, Zone, ZoneConfig, ZoneError,
    ZoneHost, ZoneInit,
};
use zonekeep_protocol::schema::KindDef;
use zonekeep_wasm::CommandApplier;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Way {
    Native,
    Commands,
    Table,
}

struct Movers {
    way: Way,
    n: usize,
    moved: usize,
    ids: Vec<EntityId>,
    applier: CommandApplier,
    /// The guest's command buffer (commands) or position table (table).
    guest: Vec<u8>,
    /// The host's copy of the table from the last tick (table).
    seen: Vec<u8>,
}

/// Where entity `i` is at tick `k` (distinct each tick, on the wire grid).
fn at(i: usize, k: u64) -> (f32, f32) {
    (((i as u64 + k) % 1000) as f32, (i % 1000) as f32)
}

impl Movers {
    fn make(way: Way, n: usize, moved: usize, ctx: &mut Ctx<'_>) -> Movers {
        let mut z = Movers {
            way,
            n,
            moved,
            ids: Vec::new(),
            applier: CommandApplier::default(),
            guest: Vec::new(),
            seen: Vec::new(),
        };
        if way == Way::Commands {
            let mut buf = vec![tag::DECLARE_KIND];
            buf.extend_from_slice(&4u32.to_le_bytes());
            buf.extend_from_slice(b"dots");
            buf.push(0);
            for i in 0..n {
                let (x, y) = at(i, 0);
                buf.push(tag::SPAWN);
                buf.extend_from_slice(&(i as u32 + 1).to_le_bytes());
                buf.extend_from_slice(&0u16.to_le_bytes());
                buf.extend_from_slice(&x.to_le_bytes());
                buf.extend_from_slice(&y.to_le_bytes());
            }
            z.applier.apply(ctx, &buf, false).unwrap();
        } else {
            let world = ctx.world();
            let kind = world
                .declare_kind(KindDef {
                    name: "dots".into(),
                    fields: Vec::new(),
                })
                .unwrap();
            for i in 0..n {
                let (x, y) = at(i, 0);
                z.ids.push(world.spawn(kind, x, y).unwrap());
            }
            z.guest = vec![0; n * 8];
            for i in 0..n {
                let (x, y) = at(i, 0);
                z.guest[i * 8..i * 8 + 4].copy_from_slice(&x.to_le_bytes());
                z.guest[i * 8 + 4..i * 8 + 8].copy_from_slice(&y.to_le_bytes());
            }
            z.seen = z.guest.clone();
        }
        z
    }
}

impl Zone for Movers {
    type Input = ();
    fn create(_: &ZoneInit, _: &mut Ctx<'_>) -> Result<Self, ZoneError> {
        Err(ZoneError::Failed("made by Movers::make".into()))
    }
    fn sanitize(&mut self, _: PlayerId, _: &[u8]) -> Result<(), InputRefusal> {
        Ok(())
    }
    fn tick(&mut self, ctx: &mut Ctx<'_>) {
        let k = ctx.tick();
        let n = self.n;
        let first = (k as usize * self.moved) % n;
        let which = (0..self.moved).map(|j| (first + j) % n);
        match self.way {
            Way::Native => {
                for i in which {
                    let (x, y) = at(i, k);
                    ctx.world().set_pos(self.ids[i], x, y).unwrap();
                }
            }
            Way::Commands => {
                self.guest.clear();
                for i in which {
                    let (x, y) = at(i, k);
                    self.guest.push(tag::SET_POS);
                    self.guest.extend_from_slice(&(i as u32 + 1).to_le_bytes());
                    self.guest.extend_from_slice(&x.to_le_bytes());
                    self.guest.extend_from_slice(&y.to_le_bytes());
                }
                self.applier.apply(ctx, &self.guest, false).unwrap();
            }
            Way::Table => {
                for i in which {
                    let (x, y) = at(i, k);
                    self.guest[i * 8..i * 8 + 4].copy_from_slice(&x.to_le_bytes());
                    self.guest[i * 8 + 4..i * 8 + 8].copy_from_slice(&y.to_le_bytes());
                }
                // The host's side: find what changed, apply it, remember it.
                for (i, (now, was)) in self
                    .guest
                    .chunks_exact(8)
                    .zip(self.seen.chunks_exact_mut(8))
                    .enumerate()
                {
                    if now != was {
                        let x = f32::from_le_bytes([now[0], now[1], now[2], now[3]]);
                        let y = f32::from_le_bytes([now[4], now[5], now[6], now[7]]);
                        ctx.world().set_pos(self.ids[i], x, y).unwrap();
                        was.copy_from_slice(now);
                    }
                }
            }
        }
    }
}

fn arg(name: &str, default: usize) -> usize {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .map(|v| v.parse().expect("a number"))
        .unwrap_or(default)
}

fn main() {
    let n = arg("--entities", 10_000);
    let ticks = arg("--ticks", 600) as u64;
    let config = ZoneConfig {
        max_catch_up: 1,
        ..ZoneConfig::default()
    };
    println!("{n} entities, {ticks} ticks; mean µs per tick, and per moved entity beyond native");
    println!("| moved per tick | native | commands | table | commands − native, per entity | table − native, per entity |");
    println!("| --- | --- | --- | --- | --- | --- |");
    let moved_list: Vec<usize> = match arg("--moved", 0) {
        0 => vec![n, n / 10, n / 100],
        m => vec![m],
    };
    for moved in moved_list {
        let clock = ManualClock::new();
        let shared: Arc<dyn Clock> = Arc::new(clock.clone());
        let mut hosts: Vec<(Way, ZoneHost, Duration)> = [Way::Native, Way::Commands, Way::Table]
            .into_iter()
            .map(|way| {
                let init = ZoneInit {
                    zone_id: format!("{way:?}"),
                    kind: "movers".into(),
                    params: serde_json::Value::Null,
                };
                let host =
                    ZoneHost::create_with(init, config.clone(), shared.clone(), 1, |_, ctx| {
                        Ok(Movers::make(way, n, moved, ctx))
                    })
                    .unwrap();
                (way, host, Duration::ZERO)
            })
            .collect();
        for k in 0..ticks + 60 {
            clock.advance(config.dt());
            // The order rotates every tick; the first 60 ticks warm up.
            for turn in 0..3 {
                let (_, host, total) = &mut hosts[(k as usize + turn) % 3];
                let t = Instant::now();
                black_box(host.advance(clock.now()));
                if k >= 60 {
                    *total += t.elapsed();
                }
            }
        }
        let us = |d: Duration| d.as_secs_f64() * 1e6 / ticks as f64;
        let (native, commands, table) = (us(hosts[0].2), us(hosts[1].2), us(hosts[2].2));
        let per = |t: f64| (t - native) * 1e3 / moved as f64;
        println!(
            "| {moved} | {native:.1} | {commands:.1} | {table:.1} | {:.1} ns | {:.1} ns |",
            per(commands),
            per(table)
        );
    }
}
