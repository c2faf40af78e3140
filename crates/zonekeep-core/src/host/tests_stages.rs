//! Host tests: stage timing. The stage clock here is a manual clock that only the zone moves,
//! so each stage's duration is exactly what the zone spent in it.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::time::Duration;

use crate::stages::Stage;
use crate::world::KindId;
use crate::{
    Claims, Clock, Ctx, InputRefusal, ManualClock, PlayerId, Principal, Role, Zone, ZoneConfig,
    ZoneError, ZoneHost, ZoneInit,
};
use zonekeep_protocol::schema::{FieldDef, FieldType, KindDef};

/// Spends 30 ms of stage-clock time in `tick` and 2 ms in `sanitize` (which the host, not the
/// core, times), nothing anywhere else.
struct Slow {
    stage_clock: ManualClock,
    kind: KindId,
}

thread_local! {
    static STAGE_CLOCK: ManualClock = ManualClock::new();
}

impl Zone for Slow {
    type Input = u8;

    fn create(_init: &ZoneInit, ctx: &mut Ctx<'_>) -> Result<Self, ZoneError> {
        let kind = ctx
            .world()
            .declare_kind(KindDef {
                name: "dot".into(),
                fields: vec![FieldDef {
                    name: "n".into(),
                    ty: FieldType::UInt,
                }],
            })
            .map_err(|e| ZoneError::Failed(e.to_string()))?;
        Ok(Self {
            stage_clock: STAGE_CLOCK.with(Clone::clone),
            kind,
        })
    }

    fn sanitize(&mut self, _p: PlayerId, payload: &[u8]) -> Result<u8, InputRefusal> {
        self.stage_clock.advance(Duration::from_millis(2));
        payload
            .first()
            .copied()
            .ok_or_else(|| InputRefusal::new(1, "empty"))
    }

    fn on_join(
        &mut self,
        ctx: &mut Ctx<'_>,
        _p: &crate::PlayerInfo,
    ) -> Result<(), crate::JoinRefusal> {
        let _ = ctx.world().spawn(self.kind, 1.0, 1.0);
        Ok(())
    }

    fn tick(&mut self, _ctx: &mut Ctx<'_>) {
        self.stage_clock.advance(Duration::from_millis(30));
    }
}

fn host(stage_clock: Option<ManualClock>) -> (ZoneHost, ManualClock) {
    let clock = ManualClock::new();
    let init = ZoneInit {
        zone_id: "slow-1".into(),
        kind: "slow".into(),
        params: serde_json::Value::Null,
    };
    let mut host =
        ZoneHost::new::<Slow>(init, ZoneConfig::default(), Arc::new(clock.clone())).unwrap();
    host.set_stage_clock(stage_clock.map(|c| Arc::new(c) as Arc<dyn Clock>));
    (host, clock)
}

fn run(host: &mut ZoneHost, clock: &ManualClock, ticks: u32) {
    for _ in 0..ticks {
        clock.advance(host.config().dt());
        host.advance(clock.now());
        let _ = host.drain_frames().unwrap().count();
    }
}

#[test]
fn a_slow_tick_shows_in_the_tick_stage_and_no_other() {
    let stage_clock = STAGE_CLOCK.with(Clone::clone);
    let (mut h, clock) = host(Some(stage_clock));
    let p = h
        .handle_join(Principal::new("a"), Claims::new(), Role::Player)
        .unwrap();
    for seq in 1..=5 {
        assert!(h.handle_input(p, seq, 0, &[seq as u8]).is_accepted());
        run(&mut h, &clock, 1);
    }
    run(&mut h, &clock, 15);
    let t = h.stage_times();
    let tick = t.summary(Stage::Tick);
    assert_eq!(tick.count, 20);
    assert_eq!(tick.max, Duration::from_millis(30));
    assert!(tick.p50 >= Duration::from_millis(30) && tick.p50 <= Duration::from_millis(38));
    for stage in [Stage::Inbox, Stage::Inputs, Stage::Timers] {
        let s = t.summary(stage);
        assert_eq!(s.count, 20, "{stage:?} was timed every tick");
        assert_eq!(s.max, Duration::ZERO, "{stage:?} took no time");
    }
    // One frame build in sixteen is split into interest and encoding: the first and the 17th.
    for stage in [Stage::Interest, Stage::Encode] {
        let s = t.summary(stage);
        assert_eq!(s.count, 2, "{stage:?}");
        assert_eq!(s.max, Duration::ZERO, "{stage:?} took no time");
    }
    // No subscriber has a budget: that stage never ran. The host's own stages (inputs as they
    // arrive, the hand-off, saves, facts) are its to record.
    for stage in [
        Stage::Sanitize,
        Stage::Budget,
        Stage::Handoff,
        Stage::Save,
        Stage::Facts,
    ] {
        assert_eq!(t.summary(stage).count, 0, "{stage:?}");
    }
    let summed = h.take_stage_durations();
    assert_eq!(summed.get(Stage::Tick), Some(Duration::from_millis(600)));
    assert!(h.take_stage_durations().is_empty());
    h.record_stage(Stage::Handoff, Duration::from_micros(40));
    assert_eq!(h.stage_times().summary(Stage::Handoff).count, 1);
}

#[test]
fn without_a_stage_clock_nothing_is_timed() {
    let (mut h, clock) = host(None);
    run(&mut h, &clock, 5);
    h.record_stage(Stage::Save, Duration::from_millis(1));
    assert!(h.stage_times().summaries().iter().all(|s| s.count == 0));
    assert!(h.take_stage_durations().is_empty());
}
