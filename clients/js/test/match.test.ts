/**
 * The matchmaker for a game: matchmake() against a fake matchmaker (a fetch that answers the
 * routes of docs/MATCHMAKING.md) on a manual clock — probes measured per region, queued, assigned,
 * one connect; the same assignment twice or an older answer late never connects twice nor goes
 * back; refusals and ended searches as MatchErrors that say whether to search again; a cancel
 * deletes the search.
 */

import assert from "node:assert/strict";
import { describe, it } from "node:test";

import {
  ManualScheduler,
  matchConnection,
  matchTickets,
  matchmake,
  MatchError,
  MatchmakerClient,
  matchRefusal,
  parseSearch,
  SearchTracker,
  type Assignment,
  type MatchFetch,
  type ProbeResult,
  type Search,
  type SearchState,
} from "../src/index.js";
import { advance, FakeServer } from "./helpers.js";

/** Lets every pending promise callback and I/O callback run. */
async function settle(): Promise<void> {
  for (let i = 0; i < 10; i++) await new Promise<void>((r) => setImmediate(r));
}

/** Advances the manual clock by `ms` in steps, settling in between. */
async function tick(sched: ManualScheduler, ms: number, stepMs = 250): Promise<void> {
  for (let t = 0; t < ms; t += stepMs) {
    await settle();
    sched.advance(Math.min(stepMs, ms - t));
  }
  await settle();
}

interface Call {
  url: URL;
  method: string;
  headers?: Record<string, string>;
  body?: string;
  /** The init as passed, for checking what a probe leg carries. */
  init: Record<string, unknown>;
}

/** An answer: status and JSON body, a body that is not JSON, or a failure to answer. */
type Answer = [number, unknown] | { status: number; notJson: true } | Error;

function deferred<T>(): { promise: Promise<T>; resolve: (v: T) => void } {
  let resolve: (v: T) => void = () => {};
  const promise = new Promise<T>((r) => {
    resolve = r;
  });
  return { promise, resolve };
}

const ASSIGNMENT = {
  match: "m-1",
  zone: "duel-1a2b",
  kind: "arena",
  url: "ws://eu.test/zones/duel-1a2b",
  host: "host-eu-1",
  ticket: "zone-ticket-1",
  expires_at: 1_790_000_000,
  players: ["alice", "bob"],
};

const RTT: Record<string, number> = { eu: 12, us: 81 };

function search(state: SearchState, extra: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    search: "s-1",
    queue: "duel",
    state,
    reason: null,
    rtt_ms: state === "probing" ? {} : RTT,
    region: state === "probing" || state === "queued" ? null : "eu",
    heartbeat_secs: 10,
    ...(state === "assigned" || state === "connected" ? { assignment: ASSIGNMENT } : {}),
    ...extra,
  };
}

/**
 * A matchmaker behind a fetch: the create, probe, queue, heartbeat and delete routes answer as the
 * doc says unless a test sets them; reads answer from `reads` in order, each a value or a promise
 * the test resolves, and once those are used up they wait (a long poll with nothing new).
 */
class FakeMatchmaker {
  readonly calls: Call[] = [];
  create: (c: Call) => Answer = () => [
    201,
    {
      ...search("probing"),
      token: "search-token",
      probes: [
        { region: "eu", url: "http://eu.test", challenge: "ch-eu" },
        { region: "us", url: "http://us.test/", challenge: "ch-us" },
      ],
    },
  ];
  probe: (c: Call, region: string) => Answer = (c, region) => {
    const echo = c.url.searchParams.get("echo");
    const next: Record<string, string> = { "": "e1", e1: "e2", e2: "e3" };
    if (echo === "e3") return [200, { rtt_ms: RTT[region] }];
    const e = next[echo ?? ""];
    if (e === undefined) return [410, { error: "challenge_spent", message: "spent" }];
    return [200, { echo: e, rounds_left: 3 - Number(echo?.slice(1) ?? 0) }];
  };
  queue: (c: Call) => Answer = () => [200, search("queued")];
  heartbeat: (c: Call) => Answer | Promise<Answer> = () => [200, search("queued")];
  reads: Array<Answer | Promise<Answer>> = [];
  cancel: (c: Call) => Answer = () => [200, search("cancelled")];

  readonly fetch: MatchFetch = async (url, init) => {
    const call: Call = { url: new URL(url), method: init.method, init: init as Record<string, unknown> };
    if (init.headers !== undefined) call.headers = init.headers;
    if (init.body !== undefined) call.body = init.body;
    this.calls.push(call);
    const answer = await this.route(call, init.signal);
    if (answer instanceof Error) throw answer;
    if ("notJson" in answer) {
      return { status: answer.status, json: async () => JSON.parse("<html>not json</html>") as unknown };
    }
    return { status: answer[0], json: async () => answer[1] };
  };

  private route(c: Call, signal: { aborted: boolean; addEventListener(t: "abort", f: () => void): void } | undefined): Answer | Promise<Answer> {
    const p = c.url.pathname;
    if (p === "/match/probe") return this.probe(c, c.url.hostname.split(".")[0] ?? "");
    if (c.url.host !== "mm.test") return new Error(`unexpected host ${c.url.host}`);
    if (p === "/match/searches" && c.method === "POST") return this.create(c);
    if (p === "/match/searches/s-1/queue") return this.queue(c);
    if (p === "/match/searches/s-1/heartbeat") return this.heartbeat(c);
    if (p === "/match/searches/s-1" && c.method === "DELETE") return this.cancel(c);
    if (p === "/match/searches/s-1" && c.method === "GET") {
      const next = this.reads.shift();
      if (next !== undefined) return next;
      // Nothing new: the long poll waits (until the request is aborted).
      return new Promise<Answer>((resolve) => signal?.addEventListener("abort", () => resolve(new Error("aborted"))));
    }
    return [404, { error: "no_route", message: p }];
  }

  /** The calls to a route, by method and path. */
  to(method: string, path: string): Call[] {
    return this.calls.filter((c) => c.method === method && c.url.pathname === path);
  }
}

/** A `connect` that records what it was given. */
function connector(): { connect: (a: Assignment, s: Search) => { assignment: Assignment }; made: Assignment[] } {
  const made: Assignment[] = [];
  return {
    made,
    connect: (a) => {
      made.push(a);
      return { assignment: a };
    },
  };
}

function start(mm: FakeMatchmaker, extra: Partial<Parameters<typeof matchmake>[0]> = {}) {
  const sched = new ManualScheduler(1000);
  const { connect, made } = connector();
  const states: SearchState[] = [];
  const probes: ProbeResult[] = [];
  const run = matchmake({
    matchmaker: "http://mm.test/",
    ticket: "match-ticket",
    queue: "duel",
    fetch: mm.fetch,
    scheduler: sched,
    connect,
    onState: (s) => states.push(s.state),
    onProbe: (p) => probes.push(p),
    ...extra,
  } as Parameters<typeof matchmake<{ assignment: Assignment }>>[0]);
  // Observed by the tests that expect a rejection; never unhandled.
  run.catch(() => {});
  return { sched, run, made, states, probes };
}

describe("matchmake", () => {
  it("creates, measures every region, queues, and connects once to the assignment", async () => {
    const mm = new FakeMatchmaker();
    mm.reads = [[200, search("proposed")], [200, search("allocated")], [200, search("assigned")]];
    const { run, made, states, probes } = start(mm);
    const matched = await run;

    const create = mm.to("POST", "/match/searches");
    assert.equal(create.length, 1);
    assert.equal(create[0]?.url.href, "http://mm.test/match/searches");
    assert.equal(create[0]?.headers?.authorization, "Bearer match-ticket");
    assert.deepEqual(JSON.parse(create[0]?.body ?? ""), { queue: "duel", protocol_version: 11 });

    // Both regions, each in 1 + 3 legs, measured by the region's host.
    assert.deepEqual(
      probes.map((p) => [p.region, p.rttMs, p.error]).sort(),
      [["eu", 12, null], ["us", 81, null]],
    );
    assert.equal(mm.to("POST", "/match/probe").filter((c) => c.url.host === "eu.test").length, 4);
    assert.equal(mm.to("POST", "/match/probe").filter((c) => c.url.host === "us.test").length, 4);

    const queue = mm.to("POST", "/match/searches/s-1/queue");
    assert.equal(queue.length, 1);
    assert.equal(queue[0]?.headers?.authorization, "Bearer search-token");

    // The long poll waits on the state it last saw.
    const reads = mm.to("GET", "/match/searches/s-1").map((c) => [c.url.searchParams.get("wait_ms"), c.url.searchParams.get("state")]);
    assert.deepEqual(reads, [["25000", "queued"], ["25000", "proposed"], ["25000", "allocated"]]);

    assert.deepEqual(states, ["probing", "queued", "proposed", "allocated", "assigned"]);
    assert.equal(made.length, 1);
    assert.equal(made[0]?.url, ASSIGNMENT.url);
    assert.equal(made[0]?.ticket, ASSIGNMENT.ticket);
    assert.equal(matched.assignment.match, "m-1");
    assert.equal(matched.search.state, "assigned");
    assert.equal(matched.search.region, "eu");
    assert.deepEqual(matched.search.rtt_ms, RTT);
    assert.equal(matched.connection.assignment, made[0]);
    assert.equal(matched.probes.length, 2);
    assert.equal(mm.to("DELETE", "/match/searches/s-1").length, 0, "a match is not cancelled");
  });

  it("calls a ticket function once and sends the content version and protocol version asked for", async () => {
    const mm = new FakeMatchmaker();
    mm.queue = () => [200, search("assigned")];
    let asked = 0;
    await start(mm, {
      ticket: async () => {
        asked += 1;
        return "fresh-ticket";
      },
      protocolVersion: 9,
      contentVersion: "1.4.0",
    }).run;
    assert.equal(asked, 1);
    const create = mm.to("POST", "/match/searches")[0];
    assert.equal(create?.headers?.authorization, "Bearer fresh-ticket");
    assert.deepEqual(JSON.parse(create?.body ?? ""), { queue: "duel", protocol_version: 9, content_version: "1.4.0" });
  });

  it("sends a heartbeat every heartbeat_secs while waiting, and none after the assignment", async () => {
    const mm = new FakeMatchmaker();
    const assigned = deferred<Answer>();
    mm.reads = [assigned.promise];
    const { sched, run, made } = start(mm);
    await settle();
    await tick(sched, 9_000);
    assert.equal(mm.to("POST", "/match/searches/s-1/heartbeat").length, 0);
    await tick(sched, 1_000);
    assert.equal(mm.to("POST", "/match/searches/s-1/heartbeat").length, 1);
    await tick(sched, 10_000);
    const beats = mm.to("POST", "/match/searches/s-1/heartbeat");
    assert.equal(beats.length, 2);
    assert.equal(beats[0]?.headers?.authorization, "Bearer search-token");
    assigned.resolve([200, search("assigned")]);
    await run;
    await tick(sched, 60_000, 1000);
    assert.equal(mm.to("POST", "/match/searches/s-1/heartbeat").length, 2);
    assert.equal(made.length, 1);
  });

  it("connects once when the assignment arrives twice (heartbeat and long poll)", async () => {
    const mm = new FakeMatchmaker();
    const poll = deferred<Answer>();
    const beat = deferred<Answer>();
    mm.reads = [poll.promise];
    mm.heartbeat = () => beat.promise;
    const { sched, run, made, states } = start(mm);
    await settle();
    await tick(sched, 10_000); // the heartbeat is on its way
    assert.equal(mm.to("POST", "/match/searches/s-1/heartbeat").length, 1);
    beat.resolve([200, search("assigned")]);
    poll.resolve([200, search("assigned")]);
    const matched = await run;
    await settle();
    assert.equal(made.length, 1);
    assert.equal(matched.assignment.ticket, "zone-ticket-1");
    assert.deepEqual(states, ["probing", "queued", "assigned"]);
  });

  it("connects from a heartbeat's answer without waiting for the long poll, and stops the poll", async () => {
    const mm = new FakeMatchmaker();
    mm.heartbeat = () => [200, search("assigned")];
    const { sched, run, made } = start(mm);
    await settle();
    await tick(sched, 10_000);
    const matched = await run;
    assert.equal(made.length, 1);
    assert.equal(matched.assignment.match, "m-1");
    assert.equal(mm.to("GET", "/match/searches/s-1").length, 1, "the long poll in flight was dropped, none sent after");
  });

  it("ignores an older answer arriving after a newer one, and a second assignment after connecting", async () => {
    const mm = new FakeMatchmaker();
    const poll = deferred<Answer>();
    const beat = deferred<Answer>();
    mm.reads = [[200, search("proposed")], poll.promise];
    mm.heartbeat = () => beat.promise;
    const { sched, run, made, states } = start(mm);
    await settle();
    await tick(sched, 10_000); // a heartbeat sent while the search was queued…
    // …answers "queued" after the long poll said "proposed": no going back.
    beat.resolve([200, search("queued")]);
    await settle();
    assert.deepEqual(states, ["probing", "queued", "proposed"]);
    poll.resolve([200, search("assigned")]);
    const matched = await run;
    assert.equal(matched.assignment.match, "m-1");
    assert.deepEqual(states, ["probing", "queued", "proposed", "assigned"]);
    assert.equal(made.length, 1);
  });

  it("ignores an older answer after the assignment: no regression, one connect", async () => {
    const mm = new FakeMatchmaker();
    const poll = deferred<Answer>();
    const beat = deferred<Answer>();
    mm.reads = [poll.promise];
    mm.heartbeat = () => beat.promise;
    const { sched, run, made, states } = start(mm);
    await settle();
    await tick(sched, 10_000);
    poll.resolve([200, search("assigned")]);
    const matched = await run;
    beat.resolve([200, search("queued")]); // sent before the match formed, answered after
    await settle();
    await tick(sched, 30_000, 1000);
    assert.deepEqual(states, ["probing", "queued", "assigned"]);
    assert.equal(made.length, 1);
    assert.equal(matched.search.state, "assigned");
    assert.equal(mm.to("GET", "/match/searches/s-1").length, 1, "no read after the assignment");
  });

  it("takes the matchmaker's own way back to queued from the long poll, and waits on it", async () => {
    const mm = new FakeMatchmaker();
    mm.reads = [[200, search("proposed")], [200, search("queued")], [200, search("assigned")]];
    const { run, states } = start(mm);
    await run;
    assert.deepEqual(states, ["probing", "queued", "proposed", "queued", "assigned"]);
    const asked = mm.to("GET", "/match/searches/s-1").map((c) => c.url.searchParams.get("state"));
    assert.deepEqual(asked, ["queued", "proposed", "queued"]);
  });

  it("426 client_outdated: outdated, not retryable, and nothing else is sent", async () => {
    for (const body of [
      { error: "client_outdated", message: "protocol 10 is below the floor 11" },
      { error: { code: "client_outdated", message: "content 1.0.0 is below 1.2.0" } },
      "not json",
    ]) {
      const mm = new FakeMatchmaker();
      mm.create = () => (body === "not json" ? { status: 426, notJson: true } : [426, body]);
      const { sched, run, made } = start(mm);
      await assert.rejects(run, (e: unknown) => {
        assert.ok(e instanceof MatchError, String(e));
        assert.equal(e.code, "client_outdated");
        assert.equal(e.outdated, true);
        assert.equal(e.retryable, false);
        assert.equal(e.aborted, false);
        assert.equal(e.status, 426);
        assert.ok(e.message.length > 0);
        return true;
      });
      await tick(sched, 60_000, 1000);
      assert.equal(mm.calls.length, 1, "no probe, no retry, no delete");
      assert.equal(made.length, 0);
    }
  });

  it("no probe result: the search is cancelled and the outcome is retryable", async () => {
    const mm = new FakeMatchmaker();
    mm.probe = (_c, region) => (region === "eu" ? new Error("ECONNREFUSED") : [503, { error: "probe_unavailable", message: "no live host" }]);
    const { run, probes } = start(mm);
    await assert.rejects(run, (e: unknown) => {
      assert.ok(e instanceof MatchError, String(e));
      assert.equal(e.code, "no_probe_result");
      assert.equal(e.retryable, true);
      assert.equal(e.outdated, false);
      return true;
    });
    assert.deepEqual(
      probes.map((p) => [p.region, p.rttMs, p.error?.code]).sort(),
      [["eu", null, "network"], ["us", null, "probe_unavailable"]],
    );
    const del = mm.to("DELETE", "/match/searches/s-1");
    assert.equal(del.length, 1);
    assert.equal(del[0]?.headers?.authorization, "Bearer search-token");
    assert.equal(mm.to("POST", "/match/searches/s-1/queue").length, 0);
  });

  it("skips a region whose probe fails and goes on with the others", async () => {
    const mm = new FakeMatchmaker();
    const base = mm.probe;
    mm.probe = (c, region) => (region === "us" ? [410, { error: "challenge_spent", message: "spent" }] : base(c, region));
    mm.reads = [[200, search("assigned")]];
    const { run, probes, made } = start(mm);
    await run;
    assert.deepEqual(
      probes.map((p) => [p.region, p.rttMs, p.error?.code ?? null]).sort(),
      [["eu", 12, null], ["us", null, "challenge_spent"]],
    );
    assert.equal(made.length, 1);
  });

  it("a search that expired or failed: retryable, with the search's reason (or state) as the code", async () => {
    const cases: Array<[Record<string, unknown>, string]> = [
      [search("expired", { reason: "no_heartbeat" }), "no_heartbeat"],
      [search("expired", { reason: "no_show" }), "no_show"],
      [search("failed"), "failed"],
      [search("cancelled"), "cancelled"],
    ];
    for (const [answer, code] of cases) {
      const mm = new FakeMatchmaker();
      mm.reads = [[200, search("proposed")], [200, answer]];
      const { run, made, states } = start(mm);
      await assert.rejects(run, (e: unknown) => {
        assert.ok(e instanceof MatchError, String(e));
        assert.equal(e.code, code);
        assert.equal(e.retryable, true, code);
        assert.equal(e.aborted, false, "ended by the matchmaker, not by the player");
        assert.equal(e.search?.state, answer.state);
        return true;
      });
      assert.equal(states.at(-1), answer.state);
      assert.equal(made.length, 0);
      assert.equal(mm.to("DELETE", "/match/searches/s-1").length, 0, "an ended search is not deleted");
    }
  });

  it("abort: the search is deleted and the outcome is an AbortError-like cancelled", async () => {
    const mm = new FakeMatchmaker();
    const ac = new AbortController();
    const { run, made } = start(mm, { signal: ac.signal });
    await settle();
    assert.equal(mm.to("GET", "/match/searches/s-1").length, 1, "waiting in the long poll");
    ac.abort();
    await assert.rejects(run, (e: unknown) => {
      assert.ok(e instanceof MatchError, String(e));
      assert.equal(e.code, "cancelled");
      assert.equal(e.name, "AbortError");
      assert.equal(e.aborted, true);
      assert.equal(e.retryable, false);
      return true;
    });
    const del = mm.to("DELETE", "/match/searches/s-1");
    assert.equal(del.length, 1);
    assert.equal(del[0]?.headers?.authorization, "Bearer search-token");
    assert.equal(made.length, 0);
  });

  it("abort while probing deletes the search too; an aborted signal sends nothing", async () => {
    const mm = new FakeMatchmaker();
    const ac = new AbortController();
    mm.probe = () => new Promise<Answer>(() => {}) as unknown as Answer; // never answers
    const { run } = start(mm, { signal: ac.signal });
    await settle();
    assert.equal(mm.to("POST", "/match/probe").length, 2);
    ac.abort();
    await assert.rejects(run, (e: unknown) => e instanceof MatchError && e.aborted);
    assert.equal(mm.to("DELETE", "/match/searches/s-1").length, 1);
    assert.equal(mm.to("POST", "/match/searches/s-1/queue").length, 0);

    const idle = new FakeMatchmaker();
    const gone = new AbortController();
    gone.abort();
    await assert.rejects(start(idle, { signal: gone.signal }).run, (e: unknown) => e instanceof MatchError && e.code === "cancelled");
    assert.equal(idle.calls.length, 0);
  });

  it("retries a long poll that got no answer, with backoff, and finds the assignment", async () => {
    const mm = new FakeMatchmaker();
    mm.reads = [new Error("ECONNRESET"), [503, { error: "unavailable", message: "store" }], [200, search("assigned")]];
    const { sched, run, made } = start(mm);
    await settle();
    assert.equal(mm.to("GET", "/match/searches/s-1").length, 1);
    await tick(sched, 400, 100);
    assert.equal(mm.to("GET", "/match/searches/s-1").length, 1, "not at once");
    await tick(sched, 200, 100);
    assert.equal(mm.to("GET", "/match/searches/s-1").length, 2, "after 0.5 s");
    await tick(sched, 1000, 100);
    await run;
    assert.equal(mm.to("GET", "/match/searches/s-1").length, 3);
    assert.equal(made.length, 1);
  });

  it("gives up on a matchmaker unheard for longer than the search can live (retryable network)", async () => {
    const mm = new FakeMatchmaker();
    mm.heartbeat = () => new Error("ECONNREFUSED");
    mm.cancel = () => new Error("ECONNREFUSED");
    const { sched, run } = start(mm);
    await settle();
    mm.reads = Array.from({ length: 100 }, () => new Error("ECONNREFUSED"));
    const outcome: { error: unknown } = { error: null };
    run.catch((e: unknown) => {
      outcome.error = e;
    });
    await tick(sched, 29_000, 500);
    assert.ok(outcome.error === null, "still trying within 3 heartbeats");
    await tick(sched, 6_000, 500);
    const e: unknown = outcome.error as unknown;
    assert.ok(e instanceof MatchError, String(e));
    assert.equal(e.code, "network");
    assert.equal(e.retryable, true);
  });

  it("a malformed answer: `malformed`, not retryable", async () => {
    const notJson = new FakeMatchmaker();
    notJson.create = () => ({ status: 201, notJson: true });
    await assert.rejects(start(notJson).run, (e: unknown) => e instanceof MatchError && e.code === "malformed" && !e.retryable);
    assert.equal(notJson.calls.length, 1);

    const noToken = new FakeMatchmaker();
    noToken.create = () => [201, search("probing")];
    await assert.rejects(start(noToken).run, (e: unknown) => e instanceof MatchError && e.code === "malformed");

    // Assigned without an assignment: the search is dropped (deleted), nothing connects.
    const noAssignment = new FakeMatchmaker();
    noAssignment.reads = [[200, { ...search("queued"), state: "assigned" }]];
    const r = start(noAssignment);
    await assert.rejects(r.run, (e: unknown) => e instanceof MatchError && e.code === "malformed");
    assert.equal(r.made.length, 0);
    assert.equal(noAssignment.to("DELETE", "/match/searches/s-1").length, 1);
  });

  it("refusals of the search: unauthorized and unknown_queue are not retryable, unavailable is", async () => {
    const cases: Array<[Answer, string, boolean]> = [
      [[401, { error: "unauthorized", message: "not a ticket for @match" }], "unauthorized", false],
      [[404, { error: "unknown_queue", message: "no queue duel" }], "unknown_queue", false],
      [[404, { error: "match_off", message: "not a matchmaker" }], "match_off", false],
      [[503, { error: "unavailable", message: "store down" }], "unavailable", true],
      [new Error("ECONNREFUSED"), "network", true],
    ];
    for (const [answer, code, retryable] of cases) {
      const mm = new FakeMatchmaker();
      mm.create = () => answer;
      await assert.rejects(start(mm).run, (e: unknown) => {
        assert.ok(e instanceof MatchError, String(e));
        assert.equal(e.code, code);
        assert.equal(e.retryable, retryable, code);
        return true;
      });
    }
  });
});

describe("MatchmakerClient", () => {
  it("probe: legs with no body and no headers, echoes passed on, rtt from the final answer", async () => {
    const mm = new FakeMatchmaker();
    const client = new MatchmakerClient({ url: "http://mm.test", fetch: mm.fetch, scheduler: new ManualScheduler() });
    const rtt = await client.probe({ region: "us", url: "http://us.test/", challenge: "c 1/2" });
    assert.equal(rtt, 81);
    assert.deepEqual(
      mm.calls.map((c) => c.url.href),
      [
        "http://us.test/match/probe?challenge=c%201%2F2",
        "http://us.test/match/probe?challenge=c%201%2F2&echo=e1",
        "http://us.test/match/probe?challenge=c%201%2F2&echo=e2",
        "http://us.test/match/probe?challenge=c%201%2F2&echo=e3",
      ],
    );
    for (const c of mm.calls) {
      assert.equal(c.method, "POST");
      assert.equal(c.init.headers, undefined, "no headers: no CORS preflight");
      assert.equal(c.init.body, undefined, "no body");
    }
  });

  it("probe: an answer with neither echo nor rtt_ms, or a probe that never ends, is malformed", async () => {
    for (const answer of [{ rounds_left: 2 }, { echo: "again", rounds_left: 1 }]) {
      const mm = new FakeMatchmaker();
      mm.probe = () => [200, answer];
      const client = new MatchmakerClient({ url: "http://mm.test", fetch: mm.fetch, scheduler: new ManualScheduler() });
      await assert.rejects(client.probe({ region: "eu", url: "http://eu.test", challenge: "c" }), (e: unknown) => e instanceof MatchError && e.code === "malformed");
      assert.ok(mm.calls.length <= 8);
    }
  });

  it("read: the long poll's query, and a request unanswered past its wait is `network`", async () => {
    const mm = new FakeMatchmaker();
    const sched = new ManualScheduler();
    const client = new MatchmakerClient({ url: "http://mm.test", fetch: mm.fetch, scheduler: sched, timeoutMs: 5000 });
    mm.reads = [[200, search("queued")]];
    await client.read("s-1", "tok", { waitMs: 99_000, state: "queued" });
    assert.equal(mm.calls[0]?.url.search, "?wait_ms=30000&state=queued");
    assert.equal(mm.calls[0]?.headers?.authorization, "Bearer tok");
    const pending = client.read("s-1", "tok", { waitMs: 1000 });
    const failed: { error: unknown } = { error: null };
    pending.catch((e: unknown) => {
      failed.error = e;
    });
    await tick(sched, 5_900, 100);
    assert.ok(failed.error === null);
    await tick(sched, 200, 100);
    const e: unknown = failed.error as unknown;
    assert.ok(e instanceof MatchError && e.code === "network" && e.retryable, String(e));
  });
});

describe("SearchTracker", () => {
  const s = (state: SearchState, extra: Record<string, unknown> = {}) => parseSearch(search(state, extra));

  it("goes forward only, hands out the first assignment once, and ignores everything after it", () => {
    const t = new SearchTracker();
    assert.equal(t.observe(s("probing")).advanced, true);
    assert.equal(t.observe(s("queued")).advanced, true);
    assert.equal(t.observe(s("probing")).advanced, false, "an older answer");
    assert.equal(t.search?.state, "queued");
    assert.deepEqual(t.observe(s("allocated")), { advanced: true, connect: null, ended: false });
    assert.equal(t.observe(s("queued")).advanced, false, "a late heartbeat answer is not a way back");
    const first = t.observe(s("assigned"));
    assert.equal(first.connect?.match, "m-1");
    assert.equal(t.observe(s("assigned")).connect, null, "the same assignment again");
    const other = s("assigned", { assignment: { ...ASSIGNMENT, match: "m-2", ticket: "other" } });
    assert.equal(t.observe(other).connect, null, "another assignment after connecting");
    assert.equal(t.observe(s("expired", { reason: "no_show" })).ended, false);
    assert.equal(t.observe(s("queued"), true).advanced, false);
    assert.equal(t.search?.state, "assigned");
    assert.equal(t.assignment?.match, "m-1");
  });

  it("takes the way back to queued only from the ordered long poll; ends on a final failure", () => {
    const t = new SearchTracker();
    t.observe(s("queued"));
    t.observe(s("proposed"));
    assert.equal(t.observe(s("queued"), false).advanced, false);
    assert.equal(t.observe(s("queued"), true).advanced, true);
    assert.equal(t.search?.state, "queued");
    const end = t.observe(s("failed"));
    assert.deepEqual(end, { advanced: true, connect: null, ended: true });
    assert.equal(t.observe(s("assigned")).connect, null, "nothing after the end");
  });

  it("connects on `connected` when `assigned` was never seen, and keeps the token", () => {
    const t = new SearchTracker();
    t.observe(s("probing", { token: "tok" }));
    assert.equal(t.observe(s("connected")).connect?.ticket, "zone-ticket-1");
    assert.equal(t.search?.token, "tok");
  });
});

describe("parsing", () => {
  it("a search answer: unknown states, assignments that are no WebSocket URL, bad heartbeats are malformed", () => {
    const bad = [
      { ...search("queued"), state: "dancing" },
      { ...search("assigned"), assignment: { ...ASSIGNMENT, url: "http://eu.test/zones/x" } },
      { ...search("queued"), heartbeat_secs: 0 },
      { ...search("probing"), probes: [{ region: "eu" }] },
      [],
      null,
    ];
    for (const v of bad) {
      assert.throws(() => parseSearch(v), (e: unknown) => e instanceof MatchError && e.code === "malformed", JSON.stringify(v));
    }
    const ok = parseSearch(search("assigned"));
    assert.deepEqual(ok.assignment, ASSIGNMENT);
  });

  it("refusals in either body shape, or from the status alone", () => {
    assert.equal(matchRefusal(409, { error: "wrong_state", message: "m" }).code, "wrong_state");
    assert.equal(matchRefusal(409, { error: { code: "no_probe_result", message: "m" } }).code, "no_probe_result");
    assert.equal(matchRefusal(409, { error: { code: "no_probe_result", message: "m" } }).retryable, true);
    assert.equal(matchRefusal(503, null).code, "unavailable");
    assert.equal(matchRefusal(401, null).code, "unauthorized");
    assert.equal(matchRefusal(426, null).outdated, true);
    assert.equal(matchRefusal(418, null).code, "http_418");
  });
});

describe("the default connection", () => {
  it("connects at the assignment's URL with its ticket; a second ticket is refused", async () => {
    const sched = new ManualScheduler(1000);
    const server = new FakeServer(sched, () => 5);
    const assignment = parseSearch(search("assigned")).assignment as Assignment;
    const conn = matchConnection({ ...assignment, url: "ws://test/zones/duel-1a2b" }, { socket: server.factory, scheduler: sched });
    const welcome = conn.connect();
    await advance(sched, 50);
    await welcome;
    const hello = server.sessions[0]?.received[0];
    assert.equal(hello?.type, "hello");
    assert.equal(hello?.type === "hello" ? hello.ticket : "", "zone-ticket-1");
    assert.equal(server.sessions[0]?.url, "ws://test/zones/duel-1a2b");
    conn.close();

    const tickets = matchTickets(assignment);
    assert.equal(await tickets(), "zone-ticket-1");
    await assert.rejects(tickets(), (e: unknown) => e instanceof MatchError && e.code === "ticket_spent" && e.retryable);
  });

  it("matchmake's default connect makes one ZoneConnection for the assignment", async () => {
    const mm = new FakeMatchmaker();
    mm.reads = [[200, search("assigned")]];
    const sched = new ManualScheduler(1000);
    const server = new FakeServer(sched, () => 5);
    const matched = await matchmake({
      matchmaker: "http://mm.test",
      ticket: "match-ticket",
      queue: "duel",
      fetch: mm.fetch,
      scheduler: sched,
      connectionOptions: { socket: server.factory, scheduler: sched },
    });
    assert.equal(matched.connection.state, "idle");
    assert.equal(server.sessions.length, 0, "not connected until the game says so");
    matched.connection.close();
  });
});
