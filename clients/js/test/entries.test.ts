/**
 * Where else a client may enter (PROTOCOL.md §5.3.1, version 7): a Welcome lists the zone's
 * owner and the fleet's other live hosts, and when the entry URL cannot be reached the attempt goes
 * on at once through them, in order; the next attempt starts at the entry URL again. Fake hosts of
 * a fleet on one manual clock.
 */

import assert from "node:assert/strict";
import { describe, it } from "node:test";

import {
  decodeServerMessage,
  encodeServerMessage,
  KickCode,
  ManualScheduler,
  websocketEntries,
  ZoneConnection,
  type CloseInfo,
  type Welcome,
} from "../src/index.js";
import { advance, FakeFleet, SCHEMA } from "./helpers.js";

const url = (host: string): string => `ws://${host}/zones/test-zone`;

/** A fleet of `entry`, `two` and `three`; the zone lives on the entry host, whose Welcomes list all three. */
function setup() {
  const sched = new ManualScheduler(1000);
  const fleet = new FakeFleet(sched, ["entry", "two", "three"]);
  for (const h of fleet.hosts.values()) h.entries = [url("entry"), url("two"), url("three")];
  // Every host knows the player's token: the zone moved with its players.
  const tokens = fleet.host("entry").tokens;
  fleet.host("two").tokens = tokens;
  fleet.host("three").tokens = tokens;
  let tickets = 0;
  const conn = new ZoneConnection({
    url: url("entry"),
    ticket: async () => `ticket-${++tickets}`,
    socket: fleet.factory,
    scheduler: sched,
    // A minute of backoff: only attempts made at once land within the time advanced below.
    reconnect: { random: () => 0.5, baseDelayMs: 60_000 },
  });
  const closes: CloseInfo[] = [];
  conn.on("close", (c) => closes.push(c));
  const welcomes: Array<[number, boolean]> = [];
  conn.on("welcome", (w, i) => welcomes.push([w.playerId, i.resumed]));
  return { sched, fleet, conn, closes, welcomes };
}

describe("Welcome entries (version 7)", () => {
  it("encode after the content version and decode byte for byte; an older Welcome lists none", () => {
    const w: Welcome = {
      type: "welcome",
      version: 7,
      playerId: 1,
      zoneId: "z",
      role: "player",
      tickHz: 30,
      patchEvery: 1,
      tick: 0,
      features: 0,
      idleTimeoutMs: 1,
      handshakeTimeoutMs: 1,
      reconnectGraceMs: 1,
      reconnectToken: new Uint8Array(0),
      schema: SCHEMA,
      contentVersion: "",
      entries: [url("a"), url("b")],
    };
    const back = decodeServerMessage(encodeServerMessage(w));
    assert.ok(back.type === "welcome");
    assert.deepEqual(back.entries, [url("a"), url("b")]);
    assert.throws(() => encodeServerMessage({ ...w, version: 6 }), /entries need version 7/);
    const v6 = decodeServerMessage(encodeServerMessage({ ...w, version: 6, entries: [] }));
    assert.ok(v6.type === "welcome");
    assert.deepEqual(v6.entries, []);
    assert.throws(() => encodeServerMessage({ ...w, entries: Array.from({ length: 9 }, (_, i) => url(`h${i}`)) }));
  });

  it("are followed only when they are WebSocket URLs", () => {
    assert.deepEqual(websocketEntries(["ws://a/zones/z", "https://b/zones/z", "WSS://c/zones/z", "ws:///zones/z"]), [
      "ws://a/zones/z",
      "WSS://c/zones/z",
    ]);
  });
});

describe("ZoneConnection with an unreachable entry host", () => {
  it("after a drain's ZONE_MOVED, goes on at once to the listed hosts in order, the entry URL first", async () => {
    const { sched, fleet, conn, closes, welcomes } = setup();
    void conn.connect();
    await advance(sched, 300);
    assert.equal(conn.state, "open");
    // The entry host drains: it moves the zone to `three`, tells the player and goes away; `two`
    // is down too.
    fleet.host("entry").up = false;
    fleet.host("two").up = false;
    fleet.host("entry").kick(fleet.host("entry").last, KickCode.ZONE_MOVED, "zone moved");
    await advance(sched, 500);
    assert.equal(conn.state, "open", JSON.stringify(closes));
    assert.deepEqual(fleet.opened, [url("entry"), url("entry"), url("two"), url("three")]);
    assert.deepEqual(welcomes, [
      [1, false],
      [1, true],
    ]);
    assert.equal(conn.stats.entryFallbacks, 1);
  });

  it("after the entry host died, starts every later attempt at the entry URL again", async () => {
    const { sched, fleet, conn, welcomes } = setup();
    void conn.connect();
    await advance(sched, 300);
    // Killed: the connection just drops, and the entry host refuses connections.
    fleet.host("entry").up = false;
    fleet.host("entry").last.socket.drop(1006, "");
    await advance(sched, 60_000 + 500);
    assert.equal(conn.state, "open");
    assert.deepEqual(fleet.opened.slice(1), [url("entry"), url("two")]);
    // The entry host is back: the next attempt starts there, not at the last one that answered.
    fleet.host("entry").up = true;
    fleet.host("two").last.socket.drop(1006, "");
    await advance(sched, 60_000 + 500);
    assert.deepEqual(fleet.opened.slice(3), [url("entry")]);
    assert.deepEqual(welcomes.map(([, resumed]) => resumed), [false, true, true]);
  });

  it("takes an Entries message's list over the Welcome's", async () => {
    const { sched, fleet, conn } = setup();
    void conn.connect();
    await advance(sched, 300);
    // The fleet changed: `two` left, the entry host now names `three` alone besides itself.
    const entry = fleet.host("entry");
    entry.send(entry.last, { type: "entries", entries: [url("entry"), url("three")] });
    await advance(sched, 100);
    entry.up = false;
    entry.kick(entry.last, KickCode.ZONE_MOVED, "zone moved");
    await advance(sched, 500);
    assert.equal(conn.state, "open");
    assert.deepEqual(fleet.opened, [url("entry"), url("entry"), url("three")]);
  });

  it("tells the app the listed entries, the last Entries message's over the Welcome's", async () => {
    const { sched, fleet, conn } = setup();
    assert.deepEqual(conn.listedEntries, []);
    void conn.connect();
    await advance(sched, 300);
    assert.deepEqual(conn.listedEntries, [url("entry"), url("two"), url("three")]);
    const entry = fleet.host("entry");
    entry.send(entry.last, { type: "entries", entries: [url("entry"), url("three")] });
    await advance(sched, 100);
    assert.deepEqual(conn.listedEntries, [url("entry"), url("three")]);
  });

  it("a fresh join whose ticket() fails is told as that failure, not as the refusal before it", async () => {
    const sched = new ManualScheduler(1000);
    const fleet = new FakeFleet(sched, ["entry"]);
    let tickets = 0;
    const conn = new ZoneConnection({
      url: url("entry"),
      // The first ticket is good; the host that hands them out is gone after it.
      ticket: async () => {
        tickets += 1;
        if (tickets > 1) throw new Error("ticket host unreachable");
        return "ticket-1";
      },
      socket: fleet.factory,
      scheduler: sched,
      reconnect: { random: () => 0.5, baseDelayMs: 100, maxDelayMs: 100 },
    });
    const closes: CloseInfo[] = [];
    conn.on("close", (c) => closes.push(c));
    void conn.connect();
    await advance(sched, 300);
    assert.equal(conn.state, "open");
    // The zone lost the player (a crash): the token is refused, and the join afresh needs a ticket.
    fleet.host("entry").refuseTokens = true;
    fleet.host("entry").last.socket.drop(1006, "");
    await advance(sched, 1000);
    const refused = closes.findIndex((c) => c.kick?.code === KickCode.RECONNECT_REFUSED);
    assert.ok(refused >= 0, JSON.stringify(closes.map((c) => c.reason)));
    const after = closes.slice(refused + 1);
    assert.ok(after.length > 0);
    for (const c of after) {
      assert.equal(c.kick, null, c.reason);
      assert.match(c.reason, /ticket host unreachable/);
    }
  });

  it("without listed entries (a host before version 7) keeps to the entry URL", async () => {
    const { sched, fleet, conn } = setup();
    for (const h of fleet.hosts.values()) h.versionPick = 6;
    void conn.connect();
    await advance(sched, 300);
    fleet.host("entry").up = false;
    fleet.host("entry").kick(fleet.host("entry").last, KickCode.ZONE_MOVED, "zone moved");
    await advance(sched, 500);
    assert.deepEqual(fleet.opened, [url("entry"), url("entry")]);
    assert.equal(conn.state, "reconnecting");
  });
});
