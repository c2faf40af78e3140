/**
 * The Delta message of PROTOCOL.md §5.5: decoded against the client's known set, and encoded so that
 * decode → encode is byte-identical (every update keeps the exact position form it arrived in).
 *
 * The State message of §5.8 (version 6, a WebTransport datagram) is a Delta with a `base` tick after
 * its own tick, written against the state of that tick instead of the previous Delta; it shares all of
 * this code. A decoded State is a {@link Delta} whose `base` is a number.
 *
 * `known` is the known set BEFORE the delta: `[id, kind]` pairs, ascending by id. The decoder applies
 * BASELINE and the despawns to it to resolve update indices into ids and kinds, and checks every rule of
 * §5.5 (ids ascending, despawned ids known, spawned ids new, indices in range, masks within the kind).
 */
import { decodeFieldValue, encodeFieldValue, } from "./schema.js";
import { readUpdateRecord, writeUpdateRecord } from "./updaterecord.js";
import { DecodeError, EncodeError, Reader, varintLen, Writer } from "./wire.js";
// The update record (its position forms, read and written, and the canonical form) has a file of
// its own; what of it is public is exported from here.
export { canonicalPosForm, writeUpdateRecord } from "./updaterecord.js";
/** Tag of the Delta message. */
export const DELTA_TAG = 0x82;
/** Tag of the State message (§5.8, version 6): a Delta against an acknowledged base. */
export const STATE_TAG = 0x89;
/** Limits of §7 that concern deltas. */
export const DELTA_LIMITS = {
    listEntries: 65_536,
    events: 1_024,
    eventPayload: 16_384,
};
const FLAG_BASELINE = 1;
const FLAG_CONTROL = 2;
const FLAG_EVENTS = 4;
function kindOf(schema, kind) {
    const k = schema.kinds[kind];
    if (k === undefined)
        throw new DecodeError("invalid", `kind ${kind} not in schema`);
    return k;
}
function readIdList(r, count, what) {
    const ids = [];
    let prev = -1;
    for (let i = 0; i < count; i++) {
        const gap = r.varintU32();
        const id = i === 0 ? gap : prev + 1 + gap;
        if (id > 0xffff_ffff)
            throw new DecodeError("overflow", `${what} id exceeds u32`);
        ids.push(id);
        prev = id;
    }
    return ids;
}
function readCount(r, max, what) {
    const n = r.varintU32();
    if (n > max)
        throw new DecodeError("too_long", `${what}: ${n} > ${max}`);
    return n;
}
/** Removes `despawns` (ascending, each present) from `known` (ascending). */
function removeDespawns(known, despawns) {
    const out = [];
    let d = 0;
    for (const entry of known) {
        const target = despawns[d];
        if (target !== undefined && entry[0] === target) {
            d++;
            continue;
        }
        if (target !== undefined && entry[0] > target) {
            throw new DecodeError("invalid", `despawned id ${target} is not known`);
        }
        out.push(entry);
    }
    if (d < despawns.length) {
        throw new DecodeError("invalid", `despawned id ${String(despawns[d])} is not known`);
    }
    return out;
}
function readIndexSet(r, n, knownLen) {
    const mode = r.u8();
    const indices = [];
    if (mode === 0) {
        let prev = -1;
        for (let i = 0; i < n; i++) {
            const gap = r.varintU32();
            const idx = i === 0 ? gap : prev + 1 + gap;
            if (idx >= knownLen)
                throw new DecodeError("invalid", `update index ${idx} ≥ ${knownLen}`);
            indices.push(idx);
            prev = idx;
        }
    }
    else if (mode === 1) {
        const len = r.varintU32();
        const maxLen = Math.ceil(knownLen / 8);
        if (len > maxLen)
            throw new DecodeError("too_long", `bitset of ${len} bytes > ${maxLen}`);
        const bits = r.raw(len);
        for (let j = 0; j < bits.length; j++) {
            const byte = bits[j] ?? 0;
            for (let i = 0; i < 8; i++) {
                if ((byte >> i) & 1) {
                    const idx = 8 * j + i;
                    if (idx >= knownLen) {
                        throw new DecodeError("invalid", `update index ${idx} ≥ ${knownLen}`);
                    }
                    indices.push(idx);
                }
            }
        }
        if (indices.length !== n) {
            throw new DecodeError("invalid", `bitset names ${indices.length} updates, count is ${n}`);
        }
    }
    else {
        throw new DecodeError("invalid", `unknown index set mode ${mode}`);
    }
    return indices;
}
/**
 * Decodes a whole Delta or State message (tag included) against `schema` and the known set before
 * it (for a State: the known set of its base state). Throws {@link DecodeError} on any violation of
 * §5.5 or §5.8.
 */
export function decodeDelta(bytes, schema, known) {
    const r = new Reader(bytes);
    const tag = r.u8();
    if (tag !== DELTA_TAG && tag !== STATE_TAG) {
        throw new DecodeError("unknown_tag", `expected Delta or State, got 0x${tag.toString(16)}`);
    }
    const delta = decodeDeltaBody(r, schema, known, tag === STATE_TAG);
    r.finish();
    return delta;
}
/** Why a State header is invalid (§5.8), or null: a State carries no events, base 0 ⇔ BASELINE. */
function stateHeaderProblem(base, baseline, events) {
    if (events)
        return "a State carries no events";
    if ((base === 0) !== baseline)
        return "a State's base is 0 exactly when it is a BASELINE";
    return null;
}
/**
 * Reads tick, base (a State's), ack and flags, checking them in wire order as the Rust reader does:
 * unknown flag bits, then a State's EVENTS flag, then its base against BASELINE.
 */
function readHead(r, state) {
    const tick = r.varintU64();
    const base = state ? r.varintU64() : null;
    const ack = r.varintU32();
    const flags = r.u8();
    if (flags & ~7)
        throw new DecodeError("invalid", `unknown delta flags 0x${flags.toString(16)}`);
    if (base !== null) {
        const problem = stateHeaderProblem(base, (flags & FLAG_BASELINE) !== 0, (flags & FLAG_EVENTS) !== 0);
        if (problem !== null)
            throw new DecodeError("invalid", problem);
    }
    return { tick, base, ack, flags };
}
/**
 * Decodes only the fixed start of a Delta or State message (tag included): what a client needs to
 * decide whether a State is new and whether it holds its base before decoding the rest.
 */
export function decodeDeltaHead(bytes) {
    const r = new Reader(bytes);
    const tag = r.u8();
    if (tag !== DELTA_TAG && tag !== STATE_TAG) {
        throw new DecodeError("unknown_tag", `expected Delta or State, got 0x${tag.toString(16)}`);
    }
    const h = readHead(r, tag === STATE_TAG);
    return { tag, ...h, baseline: (h.flags & FLAG_BASELINE) !== 0 };
}
/**
 * Decodes a Delta body (after the tag) from `r`; with `state`, a State body (§5.8: `base` after the
 * tick, which the result carries).
 */
export function decodeDeltaBody(r, schema, known, state = false) {
    const { tick, base, ack, flags } = readHead(r, state);
    const baseline = (flags & FLAG_BASELINE) !== 0;
    const delta = { tick, ack, baseline, despawns: [], updates: [], spawns: [], events: null };
    if (base !== null)
        delta.base = base;
    if (flags & FLAG_CONTROL) {
        const c = r.varintU64();
        if (c > 0x1_0000_0000)
            throw new DecodeError("overflow", "control id exceeds u32");
        delta.control = c === 0 ? null : c - 1;
    }
    const despawnCount = readCount(r, DELTA_LIMITS.listEntries, "despawns");
    delta.despawns = readIdList(r, despawnCount, "despawn");
    if (baseline && despawnCount > 0)
        throw new DecodeError("invalid", "BASELINE with despawns");
    const after = removeDespawns(baseline ? [] : known, delta.despawns);
    const updateCount = readCount(r, DELTA_LIMITS.listEntries, "updates");
    if (baseline && updateCount > 0)
        throw new DecodeError("invalid", "BASELINE with updates");
    if (updateCount > 0) {
        const indices = readIndexSet(r, updateCount, after.length);
        for (const index of indices) {
            const entry = after[index];
            if (entry === undefined)
                throw new DecodeError("invalid", `update index ${index}`);
            const rec = readUpdateRecord(r, kindOf(schema, entry[1]));
            delta.updates.push({ index, id: entry[0], kind: entry[1], ...rec });
        }
    }
    const spawnCount = readCount(r, DELTA_LIMITS.listEntries, "spawns");
    let k = 0;
    let prev = -1;
    for (let i = 0; i < spawnCount; i++) {
        const gap = r.varintU32();
        const id = i === 0 ? gap : prev + 1 + gap;
        if (id > 0xffff_ffff)
            throw new DecodeError("overflow", "spawn id exceeds u32");
        prev = id;
        while (k < after.length && (after[k]?.[0] ?? Infinity) < id)
            k++;
        if (after[k]?.[0] === id)
            throw new DecodeError("invalid", `spawned id ${id} is already known`);
        const kind = r.varintU32();
        const kd = kindOf(schema, kind);
        const qx = r.zigzag32();
        const qy = r.zigzag32();
        const fields = kd.fields.map((fd) => decodeFieldValue(r, fd.ty));
        delta.spawns.push({ id, kind, qx, qy, fields });
    }
    if (flags & FLAG_EVENTS) {
        const n = readCount(r, DELTA_LIMITS.events, "events");
        const events = [];
        for (let i = 0; i < n; i++) {
            const topic = r.varintU16();
            events.push({ topic, payload: r.bytesField(DELTA_LIMITS.eventPayload, "event payload") });
        }
        delta.events = events;
    }
    return delta;
}
function writeIdList(w, ids, what) {
    let prev = -1;
    for (const id of ids) {
        if (!Number.isInteger(id) || id < 0 || id > 0xffff_ffff || id <= prev) {
            throw new EncodeError("invalid", `${what} ids must be ascending u32`);
        }
        w.varint(prev < 0 ? id : id - prev - 1);
        prev = id;
    }
}
/** Bytes of the gap-coded index set (excluding the mode byte). */
function gapsLen(indices) {
    let n = 0;
    let prev = -1;
    for (const i of indices) {
        n += varintLen(prev < 0 ? i : i - prev - 1);
        prev = i;
    }
    return n;
}
/**
 * Writes the update index set (§5.5.2) in the shorter form (ties: gaps). The bitset is as long as
 * needed to hold the highest index.
 */
export function writeIndexSet(w, knownLen, indices) {
    let prev = -1;
    for (const i of indices) {
        if (!Number.isInteger(i) || i <= prev || i >= knownLen) {
            throw new EncodeError("invalid", "update indices must be ascending and < the known set's length");
        }
        prev = i;
    }
    const last = indices[indices.length - 1];
    if (last === undefined)
        return;
    const bitsetBytes = Math.floor(last / 8) + 1;
    if (varintLen(bitsetBytes) + bitsetBytes < gapsLen(indices)) {
        w.u8(1).varint(bitsetBytes);
        const bits = new Uint8Array(bitsetBytes);
        for (const i of indices)
            bits[i >> 3] = (bits[i >> 3] ?? 0) | (1 << (i & 7));
        w.raw(bits);
    }
    else {
        w.u8(0);
        writeIdList(w, indices, "update index");
    }
}
/**
 * Encodes `delta` (tag included) against the known set before it. The update indices are taken from
 * `delta.updates[i].index`; ids and kinds are checked against the known set after the despawns.
 * When `delta.base` is a number the message is a State (§5.8) and `known` is its base's known set.
 */
export function encodeDelta(delta, schema, known) {
    const w = new Writer(256);
    const state = delta.base !== undefined && delta.base !== null;
    w.u8(state ? STATE_TAG : DELTA_TAG);
    encodeDeltaBody(w, delta, schema, known, state);
    return w.finish();
}
/**
 * Encodes a Delta body (after the tag) into `w`; with `state`, a State body (§5.8), whose `base`
 * must be a number (0 exactly when BASELINE) and which carries no events. A Delta has no base.
 */
export function encodeDeltaBody(w, delta, schema, known, state = false) {
    const hasControl = delta.control !== undefined;
    const hasEvents = delta.events !== null;
    const base = delta.base ?? null;
    if (state) {
        if (base === null || !Number.isSafeInteger(base) || base < 0) {
            throw new EncodeError("invalid", "a State needs its base tick");
        }
        const problem = stateHeaderProblem(base, delta.baseline, hasEvents);
        if (problem !== null)
            throw new EncodeError("invalid", problem);
    }
    else if (base !== null) {
        throw new EncodeError("invalid", "a Delta has no base (a State does)");
    }
    if (delta.baseline && (delta.despawns.length > 0 || delta.updates.length > 0)) {
        throw new EncodeError("invalid", "a BASELINE delta has no despawns and no updates");
    }
    for (const [what, n] of [
        ["despawns", delta.despawns.length],
        ["updates", delta.updates.length],
        ["spawns", delta.spawns.length],
    ]) {
        if (n > DELTA_LIMITS.listEntries)
            throw new EncodeError("too_long", `${what}: ${n}`);
    }
    w.varint(delta.tick);
    if (state && base !== null)
        w.varint(base);
    w.varintU32(delta.ack);
    w.u8((delta.baseline ? FLAG_BASELINE : 0) | (hasControl ? FLAG_CONTROL : 0) | (hasEvents ? FLAG_EVENTS : 0));
    if (hasControl) {
        const c = delta.control;
        if (c === null || c === undefined)
            w.varint(0);
        else {
            if (!Number.isInteger(c) || c < 0 || c > 0xffff_ffff)
                throw new EncodeError("invalid", "control id");
            w.varint(c + 1);
        }
    }
    w.varint(delta.despawns.length);
    writeIdList(w, delta.despawns, "despawn");
    let after;
    try {
        after = removeDespawns(delta.baseline ? [] : known, delta.despawns);
    }
    catch (e) {
        throw new EncodeError("invalid", e instanceof Error ? e.message : String(e));
    }
    w.varint(delta.updates.length);
    if (delta.updates.length > 0) {
        writeIndexSet(w, after.length, delta.updates.map((u) => u.index));
        for (const u of delta.updates) {
            const entry = after[u.index];
            if (entry === undefined || entry[0] !== u.id) {
                throw new EncodeError("invalid", `update index ${u.index} does not name id ${u.id}`);
            }
            const kd = schema.kinds[entry[1]];
            if (kd === undefined)
                throw new EncodeError("invalid", `kind ${entry[1]} not in schema`);
            writeUpdateRecord(w, kd, u.pos, u.fields);
        }
    }
    w.varint(delta.spawns.length);
    let prev = -1;
    let k = 0;
    for (const s of delta.spawns) {
        if (!Number.isInteger(s.id) || s.id < 0 || s.id > 0xffff_ffff || s.id <= prev) {
            throw new EncodeError("invalid", "spawn ids must be ascending u32");
        }
        while (k < after.length && (after[k]?.[0] ?? Infinity) < s.id)
            k++;
        if (after[k]?.[0] === s.id)
            throw new EncodeError("invalid", `spawned id ${s.id} is already known`);
        const kd = schema.kinds[s.kind];
        if (kd === undefined)
            throw new EncodeError("invalid", `kind ${s.kind} not in schema`);
        if (s.fields.length !== kd.fields.length) {
            throw new EncodeError("invalid", `spawn of ${kd.name} needs ${kd.fields.length} fields`);
        }
        w.varint(prev < 0 ? s.id : s.id - prev - 1);
        prev = s.id;
        w.varint(s.kind).zigzag32(s.qx).zigzag32(s.qy);
        kd.fields.forEach((fd, i) => encodeFieldValue(w, fd.ty, s.fields[i]));
    }
    if (delta.events !== null) {
        if (delta.events.length > DELTA_LIMITS.events)
            throw new EncodeError("too_long", "events");
        w.varint(delta.events.length);
        for (const ev of delta.events) {
            if (!Number.isInteger(ev.topic) || ev.topic < 0 || ev.topic > 0xffff) {
                throw new EncodeError("invalid", `event topic ${ev.topic}`);
            }
            w.varint(ev.topic).bytesField(ev.payload, DELTA_LIMITS.eventPayload, "event payload");
        }
    }
}
