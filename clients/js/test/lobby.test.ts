/**
 * The lobby for both ends: a back end's LobbyClient (requests with the credential, seats parsed,
 * every refusal a SeatError that says whether to try again) and a game's connection to its seat
 * (the seat's ticket first, then new tickets for the same room only).
 */

import assert from "node:assert/strict";
import { describe, it } from "node:test";

import { LobbyClient, ManualScheduler, parseSeat, SeatError, seatConnection, seatTickets, type LobbyFetch, type Seat } from "../src/index.js";
import { advance, FakeServer } from "./helpers.js";

const ROOM = {
  zone_id: "arena-1f2e3d4c5b6a",
  kind: "arena",
  content_version: "",
  private: false,
  max_players: 4,
  max_observers: 2,
  players: 1,
  observers: 0,
  reserved_players: 1,
  reserved_observers: 0,
  free_players: 2,
  free_observers: 2,
  open: true,
  metadata: { map: "dunes" },
  created_at_ms: 1,
};

function seat(zone = ROOM.zone_id, ticket = "ticket-1"): Seat {
  return parseSeat({
    zone,
    kind: "arena",
    created: false,
    code: null,
    url: `ws://test/zones/${zone}`,
    host: "host-a",
    ticket,
    expires_at: 1_800_000_000,
    room: { ...ROOM, zone_id: zone },
  });
}

/** A fetch answering `status` and `body` once per call, recording the requests. */
function fakeFetch(answers: Array<[number, unknown] | Error>) {
  const calls: Array<{ url: string; method: string; headers: Record<string, string>; body?: string }> = [];
  const f: LobbyFetch = async (url, init) => {
    calls.push({ url, ...init });
    const a = answers.shift();
    if (a === undefined) throw new Error("no more answers");
    if (a instanceof Error) throw a;
    return { status: a[0], json: async () => a[1] };
  };
  return { f, calls };
}

describe("LobbyClient", () => {
  it("sends join_or_create with the credential and parses the seat", async () => {
    const answer = { ...seat(), created: true };
    const { f, calls } = fakeFetch([[201, answer]]);
    const lobby = new LobbyClient({ url: "http://host:7350/", token: "lobby-secret-token", fetch: f });
    const got = await lobby.joinOrCreate({ kind: "arena", principal: "user-4711", name: "Ada", metadata: { map: "dunes" } });
    assert.equal(got.zone, ROOM.zone_id);
    assert.equal(got.created, true);
    assert.equal(got.room.free_players, 2);
    assert.equal(calls[0]?.url, "http://host:7350/lobby/join_or_create");
    assert.equal(calls[0]?.method, "POST");
    assert.equal(calls[0]?.headers.authorization, "Bearer lobby-secret-token");
    assert.deepEqual(JSON.parse(calls[0]?.body ?? ""), { kind: "arena", principal: "user-4711", name: "Ada", metadata: { map: "dunes" } });
  });

  it("lists rooms with the filters in the query and joins by id and by code", async () => {
    const { f, calls } = fakeFetch([[200, { rooms: [ROOM] }], [200, seat()], [200, { ...seat(), code: "ABCD2345" }]]);
    const lobby = new LobbyClient({ url: "http://host", token: "t", fetch: f });
    const rooms = await lobby.rooms({ kind: "arena", min_free: 2, metadata: { map: "dunes", ranked: true } });
    assert.equal(rooms[0]?.zone_id, ROOM.zone_id);
    assert.equal(calls[0]?.url, "http://host/lobby/rooms?kind=arena&min_free=2&meta.map=dunes&meta.ranked=true");
    assert.equal(calls[0]?.body, undefined);
    await lobby.joinRoom(ROOM.zone_id, { principal: "bob", role: "observer" });
    assert.equal(calls[1]?.url, `http://host/lobby/rooms/${ROOM.zone_id}/join`);
    const byCode = await lobby.joinByCode("abcd2345", { principal: "cy" });
    assert.equal(byCode.code, "ABCD2345");
    assert.deepEqual(JSON.parse(calls[2]?.body ?? ""), { code: "abcd2345", principal: "cy" });
  });

  it("turns every refusal into a SeatError that says whether to try again", async () => {
    const cases: Array<[[number, unknown] | Error, string, boolean]> = [
      [[409, { error: { code: "room_full", message: "room r has no free seat" } }], "room_full", true],
      [[409, { error: { code: "address_full", message: "capped" } }], "address_full", true],
      [[503, { error: { code: "unavailable", message: "store down" } }], "unavailable", true],
      [[401, { error: { code: "unauthorized", message: "missing or wrong bearer token" } }], "unauthorized", false],
      [[400, { error: { code: "bad_request", message: "unknown kind" } }], "bad_request", false],
      [[404, "not json"], "unavailable", true],
      [new Error("ECONNREFUSED"), "network", true],
      [[200, { zone: "z", url: "http://not-a-socket" }], "malformed", false],
    ];
    for (const [answer, code, retryable] of cases) {
      const { f } = fakeFetch([answer]);
      const lobby = new LobbyClient({ url: "http://host", token: "t", fetch: f });
      await assert.rejects(lobby.joinOrCreate({ kind: "arena", principal: "p" }), (e: unknown) => {
        assert.ok(e instanceof SeatError, String(e));
        assert.equal(e.code, code);
        assert.equal(e.retryable, retryable, code);
        return true;
      });
    }
  });
});

describe("a game's connection to its seat", () => {
  it("joins with the seat's ticket, then asks for new tickets in the same room only", async () => {
    const asked: string[] = [];
    let next = seat(ROOM.zone_id, "ticket-2");
    const tickets = seatTickets(seat(), async (zone) => {
      asked.push(zone);
      return next;
    });
    assert.equal(await tickets(), "ticket-1");
    assert.equal(await tickets(), "ticket-2");
    assert.deepEqual(asked, [ROOM.zone_id]);
    next = seat("arena-elsewhere", "ticket-3");
    await assert.rejects(tickets(), (e: unknown) => e instanceof SeatError && e.code === "moved" && !e.retryable);
  });

  it("connects at the seat's URL with its ticket", async () => {
    const sched = new ManualScheduler(1000);
    const server = new FakeServer(sched, () => 5);
    const conn = seatConnection(seat(), async () => seat(), { socket: server.factory, scheduler: sched });
    const welcome = conn.connect();
    await advance(sched, 50);
    await welcome;
    const hello = server.sessions[0]?.received[0];
    assert.equal(hello?.type, "hello");
    assert.equal(hello?.type === "hello" ? hello.ticket : "", "ticket-1");
    assert.equal(server.sessions[0]?.url, `ws://test/zones/${ROOM.zone_id}`);
    conn.close();
  });
});
