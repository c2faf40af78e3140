//! [`Doors`]: players carry coins from zone to zone by transfers (PROTOCOL.md §5.3.2), the
//! smallest zone kind that moves players, for tests and for trying moves with a raw client.
//!
//! Inputs (the first byte says which):
//! - `[1]`: pick up a coin;
//! - `[2]` then a JSON object `{"to": ZONE, "claims": {...}}`: walk through a door to `ZONE`
//!   (`claims` is handed to it; `{"kind": K, "params": P}` there creates it as kind `K`).
//!
//! Events: topic [`TOPIC_COINS`] to a player whenever its purse changes or it enters the zone:
//! `coins u32 LE` then the zone's id (UTF-8); topic [`TOPIC_DOOR_STUCK`] when a door cannot be
//! used at all (the reason, UTF-8). A move that fails comes back as the host's own notice
//! (topic 0xFFFF, §5.3.2).
//!
//! Params: `{"coins": n}` is the purse a player who joins (not one who arrives) starts with
//! (default 0); `{"locked": true}` turns every arrival away (code 1, "this door is locked").
//! Nothing is saved: a restored zone starts with empty purses.

use std::collections::BTreeMap;

use serde_json::Value;
use zonekeep_core::{
    Arrival, Claims, Ctx, EventTarget, InputRefusal, JoinRefusal, LeaveReason, PlayerId,
    PlayerInfo, Role, Zone, ZoneError, ZoneInit,
};

/// Event topic of a player's purse (`coins u32 LE`, then the zone id).
pub const TOPIC_COINS: u16 = 1;
/// Event topic of a door that could not be used (the reason).
pub const TOPIC_DOOR_STUCK: u16 = 2;

/// A decoded input.
#[derive(Debug)]
pub enum DoorsInput {
    /// Pick up a coin.
    Coin,
    /// Walk to `to`, handing it `claims`.
    Walk {
        /// The target zone.
        to: String,
        /// Claims for it.
        claims: Claims,
    },
}

/// The zone: a purse per player.
#[derive(Debug)]
pub struct Doors {
    zone_id: String,
    start_coins: u32,
    locked: bool,
    purses: BTreeMap<PlayerId, u32>,
}

impl Doors {
    /// The coins `player` holds here.
    pub fn coins(&self, player: PlayerId) -> Option<u32> {
        self.purses.get(&player).copied()
    }

    fn tell(&self, ctx: &mut Ctx<'_>, player: PlayerId) {
        let coins = self.purses.get(&player).copied().unwrap_or(0);
        let mut payload = coins.to_le_bytes().to_vec();
        payload.extend_from_slice(self.zone_id.as_bytes());
        ctx.emit_event(EventTarget::Player(player), TOPIC_COINS, payload);
    }

    fn from_params(init: &ZoneInit) -> Result<Self, ZoneError> {
        let start_coins = match init.params.get("coins") {
            None => 0,
            Some(v) => v
                .as_u64()
                .and_then(|n| u32::try_from(n).ok())
                .ok_or_else(|| ZoneError::InvalidParams("coins must be a u32".into()))?,
        };
        let locked = match init.params.get("locked") {
            None => false,
            Some(v) => v
                .as_bool()
                .ok_or_else(|| ZoneError::InvalidParams("locked must be true or false".into()))?,
        };
        Ok(Self {
            zone_id: init.zone_id.clone(),
            start_coins,
            locked,
            purses: BTreeMap::new(),
        })
    }
}

impl Zone for Doors {
    type Input = DoorsInput;

    fn create(init: &ZoneInit, _ctx: &mut Ctx<'_>) -> Result<Self, ZoneError> {
        Self::from_params(init)
    }

    fn on_join(&mut self, ctx: &mut Ctx<'_>, player: &PlayerInfo) -> Result<(), JoinRefusal> {
        if player.role == Role::Player {
            self.purses.insert(player.id, self.start_coins);
            self.tell(ctx, player.id);
        }
        Ok(())
    }

    fn on_rejoin(&mut self, ctx: &mut Ctx<'_>, player: PlayerId) {
        // A resumed or arriving connection learns its purse.
        self.tell(ctx, player);
    }

    fn on_leave(&mut self, _ctx: &mut Ctx<'_>, player: PlayerId, _why: LeaveReason) {
        self.purses.remove(&player);
    }

    fn sanitize(&mut self, _player: PlayerId, payload: &[u8]) -> Result<DoorsInput, InputRefusal> {
        match payload.split_first() {
            Some((1, [])) => Ok(DoorsInput::Coin),
            Some((2, json)) => {
                let v: Value = serde_json::from_slice(json)
                    .map_err(|_| InputRefusal::new(2, "a walk is a JSON object"))?;
                let to = v
                    .get("to")
                    .and_then(Value::as_str)
                    .ok_or_else(|| InputRefusal::new(2, "a walk names a zone: {\"to\": ZONE}"))?
                    .to_owned();
                let claims = match v.get("claims") {
                    None => Claims::new(),
                    Some(Value::Object(m)) => m.clone(),
                    Some(_) => return Err(InputRefusal::new(2, "claims must be an object")),
                };
                Ok(DoorsInput::Walk { to, claims })
            }
            _ => Err(InputRefusal::new(1, "expected [1] or [2] + JSON")),
        }
    }

    fn on_input(&mut self, ctx: &mut Ctx<'_>, player: PlayerId, input: DoorsInput) {
        match input {
            DoorsInput::Coin => {
                if let Some(c) = self.purses.get_mut(&player) {
                    *c = c.saturating_add(1);
                    self.tell(ctx, player);
                }
            }
            DoorsInput::Walk { to, claims } => {
                if let Err(e) = ctx.transfer(player, &to, claims) {
                    ctx.emit_event(
                        EventTarget::Player(player),
                        TOPIC_DOOR_STUCK,
                        e.to_string().into_bytes(),
                    );
                }
            }
        }
    }

    fn tick(&mut self, _ctx: &mut Ctx<'_>) {}

    fn transfer_out(&mut self, _ctx: &mut Ctx<'_>, player: PlayerId) -> Vec<u8> {
        self.purses
            .remove(&player)
            .unwrap_or(0)
            .to_le_bytes()
            .to_vec()
    }

    fn transfer_in(
        &mut self,
        ctx: &mut Ctx<'_>,
        player: &PlayerInfo,
        arrival: &Arrival<'_>,
    ) -> Result<(), JoinRefusal> {
        if self.locked && !arrival.returning {
            return Err(JoinRefusal::new(1, "this door is locked"));
        }
        let coins = <[u8; 4]>::try_from(arrival.state).map_or(0, u32::from_le_bytes);
        self.purses.insert(player.id, coins);
        self.tell(ctx, player.id);
        Ok(())
    }

    fn state_hash(&self) -> Option<u64> {
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        for (id, coins) in &self.purses {
            for b in id.0.to_le_bytes().iter().chain(&coins.to_le_bytes()) {
                h = (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3);
            }
        }
        Some(h)
    }
}
