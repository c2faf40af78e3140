/**
 * The golden fixtures written by the Rust codec (tests/fixtures/protocol at the repo root): every
 * message decodes to its JSON value and re-encodes to the same bytes (a State, like a Delta, against
 * its context); primitives and quantization agree bit for bit; every invalid case is refused with the
 * same error kind.
 */

import assert from "node:assert/strict";
import { readdirSync, readFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { describe, it } from "node:test";
import { fileURLToPath } from "node:url";

import {
  angleDecode,
  angleEncode,
  canonicalPosForm,
  centeredDecode,
  centeredEncode,
  CONTENT_VERSION_PROTOCOL,
  ENTRIES_PROTOCOL,
  decodeClientMessage,
  decodeDelta,
  decodeServerMessage,
  DecodeError,
  encodeClientMessage,
  encodeDelta,
  encodeServerMessage,
  f32Bits,
  f32FromBits,
  frameMessage,
  MessageFramer,
  fromHex,
  knownSetHash,
  Mirror,
  posDecode,
  posEncode,
  quantDecode,
  quantEncode,
  Reader,
  toHex,
  Writer,
  writeUpdateRecord,
  type ClientMessage,
  type Delta,
  type FieldType,
  type KnownEntry,
  type Schema,
  type ServerMessage,
} from "../src/index.js";

// dist/test/ → package root → repo root.
const PACKAGE_ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "..", "..");
const FIXTURES = resolve(PACKAGE_ROOT, "../../tests/fixtures/protocol");

type Json = null | boolean | number | string | Json[] | { [k: string]: Json };
type Obj = { [k: string]: Json };

function load(name: string): Obj {
  return JSON.parse(readFileSync(join(FIXTURES, name), "utf8")) as Obj;
}

const num = (v: Json | undefined): number => {
  assert.equal(typeof v, "number");
  return v as number;
};
const str = (v: Json | undefined): string => {
  assert.equal(typeof v, "string");
  return v as string;
};
const obj = (v: Json | undefined): Obj => v as Obj;
const arr = (v: Json | undefined): Json[] => {
  assert.ok(Array.isArray(v));
  return v as Json[];
};

function schemaFromJson(j: Obj): Schema {
  return {
    posStep: Math.fround(num(j.pos_step)),
    kinds: arr(j.kinds).map((k) => ({
      name: str(obj(k).name),
      fields: arr(obj(k).fields).map((fj) => {
        const f = obj(fj);
        const t = str(f.type);
        let ty: FieldType;
        if (t === "quant") ty = { type: t, min: Math.fround(num(f.min)), max: Math.fround(num(f.max)), bits: num(f.bits) };
        else if (t === "centered") ty = { type: t, range: Math.fround(num(f.range)), bits: num(f.bits) };
        else if (t === "angle") ty = { type: t, bits: num(f.bits) };
        else if (t === "str") ty = { type: t, maxLen: num(f.max_len) };
        else ty = { type: t } as FieldType;
        return { name: str(f.name), ty };
      }),
    })),
  };
}

function schemaToJson(s: Schema): Obj {
  return {
    pos_step: s.posStep,
    kinds: s.kinds.map((k) => ({
      name: k.name,
      fields: k.fields.map((f) => {
        const { type, ...params } = f.ty as FieldType & Record<string, number>;
        const out: Obj = { name: f.name, type };
        for (const [key, v] of Object.entries(params)) out[key === "maxLen" ? "max_len" : key] = v;
        return out;
      }),
    })),
  };
}

function snake(k: string): string {
  return k.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`);
}
function camel(k: string): string {
  return k.replace(/_([a-z])/g, (_m, c: string) => c.toUpperCase());
}

const HEX_FIELDS = new Set(["reconnect_token", "payload"]);

function deltaToJson(d: Delta): Obj {
  if (d.base !== undefined && d.base !== null) {
    // A State (§5.8): a Delta value plus its base.
    return { ...deltaToJson({ ...d, base: null }), type: "state", base: d.base };
  }
  return {
    type: "delta",
    tick: d.tick,
    ack: d.ack,
    baseline: d.baseline,
    control: d.control === undefined ? null : { entity: d.control },
    despawns: d.despawns,
    updates: d.updates.map((u) => ({ index: u.index, id: u.id, pos: u.pos as Json, mask: u.mask, fields: u.fields })),
    spawns: d.spawns.map((s) => ({ id: s.id, kind: s.kind, qx: s.qx, qy: s.qy, fields: s.fields })),
    events: d.events === null ? null : d.events.map((e) => ({ topic: e.topic, payload: toHex(e.payload) })),
  };
}

function deltaFromJson(j: Obj, schema: Schema, known: readonly KnownEntry[]): Delta {
  const after = j.baseline === true ? [] : known.filter(([id]) => !arr(j.despawns).includes(id));
  const fixF32 = (kind: number, i: number, v: Json): Json => {
    const ty = schema.kinds[kind]?.fields[i]?.ty;
    return ty?.type === "f32" ? Math.fround(v as number) : v;
  };
  const d: Delta = {
    tick: num(j.tick),
    ack: num(j.ack),
    baseline: j.baseline === true,
    despawns: arr(j.despawns).map(num),
    updates: arr(j.updates).map((uj) => {
      const u = obj(uj);
      const index = num(u.index);
      const kind = after[index]?.[1] ?? -1;
      return {
        index,
        id: num(u.id),
        kind,
        pos: u.pos as Delta["updates"][number]["pos"],
        mask: num(u.mask),
        fields: arr(u.fields).map((p) => {
          const [i, v] = arr(p);
          return [num(i), fixF32(kind, num(i), v as Json) as number] as [number, number];
        }),
      };
    }),
    spawns: arr(j.spawns).map((sj) => {
      const s = obj(sj);
      const kind = num(s.kind);
      return {
        id: num(s.id),
        kind,
        qx: num(s.qx),
        qy: num(s.qy),
        fields: arr(s.fields).map((v, i) => fixF32(kind, i, v) as number),
      };
    }),
    events: j.events === null ? null : arr(j.events).map((e) => ({ topic: num(obj(e).topic), payload: fromHex(str(obj(e).payload)) })),
  };
  const c = j.control;
  if (c !== null && c !== undefined) d.control = obj(c).entity as number | null;
  return d;
}

/** Plain values to fixture JSON: snake_case keys, byte strings as hex, nested lists and objects too. */
function valueToJson(v: unknown): Json {
  if (v instanceof Uint8Array) return toHex(v);
  if (Array.isArray(v)) return v.map(valueToJson);
  if (v !== null && typeof v === "object") {
    const out: Obj = {};
    for (const [k, x] of Object.entries(v)) out[snake(k)] = valueToJson(x);
    return out;
  }
  return v as Json;
}

/** Inverse of {@link valueToJson}: camelCase keys, the hex fields as bytes. */
function valueFromJson(v: Json, key = ""): unknown {
  if (HEX_FIELDS.has(key)) return fromHex(str(v));
  if (Array.isArray(v)) return v.map((x) => valueFromJson(x));
  if (v !== null && typeof v === "object") {
    const out: Record<string, unknown> = {};
    for (const [k, x] of Object.entries(v)) out[camel(k)] = valueFromJson(x, k);
    return out;
  }
  return v;
}

function messageToJson(m: ClientMessage | ServerMessage): Obj {
  if (m.type === "delta") return deltaToJson(m);
  if (m.type === "state") return deltaToJson(m);
  const out: Obj = {};
  for (const [k, v] of Object.entries(m)) {
    const key = snake(k);
    if (key === "schema") out[key] = schemaToJson(v as Schema);
    else out[key] = valueToJson(v);
  }
  // Only a version 5 Welcome carries a content version; the fixtures of older ones have no key.
  if (m.type === "welcome" && m.version < CONTENT_VERSION_PROTOCOL) {
    assert.equal(out.content_version, "", "an older Welcome decodes with no content version");
    delete out.content_version;
  }
  // Only a version 7 Welcome lists entry URLs; the fixtures of older ones have no key.
  if (m.type === "welcome" && m.version < ENTRIES_PROTOCOL) {
    assert.deepEqual(out.entries, [], "an older Welcome decodes with no entry URLs");
    delete out.entries;
  }
  return out;
}

function messageFromJson(j: Obj): ClientMessage | ServerMessage {
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(j)) {
    if (k === "schema") out[k] = schemaFromJson(obj(v));
    else out[camel(k)] = valueFromJson(v, k);
  }
  return out as unknown as ClientMessage | ServerMessage;
}

const SPECIAL = new Set(["primitives.json", "quant.json", "invalid.json", "canonical_pos.json"]);
const files = readdirSync(FIXTURES).filter((f) => f.endsWith(".json"));

describe("golden fixtures", () => {
  it("the fixture directory holds every kind of message", () => {
    const types = new Set(
      files.filter((f) => !SPECIAL.has(f)).map((f) => str(obj(load(f).value).type)),
    );
    for (const t of [
      "hello",
      "input",
      "ping",
      "resync",
      "welcome",
      "delta",
      "pong",
      "kick",
      "redirect",
      "transfer",
      "input_refused",
      "known_set_check",
      "inputs",
      "events",
      "state",
      "entries",
      "chat",
      "chat_report",
      "chat_history",
      "chat_lines",
      "chat_reply",
    ]) {
      assert.ok(types.has(t), `a fixture of type ${t}`);
    }
    for (const f of SPECIAL) assert.ok(files.includes(f), f);
  });

  for (const file of files.filter((f) => !SPECIAL.has(f))) {
    it(`${file}: decodes to its value and re-encodes byte for byte`, () => {
      const fx = load(file);
      const bytes = fromHex(str(fx.hex));
      const value = obj(fx.value);
      const type = str(value.type);
      if (type === "delta" || type === "state") {
        const ctx = obj(fx.context);
        const schema = schemaFromJson(obj(ctx.schema));
        const known = arr(ctx.known).map((e) => arr(e).map(num) as unknown as KnownEntry);
        const decoded = decodeDelta(bytes, schema, known);
        assert.deepEqual(deltaToJson(decoded), value);
        const viaMessage = decodeServerMessage(bytes, { schema, known });
        assert.equal(viaMessage.type, type);
        assert.deepEqual(messageToJson(viaMessage), value);
        const delta = deltaFromJson(value, schema, known);
        const encoded =
          type === "state"
            ? encodeServerMessage({ ...delta, type: "state", base: num(value.base) }, { schema, known })
            : encodeServerMessage({ type: "delta", ...delta }, { schema, known });
        assert.equal(toHex(encoded), fx.hex);
        // encodeDelta writes a State exactly when the value has a base.
        const direct = encodeDelta(type === "state" ? { ...delta, base: num(value.base) } : delta, schema, known);
        assert.equal(toHex(direct), fx.hex);
        return;
      }
      const isClient = bytes[0] !== undefined && bytes[0] < 0x80;
      const decoded = isClient ? decodeClientMessage(bytes) : decodeServerMessage(bytes);
      assert.deepEqual(messageToJson(decoded), value);
      const m = messageFromJson(value);
      const encoded = isClient
        ? encodeClientMessage(m as ClientMessage)
        : encodeServerMessage(m as ServerMessage);
      assert.equal(toHex(encoded), fx.hex);
    });
  }

  it("primitives.json: varint, zigzag, f32 and strings agree byte for byte", () => {
    const p = load("primitives.json");
    for (const c of arr(p.varint).map(obj)) {
      const v = BigInt(str(c.value));
      assert.equal(toHex(new Writer().varintBig(v).finish()), c.hex, `varint ${v}`);
      const r = new Reader(fromHex(str(c.hex)));
      assert.equal(r.varintU64Big(), v);
      r.finish();
    }
    for (const c of arr(p.zigzag32).map(obj)) {
      const v = num(c.value);
      assert.equal(toHex(new Writer().zigzag32(v).finish()), c.hex, `zigzag32 ${v}`);
      const r = new Reader(fromHex(str(c.hex)));
      assert.equal(r.zigzag32(), v);
      r.finish();
    }
    for (const c of arr(p.zigzag64).map(obj)) {
      const v = BigInt(str(c.value));
      assert.equal(toHex(new Writer().zigzag64Big(v).finish()), c.hex, `zigzag64 ${v}`);
      const r = new Reader(fromHex(str(c.hex)));
      assert.equal(r.zigzag64Big(), v);
      r.finish();
    }
    for (const c of arr(p.f32).map(obj)) {
      const bits = parseInt(str(c.bits), 16);
      assert.equal(toHex(new Writer().f32(f32FromBits(bits)).finish()), c.hex, `f32 ${str(c.bits)}`);
      const r = new Reader(fromHex(str(c.hex)));
      assert.equal(f32Bits(r.f32()).toString(16).padStart(8, "0"), c.bits);
      r.finish();
    }
    for (const c of arr(p.string).map(obj)) {
      assert.equal(toHex(new Writer().str(str(c.value), 1 << 20).finish()), c.hex);
      const r = new Reader(fromHex(str(c.hex)));
      assert.equal(r.str(1 << 20), c.value);
      r.finish();
    }
  });

  it("primitives.json: a control stream's length prefix is the same LEB128, refused alike", () => {
    const frames = obj(load("primitives.json").frame_length);
    const max = num(frames.max);
    const accepted = arr(frames.accepted).map(obj);
    assert.ok(accepted.length > 0);
    for (const c of accepted) {
      const len = num(c.len);
      const body = new Uint8Array(len).fill(7);
      const framed = frameMessage(body);
      assert.equal(toHex(framed.subarray(0, framed.length - len)), c.hex, `length ${len}`);
      // Split a byte at a time across the prefix: the framer completes exactly this message.
      const framer = new MessageFramer(max);
      const prefix = fromHex(str(c.hex));
      for (let i = 0; i < prefix.length - 1; i++) assert.deepEqual(framer.push(prefix.subarray(i, i + 1)), []);
      const last = framer.push(prefix.subarray(prefix.length - 1));
      const out = len === 0 ? last : [...last, ...framer.push(body)];
      assert.equal(out.length, 1, `length ${len}`);
      assert.equal(out[0]?.length, len);
    }
    const refused = arr(frames.refused).map(obj);
    assert.ok(refused.length > 0);
    for (const c of refused) {
      const framer = new MessageFramer(max);
      assert.throws(
        () => framer.push(fromHex(str(c.hex))),
        (e: unknown) => e instanceof DecodeError && e.kind === c.error,
        str(c.description),
      );
    }
  });

  it("quant.json: quantization is bit-exact with Rust", () => {
    const q = load("quant.json");
    const f = (v: Json | undefined): number => f32FromBits(parseInt(str(v), 16));
    const bits = (v: number): string => f32Bits(v).toString(16).padStart(8, "0");
    let n = 0;
    for (const c of arr(q.quant).map(obj)) {
      const code = quantEncode(f(c.v), f(c.min), f(c.max), num(c.bits));
      assert.equal(code, c.q, `quant ${JSON.stringify(c)}`);
      assert.equal(bits(quantDecode(code, f(c.min), f(c.max), num(c.bits))), c.decoded);
      n++;
    }
    for (const c of arr(q.centered).map(obj)) {
      const code = centeredEncode(f(c.v), f(c.range), num(c.bits));
      assert.equal(code, c.q, `centered ${JSON.stringify(c)}`);
      assert.equal(bits(centeredDecode(code, f(c.range), num(c.bits))), c.decoded);
      n++;
    }
    for (const c of arr(q.angle).map(obj)) {
      const code = angleEncode(f(c.a), num(c.bits));
      assert.equal(code, c.q, `angle ${JSON.stringify(c)}`);
      assert.equal(bits(angleDecode(code, num(c.bits))), c.decoded);
      n++;
    }
    for (const c of arr(q.pos).map(obj)) {
      const code = posEncode(f(c.v), f(c.step));
      assert.equal(code, c.q, `pos ${JSON.stringify(c)}`);
      assert.equal(bits(posDecode(code, f(c.step))), c.decoded);
      n++;
    }
    assert.ok(n > 10);
  });

  it("canonical_pos.json: the encoder picks the same position form, tie-breaks included", () => {
    const fx = load("canonical_pos.json");
    const kind = schemaFromJson(obj(load("welcome.json").value).schema as Obj).kinds[0];
    assert.ok(kind !== undefined);
    const cases = arr(fx.cases).map(obj);
    assert.ok(cases.length > 0);
    for (const c of cases) {
      const withFields = c.fields === true;
      const form = canonicalPosForm(num(c.qx), num(c.qy), num(c.last_qx), num(c.last_qy), withFields);
      assert.deepEqual(form, c.form, str(c.description));
      const w = new Writer();
      if (form !== null || withFields) writeUpdateRecord(w, kind, form, withFields ? [[0, 1]] : []);
      assert.equal(toHex(w.finish()), c.record, str(c.description));
    }
  });

  it("known_set_check.json: the hash is FNV-1a of the known ids after delta_gaps.json", () => {
    const gaps = load("delta_gaps.json");
    const ctx = obj(gaps.context);
    const schema = schemaFromJson(obj(ctx.schema));
    const mirror = new Mirror(schema);
    // Load the known set before the Delta with a BASELINE, then apply the fixture's Delta.
    const known = arr(ctx.known).map((e) => arr(e).map(num));
    mirror.apply({
      tick: 1,
      ack: 0,
      baseline: true,
      despawns: [],
      updates: [],
      spawns: known.map(([id, kind]) => ({
        id: id as number,
        kind: kind as number,
        qx: 0,
        qy: 0,
        fields: (schema.kinds[kind as number]?.fields ?? []).map(() => 0),
      })),
      events: null,
    });
    mirror.receive(fromHex(str(gaps.hex)));
    const check = decodeServerMessage(fromHex(str(load("known_set_check.json").hex)));
    assert.equal(check.type, "known_set_check");
    if (check.type !== "known_set_check") return;
    assert.ok(mirror.matches(check));
    assert.equal(knownSetHash([]), 0x811c9dc5);
  });

  it("invalid.json: every case is refused with the same error kind", () => {
    const inv = load("invalid.json");
    const ctx = obj(inv.context);
    const schema = schemaFromJson(obj(ctx.schema));
    const known = arr(ctx.known).map((e) => arr(e).map(num) as unknown as KnownEntry);
    const cases = arr(inv.cases).map(obj);
    assert.ok(cases.length > 0);
    const wrong: string[] = [];
    for (const c of cases) {
      const bytes = fromHex(str(c.hex));
      const run = (): unknown =>
        c.decoder === "client"
          ? decodeClientMessage(bytes)
          : c.decoder === "server"
            ? decodeServerMessage(bytes)
            : decodeDelta(bytes, schema, known);
      try {
        run();
        wrong.push(`${str(c.decoder)} ${str(c.hex)}: accepted (${str(c.description)})`);
      } catch (e) {
        if (!(e instanceof DecodeError) || e.kind !== c.error) {
          wrong.push(`${str(c.decoder)} ${str(c.hex)}: ${String(e)}, want ${str(c.error)} (${str(c.description)})`);
        }
      }
    }
    assert.deepEqual(wrong, []);
  });
});
