/**
 * Every message of PROTOCOL.md §4–§5, as the SDK hands it around: client → server (tags
 * 0x01..=0x7f) and server → client (0x80..=0xff), with the rules a client applies to what they carry
 * (where a Redirect or a Transfer may lead, the known-set hash). The protocol's numbers are in
 * `protocol.ts`, the Kick codes in `kickcodes.ts`, content versions in `contentversions.ts` and the
 * encode and total decode of every message in `messagecodec.ts`; this module re-exports them all.
 */

import type { Chat, ChatHistory, ChatLines, ChatReply, ChatReport } from "./chatcodec.js";
import type { Delta, ZoneEvent } from "./delta.js";
import type { Schema } from "./schema.js";

export { compareContentVersions } from "./contentversions.js";
export { KickCode, kickCodeName, kickResumesElsewhere } from "./kickcodes.js";
export {
  decodeClientMessage,
  decodeServerMessage,
  encodeClientMessage,
  encodeServerMessage,
  type DeltaContext,
} from "./messagecodec.js";
export {
  CHARACTER_PROTOCOL,
  CONTENT_VERSION_PROTOCOL,
  DATAGRAM_VERSION,
  ENTRIES_PROTOCOL,
  HALT_PROTOCOL,
  LIMITS,
  peekTag,
  RESUME_FROM_VERSION,
  SUPPORTED_VERSIONS,
  Tag,
  TRANSFER_PROTOCOL,
} from "./protocol.js";

/** §4.1 */
export interface Hello {
  type: "hello";
  /** Protocol versions offered (1..=8, distinct). */
  versions: number[];
  /** The signed ticket. */
  ticket: string;
  /** Token from an earlier Welcome; empty = none. */
  reconnectToken: Uint8Array;
  /** The content version the client was built for, a dotted number (§4.1.2); empty = none. */
  contentVersion: string;
  /**
   * §4.1.1 (version 4): what a resuming client's known set holds, so the host may continue with a
   * Delta instead of a BASELINE. Only with a reconnect token and version 4 (or later) offered;
   * absent = none.
   */
  resumeFrom?: ResumeFrom | null;
}

/**
 * §4.1.1: the tick of the last Delta the client applied and its known set's count and
 * {@link knownSetHash}, exactly as a {@link KnownSetCheck} states them.
 */
export interface ResumeFrom {
  /** Tick of the last Delta applied. */
  tick: number;
  /** Entities in the known set. */
  count: number;
  /** {@link knownSetHash} of the known ids, ascending. */
  hash: number;
}

/** §4.2 */
export interface Input {
  type: "input";
  /** Sequence, from 1, +1 per input. */
  seq: number;
  /** The server tick the client was displaying. */
  viewTick: number;
  /** Game-defined input bytes. */
  payload: Uint8Array;
}

/** One input inside an {@link Inputs} datagram: the fields of {@link Input} (§4.2). */
export interface DatagramInput {
  /** Sequence, from 1, +1 per input. */
  seq: number;
  /** The server tick the client was displaying. */
  viewTick: number;
  /** Game-defined input bytes. */
  payload: Uint8Array;
}

/**
 * §4.5 (version 6, a WebTransport datagram): the acknowledgement of the newest State applied and
 * the newest inputs with the ones before them no State has acknowledged yet, so a lost datagram
 * costs nothing.
 */
export interface Inputs {
  type: "inputs";
  /** Tick of the newest State (§5.8) the client applied; 0 = none yet (a tick, where a Delta's `ack` is an input seq). */
  stateAck: number;
  /** At most {@link LIMITS.datagramInputs}, `seq` strictly ascending (newest last); may be empty. */
  inputs: DatagramInput[];
}

/** §4.3 */
export interface Ping {
  type: "ping";
  /** Opaque to the server; echoed in Pong. */
  clientTime: number;
}

/** §4.4: the client's known set failed a check; it asks for a BASELINE. */
export interface Resync {
  type: "resync";
  /** Tick of the last Delta the client applied (0 = none). */
  tick: number;
}

/** §5.1 */
export interface Welcome {
  type: "welcome";
  /** Negotiated protocol version. */
  version: number;
  /** This connection's player (or observer) id. */
  playerId: number;
  /** Zone id. */
  zoneId: string;
  /** Player or observer. */
  role: "player" | "observer";
  /** Simulation ticks per second (1..=1000). */
  tickHz: number;
  /** Ticks per Delta (≥ 1). */
  patchEvery: number;
  /** The zone's current tick. */
  tick: number;
  /** Feature bits (none defined yet; unknown bits are ignored). */
  features: number;
  /** Milliseconds of client silence after which the host kicks with IDLE_TIMEOUT (a Ping counts). */
  idleTimeoutMs: number;
  /** Milliseconds the host waits for a Hello. */
  handshakeTimeoutMs: number;
  /** Milliseconds a dropped player stays resumable with the reconnect token. */
  reconnectGraceMs: number;
  /** Token to resume this player within the grace window. */
  reconnectToken: Uint8Array;
  /** How to decode entities. */
  schema: Schema;
  /**
   * The game content version the host runs (§4.1.2), a dotted number; empty = none. Only a Welcome
   * of version 5 or later carries it ({@link CONTENT_VERSION_PROTOCOL}): an older one decodes with
   * `""`, and encoding a non-empty one for an older version is an error.
   */
  contentVersion: string;
  /**
   * Where else the zone may be entered when the entry URL is unreachable (§5.3.1): at most 8
   * WebSocket URLs of the zone, its owner first, then the fleet's other live hosts. Only a Welcome
   * of version 7 or later lists them ({@link ENTRIES_PROTOCOL}): an older one decodes with `[]`,
   * and encoding a non-empty list for an older version is an error. Absent = none.
   */
  entries?: readonly string[];
}

/** A Delta as a message (§5.5). */
export interface DeltaMessage extends Delta {
  type: "delta";
}

/**
 * A State as a message (§5.8, version 6): a Delta written against the state of tick `base` (0 =
 * the empty state, exactly when `baseline`), with no events. Decoded against its base's known set.
 */
export interface StateMessage extends Delta {
  type: "state";
  /** The tick of the state it applies to; 0 = the empty state. */
  base: number;
}

/**
 * §5.9 (version 6): the zone events of the patch of `tick`, on a WebTransport session's control
 * stream (a State may be lost; events must arrive). Delivered like a Delta's events.
 */
export interface EventsMessage {
  type: "events";
  /** The tick whose patch carried them. */
  tick: number;
  /** 1..=1024 events, in the order the zone raised them. */
  events: ZoneEvent[];
}

/** §5.2 */
export interface Pong {
  type: "pong";
  /** Echoed from Ping. */
  clientTime: number;
  /** Host monotonic clock, microseconds. */
  serverTimeUs: number;
  /** Zone tick when the host answered. */
  tick: number;
}

/** §5.3 */
export interface Kick {
  type: "kick";
  /** A {@link KickCode} value (unknown codes are kept as-is). */
  code: number;
  /** Human-readable reason. */
  reason: string;
}

/** §5.6: the zone refused input `seq`; a predictor drops it. */
export interface InputRefused {
  type: "input_refused";
  /** The refused input's sequence number. */
  seq: number;
  /** The zone's reason code (game-defined). */
  code: number;
}

/** §5.7: what the client's known set should be after the Delta of `tick`. */
export interface KnownSetCheck {
  type: "known_set_check";
  /** Tick of the last Delta the check covers. */
  tick: number;
  /** Entities in the known set. */
  count: number;
  /** {@link knownSetHash} of the known ids, ascending. */
  hash: number;
}

/**
 * FNV-1a (32 bit) over each id's four little-endian bytes, in order (§5.7): what a
 * {@link KnownSetCheck} carries.
 */
export function knownSetHash(ids: Iterable<number>): number {
  let h = 0x811c9dc5;
  for (const id of ids) {
    for (let k = 0; k < 4; k++) {
      h ^= (id >>> (8 * k)) & 0xff;
      h = Math.imul(h, 0x01000193) >>> 0;
    }
  }
  return h >>> 0;
}

/**
 * §5.3.1 (version 3): the answer to a Hello at a host that does not own the zone; the client sends
 * the same Hello to `url`.
 */
export interface Redirect {
  type: "redirect";
  /** The zone's full WebSocket URL at its owner (`ws://` or `wss://`). */
  url: string;
  /** The zone there. */
  zoneId: string;
}

/**
 * The URL a Redirect leads to, or null when it is not an absolute `ws://` or `wss://` URL, which a
 * client must refuse (§5.3.1): a Redirect must not send a ticket anywhere but to a zone host. The
 * scheme is matched without regard to case. The same rule as the Rust `Redirect::websocket_url`.
 */
export function redirectTarget(r: Redirect): string | null {
  const i = r.url.indexOf("://");
  if (i < 0) return null;
  const scheme = r.url.slice(0, i).toLowerCase();
  const rest = r.url.slice(i + 3);
  // An empty authority (`ws:///zones/a`) names no host.
  if ((scheme !== "ws" && scheme !== "wss") || rest === "" || rest.startsWith("/")) return null;
  return r.url;
}

/** §5.3.2 (version 8): the player was moved to another zone. */
export interface Transfer {
  type: "transfer";
  /** The zone the player now belongs to. */
  zoneId: string;
  /** The transfer credential: a single-use ticket for that zone (§8). */
  ticket: string;
  /** The zone's full WebSocket URL at its owner (`ws://` or `wss://`). */
  url: string;
}

/**
 * The URL a Transfer leads to, or null when it is not an absolute `ws://` or `wss://` URL: the
 * client then ignores the Transfer (§5.3.2), so the credential never goes anywhere but to a zone
 * host. The same rule as {@link redirectTarget} and the Rust `Transfer::websocket_url`.
 */
export function transferTarget(t: Transfer): string | null {
  return redirectTarget({ type: "redirect", url: t.url, zoneId: t.zoneId });
}

/** Messages a client sends (Inputs only as a WebTransport datagram; the chat messages from version 11). */
export type ClientMessage = Hello | Input | Ping | Resync | Inputs | Chat | ChatReport | ChatHistory;

/**
 * Entries `0x8b` (§5.3.1, version 7): where else the zone may be entered, anew, sent when the list
 * the Welcome gave changed (a host joined, drained or died). It replaces the list the client held.
 */
export interface Entries {
  type: "entries";
  /** As {@link Welcome.entries}: at most 8 WebSocket URLs of the zone, its owner first. */
  entries: readonly string[];
}

/**
 * The URLs of `entries` a client may connect to (§5.3.1): absolute `ws://` or `wss://` URLs, the
 * others skipped, as a Redirect to them would be refused.
 */
export function websocketEntries(entries: readonly string[] | undefined): string[] {
  return (entries ?? []).filter((url) => redirectTarget({ type: "redirect", url, zoneId: "" }) !== null);
}

/** Messages a server sends (State as a WebTransport datagram, or on its control stream). */
export type ServerMessage =
  | Entries
  | Welcome
  | DeltaMessage
  | StateMessage
  | Pong
  | Kick
  | Redirect
  | Transfer
  | InputRefused
  | KnownSetCheck
  | EventsMessage
  | ChatLines
  | ChatReply;
