/**
 * The WebTransport transport (PROTOCOL.md §1.1, version 6) in node: the control stream's framing,
 * discovery, the Inputs and Events codec rules, and whole sessions over an in-memory WebTransport
 * that speaks real protocol bytes with the fake host (test/helpers.ts) — States as datagrams
 * (lost, repeated, reordered) through the state ring, Inputs datagrams repeating what no State has
 * acknowledged, Events on the stream, Kicks and close codes, Redirects, and the fallback to
 * WebSocket in auto mode, remembered.
 */

import assert from "node:assert/strict";
import { describe, it } from "node:test";

import {
  base64ToBytes,
  decodeClientMessage,
  decodeServerMessage,
  DecodeError,
  discoverWebTransport,
  EncodeError,
  encodeClientMessage,
  encodeServerMessage,
  frameMessage,
  httpOriginOf,
  KickCode,
  LIMITS,
  ManualScheduler,
  MessageFramer,
  toHex,
  transportMemoryKey,
  webTransportSessionUrl,
  ZoneConnection,
  type CloseInfo,
  type Inputs,
  type Mirror,
  type TransportFallback,
  type TransportMemory,
  type ZoneConnectionOptions,
  type ZoneEvent,
} from "../src/index.js";
import { FakeServer, rng, type FakeEntity, type ServerSession } from "./helpers.js";

const ENTRY = "ws://127.0.0.1:7350/zones/test-zone?room=blue";
const CERT = Uint8Array.from({ length: 32 }, (_, i) => (i * 37 + 11) & 0xff);
const CERT_B64 = Buffer.from(CERT).toString("base64");

/** Runs the manual clock for `ms`, letting the stream and datagram reads (promises) run between steps. */
async function run(sched: ManualScheduler, ms: number, stepMs = 5): Promise<void> {
  const drain = async (): Promise<void> => {
    for (let i = 0; i < 200; i++) await Promise.resolve();
  };
  for (let t = 0; t < ms; t += stepMs) {
    await drain();
    sched.advance(Math.min(stepMs, ms - t));
  }
  await drain();
}

class MapMemory implements TransportMemory {
  readonly map = new Map<string, string>();
  getItem(key: string): string | null {
    return this.map.get(key) ?? null;
  }
  setItem(key: string, value: string): void {
    this.map.set(key, value);
  }
}

function setup(options: Partial<ZoneConnectionOptions> = {}, latency = 20) {
  const sched = new ManualScheduler(1000);
  const server = new FakeServer(sched, () => latency);
  server.wtEndpoint = { url: "https://127.0.0.1:4434", certificate_hashes: [{ algorithm: "sha-256", value: CERT_B64 }] };
  const memory = new MapMemory();
  let tickets = 0;
  const conn = new ZoneConnection({
    url: ENTRY,
    ticket: async () => `ticket-${++tickets}`,
    socket: server.factory,
    webTransport: server.webTransport,
    fetch: server.fetch,
    transportMemory: memory,
    scheduler: sched,
    reconnect: { random: () => 0.5 },
    transport: "auto",
    ...options,
  });
  const closes: CloseInfo[] = [];
  conn.on("close", (c) => closes.push(c));
  const fallbacks: TransportFallback[] = [];
  conn.on("fallback", (f) => fallbacks.push(f));
  const welcomes: Array<{ transport: string; resumed: boolean }> = [];
  conn.on("welcome", (_w, info) => welcomes.push(info));
  return { sched, server, conn, memory, closes, fallbacks, welcomes };
}

/** The known set of a mirror as comparable values. */
function view(m: Mirror | null): Array<[number, number, number, number, unknown[]]> {
  return m === null ? [] : [...m.entities()].map((e) => [e.id, e.kind, e.qx, e.qy, [...e.fields]]);
}

function worldView(entities: Map<number, FakeEntity>): Array<[number, number, number, number, unknown[]]> {
  return [...entities].sort((a, b) => a[0] - b[0]).map(([id, e]) => [id, e.kind, e.qx, e.qy, [...e.fields]]);
}

function datagramsOf(s: ServerSession): Inputs[] {
  return s.received.filter((m): m is Inputs => m.type === "inputs");
}

describe("control stream framing", () => {
  it("reassembles messages whatever the chunking, and frames them as varint length + message", () => {
    const msgs = [new Uint8Array([0x83, 1, 2, 3]), new Uint8Array(300).fill(7), new Uint8Array([0x84, 0x0b, 0])];
    const stream = new Uint8Array(msgs.reduce((n, m) => n + frameMessage(m).length, 0));
    let off = 0;
    for (const m of msgs) {
      stream.set(frameMessage(m), off);
      off += frameMessage(m).length;
    }
    assert.equal(toHex(frameMessage(msgs[1]!).subarray(0, 2)), "ac02", "300 as a varint");
    for (const size of [1, 2, 3, 7, 300, stream.length]) {
      const f = new MessageFramer();
      const out: Uint8Array[] = [];
      for (let i = 0; i < stream.length; i += size) out.push(...f.push(stream.subarray(i, i + size)));
      assert.deepEqual(out.map(toHex), msgs.map(toHex), `chunks of ${size}`);
      assert.equal(f.buffered, 0);
    }
  });

  it("refuses a length over the limit before buffering it, and malformed lengths", () => {
    const kind = (bytes: number[], max?: number): string => {
      try {
        new MessageFramer(max).push(Uint8Array.from(bytes));
        return "ok";
      } catch (e) {
        return e instanceof DecodeError ? e.kind : String(e);
      }
    };
    // 1 MiB + 1, announced with nothing after it: too long at once.
    assert.equal(kind([0x81, 0x80, 0x40]), "too_long");
    assert.equal(kind([0x80, 0x80, 0x40]), "ok", "exactly 1 MiB is allowed (and waits for its bytes)");
    assert.equal(kind([0x0b], 10), "too_long");
    assert.equal(kind([0x80, 0x00]), "non_canonical_varint");
    assert.equal(kind([0xff, 0xff, 0xff, 0xff, 0x1f]), "overflow");
    assert.equal(kind([0xff, 0xff, 0xff, 0xff, 0xff]), "overflow");
    const f = new MessageFramer();
    f.push(Uint8Array.from([0x80, 0x80, 0x40, 1, 2, 3]));
    assert.equal(f.buffered, 3, "a partial message holds only what arrived");
  });
});

describe("WebTransport discovery", () => {
  it("derives the HTTP origin and the session URL from the entry URL", () => {
    assert.equal(httpOriginOf("ws://127.0.0.1:7350/zones/a"), "http://127.0.0.1:7350");
    assert.equal(httpOriginOf("wss://game.example/zones/a?hops=1"), "https://game.example");
    assert.equal(httpOriginOf("https://game.example/zones/a"), null);
    assert.equal(webTransportSessionUrl("https://127.0.0.1:4434", ENTRY), "https://127.0.0.1:4434/zones/test-zone?room=blue");
    assert.equal(webTransportSessionUrl("https://h:1/", "wss://e/zones/a%20b"), "https://h:1/zones/a%20b");
    assert.equal(webTransportSessionUrl("https://h:1", "ws://e/elsewhere/a"), null);
    assert.deepEqual([...(base64ToBytes(CERT_B64) ?? [])], [...CERT]);
    assert.deepEqual([...(base64ToBytes("AQID") ?? [])], [1, 2, 3]);
    assert.deepEqual([...(base64ToBytes("AQI=") ?? [])], [1, 2]);
    assert.equal(base64ToBytes("A"), null);
    assert.equal(base64ToBytes("AQ*D"), null);
  });

  it("reads the host's answer, maps 404 to null and refuses anything else", async () => {
    const answer = (status: number, body: unknown) => async (url: string) => {
      assert.equal(url, "http://127.0.0.1:7350/webtransport");
      return { status, ok: status >= 200 && status < 300, json: async () => body };
    };
    const found = await discoverWebTransport(ENTRY, answer(200, { url: "https://127.0.0.1:4434", certificate_hashes: [{ algorithm: "sha-256", value: CERT_B64 }] }));
    assert.deepEqual(found, { url: "https://127.0.0.1:4434", certificateHashes: [{ algorithm: "sha-256", value: CERT }] });
    assert.deepEqual(await discoverWebTransport(ENTRY, answer(200, { url: "https://h", certificate_hashes: [] })), { url: "https://h", certificateHashes: [] });
    assert.equal(await discoverWebTransport(ENTRY, answer(404, null)), null);
    for (const [status, body] of [
      [500, {}],
      [200, { url: "http://h" }],
      [200, { url: "https://h", certificate_hashes: [{ algorithm: "sha-256", value: "not base64!" }] }],
      [200, { url: "https://h", certificate_hashes: "x" }],
    ] as const) {
      await assert.rejects(discoverWebTransport(ENTRY, answer(status, body)), /WebTransport discovery/);
    }
    await assert.rejects(discoverWebTransport(ENTRY, async () => Promise.reject(new Error("offline"))), /offline/);
  });
});

describe("Inputs and Events codec rules", () => {
  const input = (seq: number) => ({ seq, viewTick: 5, payload: new Uint8Array([seq]) });
  it("an Inputs datagram carries at most 8 inputs, ascending", () => {
    const eight: Inputs = { type: "inputs", stateAck: 9, inputs: [1, 2, 3, 4, 5, 6, 7, 8].map(input) };
    assert.deepEqual(decodeClientMessage(encodeClientMessage(eight)), eight);
    assert.throws(() => encodeClientMessage({ ...eight, inputs: [...eight.inputs, input(9)] }), (e: unknown) => e instanceof EncodeError && e.kind === "too_long");
    assert.throws(() => encodeClientMessage({ ...eight, inputs: [input(2), input(2)] }), (e: unknown) => e instanceof EncodeError && e.kind === "invalid");
    assert.throws(() => encodeClientMessage({ ...eight, inputs: [input(0)] }), (e: unknown) => e instanceof EncodeError && e.kind === "invalid");
    assert.equal(LIMITS.datagramInputs, 8);
  });

  it("an Events message carries 1..=1024 events", () => {
    const ev = (topic: number): ZoneEvent => ({ topic, payload: new Uint8Array([topic & 0xff]) });
    const m = { type: "events" as const, tick: 77, events: [ev(1), ev(513)] };
    assert.deepEqual(decodeServerMessage(encodeServerMessage(m)), m);
    assert.throws(() => encodeServerMessage({ ...m, events: [] }), (e: unknown) => e instanceof EncodeError && e.kind === "invalid");
    assert.throws(() => encodeServerMessage({ ...m, events: Array.from({ length: 1025 }, () => ev(1)) }), (e: unknown) => e instanceof EncodeError && e.kind === "too_long");
    // 1025 announced: too long before the events are read.
    assert.throws(() => decodeServerMessage(Uint8Array.from([0x8a, 0x01, 0x81, 0x08])), (e: unknown) => e instanceof DecodeError && e.kind === "too_long");
  });
});

describe("ZoneConnection over WebTransport", () => {
  it("discovers, pins the certificate, sends the Hello framed on one stream and applies States from datagrams", async () => {
    const { sched, server, conn, welcomes, fallbacks } = setup();
    server.entities.set(7, { kind: 0, qx: 10, qy: 20, fields: [50, "seven"] });
    const history = new Map<number, ReturnType<typeof worldView>>();
    server.run((tick) => {
      const e = server.entities.get(7);
      if (e !== undefined) e.qx = 10 + tick;
      if (tick % 40 === 0) server.entities.set(1000 + tick, { kind: 0, qx: tick, qy: 0, fields: [1, "new"] });
      if (tick % 40 === 20) server.entities.delete(1000 + tick - 20);
      history.set(tick, worldView(server.entities));
    });
    const deltas: Array<[number, Mirror]> = [];
    conn.on("delta", (d, info) => deltas.push([d.tick, info.mirror]));
    const welcome = conn.connect();
    await run(sched, 300);
    const w = await welcome;
    assert.equal(w.version, 11);
    assert.equal(conn.transport, "webtransport");
    assert.deepEqual(welcomes, [{ resumed: false, transport: "webtransport", transfer: null }]);
    assert.deepEqual(fallbacks, []);
    assert.deepEqual(server.fetched, ["http://127.0.0.1:7350/webtransport"]);
    assert.equal(server.wtOpened.length, 1);
    const opened = server.wtOpened[0]!;
    assert.equal(opened.url, "https://127.0.0.1:4434/zones/test-zone?room=blue");
    const pinned = opened.options?.serverCertificateHashes?.[0];
    assert.equal(pinned?.algorithm, "sha-256");
    assert.ok(pinned?.value instanceof ArrayBuffer);
    assert.deepEqual([...new Uint8Array(pinned.value)], [...CERT]);
    const session = server.last;
    assert.ok(session.wt !== null, "the host saw a WebTransport session");
    assert.equal(session.wt.streamsOpened, 1, "one bidirectional stream");
    const hello = session.received[0];
    assert.ok(hello?.type === "hello");
    assert.deepEqual(hello.versions, [6, 7, 8, 9, 10, 11]);
    assert.equal(session.received[1]?.type, "ping", "pings go on the stream");
    await run(sched, 3000);
    assert.ok(deltas.length > 60, `${deltas.length} States applied`);
    // The zone runs on: the client shows the world of the newest State it applied.
    assert.ok(server.tick - conn.latestTick <= 1);
    assert.deepEqual(view(conn.mirror), history.get(conn.latestTick));
    assert.equal(conn.controlledId, 101);
    assert.ok(conn.stats.datagramsIn >= deltas.length);
    assert.equal(conn.stateStats.applied, deltas.length);
    // Acknowledged: after the first, the host wrote its States against acknowledged states.
    assert.equal(session.stateBases[0], 0, "the first State is a BASELINE");
    assert.ok(session.stateBases.slice(5).every((b) => b > 0), "then against what the client acknowledged");
    // Every ack-only datagram carries no input and goes at most once per patch.
    const acks = datagramsOf(session);
    assert.ok(acks.length > 0 && acks.every((d) => d.inputs.length === 0));
    assert.ok(acks.length <= deltas.length);
    conn.close();
  });

  it("survives lost, repeated and reordered States: every state shown is the host's at that tick", async () => {
    const { sched, server, conn } = setup();
    const r = rng(7);
    server.patchEvery = 2;
    server.datagramLatency = () => 15 + r() * 90;
    server.datagramLoss = () => r() < 0.25;
    server.datagramDuplicate = () => r() < 0.1;
    const history = new Map<number, ReturnType<typeof worldView>>();
    for (let id = 1; id <= 6; id++) server.entities.set(id, { kind: 0, qx: id * 100, qy: 0, fields: [100, `e${id}`] });
    let moving = true;
    server.run((tick) => {
      history.set(tick, worldView(server.entities));
      if (!moving) return;
      for (const [id, e] of server.entities) {
        if (id < 100) {
          e.qx += (id % 3) - 1 + (tick % 50 === 0 ? 500 : 0);
          e.qy += 1;
          if (tick % 17 === id) e.fields[0] = (tick * 7) % 128;
        }
      }
      if (tick % 30 === 0) server.entities.set(50 + ((tick / 30) % 10), { kind: 0, qx: 0, qy: 0, fields: [3, "x"] });
      if (tick % 30 === 15) server.entities.delete(50 + (((tick - 15) / 30) % 10));
      if (tick % 10 === 0) server.raise(tick % 7, new Uint8Array([tick & 0xff, (tick >> 8) & 0xff]));
      history.set(tick, worldView(server.entities));
    });
    const shown: number[] = [];
    conn.on("delta", (d, info) => {
      shown.push(d.tick);
      // The BASELINE at the Welcome's tick holds the player, who joined after that tick was recorded.
      if (d.tick <= (conn.welcome?.tick ?? 0)) return;
      assert.deepEqual(view(info.mirror), history.get(d.tick), `the state of tick ${d.tick}`);
    });
    const events: Array<[number, number]> = [];
    conn.on("event", (ev, tick) => {
      assert.deepEqual([...ev.payload], [tick & 0xff, (tick >> 8) & 0xff]);
      events.push([tick, ev.topic]);
    });
    void conn.connect();
    await run(sched, 6000);
    assert.equal(conn.transport, "webtransport");
    const stats = conn.stateStats;
    assert.ok(stats.applied > 50 && stats.stale > 0, JSON.stringify(stats));
    for (let i = 1; i < shown.length; i++) assert.ok(shown[i]! > shown[i - 1]!, "shown ticks only grow");
    // Events ride the stream: every one arrives, once, in order.
    const limit = server.tick - 2; // later ones may still be on their way
    const raised = [...history.keys()].filter((t) => t % 10 === 0 && t > shown[0]! && t <= limit).map((t) => [t, t % 7]);
    assert.ok(raised.length > 10);
    assert.deepEqual(events.filter(([t]) => t > shown[0]! && t <= limit), raised);
    // Once the world stops and States get through, the client shows it exactly.
    moving = false;
    server.datagramLoss = () => false;
    await run(sched, 500);
    assert.deepEqual(view(conn.mirror), worldView(server.entities));
    conn.close();
  });

  it("sends inputs in Inputs datagrams that repeat the unacknowledged ones, so none is lost", async () => {
    const { sched, server, conn } = setup();
    const r = rng(3);
    server.patchEvery = 2;
    server.datagramLoss = () => r() < 0.3;
    server.datagramLatency = () => 10 + r() * 40;
    server.applyInput = (e, payload) => {
      e.qx += payload[0] ?? 0;
    };
    server.run();
    void conn.connect();
    await run(sched, 400);
    const seqs: number[] = [];
    for (let i = 0; i < 200; i++) {
      const seq = conn.sendInput(new Uint8Array([1 + (i % 3)]));
      assert.ok(seq !== null);
      seqs.push(seq);
      await run(sched, 16, 4);
    }
    assert.deepEqual(seqs, Array.from({ length: 200 }, (_, i) => i + 1));
    server.datagramLoss = () => false;
    await run(sched, 1000);
    const session = server.last;
    assert.deepEqual(session.applied, seqs, "every input applied once, in order, despite 30% loss");
    const sent = datagramsOf(session).filter((d) => d.inputs.length > 0);
    for (const d of sent) {
      assert.ok(d.inputs.length <= LIMITS.datagramInputs);
      for (let i = 1; i < d.inputs.length; i++) assert.equal(d.inputs[i]!.seq, d.inputs[i - 1]!.seq + 1);
    }
    assert.ok(sent.some((d) => d.inputs.length > 1), "unacknowledged inputs are repeated");
    // Once acknowledged, inputs are no longer repeated: the last datagrams carry none.
    const last = datagramsOf(session).slice(-3);
    assert.ok(last.every((d) => d.inputs.length === 0), JSON.stringify(last.map((d) => d.inputs.length)));
    assert.equal(conn.ack, 200);
    // The player moved by what the inputs said (1 + 2 + 3 per three inputs).
    const me = conn.mirror?.get(101);
    assert.equal(me?.qx, server.entities.get(101)?.qx);
    assert.equal(me?.qx, seqs.reduce((sum, _s, i) => sum + 1 + (i % 3), 0));
    conn.close();
  });

  it("refuses an input too large for a datagram instead of letting the platform drop it", async () => {
    const { sched, server, conn } = setup();
    server.maxDatagramSize = 100;
    void conn.connect();
    await run(sched, 300);
    assert.equal(conn.sendInput(new Uint8Array(80)), 1);
    assert.throws(() => conn.sendInput(new Uint8Array(120)), (e: unknown) => e instanceof EncodeError && e.kind === "too_long");
    // The refused one used no seq; the older pending input gives way to a newer one that fits.
    assert.equal(conn.sendInput(new Uint8Array(80)), 2);
    await run(sched, 200);
    assert.deepEqual(server.last.applied, [1, 2]);
    const sizes = datagramsOf(server.last).map((d) => d.inputs.map((i) => i.seq));
    assert.ok(sizes.every((seqs) => seqs.length <= 1), "two 80-byte inputs never share a 100-byte datagram");
    // An input waits for its acknowledgement (its datagram lost) when the path's datagrams shrink:
    // the acknowledgements that follow shed it rather than fail.
    server.datagramLoss = () => true;
    assert.equal(conn.sendInput(new Uint8Array(80)), 3);
    await run(sched, 20);
    server.datagramLoss = () => false;
    server.maxDatagramSize = 50;
    server.run();
    await run(sched, 300);
    assert.equal(conn.state, "open");
    const later = datagramsOf(server.last).slice(-3);
    assert.ok(later.length === 3 && later.every((d) => d.inputs.length === 0), "ack-only");
    assert.deepEqual(server.last.applied, [1, 2]);
    conn.close();
  });

  it("acknowledges with ack-only datagrams at most once per patch", async () => {
    const { sched, server, conn } = setup();
    server.patchEvery = 3; // 100 ms per patch at 30 Hz
    server.datagramLatency = (() => {
      // Three States sent 100 ms apart arrive within 15 ms: the hold after the first (20 ms)
      // covers all three, and one datagram acknowledges the newest.
      let n = 0;
      return () => [190, 95, 5][n++ % 3] ?? 0;
    })();
    server.datagramUpLatency = () => 10;
    server.run();
    void conn.connect();
    await run(sched, 3300);
    const session = server.last;
    const sentAt = session.wt?.datagramsSentAt ?? [];
    const acks = datagramsOf(session);
    assert.equal(acks.length, sentAt.length, "none lost");
    assert.ok(acks.every((d) => d.inputs.length === 0), "no input to send: ack-only");
    assert.ok(acks.length >= 10 && acks.length <= 12, `${acks.length} ack-only datagrams for about 11 clumps of 3 States`);
    for (let i = 1; i < sentAt.length; i++) {
      assert.ok(sentAt[i]! - sentAt[i - 1]! >= 100 - 1e-9, `at most one per patch: ${sentAt[i - 1]} then ${sentAt[i]}`);
    }
    // (Datagrams may overtake each other on the way back too: order them by what they say.)
    const ticks = acks.map((d) => d.stateAck).sort((a, b) => a - b);
    for (let i = 1; i < ticks.length; i++) assert.ok(ticks[i]! > ticks[i - 1]!, "each acknowledges a newer State");
    assert.ok(server.tick - (ticks[ticks.length - 1] ?? 0) <= 9, "the host learns of recent States");
    assert.ok(conn.stateStats.applied > acks.length, "some States were acknowledged together with the next");
    conn.close();
  });

  it("lets the next input carry a State's acknowledgement, and sends it alone 20 ms after the State otherwise", async () => {
    const { sched, server, conn } = setup({}, 10);
    server.patchEvery = 6; // 200 ms per patch at 30 Hz
    server.run();
    void conn.connect();
    await run(sched, 600);
    assert.equal(conn.state, "open");
    const sentAt = server.last.wt?.datagramsSentAt ?? [];
    // An input 10 ms after each State: every datagram is an input's, none an acknowledgement alone.
    const start = sched.now();
    let applied = conn.stateStats.applied;
    let inputAt = Number.POSITIVE_INFINITY;
    let inputs = 0;
    while (inputs < 9 && sched.now() < start + 4000) {
      await run(sched, 1, 1);
      if (conn.stateStats.applied > applied) {
        applied = conn.stateStats.applied;
        inputAt = sched.now() + 10;
      }
      if (sched.now() >= inputAt) {
        assert.ok(conn.sendInput(new Uint8Array([1])) !== null);
        inputs += 1;
        inputAt = Number.POSITIVE_INFINITY;
      }
    }
    // Under the hold: a State arriving now could not be acknowledged alone yet.
    await run(sched, 15, 1);
    const during = sentAt.filter((t) => t >= start);
    assert.equal(inputs, 9, "States kept coming");
    assert.equal(during.length, inputs, "no datagram went for an acknowledgement alone");
    const withInputs = datagramsOf(server.last).slice(-inputs); // each arrived 10 ms after it went
    assert.ok(withInputs.every((d) => d.inputs.length > 0));
    for (let i = 1; i < withInputs.length; i++) {
      assert.ok(withInputs[i]!.stateAck > withInputs[i - 1]!.stateAck, "each input acknowledged the State before it");
    }
    // No input: the acknowledgement goes alone, 20 ms after the State was applied.
    await run(sched, 400, 1);
    const quietFrom = sentAt.length;
    const appliedAt: number[] = [];
    applied = conn.stateStats.applied;
    const until = sched.now() + 1000;
    while (sched.now() < until) {
      await run(sched, 1, 1);
      if (conn.stateStats.applied > applied) {
        applied = conn.stateStats.applied;
        appliedAt.push(sched.now());
      }
    }
    const alone = sentAt.slice(quietFrom);
    assert.ok(appliedAt.length >= 4, `${appliedAt.length} States applied`);
    assert.deepEqual(
      alone.slice(0, appliedAt.length - 1).map((t, i) => t - appliedAt[i]!),
      appliedAt.slice(1).map(() => 20),
      "each acknowledged alone 20 ms after it was applied",
    );
    conn.close();
  });

  it("applies a State too large for a datagram from the control stream", async () => {
    const { sched, server, conn } = setup();
    server.maxDatagramSize = 16;
    for (let id = 1; id <= 20; id++) server.entities.set(id, { kind: 0, qx: id, qy: id, fields: [id, `n${id}`] });
    server.run((tick) => {
      for (const e of server.entities.values()) e.qx += tick % 2;
    });
    void conn.connect();
    await run(sched, 1000);
    assert.equal(conn.stats.datagramsIn, 0);
    assert.ok(conn.stateStats.applied > 10);
    assert.deepEqual(view(conn.mirror), worldView(server.entities));
    conn.close();
  });

  it("a Kick on the stream ends the session as over WebSocket; a close code 4000 + k stands for Kick k", async () => {
    const { sched, server, conn, closes } = setup();
    const kicks: number[] = [];
    conn.on("kick", (k) => kicks.push(k.code));
    void conn.connect();
    await run(sched, 300);
    server.kick(server.last, KickCode.SHUTTING_DOWN, "restart");
    await run(sched, 100);
    assert.deepEqual(kicks, [KickCode.SHUTTING_DOWN]);
    assert.equal(closes[0]?.kick?.code, KickCode.SHUTTING_DOWN);
    assert.equal(closes[0]?.code, 4012);
    assert.equal(closes[0]?.willReconnect, true);
    await run(sched, 1000);
    assert.equal(conn.state, "open");
    assert.equal(conn.transport, "webtransport", "the reconnect went over WebTransport again");
    assert.equal(server.sessions.filter((s) => s.wt !== null).length, 2);
    // The session closes with 4027 and no Kick: CONTENT_OUTDATED all the same.
    const reloads: string[] = [];
    conn.on("reload", (r) => reloads.push(r.message));
    server.last.socket.drop(4027, "");
    await run(sched, 200);
    assert.equal(reloads.length, 1);
    assert.equal(conn.state, "closed");
    assert.equal(closes[closes.length - 1]?.reload, true);
  });

  it("resumes at once over WebTransport after ZONE_MOVED, repeating inputs no State acknowledged", async () => {
    const { sched, server, conn, closes, welcomes } = setup();
    server.run();
    void conn.connect();
    await run(sched, 300);
    // The input's datagram is lost, then the zone moves: the resumed session repeats it.
    server.datagramLoss = () => true;
    assert.equal(conn.sendInput(new Uint8Array([9])), 1);
    await run(sched, 50);
    server.datagramLoss = () => false;
    server.kick(server.last, KickCode.ZONE_MOVED, "moved");
    await run(sched, 500);
    assert.deepEqual(welcomes, [
      { resumed: false, transport: "webtransport", transfer: null },
      { resumed: true, transport: "webtransport", transfer: null },
    ]);
    assert.equal(closes.length, 0, "a move that lands at once is not a close");
    // The resumed session's first acknowledgement repeated the input the lost datagram held.
    assert.deepEqual(server.sessions.map((s) => s.applied), [[], [1]]);
    assert.equal(conn.sendInput(new Uint8Array([1])), 2, "the resumed player's sequence continues");
    await run(sched, 200);
    assert.deepEqual(server.last.applied, [1, 2]);
    conn.close();
  });

  it("follows a Redirect over WebTransport: the owner is asked where its sessions are", async () => {
    const { sched, server, conn, fallbacks } = setup();
    server.redirect = (_h, s) => (s.wt !== null && server.sessions.length === 1 ? "ws://127.0.0.1:7350/zones/test-zone?hops=1" : null);
    const redirects: string[] = [];
    conn.on("redirect", (r) => redirects.push(r.url));
    void conn.connect();
    await run(sched, 500);
    assert.equal(conn.state, "open");
    assert.equal(conn.transport, "webtransport");
    assert.deepEqual(redirects, ["ws://127.0.0.1:7350/zones/test-zone?hops=1"]);
    assert.deepEqual(server.fetched, ["http://127.0.0.1:7350/webtransport", "http://127.0.0.1:7350/webtransport"]);
    assert.equal(server.wtOpened[1]?.url, "https://127.0.0.1:4434/zones/test-zone?hops=1", "the hop count travels on");
    assert.ok(server.last.wt !== null, "the owner's session is a WebTransport one");
    assert.deepEqual(fallbacks, []);
    assert.equal(conn.webTransportDisabled, false);
    const hellos = server.sessions.map((s) => s.received[0]).map((m) => toHex(encodeClientMessage(m!)));
    assert.equal(hellos[0], hellos[1], "the same Hello at the hop");
    conn.close();
  });

  it("goes over WebSocket to an owner without WebTransport, and says why", async () => {
    const { sched, server, conn, fallbacks } = setup();
    server.redirect = (_h, s) => {
      if (s.wt === null || server.sessions.length !== 1) return null;
      // The owner serves no WebTransport.
      server.wtEndpoint = null;
      return "ws://127.0.0.1:7350/zones/test-zone?hops=1";
    };
    void conn.connect();
    await run(sched, 500);
    assert.equal(conn.state, "open");
    assert.equal(conn.transport, "websocket");
    assert.equal(server.last.url, "ws://127.0.0.1:7350/zones/test-zone?hops=1", "straight to the owner");
    assert.equal(fallbacks.length, 1);
    assert.match(fallbacks[0]?.reason ?? "", /the zone's owner serves no WebTransport/);
    conn.close();
  });

  it("a Kick before the Welcome is the host's answer, not a reason to fall back", async () => {
    const { sched, server, conn, fallbacks, closes } = setup({ reconnect: { maxAttempts: 0 } });
    server.checkTicket = () => KickCode.TICKET_WRONG_ZONE;
    const p = conn.connect();
    await run(sched, 5000);
    await assert.rejects(p);
    assert.deepEqual(fallbacks, []);
    assert.equal(closes[0]?.kick?.code, KickCode.TICKET_WRONG_ZONE);
    assert.equal(server.sessions.length, 1);
    assert.ok(server.sessions[0]?.wt !== null);
  });
});

describe("ZoneConnection transport choice", () => {
  it("auto: a host without WebTransport (404) gets WebSocket at once, remembered for the connection and the page", async () => {
    const { sched, server, conn, memory, fallbacks, welcomes } = setup();
    server.wtEndpoint = null;
    await Promise.all([conn.connect(), run(sched, 300)]);
    assert.equal(conn.transport, "websocket");
    assert.deepEqual(welcomes, [{ resumed: false, transport: "websocket", transfer: null }]);
    assert.equal(fallbacks.length, 1);
    assert.equal(fallbacks[0]?.remembered, true);
    assert.match(fallbacks[0]?.reason ?? "", /404/);
    assert.equal(memory.getItem(transportMemoryKey(ENTRY)), "websocket");
    assert.equal(server.last.url, ENTRY);
    assert.equal(server.last.received[0]?.type, "hello");
    server.wtEndpoint = { url: "https://127.0.0.1:4434", certificate_hashes: [] };
    server.last.socket.drop();
    await run(sched, 1000);
    assert.equal(conn.state, "open");
    assert.equal(conn.transport, "websocket");
    assert.equal(server.fetched.length, 1, "not asked again");
    conn.close();
  });

  it("auto: a session that never answers falls back after webTransportTimeoutMs; a reload does not wait again", async () => {
    const { sched, server, conn, memory, fallbacks } = setup({ webTransportTimeoutMs: 2000 });
    server.wtReady = "hang";
    const p = conn.connect();
    await run(sched, 1900);
    assert.equal(conn.state, "connecting");
    assert.equal(server.sessions.length, 0);
    await run(sched, 200);
    assert.equal(fallbacks.length, 1);
    assert.match(fallbacks[0]?.reason ?? "", /2000 ms/);
    await run(sched, 200);
    const w = await p;
    assert.equal(w.version, 11, "version 11 over WebSocket");
    assert.equal(conn.transport, "websocket");
    assert.equal(server.last.wt, null);
    conn.close();
    // The next page load with the same sessionStorage goes straight to WebSocket.
    const again = new ZoneConnection({
      url: ENTRY,
      transport: "auto",
      ticket: async () => "t",
      socket: server.factory,
      webTransport: server.webTransport,
      fetch: server.fetch,
      transportMemory: memory,
      scheduler: sched,
    });
    assert.equal(again.webTransportDisabled, true);
    const fetchedBefore = server.fetched.length;
    const p2 = again.connect();
    await run(sched, 200);
    await p2;
    assert.equal(again.transport, "websocket");
    assert.equal(server.fetched.length, fetchedBefore);
    again.close();
  });

  it("auto: a refused session falls back at once", async () => {
    const { sched, server, conn, fallbacks } = setup();
    server.wtReady = "fail";
    let fellBackAt = 0;
    conn.on("fallback", () => (fellBackAt = sched.now()));
    await Promise.all([conn.connect(), run(sched, 300)]);
    assert.equal(conn.transport, "websocket");
    assert.equal(fallbacks.length, 1);
    assert.ok(fellBackAt > 0 && fellBackAt <= 1000 + 50, `discovery and the refusal, no timeout: ${fellBackAt}`);
    conn.close();
  });

  it("webtransport: a refused session is a failed attempt, retried; a 404 uses WebSocket for that attempt", async () => {
    const { sched, server, conn, closes, fallbacks } = setup({ transport: "webtransport" });
    server.wtReady = "fail";
    void conn.connect();
    await run(sched, 200);
    assert.equal(closes.length, 1);
    assert.equal(closes[0]?.willReconnect, true);
    assert.equal(closes[0]?.code, 1006);
    assert.equal(server.sessions.length, 0, "no WebSocket tried");
    server.wtReady = "ok";
    await run(sched, 1000);
    assert.equal(conn.state, "open");
    assert.equal(conn.transport, "webtransport");
    assert.equal(fallbacks.length, 0);
    server.wtEndpoint = null;
    server.last.socket.drop(4012);
    await run(sched, 1000);
    assert.equal(conn.transport, "websocket");
    assert.deepEqual(fallbacks.map((f) => f.remembered), [false]);
    server.wtEndpoint = { url: "https://127.0.0.1:4434", certificate_hashes: [] };
    server.last.socket.drop();
    await run(sched, 1000);
    assert.equal(conn.transport, "webtransport", "asked again: not remembered");
    assert.equal(server.wtOpened[server.wtOpened.length - 1]?.options, undefined, "no hashes to pin");
    conn.close();
  });

  it("websocket mode, a client offering only version 5, or an entry URL naming no zone never try WebTransport", async () => {
    for (const options of [{ transport: "websocket" as const }, { versions: [5] }, { url: "ws://127.0.0.1:7350/elsewhere" }]) {
      const { sched, server, conn } = setup(options);
      await Promise.all([conn.connect(), run(sched, 200)]);
      assert.equal(conn.transport, "websocket", JSON.stringify(options));
      assert.deepEqual(server.fetched, []);
      if (options.versions !== undefined) assert.equal(conn.welcome?.version, 5);
      conn.close();
    }
  });

  it("a State or Events message over WebSocket is a protocol error", async () => {
    for (const bytes of [Uint8Array.from([0x89, 0x0a, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00]), Uint8Array.from([0x8a, 0x01, 0x01, 0x01, 0x00])]) {
      const { sched, server, conn, closes } = setup({ transport: "websocket" });
      await Promise.all([conn.connect(), run(sched, 200)]);
      server.last.socket.push(bytes);
      await run(sched, 100);
      assert.equal(conn.state, "closed");
      assert.ok(closes[0]?.error instanceof DecodeError, String(closes[0]?.error));
    }
  });
});
