/**
 * Content versions (PROTOCOL.md §4.1.2): the version 5 Welcome's `contentVersion` in the codec, the
 * dotted-number comparison, and the stop decision — Kick CONTENT_OUTDATED ends the connection with
 * 'reload' instead of a reconnect loop, at the first join and on a reconnect.
 */

import assert from "node:assert/strict";
import { describe, it } from "node:test";

import {
  compareContentVersions,
  CONTENT_VERSION_PROTOCOL,
  ContentOutdatedError,
  decodeServerMessage,
  DecodeError,
  defaultReconnectPolicy,
  EncodeError,
  encodeServerMessage,
  kickCodeName,
  KickCode,
  kickResumesElsewhere,
  ManualScheduler,
  RELOAD_MESSAGE,
  SUPPORTED_VERSIONS,
  toHex,
  ZoneConnection,
  type CloseInfo,
  type ReconnectOptions,
  type ReloadInfo,
  type Welcome,
} from "../src/index.js";
import { advance, FakeServer } from "./helpers.js";

function welcome(version: number, contentVersion: string): Welcome {
  return {
    type: "welcome",
    version,
    playerId: 42,
    zoneId: "arena-1",
    role: "player",
    tickHz: 30,
    patchEvery: 2,
    tick: 1000,
    features: 0,
    idleTimeoutMs: 30_000,
    handshakeTimeoutMs: 5_000,
    reconnectGraceMs: 60_000,
    reconnectToken: new Uint8Array([0xa1, 0xb2, 0xc3, 0xd4]),
    schema: { posStep: 0.5, kinds: [] },
    contentVersion,
  };
}

function decodeKind(bytes: Uint8Array): string {
  try {
    decodeServerMessage(bytes);
    return "ok";
  } catch (e) {
    return e instanceof DecodeError ? e.kind : String(e);
  }
}

describe("content versions in the codec", () => {
  it("a version 5 Welcome carries the host's content version after the schema", () => {
    assert.deepEqual(SUPPORTED_VERSIONS, [6, 7, 8, 9, 10, 11]);
    assert.equal(CONTENT_VERSION_PROTOCOL, 5);
    const v5 = encodeServerMessage(welcome(5, "1.4.0"));
    // The bytes of PROTOCOL.md §9.8 (welcome_content_version.json).
    assert.equal(toHex(v5), "81052a076172656e612d31001e02e80700b0ea018827e0d40304a1b2c3d40000003f0005312e342e30");
    const back = decodeServerMessage(v5);
    assert.equal(back.type === "welcome" ? back.contentVersion : null, "1.4.0");
    // A version 4 Welcome is the same without it, and decodes with none.
    const v4 = encodeServerMessage(welcome(4, ""));
    assert.equal(toHex(v4.slice(2)), toHex(v5.slice(2, v5.length - 6)));
    const old = decodeServerMessage(v4);
    assert.equal(old.type === "welcome" ? old.contentVersion : null, "");
    // An empty content version is still written in version 5: its length byte.
    assert.equal(encodeServerMessage(welcome(5, "")).length, v4.length + 1);
  });

  it("refuses a content version an older Welcome cannot carry, and checks its limit", () => {
    assert.throws(
      () => encodeServerMessage(welcome(4, "1.4")),
      (e: unknown) => e instanceof EncodeError && e.kind === "invalid",
    );
    assert.throws(
      () => encodeServerMessage(welcome(5, "1".repeat(65))),
      (e: unknown) => e instanceof EncodeError && e.kind === "too_long",
    );
    encodeServerMessage(welcome(5, "1".repeat(64)));
    const v5 = encodeServerMessage(welcome(5, "1.4.0"));
    const asV4 = v5.slice();
    asV4[1] = 4;
    assert.equal(decodeKind(asV4), "trailing_bytes");
    assert.equal(decodeKind(v5.slice(0, v5.length - 6)), "truncated");
  });

  it("names CONTENT_OUTDATED, which does not resume elsewhere", () => {
    assert.equal(KickCode.CONTENT_OUTDATED, 27);
    assert.equal(kickCodeName(27), "CONTENT_OUTDATED");
    assert.equal(kickCodeName(28), "WORLD_HALTED");
    assert.equal(kickCodeName(29), "CHARACTER_MOVED");
    assert.equal(kickCodeName(30), "CHARACTER_ELSEWHERE");
    assert.equal(kickCodeName(31), "BANNED");
    assert.equal(kickCodeName(32), "UNKNOWN(32)");
    assert.equal(kickResumesElsewhere(27), false);
  });

  it("compares dotted numbers component by component", () => {
    const cmp = compareContentVersions;
    assert.equal(cmp("1.4", "1.4.0"), 0);
    assert.equal(cmp("01.4", "1.4"), 0);
    assert.ok((cmp("1.4", "1.4.1") ?? 0) < 0);
    assert.ok((cmp("1.9", "1.10") ?? 0) < 0);
    assert.ok((cmp("2", "1.99.99") ?? 0) > 0);
    assert.ok((cmp("1".repeat(40), "9".repeat(39)) ?? 0) > 0, "no precision limit");
    for (const bad of ["", "v1", "1.", ".1", "1..2", "1.4-beta", " 1", "1".repeat(65)]) {
      assert.equal(cmp(bad, "1"), null, bad);
      assert.equal(cmp("1", bad), null, bad);
    }
  });
});

function setup(reconnect: ReconnectOptions = {}, contentVersion = "1.3") {
  const sched = new ManualScheduler(1000);
  const server = new FakeServer(sched, () => 20);
  let tickets = 0;
  const conn = new ZoneConnection({
    url: "ws://test/zones/test-zone",
    ticket: async () => `ticket-${++tickets}`,
    socket: server.factory,
    scheduler: sched,
    contentVersion,
    reconnect: { random: () => 0.5, graceMs: 60_000, ...reconnect },
  });
  const closes: CloseInfo[] = [];
  const reloads: ReloadInfo[] = [];
  const events: string[] = [];
  conn.on("close", (c) => {
    closes.push(c);
    events.push("close");
  });
  conn.on("reload", (r) => {
    reloads.push(r);
    events.push("reload");
  });
  conn.on("kick", (k) => events.push(`kick ${kickCodeName(k.code)}`));
  return { sched, server, conn, closes, reloads, events, tickets: () => tickets };
}

describe("the stop decision on CONTENT_OUTDATED", () => {
  it("the default policy reloads, and no policy can make it retry", () => {
    assert.equal(defaultReconnectPolicy(KickCode.CONTENT_OUTDATED), "reload");
    assert.equal(defaultReconnectPolicy(KickCode.CONTENT_OUTDATED, { ticketReused: true }), "reload");
  });

  it("at the first join: the Hello carries the client's content, connect() rejects and 'reload' says why", async () => {
    const { sched, server, conn, closes, reloads, events } = setup();
    server.minContentVersion = "1.4";
    const p = conn.connect();
    await advance(sched, 200);
    await assert.rejects(p, (e: unknown) => {
      assert.ok(e instanceof ContentOutdatedError, String(e));
      assert.equal(e.kick?.code, KickCode.CONTENT_OUTDATED);
      assert.ok(e.message.startsWith(RELOAD_MESSAGE), e.message);
      return true;
    });
    const hello = server.last.received[0];
    assert.ok(hello?.type === "hello");
    assert.equal(hello.contentVersion, "1.3");
    assert.deepEqual(events, ["kick CONTENT_OUTDATED", "reload", "close"]);
    assert.equal(reloads.length, 1);
    assert.ok(reloads[0]?.message.startsWith(RELOAD_MESSAGE));
    assert.match(reloads[0]?.message ?? "", /1\.4 or newer/, "the host's reason names what it needs");
    assert.equal(closes[0]?.reload, true);
    assert.equal(closes[0]?.willReconnect, false);
    assert.equal(closes[0]?.reason, reloads[0]?.message);
    assert.equal(conn.state, "closed");
    // No reconnect loop: time passes and no further socket is opened.
    await advance(sched, 60_000);
    assert.equal(server.sessions.length, 1);
  });

  it("on a reconnect after the game was updated: stops with 'reload', even under a policy that retries", async () => {
    const { sched, server, conn, closes, reloads, tickets } = setup({ policy: () => "retry" });
    const welcome = await (async () => {
      const p = conn.connect();
      await advance(sched, 200);
      return p;
    })();
    assert.equal(welcome.contentVersion, "1.0.0");
    assert.equal(conn.welcome?.contentVersion, "1.0.0");
    // The host now runs newer content and refuses older clients.
    server.contentVersion = "2.0";
    server.minContentVersion = "2.0";
    server.last.socket.drop();
    await advance(sched, 5_000);
    assert.equal(reloads.length, 1);
    assert.equal(conn.state, "closed");
    const last = closes[closes.length - 1];
    assert.equal(last?.reload, true);
    assert.equal(last?.willReconnect, false);
    assert.equal(closes.filter((c) => c.reload).length, 1);
    assert.ok(closes.slice(0, -1).every((c) => c.willReconnect && !c.reload), "the drop itself was a plain reconnect");
    const sessions = server.sessions.length;
    assert.equal(sessions, 2, "one resume attempt, refused");
    assert.equal(tickets(), 1, "no fresh ticket fetched for a hopeless rejoin");
    await advance(sched, 60_000);
    assert.equal(server.sessions.length, sessions);
  });

  it("a close code 4027 without its Kick still means reload", async () => {
    const { sched, server, conn, closes, reloads } = setup({}, "1.0.0");
    const p = conn.connect();
    await advance(sched, 200);
    await p;
    server.last.socket.drop(4027, "");
    await advance(sched, 60_000);
    assert.equal(reloads.length, 1);
    assert.equal(reloads[0]?.kick, null);
    assert.equal(reloads[0]?.message, RELOAD_MESSAGE);
    assert.equal(closes[0]?.reload, true);
    assert.equal(server.sessions.length, 1);
  });

  it("other refusals and drops still reconnect, with reload false", async () => {
    const { sched, server, conn, closes, reloads } = setup({}, "1.0.0");
    const p = conn.connect();
    await advance(sched, 200);
    await p;
    server.last.socket.drop();
    await advance(sched, 5_000);
    assert.equal(conn.state, "open");
    assert.equal(reloads.length, 0);
    assert.ok(closes.length >= 1 && closes.every((c) => !c.reload && c.willReconnect));
  });
});
