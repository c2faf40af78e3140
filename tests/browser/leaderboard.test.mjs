// The arena page's "Top 10" panel in real headless Chromium against the real `zonekeep serve --dev`
// binary. The host declares the `score` board itself, without the dev mode's total over the
// players' `score` facts: only the back end's submissions move it, so the page's own player
// picking up a coin cannot change the ranking the test expects. Scores are put on the board the way a game's
// back end does it, `POST /boards/score/scores` with the host's lobby credential (`--lobby-token`),
// and the panel must list the best ten in the board's order (ties by principal) with their scores;
// the page's own principal (its ticket's subject) shows as "you: #rank" while outside the ten and
// as a highlighted row once inside. A board read that fails keeps the last ranking with a "stale"
// mark; a host without the board hides the panel. Every wait is on what the page shows or
// publishes (`window.arena.board`), never a sleep.
import assert from "node:assert/strict";
import { join } from "node:path";
import { after, before, test } from "node:test";

import { artifactsDir, launchChromium, openArenaPage, startServer } from "./harness.mjs";
import { requireChromium } from "./services.mjs";

const chromium = requireChromium("leaderboard.test.mjs");
const skip = chromium === null ? "no chromium" : false;

/** The back end's credential the host is started with (the lobby's, at least 16 bytes). */
const LOBBY_TOKEN = "browser-tests-lobby-token-0123456789";
/** The panel reads every 5 s: a change shows within one read and its answer. */
const SHOWN_WITHIN_MS = 15000;

let server;
let browser;

before(async () => {
  server = await startServer({ args: ["--lobby-token", LOBBY_TOKEN, "--board", "score"] });
  if (chromium !== null) browser = await launchChromium(chromium);
});

after(async () => {
  await browser?.close();
  await server?.stop();
});

/** Submits `value` for `principal` under the idempotency `key`, as a back end does; returns the answer. */
async function submit(base, principal, value, key) {
  const r = await fetch(`${base}/boards/score/scores`, {
    method: "POST",
    headers: { authorization: `Bearer ${LOBBY_TOKEN}`, "content-type": "application/json" },
    body: JSON.stringify({ principal, value, key }),
  });
  const body = await r.json();
  assert.ok(r.status === 201 || r.status === 200, `submit ${principal}: HTTP ${r.status} ${JSON.stringify(body)}`);
  return { status: r.status, body };
}

/** The panel as shown: its rows ([rank, principal, score, highlighted]), the "you" line, the stale mark, whether visible. */
function panel(page) {
  return page.evaluate(() => {
    const box = document.querySelector(".leaderboard");
    if (box === null) return null;
    const shown = (e) => e !== null && !e.hidden && getComputedStyle(e).display !== "none";
    return {
      visible: shown(box),
      title: box.querySelector(".title")?.firstChild?.textContent ?? "",
      rows: [...box.querySelectorAll(".row:not(.empty)")].map((r) => [
        r.querySelector(".rank")?.textContent,
        r.querySelector(".name")?.textContent,
        r.querySelector(".score")?.textContent,
        r.classList.contains("me"),
      ]),
      you: shown(box.querySelector(".you")) ? box.querySelector(".you").textContent : null,
      stale: shown(box.querySelector(".stale")),
    };
  });
}

/** Waits until `check(panel)` holds; a failure says what the panel shows instead. */
async function until(page, what, check, timeout = SHOWN_WITHIN_MS) {
  const start = Date.now();
  let last = null;
  while (Date.now() - start < timeout) {
    last = await panel(page);
    if (last !== null && check(last)) return last;
    // The next look after the page's next frame (no fixed sleep: the panel changes between frames).
    await page.evaluate(() => new Promise((r) => requestAnimationFrame(() => r())));
  }
  const board = await page.evaluate(() => JSON.stringify(window.arena?.board)).catch(() => "?");
  throw new Error(`the panel never showed ${what}: it shows ${JSON.stringify(last)}; window.arena.board is ${board}`);
}

test("the Top 10 lists the board's best in order with their scores, and the page's own place", { skip, timeout: 120000 }, async () => {
  // Twelve principals; `ada` in two submissions (and one repeated key, which counts once), a tie
  // (`tie-a` ranks before `tie-b`: byte order), one name outside ASCII.
  const seeds = [
    ["ada", 60, "a-1"],
    ["ada", 30, "a-2"],
    ["ada", 30, "a-2"],
    ["bob", 80, "b-1"],
    ["zoë", 70, "z-1"],
    ["cy", 60, "c-1"],
    ["tie-b", 50, "tb-1"],
    ["tie-a", 50, "ta-1"],
    ["dan", 40, "d-1"],
    ["eve", 30, "e-1"],
    ["fay", 20, "f-1"],
    ["gus", 10, "g-1"],
    ["hal", 5, "h-1"],
    ["ivy", 3, "i-1"],
  ];
  const answers = [];
  for (const [p, v, k] of seeds) answers.push(await submit(server.base, p, v, k));
  assert.deepEqual(
    answers.slice(0, 3).map((a) => [a.status, a.body.recorded, a.body.me?.score]),
    [
      [201, true, 60],
      [201, true, 90],
      [200, false, 90],
    ],
    "a repeated key is not counted again",
  );

  const { page, errors } = await openArenaPage(browser, server.base, `arena-board-${Date.now()}`, "boardie");
  const top = [
    ["#1", "ada", "90", false],
    ["#2", "bob", "80", false],
    ["#3", "zoë", "70", false],
    ["#4", "cy", "60", false],
    ["#5", "tie-a", "50", false],
    ["#6", "tie-b", "50", false],
    ["#7", "dan", "40", false],
    ["#8", "eve", "30", false],
    ["#9", "fay", "20", false],
    ["#10", "gus", "10", false],
  ];
  // Once the page read the board knowing its principal (its ticket's subject): the ten, and no
  // "you" line (the player has no score yet).
  await page.waitForFunction(() => window.arena.board?.state === "shown" && window.arena.board.me !== null, null, { timeout: SHOWN_WITHIN_MS });
  let shown = await until(page, "the ten", (p) => p.visible && JSON.stringify(p.rows) === JSON.stringify(top));
  assert.equal(shown.title, "Top 10");
  assert.equal(shown.you, null);
  assert.equal(shown.stale, false);
  const me = await page.evaluate(() => window.arena.board.me);
  assert.match(me, /^guest:boardie:[0-9a-f]+$/);

  // Outside the ten: "you: #13" (1 point, the last of the thirteen principals).
  await submit(server.base, me, 1, "me-1");
  shown = await until(page, "you: #13", (p) => p.you === "you: #13 · 1");
  assert.deepEqual(shown.rows, top, "the ten are unchanged");

  // Inside the ten: the page's own row first, highlighted; gus drops out; no "you" line.
  await submit(server.base, me, 999, "me-2");
  shown = await until(page, "the page's own row first", (p) => p.rows[0]?.[1] === me);
  assert.deepEqual(shown.rows, [["#1", me, "1000", true], ...top.slice(0, 9).map(([r, n, s]) => [`#${Number(r.slice(1)) + 1}`, n, s, false])]);
  assert.equal(shown.you, null);
  await page.screenshot({ path: join(artifactsDir(), "arena-leaderboard.png") });

  // The board cannot be read for a while (the store does not answer): the last ranking stays,
  // marked stale; once reads succeed again the mark goes.
  await page.route("**/boards/score**", (route) =>
    route.fulfill({
      status: 503,
      contentType: "application/json",
      body: JSON.stringify({ error: { code: "unavailable", message: "the store did not answer in 3 s" } }),
    }),
  );
  const stale = await until(page, "the stale mark", (p) => p.stale);
  assert.deepEqual(stale.rows, shown.rows, "the last ranking stays on show");
  assert.equal(stale.visible, true);
  assert.match(await page.evaluate(() => window.arena.board.error), /^unavailable: /);
  await page.unroute("**/boards/score**");
  await until(page, "the mark gone", (p) => !p.stale && p.rows.length === 10);

  assert.deepEqual(errors, []);
  await page.close();
});

test("a host without the board hides the panel, and the arena plays on", { skip, timeout: 60000 }, async () => {
  // Boards declared on the command line replace the dev ones: this host has no `score`.
  const other = await startServer({ args: ["--board", "laps:op=best:order=asc"] });
  try {
    const { page, errors } = await openArenaPage(browser, other.base, "arena-1", "noboard");
    await page.waitForFunction(() => window.arena.board?.state === "hidden", null, { timeout: SHOWN_WITHIN_MS });
    const shown = await panel(page);
    assert.equal(shown.visible, false);
    assert.match(await page.evaluate(() => window.arena.board.error), /^no_board: /);
    assert.equal(await page.evaluate(() => window.arena.state), "open");
    assert.deepEqual(errors, []);
    await page.close();
  } finally {
    await other.stop();
  }
});
