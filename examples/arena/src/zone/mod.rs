//! The arena zone: players, drones, pickups and pillars in one replicated world.

mod image;
mod pickups;
#[cfg(test)]
mod tests;

use std::collections::BTreeMap;

use pickups::Pickup;
use std::hash::{Hash, Hasher};
use zonekeep_arena_rules::save::{saved_pickup, Pending, Saved, SavedPickup};

use zonekeep_core::fact::Settlement;
use zonekeep_core::world::{EntityId, KindId, World};
use zonekeep_core::{
    Ctx, InputRefusal, JoinRefusal, LeaveReason, PlayerId, PlayerInfo, StateHasher, Zone,
    ZoneConfig, ZoneError, ZoneInit,
};
use zonekeep_protocol::contract::{Contract, EventDef, InputDef, ValueType};
use zonekeep_protocol::schema::{FieldDef, FieldType, KindDef};

use crate::drones::DronePath;
use crate::identity::{display_name, distinct_hue, distinct_name, hue, MAX_NAME};
use crate::map::{random_open_point, spawn_point, PILLARS};
use crate::movement::{
    snap, step, MoveInput, MoveState, ARENA_H, ARENA_W, DIR_DOWN, DIR_LEFT, DIR_MASK, DIR_RIGHT,
    DIR_UP, DT, FLAG_MASK, FLAG_WALK, POS_STEP, TICK_HZ,
};

use zonekeep_arena_rules::game::SAVE_VERSION;
pub use zonekeep_arena_rules::game::{
    DEFAULT_DRONES, DEFAULT_PICKUPS, FACT_PICKUP, F_CONNECTED, F_HUE, F_NAME, F_RADIUS, F_SCORE,
    KIND_DRONE, KIND_PICKUP, KIND_PILLAR, KIND_PLAYER, MAX_NPCS, MAX_PLAYERS, PICKUP_RADIUS,
    PICKUP_SCORE, REFUSE_BAD_INPUT, RESPAWN_TICKS, SPAWN_RADIUS, TOPIC_PICKED, TOPIC_REFUSED,
    TOPIC_SAVED, VIEW_RADIUS,
};

#[derive(Debug, Clone, Copy)]
struct Kinds {
    player: KindId,
    drone: KindId,
    pickup: KindId,
    pillar: KindId,
}

/// One player's avatar.
#[derive(Debug, Clone)]
struct Avatar {
    entity: EntityId,
    principal: String,
    state: MoveState,
}

/// One drone and its entity.
#[derive(Debug, Clone)]
struct Drone {
    entity: EntityId,
    path: DronePath,
}

/// Counters a host or test can read.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ArenaStats {
    /// Pickups collected (facts emitted).
    pub picked: u64,
    /// Facts settled with a result.
    pub saved: u64,
    /// Facts refused by the sink.
    pub refused: u64,
    /// Pickups left in place because the fact queue was full.
    pub fact_overflow: u64,
}

/// The arena zone. Create params (JSON, all optional): `{"drones": 0..=512, "pickups": 0..=512}`.
/// Inputs: [`MoveInput`] payloads. Events: [`TOPIC_PICKED`], [`TOPIC_SAVED`], [`TOPIC_REFUSED`].
#[derive(Debug)]
pub struct Arena {
    kinds: Kinds,
    tick: u64,
    players: BTreeMap<PlayerId, Avatar>,
    drones: Vec<Drone>,
    pickups: Vec<Pickup>,
    scores: BTreeMap<String, u32>,
    pending: BTreeMap<String, Pending>,
    stats: ArenaStats,
}

fn failed(e: impl std::fmt::Display) -> ZoneError {
    ZoneError::Failed(e.to_string())
}

fn count_param(init: &ZoneInit, key: &str, default: u32) -> Result<u32, ZoneError> {
    zonekeep_arena_rules::game::count_param(init.params.get(key), key, default)
        .map_err(ZoneError::InvalidParams)
}

/// The settings the arena needs from its host: the movement step assumes 30 Hz ticks and the
/// clients' prediction assumes the 0.01 position quantum. [`zone_config`] gives both.
fn check_config(ctx: &Ctx<'_>) -> Result<(), ZoneError> {
    let hz = 1_000_000_000 / ctx.dt().as_nanos().max(1);
    if hz != u128::from(TICK_HZ) {
        return Err(ZoneError::InvalidParams(format!(
            "the arena runs at {TICK_HZ} Hz, not {hz} Hz"
        )));
    }
    let step = ctx.world_ref().pos_step();
    if step.to_bits() != POS_STEP.to_bits() {
        return Err(ZoneError::InvalidParams(format!(
            "the arena needs replication.pos_step = {POS_STEP}, not {step}"
        )));
    }
    Ok(())
}

/// The zone configuration an arena kind should be registered with: 30 Hz ticks and patches, the
/// 0.01 position quantum, a [`VIEW_RADIUS`] interest radius on a grid of the same size, and the
/// number of players a page comfortably shows.
pub fn zone_config() -> ZoneConfig {
    let mut config = ZoneConfig {
        tick_hz: TICK_HZ,
        patch_every: 1,
        max_players: MAX_PLAYERS,
        // A player's score is a stat of its character, which follows it from arena to arena.
        characters: true,
        ..ZoneConfig::default()
    };
    config.replication.pos_step = POS_STEP;
    config.replication.view_radius = VIEW_RADIUS;
    config.replication.cell_size = VIEW_RADIUS;
    config
}

/// What the arena's clients send and hear besides entities: the move input, the score events
/// and the constants a page needs. `zonekeep codegen --kind arena` writes the page's and the SDK
/// samples' typed code from it.
pub fn arena_contract() -> Contract {
    let c = |v: u8| i64::from(v);
    Contract::new()
        .constant("DIR_UP", c(DIR_UP), "Direction bit: up (-y).")
        .constant("DIR_DOWN", c(DIR_DOWN), "Direction bit: down (+y).")
        .constant("DIR_LEFT", c(DIR_LEFT), "Direction bit: left (-x).")
        .constant("DIR_RIGHT", c(DIR_RIGHT), "Direction bit: right (+x).")
        .constant("DIR_MASK", c(DIR_MASK), "Every direction bit.")
        .constant("FLAG_WALK", c(FLAG_WALK), "Flag bit: walk instead of run.")
        .constant("FLAG_MASK", c(FLAG_MASK), "Every flag bit.")
        .constant(
            "REFUSE_BAD_INPUT",
            i64::from(REFUSE_BAD_INPUT),
            "Input refusal: the payload is not a move.",
        )
        .constant(
            "MAX_PLAYERS",
            i64::from(MAX_PLAYERS),
            "Most players in one arena.",
        )
        .input(
            InputDef::new(
                "move",
                "One tick of movement: direction bits and flag bits.",
            )
            .value(
                "dir",
                ValueType::U8,
                "Direction bits (DIR_*); others are dropped.",
            )
            .optional(
                "flags",
                ValueType::U8,
                "Flag bits (FLAG_*); others are dropped.",
            ),
        )
        .event(
            EventDef::new(
                "picked",
                TOPIC_PICKED,
                "You collected a pickup; its points are being saved.",
            )
            .value("amount", ValueType::U32, "Points collected."),
        )
        .event(
            EventDef::new("saved", TOPIC_SAVED, "Points you collected are saved.")
                .value("amount", ValueType::U32, "Points saved.")
                .value("total", ValueType::U32, "Your saved total."),
        )
        .event(
            EventDef::new(
                "refused",
                TOPIC_REFUSED,
                "Points you collected could not be saved.",
            )
            .value("reason", ValueType::RestStr, "Why, as the store said."),
        )
}

fn kind(name: &str, fields: Vec<FieldDef>) -> KindDef {
    KindDef {
        name: name.into(),
        fields,
    }
}

fn field(name: &str, ty: FieldType) -> FieldDef {
    FieldDef {
        name: name.into(),
        ty,
    }
}

/// Declares the arena's kinds and spawns the pillars (global: every client needs them to predict).
fn build_world(world: &mut World) -> Result<Kinds, ZoneError> {
    let kinds = Kinds {
        player: world
            .declare_kind(kind(
                KIND_PLAYER,
                vec![
                    field(
                        "name",
                        FieldType::Str {
                            max_len: MAX_NAME as u8,
                        },
                    ),
                    field("hue", FieldType::UInt),
                    field("score", FieldType::UInt),
                    field("connected", FieldType::Bool),
                ],
            ))
            .map_err(failed)?,
        drone: world
            .declare_kind(kind(KIND_DRONE, Vec::new()))
            .map_err(failed)?,
        pickup: world
            .declare_kind(kind(KIND_PICKUP, Vec::new()))
            .map_err(failed)?,
        pillar: world
            .declare_kind(kind(KIND_PILLAR, vec![field("radius", FieldType::F32)]))
            .map_err(failed)?,
    };
    for p in &PILLARS {
        let id = world.spawn(kinds.pillar, p.x, p.y).map_err(failed)?;
        world.set_f32(id, F_RADIUS, p.r).map_err(failed)?;
        world.set_global(id, true).map_err(failed)?;
    }
    Ok(kinds)
}

fn spawn_drones(ctx: &mut Ctx<'_>, kinds: Kinds, n: u32) -> Result<Vec<Drone>, ZoneError> {
    let mut drones = Vec::with_capacity(n as usize);
    for _ in 0..n {
        let path = DronePath::random(ctx.rng());
        let (x, y) = path.pos();
        let entity = ctx.world().spawn(kinds.drone, x, y).map_err(failed)?;
        drones.push(Drone { entity, path });
    }
    Ok(drones)
}

impl Arena {
    /// The zone's counters.
    pub fn stats(&self) -> ArenaStats {
        self.stats
    }

    /// A principal's saved score (as last settled, or as its character brought it).
    pub fn score(&self, principal: &str) -> u32 {
        self.scores.get(principal).copied().unwrap_or(0)
    }

    /// A player's position, if it is a player here.
    pub fn position(&self, player: PlayerId) -> Option<MoveState> {
        self.players.get(&player).map(|a| a.state)
    }

    /// The entity of a player's avatar.
    pub fn avatar(&self, player: PlayerId) -> Option<EntityId> {
        self.players.get(&player).map(|a| a.entity)
    }

    /// Positions of the pickups that are present, in order.
    pub fn pickups(&self) -> Vec<(f32, f32)> {
        self.pickups
            .iter()
            .filter(|p| p.entity.is_some())
            .map(|p| (p.x, p.y))
            .collect()
    }

    /// Number of facts emitted and not yet settled.
    pub fn pending_facts(&self) -> usize {
        self.pending.len()
    }

    /// Names and hues of the players present, to keep a newcomer's distinct from them.
    fn identities(&self, world: &World) -> (Vec<String>, Vec<u32>) {
        let mut names = Vec::with_capacity(self.players.len());
        let mut hues = Vec::with_capacity(self.players.len());
        for a in self.players.values() {
            if let Ok(n) = world.get_str(a.entity, F_NAME) {
                names.push(n.to_owned());
            }
            if let Ok(h) = world.get_uint(a.entity, F_HUE) {
                hues.push(h);
            }
        }
        (names, hues)
    }

    fn set_connected(&self, ctx: &mut Ctx<'_>, player: PlayerId, connected: bool) {
        if let Some(a) = self.players.get(&player) {
            let _ = ctx.world().set_bool(a.entity, F_CONNECTED, connected);
        }
    }

    fn new_pickup(ctx: &mut Ctx<'_>, kinds: Kinds) -> Result<Pickup, ZoneError> {
        let (x, y) = random_open_point(ctx.rng(), 2.0);
        let (x, y) = (snap(x), snap(y));
        let entity = ctx.world().spawn(kinds.pickup, x, y).map_err(failed)?;
        Ok(Pickup {
            x,
            y,
            respawn_at: 0,
            entity: Some(entity),
        })
    }

    fn from_parts(
        ctx: &mut Ctx<'_>,
        drones: u32,
        pickups: Option<Vec<SavedPickup>>,
        pickup_count: u32,
    ) -> Result<Arena, ZoneError> {
        let kinds = build_world(ctx.world())?;
        let drones = spawn_drones(ctx, kinds, drones)?;
        let tick = ctx.tick();
        let pickups = match pickups {
            None => (0..pickup_count)
                .map(|_| Self::new_pickup(ctx, kinds))
                .collect::<Result<Vec<_>, _>>()?,
            Some(saved) => {
                let mut out = Vec::with_capacity(saved.len());
                for p in saved {
                    // Saved `respawn_at` is relative; present pickups were saved with 0.
                    let mut pickup = Pickup {
                        x: p.x,
                        y: p.y,
                        respawn_at: p.respawn_at,
                        entity: None,
                    };
                    if p.respawn_at == 0 {
                        pickup.entity =
                            Some(ctx.world().spawn(kinds.pickup, p.x, p.y).map_err(failed)?);
                    } else {
                        pickup.respawn_at += tick;
                    }
                    out.push(pickup);
                }
                out
            }
        };
        Ok(Arena {
            kinds,
            tick,
            players: BTreeMap::new(),
            drones,
            pickups,
            scores: BTreeMap::new(),
            pending: BTreeMap::new(),
            stats: ArenaStats::default(),
        })
    }
}

impl Zone for Arena {
    type Input = MoveInput;

    fn contract(&self) -> Contract {
        arena_contract()
    }

    fn create(init: &ZoneInit, ctx: &mut Ctx<'_>) -> Result<Self, ZoneError> {
        check_config(ctx)?;
        let drones = count_param(init, "drones", DEFAULT_DRONES)?;
        let pickups = count_param(init, "pickups", DEFAULT_PICKUPS)?;
        Self::from_parts(ctx, drones, None, pickups)
    }

    fn restore(init: &ZoneInit, ctx: &mut Ctx<'_>, bytes: &[u8]) -> Result<Self, ZoneError> {
        let saved = Saved::read(bytes).map_err(ZoneError::Restore)?;
        check_config(ctx)?;
        let drones = count_param(init, "drones", DEFAULT_DRONES)?;
        let mut arena = Self::from_parts(ctx, drones, Some(saved.pickups), 0)?;
        arena.scores = saved.scores;
        arena.pending = saved.pending;
        Ok(arena)
    }

    fn image(&self) -> Option<Vec<u8>> {
        self.take_image()
    }

    fn from_image(_init: &ZoneInit, ctx: &mut Ctx<'_>, bytes: &[u8]) -> Result<Self, ZoneError> {
        Self::from_image_bytes(ctx, bytes)
    }

    fn save(&self) -> Option<Vec<u8>> {
        let pickups = self
            .pickups
            .iter()
            .map(|p| saved_pickup(p.x, p.y, p.entity.is_some(), p.respawn_at, self.tick))
            .collect();
        let saved = Saved {
            version: SAVE_VERSION,
            scores: self.scores.clone(),
            pending: self.pending.clone(),
            pickups,
        };
        Some(saved.to_bytes())
    }

    fn on_join(&mut self, ctx: &mut Ctx<'_>, player: &PlayerInfo) -> Result<(), JoinRefusal> {
        let principal = player.principal.as_str().to_owned();
        // Two players who asked for the same name, or whose principals hash to similar hues, must
        // still be told apart on screen: both are made distinct from the players present.
        let (names, hues) = self.identities(ctx.world_ref());
        let name = distinct_name(
            &display_name(
                player.claims.get("name").and_then(|v| v.as_str()),
                &principal,
            ),
            &names,
        );
        let player_hue = distinct_hue(hue(&principal), &hues);
        let state = spawn_point(ctx.rng());
        // The character's score is the player's wherever it was earned; without a character
        // (a host that keeps none) the score this arena settled stands.
        if let Some(score) = ctx.character(player.id).and_then(character_score) {
            self.scores.insert(principal.clone(), score);
        }
        let score = self.score(&principal);
        let world = ctx.world();
        let entity = world
            .spawn(self.kinds.player, state.x, state.y)
            .map_err(|e| JoinRefusal::new(1, e.to_string()))?;
        let fields = world
            .set_str(entity, F_NAME, &name)
            .and_then(|_| world.set_uint(entity, F_HUE, player_hue))
            .and_then(|_| world.set_uint(entity, F_SCORE, score))
            .and_then(|_| world.set_bool(entity, F_CONNECTED, true));
        if let Err(e) = fields {
            let _ = world.despawn(entity);
            return Err(JoinRefusal::new(1, e.to_string()));
        }
        ctx.set_control(player.id, Some(entity));
        ctx.set_view(player.id, Some(VIEW_RADIUS), None);
        self.players.insert(
            player.id,
            Avatar {
                entity,
                principal,
                state,
            },
        );
        Ok(())
    }

    fn on_observe(&mut self, ctx: &mut Ctx<'_>, observer: &PlayerInfo) -> Result<(), JoinRefusal> {
        // Observers watch the whole arena from its centre.
        let whole = (ARENA_W * ARENA_W + ARENA_H * ARENA_H).sqrt();
        ctx.set_view(
            observer.id,
            Some(whole),
            Some((ARENA_W / 2.0, ARENA_H / 2.0)),
        );
        Ok(())
    }

    fn on_leave(&mut self, ctx: &mut Ctx<'_>, player: PlayerId, _why: LeaveReason) {
        if let Some(a) = self.players.remove(&player) {
            let _ = ctx.world().despawn(a.entity);
        }
    }

    fn on_drop(&mut self, ctx: &mut Ctx<'_>, player: PlayerId) {
        self.set_connected(ctx, player, false);
    }

    fn on_rejoin(&mut self, ctx: &mut Ctx<'_>, player: PlayerId) {
        self.set_connected(ctx, player, true);
    }

    fn sanitize(&mut self, _player: PlayerId, payload: &[u8]) -> Result<MoveInput, InputRefusal> {
        MoveInput::decode(payload)
            .ok_or_else(|| InputRefusal::new(REFUSE_BAD_INPUT, "expected 1 or 2 bytes"))
    }

    fn on_input(&mut self, ctx: &mut Ctx<'_>, player: PlayerId, input: MoveInput) {
        let Some(a) = self.players.get_mut(&player) else {
            return;
        };
        let next = step(&a.state, &input, DT, &PILLARS);
        if next != a.state {
            a.state = next;
            let _ = ctx.world().set_pos(a.entity, next.x, next.y);
        }
    }

    fn tick(&mut self, ctx: &mut Ctx<'_>) {
        self.tick = ctx.tick();
        for d in &mut self.drones {
            let (x, y) = d.path.advance(DT);
            let _ = ctx.world().set_pos(d.entity, x, y);
        }
        self.respawn_pickups(ctx);
        self.collect_pickups(ctx);
    }

    fn on_fact_settled(&mut self, ctx: &mut Ctx<'_>, settlement: &Settlement) {
        self.settle(ctx, settlement);
    }

    fn state_hash(&self) -> Option<u64> {
        let mut h = StateHasher::new();
        for (id, a) in &self.players {
            id.0.hash(&mut h);
            h.write_u32(a.state.x.to_bits());
            h.write_u32(a.state.y.to_bits());
        }
        for p in &self.pickups {
            p.entity.is_some().hash(&mut h);
            p.respawn_at.hash(&mut h);
        }
        for (k, v) in &self.scores {
            k.hash(&mut h);
            v.hash(&mut h);
        }
        self.pending.len().hash(&mut h);
        Some(h.finish())
    }
}

/// The score a character carries: the JSON object `{"score": n}` (anything else: none yet).
pub fn character_score(character: &[u8]) -> Option<u32> {
    let v: serde_json::Value = serde_json::from_slice(character).ok()?;
    v.get("score")
        .and_then(serde_json::Value::as_u64)
        .map(|s| u32::try_from(s).unwrap_or(u32::MAX))
}

/// A character carrying `score`, as [`character_score`] reads it.
pub fn character_with_score(score: u32) -> Vec<u8> {
    serde_json::json!({ "score": score })
        .to_string()
        .into_bytes()
}
