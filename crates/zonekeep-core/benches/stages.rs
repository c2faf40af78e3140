//! The cost of stage timing: one tick plus its patch for a zone of 100 players (each sending one
//! input per tick, each controlling a walker) and 100 more walkers, every player seeing everything,
//! with the stage clock off and on (the cycle-counter clock the server hands it). The
//! difference is what timing every stage costs a tick; `stages/record` is one recorded duration.
//!
//! Run: `cargo bench -p zonekeep-core --bench stages`

// A benchmark binary: a failed setup step should abort loudly.
#![allow(clippy::expect_used, clippy::unwrap_used)]
// `criterion_group!` defines an undocumented public function.
#![allow(missing_docs)]

use std::sync::Arc;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, Criterion};
use zonekeep_core::rand_core::RngCore;
use zonekeep_core::{
    Claims, Clock, Ctx, CycleClock, EntityId, InputRefusal, ManualClock, PlayerId, PlayerInfo,
    Principal, Role, Stage, StageTimes, Zone, ZoneConfig, ZoneError, ZoneHost, ZoneInit,
};
use zonekeep_protocol::schema::KindDef;

const PLAYERS: u32 = 100;
const WALKERS: u32 = 100;
const MAP: f32 = 100.0;

fn unit(ctx: &mut Ctx<'_>) -> f32 {
    (ctx.rng().next_u32() >> 8) as f32 / 16_777_216.0
}

/// Walkers moving at random; each player controls one and its input nudges it.
struct Walk {
    kind: zonekeep_core::KindId,
    walkers: Vec<(EntityId, f32, f32)>,
}

impl Walk {
    fn add(&mut self, ctx: &mut Ctx<'_>) -> EntityId {
        let (x, y) = (unit(ctx) * MAP, unit(ctx) * MAP);
        let id = ctx.world().spawn(self.kind, x, y).unwrap();
        self.walkers.push((id, x, y));
        id
    }
}

impl Zone for Walk {
    type Input = u8;

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
        for _ in 0..WALKERS {
            zone.add(ctx);
        }
        Ok(zone)
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

    fn sanitize(&mut self, _p: PlayerId, payload: &[u8]) -> Result<u8, InputRefusal> {
        payload
            .first()
            .copied()
            .ok_or_else(|| InputRefusal::new(1, "empty"))
    }

    fn on_input(&mut self, _ctx: &mut Ctx<'_>, _p: PlayerId, _dir: u8) {}

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
    players: Vec<PlayerId>,
    seq: u32,
}

impl Run {
    fn new(timed: bool) -> Self {
        let clock = ManualClock::new();
        let mut config = ZoneConfig {
            max_players: PLAYERS,
            patch_every: 1,
            ..ZoneConfig::default()
        };
        config.replication.pos_step = 1.0 / 64.0;
        let init = ZoneInit {
            zone_id: "walk-1".into(),
            kind: "walk".into(),
            params: serde_json::Value::Null,
        };
        let mut host = ZoneHost::new::<Walk>(init, config, Arc::new(clock.clone())).unwrap();
        if timed {
            host.set_stage_clock(Some(Arc::new(CycleClock::new()) as Arc<dyn Clock>));
        }
        let players = (0..PLAYERS)
            .map(|i| {
                host.handle_join(Principal::new(format!("p{i}")), Claims::new(), Role::Player)
                    .unwrap()
            })
            .collect();
        let mut run = Self {
            host,
            clock,
            players,
            seq: 0,
        };
        for _ in 0..40 {
            run.tick();
        }
        run
    }

    fn tick(&mut self) {
        self.seq += 1;
        for p in &self.players {
            let _ = self.host.handle_input(*p, self.seq, 0, &[1]);
        }
        self.clock.advance(self.host.config().dt());
        let report = self.host.advance(self.clock.now());
        assert_eq!(report.ticks_run, 1);
        let frames = self.host.drain_frames().unwrap().count();
        assert_eq!(frames, PLAYERS as usize);
        let _ = self.host.take_stage_durations();
    }
}

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("stages/tick");
    g.sample_size(20).measurement_time(Duration::from_secs(8));
    let mut off = Run::new(false);
    g.bench_function("off", |b| b.iter(|| off.tick()));
    let mut on = Run::new(true);
    g.bench_function("on", |b| b.iter(|| on.tick()));
    g.finish();
    assert!(on.host.stage_times().summary(Stage::Encode).count > 0);

    let mut times = StageTimes::new();
    let mut at = Duration::ZERO;
    c.bench_function("stages/record", |b| {
        b.iter(|| {
            at += Duration::from_micros(50);
            times.record(Stage::Encode, Duration::from_micros(37), at);
        })
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
