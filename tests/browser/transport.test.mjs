// The arena page's transport choice in headless Chromium (PROTOCOL.md §1.1): with `transport=auto`
// it plays over WebTransport where UDP gets through, and over WebSocket, within the SDK's bound,
// where it does not; a reload remembers the choice. Waits are on page state, never on fixed sleeps.
import assert from "node:assert/strict";
import { after, test } from "node:test";

import { launchChromium, openArenaPage, setNetSim, startServer } from "./harness.mjs";
import { requireChromium } from "./services.mjs";

// Skipped (and listed as such) without Chromium; under CI=true that fails the run instead.
const chromium = requireChromium("transport");
const skip = chromium === null ? "no chromium" : false;

/** The SDK's default bound on a WebTransport attempt in auto mode, ms (`webTransportTimeoutMs`). */
const BOUND_MS = 3000;

let browser;
const servers = [];

after(async () => {
  await browser?.close();
  for (const s of servers) await s.stop();
});

/** Holds `key` until the zone acknowledged `inputs` more inputs. */
async function plays(page) {
  const before = await page.evaluate(() => window.arena.ack);
  await page.keyboard.down("ArrowUp");
  await page.waitForFunction((n) => window.arena.ack >= n, before + 10, { timeout: 20000 });
  await page.keyboard.up("ArrowUp");
}

test("auto: WebTransport where UDP gets through, WebSocket within the bound where it is blocked", { skip, timeout: 120000 }, async () => {
  const server = await startServer();
  servers.push(server);
  browser ??= await launchChromium(chromium);

  // UDP open: the page plays over WebTransport.
  const open = await openArenaPage(browser, server.base, "arena-1", "udp-open", "&transport=auto");
  assert.equal(await open.page.evaluate(() => window.arena.transport), "webtransport");
  assert.equal(await open.page.evaluate(() => window.arena.fallback), null);
  await plays(open.page);
  await open.page.close();

  // UDP blocked: the session never opens, and after the bound the page plays over WebSocket.
  await setNetSim(server.base, { block_udp: true });
  const t0 = Date.now();
  const blocked = await openArenaPage(browser, server.base, "arena-1", "udp-blocked", "&transport=auto");
  const joinedMs = Date.now() - t0;
  const state = await blocked.page.evaluate(() => ({ t: window.arena.transport, f: window.arena.fallback }));
  console.log(`UDP blocked: playing over ${state.t} ${joinedMs} ms after the page opened (bound ${BOUND_MS} ms); fallback: ${state.f}`);
  assert.equal(state.t, "websocket");
  assert.match(state.f, new RegExp(`within ${BOUND_MS} ms`), "the fallback came from the bound");
  await plays(blocked.page);

  // A reload remembers the choice: straight to WebSocket, no second wait.
  await blocked.page.reload();
  await blocked.page.waitForFunction(() => window.arena?.state === "open" && window.arena.me !== null, null, {
    timeout: 20000,
  });
  assert.equal(await blocked.page.evaluate(() => window.arena.transport), "websocket");
  assert.equal(await blocked.page.evaluate(() => window.arena.fallback), null, "no new attempt after the reload");
  await plays(blocked.page);
  assert.deepEqual(blocked.errors, []);
  assert.deepEqual(open.errors, []);
  await setNetSim(server.base, { block_udp: false });
});
