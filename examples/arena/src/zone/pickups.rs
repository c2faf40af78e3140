//! Pickups: placed at random open spots, taken by touching, back after [`RESPAWN_TICKS`]. Taking
//! one emits a durable fact; its settlement raises the player's saved score.

use serde::{Deserialize, Serialize};
use zonekeep_arena_rules::save::Pending;
use zonekeep_core::fact::{FactOutcome, Settlement};
use zonekeep_core::world::EntityId;
use zonekeep_core::{Ctx, EventTarget, PlayerId};

use super::{
    Arena, FACT_PICKUP, F_SCORE, PICKUP_SCORE, RESPAWN_TICKS, TOPIC_PICKED, TOPIC_REFUSED,
    TOPIC_SAVED,
};
use crate::map::random_open_point;
use crate::movement::snap;
use zonekeep_arena_rules::game::touches;

/// A pickup: present (with an entity) or waiting to respawn.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(super) struct Pickup {
    pub(super) x: f32,
    pub(super) y: f32,
    /// Tick at which it reappears; only meaningful while `entity` is `None`.
    pub(super) respawn_at: u64,
    #[serde(skip)]
    pub(super) entity: Option<EntityId>,
}

impl Arena {
    /// Pickups whose respawn tick came appear again at a new random spot.
    pub(super) fn respawn_pickups(&mut self, ctx: &mut Ctx<'_>) {
        let tick = ctx.tick();
        for p in &mut self.pickups {
            if p.entity.is_none() && tick >= p.respawn_at {
                let (x, y) = random_open_point(ctx.rng(), 2.0);
                p.x = snap(x);
                p.y = snap(y);
                // A spawn fails only when entity ids run out (2^32); the pickup then stays away.
                p.entity = ctx.world().spawn(self.kinds.pickup, p.x, p.y).ok();
            }
        }
    }

    /// A player touching a present pickup takes it: the pickup leaves, a fact is emitted.
    pub(super) fn collect_pickups(&mut self, ctx: &mut Ctx<'_>) {
        for i in 0..self.pickups.len() {
            let Some(pickup) = self.pickups.get(i) else {
                continue;
            };
            let Some(entity) = pickup.entity else {
                continue;
            };
            let (px, py) = (pickup.x, pickup.y);
            // Players in id order: the lowest id wins a tie, deterministically.
            let Some((&player, avatar)) = self
                .players
                .iter()
                .find(|(_, a)| touches(a.state.x, a.state.y, px, py))
            else {
                continue;
            };
            let principal = avatar.principal.clone();
            let payload = serde_json::json!({ "add": { "score": PICKUP_SCORE } });
            match ctx.emit_fact(FACT_PICKUP, payload, Some(&principal), None) {
                Ok(key) => {
                    self.pending.insert(
                        key.0,
                        Pending {
                            principal,
                            amount: PICKUP_SCORE,
                        },
                    );
                }
                Err(_) => {
                    // Queue full (or a key clash): leave the pickup where it is; the player takes it
                    // once the queue drains.
                    self.stats.fact_overflow += 1;
                    continue;
                }
            }
            self.stats.picked += 1;
            let _ = ctx.world().despawn(entity);
            if let Some(p) = self.pickups.get_mut(i) {
                p.entity = None;
                p.respawn_at = ctx.tick() + RESPAWN_TICKS;
            }
            ctx.emit_event(
                EventTarget::Player(player),
                TOPIC_PICKED,
                PICKUP_SCORE.to_le_bytes().to_vec(),
            );
        }
    }

    /// Sets the score field of every avatar of `principal` (one normally) and tells its player.
    fn announce_score(&mut self, ctx: &mut Ctx<'_>, principal: &str, amount: u32, total: u32) {
        let mine: Vec<(PlayerId, EntityId)> = self
            .players
            .iter()
            .filter(|(_, a)| a.principal == principal)
            .map(|(p, a)| (*p, a.entity))
            .collect();
        for (player, entity) in mine {
            let _ = ctx.world().set_uint(entity, F_SCORE, total);
            // The score is the character's: written at once, so it follows the player anywhere.
            if ctx
                .set_character(player, super::character_with_score(total))
                .is_ok()
            {
                let _ = ctx.commit_character(player);
            }
            let mut payload = amount.to_le_bytes().to_vec();
            payload.extend_from_slice(&total.to_le_bytes());
            ctx.emit_event(EventTarget::Player(player), TOPIC_SAVED, payload);
        }
    }

    /// A pickup's fact settled: raise the saved score (or report the refusal) to its player.
    pub(super) fn settle(&mut self, ctx: &mut Ctx<'_>, settlement: &Settlement) {
        let pending = self.pending.remove(settlement.key.as_str());
        match &settlement.outcome {
            FactOutcome::Ok(result) => {
                self.stats.saved += 1;
                let Some(p) = pending else {
                    return;
                };
                // The ledger answers with the principal's totals: the durable truth, immune to a
                // settlement seen twice after a restore. Other sinks: count it here.
                let total = match result.get("score").and_then(|v| v.as_u64()) {
                    Some(t) => u32::try_from(t).unwrap_or(u32::MAX),
                    None => self.score(&p.principal).saturating_add(p.amount),
                };
                self.scores.insert(p.principal.clone(), total);
                self.announce_score(ctx, &p.principal, p.amount, total);
            }
            FactOutcome::Refused(reason) => {
                self.stats.refused += 1;
                let Some(p) = pending else {
                    return;
                };
                let text: String = reason.chars().take(200).collect();
                let targets: Vec<PlayerId> = self
                    .players
                    .iter()
                    .filter(|(_, a)| a.principal == p.principal)
                    .map(|(id, _)| *id)
                    .collect();
                for player in targets {
                    ctx.emit_event(
                        EventTarget::Player(player),
                        TOPIC_REFUSED,
                        text.as_bytes().to_vec(),
                    );
                }
            }
        }
    }
}
