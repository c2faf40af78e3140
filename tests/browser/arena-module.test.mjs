// The arena page against the demo arena run as a WebAssembly module: `zonekeep serve --dev --module
// arena=FILE` serves examples/arena-module in the built-in arena's place, and the page plays it
// unchanged: it joins under its name, its prediction (the same compiled movement rule) needs no
// correction, and a second page sees the first one move.
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { join } from "node:path";
import { after, before, test } from "node:test";

import { launchChromium, openArenaPage, repo, settledMe, startServer } from "./harness.mjs";
import { requireChromium } from "./services.mjs";

const chromium = requireChromium("arena-module.test.mjs");

/** Inputs the mover sends while holding the key (1 s at 30 Hz). */
const HOLD_INPUTS = 30;

/** Builds the arena module (the same command the module docs give); returns its path. */
function buildModule() {
  const target = join(repo, "target", "modules");
  const built = spawnSync(
    process.env.CARGO ?? "cargo",
    ["build", "--quiet", "-p", "zonekeep-arena-module", "--target", "wasm32-unknown-unknown", "--profile", "module", "--target-dir", target],
    { cwd: repo, encoding: "utf8" },
  );
  assert.equal(built.status, 0, `building the arena module failed:\n${built.stderr}`);
  return join(target, "wasm32-unknown-unknown", "module", "zonekeep_arena_module.wasm");
}

let server;
let browser;

before(async () => {
  if (chromium === null) return;
  server = await startServer({ args: ["--module", `arena=${buildModule()}`], env: { RUST_LOG: "info" } });
  browser = await launchChromium(chromium);
});

after(async () => {
  await browser?.close();
  await server?.stop();
});

function openPage(name) {
  return openArenaPage(browser, server.base, "arena-m", name);
}

test("the page plays the arena served as a module", { skip: chromium === null ? "no chromium" : false, timeout: 120000 }, async () => {
  // The host runs the module for the arena kind.
  assert.match(server.log(), /module loaded.*kind=arena/);
  const mover = await openPage("Ada");
  const watcher = await openPage("Bo");
  const me = await mover.page.evaluate(() => ({ ...window.arena.me }));
  const moverEntity = await mover.page.evaluate(() => window.arena.entityId);
  await watcher.page.waitForFunction((id) => window.arena.others[id] !== undefined, moverEntity, { timeout: 10000 });
  // The module named each player from its ticket's claim: the watcher reads the mover's name off
  // the wire, and the mover the watcher's.
  assert.equal(await watcher.page.evaluate((id) => window.arena.others[id].name, moverEntity), "Ada");
  const watcherEntity = await watcher.page.evaluate(() => window.arena.entityId);
  await mover.page.waitForFunction((id) => window.arena.others[id]?.name === "Bo", watcherEntity, { timeout: 10000 });

  const sentBefore = await mover.page.evaluate(() => window.arena.inputsSent);
  await mover.page.bringToFront();
  await mover.page.keyboard.down("ArrowRight");
  await mover.page.waitForFunction((n) => window.arena.inputsSent >= n, sentBefore + HOLD_INPUTS, { timeout: 20000 });
  await mover.page.keyboard.up("ArrowRight");
  await mover.page.waitForFunction(() => window.arena.ack >= window.arena.inputsSent, null, { timeout: 10000 });
  const final = await settledMe(mover.page);
  assert.ok(final.x > me.x + 3, `the mover moved right: ${me.x} → ${final.x}`);

  // The module moved it exactly as the page predicted: the rule exists once.
  const state = await mover.page.evaluate(() => ({ corrections: window.arena.corrections, errors: window.arena.errors }));
  assert.equal(state.corrections, 0, "prediction needed corrections");
  assert.deepEqual(state.errors, []);

  await watcher.page.waitForFunction(
    ({ id, x, y }) => {
      const o = window.arena.others[id];
      return o !== undefined && Math.abs(o.x - x) < 0.01 && Math.abs(o.y - y) < 0.01;
    },
    { id: moverEntity, x: final.x, y: final.y },
    { timeout: 15000 },
  );
  assert.deepEqual(mover.errors, []);
  assert.deepEqual(watcher.errors, []);
});
