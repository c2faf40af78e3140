/**
 * The arena's movement rule for the page's prediction: the zone's own Rust code
 * (`examples/arena-rules`), compiled to WebAssembly and served as `arena-rules.wasm`, so the
 * prediction and the server agree to the bit without a second copy of the rule. {@link loadRules}
 * must have finished before the first {@link step}.
 *
 * The constants below are the rule's, for drawing and input; the fixture test checks them bit for
 * bit against Rust's (`ZONEKEEP_BLESS=1 cargo test -p zonekeep-arena` regenerates the fixture).
 */
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
let rules = null;
/**
 * Instantiates the compiled movement rule from the bytes of `arena-rules.wasm`. It imports
 * nothing; a module without the rule's exports is refused.
 */
export async function loadRules(bytes) {
    const { instance } = await WebAssembly.instantiate(bytes, {});
    const e = instance.exports;
    if (!(e.memory instanceof WebAssembly.Memory) || typeof e.arena_pillars !== "function" || typeof e.arena_step !== "function") {
        throw new Error("arena-rules.wasm lacks the movement rule's exports");
    }
    rules = e;
}
/**
 * One input's movement over `dt` seconds, by the compiled Rust `step`. Does not mutate its
 * arguments. Throws before {@link loadRules} finished.
 */
export function step(state, input, dt, pillars) {
    if (rules === null)
        throw new Error("the movement rule is not loaded: await loadRules() first");
    const at = rules.arena_pillars(pillars.length);
    // A view made after the call: the call may have grown (and so replaced) the memory's buffer.
    const room = new Float32Array(rules.memory.buffer, at, pillars.length * 3);
    pillars.forEach((p, i) => {
        room[i * 3] = p.x;
        room[i * 3 + 1] = p.y;
        room[i * 3 + 2] = p.r;
    });
    const out = rules.arena_step(state.x, state.y, input.dir & DIR_MASK, input.flags & FLAG_MASK, dt, pillars.length);
    const xy = new Float32Array(rules.memory.buffer, out, 2);
    const x = xy[0];
    const y = xy[1];
    if (x === undefined || y === undefined)
        throw new Error("arena_step answered outside its memory");
    return { x, y };
}
