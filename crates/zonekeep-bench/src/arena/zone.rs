//! The arena workload as a zone kind a host runs (WORKLOADS.md arena §2, §4).
//!
//! Ticks at 20 Hz with a patch every tick and **no catch-up** (`max_catch_up = 1`: a host that
//! falls behind runs fewer ticks and counts the rest as dropped — the simulation slows down, as
//! WORKLOADS.md arena §2.1 asks). NPC positions and hp are the closed forms of tick `k` = `ctx.tick()`, the
//! tick every Delta carries; tick 0 is the state at creation. Inputs are buffered by the host and
//! applied at the next tick, all of them (`InputPolicy::Drain`), per WORKLOADS.md arena §2.4's allowance.
//!
//! Scenario B's visibility rule is exact: the view radius is set a hair above `R` so the grid's
//! `f32` query returns a superset, and [`Zone::can_see`] then keeps exactly the entities with
//! `(ex − px)² + (ey − py)² ≤ R²` in `f64` on the `f32` positions, with no leave hysteresis
//! (margin 0). The own player is always visible (the host never asks `can_see` about it).

use std::collections::BTreeMap;

use zonekeep_core::world::KindId;
use zonekeep_core::{
    Ctx, EntityId, InputPolicy, InputRefusal, JoinRefusal, LeaveReason, PlayerId, PlayerInfo,
    ReplicationSettings, World, Zone, ZoneConfig, ZoneError, ZoneInit,
};

use super::math::{apply_input, decode_input, hp_wave_group, within, NpcParams};
use super::{ArenaParams, Scenario, KIND};

/// The kind name of the arena with a per-patch byte budget (the crowded B run).
pub const KIND_BUDGET: &str = "arena-workload-budget";
/// The kind name of the arena watched by a crowd at a quarter of the players' patch rate (5 Hz
/// against 20; the relays' 10,000-client run).
pub const KIND_CROWD: &str = "arena-workload-crowd";
/// Players' patches per observer patch in [`KIND_CROWD`].
pub const CROWD_OBSERVER_PATCH_EVERY: u32 = 4;
/// The budget of [`KIND_BUDGET`], bytes per Delta (the crowded scenario B run: 1,200).
pub const BUDGET_BYTES: usize = 1200;
/// Declared position quantum of both kinds.
pub const POS_STEP: f32 = 0.1;
/// How far past `R` the grid query reaches so that `can_see` decides the exact edge in `f64`.
/// Far larger than the `f32` rounding of a distance in a 1000-unit world (~1e-4).
const VIEW_SLACK: f32 = 0.5;

/// The runtime config of the arena kinds (`budget`: bytes per Delta, `None` = unlimited).
pub fn zone_config(budget: Option<usize>) -> ZoneConfig {
    ZoneConfig {
        tick_hz: 20,
        patch_every: 1,
        max_catch_up: 1,
        max_players: 10_000,
        // A crowd may watch (`zonekeep bench --observers`).
        max_observers: 10_000,
        input_policy: InputPolicy::Drain,
        replication: ReplicationSettings {
            pos_step: POS_STEP,
            cell_size: 150.0,
            view_radius: f32::INFINITY,
            margin: 0.0,
            budget,
            ..ReplicationSettings::default()
        },
        ..ZoneConfig::default()
    }
}

/// The kind a run with `params` must create.
pub fn kind_for(params: &ArenaParams) -> &'static str {
    if params.budget.is_some() {
        KIND_BUDGET
    } else {
        KIND
    }
}

/// One player: its entity and exact position.
#[derive(Debug, Clone, Copy)]
struct Player {
    entity: EntityId,
    pos: (f32, f32),
}

/// The arena zone.
#[derive(Debug)]
pub struct ArenaZone {
    params: ArenaParams,
    npcs: NpcParams,
    npc_ids: Vec<EntityId>,
    npc_kind: KindId,
    player_kind: KindId,
    hp: Vec<u8>,
    players: BTreeMap<PlayerId, Player>,
    bad_inputs: u64,
}

impl ArenaZone {
    /// The params it runs with.
    pub fn params(&self) -> &ArenaParams {
        &self.params
    }

    /// Inputs refused as non-finite or malformed so far.
    pub fn bad_inputs(&self) -> u64 {
        self.bad_inputs
    }

    /// The exact position of `player`'s entity.
    pub fn player_pos(&self, player: PlayerId) -> Option<(f32, f32)> {
        self.players.get(&player).map(|p| p.pos)
    }

    fn move_npcs(&mut self, world: &mut World, k: u64) {
        let c = self.params.consts;
        for (i, &id) in self.npc_ids.iter().enumerate() {
            if let Some((x, y)) = self.npcs.pos(&c, i, k) {
                // The entity was spawned in `create`; a missing one would be a core bug, and
                // skipping it shows up in the probe rather than taking the zone down.
                let _ = world.set_pos(id, x, y);
            }
        }
        if let Some(group) = hp_wave_group(&c, k) {
            let groups = c.hp_groups.max(1) as usize;
            for i in (group as usize..self.hp.len()).step_by(groups) {
                if let (Some(h), Some(&id)) = (self.hp.get_mut(i), self.npc_ids.get(i)) {
                    *h = super::math::hp_step(*h);
                    let _ = world.set_uint(id, 0, u32::from(*h));
                }
            }
        }
    }
}

impl Zone for ArenaZone {
    type Input = (f64, f64);

    fn create(init: &ZoneInit, ctx: &mut Ctx<'_>) -> Result<Self, ZoneError> {
        let params: ArenaParams = match &init.params {
            serde_json::Value::Null => ArenaParams::default(),
            v => serde_json::from_value(v.clone())
                .map_err(|e| ZoneError::InvalidParams(e.to_string()))?,
        };
        let world = ctx.world();
        if (world.pos_step() - params.pos_step).abs() > f32::EPSILON {
            return Err(ZoneError::InvalidParams(format!(
                "pos_step {} differs from the kind's {}",
                params.pos_step,
                world.pos_step()
            )));
        }
        if params.budget.is_some() != (init.kind == KIND_BUDGET) {
            return Err(ZoneError::InvalidParams(format!(
                "a budget needs kind {KIND_BUDGET:?}, no budget kind {KIND:?}"
            )));
        }
        if !(params.radius.is_finite() && params.radius > 0.0) {
            return Err(ZoneError::InvalidParams(
                "radius must be finite and > 0".into(),
            ));
        }
        if params.npcs > 100_000 {
            return Err(ZoneError::InvalidParams("at most 100000 npcs".into()));
        }
        let [npc_def, player_def] = ArenaParams::kinds();
        let fail = |e: zonekeep_core::world::WorldError| ZoneError::Failed(e.to_string());
        let npc_kind = world.declare_kind(npc_def).map_err(fail)?;
        let player_kind = world.declare_kind(player_def).map_err(fail)?;
        let npcs = NpcParams::new(params.npcs as usize, params.seed, params.consts.world);
        let mut npc_ids = Vec::with_capacity(npcs.len());
        for i in 0..npcs.len() {
            let (x, y) = npcs.pos(&params.consts, i, 0).unwrap_or_default();
            let id = world.spawn(npc_kind, x, y).map_err(fail)?;
            world.set_uint(id, 0, 100).map_err(fail)?;
            npc_ids.push(id);
        }
        Ok(Self {
            hp: vec![100; npcs.len()],
            params,
            npcs,
            npc_ids,
            npc_kind,
            player_kind,
            players: BTreeMap::new(),
            bad_inputs: 0,
        })
    }

    /// The whole state, for a recording started while the zone runs: the NPCs' circles follow
    /// from the params, so the params, the entity ids, the hit points and the players do.
    fn image(&self) -> Option<Vec<u8>> {
        let players: Vec<(u32, u32, f32, f32)> = self
            .players
            .iter()
            .map(|(id, p)| (id.0, p.entity.0, p.pos.0, p.pos.1))
            .collect();
        let ids: Vec<u32> = self.npc_ids.iter().map(|e| e.0).collect();
        let image = (
            &self.params,
            [self.npc_kind.0, self.player_kind.0],
            ids,
            &self.hp,
            players,
            self.bad_inputs,
        );
        serde_json::to_vec(&image).ok()
    }

    fn from_image(_init: &ZoneInit, ctx: &mut Ctx<'_>, bytes: &[u8]) -> Result<Self, ZoneError> {
        type Image = (
            ArenaParams,
            [u32; 2],
            Vec<u32>,
            Vec<u8>,
            Vec<(u32, u32, f32, f32)>,
            u64,
        );
        let refused = |why: String| ZoneError::Restore(format!("arena workload image: {why}"));
        let (params, [npc_kind, player_kind], ids, hp, players, bad_inputs): Image =
            serde_json::from_slice(bytes).map_err(|e| refused(e.to_string()))?;
        let world = ctx.world_ref();
        let alive = |id: u32| {
            let e = EntityId(id);
            world
                .contains(e)
                .then_some(e)
                .ok_or_else(|| refused(format!("entity {id} is not in the world")))
        };
        if params.npcs as usize != ids.len() || ids.len() != hp.len() {
            return Err(refused(
                "NPC ids and hit points do not match the params".into(),
            ));
        }
        if [npc_kind, player_kind]
            .iter()
            .any(|k| *k as usize >= world.kinds().len())
        {
            return Err(refused("an undeclared kind".into()));
        }
        let npc_ids = ids.into_iter().map(alive).collect::<Result<Vec<_>, _>>()?;
        let players = players
            .into_iter()
            .map(|(id, e, x, y)| {
                let entity = alive(e)?;
                Ok((
                    PlayerId(id),
                    Player {
                        entity,
                        pos: (x, y),
                    },
                ))
            })
            .collect::<Result<BTreeMap<_, _>, ZoneError>>()?;
        Ok(Self {
            npcs: NpcParams::new(params.npcs as usize, params.seed, params.consts.world),
            params,
            npc_ids,
            npc_kind: KindId(npc_kind),
            player_kind: KindId(player_kind),
            hp,
            players,
            bad_inputs,
        })
    }

    fn on_join(&mut self, ctx: &mut Ctx<'_>, player: &PlayerInfo) -> Result<(), JoinRefusal> {
        let bot = player
            .claims
            .get("bot")
            .and_then(serde_json::Value::as_u64)
            .and_then(|b| u32::try_from(b).ok())
            .unwrap_or(player.id.0);
        let pos = self.params.spawn(bot);
        let entity = ctx
            .world()
            .spawn(self.player_kind, pos.0, pos.1)
            .map_err(|e| JoinRefusal::new(1, e.to_string()))?;
        ctx.set_control(player.id, Some(entity));
        if self.params.scenario == Scenario::Interest {
            ctx.set_view(
                player.id,
                Some(self.params.radius as f32 + VIEW_SLACK),
                None,
            );
        }
        self.players.insert(player.id, Player { entity, pos });
        Ok(())
    }

    fn on_leave(&mut self, ctx: &mut Ctx<'_>, player: PlayerId, _why: LeaveReason) {
        if let Some(p) = self.players.remove(&player) {
            let _ = ctx.world().despawn(p.entity);
        }
    }

    fn sanitize(&mut self, _player: PlayerId, payload: &[u8]) -> Result<(f64, f64), InputRefusal> {
        match decode_input(payload) {
            Some((dx, dy)) if dx.is_finite() && dy.is_finite() => Ok((dx, dy)),
            Some(_) => {
                self.bad_inputs += 1;
                Err(InputRefusal::new(2, "non-finite displacement"))
            }
            None => {
                self.bad_inputs += 1;
                Err(InputRefusal::new(
                    1,
                    "expected 16 bytes: dx, dy as f64 little-endian",
                ))
            }
        }
    }

    fn on_input(&mut self, ctx: &mut Ctx<'_>, player: PlayerId, (dx, dy): (f64, f64)) {
        let bounds = self.params.player_bounds();
        let c = self.params.consts;
        if let Some(p) = self.players.get_mut(&player) {
            if let Some(pos) = apply_input(&c, p.pos, dx, dy, bounds) {
                p.pos = pos;
                let _ = ctx.world().set_pos(p.entity, pos.0, pos.1);
            }
        }
    }

    fn tick(&mut self, ctx: &mut Ctx<'_>) {
        let k = ctx.tick();
        self.move_npcs(ctx.world(), k);
    }

    /// Scenario A shows everything: replication may skip `can_see` and interest altogether.
    fn uses_can_see(&self) -> bool {
        self.params.scenario != Scenario::Broadcast
    }

    fn can_see(&self, viewer: PlayerId, entity: EntityId, world: &World) -> bool {
        self.sight(viewer, world)(entity)
    }

    /// The viewer is looked up once per patch, not once per entity in its range.
    fn sight<'a>(
        &'a self,
        viewer: PlayerId,
        world: &'a World,
    ) -> impl FnMut(EntityId) -> bool + 'a {
        let broadcast = self.params.scenario == Scenario::Broadcast;
        let me = self.players.get(&viewer).map(|p| p.pos);
        let radius = self.params.radius;
        move |entity| {
            broadcast || me.is_some_and(|me| world.pos(entity).is_ok_and(|e| within(me, e, radius)))
        }
    }
}

impl ArenaZone {
    /// The NPC kind id (index 0 of the schema).
    pub fn npc_kind(&self) -> KindId {
        self.npc_kind
    }
}

#[cfg(test)]
mod tests;
