/**
 * Leaderboards for a game's page: BoardsClient against a fake host (a fetch that answers the
 * routes of docs/LEADERBOARDS.md) on a manual clock — rankings parsed into typed entries, the
 * query strings and path segments encoded, every refusal a BoardError with the host's code and
 * status (an answer that is not JSON too), arguments out of range refused before sending, and a
 * host that does not answer in time aborted and reported as `network`.
 */

import assert from "node:assert/strict";
import { describe, it } from "node:test";

import {
  BoardError,
  BoardsClient,
  boardRefusal,
  ManualScheduler,
  parseAroundRanking,
  parseRanking,
  type BoardsFetch,
} from "../src/index.js";

/** Lets every pending promise callback run. */
async function settle(): Promise<void> {
  for (let i = 0; i < 10; i++) await new Promise<void>((r) => setImmediate(r));
}

interface Call {
  url: string;
  method: string;
  /** The signal the request was sent with (the client's timeout aborts it). */
  signal?: { aborted: boolean };
}

/** An answer: status and JSON body, a body that is not JSON, a failure to answer, or an answer that never comes. */
type Answer = [number, unknown] | { status: number; notJson: true } | Error | "hang";

/** A fetch answering from `answers` in order, recording the requests. */
function fakeHost(answers: Answer[]) {
  const calls: Call[] = [];
  const f: BoardsFetch = async (url, init) => {
    const call: Call = { url, method: init.method };
    if (init.signal !== undefined) call.signal = init.signal;
    calls.push(call);
    const a = answers.shift();
    if (a === undefined) throw new Error("no more answers");
    if (a === "hang") {
      return new Promise((_, reject) => init.signal?.addEventListener("abort", () => reject(new Error("aborted"))));
    }
    if (a instanceof Error) throw a;
    if ("notJson" in a) return { status: a.status, json: async () => JSON.parse("<html>Bad Gateway</html>") as unknown };
    return { status: a[0], json: async () => a[1] };
  };
  return { f, calls };
}

const TOP = {
  board: "score",
  order: "desc",
  period: 0,
  size: 3,
  source: "store",
  entries: [
    { rank: 1, principal: "guest:ada:0a1b2c", score: 35 },
    { rank: 2, principal: "bob", score: 20 },
    { rank: 3, principal: "cy", score: 20 },
  ],
};

const error = (code: string, message = "…") => ({ error: { code, message } });

describe("BoardsClient", () => {
  it("reads a board's top entries as a typed ranking", async () => {
    const { f, calls } = fakeHost([[200, TOP]]);
    const boards = new BoardsClient("http://host:7350/", f);
    const r = await boards.top("score", { limit: 10 });
    assert.deepEqual(r, TOP);
    assert.equal(r.entries[0]?.principal, "guest:ada:0a1b2c");
    assert.equal(calls[0]?.url, "http://host:7350/boards/score?limit=10");
    assert.equal(calls[0]?.method, "GET");
  });

  it("encodes every option in the query string, and sends none it was not given", async () => {
    const { f, calls } = fakeHost([[200, TOP], [200, TOP], [200, TOP], [200, TOP]]);
    const boards = new BoardsClient("http://host", f);
    await boards.top("score.daily");
    await boards.top("score.daily", { limit: 1000, offset: 20, period: "previous", fromStore: true });
    await boards.top("score.daily", { period: 1_767_225_600_000 });
    await boards.top("score", { fromStore: false, period: "current" });
    assert.deepEqual(
      calls.map((c) => c.url),
      [
        "http://host/boards/score.daily",
        "http://host/boards/score.daily?limit=1000&offset=20&period=previous&from=store",
        "http://host/boards/score.daily?period=1767225600000",
        "http://host/boards/score?period=current",
      ],
    );
  });

  it("reads around a principal: the principal is one encoded path segment", async () => {
    const around = {
      ...TOP,
      entries: [{ rank: 12, principal: "Zoë o'Neil/2 #1?", score: 5 }],
      me: { rank: 12, principal: "Zoë o'Neil/2 #1?", score: 5 },
    };
    const { f, calls } = fakeHost([[200, around], [200, { ...TOP, entries: [], me: null }]]);
    const boards = new BoardsClient("http://host", f);
    const r = await boards.around("score", "Zoë o'Neil/2 #1?", { radius: 0, period: "current", fromStore: true });
    assert.deepEqual(r.me, { rank: 12, principal: "Zoë o'Neil/2 #1?", score: 5 });
    assert.equal(calls[0]?.url, "http://host/boards/score/around/Zo%C3%AB%20o'Neil%2F2%20%231%3F?radius=0&period=current&from=store");
    assert.equal(new URL(calls[0]?.url ?? "").pathname.split("/").length, 5, "the principal stays one segment");
    // A principal without a score: no entries, `me` null.
    const none = await boards.around("score", "guest:nobody:00");
    assert.equal(none.me, null);
    assert.deepEqual(none.entries, []);
    assert.equal(calls[1]?.url, "http://host/boards/score/around/guest%3Anobody%3A00");
  });

  it("lists the boards", async () => {
    const { f, calls } = fakeHost([
      [
        200,
        {
          boards: [
            { name: "score", order: "desc", op: "incr", period: "all", total: "score", keep_periods: 8, current_period: 0 },
            { name: "laps", order: "asc", op: "best", period: "daily", total: null, keep_periods: 2, current_period: 1_767_225_600_000 },
          ],
        },
      ],
    ]);
    const list = await new BoardsClient("http://host", f).list();
    assert.equal(calls[0]?.url, "http://host/boards");
    assert.deepEqual(list.map((b) => [b.name, b.order, b.op, b.period, b.total]), [
      ["score", "desc", "incr", "all", "score"],
      ["laps", "asc", "best", "daily", null],
    ]);
  });

  it("turns every refusal into a BoardError with the host's code and status", async () => {
    const cases: Array<[Answer, string, number]> = [
      [[404, error("no_board", 'no board "nope"')], "no_board", 404],
      [[404, error("boards_off", "leaderboards need a store")], "boards_off", 404],
      [[400, error("bad_request", "period is current, previous, or a period's start in ms")], "bad_request", 400],
      [[503, error("unavailable", "the store did not answer in 3 s")], "unavailable", 503],
      // A proxy's page, not the host's JSON: the status says what it can.
      [{ status: 503, notJson: true }, "unavailable", 503],
      [{ status: 502, notJson: true }, "unavailable", 502],
      [{ status: 404, notJson: true }, "not_found", 404],
      [{ status: 400, notJson: true }, "bad_request", 400],
      [[418, { error: "a string, not an object" }], "http_418", 418],
      // An answer of 200 that is not a ranking.
      [{ status: 200, notJson: true }, "malformed", 200],
      [[200, { ...TOP, entries: "none" }], "malformed", 200],
      [[200, { ...TOP, entries: [{ rank: 0, principal: "a", score: 1 }] }], "malformed", 200],
      [[200, { ...TOP, entries: [{ rank: 1, principal: "", score: 1 }] }], "malformed", 200],
      [[200, { ...TOP, order: "sideways" }], "malformed", 200],
      [[200, null], "malformed", 200],
      [new Error("ECONNREFUSED"), "network", 0],
    ];
    for (const [answer, code, status] of cases) {
      const { f } = fakeHost([answer]);
      await assert.rejects(new BoardsClient("http://host", f).top("score", { limit: 10 }), (e: unknown) => {
        assert.ok(e instanceof BoardError, String(e));
        assert.equal(e.code, code, JSON.stringify(answer));
        assert.equal(e.status, status, code);
        assert.equal(e.noBoard, code === "no_board" || code === "boards_off");
        return true;
      });
    }
    const refusal = boardRefusal(404, error("no_board", 'no board "nope"'));
    assert.equal(refusal.message, 'no board "nope"');
    assert.equal(refusal.name, "BoardError");
  });

  it("refuses arguments out of the host's range before sending anything", async () => {
    const { f, calls } = fakeHost([]);
    const boards = new BoardsClient("http://host", f);
    const refused = async (p: Promise<unknown>, mention: RegExp) =>
      assert.rejects(p, (e: unknown) => e instanceof BoardError && e.code === "bad_request" && e.status === 0 && mention.test(e.message));
    await refused(boards.top("score", { limit: 0 }), /limit must be an integer 1\.\.=1000, not 0/);
    await refused(boards.top("score", { limit: 1001 }), /limit/);
    await refused(boards.top("score", { limit: 2.5 }), /limit/);
    await refused(boards.top("score", { limit: Number.NaN }), /limit/);
    await refused(boards.top("score", { offset: -1 }), /offset/);
    await refused(boards.top("score", { period: -5 }), /period/);
    await refused(boards.top("score", { period: 1.5 }), /period/);
    await refused(boards.top(""), /board name/);
    await refused(boards.top("a/b"), /board name/);
    await refused(boards.top("x".repeat(65)), /board name/);
    await refused(boards.around("score", "p", { radius: -1 }), /radius must be an integer 0\.\.=500/);
    await refused(boards.around("score", "p", { radius: 501 }), /radius/);
    await refused(boards.around("score", ""), /principal must be 1\.\.=256 bytes/);
    await refused(boards.around("score", "é".repeat(129)), /principal must be 1\.\.=256 bytes, not 258/);
    await refused(boards.around("score", ".."), /URL path/);
    assert.equal(calls.length, 0);
    // The edges are fine.
    const ok = fakeHost([[200, TOP], [200, { ...TOP, me: null }]]);
    const edge = new BoardsClient("http://host", ok.f);
    await edge.top("x".repeat(64), { limit: 1000 });
    await edge.around("score", "é".repeat(128), { radius: 500 });
    assert.equal(ok.calls.length, 2);
  });

  it("aborts a read the host does not answer in time and reports `network`", async () => {
    const sched = new ManualScheduler(0);
    const { f, calls } = fakeHost(["hang", [200, TOP]]);
    const boards = new BoardsClient("http://host", f, { timeoutMs: 3000, scheduler: sched });
    const seen: { outcome: unknown } = { outcome: null };
    void boards.top("score").then(
      () => {
        seen.outcome = "answered";
      },
      (e: unknown) => {
        seen.outcome = e;
      },
    );
    await settle();
    sched.advance(2999);
    await settle();
    assert.ok(seen.outcome === null, "still waiting before the timeout");
    assert.equal(calls[0]?.signal?.aborted, false);
    sched.advance(1);
    await settle();
    const e = ((): unknown => seen.outcome)();
    assert.ok(e instanceof BoardError && e.code === "network" && e.status === 0, String(e));
    assert.match(e.message, /no answer from http:\/\/host\/boards\/score in 3000 ms/);
    assert.equal(calls[0]?.signal?.aborted, true, "the request was aborted");
    // The timer of an answered read is cleared.
    await boards.top("score");
    assert.equal(sched.pending, 0);
  });
});

describe("parseRanking", () => {
  it("keeps what a ranking carries, and around's `me`", () => {
    const r = parseRanking({ ...TOP, source: "index", extra: true });
    assert.equal(r.source, "index");
    assert.equal("extra" in r, false);
    const a = parseAroundRanking({ ...TOP, me: { rank: 2, principal: "bob", score: 20 } });
    assert.deepEqual(a.me, { rank: 2, principal: "bob", score: 20 });
    assert.equal(parseAroundRanking({ ...TOP, me: null }).me, null);
    assert.throws(() => parseAroundRanking({ ...TOP, me: 3 }), (e: unknown) => e instanceof BoardError && e.code === "malformed");
  });
});
