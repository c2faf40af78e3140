/**
 * A halted lasting world (PROTOCOL.md §5.3, version 9): a lasting world whose saves failed for
 * too long stops and kicks its players with WORLD_HALTED (INTERNAL_ERROR to a session below
 * version 9), refuses joins with it while halted, and resumes by itself from its last committed
 * save. The client retries with backoff through its entry URL, keeping its reconnect token inside
 * the grace window, and lands once the world is back.
 */

import assert from "node:assert/strict";
import { describe, it } from "node:test";

import {
  defaultReconnectPolicy,
  encodeServerMessage,
  HALT_PROTOCOL,
  KickCode,
  kickCodeName,
  kickResumesElsewhere,
  SUPPORTED_VERSIONS,
  toHex,
  TRANSFER_PROTOCOL,
  type CloseInfo,
  type ReconnectOptions,
} from "../src/index.js";
import { advance, laterHellos, retryingConnection, RETRY_ENTRY as ENTRY } from "./helpers.js";

function setup(reconnect: ReconnectOptions = {}) {
  const { sched, server, conn, tickets } = retryingConnection(reconnect);
  const closes: CloseInfo[] = [];
  conn.on("close", (c) => closes.push(c));
  const kicks: number[] = [];
  conn.on("kick", (k) => kicks.push(k.code));
  const welcomes: Array<[number, boolean]> = [];
  conn.on("welcome", (w, i) => welcomes.push([w.playerId, i.resumed]));
  return { sched, server, conn, closes, kicks, welcomes, tickets };
}

describe("WORLD_HALTED in the codec and the default policy", () => {
  it("version 9 adds code 28, which this SDK offers and retries like INTERNAL_ERROR", () => {
    assert.equal(HALT_PROTOCOL, 9);
    assert.equal(HALT_PROTOCOL, TRANSFER_PROTOCOL + 1);
    assert.equal(KickCode.WORLD_HALTED, 28);
    assert.equal(kickCodeName(28), "WORLD_HALTED");
    assert.ok(SUPPORTED_VERSIONS.includes(HALT_PROTOCOL), "offered");
    assert.equal(toHex(encodeServerMessage({ type: "kick", code: KickCode.WORLD_HALTED, reason: "" })), "841c00");
    // Not a move: the world comes back where it was, later, so the client backs off.
    assert.equal(kickResumesElsewhere(KickCode.WORLD_HALTED), false);
    for (const ticketReused of [false, true]) {
      assert.equal(defaultReconnectPolicy(KickCode.WORLD_HALTED, { ticketReused }), "retry");
      assert.equal(
        defaultReconnectPolicy(KickCode.WORLD_HALTED, { ticketReused }),
        defaultReconnectPolicy(KickCode.INTERNAL_ERROR, { ticketReused }),
      );
    }
  });
});

describe("ZoneConnection and a halted lasting world", () => {
  it("kicked with WORLD_HALTED: retries with backoff through the entry URL with its token, and resumes the same player once the world is back", async () => {
    const { sched, server, conn, closes, kicks, welcomes, tickets } = setup();
    const p = conn.connect();
    await advance(sched, 100);
    const w = await p;
    assert.ok(w.version >= HALT_PROTOCOL, "a version that knows WORLD_HALTED");
    const token = toHex(w.reconnectToken);

    server.halt();
    await advance(sched, 50);
    assert.deepEqual(kicks, [KickCode.WORLD_HALTED]);
    assert.equal(closes.length, 1);
    assert.equal(closes[0]?.code, 4028);
    assert.match(closes[0]?.reason ?? "", /^WORLD_HALTED: /);
    assert.equal(closes[0]?.willReconnect, true);
    assert.ok((closes[0]?.retryInMs ?? 0) > 0, "backoff: the first attempt does not go at once");
    assert.equal(conn.state, "reconnecting");

    // While the world is halted, every attempt is refused with WORLD_HALTED and backs off further.
    await advance(sched, 5_000);
    const refused = closes.slice(1);
    assert.ok(refused.length >= 3, `${refused.length} refused attempts`);
    for (const c of refused) {
      assert.equal(c.kick?.code, KickCode.WORLD_HALTED);
      assert.equal(c.willReconnect, true);
    }
    const delays = closes.map((c) => c.retryInMs);
    for (let i = 1; i < delays.length; i++) assert.ok(delays[i]! > delays[i - 1]!, `delays ${delays.join(", ")}`);
    assert.equal(conn.state, "reconnecting");

    server.halted = false;
    await advance(sched, 10_000);
    assert.equal(conn.state, "open");
    assert.deepEqual(welcomes, [
      [1, false],
      [1, true],
    ]);
    // Every attempt went through the entry URL with the token and the ticket of the join.
    const hellos = laterHellos(server);
    assert.equal(hellos.length, refused.length + 1);
    for (const h of hellos) assert.deepEqual(h, ["ticket-1", token, ENTRY]);
    assert.equal(tickets(), 1);
    conn.close();
  });

  it("a session of version 8 is told INTERNAL_ERROR instead, and retries the same way", async () => {
    const { sched, server, conn, closes, kicks, welcomes } = setup();
    server.maxVersion = TRANSFER_PROTOCOL;
    const p = conn.connect();
    await advance(sched, 100);
    assert.equal((await p).version, 8, "a host of version 8 picks 8 from the versions offered");
    server.halt();
    await advance(sched, 2_000);
    assert.ok(kicks.length >= 2);
    assert.ok(kicks.every((k) => k === KickCode.INTERNAL_ERROR), `kicks ${kicks.map(kickCodeName).join(", ")}`);
    assert.ok(closes.every((c) => c.willReconnect && c.retryInMs > 0));
    server.halted = false;
    await advance(sched, 10_000);
    assert.equal(conn.state, "open");
    assert.deepEqual(welcomes, [
      [1, false],
      [1, true],
    ]);
    conn.close();
  });

  it("a join refused while the world is halted is retried, and connect() resolves once it is back", async () => {
    const { sched, server, conn, closes, kicks } = setup();
    server.halted = true;
    const p = conn.connect();
    let joined = false;
    void p.then(() => (joined = true));
    await advance(sched, 3_000);
    assert.ok(!joined);
    assert.ok(kicks.length >= 2 && kicks.every((k) => k === KickCode.WORLD_HALTED), `kicks ${kicks.join(", ")}`);
    assert.ok(closes.every((c) => c.willReconnect));
    server.halted = false;
    await advance(sched, 10_000);
    const w = await p;
    assert.equal(w.playerId, 1);
    assert.equal(conn.state, "open");
    conn.close();
  });

  it("the close code 4028 stands for WORLD_HALTED when the Kick itself was lost", async () => {
    const asked: Array<number | null> = [];
    const { sched, server, conn, closes, welcomes } = setup({
      policy: (code, context) => {
        asked.push(code);
        return defaultReconnectPolicy(code, context);
      },
    });
    void conn.connect();
    await advance(sched, 100);
    server.last.socket.drop(4028);
    await advance(sched, 50);
    assert.deepEqual(asked, [KickCode.WORLD_HALTED]);
    assert.equal(closes.length, 1);
    assert.equal(closes[0]?.kick, null);
    assert.equal(closes[0]?.willReconnect, true);
    assert.ok((closes[0]?.retryInMs ?? 0) > 0);
    await advance(sched, 2_000);
    assert.equal(conn.state, "open");
    assert.deepEqual(welcomes, [
      [1, false],
      [1, true],
    ]);
    conn.close();
  });
});
