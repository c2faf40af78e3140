//! Hit geometry in the plane: rays, segments and points against capsules (a circle is a capsule
//! whose two ends coincide). Computed in `f64` so a hit on a target far from the origin is as
//! exact as one near it; answers are `f32` like every position in the world.

/// A capsule in world coordinates: every point within `radius` of the segment `a`–`b`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct Capsule {
    pub(super) a: (f64, f64),
    pub(super) b: (f64, f64),
    pub(super) radius: f64,
}

impl Capsule {
    /// A capsule from `f32` ends; `None` when any number is not finite or the radius is negative
    /// (such a shape can be hit by nothing).
    pub(super) fn new(a: (f32, f32), b: (f32, f32), radius: f32) -> Option<Self> {
        let finite = [a.0, a.1, b.0, b.1, radius].iter().all(|v| v.is_finite());
        (finite && radius >= 0.0).then(|| Capsule {
            a: (f64::from(a.0), f64::from(a.1)),
            b: (f64::from(b.0), f64::from(b.1)),
            radius: f64::from(radius),
        })
    }

    /// Whether `p` lies inside or on the capsule.
    pub(super) fn contains(&self, p: (f64, f64)) -> bool {
        dist2_point_segment(p, self.a, self.b) <= self.radius * self.radius
    }

    /// The distance along the ray from `origin` in unit direction `dir` at which it first meets
    /// the capsule, if within `max`: 0 when `origin` is inside, the touching point for a tangent.
    pub(super) fn ray_entry(&self, origin: (f64, f64), dir: (f64, f64), max: f64) -> Option<f64> {
        if self.contains(origin) {
            return Some(0.0);
        }
        let mut best = ray_circle(origin, dir, self.a, self.radius);
        let ab = sub(self.b, self.a);
        let len = dot(ab, ab).sqrt();
        if len > 0.0 {
            best = min_opt(best, ray_circle(origin, dir, self.b, self.radius));
            // The two straight sides, offset from the axis by the radius on either hand.
            let u = (ab.0 / len, ab.1 / len);
            let n = (-u.1, u.0);
            let dn = dot(dir, n);
            if dn != 0.0 {
                let on = dot(sub(origin, self.a), n);
                for side in [self.radius, -self.radius] {
                    let t = (side - on) / dn;
                    if t >= 0.0 {
                        let along = dot(sub(add(origin, scale(dir, t)), self.a), u);
                        if (0.0..=len).contains(&along) {
                            best = min_opt(best, Some(t));
                        }
                    }
                }
            }
        }
        best.filter(|&t| t <= max)
    }
}

/// The smallest `t >= 0` with `|origin + t·dir − c| = r` (`dir` a unit vector), origin outside.
fn ray_circle(origin: (f64, f64), dir: (f64, f64), c: (f64, f64), r: f64) -> Option<f64> {
    let m = sub(origin, c);
    let b = dot(m, dir);
    let cc = dot(m, m) - r * r;
    if cc > 0.0 && b > 0.0 {
        return None; // outside and pointing away
    }
    let disc = b * b - cc;
    if disc < 0.0 {
        return None;
    }
    Some((-b - disc.sqrt()).max(0.0))
}

/// Squared distance from `p` to the segment `a`–`b` (a point when `a == b`).
pub(super) fn dist2_point_segment(p: (f64, f64), a: (f64, f64), b: (f64, f64)) -> f64 {
    let ab = sub(b, a);
    let ap = sub(p, a);
    let len2 = dot(ab, ab);
    let t = if len2 > 0.0 {
        (dot(ap, ab) / len2).clamp(0.0, 1.0)
    } else {
        0.0
    };
    let d = sub(ap, scale(ab, t));
    dot(d, d)
}

fn min_opt(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    match (a, b) {
        (Some(x), Some(y)) => Some(x.min(y)),
        (x, None) => x,
        (None, y) => y,
    }
}

pub(super) fn sub(a: (f64, f64), b: (f64, f64)) -> (f64, f64) {
    (a.0 - b.0, a.1 - b.1)
}

pub(super) fn add(a: (f64, f64), b: (f64, f64)) -> (f64, f64) {
    (a.0 + b.0, a.1 + b.1)
}

pub(super) fn scale(a: (f64, f64), k: f64) -> (f64, f64) {
    (a.0 * k, a.1 * k)
}

pub(super) fn dot(a: (f64, f64), b: (f64, f64)) -> f64 {
    a.0 * b.0 + a.1 * b.1
}
