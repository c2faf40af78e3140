//! A zone that records every hook call, for the host's unit tests.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::time::Duration;

use crate::{
    Claims, Ctx, EventTarget, InputRefusal, JoinRefusal, LeaveReason, ManualClock, PlayerId,
    PlayerInfo, Principal, Role, Tier, TimerId, Zone, ZoneConfig, ZoneError, ZoneHost, ZoneInit,
};

/// Input payload: one little-endian i32, clamped to -100..=100.
/// The value 99 makes the zone kick the sender; 98 emits an event.
#[derive(Default)]
pub(super) struct Probe {
    pub(super) log: Vec<String>,
    /// (tick, player, value, seq)
    pub(super) inputs: Vec<(u64, PlayerId, i32, u32)>,
    /// The view tick of each input applied, in order.
    pub(super) view_ticks: Vec<u32>,
    pub(super) ticks: u64,
    pub(super) timer_fires: Vec<(u64, u64)>,
    /// Moves on by 1 ms per tick, to show tick durations are measured with the clock.
    pub(super) clock: Option<ManualClock>,
    pub(super) events_per_tick: u32,
}

impl Zone for Probe {
    type Input = i32;

    fn create(init: &ZoneInit, ctx: &mut Ctx<'_>) -> Result<Self, ZoneError> {
        if init.params.get("fail").is_some() {
            return Err(ZoneError::InvalidParams("fail requested".into()));
        }
        let mut zone = Probe::default();
        if let Some(n) = init.params.get("every").and_then(|v| v.as_u64()) {
            ctx.timers().every(n, 7).unwrap();
        }
        if let Some(n) = init.params.get("events").and_then(|v| v.as_u64()) {
            zone.events_per_tick = u32::try_from(n).unwrap();
        }
        Ok(zone)
    }

    fn on_join(&mut self, ctx: &mut Ctx<'_>, player: &PlayerInfo) -> Result<(), JoinRefusal> {
        assert!(ctx.player(player.id).is_some());
        if player.principal.as_str() == "banned" {
            return Err(JoinRefusal::new(7, "banned"));
        }
        self.log.push(format!("join {}", player.id));
        Ok(())
    }

    fn on_observe(&mut self, _ctx: &mut Ctx<'_>, o: &PlayerInfo) -> Result<(), JoinRefusal> {
        self.log.push(format!("observe {}", o.id));
        Ok(())
    }

    fn on_leave(&mut self, ctx: &mut Ctx<'_>, player: PlayerId, why: LeaveReason) {
        assert!(ctx.player(player).is_none());
        self.log.push(format!("leave {player} {why:?}"));
    }

    fn on_drop(&mut self, _ctx: &mut Ctx<'_>, player: PlayerId) {
        self.log.push(format!("drop {player}"));
    }

    fn on_rejoin(&mut self, _ctx: &mut Ctx<'_>, player: PlayerId) {
        self.log.push(format!("rejoin {player}"));
    }

    fn sanitize(&mut self, _player: PlayerId, payload: &[u8]) -> Result<i32, InputRefusal> {
        let bytes: [u8; 4] = payload
            .try_into()
            .map_err(|_| InputRefusal::new(1, "need 4 bytes"))?;
        Ok(i32::from_le_bytes(bytes).clamp(-100, 100))
    }

    fn on_input(&mut self, ctx: &mut Ctx<'_>, player: PlayerId, input: i32) {
        let meta = ctx.input_meta().unwrap();
        let seq = meta.seq;
        self.view_ticks.push(meta.view_tick);
        self.inputs.push((ctx.tick(), player, input, seq));
        if input == 99 {
            ctx.kick(player, "asked for it".into());
        }
        if input == 98 {
            ctx.emit_event(EventTarget::Player(player), 3, vec![1]);
        }
    }

    fn tick(&mut self, ctx: &mut Ctx<'_>) {
        self.ticks += 1;
        assert_eq!(self.ticks, ctx.tick());
        assert_eq!(ctx.time(), ctx.dt() * u32::try_from(ctx.tick()).unwrap());
        for _ in 0..self.events_per_tick {
            ctx.emit_event(EventTarget::All, 1, vec![]);
        }
        if let Some(c) = &self.clock {
            c.advance(Duration::from_millis(1));
        }
    }

    fn on_timer(&mut self, ctx: &mut Ctx<'_>, _id: TimerId, tag: u64) {
        self.timer_fires.push((ctx.tick(), tag));
    }

    fn on_tier(&mut self, ctx: &mut Ctx<'_>, from: Tier, to: Tier) {
        assert_eq!(ctx.tier(), to);
        self.log.push(format!("tier {from:?}->{to:?}"));
    }

    fn dispose(&mut self, _ctx: &mut Ctx<'_>) {
        self.log.push("dispose".into());
    }

    fn state_hash(&self) -> Option<u64> {
        Some(self.ticks)
    }
}

pub(super) fn init(params: serde_json::Value) -> ZoneInit {
    ZoneInit {
        zone_id: "probe-1".into(),
        kind: "probe".into(),
        params,
    }
}

pub(super) fn host(config: ZoneConfig) -> (ZoneHost, ManualClock) {
    host_with(config, serde_json::Value::Null)
}

pub(super) fn host_with(config: ZoneConfig, params: serde_json::Value) -> (ZoneHost, ManualClock) {
    let clock = ManualClock::new();
    let host = ZoneHost::new::<Probe>(init(params), config, Arc::new(clock.clone())).unwrap();
    (host, clock)
}

pub(super) fn join(host: &mut ZoneHost, name: &str) -> PlayerId {
    host.handle_join(Principal::new(name), Claims::new(), Role::Player)
        .unwrap()
}

pub(super) fn observe(host: &mut ZoneHost, name: &str) -> PlayerId {
    host.handle_join(Principal::new(name), Claims::new(), Role::Observer)
        .unwrap()
}

pub(super) fn val(v: i32) -> [u8; 4] {
    v.to_le_bytes()
}

/// Move the clock forward by `ticks` steps of the host's dt and advance the host.
pub(super) fn step(host: &mut ZoneHost, clock: &ManualClock, ticks: u32) -> crate::AdvanceReport {
    clock.advance(host.config().dt() * ticks);
    host.advance(crate::Clock::now(clock))
}
