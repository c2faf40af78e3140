/**
 * Quantization of PROTOCOL.md §3, bit-exact with the Rust codec.
 *
 * Every input is first rounded to f32 (the Rust functions take `f32`), then widened exactly to f64; all
 * arithmetic is f64 in the order the spec writes it; results are narrowed with `Math.fround`. The only
 * integer rounding is `floor(x + 0.5)`.
 */
import { DecodeError, EncodeError } from "./wire.js";
/** 2π as the spec writes it. */
export const TAU = 6.283185307179586;
const f = Math.fround;
function checkBits(bits, lo, hi, what) {
    if (!Number.isInteger(bits) || bits < lo || bits > hi) {
        throw new EncodeError("invalid", `${what} bits ${bits} not in ${lo}..=${hi}`);
    }
}
/** `steps = 2^bits − 1` for `quant`. */
export function quantSteps(bits) {
    return 2 ** bits - 1;
}
/** §3.1: encodes `v` in `[min, max]` with `bits` bits. NaN → 0; out-of-range values clamp. */
export function quantEncode(v, min, max, bits) {
    checkBits(bits, 1, 32, "quant");
    const fv = f(v);
    if (Number.isNaN(fv))
        return 0;
    const lo = f(min);
    const hi = f(max);
    const steps = quantSteps(bits);
    const c = Math.min(Math.max(fv, lo), hi);
    const t = (c - lo) / (hi - lo);
    const q = Math.floor(t * steps + 0.5);
    return Math.min(q, steps);
}
/** §3.1: decodes `q`; `q > 2^bits − 1` is a {@link DecodeError}. */
export function quantDecode(q, min, max, bits) {
    const steps = quantSteps(bits);
    if (q > steps)
        throw new DecodeError("invalid", `quant value ${q} > ${steps}`);
    const lo = f(min);
    const hi = f(max);
    return f(lo + (q * (hi - lo)) / steps);
}
/** §3.2: encodes `v` on a symmetric range in which 0 is exact. NaN → `half`. */
export function centeredEncode(v, range, bits) {
    checkBits(bits, 2, 32, "centered");
    const half = 2 ** (bits - 1);
    const fv = f(v);
    if (Number.isNaN(fv))
        return half;
    const step = f(range) / half;
    const q = Math.floor(fv / step + 0.5) + half;
    return Math.min(Math.max(q, 0), 2 ** bits - 1);
}
/** §3.2: decodes `q`; `q ≥ 2^bits` is a {@link DecodeError}. */
export function centeredDecode(q, range, bits) {
    if (q > 2 ** bits - 1)
        throw new DecodeError("invalid", `centered value ${q} out of range`);
    const half = 2 ** (bits - 1);
    const step = f(range) / half;
    return f((q - half) * step);
}
/** §3.3: encodes an angle in radians, wrapping. NaN and ±∞ → 0. */
export function angleEncode(a, bits) {
    checkBits(bits, 1, 16, "angle");
    const fa = f(a);
    if (!Number.isFinite(fa))
        return 0;
    const n = 2 ** bits;
    let t = fa / TAU;
    t = t - Math.floor(t);
    const q = Math.floor(t * n + 0.5);
    return q === n ? 0 : q;
}
/** §3.3: decodes `q`; `q ≥ 2^bits` is a {@link DecodeError}. */
export function angleDecode(q, bits) {
    const n = 2 ** bits;
    if (q >= n)
        throw new DecodeError("invalid", `angle value ${q} out of range`);
    return f((q * TAU) / n);
}
const I32_MIN = -0x8000_0000;
const I32_MAX = 0x7fff_ffff;
/** §3.4: a coordinate as an integer number of `step`s, clamped to i32. NaN → 0. */
export function posEncode(v, step) {
    const fv = f(v);
    if (Number.isNaN(fv))
        return 0;
    const q = Math.floor(fv / f(step) + 0.5);
    return Math.min(Math.max(q, I32_MIN), I32_MAX);
}
/** §3.4: the coordinate an integer position stands for. */
export function posDecode(q, step) {
    return f(q * f(step));
}
/** The f32 bit pattern of `v` as an unsigned 32-bit integer (for exact comparisons). */
export function f32Bits(v) {
    const dv = new DataView(new ArrayBuffer(4));
    dv.setFloat32(0, v);
    return dv.getUint32(0);
}
/** The f32 whose bit pattern is `bits`. */
export function f32FromBits(bits) {
    const dv = new DataView(new ArrayBuffer(4));
    dv.setUint32(0, bits >>> 0);
    return dv.getFloat32(0);
}
