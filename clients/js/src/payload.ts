/**
 * The little-endian payload encoding of zone inputs and events (docs/MODULES.md, "Encoding";
 * `zonekeep_protocol::contract`): integers and f32 fixed-width little-endian, `bool` one byte 0 or 1,
 * `bytes` a u32 length then the bytes, `str` such bytes holding UTF-8, and the `rest` forms that take
 * every byte left without a length. Code written by `zonekeep codegen` builds inputs with
 * {@link PayloadWriter} and reads events with {@link PayloadReader}.
 *
 * The reader is total: a short payload, a bool other than 0 or 1, bad UTF-8 or bytes left over are a
 * {@link DecodeError}, never a crash. The writer refuses a value its type cannot hold with an
 * {@link EncodeError} rather than wrapping it.
 */

import { DecodeError, EncodeError } from "./wire.js";

const utf8 = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true });
const utf8Out = new TextEncoder();

/** Reads one payload front to back. */
export class PayloadReader {
  private readonly view: DataView;
  private at = 0;

  constructor(private readonly payload: Uint8Array) {
    this.view = new DataView(payload.buffer, payload.byteOffset, payload.byteLength);
  }

  /** Bytes not read yet. */
  get remaining(): number {
    return this.payload.byteLength - this.at;
  }

  /** Whether every byte has been read (an absent optional value reads as zero). */
  atEnd(): boolean {
    return this.remaining === 0;
  }

  private need(n: number, what: string): number {
    if (this.remaining < n) {
      throw new DecodeError("truncated", `${what} needs ${n} bytes, ${this.remaining} remain`);
    }
    const at = this.at;
    this.at += n;
    return at;
  }

  u8(): number {
    return this.view.getUint8(this.need(1, "a u8"));
  }
  u16(): number {
    return this.view.getUint16(this.need(2, "a u16"), true);
  }
  u32(): number {
    return this.view.getUint32(this.need(4, "a u32"), true);
  }
  u64(): bigint {
    return this.view.getBigUint64(this.need(8, "a u64"), true);
  }
  i8(): number {
    return this.view.getInt8(this.need(1, "an i8"));
  }
  i16(): number {
    return this.view.getInt16(this.need(2, "an i16"), true);
  }
  i32(): number {
    return this.view.getInt32(this.need(4, "an i32"), true);
  }
  i64(): bigint {
    return this.view.getBigInt64(this.need(8, "an i64"), true);
  }
  f32(): number {
    return this.view.getFloat32(this.need(4, "an f32"), true);
  }
  bool(): boolean {
    const v = this.view.getUint8(this.need(1, "a bool"));
    if (v > 1) throw new DecodeError("invalid", `a bool must be 0 or 1, not ${v}`);
    return v === 1;
  }
  /** A u32 length, then that many bytes (copied); the length is checked before anything is taken. */
  bytes(): Uint8Array {
    const len = this.u32();
    const at = this.need(len, "a byte string");
    return this.payload.slice(at, at + len);
  }
  /** `bytes` holding UTF-8. */
  str(): string {
    return decodeUtf8(this.bytes());
  }
  /** Every byte left (copied). */
  restBytes(): Uint8Array {
    const at = this.at;
    this.at = this.payload.byteLength;
    return this.payload.slice(at);
  }
  /** Every byte left, as UTF-8. */
  restStr(): string {
    return decodeUtf8(this.restBytes());
  }
  /** Refuses bytes left after the last value. */
  finish(): void {
    if (this.remaining !== 0) {
      throw new DecodeError("trailing_bytes", `${this.remaining} bytes after the last value`);
    }
  }
}

function decodeUtf8(b: Uint8Array): string {
  try {
    return utf8.decode(b);
  } catch {
    throw new DecodeError("invalid_utf8", "a string is not UTF-8");
  }
}

function int(v: number, min: number, max: number, what: string): number {
  if (!Number.isInteger(v) || v < min || v > max) {
    throw new EncodeError("invalid", `${v} is not a ${what}`);
  }
  return v;
}

function big(v: bigint, min: bigint, max: bigint, what: string): bigint {
  if (v < min || v > max) throw new EncodeError("invalid", `${v} is not a ${what}`);
  return v;
}

/** Builds one payload; {@link finish} returns the bytes written. */
export class PayloadWriter {
  private buf = new Uint8Array(32);
  private view = new DataView(this.buf.buffer);
  private len = 0;

  /**
   * Reserves `n` bytes and returns where they start. Call it before reading `this.buf` or
   * `this.view`: growing replaces both.
   */
  private room(n: number): number {
    if (this.len + n > this.buf.byteLength) {
      const grown = new Uint8Array(Math.max(this.buf.byteLength * 2, this.len + n));
      grown.set(this.buf.subarray(0, this.len));
      this.buf = grown;
      this.view = new DataView(grown.buffer);
    }
    const at = this.len;
    this.len += n;
    return at;
  }

  u8(v: number): this {
    const value = int(v, 0, 0xff, "u8");
    const at = this.room(1);
    this.view.setUint8(at, value);
    return this;
  }
  u16(v: number): this {
    const value = int(v, 0, 0xffff, "u16");
    const at = this.room(2);
    this.view.setUint16(at, value, true);
    return this;
  }
  u32(v: number): this {
    const value = int(v, 0, 0xffff_ffff, "u32");
    const at = this.room(4);
    this.view.setUint32(at, value, true);
    return this;
  }
  u64(v: bigint): this {
    const value = big(v, 0n, 0xffff_ffff_ffff_ffffn, "u64");
    const at = this.room(8);
    this.view.setBigUint64(at, value, true);
    return this;
  }
  i8(v: number): this {
    const value = int(v, -0x80, 0x7f, "i8");
    const at = this.room(1);
    this.view.setInt8(at, value);
    return this;
  }
  i16(v: number): this {
    const value = int(v, -0x8000, 0x7fff, "i16");
    const at = this.room(2);
    this.view.setInt16(at, value, true);
    return this;
  }
  i32(v: number): this {
    const value = int(v, -0x8000_0000, 0x7fff_ffff, "i32");
    const at = this.room(4);
    this.view.setInt32(at, value, true);
    return this;
  }
  i64(v: bigint): this {
    const value = big(v, -(1n << 63n), (1n << 63n) - 1n, "i64");
    const at = this.room(8);
    this.view.setBigInt64(at, value, true);
    return this;
  }
  /** An f32: the number rounded to the nearest f32. */
  f32(v: number): this {
    const value = v;
    const at = this.room(4);
    this.view.setFloat32(at, value, true);
    return this;
  }
  bool(v: boolean): this {
    return this.u8(v ? 1 : 0);
  }
  /** A u32 length, then the bytes. */
  bytes(v: Uint8Array): this {
    this.u32(v.byteLength);
    return this.raw(v);
  }
  /** A string as `bytes` of UTF-8. */
  str(v: string): this {
    return this.bytes(utf8Out.encode(v));
  }
  /** Bytes without a length: only the last value of a payload. */
  raw(v: Uint8Array): this {
    // Room first: growing replaces the buffer.
    const at = this.room(v.byteLength);
    this.buf.set(v, at);
    return this;
  }
  /** A string's UTF-8 without a length: only the last value of a payload. */
  rawStr(v: string): this {
    return this.raw(utf8Out.encode(v));
  }
  /** The payload. */
  finish(): Uint8Array {
    return this.buf.slice(0, this.len);
  }
}
