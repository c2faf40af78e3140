//! The smallest useful Zonekeep zone: players push a shared counter up or
//! down, a timer announces its value every second, and once in a while the
//! zone's RNG nudges it. To start a game of your own, copy `examples/starter`, which builds outside
//! this workspace and serves its zone.
//!
//! Create params (JSON): `{"start": <i64>, "limit": <i64 > 0>}`, both optional.
//! Input payload: one byte, read as `i8` and clamped to `-1..=1`.
#![deny(missing_docs)]
#![forbid(unsafe_code)]

use std::hash::{Hash, Hasher};

use zonekeep_core::rand_core::RngCore;
use zonekeep_core::{
    Ctx, EventTarget, InputRefusal, JoinRefusal, PlayerId, PlayerInfo, StateHasher, Tier, TimerId,
    Zone, ZoneError, ZoneInit,
};

/// Event topic carrying the counter value (8 bytes, little-endian `i64`).
pub const TOPIC_VALUE: u16 = 1;
/// Timer tag of the once-a-second announcement.
const ANNOUNCE: u64 = 1;
/// Input refusal code: the payload was not exactly one byte.
pub const REFUSE_BAD_LENGTH: u16 = 1;
/// Join refusal code: the principal is on the zone's deny list.
pub const REFUSE_DENIED: u16 = 1;

/// The counter zone's state.
#[derive(Debug)]
pub struct Counter {
    /// The shared value, kept within `-limit..=limit`.
    pub value: i64,
    limit: i64,
    /// How many steps each player has contributed (in join order).
    pub pushes: Vec<(PlayerId, u64)>,
}

impl Counter {
    fn nudge(&mut self, by: i64) {
        self.value = (self.value + by).clamp(-self.limit, self.limit);
    }
}

fn param_i64(init: &ZoneInit, key: &str, default: i64) -> Result<i64, ZoneError> {
    match init.params.get(key) {
        None => Ok(default),
        Some(v) => v
            .as_i64()
            .ok_or_else(|| ZoneError::InvalidParams(format!("{key} must be an integer"))),
    }
}

impl Zone for Counter {
    type Input = i8;

    fn create(init: &ZoneInit, ctx: &mut Ctx<'_>) -> Result<Self, ZoneError> {
        let limit = param_i64(init, "limit", 100)?;
        if limit <= 0 {
            return Err(ZoneError::InvalidParams("limit must be positive".into()));
        }
        let start = param_i64(init, "start", 0)?.clamp(-limit, limit);
        // One second of ticks, derived from the fixed step so it follows tick_hz.
        let second = (1_000_000_000 / ctx.dt().as_nanos().max(1)).max(1) as u64;
        ctx.timers()
            .every(second, ANNOUNCE)
            .map_err(|e| ZoneError::Failed(e.to_string()))?;
        Ok(Counter {
            value: start,
            limit,
            pushes: Vec::new(),
        })
    }

    fn on_join(&mut self, _ctx: &mut Ctx<'_>, player: &PlayerInfo) -> Result<(), JoinRefusal> {
        if player.principal.as_str() == "mallory" {
            return Err(JoinRefusal::new(REFUSE_DENIED, "denied"));
        }
        self.pushes.push((player.id, 0));
        Ok(())
    }

    fn on_leave(&mut self, _ctx: &mut Ctx<'_>, player: PlayerId, _why: zonekeep_core::LeaveReason) {
        self.pushes.retain(|p| p.0 != player);
    }

    fn sanitize(&mut self, _player: PlayerId, payload: &[u8]) -> Result<i8, InputRefusal> {
        match payload {
            [b] => Ok(i8::from_le_bytes([*b]).clamp(-1, 1)),
            _ => Err(InputRefusal::new(REFUSE_BAD_LENGTH, "expected one byte")),
        }
    }

    fn on_input(&mut self, _ctx: &mut Ctx<'_>, player: PlayerId, step: i8) {
        self.nudge(i64::from(step));
        if let Some(p) = self.pushes.iter_mut().find(|p| p.0 == player) {
            p.1 += 1;
        }
    }

    fn tick(&mut self, ctx: &mut Ctx<'_>) {
        // Rarely (1 tick in 64), the zone itself nudges the counter at random.
        // Randomness comes only from ctx.rng(), so replays stay identical.
        let r = ctx.rng().next_u32();
        if r % 64 == 0 {
            self.nudge(if r & 0x100 == 0 { 1 } else { -1 });
        }
    }

    fn on_timer(&mut self, ctx: &mut Ctx<'_>, _id: TimerId, tag: u64) {
        if tag == ANNOUNCE {
            ctx.emit_event(
                EventTarget::All,
                TOPIC_VALUE,
                self.value.to_le_bytes().to_vec(),
            );
        }
    }

    fn on_tier(&mut self, _ctx: &mut Ctx<'_>, _from: Tier, _to: Tier) {
        // A real game might stop spawning things when Idle; the counter has nothing to do.
    }

    fn state_hash(&self) -> Option<u64> {
        let mut h = StateHasher::new();
        self.value.hash(&mut h);
        for (id, n) in &self.pushes {
            id.0.hash(&mut h);
            n.hash(&mut h);
        }
        Some(h.finish())
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use std::sync::Arc;

    use super::*;
    use zonekeep_core::serde_json::json;
    use zonekeep_core::{
        Claims, Clock, InputOutcome, JoinError, ManualClock, Principal, Role, ZoneConfig, ZoneHost,
    };

    fn host(
        params: zonekeep_core::serde_json::Value,
    ) -> Result<(ZoneHost, ManualClock), ZoneError> {
        let clock = ManualClock::new();
        let init = ZoneInit {
            zone_id: "counter-test".into(),
            kind: "counter".into(),
            params,
        };
        let host = ZoneHost::new::<Counter>(init, ZoneConfig::default(), Arc::new(clock.clone()))?;
        Ok((host, clock))
    }

    #[test]
    fn inputs_move_the_counter_within_its_limit() {
        let (mut h, clock) = host(json!({ "start": 1, "limit": 2 })).unwrap();
        let p = h
            .handle_join(Principal::new("alice"), Claims::new(), Role::Player)
            .unwrap();
        for seq in 1..=4 {
            assert!(h.handle_input(p, seq, 0, &[1]).is_accepted());
        }
        assert!(matches!(
            h.handle_input(p, 5, 0, &[1, 2]),
            InputOutcome::Refused(_)
        ));
        clock.advance(h.config().dt() * 4);
        h.advance(clock.now());
        assert!(h.zone::<Counter>().unwrap().value.abs() <= 2);
        assert_eq!(h.zone::<Counter>().unwrap().pushes, vec![(p, 4)]);
        assert_eq!(h.last_processed_seq(p), Some(4));
    }

    #[test]
    fn announces_every_second() {
        let (mut h, clock) = host(json!({})).unwrap();
        h.handle_join(Principal::new("alice"), Claims::new(), Role::Player)
            .unwrap();
        // Two simulated seconds, advanced in 5-tick chunks.
        let mut events = Vec::new();
        for _ in 0..12 {
            clock.advance(h.config().dt() * 5);
            h.advance(clock.now());
            events.extend(h.drain_events());
        }
        assert_eq!(events.len(), 2);
        assert_eq!(events[0].tick, 30);
        assert_eq!(events[0].topic, TOPIC_VALUE);
    }

    #[test]
    fn bad_params_and_denied_principals_are_refused() {
        assert!(matches!(
            host(json!({ "limit": 0 })),
            Err(ZoneError::InvalidParams(_))
        ));
        assert!(matches!(
            host(json!({ "start": "x" })),
            Err(ZoneError::InvalidParams(_))
        ));
        let (mut h, _clock) = host(json!({})).unwrap();
        let err = h
            .handle_join(Principal::new("mallory"), Claims::new(), Role::Player)
            .unwrap_err();
        assert!(matches!(err, JoinError::Refused(r) if r.code == REFUSE_DENIED));
    }
}
