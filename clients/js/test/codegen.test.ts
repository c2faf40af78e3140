/**
 * Code written by `zonekeep codegen` (test/generated/sample.ts, for the sample kind of
 * crates/zonekeep-codegen/tests/sample) against the hand-written vectors every SDK checks
 * (tests/fixtures/codegen/vectors.json): inputs encode to exactly their bytes, events decode to
 * exactly their values, malformed events are refused, entities read to their values, and binding a
 * schema finds kinds by name and refuses a schema that differs.
 */

import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { dirname, resolve } from "node:path";
import { describe, it } from "node:test";
import { fileURLToPath } from "node:url";

import { DecodeError, EncodeError, fromHex, SchemaMismatchError, toHex, type FieldValue, type KindDef, type Schema } from "../src/index.js";
import {
  BIG,
  ChatEvent,
  HitEvent,
  MAX_THRUST,
  NEG,
  RockEntity,
  SampleEvent,
  SampleKinds,
  SayInput,
  ShipEntity,
  SteerInput,
  TallyEvent,
  WideInput,
} from "./generated/sample.js";

const PACKAGE_ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "..", "..");
type Json = null | boolean | number | string | Json[] | { [k: string]: Json };
type Obj = { [k: string]: Json };
const vectors = JSON.parse(
  readFileSync(resolve(PACKAGE_ROOT, "../../tests/fixtures/codegen/vectors.json"), "utf8"),
) as Obj;

function list(key: string): Obj[] {
  return vectors[key] as Obj[];
}

/** A vector's value in the generated code's form: u64/i64 strings → bigint, bytes hex → Uint8Array. */
function value(v: Json, name: string): unknown {
  if (typeof v === "string" && /^(a_u64|d_i64|count|delta)$/.test(name)) return BigInt(v);
  if (typeof v === "string" && /^(g_bytes|i_rest|data|tail)$/.test(name)) return fromHex(v);
  return v;
}

function camel(snake: string): string {
  return snake.replace(/_([a-z0-9])/g, (_, c: string) => c.toUpperCase());
}

function values(o: Obj): Record<string, unknown> {
  return Object.fromEntries(Object.entries(o).map(([k, v]) => [camel(k), value(v, k)]));
}

describe("generated inputs", () => {
  it("encode every vector to exactly its bytes", () => {
    for (const v of list("inputs")) {
      const input = values(v.values as Obj);
      const encode = { steer: SteerInput.encode, say: SayInput.encode, wide: WideInput.encode }[v.input as string];
      assert.ok(encode, `no input ${String(v.input)}`);
      assert.equal(toHex((encode as (i: unknown) => Uint8Array)(input)), v.bytes, JSON.stringify(v));
    }
  });

  it("leave out absent optional values and refuse values their type cannot hold", () => {
    assert.equal(toHex(SteerInput.encode({ turn: 1, thrust: 2 })), "01010200");
    assert.equal(toHex(SteerInput.encode({ turn: 0, thrust: 0, trim: -0 })), "010000000000000080");
    assert.throws(() => SteerInput.encode({ turn: 200, thrust: 0 }), EncodeError);
    assert.throws(() => SteerInput.encode({ turn: 0, thrust: 1.5 }), EncodeError);
    const wide = values(list("inputs")[5]?.values as Obj) as unknown as WideInput;
    assert.throws(() => WideInput.encode({ ...wide, aU64: -1n }), EncodeError);
  });

  it("carry their tags and the contract's constants", () => {
    assert.deepEqual([SteerInput.tag, SayInput.tag, WideInput.tag], [1, 2, 3]);
    assert.equal(MAX_THRUST, 1000);
    assert.equal(NEG, -3);
    assert.equal(BIG, 9007199254740993n);
  });
});

describe("generated events", () => {
  it("decode every vector to exactly its values, alone and through the dispatcher", () => {
    for (const v of list("events")) {
      const bytes = fromHex(v.bytes as string);
      const want = values(v.values as Obj);
      const got = SampleEvent.decode(v.topic as number, bytes);
      assert.ok(got !== null);
      assert.equal(got.type, v.event);
      assert.deepEqual(got.event, want, JSON.stringify(v));
      const alone = { hit: HitEvent, chat: ChatEvent, tally: TallyEvent }[v.event as string];
      if (alone !== undefined) assert.deepEqual(alone.decode(bytes), want);
    }
  });

  it("refuse every malformed payload with a DecodeError", () => {
    for (const v of list("bad_events")) {
      assert.throws(() => SampleEvent.decode(v.topic as number, fromHex(v.bytes as string)), DecodeError, v.why as string);
    }
  });

  it("leave unknown topics to the caller", () => {
    for (const t of vectors.unknown_topics as number[]) assert.equal(SampleEvent.decode(t, new Uint8Array(4)), null);
  });
});

describe("generated entity kinds", () => {
  it("read wire-form fields to their values", () => {
    for (const v of list("entities")) {
      const fields = v.fields as FieldValue[];
      const got = v.kind === "ship" ? ShipEntity.read(fields) : RockEntity.read(fields);
      const want = values(v.values as Obj);
      assert.deepEqual(Object.keys(got), Object.keys(want));
      for (const [k, w] of Object.entries(want)) {
        assert.ok(Object.is((got as Record<string, unknown>)[k], w), `${String(v.kind)}.${k}: ${String((got as Record<string, unknown>)[k])} vs ${String(w)}`);
      }
    }
    assert.deepEqual(ShipEntity.fields, { xVel: 0, heading: 1, lean: 2, hp: 3, teamDelta: 4, alive: 5, callsign: 6, mass: 7 });
    assert.equal(ShipEntity.read([]).callsign, "");
  });

  function schema(): Schema {
    const ship: KindDef = {
      name: "ship",
      fields: [
        { name: "x-vel", ty: { type: "quant", min: -8, max: 8, bits: 4 } },
        { name: "heading", ty: { type: "angle", bits: 2 } },
        { name: "lean", ty: { type: "centered", range: 2, bits: 8 } },
        { name: "hp", ty: { type: "uint" } },
        { name: "teamDelta", ty: { type: "sint" } },
        { name: "alive", ty: { type: "bool" } },
        { name: "callsign", ty: { type: "str", maxLen: 16 } },
        { name: "mass", ty: { type: "f32" } },
      ],
    };
    const bind = vectors.bind as Obj;
    const byName: Record<string, KindDef> = { ship, rock: { name: "rock", fields: [] } };
    return { posStep: 0.01, kinds: (bind.schema_kinds as string[]).map((n) => byName[n] as KindDef) };
  }

  it("bind kind ids by name and refuse a schema that differs", () => {
    const bind = vectors.bind as Obj;
    assert.deepEqual({ ...SampleKinds.bind(schema()) }, bind.ids);
    const changes: Array<(s: Schema) => void> = [
      (s) => {
        const f = s.kinds.find((k) => k.name === "ship")?.fields[3];
        if (f) f.ty = { type: "sint" };
      },
      (s) => {
        const f = s.kinds.find((k) => k.name === "ship")?.fields[0];
        if (f) f.ty = { type: "quant", min: -8, max: 8, bits: 5 };
      },
      (s) => s.kinds.find((k) => k.name === "ship")?.fields.pop(),
      (s) => {
        s.kinds = s.kinds.filter((k) => k.name !== "rock");
      },
      (s) => {
        s.kinds.push({ name: "comet", fields: [] });
      },
    ];
    (bind.mismatches as Obj[]).forEach((m, i) => {
      const s = schema();
      changes[i]?.(s);
      if (m.fails) {
        assert.throws(() => SampleKinds.bind(s), SchemaMismatchError, m.change as string);
        assert.throws(() => SampleKinds.bind(s), /regenerate with `zonekeep codegen --kind sample`/, m.change as string);
      }
      else assert.doesNotThrow(() => SampleKinds.bind(s), m.change as string);
    });
  });
});
