//! Small built-in zone kinds a bare host can run for raw clients and tests: [`Dots`] (this
//! file), [`Doors`] (players carrying coins from zone to zone through transfers) and
//! [`Courier`] (numbered zone messages sent on command, and a record of what arrived).
//!
//! [`Dots`]: every player owns a dot on an integer grid. An input is two
//! bytes `[dx, dy]` (signed, clamped to -1..=1) moving the dot one step. The
//! zone tells everyone where every dot is through events until the replicated
//! world is wired into the host:
//! - topic [`TOPIC_DOTS`]: `count × (player u32 LE, x i32 LE, y i32 LE)`, sent
//!   on every tick where a dot moved, joined or left;
//! - topic [`TOPIC_WELCOME`]: to the joining player only, its id (u32 LE).
//!
//! Params: `{"size": n}` bounds the grid to `[-n, n]` (default 100).

mod courier;
mod doors;

use std::collections::BTreeMap;

pub use courier::{
    zone_config as courier_config, Courier, Report, Runs, TOPIC_COMMAND, TOPIC_NUMBERED,
    TOPIC_REPORT,
};
pub use doors::{Doors, TOPIC_COINS as DOORS_TOPIC_COINS};

use zonekeep_core::{
    Ctx, EventTarget, InputRefusal, LeaveReason, PlayerId, PlayerInfo, Role, Zone, ZoneError,
    ZoneInit,
};

/// Event topic carrying every dot's position.
pub const TOPIC_DOTS: u16 = 1;
/// Event topic telling a joining player its id.
pub const TOPIC_WELCOME: u16 = 2;

/// The example zone: one dot per player.
#[derive(Debug)]
pub struct Dots {
    size: i32,
    dots: BTreeMap<PlayerId, (i32, i32)>,
    dirty: bool,
}

impl Dots {
    /// Where `player`'s dot is.
    pub fn dot(&self, player: PlayerId) -> Option<(i32, i32)> {
        self.dots.get(&player).copied()
    }

    /// Decode a [`TOPIC_DOTS`] payload.
    pub fn decode_dots(payload: &[u8]) -> Vec<(u32, i32, i32)> {
        payload
            .chunks_exact(12)
            .map(|c| {
                let w = |i: usize| [c[i], c[i + 1], c[i + 2], c[i + 3]];
                (
                    u32::from_le_bytes(w(0)),
                    i32::from_le_bytes(w(4)),
                    i32::from_le_bytes(w(8)),
                )
            })
            .collect()
    }
}

impl Zone for Dots {
    type Input = (i8, i8);

    fn create(init: &ZoneInit, _ctx: &mut Ctx<'_>) -> Result<Self, ZoneError> {
        let size = match init.params.get("size") {
            None => 100,
            Some(v) => v
                .as_i64()
                .filter(|n| (1..=1_000_000).contains(n))
                .and_then(|n| i32::try_from(n).ok())
                .ok_or_else(|| {
                    ZoneError::InvalidParams("size must be an integer in 1..=1000000".into())
                })?,
        };
        Ok(Self {
            size,
            dots: BTreeMap::new(),
            dirty: false,
        })
    }

    fn on_join(
        &mut self,
        ctx: &mut Ctx<'_>,
        player: &PlayerInfo,
    ) -> Result<(), zonekeep_core::JoinRefusal> {
        if player.role == Role::Player {
            self.dots.insert(player.id, (0, 0));
            self.dirty = true;
        }
        ctx.emit_event(
            EventTarget::Player(player.id),
            TOPIC_WELCOME,
            player.id.0.to_le_bytes().to_vec(),
        );
        Ok(())
    }

    fn on_leave(&mut self, _ctx: &mut Ctx<'_>, player: PlayerId, _why: LeaveReason) {
        if self.dots.remove(&player).is_some() {
            self.dirty = true;
        }
    }

    fn on_rejoin(&mut self, _ctx: &mut Ctx<'_>, _player: PlayerId) {
        // A resumed client gets a fresh baseline; resend the positions.
        self.dirty = true;
    }

    fn sanitize(&mut self, _player: PlayerId, payload: &[u8]) -> Result<(i8, i8), InputRefusal> {
        match payload {
            [dx, dy] => Ok(((*dx as i8).clamp(-1, 1), (*dy as i8).clamp(-1, 1))),
            _ => Err(InputRefusal::new(1, "expected two bytes [dx, dy]")),
        }
    }

    fn on_input(&mut self, _ctx: &mut Ctx<'_>, player: PlayerId, (dx, dy): (i8, i8)) {
        let size = self.size;
        if let Some((x, y)) = self.dots.get_mut(&player) {
            *x = (*x + i32::from(dx)).clamp(-size, size);
            *y = (*y + i32::from(dy)).clamp(-size, size);
            self.dirty |= dx != 0 || dy != 0;
        }
    }

    fn tick(&mut self, ctx: &mut Ctx<'_>) {
        if !std::mem::take(&mut self.dirty) {
            return;
        }
        let mut payload = Vec::with_capacity(self.dots.len() * 12);
        for (id, (x, y)) in &self.dots {
            payload.extend_from_slice(&id.0.to_le_bytes());
            payload.extend_from_slice(&x.to_le_bytes());
            payload.extend_from_slice(&y.to_le_bytes());
        }
        ctx.emit_event(EventTarget::All, TOPIC_DOTS, payload);
    }

    fn state_hash(&self) -> Option<u64> {
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        for (id, (x, y)) in &self.dots {
            for b in
                id.0.to_le_bytes()
                    .iter()
                    .chain(&x.to_le_bytes())
                    .chain(&y.to_le_bytes())
            {
                h = (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3);
            }
        }
        Some(h)
    }
}
