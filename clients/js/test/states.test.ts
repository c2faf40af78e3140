/**
 * The client's state ring (PROTOCOL.md §5.8), in node with real State bytes: a host written here
 * keeps what it sent in its last 32 States and writes each new one against the newest state the
 * client acknowledged (or a BASELINE); the datagrams between them are lost, repeated and reordered.
 * Every state the ring shows must be exactly the host's world at that tick, and the change it
 * reports must be a valid Delta that takes the state shown before to the new one.
 */

import assert from "node:assert/strict";
import { describe, it } from "node:test";

import {
  canonicalPosForm,
  decodeDeltaHead,
  DecodeError,
  deltaBetween,
  encodeDelta,
  encodeServerMessage,
  LIMITS,
  Mirror,
  StateRing,
  type Delta,
  type FieldValue,
  type KnownEntry,
  type Schema,
  type Update,
} from "../src/index.js";
import { rng } from "./helpers.js";

const SCHEMA: Schema = {
  posStep: 0.01,
  kinds: [
    {
      name: "avatar",
      fields: [
        { name: "hp", ty: { type: "quant", min: 0, max: 100, bits: 7 } },
        { name: "name", ty: { type: "str", maxLen: 8 } },
        { name: "score", ty: { type: "uint" } },
      ],
    },
    { name: "pickup", fields: [{ name: "active", ty: { type: "bool" } }] },
  ],
};

interface Ent {
  kind: number;
  qx: number;
  qy: number;
  fields: FieldValue[];
}
type World = Map<number, Ent>;

function copyWorld(w: World): World {
  return new Map([...w].map(([id, e]) => [id, { ...e, fields: [...e.fields] }]));
}

/**
 * The State (bytes) taking `base` (null = the empty state: a BASELINE) to `world`, written as a
 * host would: despawns, canonical update records by index after the despawns, spawns.
 */
function stateBytes(tick: number, baseTick: number, base: World | null, world: World, ack = 0): Uint8Array {
  const baseline = base === null;
  const from = base ?? new Map<number, Ent>();
  const known: KnownEntry[] = [...from].sort((a, b) => a[0] - b[0]).map(([id, e]) => [id, e.kind] as const);
  const gone = (id: number, kind: number): boolean => world.get(id)?.kind !== kind;
  const despawns = known.filter(([id, kind]) => gone(id, kind)).map(([id]) => id);
  const after = known.filter(([id, kind]) => !gone(id, kind));
  const updates: Update[] = [];
  after.forEach(([id, kind], index) => {
    const was = from.get(id) as Ent;
    const now = world.get(id) as Ent;
    const fields: Array<[number, FieldValue]> = [];
    now.fields.forEach((v, i) => {
      if (v !== was.fields[i]) fields.push([i, v]);
    });
    const pos = canonicalPosForm(now.qx, now.qy, was.qx, was.qy, fields.length > 0);
    if (pos === null && fields.length === 0) return;
    updates.push({ index, id, kind, pos, mask: fields.reduce((m, [i]) => m | (1 << i), 0), fields });
  });
  const kept = new Set(after.map(([id]) => id));
  const spawns = [...world]
    .filter(([id]) => !kept.has(id))
    .sort((a, b) => a[0] - b[0])
    .map(([id, e]) => ({ id, kind: e.kind, qx: e.qx, qy: e.qy, fields: [...e.fields] }));
  const delta: Delta = { tick, ack, baseline, despawns: baseline ? [] : despawns, updates, spawns, events: null };
  return encodeServerMessage({ ...delta, type: "state", base: baseline ? 0 : baseTick }, { schema: SCHEMA, known });
}

/** The known set of a mirror as a world. */
function worldOf(m: Mirror): World {
  return new Map([...m.entities()].map((e) => [e.id, { kind: e.kind, qx: e.qx, qy: e.qy, fields: [...e.fields] }]));
}

function avatar(qx: number, qy: number, hp = 100, name = "a"): Ent {
  return { kind: 0, qx, qy, fields: [hp, name, 0] };
}

/** A world that changes every tick: moves small and large, field changes, spawns, despawns, a kind change. */
function evolve(world: World, tick: number, r: () => number): void {
  for (const [id, e] of world) {
    const roll = r();
    if (roll < 0.3) {
      e.qx += Math.floor(r() * 11) - 5;
      e.qy += Math.floor(r() * 11) - 5;
    } else if (roll < 0.35) {
      e.qx += Math.floor(r() * 4000) - 2000;
    } else if (roll < 0.4 && e.kind === 0) {
      e.fields[0] = Math.floor(r() * 128);
      e.fields[2] = (e.fields[2] as number) + 1;
    } else if (roll < 0.42 && e.kind === 1) {
      e.fields[0] = !(e.fields[0] as boolean);
    } else if (roll < 0.44) {
      world.delete(id);
    }
  }
  if (r() < 0.3) {
    const id = 1 + Math.floor(r() * 60);
    if (!world.has(id)) {
      world.set(id, r() < 0.7 ? avatar(Math.floor(r() * 1000), 0 - Math.floor(r() * 1000), 50, `e${id}`) : { kind: 1, qx: tick, qy: 0, fields: [true] });
    }
  }
  if (tick % 37 === 0) {
    // The same id comes back as another kind: a despawn and a spawn in one State.
    const first = [...world.keys()][0];
    const e = first === undefined ? undefined : world.get(first);
    if (first !== undefined && e !== undefined) {
      world.set(first, e.kind === 0 ? { kind: 1, qx: e.qx, qy: e.qy, fields: [false] } : avatar(e.qx, e.qy));
    }
  }
}

function ids(m: Mirror): number[] {
  return m.known().map(([id]) => id);
}

describe("Mirror.clone", () => {
  it("copies entities and tick; applying to one leaves the other as it was", () => {
    const a = new Mirror(SCHEMA);
    a.apply({ tick: 5, ack: 0, baseline: true, despawns: [], updates: [], events: null, spawns: [{ id: 1, kind: 0, qx: 1, qy: 2, fields: [10, "x", 0] }] });
    const b = a.clone();
    assert.equal(b.tick, 5);
    assert.deepEqual(worldOf(b), worldOf(a));
    b.apply({ tick: 6, ack: 0, baseline: false, despawns: [], events: null, spawns: [{ id: 2, kind: 1, qx: 0, qy: 0, fields: [true] }], updates: [{ index: 0, id: 1, kind: 0, pos: { form: "tiny", dx: 1, dy: 1 }, mask: 0, fields: [] }] });
    b.apply({ tick: 7, ack: 0, baseline: false, despawns: [], events: null, spawns: [], updates: [{ index: 0, id: 1, kind: 0, pos: null, mask: 1, fields: [[0, 99]] }] });
    assert.deepEqual(a.get(1), { id: 1, kind: 0, qx: 1, qy: 2, fields: [10, "x", 0] });
    assert.equal(a.size, 1);
    assert.equal(a.tick, 5);
    assert.deepEqual(b.get(1), { id: 1, kind: 0, qx: 2, qy: 3, fields: [99, "x", 0] });
    assert.equal(b.size, 2);
  });
});

describe("State codec", () => {
  it("reads a State's head without context and refuses what §5.8 forbids", () => {
    const w: World = new Map([[1, avatar(0, 0)]]);
    const bytes = stateBytes(1002, 998, w, w, 17);
    assert.deepEqual(decodeDeltaHead(bytes), { tag: 0x89, tick: 1002, base: 998, ack: 17, flags: 0, baseline: false });
    const baseline = stateBytes(1000, 0, null, w);
    assert.equal(decodeDeltaHead(baseline).baseline, true);
    const enc = (d: Partial<Delta>): string => {
      try {
        encodeDelta({ tick: 10, ack: 0, baseline: false, despawns: [], updates: [], spawns: [], events: null, ...d }, SCHEMA, []);
        return "ok";
      } catch (e) {
        return e instanceof Error ? e.message : String(e);
      }
    };
    assert.match(enc({ base: 5, baseline: true }), /base is 0 exactly when/);
    assert.match(enc({ base: 0 }), /base is 0 exactly when/);
    assert.match(enc({ base: 5, events: [] }), /no events/);
    assert.equal(enc({ base: 0, baseline: true }), "ok");
    assert.throws(() => encodeServerMessage({ type: "delta", tick: 1, ack: 0, baseline: true, despawns: [], updates: [], spawns: [], events: null, base: 0 }, { schema: SCHEMA, known: [] }), /a Delta has no base/);
  });
});

describe("StateRing", () => {
  it("ignores a late or repeated State and keeps the newest as the tick to acknowledge", () => {
    const ring = new StateRing(SCHEMA);
    const w1: World = new Map([[1, avatar(0, 0)]]);
    const w2: World = new Map([[1, avatar(3, 0)], [2, avatar(9, 9)]]);
    const w3: World = new Map([[2, avatar(9, 8)]]);
    const s1 = stateBytes(10, 0, null, w1);
    const s2 = stateBytes(12, 10, w1, w2);
    const s3 = stateBytes(14, 10, w1, w3);
    assert.equal(ring.ackTick, 0);
    assert.equal(ring.apply(s1).status, "applied");
    // 14 overtakes 12: 12 then comes too late.
    assert.equal(ring.apply(s3).status, "applied");
    const current = ring.current;
    assert.equal(ring.apply(s2).status, "stale");
    assert.equal(ring.apply(s3).status, "stale", "a repeated datagram");
    assert.equal(ring.apply(s1).status, "stale");
    assert.equal(ring.current, current, "nothing changed");
    assert.equal(ring.ackTick, 14);
    assert.deepEqual(worldOf(ring.current), w3);
    assert.deepEqual(ring.ticks(), [10, 14]);
  });

  it("drops a State whose base it no longer holds, or never held, and keeps the last 32", () => {
    const ring = new StateRing(SCHEMA);
    let prev: World = new Map([[1, avatar(0, 0)]]);
    assert.equal(ring.apply(stateBytes(1, 0, null, prev)).status, "applied");
    for (let t = 2; t <= 40; t++) {
      const next = copyWorld(prev);
      (next.get(1) as Ent).qx = t;
      assert.equal(ring.apply(stateBytes(t, t - 1, prev, next)).status, "applied");
      prev = next;
    }
    assert.equal(ring.size, LIMITS.stateRing);
    assert.deepEqual(ring.ticks(), Array.from({ length: 32 }, (_, i) => 9 + i));
    assert.ok(!ring.has(8) && ring.has(9) && ring.has(0));
    const w8: World = new Map([[1, avatar(8, 0)]]);
    const late = ring.apply(stateBytes(41, 8, w8, prev));
    assert.equal(late.status, "no_base", "tick 8 fell out of the ring");
    assert.equal(late.head.ack, 0);
    assert.equal(ring.apply(stateBytes(41, 1000, w8, prev)).status, "no_base", "a base never applied");
    assert.equal(ring.ackTick, 40, "nothing applied");
    // A base still held works, even an old one: 9 is the oldest kept.
    const w9 = new Map([[1, avatar(9, 0)]]);
    const res = ring.apply(stateBytes(41, 9, w9, new Map([[1, avatar(50, 0)]])));
    assert.equal(res.status, "applied");
    assert.deepEqual(ring.ticks()[0], 10, "9 made room for 41");
  });

  it("a BASELINE resets everything, reported as a BASELINE Delta", () => {
    const ring = new StateRing(SCHEMA);
    const w1: World = new Map([[1, avatar(0, 0)], [2, avatar(5, 5)], [3, avatar(7, 7)]]);
    ring.apply(stateBytes(10, 0, null, w1));
    const w2: World = new Map([[2, avatar(6, 5, 40)], [4, { kind: 1, qx: 1, qy: 1, fields: [true] }]]);
    const res = ring.apply(stateBytes(11, 0, null, w2, 3));
    assert.equal(res.status, "applied");
    if (res.status !== "applied") return;
    assert.deepEqual(worldOf(ring.current), w2);
    assert.equal(res.delta.baseline, true);
    assert.equal(res.delta.base, undefined, "the reported Delta has no base");
    assert.equal(res.state.base, 0);
    assert.deepEqual(res.changes, { removed: [1, 2, 3], updated: [], spawned: [2, 4] });
    // As a Delta it does to the state shown before exactly what the ring did.
    const follower = new Mirror(SCHEMA);
    follower.apply({ ...stateAsDelta(w1, 10) });
    const { changes } = follower.receive(encodeDelta(res.delta, SCHEMA, follower.known()));
    assert.deepEqual(changes, res.changes);
    assert.deepEqual(worldOf(follower), w2);
    // States against the states before the BASELINE still apply: they are still held.
    assert.equal(ring.apply(stateBytes(12, 10, w1, w1)).status, "applied");
    assert.deepEqual(worldOf(ring.current), w1);
  });

  it("reports a State against an older base as the change from the state shown", () => {
    const ring = new StateRing(SCHEMA);
    const a: World = new Map([[1, avatar(0, 0)]]);
    const b: World = new Map([[1, avatar(5, 0)], [2, avatar(1, 1)]]);
    const c: World = new Map([[1, avatar(7, 0, 90)], [3, avatar(2, 2)]]);
    ring.apply(stateBytes(10, 0, null, a));
    ring.apply(stateBytes(11, 10, a, b));
    // 11 was not acknowledged yet: 12 is written against 10 and repeats what 11 said about 1.
    const res = ring.apply(stateBytes(12, 10, a, c, 4));
    assert.equal(res.status, "applied");
    if (res.status !== "applied") return;
    assert.deepEqual(res.state.updates.map((u) => [u.id, u.pos]), [[1, { form: "nibbles", dx: 7, dy: 0 }]]);
    assert.deepEqual(res.delta, {
      tick: 12,
      ack: 4,
      baseline: false,
      despawns: [2],
      // From 11's (5, 0): a canonical record of the difference, with the changed hp.
      updates: [{ index: 0, id: 1, kind: 0, pos: { form: "nibbles", dx: 2, dy: 0 }, mask: 1, fields: [[0, 90]] }],
      spawns: [{ id: 3, kind: 0, qx: 2, qy: 2, fields: [100, "a", 0] }],
      events: null,
    });
    assert.deepEqual(res.changes, { removed: [2], updated: [1], spawned: [3] });
    assert.deepEqual(worldOf(res.mirror), c);
  });

  it("refuses a State that does not apply to its base and stays as it was", () => {
    const ring = new StateRing(SCHEMA);
    const a: World = new Map([[1, avatar(0, 0)]]);
    ring.apply(stateBytes(10, 0, null, a));
    const current = ring.current;
    // Written against a base with two entities: its update index 1 does not exist in 10's state.
    const wrongBase: World = new Map([[1, avatar(0, 0)], [2, avatar(0, 0)]]);
    const bytes = stateBytes(11, 10, wrongBase, new Map([[1, avatar(0, 0)], [2, avatar(3, 3)]]));
    assert.throws(() => ring.apply(bytes), (e: unknown) => e instanceof DecodeError && e.kind === "invalid");
    assert.equal(ring.current, current);
    assert.equal(ring.ackTick, 10);
    assert.throws(() => ring.apply(encodeDelta(stateAsDelta(a, 11), SCHEMA, [])), (e: unknown) => e instanceof DecodeError && e.kind === "unknown_tag", "a Delta is no State");
  });

  // A client ring smaller than the host's (capacity 6) also drops States whose base it let go.
  for (const [seed, capacity] of [[1, 32], [2, 32], [3, 32], [4, 6]] as const) {
    it(`under loss, duplication and reordering shows exactly the host's states, and equals applying its changes in order (seed ${seed}, ring ${capacity})`, () => {
      const r = rng(seed);
      const ring = new StateRing(SCHEMA, capacity);
      const world: World = new Map([[1, avatar(0, 0)], [2, avatar(100, 100)], [3, { kind: 1, qx: 5, qy: 5, fields: [true] }]]);
      const history = new Map<number, World>();
      // The host: what each of its last 32 States held, and the newest tick the client acknowledged.
      const sent = new Map<number, World>();
      let hostAck = 0;
      const inFlight: Array<{ at: number; bytes: Uint8Array }> = [];
      const acks: Array<{ at: number; tick: number }> = [];
      const follower = new Mirror(SCHEMA);
      let lastApplied = 0;
      const counts = { applied: 0, stale: 0, no_base: 0, baselines: 0 };
      for (let tick = 1; tick <= 600; tick++) {
        evolve(world, tick, r);
        history.set(tick, copyWorld(world));
        const base = sent.get(hostAck);
        const bytes = stateBytes(tick, hostAck, base === undefined || hostAck === 0 ? null : base, world, tick);
        if (base === undefined || hostAck === 0) counts.baselines += 1;
        sent.set(tick, copyWorld(world));
        while (sent.size > 32) sent.delete(sent.keys().next().value as number);
        // The network: 20% lost, 10% twice, each 0..4 ticks late (so they overtake each other);
        // a stretch of total loss makes the host's acknowledged base fall out of its ring.
        const blackout = tick > 300 && tick <= 345;
        if (!blackout && r() >= 0.2) {
          inFlight.push({ at: tick + Math.floor(r() * 5), bytes });
          if (r() < 0.1) inFlight.push({ at: tick + Math.floor(r() * 5), bytes });
        }
        // Deliver what is due, in arrival order.
        inFlight.sort((x, y) => x.at - y.at);
        while (inFlight.length > 0 && (inFlight[0]?.at ?? Infinity) <= tick) {
          const d = inFlight.shift()!;
          const before = worldOf(ring.current);
          const res = ring.apply(d.bytes);
          counts[res.status] += 1;
          if (res.status !== "applied") {
            assert.deepEqual(worldOf(ring.current), before, "an ignored State changes nothing");
            continue;
          }
          assert.ok(res.head.tick > lastApplied, "applied ticks only grow");
          lastApplied = res.head.tick;
          assert.deepEqual(worldOf(res.mirror), history.get(res.head.tick), `the state of tick ${res.head.tick}`);
          // The reported change is a valid Delta from the state shown before, doing the same.
          const { changes } = follower.receive(encodeDelta(res.delta, SCHEMA, follower.known()));
          assert.deepEqual(changes, res.changes);
          assert.deepEqual(worldOf(follower), worldOf(ring.current));
          assert.deepEqual(ids(follower), ids(ring.current));
          // The client acknowledges; the acknowledgement may be lost or late too.
          if (r() >= 0.2) acks.push({ at: tick + 1 + Math.floor(r() * 3), tick: ring.ackTick });
        }
        acks.sort((x, y) => x.at - y.at);
        while (acks.length > 0 && (acks[0]?.at ?? Infinity) <= tick) hostAck = Math.max(hostAck, acks.shift()!.tick);
        if (hostAck !== 0 && !sent.has(hostAck)) hostAck = 0; // older than the ring: a BASELINE next
      }
      assert.ok(counts.applied > 300, JSON.stringify(counts));
      assert.ok(counts.stale > 10, JSON.stringify(counts));
      if (capacity < 32) assert.ok(counts.no_base > 0, `States whose base the client let go: ${JSON.stringify(counts)}`);
      assert.ok(counts.baselines >= 2, `the blackout forced a BASELINE: ${JSON.stringify(counts)}`);
      assert.ok(ring.size <= capacity);
      // A last State gets through: the client shows the world as it is.
      const final = stateBytes(601, ring.ackTick, sent.get(ring.ackTick) ?? null, world);
      assert.equal(ring.apply(final).status, "applied");
      assert.deepEqual(worldOf(ring.current), world);
    });
  }

  it("deltaBetween takes one known set to another", () => {
    const from = new Mirror(SCHEMA);
    from.apply(stateAsDelta(new Map([[1, avatar(0, 0)], [2, avatar(1, 1)], [5, { kind: 1, qx: 0, qy: 0, fields: [true] }]]), 1));
    const to = new Mirror(SCHEMA);
    to.apply(stateAsDelta(new Map([[1, avatar(100000, 0, 7)], [5, avatar(0, 0)], [6, avatar(2, 2)]]), 2));
    const { delta, changes } = deltaBetween(from, to, { tick: 2, ack: 9, control: null });
    assert.deepEqual(delta.despawns, [2, 5], "5 changed kind: despawned and spawned again");
    assert.deepEqual(delta.spawns.map((s) => s.id), [5, 6]);
    assert.equal(delta.control, null);
    assert.deepEqual(changes, { removed: [2, 5], updated: [1], spawned: [5, 6] });
    const m = from.clone();
    m.receive(encodeDelta(delta, SCHEMA, from.known()));
    assert.deepEqual(worldOf(m), worldOf(to));
    assert.equal(deltaBetween(to, to, { tick: 3, ack: 0 }).delta.updates.length, 0);
  });
});

/** A BASELINE Delta holding `w`. */
function stateAsDelta(w: World, tick: number): Delta {
  return {
    tick,
    ack: 0,
    baseline: true,
    despawns: [],
    updates: [],
    events: null,
    spawns: [...w].sort((a, b) => a[0] - b[0]).map(([id, e]) => ({ id, kind: e.kind, qx: e.qx, qy: e.qy, fields: [...e.fields] })),
  };
}
