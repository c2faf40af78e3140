// The TypeScript SDK against the real `zonekeep serve --dev` binary over real sockets (Node + ws):
// join, predict with the arena's movement step and reconcile against real acks, clock sync, and an
// abrupt socket drop resumed with the reconnect token. Uses the SDK build the page ships
// (examples/arena/web/dist/sdk, proven fresh against clients/js/src by the page's own test).
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { after, before, test } from "node:test";
import { pathToFileURL } from "node:url";

import WebSocket from "ws";

import { devTicket, movementPath, sdkPath, startServer } from "./harness.mjs";

const sdk = await import(pathToFileURL(sdkPath).href);
const movement = await import(pathToFileURL(movementPath).href);
// The page's movement step runs the arena's Rust rule compiled to WebAssembly, built beside it.
await movement.loadRules(readFileSync(new URL("arena-rules.wasm", pathToFileURL(movementPath))));

const ZONE = "arena-1";
let server;

before(async () => {
  server = await startServer();
});

after(async () => {
  await server?.stop();
});

/** Resolves with the first `name` event of `conn` for which `pred(...args)` holds. */
function nextEvent(conn, name, pred = () => true, what = name) {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      off();
      reject(new Error(`timed out waiting for ${what}`));
    }, 20000);
    const off = conn.on(name, (...args) => {
      if (!pred(...args)) return;
      clearTimeout(timer);
      off();
      resolve(args);
    });
  });
}

/** Sends `n` copies of `input` at the zone's tick rate (the cadence a real client keeps). */
async function hold(predictor, conn, input, n) {
  let last = null;
  for (let i = 0; i < n; i++) {
    const seq = predictor.send(conn, input, movement.encodeInput);
    assert.notEqual(seq, null, "connection open");
    last = seq;
    await new Promise((r) => setTimeout(r, 1000 / movement.TICK_HZ));
  }
  return last;
}

function pillarsOf(mirror, kinds) {
  const kind = kinds.get("pillar");
  const out = [];
  for (const e of mirror.entities()) if (e.kind === kind) out.push({ x: mirror.x(e), y: mirror.y(e), r: e.fields[0] });
  return out;
}

test("join, predict and reconcile against real acks, clock sync, drop and resume", { timeout: 90000 }, async () => {
  const sockets = [];
  const conn = new sdk.ZoneConnection({
    url: `ws://127.0.0.1:${server.port}/zones/${ZONE}`,
    ticket: () => devTicket(server.base, ZONE, "sdk-e2e"),
    socket: (url) => {
      const ws = new WebSocket(url);
      sockets.push(ws);
      return ws;
    },
    pingIntervalMs: 200,
  });
  let kinds = new Map();
  let pillars = [];
  conn.on("welcome", (w) => {
    kinds = new Map(w.schema.kinds.map((k, i) => [k.name, i]));
  });
  conn.on("delta", (_d, info) => {
    pillars = pillarsOf(info.mirror, kinds);
  });
  const predictor = new sdk.Predictor({
    step: (s, i) => movement.step(s, i, movement.DT, pillars),
    position: (s) => s,
    smoothing: "snap",
  });
  predictor.attach(conn, (e, mirror) => ({ x: mirror.x(e), y: mirror.y(e) }));

  // Join.
  const firstDelta = nextEvent(conn, "delta", (_d, info) => conn.controlledId !== null && info.mirror.get(conn.controlledId) !== undefined, "the player's entity");
  const welcome = await conn.connect();
  assert.equal(welcome.tickHz, movement.TICK_HZ);
  assert.equal(welcome.role, "player");
  assert.deepEqual(
    welcome.schema.kinds.map((k) => k.name),
    ["player", "drone", "pickup", "pillar"],
  );
  await firstDelta;
  const entity = conn.controlledId;
  assert.equal(pillars.length, 10, "the pillars are global: all of them are known");
  const start = predictor.state;
  assert.ok(start !== null);

  // Predict 30 inputs right and 15 down, then wait for the server to acknowledge the last one.
  await hold(predictor, conn, { dir: movement.DIR_RIGHT, flags: 0 }, 30);
  const lastSeq = await hold(predictor, conn, { dir: movement.DIR_DOWN, flags: movement.FLAG_WALK }, 15);
  const predicted = predictor.state;
  const [, ackInfo] = await nextEvent(conn, "delta", (d) => d.ack >= lastSeq, `ack of seq ${lastSeq}`);
  const serverEntity = ackInfo.mirror.get(entity);
  assert.ok(serverEntity !== undefined);
  // Reconciled: nothing pending, and the prediction made before any ack equals the server's state
  // bit for bit (the TypeScript step mirrors the zone's), so no correction was ever needed.
  assert.deepEqual(predictor.pendingSeqs, []);
  assert.deepEqual(predictor.state, { x: ackInfo.mirror.x(serverEntity), y: ackInfo.mirror.y(serverEntity) });
  assert.deepEqual(predictor.state, predicted);
  assert.equal(predictor.corrections, 0);
  assert.ok(predicted.x > start.x && predicted.y > start.y, "moved right and down");

  // Clock sync: a few pongs later the estimate is synced and tracks the ticks the server sends.
  await nextEvent(conn, "delta", () => conn.clock.synced, "clock sync");
  assert.ok(Number.isFinite(conn.clock.rttMs) && conn.clock.rttMs >= 0);
  const [d] = await nextEvent(conn, "delta");
  const estimate = conn.clock.serverTick(performance.now());
  assert.ok(Math.abs(estimate - d.tick) <= 3, `server tick estimate ${estimate} vs delta tick ${d.tick}`);
  assert.ok(conn.stats.bytesIn > 0 && conn.stats.messagesOut > lastSeq);

  // Abrupt drop (no close frame), then resume with the reconnect token: same player, same entity.
  const welcomes = nextEvent(conn, "welcome");
  const closed = nextEvent(conn, "close");
  sockets.at(-1).terminate();
  const [closeInfo] = await closed;
  assert.equal(closeInfo.willReconnect, true);
  const [again, info] = await welcomes;
  assert.equal(info.resumed, true, "resumed with the reconnect token");
  assert.equal(again.playerId, welcome.playerId);
  assert.equal(sockets.length, 2);
  await nextEvent(conn, "delta", (_d, i) => conn.controlledId !== null && i.mirror.get(conn.controlledId) !== undefined, "entity after resume");
  assert.equal(conn.controlledId, entity, "still controls the same entity");
  // The entity is where the server left it, and prediction carries on from there.
  assert.deepEqual(predictor.state, predicted);
  const seq2 = await hold(predictor, conn, { dir: movement.DIR_LEFT, flags: 0 }, 10);
  const [, info2] = await nextEvent(conn, "delta", (d2) => d2.ack >= seq2, `ack of seq ${seq2} after resume`);
  const e2 = info2.mirror.get(entity);
  assert.deepEqual(predictor.state, { x: info2.mirror.x(e2), y: info2.mirror.y(e2) });
  assert.ok(predictor.state.x < predicted.x);

  conn.close();
  assert.equal(conn.state, "closed");
});
