/**
 * Client-side prediction for the player's own entity.
 *
 * The game supplies `step(state, input) => state`, the same rule the zone runs. Each input sent is
 * recorded with its seq and applied at once, so the player sees its own move without waiting a round
 * trip. On each Delta the predictor restarts from the server's state of the controlled entity, drops
 * every input the server has acknowledged (processed or refused: `seq ≤ ack`), and replays the rest.
 * When the replayed prediction differs from what was shown, the difference is either applied at once
 * ('snap') or shown as an offset that decays to zero over `easeMs` ('ease').
 *
 * With `stepMs` (how long one input moves the player, e.g. one tick), the drawn position moves from
 * where it was to the newest prediction over that time instead of stepping there at once: inputs go at
 * the tick rate, screens refresh faster, and a 30 Hz staircase on a 60 Hz screen looks like judder.
 */

import type { ZoneConnection } from "./connection.js";
import type { Mirror, MirrorEntity } from "./mirror.js";

/** How a correction is shown. */
export type Smoothing = "snap" | "ease";

/** A 2D point in world units. */
export interface Point {
  /** x */
  x: number;
  /** y */
  y: number;
}

/** What the game provides to a {@link Predictor}. */
export interface PredictorOptions<S, I> {
  /** The movement rule shared with the server. Must not mutate `state`. */
  step(state: S, input: I): S;
  /** Where a state is drawn (used for smoothing and for {@link Predictor.renderPosition}). */
  position(state: S): Point;
  /** 'snap' or 'ease' (default 'ease'). */
  smoothing?: Smoothing;
  /** How long an eased correction takes to vanish, in ms (default 100). */
  easeMs?: number;
  /** Corrections longer than this distance are snapped even when easing (a teleport; default ∞). */
  snapDistance?: number;
  /** Unacknowledged inputs kept (default 256); older ones are dropped and counted. */
  maxPending?: number;
  /**
   * How long one input's step takes on screen, ms (e.g. 1000 / tick rate). When set, inputs recorded
   * with a time are drawn moving there over this long; unset, the prediction is drawn as is.
   */
  stepMs?: number;
}

interface PendingInput<I> {
  seq: number;
  input: I;
}

/** Predicts the controlled entity's state ahead of the server. */
export class Predictor<S, I> {
  private readonly opts: Required<Omit<PredictorOptions<S, I>, "step" | "position" | "stepMs">>;
  private readonly stepMs: number | null;
  /**
   * The drawn step in progress: from where (without the easing offset), since when, and over how
   * long (one step, plus what was left of the step it interrupted).
   */
  private glide: { from: Point; at: number; ms: number } | null = null;
  private readonly stepFn: (state: S, input: I) => S;
  private readonly positionFn: (state: S) => Point;
  private pending: Array<PendingInput<I>> = [];
  private predicted: S | null = null;
  /** The server state of the last reconciliation: what a refused input is replayed without. */
  private base: S | null = null;
  private offset: Point = { x: 0, y: 0 };
  private offsetAt = 0;
  private lastSeq = 0;
  /** Reconciliations whose replayed state differed from the shown prediction. */
  corrections = 0;
  /** Size of the last correction in world units. */
  lastError = 0;
  /** Inputs dropped because more than `maxPending` were unacknowledged. */
  overflowed = 0;

  /** A predictor with no state until the first server state arrives. */
  constructor(options: PredictorOptions<S, I>) {
    this.stepFn = options.step;
    this.positionFn = options.position;
    this.opts = {
      smoothing: options.smoothing ?? "ease",
      easeMs: Math.max(1, options.easeMs ?? 100),
      snapDistance: options.snapDistance ?? Number.POSITIVE_INFINITY,
      maxPending: Math.max(1, options.maxPending ?? 256),
    };
    this.stepMs = options.stepMs !== undefined && options.stepMs > 0 ? options.stepMs : null;
  }

  /** The predicted state (null before the first server state). */
  get state(): S | null {
    return this.predicted;
  }

  /** Seqs of inputs not yet acknowledged, oldest first. */
  get pendingSeqs(): number[] {
    return this.pending.map((p) => p.seq);
  }

  /**
   * Records an input that was sent with `seq` and applies it to the prediction. With `nowMs` (and
   * `stepMs` set) the drawn position glides from where it is now to the new prediction.
   */
  record(seq: number, input: I, nowMs?: number): void {
    if (seq <= this.lastSeq) return; // a replayed or stale seq would corrupt the replay order
    this.lastSeq = seq;
    this.pending.push({ seq, input });
    if (this.pending.length > this.opts.maxPending) {
      this.pending.shift();
      this.overflowed += 1;
    }
    if (this.predicted === null) return;
    const from = nowMs !== undefined && this.stepMs !== null ? this.rawPosition(nowMs) : null;
    // An input that comes before the last one's step was drawn (a late frame, then a catch-up)
    // takes the rest of that step too: the drawn pace stays one step per `stepMs`, never a lurch.
    // The drawn position then trails by what was left, at most one step (past that the glide
    // catches up faster rather than let a run of late frames pile up input lag).
    const left = nowMs !== undefined && this.stepMs !== null ? Math.min(this.glideLeft(nowMs), this.stepMs) : 0;
    this.predicted = this.stepFn(this.predicted, input);
    this.glide =
      from !== null && nowMs !== undefined && this.stepMs !== null
        ? { from, at: nowMs, ms: this.stepMs + left }
        : null;
  }

  /** The part of the drawn step in progress not yet drawn at `nowMs`, in ms. */
  private glideLeft(nowMs: number): number {
    const g = this.glide;
    if (g === null) return 0;
    return Math.max(0, g.at + g.ms - nowMs);
  }

  /** Where the prediction is drawn at `nowMs` without the easing offset (mid-glide or at rest). */
  private rawPosition(nowMs: number): Point | null {
    if (this.predicted === null) return null;
    const to = this.positionFn(this.predicted);
    const g = this.glide;
    if (g === null || this.stepMs === null) return to;
    const alpha = Math.min(1, Math.max(0, (nowMs - g.at) / g.ms));
    return { x: g.from.x + (to.x - g.from.x) * alpha, y: g.from.y + (to.y - g.from.y) * alpha };
  }

  /** Forgets an input the client never managed to send. */
  drop(seq: number): void {
    this.pending = this.pending.filter((p) => p.seq !== seq);
  }

  /**
   * The host refused input `seq` (PROTOCOL.md §5.6): it will never be applied, so it leaves the
   * pending inputs and the prediction is replayed without it from the last server state. Returns
   * whether `seq` was pending.
   */
  refuse(seq: number): boolean {
    const before = this.pending.length;
    this.pending = this.pending.filter((p) => p.seq !== seq);
    if (this.pending.length === before) return false;
    if (this.base !== null) {
      let next: S = this.base;
      for (const p of this.pending) next = this.stepFn(next, p.input);
      this.predicted = next;
    }
    return true;
  }

  /**
   * Reconciles with the server: `server` is the controlled entity's state at the Delta's tick (null if
   * this player controls nothing), `ack` the last seq the zone processed. `nowMs` starts an ease.
   */
  reconcile(ack: number, server: S | null, nowMs: number): void {
    this.pending = this.pending.filter((p) => p.seq > ack);
    if (server === null) {
      this.predicted = null;
      this.base = null;
      this.offset = { x: 0, y: 0 };
      this.glide = null;
      return;
    }
    this.base = server;
    let next: S = server as S;
    for (const p of this.pending) next = this.stepFn(next, p.input);
    const before = this.predicted;
    this.predicted = next;
    if (before === null) return;
    const a = this.positionFn(before);
    const b = this.positionFn(next);
    const ex = a.x - b.x;
    const ey = a.y - b.y;
    const err = Math.hypot(ex, ey);
    if (err === 0) return;
    // A glide in progress moves with the prediction, so only the offset below shows the correction.
    if (this.glide !== null) this.glide = { ...this.glide, from: { x: this.glide.from.x - ex, y: this.glide.from.y - ey } };
    this.corrections += 1;
    this.lastError = err;
    if (this.opts.smoothing === "snap" || err > this.opts.snapDistance) {
      this.offset = { x: 0, y: 0 };
      return;
    }
    // Keep what is on screen where it is: the remaining offset plus this correction, decaying from now.
    const cur = this.offsetNow(nowMs);
    this.offset = { x: cur.x + ex, y: cur.y + ey };
    this.offsetAt = nowMs;
  }

  private offsetNow(nowMs: number): Point {
    const k = Math.max(0, 1 - (nowMs - this.offsetAt) / this.opts.easeMs);
    return { x: this.offset.x * k, y: this.offset.y * k };
  }

  /** Where to draw the controlled entity at `nowMs`: the prediction (gliding) plus any easing offset. */
  renderPosition(nowMs: number): Point | null {
    const p = this.rawPosition(nowMs);
    if (p === null) return null;
    const o = this.offsetNow(nowMs);
    return { x: p.x + o.x, y: p.y + o.y };
  }

  /**
   * Sends `input` (encoded by `encode`) on `conn` and records it (at `nowMs`, see {@link record});
   * returns its seq, or null when the connection is not open (nothing is predicted then, since the
   * server will never apply it).
   */
  send(conn: ZoneConnection, input: I, encode: (input: I) => Uint8Array, nowMs?: number): number | null {
    const seq = conn.sendInput(encode(input));
    if (seq !== null) this.record(seq, input, nowMs);
    return seq;
  }

  /**
   * Reconciles on every Delta of `conn` from the controlled entity (converted by `toState`), drops
   * every input the host refuses, and resets on every Welcome (a reconnect). Returns a function that
   * detaches it.
   */
  attach(conn: ZoneConnection, toState: (entity: MirrorEntity, mirror: Mirror) => S): () => void {
    const offWelcome = conn.on("welcome", () => this.reset());
    const offRefused = conn.on("inputRefused", (r) => void this.refuse(r.seq));
    const offDelta = conn.on("delta", (d, info) => {
      const id = conn.controlledId;
      const e = id === null ? undefined : info.mirror.get(id);
      this.reconcile(d.ack, e === undefined ? null : toState(e, info.mirror), info.recvMs);
    });
    return () => {
      offWelcome();
      offRefused();
      offDelta();
    };
  }

  /** Clears everything (a reconnect or a new player): the next server state starts over. */
  reset(): void {
    this.pending = [];
    this.predicted = null;
    this.base = null;
    this.offset = { x: 0, y: 0 };
    this.glide = null;
    this.lastSeq = 0;
  }
}
