/**
 * The cells page: one world cut into a 3×3 grid of zones (`cell-X-Y`, kind `cells`), drawn in
 * world coordinates. The player walks with the arena's speeds (predicted with the zone's rule,
 * copied below in `f32` arithmetic); when it walks past its cell's border the zone moves it to the
 * neighbour and the SDK follows the Transfer, while the page keeps drawing. Near a border the page
 * also observes the neighbour cells (observer tickets), so players just across are drawn before the
 * player crosses; a player two cells show is drawn once ({@link pickCopies}).
 *
 * The page stops sending inputs once its prediction has left the cell: the zone moves the player
 * on that very input, so nothing it sent is lost to the move and its drawn position never jumps.
 *
 * Query parameters: `zone` (the cell to start in, default `cell-1-1`), `name`.
 * Page state for tools and the browser test is published as `window.cells` ({@link CellsDebug}).
 */

import { guestConnection, GuestTickets, playerName, transportParam } from "./guest.js";
import { Keys } from "./keys.js";
import { DIAGONAL, DIR_DOWN, DIR_LEFT, DIR_MASK, DIR_RIGHT, DIR_UP, DT, encodeInput, FLAG_WALK, PLAYER_RADIUS, POS_STEP, SPEED, TICK_HZ, WALK_SPEED, type MoveInput, type MoveState } from "./movement.js";
import { CellGrid, NeighbourSet, pickCopies, posDecode, posEncode, Predictor, Replica, type ZoneConnection } from "./sdk/index.js";

const f = Math.fround;
/** The grid (`COLS`, `ROWS`, `CELL_W`, `CELL_H`, `HYSTERESIS` in examples/arena/src/cells). */
const grid = new CellGrid({ cols: 3, rows: 3, cellW: 120, cellH: 80, hysteresis: 1 });
const WORLD_W = f(grid.width);
const WORLD_H = f(grid.height);
/** Fields of the player kind (`F_*` in the cells zone); it is the zone's only kind. */
const F_NAME = 0;
const F_HUE = 1;
const F_WHO = 2;
/** Event topic: the cell the player is in (UTF-8 id). */
const TOPIC_CELL = 1;
/** Within this distance of a neighbour cell, the page observes it. */
const MARGIN = 16;
/** A neighbour no longer near stays observed this long (walking along a border opens nothing anew). */
const LINGER_MS = 2000;
/** Milliseconds per input: one input moves the player for one tick. */
const INPUT_MS = 1000 / TICK_HZ;

/** The zone's step (`cells::step`): the arena's movement, no pillars, kept inside the world. */
export function cellStep(s: MoveState, input: MoveInput): MoveState {
  const dir = input.dir & DIR_MASK;
  let dx = 0;
  let dy = 0;
  if (dir & DIR_RIGHT) dx += 1;
  if (dir & DIR_LEFT) dx -= 1;
  if (dir & DIR_DOWN) dy += 1;
  if (dir & DIR_UP) dy -= 1;
  if (dx === 0 && dy === 0) return s;
  let len = f((input.flags & FLAG_WALK ? WALK_SPEED : SPEED) * DT);
  if (dx !== 0 && dy !== 0) len = f(len * DIAGONAL);
  const clamp = (v: number, lo: number, hi: number) => Math.min(Math.max(v, lo), hi);
  const x = clamp(f(s.x + dx * len), PLAYER_RADIUS, f(WORLD_W - PLAYER_RADIUS));
  const y = clamp(f(s.y + dy * len), PLAYER_RADIUS, f(WORLD_H - PLAYER_RADIUS));
  const snap = (v: number) => posDecode(posEncode(v, POS_STEP), POS_STEP);
  return { x: snap(x), y: snap(y) };
}

/** How smoothly one player was drawn, frame to frame. */
export interface DrawnMotion {
  frames: number;
  /** Largest move between two frames it was drawn in, world units. */
  maxJump: number;
  /** Largest amount a frame's move exceeded the speed limit over the time since the last one. */
  maxExcess: number;
  /**
   * Largest amount a frame's move exceeded one tick's travel (or, after a frame slower than a
   * tick, the travel of the ticks it spanned): what a snap or a lost input would show.
   */
  maxTickExcess: number;
  /** Longest time between two frames it was drawn in, ms (slow frames count too). */
  maxGapMs: number;
  /** Frames since it was first drawn that did not draw it. */
  missedFrames: number;
  /** Longest time it was not drawn, from the last frame with it to the next one with it, ms. */
  maxAbsentMs: number;
  /** Whether the last frame missed it. */
  missing: boolean;
  /** The zones it was drawn from, in order of first use. */
  zones: string[];
  x: number;
  y: number;
  at: number;
}

/** What the page publishes on `window.cells`. */
export interface CellsDebug {
  state: string;
  /** The cell the player is in (its zone id). */
  cell: string;
  frame: number;
  /** The player's `who` (the same in every cell). */
  who: number | null;
  /** Where the player is drawn, or null before joining. */
  me: { x: number; y: number } | null;
  /** The player's own drawn motion. */
  own: DrawnMotion;
  /** Neighbour cells observed now. */
  observing: string[];
  /** Other players as drawn, by `who`: position and the zone the drawn copy came from. */
  others: Record<number, { x: number; y: number; zone: string; name: string }>;
  /** Other players' drawn motion, by `who`. */
  motion: Record<number, DrawnMotion>;
  /** A held direction (DIR_* bits) that stands in for the keyboard when not 0. */
  hold: number;
  inputsSent: number;
  /** Longest time the player's drawn position stood still while {@link hold} was set, ms (a move's pause). */
  longestStillMs: number;
  transfers: number;
  corrections: number;
  errors: string[];
  closes: string[];
}

declare global {
  interface Window {
    cells: CellsDebug;
  }
}

function newMotion(x: number, y: number, at: number, zone: string): DrawnMotion {
  return { frames: 1, maxJump: 0, maxExcess: 0, maxTickExcess: 0, maxGapMs: 0, missedFrames: 0, maxAbsentMs: 0, missing: false, zones: [zone], x, y, at };
}

function track(m: DrawnMotion, x: number, y: number, at: number, zone: string): void {
  const jump = Math.hypot(x - m.x, y - m.y);
  m.frames += 1;
  m.maxJump = Math.max(m.maxJump, jump);
  m.maxExcess = Math.max(m.maxExcess, jump - (SPEED * (at - m.at)) / 1000);
  const ticks = Math.max(1, ((at - m.at) * TICK_HZ) / 1000);
  m.maxTickExcess = Math.max(m.maxTickExcess, jump - (SPEED * ticks) / TICK_HZ);
  m.maxGapMs = Math.max(m.maxGapMs, at - m.at);
  if (m.missing) m.maxAbsentMs = Math.max(m.maxAbsentMs, at - m.at);
  m.missing = false;
  if (!m.zones.includes(zone)) m.zones.push(zone);
  m.x = x;
  m.y = y;
  m.at = at;
}

const params = new URLSearchParams(location.search);
let zone = params.get("zone") ?? "cell-1-1";
const name = playerName(params);
const transport = transportParam(params);

const debug: CellsDebug = {
  state: "idle",
  cell: zone,
  frame: 0,
  who: null,
  me: null,
  own: newMotion(0, 0, 0, zone),
  observing: [],
  others: {},
  motion: {},
  hold: 0,
  inputsSent: 0,
  longestStillMs: 0,
  transfers: 0,
  corrections: 0,
  errors: [],
  closes: [],
};
debug.own.frames = 0;
window.cells = debug;

const root = document.getElementById("app") ?? document.body;
const canvas = document.createElement("canvas");
canvas.className = "view";
root.appendChild(canvas);
const hud = document.createElement("div");
hud.className = "hud";
root.appendChild(hud);

if (grid.parse(zone) === null) {
  hud.textContent = `"${zone}" is not a cell: use ?zone=cell-X-Y with X, Y in 0..2`;
  throw new Error(`not a cell: ${zone}`);
}

const tickets = new GuestTickets(zone, name, "cells");
const conn = guestConnection(zone, tickets, transport);
const replica = new Replica(conn.clock);
replica.attach(conn);
const predictor = new Predictor<MoveState, MoveInput>({
  step: cellStep,
  position: (s) => s,
  smoothing: "ease",
  easeMs: 120,
  snapDistance: 4,
  stepMs: INPUT_MS,
});
predictor.attach(conn, (e, mirror) => ({ x: mirror.x(e), y: mirror.y(e) }));

/** An observed neighbour: its connection and what it draws. */
interface Watch {
  conn: ZoneConnection;
  replica: Replica;
}

const neighbours = new NeighbourSet<Watch>(
  (z) => {
    const c = guestConnection(z, new GuestTickets(z, name, "cells", "observer"), transport);
    const r = new Replica(c.clock);
    r.attach(c);
    c.connect().catch((e: unknown) => debug.errors.push(`observe ${z}: ${String(e)}`));
    return { conn: c, replica: r };
  },
  (_z, w) => w.conn.close(),
  LINGER_MS,
);

conn.on("welcome", (_w, info) => {
  if (info.transfer !== null) {
    zone = info.transfer.to;
    tickets.zone = zone;
    debug.transfers += 1;
    // The cell the player walked into is drawn from its own connection now.
    neighbours.remove(zone);
  }
  debug.cell = zone;
});
conn.on("event", (ev) => {
  if (ev.topic === TOPIC_CELL) debug.cell = new TextDecoder().decode(ev.payload);
});
conn.on("close", (info) => {
  debug.closes.push(`${info.code} ${info.reason}`);
  if (debug.closes.length > 50) debug.closes.shift();
});

const keys = new Keys(window);
let nextSendAt = 0;

/** At most one input a frame, and none once the prediction has left the cell (the move is on). */
function sendInput(now: number): void {
  const dir = debug.hold !== 0 ? debug.hold : keys.current().dir;
  if (dir === 0) {
    nextSendAt = now;
    return;
  }
  if (now < nextSendAt || conn.state !== "open") return;
  nextSendAt = Math.max(nextSendAt + INPUT_MS, now - INPUT_MS);
  const s = predictor.state;
  const cell = grid.parse(zone);
  if (s === null || cell === null || !grid.holds(cell, s.x, s.y)) return;
  const flags = debug.hold !== 0 ? 0 : keys.current().flags;
  if (predictor.send(conn, { dir, flags }, encodeInput, performance.now()) !== null) debug.inputsSent += 1;
}

interface Seen {
  identity: number;
  zone: string;
  x: number;
  y: number;
  name: string;
  hue: number;
}

function playersOf(r: Replica, from: string, now: number, out: Seen[]): ReturnType<Replica["frame"]> {
  const drawn = r.frame(now);
  for (const e of drawn.entities.values()) {
    out.push({
      identity: Number(e.fields[F_WHO] ?? 0),
      zone: from,
      x: e.x,
      y: e.y,
      name: String(e.fields[F_NAME] ?? ""),
      hue: Number(e.fields[F_HUE] ?? 0),
    });
  }
  return drawn;
}

let lastMe: { x: number; y: number } | null = null;

/**
 * When a player's drawn copy comes from another cell than last frame (it walked across), the two
 * cells' pictures run on their own interpolation delays and may disagree by a few frames of motion:
 * the difference is eased out over this long instead of shown as a jump.
 */
const HANDOFF_MS = 250;
/** Per player: the cell its copy came from last frame, where it was drawn, and the easing offset. */
const handoffs = new Map<number, { zone: string; x: number; y: number; ox: number; oy: number; at: number }>();

function handOff(o: Seen, now: number): Seen {
  const h = handoffs.get(o.identity);
  if (h === undefined) {
    handoffs.set(o.identity, { zone: o.zone, x: o.x, y: o.y, ox: 0, oy: 0, at: now });
    return o;
  }
  if (h.zone !== o.zone) {
    // Keep the player where it was drawn; the offset decays from now.
    h.ox = h.x - o.x;
    h.oy = h.y - o.y;
    h.at = now;
    h.zone = o.zone;
  }
  const k = Math.max(0, 1 - (now - h.at) / HANDOFF_MS);
  const x = o.x + h.ox * k;
  const y = o.y + h.oy * k;
  h.x = x;
  h.y = y;
  return { ...o, x, y };
}
/** When the player's drawn position last changed (or nothing was held). */
let movedAt = 0;
/** The player's hue, as its cell set it. */
let myHue = 0;

function frame(now: number): void {
  debug.frame += 1;
  sendInput(now);
  // Between leaving one cell and the new cell's first state there is no prediction: hold the place.
  // The clock the prediction glides by, so a frame's measured move and its time agree.
  const drawnAt = performance.now();
  const me = predictor.renderPosition(drawnAt) ?? lastMe;
  const cell = grid.parse(zone);
  neighbours.update(me !== null && cell !== null ? grid.near(cell, me.x, me.y, MARGIN).filter((z) => z !== zone) : [], now);
  debug.observing = neighbours.entries().map(([z]) => z);

  const seen: Seen[] = [];
  const own = playersOf(replica, zone, now, seen);
  const mine = conn.controlledId === null ? undefined : own.entities.get(conn.controlledId);
  if (mine !== undefined) {
    debug.who = Number(mine.fields[F_WHO] ?? 0);
    myHue = Number(mine.fields[F_HUE] ?? 0);
  }
  for (const [z, w] of neighbours.entries()) playersOf(w.replica, z, now, seen);
  const others = pickCopies(
    grid,
    seen.filter((s) => s.identity !== debug.who),
  );

  const drawn: CellsDebug["others"] = {};
  for (const raw of others) {
    const o = handOff(raw, now);
    drawn[o.identity] = { x: o.x, y: o.y, zone: o.zone, name: o.name };
    const m = debug.motion[o.identity];
    if (m === undefined) debug.motion[o.identity] = newMotion(o.x, o.y, now, o.zone);
    else track(m, o.x, o.y, now, o.zone);
  }
  for (const [who, m] of Object.entries(debug.motion)) {
    if (drawn[Number(who)] !== undefined) continue;
    handoffs.delete(Number(who));
    m.missing = true;
    m.missedFrames += 1;
  }
  debug.others = drawn;
  if (me !== null) {
    if (debug.own.frames === 0) debug.own = newMotion(me.x, me.y, drawnAt, zone);
    else track(debug.own, me.x, me.y, drawnAt, zone);
  }
  if (me !== null && lastMe !== null && (me.x !== lastMe.x || me.y !== lastMe.y)) movedAt = now;
  else if (debug.hold !== 0) debug.longestStillMs = Math.max(debug.longestStillMs, now - movedAt);
  else movedAt = now;
  lastMe = me;
  debug.me = me;
  debug.state = conn.state;
  debug.corrections = predictor.corrections;
  draw(me, others);
  hud.textContent = `${conn.state} · cell ${debug.cell} · ${name}` + (debug.observing.length > 0 ? ` · also watching ${debug.observing.join(", ")}` : "");
  requestAnimationFrame(frame);
}

/** Pixels per world unit: the view shows about 90 × 60 units around the player. */
function draw(me: { x: number; y: number } | null, others: Seen[]): void {
  const dpr = window.devicePixelRatio || 1;
  const w = canvas.clientWidth;
  const h = canvas.clientHeight;
  if (canvas.width !== Math.round(w * dpr) || canvas.height !== Math.round(h * dpr)) {
    canvas.width = Math.round(w * dpr);
    canvas.height = Math.round(h * dpr);
  }
  const g = canvas.getContext("2d");
  if (g === null) return;
  g.setTransform(dpr, 0, 0, dpr, 0, 0);
  g.fillStyle = "#10141c";
  g.fillRect(0, 0, w, h);
  const scale = Math.min(w / 90, h / 60);
  const cx = me?.x ?? grid.width / 2;
  const cy = me?.y ?? grid.height / 2;
  const sx = (x: number) => w / 2 + (x - cx) * scale;
  const sy = (y: number) => h / 2 + (y - cy) * scale;
  // The cells: the current one lit, the observed ones tinted, labels at their corners.
  for (let row = 0; row < grid.rows; row++) {
    for (let col = 0; col < grid.cols; col++) {
      const id = grid.id({ cx: col, cy: row });
      const b = grid.bounds({ cx: col, cy: row });
      g.fillStyle = id === zone ? "#1d2633" : debug.observing.includes(id) ? "#182029" : "#131821";
      g.fillRect(sx(b.x0), sy(b.y0), (b.x1 - b.x0) * scale, (b.y1 - b.y0) * scale);
      g.strokeStyle = "#3a4658";
      g.lineWidth = 1;
      g.strokeRect(sx(b.x0), sy(b.y0), (b.x1 - b.x0) * scale, (b.y1 - b.y0) * scale);
      g.fillStyle = "#5d6b80";
      g.font = "12px system-ui, sans-serif";
      g.fillText(id, sx(b.x0) + 6, sy(b.y0) + 16);
    }
  }
  const body = (x: number, y: number, hue: number, label: string, self: boolean) => {
    g.beginPath();
    g.arc(sx(x), sy(y), PLAYER_RADIUS * scale, 0, Math.PI * 2);
    g.fillStyle = `hsl(${hue} 70% ${self ? 60 : 50}%)`;
    g.fill();
    if (self) {
      g.strokeStyle = "#fff";
      g.lineWidth = 2;
      g.stroke();
    }
    g.fillStyle = "#cfd8e3";
    g.font = "11px system-ui, sans-serif";
    g.fillText(label, sx(x) - g.measureText(label).width / 2, sy(y) - PLAYER_RADIUS * scale - 4);
  };
  for (const o of others) body(o.x, o.y, o.hue, o.name, false);
  if (me !== null) {
    body(me.x, me.y, myHue, name, true);
  }
}

conn.connect().then(
  () => {
    debug.state = conn.state;
  },
  (e: unknown) => {
    const msg = e instanceof Error ? e.message : String(e);
    debug.errors.push(msg);
    debug.state = `failed: ${msg}`;
  },
);
requestAnimationFrame(frame);
