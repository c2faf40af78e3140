//! The shooting gallery: targets slide along rails, players shoot them, and each shot is judged
//! against the world as the shooter drew it (lag compensation) or, when the shot asks, against the
//! world as it is when the shot arrives.
//!
//! The point of the zone is to let a player *feel* lag compensation: over a slow link a target
//! drawn under the cursor has moved on by the time the shot arrives, so without compensation a
//! shot at the drawn target misses; with it, the zone rewinds to the shooter's picture and the
//! shot hits. Both are judged by the same hit test; only the positions it is
//! handed differ.
//!
//! A shot ([`Shot`]) is a hitscan at a point of the gallery wall: a ray fired into the wall at
//! the aim point, which `Rewind::raycast_among` tests as a point against every target's circle.
//! The shooter is told the verdict ([`Verdict`], event [`TOPIC_VERDICT`]); a hit target
//! disappears and a new one appears on the same rail [`RESPAWN_TICKS`] later.

mod rails;
mod shot;
#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, VecDeque};
use std::hash::{Hash, Hasher};
use std::time::Duration;

use zonekeep_core::rand_core::RngCore;
use zonekeep_core::world::{EntityId, KindId};
use zonekeep_core::{
    Ctx, EventTarget, InputPolicy, InputRefusal, LagCompensation, LeaveReason, PlayerId, Rewind,
    Shape, StateHasher, Zone, ZoneConfig, ZoneError, ZoneInit,
};
use zonekeep_protocol::schema::KindDef;

pub use rails::{Rail, GALLERY_H, GALLERY_W, RAILS, RAIL_MARGIN};
pub use shot::{
    Outcome, Shot, ShotError, Verdict, VerdictError, FLAG_COMPENSATED, SHOT_LEN, VERDICT_LEN,
};

use crate::movement::{POS_STEP, TICK_HZ};

/// The target entity kind's name.
pub const KIND_TARGET: &str = "target";
/// A target's radius, world units: a shot within it hits.
pub const TARGET_RADIUS: f32 = 1.0;
/// Ticks a rail stays empty after its target was hit (half a second at 30 Hz).
pub const RESPAWN_TICKS: u64 = 15;
/// Event topic: the verdict on one of your shots (payload: [`Verdict`]).
pub const TOPIC_VERDICT: u16 = 1;
/// Input refusal code: the payload is not a [`Shot`].
pub const REFUSE_BAD_SHOT: u16 = 1;
/// How many ticks of what each player was sent the zone keeps (2 s at 30 Hz).
pub const HISTORY_TICKS: u32 = 60;
/// How far behind its round trip a shooter may draw: the replica's playout delay (up to 500 ms on
/// a lossy link) and the wait for the next patch (the runtime's default). The host adds each
/// connection's worst recent round trip, so a 150 ms each-way link reaches back about 900 ms.
pub const MAX_VIEW_DELAY: Duration = zonekeep_core::DEFAULT_MAX_VIEW_DELAY;

/// One rail's target, or the wait for the next.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Slot {
    /// A target is on the rail: it appeared at tick `since`, at `phase` along the rail's path.
    Target {
        entity: EntityId,
        phase: f32,
        since: u64,
    },
    /// The rail is empty until tick `until`.
    Empty { until: u64 },
}

/// One player's hits and judged shots.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
struct Tally {
    hits: u32,
    shots: u32,
}

/// Counters a host or test can read.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct GalleryStats {
    /// Shots judged against what the shooter drew.
    pub compensated_shots: u64,
    /// Of those, hits.
    pub compensated_hits: u64,
    /// Shots judged against the world as it was when they arrived.
    pub present_shots: u64,
    /// Of those, hits.
    pub present_hits: u64,
    /// Shots from a player that had not been sent the world yet.
    pub unjudged: u64,
    /// Compensated shots that hit a target someone else had already taken down.
    pub taken: u64,
}

/// The shooting gallery zone. Create params: none (`null` or `{}`). Inputs: [`Shot`] payloads.
/// Events: [`TOPIC_VERDICT`] to the shooter.
#[derive(Debug)]
pub struct Gallery {
    target: KindId,
    hz: u32,
    slots: Vec<Slot>,
    tallies: BTreeMap<PlayerId, Tally>,
    /// Targets knocked down within the history, and the tick each went down: a later shot that
    /// hits one as its shooter drew it was beaten to it ([`Outcome::Taken`]), not a miss.
    downed: VecDeque<(EntityId, u64)>,
    stats: GalleryStats,
}

/// The entity among `candidates` (those `shootable` says are targets, as circles of
/// [`TARGET_RADIUS`]) that a shot at `aim` hits first.
fn ray_at_targets(
    rewind: &Rewind<'_>,
    aim: (f32, f32),
    candidates: impl IntoIterator<Item = (EntityId, (f32, f32))>,
    shootable: impl Fn(EntityId) -> bool,
) -> Option<EntityId> {
    let shape = |id| {
        shootable(id).then_some(Shape::Circle {
            radius: TARGET_RADIUS,
        })
    };
    rewind
        .raycast_among(aim, (0.0, 0.0), 0.0, candidates, shape)
        .and_then(|hit| match hit.target {
            zonekeep_core::HitTarget::Entity(id) => Some(id),
            zonekeep_core::HitTarget::Collider(_) => None,
        })
}

/// The zone configuration a gallery kind is registered with: 30 Hz ticks and patches (so the
/// rails' speeds mean what their docs say), the 0.01 position quantum, and every shot applied
/// (a burst of clicks is a burst of shots, not the newest one).
pub fn gallery_config() -> ZoneConfig {
    let mut config = ZoneConfig {
        tick_hz: TICK_HZ,
        patch_every: 1,
        max_players: 64,
        input_policy: InputPolicy::Drain,
        ..ZoneConfig::default()
    };
    config.replication.pos_step = POS_STEP;
    config
}

impl Gallery {
    /// The zone's counters.
    pub fn stats(&self) -> GalleryStats {
        self.stats
    }

    /// The entity on each rail, top to bottom (`None`: the rail waits for its next target).
    pub fn targets(&self) -> impl Iterator<Item = Option<EntityId>> + '_ {
        self.slots.iter().map(|s| match s {
            Slot::Target { entity, .. } => Some(*entity),
            Slot::Empty { .. } => None,
        })
    }

    fn is_target(&self, id: EntityId) -> bool {
        self.slots
            .iter()
            .any(|s| matches!(s, Slot::Target { entity, .. } if *entity == id))
    }

    /// The target (if any) a shot at `aim` hits among `candidates` (entities and the positions to
    /// judge them at). One test for both kinds of shot: a compensated shot passes the entities
    /// as the shooter drew them, an uncompensated one the world as it is.
    fn judge(
        &self,
        rewind: &Rewind<'_>,
        aim: (f32, f32),
        candidates: impl IntoIterator<Item = (EntityId, (f32, f32))>,
    ) -> Option<EntityId> {
        ray_at_targets(rewind, aim, candidates, |id| self.is_target(id))
    }

    /// Every target where the world has it now.
    fn present(&self, ctx: &Ctx<'_>) -> Vec<(EntityId, (f32, f32))> {
        let world = ctx.world_ref();
        self.targets()
            .flatten()
            .filter_map(|id| world.pos(id).ok().map(|p| (id, p)))
            .collect()
    }

    /// Takes `entity` off its rail; the rail gets a new target [`RESPAWN_TICKS`] later.
    fn knock_down(&mut self, ctx: &mut Ctx<'_>, entity: EntityId) {
        let until = ctx.tick() + RESPAWN_TICKS;
        for slot in &mut self.slots {
            if matches!(slot, Slot::Target { entity: e, .. } if *e == entity) {
                *slot = Slot::Empty { until };
            }
        }
        // The entity is ours and alive (it was judged a target this tick).
        let _ = ctx.world().despawn(entity);
        let now = ctx.tick();
        // A shot reaches at most the history back: older downed targets can no longer be drawn.
        while self
            .downed
            .front()
            .is_some_and(|(_, at)| now.saturating_sub(*at) > u64::from(HISTORY_TICKS))
        {
            self.downed.pop_front();
        }
        self.downed.push_back((entity, now));
    }

    /// The target among `candidates` that a shot at `aim` would have hit had it not been taken
    /// down already.
    fn judge_taken(
        &self,
        rewind: &Rewind<'_>,
        aim: (f32, f32),
        candidates: impl IntoIterator<Item = (EntityId, (f32, f32))>,
    ) -> Option<EntityId> {
        ray_at_targets(rewind, aim, candidates, |id| {
            self.downed.iter().any(|(e, _)| *e == id)
        })
    }

    fn verdict(
        &mut self,
        ctx: &mut Ctx<'_>,
        player: PlayerId,
        outcome: Outcome,
        compensated: bool,
        target: Option<EntityId>,
        ticks_behind: u64,
    ) {
        let tally = self.tallies.entry(player).or_default();
        if outcome != Outcome::Unjudged {
            tally.shots = tally.shots.saturating_add(1);
        }
        if outcome == Outcome::Hit {
            tally.hits = tally.hits.saturating_add(1);
        }
        let verdict = Verdict {
            seq: ctx.input_meta().map_or(0, |m| m.seq),
            outcome,
            compensated,
            target: target.map_or(0, |e| e.0),
            ticks_behind: u16::try_from(ticks_behind).unwrap_or(u16::MAX),
            hits: tally.hits,
            shots: tally.shots,
        };
        ctx.emit_event(EventTarget::Player(player), TOPIC_VERDICT, verdict.encode());
    }

    fn spawn(&mut self, ctx: &mut Ctx<'_>, rail: usize) -> Result<Slot, ZoneError> {
        let Some(r) = RAILS.get(rail) else {
            return Err(ZoneError::Failed(format!("no rail {rail}")));
        };
        // Anywhere along the rail's back-and-forth path, so targets do not all start at an end.
        let unit = (ctx.rng().next_u32() >> 8) as f32 / (1u32 << 24) as f32;
        let phase = unit * 2.0 * r.length();
        let since = ctx.tick();
        let (x, y) = r.position_at(phase, since, since, self.hz);
        let entity = ctx
            .world()
            .spawn(self.target, x, y)
            .map_err(|e| ZoneError::Failed(e.to_string()))?;
        ctx.world()
            .set_global(entity, true)
            .map_err(|e| ZoneError::Failed(e.to_string()))?;
        Ok(Slot::Target {
            entity,
            phase,
            since,
        })
    }
}

impl Zone for Gallery {
    type Input = Shot;

    fn create(init: &ZoneInit, ctx: &mut Ctx<'_>) -> Result<Self, ZoneError> {
        match &init.params {
            serde_json::Value::Null => {}
            serde_json::Value::Object(m) if m.is_empty() => {}
            _ => {
                return Err(ZoneError::InvalidParams(
                    "the gallery takes no params".into(),
                ))
            }
        }
        let nanos = ctx.dt().as_nanos().max(1);
        let hz = u32::try_from(1_000_000_000 / nanos).unwrap_or(u32::MAX);
        let target = ctx
            .world()
            .declare_kind(KindDef {
                name: KIND_TARGET.into(),
                fields: vec![],
            })
            .map_err(|e| ZoneError::Failed(e.to_string()))?;
        let mut gallery = Gallery {
            target,
            hz,
            slots: Vec::with_capacity(RAILS.len()),
            tallies: BTreeMap::new(),
            downed: VecDeque::new(),
            stats: GalleryStats::default(),
        };
        for rail in 0..RAILS.len() {
            let slot = gallery.spawn(ctx, rail)?;
            gallery.slots.push(slot);
        }
        Ok(gallery)
    }

    fn lag_compensation(&self) -> Option<LagCompensation> {
        Some(LagCompensation {
            history_ticks: HISTORY_TICKS,
            max_view_delay: MAX_VIEW_DELAY,
            colliders: Vec::new(),
        })
    }

    fn uses_can_see(&self) -> bool {
        false
    }

    fn on_leave(&mut self, _ctx: &mut Ctx<'_>, player: PlayerId, _why: LeaveReason) {
        self.tallies.remove(&player);
    }

    fn sanitize(&mut self, _player: PlayerId, payload: &[u8]) -> Result<Shot, InputRefusal> {
        Shot::decode(payload).map_err(|e| InputRefusal::new(REFUSE_BAD_SHOT, e.to_string()))
    }

    /// A shot without a view tick, or before the shooter was sent any frame: it cannot have been
    /// aimed at anything drawn, so it is answered but not judged.
    fn on_input(&mut self, ctx: &mut Ctx<'_>, player: PlayerId, shot: Shot) {
        self.stats.unjudged += 1;
        self.verdict(ctx, player, Outcome::Unjudged, shot.compensated, None, 0);
    }

    fn apply_input_at(
        &mut self,
        ctx: &mut Ctx<'_>,
        player: PlayerId,
        shot: Shot,
        rewind: &Rewind<'_>,
    ) {
        let aim = (shot.x, shot.y);
        let (hit, behind) = if shot.compensated {
            (
                self.judge(rewind, aim, rewind.drawn()),
                rewind.ticks_behind(),
            )
        } else {
            let present = self.present(ctx);
            (self.judge(rewind, aim, present), 0)
        };
        let (shots, hits) = if shot.compensated {
            (
                &mut self.stats.compensated_shots,
                &mut self.stats.compensated_hits,
            )
        } else {
            (&mut self.stats.present_shots, &mut self.stats.present_hits)
        };
        *shots += 1;
        if hit.is_some() {
            *hits += 1;
        }
        if let Some(entity) = hit {
            self.knock_down(ctx, entity);
            self.verdict(ctx, player, Outcome::Hit, shot.compensated, hit, behind);
            return;
        }
        // Only a compensated shot can have drawn a target that is gone now.
        let taken = shot
            .compensated
            .then(|| self.judge_taken(rewind, aim, rewind.drawn()))
            .flatten();
        if taken.is_some() {
            self.stats.taken += 1;
            self.verdict(ctx, player, Outcome::Taken, shot.compensated, taken, behind);
        } else {
            self.verdict(ctx, player, Outcome::Miss, shot.compensated, None, behind);
        }
    }

    fn tick(&mut self, ctx: &mut Ctx<'_>) {
        let tick = ctx.tick();
        for rail in 0..self.slots.len() {
            let Some(slot) = self.slots.get(rail).copied() else {
                continue;
            };
            match slot {
                Slot::Target {
                    entity,
                    phase,
                    since,
                } => {
                    if let Some(r) = RAILS.get(rail) {
                        let (x, y) = r.position_at(phase, since, tick, self.hz);
                        let _ = ctx.world().set_pos(entity, x, y);
                    }
                }
                Slot::Empty { until } if tick >= until => match self.spawn(ctx, rail) {
                    Ok(s) => self.slots[rail] = s,
                    // The world refused a spawn (it is full): try again next tick.
                    Err(_) => self.slots[rail] = Slot::Empty { until: tick + 1 },
                },
                Slot::Empty { .. } => {}
            }
        }
    }

    fn state_hash(&self) -> Option<u64> {
        // Positions are a function of each slot and the tick, so the slots cover the world.
        let mut h = StateHasher::new();
        for slot in &self.slots {
            match *slot {
                Slot::Target {
                    entity,
                    phase,
                    since,
                } => {
                    entity.0.hash(&mut h);
                    h.write_u32(phase.to_bits());
                    since.hash(&mut h);
                }
                Slot::Empty { until } => until.hash(&mut h),
            }
        }
        for (id, t) in &self.tallies {
            id.0.hash(&mut h);
            t.hash(&mut h);
        }
        for (id, at) in &self.downed {
            id.0.hash(&mut h);
            at.hash(&mut h);
        }
        Some(h.finish())
    }
}
