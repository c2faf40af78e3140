//! Doors, as a Zonekeep zone module: players carry a purse of coins from zone to zone by
//! transfers (PROTOCOL.md §5.3.2). It follows the host's native `doors` dev kind rule for rule,
//! so a module zone and a native one can hand players to each other, each side reading the
//! purse the other handed out.
//!
//! This crate owns the game's rules only. It must never depend on the host crates
//! (`zonekeep-core`, `zonekeep-wasm`...): the module imports nothing but the host's log.
//!
//! Inputs (the first byte says which):
//! - `[1]`: pick up a coin;
//! - `[2]` then a JSON object `{"to": ZONE, "claims": {...}}`: walk through a door to `ZONE`
//!   (`claims` is handed to it; `{"kind": K, "params": P}` there creates it as kind `K`).
//!
//! Events: topic [`TOPIC_COINS`] to a player whenever its purse changes or it enters the zone:
//! `coins u32 LE` then the zone's id (UTF-8). A move that fails comes back as the host's own
//! notice (topic 0xFFFF); a move the host refuses at once leaves the player where it is.
//!
//! State handed out by a transfer: the purse, `u32 LE` (anything else arrives as an empty
//! purse, as the native kind reads it).
//!
//! Params: `{"coins": n}` is the purse a player who joins (not one who arrives) starts with
//! (default 0); `{"locked": true}` turns every arrival away (code [`REFUSE_LOCKED`], "this door
//! is locked"). Nothing is saved: a restored zone starts with empty purses.

use std::collections::BTreeMap;

use serde_json::Value;
use zonekeep_guest::{
    export_zone, Arrival, Ctx, DecodeError, EventTarget, Input, LeaveReason, Player, PlayerId,
    Refusal, Role, Zone,
};

/// Event topic of a player's purse (`coins u32 LE`, then the zone id).
pub const TOPIC_COINS: u16 = 1;
/// Input refusal code of a payload that is neither `[1]` nor `[2]` + JSON.
pub const REFUSE_UNKNOWN_INPUT: u16 = 1;
/// Input refusal code of a walk whose JSON is not `{"to": ZONE, "claims": {...}}`.
pub const REFUSE_BAD_WALK: u16 = 2;
/// Arrival refusal code of a locked zone.
pub const REFUSE_LOCKED: u16 = 1;

/// A decoded input.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DoorsInput {
    /// Pick up a coin.
    Coin,
    /// Walk to `to`, handing it `claims` (JSON object text).
    Walk {
        /// The target zone.
        to: String,
        /// Claims for it, as JSON object text.
        claims: String,
    },
}

impl DoorsInput {
    /// Reads a payload, or says why it is not one (with the refusal code the native kind uses).
    pub fn parse(payload: &[u8]) -> Result<Self, Refusal> {
        match payload.split_first() {
            Some((1, [])) => Ok(DoorsInput::Coin),
            Some((2, json)) => {
                let v: Value = serde_json::from_slice(json)
                    .map_err(|_| Refusal::new(REFUSE_BAD_WALK, "a walk is a JSON object"))?;
                let to = v.get("to").and_then(Value::as_str).ok_or_else(|| {
                    Refusal::new(REFUSE_BAD_WALK, "a walk names a zone: {\"to\": ZONE}")
                })?;
                let claims = match v.get("claims") {
                    None => "{}".to_owned(),
                    Some(c @ Value::Object(_)) => c.to_string(),
                    Some(_) => {
                        return Err(Refusal::new(REFUSE_BAD_WALK, "claims must be an object"))
                    }
                };
                Ok(DoorsInput::Walk {
                    to: to.to_owned(),
                    claims,
                })
            }
            _ => Err(Refusal::new(
                REFUSE_UNKNOWN_INPUT,
                "expected [1] or [2] + JSON",
            )),
        }
    }
}

impl Input for DoorsInput {
    fn decode(bytes: &[u8]) -> Result<Self, DecodeError> {
        Self::parse(bytes).map_err(|_| DecodeError::Invalid("not a doors input"))
    }
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

    /// Tells `player` its purse and where it is.
    fn tell(&self, ctx: &mut Ctx<'_>, player: PlayerId) {
        let coins = self.purses.get(&player).copied().unwrap_or(0);
        let mut payload = coins.to_le_bytes().to_vec();
        payload.extend_from_slice(self.zone_id.as_bytes());
        ctx.event(EventTarget::Player(player), TOPIC_COINS, &payload);
    }

    fn from_params(ctx: &Ctx<'_>, params: &str) -> Result<Self, String> {
        let params: Value = if params.trim().is_empty() {
            Value::Object(serde_json::Map::new())
        } else {
            serde_json::from_str(params).map_err(|e| format!("params are not JSON: {e}"))?
        };
        let start_coins = match params.get("coins") {
            None => 0,
            Some(v) => v
                .as_u64()
                .and_then(|n| u32::try_from(n).ok())
                .ok_or("coins must be a u32")?,
        };
        let locked = match params.get("locked") {
            None => false,
            Some(v) => v.as_bool().ok_or("locked must be true or false")?,
        };
        Ok(Self {
            zone_id: ctx.zone_id().to_owned(),
            start_coins,
            locked,
            purses: BTreeMap::new(),
        })
    }
}

impl Zone for Doors {
    type Input = DoorsInput;

    fn create(ctx: &mut Ctx<'_>, params: &str) -> Result<Self, String> {
        Self::from_params(ctx, params)
    }

    fn on_join(&mut self, ctx: &mut Ctx<'_>, player: Player) -> Result<(), Refusal> {
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

    fn sanitize(&mut self, _player: PlayerId, payload: &[u8]) -> Result<DoorsInput, Refusal> {
        DoorsInput::parse(payload)
    }

    fn on_input(&mut self, ctx: &mut Ctx<'_>, player: PlayerId, input: DoorsInput) {
        match input {
            DoorsInput::Coin => {
                if let Some(c) = self.purses.get_mut(&player) {
                    *c = c.saturating_add(1);
                    self.tell(ctx, player);
                }
            }
            DoorsInput::Walk { to, claims } => ctx.transfer(player, &to, &claims),
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
        player: Player,
        arrival: Arrival<'_>,
    ) -> Result<(), Refusal> {
        if self.locked && !arrival.returning {
            return Err(Refusal::new(REFUSE_LOCKED, "this door is locked"));
        }
        let coins = <[u8; 4]>::try_from(arrival.state).map_or(0, u32::from_le_bytes);
        self.purses.insert(player.id, coins);
        self.tell(ctx, player.id);
        Ok(())
    }

    fn restore(ctx: &mut Ctx<'_>, params: &str, _bytes: &[u8]) -> Result<Self, String> {
        // Nothing is saved: the zone comes back with empty purses.
        Self::from_params(ctx, params)
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

export_zone!(Doors);

#[cfg(test)]
mod tests;
