/**
 * The protocol's numbers (PROTOCOL.md §4, §5, §7): message tags, size and count limits, and the
 * protocol versions this SDK speaks with what each added.
 */

import { DELTA_TAG, STATE_TAG } from "./delta.js";
import { DecodeError } from "./wire.js";

/** Message tags (§4, §5). */
export const Tag = {
  Hello: 0x01,
  Input: 0x02,
  Ping: 0x03,
  Resync: 0x04,
  /** The Inputs datagram (§4.5, version 6). */
  Inputs: 0x05,
  /** A chat line (version 11). */
  Chat: 0x06,
  /** A report of chat lines to the moderators (version 11). */
  ChatReport: 0x07,
  /** A page of a channel's stored chat lines (version 11). */
  ChatHistory: 0x08,
  Welcome: 0x81,
  Delta: DELTA_TAG,
  Pong: 0x83,
  Kick: 0x84,
  Redirect: 0x85,
  Transfer: 0x86,
  InputRefused: 0x87,
  KnownSetCheck: 0x88,
  /** The State datagram (§5.8, version 6). */
  State: STATE_TAG,
  /** Events on a WebTransport session's control stream (§5.9, version 6). */
  Events: 0x8a,
  Entries: 0x8b,
  /** Chat lines of one channel (version 11). */
  ChatLines: 0x8c,
  /** A chat report filed, or a chat message refused (version 11). */
  ChatReply: 0x8d,
} as const;

/** Size and count limits of §7. */
export const LIMITS = {
  clientMessage: 8_192,
  serverMessage: 1_048_576,
  versions: 8,
  ticket: 4_096,
  reconnectToken: 64,
  zoneId: 128,
  contentVersion: 64,
  kickReason: 256,
  inputPayload: 4_096,
  url: 512,
  /** Entry URLs a Welcome lists (§5.3.1, version 7). */
  entries: 8,
  /** Redirects a client follows in one connection attempt (§5.3.1). */
  redirects: 3,
  /** Inputs one Inputs datagram carries (§4.5): the newest and the unacknowledged ones before it. */
  datagramInputs: 8,
  /** States a client keeps to apply onto, and a host to diff against (§5.8). */
  stateRing: 32,
} as const;

/**
 * The protocol versions this SDK implements, and offers by default: version 11 (chat: the Chat,
 * ChatReport and ChatHistory messages, ChatLines and ChatReply, and the Kick code BANNED; see
 * {@link CHAT_PROTOCOL}; a host of an older version picks 10), version 10 (the Kick codes
 * CHARACTER_MOVED and CHARACTER_ELSEWHERE, §5.3 "Characters": the player's character went into
 * another zone, or another zone holds it and could not give it back yet; otherwise the bytes of
 * version 9, which a host of that version picks), version 9 (the Kick code
 * WORLD_HALTED, §5.3: a lasting world whose saves failed stopped; otherwise the bytes of version 8,
 * which a host of that version picks), version 8 (the Transfer
 * message, §5.3.2: the player is moved to another zone), version 7 (Welcome's `entries`,
 * where else the zone may be entered, §5.3.1; a host that speaks only up to 6 picks 6), version 6 (the WebTransport
 * transport, §1.1, with its State and Inputs datagrams and the Events message; over WebSocket byte
 * for byte version 5), which includes version 5 (Welcome's `contentVersion` and the Kick code
 * CONTENT_OUTDATED, §4.1.2), version 4 (a resuming Hello's `resumeFrom`, §4.1.1) and version 3
 * (Redirect, and the Kick codes ZONE_MOVED, HOST_FENCED and TOO_MANY_REDIRECTS).
 */
export const SUPPORTED_VERSIONS: readonly number[] = [6, 7, 8, 9, 10, 11];

/**
 * The version that added {@link Transfer} (§5.3.2): version 7 plus that message. A host sends it
 * only to a session that negotiated this version or a later one.
 */
export const TRANSFER_PROTOCOL = 8;

/**
 * The version that added {@link KickCode.WORLD_HALTED} (§5.3): version 8 plus that code, its bytes
 * otherwise version 8's. A host sends it only to a session that negotiated this version or a later
 * one, and INTERNAL_ERROR to an older one.
 */
export const HALT_PROTOCOL = 9;

/**
 * The version that added {@link KickCode.CHARACTER_MOVED} and {@link KickCode.CHARACTER_ELSEWHERE}
 * (§5.3, "Characters"): version 9 plus those codes, its bytes otherwise version 9's. A host sends
 * them only to a session that negotiated this version or a later one; an older one gets KICKED in
 * place of CHARACTER_MOVED (it stops) and INTERNAL_ERROR in place of CHARACTER_ELSEWHERE (it retries).
 */
export const CHARACTER_PROTOCOL = 10;

/**
 * The version that added the WebTransport transport (§1.1): State (§5.8) and Inputs (§4.5)
 * datagrams and the Events message (§5.9). A WebTransport session speaks it or a later one.
 */
export const DATAGRAM_VERSION = 6;

/** The version that added {@link ResumeFrom} to Hello (§4.1.1). */
export const RESUME_FROM_VERSION = 4;

/**
 * The version that added {@link Welcome.contentVersion} and {@link KickCode.CONTENT_OUTDATED}
 * (§4.1.2): a Welcome of an older version carries no content version.
 */
export const CONTENT_VERSION_PROTOCOL = 5;

/**
 * The version that added {@link Welcome.entries} (§5.3.1): a Welcome of an older version lists no
 * entry URLs.
 */
export const ENTRIES_PROTOCOL = 7;

/** The tag of a message without decoding it (truncated input is a {@link DecodeError}). */
export function peekTag(bytes: Uint8Array): number {
  const t = bytes[0];
  if (t === undefined) throw new DecodeError("truncated", "empty message");
  return t;
}
