//! The arena workload (`docs/WORKLOADS.md`, arena chapter) as a zone module: the same NPC
//! circles, hp waves, spawns and input rule as the bench's native zone (`zonekeep-bench`'s
//! `ArenaZone`), from the same definition (`zonekeep-workload`), so the bench can measure what
//! running a game as a module costs against running it natively on an identical world.
//!
//! This crate owns the module's hooks only. It must never depend on the host crates: a module
//! imports nothing but the host's log.
//!
//! One difference from the native zone, from what a module can do: scenario B's interest is
//! the host's grid query at radius `R` alone, where the native zone widens the query a little
//! and decides the exact edge in `f64` with `can_see` (a module's `can_see` is a list of who may
//! see an entity, not a geometric test). Entities within a rounding error of `R` may differ.

use std::collections::BTreeMap;

use zonekeep_guest::{
    export_zone, Ctx, DecodeError, Entity, Input, Kind, KindDef, LeaveReason, Player, PlayerId,
    Refusal, Role, Settings, Zone,
};
use zonekeep_workload::math::{apply_input, decode_input, hp_step, hp_wave_group, NpcParams};
use zonekeep_workload::{ArenaParams, Scenario};

/// The position quantum the workload declares (its default `pos_step`).
pub const POS_STEP: f32 = 0.1;
/// Most NPCs a zone may be created with.
pub const MAX_NPCS: u32 = 100_000;

/// A bot's input: a displacement `(dx, dy)`, 16 bytes (two `f64` LE).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Displacement(pub f64, pub f64);

impl Input for Displacement {
    fn decode(bytes: &[u8]) -> Result<Self, DecodeError> {
        decode_input(bytes)
            .map(|(dx, dy)| Displacement(dx, dy))
            .ok_or(DecodeError::Invalid(
                "expected 16 bytes: dx, dy as f64 little-endian",
            ))
    }
}

/// The workload zone, as a module.
#[derive(Debug)]
pub struct Workload {
    params: ArenaParams,
    npcs: NpcParams,
    npc_ids: Vec<Entity>,
    hp: Vec<u8>,
    player_kind: Kind,
    players: BTreeMap<PlayerId, (Entity, (f32, f32))>,
}

impl Zone for Workload {
    type Input = Displacement;

    fn settings() -> Settings {
        Settings::new()
            .tick_hz(20)
            .patch_every(1)
            .max_players(10_000)
            .pos_step(POS_STEP)
            .cell_size(150.0)
    }

    fn create(ctx: &mut Ctx<'_>, params: &str) -> Result<Self, String> {
        let params: ArenaParams = match params.trim() {
            "" | "null" => ArenaParams::default(),
            text => serde_json::from_str(text).map_err(|e| format!("params: {e}"))?,
        };
        if params.pos_step.to_bits() != POS_STEP.to_bits() {
            return Err(format!(
                "pos_step {} differs from the module's {POS_STEP}",
                params.pos_step
            ));
        }
        if !(params.radius.is_finite() && params.radius > 0.0) {
            return Err("radius must be finite and > 0".into());
        }
        if params.npcs > MAX_NPCS {
            return Err(format!("at most {MAX_NPCS} npcs"));
        }
        let npc_kind = ctx.declare_kind(KindDef::new("npc").uint("hp"));
        let player_kind = ctx.declare_kind(KindDef::new("player"));
        let npcs = NpcParams::new(params.npcs as usize, params.seed, params.consts.world);
        let npc_ids = (0..npcs.len())
            .map(|i| {
                let (x, y) = npcs.pos(&params.consts, i, 0).unwrap_or_default();
                let e = ctx.spawn(npc_kind, x, y);
                ctx.set_uint(e, 0, 100);
                e
            })
            .collect();
        Ok(Self {
            hp: vec![100; npcs.len()],
            params,
            npcs,
            npc_ids,
            player_kind,
            players: BTreeMap::new(),
        })
    }

    fn on_join(&mut self, ctx: &mut Ctx<'_>, player: Player) -> Result<(), Refusal> {
        if player.role == Role::Observer {
            return Ok(());
        }
        let bot = serde_json::from_str::<serde_json::Value>(&player.claims)
            .ok()
            .and_then(|c| c.get("bot").and_then(serde_json::Value::as_u64))
            .and_then(|b| u32::try_from(b).ok())
            .unwrap_or(player.id.0);
        let pos = self.params.spawn(bot);
        let entity = ctx.spawn(self.player_kind, pos.0, pos.1);
        ctx.set_control(player.id, Some(entity));
        if self.params.scenario == Scenario::Interest {
            ctx.set_view(player.id, Some(self.params.radius as f32), None);
        }
        self.players.insert(player.id, (entity, pos));
        Ok(())
    }

    fn on_leave(&mut self, ctx: &mut Ctx<'_>, player: PlayerId, _why: LeaveReason) {
        if let Some((entity, _)) = self.players.remove(&player) {
            ctx.despawn(entity);
        }
    }

    fn sanitize(&mut self, _player: PlayerId, payload: &[u8]) -> Result<Displacement, Refusal> {
        match decode_input(payload) {
            Some((dx, dy)) if dx.is_finite() && dy.is_finite() => Ok(Displacement(dx, dy)),
            Some(_) => Err(Refusal::new(2, "non-finite displacement")),
            None => Err(Refusal::new(
                1,
                "expected 16 bytes: dx, dy as f64 little-endian",
            )),
        }
    }

    fn on_input(
        &mut self,
        ctx: &mut Ctx<'_>,
        player: PlayerId,
        Displacement(dx, dy): Displacement,
    ) {
        let bounds = self.params.player_bounds();
        let c = self.params.consts;
        if let Some((entity, pos)) = self.players.get_mut(&player) {
            if let Some(next) = apply_input(&c, *pos, dx, dy, bounds) {
                *pos = next;
                ctx.set_pos(*entity, next.0, next.1);
            }
        }
    }

    fn tick(&mut self, ctx: &mut Ctx<'_>) {
        let k = ctx.tick();
        let c = self.params.consts;
        for (i, &e) in self.npc_ids.iter().enumerate() {
            // One reduction for both (WebAssembly computes sin and cos in software).
            if let Some((x, y)) = self.npcs.pos_with(&c, i, k, libm::sincos) {
                ctx.set_pos(e, x, y);
            }
        }
        if let Some(group) = hp_wave_group(&c, k) {
            let groups = c.hp_groups.max(1) as usize;
            for i in (group as usize..self.hp.len()).step_by(groups) {
                if let (Some(h), Some(&e)) = (self.hp.get_mut(i), self.npc_ids.get(i)) {
                    *h = hp_step(*h);
                    ctx.set_uint(e, 0, u32::from(*h));
                }
            }
        }
    }
}

export_zone!(Workload);
