//! The arena workload's formulas, mirroring its definition in `docs/WORKLOADS.md` operation for
//! operation (arena §2–§3): the mulberry32 PRNG, NPC circles and their closed-form positions and
//! hp, bot spawns and the open-loop input schedule.
//!
//! Every function is pure and `f64` unless the definition narrows to `f32`, so the zone, the bots and
//! the probe's validator compute bit-identical values from the same tick or input number.

use std::f64::consts::PI;

/// The workload's fixed parameters (WORKLOADS.md arena §1) that the formulas take.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ArenaConsts {
    /// World side `W`: the world is `[0, W] × [0, W]`.
    pub world: f64,
    /// Simulation ticks per second.
    pub tick_hz: f64,
    /// NPC angular speed, rad/s.
    pub omega: f64,
    /// Ticks between hp waves.
    pub hp_period_ticks: u64,
    /// NPC groups (one group changes per wave).
    pub hp_groups: u64,
    /// Length of one bot input displacement.
    pub input_step: f64,
    /// Heading increment per input, rad.
    pub input_turn: f64,
    /// The server clamps each of dx, dy to `[-max_input_step, max_input_step]`.
    pub max_input_step: f64,
}

impl Default for ArenaConsts {
    fn default() -> Self {
        Self {
            world: 1000.0,
            tick_hz: 20.0,
            omega: 1.0,
            hp_period_ticks: 40,
            hp_groups: 10,
            input_step: 5.0,
            input_turn: 0.05,
            max_input_step: 10.0,
        }
    }
}

/// mulberry32: a 32-bit state PRNG yielding floats in `[0, 1)` (WORKLOADS.md arena §2.2).
#[derive(Debug, Clone)]
pub struct Mulberry32 {
    state: u32,
}

impl Mulberry32 {
    /// A generator seeded with `seed`.
    pub fn new(seed: u32) -> Self {
        Self { state: seed }
    }

    /// The next float in `[0, 1)`.
    #[allow(clippy::should_implement_trait)] // not an iterator: it never ends
    pub fn next(&mut self) -> f64 {
        self.state = self.state.wrapping_add(0x6D2B_79F5);
        let mut t = self.state;
        t = (t ^ (t >> 15)).wrapping_mul(t | 1);
        t ^= t.wrapping_add((t ^ (t >> 7)).wrapping_mul(t | 61));
        f64::from(t ^ (t >> 14)) / 4_294_967_296.0
    }
}

/// Every NPC's circle (WORKLOADS.md arena §2.3), as columns indexed by NPC number.
#[derive(Debug, Clone, PartialEq)]
pub struct NpcParams {
    /// Radius in `[10, 100)`.
    pub r: Vec<f64>,
    /// Centre x.
    pub cx: Vec<f64>,
    /// Centre y.
    pub cy: Vec<f64>,
    /// Phase in `[0, 2π)`.
    pub ph: Vec<f64>,
}

impl NpcParams {
    /// The circles of `m` NPCs from one stream seeded `seed`: four draws per NPC in index order.
    pub fn new(m: usize, seed: u32, world: f64) -> Self {
        let mut rng = Mulberry32::new(seed);
        let mut p = Self {
            r: Vec::with_capacity(m),
            cx: Vec::with_capacity(m),
            cy: Vec::with_capacity(m),
            ph: Vec::with_capacity(m),
        };
        for _ in 0..m {
            let r = 10.0 + 90.0 * rng.next();
            p.r.push(r);
            p.cx.push(r + (world - 2.0 * r) * rng.next());
            p.cy.push(r + (world - 2.0 * r) * rng.next());
            p.ph.push(2.0 * PI * rng.next());
        }
        p
    }

    /// Number of NPCs.
    pub fn len(&self) -> usize {
        self.r.len()
    }

    /// Whether there is no NPC.
    pub fn is_empty(&self) -> bool {
        self.r.is_empty()
    }

    /// NPC `i`'s position at tick `k`, as float32 (`None` past the last NPC).
    pub fn pos(&self, c: &ArenaConsts, i: usize, k: u64) -> Option<(f32, f32)> {
        self.pos_with(c, i, k, |a| (a.sin(), a.cos()))
    }

    /// [`pos`](Self::pos) with the sine and cosine of the angle from `sin_cos`: where the
    /// platform's own `sin` and `cos` are slow (WebAssembly has no math instructions), one
    /// function sharing the argument reduction of both, with the same results.
    pub fn pos_with(
        &self,
        c: &ArenaConsts,
        i: usize,
        k: u64,
        sin_cos: impl Fn(f64) -> (f64, f64),
    ) -> Option<(f32, f32)> {
        let (r, cx, cy, ph) = (
            *self.r.get(i)?,
            *self.cx.get(i)?,
            *self.cy.get(i)?,
            *self.ph.get(i)?,
        );
        // Same association as the definition: `ph + omega * (k / tick_hz)`, so results are bit-identical.
        let a = ph + c.omega * (k as f64 / c.tick_hz);
        let (sin, cos) = sin_cos(a);
        Some(((cx + r * cos) as f32, (cy + r * sin) as f32))
    }
}

/// One hp wave step: `hp > 10 ? hp - 10 : 100` (never 0, always a change).
pub fn hp_step(hp: u8) -> u8 {
    if hp > 10 {
        hp - 10
    } else {
        100
    }
}

/// NPC `i`'s hp after tick `k`, in closed form (WORKLOADS.md arena §2.3).
pub fn npc_hp(c: &ArenaConsts, i: u64, k: u64) -> u8 {
    let period = c.hp_period_ticks.max(1);
    let groups = c.hp_groups.max(1);
    let waves = k / period;
    let group = i % groups;
    let n = if group == 0 {
        waves / groups
    } else if waves >= group {
        (waves - group) / groups + 1
    } else {
        0
    };
    // n % 10 < 10, so the value is in 10..=100.
    (100 - 10 * (n % 10)) as u8
}

/// Whether tick `k` is an hp wave, and which NPC group it hits.
pub fn hp_wave_group(c: &ArenaConsts, k: u64) -> Option<u64> {
    let period = c.hp_period_ticks.max(1);
    (k > 0 && k % period == 0).then(|| (k / period) % c.hp_groups.max(1))
}

/// Bot `b`'s spawn point and input heading (WORKLOADS.md arena §2.4).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BotParams {
    /// Spawn x, float32.
    pub x: f32,
    /// Spawn y, float32.
    pub y: f32,
    /// Initial input heading, rad.
    pub h: f64,
}

impl BotParams {
    /// From a PRNG seeded `1000 + b`: three draws x, y, heading.
    pub fn new(b: u32, world: f64) -> Self {
        let mut rng = Mulberry32::new(1000u32.wrapping_add(b));
        let x = world * rng.next();
        let y = world * rng.next();
        let h = 2.0 * PI * rng.next();
        Self {
            x: x as f32,
            y: y as f32,
            h,
        }
    }

    /// Input number `j` (0, 1, 2, …): `(step cos(h + turn j), step sin(h + turn j))`.
    pub fn input(&self, c: &ArenaConsts, j: u64) -> (f64, f64) {
        let a = self.h + c.input_turn * j as f64;
        (c.input_step * a.cos(), c.input_step * a.sin())
    }
}

/// Applies one input to a player position the way the server must (WORKLOADS.md arena §2.4): each of dx, dy
/// clamped to `[-max, max]`, then `f32(clamp(x + dx, lo, hi))` where `(lo, hi)` is `(0, W)` (the
/// crowded variant narrows it). `None` for a non-finite input, which the server ignores.
pub fn apply_input(
    c: &ArenaConsts,
    pos: (f32, f32),
    dx: f64,
    dy: f64,
    (lo, hi): (f64, f64),
) -> Option<(f32, f32)> {
    if !dx.is_finite() || !dy.is_finite() {
        return None;
    }
    let m = c.max_input_step;
    let dx = dx.clamp(-m, m);
    let dy = dy.clamp(-m, m);
    let x = (f64::from(pos.0) + dx).clamp(lo, hi) as f32;
    let y = (f64::from(pos.1) + dy).clamp(lo, hi) as f32;
    Some((x, y))
}

/// The scenario-B visibility rule (WORKLOADS.md arena §4): `(ex - px)² + (ey - py)² <= R²` in `f64` on the
/// `f32` positions.
pub fn within(p: (f32, f32), e: (f32, f32), radius: f64) -> bool {
    let dx = f64::from(e.0) - f64::from(p.0);
    let dy = f64::from(e.1) - f64::from(p.1);
    dx * dx + dy * dy <= radius * radius
}

/// Encodes a bot input as the zone's wire payload: dx then dy, each an `f64` little-endian.
pub fn encode_input(dx: f64, dy: f64) -> [u8; 16] {
    let mut out = [0u8; 16];
    out[..8].copy_from_slice(&dx.to_le_bytes());
    out[8..].copy_from_slice(&dy.to_le_bytes());
    out
}

/// Decodes [`encode_input`]'s payload; `None` unless exactly 16 bytes.
pub fn decode_input(payload: &[u8]) -> Option<(f64, f64)> {
    let (a, b) = payload.split_first_chunk::<8>()?;
    let b: &[u8; 8] = b.try_into().ok()?;
    Some((f64::from_le_bytes(*a), f64::from_le_bytes(*b)))
}

#[cfg(test)]
mod tests {
    // The float literals are the definition's values computed in f64, kept digit for digit.
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::excessive_precision)]
    use super::*;

    fn close(a: f64, b: f64, eps: f64) -> bool {
        (a - b).abs() <= eps
    }

    #[test]
    fn mulberry32_matches_the_reference() {
        let mut r = Mulberry32::new(42);
        // Full-precision values of the definition computed in f64 (WORKLOADS.md arena §2.2 quotes 10 digits:
        // 0.6011037519, 0.4482905590, 0.8524657935, 0.6697340414).
        let want = [
            0.601_103_751_920_163_6,
            0.448_290_558_997_541_67,
            0.852_465_793_490_409_9,
            0.669_734_041_439_369_3,
        ];
        for w in want {
            assert_eq!(r.next(), w);
        }
    }

    #[test]
    fn npc_check_values_of_arena_md() {
        let c = ArenaConsts::default();
        let p = NpcParams::new(1000, 42, c.world);
        assert!(close(p.r[0], 64.099_338, 5e-7));
        assert!(close(p.cx[0], 454.919_641, 5e-7));
        assert!(close(p.cy[0], 807.280_146, 5e-7));
        assert!(close(p.ph[0], 4.208_063, 5e-7));
        // Exact float32 values of the definition (9 significant digits round-trip f32).
        assert_eq!(p.pos(&c, 0, 0), Some((423.945_74, 751.161_13)));
        assert_eq!(p.pos(&c, 0, 100), Some((392.319_64, 821.062_93)));
        assert_eq!(p.pos(&c, 999, 100), Some((232.685_87, 756.126_6)));
        assert_eq!(p.pos(&c, 500, 12_345), Some((174.437, 463.831_08)));
        assert_eq!(p.pos(&c, 17, 1), Some((355.982_54, 754.680_7)));
        assert_eq!(p.pos(&c, 1000, 0), None);
        let near = (0..1000)
            .filter(|&i| within((500.0, 500.0), p.pos(&c, i, 0).unwrap(), 150.0))
            .count();
        assert_eq!(near, 86);
    }

    #[test]
    fn hp_closed_form_matches_stepping() {
        let c = ArenaConsts::default();
        assert!((0..1000).all(|i| npc_hp(&c, i, 400) == 90));
        assert_eq!(npc_hp(&c, 3, 119), 100);
        assert_eq!(npc_hp(&c, 3, 120), 90);
        assert_eq!(npc_hp(&c, 0, 39), 100);
        assert_eq!(npc_hp(&c, 13, 4000), 100);
        // Step a few NPCs tick by tick through 25 full hp cycles and compare with the closed form.
        let mut hp = [100u8; 20];
        for k in 1..=10_000u64 {
            if let Some(g) = hp_wave_group(&c, k) {
                for (i, h) in hp.iter_mut().enumerate() {
                    if i as u64 % c.hp_groups == g {
                        *h = hp_step(*h);
                    }
                }
            }
            for (i, h) in hp.iter().enumerate() {
                assert_eq!(*h, npc_hp(&c, i as u64, k), "npc {i} tick {k}");
                assert_ne!(*h, 0);
            }
        }
    }

    #[test]
    fn bot_check_values_of_arena_md() {
        let c = ArenaConsts::default();
        let b0 = BotParams::new(0, c.world);
        assert_eq!((b0.x, b0.y), (795.194_9, 827.687_9));
        assert_eq!(b0.h, 4.344_923_835_540_722_5);
        let b99 = BotParams::new(99, c.world);
        assert_eq!((b99.x, b99.y), (583.418_8, 477.709_1));
        assert_eq!(
            BotParams::new(1, c.world).input(&c, 7),
            (2.496_358_041_098_884_6, 4.332_227_663_759_251)
        );
        assert_eq!(
            b0.input(&c, 7),
            (-0.087_321_284_774_577_4, -4.999_237_441_172_935_4)
        );
        let b = BotParams::new(12_345, c.world);
        assert_eq!((b.x, b.y), (800.838_93, 954.809_27));
    }

    #[test]
    fn inputs_are_clamped_and_non_finite_ignored() {
        let c = ArenaConsts::default();
        let w = (0.0, c.world);
        assert_eq!(
            apply_input(&c, (5.0, 995.0), -50.0, 50.0, w),
            Some((0.0, 1000.0))
        );
        assert_eq!(
            apply_input(&c, (500.0, 500.0), 50.0, -50.0, w),
            Some((510.0, 490.0))
        );
        assert_eq!(
            apply_input(&c, (500.0, 500.0), 5.0, -5.0, (495.0, 502.0)),
            Some((502.0, 495.0))
        );
        assert_eq!(apply_input(&c, (500.0, 500.0), f64::NAN, 1.0, w), None);
        assert_eq!(apply_input(&c, (500.0, 500.0), 1.0, f64::INFINITY, w), None);
        let pay = encode_input(1.5, -2.25);
        assert_eq!(decode_input(&pay), Some((1.5, -2.25)));
        assert_eq!(decode_input(&pay[..15]), None);
        assert_eq!(decode_input(&[0u8; 17]), None);
    }

    #[test]
    fn visibility_is_inclusive_at_the_radius() {
        assert!(within((0.0, 0.0), (150.0, 0.0), 150.0));
        assert!(!within((0.0, 0.0), (150.0, 0.000_1), 150.0));
        assert!(within((1.0, 1.0), (1.0, 1.0), 0.0));
    }
}
