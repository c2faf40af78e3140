// The operator console (`/console`, crates/zonekeep-server/console) in headless Chromium against real
// hosts. Without a credential the page shows its login form and no data, and a wrong token is
// refused (the page says so, and /metrics counts it). On a fleet of three hosts sharing PostgreSQL,
// from the console of the first: the hosts page lists the three alive; the zones page lists a zone
// made on each; a zone page shows a player joined with the arena page, and a live chart that grows;
// kicking that player shows the reason on the player's page; moving a zone to another host leaves
// its player's page playing on, as the same player, at the new owner. On another fleet of three
// with a module kind, the modules page pushes two builds (every host follows), lists the kind's
// deploy history from the store, and rolls back to the first deploy from its row; a zone's page
// shows the same history. Waits are on page state and on what the hosts answer, bounded, never
// fixed sleeps.
//
// With ZONEKEEP_SCREENSHOTS=1 it also saves the hosts, zones, zone and modules pages to docs/console/*.png
// (the README shows them); without it, nothing in the repository is written.
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { createHash } from "node:crypto";
import { mkdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { after, test } from "node:test";

import { admin, ownerOf, placeZone, startFleet, until } from "./fleet.mjs";
import { ADMIN_TOKEN, launchChromium, openArenaPage, repo, startServer } from "./harness.mjs";
import { requireChromium, requirePostgres } from "./services.mjs";

// Skipped (and listed as such) without Chromium, the fleet test also without PostgreSQL; under
// CI=true either fails the run.
const chromium = requireChromium("console");
const postgres = chromium === null ? null : requirePostgres("console fleet");
const skipLogin = chromium === null ? "no chromium" : false;
const skipFleet = chromium === null ? "no chromium" : postgres === null ? "no postgres" : false;

const SHOTS = process.env.ZONEKEEP_SCREENSHOTS === "1" ? join(repo, "docs", "console") : null;

let browser;
const cleanups = [];

after(async () => {
  await browser?.close();
  for (const c of cleanups.reverse()) await c();
});

async function chromiumOnce() {
  browser ??= await launchChromium(chromium);
  return browser;
}

/** A console page at `base`, collecting page errors; the viewport of a laptop screen. */
async function openConsole(base, hash = "") {
  const b = await chromiumOnce();
  const page = await b.context.newPage();
  await page.setViewportSize({ width: 1280, height: 800 });
  const errors = [];
  page.on("pageerror", (e) => errors.push(String(e)));
  await page.goto(`${base}/console${hash}`);
  return { page, errors };
}

/** Signs in with `token` through the login form. */
async function signIn(page, token) {
  await page.locator("[data-testid=login-form]").waitFor({ timeout: 10000 });
  await page.fill("[data-testid=login-token]", token);
  await page.click("[data-testid=login-submit]");
}

/** `zonekeep_admin_refused_total{reason}` in the host's /metrics (0 when the series is absent). */
async function refused(base, reason) {
  const text = await (await fetch(`${base}/metrics`)).text();
  const line = text.split("\n").find((l) => l.startsWith("zonekeep_admin_refused_total{") && l.includes(`reason="${reason}"`));
  return line === undefined ? 0 : Number(line.trim().split(/\s+/).pop());
}

/** How many elements that show data the page has (tables of hosts, zones, a zone). */
async function dataShown(page) {
  return page.locator("table, [data-testid=hosts], [data-testid=zones], [data-testid=zone-summary]").count();
}

/** Saves a full-page screenshot as docs/console/NAME.png when ZONEKEEP_SCREENSHOTS=1. */
async function shot(page, name) {
  if (SHOTS === null) return;
  mkdirSync(SHOTS, { recursive: true });
  await page.screenshot({ path: join(SHOTS, `${name}.png`), fullPage: true });
}

/** The number a data-testid'd element shows. */
async function numberIn(page, testid) {
  return Number((await page.locator(`[data-testid=${testid}]`).first().innerText()).replace(/\D/g, ""));
}

test("without a credential the console shows its login form and no data; a wrong token is refused and counted", { skip: skipLogin, timeout: 90000 }, async () => {
  const server = await startServer();
  cleanups.push(() => server.stop());
  const { page, errors } = await openConsole(server.base);
  await page.locator("[data-testid=login-form]").waitFor({ timeout: 10000 });
  assert.equal(await dataShown(page), 0, "no data before a token");
  assert.equal(await page.evaluate(() => sessionStorage.length), 0);

  const wrongBefore = await refused(server.base, "wrong");
  await signIn(page, "not-the-admin-token-at-all");
  await page.locator("[data-testid=login-refused]").waitFor({ timeout: 10000 });
  assert.equal(await page.locator("[data-testid=login-refused]").innerText(), "wrong credential");
  assert.ok(await page.locator("[data-testid=login-form]").isVisible(), "the form again");
  assert.equal(await dataShown(page), 0, "no data with a wrong token");
  assert.equal(await page.evaluate(() => sessionStorage.length), 0, "a refused token is not kept");
  const wrongAfter = await refused(server.base, "wrong");
  assert.ok(wrongAfter > wrongBefore, `zonekeep_admin_refused_total{reason="wrong"} grew: ${wrongBefore} → ${wrongAfter}`);

  // A reload without a kept token: the form, still no data.
  await page.reload();
  await page.locator("[data-testid=login-form]").waitFor({ timeout: 10000 });
  assert.equal(await dataShown(page), 0);

  // The right token: the hosts page, this host alone.
  await signIn(page, ADMIN_TOKEN);
  await page.locator("[data-testid=host-row]").first().waitFor({ timeout: 10000 });
  assert.equal(await page.locator("[data-testid=host-row]").count(), 1);
  assert.equal(await page.evaluate(() => sessionStorage.length), 1, "the token is kept in sessionStorage");
  // Signing out leaves the data.
  await page.click("[data-testid=sign-out]");
  await page.locator("[data-testid=login-form]").waitFor({ timeout: 10000 });
  assert.equal(await dataShown(page), 0);
  assert.deepEqual(errors, []);
  await page.close();
});

test("a host with the admin API off serves the console, which says so", { skip: skipLogin, timeout: 60000 }, async () => {
  // No admin token anywhere (the host refuses an empty one, so it is left out of the environment).
  const inherited = process.env.ZONEKEEP_ADMIN_TOKEN;
  delete process.env.ZONEKEEP_ADMIN_TOKEN;
  let server;
  try {
    server = await startServer([], { dev: false, env: { ZONEKEEP_TICKET_SECRET: "console-test-ticket-secret-0123456789abcdef" } });
  } finally {
    if (inherited !== undefined) process.env.ZONEKEEP_ADMIN_TOKEN = inherited;
  }
  cleanups.push(() => server.stop());
  const { page, errors } = await openConsole(server.base);
  await page.locator("[data-testid=admin-off]").waitFor({ timeout: 10000 });
  assert.match(await page.locator("[data-testid=admin-off]").innerText(), /the admin API is off on this host/);
  assert.equal(await page.locator("[data-testid=login-form]").count(), 0, "no form: there is nothing to sign in to");
  assert.equal(await dataShown(page), 0);
  assert.deepEqual(errors, []);
  await page.close();
});

test("on a fleet of three: hosts, zones, a zone's player and live chart, a kick and a move from the console", { skip: skipFleet, timeout: 240000 }, async () => {
  const fleet = await startFleet(3, postgres, { idPrefix: "console" });
  cleanups.push(() => fleet.stop());
  const [h1, h2, h3] = fleet.hosts;
  const zones = fleet.hosts.map((h, i) => ({ id: `console-zone-${i + 1}`, host: h }));
  for (const z of zones) await placeZone(z.host, z.id, "arena");

  // ---- the hosts page of the first host: three hosts, alive, each with its own version.
  const { page, errors } = await openConsole(h1.base, "#/hosts");
  await signIn(page, ADMIN_TOKEN);
  await until("three alive hosts on the hosts page", async () =>
    (await page.locator("[data-testid=host-row][data-alive=true]").count()) === 3 ? true : null,
  );
  const ids = await page.locator("[data-testid=host-row]").evaluateAll((rows) => rows.map((r) => r.dataset.host).sort());
  assert.deepEqual(ids, fleet.hosts.map((h) => h.id).sort());
  // Each host's version came from that host (through the fleet proxy for the other two).
  const { version } = await admin(h1.base, "/admin/hosts");
  await until("every host's version", async () => {
    const shown = await page.locator("[data-testid=host-version]").allInnerTexts();
    return shown.length === 3 && shown.every((v) => v === version) ? shown : null;
  });

  // ---- players: one on the second host's zone (to be kicked), one on the third's (to be moved).
  const b = await chromiumOnce();
  const kicked = await openArenaPage(b, h2.base, zones[1].id, "kickee");
  const mover = await openArenaPage(b, h3.base, zones[2].id, "mover", "&transport=websocket");
  const moverSockets = [];
  mover.page.on("websocket", (ws) => moverSockets.push(ws.url()));
  const moverId = await mover.page.evaluate(() => window.arena.playerId);

  await shot(page, "hosts");

  // ---- the zones page: a zone on each host, with its owner; the joined players counted.
  await page.click("[data-testid=nav-zones]");
  await until("the three zones, each on its host, with its players", async () => {
    const rows = await page.locator("[data-testid=zone-row]").evaluateAll((rs) =>
      rs.map((r) => ({
        zone: r.dataset.zone,
        host: r.dataset.host,
        players: r.querySelector("[data-testid=zone-players]")?.textContent,
      })),
    );
    const want = zones.map((z, i) => ({ zone: z.id, host: z.host.id, players: i === 0 ? "0" : "1" }));
    return JSON.stringify(rows) === JSON.stringify(want) ? rows : null;
  });
  await shot(page, "zones");

  // ---- the second host's zone, read through the proxy: the player, and a chart that grows.
  await page.click(`[data-testid=zone-row][data-zone=${zones[1].id}] [data-testid=zone-link]`);
  const row = page.locator("[data-testid=participant-row][data-name=kickee]");
  await row.waitFor({ timeout: 15000 });
  assert.equal(await page.locator("[data-testid=zone-owner]").innerText(), h2.id);
  assert.equal(await row.getAttribute("data-player"), String(await kicked.page.evaluate(() => window.arena.playerId)));
  const points = await numberIn(page, "chart-points");
  const tick = await numberIn(page, "last-tick");
  await until("the chart to gain points and the tick to move on", async () => {
    const p = await numberIn(page, "chart-points");
    const t = await numberIn(page, "last-tick");
    return p >= points + 3 && t > tick ? { p, t } : null;
  });
  // One chart line per stage the zone reports.
  const stages = await page.locator("[data-testid=stages] tbody tr").count();
  assert.ok(stages > 0, "the stage table has rows");
  assert.equal(await page.locator(".chart .u-series").count(), stages + 1, "a series per stage, and time");
  await until("ten points on the chart", async () => ((await numberIn(page, "chart-points")) >= 10 ? true : null));
  await shot(page, "zone");

  // ---- kick from the console: the player's page says why.
  page.once("dialog", (d) => d.accept("kicked from the console test"));
  await row.locator("[data-testid=kick]").click();
  await kicked.page.waitForFunction(() => window.arena.banner.includes("KICKED"), null, { timeout: 15000 });
  const banner = await kicked.page.evaluate(() => window.arena.banner);
  assert.match(banner, /removed from the zone/);
  assert.match(banner, /kicked from the console test/);
  await until("the console to show the player gone", async () => ((await row.count()) === 0 ? true : null));
  assert.match(await page.locator("[data-testid=said]").innerText(), /kicked/);

  // ---- move the third host's zone to the first host from the zones page.
  await page.click("[data-testid=nav-zones]");
  const moving = page.locator(`[data-testid=zone-row][data-zone=${zones[2].id}]`);
  await moving.waitFor({ timeout: 10000 });
  await moving.locator("[data-testid=move-target]").selectOption(h1.id);
  const socketsBefore = moverSockets.length;
  page.once("dialog", (d) => d.accept());
  await moving.locator("[data-testid=move]").click();
  await until("the console to say the zone moved", async () => {
    const said = page.locator("[data-testid=said]");
    if ((await said.count()) === 0) return null;
    const text = await said.innerText();
    return text.startsWith(`move ${zones[2].id}:`) ? text : null;
  }).then((text) => assert.match(text, new RegExp(`: moved to ${h1.id} \\(epoch \\d+\\)$`), "the console says where the zone went"));
  assert.equal(await ownerOf(h1, zones[2].id), h1.id, "the directory names the new owner");
  // The player's page resumes at the new owner, as the same player, and plays on.
  await mover.page.waitForFunction(
    (old) => window.arena.state === "open" && window.arena.me !== null && window.arena.banner === "" && window.arena.playerId === old,
    moverId,
    { timeout: 30000 },
  );
  const resumedAt = moverSockets.slice(socketsBefore);
  assert.ok(
    resumedAt.some((u) => u.startsWith(`${h1.ws}/zones/${zones[2].id}`)),
    `the page reconnected at the new owner: ${JSON.stringify(resumedAt)}`,
  );
  console.log(`the moved player's banners: ${JSON.stringify(await mover.page.evaluate(() => window.arena.banners))}`);
  const ack = await mover.page.evaluate(() => window.arena.ack);
  await mover.page.bringToFront();
  await mover.page.keyboard.down("ArrowRight");
  await mover.page.waitForFunction((a) => window.arena.ack >= a + 5, ack, { timeout: 15000 });
  await mover.page.keyboard.up("ArrowRight");
  assert.equal(await mover.page.evaluate(() => window.arena.playerId), moverId, "the same player");

  // The zone's page follows it to its new owner.
  await page.bringToFront();
  await page.goto(`${h1.base}/console#/zones/${zones[2].id}`);
  await page.locator("[data-testid=participant-row][data-name=mover]").waitFor({ timeout: 15000 });
  assert.equal(await page.locator("[data-testid=zone-owner]").innerText(), h1.id);

  assert.deepEqual(errors, []);
  assert.deepEqual(mover.errors, []);
  assert.deepEqual(kicked.errors, []);
  for (const p of [page, kicked.page, mover.page]) await p.close();
  assert.ok(h3.alive && h2.alive);
});

/** Builds the tag module (examples/module-tag), as the module docs do; its bytes. */
function tagModule() {
  const target = join(repo, "target", "modules");
  const built = spawnSync(
    process.env.CARGO ?? "cargo",
    ["build", "--quiet", "-p", "zonekeep-module-tag", "--target", "wasm32-unknown-unknown", "--profile", "module", "--target-dir", target],
    { cwd: repo, encoding: "utf8" },
  );
  assert.equal(built.status, 0, `building the tag module failed:\n${built.stderr}`);
  return readFileSync(join(target, "wasm32-unknown-unknown", "module", "zonekeep_module_tag.wasm"));
}

/** `bytes` with a custom section naming `label` appended: another build (another digest) of the same code. */
function anotherBuild(bytes, label) {
  const name = Buffer.from("zonekeep-build");
  const section = Buffer.concat([Buffer.from([name.length]), name, Buffer.from(label)]);
  return Buffer.concat([bytes, Buffer.from([0, section.length]), section]);
}

const sha256 = (bytes) => createHash("sha256").update(bytes).digest("hex");

/** Waits until every host of `fleet` runs the module `sha` for the tag kind. */
async function everyHostRuns(fleet, sha) {
  await until(`every host to run ${sha.slice(0, 12)}`, async () => {
    for (const h of fleet.hosts) {
      const m = await admin(h.base, "/admin/modules");
      if (m.kinds.find((k) => k.kind === "tag")?.sha256 !== sha) return null;
    }
    return true;
  });
}

/** The deploy history table `scope` shows: [version, cause, running] per row. */
async function historyRows(scope) {
  return scope.locator("[data-testid=deploy-history] [data-testid=deploy-row]").evaluateAll((rows) =>
    rows.map((r) => [Number(r.dataset.version), r.dataset.cause, r.dataset.running === "true"]),
  );
}

test("on a fleet of three: a module kind pushed twice, its deploy history, and a rollback to its first deploy from the console", { skip: skipFleet, timeout: 240000 }, async () => {
  const v1 = tagModule();
  const v2 = anotherBuild(v1, "v2");
  const fleet = await startFleet(3, postgres, { idPrefix: "modules", args: ["--module", "tag"] });
  cleanups.push(() => fleet.stop());
  const [h1, h2] = fleet.hosts;

  const { page, errors } = await openConsole(h1.base, "#/modules");
  await signIn(page, ADMIN_TOKEN);
  await page.locator("[data-testid=module-row][data-kind=tag]").waitFor({ timeout: 15000 });
  await page.locator("[data-testid=deploy-history-empty]").waitFor({ timeout: 15000 });

  // Two pushes through the page's form; every host follows each.
  const push = async (bytes, name) => {
    await page.setInputFiles("[data-testid=push] input[type=file]", { name, mimeType: "application/wasm", buffer: bytes });
    page.once("dialog", (d) => d.accept());
    await page.click("[data-testid=push] button[type=submit]");
  };
  await push(v1, "tag-v1.wasm");
  await everyHostRuns(fleet, sha256(v1));
  await push(v2, "tag-v2.wasm");
  await everyHostRuns(fleet, sha256(v2));
  await until("the history to list both pushes, the second running", async () => {
    const rows = await historyRows(page);
    return JSON.stringify(rows) === JSON.stringify([[2, "push", true], [1, "push", false]]) ? rows : null;
  });

  // A zone of the kind on the second host runs the second build.
  const zone = "modules-tag-1";
  await placeZone(h2, zone, "tag");
  await shot(page, "modules");

  // Roll back to the first deploy from its row: recorded as the kind's third deploy, by rollback;
  // every host, and the running zone, go back to the first build.
  page.once("dialog", (d) => d.accept());
  await page.locator("[data-testid=deploy-row][data-version='1'] [data-testid=roll-back-to]").click();
  await until("the rollback in the history", async () => {
    const rows = await historyRows(page);
    return JSON.stringify(rows) === JSON.stringify([[3, "rollback", true], [2, "push", false], [1, "push", true]]) ? rows : null;
  });
  assert.match(await page.locator("[data-testid=said]").innerText(), /roll tag back to version 1: rolled back to/);
  await everyHostRuns(fleet, sha256(v1));

  // The zone's page, read from its owner through the proxy, shows its kind's deploys too.
  await page.goto(`${h1.base}/console#/zones/${zone}`);
  await page.locator("[data-testid=zone-owner]").waitFor({ timeout: 15000 });
  assert.equal(await page.locator("[data-testid=zone-owner]").innerText(), h2.id);
  await until("the zone page's deploy history", async () => {
    const rows = await historyRows(page);
    return rows.length === 3 && rows[0][0] === 3 && rows[0][2] ? rows : null;
  });
  const facts = await page.locator("[data-testid=facts-settled]").innerText();
  assert.match(facts, /committed; \d+ refused/);
  assert.deepEqual(errors, []);
  await page.close();
});
