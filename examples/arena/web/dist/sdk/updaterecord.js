/**
 * The update record of PROTOCOL.md §5.5.3: one known entity's change in a Delta or State, its
 * position in one of four wire forms (tiny, nibbles, delta, absolute) and its changed fields. The
 * form is kept as it arrived, so a record writes back byte-identical; {@link canonicalPosForm} is
 * the form a host picks for a move.
 */
import { decodeFieldValue, encodeFieldValue } from "./schema.js";
import { DecodeError, EncodeError, varintLen } from "./wire.js";
function nibble(v) {
    return v >= 8 ? v - 16 : v;
}
/** Reads one update record (§5.5.3) of an entity of `kind`, its position in the form it arrived in. */
export function readUpdateRecord(r, kind) {
    const header = r.u8();
    if ((header & 0x80) === 0) {
        if (header > 120)
            throw new DecodeError("invalid", `tiny move ${header} > 120`);
        return {
            pos: { form: "tiny", dx: Math.floor(header / 11) - 5, dy: (header % 11) - 5 },
            mask: 0,
            fields: [],
        };
    }
    if ((header & 0x78) !== 0)
        throw new DecodeError("invalid", "update header reserved bits set");
    if (header === 0x80)
        throw new DecodeError("invalid", "update record changes nothing");
    let pos;
    switch (header & 3) {
        case 0:
            pos = null;
            break;
        case 1: {
            const b = r.u8();
            pos = { form: "nibbles", dx: nibble(b & 0xf), dy: nibble(b >> 4) };
            break;
        }
        case 2: {
            const dx = r.zigzag32();
            pos = { form: "delta", dx, dy: r.zigzag32() };
            break;
        }
        default: {
            const qx = r.zigzag32();
            pos = { form: "absolute", qx, qy: r.zigzag32() };
            break;
        }
    }
    const fields = [];
    let mask = 0;
    if (header & 4) {
        mask = r.varintU32();
        if (mask === 0)
            throw new DecodeError("invalid", "field mask is zero");
        const count = kind.fields.length;
        if (count < 32 && mask >= 2 ** count) {
            throw new DecodeError("invalid", `field mask names a field beyond ${count}`);
        }
        for (let i = 0; i < count; i++) {
            if (Math.floor(mask / 2 ** i) % 2 === 1) {
                const fd = kind.fields[i];
                if (fd !== undefined)
                    fields.push([i, decodeFieldValue(r, fd.ty)]);
            }
        }
    }
    return { pos, mask, fields };
}
function checkDxy(lo, hi, dx, dy, form) {
    const ok = (v) => Number.isInteger(v) && v >= lo && v <= hi;
    if (!ok(dx) || !ok(dy))
        throw new EncodeError("invalid", `${form} move (${dx}, ${dy}) out of range`);
}
/** Writes one update record (§5.5.3) in exactly the position form given. */
export function writeUpdateRecord(w, kind, pos, fields) {
    let mask = 0;
    let prev = -1;
    for (const [i] of fields) {
        if (!Number.isInteger(i) || i <= prev || i >= kind.fields.length) {
            throw new EncodeError("invalid", "update fields must be ascending indices of the kind");
        }
        mask += 2 ** i;
        prev = i;
    }
    if (pos?.form === "tiny") {
        if (mask !== 0)
            throw new EncodeError("invalid", "a tiny move carries no fields");
        checkDxy(-5, 5, pos.dx, pos.dy, "tiny");
        w.u8((pos.dx + 5) * 11 + (pos.dy + 5));
        return;
    }
    if (pos === null && mask === 0)
        throw new EncodeError("invalid", "update record changes nothing");
    const mode = pos === null ? 0 : pos.form === "nibbles" ? 1 : pos.form === "delta" ? 2 : 3;
    w.u8(0x80 | mode | (mask !== 0 ? 4 : 0));
    if (pos !== null) {
        switch (pos.form) {
            case "nibbles":
                checkDxy(-8, 7, pos.dx, pos.dy, "nibbles");
                w.u8((pos.dx & 0xf) | ((pos.dy & 0xf) << 4));
                break;
            case "delta":
                w.zigzag32(pos.dx).zigzag32(pos.dy);
                break;
            case "absolute":
                w.zigzag32(pos.qx).zigzag32(pos.qy);
                break;
        }
    }
    if (mask !== 0) {
        w.varint(mask);
        for (const [i, v] of fields) {
            const fd = kind.fields[i];
            if (fd !== undefined)
                encodeFieldValue(w, fd.ty, v);
        }
    }
}
/**
 * The canonical position form of §5.5.3 for a move from `(lastQx, lastQy)` to `(qx, qy)`: tiny when
 * there are no fields and both steps are in −5..=5, else nibbles in −8..=7, else delta when it is no
 * longer than absolute, else absolute. Null when the position did not change.
 */
export function canonicalPosForm(qx, qy, lastQx, lastQy, hasFields) {
    const dx = qx - lastQx;
    const dy = qy - lastQy;
    if (dx === 0 && dy === 0)
        return null;
    const within = (lo, hi) => dx >= lo && dx <= hi && dy >= lo && dy <= hi;
    if (!hasFields && within(-5, 5))
        return { form: "tiny", dx, dy };
    if (within(-8, 7))
        return { form: "nibbles", dx, dy };
    const i32 = (v) => v >= -0x8000_0000 && v <= 0x7fff_ffff;
    if (i32(dx) && i32(dy)) {
        const zz = (v) => varintLen(((v << 1) ^ (v >> 31)) >>> 0);
        if (zz(dx) + zz(dy) <= zz(qx) + zz(qy))
            return { form: "delta", dx, dy };
    }
    return { form: "absolute", qx, qy };
}
