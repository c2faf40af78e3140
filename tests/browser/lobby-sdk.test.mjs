// The TypeScript SDK's lobby against the real `zonekeep serve --dev --lobby-token` binary over real
// sockets (Node + ws): a back end's LobbyClient seats three players (two rooms of two), the games
// join with seatConnection and are welcomed into the zones the seats name, a refusal comes back as
// a SeatError that says whether to try again, and a private room is joined by its code. Uses the
// SDK build the page ships (examples/arena/web/dist/sdk). No browser needed.
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { pathToFileURL } from "node:url";

import WebSocket from "ws";

import { sdkPath, startServer } from "./harness.mjs";

const sdk = await import(pathToFileURL(sdkPath).href);

const LOBBY_TOKEN = "lobby-sdk-test-token-0123456789";
let server;

before(async () => {
  server = await startServer({ args: ["--lobby-token", LOBBY_TOKEN] });
});

after(async () => {
  await server?.stop();
});

function lobby(token = LOBBY_TOKEN) {
  return new sdk.LobbyClient({ url: server.base, token });
}

/** Connects a game to `seat` and resolves with its Welcome's player id once welcomed. */
async function play(seat) {
  const conn = sdk.seatConnection(seat, (zone) => lobby().joinRoom(zone, { principal: "unused" }), {
    socket: (url) => new WebSocket(url),
    transport: "websocket",
  });
  const welcome = await conn.connect();
  return { conn, welcome };
}

test("a back end seats players with LobbyClient and the games join where their seats say", { timeout: 60000 }, async () => {
  const backend = lobby();
  const ask = (principal) => backend.joinOrCreate({ kind: "arena", principal, name: principal, max_players: 2, metadata: { map: "sdk" } });
  const ann = await ask("ann");
  const bob = await ask("bob");
  const cy = await ask("cy");
  assert.equal(ann.created, true);
  assert.equal(bob.zone, ann.zone, "the second player fills the first room");
  assert.equal(bob.room.free_players, 0);
  assert.notEqual(cy.zone, ann.zone, "a full room makes a new one");
  assert.ok(ann.url.endsWith(`/zones/${ann.zone}`), ann.url);

  const games = [];
  for (const seat of [ann, bob, cy]) games.push(await play(seat));
  assert.notEqual(games[0].welcome.playerId, games[1].welcome.playerId);

  // Listed: the room with a free seat; the full one is not offered.
  const rooms = await backend.rooms({ kind: "arena", metadata: { map: "sdk" } });
  assert.deepEqual(rooms.map((r) => r.zone_id), [cy.zone]);

  // Refusals: a full room may free up (retryable); a wrong credential will not.
  await assert.rejects(backend.joinRoom(ann.zone, { principal: "dee" }), (e) => e instanceof sdk.SeatError && e.code === "room_full" && e.retryable);
  await assert.rejects(lobby("not-the-lobby-token-at-all").rooms({ kind: "arena" }), (e) => e instanceof sdk.SeatError && e.code === "unauthorized" && !e.retryable);

  // A private room, joined by its code.
  const host = await backend.createRoom({ kind: "arena", private: true }, { principal: "host-player" });
  assert.equal(typeof host.code, "string");
  const friend = await backend.joinByCode(host.code.toLowerCase(), { principal: "friend" });
  assert.equal(friend.zone, host.zone);
  const game = await play(friend);
  assert.ok(game.welcome.playerId > 0);

  for (const g of [...games, game]) g.conn.close();
});
