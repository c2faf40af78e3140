import assert from "node:assert/strict";
import { describe, it } from "node:test";

import { ManualScheduler, Predictor, ZoneConnection, type Point, type Smoothing } from "../src/index.js";
import { FakeServer, flush } from "./helpers.js";

interface S {
  qx: number;
}

const STEP = Math.fround(0.01);

async function scenario(smoothing: Smoothing) {
  const sched = new ManualScheduler(1000);
  const server = new FakeServer(sched, () => 60);
  // The server's rule differs from the client's: a wall at qx = 250, and it refuses input 3.
  server.applyInput = (e, payload, seq) => {
    if (seq === 3) return;
    e.qx = Math.min(250, e.qx + (payload[0] ?? 0) * 100);
  };
  server.run();
  const conn = new ZoneConnection({ url: "ws://t", ticket: async () => "t", socket: server.factory, scheduler: sched });
  const predictor = new Predictor<S, number>({
    step: (s, dx) => ({ qx: s.qx + dx * 100 }),
    position: (s): Point => ({ x: s.qx * STEP, y: 0 }),
    smoothing,
    easeMs: 100,
  });
  const before: Array<Point | null> = [];
  const after: Array<Point | null> = [];
  conn.on("delta", () => before.push(predictor.renderPosition(sched.now())));
  predictor.attach(conn, (e) => ({ qx: e.qx }));
  conn.on("delta", () => after.push(predictor.renderPosition(sched.now())));
  void conn.connect();
  const tick = async (ms: number): Promise<void> => {
    for (let t = 0; t < ms; t += 5) {
      await flush();
      sched.advance(5);
    }
  };
  await tick(300);
  assert.deepEqual(predictor.state, { qx: 0 });
  for (let i = 0; i < 5; i++) {
    assert.equal(predictor.send(conn, 1, (dx) => new Uint8Array([dx])), i + 1);
    // The player's own view responds at once, before any round trip.
    assert.equal(predictor.state?.qx, (i + 1) * 100);
    await tick(35);
    assert.ok(predictor.pendingSeqs.every((s) => s > conn.ack), "acknowledged inputs dropped out");
  }
  await tick(400);
  return { sched, server, conn, predictor, before, after, tick };
}

describe("Predictor", () => {
  it("replays unacknowledged inputs and converges to the server when it disagrees (ease)", async () => {
    const { sched, predictor, before, after, conn } = await scenario("ease");
    assert.deepEqual(predictor.pendingSeqs, []);
    assert.equal(conn.ack, 5);
    assert.deepEqual(predictor.state, { qx: 250 }, "converged to the server's state");
    assert.ok(predictor.corrections >= 1);
    // Easing keeps the drawn position continuous across each correction...
    for (let i = 0; i < before.length; i++) {
      const b = before[i];
      const a = after[i];
      if (b === null || b === undefined || a === null || a === undefined) continue;
      assert.ok(Math.abs(a.x - b.x) < 1e-9, `jump at delta ${i}: ${b.x} → ${a.x}`);
    }
    // ...and the offset is gone once easeMs has passed.
    const p = predictor.renderPosition(sched.now());
    assert.ok(p !== null && Math.abs(p.x - 250 * STEP) < 1e-9);
    conn.close();
  });

  it("snaps to the replayed prediction when smoothing is 'snap'", async () => {
    const { sched, predictor, after, conn } = await scenario("snap");
    assert.deepEqual(predictor.state, { qx: 250 });
    assert.ok(predictor.corrections >= 1);
    const last = after[after.length - 1];
    assert.ok(last !== null && last !== undefined && Math.abs(last.x - 250 * STEP) < 1e-9);
    assert.deepEqual(predictor.renderPosition(sched.now()), { x: 250 * STEP, y: 0 });
    conn.close();
  });

  it("drops out inputs the server refused and resets on reconnect", async () => {
    const { predictor, server, tick, conn } = await scenario("ease");
    // seq 3 was refused yet acknowledged: it is no longer replayed.
    assert.deepEqual(predictor.pendingSeqs, []);
    let resets = 0;
    conn.on("welcome", () => {
      resets += 1;
      assert.equal(predictor.state, null, "a reconnect clears the prediction");
      assert.deepEqual(predictor.pendingSeqs, []);
    });
    server.last.socket.drop();
    await tick(2000);
    assert.equal(resets, 1);
    assert.equal(conn.state, "open");
    assert.deepEqual(predictor.state, { qx: 250 }, "rebuilt from the next server state");
    conn.close();
  });

  it("bounds unacknowledged inputs", () => {
    const p = new Predictor<S, number>({ step: (s, d) => ({ qx: s.qx + d }), position: (s) => ({ x: s.qx, y: 0 }), maxPending: 3 });
    p.reconcile(0, { qx: 0 }, 0);
    for (let seq = 1; seq <= 5; seq++) p.record(seq, 1);
    assert.deepEqual(p.pendingSeqs, [3, 4, 5]);
    assert.equal(p.overflowed, 2);
    p.reconcile(4, { qx: 10 }, 0);
    assert.deepEqual(p.state, { qx: 11 });
  });
});

describe("Predictor drawing between predicted steps", () => {
  const make = () =>
    new Predictor<S, number>({
      step: (s, dx) => ({ qx: s.qx + dx }),
      position: (s): Point => ({ x: s.qx, y: 0 }),
      smoothing: "ease",
      easeMs: 100,
      stepMs: 32,
    });

  it("glides to each new prediction over one step instead of stepping at the input rate", () => {
    const p = make();
    p.reconcile(0, { qx: 0 }, 0);
    p.record(1, 1, 0);
    // A 60 Hz screen draws two frames per 30 Hz input: half way, then there.
    assert.deepEqual([p.renderPosition(0)?.x, p.renderPosition(16)?.x, p.renderPosition(32)?.x, p.renderPosition(48)?.x], [0, 0.5, 1, 1]);
    p.record(2, 1, 48);
    assert.deepEqual([p.renderPosition(48)?.x, p.renderPosition(64)?.x, p.renderPosition(80)?.x], [1, 1.5, 2]);
    // Without a time, an input is drawn at once (the predictor cannot know when it happened).
    p.record(3, 1);
    assert.equal(p.renderPosition(80)?.x, 3);
  });

  it("an input before the last step was drawn keeps the drawn pace instead of lurching", () => {
    const p = make();
    p.reconcile(0, { qx: 0 }, 0);
    p.record(1, 1, 0);
    // A late frame: the next input comes half way through the first step's glide.
    p.record(2, 1, 16);
    const drawn = [16, 32, 48, 64].map((t) => p.renderPosition(t)?.x ?? NaN);
    // From 0.5 to 2 over the 16 ms left of the first step and the second's 32: one unit per 32 ms.
    assert.deepEqual(drawn, [0.5, 1, 1.5, 2]);
    drawn.forEach((x, i) => {
      const step = i === 0 ? 0 : x - (drawn[i - 1] ?? x);
      assert.ok(step <= 0.5 + 1e-9, `frame ${i} moved ${step}`);
    });
  });

  it("a correction mid-glide keeps the drawn position where it was and eases out", () => {
    const p = make();
    p.reconcile(0, { qx: 0 }, 0);
    p.record(1, 1, 0);
    const shown = p.renderPosition(16)?.x;
    // The server says the player is 10 units further than predicted: no jump at that instant.
    p.reconcile(0, { qx: 10 }, 16);
    assert.equal(p.renderPosition(16)?.x, shown);
    // Glide finished and ease over: drawn where the replayed prediction is.
    assert.equal(p.renderPosition(200)?.x, 11);
  });
});
