/**
 * The arena's movement rule, mirrored bit-exactly from `examples/arena/src/movement.rs`.
 *
 * Every value is an f32 held in a JS number. Each arithmetic operation is computed in f64 and rounded
 * with `Math.fround`, which for `+ - * / sqrt` of f32 operands equals the correctly rounded f32
 * operation Rust performs; the operations happen in the same order as in Rust. Change both files
 * together and regenerate the fixture (`ZONEKEEP_BLESS=1 cargo test -p zonekeep-arena`).
 */
import { posDecode, posEncode } from "./sdk/index.js";
const f = Math.fround;
/** Width of the arena in world units. */
export const ARENA_W = f(120);
/** Height of the arena in world units (y grows downwards on screen). */
export const ARENA_H = f(80);
/** A player's collision radius. */
export const PLAYER_RADIUS = f(0.6);
/** Running speed, units per second (the speed limit). */
export const SPEED = f(8);
/** Walking speed (input flag {@link FLAG_WALK}). */
export const WALK_SPEED = f(3);
/** The zone's tick rate. */
export const TICK_HZ = 30;
/** One tick in seconds, as f32. */
export const DT = f(1 / 30);
/** Position quantum of the arena's world. */
export const POS_STEP = f(0.01);
/** 1/√2 as f32 (Rust's `FRAC_1_SQRT_2`). */
export const DIAGONAL = f(Math.SQRT1_2);
/** Direction bit: up (−y). */
export const DIR_UP = 1;
/** Direction bit: down (+y). */
export const DIR_DOWN = 2;
/** Direction bit: left (−x). */
export const DIR_LEFT = 4;
/** Direction bit: right (+x). */
export const DIR_RIGHT = 8;
/** Every direction bit. */
export const DIR_MASK = 15;
/** Flag bit: walk. */
export const FLAG_WALK = 1;
/** Every flag bit. */
export const FLAG_MASK = 1;
/** Smallest x a player's centre reaches (before snapping). */
export const MIN_X = PLAYER_RADIUS;
/** Largest x a player's centre reaches (before snapping). */
export const MAX_X = f(ARENA_W - PLAYER_RADIUS);
/** Smallest y a player's centre reaches (before snapping). */
export const MIN_Y = PLAYER_RADIUS;
/** Largest y a player's centre reaches (before snapping). */
export const MAX_Y = f(ARENA_H - PLAYER_RADIUS);
/** The input payload the zone decodes (`MoveInput::decode`): the flags byte only when set. */
export function encodeInput(input) {
    const dir = input.dir & DIR_MASK;
    const flags = input.flags & FLAG_MASK;
    return flags === 0 ? Uint8Array.of(dir) : Uint8Array.of(dir, flags);
}
/** Snaps a coordinate to the position quantum, as the wire carries it. */
export function snap(v) {
    return posDecode(posEncode(v, POS_STEP), POS_STEP);
}
/** Rust's `f32::max(a, b)` for non-NaN operands. */
function max(a, b) {
    return a > b ? a : b;
}
/** Rust's `f32::min(a, b)` for non-NaN operands. */
function min(a, b) {
    return a < b ? a : b;
}
/**
 * One input's movement over `dt` seconds: the Rust `step`, operation for operation.
 * Does not mutate its arguments.
 */
export function step(state, input, dt, pillars) {
    let dx = 0;
    let dy = 0;
    if ((input.dir & DIR_RIGHT) !== 0)
        dx = f(dx + 1);
    if ((input.dir & DIR_LEFT) !== 0)
        dx = f(dx - 1);
    if ((input.dir & DIR_DOWN) !== 0)
        dy = f(dy + 1);
    if ((input.dir & DIR_UP) !== 0)
        dy = f(dy - 1);
    if (dx === 0 && dy === 0)
        return state;
    const speed = (input.flags & FLAG_WALK) !== 0 ? WALK_SPEED : SPEED;
    let len = f(speed * f(dt));
    if (dx !== 0 && dy !== 0)
        len = f(len * DIAGONAL);
    let x = f(state.x + f(dx * len));
    let y = f(state.y + f(dy * len));
    for (const p of pillars) {
        const ex = f(x - p.x);
        const ey = f(y - p.y);
        const m = f(p.r + PLAYER_RADIUS);
        const d2 = f(f(ex * ex) + f(ey * ey));
        if (d2 >= f(m * m))
            continue;
        if (d2 > 0) {
            const k = f(m / f(Math.sqrt(d2)));
            x = f(p.x + f(ex * k));
            y = f(p.y + f(ey * k));
        }
        else {
            x = f(p.x + m);
        }
    }
    x = min(max(x, MIN_X), MAX_X);
    y = min(max(y, MIN_Y), MAX_Y);
    return { x: snap(x), y: snap(y) };
}
