/**
 * Resuming from the mirror (PROTOCOL.md §4.1.1): a version 4 (or later) resume says what the mirror
 * holds and keeps it for an ordinary Delta; a host that no longer holds that state sends a
 * BASELINE; a version 3 session never sends the field; a host refusing it as a protocol error gets
 * the Hello again without it.
 */

import assert from "node:assert/strict";
import { describe, it } from "node:test";

import { knownSetHash, ManualScheduler, ZoneConnection, type Hello } from "../src/index.js";
import { advance, FakeServer } from "./helpers.js";

function setup(versions?: number[]) {
  const sched = new ManualScheduler(1000);
  const server = new FakeServer(sched, () => 20);
  const conn = new ZoneConnection({
    url: "ws://test/zones/test-zone",
    ticket: async () => "ticket-1",
    socket: server.factory,
    scheduler: sched,
    versions,
    reconnect: { random: () => 0.5, graceMs: 5_000 },
  });
  const baselines: boolean[] = [];
  conn.on("delta", (d) => baselines.push(d.baseline));
  return { sched, server, conn, baselines };
}

function lastHello(server: FakeServer): Hello {
  const h = server.last.received[0];
  assert.ok(h?.type === "hello");
  return h;
}

describe("resume from the mirror", () => {
  it("sends what the mirror holds and keeps it for an ordinary Delta", async () => {
    const { sched, server, conn, baselines } = setup();
    server.tick = 10;
    void conn.connect();
    await advance(sched, 100);
    const held = conn.mirror?.resumeFrom();
    assert.ok(held != null);
    assert.deepEqual(held, { tick: server.tick, count: 1, hash: knownSetHash([101]) });
    server.last.socket.drop();
    await advance(sched, 50);
    // While the client is away another entity appears and its own moves.
    server.entities.set(500, { kind: 0, qx: 7, qy: 7, fields: [1, "npc"] });
    const own = server.entities.get(101);
    assert.ok(own !== undefined);
    own.qx += 3;
    await advance(sched, 1_000);
    assert.equal(conn.state, "open");
    assert.deepEqual(lastHello(server).resumeFrom, held);
    assert.deepEqual(server.resumes, ["delta"]);
    assert.deepEqual(baselines, [true, false], "the first Delta after the resume continues");
    assert.equal(conn.mirror?.size, 2);
    assert.equal(conn.mirror?.get(101)?.qx, 3);
    assert.equal(conn.syncStats.resyncs, 0);

    // The host no longer holds what the client says (it moved on): a BASELINE replaces the mirror.
    server.last.lastDeltaTick = -1;
    server.last.socket.drop();
    await advance(sched, 1_000);
    assert.deepEqual(server.resumes, ["delta", "baseline"]);
    assert.deepEqual(baselines, [true, false, true]);
    assert.equal(conn.mirror?.size, 2);
    conn.close();
  });

  it("a version 3 session never sends it", async () => {
    const { sched, server, conn, baselines } = setup([3, 4]);
    server.tick = 10;
    server.versionPick = 3;
    void conn.connect();
    await advance(sched, 100);
    assert.equal(conn.welcome?.version, 3);
    server.last.socket.drop();
    await advance(sched, 1_000);
    const hello = lastHello(server);
    assert.ok(hello.reconnectToken.length > 0);
    assert.equal(hello.resumeFrom ?? null, null);
    assert.deepEqual(baselines, [true, true]);
    conn.close();
  });

  it("a host refusing it as a protocol error gets the Hello again without it", async () => {
    const { sched, server, conn, baselines } = setup([3, 4]);
    server.tick = 10;
    void conn.connect();
    await advance(sched, 100);
    assert.equal(conn.welcome?.version, 4);
    // The zone's next host speaks only version 3 (a fleet part way through an upgrade).
    server.versionPick = 3;
    server.last.socket.drop();
    await advance(sched, 5_000);
    assert.equal(conn.state, "open");
    const hellos = server.sessions.map((s) => s.received[0]).filter((m) => m?.type === "hello");
    assert.ok(hellos.length >= 3);
    const [, refused, accepted] = hellos;
    assert.ok(refused?.type === "hello" && refused.resumeFrom != null);
    assert.ok(accepted?.type === "hello" && accepted.resumeFrom == null);
    assert.ok(accepted.reconnectToken.length > 0, "still resuming");
    assert.equal(conn.welcome?.version, 3);
    assert.deepEqual(baselines, [true, true]);
    conn.close();
  });
});

describe("inputs across a resume", () => {
  it("sends again, with their numbers, the inputs no Delta acknowledged", async () => {
    const { sched, server, conn } = setup();
    server.tick = 10;
    void conn.connect();
    await advance(sched, 100);
    for (let i = 0; i < 3; i++) conn.sendInput(new Uint8Array([1, 0]));
    await advance(sched, 100);
    server.tick += 1;
    server.sendDelta(server.last, false);
    await advance(sched, 100);
    assert.equal(conn.ack, 3);
    // Two more leave, and the socket goes before they arrive (or before the zone consumed them:
    // a zone handed over in a drain keeps only the inputs it consumed).
    assert.equal(conn.sendInput(new Uint8Array([1, 0])), 4);
    assert.equal(conn.sendInput(new Uint8Array([1, 0])), 5);
    const first = server.last;
    first.socket.drop();
    await advance(sched, 1_000);
    assert.equal(conn.state, "open");
    assert.notEqual(server.last, first, "a new socket");
    const again = server.last.received.flatMap((m) => (m.type === "input" ? [m.seq] : []));
    assert.deepEqual(again, [4, 5], "the unacknowledged inputs, in order, and only those");
    assert.equal(conn.sendInput(new Uint8Array([1, 0])), 6, "the sequence carries on");
    conn.close();
  });

  it("a new player forgets the old player's unacknowledged inputs", async () => {
    const { sched, server, conn } = setup();
    server.tick = 10;
    void conn.connect();
    await advance(sched, 100);
    conn.sendInput(new Uint8Array([1, 0]));
    server.refuseTokens = true;
    server.last.socket.drop();
    await advance(sched, 1_000);
    assert.equal(conn.state, "open");
    const again = server.last.received.filter((m) => m.type === "input");
    assert.deepEqual(again, []);
    assert.equal(conn.sendInput(new Uint8Array([1, 0])), 1);
    conn.close();
  });
});
