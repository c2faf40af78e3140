/**
 * Presence for a game client: watchPresence against a fake host (a fetch whose answer's body is a
 * stream the test writes, split anywhere: mid-line, mid-CRLF, mid-character) on a manual clock —
 * the snapshot and the changes parsed into typed entries, comments and unknown events skipped, a
 * new ticket for every attempt and a fresh snapshot replacing what was known, bounded backoff,
 * refusals that are not retried, an oversized event, and close() aborting everything.
 */

import assert from "node:assert/strict";
import { describe, it } from "node:test";

import {
  ManualScheduler,
  MAX_PRESENCE_EVENT_BYTES,
  parsePresence,
  PresenceError,
  presenceRefusal,
  watchPresence,
  type Presence,
  type PresenceFetch,
  type WatchPresenceOptions,
} from "../src/index.js";
import { advance, flush } from "./helpers.js";

const utf8 = new TextEncoder();

/** An answer's body the test writes to, chunk by chunk; records whether the reader cancelled it. */
class FakeStream {
  private queue: Uint8Array[] = [];
  private waiting: Array<{ resolve: (r: { done: boolean; value?: Uint8Array }) => void; reject: (e: unknown) => void }> = [];
  private ended = false;
  private failure: unknown = null;
  cancelled = false;

  /** Writes `text` (or bytes) as one chunk. */
  push(chunk: string | Uint8Array): void {
    const bytes = typeof chunk === "string" ? utf8.encode(chunk) : chunk;
    const w = this.waiting.shift();
    if (w !== undefined) w.resolve({ done: false, value: bytes });
    else this.queue.push(bytes);
  }

  /** Writes `text` cut at every position in `cuts` (byte offsets). */
  pushSplit(text: string, cuts: number[]): void {
    const bytes = utf8.encode(text);
    let at = 0;
    for (const c of [...cuts, bytes.length]) {
      this.push(bytes.slice(at, c));
      at = c;
    }
  }

  /** Ends the stream (the host closed it). */
  end(): void {
    this.ended = true;
    for (const w of this.waiting.splice(0)) w.resolve({ done: true });
  }

  /** Breaks the stream (the network failed). */
  fail(e: unknown): void {
    this.failure = e;
    for (const w of this.waiting.splice(0)) w.reject(e);
  }

  getReader() {
    return {
      read: (): Promise<{ done: boolean; value?: Uint8Array }> => {
        const v = this.queue.shift();
        if (v !== undefined) return Promise.resolve({ done: false, value: v });
        if (this.failure !== null) return Promise.reject(this.failure);
        if (this.ended || this.cancelled) return Promise.resolve({ done: true });
        return new Promise((resolve, reject) => this.waiting.push({ resolve, reject }));
      },
      cancel: async () => {
        this.cancelled = true;
        for (const w of this.waiting.splice(0)) w.resolve({ done: true });
      },
    };
  }
}

/** What the fake host answers one request with. */
type Answer = FakeStream | [number, unknown] | { status: number; notJson: true } | Error | "hang";

interface Call {
  url: string;
  method: string;
  headers: Record<string, string>;
  signal?: { aborted: boolean };
}

/** A fetch answering from `answers` in order, recording the requests. */
function fakeHost(answers: Answer[]) {
  const calls: Call[] = [];
  const f: PresenceFetch = async (url, init) => {
    const call: Call = { url, method: init.method, headers: init.headers };
    if (init.signal !== undefined) call.signal = init.signal;
    calls.push(call);
    const a = answers.shift();
    if (a === undefined) throw new Error("no more answers");
    if (a === "hang") {
      return new Promise((_, reject) => init.signal?.addEventListener("abort", () => reject(new Error("aborted"))));
    }
    if (a instanceof Error) throw a;
    if (a instanceof FakeStream) return { status: 200, body: a, json: async () => Promise.reject(new Error("a stream")) };
    if ("notJson" in a) return { status: a.status, body: null, json: async () => JSON.parse("<html>Bad Gateway</html>") as unknown };
    return { status: a[0], body: null, json: async () => a[1] };
  };
  return { f, calls };
}

/** Tickets t1, t2, … (single use: a new one for every attempt). */
function tickets() {
  let n = 0;
  const source = async () => `t${++n}`;
  return { source, count: () => n };
}

/** Everything a watcher told the game. */
function recorder() {
  const seen = {
    snapshots: [] as Presence[][],
    changes: [] as Presence[],
    errors: [] as PresenceError[],
  };
  const callbacks: Pick<WatchPresenceOptions, "onSnapshot" | "onChange" | "onError"> = {
    onSnapshot: (p) => seen.snapshots.push(p),
    onChange: (p) => seen.changes.push(p),
    onError: (e) => seen.errors.push(e),
  };
  return { seen, callbacks };
}

const ANN: Presence = { principal: "ann", online: true, zones: [{ zone: "arena-7", host: "h2", since_ms: 1_796_523_283_000 }] };
const BOB: Presence = { principal: "bob", online: false, zones: [] };
const CAT: Presence = { principal: "cat", online: true, zones: [{ zone: "lobby", host: "h1", since_ms: 1_796_523_101_000 }] };

function sse(event: string, data: unknown, eol = "\n"): string {
  return `event: ${event}${eol}data: ${JSON.stringify(data)}${eol}${eol}`;
}

const SNAPSHOT = sse("snapshot", { presence: [ANN, BOB, CAT] });

function start(answers: Answer[], extra: Partial<WatchPresenceOptions> = {}) {
  const sched = new ManualScheduler(0);
  const host = fakeHost(answers);
  const t = tickets();
  const { seen, callbacks } = recorder();
  const watch = watchPresence("http://host:7350/", {
    ticket: t.source,
    ...callbacks,
    fetch: host.f,
    scheduler: sched,
    retryMs: 1000,
    maxRetryMs: 8000,
    random: () => 0,
    ...extra,
  });
  return { sched, host, tickets: t, seen, watch };
}

describe("watchPresence", () => {
  it("asks with the ticket in the header and delivers the snapshot and the changes, typed", async () => {
    const stream = new FakeStream();
    const { host, seen, watch } = start([stream]);
    await flush();
    assert.equal(host.calls.length, 1);
    assert.equal(host.calls[0]?.url, "http://host:7350/presence/watch");
    assert.equal(host.calls[0]?.method, "GET");
    assert.equal(host.calls[0]?.headers.authorization, "Bearer t1");
    assert.equal(host.calls[0]?.url.includes("t1"), false, "the ticket is never in the URL");
    stream.push(`: keep-alive\n\n${SNAPSHOT}`);
    await flush();
    assert.deepEqual(seen.snapshots, [[ANN, BOB, CAT]]);
    assert.deepEqual([...watch.presence.keys()], ["ann", "bob", "cat"]);
    const bobIn: Presence = { principal: "bob", online: true, zones: [{ zone: "arena-7", host: "h2", since_ms: 1_796_523_290_000 }] };
    stream.push(sse("presence", bobIn));
    stream.push(": keep-alive\n\n");
    stream.push(sse("presence", { ...ANN, online: false, zones: [], extra: "ignored" }));
    await flush();
    assert.deepEqual(seen.changes, [bobIn, { principal: "ann", online: false, zones: [] }]);
    assert.deepEqual(watch.presence.get("bob"), bobIn);
    assert.equal(watch.presence.get("ann")?.online, false);
    assert.deepEqual(seen.errors, []);
    watch.close();
  });

  it("reads events split anywhere: mid-line, mid-CRLF, mid-character, one byte at a time", async () => {
    const eve: Presence = { principal: "Zoë-★", online: true, zones: [{ zone: "ströme", host: "h1", since_ms: 5 }] };
    const text =
      `: hello\r\n\r\n` +
      sse("snapshot", { presence: [ANN, eve] }, "\r\n") +
      sse("presence", { ...eve, online: false, zones: [] }, "\r\n") +
      sse("presence", BOB, "\n") +
      sse("presence", CAT, "\r");
    const want = {
      snapshot: [ANN, eve],
      changes: [{ principal: "Zoë-★", online: false, zones: [] }, BOB, CAT],
    };
    const bytes = utf8.encode(text);
    const crlf = text.indexOf("\r\n", 20) + 1;
    const star = bytes.indexOf(0xe2) + 1;
    const splits: Array<[string, number[]]> = [
      ["whole", []],
      ["between CR and LF", [crlf]],
      ["inside a UTF-8 character", [star]],
      ["inside a field name", [text.indexOf("event") + 2, text.indexOf("data") + 3]],
      ["every byte", Array.from({ length: bytes.length - 1 }, (_, i) => i + 1)],
    ];
    for (const [how, cuts] of splits) {
      const stream = new FakeStream();
      const { seen, watch } = start([stream]);
      await flush();
      stream.pushSplit(text, cuts);
      await flush();
      for (let i = 0; i < bytes.length && seen.changes.length < 3; i++) await flush();
      assert.deepEqual(seen.snapshots, [want.snapshot], how);
      assert.deepEqual(seen.changes, want.changes, how);
      assert.deepEqual(seen.errors, [], how);
      watch.close();
    }
  });

  it("follows the event stream format: several data lines, no space after the colon, a BOM, unknown fields and events", async () => {
    const stream = new FakeStream();
    const { seen, watch } = start([stream]);
    await flush();
    const snap = JSON.stringify({ presence: [ANN] });
    const cut = snap.indexOf("[");
    stream.push(
      `\uFEFFid: 7\nretry: 10\nevent:snapshot\ndata:${snap.slice(0, cut)}\ndata:${snap.slice(cut)}\n\n` +
        // An event this SDK does not know, data without an event (a "message"), an event without data.
        `event: stats\ndata: {"watchers": 3}\n\ndata: {"hello": 1}\n\nevent: presence\n\n` +
        sse("presence", BOB),
    );
    await flush();
    // The two data lines are joined by a line feed, which JSON reads as white space.
    assert.deepEqual(seen.snapshots, [[ANN]]);
    assert.deepEqual(seen.changes, [BOB]);
    assert.deepEqual(seen.errors, []);
    watch.close();
  });

  it("reconnects with a new ticket after the stream ends, and the new snapshot replaces what was known", async () => {
    const first = new FakeStream();
    const second = new FakeStream();
    const { sched, host, seen, watch } = start([first, second]);
    await flush();
    first.push(SNAPSHOT + sse("presence", { ...BOB, online: true, zones: CAT.zones }));
    await flush();
    assert.equal(watch.presence.get("bob")?.online, true);
    first.end();
    await flush();
    assert.equal(seen.errors.length, 1);
    assert.equal(seen.errors[0]?.code, "closed");
    assert.equal(seen.errors[0]?.retryable, true);
    assert.equal(watch.closed, false);
    // No new attempt before the wait is over.
    await advance(sched, 999);
    assert.equal(host.calls.length, 1);
    await advance(sched, 1);
    assert.equal(host.calls.length, 2);
    assert.equal(host.calls[1]?.headers.authorization, "Bearer t2", "a ticket is used once");
    // Until the new snapshot, the last known state stays; then it is replaced whole.
    assert.equal(watch.presence.size, 3);
    second.push(sse("snapshot", { presence: [BOB, CAT] }));
    await flush();
    assert.deepEqual(seen.snapshots[1], [BOB, CAT]);
    assert.deepEqual([...watch.presence.values()], [BOB, CAT]);
    // A broken stream is reconnected the same way.
    second.fail(new Error("ECONNRESET"));
    await flush();
    assert.equal(seen.errors[1]?.code, "network");
    assert.match(seen.errors[1]?.message ?? "", /ECONNRESET/);
    assert.equal(second.cancelled, true);
    watch.close();
  });

  it("backs off with failures in a row, bounded, and starts over after a snapshot", async () => {
    const ok = new FakeStream();
    const again = new FakeStream();
    const { sched, host, seen, watch } = start([
      new Error("ECONNREFUSED"),
      [503, { error: { code: "unavailable", message: "the store did not answer in 3 s" } }],
      { status: 502, notJson: true },
      [401, { error: { code: "unauthorized", message: "ticket: replayed" } }],
      [429, null],
      [503, { error: { code: "presence_full", message: "this host watches as many as it may" } }],
      ok,
      again,
    ]);
    const at: number[] = [];
    for (let i = 0; i < 6; i++) {
      await advance(sched, i === 0 ? 0 : 1000, 1000);
      for (let waited = 0; host.calls.length <= i; waited += 10) {
        assert.ok(waited < 60_000, "no attempt");
        await advance(sched, 10, 10);
      }
      at.push(sched.now());
    }
    // Waits of 1 s, 2 s, 4 s, then 8 s (the bound) — measured roughly, from where the loop polls.
    const waits = at.slice(1).map((t, i) => t - (at[i] as number));
    assert.deepEqual(waits, [1000, 2000, 4000, 8000, 8000]);
    assert.deepEqual(
      seen.errors.map((e) => [e.code, e.status, e.retryable]),
      [
        ["network", 0, true],
        ["unavailable", 503, true],
        ["unavailable", 502, true],
        ["unauthorized", 401, true],
        ["rate_limited", 429, true],
        ["presence_full", 503, true],
      ],
    );
    assert.deepEqual(
      host.calls.map((c) => c.headers.authorization),
      ["Bearer t1", "Bearer t2", "Bearer t3", "Bearer t4", "Bearer t5", "Bearer t6"],
    );
    await advance(sched, 8000, 1000);
    assert.equal(host.calls.length, 7);
    ok.push(SNAPSHOT);
    await flush();
    ok.end();
    await flush();
    // After a snapshot the next wait is the first one again.
    await advance(sched, 999, 999);
    assert.equal(host.calls.length, 7);
    await advance(sched, 1, 1);
    assert.equal(host.calls.length, 8);
    watch.close();
  });

  it("spreads reconnects with jitter of up to half the wait, never past the bound", async () => {
    const { sched, host, watch } = start([new Error("down"), new Error("down"), new Error("down"), "hang"], {
      random: () => 0.5,
      retryMs: 1000,
      maxRetryMs: 3000,
    });
    await flush();
    const waits: Array<[number, string]> = [
      [1250, "1 s and a quarter of it"],
      [2500, "2 s and a quarter of it"],
      [3000, "4 s and a quarter of it, down to the bound of 3 s"],
    ];
    for (const [i, [wait, what]] of waits.entries()) {
      await advance(sched, wait - 1, 50);
      assert.equal(host.calls.length, i + 1, what);
      await advance(sched, 1, 1);
      assert.equal(host.calls.length, i + 2, what);
    }
    watch.close();
  });

  it("stops on a refusal a new attempt would meet again", async () => {
    const cases: Array<[Answer, string, number]> = [
      [[400, { error: { code: "bad_request", message: "the ticket's params.watch is not a list of principals" } }], "bad_request", 400],
      [[400, { error: { code: "bad_request", message: "a watcher watches at most 200 principals" } }], "bad_request", 400],
      [[404, { error: { code: "presence_off", message: "presence needs a store" } }], "presence_off", 404],
      [{ status: 404, notJson: true }, "not_found", 404],
      [[403, null], "http_403", 403],
    ];
    for (const [answer, code, status] of cases) {
      const { sched, host, seen, watch } = start([answer]);
      await flush();
      assert.equal(seen.errors.length, 1, code);
      const e = seen.errors[0];
      assert.ok(e instanceof PresenceError, String(e));
      assert.equal(e.name, "PresenceError");
      assert.deepEqual([e.code, e.status, e.retryable], [code, status, false]);
      assert.equal(watch.closed, true);
      assert.equal(sched.pending, 0, "nothing scheduled");
      await advance(sched, 60_000, 1000);
      assert.equal(host.calls.length, 1, "not retried");
    }
    const refusal = presenceRefusal(400, { error: { code: "bad_request", message: "at most 200 principals" } });
    assert.equal(refusal.message, "at most 200 principals");
  });

  it("gives up a stream with an event over the bound, before buffering it, and reconnects", async () => {
    const big = new FakeStream();
    const endless = new FakeStream();
    const after = new FakeStream();
    const { sched, host, seen, watch } = start([big, endless, after], { maxEventBytes: 256 });
    await flush();
    // An event within the bound is fine.
    big.push(sse("snapshot", { presence: [ANN] }));
    await flush();
    assert.equal(seen.snapshots.length, 1);
    // One event of many lines, each short, together over the bound.
    big.push("event: presence\n");
    for (let i = 0; i < 20; i++) big.push(`data: ${"x".repeat(20)}\n`);
    await flush();
    assert.equal(seen.errors[0]?.code, "too_large");
    assert.equal(seen.errors[0]?.retryable, true);
    assert.equal(big.cancelled, true, "the stream was given up");
    assert.equal(seen.changes.length, 0);
    await advance(sched, 1000, 1000);
    assert.equal(host.calls.length, 2);
    // A line that never ends is given up too, as soon as it is over the bound.
    endless.push("event: snapshot\ndata: ");
    for (let i = 0; i < 3; i++) endless.push("y".repeat(100));
    await flush();
    assert.equal(seen.errors[1]?.code, "too_large");
    assert.equal(endless.cancelled, true);
    // Comments and keep-alives between events do not add up.
    await advance(sched, 2000, 1000);
    assert.equal(host.calls.length, 3);
    for (let i = 0; i < 10; i++) after.push(`: ${"k".repeat(100)}\n\n`);
    after.push(sse("snapshot", { presence: [BOB] }));
    await flush();
    assert.deepEqual(seen.snapshots[1], [BOB]);
    assert.equal(seen.errors.length, 2);
    assert.equal(MAX_PRESENCE_EVENT_BYTES, 1 << 20);
    watch.close();
  });

  it("reconnects after an event that is not what the host sends", async () => {
    const bad: Array<[string, RegExp]> = [
      [sse("presence", BOB), /a change before the snapshot/],
      ["event: snapshot\ndata: {nope\n\n", /not JSON/],
      [sse("snapshot", { presence: "all" }), /without a presence list/],
      [sse("snapshot", { presence: [{ ...ANN, online: "yes" }] }), /online is not a boolean/],
      [sse("snapshot", { presence: [{ ...ANN, zones: [{ zone: "z", host: "h", since_ms: -1 }] }] }), /since_ms/],
      [SNAPSHOT + SNAPSHOT, /a second snapshot/],
    ];
    for (const [text, why] of bad) {
      const stream = new FakeStream();
      const { sched, host, seen, watch } = start([stream, "hang"]);
      await flush();
      stream.push(text);
      await flush();
      assert.equal(seen.errors[0]?.code, "malformed", text);
      assert.match(seen.errors[0]?.message ?? "", why);
      assert.equal(stream.cancelled, true);
      await advance(sched, 1000, 1000);
      assert.equal(host.calls.length, 2, "a new attempt");
      watch.close();
    }
  });

  it("retries when the ticket source fails", async () => {
    const sched = new ManualScheduler(0);
    const stream = new FakeStream();
    const host = fakeHost([stream]);
    const { seen, callbacks } = recorder();
    let asked = 0;
    const watch = watchPresence("http://host", {
      ticket: async () => {
        asked += 1;
        if (asked === 1) throw new Error("back end down");
        return "fresh";
      },
      ...callbacks,
      fetch: host.f,
      scheduler: sched,
      random: () => 0,
    });
    await flush();
    assert.equal(host.calls.length, 0);
    assert.deepEqual([seen.errors[0]?.code, seen.errors[0]?.retryable], ["no_ticket", true]);
    assert.match(seen.errors[0]?.message ?? "", /back end down/);
    await advance(sched, 1000, 1000);
    assert.equal(host.calls[0]?.headers.authorization, "Bearer fresh");
    watch.close();
  });

  it("close() aborts the request, cancels the stream and the retry, and calls nothing after", async () => {
    // While the request is in flight.
    {
      const { host, seen, watch } = start(["hang"]);
      await flush();
      assert.equal(host.calls[0]?.signal?.aborted, false);
      watch.close();
      await flush();
      assert.equal(host.calls[0]?.signal?.aborted, true);
      assert.deepEqual(seen.errors, []);
      assert.equal(watch.closed, true);
    }
    // While the stream is open.
    {
      const stream = new FakeStream();
      const { sched, host, seen, watch } = start([stream]);
      await flush();
      stream.push(SNAPSHOT);
      await flush();
      watch.close();
      await flush();
      assert.equal(stream.cancelled, true);
      stream.push(sse("presence", BOB));
      await flush();
      assert.deepEqual(seen.changes, []);
      assert.deepEqual(seen.errors, []);
      await advance(sched, 60_000, 1000);
      assert.equal(host.calls.length, 1);
    }
    // While waiting to reconnect.
    {
      const { sched, host, seen, watch } = start([new Error("down")]);
      await flush();
      assert.equal(sched.pending, 1);
      watch.close();
      assert.equal(sched.pending, 0);
      await advance(sched, 60_000, 1000);
      assert.equal(host.calls.length, 1);
      assert.equal(seen.errors.length, 1);
    }
    // While asking for a ticket.
    {
      const sched = new ManualScheduler(0);
      const host = fakeHost([]);
      let give: (t: string) => void = () => {};
      const watch = watchPresence("http://host", {
        ticket: () => new Promise<string>((r) => (give = r)),
        onSnapshot: () => assert.fail("no snapshot"),
        onChange: () => assert.fail("no change"),
        onError: (e) => assert.fail(`no error: ${e.message}`),
        fetch: host.f,
        scheduler: sched,
      });
      await flush();
      watch.close();
      give("late");
      await flush();
      assert.equal(host.calls.length, 0, "no request after close()");
    }
  });

  it("reads a platform Response whose body is a ReadableStream", async () => {
    const chunks = [SNAPSHOT.slice(0, 17), SNAPSHOT.slice(17) + sse("presence", BOB).slice(0, 9), sse("presence", BOB).slice(9)];
    let pulls = 0;
    const body = new ReadableStream<Uint8Array>({
      pull(controller) {
        const c = chunks[pulls++];
        if (c === undefined) controller.close();
        else controller.enqueue(utf8.encode(c));
      },
    });
    const answers = [
      new Response(body, { status: 200, headers: { "content-type": "text/event-stream" } }),
      new Response(JSON.stringify({ error: { code: "bad_request", message: "no params.watch" } }), { status: 400 }),
    ];
    const sched = new ManualScheduler(0);
    const { seen, callbacks } = recorder();
    const f: PresenceFetch = async () => answers.shift() as Response;
    const watch = watchPresence("http://host", { ticket: async () => "t", ...callbacks, fetch: f, scheduler: sched, random: () => 0 });
    for (let i = 0; i < 10 && seen.errors.length === 0; i++) await new Promise<void>((r) => setImmediate(r));
    assert.deepEqual(seen.snapshots, [[ANN, BOB, CAT]]);
    assert.deepEqual(seen.changes, [BOB]);
    assert.equal(seen.errors[0]?.code, "closed");
    await advance(sched, 1000, 1000);
    for (let i = 0; i < 10 && seen.errors.length < 2; i++) await new Promise<void>((r) => setImmediate(r));
    assert.deepEqual([seen.errors[1]?.code, seen.errors[1]?.status, seen.errors[1]?.retryable], ["bad_request", 400, false]);
    assert.equal(watch.closed, true);
  });

  it("goes on when a callback throws, and throws the callback's error again from a timer", async () => {
    const stream = new FakeStream();
    const sched = new ManualScheduler(0);
    const changes: Presence[] = [];
    const watch = watchPresence("http://host", {
      ticket: async () => "t",
      onSnapshot: () => {
        throw new Error("the game's bug");
      },
      onChange: (p) => changes.push(p),
      fetch: fakeHost([stream]).f,
      scheduler: sched,
    });
    await flush();
    stream.push(SNAPSHOT + sse("presence", BOB));
    await flush();
    assert.deepEqual(changes, [BOB], "the stream went on");
    assert.equal(watch.presence.size, 3);
    assert.throws(() => sched.advance(0), /the game's bug/);
    assert.equal(sched.pending, 0);
    watch.close();
  });

  it("refuses settings that make no sense", () => {
    const base = { ticket: async () => "t", onSnapshot: () => {}, onChange: () => {}, fetch: fakeHost([]).f };
    assert.throws(() => watchPresence("http://host", { ...base, retryMs: 0 }), RangeError);
    assert.throws(() => watchPresence("http://host", { ...base, retryMs: 5000, maxRetryMs: 1000 }), RangeError);
    assert.throws(() => watchPresence("http://host", { ...base, maxEventBytes: 0 }), RangeError);
  });
});

describe("parsePresence", () => {
  it("keeps what an entry carries", () => {
    assert.deepEqual(parsePresence({ ...ANN, extra: 1 }), ANN);
    assert.deepEqual(parsePresence(BOB), BOB);
    for (const bad of [null, [], { ...ANN, principal: "" }, { ...ANN, zones: {} }, { ...ANN, zones: [{ zone: "", host: "h", since_ms: 1 }] }]) {
      assert.throws(() => parsePresence(bad), (e: unknown) => e instanceof PresenceError && e.code === "malformed");
    }
  });
});
