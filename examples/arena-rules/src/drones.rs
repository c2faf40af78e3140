//! NPC drones: each flies a closed loop of waypoints at its own speed, forever.
//!
//! Paths are drawn from the zone's RNG when the zone is created, and flying a path uses no
//! randomness, so drones are deterministic for a given seed. Drones fly over pillars.

use rand_core::RngCore;

use crate::map::unit;
use crate::movement::{ARENA_H, ARENA_W};

/// Fewest waypoints in a drone's loop.
const MIN_WAYPOINTS: usize = 3;
/// Most waypoints in a drone's loop.
const MAX_WAYPOINTS: usize = 5;
/// Slowest drone, units per second.
const MIN_SPEED: f32 = 2.0;
/// Fastest drone, units per second (slower than players, so they can be outrun).
const MAX_SPEED: f32 = 6.0;
/// Half the size of the square a drone's loop stays in.
const PATROL_HALF: f32 = 14.0;
/// How far from the arena's edges drones stay.
const EDGE: f32 = 2.0;

/// One drone's loop and where it is on it.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct DronePath {
    waypoints: Vec<(f32, f32)>,
    next: usize,
    x: f32,
    y: f32,
    speed: f32,
}

impl DronePath {
    /// A random loop of 3–5 waypoints around a random centre, starting at its first waypoint.
    pub fn random(rng: &mut impl RngCore) -> DronePath {
        let cx = EDGE + PATROL_HALF + unit(rng) * (ARENA_W - 2.0 * (EDGE + PATROL_HALF));
        let cy = EDGE + PATROL_HALF + unit(rng) * (ARENA_H - 2.0 * (EDGE + PATROL_HALF));
        let n = MIN_WAYPOINTS + (rng.next_u32() as usize) % (MAX_WAYPOINTS - MIN_WAYPOINTS + 1);
        let waypoints: Vec<(f32, f32)> = (0..n)
            .map(|_| {
                let x = cx + (unit(rng) * 2.0 - 1.0) * PATROL_HALF;
                let y = cy + (unit(rng) * 2.0 - 1.0) * PATROL_HALF;
                (x.clamp(EDGE, ARENA_W - EDGE), y.clamp(EDGE, ARENA_H - EDGE))
            })
            .collect();
        let speed = MIN_SPEED + unit(rng) * (MAX_SPEED - MIN_SPEED);
        let (x, y) = waypoints.first().copied().unwrap_or((cx, cy));
        DronePath {
            waypoints,
            next: 1,
            x,
            y,
            speed,
        }
    }

    /// The drone's position.
    pub fn pos(&self) -> (f32, f32) {
        (self.x, self.y)
    }

    /// The drone's speed in units per second.
    pub fn speed(&self) -> f32 {
        self.speed
    }

    /// Flies `dt` seconds along the loop (passing waypoints without losing distance) and
    /// returns the new position.
    pub fn advance(&mut self, dt: f32) -> (f32, f32) {
        let mut left = self.speed * dt;
        // Bounded: a step never passes more than every waypoint once.
        for _ in 0..=self.waypoints.len() {
            let Some(&(tx, ty)) = self.waypoints.get(self.next) else {
                self.next = 0;
                continue;
            };
            let dx = tx - self.x;
            let dy = ty - self.y;
            let d = (dx * dx + dy * dy).sqrt();
            if d > left {
                self.x += dx / d * left;
                self.y += dy / d * left;
                break;
            }
            self.x = tx;
            self.y = ty;
            left -= d;
            self.next = (self.next + 1) % self.waypoints.len().max(1);
        }
        (self.x, self.y)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::movement::DT;
    use zonekeep_core::zone_rng;

    #[test]
    fn drones_are_deterministic_for_a_seed_and_differ_across_seeds() {
        let fly = |seed: u64| {
            let mut rng = zone_rng(seed, "arena-1");
            let mut drones: Vec<DronePath> = (0..8).map(|_| DronePath::random(&mut rng)).collect();
            let mut trace = Vec::new();
            for _ in 0..300 {
                for d in &mut drones {
                    trace.push(d.advance(DT));
                }
            }
            trace
        };
        assert_eq!(fly(7), fly(7));
        assert_ne!(fly(7), fly(8));
    }

    #[test]
    fn drones_move_at_their_speed_and_stay_inside() {
        let mut rng = zone_rng(3, "arena-1");
        for _ in 0..20 {
            let mut d = DronePath::random(&mut rng);
            assert!((MIN_SPEED..=MAX_SPEED).contains(&d.speed()));
            let mut moved = 0.0f32;
            for _ in 0..600 {
                let (x0, y0) = d.pos();
                let (x, y) = d.advance(DT);
                let step = ((x - x0).powi(2) + (y - y0).powi(2)).sqrt();
                // Straight-line distance never exceeds path distance.
                assert!(step <= d.speed() * DT + 1e-4);
                moved += step;
                assert!(
                    (EDGE..=ARENA_W - EDGE).contains(&x) && (EDGE..=ARENA_H - EDGE).contains(&y)
                );
            }
            assert!(moved > 0.5 * d.speed() * DT * 600.0, "drone barely moved");
        }
    }
}
