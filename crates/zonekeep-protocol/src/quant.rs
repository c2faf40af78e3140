//! Quantization, bit-exact per PROTOCOL.md §3: all arithmetic in `f64` from the exactly widened `f32`,
//! integers picked only by `floor(x + 0.5)`, results narrowed with `as f32`. The TypeScript codec performs
//! the same operations in the same order, so both produce identical bits.
//!
//! These functions never panic. Their parameters are assumed valid (as [`crate::schema::Schema::validate`]
//! guarantees); with invalid parameters the result is unspecified but still a plain number.

/// `2^bits − 1` for `bits` in 0..=32 (larger `bits` are treated as 32).
pub fn quant_steps(bits: u8) -> u64 {
    (1u64 << u32::from(bits.min(32))) - 1
}

/// `quant(min, max, bits)` encode (§3.1): NaN → 0, clamp into `[min, max]`, scale to `0..=steps`.
pub fn quant_encode(v: f32, min: f32, max: f32, bits: u8) -> u32 {
    if v.is_nan() {
        return 0;
    }
    let steps = quant_steps(bits) as f64;
    let (lo, hi) = (f64::from(min), f64::from(max));
    let c = f64::from(v).max(lo).min(hi);
    let t = (c - lo) / (hi - lo);
    let q = (t * steps + 0.5).floor().min(steps);
    // `as` saturates (NaN → 0), which keeps degenerate parameters panic-free.
    q as u32
}

/// `quant(min, max, bits)` decode (§3.1): `f32(min + (q × (max − min)) / steps)`.
pub fn quant_decode(q: u32, min: f32, max: f32, bits: u8) -> f32 {
    let steps = quant_steps(bits) as f64;
    let (lo, hi) = (f64::from(min), f64::from(max));
    (lo + (f64::from(q) * (hi - lo)) / steps) as f32
}

/// `2^(bits−1)`, the code of 0 in a centered field (bits clamped to 1..=32).
pub fn centered_half(bits: u8) -> u64 {
    1u64 << (u32::from(bits.clamp(1, 32)) - 1)
}

/// `centered(range, bits)` encode (§3.2): NaN → `half`; 0 encodes as exactly `half`.
pub fn centered_encode(v: f32, range: f32, bits: u8) -> u32 {
    let half = centered_half(bits) as f64;
    if v.is_nan() {
        return half as u32;
    }
    let step = f64::from(range) / half;
    let top = quant_steps(bits) as f64;
    let q = ((f64::from(v) / step + 0.5).floor() + half)
        .max(0.0)
        .min(top);
    q as u32
}

/// `centered(range, bits)` decode (§3.2): `f32((q − half) × step)`.
pub fn centered_decode(q: u32, range: f32, bits: u8) -> f32 {
    let half = centered_half(bits) as f64;
    let step = f64::from(range) / half;
    ((f64::from(q) - half) * step) as f32
}

/// TAU as used by §3.3 (`6.283185307179586`, the `f64` nearest to 2π).
pub const TAU: f64 = std::f64::consts::TAU;

/// `angle(bits)` encode (§3.3): wraps any finite angle into `0..2^bits`; NaN and ±∞ → 0.
pub fn angle_encode(a: f32, bits: u8) -> u32 {
    if !a.is_finite() {
        return 0;
    }
    let n = (1u64 << u32::from(bits.min(32))) as f64;
    let mut t = f64::from(a) / TAU;
    t -= t.floor();
    let q = (t * n + 0.5).floor();
    if q >= n {
        0
    } else {
        q as u32
    }
}

/// `angle(bits)` decode (§3.3): `f32((q × TAU) / n)`.
pub fn angle_decode(q: u32, bits: u8) -> f32 {
    let n = (1u64 << u32::from(bits.min(32))) as f64;
    ((f64::from(q) * TAU) / n) as f32
}

/// Position coordinate encode (§3.4): `floor(v / step + 0.5)`, NaN → 0, clamped to the `i32` range.
pub fn pos_encode(v: f32, step: f32) -> i32 {
    if v.is_nan() {
        return 0;
    }
    let q = (f64::from(v) / f64::from(step) + 0.5).floor();
    q.clamp(f64::from(i32::MIN), f64::from(i32::MAX)) as i32
}

/// Position coordinate decode (§3.4): `f32(q × step)`.
pub fn pos_decode(q: i32, step: f32) -> f32 {
    (f64::from(q) * f64::from(step)) as f32
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quant_endpoints_and_clamp() {
        assert_eq!(quant_encode(0.0, 0.0, 1.0, 8), 0);
        assert_eq!(quant_encode(1.0, 0.0, 1.0, 8), 255);
        assert_eq!(quant_encode(2.0, 0.0, 1.0, 8), 255);
        assert_eq!(quant_encode(-2.0, 0.0, 1.0, 8), 0);
        assert_eq!(quant_encode(f32::NAN, 0.0, 1.0, 8), 0);
        assert_eq!(quant_encode(f32::INFINITY, 0.0, 1.0, 8), 255);
        assert_eq!(quant_encode(0.5, 0.0, 1.0, 1), 1); // tie rounds toward +inf
        assert_eq!(quant_encode(1.0, -1.0, 1.0, 32), u32::MAX);
        assert_eq!(quant_decode(255, 0.0, 1.0, 8), 1.0);
        assert_eq!(quant_decode(0, -3.0, 1.0, 8), -3.0);
    }

    #[test]
    fn centered_zero_is_exact() {
        for bits in 2..=32u8 {
            let q = centered_encode(0.0, 10.0, bits);
            assert_eq!(u64::from(q), centered_half(bits));
            assert_eq!(centered_decode(q, 10.0, bits), 0.0);
            assert_eq!(centered_encode(-0.0, 10.0, bits), q);
        }
        assert_eq!(centered_encode(100.0, 10.0, 8), 255);
        assert_eq!(centered_encode(-100.0, 10.0, 8), 0);
        assert_eq!(centered_decode(0, 10.0, 8), -10.0);
        assert_eq!(centered_encode(f32::NAN, 10.0, 8), 128);
    }

    #[test]
    fn angle_wraps() {
        assert_eq!(angle_encode(0.0, 8), 0);
        assert_eq!(angle_encode(std::f32::consts::PI, 8), 128);
        assert_eq!(angle_encode(-std::f32::consts::FRAC_PI_2, 8), 192);
        assert_eq!(angle_encode(std::f32::consts::TAU, 8), 0);
        assert_eq!(angle_encode(-1e-9, 8), 0); // rounds up to n, wraps to 0
        assert_eq!(angle_encode(f32::INFINITY, 8), 0);
        assert_eq!(angle_decode(64, 8), std::f32::consts::FRAC_PI_2);
    }

    #[test]
    fn positions() {
        assert_eq!(pos_encode(1.005, 0.01), 101); // f32 division lands just above 100.5
        assert_eq!(pos_encode(-0.005, 0.01), 0);
        assert_eq!(pos_encode(f32::NAN, 0.01), 0);
        assert_eq!(pos_encode(1e30, 0.01), i32::MAX);
        assert_eq!(pos_encode(-1e30, 0.01), i32::MIN);
        assert_eq!(pos_decode(150, 0.01), 1.5);
    }
}
