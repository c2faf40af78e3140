/**
 * The bytes of every message of PROTOCOL.md §4–§5: encode and total decode, in both directions. A
 * Delta (or a State, its datagram form) can only be decoded with its context (the schema from
 * Welcome and the known set), so {@link decodeServerMessage} takes that context as an argument.
 */

import {
  readChat,
  readChatHistory,
  readChatLines,
  readChatReply,
  readChatReport,
  writeChat,
  writeChatHistory,
  writeChatLines,
  writeChatReply,
  writeChatReport,
} from "./chatcodec.js";
import { decodeDeltaBody, DELTA_LIMITS, encodeDeltaBody, type KnownEntry, type ZoneEvent } from "./delta.js";
import type { ClientMessage, DatagramInput, Hello, ResumeFrom, ServerMessage } from "./messages.js";
import { CONTENT_VERSION_PROTOCOL, ENTRIES_PROTOCOL, LIMITS, RESUME_FROM_VERSION, Tag } from "./protocol.js";
import { decodeSchema, encodeSchema, type Schema } from "./schema.js";
import { DecodeError, EncodeError, Reader, Writer } from "./wire.js";

/**
 * What decoding a Delta needs: the schema from Welcome and the known set before the Delta (for a
 * State, the known set of its base state).
 */
export interface DeltaContext {
  /** Schema from Welcome. */
  schema: Schema;
  /** `[id, kind]` ascending. */
  known: readonly KnownEntry[];
}

/** A `resumeFrom` needs a reconnect token to resume and version 4 (or later) offered (§4.1.1). */
function checkResumeFrom(m: Hello, err: (m: string) => Error): void {
  if (m.resumeFrom == null) return;
  if (m.reconnectToken.length === 0) throw err("Hello has resume_from without a reconnect token");
  // Any version from 4 on defines it: a version 6 client offers only 6.
  if (!m.versions.some((v) => v >= RESUME_FROM_VERSION)) {
    throw err("Hello has resume_from without offering version 4 or later");
  }
}

function checkVersions(versions: readonly number[], err: (m: string) => Error): void {
  if (versions.length < 1 || versions.length > LIMITS.versions) throw err("versions count not in 1..=8");
  if (new Set(versions).size !== versions.length) throw err("versions are not distinct");
}

/** One input's fields (§4.2), as Input and the Inputs datagram both carry them. */
function writeInput(w: Writer, i: DatagramInput): void {
  if (i.seq === 0) throw new EncodeError("invalid", "input seq 0");
  w.varintU32(i.seq).varint(i.viewTick);
  w.bytesField(i.payload, LIMITS.inputPayload, "input payload");
}

function readInput(r: Reader): DatagramInput {
  const seq = r.varintU32();
  if (seq === 0) throw new DecodeError("invalid", "input seq 0");
  const viewTick = r.varintU64();
  return { seq, viewTick, payload: r.bytesField(LIMITS.inputPayload, "input payload") };
}

/** Encodes a client → server message. */
export function encodeClientMessage(m: ClientMessage): Uint8Array {
  const w = new Writer(64);
  switch (m.type) {
    case "hello":
      checkVersions(m.versions, (s) => new EncodeError("invalid", s));
      w.u8(Tag.Hello).varint(m.versions.length);
      for (const v of m.versions) w.varintU32(v);
      w.str(m.ticket, LIMITS.ticket, "ticket");
      w.bytesField(m.reconnectToken, LIMITS.reconnectToken, "reconnect token");
      w.str(m.contentVersion, LIMITS.contentVersion, "content version");
      checkResumeFrom(m, (s) => new EncodeError("invalid", s));
      if (m.resumeFrom != null) {
        const h = m.resumeFrom.hash >>> 0;
        w.u8(1).varint(m.resumeFrom.tick).varintU32(m.resumeFrom.count);
        w.u8(h & 0xff).u8((h >>> 8) & 0xff).u8((h >>> 16) & 0xff).u8(h >>> 24);
      }
      break;
    case "input":
      w.u8(Tag.Input);
      writeInput(w, m);
      break;
    case "inputs": {
      if (m.inputs.length > LIMITS.datagramInputs) {
        throw new EncodeError("too_long", `inputs in a datagram: ${m.inputs.length} > ${LIMITS.datagramInputs}`);
      }
      for (let i = 1; i < m.inputs.length; i++) {
        if ((m.inputs[i - 1]?.seq ?? 0) >= (m.inputs[i]?.seq ?? 0)) {
          throw new EncodeError("invalid", "datagram inputs not ascending by seq");
        }
      }
      w.u8(Tag.Inputs).varint(m.stateAck).varint(m.inputs.length);
      for (const i of m.inputs) writeInput(w, i);
      break;
    }
    case "ping":
      w.u8(Tag.Ping).varint(m.clientTime);
      break;
    case "resync":
      w.u8(Tag.Resync).varint(m.tick);
      break;
    case "chat":
      writeChat(w.u8(Tag.Chat), m);
      break;
    case "chat_report":
      writeChatReport(w.u8(Tag.ChatReport), m);
      break;
    case "chat_history":
      writeChatHistory(w.u8(Tag.ChatHistory), m);
      break;
  }
  if (w.length > LIMITS.clientMessage) throw new EncodeError("too_long", "client message over 8192 bytes");
  return w.finish();
}

/** Decodes a client → server message (what a host or a test server reads). */
export function decodeClientMessage(bytes: Uint8Array): ClientMessage {
  if (bytes.length > LIMITS.clientMessage) {
    throw new DecodeError("too_long", `client message of ${bytes.length} bytes`);
  }
  const r = new Reader(bytes);
  const tag = r.u8();
  let m: ClientMessage;
  switch (tag) {
    case Tag.Hello: {
      const n = r.varintU32();
      if (n > LIMITS.versions) throw new DecodeError("too_long", `versions: ${n} > ${LIMITS.versions}`);
      if (n < 1) throw new DecodeError("invalid", "Hello offers no version");
      const versions: number[] = [];
      for (let i = 0; i < n; i++) versions.push(r.varintU32());
      checkVersions(versions, (s) => new DecodeError("invalid", s));
      const ticket = r.str(LIMITS.ticket, "ticket");
      const reconnectToken = r.bytesField(LIMITS.reconnectToken, "reconnect token");
      const contentVersion = r.str(LIMITS.contentVersion, "content version");
      // Absent unless bytes follow the content version (§4.1.1).
      let resumeFrom: ResumeFrom | null = null;
      if (r.remaining() > 0) {
        if (r.u8() !== 1) throw new DecodeError("invalid", "Hello resume_from marker is not 1");
        // Refused at the marker (§4.1.1): what follows it is not read.
        checkResumeFrom(
          { type: "hello", versions, ticket, reconnectToken, contentVersion, resumeFrom: { tick: 0, count: 0, hash: 0 } },
          (s) => new DecodeError("invalid", s),
        );
        const tick = r.varintU64();
        const count = r.varintU32();
        const b = r.raw(4);
        const hash = ((b[0] ?? 0) | ((b[1] ?? 0) << 8) | ((b[2] ?? 0) << 16) | ((b[3] ?? 0) << 24)) >>> 0;
        resumeFrom = { tick, count, hash };
      }
      const hello: Hello = { type: "hello", versions, ticket, reconnectToken, contentVersion, resumeFrom };
      checkResumeFrom(hello, (s) => new DecodeError("invalid", s));
      m = hello;
      break;
    }
    case Tag.Input:
      m = { type: "input", ...readInput(r) };
      break;
    case Tag.Inputs: {
      const stateAck = r.varintU64();
      const n = r.varintU32();
      if (n > LIMITS.datagramInputs) {
        throw new DecodeError("too_long", `inputs in a datagram: ${n} > ${LIMITS.datagramInputs}`);
      }
      const inputs: DatagramInput[] = [];
      for (let i = 0; i < n; i++) {
        const input = readInput(r);
        const prev = inputs[inputs.length - 1];
        if (prev !== undefined && prev.seq >= input.seq) {
          throw new DecodeError("invalid", "datagram inputs not ascending by seq");
        }
        inputs.push(input);
      }
      m = { type: "inputs", stateAck, inputs };
      break;
    }
    case Tag.Ping:
      m = { type: "ping", clientTime: r.varintU64() };
      break;
    case Tag.Resync:
      m = { type: "resync", tick: r.varintU64() };
      break;
    case Tag.Chat:
      m = readChat(r);
      break;
    case Tag.ChatReport:
      m = readChatReport(r);
      break;
    case Tag.ChatHistory:
      m = readChatHistory(r);
      break;
    default:
      throw new DecodeError("unknown_tag", `client tag 0x${tag.toString(16)}`);
  }
  r.finish();
  return m;
}

/** Encodes a server → client message; a Delta or a State needs its context. */
export function encodeServerMessage(m: ServerMessage, ctx?: DeltaContext): Uint8Array {
  const w = new Writer(128);
  switch (m.type) {
    case "welcome": {
      if (!Number.isInteger(m.tickHz) || m.tickHz < 1 || m.tickHz > 1000) {
        throw new EncodeError("invalid", "tick_hz not in 1..=1000");
      }
      if (!Number.isInteger(m.patchEvery) || m.patchEvery < 1) {
        throw new EncodeError("invalid", "patch_every must be ≥ 1");
      }
      const contentVersion = m.contentVersion ?? "";
      if (m.version < CONTENT_VERSION_PROTOCOL && contentVersion !== "") {
        throw new EncodeError("invalid", "Welcome content_version needs version 5");
      }
      const entries = m.entries ?? [];
      if (m.version < ENTRIES_PROTOCOL && entries.length > 0) {
        throw new EncodeError("invalid", "Welcome entries need version 7");
      }
      w.u8(Tag.Welcome).varint(m.version).varintU32(m.playerId);
      w.str(m.zoneId, LIMITS.zoneId, "zone id");
      w.u8(m.role === "player" ? 0 : 1);
      w.varintU32(m.tickHz).varintU32(m.patchEvery).varint(m.tick).varintU32(m.features);
      w.varintU32(m.idleTimeoutMs).varintU32(m.handshakeTimeoutMs).varintU32(m.reconnectGraceMs);
      w.bytesField(m.reconnectToken, LIMITS.reconnectToken, "reconnect token");
      encodeSchema(w, m.schema);
      // Version 5 on: the host's content version follows the schema (§5.1).
      if (m.version >= CONTENT_VERSION_PROTOCOL) w.str(contentVersion, LIMITS.contentVersion, "content version");
      // Version 7 on: the entry URLs follow the content version (§5.1).
      if (m.version >= ENTRIES_PROTOCOL) writeEntries(w, entries);
      break;
    }
    case "delta":
      if (ctx === undefined) throw new EncodeError("invalid", "a Delta needs a schema and known set");
      w.u8(Tag.Delta);
      encodeDeltaBody(w, m, ctx.schema, ctx.known, false);
      break;
    case "state":
      if (ctx === undefined) throw new EncodeError("invalid", "a State needs a schema and known set");
      w.u8(Tag.State);
      encodeDeltaBody(w, m, ctx.schema, ctx.known, true);
      break;
    case "entries":
      w.u8(Tag.Entries);
      writeEntries(w, m.entries);
      break;
    case "events":
      if (m.events.length === 0) throw new EncodeError("invalid", "an Events message carries no events");
      if (m.events.length > DELTA_LIMITS.events) {
        throw new EncodeError("too_long", `events: ${m.events.length} > ${DELTA_LIMITS.events}`);
      }
      w.u8(Tag.Events).varint(m.tick).varint(m.events.length);
      for (const ev of m.events) {
        if (!Number.isInteger(ev.topic) || ev.topic < 0 || ev.topic > 0xffff) {
          throw new EncodeError("invalid", `event topic ${ev.topic}`);
        }
        w.varint(ev.topic).bytesField(ev.payload, DELTA_LIMITS.eventPayload, "event payload");
      }
      break;
    case "pong":
      w.u8(Tag.Pong).varint(m.clientTime).varint(m.serverTimeUs).varint(m.tick);
      break;
    case "kick":
      if (!Number.isInteger(m.code) || m.code < 0 || m.code > 0xffff) {
        throw new EncodeError("invalid", `kick code ${m.code}`);
      }
      w.u8(Tag.Kick).varint(m.code).str(m.reason, LIMITS.kickReason, "kick reason");
      break;
    case "redirect":
      w.u8(Tag.Redirect).str(m.url, LIMITS.url, "url").str(m.zoneId, LIMITS.zoneId, "zone id");
      break;
    case "transfer":
      w.u8(Tag.Transfer).str(m.zoneId, LIMITS.zoneId, "zone id");
      w.str(m.ticket, LIMITS.ticket, "ticket").str(m.url, LIMITS.url, "url");
      break;
    case "input_refused":
      if (m.seq === 0) throw new EncodeError("invalid", "input seq 0");
      if (!Number.isInteger(m.code) || m.code < 0 || m.code > 0xffff) {
        throw new EncodeError("invalid", `refusal code ${m.code}`);
      }
      w.u8(Tag.InputRefused).varintU32(m.seq).varint(m.code);
      break;
    case "known_set_check": {
      w.u8(Tag.KnownSetCheck).varint(m.tick).varintU32(m.count);
      const h = m.hash >>> 0;
      w.u8(h & 0xff).u8((h >>> 8) & 0xff).u8((h >>> 16) & 0xff).u8(h >>> 24);
      break;
    }
    case "chat_lines":
      writeChatLines(w.u8(Tag.ChatLines), m);
      break;
    case "chat_reply":
      writeChatReply(w.u8(Tag.ChatReply), m);
      break;
  }
  if (w.length > LIMITS.serverMessage) throw new EncodeError("too_long", "server message over 1 MiB");
  return w.finish();
}

/**
 * Decodes a server → client message. A Delta (or a State) is decoded against `ctx`; without one it
 * is a {@link DecodeError} (a Delta before Welcome is out of place).
 */
export function decodeServerMessage(bytes: Uint8Array, ctx?: DeltaContext): ServerMessage {
  if (bytes.length > LIMITS.serverMessage) {
    throw new DecodeError("too_long", `server message of ${bytes.length} bytes`);
  }
  const r = new Reader(bytes);
  const tag = r.u8();
  let m: ServerMessage;
  switch (tag) {
    case Tag.Welcome: {
      const version = r.varintU32();
      const playerId = r.varintU32();
      const zoneId = r.str(LIMITS.zoneId, "zone id");
      const roleByte = r.u8();
      if (roleByte > 1) throw new DecodeError("invalid", `role ${roleByte}`);
      const tickHz = r.varintU32();
      if (tickHz < 1 || tickHz > 1000) throw new DecodeError("invalid", `tick_hz ${tickHz}`);
      const patchEvery = r.varintU32();
      if (patchEvery < 1) throw new DecodeError("invalid", "patch_every 0");
      const tick = r.varintU64();
      const features = r.varintU32();
      const idleTimeoutMs = r.varintU32();
      const handshakeTimeoutMs = r.varintU32();
      const reconnectGraceMs = r.varintU32();
      const reconnectToken = r.bytesField(LIMITS.reconnectToken, "reconnect token");
      const schema = decodeSchema(r);
      const contentVersion = version >= CONTENT_VERSION_PROTOCOL ? r.str(LIMITS.contentVersion, "content version") : "";
      const entries = version >= ENTRIES_PROTOCOL ? readEntries(r) : [];
      m = {
        type: "welcome",
        version,
        playerId,
        zoneId,
        role: roleByte === 0 ? "player" : "observer",
        tickHz,
        patchEvery,
        tick,
        features,
        idleTimeoutMs,
        handshakeTimeoutMs,
        reconnectGraceMs,
        reconnectToken,
        schema,
        contentVersion,
        entries,
      };
      break;
    }
    case Tag.Delta:
      if (ctx === undefined) throw new DecodeError("invalid", "a Delta needs a schema and known set");
      m = { type: "delta", ...decodeDeltaBody(r, ctx.schema, ctx.known) };
      break;
    case Tag.State: {
      if (ctx === undefined) throw new DecodeError("invalid", "a State needs a schema and known set");
      const d = decodeDeltaBody(r, ctx.schema, ctx.known, true);
      m = { ...d, type: "state", base: d.base ?? 0 };
      break;
    }
    case Tag.Events: {
      const tick = r.varintU64();
      const n = r.varintU32();
      if (n > DELTA_LIMITS.events) throw new DecodeError("too_long", `events: ${n} > ${DELTA_LIMITS.events}`);
      if (n === 0) throw new DecodeError("invalid", "an Events message carries no events");
      const events: ZoneEvent[] = [];
      for (let i = 0; i < n; i++) {
        const topic = r.varintU16();
        events.push({ topic, payload: r.bytesField(DELTA_LIMITS.eventPayload, "event payload") });
      }
      m = { type: "events", tick, events };
      break;
    }
    case Tag.Entries:
      m = { type: "entries", entries: readEntries(r) };
      break;
    case Tag.Pong: {
      const clientTime = r.varintU64();
      const serverTimeUs = r.varintU64();
      m = { type: "pong", clientTime, serverTimeUs, tick: r.varintU64() };
      break;
    }
    case Tag.Kick: {
      const code = r.varintU16();
      m = { type: "kick", code, reason: r.str(LIMITS.kickReason, "kick reason") };
      break;
    }
    case Tag.Redirect: {
      const url = r.str(LIMITS.url, "url");
      m = { type: "redirect", url, zoneId: r.str(LIMITS.zoneId, "zone id") };
      break;
    }
    case Tag.Transfer: {
      const zoneId = r.str(LIMITS.zoneId, "zone id");
      const ticket = r.str(LIMITS.ticket, "ticket");
      m = { type: "transfer", zoneId, ticket, url: r.str(LIMITS.url, "url") };
      break;
    }
    case Tag.InputRefused: {
      const seq = r.varintU32();
      if (seq === 0) throw new DecodeError("invalid", "input seq 0");
      m = { type: "input_refused", seq, code: r.varintU16() };
      break;
    }
    case Tag.KnownSetCheck: {
      const tick = r.varintU64();
      const count = r.varintU32();
      const b = r.raw(4);
      const hash = ((b[0] ?? 0) | ((b[1] ?? 0) << 8) | ((b[2] ?? 0) << 16) | ((b[3] ?? 0) << 24)) >>> 0;
      m = { type: "known_set_check", tick, count, hash };
      break;
    }
    case Tag.ChatLines:
      m = readChatLines(r);
      break;
    case Tag.ChatReply:
      m = readChatReply(r);
      break;
    default:
      throw new DecodeError("unknown_tag", `server tag 0x${tag.toString(16)}`);
  }
  r.finish();
  return m;
}

/** Writes a list of entry URLs (Welcome from version 7, Entries): a count, then each URL. */
function writeEntries(w: Writer, entries: readonly string[]): void {
  if (entries.length > LIMITS.entries) {
    throw new EncodeError("too_long", `entries: ${entries.length} > ${LIMITS.entries}`);
  }
  w.varint(entries.length);
  for (const e of entries) w.str(e, LIMITS.url, "entry url");
}

/** Reads a list of entry URLs written by {@link writeEntries}. */
function readEntries(r: Reader): string[] {
  const n = r.varintU32();
  if (n > LIMITS.entries) throw new DecodeError("too_long", `entries: ${n} > ${LIMITS.entries}`);
  const entries: string[] = [];
  for (let i = 0; i < n; i++) entries.push(r.str(LIMITS.url, "entry url"));
  return entries;
}
