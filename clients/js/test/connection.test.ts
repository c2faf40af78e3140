import assert from "node:assert/strict";
import { describe, it } from "node:test";

import {
  defaultReconnectPolicy,
  KickCode,
  ManualScheduler,
  Predictor,
  ZoneConnection,
  type CloseInfo,
  type ReconnectOptions,
} from "../src/index.js";
import { advance, FakeServer, rng } from "./helpers.js";

function setup(reconnect: ReconnectOptions = {}, latency = 20) {
  const sched = new ManualScheduler(1000);
  const server = new FakeServer(sched, () => latency);
  let tickets = 0;
  const conn = new ZoneConnection({
    url: "ws://test/zones/test-zone",
    ticket: async () => `ticket-${++tickets}`,
    socket: server.factory,
    scheduler: sched,
    reconnect: { random: () => 0.5, ...reconnect },
  });
  const closes: CloseInfo[] = [];
  conn.on("close", (c) => closes.push(c));
  return { sched, server, conn, closes, tickets: () => tickets };
}

describe("ZoneConnection handshake", () => {
  it("sends Hello, accepts Welcome and the BASELINE Delta, then pings", async () => {
    const { sched, server, conn } = setup();
    const resumedFlags: boolean[] = [];
    conn.on("welcome", (_w, info) => resumedFlags.push(info.resumed));
    const deltas: number[] = [];
    conn.on("delta", (d) => deltas.push(d.tick));
    const welcome = conn.connect();
    await advance(sched, 100);
    const w = await welcome;
    assert.equal(w.playerId, 1);
    assert.equal(w.version, 11, "the newest version both speak");
    assert.equal(w.contentVersion, "1.0.0", "the host's content version, from Welcome");
    assert.equal(w.idleTimeoutMs, 30_000);
    assert.equal(conn.state, "open");
    assert.deepEqual(resumedFlags, [false]);
    const hello = server.last.received[0];
    assert.ok(hello !== undefined && hello.type === "hello");
    assert.deepEqual(hello.versions, [6, 7, 8, 9, 10, 11]);
    assert.equal(hello.ticket, "ticket-1");
    assert.equal(hello.reconnectToken.length, 0);
    assert.equal(server.last.received[1]?.type, "ping");
    assert.equal(deltas.length, 1);
    assert.equal(conn.mirror?.size, 1);
    assert.equal(conn.controlledId, 101);
    const stats = conn.stats;
    assert.equal(stats.messagesIn, 3, "Welcome, BASELINE Delta, Pong");
    assert.equal(stats.messagesOut, 2);
    assert.ok(stats.bytesIn > 20 && stats.bytesOut > 10);
    assert.equal(stats.bytesInPerSec, stats.bytesIn);
    await advance(sched, 2000);
    // Only Pongs arrived in the last second: the window forgot the Welcome and the BASELINE.
    assert.ok(conn.stats.bytesInPerSec > 0 && conn.stats.bytesInPerSec < stats.bytesIn);
    assert.ok(server.last.received.filter((m) => m.type === "ping").length >= 3);
  });

  it("stamps inputs with seq from 1 and the view tick", async () => {
    const { sched, server, conn } = setup();
    assert.equal(conn.sendInput(new Uint8Array([1])), null, "not open yet");
    void conn.connect();
    await advance(sched, 100);
    server.tick = 77;
    server.step();
    await advance(sched, 50);
    conn.setViewTickSource(() => 70.6);
    assert.equal(conn.sendInput(new Uint8Array([1])), 1);
    assert.equal(conn.sendInput(new Uint8Array([2])), 2);
    await advance(sched, 50);
    const inputs = server.last.received.filter((m) => m.type === "input");
    assert.deepEqual(
      inputs.map((m) => (m.type === "input" ? [m.seq, m.viewTick, [...m.payload]] : null)),
      [
        [1, 70, [1]],
        [2, 70, [2]],
      ],
    );
  });

  it("refuses a version it did not offer and does not reconnect", async () => {
    const { sched, server, conn, closes } = setup();
    server.versionPick = 12;
    const p = conn.connect();
    await advance(sched, 100);
    await assert.rejects(p);
    assert.equal(conn.state, "closed");
    assert.equal(closes.length, 1);
    assert.equal(closes[0]?.willReconnect, false);
    assert.match(closes[0]?.reason ?? "", /version 12/);
  });

  it("stops on Kick(VERSION_MISMATCH)", async () => {
    const { sched, server } = setup({}, 20);
    const kicks: number[] = [];
    const conn2 = new ZoneConnection({
      url: "ws://x",
      ticket: async () => "t",
      socket: server.factory,
      scheduler: sched,
      versions: [12],
    });
    const closes2: CloseInfo[] = [];
    conn2.on("kick", (k) => kicks.push(k.code));
    conn2.on("close", (c) => closes2.push(c));
    const p = conn2.connect();
    await advance(sched, 200);
    await assert.rejects(p);
    assert.deepEqual(kicks, [KickCode.VERSION_MISMATCH]);
    assert.equal(closes2.length, 1);
    assert.equal(closes2[0]?.willReconnect, false);
  });
});

describe("ZoneConnection clock sync", () => {
  it("converges to the server's tick under jittery latency", async () => {
    const sched = new ManualScheduler(5_000);
    const r = rng(42);
    // One-way latency 40 ms ± 15 ms; the server's clock is 123.456 s ahead of ours.
    const server = new FakeServer(sched, () => 40 + (r() - 0.5) * 30);
    server.offsetMs = 123_456;
    server.run();
    const conn = new ZoneConnection({
      url: "ws://t",
      ticket: async () => "t",
      socket: server.factory,
      scheduler: sched,
    });
    void conn.connect();
    await advance(sched, 10_000, 10);
    const trueTick = (sched.now() + server.offsetMs) * (server.tickHz / 1000);
    const est = conn.clock.serverTick(sched.now());
    assert.ok(conn.clock.synced);
    assert.ok(Math.abs(est - trueTick) < 1, `estimate ${est} vs true ${trueTick}`);
    assert.ok(Math.abs(conn.clock.rttMs - 80) < 15, `rtt ${conn.clock.rttMs}`);
    assert.ok(conn.clock.jitterMs > 0 && conn.clock.jitterMs < 30, `jitter ${conn.clock.jitterMs}`);
    conn.close();
  });
});

describe("ZoneConnection reconnect", () => {
  it("the default policy decides every Kick code of §5.3", () => {
    // [fetched ticket, reused ticket]: the key refusals differ by whether the ticket was used before.
    const table: Record<keyof typeof KickCode, [string, string]> = {
      BAD_TICKET: ["stop", "renew"],
      TICKET_EXPIRED: ["renew", "renew"],
      TICKET_NOT_YET_VALID: ["renew", "renew"],
      TICKET_UNKNOWN_KEY: ["stop", "renew"],
      TICKET_RETIRED_KEY: ["stop", "renew"],
      TICKET_BAD_ALGORITHM: ["stop", "stop"],
      TICKET_WRONG_ZONE: ["stop", "stop"],
      TICKET_REPLAYED: ["renew", "renew"],
      ZONE_FULL: ["retry", "retry"],
      VERSION_MISMATCH: ["stop", "stop"],
      KICKED: ["stop", "stop"],
      SHUTTING_DOWN: ["retry", "retry"],
      RATE_LIMITED: ["stop", "stop"],
      PROTOCOL_ERROR: ["stop", "stop"],
      MESSAGE_TOO_LARGE: ["stop", "stop"],
      HANDSHAKE_TIMEOUT: ["retry", "retry"],
      IDLE_TIMEOUT: ["retry", "retry"],
      SLOW_CONSUMER: ["retry", "retry"],
      JOIN_REFUSED: ["stop", "stop"],
      RECONNECT_REFUSED: ["fresh", "fresh"],
      ZONE_STOPPED: ["stop", "stop"],
      TOO_MANY_CONNECTIONS: ["retry", "retry"],
      INTERNAL_ERROR: ["retry", "retry"],
      ZONE_MOVED: ["retry", "retry"],
      HOST_FENCED: ["retry", "retry"],
      TOO_MANY_REDIRECTS: ["retry", "retry"],
      CONTENT_OUTDATED: ["reload", "reload"],
      // A lasting world halted by failing saves comes back by itself: retried like INTERNAL_ERROR.
      WORLD_HALTED: ["retry", "retry"],
      // The character plays in another game or on another device now: coming back would take it.
      CHARACTER_MOVED: ["stop", "stop"],
      // Another zone holds the character and could not give it back yet: retried like INTERNAL_ERROR.
      CHARACTER_ELSEWHERE: ["retry", "retry"],
      // Banned until a time the reason names (version 11): every join is refused until then.
      BANNED: ["stop", "stop"],
    };
    assert.deepEqual(Object.keys(table).sort(), Object.keys(KickCode).sort(), "every code has a row");
    for (const [name, [fetched, reused]] of Object.entries(table)) {
      const code = KickCode[name as keyof typeof KickCode];
      assert.equal(defaultReconnectPolicy(code, { ticketReused: false }), fetched, name);
      assert.equal(defaultReconnectPolicy(code, { ticketReused: true }), reused, `${name}, ticket reused`);
    }
    // No Kick (the socket dropped) and codes this SDK does not know: retry.
    assert.equal(defaultReconnectPolicy(null), "retry");
    assert.equal(defaultReconnectPolicy(300), "retry");
  });

  it("resumes with the reconnect token inside the grace window", async () => {
    const { sched, server, conn, closes, tickets } = setup({ graceMs: 5_000 });
    const welcomes: Array<[number, boolean]> = [];
    conn.on("welcome", (w, i) => welcomes.push([w.playerId, i.resumed]));
    void conn.connect();
    await advance(sched, 100);
    assert.equal(conn.sendInput(new Uint8Array([1])), 1);
    await advance(sched, 100);
    const firstToken = conn.welcome?.reconnectToken;
    server.last.socket.drop();
    await advance(sched, 50);
    assert.equal(closes.length, 1);
    assert.equal(closes[0]?.willReconnect, true);
    assert.equal(conn.state, "reconnecting");
    assert.equal(conn.sendInput(new Uint8Array([2])), null, "inputs are not sent while reconnecting");
    await advance(sched, 1_000);
    assert.equal(conn.state, "open");
    const hello = server.last.received[0];
    assert.ok(hello?.type === "hello");
    assert.deepEqual([...hello.reconnectToken], [...(firstToken ?? [])]);
    assert.equal(hello.ticket, "ticket-1", "the same ticket is presented with the token");
    assert.equal(tickets(), 1, "no fresh ticket was needed");
    assert.deepEqual(welcomes, [
      [1, false],
      [1, true],
    ]);
    assert.equal(conn.sendInput(new Uint8Array([3])), 2, "seq continues for a resumed player");
  });

  it("asks for a fresh ticket after the grace window", async () => {
    const { sched, server, conn, closes, tickets } = setup({ graceMs: 2_000, maxAttempts: 20 });
    const welcomes: Array<[number, boolean]> = [];
    conn.on("welcome", (w, i) => welcomes.push([w.playerId, i.resumed]));
    void conn.connect();
    await advance(sched, 100);
    server.up = false;
    server.last.socket.drop();
    await advance(sched, 3_000);
    const downAttempts = closes.length;
    assert.ok(downAttempts >= 3, `retried while down (${downAttempts} closes)`);
    assert.ok(closes.every((c) => c.willReconnect));
    server.up = true;
    await advance(sched, 10_000);
    assert.equal(conn.state, "open");
    const hello = server.last.received[0];
    assert.ok(hello?.type === "hello");
    assert.equal(hello.reconnectToken.length, 0, "no token after the grace window");
    assert.equal(hello.ticket, `ticket-${tickets()}`);
    assert.ok(tickets() >= 2);
    assert.deepEqual(welcomes[welcomes.length - 1], [2, false]);
    // Backoff grows: the gaps between attempts are not all equal.
    const delays = closes.map((c) => c.retryInMs);
    assert.ok((delays[2] ?? 0) > (delays[0] ?? 0));
  });

  it("falls back to a fresh ticket when the token is refused", async () => {
    const { sched, server, conn, closes, tickets } = setup({ graceMs: 60_000 });
    const kicks: number[] = [];
    conn.on("kick", (k) => kicks.push(k.code));
    void conn.connect();
    await advance(sched, 100);
    server.refuseTokens = true;
    server.last.socket.drop();
    await advance(sched, 5_000);
    assert.deepEqual(kicks, [KickCode.RECONNECT_REFUSED]);
    assert.equal(conn.state, "open");
    const hellos = server.sessions.map((s) => s.received[0]).filter((m) => m?.type === "hello");
    const tokens = hellos.map((h) => (h?.type === "hello" ? h.reconnectToken.length : -1));
    assert.deepEqual(tokens, [0, 16, 0]);
    assert.equal(tickets(), 2);
    assert.equal(closes.length, 2);
  });

  it("rejoins with a fresh ticket when a restarted host refuses the old ticket and token", async () => {
    const { sched, server, conn, tickets } = setup({ graceMs: 60_000 });
    const kicks: number[] = [];
    conn.on("kick", (k) => kicks.push(k.code));
    const welcomes: Array<[number, boolean]> = [];
    conn.on("welcome", (w, i) => welcomes.push([w.playerId, i.resumed]));
    void conn.connect();
    await advance(sched, 100);
    // The host restarts with a new key: every ticket issued before is a bad signature now, and the
    // reconnect tokens it held are gone.
    server.checkTicket = (t) => (t === "ticket-1" ? KickCode.BAD_TICKET : null);
    server.tokens.clear();
    server.last.socket.drop();
    await advance(sched, 5_000);
    assert.equal(conn.state, "open");
    assert.deepEqual(kicks, [KickCode.BAD_TICKET, KickCode.RECONNECT_REFUSED]);
    const hellos = server.sessions.map((s) => s.received[0]).map((h) => (h?.type === "hello" ? [h.ticket, h.reconnectToken.length > 0] : null));
    assert.deepEqual(hellos, [
      ["ticket-1", false],
      ["ticket-1", true], // resume: refused for its ticket
      ["ticket-2", true], // a new ticket, still trying to resume: the token is unknown
      ["ticket-3", false], // a fresh join
    ]);
    assert.equal(tickets(), 3);
    assert.deepEqual(welcomes[welcomes.length - 1], [2, false]);
    assert.equal(conn.sendInput(new Uint8Array([1])), 1, "a new player's inputs start at 1");
  });

  it("renews an expired ticket on a resume and keeps the same player", async () => {
    const { sched, server, conn, tickets } = setup({ graceMs: 60_000 });
    const welcomes: Array<[number, boolean]> = [];
    conn.on("welcome", (w, i) => welcomes.push([w.playerId, i.resumed]));
    void conn.connect();
    await advance(sched, 100);
    server.checkTicket = (t) => (t === "ticket-1" ? KickCode.TICKET_EXPIRED : null);
    server.last.socket.drop();
    await advance(sched, 5_000);
    assert.equal(conn.state, "open");
    assert.equal(tickets(), 2);
    assert.deepEqual(welcomes, [
      [1, false],
      [1, true],
    ]);
  });

  it("stops when a ticket fetched for this attempt is refused for its signature", async () => {
    const { sched, server, conn, closes, tickets } = setup();
    server.checkTicket = () => KickCode.BAD_TICKET;
    const p = conn.connect();
    await advance(sched, 5_000);
    await assert.rejects(p);
    assert.equal(conn.state, "closed");
    assert.equal(tickets(), 1, "another ticket from the same source would be refused the same way");
    assert.deepEqual(
      closes.map((c) => c.willReconnect),
      [false],
    );
  });

  it("gives up after the bounded number of attempts", async () => {
    const { sched, server, conn, closes } = setup({ maxAttempts: 3 });
    void conn.connect();
    await advance(sched, 100);
    server.up = false;
    server.last.socket.drop();
    await advance(sched, 60_000, 50);
    assert.equal(conn.state, "closed");
    assert.equal(closes.length, 4);
    assert.deepEqual(
      closes.map((c) => c.willReconnect),
      [true, true, true, false],
    );
    assert.equal(sched.pending, 0, "no timer left behind");
  });

  it("close() ends the session without reconnecting", async () => {
    const { sched, conn, closes } = setup();
    void conn.connect();
    await advance(sched, 100);
    conn.close();
    await advance(sched, 5_000);
    assert.equal(conn.state, "closed");
    assert.equal(closes.length, 1);
    assert.equal(closes[0]?.willReconnect, false);
  });
});

describe("ZoneConnection known-set check, resync and refusals", () => {
  it("tolerates a Pong between Welcome and the BASELINE", async () => {
    const { sched, server, conn } = setup();
    server.pongBeforeBaseline = true;
    const deltas: boolean[] = [];
    conn.on("delta", (d) => deltas.push(d.baseline));
    void conn.connect();
    await advance(sched, 100);
    assert.equal(conn.state, "open");
    assert.deepEqual(deltas, [true]);
  });

  it("a corrupted known set fails the host's check and a Resync repairs it", async () => {
    const { sched, server, conn } = setup();
    void conn.connect();
    await advance(sched, 100);
    const mirror = conn.mirror;
    assert.ok(mirror !== null);
    server.sendKnownSetCheck(server.last);
    await advance(sched, 50);
    assert.equal(conn.syncStats.resyncs, 0, "a matching check changes nothing");
    // Corrupt the client's known set: an entity the host never sent.
    mirror.apply({
      tick: mirror.tick,
      ack: 0,
      baseline: false,
      despawns: [],
      updates: [],
      spawns: [{ id: 999, kind: 0, qx: 0, qy: 0, fields: [1, "ghost"] }],
      events: null,
    });
    let baselines = 0;
    conn.on("delta", (d) => {
      if (d.baseline) baselines += 1;
    });
    server.sendKnownSetCheck(server.last);
    await advance(sched, 100);
    const resync = server.last.received.find((m) => m.type === "resync");
    assert.ok(resync !== undefined, "the client asked for a BASELINE");
    assert.equal(baselines, 1);
    assert.equal(conn.mirror?.get(999), undefined, "the BASELINE replaced the corrupted set");
    server.sendKnownSetCheck(server.last);
    await advance(sched, 50);
    assert.equal(conn.syncStats.resyncs, 1, "repaired: the next check passes");
    assert.equal(conn.state, "open", "no reconnect was needed");
  });

  it("a close code 4000 + k stands for Kick k when the Kick itself was lost", async () => {
    const { sched, server, conn, closes } = setup();
    void conn.connect();
    await advance(sched, 100);
    server.last.socket.drop(4012); // SHUTTING_DOWN: come back
    await advance(sched, 50);
    assert.equal(closes[0]?.willReconnect, true);
    await advance(sched, 2_000);
    assert.equal(conn.state, "open");
    server.last.socket.drop(4011); // KICKED: stay away
    await advance(sched, 50);
    assert.equal(closes[1]?.willReconnect, false);
    assert.equal(conn.state, "closed");
  });

  it("reports refused inputs and an attached predictor drops them", async () => {
    const { sched, server, conn } = setup();
    const predictor = new Predictor<{ x: number; y: number }, number>({
      step: (s, dx) => ({ x: s.x + dx, y: s.y }),
      position: (s) => s,
    });
    predictor.attach(conn, (e) => ({ x: e.qx, y: e.qy }));
    void conn.connect();
    await advance(sched, 100);
    const encode = (dx: number) => new Uint8Array([dx]);
    predictor.send(conn, 1, encode);
    predictor.send(conn, 5, encode);
    predictor.send(conn, 1, encode);
    assert.deepEqual(predictor.pendingSeqs, [1, 2, 3]);
    const refused: number[] = [];
    conn.on("inputRefused", (r) => refused.push(r.seq));
    server.send(server.last, { type: "input_refused", seq: 2, code: 7 });
    await advance(sched, 50);
    assert.deepEqual(refused, [2]);
    assert.deepEqual(predictor.pendingSeqs, [1, 3]);
    assert.equal(conn.syncStats.inputsRefused, 1);
  });
});
