import assert from "node:assert/strict";
import { describe, it } from "node:test";

import { ManualScheduler, Replica, ZoneConnection, type ReplicaFrame } from "../src/index.js";
import type { ServerClock } from "../src/clock.js";
import type { Delta } from "../src/delta.js";
import type { Mirror } from "../src/mirror.js";
import { FakeServer, flush, rng } from "./helpers.js";

const STEP = Math.fround(0.01);

describe("Replica interpolation", () => {
  it("draws entities between the samples around the delayed server time, with exact spawn/despawn/field ticks", async () => {
    const sched = new ManualScheduler(1000);
    const server = new FakeServer(sched, () => 50);
    server.patchEvery = 2;
    const conn = new ZoneConnection({ url: "ws://t", ticket: async () => "t", socket: server.factory, scheduler: sched });
    const replica = new Replica(conn.clock, { minDelayMs: 40, maxDelayMs: 300 });
    replica.attach(conn);
    const start = Math.floor((server.serverMs() * server.tickHz) / 1000);
    const S = start + 60; // spawn of entity 600
    const H = start + 70; // hp of entity 500 drops
    const D = start + 90; // despawn of entity 600
    server.entities.set(500, { kind: 0, qx: 6 * start, qy: -3 * start, fields: [100, "mover"] });
    server.run((tick) => {
      const e = server.entities.get(500);
      if (e !== undefined) {
        e.qx = 6 * tick;
        e.qy = -3 * tick;
        if (tick === H) e.fields[0] = 50;
      }
      if (tick === S) server.entities.set(600, { kind: 0, qx: 1, qy: 2, fields: [10, "blink"] });
      if (tick === D) server.entities.delete(600);
    });
    void conn.connect();
    const frames: ReplicaFrame[] = [];
    for (let t = 0; t < 5000; t += 16) {
      await flush();
      sched.advance(16);
      frames.push(replica.frame(sched.now()));
    }
    const late = frames.filter((f) => f.renderTick > start + 20);
    assert.ok(late.length > 200);
    for (const f of late) {
      const e = f.entities.get(500);
      assert.ok(e !== undefined, `entity 500 visible at ${f.renderTick}`);
      // Linear motion: interpolation between patch samples is exact.
      assert.ok(Math.abs(e.x - 6 * f.renderTick * STEP) < 1e-6, `x at ${f.renderTick}: ${e.x}`);
      assert.ok(Math.abs(e.y + 3 * f.renderTick * STEP) < 1e-6, `y at ${f.renderTick}: ${e.y}`);
      assert.equal(e.fields[0], f.renderTick >= H ? 50 : 100, `hp at ${f.renderTick}`);
      assert.equal(f.entities.has(600), f.renderTick >= S && f.renderTick < D, `600 at ${f.renderTick}`);
      assert.ok(f.delayMs >= 40 && f.delayMs <= 300);
    }
    const enteredAt = frames.findIndex((f) => f.entered.has(600));
    const leftAt = frames.findIndex((f) => f.left.has(600));
    assert.ok(enteredAt > 0 && leftAt > enteredAt);
    assert.ok((frames[enteredAt]?.renderTick ?? 0) >= S && (frames[enteredAt - 1]?.renderTick ?? Infinity) < S);
    assert.ok((frames[leftAt]?.renderTick ?? 0) >= D && (frames[leftAt - 1]?.renderTick ?? Infinity) < D);
    assert.equal(frames.filter((f) => f.entered.has(600)).length, 1);
    assert.equal(frames.filter((f) => f.left.has(600)).length, 1);
    // Render time never runs backwards.
    for (let i = 1; i < frames.length; i++) {
      assert.ok((frames[i]?.renderTick ?? 0) >= (frames[i - 1]?.renderTick ?? 0) || Number.isNaN(frames[i - 1]?.renderTick));
    }
    // Inputs carry the replica's render tick.
    assert.equal(conn.sendInput(new Uint8Array([0])), 1);
    await flush();
    sched.advance(60);
    const input = server.last.received.find((m) => m.type === "input");
    assert.ok(input?.type === "input");
    assert.equal(input.viewTick, Math.floor(frames[frames.length - 1]?.renderTick ?? -1));
    conn.close();
  });

  it("adapts the delay to measured jitter within [min, max]", async () => {
    const run = async (jitter: number, maxDelayMs = 250): Promise<number> => {
      const sched = new ManualScheduler(1000);
      let i = 0;
      // Every 4th message is held up by `jitter` ms (the ones behind it queue up, as on TCP).
      const server = new FakeServer(sched, () => 30 + (i++ % 4 === 0 ? jitter : 0));
      server.run();
      const conn = new ZoneConnection({ url: "ws://t", ticket: async () => "t", socket: server.factory, scheduler: sched });
      const replica = new Replica(conn.clock, { minDelayMs: 50, maxDelayMs });
      replica.attach(conn);
      void conn.connect();
      for (let t = 0; t < 4000; t += 16) {
        await flush();
        sched.advance(16);
        replica.frame(sched.now());
      }
      conn.close();
      return replica.delayMs;
    };
    const calm = await run(0);
    const jittery = await run(40);
    const wild = await run(400, 100);
    assert.ok(calm >= 50 && calm < 60, `calm delay ${calm}`);
    assert.ok(jittery > calm + 20, `jittery delay ${jittery} vs calm ${calm}`);
    assert.equal(wild, 100, "clamped to max");
  });
});

describe("Replica with patches the host coalesced", () => {
  it("spreads a move one Delta reports for several ticks over all of them (no hold, then jump)", async () => {
    const sched = new ManualScheduler(1000);
    const server = new FakeServer(sched, () => 30);
    server.entities.set(500, { kind: 0, qx: 0, qy: 0, fields: [100, "runner"] });
    server.run((tick) => {
      const e = server.entities.get(500);
      if (e !== undefined) e.qx = 6 * tick;
    });
    const start = server.tick;
    // Every 10th stretch of 4 ticks goes without a Delta.
    server.skipPatch = (tick) => tick > start + 20 && tick % 10 < 4;
    const conn = new ZoneConnection({ url: "ws://t", ticket: async () => "t", socket: server.factory, scheduler: sched });
    const replica = new Replica(conn.clock, { minDelayMs: 200 });
    replica.attach(conn);
    void conn.connect();
    let checked = 0;
    for (let t = 0; t < 4000; t += 16) {
      await flush();
      sched.advance(16);
      const f = replica.frame(sched.now());
      const e = f.entities.get(500);
      if (e === undefined || f.renderTick < start + 30) continue;
      assert.ok(Math.abs(e.x - 6 * f.renderTick * STEP) < 1e-6, `x at ${f.renderTick}: ${e.x}`);
      checked += 1;
    }
    conn.close();
    assert.ok(checked > 100);
  });
});

describe("Replica under loss", () => {
  /**
   * A zone whose entity 500 runs back and forth (6 quanta per tick, turning every 30 ticks), seen
   * through a link with 150 ms ± 10 ms one-way latency where 2 % of messages are lost and
   * retransmitted 300 ms later, holding back every message behind them (TCP head-of-line blocking).
   */
  async function lossyRun(seconds: number, onFrame: (f: ReplicaFrame, now: number, truth: (tick: number) => number) => void): Promise<Replica> {
    const sched = new ManualScheduler(1000);
    const r = rng(7);
    const server = new FakeServer(sched, () => 150 + r() * 10 + (r() < 0.02 ? 300 : 0));
    const truthQ = (tick: number): number => {
      const phase = ((tick % 60) + 60) % 60;
      return 6 * (phase < 30 ? phase : 60 - phase);
    };
    server.entities.set(500, { kind: 0, qx: 0, qy: 0, fields: [100, "runner"] });
    server.run((tick) => {
      const e = server.entities.get(500);
      if (e !== undefined) e.qx = truthQ(tick);
    });
    const conn = new ZoneConnection({ url: "ws://t", ticket: async () => "t", socket: server.factory, scheduler: sched });
    const replica = new Replica(conn.clock);
    replica.attach(conn);
    void conn.connect();
    // Truth between ticks is the straight line between them, as the zone's positions are per tick.
    const truth = (tick: number): number => {
      const t0 = Math.floor(tick);
      return (truthQ(t0) + (truthQ(t0 + 1) - truthQ(t0)) * (tick - t0)) * STEP;
    };
    for (let t = 0; t < seconds * 1000; t += 16) {
      await flush();
      sched.advance(16);
      onFrame(replica.frame(sched.now()), sched.now(), truth);
    }
    conn.close();
    return replica;
  }

  it("adapts the delay to head-of-line stalls: after warm-up no freeze over 100 ms and no jump over two ticks' travel", async () => {
    const WARMUP_MS = 10_000;
    const twoTicks = 2 * 6 * STEP;
    let startedAt: number | null = null;
    let last: { x: number; at: number } | null = null;
    let stillSince: number | null = null;
    let longestFreeze = 0;
    let largestStep = 0;
    const errors: number[] = [];
    let delayAfterWarmup = 0;
    const replica = await lossyRun(40, (f, now, truth) => {
      startedAt ??= now;
      const e = f.entities.get(500);
      if (e === undefined || now - startedAt < WARMUP_MS) return;
      delayAfterWarmup = Math.max(delayAfterWarmup, f.delayMs);
      errors.push(Math.abs(e.x - truth(f.renderTick)));
      if (last !== null) {
        const step = Math.abs(e.x - last.x);
        largestStep = Math.max(largestStep, step);
        if (step < 1e-9) {
          stillSince ??= last.at;
          longestFreeze = Math.max(longestFreeze, now - stillSince);
        } else stillSince = null;
      }
      last = { x: e.x, at: now };
    });
    errors.sort((a, b) => a - b);
    const p99 = errors[Math.floor(0.99 * (errors.length - 1))] ?? Number.NaN;
    console.log(
      `lossy link: delay ${replica.delayMs.toFixed(0)} ms, longest freeze ${longestFreeze} ms, largest frame step ` +
        `${largestStep.toFixed(3)} (bound ${twoTicks.toFixed(3)}), p99 position error ${p99.toFixed(3)} units, ` +
        `${replica.extrapolatedFrames} frames extrapolated`,
    );
    assert.ok(errors.length > 1000, "the runner was drawn through the measured run");
    assert.ok(delayAfterWarmup > 200, `the delay grew to cover the 300 ms stalls (${delayAfterWarmup} ms)`);
    assert.ok(delayAfterWarmup <= 500, "and stayed within the maximum");
    assert.ok(longestFreeze <= 100, `froze for ${longestFreeze} ms`);
    assert.ok(largestStep <= twoTicks, `jumped ${largestStep} units in one frame`);
  });

  it("extrapolates a moving entity a bounded amount past late data and blends the correction", async () => {
    const sched = new ManualScheduler(1000);
    // Calm for 5 s (the delay settles at its minimum), then one stall of 400 ms.
    let stallAt = Number.POSITIVE_INFINITY;
    const server = new FakeServer(sched, () => (sched.now() >= stallAt && sched.now() < stallAt + 40 ? 400 : 30));
    server.entities.set(500, { kind: 0, qx: 0, qy: 0, fields: [100, "runner"] });
    let turnTick = Number.POSITIVE_INFINITY;
    server.run((tick) => {
      const e = server.entities.get(500);
      // Runs right at 6 quanta per tick; turns back at `turnTick`, during the stall.
      if (e !== undefined) e.qx += tick < turnTick ? 6 : -6;
    });
    const conn = new ZoneConnection({ url: "ws://t", ticket: async () => "t", socket: server.factory, scheduler: sched });
    const replica = new Replica(conn.clock, { maxExtrapolationMs: 100, blendMs: 100 });
    replica.attach(conn);
    void conn.connect();
    const xs: number[] = [];
    let maxAhead = 0;
    for (let t = 0; t < 8000; t += 16) {
      await flush();
      if (t === 5008) {
        stallAt = sched.now();
        turnTick = server.tick + 3;
      }
      sched.advance(16);
      const f = replica.frame(sched.now());
      maxAhead = Math.max(maxAhead, f.extrapolatedTicks);
      const e = f.entities.get(500);
      if (e !== undefined && t >= 4000) xs.push(e.x);
    }
    conn.close();
    assert.ok(replica.extrapolatedFrames > 0, "the stall was bridged by extrapolating");
    assert.ok(maxAhead > 0 && maxAhead <= 3 + 1e-9, `extrapolated at most 100 ms = 3 ticks (${maxAhead})`);
    let largest = 0;
    for (let i = 1; i < xs.length; i++) largest = Math.max(largest, Math.abs((xs[i] ?? 0) - (xs[i - 1] ?? 0)));
    // The guess ran on while the entity had turned back: the correction is spread, never jumped.
    assert.ok(largest <= 2 * 6 * STEP, `largest frame step ${largest}`);
    assert.ok(replica.delayMs > 50, "the stall raised the delay");
  });
});

describe("Replica after a stall of the page", () => {
  const HZ = 30;
  const MS_PER_TICK = 1000 / HZ;
  const TRANSIT_MS = 50;
  const FRAME_MS = 16;
  // A clock that only says the tick rate: the jitter margin is not what is tested here.
  const clock = { hz: HZ, jitterMs: 0 } as unknown as ServerClock;

  /**
   * One Delta per tick, each `TRANSIT_MS` in transit, and one frame every `FRAME_MS`, for 5 s; then
   * `stall` (page: neither frames nor message handlers run for 500 ms, and the Deltas that came
   * meanwhile are handled together when it ends; network: the page draws on while the Deltas are
   * held back for 500 ms and then come together); then regular arrival again. Returns the delay
   * before the stall and its course after it.
   */
  function run(stall: "page" | "network"): { steady: number; after: (ms: number) => number } {
    const replica = new Replica(clock);
    const mirror = {} as Mirror;
    const delta = (tick: number): Delta => ({ tick, baseline: false, spawns: [], updates: [], despawns: [] }) as unknown as Delta;
    let now = 1000;
    let nextTick = 1;
    const delays: { at: number; delay: number }[] = [];
    // Deltas whose arrival time has come by `until` are handled at `handledAt` (default: on arrival).
    const deliver = (until: number, handledAt?: number): void => {
      while (nextTick * MS_PER_TICK + TRANSIT_MS <= until) {
        const arrival = nextTick * MS_PER_TICK + TRANSIT_MS;
        replica.onDelta(delta(nextTick), mirror, handledAt ?? arrival);
        nextTick += 1;
      }
    };
    const frames = (ms: number, heldUntil: number | null = null): void => {
      for (const end = now + ms; now < end; ) {
        now += FRAME_MS;
        if (heldUntil === null || now >= heldUntil) deliver(now, heldUntil !== null && now - FRAME_MS < heldUntil ? now : undefined);
        delays.push({ at: now, delay: replica.frame(now).delayMs });
      }
    };
    frames(5000);
    const steady = replica.delayMs;
    const stallStart = now;
    if (stall === "page") {
      // Nothing of the page runs; then every Delta that came meanwhile is handled at once.
      now += 500;
      deliver(now, now);
      delays.push({ at: now, delay: replica.frame(now).delayMs });
    } else {
      frames(500, now + 500);
    }
    frames(4000);
    const after = (ms: number): number => {
      const at = stallStart + 500 + ms;
      return delays.find((d) => d.at >= at)?.delay ?? Number.NaN;
    };
    return { steady, after };
  }

  it("comes back near its steady delay within two seconds: a stall of the page is not network lateness", () => {
    const { steady, after } = run("page");
    assert.ok(steady < 150, `steady delay ${steady} ms`);
    assert.ok(after(2000) <= steady + 20, `2 s after a page stall the delay is ${after(2000).toFixed(0)} ms (steady ${steady.toFixed(0)} ms)`);
  });

  it("still rises when the network held the Deltas back", () => {
    const { steady, after } = run("network");
    assert.ok(after(2000) >= steady + 200, `2 s after a network stall the delay is ${after(2000).toFixed(0)} ms (steady ${steady.toFixed(0)} ms)`);
  });
});
