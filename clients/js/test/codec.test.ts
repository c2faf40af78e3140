import assert from "node:assert/strict";
import { describe, it } from "node:test";

import {
  DecodeError,
  decodeDelta,
  encodeDelta,
  fromHex,
  Mirror,
  Reader,
  toHex,
  Writer,
  type Delta,
  type Schema,
} from "../src/index.js";

const SHIP: Schema = {
  posStep: 0.01,
  kinds: [
    {
      name: "ship",
      fields: [
        { name: "hp", ty: { type: "quant", min: 0, max: 100, bits: 7 } },
        { name: "score", ty: { type: "uint" } },
        { name: "tag", ty: { type: "str", maxLen: 4 } },
      ],
    },
  ],
};

describe("wire primitives", () => {
  it("refuses non-canonical and overflowing varints like the Rust reader", () => {
    const kind = (hex: string, read: (r: Reader) => unknown): string => {
      try {
        read(new Reader(fromHex(hex)));
        return "ok";
      } catch (e) {
        return e instanceof DecodeError ? e.kind : String(e);
      }
    };
    assert.equal(kind("8000", (r) => r.varintU32()), "non_canonical_varint");
    assert.equal(kind("ffffffff0f", (r) => r.varintU32()), "ok");
    assert.equal(kind("ffffffff1f", (r) => r.varintU32()), "overflow");
    assert.equal(kind("8080808080", (r) => r.varintU32()), "truncated");
    assert.equal(kind("808080808000", (r) => r.varintU32()), "overflow");
    assert.equal(kind("ffffffffffffffffff01", (r) => r.varintU64Big()), "ok");
    assert.equal(kind("ffffffffffffffffff01", (r) => r.varintU64()), "overflow");
    assert.equal(kind("80", (r) => r.varintU32()), "truncated");
    assert.equal(kind("05616263", (r) => r.str(10)), "truncated");
    assert.equal(kind("0b", (r) => r.str(10)), "too_long");
    assert.equal(kind("01ff", (r) => r.str(10)), "invalid_utf8");
    assert.equal(kind("03efbbbf", (r) => r.str(10)), "ok", "a BOM is data, not stripped");
    assert.equal(toHex(new Writer().str("\ufeff", 10).finish()), "03efbbbf");
    assert.throws(() => new Writer().str("\ud800", 10));
  });
});

describe("Delta and Mirror", () => {
  it("matches the Rust writer's bytes and applies in the §5.5 order", () => {
    const known = [3, 5, 7, 9, 10].map((id) => [id, 0] as const);
    const delta: Delta = {
      tick: 300,
      ack: 7,
      baseline: false,
      control: 4,
      despawns: [3, 10],
      updates: [
        { index: 0, id: 5, kind: 0, pos: { form: "tiny", dx: 1, dy: -1 }, mask: 0, fields: [] },
        { index: 2, id: 9, kind: 0, pos: null, mask: 0b101, fields: [[0, 100], [2, "ab"]] },
      ],
      spawns: [{ id: 12, kind: 0, qx: -1, qy: 2, fields: [100, 300, "ab"] }],
      events: [{ topic: 2, payload: new Uint8Array([0x68, 0x69]) }],
    };
    const bytes = encodeDelta(delta, SHIP, known);
    assert.equal(
      toHex(bytes),
      // tag tick ack flags control | despawns 3,10 | 2 updates, gaps 0,1 | tiny, fields-only | spawn 12 | event
      "82ac020706" + "05" + "020306" + "02000001" + "46" + "840564026162" + "010c0001046" + "4ac02026162" + "0102026869",
    );
    assert.deepEqual(decodeDelta(bytes, SHIP, known), delta);

    const mirror = new Mirror(SHIP);
    mirror.apply({ tick: 1, ack: 0, baseline: true, despawns: [], updates: [], events: null, spawns: known.map(([id]) => ({ id, kind: 0, qx: id, qy: 0, fields: [1, 0, ""] })) });
    const { changes } = mirror.receive(bytes);
    assert.deepEqual(changes, { removed: [3, 10], updated: [5, 9], spawned: [12] });
    assert.deepEqual(mirror.known(), [[5, 0], [7, 0], [9, 0], [12, 0]]);
    assert.deepEqual([mirror.get(5)?.qx, mirror.get(5)?.qy], [6, -1]);
    assert.deepEqual(mirror.get(9)?.fields, [100, 0, "ab"]);
    // The same bytes again are inconsistent (3 is no longer known) and change nothing.
    assert.throws(() => mirror.receive(bytes), (e: unknown) => e instanceof DecodeError && e.kind === "invalid");
    assert.equal(mirror.size, 4);
  });
});
