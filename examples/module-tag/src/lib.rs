//! Tag, as a Zonekeep zone module: a small real game written against the guest SDK
//! (`zonekeep-guest`) and built for `wasm32-unknown-unknown` as a `cdylib`.
//!
//! This crate owns the game's rules only. It must never depend on the host crates
//! (`zonekeep-core`, `zonekeep-wasm`...) nor read anything but what its hooks are given: the
//! module imports nothing but the host's log.
//!
//! Rules. Each joining player gets a `player` entity at a random spot of a 100 × 100 field,
//! under its control; the first player in is "it". Each tick a player moves by its last input
//! (`dx`, `dy`, each clamped to -1..=1; [`SPEED`] units a tick, diagonals as fast as straight
//! lines). When "it" comes within [`TAG_RADIUS`] of another player it tags the nearest one:
//! the tagger scores a point, the tagged player becomes "it", and an event of topic
//! [`TOPIC_TAGGED`] tells everyone; the new "it" cannot tag for [`NO_TAG_BACK`] ticks. Every
//! [`POINTS_PERIOD`] ticks everyone but "it" scores a point. Leaving despawns the player's
//! entity (if it was "it", the player with the lowest id is "it" next). Scores and positions
//! are kept by principal: a player who comes back, or joins after a restore, finds its score
//! and its spot again. Observers watch the whole field from its centre.
//!
//! Create params: none (any JSON is accepted and ignored). Input payload: `dx: i8`, `dy: i8`.

use std::collections::BTreeMap;

use zonekeep_guest::{
    export_zone, Contract, Ctx, Entity, EntityKind, EventDef, EventTarget, Input, InputDef, Kind,
    LeaveReason, Player, PlayerId, Reader, Refusal, Role, ValueType, Writer, Zone,
    REFUSE_UNDECODABLE,
};

/// Side of the square field, in world units.
pub const FIELD: f32 = 100.0;
/// Distance within which "it" tags another player.
pub const TAG_RADIUS: f32 = 2.0;
/// Distance moved per tick at full input.
pub const SPEED: f32 = 0.5;
/// Ticks between the points given to everyone but "it".
pub const POINTS_PERIOD: u64 = 200;
/// Ticks after becoming "it" during which a player cannot tag.
pub const NO_TAG_BACK: u64 = 20;
/// Event topic of a tag; payload: `u32 tagger`, `u32 tagged` (player ids, little-endian).
pub const TOPIC_TAGGED: u16 = 1;
/// Join refusal code: this principal is already playing in the zone.
pub const REFUSE_ALREADY_PLAYING: u16 = 1;
/// Timer tag of the periodic points.
pub const TIMER_POINTS: u64 = 1;
/// Longest name shown (the principal, cut at a character boundary): the `max_len` of
/// [`PlayerEntity::name`].
pub const NAME_MAX: u8 = 24;
/// Version byte in front of the zone's save.
const SAVE_VERSION: u8 = 1;

/// A player's input: the direction to move in, each axis clamped to -1..=1.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Input)]
pub struct Move {
    /// -1 left, 0 still, 1 right.
    pub dx: i8,
    /// -1 down, 0 still, 1 up.
    pub dy: i8,
}

/// What a player's entity shows: the fields of the `player` entity kind, in this order (their
/// indexes are `PlayerEntity::FIELD_IT`, `FIELD_SCORE` and `FIELD_NAME`).
#[derive(Debug, Clone, Default, PartialEq, EntityKind)]
#[entity(name = "player")]
pub struct PlayerEntity {
    /// Whether this player is "it".
    pub it: bool,
    /// Points scored.
    pub score: u32,
    /// The principal, cut to [`NAME_MAX`] bytes at a character boundary.
    #[field(str(max_len = 24))]
    pub name: String,
}

/// What the zone keeps of a principal, present or not: saved and restored.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Runner {
    /// Points scored.
    pub score: u32,
    /// Last x.
    pub x: f32,
    /// Last y.
    pub y: f32,
}

/// A player in the zone now.
#[derive(Debug, Clone, PartialEq)]
struct Live {
    principal: String,
    entity: Entity,
    /// What its entity shows now.
    shown: PlayerEntity,
    intent: Move,
}

/// The tag zone.
#[derive(Debug)]
pub struct Tag {
    kind: Kind,
    runners: BTreeMap<String, Runner>,
    live: BTreeMap<PlayerId, Live>,
    it: Option<PlayerId>,
    /// The first tick at which "it" may tag.
    it_ready: u64,
}

impl Tag {
    fn new(ctx: &mut Ctx<'_>, runners: BTreeMap<String, Runner>) -> Self {
        let kind = ctx.declare::<PlayerEntity>();
        ctx.timer_every(POINTS_PERIOD, TIMER_POINTS);
        Self {
            kind,
            runners,
            live: BTreeMap::new(),
            it: None,
            it_ready: 0,
        }
    }

    /// Every principal's score and position, present or not.
    pub fn runners(&self) -> &BTreeMap<String, Runner> {
        &self.runners
    }

    /// Who is "it".
    pub fn it(&self) -> Option<PlayerId> {
        self.it
    }

    /// The entity of a present player.
    pub fn entity_of(&self, player: PlayerId) -> Option<Entity> {
        self.live.get(&player).map(|l| l.entity)
    }

    fn runner_mut(&mut self, player: PlayerId) -> Option<&mut Runner> {
        let live = self.live.get(&player)?;
        self.runners.get_mut(&live.principal)
    }

    /// Change what a present player's entity shows, sending the fields that changed.
    fn show(
        &mut self,
        ctx: &mut Ctx<'_>,
        player: PlayerId,
        change: impl FnOnce(&mut PlayerEntity),
    ) {
        let Some(live) = self.live.get_mut(&player) else {
            return;
        };
        let before = live.shown.clone();
        change(&mut live.shown);
        ctx.update(live.entity, &before, &live.shown);
    }

    fn score(&mut self, ctx: &mut Ctx<'_>, player: PlayerId) {
        let Some(runner) = self.runner_mut(player) else {
            return;
        };
        runner.score = runner.score.saturating_add(1);
        let score = runner.score;
        self.show(ctx, player, |shown| shown.score = score);
    }

    /// Make `player` "it" (or nobody), updating both entities' flags.
    /// Tells a lobby listing the game how many run in it (it always takes more).
    fn publish(&self, ctx: &mut Ctx<'_>) {
        let metadata = format!(r#"{{"game":"tag","runners":{}}}"#, self.live.len());
        ctx.publish_listing(true, &metadata);
    }

    fn make_it(&mut self, ctx: &mut Ctx<'_>, player: Option<PlayerId>) {
        if let Some(old) = self.it {
            self.show(ctx, old, |shown| shown.it = false);
        }
        self.it = player;
        if let Some(new) = player {
            self.show(ctx, new, |shown| shown.it = true);
        }
        self.it_ready = ctx.tick().saturating_add(NO_TAG_BACK);
    }

    fn position(&self, player: PlayerId) -> Option<(f32, f32)> {
        let live = self.live.get(&player)?;
        self.runners.get(&live.principal).map(|r| (r.x, r.y))
    }

    fn move_everyone(&mut self, ctx: &mut Ctx<'_>) {
        for live in self.live.values() {
            let Move { dx, dy } = live.intent;
            if dx == 0 && dy == 0 {
                continue;
            }
            let Some(runner) = self.runners.get_mut(&live.principal) else {
                continue;
            };
            let step = if dx != 0 && dy != 0 {
                SPEED * std::f32::consts::FRAC_1_SQRT_2
            } else {
                SPEED
            };
            runner.x = (runner.x + f32::from(dx) * step).clamp(0.0, FIELD);
            runner.y = (runner.y + f32::from(dy) * step).clamp(0.0, FIELD);
            ctx.set_pos(live.entity, runner.x, runner.y);
        }
    }

    /// "It" tags the nearest other player within reach (the lowest id among equals).
    fn try_tag(&mut self, ctx: &mut Ctx<'_>) {
        let Some(it) = self.it else { return };
        if ctx.tick() < self.it_ready {
            return;
        }
        let Some((ix, iy)) = self.position(it) else {
            return;
        };
        let mut nearest: Option<(PlayerId, f32)> = None;
        for &other in self.live.keys() {
            if other == it {
                continue;
            }
            let Some((x, y)) = self.position(other) else {
                continue;
            };
            let d2 = (x - ix) * (x - ix) + (y - iy) * (y - iy);
            if d2 <= TAG_RADIUS * TAG_RADIUS && nearest.is_none_or(|(_, best)| d2 < best) {
                nearest = Some((other, d2));
            }
        }
        let Some((tagged, _)) = nearest else { return };
        self.score(ctx, it);
        self.make_it(ctx, Some(tagged));
        let mut payload = Writer::new();
        payload.u32(it.0).u32(tagged.0);
        ctx.event(EventTarget::All, TOPIC_TAGGED, payload.as_bytes());
    }
}

/// `s` cut to at most `max` bytes at a character boundary.
fn truncate(s: &str, max: usize) -> &str {
    let mut end = s.len().min(max);
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

/// FNV-1a, 64-bit, folded over `bytes` from `h`.
fn fnv(h: u64, bytes: &[u8]) -> u64 {
    bytes.iter().fold(h, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

impl Zone for Tag {
    type Input = Move;

    fn contract() -> Contract {
        Contract::new()
            .constant(
                "REFUSE_ALREADY_PLAYING",
                i64::from(REFUSE_ALREADY_PLAYING),
                "Join refusal: this principal is already playing in the zone.",
            )
            .constant(
                "NAME_MAX",
                i64::from(NAME_MAX),
                "Longest name shown, in bytes.",
            )
            .input(
                InputDef::new(
                    "move",
                    "The direction to move in, each axis clamped to -1..=1.",
                )
                .value("dx", ValueType::I8, "-1 left, 0 still, 1 right.")
                .value("dy", ValueType::I8, "-1 down, 0 still, 1 up."),
            )
            .event(
                EventDef::new("tagged", TOPIC_TAGGED, "One player tagged another.")
                    .value("it", ValueType::U32, "The player who tagged.")
                    .value("tagged", ValueType::U32, "The player who is now \"it\"."),
            )
    }

    fn create(ctx: &mut Ctx<'_>, _params: &str) -> Result<Self, String> {
        let zone = Self::new(ctx, BTreeMap::new());
        zone.publish(ctx);
        Ok(zone)
    }

    fn on_join(&mut self, ctx: &mut Ctx<'_>, player: Player) -> Result<(), Refusal> {
        if player.role == Role::Observer {
            ctx.set_view(player.id, None, Some((FIELD / 2.0, FIELD / 2.0)));
            return Ok(());
        }
        if self.live.values().any(|l| l.principal == player.principal) {
            return Err(Refusal::new(
                REFUSE_ALREADY_PLAYING,
                "this principal is already playing here",
            ));
        }
        let runner = match self.runners.get(&player.principal) {
            Some(runner) => *runner,
            None => {
                let x = ctx.rng().range_f32(0.0, FIELD);
                let y = ctx.rng().range_f32(0.0, FIELD);
                let runner = Runner { score: 0, x, y };
                self.runners.insert(player.principal.clone(), runner);
                runner
            }
        };
        let shown = PlayerEntity {
            it: false,
            score: runner.score,
            name: truncate(&player.principal, usize::from(NAME_MAX)).to_owned(),
        };
        let entity = ctx.spawn_with(self.kind, runner.x, runner.y, &shown);
        ctx.set_control(player.id, Some(entity));
        self.live.insert(
            player.id,
            Live {
                principal: player.principal,
                entity,
                shown,
                intent: Move::default(),
            },
        );
        if self.it.is_none() {
            self.make_it(ctx, Some(player.id));
        }
        self.publish(ctx);
        Ok(())
    }

    fn on_leave(&mut self, ctx: &mut Ctx<'_>, player: PlayerId, _why: LeaveReason) {
        let Some(live) = self.live.remove(&player) else {
            return; // an observer
        };
        ctx.despawn(live.entity);
        if self.it == Some(player) {
            self.it = None;
            let next = self.live.keys().next().copied();
            self.make_it(ctx, next);
        }
    }

    fn on_drop(&mut self, _ctx: &mut Ctx<'_>, player: PlayerId) {
        // A player whose connection is lost stands still until it comes back.
        if let Some(live) = self.live.get_mut(&player) {
            live.intent = Move::default();
        }
    }

    fn sanitize(&mut self, _player: PlayerId, payload: &[u8]) -> Result<Move, Refusal> {
        let m = Move::decode(payload)
            .map_err(|e| Refusal::new(REFUSE_UNDECODABLE, format!("bad move: {e}")))?;
        Ok(Move {
            dx: m.dx.clamp(-1, 1),
            dy: m.dy.clamp(-1, 1),
        })
    }

    fn on_input(&mut self, _ctx: &mut Ctx<'_>, player: PlayerId, input: Move) {
        if let Some(live) = self.live.get_mut(&player) {
            live.intent = input;
        }
    }

    fn tick(&mut self, ctx: &mut Ctx<'_>) {
        self.move_everyone(ctx);
        self.try_tag(ctx);
    }

    fn on_timer(&mut self, ctx: &mut Ctx<'_>, tag: u64) {
        if tag != TIMER_POINTS {
            return;
        }
        let players: Vec<PlayerId> = self.live.keys().copied().collect();
        for player in players {
            if Some(player) != self.it {
                self.score(ctx, player);
            }
        }
    }

    fn save(&self) -> Vec<u8> {
        let mut w = Writer::new();
        w.u8(SAVE_VERSION);
        w.u32(u32::try_from(self.runners.len()).unwrap_or(u32::MAX));
        for (principal, r) in &self.runners {
            w.str(principal).u32(r.score).f32(r.x).f32(r.y);
        }
        w.into_vec()
    }

    fn restore(ctx: &mut Ctx<'_>, _params: &str, bytes: &[u8]) -> Result<Self, String> {
        let mut r = Reader::new(bytes);
        let bad = |e: zonekeep_guest::DecodeError| format!("tag save: {e}");
        let version = r.u8().map_err(bad)?;
        if version != SAVE_VERSION {
            return Err(format!(
                "tag save version {version}, expected {SAVE_VERSION}"
            ));
        }
        let n = r.u32().map_err(bad)?;
        let mut runners = BTreeMap::new();
        for _ in 0..n {
            let principal = r.str().map_err(bad)?.to_owned();
            let runner = Runner {
                score: r.u32().map_err(bad)?,
                x: r.f32().map_err(bad)?.clamp(0.0, FIELD),
                y: r.f32().map_err(bad)?.clamp(0.0, FIELD),
            };
            runners.insert(principal, runner);
        }
        r.finish().map_err(bad)?;
        Ok(Self::new(ctx, runners))
    }

    fn state_hash(&self) -> Option<u64> {
        let mut h = 0xcbf2_9ce4_8422_2325;
        for (principal, r) in &self.runners {
            h = fnv(h, &(principal.len() as u64).to_le_bytes());
            h = fnv(h, principal.as_bytes());
            h = fnv(h, &r.score.to_le_bytes());
            h = fnv(h, &r.x.to_bits().to_le_bytes());
            h = fnv(h, &r.y.to_bits().to_le_bytes());
        }
        for (player, live) in &self.live {
            h = fnv(h, &player.0.to_le_bytes());
            h = fnv(h, &[live.intent.dx as u8, live.intent.dy as u8]);
        }
        h = fnv(h, &self.it.map_or(0, |p| p.0).to_le_bytes());
        Some(fnv(h, &self.it_ready.to_le_bytes()))
    }
}

export_zone!(Tag);

#[cfg(test)]
mod tests;
