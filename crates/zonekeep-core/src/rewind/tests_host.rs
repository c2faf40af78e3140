//! Lag compensation through the host: which inputs are judged at their view tick, and the opt-out.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::time::Duration;

use crate::{
    Claims, Clock, Ctx, EntityId, InputRefusal, LagCompensation, ManualClock, PlayerId, Principal,
    Rewind, Role, Zone, ZoneConfig, ZoneError, ZoneHost, ZoneInit,
};
use zonekeep_protocol::schema::KindDef;

/// What the zone saw of one input.
#[derive(Debug, Clone, PartialEq)]
enum Seen {
    /// Through `on_input`.
    Plain { tick: u64 },
    /// Through `apply_input_at`: the judged tick and where the target was drawn.
    Judged {
        tick: u64,
        view: u64,
        target: Option<(f32, f32)>,
    },
}

/// A target walking +1 along x per tick; inputs are shots whose handling is logged.
struct Range<const OPT_IN: bool> {
    target: EntityId,
    x: f32,
    seen: Vec<Seen>,
}

impl<const OPT_IN: bool> Zone for Range<OPT_IN> {
    type Input = ();

    fn create(_init: &ZoneInit, ctx: &mut Ctx<'_>) -> Result<Self, ZoneError> {
        let world = ctx.world();
        let kind = world
            .declare_kind(KindDef {
                name: "target".into(),
                fields: vec![],
            })
            .map_err(|e| ZoneError::Restore(e.to_string()))?;
        let target = world
            .spawn(kind, 0.0, 0.0)
            .map_err(|e| ZoneError::Restore(e.to_string()))?;
        Ok(Self {
            target,
            x: 0.0,
            seen: Vec::new(),
        })
    }

    fn lag_compensation(&self) -> Option<LagCompensation> {
        OPT_IN.then(|| LagCompensation {
            history_ticks: 30,
            max_view_delay: Duration::from_millis(250),
            colliders: vec![],
        })
    }

    fn sanitize(&mut self, _p: PlayerId, _payload: &[u8]) -> Result<(), InputRefusal> {
        Ok(())
    }

    fn on_input(&mut self, ctx: &mut Ctx<'_>, _p: PlayerId, _input: ()) {
        self.seen.push(Seen::Plain { tick: ctx.tick() });
    }

    fn apply_input_at(&mut self, ctx: &mut Ctx<'_>, _p: PlayerId, _i: (), rewind: &Rewind<'_>) {
        assert_eq!(ctx.tick() - rewind.ticks_behind(), rewind.tick());
        self.seen.push(Seen::Judged {
            tick: ctx.tick(),
            view: rewind.tick(),
            target: rewind.position_at(self.target),
        });
    }

    fn tick(&mut self, ctx: &mut Ctx<'_>) {
        self.x += 1.0;
        let _ = ctx.world().set_pos(self.target, self.x, 0.0);
    }
}

struct Driver {
    host: ZoneHost,
    clock: ManualClock,
    player: PlayerId,
    seq: u32,
}

impl Driver {
    fn new<const OPT_IN: bool>() -> Self {
        let clock = ManualClock::new();
        let init = ZoneInit {
            zone_id: "range-1".into(),
            kind: "range".into(),
            params: serde_json::Value::Null,
        };
        let config = ZoneConfig {
            patch_every: 2,
            ..ZoneConfig::default()
        };
        let mut host =
            ZoneHost::new::<Range<OPT_IN>>(init, config, Arc::new(clock.clone())).unwrap();
        let player = host
            .handle_join(Principal::new("ann"), Claims::new(), Role::Player)
            .unwrap();
        Self {
            host,
            clock,
            player,
            seq: 0,
        }
    }

    /// Runs one tick and hands out its frames.
    fn tick(&mut self) {
        self.clock.advance(self.host.config().dt());
        let report = self.host.advance(self.clock.now());
        assert_eq!(report.ticks_run, 1);
        let _ = self.host.drain_frames().unwrap().count();
    }

    fn shoot(&mut self, view_tick: u32) {
        self.seq += 1;
        assert!(self
            .host
            .handle_input(self.player, self.seq, view_tick, &[])
            .is_accepted());
    }

    fn seen<const OPT_IN: bool>(&self) -> &[Seen] {
        &self.host.zone::<Range<OPT_IN>>().unwrap().seen
    }
}

#[test]
fn an_opted_in_zone_judges_inputs_at_what_the_player_was_sent() {
    let mut d = Driver::new::<true>();
    for _ in 0..10 {
        d.tick();
    }
    // Patches at even ticks: the target was sent at x = 6 (tick 6) and x = 8 (tick 8).
    d.shoot(7);
    d.tick();
    assert_eq!(
        d.seen::<true>(),
        [Seen::Judged {
            tick: 11,
            view: 7,
            target: Some((7.0, 0.0))
        }]
    );
    assert!(d.host.rewind_history_bytes().unwrap() > 0);
}

#[test]
fn inputs_without_a_view_tick_or_a_frame_take_the_ordinary_path() {
    let mut d = Driver::new::<true>();
    d.shoot(1); // before any frame was sent
    d.tick();
    d.tick();
    d.shoot(0); // no view tick
    d.tick();
    assert_eq!(
        d.seen::<true>(),
        [Seen::Plain { tick: 1 }, Seen::Plain { tick: 3 }]
    );
}

#[test]
fn a_zone_that_does_not_opt_in_keeps_nothing() {
    let mut d = Driver::new::<false>();
    for _ in 0..10 {
        d.tick();
    }
    d.shoot(7);
    d.tick();
    assert_eq!(d.seen::<false>(), [Seen::Plain { tick: 11 }]);
    assert_eq!(d.host.rewind_history_bytes(), None);
}

#[test]
fn the_reported_round_trip_bounds_the_reach() {
    let mut d = Driver::new::<true>();
    for _ in 0..29 {
        d.tick();
    }
    // Applied in tick 30. Unknown round trip: 250 ms = 7 ticks back at most.
    d.shoot(2);
    d.tick();
    d.host.set_rtt(d.player, Duration::from_millis(200));
    // 200 + 250 ms = 13 ticks back from tick 31.
    d.shoot(2);
    d.tick();
    d.host.set_rtt(PlayerId(99), Duration::from_secs(1)); // unknown: ignored
    let views: Vec<u64> = d
        .seen::<true>()
        .iter()
        .map(|s| match s {
            Seen::Judged { view, .. } => *view,
            Seen::Plain { .. } => 0,
        })
        .collect();
    assert_eq!(views, [23, 18]);
}
