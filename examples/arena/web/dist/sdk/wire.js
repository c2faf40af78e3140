/**
 * Wire primitives of PROTOCOL.md §2: canonical LEB128 varints, zigzag, little-endian f32, and
 * length-prefixed strings/bytes whose length is checked against a limit before anything is allocated.
 *
 * Decoders are total: every malformed input becomes a {@link DecodeError} with a `kind`, never a crash.
 * u64 fields are carried as JS numbers; a u64 above 2^53 − 1 cannot be represented exactly, so the
 * number readers refuse it with kind `overflow` (the bigint readers accept the full width).
 */
/** A typed decoding failure: `kind` says which rule the input broke, `message` says where. */
export class DecodeError extends Error {
    /** The rule the input broke. */
    kind;
    constructor(kind, detail) {
        super(`${kind}: ${detail}`);
        this.name = "DecodeError";
        this.kind = kind;
    }
}
/** A typed encoding failure. */
export class EncodeError extends Error {
    /** The rule the value broke. */
    kind;
    constructor(kind, detail) {
        super(`${kind}: ${detail}`);
        this.name = "EncodeError";
        this.kind = kind;
    }
}
const U32_MAX = 0xffff_ffff;
// `fatal` turns invalid UTF-8 into an exception; `ignoreBOM` keeps a leading U+FEFF as data so that
// decode → encode stays byte-identical.
const utf8Decoder = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true });
const utf8Encoder = new TextEncoder();
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;
/** Number of bytes `varint(v)` takes, for a non-negative integer `v` (number or bigint). */
export function varintLen(v) {
    let x = BigInt(v);
    let n = 1;
    while (x >= 0x80n) {
        x >>= 7n;
        n += 1;
    }
    return n;
}
/** Maps a signed 32-bit integer to its zigzag unsigned form. */
export function zigzag32Encode(n) {
    return ((n << 1) ^ (n >> 31)) >>> 0;
}
/** Inverse of {@link zigzag32Encode}. */
export function zigzag32Decode(u) {
    return (u >>> 1) ^ -(u & 1);
}
/** A cursor over one message's bytes. Every read checks bounds and limits first. */
export class Reader {
    bytes;
    view;
    pos = 0;
    /** Reads `bytes` from the start. */
    constructor(bytes) {
        this.bytes = bytes;
        this.view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
    }
    /** Bytes not read yet. */
    remaining() {
        return this.bytes.length - this.pos;
    }
    /** Offset of the next byte to read. */
    offset() {
        return this.pos;
    }
    /** One byte. */
    u8() {
        const b = this.bytes[this.pos];
        if (b === undefined)
            throw new DecodeError("truncated", `byte at offset ${this.pos}`);
        this.pos += 1;
        return b;
    }
    /**
     * A canonical varint of a `bits`-wide field, as a bigint. Checks run in the same order as the Rust
     * reader (read the byte, then check the group fits, then canonical form) so both refuse a given
     * input with the same kind.
     */
    varintBits(bits) {
        let value = 0n;
        let shift = 0;
        for (;;) {
            const b = this.u8();
            const group = b & 0x7f;
            if (shift >= bits || (bits - shift < 7 && group >> (bits - shift) !== 0)) {
                throw new DecodeError("overflow", "varint exceeds its field's width");
            }
            value |= BigInt(group) << BigInt(shift);
            if ((b & 0x80) === 0) {
                if (group === 0 && shift > 0) {
                    throw new DecodeError("non_canonical_varint", "redundant final zero group");
                }
                return value;
            }
            shift += 7;
        }
    }
    /** A varint holding a u32. */
    varintU32() {
        // Same rules as varintBits(32), in plain numbers: the hot path of every decoder.
        let value = 0;
        let shift = 0;
        for (;;) {
            const b = this.u8();
            const group = b & 0x7f;
            if (shift >= 32 || (32 - shift < 7 && group >> (32 - shift) !== 0)) {
                throw new DecodeError("overflow", "varint exceeds u32");
            }
            value += group * 2 ** shift;
            if ((b & 0x80) === 0) {
                if (group === 0 && shift > 0) {
                    throw new DecodeError("non_canonical_varint", "redundant final zero group");
                }
                return value;
            }
            shift += 7;
        }
    }
    /** A varint holding a u64, as a number; values above 2^53 − 1 are refused (`overflow`). */
    varintU64() {
        const v = this.varintBits(64);
        if (v > BigInt(Number.MAX_SAFE_INTEGER)) {
            throw new DecodeError("overflow", "u64 value above 2^53-1 is not representable");
        }
        return Number(v);
    }
    /** A varint holding a u64, at full width. */
    varintU64Big() {
        return this.varintBits(64);
    }
    /** A varint holding a u16. */
    varintU16() {
        const v = this.varintU32();
        if (v > 0xffff)
            throw new DecodeError("overflow", "varint exceeds u16");
        return v;
    }
    /** A zigzag-coded i32. */
    zigzag32() {
        return zigzag32Decode(this.varintU32());
    }
    /** A zigzag-coded i64, at full width. */
    zigzag64Big() {
        const u = this.varintU64Big();
        return (u >> 1n) ^ -(u & 1n);
    }
    /** A little-endian IEEE-754 binary32. */
    f32() {
        if (this.remaining() < 4)
            throw new DecodeError("truncated", `f32 at offset ${this.pos}`);
        const v = this.view.getFloat32(this.pos, true);
        this.pos += 4;
        return v;
    }
    /** `n` raw bytes (a view into the input, not a copy). */
    raw(n) {
        if (this.remaining() < n) {
            throw new DecodeError("truncated", `${n} bytes at offset ${this.pos}`);
        }
        const out = this.bytes.subarray(this.pos, this.pos + n);
        this.pos += n;
        return out;
    }
    /** A length-prefixed byte string of at most `max` bytes, copied out of the input. */
    bytesField(max, what = "bytes") {
        const len = this.varintU32Len(max, what);
        return this.raw(len).slice();
    }
    /** A length-prefixed UTF-8 string of at most `max` bytes. */
    str(max, what = "string") {
        const len = this.varintU32Len(max, what);
        const raw = this.raw(len);
        try {
            return utf8Decoder.decode(raw);
        }
        catch {
            throw new DecodeError("invalid_utf8", `${what} is not UTF-8`);
        }
    }
    varintU32Len(max, what) {
        const len = this.varintU32();
        if (len > max)
            throw new DecodeError("too_long", `${what}: length ${len} > ${max}`);
        return len;
    }
    /** Checks that the whole message was consumed. */
    finish() {
        const left = this.remaining();
        if (left !== 0)
            throw new DecodeError("trailing_bytes", `${left} trailing bytes`);
    }
}
/** A growable output buffer with the encoders matching {@link Reader}. */
export class Writer {
    buf;
    view;
    len = 0;
    /** An empty writer; `capacity` is only a first allocation hint. */
    constructor(capacity = 64) {
        this.buf = new Uint8Array(Math.max(16, capacity));
        this.view = new DataView(this.buf.buffer);
    }
    /** Bytes written so far. */
    get length() {
        return this.len;
    }
    reserve(n) {
        if (this.len + n <= this.buf.length)
            return;
        let cap = this.buf.length * 2;
        while (cap < this.len + n)
            cap *= 2;
        const next = new Uint8Array(cap);
        next.set(this.buf.subarray(0, this.len));
        this.buf = next;
        this.view = new DataView(next.buffer);
    }
    /** One byte (0..=255). */
    u8(v) {
        if (!Number.isInteger(v) || v < 0 || v > 0xff)
            throw new EncodeError("invalid", `u8 ${v}`);
        this.reserve(1);
        this.buf[this.len++] = v;
        return this;
    }
    /** A varint of a non-negative safe integer. */
    varint(v) {
        if (!Number.isSafeInteger(v) || v < 0)
            throw new EncodeError("invalid", `varint ${v}`);
        this.reserve(10);
        let x = v;
        while (x >= 0x80) {
            this.buf[this.len++] = (x % 0x80) | 0x80;
            x = Math.floor(x / 0x80);
        }
        this.buf[this.len++] = x;
        return this;
    }
    /** A varint of a u32 (refuses anything wider). */
    varintU32(v) {
        if (!Number.isInteger(v) || v < 0 || v > U32_MAX)
            throw new EncodeError("invalid", `u32 ${v}`);
        return this.varint(v);
    }
    /** A varint of a u64 given as a bigint. */
    varintBig(v) {
        if (v < 0n || v > 0xffffffffffffffffn)
            throw new EncodeError("invalid", `u64 ${v}`);
        this.reserve(10);
        let x = v;
        while (x >= 0x80n) {
            this.buf[this.len++] = Number(x & 0x7fn) | 0x80;
            x >>= 7n;
        }
        this.buf[this.len++] = Number(x);
        return this;
    }
    /** A zigzag-coded i32. */
    zigzag32(v) {
        if (!Number.isInteger(v) || v < -0x8000_0000 || v > 0x7fff_ffff) {
            throw new EncodeError("invalid", `i32 ${v}`);
        }
        return this.varint(zigzag32Encode(v));
    }
    /** A zigzag-coded i64 given as a bigint. */
    zigzag64Big(v) {
        const n = BigInt.asIntN(64, v);
        if (n !== v)
            throw new EncodeError("invalid", `i64 ${v}`);
        return this.varintBig(BigInt.asUintN(64, (n << 1n) ^ (n >> 63n)));
    }
    /** A little-endian binary32 (the number is rounded to f32 first). */
    f32(v) {
        this.reserve(4);
        this.view.setFloat32(this.len, v, true);
        this.len += 4;
        return this;
    }
    /** Raw bytes with no prefix. */
    raw(b) {
        this.reserve(b.length);
        this.buf.set(b, this.len);
        this.len += b.length;
        return this;
    }
    /** A length-prefixed byte string of at most `max` bytes. */
    bytesField(b, max, what = "bytes") {
        if (b.length > max)
            throw new EncodeError("too_long", `${what}: length ${b.length} > ${max}`);
        return this.varint(b.length).raw(b);
    }
    /** A length-prefixed UTF-8 string of at most `max` bytes. Lone surrogates are refused. */
    str(s, max, what = "string") {
        if (LONE_SURROGATE.test(s))
            throw new EncodeError("invalid", `${what} has a lone surrogate`);
        const b = utf8Encoder.encode(s);
        return this.bytesField(b, max, what);
    }
    /** The bytes written, as a fresh array. */
    finish() {
        return this.buf.slice(0, this.len);
    }
}
/** Lowercase hex of `b` (debugging, fixtures). */
export function toHex(b) {
    let s = "";
    for (const x of b)
        s += x.toString(16).padStart(2, "0");
    return s;
}
/** Parses lowercase or uppercase hex; odd lengths and non-hex digits are refused. */
export function fromHex(hex) {
    if (hex.length % 2 !== 0 || !/^[0-9a-fA-F]*$/.test(hex)) {
        throw new DecodeError("invalid", "not a hex string");
    }
    const out = new Uint8Array(hex.length / 2);
    for (let i = 0; i < out.length; i++)
        out[i] = parseInt(hex.slice(2 * i, 2 * i + 2), 16);
    return out;
}
