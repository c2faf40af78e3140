import assert from "node:assert/strict";
import { describe, it } from "node:test";

import { ManualScheduler, Replica, ZoneConnection, type ReplicaFrame } from "../src/index.js";
import { FakeServer, flush } from "./helpers.js";

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
