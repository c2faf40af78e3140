//! The cells demo: an endless-feeling world cut into a grid of zones, players walking across the
//! borders without noticing.
//!
//! The world is [`COLS`] × [`ROWS`] cells, each the arena's size ([`CELL_W`] × [`CELL_H`]); cell
//! `(cx, cy)` is the zone `cell-CX-CY` ([`cell_id`]) of kind [`KIND_CELLS`] and covers
//! `x ∈ [cx·W, (cx+1)·W)`, `y ∈ [cy·H, (cy+1)·H)`. Every cell keeps positions in **world
//! coordinates**, so a page draws what several cells send without translating anything.
//!
//! A player walks with the arena's speeds ([`step`], clamped to the world's edge, no pillars). When
//! its position leaves its cell by more than [`HYSTERESIS`] (so a player standing on a border does
//! not bounce between two zones), the cell transfers it to the cell it is in ([`cell_at`]), handing
//! over its position ([`Carried`]); the neighbour places it exactly there. The page predicts with the
//! same rule and stops sending inputs once its prediction leaves the cell, so no input is lost to
//! the move and the walker's own position never jumps.
//!
//! The entity a departing player leaves behind stays drawn where it crossed for [`GHOST_TICKS`]
//! (a *ghost*): a page watching the old cell keeps seeing the walker until the new cell shows it,
//! and tells the two copies apart by the `who` field (the same for one principal in every cell,
//! [`who`]) and by which copy lies inside its own cell.
//!
//! Observers see their whole cell: a page near a border observes the neighbour cells
//! (`role=observer` tickets), so players just across the border are drawn before it crosses.

#[cfg(test)]
mod tests;

use std::collections::BTreeMap;
use std::hash::Hasher;

use zonekeep_core::rand_core::RngCore;

use zonekeep_core::world::{EntityId, KindId, World};
use zonekeep_core::{
    Arrival, Claims, Ctx, EventTarget, InputRefusal, JoinRefusal, LeaveReason, PlayerId,
    PlayerInfo, Role, StateHasher, Zone, ZoneConfig, ZoneError, ZoneInit,
};
use zonekeep_protocol::schema::{FieldDef, FieldType, KindDef};

use crate::identity::{display_name, hue, MAX_NAME};
use crate::movement::{
    displacement, snap, MoveInput, MoveState, ARENA_H, ARENA_W, DT, PLAYER_RADIUS, POS_STEP,
    TICK_HZ,
};

/// The zone kind the cells are registered as.
pub const KIND_CELLS: &str = "cells";
/// Cells across.
pub const COLS: u32 = 3;
/// Cells down.
pub const ROWS: u32 = 3;
/// A cell's width in world units (the arena's).
pub const CELL_W: f32 = ARENA_W;
/// A cell's height in world units (the arena's).
pub const CELL_H: f32 = ARENA_H;
/// How far past its cell's border a player walks before it is moved to the neighbour.
pub const HYSTERESIS: f32 = 1.0;
/// Ticks a departed player's entity stays where it crossed (one second).
pub const GHOST_TICKS: u64 = 30;
/// The player kind's name.
pub const KIND_PLAYER: &str = "player";
/// Field of the player kind: its display name.
pub const F_NAME: usize = 0;
/// Field of the player kind: its hue.
pub const F_HUE: usize = 1;
/// Field of the player kind: who it is ([`who`] of its principal), the same in every cell.
pub const F_WHO: usize = 2;
/// Event topic to a player on joining or arriving: its cell's id (UTF-8).
pub const TOPIC_CELL: u16 = 1;
/// Event topic to a player whose walk across a border could not start: the reason (UTF-8).
pub const TOPIC_STUCK: u16 = 2;
/// InputRefused code of a payload that is not a move.
pub const REFUSE_BAD_INPUT: u16 = 1;
/// JoinRefusal code of an arrival that is not next to this cell (or whose state is unreadable).
pub const REFUSE_NOT_HERE: u16 = 2;
/// Players one cell holds.
pub const MAX_PLAYERS: u32 = 64;

/// The zone id of cell `(cx, cy)`.
pub fn cell_id(cx: u32, cy: u32) -> String {
    format!("cell-{cx}-{cy}")
}

/// The cell a zone id names, if it names one of the grid.
pub fn parse_cell_id(id: &str) -> Option<(u32, u32)> {
    let rest = id.strip_prefix("cell-")?;
    let (a, b) = rest.split_once('-')?;
    let digits = |s: &str| !s.is_empty() && s.len() <= 3 && s.bytes().all(|c| c.is_ascii_digit());
    if !digits(a) || !digits(b) {
        return None;
    }
    let (cx, cy) = (a.parse().ok()?, b.parse().ok()?);
    (cx < COLS && cy < ROWS).then_some((cx, cy))
}

/// The cell a world position lies in (`None` outside the world).
pub fn cell_at(x: f32, y: f32) -> Option<(u32, u32)> {
    if !(x >= 0.0 && y >= 0.0) {
        return None;
    }
    let cx = (x / CELL_W).floor();
    let cy = (y / CELL_H).floor();
    if cx >= COLS as f32 || cy >= ROWS as f32 {
        return None;
    }
    Some((cx as u32, cy as u32))
}

/// Whether `(x, y)` is still cell `(cx, cy)`'s: inside it or less than [`HYSTERESIS`] past its border.
pub fn holds(cx: u32, cy: u32, x: f32, y: f32) -> bool {
    let x0 = cx as f32 * CELL_W - HYSTERESIS;
    let y0 = cy as f32 * CELL_H - HYSTERESIS;
    let x1 = (cx + 1) as f32 * CELL_W + HYSTERESIS;
    let y1 = (cy + 1) as f32 * CELL_H + HYSTERESIS;
    x >= x0 && x < x1 && y >= y0 && y < y1
}

/// The world's extent in x.
pub const WORLD_W: f32 = CELL_W * COLS as f32;
/// The world's extent in y.
pub const WORLD_H: f32 = CELL_H * ROWS as f32;

/// One input over `dt` seconds: the arena's movement (same speeds, diagonals scaled, snapped to the
/// quantum) with no pillars, kept inside the whole world rather than one cell. Each operation is one
/// `f32` operation, so the page's `Math.fround` copy of it agrees to the bit.
pub fn step(state: &MoveState, input: &MoveInput, dt: f32) -> MoveState {
    let Some((mx, my)) = displacement(input, dt) else {
        return *state;
    };
    let x = (state.x + mx).clamp(PLAYER_RADIUS, WORLD_W - PLAYER_RADIUS);
    let y = (state.y + my).clamp(PLAYER_RADIUS, WORLD_H - PLAYER_RADIUS);
    MoveState {
        x: snap(x),
        y: snap(y),
    }
}

/// What a cell hands the neighbour with a player: where it is, in world coordinates
/// (`x f32 LE`, `y f32 LE`). Movement keeps no other state, so this keeps the motion continuous.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Carried {
    /// Position.
    pub at: MoveState,
}

impl Carried {
    /// The bytes handed over.
    pub fn to_bytes(self) -> Vec<u8> {
        let mut out = Vec::with_capacity(8);
        out.extend_from_slice(&self.at.x.to_le_bytes());
        out.extend_from_slice(&self.at.y.to_le_bytes());
        out
    }

    /// Reads them back: `None` unless exactly 8 bytes of two finite numbers.
    pub fn read(bytes: &[u8]) -> Option<Carried> {
        let (x, y) = bytes.split_at_checked(4)?;
        let x = f32::from_le_bytes(x.try_into().ok()?);
        let y = f32::from_le_bytes(y.try_into().ok()?);
        (x.is_finite() && y.is_finite()).then_some(Carried {
            at: MoveState { x, y },
        })
    }
}

/// Who a principal is, as the `who` field carries it: FNV-1a of its bytes, the same in every cell.
pub fn who(principal: &str) -> u32 {
    let mut h: u32 = 0x811c_9dc5;
    for b in principal.bytes() {
        h = (h ^ u32::from(b)).wrapping_mul(0x0100_0193);
    }
    h
}

/// The zone configuration the cells are registered with: the arena's (30 Hz, the 0.01 quantum).
pub fn cells_config() -> ZoneConfig {
    let mut config = ZoneConfig {
        tick_hz: TICK_HZ,
        patch_every: 1,
        max_players: MAX_PLAYERS,
        ..ZoneConfig::default()
    };
    config.replication.pos_step = POS_STEP;
    config.replication.view_radius = VIEW;
    config.replication.cell_size = 24.0;
    config
}

/// A view radius that covers a whole cell and its hysteresis band from its centre.
const VIEW: f32 = 76.0;

/// One walker.
#[derive(Debug, Clone)]
struct Walker {
    entity: EntityId,
    name: String,
    state: MoveState,
}

/// A departed walker's entity, left where it crossed until `until`.
#[derive(Debug, Clone, Copy)]
struct Ghost {
    entity: EntityId,
    until: u64,
}

/// One cell of the grid. Create params: none (the zone id says which cell). Inputs: [`MoveInput`]
/// payloads. Events: [`TOPIC_CELL`], [`TOPIC_STUCK`].
#[derive(Debug)]
pub struct Cell {
    cx: u32,
    cy: u32,
    kind: KindId,
    walkers: BTreeMap<PlayerId, Walker>,
    ghosts: BTreeMap<PlayerId, Ghost>,
}

fn failed(e: impl std::fmt::Display) -> ZoneError {
    ZoneError::Failed(e.to_string())
}

fn declare(world: &mut World) -> Result<KindId, ZoneError> {
    let field = |name: &str, ty| FieldDef {
        name: name.into(),
        ty,
    };
    world
        .declare_kind(KindDef {
            name: KIND_PLAYER.into(),
            fields: vec![
                field(
                    "name",
                    FieldType::Str {
                        max_len: MAX_NAME as u8,
                    },
                ),
                field("hue", FieldType::UInt),
                field("who", FieldType::UInt),
            ],
        })
        .map_err(failed)
}

impl Cell {
    /// Which cell this is.
    pub fn coords(&self) -> (u32, u32) {
        (self.cx, self.cy)
    }

    /// A walker's position, if it walks here.
    pub fn position(&self, player: PlayerId) -> Option<MoveState> {
        self.walkers.get(&player).map(|w| w.state)
    }

    /// The entity of a walker here.
    pub fn avatar(&self, player: PlayerId) -> Option<EntityId> {
        self.walkers.get(&player).map(|w| w.entity)
    }

    /// Ghosts of departed walkers still drawn.
    pub fn ghosts(&self) -> usize {
        self.ghosts.len()
    }

    fn centre(&self) -> (f32, f32) {
        (
            (self.cx as f32 + 0.5) * CELL_W,
            (self.cy as f32 + 0.5) * CELL_H,
        )
    }

    /// Spawns (or, for a returning walker, takes back its ghost as) a walker's entity at `at`.
    fn place(
        &mut self,
        ctx: &mut Ctx<'_>,
        player: &PlayerInfo,
        at: MoveState,
    ) -> Result<(), JoinRefusal> {
        let principal = player.principal.as_str();
        let name = display_name(
            player.claims.get("name").and_then(|v| v.as_str()),
            principal,
        );
        let refuse = |e: zonekeep_core::world::WorldError| JoinRefusal::new(1, e.to_string());
        let world = ctx.world();
        let entity = match self.ghosts.remove(&player.id) {
            Some(g) => {
                world.set_pos(g.entity, at.x, at.y).map_err(refuse)?;
                g.entity
            }
            None => world.spawn(self.kind, at.x, at.y).map_err(refuse)?,
        };
        let fields = world
            .set_str(entity, F_NAME, &name)
            .and_then(|_| world.set_uint(entity, F_HUE, hue(principal)))
            .and_then(|_| world.set_uint(entity, F_WHO, who(principal)));
        if let Err(e) = fields {
            let _ = world.despawn(entity);
            return Err(refuse(e));
        }
        ctx.set_control(player.id, Some(entity));
        let centre = self.centre();
        ctx.set_view(player.id, Some(VIEW), Some(centre));
        self.walkers.insert(
            player.id,
            Walker {
                entity,
                name,
                state: at,
            },
        );
        let id = cell_id(self.cx, self.cy);
        ctx.emit_event(EventTarget::Player(player.id), TOPIC_CELL, id.into_bytes());
        Ok(())
    }
}

impl Zone for Cell {
    type Input = MoveInput;

    fn create(init: &ZoneInit, ctx: &mut Ctx<'_>) -> Result<Self, ZoneError> {
        let (cx, cy) = parse_cell_id(&init.zone_id).ok_or_else(|| {
            ZoneError::InvalidParams(format!(
                "a cell's id is cell-X-Y with X < {COLS} and Y < {ROWS}, not {:?}",
                init.zone_id
            ))
        })?;
        let step = ctx.world_ref().pos_step();
        if step.to_bits() != POS_STEP.to_bits() {
            return Err(ZoneError::InvalidParams(format!(
                "cells need replication.pos_step = {POS_STEP}, not {step}"
            )));
        }
        let kind = declare(ctx.world())?;
        Ok(Cell {
            cx,
            cy,
            kind,
            walkers: BTreeMap::new(),
            ghosts: BTreeMap::new(),
        })
    }

    fn on_join(&mut self, ctx: &mut Ctx<'_>, player: &PlayerInfo) -> Result<(), JoinRefusal> {
        // A new player starts near its cell's centre, a little apart from the others.
        let (x, y) = self.centre();
        let offset = (ctx.rng().next_u32() % 16) as f32 - 8.0;
        let at = MoveState {
            x: snap(x + offset),
            y: snap(y + offset / 2.0),
        };
        self.place(ctx, player, at)
    }

    fn on_observe(&mut self, ctx: &mut Ctx<'_>, observer: &PlayerInfo) -> Result<(), JoinRefusal> {
        let centre = self.centre();
        ctx.set_view(observer.id, Some(VIEW), Some(centre));
        Ok(())
    }

    fn on_leave(&mut self, ctx: &mut Ctx<'_>, player: PlayerId, _why: LeaveReason) {
        // A transferred walker left its ghost, which expires on its own.
        if let Some(w) = self.walkers.remove(&player) {
            let _ = ctx.world().despawn(w.entity);
        }
    }

    fn sanitize(&mut self, _player: PlayerId, payload: &[u8]) -> Result<MoveInput, InputRefusal> {
        MoveInput::decode(payload)
            .ok_or_else(|| InputRefusal::new(REFUSE_BAD_INPUT, "expected 1 or 2 bytes"))
    }

    fn on_input(&mut self, ctx: &mut Ctx<'_>, player: PlayerId, input: MoveInput) {
        let (cx, cy) = (self.cx, self.cy);
        let Some(w) = self.walkers.get_mut(&player) else {
            return;
        };
        let next = step(&w.state, &input, DT);
        if next == w.state {
            return;
        }
        w.state = next;
        let _ = ctx.world().set_pos(w.entity, next.x, next.y);
        if holds(cx, cy, next.x, next.y) {
            return;
        }
        let Some((tx, ty)) = cell_at(next.x, next.y) else {
            return;
        };
        let mut claims = Claims::new();
        claims.insert("kind".into(), KIND_CELLS.into());
        claims.insert("name".into(), w.name.clone().into());
        if let Err(e) = ctx.transfer(player, &cell_id(tx, ty), claims) {
            ctx.emit_event(
                EventTarget::Player(player),
                TOPIC_STUCK,
                e.to_string().into_bytes(),
            );
        }
    }

    fn tick(&mut self, ctx: &mut Ctx<'_>) {
        let now = ctx.tick();
        let world = ctx.world();
        self.ghosts.retain(|_, g| {
            let keep = g.until > now;
            if !keep {
                let _ = world.despawn(g.entity);
            }
            keep
        });
    }

    fn transfer_out(&mut self, ctx: &mut Ctx<'_>, player: PlayerId) -> Vec<u8> {
        let Some(w) = self.walkers.remove(&player) else {
            return Vec::new();
        };
        // The entity stays where the walker crossed, so watchers of this cell see no gap.
        let until = ctx.tick() + GHOST_TICKS;
        if let Some(old) = self.ghosts.insert(
            player,
            Ghost {
                entity: w.entity,
                until,
            },
        ) {
            let _ = ctx.world().despawn(old.entity);
        }
        ctx.set_control(player, None);
        Carried { at: w.state }.to_bytes()
    }

    fn transfer_in(
        &mut self,
        ctx: &mut Ctx<'_>,
        player: &PlayerInfo,
        arrival: &Arrival<'_>,
    ) -> Result<(), JoinRefusal> {
        if player.role != Role::Player {
            return Err(JoinRefusal::new(REFUSE_NOT_HERE, "only players walk"));
        }
        let carried = Carried::read(arrival.state);
        let (x0, y0) = (self.cx as f32 * CELL_W, self.cy as f32 * CELL_H);
        let inside = |s: MoveState| MoveState {
            x: snap(s.x.clamp(x0, x0 + CELL_W - POS_STEP)),
            y: snap(s.y.clamp(y0, y0 + CELL_H - POS_STEP)),
        };
        let at = match carried {
            // A walker that could not leave stays just inside the border it tried to cross.
            Some(c) if arrival.returning => inside(c.at),
            Some(c) if holds(self.cx, self.cy, c.at.x, c.at.y) => c.at,
            Some(_) => {
                return Err(JoinRefusal::new(REFUSE_NOT_HERE, "not next to this cell"));
            }
            None if arrival.returning => inside(MoveState {
                x: self.centre().0,
                y: self.centre().1,
            }),
            None => return Err(JoinRefusal::new(REFUSE_NOT_HERE, "unreadable walker state")),
        };
        self.place(ctx, player, at)
    }

    fn state_hash(&self) -> Option<u64> {
        let mut h = StateHasher::new();
        for (id, w) in &self.walkers {
            h.write_u32(id.0);
            h.write_u32(w.state.x.to_bits());
            h.write_u32(w.state.y.to_bits());
        }
        for (id, g) in &self.ghosts {
            h.write_u32(id.0);
            h.write_u64(g.until);
        }
        Some(h.finish())
    }
}
