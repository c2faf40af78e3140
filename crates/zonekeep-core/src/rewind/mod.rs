//! Lag compensation: judge a player's input against what that player saw.
//!
//! A client draws the world some ticks in the past (it interpolates between the last two states
//! it received) and stamps each input with the tick it was drawing (`view_tick`). A zone that
//! opts in ([`Zone::lag_compensation`](crate::Zone::lag_compensation)) gets those inputs through
//! [`Zone::apply_input_at`](crate::Zone::apply_input_at) with a [`Rewind`]: the entities placed
//! where *that* player drew them, not where the world has them now.
//!
//! # What a player saw
//!
//! The host keeps, after each patch, what every subscriber's client holds: which entities it
//! knows and their positions as sent (quantized). Interest, `can_see` and byte-budget deferral are
//! all in it: an entity the budget held back is placed where the client last got it, not where
//! the world had it; an entity the client was never sent is not drawn at all
//! ([`Rewind::position_at`] is `None`).
//!
//! The history is shared where it can be: per patch one copy of every entity's quantized
//! position (what replication sends), and per subscriber only a bitset of the entities its
//! client holds plus the few whose sent position differs from the world's (budget deferral).
//! Subscribers in the same sent state (the replicator shares their entries) share one scan.
//!
//! # Drawn as the SDKs draw
//!
//! Both SDKs keep per entity a sample at each Delta that moved it and a hold sample at the Delta
//! before (so motion starts when it did), and draw at the render tick between the two samples
//! around it; that is linear interpolation over the sequence of states the client received, one
//! per Delta. [`Rewind`] interpolates the same way between the two recorded patches around the
//! view tick: an entity sent in the earlier one and still held in the later one is interpolated,
//! one despawned at the later one is held where it was, one spawned at the later one is not yet
//! drawn. Both SDKs stamp a whole tick (`floor` of the drawn tick in TypeScript; the application's
//! tick, or the newest Delta's, in Rust), so the fraction is `(view − a) / (b − a)` for patches
//! `a ≤ view < b`.
//!
//! A server skips a *quiet* Delta (nothing changed for the client) unless its ack changed or a
//! keep-alive is due. The history assumes quiet frames were skipped: they give no sample tick of
//! their own (their positions equal the previous state's anyway). When one was sent after all
//! and the next Delta moves an entity, the SDK starts that move at the quiet frame's tick rather
//! than the previous non-quiet one; a view that was entirely still is rare where shots matter.
//!
//! # How far back
//!
//! The view tick is clamped to the tick of the newest state the subscriber was sent (no shooting
//! into the future), to at most [`LagCompensation::history_ticks`] before the tick the input is
//! applied in, and to at most its round trip plus [`LagCompensation::max_view_delay`] before that
//! tick: no client can reach further into the past than its connection explains. Within that, a
//! shot is judged at the view tick it carries, which is what the client drew.
//!
//! The round trip is the worst of the last few the driver reported with
//! [`ZoneHost::set_rtt`](crate::ZoneHost::set_rtt) (a host reports what it measures, and under
//! its development NetSim the delays NetSim applied, retransmission stalls included); until it
//! reports one, `max_view_delay` alone bounds the reach. The worst rather than the newest,
//! because a stall raises the client's playout delay for seconds after the link is quick again.
//! `max_view_delay` covers what the client draws behind the data it has: the SDKs' adaptive
//! playout delay goes up to 500 ms above the fastest delivery on a lossy TCP link (a lost packet
//! holds every later Delta back), so the default allows that plus a patch interval. Inputs with view tick 0 (no view yet) and inputs of a subscriber with no recorded
//! state (not sent a frame yet) go to [`Zone::on_input`](crate::Zone::on_input).
//!
//! # Hit tests
//!
//! Rays, segments and points against entity shapes ([`Shape`]: circles and capsules placed at the
//! drawn position) and against the static [`Collider`]s the zone declared once. The nearest hit
//! wins; at an equal distance a collider wins (a wall flush with a target covers it), then the
//! lower entity id, so the answer is deterministic.

mod geom;
mod history;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_host;

use std::time::Duration;

use crate::world::EntityId;
use geom::Capsule;
pub(crate) use history::RewindHistory;
use history::Span;
#[cfg(test)]
use history::RTT_SAMPLES;

/// The most ticks of history a zone may keep; a longer [`LagCompensation::history_ticks`] is
/// clamped to it.
pub const MAX_HISTORY_TICKS: u32 = 1024;

/// The default [`LagCompensation::max_view_delay`]: the SDKs draw at most 500 ms behind the
/// fastest recent delivery (their playout ceiling), plus one patch interval of waiting.
pub const DEFAULT_MAX_VIEW_DELAY: Duration = Duration::from_millis(600);

/// A zone's lag compensation settings, declared once when it is created or restored
/// ([`Zone::lag_compensation`](crate::Zone::lag_compensation)).
#[derive(Debug, Clone, PartialEq)]
pub struct LagCompensation {
    /// How many ticks back an input may be judged (1 to [`MAX_HISTORY_TICKS`]; memory grows with
    /// it). Counted back from the tick the input is applied in.
    pub history_ticks: u32,
    /// How much more than its measured round trip a client may draw behind (its playout delay
    /// and the wait for the next patch): the reach into the past is at most the worst recent
    /// round trip + this.
    pub max_view_delay: Duration,
    /// Static colliders (walls, pillars) every hit test includes, in world coordinates. A
    /// [`HitTarget::Collider`] names one by its index here. One with a non-finite number or a
    /// negative radius is never hit.
    pub colliders: Vec<Collider>,
}

impl Default for LagCompensation {
    /// 16 ticks of history, a 600 ms view delay (the SDKs' 500 ms playout ceiling plus a patch
    /// interval), no colliders.
    fn default() -> Self {
        Self {
            history_ticks: 16,
            max_view_delay: DEFAULT_MAX_VIEW_DELAY,
            colliders: Vec::new(),
        }
    }
}

/// The hit shape of an entity, placed at its drawn position (offsets are relative to it).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Shape {
    /// A disc of `radius` around the position.
    Circle {
        /// Radius in world units.
        radius: f32,
    },
    /// Every point within `radius` of the segment from `position + a` to `position + b`.
    Capsule {
        /// One end of the axis, relative to the position.
        a: (f32, f32),
        /// The other end of the axis, relative to the position.
        b: (f32, f32),
        /// Radius in world units.
        radius: f32,
    },
}

impl Shape {
    fn at(self, (x, y): (f32, f32)) -> Option<Capsule> {
        match self {
            Shape::Circle { radius } => Capsule::new((x, y), (x, y), radius),
            Shape::Capsule { a, b, radius } => {
                Capsule::new((x + a.0, y + a.1), (x + b.0, y + b.1), radius)
            }
        }
    }
}

/// A static collider in world coordinates.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Collider {
    /// A disc (a pillar).
    Circle {
        /// Centre.
        center: (f32, f32),
        /// Radius.
        radius: f32,
    },
    /// Every point within `radius` of the segment `a`–`b` (a wall of thickness `2 × radius`).
    Capsule {
        /// One end of the axis.
        a: (f32, f32),
        /// The other end of the axis.
        b: (f32, f32),
        /// Radius.
        radius: f32,
    },
}

impl Collider {
    fn capsule(self) -> Option<Capsule> {
        match self {
            Collider::Circle { center, radius } => Capsule::new(center, center, radius),
            Collider::Capsule { a, b, radius } => Capsule::new(a, b, radius),
        }
    }
}

/// What a hit test hit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum HitTarget {
    /// A static collider, by its index in [`LagCompensation::colliders`].
    Collider(usize),
    /// An entity, as drawn.
    Entity(EntityId),
}

/// The nearest hit of a hit test.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Hit {
    /// What was hit.
    pub target: HitTarget,
    /// Distance from the start of the ray or segment to the first contact (0 when it starts
    /// inside; 0 for a point test).
    pub distance: f32,
    /// The first contact point.
    pub point: (f32, f32),
}

/// The world as one subscriber drew it at one tick; see the [module docs](self).
///
/// Borrowed from the host for one [`Zone::apply_input_at`](crate::Zone::apply_input_at) call.
#[derive(Debug)]
pub struct Rewind<'h> {
    tick: u64,
    behind: u64,
    span: Span<'h>,
    colliders: &'h [Option<Capsule>],
}

impl<'h> Rewind<'h> {
    /// The tick judged: the input's view tick after the clamps.
    pub fn tick(&self) -> u64 {
        self.tick
    }

    /// How many ticks before the tick the input is applied in ([`Ctx::tick`](crate::Ctx::tick))
    /// the judged tick lies.
    pub fn ticks_behind(&self) -> u64 {
        self.behind
    }

    /// Where the subscriber drew `id` at [`tick`](Rewind::tick), or `None` when it was not drawn
    /// (its client had not been sent it, or it had already been despawned there).
    pub fn position_at(&self, id: EntityId) -> Option<(f32, f32)> {
        self.span.position_of(id.0)
    }

    /// Every entity drawn, ascending by id, with its drawn position.
    pub fn drawn(&self) -> impl Iterator<Item = (EntityId, (f32, f32))> + '_ {
        self.span.drawn().map(|(id, p)| (EntityId(id), p))
    }

    /// The entities drawn within `radius` of `center` (on the circle counts), ascending by id.
    pub fn entities_near(
        &self,
        center: (f32, f32),
        radius: f32,
    ) -> impl Iterator<Item = (EntityId, (f32, f32))> + '_ {
        let c = (f64::from(center.0), f64::from(center.1));
        let r2 = f64::from(radius) * f64::from(radius);
        self.drawn().filter(move |(_, (x, y))| {
            let d = geom::sub((f64::from(*x), f64::from(*y)), c);
            radius >= 0.0 && geom::dot(d, d) <= r2
        })
    }

    /// The nearest hit of the ray from `origin` along `dir` (any length; it is normalised) up to
    /// `max_distance`, against every drawn entity `shape_of` gives a shape (`None`: not
    /// hittable) and the static colliders. A zero `dir` is a point test at `origin`; a
    /// non-finite number hits nothing.
    pub fn raycast(
        &self,
        origin: (f32, f32),
        dir: (f32, f32),
        max_distance: f32,
        shape_of: impl FnMut(EntityId) -> Option<Shape>,
    ) -> Option<Hit> {
        self.cast(origin, dir, max_distance, self.drawn(), shape_of)
    }

    /// [`raycast`](Rewind::raycast) against the given candidates only (say, the result of
    /// [`entities_near`](Rewind::entities_near)) and the static colliders.
    pub fn raycast_among(
        &self,
        origin: (f32, f32),
        dir: (f32, f32),
        max_distance: f32,
        candidates: impl IntoIterator<Item = (EntityId, (f32, f32))>,
        shape_of: impl FnMut(EntityId) -> Option<Shape>,
    ) -> Option<Hit> {
        self.cast(origin, dir, max_distance, candidates, shape_of)
    }

    /// The nearest hit on the segment from `from` to `to`; a zero-length segment is a point
    /// test. See [`raycast`](Rewind::raycast).
    pub fn segment(
        &self,
        from: (f32, f32),
        to: (f32, f32),
        shape_of: impl FnMut(EntityId) -> Option<Shape>,
    ) -> Option<Hit> {
        let d = (to.0 - from.0, to.1 - from.1);
        let len = f64::from(d.0).hypot(f64::from(d.1)) as f32;
        self.raycast(from, d, len, shape_of)
    }

    /// What contains `point`: a static collider first (lowest index), else the drawn entity of
    /// lowest id.
    pub fn point(
        &self,
        point: (f32, f32),
        shape_of: impl FnMut(EntityId) -> Option<Shape>,
    ) -> Option<Hit> {
        self.raycast(point, (0.0, 0.0), 0.0, shape_of)
    }

    fn cast(
        &self,
        origin: (f32, f32),
        dir: (f32, f32),
        max_distance: f32,
        candidates: impl IntoIterator<Item = (EntityId, (f32, f32))>,
        mut shape_of: impl FnMut(EntityId) -> Option<Shape>,
    ) -> Option<Hit> {
        let numbers = [origin.0, origin.1, dir.0, dir.1, max_distance];
        if !numbers.iter().all(|v| v.is_finite()) || max_distance < 0.0 {
            return None;
        }
        let o = (f64::from(origin.0), f64::from(origin.1));
        let d = (f64::from(dir.0), f64::from(dir.1));
        let len = geom::dot(d, d).sqrt();
        // A zero direction (or a zero-length segment) is a point test.
        let (unit, max) = if len > 0.0 {
            ((d.0 / len, d.1 / len), f64::from(max_distance))
        } else {
            ((0.0, 0.0), 0.0)
        };
        let entry = |c: &Capsule| {
            if len > 0.0 {
                c.ray_entry(o, unit, max)
            } else {
                c.contains(o).then_some(0.0)
            }
        };
        let mut best: Option<(f64, HitTarget)> = None;
        let mut consider = |t: f64, target: HitTarget| {
            if best.is_none_or(|(bt, btarget)| t < bt || (t == bt && target < btarget)) {
                best = Some((t, target));
            }
        };
        for (i, c) in self.colliders.iter().enumerate() {
            if let Some(t) = c.as_ref().and_then(entry) {
                consider(t, HitTarget::Collider(i));
            }
        }
        for (id, p) in candidates {
            if let Some(t) = shape_of(id).and_then(|s| s.at(p)).as_ref().and_then(entry) {
                consider(t, HitTarget::Entity(id));
            }
        }
        best.map(|(t, target)| {
            let p = geom::add(o, geom::scale(unit, t));
            Hit {
                target,
                distance: t as f32,
                point: (p.0 as f32, p.1 as f32),
            }
        })
    }
}

/// The static colliders as capsules, by declared index (`None`: never hit).
fn colliders(list: &[Collider]) -> Vec<Option<Capsule>> {
    list.iter().map(|c| c.capsule()).collect()
}

/// A rewind over one recorded span (built by the history).
fn rewind<'h>(
    tick: u64,
    behind: u64,
    span: Span<'h>,
    colliders: &'h [Option<Capsule>],
) -> Rewind<'h> {
    Rewind {
        tick,
        behind,
        span,
        colliders,
    }
}
