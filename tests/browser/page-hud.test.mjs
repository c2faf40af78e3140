// What the demo pages' HUDs say and where their panels sit, in headless Chromium against the real
// `zonekeep serve --dev`: the arena's `visible` counts everything it draws (drones and pickups too,
// not only other players), the gallery names its transport, and the gallery's wall is fitted beside
// the NetSim panel, so no target flies under it.
import assert from "node:assert/strict";
import { after, before, test } from "node:test";

import { launchChromium, startServer } from "./harness.mjs";
import { requireChromium } from "./services.mjs";

const chromium = requireChromium("page-hud.test.mjs");
const skip = chromium === null ? "no chromium" : false;

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

test("alone in an arena, the HUD counts the drones and pickups it draws", { skip, timeout: 60000 }, async () => {
  const page = await browser.context.newPage();
  await page.goto(`${server.base}/?zone=arena-hud-${Date.now()}&name=solo`);
  // The arena always has drones; with no other player, only they and the pickups are drawn.
  await page.waitForFunction(
    () => {
      const m = /visible\s+(\d+)/.exec(document.querySelector("pre.hud")?.textContent ?? "");
      return m !== null && Number(m[1]) > 0;
    },
    null,
    { timeout: 20000 },
  ).catch(async (e) => {
    const hud = await page.locator("pre.hud").textContent();
    throw new Error(`the HUD never counted a drawn entity:\n${hud}\n${e}`);
  });
  await page.close();
});

test("the gallery HUD names its transport, and no target flies under the NetSim panel", { skip, timeout: 60000 }, async () => {
  const page = await browser.context.newPage();
  // A window narrow enough that a wall fitted to the whole width would run under the panel.
  await page.setViewportSize({ width: 1000, height: 700 });
  await page.goto(`${server.base}/gallery?zone=gallery-hud-${Date.now()}&name=hud`);
  await page.waitForFunction(() => window.gallery?.state === "open", null, { timeout: 20000 });
  await page.waitForFunction(() => /transport (websocket|webtransport)/.test(document.querySelector("pre.hud")?.textContent ?? ""), null, {
    timeout: 10000,
  }).catch(async (e) => {
    throw new Error(`the gallery HUD does not name the transport:\n${await page.locator("pre.hud").textContent()}\n${e}`);
  });
  const fit = await page.evaluate(() => {
    const panel = document.querySelector(".netsim").getBoundingClientRect();
    // The wall is 32 × 20 world units (GALLERY_W, GALLERY_H).
    const topRight = window.gallery.toClient(32, 0);
    const bottomRight = window.gallery.toClient(32, 20);
    return { wallRight: topRight.x, wallTop: topRight.y, wallBottom: bottomRight.y, panel: { left: panel.left, top: panel.top, bottom: panel.bottom } };
  });
  const overlapsVertically = fit.panel.top < fit.wallBottom && fit.panel.bottom > fit.wallTop;
  assert.ok(!overlapsVertically || fit.wallRight <= fit.panel.left, `the wall runs under the NetSim panel: ${JSON.stringify(fit)}`);
  await page.close();
});
