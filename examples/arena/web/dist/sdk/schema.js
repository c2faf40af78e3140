/**
 * The zone schema of PROTOCOL.md §5.4: entity kinds, their fields and how each field's value is
 * carried. Values are kept in their wire form (the quantized integer `q` for quant/centered/angle);
 * {@link fieldToNumber} turns one into the number it stands for.
 */
import { angleDecode, angleEncode, centeredDecode, centeredEncode, quantDecode, quantEncode, } from "./quant.js";
import { DecodeError, EncodeError } from "./wire.js";
/** Limits of §7 that concern the schema. */
export const SCHEMA_LIMITS = {
    kinds: 64,
    fieldsPerKind: 32,
    nameBytes: 64,
    strMaxLen: 255,
};
const TYPE_CODES = {
    quant: 0,
    centered: 1,
    angle: 2,
    uint: 3,
    sint: 4,
    bool: 5,
    str: 6,
    f32: 7,
};
function bitsIn(bits, lo, hi) {
    return Number.isInteger(bits) && bits >= lo && bits <= hi;
}
/** Why `ty` is not a valid field type, or null when it is. */
export function fieldTypeProblem(ty) {
    switch (ty.type) {
        case "quant":
            if (!Number.isFinite(ty.min) || !Number.isFinite(ty.max) || !(ty.min < ty.max)) {
                return "quant needs finite min < max";
            }
            return bitsIn(ty.bits, 1, 32) ? null : "quant bits not in 1..=32";
        case "centered":
            if (!Number.isFinite(ty.range) || !(ty.range > 0))
                return "centered range must be finite > 0";
            return bitsIn(ty.bits, 2, 32) ? null : "centered bits not in 2..=32";
        case "angle":
            return bitsIn(ty.bits, 1, 16) ? null : "angle bits not in 1..=16";
        case "str":
            return Number.isInteger(ty.maxLen) && ty.maxLen >= 0 && ty.maxLen <= SCHEMA_LIMITS.strMaxLen
                ? null
                : "str max_len not in 0..=255";
        case "uint":
        case "sint":
        case "bool":
        case "f32":
            return null;
    }
}
/** Writes `schema` (§5.4), validating it first. */
export function encodeSchema(w, schema) {
    if (!Number.isFinite(schema.posStep) || !(Math.fround(schema.posStep) > 0)) {
        throw new EncodeError("invalid", "pos_step must be finite and > 0");
    }
    if (schema.kinds.length > SCHEMA_LIMITS.kinds)
        throw new EncodeError("too_long", "too many kinds");
    w.f32(schema.posStep);
    w.varint(schema.kinds.length);
    for (const kind of schema.kinds) {
        w.str(kind.name, SCHEMA_LIMITS.nameBytes, "kind name");
        if (kind.fields.length > SCHEMA_LIMITS.fieldsPerKind) {
            throw new EncodeError("too_long", `kind ${kind.name}: too many fields`);
        }
        w.varint(kind.fields.length);
        for (const field of kind.fields) {
            const problem = fieldTypeProblem(field.ty);
            if (problem !== null)
                throw new EncodeError("invalid", `field ${field.name}: ${problem}`);
            w.str(field.name, SCHEMA_LIMITS.nameBytes, "field name");
            const ty = field.ty;
            w.u8(TYPE_CODES[ty.type]);
            switch (ty.type) {
                case "quant":
                    w.f32(ty.min).f32(ty.max).u8(ty.bits);
                    break;
                case "centered":
                    w.f32(ty.range).u8(ty.bits);
                    break;
                case "angle":
                    w.u8(ty.bits);
                    break;
                case "str":
                    w.varint(ty.maxLen);
                    break;
                default:
                    break;
            }
        }
    }
}
function decodeFieldType(r) {
    const code = r.u8();
    let ty;
    switch (code) {
        case 0: {
            const min = r.f32();
            const max = r.f32();
            ty = { type: "quant", min, max, bits: r.u8() };
            break;
        }
        case 1: {
            const range = r.f32();
            ty = { type: "centered", range, bits: r.u8() };
            break;
        }
        case 2:
            ty = { type: "angle", bits: r.u8() };
            break;
        case 3:
            return { type: "uint" };
        case 4:
            return { type: "sint" };
        case 5:
            return { type: "bool" };
        case 6: {
            const maxLen = r.varintU32();
            ty = { type: "str", maxLen };
            break;
        }
        case 7:
            return { type: "f32" };
        default:
            throw new DecodeError("invalid", `unknown field type ${code}`);
    }
    const problem = fieldTypeProblem(ty);
    if (problem !== null)
        throw new DecodeError("invalid", problem);
    return ty;
}
/** Reads a schema (§5.4) and validates it. */
export function decodeSchema(r) {
    const posStep = r.f32();
    if (!Number.isFinite(posStep) || !(posStep > 0)) {
        throw new DecodeError("invalid", "pos_step must be finite and > 0");
    }
    const kindCount = r.varintU32();
    if (kindCount > SCHEMA_LIMITS.kinds) {
        throw new DecodeError("too_long", `kinds: ${kindCount} > ${SCHEMA_LIMITS.kinds}`);
    }
    const kinds = [];
    for (let k = 0; k < kindCount; k++) {
        const name = r.str(SCHEMA_LIMITS.nameBytes, "kind name");
        const fieldCount = r.varintU32();
        if (fieldCount > SCHEMA_LIMITS.fieldsPerKind) {
            throw new DecodeError("too_long", `fields: ${fieldCount} > ${SCHEMA_LIMITS.fieldsPerKind}`);
        }
        const fields = [];
        for (let i = 0; i < fieldCount; i++) {
            const fname = r.str(SCHEMA_LIMITS.nameBytes, "field name");
            fields.push({ name: fname, ty: decodeFieldType(r) });
        }
        kinds.push({ name, fields });
    }
    return { posStep, kinds };
}
/** The value a field holds before anything was sent (what Rust's `default_value` gives). */
export function defaultFieldValue(ty) {
    switch (ty.type) {
        case "bool":
            return false;
        case "str":
            return "";
        case "centered":
            return 2 ** (ty.bits - 1);
        default:
            return 0;
    }
}
function badValue(ty, v) {
    return new EncodeError("invalid", `value ${String(v)} does not fit field type ${ty.type}`);
}
function isU32(v) {
    return typeof v === "number" && Number.isInteger(v) && v >= 0 && v <= 0xffff_ffff;
}
/** Writes one field value in its type's wire form. */
export function encodeFieldValue(w, ty, v) {
    switch (ty.type) {
        case "quant":
            if (!isU32(v) || v > 2 ** ty.bits - 1)
                throw badValue(ty, v);
            w.varint(v);
            return;
        case "centered":
            if (!isU32(v) || v > 2 ** ty.bits - 1)
                throw badValue(ty, v);
            w.varint(v);
            return;
        case "angle":
            if (!isU32(v) || v >= 2 ** ty.bits)
                throw badValue(ty, v);
            w.varint(v);
            return;
        case "uint":
            if (!isU32(v))
                throw badValue(ty, v);
            w.varint(v);
            return;
        case "sint":
            if (typeof v !== "number")
                throw badValue(ty, v);
            w.zigzag32(v);
            return;
        case "bool":
            if (typeof v !== "boolean")
                throw badValue(ty, v);
            w.u8(v ? 1 : 0);
            return;
        case "str":
            if (typeof v !== "string")
                throw badValue(ty, v);
            w.str(v, ty.maxLen, "str field");
            return;
        case "f32":
            if (typeof v !== "number")
                throw badValue(ty, v);
            w.f32(v);
            return;
    }
}
/** Reads one field value of type `ty`, validating its range. */
export function decodeFieldValue(r, ty) {
    switch (ty.type) {
        case "quant":
        case "centered": {
            const q = r.varintU32();
            if (q > 2 ** ty.bits - 1)
                throw new DecodeError("invalid", `${ty.type} value out of range`);
            return q;
        }
        case "angle": {
            const q = r.varintU32();
            if (q >= 2 ** ty.bits)
                throw new DecodeError("invalid", "angle value out of range");
            return q;
        }
        case "uint":
            return r.varintU32();
        case "sint":
            return r.zigzag32();
        case "bool": {
            const b = r.u8();
            if (b > 1)
                throw new DecodeError("invalid", `bool byte ${b}`);
            return b === 1;
        }
        case "str":
            return r.str(ty.maxLen, "str field");
        case "f32":
            return r.f32();
    }
}
/** The number a field value stands for: dequantized for quant/centered/angle, as-is otherwise. */
export function fieldToNumber(ty, v) {
    if (typeof v !== "number")
        return typeof v === "boolean" ? (v ? 1 : 0) : Number.NaN;
    switch (ty.type) {
        case "quant":
            return quantDecode(v, ty.min, ty.max, ty.bits);
        case "centered":
            return centeredDecode(v, ty.range, ty.bits);
        case "angle":
            return angleDecode(v, ty.bits);
        default:
            return v;
    }
}
/** The wire value that stands for the number `n` in a field of type `ty` (quantizing if needed). */
export function numberToField(ty, n) {
    switch (ty.type) {
        case "quant":
            return quantEncode(n, ty.min, ty.max, ty.bits);
        case "centered":
            return centeredEncode(n, ty.range, ty.bits);
        case "angle":
            return angleEncode(n, ty.bits);
        case "bool":
            return n !== 0;
        case "str":
            return String(n);
        case "f32":
            return Math.fround(n);
        default:
            return Math.trunc(n);
    }
}
/** Index of the field named `name` in `kind`, or -1. */
export function fieldIndex(kind, name) {
    return kind.fields.findIndex((fd) => fd.name === name);
}
/** A zone's schema differs from the one generated code was written from. */
export class SchemaMismatchError extends Error {
    constructor(detail) {
        super(detail);
        this.name = "SchemaMismatchError";
    }
}
function sameFieldType(a, b) {
    const x = a;
    const y = b;
    const keys = Object.keys(x);
    return keys.length === Object.keys(y).length && keys.every((k) => Object.is(x[k], y[k]));
}
/**
 * The kind id of `want` in `schema`, found by name, once its fields are checked to be exactly
 * `want`'s (names, types and parameters bit for bit). Anything else is a {@link SchemaMismatchError}
 * naming the kind and field, with `hint` (how to regenerate the code) after it.
 */
export function bindKindLayout(schema, want, hint) {
    const id = schema.kinds.findIndex((k) => k.name === want.name);
    const kind = schema.kinds[id];
    if (kind === undefined)
        throw new SchemaMismatchError(`the zone has no entity kind "${want.name}"${hint}`);
    if (kind.fields.length !== want.fields.length) {
        throw new SchemaMismatchError(`kind "${want.name}" has ${kind.fields.length} fields, not ${want.fields.length}${hint}`);
    }
    want.fields.forEach((w, i) => {
        const got = kind.fields[i];
        if (got === undefined || got.name !== w.name || !sameFieldType(got.ty, w.ty)) {
            throw new SchemaMismatchError(`field ${i} of kind "${want.name}" is not "${w.name}" (${w.ty.type})${hint}`);
        }
    });
    return id;
}
/** A wire-form field value as a number: 0 when absent or not a number (generated readers use it). */
export function fieldNumber(v) {
    return typeof v === "number" ? v : 0;
}
/** A wire-form field value as a string: "" when absent or not a string (generated readers use it). */
export function fieldString(v) {
    return typeof v === "string" ? v : "";
}
