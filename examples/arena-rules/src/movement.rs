//! The movement rule shared by the zone and the page.
//!
//! [`step`] is the only place a player's position changes. The page runs this same code, compiled
//! to WebAssembly, to predict its own player: every operation is a single IEEE-754 `f32`
//! operation (Rust never fuses them, and WebAssembly's `f32` arithmetic and `sqrt` are correctly
//! rounded), so the server and the prediction agree to the bit. A fixture
//! (`tests/fixtures/arena/movement.json`) replayed natively and through the page's module shows it.
//!
//! The step ends by snapping the position to the replication quantum, so the state a client decodes
//! from the wire is exactly the server's state and replaying unacknowledged inputs from it reproduces
//! the server's future positions with no correction at all.

use zonekeep_protocol::quant::{pos_decode, pos_encode};

/// Width of the arena in world units (x runs from 0 to this).
pub const ARENA_W: f32 = 120.0;
/// Height of the arena in world units (y runs from 0 to this, downwards on screen).
pub const ARENA_H: f32 = 80.0;
/// A player's collision radius.
pub const PLAYER_RADIUS: f32 = 0.6;
/// Running speed in units per second: the speed limit.
pub const SPEED: f32 = 8.0;
/// Walking speed (input flag [`FLAG_WALK`]).
pub const WALK_SPEED: f32 = 3.0;
/// The zone's tick rate; one input moves a player for one tick.
pub const TICK_HZ: u32 = 30;
/// One tick in seconds, as the step uses it (`1 / 30` rounded to `f32`).
pub const DT: f32 = 1.0 / 30.0;
/// Position quantum of the arena's world (what clients decode positions with).
pub const POS_STEP: f32 = 0.01;
/// `1/√2` rounded to `f32`: diagonal moves are scaled by it so they are not faster.
pub const DIAGONAL: f32 = std::f32::consts::FRAC_1_SQRT_2;

/// Input direction bit: up (−y).
pub const DIR_UP: u8 = 1;
/// Input direction bit: down (+y).
pub const DIR_DOWN: u8 = 2;
/// Input direction bit: left (−x).
pub const DIR_LEFT: u8 = 4;
/// Input direction bit: right (+x).
pub const DIR_RIGHT: u8 = 8;
/// Every direction bit; other bits of the direction byte are ignored.
pub const DIR_MASK: u8 = DIR_UP | DIR_DOWN | DIR_LEFT | DIR_RIGHT;
/// Input flag bit: walk at [`WALK_SPEED`].
pub const FLAG_WALK: u8 = 1;
/// Every flag bit; other bits of the flags byte are ignored.
pub const FLAG_MASK: u8 = FLAG_WALK;

/// Smallest x a player's centre can reach.
pub const MIN_X: f32 = PLAYER_RADIUS;
/// Largest x a player's centre can reach.
pub const MAX_X: f32 = ARENA_W - PLAYER_RADIUS;
/// Smallest y a player's centre can reach.
pub const MIN_Y: f32 = PLAYER_RADIUS;
/// Largest y a player's centre can reach.
pub const MAX_Y: f32 = ARENA_H - PLAYER_RADIUS;

/// A player's movement state: its position.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MoveState {
    /// x in world units.
    pub x: f32,
    /// y in world units (down on screen).
    pub y: f32,
}

/// One input: an intent, never a position.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct MoveInput {
    /// Direction bits ([`DIR_UP`] …), already masked with [`DIR_MASK`].
    pub dir: u8,
    /// Flag bits ([`FLAG_WALK`]), already masked with [`FLAG_MASK`].
    pub flags: u8,
}

impl MoveInput {
    /// Decodes an input payload: one direction byte, then an optional flags byte. Unknown bits are
    /// dropped. `None` for an empty or over-long payload.
    pub fn decode(payload: &[u8]) -> Option<MoveInput> {
        match payload {
            [dir] => Some(MoveInput {
                dir: dir & DIR_MASK,
                flags: 0,
            }),
            [dir, flags] => Some(MoveInput {
                dir: dir & DIR_MASK,
                flags: flags & FLAG_MASK,
            }),
            _ => None,
        }
    }

    /// The payload the page sends for this input (the flags byte only when a flag is set).
    pub fn encode(&self) -> Vec<u8> {
        if self.flags == 0 {
            vec![self.dir]
        } else {
            vec![self.dir, self.flags]
        }
    }
}

/// A round obstacle that blocks movement.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Pillar {
    /// Centre x.
    pub x: f32,
    /// Centre y.
    pub y: f32,
    /// Radius.
    pub r: f32,
}

/// Snaps a coordinate to the position quantum, exactly as a client decodes it from the wire.
pub fn snap(v: f32) -> f32 {
    pos_decode(pos_encode(v, POS_STEP), POS_STEP)
}

/// How far one input moves a player in `dt` seconds before anything stops it: at most
/// `SPEED * dt` (`WALK_SPEED` walking), diagonals no faster. `None` for an input with no direction
/// (or only opposite ones). Each operation is one `f32` operation, so a page's `Math.fround` copy
/// agrees to the bit.
pub fn displacement(input: &MoveInput, dt: f32) -> Option<(f32, f32)> {
    let mut dx: f32 = 0.0;
    let mut dy: f32 = 0.0;
    if input.dir & DIR_RIGHT != 0 {
        dx += 1.0;
    }
    if input.dir & DIR_LEFT != 0 {
        dx -= 1.0;
    }
    if input.dir & DIR_DOWN != 0 {
        dy += 1.0;
    }
    if input.dir & DIR_UP != 0 {
        dy -= 1.0;
    }
    if dx == 0.0 && dy == 0.0 {
        return None;
    }
    let speed = if input.flags & FLAG_WALK != 0 {
        WALK_SPEED
    } else {
        SPEED
    };
    let mut len = speed * dt;
    if dx != 0.0 && dy != 0.0 {
        len *= DIAGONAL;
    }
    Some((dx * len, dy * len))
}

/// Moves `state` by one input over `dt` seconds: at most `SPEED * dt` (diagonals are not faster),
/// pushed out of every pillar in slice order, kept inside the arena, snapped to the quantum.
/// An input with no direction (or only opposite ones) leaves the state unchanged.
pub fn step(state: &MoveState, input: &MoveInput, dt: f32, pillars: &[Pillar]) -> MoveState {
    let Some((mx, my)) = displacement(input, dt) else {
        return *state;
    };
    let mut x = state.x + mx;
    let mut y = state.y + my;
    for p in pillars {
        let ex = x - p.x;
        let ey = y - p.y;
        let min = p.r + PLAYER_RADIUS;
        let d2 = ex * ex + ey * ey;
        if d2 >= min * min {
            continue;
        }
        if d2 > 0.0 {
            // Out along the line from the centre, to the rim: sliding around the pillar.
            let k = min / d2.sqrt();
            x = p.x + ex * k;
            y = p.y + ey * k;
        } else {
            // Exactly on the centre: no direction to push along, so pick one deterministically.
            x = p.x + min;
        }
    }
    x = x.clamp(MIN_X, MAX_X);
    y = y.clamp(MIN_Y, MAX_Y);
    MoveState {
        x: snap(x),
        y: snap(y),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dist(a: &MoveState, b: &MoveState) -> f32 {
        ((a.x - b.x) * (a.x - b.x) + (a.y - b.y) * (a.y - b.y)).sqrt()
    }

    const RIGHT: MoveInput = MoveInput {
        dir: DIR_RIGHT,
        flags: 0,
    };

    #[test]
    fn one_input_moves_at_most_the_speed_limit_in_every_direction() {
        let start = MoveState { x: 60.0, y: 40.0 };
        for dir in 0..=DIR_MASK {
            for flags in [0, FLAG_WALK] {
                let s = step(&start, &MoveInput { dir, flags }, DT, &[]);
                let limit = if flags == 0 { SPEED } else { WALK_SPEED } * DT;
                // Snapping may add at most half a quantum per axis.
                assert!(
                    dist(&start, &s) <= limit + POS_STEP,
                    "dir {dir} flags {flags}: {s:?}"
                );
            }
        }
        let s = step(&start, &RIGHT, DT, &[]);
        assert!((s.x - start.x - SPEED * DT).abs() <= POS_STEP);
        assert_eq!(s.y, start.y);
        let diag = step(
            &start,
            &MoveInput {
                dir: DIR_RIGHT | DIR_DOWN,
                flags: 0,
            },
            DT,
            &[],
        );
        assert!((dist(&start, &diag) - SPEED * DT).abs() <= POS_STEP);
    }

    #[test]
    fn no_direction_or_opposite_directions_do_not_move() {
        let start = MoveState { x: 10.0, y: 10.0 };
        for dir in [0, DIR_LEFT | DIR_RIGHT, DIR_UP | DIR_DOWN, DIR_MASK] {
            assert_eq!(step(&start, &MoveInput { dir, flags: 0 }, DT, &[]), start);
        }
    }

    #[test]
    fn players_stay_inside_the_arena() {
        let mut s = MoveState { x: 1.0, y: 1.0 };
        let up_left = MoveInput {
            dir: DIR_UP | DIR_LEFT,
            flags: 0,
        };
        for _ in 0..100 {
            s = step(&s, &up_left, DT, &[]);
        }
        // The bounds themselves are snapped to the grid like every result.
        assert_eq!(
            s,
            MoveState {
                x: snap(MIN_X),
                y: snap(MIN_Y)
            }
        );
        let down_right = MoveInput {
            dir: DIR_DOWN | DIR_RIGHT,
            flags: 0,
        };
        for _ in 0..2000 {
            s = step(&s, &down_right, DT, &[]);
            assert!((snap(MIN_X)..=snap(MAX_X)).contains(&s.x));
            assert!((snap(MIN_Y)..=snap(MAX_Y)).contains(&s.y));
        }
        assert_eq!(
            s,
            MoveState {
                x: snap(MAX_X),
                y: snap(MAX_Y)
            }
        );
    }

    #[test]
    fn pillars_block_and_let_players_slide_around() {
        let pillar = Pillar {
            x: 20.0,
            y: 10.0,
            r: 2.0,
        };
        let min = pillar.r + PLAYER_RADIUS;
        // Straight at the centre: stopped at the rim, never inside.
        let mut s = MoveState { x: 10.0, y: 10.0 };
        for _ in 0..100 {
            s = step(&s, &RIGHT, DT, &[pillar]);
            let d = dist(&s, &MoveState { x: 20.0, y: 10.0 });
            assert!(d >= min - POS_STEP, "inside the pillar: {s:?} d={d}");
        }
        assert!(s.x < pillar.x);
        // Slightly off-centre: slides around and ends up past the pillar.
        let mut s = MoveState { x: 10.0, y: 9.5 };
        for _ in 0..200 {
            s = step(&s, &RIGHT, DT, &[pillar]);
        }
        assert!(s.x > pillar.x + min, "did not slide past: {s:?}");
    }

    #[test]
    fn dead_centre_is_pushed_out_deterministically() {
        let pillar = Pillar {
            x: 20.0,
            y: 10.0,
            r: 2.0,
        };
        let s = step(
            &MoveState {
                x: 20.0 - SPEED * DT,
                y: 10.0,
            },
            &RIGHT,
            DT,
            &[pillar],
        );
        assert!(s.x >= 20.0 + pillar.r + PLAYER_RADIUS - POS_STEP);
    }

    #[test]
    fn results_are_on_the_wire_grid() {
        let mut s = MoveState {
            x: 33.333,
            y: 7.777,
        };
        let input = MoveInput {
            dir: DIR_DOWN | DIR_LEFT,
            flags: FLAG_WALK,
        };
        for _ in 0..50 {
            s = step(&s, &input, DT, &[]);
            assert_eq!(s.x, snap(s.x));
            assert_eq!(s.y, snap(s.y));
        }
    }

    #[test]
    fn input_payloads_decode_and_round_trip() {
        assert_eq!(MoveInput::decode(&[]), None);
        assert_eq!(MoveInput::decode(&[1, 2, 3]), None);
        assert_eq!(
            MoveInput::decode(&[0xff]),
            Some(MoveInput {
                dir: DIR_MASK,
                flags: 0
            })
        );
        assert_eq!(
            MoveInput::decode(&[DIR_UP, 0xff]),
            Some(MoveInput {
                dir: DIR_UP,
                flags: FLAG_WALK
            })
        );
        for dir in 0..=DIR_MASK {
            for flags in [0, FLAG_WALK] {
                let i = MoveInput { dir, flags };
                assert_eq!(MoveInput::decode(&i.encode()), Some(i));
            }
        }
    }
}
