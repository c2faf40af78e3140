/**
 * What a {@link ZoneConnection} is given and what it tells: its options, the sockets and the
 * transport memory it is handed, the events it emits and what each carries ({@link CloseInfo},
 * {@link WelcomeInfo}, {@link DeltaInfo}, {@link TransferInfo}, …), its lifecycle states and its
 * counters.
 */

import type { ChatOptions } from "./chat.js";
import type { ClockOptions } from "./clock.js";
import type { TransferError } from "./connectionerrors.js";
import type { Delta, ZoneEvent } from "./delta.js";
import type { InputRefused, Kick, Redirect, Welcome } from "./messages.js";
import type { Mirror, MirrorChanges } from "./mirror.js";
import type { ReconnectOptions } from "./reconnect.js";
import type { Scheduler } from "./scheduler.js";
import type { FetchLike, TransportKind, TransportMode, WebTransportFactory } from "./webtransport.js";

/** The part of the WebSocket interface the connection uses. */
export interface SocketLike {
  /** Set to "arraybuffer" so binary frames arrive as ArrayBuffer. */
  binaryType: string;
  /** Sends one binary message. */
  send(data: Uint8Array): void;
  /** Closes the socket. */
  close(code?: number, reason?: string): void;
  /** Called when the socket is open. */
  onopen: ((ev: unknown) => void) | null;
  /** Called for each message; `data` is an ArrayBuffer, a typed array or a string (text frame). */
  onmessage: ((ev: { data: unknown }) => void) | null;
  /** Called once when the socket is closed, by either side or by an error. */
  onclose: ((ev: { code?: number; reason?: string }) => void) | null;
  /** Called on a transport error (a close follows). */
  onerror: ((ev: unknown) => void) | null;
}

/** Opens a socket to `url`. */
export type SocketFactory = (url: string) => SocketLike;

/**
 * Where a connection remembers that WebTransport failed for an entry URL (the part of the browser's
 * `sessionStorage` it uses).
 */
export interface TransportMemory {
  /** The value stored under `key`, or null. */
  getItem(key: string): string | null;
  /** Stores `value` under `key`. */
  setItem(key: string, value: string): void;
}

/** The {@link TransportMemory} key under which the transport chosen for `entryUrl` is kept. */
export function transportMemoryKey(entryUrl: string): string {
  return `zonekeep.transport:${entryUrl}`;
}

/** What 'fallback' carries: an attempt that tried WebTransport goes over WebSocket instead. */
export interface TransportFallback {
  /** Why WebTransport was not used. */
  reason: string;
  /**
   * True when the connection keeps to WebSocket from now on (auto mode after a failure or timeout);
   * false for this attempt only (a Redirect, or a host without WebTransport in `webtransport` mode).
   */
  remembered: boolean;
}

/** What 'transfer' carries: the player is being moved from one zone to another (§5.3.2). */
export interface TransferInfo {
  /** The zone the player leaves. */
  from: string;
  /** The zone the player now belongs to. */
  to: string;
  /** Where the connection goes: the new zone's WebSocket URL at its owner. */
  url: string;
}

/** What 'reload' carries. */
export interface ReloadInfo {
  /** {@link RELOAD_MESSAGE}, followed by the host's reason (which names the content version it needs). */
  message: string;
  /** The Kick CONTENT_OUTDATED, or null when only its close code (4027) arrived. */
  kick: Kick | null;
}

/** What 'movedElsewhere' carries. */
export interface MovedElsewhereInfo {
  /** {@link MOVED_ELSEWHERE_MESSAGE}, followed by the host's reason when it gave one. */
  message: string;
  /** The Kick CHARACTER_MOVED, or null when only its close code (4029) arrived. */
  kick: Kick | null;
}

/** Options of a {@link ZoneConnection}. */
export interface ZoneConnectionOptions {
  /**
   * WebSocket URL of the zone, e.g. `ws://127.0.0.1:7350/zones/arena-1`: the entry URL. In a fleet
   * any host answers there and redirects to the zone's owner; every reconnect starts here again,
   * never at a URL a Redirect named, since the owner may have changed.
   */
  url: string;
  /**
   * Gets a fresh ticket from the app's backend: called for the first join, after the grace window,
   * and when the host refuses a resume for a reason a new ticket fixes.
   */
  ticket: () => Promise<string>;
  /** Opens sockets (default: the global WebSocket). */
  socket?: SocketFactory;
  /**
   * Which transport carries the session (§1.1): `"auto"` (default) tries WebTransport within
   * `webTransportTimeoutMs` and otherwise uses WebSocket, remembering that choice; `"webtransport"`
   * uses WebTransport whenever the host serves it (its failures are failed attempts, retried like
   * any other; a host answering 404 to discovery, or a platform without WebTransport, gets
   * WebSocket); `"websocket"` never tries WebTransport. WebTransport also needs version 6 offered
   * and an entry URL of the form `ws(s)://host/zones/{zone}`.
   */
  transport?: TransportMode;
  /**
   * In `"auto"` mode, how long discovery, the session and its Welcome may take before the attempt
   * goes over WebSocket instead, in ms (default 3000).
   */
  webTransportTimeoutMs?: number;
  /** Opens WebTransport sessions (default: the global `WebTransport`, when there is one). */
  webTransport?: WebTransportFactory;
  /** Fetches the host's `/webtransport` discovery answer (default: the global `fetch`). */
  fetch?: FetchLike;
  /**
   * Where the fallback to WebSocket is remembered across reloads (default: the global
   * `sessionStorage` when there is one; null = nowhere), under {@link transportMemoryKey}.
   */
  transportMemory?: TransportMemory | null;
  /** Time and timers (default: the platform's). */
  scheduler?: Scheduler;
  /** Protocol versions offered (default: {@link SUPPORTED_VERSIONS}, the version this SDK implements). */
  versions?: number[];
  /**
   * The game content version this client was built for, sent in Hello: a dotted number such as
   * `1.4.0` (default empty = none). A host requiring a minimum refuses older (or no) content with
   * CONTENT_OUTDATED, which ends the connection with 'reload' (§4.1.2).
   */
  contentVersion?: string;
  /** Ping period in ms (default 1000). */
  pingIntervalMs?: number;
  /** Give up on a handshake after this many ms without Welcome, Redirects included (default 10000). */
  handshakeTimeoutMs?: number;
  /** Reconnect tuning. */
  reconnect?: ReconnectOptions;
  /** Server clock tuning. */
  clock?: ClockOptions;
  /** Chat tuning ({@link ZoneConnection.chat}, protocol version 11). */
  chat?: ChatOptions;
}

/** Why the connection (or one socket of it) closed. */
export interface CloseInfo {
  /** WebSocket close code (1006 when unknown). */
  code: number;
  /** Close reason, or the Kick's reason, or the error's message. */
  reason: string;
  /** The Kick the host sent before closing, if any. */
  kick: Kick | null;
  /** A local failure (decode error, handshake timeout…) that ended the socket, if any. */
  error: Error | null;
  /** True if another attempt is scheduled. */
  willReconnect: boolean;
  /**
   * True when the host refused this client's content version (Kick CONTENT_OUTDATED, §4.1.2): the
   * connection stopped for good and the app should reload the page; `reason` is then the
   * {@link ReloadInfo.message}. A 'reload' event came just before this 'close'.
   */
  reload: boolean;
  /**
   * True when the player's character was taken into another zone (Kick CHARACTER_MOVED, §5.3
   * "Characters"): the player is playing in another game or on another device, the connection
   * stopped for good, and `reason` is the {@link MovedElsewhereInfo.message}. A 'movedElsewhere'
   * event came just before this 'close'.
   */
  movedElsewhere: boolean;
  /** Delay before that attempt, in ms (0 when not reconnecting). */
  retryInMs: number;
}

/** Extra facts delivered with a Delta. */
export interface DeltaInfo {
  /** The known set after the Delta. */
  mirror: Mirror;
  /** What the Delta changed. */
  changes: MirrorChanges;
  /** Client time of arrival. */
  recvMs: number;
  /**
   * Over WebTransport: the State as it arrived (its `base` set). The 'delta' then carries the same
   * change relative to the state shown before (see {@link StateRing}). Absent for a WebSocket Delta.
   */
  state?: Delta;
}

/** What 'welcome' carries besides the Welcome. */
export interface WelcomeInfo {
  /** True when the reconnect token resumed the same player. */
  resumed: boolean;
  /** The transport of this session. */
  transport: TransportKind;
  /**
   * The move this Welcome completes (§5.3.2), or null. Its BASELINE 'delta' follows in the same
   * task: replace the old world with the new one there, without a frame in between.
   */
  transfer: TransferInfo | null;
}

/** What a WebTransport session did with the States it received (§5.8). */
export interface StateStats {
  /** States applied. */
  applied: number;
  /** States not newer than the newest applied (late or repeated datagrams). */
  stale: number;
  /** States whose base was not held (dropped). */
  noBase: number;
  /** States that did not decode against their base, or datagrams that were no State (dropped). */
  undecodable: number;
  /** Datagrams that arrived before the Welcome (dropped: the host repeats what was not acknowledged). */
  early: number;
}

/** Event handlers of a {@link ZoneConnection}. */
export interface ZoneConnectionEvents {
  /**
   * A Welcome; `resumed` is true when the reconnect token resumed the same player, `transport`
   * says what carries the session.
   */
  welcome: (welcome: Welcome, info: WelcomeInfo) => void;
  /** A Delta (or over WebTransport a State), after it was applied to the known set. */
  delta: (delta: Delta, info: DeltaInfo) => void;
  /**
   * One zone event from a Delta (delivered after the Delta's 'delta'), or over WebTransport from an
   * Events message (delivered as it arrives, in order).
   */
  event: (event: ZoneEvent, tick: number) => void;
  /**
   * A Kick. A 'close' follows, except after ZONE_MOVED or HOST_FENCED when the resume at the zone's
   * new owner lands on its first attempt: then a 'welcome' with `resumed: true` follows instead.
   */
  kick: (kick: Kick) => void;
  /**
   * The socket closed; `willReconnect` says whether the connection carries on. Not emitted for a
   * move (ZONE_MOVED, HOST_FENCED) that resumes at once: the player never left the game.
   */
  close: (info: CloseInfo) => void;
  /**
   * The zone refused one of this client's inputs (PROTOCOL.md §5.6): no ack will ever cover its
   * effect, so a predictor drops it ({@link Predictor.refuse}).
   */
  inputRefused: (refused: InputRefused) => void;
  /**
   * The host moved the player to another zone (§5.3.2): the connection is on its way there. Keep
   * drawing the world you have; the new zone's 'welcome' (with `transfer` set) and BASELINE
   * 'delta' follow together once it is reached. For logs and HUDs ("entering {to}").
   */
  transfer: (info: TransferInfo) => void;
  /** A Transfer could not be followed, or an attempt at the new zone failed (see {@link TransferError}). */
  transferError: (error: TransferError) => void;
  /**
   * The host refused this client's content version (Kick CONTENT_OUTDATED, §4.1.2): it was built
   * for older game content than the host now runs. The connection has stopped for good (a 'close'
   * with `reload: true` follows); the app should tell the player and reload the page, e.g.
   * `conn.on("reload", (r) => { showBanner(r.message); location.reload(); })`.
   */
  reload: (info: ReloadInfo) => void;
  /**
   * The player's character was taken into another zone (Kick CHARACTER_MOVED, §5.3 "Characters"):
   * the player started playing in another game or on another device. The connection has stopped
   * for good and does not reconnect (a 'close' with `movedElsewhere: true` follows); the game tells
   * the player and may offer to play here again, which is a new connection, e.g.
   * `conn.on("movedElsewhere", (m) => showScreen(m.message, "Play here"))`.
   */
  movedElsewhere: (info: MovedElsewhereInfo) => void;
  /**
   * The handshake is being redirected to `redirect.url` (§5.3.1): the connection follows on its own
   * with the same Hello; this is for logs and HUDs. Counted in {@link ConnectionStats.redirects}.
   */
  redirect: (redirect: Redirect) => void;
  /** An attempt that tried WebTransport goes over WebSocket instead (for logs and HUDs). */
  fallback: (info: TransportFallback) => void;
}

/** Lifecycle of a {@link ZoneConnection}. */
export type ConnectionState =
  | "idle"
  | "connecting"
  | "handshaking"
  | "open"
  | "reconnecting"
  /** Moving to another zone (§5.3.2): the old world stays on screen; not a disconnect. */
  | "transferring"
  | "closed";

/** Byte and message counters for HUDs. */
export interface ConnectionStats {
  /** Bytes received (message payloads). */
  bytesIn: number;
  /** Bytes sent. */
  bytesOut: number;
  /** Messages received. */
  messagesIn: number;
  /** Messages sent. */
  messagesOut: number;
  /** Bytes received over the last second. */
  bytesInPerSec: number;
  /** Bytes sent over the last second. */
  bytesOutPerSec: number;
  /** Redirects followed during handshakes (§5.3.1), the first join's included. */
  redirects: number;
  /**
   * Welcomes reached through an entry URL a Welcome listed, the entry URL being unreachable
   * (§5.3.1).
   */
  entryFallbacks: number;
  /** Welcomes that resumed the same player with the reconnect token. */
  resumes: number;
  /**
   * Welcomes that started a new player: the first join, and every reconnect that could not resume
   * (past the grace window, or the token refused).
   */
  freshJoins: number;
  /** Transfers completed: Welcomes (and BASELINEs) of the zone a Transfer named (§5.3.2). */
  transfers: number;
  /** Datagrams received (WebTransport; counted in the messages and bytes too). */
  datagramsIn: number;
  /** Datagrams sent (WebTransport; counted in the messages and bytes too). */
  datagramsOut: number;
}
