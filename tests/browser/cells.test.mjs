// The cells demo across two real hosts on PostgreSQL and NATS: cell-0-0 on one host, its neighbour
// cell-1-0 on the other. A walker walks right over the border (the zone moves it to the other
// host's cell); a watcher standing in cell-1-0 near the border observes cell-0-0. The walker's own
// drawn position never jumps more than one tick's travel + 1 cm between frames, and the watcher
// draws the walker in every frame from the old cell to the new one (no gap over 100 ms).
import assert from "node:assert/strict";
import { join } from "node:path";
import { after, before, test } from "node:test";

import { placeZone, ownerOf, startFleet } from "./fleet.mjs";
import { artifactsDir, launchChromium } from "./harness.mjs";
import { requireChromium, requireNats, requirePostgres } from "./services.mjs";

const SUITE = "cells.test.mjs";
const chromium = requireChromium(SUITE);
const postgres = chromium === null ? null : requirePostgres(SUITE);
const nats = postgres === null ? null : requireNats(SUITE);
const skip = chromium === null || postgres === null || nats === null ? "a service is missing" : false;

/** World units per second, and ticks per second (the arena's movement, which the cells use). */
const SPEED = 8;
const TICK_HZ = 30;
/**
 * 1 cm: how far the walker's own drawn position may move in one frame beyond one tick's travel
 * (after a frame slower than a tick, beyond the travel of the ticks it spanned: a stalled frame
 * shows more motion, but never a snap).
 */
const OWN_SLACK = 0.01;
/** The longest the watcher may go without drawing the walker, ms. */
const ABSENT_BOUND_MS = 100;
/** How far beyond the speed limit a frame's move may go on the watcher's screen (as in arena.test.mjs). */
const JUMP_SLACK = 0.3;
const DIR_LEFT = 4;
const DIR_RIGHT = 8;

let fleet;
let browsers = [];

before(async () => {
  if (skip) return;
  // Hosts named for this run: the bus's subjects name hosts, so runs never meet each other's notes.
  fleet = await startFleet(2, postgres, { args: ["--bus", nats], idPrefix: `cells${process.pid}` });
  // Each page in a browser of its own, so both are in front and draw at the screen's rate.
  browsers = [await launchChromium(chromium, { quic: false }), await launchChromium(chromium, { quic: false })];
});

after(async () => {
  for (const b of browsers) await b.close();
  await fleet?.stop();
});

async function openCells(browser, base, zone, name) {
  const page = await browser.context.newPage();
  const errors = [];
  page.on("pageerror", (e) => errors.push(String(e)));
  await page.goto(`${base}/cells?zone=${zone}&name=${name}`);
  await page.waitForFunction(() => window.cells?.state === "open" && window.cells.me !== null, null, { timeout: 20000 });
  return { page, errors };
}

test("a walker crosses from one host's cell to another's without a jump, watched from across the border", { skip, timeout: 180000 }, async () => {
  const [h1, h2] = fleet.hosts;
  await placeZone(h1, "cell-0-0", "cells");
  await placeZone(h2, "cell-1-0", "cells");
  assert.equal(await ownerOf(h1, "cell-1-0"), h2.id, "the neighbouring cells are on different hosts");

  const walker = await openCells(browsers[0], h1.base, "cell-0-0", "walker");
  const watcher = await openCells(browsers[1], h2.base, "cell-1-0", "watcher");
  const diag = async () =>
    JSON.stringify({
      walker: await walker.page.evaluate(() => ({ ...window.cells, motion: undefined })),
      watcher: await watcher.page.evaluate(() => ({ ...window.cells })),
    });

  // The watcher walks left to just inside its cell, where it observes cell-0-0 and sees the walker.
  await watcher.page.evaluate((d) => (window.cells.hold = d), DIR_LEFT);
  await watcher.page.waitForFunction(() => window.cells.me.x < 127, null, { timeout: 30000 });
  await watcher.page.evaluate(() => (window.cells.hold = 0));
  const who = await walker.page.evaluate(() => window.cells.who);
  assert.equal(typeof who, "number");
  await watcher.page
    .waitForFunction((w) => window.cells.observing.includes("cell-0-0") && window.cells.others[w]?.zone === "cell-0-0", who, { timeout: 20000 })
    .catch(async (e) => {
      throw new Error(`${e.message}: ${await diag()}`);
    });

  // Measure the walk from here on.
  await watcher.page.evaluate((w) => delete window.cells.motion[w], who);
  await walker.page.evaluate(() => {
    window.cells.own.frames = 0;
    window.cells.longestStillMs = 0;
  });
  await walker.page.evaluate((d) => (window.cells.hold = d), DIR_RIGHT);
  await walker.page
    .waitForFunction(() => window.cells.cell === "cell-1-0" && window.cells.transfers === 1 && window.cells.me.x > 135, null, { timeout: 40000 })
    .catch(async (e) => {
      throw new Error(`${e.message}: ${await diag()}`);
    });
  await walker.page.evaluate(() => (window.cells.hold = 0));
  // The watcher now draws the walker from its own cell, where it walked on.
  await watcher.page
    .waitForFunction((w) => window.cells.others[w]?.zone === "cell-1-0" && window.cells.others[w].x > 134, who, { timeout: 10000 })
    .catch(async (e) => {
      throw new Error(`${e.message}: ${await diag()}`);
    });

  const own = await walker.page.evaluate(() => ({ ...window.cells.own, still: window.cells.longestStillMs, corrections: window.cells.corrections, errors: window.cells.errors }));
  const seen = await watcher.page.evaluate((w) => ({ ...window.cells.motion[w] }), who);
  console.log(
    `walker: ${own.frames} frames, largest frame step ${own.maxJump.toFixed(3)} (one tick's travel ${(SPEED / TICK_HZ).toFixed(3)}), ` +
      `largest excess over the ticks' travel ${own.maxTickExcess.toFixed(3)} (bound ${OWN_SLACK}), longest frame ${own.maxGapMs.toFixed(0)} ms, ` +
      `longest stand-still while walking ${own.still.toFixed(0)} ms (the move), ${own.corrections} corrections`,
  );
  console.log(
    `watcher: ${seen.frames} frames from ${seen.zones.join(" then ")}, missed ${seen.missedFrames} frames, ` +
      `longest absence ${seen.maxAbsentMs.toFixed(0)} ms, longest frame gap ${seen.maxGapMs.toFixed(0)} ms, ` +
      `largest excess over the speed limit ${seen.maxExcess.toFixed(3)}`,
  );

  assert.ok(own.frames > 60, "the walker drew itself walking");
  assert.ok(own.maxTickExcess <= OWN_SLACK, `the walker's drawn position jumped ${own.maxTickExcess} beyond its ticks' travel (bound ${OWN_SLACK})`);
  assert.equal(own.corrections, 0, "the prediction needed corrections: the page's step or the move lost an input");
  assert.deepEqual(own.errors, []);

  assert.deepEqual(seen.zones, ["cell-0-0", "cell-1-0"], "the watcher saw the walker first across the border, then in its own cell");
  assert.ok(seen.frames > 60, "the watcher drew the walk");
  assert.ok(seen.maxAbsentMs <= ABSENT_BOUND_MS, `the walker was not drawn for ${seen.maxAbsentMs} ms (bound ${ABSENT_BOUND_MS})`);
  assert.ok(seen.maxExcess <= JUMP_SLACK, `the watcher saw a jump: ${seen.maxExcess} beyond the speed limit`);

  const dir = artifactsDir();
  await walker.page.screenshot({ path: join(dir, "cells-walker.png") });
  await watcher.page.screenshot({ path: join(dir, "cells-watcher.png") });
  assert.deepEqual(walker.errors, []);
  assert.deepEqual(watcher.errors, []);
});
