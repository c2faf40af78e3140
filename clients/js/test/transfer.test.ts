/**
 * Following a Transfer (PROTOCOL.md §5.3.2): the old world stays drawn until the new zone's
 * Welcome and BASELINE arrive, then the new world replaces it in one step; the source connection
 * is closed after the swap; the credential goes only to a WebSocket URL; failed attempts are
 * retried through the entry URL, which names the new zone from then on (CHARACTER_MOVED ends the
 * move and the session). Two fake hosts on one
 * manual clock play the source and the target.
 */

import assert from "node:assert/strict";
import { describe, it } from "node:test";

import {
  decodeServerMessage,
  encodeServerMessage,
  KickCode,
  ManualScheduler,
  Replica,
  TRANSFER_PROTOCOL,
  transferTarget,
  ZoneConnection,
  type CloseInfo,
  type ConnectionState,
  type MovedElsewhereInfo,
  type TransferError,
  type TransferInfo,
} from "../src/index.js";
import { advance, FakeFleet, FakeSocket } from "./helpers.js";

const ENTRY = "ws://entry/zones/test-zone";
const TARGET = "ws://b/zones/lobby";

/** A transfer credential as a host mints it: a compact JWS whose claims carry `exp` and `xfer`. */
function credential(lifetimeSecs = 600): string {
  const b64 = (v: unknown) => Buffer.from(JSON.stringify(v)).toString("base64url");
  const claims = {
    sub: "alice",
    zone: "lobby",
    exp: Math.floor(Date.now() / 1000) + lifetimeSecs,
    jti: "x1",
    role: "player",
    xfer: { id: "t-1", from: "test-zone", player: 1 },
  };
  return `${b64({ alg: "HS256" })}.${b64(claims)}.sig`;
}

function setup() {
  const sched = new ManualScheduler(1000);
  const fleet = new FakeFleet(sched, ["entry", "b"]);
  const source = fleet.host("entry");
  const target = fleet.host("b");
  target.zoneId = "lobby";
  // Distinct ids in each world, so a frame says which one it shows.
  target.nextPlayer = 50;
  source.entities.set(7, { kind: 0, qx: 0, qy: 0, fields: [100, "rock"] });
  target.entities.set(9, { kind: 0, qx: 40, qy: 40, fields: [100, "tree"] });
  // Any host redirects a Hello for the lobby to its owner, as a fleet does.
  source.redirect = (_h, s) => (s.url.includes("/zones/lobby") ? "ws://b/zones/lobby?hops=1" : null);
  const conn = new ZoneConnection({
    url: ENTRY,
    ticket: async () => "ticket-1",
    socket: fleet.factory,
    scheduler: sched,
    transport: "websocket",
    reconnect: { random: () => 0.5 },
  });
  const replica = new Replica(conn.clock);
  replica.attach(conn);
  const transfers: TransferInfo[] = [];
  conn.on("transfer", (t) => transfers.push(t));
  const errors: TransferError[] = [];
  conn.on("transferError", (e) => errors.push(e));
  const closes: CloseInfo[] = [];
  conn.on("close", (c) => closes.push(c));
  const states = new Set<ConnectionState>();
  // What the game draws: a frame every 16 ms, as a browser's animation frames.
  const frames: number[][] = [];
  const draw = (): void => {
    states.add(conn.state);
    if (conn.welcome !== null) frames.push([...replica.frame(sched.now()).entities.keys()].sort((a, b) => a - b));
    sched.setTimeout(draw, 16);
  };
  draw();
  return { sched, fleet, source, target, conn, replica, transfers, errors, closes, states, frames };
}

describe("Transfer codec rules", () => {
  it("version 8 adds it, and it leads only to ws:// and wss:// URLs", () => {
    assert.equal(TRANSFER_PROTOCOL, 8);
    const t = (url: string) => transferTarget({ type: "transfer", zoneId: "lobby", ticket: "c", url });
    assert.equal(t("wss://b.example/zones/lobby"), "wss://b.example/zones/lobby");
    for (const bad of ["https://b/zones/lobby", "/zones/lobby", "ws:///zones/lobby", ""]) assert.equal(t(bad), null, bad);
    const bytes = encodeServerMessage({ type: "transfer", zoneId: "lobby", ticket: "c", url: TARGET });
    assert.deepEqual(decodeServerMessage(bytes), { type: "transfer", zoneId: "lobby", ticket: "c", url: TARGET });
  });
});

describe("ZoneConnection following a Transfer", () => {
  it("draws the old world until the new BASELINE, swaps in one step and closes the source", async () => {
    const { sched, fleet, source, target, conn, transfers, errors, closes, states, frames } = setup();
    source.run();
    target.run();
    const welcomes: Array<[string, TransferInfo | null]> = [];
    conn.on("welcome", (w, info) => welcomes.push([w.zoneId, info.transfer]));
    // The swap happens inside one task: the 'welcome' and its BASELINE 'delta' with no frame between.
    let framesAtWelcome = -1;
    conn.on("welcome", (_w, info) => {
      if (info.transfer !== null) framesAtWelcome = frames.length;
    });
    let baselineFrames = -1;
    conn.on("delta", (d) => {
      if (d.baseline && framesAtWelcome >= 0 && baselineFrames < 0) baselineFrames = frames.length;
    });
    const joined = conn.connect();
    await advance(sched, 600);
    await joined;
    assert.equal(conn.welcome?.version, 11);
    const old = source.last;
    const before = frames.length;
    assert.deepEqual(frames[before - 1], [7, 101], "the source's world is drawn");

    const cred = credential();
    source.transfer(old, "lobby", cred, TARGET);
    await advance(sched, 600);

    assert.deepEqual(transfers, [{ from: "test-zone", to: "lobby", url: TARGET }]);
    assert.deepEqual(errors, []);
    assert.deepEqual(closes, [], "a transfer is no disconnect");
    assert.ok(!states.has("reconnecting"), "the HUD never shows reconnecting");
    assert.ok(states.has("transferring"));
    assert.equal(conn.state, "open");
    assert.equal(conn.welcome?.zoneId, "lobby");
    assert.deepEqual(welcomes, [
      ["test-zone", null],
      ["lobby", { from: "test-zone", to: "lobby", url: TARGET }],
    ]);
    assert.equal(baselineFrames, framesAtWelcome, "no frame between the new Welcome and its BASELINE");
    // The Hello at the target: the credential, no token, the same versions and content version.
    const hello = target.last.received[0];
    assert.ok(hello?.type === "hello");
    assert.equal(hello.ticket, cred);
    assert.equal(hello.reconnectToken.length, 0);
    assert.deepEqual(hello.versions, [6, 7, 8, 9, 10, 11]);
    assert.equal(hello.resumeFrom, null);
    assert.deepEqual(fleet.opened, [ENTRY, TARGET], "straight to the Transfer's URL");
    // Every frame shows a world: the old one until the swap, then the new one, never nothing.
    const after = frames.slice(before);
    const firstNew = after.findIndex((ids) => ids.includes(9));
    assert.ok(firstNew > 0, "the old world was drawn while the new connection was made");
    for (const [i, ids] of after.entries()) {
      assert.ok(ids.length > 0, `frame ${i} is not blank`);
      assert.deepEqual(ids, i < firstNew ? [7, 101] : [9, 150], `frame ${i}`);
    }
    // The source connection is closed by the client after the swap (a normal close).
    assert.ok(old.socket instanceof FakeSocket && old.socket.clientClosed);
    assert.equal(conn.stats.transfers, 1);
  });

  it("ignores a Transfer to a URL that is not a WebSocket URL and stays where it is", async () => {
    const { sched, fleet, source, conn, transfers, errors, closes } = setup();
    source.run();
    const joined = conn.connect();
    await advance(sched, 200);
    await joined;
    source.transfer(source.last, "lobby", credential(), "https://b/zones/lobby");
    await advance(sched, 300);
    assert.deepEqual(transfers, []);
    assert.deepEqual(
      errors.map((e) => [e.kind, e.willRetry]),
      [["url", true]],
    );
    assert.equal(conn.state, "open");
    assert.equal(conn.welcome?.zoneId, "test-zone");
    assert.deepEqual(fleet.opened, [ENTRY], "the credential went nowhere");
    assert.deepEqual(closes, []);
  });

  it("retries a refused attempt through the entry URL, which names the new zone from then on", async () => {
    const { sched, fleet, source, target, conn, transfers, errors, closes, states, frames } = setup();
    source.run();
    target.run();
    let refusals = 1;
    target.checkTicket = () => (refusals-- > 0 ? KickCode.JOIN_REFUSED : null);
    const joined = conn.connect();
    await advance(sched, 300);
    await joined;
    const before = frames.length;
    source.transfer(source.last, "lobby", credential(), TARGET);
    await advance(sched, 2000);
    assert.equal(transfers.length, 1);
    assert.deepEqual(
      errors.map((e) => [e.kind, e.willRetry, e.kick?.code]),
      [["attempt", true, KickCode.JOIN_REFUSED]],
    );
    assert.equal(conn.state, "open");
    assert.equal(conn.welcome?.zoneId, "lobby");
    assert.deepEqual(fleet.opened, [ENTRY, TARGET, "ws://entry/zones/lobby", "ws://b/zones/lobby?hops=1"]);
    assert.deepEqual(closes, []);
    assert.ok(!states.has("reconnecting"));
    for (const ids of frames.slice(before)) assert.ok(ids.length > 0, "never a blank frame");

    // Later reconnects: the entry URL with the new zone, the new zone's reconnect token.
    const token = conn.welcome?.reconnectToken;
    target.last.socket.drop(1006);
    await advance(sched, 2000);
    assert.equal(fleet.opened[4], "ws://entry/zones/lobby");
    const resumed = target.last.received[0];
    assert.ok(resumed?.type === "hello");
    assert.deepEqual(resumed.reconnectToken, token);
    assert.equal(conn.state, "open");
    assert.equal(conn.welcome?.zoneId, "lobby");
  });

  it("stops when the credential was already used and no Welcome gave a token", async () => {
    const { sched, source, target, conn, errors, closes } = setup();
    source.run();
    target.checkTicket = () => KickCode.TICKET_REPLAYED;
    const joined = conn.connect();
    await advance(sched, 200);
    await joined;
    source.transfer(source.last, "lobby", credential(), TARGET);
    await advance(sched, 500);
    assert.deepEqual(
      errors.map((e) => [e.kind, e.willRetry]),
      [["replayed", false]],
    );
    assert.equal(conn.state, "closed");
    assert.equal(closes.length, 1);
    assert.equal(closes[0]?.willReconnect, false);
    assert.equal(closes[0]?.kick?.code, KickCode.TICKET_REPLAYED);
    assert.ok(source.last.socket instanceof FakeSocket && source.last.socket.clientClosed);
  });

  it("retries an attempt refused with CHARACTER_ELSEWHERE, and stops the move and the session on CHARACTER_MOVED", async () => {
    // Held elsewhere for a moment: the move goes on and lands.
    {
      const { sched, source, target, conn, errors, closes } = setup();
      source.run();
      target.run();
      const joined = conn.connect();
      await advance(sched, 300);
      await joined;
      target.characterHeldElsewhere = true;
      source.transfer(source.last, "lobby", credential(), TARGET);
      await advance(sched, 1000);
      assert.ok(errors.length >= 1);
      assert.ok(errors.every((e) => e.kind === "attempt" && e.willRetry && e.kick?.code === KickCode.CHARACTER_ELSEWHERE));
      target.characterHeldElsewhere = false;
      await advance(sched, 10_000);
      assert.equal(conn.state, "open");
      assert.equal(conn.welcome?.zoneId, "lobby");
      assert.deepEqual(closes, []);
      conn.close();
    }
    // Taken into another game meanwhile: no further attempt, and the game is told.
    {
      const { sched, source, target, conn, closes } = setup();
      source.run();
      target.checkTicket = () => KickCode.CHARACTER_MOVED;
      const moved: MovedElsewhereInfo[] = [];
      conn.on("movedElsewhere", (m) => moved.push(m));
      const joined = conn.connect();
      await advance(sched, 200);
      await joined;
      source.transfer(source.last, "lobby", credential(), TARGET);
      await advance(sched, 10_000);
      assert.equal(moved.length, 1);
      assert.equal(moved[0]?.kick?.code, KickCode.CHARACTER_MOVED);
      assert.equal(conn.state, "closed");
      assert.deepEqual(
        closes.map((c) => [c.willReconnect, c.movedElsewhere]),
        [[false, true]],
      );
      assert.equal(target.sessions.length, 1, "one attempt at the target");
      assert.ok(source.last.socket instanceof FakeSocket && source.last.socket.clientClosed);
    }
  });

  it("gives up once the credential has expired", async () => {
    const { sched, source, target, conn, errors, closes } = setup();
    source.run();
    target.up = false;
    const joined = conn.connect();
    await advance(sched, 200);
    await joined;
    source.transfer(source.last, "lobby", credential(2), TARGET);
    await advance(sched, 5000);
    const last = errors[errors.length - 1];
    assert.equal(last?.kind, "expired");
    assert.equal(last?.willRetry, false);
    assert.ok(errors.slice(0, -1).every((e) => e.kind === "attempt" && e.willRetry));
    assert.equal(conn.state, "closed");
    assert.equal(closes.length, 1);
  });
});
