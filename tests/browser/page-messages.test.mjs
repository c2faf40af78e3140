// What the arena page tells the player, in real headless Chromium against the real `zonekeep serve`:
// two windows are two distinct players (names and colours); a player whose connection dropped is shown
// as disconnected until its reconnect grace ends; the game keys keep moving the player while a NetSim
// slider has focus; a kick says why; a host that stops leaves the page saying it is reconnecting; a
// host started without --dev leaves it saying to start the host with --dev.
import assert from "node:assert/strict";
import { after, before, test } from "node:test";

import { launchChromium, startServer } from "./harness.mjs";
import { requireChromium } from "./services.mjs";

// Skipped (and listed as such) without Chromium; under CI=true that fails the run instead.
const chromium = requireChromium("page-messages");
const skip = chromium === null ? "no chromium" : false;

/** Smallest hue gap the zone keeps between players (MIN_HUE_GAP in examples/arena/src/identity.rs). */
const MIN_HUE_GAP = 30;
/** Admin token of the hosts these tests start (the admin API kicks a player). */
const ADMIN_TOKEN = "page-test-admin-token-0123456789";

let browser;

before(async () => {
  if (chromium !== null) browser = await launchChromium(chromium);
});

after(async () => {
  await browser?.close();
});

/** Opens the arena page at `query` on `server` and waits until it plays. */
async function openPlaying(server, query) {
  const page = await browser.context.newPage();
  const errors = [];
  page.on("pageerror", (e) => errors.push(String(e)));
  await page.goto(`${server.base}/${query}`);
  // Playing: open, drawn, and the zone's own entity (with the name and colour it gave) received.
  await page.waitForFunction(
    () => window.arena?.state === "open" && window.arena.me !== null && window.arena.entityId !== null,
    null,
    { timeout: 20000 },
  );
  return { page, errors };
}

function hueGap(a, b) {
  const d = Math.abs(a - b) % 360;
  return Math.min(d, 360 - d);
}

test("two windows are two distinct players; a dropped one is shown disconnected until its grace ends", { skip, timeout: 120000 }, async () => {
  const server = await startServer();
  try {
    // The first window picks no name; the second asks for the very same one.
    const first = await openPlaying(server, "?zone=arena-names");
    const firstName = await first.page.evaluate(() => window.arena.myName);
    assert.match(firstName, /^player-[0-9a-f]{4}$/, "a window without ?name= gets a made-up name");
    const second = await openPlaying(server, `?zone=arena-names&name=${firstName}`);
    const secondId = await second.page.evaluate(() => window.arena.entityId);

    await first.page.waitForFunction((id) => window.arena.others[id] !== undefined, secondId, { timeout: 10000 });
    const mine = await first.page.evaluate(() => ({ name: window.arena.myName, hue: window.arena.myHue }));
    const theirs = await first.page.evaluate((id) => ({ ...window.arena.others[id] }), secondId);
    assert.notEqual(theirs.name, mine.name, "the zone gave the second player another name");
    assert.equal(theirs.name, `${firstName}-2`);
    assert.ok(hueGap(theirs.hue, mine.hue) >= MIN_HUE_GAP, `hues ${mine.hue} and ${theirs.hue} are far apart`);
    assert.equal(theirs.connected, true);

    // The second window goes away without leaving: its player stays, shown as disconnected…
    await second.page.close();
    await first.page.waitForFunction((id) => window.arena.others[id]?.connected === false, secondId, { timeout: 10000 });
    // …until the reconnect grace ends and the zone removes it.
    await first.page.waitForFunction((id) => window.arena.others[id] === undefined, secondId, { timeout: 40000 });
    assert.deepEqual(first.errors, []);
    assert.deepEqual(second.errors, []);
    await first.page.close();
  } finally {
    await server.stop();
  }
});

test("the game keys move the player while a NetSim slider has focus, and leave the slider alone", { skip, timeout: 60000 }, async () => {
  const server = await startServer();
  try {
    const { page, errors } = await openPlaying(server, "?zone=arena-keys&name=keys");
    const slider = page.locator('input[name="latency"]');
    await slider.focus();
    const before = await page.evaluate(() => ({
      x: window.arena.me.x,
      sent: window.arena.inputsSent,
      latency: document.querySelector('input[name="latency"]').value,
    }));
    await page.keyboard.down("ArrowRight");
    await page.waitForFunction((n) => window.arena.inputsSent >= n, before.sent + 10, { timeout: 10000 });
    await page.keyboard.up("ArrowRight");
    const after = await page.evaluate(() => ({
      x: window.arena.me.x,
      latency: document.querySelector('input[name="latency"]').value,
      focused: document.activeElement?.getAttribute("name"),
    }));
    assert.ok(after.x > before.x + 1, `the player moved right: ${before.x} → ${after.x}`);
    assert.equal(after.latency, before.latency, "the slider did not move");
    assert.equal(after.focused, "latency", "the slider kept its focus");
    assert.deepEqual(errors, []);
    await page.close();
  } finally {
    await server.stop();
  }
});

test("a kick says why; a host that stops leaves the page saying it is reconnecting", { skip, timeout: 90000 }, async () => {
  const server = await startServer(["--admin-token", ADMIN_TOKEN]);
  let stopped = false;
  try {
    const kicked = await openPlaying(server, "?zone=arena-kick&name=kicked");
    const playerId = await kicked.page.evaluate(() => window.arena.playerId);
    const r = await fetch(`${server.base}/admin/zones/arena-kick/kick`, {
      method: "POST",
      headers: { authorization: `Bearer ${ADMIN_TOKEN}`, "content-type": "application/json" },
      body: JSON.stringify({ player: playerId, reason: "cheating at pickups" }),
    });
    assert.equal(r.status, 200, await r.text());
    await kicked.page.waitForFunction(() => window.arena.banner.includes("KICKED"), null, { timeout: 10000 });
    const kickBanner = await kicked.page.evaluate(() => window.arena.banner);
    assert.match(kickBanner, /removed from the zone/);
    assert.match(kickBanner, /cheating at pickups/);
    assert.match(kickBanner, /Reload/, "a kick is not retried, and the page says so");
    // What the player reads is on screen, not only in the page state.
    assert.equal(await kicked.page.locator(".banner").innerText(), kickBanner);
    await kicked.page.close();

    const { page, errors } = await openPlaying(server, "?zone=arena-kick&name=stayer");
    assert.equal(await page.evaluate(() => window.arena.banner), "", "no banner while playing");
    await server.stop();
    stopped = true;
    // The host kicks everyone with SHUTTING_DOWN on its way out, then is gone: the page says both.
    await page.waitForFunction(
      () => /down or unreachable.*Reconnecting/.test(window.arena.banner),
      null,
      { timeout: 30000 },
    );
    const banners = await page.evaluate(() => window.arena.banners);
    assert.ok(banners.some((b) => b.includes("shutting down") && b.includes("Reconnecting")), JSON.stringify(banners));
    assert.equal(await page.evaluate(() => window.arena.state), "reconnecting");
    assert.deepEqual(errors, []);
    await page.close();
  } finally {
    if (!stopped) await server.stop();
  }
});

test("a host started without --dev: the page says to start it with --dev, and stops trying", { skip, timeout: 60000 }, async () => {
  const server = await startServer([], {
    dev: false,
    env: { ZONEKEEP_TICKET_SECRET: "page-test-ticket-secret-0123456789abcdef" },
  });
  try {
    const page = await browser.context.newPage();
    const errors = [];
    page.on("pageerror", (e) => errors.push(String(e)));
    await page.goto(`${server.base}/?name=nodev`);
    await page.waitForFunction(() => window.arena?.banner.includes("--dev"), null, { timeout: 20000 });
    assert.match(await page.locator(".banner").innerText(), /start it with zonekeep serve --dev/);
    await page.waitForFunction(() => window.arena.state.startsWith("failed") || window.arena.state === "closed", null, {
      timeout: 10000,
    });
    assert.deepEqual(await page.evaluate(() => window.arena.errors), [], "the banner is the whole story");
    assert.deepEqual(errors, []);
    await page.close();
  } finally {
    await server.stop();
  }
});
