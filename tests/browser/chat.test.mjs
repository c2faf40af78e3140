// The arena page's chat panel in real headless Chromium against the real `zonekeep serve --dev`
// binary, whose SQLite store keeps chat. Two pages join one arena zone: a line typed into one shows
// in both, named by the principal of the page that said it (its ticket's subject) and marked as its
// own there; the player does not move while the keys go into the box; a reload shows the earlier
// lines once (the history the host sends on attach) before the lines said after it; a host
// restarted under the pages sends the history again and nothing shows twice; markup in a line is
// shown as text; a flood of lines typed quickly shows the rate-limit refusal in words; the report
// action shows "reported", and the back end (the host's lobby credential, `--lobby-token`) reads
// the report over `GET /chat/reports` with the line as the host kept it. The panel keeps the newest
// 100 lines. Every wait is on what the page shows or publishes (`window.arena.chat`), never a sleep.
import assert from "node:assert/strict";
import { join } from "node:path";
import { after, before, test } from "node:test";

import { artifactsDir, launchChromium, openArenaPage, settledMe, startServer } from "./harness.mjs";
import { requireChromium } from "./services.mjs";

const chromium = requireChromium("chat.test.mjs");
const skip = chromium === null ? "no chromium" : false;

/** The back end's credential the host is started with (the lobby's, at least 16 bytes). */
const LOBBY_TOKEN = "browser-tests-lobby-token-0123456789";
/** A line is heard once the store kept it (one transaction): well within this. */
const SHOWN_WITHIN_MS = 15000;
/** The reason the page's report action files. */
const REPORT_REASON = "reported from the arena page";

let server;
let browser;

before(async () => {
  server = await startServer({ args: ["--lobby-token", LOBBY_TOKEN] });
  if (chromium !== null) browser = await launchChromium(chromium);
});

after(async () => {
  await browser?.close();
  await server?.stop();
});

/** The back end's JSON call to the host: `{ status, body }`. */
async function backend(base, method, path, body = undefined) {
  const r = await fetch(`${base}${path}`, {
    method,
    headers: { authorization: `Bearer ${LOBBY_TOKEN}`, ...(body === undefined ? {} : { "content-type": "application/json" }) },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await r.text();
  let json;
  try {
    json = JSON.parse(text);
  } catch {
    json = text;
  }
  return { status: r.status, body: json };
}

/** The panel as shown: visible, its lines ([seq, sender, body, mine, report action's text]), the notice. */
function panel(page) {
  return page.evaluate(() => {
    const box = document.querySelector(".chat");
    if (box === null) return null;
    const shown = (e) => e !== null && !e.hidden && getComputedStyle(e).display !== "none";
    return {
      visible: shown(box),
      lines: [...box.querySelectorAll(".line")].map((r) => [
        Number(r.dataset.seq),
        r.querySelector(".sender")?.textContent,
        r.querySelector(".body")?.textContent,
        r.classList.contains("mine"),
        (r.querySelector(".report") ?? r.querySelector(".reported"))?.textContent,
      ]),
      notice: shown(box.querySelector(".notice")) ? box.querySelector(".notice").textContent : "",
      elements: box.querySelectorAll(".line *").length,
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
  const chat = await page.evaluate(() => JSON.stringify(window.arena?.chat)).catch(() => "?");
  throw new Error(`the panel never showed ${what}: it shows ${JSON.stringify(last)}; window.arena.chat is ${chat}`);
}

function varint(buf, at) {
  let v = 0;
  let mul = 1;
  for (;;) {
    const byte = buf[at.i++];
    v += (byte & 0x7f) * mul;
    if ((byte & 0x80) === 0) return v;
    mul *= 128;
  }
}

/**
 * Records the ChatLines (tag 0x8C, PROTOCOL.md §5.11) that the WebSockets `page` opens from now on
 * receive: `{ channel, history, lines }` each (`lines`: how many).
 */
function chatFrames(page) {
  const seen = [];
  page.on("websocket", (ws) =>
    ws.on("framereceived", ({ payload }) => {
      if (typeof payload === "string" || payload[0] !== 0x8c) return;
      const at = { i: 1 };
      const len = varint(payload, at);
      const channel = payload.subarray(at.i, at.i + len).toString("utf8");
      at.i += len;
      const flags = payload[at.i++];
      varint(payload, at); // ref
      seen.push({ channel, history: (flags & 1) === 1, lines: varint(payload, at) });
    }),
  );
  return seen;
}

/** The bodies shown, in order. */
const bodies = (p) => p.lines.map((l) => l[2]);

/** Types `text` into the page's chat box and presses Enter (the box takes the focus first). */
async function say(page, text) {
  await page.focus(".chat .say");
  await page.keyboard.type(text);
  await page.keyboard.press("Enter");
}

/** Opens the arena page of `zone` as `name` and waits for its chat panel; returns it with its principal. */
async function openChatPage(zone, name, base = server.base, query = "") {
  const { page, errors } = await openArenaPage(browser, base, zone, name, query);
  await page.waitForFunction(() => window.arena.chat?.state === "shown" && window.arena.chat.me.length > 0, null, {
    timeout: SHOWN_WITHIN_MS,
  });
  const me = await page.evaluate(() => window.arena.chat.me.at(-1));
  assert.match(me, new RegExp(`^guest:${name}:[0-9a-f]+$`));
  return { page, errors, me };
}

test("two pages chat in the zone: each line in both, named by its page's principal; a reload shows the history once; a report files the host's copy", { skip, timeout: 180000 }, async () => {
  const zone = `arena-chat-${Date.now()}`;
  const channel = `zone:${zone}`;
  const ann = await openChatPage(zone, "ann");
  const bob = await openChatPage(zone, "bob");
  assert.equal(await ann.page.evaluate(() => window.arena.chat.channel), channel);
  assert.deepEqual((await panel(ann.page)).lines, [], "a new zone's channel has no lines");

  // Ann types a line with game keys in it: they are the box's, the player does not move.
  await ann.page.bringToFront();
  const before = await ann.page.evaluate(() => ({ sent: window.arena.inputsSent, me: { ...window.arena.me } }));
  await say(ann.page, "hello wasd from ann");
  let a = await until(ann.page, "ann's line", (p) => bodies(p).includes("hello wasd from ann"));
  let b = await until(bob.page, "ann's line", (p) => bodies(p).includes("hello wasd from ann"));
  assert.deepEqual(a.lines, [[1, ann.me, "hello wasd from ann", true, "report"]], "ann's page: her own line, marked");
  assert.deepEqual(b.lines, [[1, ann.me, "hello wasd from ann", false, "report"]], "bob's page: ann's line");
  const after1 = await ann.page.evaluate(() => ({ sent: window.arena.inputsSent, me: { ...window.arena.me } }));
  assert.equal(after1.sent, before.sent, "typing into the box sent no game input");
  assert.deepEqual(after1.me, before.me, "typing into the box did not move the player");

  // Bob answers: both pages show both lines in seq order, each named by its page's principal.
  await bob.page.bringToFront();
  await say(bob.page, "hi ann");
  const two = [
    [1, ann.me, "hello wasd from ann"],
    [2, bob.me, "hi ann"],
  ];
  a = await until(ann.page, "bob's line", (p) => p.lines.length === 2);
  b = await until(bob.page, "bob's line", (p) => p.lines.length === 2);
  assert.deepEqual(a.lines.map((l) => l.slice(0, 4)), [[...two[0], true], [...two[1], false]]);
  assert.deepEqual(b.lines.map((l) => l.slice(0, 4)), [[...two[0], false], [...two[1], true]]);
  assert.equal(a.notice, "");

  // Markup is text: the line shows as typed and makes no element.
  const markup = `<img src=x onerror="window.__chatInjected=1"><b>bold</b>`;
  await say(bob.page, markup);
  a = await until(ann.page, "the markup line", (p) => bodies(p).includes(markup));
  assert.equal(a.elements, 3 * 3, "three lines of sender, body and report action, nothing else");
  assert.equal(await ann.page.evaluate(() => window.__chatInjected), undefined);
  await until(bob.page, "the markup line", (p) => bodies(p).includes(markup));
  const three = [...two, [3, bob.me, markup]];

  // Bob reloads: the earlier lines come back once (the history the host sends on attach), then the
  // line said after the reload follows them.
  await bob.page.reload();
  await bob.page.waitForFunction(() => window.arena?.state === "open" && window.arena.chat?.state === "shown", null, {
    timeout: 20000,
  });
  b = await until(bob.page, "the history", (p) => p.lines.length >= 3);
  assert.deepEqual(b.lines.map((l) => l.slice(0, 3)), three, "the history, each line once");
  assert.deepEqual(
    await bob.page.evaluate(() => window.arena.chat.lines.map((l) => l.history)),
    [true, true, true],
    "those lines came from the store",
  );
  const bob2 = await bob.page.evaluate(() => window.arena.chat.me.at(-1));
  await ann.page.bringToFront();
  await say(ann.page, "after the reload");
  b = await until(bob.page, "the new line", (p) => bodies(p).includes("after the reload"));
  assert.deepEqual(
    b.lines.map((l) => l.slice(0, 3)),
    [...three, [4, ann.me, "after the reload"]],
    "history first, then the new line, nothing twice",
  );
  assert.equal(await bob.page.evaluate(() => window.arena.chat.lines.at(-1).history), false);

  // Bob reports ann's first line. What bob's page shows is not what is filed: the report names the
  // line by its seq and the host files its own copy. (The page is made to show other words first.)
  await bob.page.bringToFront();
  await bob.page.evaluate(() => {
    document.querySelector('.chat .line[data-seq="1"] .body').textContent = "words ann never said";
  });
  await bob.page.click('.chat .line[data-seq="1"] .report');
  b = await until(bob.page, "reported", (p) => p.lines[0]?.[4] === "reported");
  assert.deepEqual(b.lines.slice(1).map((l) => l[4]), ["report", "report", "report"], "only that line is reported");
  const filed = await bob.page.evaluate(() => window.arena.chat.reports);
  assert.equal(filed.length, 1);
  assert.deepEqual({ channel: filed[0].channel, seq: filed[0].seq }, { channel, seq: 1 });

  const kept = await backend(server.base, "GET", `/chat/lines?channel=${encodeURIComponent(channel)}`);
  assert.equal(kept.status, 200, JSON.stringify(kept.body));
  const keptLine = kept.body.lines.find((l) => l.seq === 1);
  assert.deepEqual(
    { seq: keptLine.seq, sender: keptLine.sender, body: keptLine.body },
    { seq: 1, sender: ann.me, body: "hello wasd from ann" },
    `the host keeps: ${JSON.stringify(kept.body)}`,
  );
  const reports = await backend(server.base, "GET", "/chat/reports?limit=200");
  assert.equal(reports.status, 200, JSON.stringify(reports.body));
  const report = reports.body.reports.find((r) => String(r.id) === filed[0].id);
  assert.ok(report !== undefined, `report ${filed[0].id} in ${JSON.stringify(reports.body)}`);
  assert.equal(report.reporter, bob2, "filed by bob's principal (of the session that reported)");
  assert.equal(report.channel, channel);
  assert.equal(report.reason, REPORT_REASON);
  // (GET /chat/lines names each line's channel too; a report names it once, for all its lines.)
  const { channel: keptChannel, ...keptCopy } = keptLine;
  assert.equal(keptChannel, channel);
  assert.deepEqual(report.lines, [keptCopy], "the line as the host kept it, not as bob's page showed it");

  // Ann floods: lines typed quickly, past the host's rate (2 a second in bursts of 5). The refusal
  // is told in words; the lines the host took show on both pages once each, the refused ones on
  // neither.
  await ann.page.bringToFront();
  // Every text the notice shows is recorded: a line of the flood heard after the refusal (the
  // rate refills) clears it again, as it should.
  await ann.page.evaluate(() => {
    const notice = document.querySelector(".chat .notice");
    window.__chatNotices = [];
    new MutationObserver(() => {
      if (!notice.hidden) window.__chatNotices.push(notice.textContent);
    }).observe(notice, { childList: true, characterData: true, subtree: true, attributes: true });
  });
  const FLOOD = 20;
  for (let i = 1; i <= FLOOD; i++) await say(ann.page, `flood ${i}`);
  await ann.page.waitForFunction(() => window.__chatNotices.some((t) => /^slow down, \d+ s$/.test(t)), null, {
    timeout: SHOWN_WITHIN_MS,
  });
  const refusal = await ann.page.evaluate(() => window.arena.chat.lastRefusal);
  assert.equal(refusal.code, "RATE_LIMITED");
  assert.ok(refusal.untilMs > 0, `a time to speak again: ${JSON.stringify(refusal)}`);
  assert.match(refusal.shown, /^slow down, \d+ s$/);
  // Every line of the flood answered: heard back or refused.
  await ann.page.waitForFunction((n) => window.arena.chat.heard + window.arena.chat.refused === n, 2 + FLOOD, {
    timeout: SHOWN_WITHIN_MS,
  });
  const counts = await ann.page.evaluate(() => {
    const { sent, heard, refused } = window.arena.chat;
    return { sent, heard, refused };
  });
  assert.ok(counts.refused >= 1 && counts.heard >= 2 + 5, `the burst went through, the rest was refused: ${JSON.stringify(counts)}`);
  const tookFlood = counts.heard - 2;
  const flood = (p) => bodies(p).filter((x) => x.startsWith("flood ")).length;
  a = await until(ann.page, "the flood lines the host took", (p) => flood(p) === tookFlood);
  b = await until(bob.page, "the flood lines the host took", (p) => flood(p) === tookFlood);
  assert.deepEqual(bodies(b), bodies(a).map((x, i) => (i === 0 ? "words ann never said" : x)), "both pages show the same lines");
  const seqs = b.lines.map((l) => l[0]);
  assert.deepEqual(seqs, Array.from({ length: seqs.length }, (_, i) => i + 1), "each line once, in seq order");
  await ann.page.screenshot({ path: join(artifactsDir(), "arena-chat.png") });

  assert.deepEqual(ann.errors, []);
  assert.deepEqual(bob.errors, []);
  await ann.page.close();
  await bob.page.close();
});

test("a key held for the game as the box takes the focus is let go: the player stops", { skip, timeout: 60000 }, async () => {
  const { page, errors } = await openChatPage(`arena-chat-keys-${Date.now()}`, "walker");
  await page.bringToFront();
  const sent = await page.evaluate(() => window.arena.inputsSent);
  await page.keyboard.down("KeyD");
  await page.waitForFunction((n) => window.arena.inputsSent >= n, sent + 5, { timeout: 10000 });
  // Enter opens the box; D is released while the box has the focus (its keyup is the box's).
  await page.keyboard.press("Enter");
  assert.equal(await page.evaluate(() => document.activeElement?.className), "say");
  await page.keyboard.up("KeyD");
  await settledMe(page);
  const stopped = await page.evaluate(() => ({ sent: window.arena.inputsSent, frame: window.arena.frame }));
  // Thirty frames later no input went since.
  await page.waitForFunction((f) => window.arena.frame >= f + 30, stopped.frame, { timeout: 10000 });
  assert.equal(await page.evaluate(() => window.arena.inputsSent), stopped.sent, "no input after the key was let go");
  // Escape gives the keys back to the game.
  await page.keyboard.press("Escape");
  assert.notEqual(await page.evaluate(() => document.activeElement?.className), "say");
  await page.keyboard.down("KeyA");
  await page.waitForFunction((n) => window.arena.inputsSent >= n, stopped.sent + 3, { timeout: 10000 });
  await page.keyboard.up("KeyA");
  assert.deepEqual(errors, []);
  await page.close();
});

test("the panel keeps the newest 100 lines", { skip, timeout: 120000 }, async () => {
  const zone = `arena-chat-many-${Date.now()}`;
  const channel = `zone:${zone}`;
  const { page, errors } = await openChatPage(zone, "reader");
  // The back end says 105 lines (its lines are not rate limited), each kept before the next.
  const N = 105;
  for (let i = 1; i <= N; i++) {
    const r = await backend(server.base, "POST", "/chat/lines", { channel, sender: "@system", body: `notice ${i}` });
    assert.equal(r.status, 201, JSON.stringify(r.body));
    assert.equal(r.body.seq, i, JSON.stringify(r.body));
  }
  const shown = await until(page, "the newest 100", (p) => p.lines.at(-1)?.[2] === `notice ${N}`);
  assert.equal(shown.lines.length, 100);
  assert.deepEqual(
    shown.lines.map((l) => [l[0], l[1], l[2]]),
    Array.from({ length: 100 }, (_, i) => [N - 99 + i, "@system", `notice ${N - 99 + i}`]),
  );
  assert.deepEqual(errors, []);
  await page.close();
});

test("a host restarted under two open pages: both rejoin, the history shows nothing twice", { skip, timeout: 180000 }, async () => {
  const first = await startServer({ args: ["--lobby-token", LOBBY_TOKEN] });
  let second = null;
  try {
    const zone = `arena-chat-restart-${Date.now()}`;
    // Over WebSocket, whose frames the test reads: the history the host sends shows in them.
    const ann = await openChatPage(zone, "ann", first.base, "&transport=websocket");
    const bob = await openChatPage(zone, "bob", first.base, "&transport=websocket");
    await say(ann.page, "before the restart");
    await until(bob.page, "ann's line", (p) => p.lines.length === 1);
    await say(bob.page, "me too");
    await until(ann.page, "bob's line", (p) => p.lines.length === 2);

    // The same port and data: the pages reconnect by themselves and are sent the history again.
    const frames = [chatFrames(ann.page), chatFrames(bob.page)];
    await first.stop({ keepDir: true });
    await ann.page.waitForFunction(() => window.arena.state !== "open", null, { timeout: 10000 });
    second = await startServer({ dir: first.dir, port: first.port, args: ["--lobby-token", LOBBY_TOKEN] });
    for (const p of [ann.page, bob.page]) {
      await p
        .waitForFunction(() => window.arena.state === "open" && window.arena.closes.length >= 1, null, { timeout: 30000 })
        .catch(async (e) => {
          const seen = await p.evaluate(() => {
            const { state, closes, banners, chat } = window.arena;
            return JSON.stringify({ state, closes, banners, chat });
          });
          throw new Error(`${e.message}: the page shows ${seen}\n${second.log()}`);
        });
    }
    await ann.page.bringToFront();
    await say(ann.page, "after the restart");
    const want = [
      [1, ann.me, "before the restart"],
      [2, bob.me, "me too"],
    ];
    const annNow = await ann.page.evaluate(() => window.arena.chat.me.at(-1));
    const a = await until(ann.page, "the new line", (p) => p.lines.length >= 3);
    const b = await until(bob.page, "the new line", (p) => p.lines.length >= 3);
    assert.deepEqual(a.lines.map((l) => l.slice(0, 4)), [...want.map((l, i) => [...l, i === 0]), [3, annNow, "after the restart", true]]);
    assert.deepEqual(b.lines.map((l) => l.slice(0, 4)), [...want.map((l, i) => [...l, i === 1]), [3, annNow, "after the restart", false]]);
    // The host did send both lines again, to each page: the pages showed them once.
    for (const f of frames) {
      assert.deepEqual(f[0], { channel: `zone:${zone}`, history: true, lines: 2 }, `ChatLines after the restart: ${JSON.stringify(f)}`);
    }
    assert.deepEqual(ann.errors, []);
    assert.deepEqual(bob.errors, []);
    await ann.page.close();
    await bob.page.close();
  } finally {
    await second?.stop();
    await first.stop();
  }
});
