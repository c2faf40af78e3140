//! Lag compensation: the history's memory, the per-tick cost of keeping it, and the cost of one
//! shot.
//!
//! A zone of 1,000 entities (one controlled by each of 300 players, 700 more) on a 400 × 400
//! map, every entity taking a random step each tick, a patch every tick, every player seeing
//! every entity, 10 ticks of history. Two cases: without a byte budget (the players share one
//! sent state) and with a 1,500-byte budget (every player's sent state lags differently, so each
//! keeps its own list of deferred positions).
//!
//! - `rewind/memory`: printed, the history's heap bytes once it is full.
//! - `rewind/tick/{shared,budgeted}/{off,on}`: one tick plus its patch for every player, without
//!   and with lag compensation: the difference is the cost of keeping the history.
//! - `rewind/shot`: building the Rewind for a view tick 3 ticks back (budgeted case), the entities
//!   drawn within 30 units of a point, and one ray from there against them.
//!
//! Run: `cargo bench -p zonekeep-core --bench rewind`

// A benchmark binary: a failed setup step should abort loudly.
#![allow(clippy::expect_used, clippy::unwrap_used)]
// `criterion_group!` defines an undocumented public function.
#![allow(missing_docs)]

use std::sync::Arc;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, Criterion};
use zonekeep_core::rand_core::RngCore;
use zonekeep_core::{
    Claims, Clock, Ctx, EntityId, InputRefusal, LagCompensation, ManualClock, PlayerId, PlayerInfo,
    Principal, Role, Shape, Zone, ZoneConfig, ZoneError, ZoneHost, ZoneInit,
};
use zonekeep_protocol::schema::KindDef;

const PLAYERS: u32 = 300;
const ENTITIES: u32 = 1_000;
const HISTORY: u32 = 10;
const MAP: f32 = 400.0;

/// A uniform draw in [0, 1) from the zone's seeded RNG.
fn unit(ctx: &mut Ctx<'_>) -> f32 {
    (ctx.rng().next_u32() >> 8) as f32 / 16_777_216.0
}

/// Entities walking at random; players control one each. `OPT_IN` turns lag compensation on.
struct Crowd<const OPT_IN: bool> {
    kind: zonekeep_core::KindId,
    walkers: Vec<(EntityId, f32, f32)>,
}

impl<const OPT_IN: bool> Crowd<OPT_IN> {
    fn add(&mut self, ctx: &mut Ctx<'_>) -> EntityId {
        let (x, y) = (unit(ctx) * MAP, unit(ctx) * MAP);
        let id = ctx.world().spawn(self.kind, x, y).unwrap();
        self.walkers.push((id, x, y));
        id
    }
}

impl<const OPT_IN: bool> Zone for Crowd<OPT_IN> {
    type Input = ();

    fn create(_init: &ZoneInit, ctx: &mut Ctx<'_>) -> Result<Self, ZoneError> {
        let kind = ctx
            .world()
            .declare_kind(KindDef {
                name: "walker".into(),
                fields: vec![],
            })
            .unwrap();
        let mut zone = Self {
            kind,
            walkers: Vec::new(),
        };
        for _ in 0..ENTITIES - PLAYERS {
            zone.add(ctx);
        }
        Ok(zone)
    }

    fn lag_compensation(&self) -> Option<LagCompensation> {
        OPT_IN.then(|| LagCompensation {
            history_ticks: HISTORY,
            ..LagCompensation::default()
        })
    }

    fn uses_can_see(&self) -> bool {
        false
    }

    fn on_join(
        &mut self,
        ctx: &mut Ctx<'_>,
        p: &PlayerInfo,
    ) -> Result<(), zonekeep_core::JoinRefusal> {
        let id = self.add(ctx);
        ctx.set_control(p.id, Some(id));
        Ok(())
    }

    fn sanitize(&mut self, _p: PlayerId, _payload: &[u8]) -> Result<(), InputRefusal> {
        Ok(())
    }

    fn tick(&mut self, ctx: &mut Ctx<'_>) {
        for (id, x, y) in &mut self.walkers {
            *x = (*x + unit(ctx) - 0.5).clamp(0.0, MAP);
            *y = (*y + unit(ctx) - 0.5).clamp(0.0, MAP);
            ctx.world().set_pos(*id, *x, *y).unwrap();
        }
    }
}

struct Run {
    host: ZoneHost,
    clock: ManualClock,
}

impl Run {
    fn new<const OPT_IN: bool>(budget: Option<usize>) -> Self {
        let clock = ManualClock::new();
        let mut config = ZoneConfig {
            max_players: PLAYERS,
            patch_every: 1,
            ..ZoneConfig::default()
        };
        config.replication.pos_step = 1.0 / 64.0;
        config.replication.budget = budget;
        let init = ZoneInit {
            zone_id: "crowd-1".into(),
            kind: "crowd".into(),
            params: serde_json::Value::Null,
        };
        let mut host =
            ZoneHost::new::<Crowd<OPT_IN>>(init, config, Arc::new(clock.clone())).unwrap();
        for i in 0..PLAYERS {
            host.handle_join(Principal::new(format!("p{i}")), Claims::new(), Role::Player)
                .unwrap();
        }
        let mut run = Self { host, clock };
        for _ in 0..40 {
            run.tick();
        }
        run
    }

    fn tick(&mut self) {
        self.clock.advance(self.host.config().dt());
        let report = self.host.advance(self.clock.now());
        assert_eq!(report.ticks_run, 1);
        let frames = self.host.drain_frames().unwrap().count();
        assert_eq!(frames, PLAYERS as usize);
    }
}

fn report_memory() {
    for (name, budget) in [("shared", None), ("budgeted", Some(1_500))] {
        let run = Run::new::<true>(budget);
        let bytes = run.host.rewind_history_bytes().unwrap();
        println!(
            "rewind/memory/{name}: {bytes} bytes for {PLAYERS} players x {ENTITIES} entities x \
             {HISTORY} ticks ({:.1} bytes per player per tick)",
            bytes as f64 / f64::from(PLAYERS * (HISTORY + 2)),
        );
    }
}

fn bench(c: &mut Criterion) {
    report_memory();
    let mut g = c.benchmark_group("rewind/tick");
    g.sample_size(10).measurement_time(Duration::from_secs(8));
    for (name, budget) in [("shared", None), ("budgeted", Some(1_500))] {
        let mut off = Run::new::<false>(budget);
        g.bench_function(format!("{name}/off"), |b| b.iter(|| off.tick()));
        let mut on = Run::new::<true>(budget);
        g.bench_function(format!("{name}/on"), |b| b.iter(|| on.tick()));
    }
    g.finish();

    let run = Run::new::<true>(Some(1_500));
    let shooter = PlayerId(1);
    let view = u32::try_from(run.host.tick() - 3).unwrap();
    let mut g = c.benchmark_group("rewind");
    let me = run
        .host
        .rewind_at(shooter, view)
        .unwrap()
        .drawn()
        .nth(500)
        .unwrap()
        .1;
    g.bench_function("shot", |b| {
        b.iter(|| {
            let rewind = run.host.rewind_at(shooter, view).unwrap();
            let near = rewind.entities_near(me, 30.0);
            rewind.raycast_among(me, (1.0, 0.3), 30.0, near, |_| {
                Some(Shape::Circle { radius: 0.5 })
            })
        })
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
