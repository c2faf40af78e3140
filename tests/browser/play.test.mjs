// The demo's "Play" page (/play) in real headless Chromium against the real `zonekeep serve --dev`
// binary, whose matchmaker runs the `duel` queue (two arena players) on its SQLite store: two pages
// click Play, are matched into one zone and play it, each seeing the other, with the measured round
// trip of region `local` on show; a search cancelled while waiting goes back to the Play button and
// is deleted at the matchmaker; a host whose content floor the page does not meet shows "update to
// keep playing" with no retry. Every wait is on what the page shows or publishes (`window.play`,
// `window.arena`), never a sleep.
import assert from "node:assert/strict";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, test } from "node:test";

import { launchChromium, startServer } from "./harness.mjs";
import { requireChromium } from "./services.mjs";

const chromium = requireChromium("play.test.mjs");
const skip = chromium === null ? "no chromium" : false;

/** Two browsers, one per player: each page has a browser context (and storage) of its own. */
let browsers = [];

before(async () => {
  if (chromium !== null) browsers = [await launchChromium(chromium), await launchChromium(chromium)];
});

after(async () => {
  for (const b of browsers) await b.close();
});

/** A dev host (its matchmaker's `duel` queue with it) on SQLite in a scratch directory of its own. */
function startHost(args = []) {
  const dir = mkdtempSync(join(tmpdir(), "zonekeep-play-"));
  return startServer({ dir, args: ["--store", "sqlite", "--data-dir", join(dir, "data"), ...args] });
}

/**
 * Opens /play as `name` in `browser` (one of `browsers`) and waits for the Play button. Returns the
 * page, the page errors it collects and the matchmaker's answers to its search requests
 * (`searches`: method, path, status, body).
 */
async function openPlay(browser, base, name) {
  const page = await browser.context.newPage();
  const errors = [];
  const searches = [];
  page.on("pageerror", (e) => errors.push(String(e)));
  page.on("response", async (r) => {
    const url = new URL(r.url());
    if (!url.pathname.startsWith("/match/searches")) return;
    let body = null;
    try {
      body = await r.json();
    } catch {
      // Not JSON (a CORS preflight, an aborted long poll): only the status says anything.
    }
    searches.push({ method: r.request().method(), path: url.pathname, status: r.status(), body });
  });
  await page.goto(`${base}/play?name=${name}`);
  await page.getByTestId("play").waitFor({ state: "visible", timeout: 20000 });
  assert.equal(await page.evaluate(() => window.play.phase), "idle");
  return { page, errors, searches };
}

/** Waits until the page's model (`window.play`) is in `phase`; a failure names where it is instead. */
async function phase(page, want, timeout = 30000) {
  try {
    await page.waitForFunction((p) => window.play?.phase === p, want, { timeout });
  } catch (e) {
    const now = await page.evaluate(() => JSON.stringify(window.play)).catch(() => "?");
    throw new Error(`${e.message}; window.play is ${now}`);
  }
}

/** The page's next `POST /match/searches` answer: `{ status, body }` (wait for it before clicking Play). */
async function nextCreate(page) {
  const r = await page.waitForResponse((r) => r.request().method() === "POST" && new URL(r.url()).pathname === "/match/searches", {
    timeout: 20000,
  });
  return { status: r.status(), body: await r.json() };
}

/** The text the page shows for region `region`'s round trip (the row of the region list). */
function rttShown(page, region) {
  return page.locator(`li[data-region="${region}"] .rtt`).textContent();
}

test("two pages click Play, are matched into one zone and see each other there", { skip, timeout: 120000 }, async () => {
  const server = await startHost();
  const players = [];
  try {
    const ann = await openPlay(browsers[0], server.base, "ann");
    const bob = await openPlay(browsers[1], server.base, "bob");
    players.push(ann, bob);

    // Ann searches alone: her region is measured and shown while she waits in the queue.
    await ann.page.getByTestId("play").click();
    await ann.page.waitForFunction(() => window.play.phase === "searching" && window.play.state === "queued", null, {
      timeout: 30000,
    });
    await ann.page.waitForFunction(() => /^\d+ ms$/.test(document.querySelector('li[data-region="local"] .rtt')?.textContent ?? ""), null, {
      timeout: 10000,
    });
    const annRtt = await rttShown(ann.page, "local");
    assert.match(await ann.page.getByTestId("play-headline").textContent(), /Looking for an opponent \(queue duel\)/);
    assert.equal(await ann.page.getByTestId("cancel").isVisible(), true, "a waiting search can be cancelled");
    assert.equal(await ann.page.getByTestId("play").isVisible(), false);

    // Bob searches: the two make the duel.
    await bob.page.getByTestId("play").click();
    await phase(ann.page, "playing");
    await phase(bob.page, "playing");
    const a = await ann.page.evaluate(() => ({ ...window.play }));
    const b = await bob.page.evaluate(() => ({ ...window.play }));
    assert.equal(typeof a.zone, "string");
    assert.ok(a.zone.length > 0, "the match has a zone");
    assert.equal(b.zone, a.zone, "both pages play the same zone");
    // The assignment lists the match's two players: by name, or by the principal (the ticket's
    // `sub`, `guest:NAME:…` for a dev ticket) where the matchmaker lists those.
    const named = (players) => [...players].sort().map((p) => /^(?:guest:)?([^:]+)/.exec(p)?.[1]);
    assert.deepEqual(named(a.players), ["ann", "bob"], `ann's players: ${a.players}`);
    assert.deepEqual(b.players, a.players, "both pages name the same players");
    for (const [who, m] of [["ann", a], ["bob", b]]) {
      assert.equal(m.region, "local", `${who}: matched in region local`);
      assert.equal(m.error, null, `${who}: no error`);
      // The round trip the region's host measured, as the page recorded and showed it.
      assert.equal(m.probes.local?.status, "measured", `${who}: region local measured: ${JSON.stringify(m.probes)}`);
      assert.equal(typeof m.rttMs.local, "number", `${who}: the matchmaker's record of region local: ${JSON.stringify(m.rttMs)}`);
      assert.ok(m.rttMs.local >= 0 && m.rttMs.local < 1000, `${who}: rtt ${m.rttMs.local} ms`);
    }
    assert.equal(annRtt, `${Math.round(a.rttMs.local)} ms`, "the row showed the recorded round trip");
    // Playing: the panel is gone, the arena is on.
    assert.equal(await ann.page.getByTestId("play-panel").isVisible(), false);
    assert.equal(await bob.page.getByTestId("play-panel").isVisible(), false);

    // Both are in the arena and each sees the other (the arena test's way: `others` by entity id).
    const me = async (p) => {
      const joined = () => window.arena?.state === "open" && window.arena.me !== null && window.arena.entityId !== null;
      await p.page.waitForFunction(joined, null, { timeout: 20000 });
      return p.page.evaluate(() => window.arena.entityId);
    };
    const annId = await me(ann);
    const bobId = await me(bob);
    assert.notEqual(annId, bobId);
    await ann.page.waitForFunction((id) => window.arena.others[id] !== undefined, bobId, { timeout: 15000 });
    await bob.page.waitForFunction((id) => window.arena.others[id] !== undefined, annId, { timeout: 15000 });
    const seen = {
      ann: await ann.page.evaluate(() => Object.values(window.arena.others).map((o) => o.name)),
      bob: await bob.page.evaluate(() => Object.values(window.arena.others).map((o) => o.name)),
    };
    assert.deepEqual(seen, { ann: ["bob"], bob: ["ann"] }, "two players in the arena, each seeing the other");

    // Each page went from creating its search to its assignment without a refusal.
    for (const [who, p] of [["ann", ann], ["bob", bob]]) {
      const created = p.searches.find((s) => s.method === "POST" && s.path === "/match/searches");
      assert.equal(created?.status, 201, `${who}: search created: ${JSON.stringify(p.searches.map((s) => [s.method, s.path, s.status]))}`);
      assert.deepEqual(p.searches.filter((s) => s.status >= 400), [], `${who}: no refusals`);
      assert.deepEqual(p.errors, [], `${who}: page errors`);
      assert.deepEqual(await p.page.evaluate(() => window.arena.errors), [], `${who}: arena errors`);
    }
    console.log(`matched into ${a.zone}: region local ${a.rttMs.local} ms (ann), ${b.rttMs.local} ms (bob)`);
  } finally {
    for (const p of players) await p.page.close();
    await server.stop();
  }
});

test("Cancel while searching goes back to the Play button and deletes the search", { skip, timeout: 90000 }, async () => {
  const server = await startHost();
  let cy;
  try {
    cy = await openPlay(browsers[0], server.base, "cy");
    const create = nextCreate(cy.page);
    await cy.page.getByTestId("play").click();
    const created = await create;
    // Alone in the duel queue: the search waits there.
    await cy.page.waitForFunction(() => window.play.phase === "searching" && window.play.state === "queued", null, {
      timeout: 30000,
    });
    await cy.page.getByTestId("cancel").waitFor({ state: "visible", timeout: 5000 });
    assert.equal(created.status, 201);
    const { search: id, token } = created.body;

    const isDelete = (r) => r.request().method() === "DELETE" && new URL(r.url()).pathname === `/match/searches/${id}`;
    const deleted = cy.page.waitForResponse(isDelete, { timeout: 10000 });
    await cy.page.getByTestId("cancel").click();

    // The page is back where it started: Play, nothing else, and a word on what happened.
    await phase(cy.page, "idle", 10000);
    await cy.page.getByTestId("play").waitFor({ state: "visible", timeout: 5000 });
    assert.equal(await cy.page.getByTestId("cancel").isVisible(), false);
    assert.equal(await cy.page.getByTestId("search-again").isVisible(), false);
    const model = await cy.page.evaluate(() => ({ ...window.play }));
    assert.equal(model.state, null);
    assert.equal(model.error, null);
    assert.equal(model.zone, null);
    assert.equal(model.note, "Search cancelled.");
    assert.match(await cy.page.getByTestId("play-panel").textContent(), /Search cancelled\./);

    // The page deleted its search, and the matchmaker has it cancelled.
    const answer = await deleted;
    assert.equal(answer.status(), 200);
    assert.equal((await answer.json()).state, "cancelled");
    const r = await fetch(`${server.base}/match/searches/${id}`, { headers: { authorization: `Bearer ${token}` } });
    assert.equal(r.status, 200);
    assert.equal((await r.json()).state, "cancelled");
    assert.deepEqual(cy.errors, []);
  } finally {
    await cy?.page.close();
    await server.stop();
  }
});

test("a host whose content floor the page does not meet: update to keep playing, no retry", { skip, timeout: 60000 }, async () => {
  // The page names no content version, which a host with a content floor refuses as outdated.
  const server = await startHost(["--min-content-version", "9.0"]);
  let old;
  try {
    old = await openPlay(browsers[0], server.base, "old");
    const create = nextCreate(old.page);
    await old.page.getByTestId("play").click();
    const refused = await create;
    await phase(old.page, "outdated", 20000);
    const headline = old.page.getByTestId("play-headline");
    assert.equal(await headline.textContent(), "Update to keep playing.");
    assert.match(await old.page.getByTestId("play-panel").textContent(), /out of date: update it to keep playing/);
    // No way to try again: no Play, no Search again, no Cancel.
    for (const button of ["play", "search-again", "cancel"]) {
      assert.equal(await old.page.getByTestId(button).isVisible(), false, `${button} is not offered`);
    }
    const model = await old.page.evaluate(() => ({ ...window.play }));
    assert.equal(model.error?.code, "client_outdated");
    assert.equal(model.error?.retryable, false);
    assert.equal(refused.status, 426);
    assert.equal(refused.body?.error?.code, "client_outdated");
    assert.deepEqual(old.errors, []);
  } finally {
    await old?.page.close();
    await server.stop();
  }
});
