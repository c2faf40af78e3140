// The arena demo in real headless Chromium against the real `zonekeep serve --dev` binary: two pages
// join; one holds a key; the other sees that player move. With NetSim at 150 ms one-way latency the
// mover's own view responds in the frame after the key press (prediction, measured in page frames,
// not wall-clock time) and the watcher's view has no jumps beyond a stated bound. Screenshots go to
// target/browser/ for a person to look at.
import assert from "node:assert/strict";
import { join } from "node:path";
import { after, before, test } from "node:test";

import { artifactsDir, launchChromium, openArenaPage, setNetSim, settledMe, startServer } from "./harness.mjs";
import { requireChromium } from "./services.mjs";

const chromium = requireChromium("arena.test.mjs");

/** World units per second (SPEED in movement.rs). */
const SPEED = 8;
/**
 * The watcher's bound: between two frames, the mover's drawn position may move at most what the
 * speed limit allows over the render time that elapsed, plus JUMP_SLACK world units (a quarter of a
 * player's diameter). A snap or a catch-up after a stall would exceed it; smooth interpolation does not.
 */
const JUMP_SLACK = 0.3;
/** Inputs the mover sends while holding the key (1.5 s at 30 Hz, 12 world units). */
const HOLD_INPUTS = 45;
/** One-way latency NetSim adds, ms. */
const LATENCY_MS = 150;

let server;
let browser;

before(async () => {
  server = await startServer();
  if (chromium !== null) browser = await launchChromium(chromium);
});

after(async () => {
  await browser?.close();
  await server?.stop();
});

function openPage(name) {
  return openArenaPage(browser, server.base, "arena-1", name);
}

test("two pages: the watcher sees the mover move, prediction under 150 ms latency, smooth interpolation", { skip: chromium === null ? "no chromium" : false, timeout: 120000 }, async () => {
  const mover = await openPage("mover");
  const watcher = await openPage("watcher");
  const moverEntity = await mover.page.evaluate(() => window.arena.entityId);
  assert.equal(typeof moverEntity, "number");

  // The watcher sees the mover (both spawn near the centre, inside each other's view radius).
  await watcher.page.waitForFunction((id) => window.arena.others[id] !== undefined, moverEntity, { timeout: 10000 });

  // Turn on latency and wait until the mover's measured RTT shows it. Pings run once a second and
  // the smoothed RTT moves 1/8 of the way per sample, so wait for it to pass half of the new round
  // trip (≥ 150 ms of the 300 ms), which proves the latency is in effect on this connection.
  await setNetSim(server.base, { latency_ms: LATENCY_MS, jitter_ms: 0, loss: 0 });
  await mover.page.waitForFunction((min) => window.arena.rttMs >= min, LATENCY_MS, { timeout: 40000 });

  const start = await watcher.page.evaluate((id) => ({ ...window.arena.others[id] }), moverEntity);
  await watcher.page.evaluate((id) => {
    delete window.arena.motion[id]; // measure only the run below
  }, moverEntity);
  const sentBefore = await mover.page.evaluate(() => window.arena.inputsSent);

  await mover.page.bringToFront();
  await mover.page.keyboard.down("ArrowRight");
  // Prediction: the drawn position changes in the frame after the key press, although the server
  // will only see the input 150 ms later.
  await mover.page.waitForFunction(() => window.arena.respondFrame >= 0, null, { timeout: 5000 });
  const response = await mover.page.evaluate(() => ({ key: window.arena.keyFrame, moved: window.arena.respondFrame }));
  assert.ok(
    response.moved - response.key <= 1,
    `own view moved ${response.moved - response.key} frames after the key press (want ≤ 1)`,
  );
  // From here the watcher is in front, so it draws at the screen's rate (a background page's frames
  // are throttled, and sparse frames would look like jumps); the mover keeps taking the key.
  await watcher.page.bringToFront();
  await watcher.page.evaluate((id) => {
    delete window.arena.motion[id];
  }, moverEntity);
  await mover.page.waitForFunction((n) => window.arena.inputsSent >= n, sentBefore + HOLD_INPUTS, { timeout: 20000 });
  await mover.page.keyboard.up("ArrowRight");

  // The mover's prediction settles where the server puts it, with no correction: the TypeScript
  // step is bit-identical to the zone's. Read it once the zone has acknowledged every input and
  // the drawn position came to rest (it glides between predicted steps, so right after the key is
  // released it may still be on its way to the last one).
  await mover.page.waitForFunction(() => window.arena.ack >= window.arena.inputsSent, null, { timeout: 10000 });
  const final = await settledMe(mover.page);
  assert.ok(final.x > start.x + 5, `mover moved right: ${start.x} → ${final.x}`);

  // The watcher sees the mover arrive there (within one position quantum).
  const closes = async () => ({
    mover: await mover.page.evaluate(() => window.arena.closes),
    watcher: await watcher.page.evaluate(() => window.arena.closes),
  });
  await watcher.page.waitForFunction(
    ({ id, x, y }) => {
      const o = window.arena.others[id];
      return o !== undefined && Math.abs(o.x - x) < 0.01 && Math.abs(o.y - y) < 0.01;
    },
    { id: moverEntity, x: final.x, y: final.y },
    { timeout: 15000 },
  ).catch(async (e) => {
    throw new Error(`${e.message}; connections closed meanwhile: ${JSON.stringify(await closes())}`);
  });
  // The run happened on one connection each: a reconnect would reset prediction.
  assert.deepEqual(await closes(), { mover: [], watcher: [] });
  const motion = await watcher.page.evaluate((id) => ({ ...window.arena.motion[id] }), moverEntity);
  console.log(
    `watcher: ${motion.frames} frames, travelled ${motion.travelled.toFixed(2)}, largest frame step ` +
      `${motion.maxJump.toFixed(3)}, largest excess over the speed limit ${motion.maxExcess.toFixed(3)} (bound ${JUMP_SLACK})`,
  );
  assert.ok(motion.frames > 20, "the watcher drew the mover in many frames");
  assert.ok(motion.travelled > 5, "the watcher saw the mover travel");
  assert.ok(
    motion.maxExcess <= JUMP_SLACK,
    `watcher saw a jump: ${motion.maxExcess.toFixed(3)} units beyond the speed limit (bound ${JUMP_SLACK})`,
  );
  assert.ok(motion.maxJump <= SPEED / 10, `largest frame step ${motion.maxJump} ≤ 100 ms of running`);

  const moverState = await mover.page.evaluate(() => ({ corrections: window.arena.corrections, errors: window.arena.errors }));
  assert.equal(moverState.corrections, 0, "prediction needed corrections");
  assert.deepEqual(moverState.errors, []);

  const dir = artifactsDir();
  await mover.page.screenshot({ path: join(dir, "arena-mover.png") });
  await watcher.page.screenshot({ path: join(dir, "arena-watcher.png") });
  console.log(`screenshots: ${join(dir, "arena-mover.png")}, ${join(dir, "arena-watcher.png")}`);

  await setNetSim(server.base, { latency_ms: 0, jitter_ms: 0, loss: 0 });
  assert.deepEqual(mover.errors, []);
  assert.deepEqual(watcher.errors, []);
});

test("the host serves the page and its modules", async () => {
  for (const [path, type] of [
    ["/", "text/html"],
    ["/main.js", "javascript"],
    ["/sdk/index.js", "javascript"],
    ["/style.css", "text/css"],
  ]) {
    const r = await fetch(`${server.base}${path}`);
    assert.equal(r.status, 200, path);
    assert.ok((r.headers.get("content-type") ?? "").includes(type), `${path}: ${r.headers.get("content-type")}`);
  }
});
