//! The demo arena as a Zonekeep zone module: the game of `zonekeep-arena` (players moving
//! around pillars, drones flying loops, pickups whose facts raise a saved score) written against
//! the guest SDK and built for `wasm32-unknown-unknown`, so the stock binary serves it with
//! `zonekeep serve --module arena=FILE`. The page plays it unchanged: the same kinds, fields,
//! events and inputs, the same movement rule (which the page also runs, compiled, for its
//! prediction), and the native zone's save format (behind the SDK's header).
//!
//! This crate owns the module's side of the game: its hooks, its state, its saves. The rules
//! themselves live once, in `zonekeep-arena-rules`. It must never depend on the host crates: a
//! module imports nothing but the host's log.
//!
//! Differences from the native zone, all from what a module can know: the drones and pickups of
//! a zone are drawn from the module's own RNG stream (seeded by the host), so a module arena and
//! a native one with the same seed place them differently; a fact the host could not queue is
//! not seen by the module, so it keeps at most [`MAX_PENDING`] unsettled pickups and leaves the
//! rest in place, as the native zone does when its queue is full.

use std::collections::BTreeMap;

use zonekeep_arena_rules::drones::DronePath;
use zonekeep_arena_rules::game::{
    count_param, touches, DEFAULT_DRONES, DEFAULT_PICKUPS, FACT_PICKUP, KIND_DRONE, KIND_PICKUP,
    MAX_PLAYERS, PICKUP_SCORE, REFUSE_BAD_INPUT, RESPAWN_TICKS, SAVE_VERSION, TOPIC_PICKED,
    TOPIC_REFUSED, TOPIC_SAVED, VIEW_RADIUS,
};
use zonekeep_arena_rules::identity::{display_name, distinct_hue, distinct_name, hue, MAX_NAME};
use zonekeep_arena_rules::map::{random_open_point, spawn_point, PILLARS};
use zonekeep_arena_rules::movement::{
    snap, step, MoveInput, MoveState, ARENA_H, ARENA_W, DT, POS_STEP, TICK_HZ,
};
use zonekeep_arena_rules::save::{saved_pickup, Pending, Saved, SavedPickup};
use zonekeep_guest::{
    export_zone, Ctx, Entity, EntityKind, EventTarget, Kind, KindDef, LeaveReason, Player,
    PlayerId, Refusal, Role, Settings, Zone,
};

/// Most pickups waiting for their fact's settlement; beyond it pickups stay in place until
/// some settle (well under a host's bound on facts in flight, 1,024 by default).
pub const MAX_PENDING: usize = 256;

/// A player's replicated fields (the `player` kind).
#[derive(Debug, Clone, Default, PartialEq, EntityKind)]
#[entity(name = "player")]
pub struct Avatar {
    /// Display name.
    #[field(str(max_len = 16))]
    pub name: String,
    /// Hue in degrees.
    pub hue: u32,
    /// Saved score.
    pub score: u32,
    /// Whether the player's connection is up.
    pub connected: bool,
}

/// A pillar's replicated fields (the `pillar` kind).
#[derive(Debug, Clone, Default, PartialEq, EntityKind)]
#[entity(name = "pillar")]
pub struct PillarFields {
    /// Radius (exact, so clients collide with the same value).
    pub radius: f32,
}

/// The kinds, in the native zone's order.
#[derive(Debug, Clone, Copy)]
struct Kinds {
    player: Kind,
    drone: Kind,
    pickup: Kind,
}

/// A player in the arena.
#[derive(Debug, Clone)]
struct Runner {
    entity: Entity,
    principal: String,
    state: MoveState,
    fields: Avatar,
}

/// A pickup: present (with an entity) or waiting to respawn.
#[derive(Debug, Clone, PartialEq)]
struct Pickup {
    x: f32,
    y: f32,
    /// Tick at which it reappears (only meaningful while absent).
    respawn_at: u64,
    entity: Option<Entity>,
}

/// The guest SDK's RNG as the `rand_core` generator the shared rules draw from.
struct Draw<'a>(&'a mut zonekeep_guest::Rng);

impl rand_core::RngCore for Draw<'_> {
    fn next_u32(&mut self) -> u32 {
        self.0.next_u32()
    }

    fn next_u64(&mut self) -> u64 {
        self.0.next_u64()
    }

    fn fill_bytes(&mut self, dst: &mut [u8]) {
        for chunk in dst.chunks_mut(8) {
            let word = self.0.next_u64().to_le_bytes();
            chunk.copy_from_slice(&word[..chunk.len()]);
        }
    }
}

/// The arena zone, as a module.
#[derive(Debug)]
pub struct Arena {
    kinds: Kinds,
    /// The last tick run (a save counts waiting pickups' ticks from it).
    tick: u64,
    players: BTreeMap<PlayerId, Runner>,
    drones: Vec<(Entity, DronePath)>,
    pickups: Vec<Pickup>,
    scores: BTreeMap<String, u32>,
    pending: BTreeMap<String, Pending>,
}

/// The create params as an object (`{}` when absent).
fn params_of(params: &str) -> Result<serde_json::Map<String, serde_json::Value>, String> {
    match serde_json::from_str::<serde_json::Value>(params) {
        Ok(serde_json::Value::Object(m)) => Ok(m),
        Ok(serde_json::Value::Null) => Ok(serde_json::Map::new()),
        Ok(_) => Err("create params must be a JSON object".into()),
        Err(e) => Err(format!("create params: {e}")),
    }
}

fn new_pickup(ctx: &mut Ctx<'_>, kind: Kind) -> Pickup {
    let (x, y) = random_open_point(&mut Draw(ctx.rng()), 2.0);
    let (x, y) = (snap(x), snap(y));
    Pickup {
        x,
        y,
        respawn_at: 0,
        entity: Some(ctx.spawn(kind, x, y)),
    }
}

impl Arena {
    /// Declares the kinds, spawns the pillars and the drones, and places the pickups (`saved`:
    /// as a save left them; else `pickups` new ones).
    fn build(
        ctx: &mut Ctx<'_>,
        params: &str,
        saved: Option<Vec<SavedPickup>>,
        pickups: Option<u32>,
    ) -> Result<Arena, String> {
        let params = params_of(params)?;
        let drones = count_param(params.get("drones"), "drones", DEFAULT_DRONES)?;
        let pickup_count = match pickups {
            Some(n) => n,
            None => count_param(params.get("pickups"), "pickups", DEFAULT_PICKUPS)?,
        };
        let kinds = Kinds {
            player: ctx.declare::<Avatar>(),
            drone: ctx.declare_kind(KindDef::new(KIND_DRONE)),
            pickup: ctx.declare_kind(KindDef::new(KIND_PICKUP)),
        };
        let pillar = ctx.declare::<PillarFields>();
        for p in &PILLARS {
            let e = ctx.spawn_with(pillar, p.x, p.y, &PillarFields { radius: p.r });
            ctx.set_global(e, true);
        }
        let drones = (0..drones)
            .map(|_| {
                let path = DronePath::random(&mut Draw(ctx.rng()));
                let (x, y) = path.pos();
                (ctx.spawn(kinds.drone, x, y), path)
            })
            .collect();
        let tick = ctx.tick();
        let pickups = match saved {
            None => (0..pickup_count)
                .map(|_| new_pickup(ctx, kinds.pickup))
                .collect(),
            Some(saved) => saved
                .into_iter()
                .map(|p| {
                    // A present pickup was saved with 0, a waiting one with its ticks to go.
                    let present = p.respawn_at == 0;
                    Pickup {
                        x: p.x,
                        y: p.y,
                        respawn_at: if present { 0 } else { p.respawn_at + tick },
                        entity: present.then(|| ctx.spawn(kinds.pickup, p.x, p.y)),
                    }
                })
                .collect(),
        };
        Ok(Arena {
            kinds,
            tick,
            players: BTreeMap::new(),
            drones,
            pickups,
            scores: BTreeMap::new(),
            pending: BTreeMap::new(),
        })
    }

    fn score(&self, principal: &str) -> u32 {
        self.scores.get(principal).copied().unwrap_or(0)
    }

    fn set_connected(&mut self, ctx: &mut Ctx<'_>, player: PlayerId, connected: bool) {
        if let Some(r) = self.players.get_mut(&player) {
            let before = r.fields.clone();
            r.fields.connected = connected;
            ctx.update(r.entity, &before, &r.fields);
        }
    }

    fn respawn_pickups(&mut self, ctx: &mut Ctx<'_>) {
        let tick = ctx.tick();
        for p in &mut self.pickups {
            if p.entity.is_none() && tick >= p.respawn_at {
                let (x, y) = random_open_point(&mut Draw(ctx.rng()), 2.0);
                p.x = snap(x);
                p.y = snap(y);
                p.entity = Some(ctx.spawn(self.kinds.pickup, p.x, p.y));
            }
        }
    }

    fn collect_pickups(&mut self, ctx: &mut Ctx<'_>) {
        for p in &mut self.pickups {
            let Some(entity) = p.entity else {
                continue;
            };
            if self.pending.len() >= MAX_PENDING {
                return;
            }
            // Players in id order: the lowest id wins a tie, deterministically.
            let Some((&player, runner)) = self
                .players
                .iter()
                .find(|(_, r)| touches(r.state.x, r.state.y, p.x, p.y))
            else {
                continue;
            };
            let payload = format!(r#"{{"add":{{"score":{PICKUP_SCORE}}}}}"#);
            let key = ctx.emit_fact(FACT_PICKUP, &payload, Some(&runner.principal), None);
            self.pending.insert(
                key,
                Pending {
                    principal: runner.principal.clone(),
                    amount: PICKUP_SCORE,
                },
            );
            ctx.despawn(entity);
            p.entity = None;
            p.respawn_at = ctx.tick() + RESPAWN_TICKS;
            ctx.event(
                EventTarget::Player(player),
                TOPIC_PICKED,
                &PICKUP_SCORE.to_le_bytes(),
            );
        }
    }

    /// Sets the score of every avatar of `principal` and tells its player.
    fn announce_score(&mut self, ctx: &mut Ctx<'_>, principal: &str, amount: u32, total: u32) {
        for (&player, r) in self.players.iter_mut() {
            if r.principal != principal {
                continue;
            }
            let before = r.fields.clone();
            r.fields.score = total;
            ctx.update(r.entity, &before, &r.fields);
            let mut payload = amount.to_le_bytes().to_vec();
            payload.extend_from_slice(&total.to_le_bytes());
            ctx.event(EventTarget::Player(player), TOPIC_SAVED, &payload);
        }
    }
}

/// A move intent: the arena's [`MoveInput`] as the SDK's input type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Intent(pub MoveInput);

impl zonekeep_guest::Input for Intent {
    fn decode(bytes: &[u8]) -> Result<Self, zonekeep_guest::DecodeError> {
        MoveInput::decode(bytes)
            .map(Intent)
            .ok_or(zonekeep_guest::DecodeError::Invalid(
                "expected 1 or 2 bytes",
            ))
    }
}

impl Zone for Arena {
    type Input = Intent;

    fn settings() -> Settings {
        Settings::new()
            .tick_hz(TICK_HZ)
            .patch_every(1)
            .max_players(MAX_PLAYERS)
            .pos_step(POS_STEP)
            .view_radius(VIEW_RADIUS)
            .cell_size(VIEW_RADIUS)
    }

    fn create(ctx: &mut Ctx<'_>, params: &str) -> Result<Self, String> {
        Self::build(ctx, params, None, None)
    }

    fn restore(ctx: &mut Ctx<'_>, params: &str, bytes: &[u8]) -> Result<Self, String> {
        let saved = Saved::read(bytes)?;
        let mut arena = Self::build(ctx, params, Some(saved.pickups), Some(0))?;
        arena.scores = saved.scores;
        arena.pending = saved.pending;
        Ok(arena)
    }

    fn save(&self) -> Vec<u8> {
        let saved = Saved {
            version: SAVE_VERSION,
            scores: self.scores.clone(),
            pending: self.pending.clone(),
            pickups: self
                .pickups
                .iter()
                .map(|p| saved_pickup(p.x, p.y, p.entity.is_some(), p.respawn_at, self.tick))
                .collect(),
        };
        saved.to_bytes()
    }

    fn on_join(&mut self, ctx: &mut Ctx<'_>, player: Player) -> Result<(), Refusal> {
        if player.role == Role::Observer {
            // Observers watch the whole arena from its centre.
            let whole = (ARENA_W * ARENA_W + ARENA_H * ARENA_H).sqrt();
            ctx.set_view(player.id, Some(whole), Some((ARENA_W / 2.0, ARENA_H / 2.0)));
            return Ok(());
        }
        let claims: serde_json::Map<String, serde_json::Value> =
            serde_json::from_str(&player.claims).unwrap_or_default();
        let names: Vec<String> = self
            .players
            .values()
            .map(|r| r.fields.name.clone())
            .collect();
        let hues: Vec<u32> = self.players.values().map(|r| r.fields.hue).collect();
        let claimed = claims.get("name").and_then(|v| v.as_str());
        let mut name = distinct_name(&display_name(claimed, &player.principal), &names);
        // The field's wire limit; a longer name would fail the zone.
        while name.len() > MAX_NAME {
            name.pop();
        }
        let fields = Avatar {
            name,
            hue: distinct_hue(hue(&player.principal), &hues),
            score: self.score(&player.principal),
            connected: true,
        };
        let state = spawn_point(&mut Draw(ctx.rng()));
        let entity = ctx.spawn_with(self.kinds.player, state.x, state.y, &fields);
        ctx.set_control(player.id, Some(entity));
        ctx.set_view(player.id, Some(VIEW_RADIUS), None);
        self.players.insert(
            player.id,
            Runner {
                entity,
                principal: player.principal,
                state,
                fields,
            },
        );
        Ok(())
    }

    fn on_leave(&mut self, ctx: &mut Ctx<'_>, player: PlayerId, _why: LeaveReason) {
        if let Some(r) = self.players.remove(&player) {
            ctx.despawn(r.entity);
        }
    }

    fn on_drop(&mut self, ctx: &mut Ctx<'_>, player: PlayerId) {
        self.set_connected(ctx, player, false);
    }

    fn on_rejoin(&mut self, ctx: &mut Ctx<'_>, player: PlayerId) {
        self.set_connected(ctx, player, true);
    }

    fn sanitize(&mut self, _player: PlayerId, payload: &[u8]) -> Result<Intent, Refusal> {
        MoveInput::decode(payload)
            .map(Intent)
            .ok_or_else(|| Refusal::new(REFUSE_BAD_INPUT, "expected 1 or 2 bytes"))
    }

    fn on_input(&mut self, ctx: &mut Ctx<'_>, player: PlayerId, Intent(input): Intent) {
        let Some(r) = self.players.get_mut(&player) else {
            return;
        };
        let next = step(&r.state, &input, DT, &PILLARS);
        if next != r.state {
            r.state = next;
            ctx.set_pos(r.entity, next.x, next.y);
        }
    }

    fn tick(&mut self, ctx: &mut Ctx<'_>) {
        self.tick = ctx.tick();
        for (entity, path) in &mut self.drones {
            let (x, y) = path.advance(DT);
            ctx.set_pos(*entity, x, y);
        }
        self.respawn_pickups(ctx);
        self.collect_pickups(ctx);
    }

    fn on_fact_settled(&mut self, ctx: &mut Ctx<'_>, key: &str, outcome: Result<&str, &str>) {
        let Some(p) = self.pending.remove(key) else {
            return;
        };
        match outcome {
            Ok(result) => {
                // The ledger answers with the principal's totals: the durable truth, immune to a
                // settlement seen twice after a restore. Other sinks: count it here.
                let total = serde_json::from_str::<serde_json::Value>(result)
                    .ok()
                    .and_then(|v| v.get("score").and_then(|s| s.as_u64()))
                    .map(|t| u32::try_from(t).unwrap_or(u32::MAX))
                    .unwrap_or_else(|| self.score(&p.principal).saturating_add(p.amount));
                self.scores.insert(p.principal.clone(), total);
                self.announce_score(ctx, &p.principal, p.amount, total);
            }
            Err(reason) => {
                let text: String = reason.chars().take(200).collect();
                for (&player, r) in &self.players {
                    if r.principal == p.principal {
                        ctx.event(EventTarget::Player(player), TOPIC_REFUSED, text.as_bytes());
                    }
                }
            }
        }
    }
}

export_zone!(Arena);

#[cfg(test)]
mod tests;
