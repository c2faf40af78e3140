//! The arena's fixed layout (pillars) and deterministic random placement.
//!
//! Pillars are fixed so every arena looks the same; everything random (drone paths, pickup spots,
//! spawn points) is drawn from the zone's seeded RNG, so a replay with the same seed is identical.

use rand_core::RngCore;

use crate::movement::{snap, MoveState, Pillar, ARENA_H, ARENA_W, PLAYER_RADIUS};

/// The pillars, in the order [`step`](crate::movement::step) pushes players out of them.
/// Centres are whole units, so they are exactly on the wire grid and clients decode the same
/// values the server collides with.
pub const PILLARS: [Pillar; 10] = [
    Pillar {
        x: 30.0,
        y: 20.0,
        r: 3.0,
    },
    Pillar {
        x: 60.0,
        y: 14.0,
        r: 2.0,
    },
    Pillar {
        x: 90.0,
        y: 22.0,
        r: 3.5,
    },
    Pillar {
        x: 20.0,
        y: 56.0,
        r: 2.5,
    },
    Pillar {
        x: 46.0,
        y: 40.0,
        r: 4.0,
    },
    Pillar {
        x: 76.0,
        y: 46.0,
        r: 3.0,
    },
    Pillar {
        x: 102.0,
        y: 60.0,
        r: 2.5,
    },
    Pillar {
        x: 60.0,
        y: 66.0,
        r: 2.0,
    },
    Pillar {
        x: 106.0,
        y: 34.0,
        r: 2.0,
    },
    Pillar {
        x: 12.0,
        y: 30.0,
        r: 1.5,
    },
];

/// A uniform `f32` in `[0, 1)` from 24 random bits (exact in `f32`).
pub fn unit(rng: &mut impl RngCore) -> f32 {
    (rng.next_u32() >> 8) as f32 * (1.0 / 16_777_216.0)
}

/// Whether a circle of radius `r` at `(x, y)` overlaps no pillar (with `gap` to spare).
pub fn clear_of_pillars(x: f32, y: f32, r: f32, gap: f32) -> bool {
    PILLARS.iter().all(|p| {
        let dx = x - p.x;
        let dy = y - p.y;
        let min = p.r + r + gap;
        dx * dx + dy * dy >= min * min
    })
}

/// A random point at least `margin` from the arena's edges and clear of every pillar by `margin`.
/// Tries a bounded number of draws, then falls back to the arena's centre row at a pillar-free x
/// (the layout guarantees one), so it always terminates.
pub fn random_open_point(rng: &mut impl RngCore, margin: f32) -> (f32, f32) {
    for _ in 0..64 {
        let x = margin + unit(rng) * (ARENA_W - 2.0 * margin);
        let y = margin + unit(rng) * (ARENA_H - 2.0 * margin);
        if clear_of_pillars(x, y, PLAYER_RADIUS, margin) {
            return (x, y);
        }
    }
    (ARENA_W / 2.0, 4.0)
}

/// A player's starting point: near the arena's centre (within
/// [`SPAWN_RADIUS`](crate::game::SPAWN_RADIUS)), on the wire grid and clear of pillars (bounded
/// draws, then the centre, which the layout keeps clear).
pub fn spawn_point(rng: &mut impl RngCore) -> MoveState {
    let radius = crate::game::SPAWN_RADIUS;
    for _ in 0..16 {
        let x = snap(ARENA_W / 2.0 + (unit(rng) * 2.0 - 1.0) * radius);
        let y = snap(ARENA_H / 2.0 + (unit(rng) * 2.0 - 1.0) * radius);
        if clear_of_pillars(x, y, PLAYER_RADIUS, 0.1) {
            return MoveState { x, y };
        }
    }
    MoveState {
        x: ARENA_W / 2.0,
        y: ARENA_H / 2.0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use zonekeep_core::zone_rng;

    #[test]
    fn pillars_are_on_the_grid_inside_the_arena_and_apart() {
        for (i, p) in PILLARS.iter().enumerate() {
            assert_eq!((snap(p.x), snap(p.y)), (p.x, p.y));
            assert!(p.x - p.r > 2.0 && p.x + p.r < ARENA_W - 2.0);
            assert!(p.y - p.r > 2.0 && p.y + p.r < ARENA_H - 2.0);
            for q in &PILLARS[i + 1..] {
                let d = ((p.x - q.x).powi(2) + (p.y - q.y).powi(2)).sqrt();
                // Room for a player to pass between any two pillars.
                assert!(d > p.r + q.r + 4.0 * PLAYER_RADIUS);
            }
        }
    }

    #[test]
    fn random_points_are_open_and_deterministic() {
        let mut a = zone_rng(1, "arena-test");
        let mut b = zone_rng(1, "arena-test");
        for _ in 0..500 {
            let (x, y) = random_open_point(&mut a, 1.0);
            assert_eq!((x, y), random_open_point(&mut b, 1.0));
            assert!((1.0..=ARENA_W - 1.0).contains(&x) && (1.0..=ARENA_H - 1.0).contains(&y));
            assert!(clear_of_pillars(x, y, PLAYER_RADIUS, 0.0));
        }
        assert!(clear_of_pillars(ARENA_W / 2.0, 4.0, PLAYER_RADIUS, 1.0));
    }
}
