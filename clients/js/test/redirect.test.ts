/**
 * The connection in a fleet (PROTOCOL.md §5.3.1): Redirects followed with the same Hello, at most
 * three per attempt, only to WebSocket URLs; every resume through the entry URL, at once after
 * ZONE_MOVED or HOST_FENCED. Several fake hosts on one manual clock play the fleet.
 */

import assert from "node:assert/strict";
import { describe, it } from "node:test";

import {
  encodeClientMessage,
  KickCode,
  kickCodeName,
  kickResumesElsewhere,
  ManualScheduler,
  RedirectError,
  redirectTarget,
  toHex,
  ZoneConnection,
  type CloseInfo,
  type ClientMessage,
  type ReconnectOptions,
} from "../src/index.js";
import { advance, FakeFleet, type FakeServer } from "./helpers.js";

const ENTRY = "ws://entry/zones/test-zone";

function setup(names: string[], reconnect: ReconnectOptions = {}) {
  const sched = new ManualScheduler(1000);
  const fleet = new FakeFleet(sched, ["entry", ...names]);
  let tickets = 0;
  const conn = new ZoneConnection({
    url: ENTRY,
    ticket: async () => `ticket-${++tickets}`,
    socket: fleet.factory,
    scheduler: sched,
    reconnect: { random: () => 0.5, ...reconnect },
  });
  const closes: CloseInfo[] = [];
  conn.on("close", (c) => closes.push(c));
  const redirected: string[] = [];
  conn.on("redirect", (r) => redirected.push(r.url));
  const kicks: number[] = [];
  conn.on("kick", (k) => kicks.push(k.code));
  const welcomes: Array<[number, boolean]> = [];
  conn.on("welcome", (w, i) => welcomes.push([w.playerId, i.resumed]));
  return { sched, fleet, conn, closes, redirected, kicks, welcomes, tickets: () => tickets };
}

/** The Hello each session of `host` received, as hex (the exact bytes). */
function hellos(host: FakeServer): string[] {
  return host.sessions
    .map((s) => s.received[0])
    .filter((m): m is ClientMessage => m?.type === "hello")
    .map((m) => toHex(encodeClientMessage(m)));
}

function firstHello(host: FakeServer) {
  const m = host.last.received[0];
  assert.ok(m?.type === "hello");
  return m;
}

describe("Redirect codec rules", () => {
  it("leads only to ws:// and wss:// URLs", () => {
    const r = (url: string) => redirectTarget({ type: "redirect", url, zoneId: "z" });
    for (const ok of ["ws://b:7350/zones/z?hops=1", "wss://b.example/zones/z", "WSS://B.example/zones/z"]) {
      assert.equal(r(ok), ok);
    }
    for (const bad of ["http://b/zones/z", "https://b/zones/z", "/zones/z", "b:7350/zones/z", "ws:/b/zones/z", "ws://", "ws:///zones/z", "javascript://b", ""]) {
      assert.equal(r(bad), null, bad);
    }
  });

  it("names the version 3 Kick codes and knows which resume elsewhere", () => {
    assert.equal(kickCodeName(24), "ZONE_MOVED");
    assert.equal(kickCodeName(25), "HOST_FENCED");
    assert.equal(kickCodeName(26), "TOO_MANY_REDIRECTS");
    const elsewhere = Array.from({ length: 31 }, (_, c) => c).filter(kickResumesElsewhere);
    assert.deepEqual(elsewhere, [KickCode.ZONE_MOVED, KickCode.HOST_FENCED]);
  });
});

describe("ZoneConnection redirects", () => {
  it("follows two Redirects to the owner, which gets the same Hello", async () => {
    const { sched, fleet, conn, closes, redirected } = setup(["b", "owner"]);
    fleet.host("entry").redirect = () => "ws://b/zones/test-zone?hops=1";
    fleet.host("b").redirect = () => "ws://owner/zones/test-zone?hops=2";
    const welcome = conn.connect();
    await advance(sched, 300);
    assert.equal((await welcome).playerId, 1);
    assert.equal(conn.state, "open");
    assert.deepEqual(fleet.opened, [ENTRY, "ws://b/zones/test-zone?hops=1", "ws://owner/zones/test-zone?hops=2"]);
    const sent = [...hellos(fleet.host("entry")), ...hellos(fleet.host("b")), ...hellos(fleet.host("owner"))];
    assert.equal(sent.length, 3);
    assert.ok(sent.every((h) => h === sent[0]), "byte for byte the same Hello at every hop");
    assert.equal(firstHello(fleet.host("owner")).ticket, "ticket-1");
    assert.deepEqual(redirected, ["ws://b/zones/test-zone?hops=1", "ws://owner/zones/test-zone?hops=2"]);
    assert.equal(closes.length, 0, "a redirect is not a close");
    const s = conn.stats;
    assert.deepEqual([s.redirects, s.freshJoins, s.resumes], [2, 1, 0]);
  });

  it("does not follow a fourth Redirect", async () => {
    const { sched, fleet, conn, closes } = setup([], { maxAttempts: 0 });
    const entry = fleet.host("entry");
    entry.redirect = () => `ws://entry/zones/test-zone?hops=${entry.sessions.length}`;
    const p = conn.connect();
    await advance(sched, 500);
    await assert.rejects(p);
    assert.equal(fleet.opened.length, 4, "the entry and three hops");
    assert.equal(closes.length, 1);
    const err = closes[0]?.error;
    assert.ok(err instanceof RedirectError && err.kind === "too_many", String(err));
    assert.equal(conn.stats.redirects, 3);
  });

  it("refuses a Redirect to another scheme and stops", async () => {
    const { sched, fleet, conn, closes } = setup([]);
    fleet.host("entry").redirect = () => "https://elsewhere/zones/test-zone";
    const p = conn.connect();
    await advance(sched, 500);
    await assert.rejects(p);
    assert.deepEqual(fleet.opened, [ENTRY], "nothing opened at the refused URL");
    const err = closes[0]?.error;
    assert.ok(err instanceof RedirectError && err.kind === "scheme", String(err));
    assert.equal(err.url, "https://elsewhere/zones/test-zone");
    assert.equal(closes[0]?.willReconnect, false);
    assert.equal(conn.state, "closed");
  });
});

describe("ZoneConnection across zone moves", () => {
  it("resumes at once through the entry URL with the token after ZONE_MOVED", async () => {
    // A minute of backoff: only an attempt made at once is back within the time advanced below.
    const { sched, fleet, conn, closes, kicks, welcomes, tickets } = setup(["one", "two"], { baseDelayMs: 60_000 });
    let owner = "one";
    fleet.host("entry").redirect = () => `ws://${owner}/zones/test-zone?hops=1`;
    // The new owner took the zone with its players and their tokens.
    fleet.host("two").tokens = fleet.host("one").tokens;
    void conn.connect();
    await advance(sched, 300);
    const token = conn.welcome?.reconnectToken;
    assert.equal(conn.sendInput(new Uint8Array([1])), 1);

    owner = "two";
    fleet.host("one").kick(fleet.host("one").last, KickCode.ZONE_MOVED, "zone moved");
    await advance(sched, 500);
    assert.deepEqual(kicks, [KickCode.ZONE_MOVED]);
    assert.equal(closes.length, 0, "a move that lands at once is no disconnect to the game");
    assert.equal(conn.state, "open");
    assert.deepEqual(fleet.opened, [
      ENTRY,
      "ws://one/zones/test-zone?hops=1",
      ENTRY, // not the old owner's URL: the owner changed
      "ws://two/zones/test-zone?hops=1",
    ]);
    const resume = firstHello(fleet.host("two"));
    assert.deepEqual([...resume.reconnectToken], [...(token ?? [])]);
    assert.equal(resume.ticket, "ticket-1", "the same ticket resumes");
    assert.equal(hellos(fleet.host("entry"))[1], hellos(fleet.host("two"))[0]);
    assert.equal(tickets(), 1);
    assert.deepEqual(welcomes, [
      [1, false],
      [1, true],
    ]);
    assert.equal(conn.sendInput(new Uint8Array([2])), 2, "the same player goes on");
    const s = conn.stats;
    assert.deepEqual([s.redirects, s.resumes, s.freshJoins], [2, 1, 1]);
  });

  it("joins fresh, and counts it, when the new owner does not know the token after HOST_FENCED", async () => {
    const { sched, fleet, conn, closes, kicks, welcomes, tickets } = setup(["one", "two"]);
    let owner = "one";
    fleet.host("entry").redirect = () => `ws://${owner}/zones/test-zone?hops=1`;
    void conn.connect();
    await advance(sched, 300);

    owner = "two";
    fleet.host("one").kick(fleet.host("one").last, KickCode.HOST_FENCED, "lease lost");
    await advance(sched, 3_000);
    assert.equal(conn.state, "open");
    assert.deepEqual(kicks, [KickCode.HOST_FENCED, KickCode.RECONNECT_REFUSED]);
    // The move did not land on its first attempt: the game is told of the lost session after all,
    // the move's close first.
    assert.deepEqual(
      closes.map((c) => c.kick?.code),
      [KickCode.HOST_FENCED, KickCode.RECONNECT_REFUSED],
    );
    assert.deepEqual(fleet.opened, [
      ENTRY,
      "ws://one/zones/test-zone?hops=1",
      ENTRY,
      "ws://two/zones/test-zone?hops=1", // the resume: token unknown here
      ENTRY,
      "ws://two/zones/test-zone?hops=1", // the fresh join
    ]);
    const fresh = firstHello(fleet.host("two"));
    assert.equal(fresh.reconnectToken.length, 0);
    assert.equal(fresh.ticket, "ticket-2");
    assert.equal(tickets(), 2);
    assert.deepEqual(welcomes[welcomes.length - 1], [1, false]);
    assert.equal(conn.sendInput(new Uint8Array([1])), 1, "a new player's inputs start at 1");
    const s = conn.stats;
    assert.deepEqual([s.redirects, s.resumes, s.freshJoins], [3, 0, 2]);
  });
});
