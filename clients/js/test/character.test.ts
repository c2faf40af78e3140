/**
 * A player's character held by one zone at a time (PROTOCOL.md §5.3 "Characters", version 10).
 * When the player joins another zone (from another game or device) the zone holding the character
 * kicks its connection with CHARACTER_MOVED: the session is over, the client does not come back by
 * itself and tells the game ('movedElsewhere'). A join refused with CHARACTER_ELSEWHERE (another
 * zone holds the character and could not give it back yet) is retried with backoff like
 * INTERNAL_ERROR, keeping the ticket and reconnect-token rules, and lands once the host admits it.
 * A session below version 10 is told KICKED and INTERNAL_ERROR instead.
 */

import assert from "node:assert/strict";
import { describe, it } from "node:test";

import {
  CHARACTER_PROTOCOL,
  CharacterMovedError,
  defaultReconnectPolicy,
  encodeServerMessage,
  HALT_PROTOCOL,
  KickCode,
  kickCodeName,
  kickResumesElsewhere,
  MOVED_ELSEWHERE_MESSAGE,
  SUPPORTED_VERSIONS,
  toHex,
  type CloseInfo,
  type MovedElsewhereInfo,
  type ReconnectOptions,
} from "../src/index.js";
import { advance, laterHellos, retryingConnection, RETRY_ENTRY as ENTRY } from "./helpers.js";

function setup(reconnect: ReconnectOptions = {}) {
  const { sched, server, conn, tickets } = retryingConnection(reconnect);
  const events: string[] = [];
  const closes: CloseInfo[] = [];
  conn.on("close", (c) => {
    closes.push(c);
    events.push("close");
  });
  const kicks: number[] = [];
  conn.on("kick", (k) => {
    kicks.push(k.code);
    events.push(`kick ${kickCodeName(k.code)}`);
  });
  const moved: MovedElsewhereInfo[] = [];
  conn.on("movedElsewhere", (m) => {
    moved.push(m);
    events.push("movedElsewhere");
  });
  const welcomes: Array<[number, boolean]> = [];
  conn.on("welcome", (w, i) => welcomes.push([w.playerId, i.resumed]));
  return { sched, server, conn, events, closes, kicks, moved, welcomes, tickets };
}

describe("the character codes in the codec and the default policy", () => {
  it("version 10 adds codes 29 and 30, which this SDK offers; MOVED stops, ELSEWHERE retries like INTERNAL_ERROR", () => {
    assert.equal(CHARACTER_PROTOCOL, 10);
    assert.equal(CHARACTER_PROTOCOL, HALT_PROTOCOL + 1);
    assert.equal(KickCode.CHARACTER_MOVED, 29);
    assert.equal(KickCode.CHARACTER_ELSEWHERE, 30);
    assert.equal(kickCodeName(29), "CHARACTER_MOVED");
    assert.equal(kickCodeName(30), "CHARACTER_ELSEWHERE");
    assert.deepEqual(SUPPORTED_VERSIONS, [6, 7, 8, 9, 10, 11]);
    assert.ok(SUPPORTED_VERSIONS.includes(CHARACTER_PROTOCOL), "offered");
    assert.equal(toHex(encodeServerMessage({ type: "kick", code: KickCode.CHARACTER_MOVED, reason: "" })), "841d00");
    assert.equal(toHex(encodeServerMessage({ type: "kick", code: KickCode.CHARACTER_ELSEWHERE, reason: "" })), "841e00");
    // Neither is a move of the zone: nothing resumes at once.
    assert.equal(kickResumesElsewhere(KickCode.CHARACTER_MOVED), false);
    assert.equal(kickResumesElsewhere(KickCode.CHARACTER_ELSEWHERE), false);
    for (const ticketReused of [false, true]) {
      assert.equal(defaultReconnectPolicy(KickCode.CHARACTER_MOVED, { ticketReused }), "stop");
      assert.equal(defaultReconnectPolicy(KickCode.CHARACTER_ELSEWHERE, { ticketReused }), "retry");
      assert.equal(
        defaultReconnectPolicy(KickCode.CHARACTER_ELSEWHERE, { ticketReused }),
        defaultReconnectPolicy(KickCode.INTERNAL_ERROR, { ticketReused }),
      );
    }
  });
});

describe("ZoneConnection and a character taken into another zone", () => {
  it("kicked with CHARACTER_MOVED: stops without reconnecting and emits 'movedElsewhere' before 'close'", async () => {
    const { sched, server, conn, events, closes, kicks, moved, tickets } = setup();
    const p = conn.connect();
    await advance(sched, 100);
    assert.ok((await p).version >= CHARACTER_PROTOCOL, "a version with the character codes");

    server.moveCharacter();
    await advance(sched, 50);
    assert.deepEqual(kicks, [KickCode.CHARACTER_MOVED]);
    assert.deepEqual(events, ["kick CHARACTER_MOVED", "movedElsewhere", "close"]);
    assert.equal(moved.length, 1);
    assert.ok(moved[0]?.message.startsWith(MOVED_ELSEWHERE_MESSAGE));
    assert.match(moved[0]?.message ?? "", /dungeon-2/, "the host's reason follows");
    assert.equal(moved[0]?.kick?.code, KickCode.CHARACTER_MOVED);
    assert.equal(closes.length, 1);
    assert.equal(closes[0]?.code, 4029);
    assert.equal(closes[0]?.movedElsewhere, true);
    assert.equal(closes[0]?.reload, false);
    assert.equal(closes[0]?.willReconnect, false);
    assert.equal(closes[0]?.retryInMs, 0);
    assert.equal(closes[0]?.reason, moved[0]?.message);
    assert.equal(conn.state, "closed");

    // No attempt follows, however long the game waits.
    await advance(sched, 60_000);
    assert.equal(server.sessions.length, 1, "no other connection was opened");
    assert.equal(tickets(), 1);
    assert.equal(closes.length, 1);
  });

  it("stops even under a policy that would retry: coming back would take the character from the other game", async () => {
    const asked: Array<number | null> = [];
    const { sched, server, conn, closes, moved } = setup({
      policy: (code) => {
        asked.push(code);
        return "retry";
      },
    });
    void conn.connect();
    await advance(sched, 100);
    server.moveCharacter();
    await advance(sched, 10_000);
    assert.deepEqual(asked, [KickCode.CHARACTER_MOVED]);
    assert.equal(moved.length, 1);
    assert.deepEqual(
      closes.map((c) => [c.willReconnect, c.movedElsewhere]),
      [[false, true]],
    );
    assert.equal(server.sessions.length, 1);
    assert.equal(conn.state, "closed");
  });

  it("the close code 4029 stands for CHARACTER_MOVED when the Kick itself was lost", async () => {
    const { sched, server, conn, closes, moved } = setup();
    void conn.connect();
    await advance(sched, 100);
    server.last.socket.drop(4029);
    await advance(sched, 5_000);
    assert.equal(moved.length, 1);
    assert.equal(moved[0]?.kick, null);
    assert.equal(moved[0]?.message, MOVED_ELSEWHERE_MESSAGE);
    assert.equal(closes.length, 1);
    assert.equal(closes[0]?.kick, null);
    assert.equal(closes[0]?.movedElsewhere, true);
    assert.equal(closes[0]?.willReconnect, false);
    assert.equal(server.sessions.length, 1);
  });

  it("connect() still waiting for its Welcome rejects with a CharacterMovedError", async () => {
    const { sched, server, conn, moved } = setup();
    // The first attempt is dropped; the character moves away before the next one lands.
    server.up = false;
    const p = conn.connect();
    const outcome = p.then(
      () => null,
      (e: unknown) => e,
    );
    await advance(sched, 100);
    server.up = true;
    server.checkTicket = () => KickCode.CHARACTER_MOVED;
    await advance(sched, 5_000);
    const e = await outcome;
    assert.ok(e instanceof CharacterMovedError, `${String(e)}`);
    assert.equal(e.kick?.code, KickCode.CHARACTER_MOVED);
    assert.ok(e.message.startsWith(MOVED_ELSEWHERE_MESSAGE));
    assert.equal(moved.length, 1);
    assert.equal(conn.state, "closed");
  });
});

describe("ZoneConnection and a character another zone holds", () => {
  it("a join refused with CHARACTER_ELSEWHERE is retried with backoff, and the player gets in once the host admits it", async () => {
    const { sched, server, conn, closes, kicks, moved, welcomes } = setup();
    server.characterHeldElsewhere = true;
    const p = conn.connect();
    let joined = false;
    void p.then(() => (joined = true));
    await advance(sched, 5_000);
    assert.ok(!joined);
    assert.ok(kicks.length >= 3, `${kicks.length} refusals`);
    assert.ok(kicks.every((k) => k === KickCode.CHARACTER_ELSEWHERE), `kicks ${kicks.map(kickCodeName).join(", ")}`);
    for (const c of closes) {
      assert.equal(c.code, 4030);
      assert.equal(c.willReconnect, true);
      assert.equal(c.movedElsewhere, false);
      assert.ok(c.retryInMs > 0, "backoff: never at once");
    }
    const delays = closes.map((c) => c.retryInMs);
    for (let i = 1; i < delays.length; i++) assert.ok(delays[i]! > delays[i - 1]!, `delays ${delays.join(", ")}`);
    assert.equal(conn.state, "reconnecting");

    server.characterHeldElsewhere = false;
    await advance(sched, 10_000);
    const w = await p;
    assert.equal(w.playerId, 1);
    assert.equal(conn.state, "open");
    assert.deepEqual(welcomes, [[1, false]]);
    assert.deepEqual(moved, []);
    conn.close();
  });

  it("is retried exactly as INTERNAL_ERROR: the same tickets, tokens, URLs and delays", async () => {
    // The same join refused three times, once with CHARACTER_ELSEWHERE (version 10) and once with
    // what a version 9 session is told in its place, INTERNAL_ERROR.
    const run = async (maxVersion: number) => {
      const { sched, server, conn, closes, kicks } = setup();
      server.maxVersion = maxVersion;
      let refusals = 0;
      server.characterHeldElsewhere = true;
      conn.on("close", () => {
        if (++refusals === 3) server.characterHeldElsewhere = false;
      });
      const p = conn.connect();
      await advance(sched, 20_000);
      const w = await p;
      conn.close();
      return {
        version: w.version,
        kicks,
        hellos: laterHellos(server),
        delays: closes.map((c) => c.retryInMs),
      };
    };
    const current = await run(CHARACTER_PROTOCOL);
    const older = await run(HALT_PROTOCOL);
    assert.equal(current.version, 10);
    assert.equal(older.version, 9);
    assert.deepEqual(current.kicks, [30, 30, 30]);
    assert.deepEqual(older.kicks, [23, 23, 23]);
    assert.deepEqual(current.hellos, older.hellos);
    assert.deepEqual(current.delays, older.delays);
  });

  it("a resume refused with CHARACTER_ELSEWHERE keeps its token and resumes the same player once admitted", async () => {
    const { sched, server, conn, closes, kicks, welcomes, tickets } = setup();
    const p = conn.connect();
    await advance(sched, 100);
    const token = toHex((await p).reconnectToken);
    server.characterHeldElsewhere = true;
    server.last.socket.drop(1006);
    await advance(sched, 3_000);
    assert.ok(kicks.length >= 2 && kicks.every((k) => k === KickCode.CHARACTER_ELSEWHERE), `kicks ${kicks.join(", ")}`);
    assert.ok(closes.every((c) => c.willReconnect && !c.movedElsewhere));
    server.characterHeldElsewhere = false;
    await advance(sched, 10_000);
    assert.equal(conn.state, "open");
    assert.deepEqual(welcomes, [
      [1, false],
      [1, true],
    ]);
    // Every attempt went through the entry URL with the token and the ticket of the join.
    for (const h of laterHellos(server)) assert.deepEqual(h, ["ticket-1", token, ENTRY]);
    assert.equal(tickets(), 1);
    conn.close();
  });
});

describe("a session of version 9", () => {
  it("is told KICKED in place of CHARACTER_MOVED, and stops without the signal", async () => {
    const { sched, server, conn, closes, kicks, moved } = setup();
    server.maxVersion = HALT_PROTOCOL;
    const p = conn.connect();
    await advance(sched, 100);
    assert.equal((await p).version, 9, "a host of version 9 picks 9 from the versions offered");
    server.moveCharacter();
    await advance(sched, 10_000);
    assert.deepEqual(kicks, [KickCode.KICKED]);
    assert.deepEqual(moved, [], "the client cannot tell why");
    assert.deepEqual(
      closes.map((c) => [c.code, c.willReconnect, c.movedElsewhere]),
      [[4011, false, false]],
    );
    assert.equal(server.sessions.length, 1);
    assert.equal(conn.state, "closed");
  });

  it("is told INTERNAL_ERROR in place of CHARACTER_ELSEWHERE, retries it and gets in", async () => {
    const { sched, server, conn, closes, kicks } = setup();
    server.maxVersion = HALT_PROTOCOL;
    server.characterHeldElsewhere = true;
    const p = conn.connect();
    await advance(sched, 3_000);
    assert.ok(kicks.length >= 2 && kicks.every((k) => k === KickCode.INTERNAL_ERROR), `kicks ${kicks.join(", ")}`);
    assert.ok(closes.every((c) => c.code === 4023 && c.willReconnect && c.retryInMs > 0));
    server.characterHeldElsewhere = false;
    await advance(sched, 10_000);
    assert.equal((await p).version, 9);
    assert.equal(conn.state, "open");
    conn.close();
  });
});
