/**
 * `ZoneConnection`: one client's session with a zone over a WebSocket-like socket.
 *
 * It performs the Hello/Welcome handshake (offering the versions this SDK speaks and checking the
 * host's pick; following Redirects to the zone's owner: at most three per attempt, the same Hello
 * at every hop, only to `ws://` or `wss://` URLs, every attempt starting at the entry URL), keeps
 * the known set ({@link Mirror}) and the server clock estimate ({@link ServerClock}),
 * pings once a second, stamps inputs with seq and view tick, counts bytes and messages, and reconnects:
 * inside the grace window it resumes the same player with the reconnect token from Welcome; after it,
 * or when the host refuses the token (e.g. it restarted and forgot it), it asks the app for a fresh
 * ticket and joins as a new player. A ticket the host refuses on a resume (expired, replayed, or signed
 * with a key it no longer has) is replaced by a fresh one too; a freshly fetched ticket refused for
 * its signature is not retried, since another from the same source would fail the same way.
 * Attempts back off exponentially with jitter and are bounded. A Kick ZONE_MOVED or HOST_FENCED
 * (the zone moved to another host) resumes at once: its first attempt waits for no backoff.
 * When the entry host cannot be reached (nothing answers, or it is shutting down), the attempt goes
 * on at once through the entry URLs the last version 7 Welcome listed ({@link Welcome.entries}:
 * the zone's owner, then the fleet's other live hosts), in order; the next attempt starts at the
 * entry URL again (§5.3.1).
 *
 * Content versions (§4.1.2): the Hello carries `contentVersion` (the content this build was made
 * for), every version 5 Welcome the host's ({@link Welcome.contentVersion}). A host that requires
 * newer content answers Kick CONTENT_OUTDATED: the connection stops for good (no reconnect loop)
 * and emits 'reload' with {@link RELOAD_MESSAGE}, then a 'close' whose `reload` is true;
 * `connect()` rejects with a {@link ContentOutdatedError}. The app reloads the page.
 *
 * Characters (§5.3 "Characters", version 10): a Kick CHARACTER_MOVED says the player's character
 * was taken into another zone (the player started playing in another game or on another device).
 * The session is over: the connection does not reconnect, whatever the policy says (that would take
 * the character back at once), emits 'movedElsewhere' with {@link MOVED_ELSEWHERE_MESSAGE}, then a
 * 'close' whose `movedElsewhere` is true; `connect()`, if still waiting, rejects with a
 * {@link CharacterMovedError}. The game tells the player and lets them choose to play here again
 * (a new connection). A join refused with CHARACTER_ELSEWHERE (another zone holds the character
 * and could not give it back yet) is retried with backoff, like INTERNAL_ERROR.
 *
 * Transports (§1.1, version 6): with `transport: "auto"` (the default) an attempt first asks the
 * entry host where its WebTransport sessions are (`GET /webtransport` on the entry URL's HTTP
 * origin), opens one there and sends the Hello on its control stream; States then arrive as
 * datagrams and go through a {@link StateRing} (reported as 'delta' like Deltas), inputs leave as
 * Inputs datagrams repeating the ones no State has acknowledged, and Events messages are delivered as
 * 'event' like a Delta's events. When discovery, the session or its Welcome fail or take longer than
 * `webTransportTimeoutMs`, the attempt goes over WebSocket instead, and the connection keeps to
 * WebSocket from then on (remembered in `sessionStorage` too, so a reload does not wait again).
 * A Redirect over WebTransport is followed over WebTransport: the owner is asked where its sessions
 * are (`GET /webtransport` on the Redirect URL's HTTP origin) and the same Hello goes to a session
 * there; only when the owner serves none does that hop go over WebSocket (a 'fallback' saying why).
 *
 * Transfers (§5.3.2, version 8): a Transfer moves the player to another zone. The connection emits
 * 'transfer' ({@link TransferInfo}), keeps the source connection open and its world untouched
 * (no 'welcome' or 'delta' in between: the game keeps drawing what it has), and opens a new
 * connection to the Transfer's URL with a Hello carrying the transfer credential (no reconnect
 * token, Redirects followed as usual, over WebTransport when the session was). Only when the
 * target's Welcome **and** its BASELINE have arrived does it emit that 'welcome' (with
 * {@link WelcomeInfo.transfer}) and 'delta' together, in one task, so no frame is drawn between
 * the two worlds; then it closes the source connection. Its state is "transferring" meanwhile,
 * not "reconnecting". A failed attempt ('transferError', `willRetry`) is retried with backoff while
 * the credential is valid, through the Transfer's URL, then the entry URL (now naming the new
 * zone) and the listed entries; later reconnects use the new zone's reconnect token and id.
 *
 * Chat (version 11): {@link ZoneConnection.chat} sends and hears the lines of the session's chat
 * channels (see {@link ChatClient}); on a session of an older version its calls reject with a
 * {@link ChatError} `unsupported`. A Kick BANNED (version 11) stops the connection for good, like
 * JOIN_REFUSED; `banOf(kick)` reads until when.
 *
 * The socket factory, the WebTransport factory, `fetch` and the scheduler are injectable, so tests
 * drive a whole session over fake sockets and a manual clock.
 */

import { ChatClient, type ChatSink } from "./chat.js";
import { CHAT_PROTOCOL, type Chat, type ChatHistory, type ChatReport } from "./chatcodec.js";
import { ServerClock } from "./clock.js";
import {
  CharacterMovedError,
  ContentOutdatedError,
  movedElsewhereMessage,
  RedirectError,
  reloadMessage,
  TRANSFER_FINAL_KICKS,
  TransferError,
} from "./connectionerrors.js";
import {
  transportMemoryKey,
  type CloseInfo,
  type ConnectionState,
  type ConnectionStats,
  type SocketLike,
  type StateStats,
  type TransferInfo,
  type TransportMemory,
  type WelcomeInfo,
  type ZoneConnectionEvents,
  type ZoneConnectionOptions,
} from "./connectiontypes.js";
import { inputsDatagram, STATE_ACK_HOLD_MS, UNACKED_KEPT, unackedAfter } from "./inputs.js";
import {
  DATAGRAM_VERSION,
  decodeServerMessage,
  encodeClientMessage,
  ENTRIES_PROTOCOL,
  KickCode,
  kickCodeName,
  kickResumesElsewhere,
  LIMITS,
  peekTag,
  redirectTarget,
  RESUME_FROM_VERSION,
  SUPPORTED_VERSIONS,
  Tag,
  TRANSFER_PROTOCOL,
  transferTarget,
  websocketEntries,
  type ClientMessage,
  type DatagramInput,
  type Hello,
  type Kick,
  type KnownSetCheck,
  type Redirect,
  type ResumeFrom,
  type Transfer,
  type Welcome,
} from "./messages.js";
import { Mirror } from "./mirror.js";
import { backoffMs, defaultReconnectPolicy, type ReconnectDecision } from "./reconnect.js";
import { systemScheduler, type Scheduler, type TimerHandle } from "./scheduler.js";
import {
  defaultSocketFactory,
  detach,
  isBaseline,
  platformFetch,
  platformMemory,
  platformWebTransport,
  RateMeter,
  toBytes,
} from "./sockets.js";
import { StateRing } from "./states.js";
import { credentialLifetimeMs, ticketSubject, withZone } from "./tickets.js";
import {
  discoverWebTransport,
  webTransportOptions,
  webTransportSessionUrl,
  WebTransportSocket,
  zoneOfEntryUrl,
  type TransportKind,
  type TransportMode,
  type WebTransportEndpoint,
  type WebTransportFactory,
} from "./webtransport.js";
import { DecodeError, EncodeError } from "./wire.js";

// The connection's public types and errors have files of their own; they are exported from here.
export {
  CharacterMovedError,
  ContentOutdatedError,
  MOVED_ELSEWHERE_MESSAGE,
  RedirectError,
  RELOAD_MESSAGE,
  TransferError,
} from "./connectionerrors.js";
export {
  transportMemoryKey,
  type CloseInfo,
  type ConnectionState,
  type ConnectionStats,
  type DeltaInfo,
  type MovedElsewhereInfo,
  type ReloadInfo,
  type SocketFactory,
  type SocketLike,
  type StateStats,
  type TransferInfo,
  type TransportFallback,
  type TransportMemory,
  type WelcomeInfo,
  type ZoneConnectionEvents,
  type ZoneConnectionOptions,
} from "./connectiontypes.js";

/** A move to another zone under way (§5.3.2). */
interface TransferState {
  info: TransferInfo;
  credential: string;
  /** Scheduler time after which the credential is no longer valid. */
  deadline: number;
  /** The source connection: open until the new zone's BASELINE, so nothing is torn down early. */
  origin: SocketLike | null;
  /** The next attempt starts at the Transfer's URL (the first one does). */
  direct: boolean;
  /** The new zone's reconnect token, once one of its Welcomes gave it. */
  token: Uint8Array | null;
  /** The new zone's Welcome, told together with its BASELINE. */
  held: { welcome: Welcome; info: WelcomeInfo } | null;
  failures: number;
}

type Listeners = { [K in keyof ZoneConnectionEvents]: Set<ZoneConnectionEvents[K]> };

/** One client session with a zone, carried over reconnects. */
export class ZoneConnection {
  /** The server clock estimate (kept across reconnects, restarted on each Welcome). */
  readonly clock: ServerClock;
  /**
   * Chat (protocol version 11): lines of the channels this session hears, `send`, `dm`, `report`
   * and `history`. See {@link ChatClient}; on a session of version 10 or older its methods reject
   * with a {@link ChatError} `unsupported`.
   */
  readonly chat: ChatClient;
  private readonly opts: ZoneConnectionOptions;
  private readonly sched: Scheduler;
  private readonly versions: number[];
  private readonly listeners: Listeners = {
    welcome: new Set(),
    delta: new Set(),
    event: new Set(),
    kick: new Set(),
    close: new Set(),
    inputRefused: new Set(),
    transfer: new Set(),
    transferError: new Set(),
    redirect: new Set(),
    reload: new Set(),
    movedElsewhere: new Set(),
    fallback: new Set(),
  };
  private socket: SocketLike | null = null;
  private gen = 0;
  private st: ConnectionState = "idle";
  private mirrorState: Mirror | null = null;
  private welcomeMsg: Welcome | null = null;
  private ticketValue: string | null = null;
  private token: Uint8Array = new Uint8Array(0);
  private playerId: number | null = null;
  private mode: "fresh" | "resume" = "fresh";
  /**
   * A host refused this session's Hello with resume_from as a protocol error (a fleet part way
   * through an upgrade, §4.1.1): resume without it until a Welcome lands.
   */
  private resumeFromRefused = false;
  private attempts = 0;
  private disconnectedAt: number | null = null;
  /**
   * The 'close' of a session the host moved (ZONE_MOVED or HOST_FENCED), held back while the first
   * attempt at the new owner is under way: it is emitted only if that attempt does not land.
   */
  private untoldMove: CloseInfo | null = null;
  private forceFresh = false;
  /** The next attempt fetches a new ticket (the last one was refused). */
  private renewTicket = false;
  /** Whether the ticket of the current attempt had been presented before. */
  private ticketReused = false;
  private seq = 0;
  private lastAck = 0;
  private controlled: number | null = null;
  private lastDeltaTick = 0;
  private lastKick: Kick | null = null;
  private localError: Error | null = null;
  private timers = new Set<TimerHandle>();
  private pingTimer: TimerHandle | null = null;
  private handshakeTimer: TimerHandle | null = null;
  private viewTickSource: (() => number) | null = null;
  private readonly inMeter = new RateMeter();
  private readonly outMeter = new RateMeter();
  private counters = {
    bytesIn: 0,
    bytesOut: 0,
    messagesIn: 0,
    messagesOut: 0,
    redirects: 0,
    entryFallbacks: 0,
    resumes: 0,
    freshJoins: 0,
    transfers: 0,
    datagramsIn: 0,
    datagramsOut: 0,
  };
  /** The current socket's Welcome arrived (its messages are a session's, not a handshake's). */
  private welcomed = false;
  /** A move to another zone under way (§5.3.2). */
  private transfer: TransferState | null = null;
  /** The zone a Transfer moved the session to: entry URLs name it from then on (null = none). */
  private zoneId: string | null = null;
  /** The Hello of the current attempt: every hop of it sends exactly this. */
  private hello: Hello | null = null;
  /** Redirects followed in the current attempt. */
  private hops = 0;
  /** Where else the zone may be entered, from the newest Welcome that listed them (§5.3.1). */
  private entries: string[] = [];
  /** Which of {@link entryCandidates} the current attempt tries: 0 = the entry URL. */
  private entryIndex = 0;
  /** The URL the last Redirect of the current attempt named (null = none yet). */
  private hopUrl: string | null = null;
  /** A Resync was sent: Deltas are skipped until the BASELINE that answers it. */
  private awaitingBaseline = false;
  private syncCounters = { resyncs: 0, deltasSkipped: 0, inputsRefused: 0 };
  private firstWelcome: { resolve: (w: Welcome) => void; reject: (e: Error) => void } | null = null;
  private readonly transportMode: TransportMode;
  private readonly memory: TransportMemory | null;
  /** WebTransport failed in auto mode: every later attempt goes over WebSocket. */
  private webSocketOnly = false;
  /** The transport of the current (or last) attempt's socket. */
  private transportKind: TransportKind | null = null;
  /** The current socket when it is a WebTransport session. */
  private wt: WebTransportSocket | null = null;
  /** Auto mode: WebTransport is being tried and has no Welcome yet; a failure falls back. */
  private wtTrial = false;
  /** Bumped whenever a WebTransport try starts or ends, so its async steps know they are stale. */
  private wtTry = 0;
  private wtTimer: TimerHandle | null = null;
  /** The states of a WebTransport session (§5.8); null over WebSocket. */
  private ring: StateRing | null = null;
  /** Inputs no State has acknowledged yet, oldest first (at most {@link LIMITS.datagramInputs}). */
  private pendingInputs: DatagramInput[] = [];
  /** The newest State tick an Inputs datagram carried as its ack. */
  private ackSent = 0;
  /** When the last ack-only Inputs datagram went (at most one per patch). */
  private ackOnlyAt = Number.NEGATIVE_INFINITY;
  private ackTimer: TimerHandle | null = null;
  /** The highest input ack any State carried (pending inputs at or below it are dropped). */
  private inputAck = 0;
  /**
   * Inputs sent over WebSocket that no Delta has acknowledged yet, oldest first (at most
   * {@link UNACKED_KEPT}). A resume sends them again (§4.2): a zone handed over in a drain keeps only
   * the inputs it consumed, and the ack of a later input would otherwise vouch for them.
   */
  private sentUnacked: DatagramInput[] = [];
  private stateCounters: StateStats = { applied: 0, stale: 0, noBase: 0, undecodable: 0, early: 0 };
  /** What {@link chat} is told of the session's chat messages. */
  private chatSink: ChatSink | null = null;
  /** The principal of the current session (its ticket's `sub`), or null when unknown. */
  private principal: string | null = null;

  /** A connection that does nothing until {@link connect}. */
  constructor(options: ZoneConnectionOptions) {
    this.opts = options;
    this.sched = options.scheduler ?? systemScheduler;
    this.versions = options.versions ?? [...SUPPORTED_VERSIONS];
    this.clock = new ServerClock(options.clock);
    this.chat = new ChatClient(
      {
        scheduler: this.sched,
        version: () => (this.welcomed && this.st === "open" && this.socket !== null ? (this.welcomeMsg?.version ?? null) : null),
        principal: () => this.principal,
        features: () => (this.welcomed && this.st === "open" ? (this.welcomeMsg?.features ?? 0) : 0),
        zoneId: () => this.welcomeMsg?.zoneId ?? null,
        send: (m: Chat | ChatReport | ChatHistory) => this.send(m),
        listen: (sink) => {
          this.chatSink = sink;
        },
      },
      options.chat,
    );
    this.transportMode = options.transport ?? "auto";
    this.memory = options.transportMemory === undefined ? platformMemory() : options.transportMemory;
    if (this.transportMode === "auto") {
      try {
        this.webSocketOnly = this.memory?.getItem(transportMemoryKey(options.url)) === "websocket";
      } catch {
        // Storage refused: nothing remembered.
      }
    }
  }

  /** Subscribes to an event; returns the unsubscribe function. */
  on<K extends keyof ZoneConnectionEvents>(name: K, fn: ZoneConnectionEvents[K]): () => void {
    this.listeners[name].add(fn);
    return () => this.off(name, fn);
  }

  /** Unsubscribes a handler. */
  off<K extends keyof ZoneConnectionEvents>(name: K, fn: ZoneConnectionEvents[K]): void {
    this.listeners[name].delete(fn);
  }

  private emit<K extends keyof ZoneConnectionEvents>(name: K, ...args: Parameters<ZoneConnectionEvents[K]>): void {
    for (const fn of [...this.listeners[name]]) {
      (fn as (...a: Parameters<ZoneConnectionEvents[K]>) => void)(...args);
    }
  }

  /** Current lifecycle state. */
  get state(): ConnectionState {
    return this.st;
  }

  /** The known set (null before the first Welcome). */
  get mirror(): Mirror | null {
    return this.mirrorState;
  }

  /** The last Welcome (null before the first). */
  get welcome(): Welcome | null {
    return this.welcomeMsg;
  }

  /** The entity this player controls, from the last Delta with CONTROL (null = none). */
  get controlledId(): number | null {
    return this.controlled;
  }

  /** The last input seq the zone acknowledged. */
  get ack(): number {
    return this.lastAck;
  }

  /** The tick of the last Delta received. */
  get latestTick(): number {
    return this.lastDeltaTick;
  }

  /**
   * The transport of the current session (or of the attempt under way, or of the last one): null
   * before the first attempt opens anything.
   */
  get transport(): TransportKind | null {
    return this.transportKind;
  }

  /**
   * Where else the zone may be entered: its WebSocket URL at the fleet's hosts, its owner first, as
   * the last version 7 Welcome or Entries message listed them (§5.3.1); empty before one. An app
   * that gets its tickets from a zone host (a dev host's guest tickets) may ask the others when its
   * own is gone.
   */
  get listedEntries(): readonly string[] {
    return [...this.entries];
  }

  /** True once WebTransport failed in auto mode (here or, remembered, before a reload). */
  get webTransportDisabled(): boolean {
    return this.webSocketOnly;
  }

  /** What the WebTransport sessions did with their States (§5.8). */
  get stateStats(): StateStats {
    return { ...this.stateCounters };
  }

  /** Byte, message, redirect and join counters. */
  get stats(): ConnectionStats {
    const now = this.sched.now();
    return {
      ...this.counters,
      bytesInPerSec: this.inMeter.perSecond(now),
      bytesOutPerSec: this.outMeter.perSecond(now),
    };
  }

  /** Sets what an Input's `view_tick` carries (a Replica's render tick); default: the latest Delta's tick. */
  setViewTickSource(fn: (() => number) | null): void {
    this.viewTickSource = fn;
  }

  /** Starts the session; resolves with the first Welcome, rejects if the session ends before one. */
  connect(): Promise<Welcome> {
    if (this.st !== "idle") return Promise.reject(new Error(`connect() in state ${this.st}`));
    const p = new Promise<Welcome>((resolve, reject) => {
      this.firstWelcome = { resolve, reject };
    });
    void this.attempt();
    return p;
  }

  /** Ends the session for good (no reconnect). */
  close(reason = "client closed"): void {
    if (this.st === "closed") return;
    const sock = this.socket;
    this.teardown();
    this.endTransfer("client closed");
    this.st = "closed";
    if (sock !== null) {
      try {
        sock.close(1000, reason);
      } catch {
        // Closing an already-failed socket is not an error worth reporting.
      }
    }
    this.finish({ code: 1000, reason, kick: null, error: null, willReconnect: false, retryInMs: 0, reload: false, movedElsewhere: false });
  }

  /**
   * Sends an input stamped with the next seq and the view tick; returns the seq, or null when the
   * session is not open (the input was not sent and must not be predicted). Throws an
   * {@link EncodeError} for a payload over 4,096 bytes or, over WebTransport, one whose datagram
   * would not fit the session's largest datagram (about 1,200 bytes); no seq is used then.
   */
  sendInput(payload: Uint8Array): number | null {
    if (this.st !== "open") return null;
    if (this.seq >= 0xffff_ffff) throw new Error("input seq space exhausted");
    const seq = this.seq + 1;
    const source = this.viewTickSource;
    const viewTick = Math.max(0, Math.floor(source !== null ? source() : this.lastDeltaTick));
    if (this.wt !== null) {
      // §4.5: one Inputs datagram per input, repeating the ones no State has acknowledged.
      const input: DatagramInput = { seq, viewTick, payload };
      this.pendingInputs.push(input);
      try {
        this.sendInputs(true);
      } catch (e) {
        this.pendingInputs = this.pendingInputs.filter((p) => p !== input);
        throw e;
      }
      while (this.pendingInputs.length > LIMITS.datagramInputs) this.pendingInputs.shift();
      this.seq = seq;
      return seq;
    }
    this.send({ type: "input", seq, viewTick, payload });
    this.keepUnacked({ seq, viewTick, payload });
    this.seq = seq;
    return seq;
  }

  /** Remembers a WebSocket input until a Delta acknowledges it (the oldest is forgotten past the cap). */
  private keepUnacked(input: DatagramInput): void {
    this.sentUnacked.push(input);
    while (this.sentUnacked.length > UNACKED_KEPT) this.sentUnacked.shift();
  }

  /**
   * After a resume: the inputs no Delta or State acknowledged, from either transport (a resume may
   * change it), oldest first; both lists are emptied.
   */
  private unackedToResend(): DatagramInput[] {
    const again = unackedAfter(this.sentUnacked, this.pendingInputs, this.lastAck);
    this.sentUnacked = [];
    this.pendingInputs = [];
    return again;
  }

  /**
   * Sends an Inputs datagram (§4.5): the pending inputs, newest last, as many as fit the session's
   * datagrams, and the newest State applied as `ack`. With `newInput`, the newest pending input is
   * one being sent for the first time and must fit (else {@link EncodeError} `too_long`: a platform
   * drops an oversized datagram without a word); an acknowledgement sheds inputs down to none.
   */
  private sendInputs(newInput = false): void {
    const sock = this.wt;
    if (sock === null) return;
    const ack = this.ring?.ackTick ?? 0;
    const max = sock.maxDatagramSize;
    const bytes = inputsDatagram(this.pendingInputs, ack, max, newInput);
    if (bytes === null) return;
    if (!sock.sendDatagram(bytes)) return;
    this.ackSent = Math.max(this.ackSent, ack);
    this.counters.bytesOut += bytes.length;
    this.counters.messagesOut += 1;
    this.counters.datagramsOut += 1;
    this.outMeter.add(this.sched.now(), bytes.length);
  }

  /**
   * After a State was applied: acknowledge it with the next input, or with an Inputs datagram of its
   * own (the pending inputs, if any) when no input went within {@link STATE_ACK_HOLD_MS}, at most once
   * per patch (§4.5).
   */
  private ackStates(): void {
    const ring = this.ring;
    const w = this.welcomeMsg;
    if (ring === null || w === null || this.wt === null || ring.ackTick <= this.ackSent || this.ackTimer !== null) return;
    const patchMs = (w.patchEvery * 1000) / w.tickHz;
    const now = this.sched.now();
    const due = Math.max(this.ackOnlyAt + patchMs, now + STATE_ACK_HOLD_MS);
    const go = (): void => {
      if (this.ring === null || this.ring.ackTick <= this.ackSent) return;
      this.ackOnlyAt = this.sched.now();
      this.sendInputs();
    };
    this.ackTimer = this.later(() => {
      this.ackTimer = null;
      go();
    }, due - now);
  }

  /** A State acknowledged inputs up to `ack`: they need not be repeated any more. */
  private onInputAck(ack: number): void {
    if (ack <= this.inputAck) return;
    this.inputAck = ack;
    this.pendingInputs = this.pendingInputs.filter((p) => p.seq > ack);
  }

  private send(m: ClientMessage): void {
    const bytes = encodeClientMessage(m);
    const sock = this.socket;
    if (sock === null) return;
    sock.send(bytes);
    this.counters.bytesOut += bytes.length;
    this.counters.messagesOut += 1;
    this.outMeter.add(this.sched.now(), bytes.length);
  }

  private later(fn: () => void, ms: number): TimerHandle {
    const h = this.sched.setTimeout(() => {
      this.timers.delete(h);
      fn();
    }, ms);
    this.timers.add(h);
    return h;
  }

  private cancel(h: TimerHandle | null): void {
    if (h === null) return;
    this.sched.clearTimeout(h);
    this.timers.delete(h);
  }

  private teardown(): void {
    // A session's chat requests are answered on its socket only.
    if (this.welcomed) this.chatSink?.ended();
    this.gen += 1;
    for (const h of this.timers) this.sched.clearTimeout(h);
    this.timers.clear();
    this.pingTimer = null;
    this.handshakeTimer = null;
    this.wtTimer = null;
    this.ackTimer = null;
    this.wtTrial = false;
    this.wtTry += 1;
    this.welcomed = false;
    const sock = this.socket;
    this.socket = null;
    this.wt = null;
    if (sock !== null) detach(sock);
  }

  private async attempt(): Promise<void> {
    const gen = ++this.gen;
    const transfer = this.transfer;
    if (transfer !== null) {
      // §5.3.2: a fresh Hello with the credential (the new zone's token once it gave one).
      this.mode = transfer.token !== null ? "resume" : "fresh";
      this.ticketReused = transfer.failures > 0;
      this.startAttempt(gen, transfer.credential, transfer.token ?? new Uint8Array(0), null);
      return;
    }
    this.st = this.welcomeMsg === null && this.attempts === 0 ? "connecting" : "reconnecting";
    const inGrace =
      this.disconnectedAt !== null &&
      this.sched.now() - this.disconnectedAt <
        (this.opts.reconnect?.graceMs ?? this.welcomeMsg?.reconnectGraceMs ?? 30_000);
    this.mode = this.token.length > 0 && inGrace && !this.forceFresh ? "resume" : "fresh";
    // A Kick or error of an earlier attempt says nothing about this one (a ticket() that fails is
    // told as itself, not as the last refusal).
    this.lastKick = null;
    this.localError = null;
    let ticket: string;
    try {
      if (this.mode === "fresh" || this.ticketValue === null || this.renewTicket) {
        ticket = await this.opts.ticket();
        this.ticketValue = ticket;
        this.renewTicket = false;
        this.ticketReused = false;
      } else {
        ticket = this.ticketValue;
        this.ticketReused = true;
      }
    } catch (e) {
      if (gen !== this.gen) return;
      this.onSocketGone(gen, 1006, "ticket() failed", e instanceof Error ? e : new Error(String(e)));
      return;
    }
    if (gen !== this.gen) return; // closed while waiting for the ticket
    const resume = this.mode === "resume";
    this.startAttempt(gen, ticket, resume ? this.token : new Uint8Array(0), resume ? this.resumeFrom() : null);
  }

  /** Sends this attempt's Hello to where it starts (the entry URL, or a Transfer's URL). */
  private startAttempt(gen: number, ticket: string, reconnectToken: Uint8Array, resumeFrom: ResumeFrom | null): void {
    this.hello = {
      type: "hello",
      versions: this.versions,
      ticket,
      reconnectToken,
      contentVersion: this.opts.contentVersion ?? "",
      resumeFrom,
    };
    this.hops = 0;
    this.hopUrl = null;
    this.lastKick = null;
    this.localError = null;
    this.startHandshakeTimer(gen);
    // Every attempt starts at the entry URL: the zone's owner may have changed since the last.
    const wt = this.webTransportFactory();
    if (wt !== null) void this.openWebTransport(gen, wt);
    else this.openSocket(gen, this.entryUrl());
  }

  /**
   * The entry URL, then each entry URL the last Welcome listed that differs from it; after a
   * Transfer they name its zone, and its first attempt starts at the Transfer's URL.
   */
  private entryCandidates(): string[] {
    const zone = this.zoneId;
    const rezone = (u: string): string => (zone === null ? u : withZone(u, zone));
    const entry = rezone(this.opts.url);
    const all = [entry, ...this.entries.map(rezone).filter((u) => u !== entry)];
    const t = this.transfer;
    return t !== null && t.direct ? [t.info.url, ...all.filter((u) => u !== t.info.url)] : all;
  }

  /** Where the current attempt starts: the entry URL, or a listed one after it was unreachable. */
  private entryUrl(): string {
    return this.entryCandidates()[this.entryIndex] ?? this.opts.url;
  }

  /** Where the current attempt's Hello goes next: the last Redirect's URL, else its start. */
  private targetUrl(): string {
    return this.hopUrl ?? this.entryUrl();
  }

  private startHandshakeTimer(gen: number): void {
    this.cancel(this.handshakeTimer);
    this.handshakeTimer = this.later(() => {
      this.fail(gen, new Error("handshake timeout: no Welcome"));
    }, this.opts.handshakeTimeoutMs ?? 10_000);
  }

  /**
   * The WebTransport factory when this attempt should try WebTransport (§1.1): not in websocket
   * mode, nor after auto mode fell back; version 6 offered; an entry URL naming a zone; a platform
   * (or an option) providing WebTransport and fetch. Null = WebSocket.
   */
  private webTransportFactory(): WebTransportFactory | null {
    if (this.transportMode === "websocket" || this.webSocketOnly) return null;
    if (!this.versions.some((v) => v >= DATAGRAM_VERSION)) return null;
    if (zoneOfEntryUrl(this.entryUrl()) === null) return null;
    if ((this.opts.fetch ?? platformFetch()) === null) return null;
    return this.opts.webTransport ?? platformWebTransport();
  }

  /**
   * Tries this attempt over WebTransport: discovery, the session, the Hello on its control stream.
   * In auto mode the Welcome must come within `webTransportTimeoutMs`, or the attempt goes over
   * WebSocket ({@link fallBack}).
   */
  private async openWebTransport(gen: number, factory: WebTransportFactory): Promise<void> {
    const auto = this.transportMode === "auto";
    const attemptTry = ++this.wtTry;
    const stale = (): boolean => gen !== this.gen || attemptTry !== this.wtTry;
    this.transportKind = "webtransport";
    this.wtTrial = auto;
    if (auto) {
      const ms = this.opts.webTransportTimeoutMs ?? 3000;
      this.wtTimer = this.later(() => {
        this.wtTimer = null;
        if (!stale() && this.wtTrial) this.fallBack(gen, `WebTransport: no Welcome within ${ms} ms`, true);
      }, ms);
    }
    let endpoint: WebTransportEndpoint | null;
    try {
      const fetchFn = this.opts.fetch ?? platformFetch();
      if (fetchFn === null) throw new Error("no fetch to discover WebTransport with");
      endpoint = await discoverWebTransport(this.targetUrl(), fetchFn);
    } catch (e) {
      if (!stale()) this.webTransportFailed(gen, e instanceof Error ? e : new Error(String(e)));
      return;
    }
    if (stale()) return;
    const url = endpoint === null ? null : webTransportSessionUrl(endpoint.url, this.targetUrl());
    if (endpoint === null || url === null) {
      // The host serves no WebTransport: nothing to wait for, in either mode.
      const host = this.hopUrl === null ? "the host" : "the zone's owner";
      this.fallBack(gen, `${host} serves no WebTransport (GET /webtransport: 404)`, auto);
      return;
    }
    let sock: WebTransportSocket;
    try {
      sock = new WebTransportSocket(factory(url, webTransportOptions(endpoint)));
    } catch (e) {
      this.webTransportFailed(gen, e instanceof Error ? e : new Error(String(e)));
      return;
    }
    this.socket = sock;
    this.wt = sock;
    sock.onopen = () => {
      if (stale() || this.hello === null) return;
      this.st = "handshaking";
      this.send(this.hello);
    };
    sock.onmessage = (ev) => {
      if (stale()) return;
      try {
        this.onMessage(ev.data, gen);
      } catch (e) {
        this.fail(gen, e instanceof Error ? e : new Error(String(e)));
      }
    };
    sock.ondatagram = (bytes) => {
      if (stale()) return;
      try {
        this.onDatagram(bytes);
      } catch (e) {
        this.fail(gen, e instanceof Error ? e : new Error(String(e)));
      }
    };
    sock.onfailure = (e) => {
      if (!stale()) this.fail(gen, e);
    };
    sock.onclose = (ev) => {
      if (stale()) return;
      const code = ev.code ?? 1006;
      // The host answered (a Kick, or its close code) over WebTransport: that ends the attempt.
      const answered = this.lastKick !== null || (code > 4000 && code <= 4999);
      if (this.wtTrial && !answered) {
        this.webTransportFailed(gen, new Error(`WebTransport session ended before Welcome: ${ev.reason ?? ""}`));
        return;
      }
      this.onSocketGone(gen, code, ev.reason ?? "", null);
    };
  }

  /**
   * WebTransport failed for this attempt: in auto mode the attempt goes over WebSocket (for good),
   * otherwise it is a failed attempt like a socket that could not connect.
   */
  private webTransportFailed(gen: number, error: Error): void {
    if (this.transportMode === "auto") this.fallBack(gen, error.message, true);
    else this.onSocketGone(gen, 1006, error.message, error);
  }

  /**
   * Ends this attempt's WebTransport try quietly and sends the same Hello over WebSocket to the
   * entry URL; with `remember`, every later attempt goes over WebSocket too (and the choice is kept
   * in the transport memory, so a reload does not wait again).
   */
  private fallBack(gen: number, reason: string, remember: boolean): void {
    if (gen !== this.gen) return;
    this.dropWebTransport("falling back to WebSocket");
    if (remember) {
      this.webSocketOnly = true;
      try {
        this.memory?.setItem(transportMemoryKey(this.opts.url), "websocket");
      } catch {
        // Storage full or refused: remembered for this connection only.
      }
    }
    this.emit("fallback", { reason, remembered: remember });
    if (gen !== this.gen) return; // a handler closed the connection
    this.startHandshakeTimer(gen);
    this.openSocket(gen, this.targetUrl());
  }

  /** Closes this attempt's WebTransport session (if any) without reporting its end. */
  private dropWebTransport(reason: string): void {
    this.cancel(this.wtTimer);
    this.wtTimer = null;
    this.wtTrial = false;
    this.wtTry += 1;
    const sock = this.wt;
    this.wt = null;
    if (sock === null) return;
    if (this.socket === sock) this.socket = null;
    detach(sock);
    try {
      sock.close(1000, reason);
    } catch {
      // Already gone.
    }
  }

  /** Opens a socket to `url` that sends this attempt's Hello; false if the factory failed. */
  private openSocket(gen: number, url: string): boolean {
    this.transportKind = "websocket";
    let sock: SocketLike;
    try {
      sock = (this.opts.socket ?? defaultSocketFactory)(url);
    } catch (e) {
      this.onSocketGone(gen, 1006, "socket factory failed", e instanceof Error ? e : new Error(String(e)));
      return false;
    }
    this.socket = sock;
    sock.binaryType = "arraybuffer";
    sock.onopen = () => {
      if (gen !== this.gen || this.hello === null) return;
      this.st = "handshaking";
      this.send(this.hello);
    };
    sock.onmessage = (ev) => {
      if (gen !== this.gen) return;
      try {
        this.onMessage(ev.data, gen);
      } catch (e) {
        // A message we cannot decode means the two sides disagree: end this socket.
        this.fail(gen, e instanceof Error ? e : new Error(String(e)));
      }
    };
    sock.onerror = () => {
      // A close event always follows an error; it carries the code.
    };
    sock.onclose = (ev) => this.onSocketGone(gen, ev.code ?? 1006, ev.reason ?? "", null);
    return true;
  }

  /**
   * Follows a Redirect (§5.3.1): closes this socket quietly and sends the same Hello to the URL it
   * names. Throws a {@link RedirectError} for a fourth Redirect or a URL that is not a WebSocket URL.
   */
  private follow(gen: number, r: Redirect): void {
    if (this.hops >= LIMITS.redirects) throw new RedirectError("too_many", r.url);
    const url = redirectTarget(r);
    if (url === null) throw new RedirectError("scheme", r.url);
    this.hops += 1;
    this.hopUrl = url;
    this.counters.redirects += 1;
    // A Redirect over WebTransport goes on over WebTransport: the owner is asked where its
    // sessions are, as the entry host was (§1.1, §5.3.1).
    const overWebTransport = this.wt !== null;
    this.dropWebTransport("redirected");
    const old = this.socket;
    this.socket = null;
    if (old !== null) {
      // Not a lost connection: this socket's close must not reach onSocketGone.
      detach(old);
      try {
        old.close(1000, "redirected");
      } catch {
        // The host closes after a Redirect anyway.
      }
    }
    this.emit("redirect", r);
    if (gen !== this.gen) return; // a handler closed the connection
    const wt = overWebTransport ? this.webTransportFactory() : null;
    if (wt !== null) void this.openWebTransport(gen, wt);
    else this.openSocket(gen, url);
  }

  /** Ends the current socket because of a local error. */
  private fail(gen: number, error: Error): void {
    if (gen !== this.gen) return;
    const sock = this.socket;
    this.localError = error;
    try {
      sock?.close(1000, error.message.slice(0, 120));
    } catch {
      // The socket may already be gone; the outcome is the same.
    }
    this.onSocketGone(gen, 1006, error.message, error);
  }

  private onMessage(data: unknown, gen: number): void {
    const bytes = toBytes(data);
    if (bytes === null) throw new DecodeError("invalid", "text frame from the server");
    const now = this.sched.now();
    this.counters.bytesIn += bytes.length;
    this.counters.messagesIn += 1;
    this.inMeter.add(now, bytes.length);
    const tag = peekTag(bytes);
    if (!this.welcomed) {
      if (tag !== Tag.Welcome && tag !== Tag.Kick && tag !== Tag.Redirect) {
        throw new DecodeError("invalid", `message 0x${tag.toString(16)} before Welcome`);
      }
    }
    if (tag === Tag.State) {
      // A State too large for a datagram comes on the control stream (§5.8); never over WebSocket.
      if (this.wt === null) throw new DecodeError("invalid", "a State over WebSocket");
      this.applyState(bytes, now);
      return;
    }
    if ((tag === Tag.Delta || tag === Tag.KnownSetCheck) && this.wt !== null) {
      throw new DecodeError("invalid", `message 0x${tag.toString(16)} on a WebTransport session`);
    }
    if (tag === Tag.Events && this.wt === null) throw new DecodeError("invalid", "Events over WebSocket");
    if (tag === Tag.Delta) {
      const mirror = this.mirrorState;
      if (mirror === null) throw new DecodeError("invalid", "Delta before Welcome");
      if (this.awaitingBaseline) {
        if (!isBaseline(bytes)) {
          this.syncCounters.deltasSkipped += 1;
          return;
        }
        this.awaitingBaseline = false;
      }
      let received: ReturnType<Mirror["receive"]>;
      try {
        received = mirror.receive(bytes);
      } catch (e) {
        // The known set no longer matches the host's: ask for a BASELINE on this socket.
        if (!(e instanceof DecodeError)) throw e;
        this.resync(mirror);
        return;
      }
      const { delta, changes } = received;
      this.arrive();
      this.clock.onDelta(delta.tick, now);
      this.lastDeltaTick = Math.max(this.lastDeltaTick, delta.tick);
      this.lastAck = delta.ack;
      this.sentUnacked = this.sentUnacked.filter((p) => p.seq > delta.ack);
      if (delta.control !== undefined) this.controlled = delta.control;
      this.emit("delta", delta, { mirror, changes, recvMs: now });
      for (const ev of delta.events ?? []) this.emit("event", ev, delta.tick);
      return;
    }
    const m = decodeServerMessage(bytes);
    switch (m.type) {
      case "welcome":
        if (this.welcomed) throw new DecodeError("invalid", "second Welcome");
        this.onWelcome(m, now);
        return;
      case "pong":
        if (m.clientTime <= now) this.clock.onPong(m.clientTime, now, m.tick);
        return;
      case "kick":
        this.lastKick = m;
        // The host answered over WebTransport: its close decides, not the auto-mode timeout.
        if (this.wtTrial) {
          this.wtTrial = false;
          this.cancel(this.wtTimer);
          this.wtTimer = null;
        }
        this.emit("kick", m);
        return;
      case "input_refused":
        this.syncCounters.inputsRefused += 1;
        this.emit("inputRefused", m);
        return;
      case "known_set_check":
        this.checkKnownSet(m);
        return;
      case "transfer":
        // §5.3.2: a host sends it only to a session of version 8 or later.
        if ((this.welcomeMsg?.version ?? 0) < TRANSFER_PROTOCOL) {
          throw new DecodeError("invalid", `Transfer on a version ${this.welcomeMsg?.version ?? 0} session`);
        }
        this.onTransfer(m);
        return;
      case "redirect":
        // A Redirect answers a Hello only (§5.3.1).
        if (this.welcomed) throw new DecodeError("invalid", "Redirect in the middle of a session");
        this.follow(gen, m);
        return;
      case "entries":
        // The fleet changed since the Welcome: where else to enter now (§5.3.1).
        this.entries = websocketEntries(m.entries);
        return;
      case "events":
        // §5.9: the events of a patch whose State travels apart; delivered as a Delta's are.
        for (const ev of m.events) this.emit("event", ev, m.tick);
        return;
      case "chat_lines":
      case "chat_reply":
        // A host sends them only to a session of version 11 or later.
        if ((this.welcomeMsg?.version ?? 0) < CHAT_PROTOCOL) {
          throw new DecodeError("invalid", `${m.type === "chat_lines" ? "ChatLines" : "ChatReply"} on a version ${this.welcomeMsg?.version ?? 0} session`);
        }
        if (m.type === "chat_lines") this.chatSink?.lines(m);
        else this.chatSink?.reply(m);
        return;
      case "delta":
      case "state":
        return; // handled above
    }
  }

  /** One datagram of a WebTransport session: a State (§5.8). */
  private onDatagram(bytes: Uint8Array): void {
    const now = this.sched.now();
    this.counters.bytesIn += bytes.length;
    this.counters.messagesIn += 1;
    this.counters.datagramsIn += 1;
    this.inMeter.add(now, bytes.length);
    // A State may overtake the Welcome on the stream: drop it, the host repeats what is not acknowledged.
    if (!this.welcomed || this.ring === null) {
      this.stateCounters.early += 1;
      return;
    }
    if (bytes[0] !== Tag.State) {
      this.stateCounters.undecodable += 1;
      return;
    }
    this.applyState(bytes, now);
  }

  /**
   * Applies a State through the ring (§5.8) and reports it as 'delta': the change from the state
   * shown before. Late, repeated and baseless States are counted and dropped; so is one that does
   * not apply to its base (the host falls back to a BASELINE when no acknowledgement comes).
   */
  private applyState(bytes: Uint8Array, now: number): void {
    const ring = this.ring;
    if (ring === null) throw new DecodeError("invalid", "State before Welcome");
    let res: ReturnType<StateRing["apply"]>;
    try {
      res = ring.apply(bytes);
    } catch (e) {
      if (!(e instanceof DecodeError)) throw e;
      this.stateCounters.undecodable += 1;
      return;
    }
    this.onInputAck(res.head.ack);
    if (res.status !== "applied") {
      if (res.status === "stale") this.stateCounters.stale += 1;
      else this.stateCounters.noBase += 1;
      return;
    }
    this.stateCounters.applied += 1;
    const { delta, changes, mirror, state } = res;
    this.arrive();
    this.mirrorState = mirror;
    this.clock.onDelta(delta.tick, now);
    this.lastDeltaTick = Math.max(this.lastDeltaTick, delta.tick);
    this.lastAck = delta.ack;
    if (delta.control !== undefined) this.controlled = delta.control;
    this.emit("delta", delta, { mirror, changes, recvMs: now, state });
    this.ackStates();
  }

  /**
   * Compares the host's check with the known set (§5.7). A mismatch, or a check while a BASELINE
   * is still awaited (the host honours one Resync a second), sends Resync.
   */
  private checkKnownSet(c: KnownSetCheck): void {
    const mirror = this.mirrorState;
    if (mirror === null) return;
    if (!this.awaitingBaseline && mirror.matches(c)) return;
    this.resync(mirror);
  }

  private resync(mirror: Mirror): void {
    this.awaitingBaseline = true;
    this.syncCounters.resyncs += 1;
    this.send({ type: "resync", tick: mirror.tick });
  }

  /** Resyncs sent, Deltas skipped while awaiting their BASELINE, and inputs the host refused. */
  get syncStats(): { resyncs: number; deltasSkipped: number; inputsRefused: number } {
    return { ...this.syncCounters };
  }

  /**
   * What a resuming Hello says the mirror holds (§4.1.1): only when the session's Welcome
   * negotiated version 4 or later (a host that never spoke it would refuse the field) and the mirror is
   * sound (a Delta applied, no Resync waiting for its BASELINE).
   */
  private resumeFrom(): ResumeFrom | null {
    if (
      this.resumeFromRefused ||
      this.awaitingBaseline ||
      (this.welcomeMsg?.version ?? 0) < RESUME_FROM_VERSION ||
      !this.versions.some((v) => v >= RESUME_FROM_VERSION)
    ) {
      return null;
    }
    return this.mirrorState?.resumeFrom() ?? null;
  }

  private onWelcome(w: Welcome, now: number): void {
    if (!this.versions.includes(w.version)) {
      throw new DecodeError("invalid", `host picked version ${w.version}, which was not offered`);
    }
    const transfer = this.transfer;
    // A move's Welcome starts the player afresh in the new zone, whatever token it presented.
    const resumed = transfer === null && this.mode === "resume" && this.playerId === w.playerId;
    if (resumed) this.counters.resumes += 1;
    else if (transfer === null) this.counters.freshJoins += 1;
    this.cancel(this.handshakeTimer);
    this.handshakeTimer = null;
    this.welcomeMsg = w;
    this.principal = this.hello !== null ? ticketSubject(this.hello.ticket) : null;
    // Inputs sent before the drop that no Delta acknowledged go again with their numbers (§4.2):
    // the host drops those it already has. A new player's mean nothing to it.
    const again = resumed ? this.unackedToResend() : [];
    if (!resumed) {
      this.sentUnacked = [];
      this.pendingInputs = [];
    }
    this.noteEntries(w);
    this.playerId = w.playerId;
    this.token = w.reconnectToken;
    if (transfer !== null) transfer.token = w.reconnectToken;
    if (this.wt !== null) {
      // §1.1: a WebTransport session speaks version 6 or later; its first State is a BASELINE.
      if (w.version < DATAGRAM_VERSION) {
        throw new DecodeError("invalid", `version ${w.version} on a WebTransport session`);
      }
      this.cancel(this.wtTimer);
      this.wtTimer = null;
      this.wtTrial = false;
      this.ring = new StateRing(w.schema);
      this.mirrorState = this.ring.current;
      this.ackSent = 0;
      this.ackOnlyAt = Number.NEGATIVE_INFINITY;
      // A resumed player's unacknowledged inputs are repeated with the next Inputs datagram; a new
      // player's sequence starts over.
      if (resumed) this.pendingInputs = again.slice(-LIMITS.datagramInputs);
      else this.inputAck = 0;
    } else {
      this.ring = null;
      // A resume from the mirror keeps it until the first Delta: a BASELINE replaces it, an ordinary
      // Delta continues from it. Anything else starts from nothing.
      const keep =
        resumed && this.hello?.resumeFrom != null && w.version >= RESUME_FROM_VERSION && this.mirrorState !== null;
      if (!keep) this.mirrorState = new Mirror(w.schema);
    }
    this.awaitingBaseline = false;
    this.resumeFromRefused = false;
    this.clock.reset(w.tickHz, w.tick, now);
    this.lastDeltaTick = w.tick;
    this.attempts = 0;
    this.disconnectedAt = null;
    this.untoldMove = null;
    this.forceFresh = false;
    if (!resumed) {
      // A new player: its input sequence starts again at 1.
      this.seq = 0;
      this.lastAck = 0;
      this.controlled = null;
    }
    this.welcomed = true;
    if (transfer === null) this.st = "open";
    if (this.wt === null) {
      for (const i of again) {
        this.send({ type: "input", seq: i.seq, viewTick: i.viewTick, payload: i.payload });
        this.keepUnacked(i);
      }
    }
    this.ping();
    const info: WelcomeInfo = {
      resumed,
      transport: this.wt !== null ? "webtransport" : "websocket",
      transfer: transfer?.info ?? null,
    };
    if (transfer !== null) {
      // Told with the BASELINE ({@link arrive}): until then the game draws the old world.
      transfer.held = { welcome: w, info };
      return;
    }
    this.emit("welcome", w, info);
    const first = this.firstWelcome;
    this.firstWelcome = null;
    first?.resolve(w);
  }

  private ping(): void {
    if (!this.welcomed) return;
    this.send({ type: "ping", clientTime: Math.max(0, Math.floor(this.sched.now())) });
    this.pingTimer = this.later(() => this.ping(), this.opts.pingIntervalMs ?? 1000);
  }

  private onSocketGone(gen: number, code: number, reason: string, error: Error | null): void {
    if (gen !== this.gen || this.st === "closed") return;
    const wasOpen = this.st === "open";
    const kick = this.lastKick;
    const localError = error ?? this.localError;
    this.teardown();
    // A move whose first attempt did not land is a disconnect after all: told now, before this one.
    const untold = this.untoldMove;
    this.untoldMove = null;
    if (untold !== null) this.emit("close", untold);
    if (this.transfer !== null) {
      this.transferAttemptFailed(code, reason, kick, localError);
      return;
    }
    // The grace window runs from the moment an established session was lost.
    if (wasOpen && this.disconnectedAt === null) this.disconnectedAt = this.sched.now();
    const policy = this.opts.reconnect?.policy ?? defaultReconnectPolicy;
    // A Kick lost in transit is still known from the close code (§6: 4000 + the Kick code).
    const kickCode = kick?.code ?? (code > 4000 && code <= 4999 ? code - 4000 : null);
    // Undecodable bytes, or a Redirect to a non-WebSocket URL: the next attempt would meet the same.
    const hopeless =
      localError instanceof DecodeError || (localError instanceof RedirectError && localError.kind === "scheme");
    // No host answered (or the one that did is on its way out): the next listed entry may (§5.3.1).
    const unanswered =
      !wasOpen && !hopeless && !(localError instanceof RedirectError) &&
      (kickCode === null || kickCode === KickCode.SHUTTING_DOWN);
    if (unanswered && this.nextEntry()) return;
    let decision: ReconnectDecision = hopeless ? "stop" : policy(kickCode, { ticketReused: this.ticketReused });
    if (kickCode === KickCode.VERSION_MISMATCH) decision = "stop";
    // The character plays in another game or on another device now: coming back would take it
    // from there, so only the player may decide to (with a new connection).
    const movedElsewhere = kickCode === KickCode.CHARACTER_MOVED;
    if (movedElsewhere) decision = "stop";
    // Outdated content stays outdated on every attempt: only a reload fixes it.
    if (kickCode === KickCode.CONTENT_OUTDATED) decision = "reload";
    // A host that speaks no version 4 reads resume_from as trailing bytes: try again without it.
    if (!wasOpen && kickCode === KickCode.PROTOCOL_ERROR && this.hello?.resumeFrom != null && !this.resumeFromRefused) {
      this.resumeFromRefused = true;
      decision = "retry";
    }
    if (decision === "fresh") this.forceFresh = true;
    if (decision === "renew") this.renewTicket = true;
    const maxAttempts = this.opts.reconnect?.maxAttempts ?? 8;
    this.attempts += 1;
    const reload = decision === "reload";
    const willReconnect = decision !== "stop" && !reload && this.attempts <= maxAttempts;
    const info: CloseInfo = {
      code,
      reason: reload
        ? reloadMessage(kick)
        : movedElsewhere
          ? movedElsewhereMessage(kick)
          : kick !== null
            ? `${kickCodeName(kick.code)}: ${kick.reason}`
            : localError?.message ?? reason,
      kick,
      error: localError,
      willReconnect,
      retryInMs: 0,
      reload,
      movedElsewhere,
    };
    if (!willReconnect) {
      this.st = "closed";
      if (reload) this.emit("reload", { message: reloadMessage(kick), kick });
      if (movedElsewhere) this.emit("movedElsewhere", { message: movedElsewhereMessage(kick), kick });
      this.finish(info);
      return;
    }
    // The zone moved while the player was in it: its new owner waits for the resume, so the first
    // attempt goes at once (later ones back off as usual).
    const atOnce = wasOpen && kickCode !== null && kickResumesElsewhere(kickCode);
    info.retryInMs = atOnce ? 0 : backoffMs(this.opts.reconnect ?? {}, this.attempts);
    this.st = "reconnecting";
    // The player's socket changes, the player does not: a move that lands at once is told by its
    // 'kick' and the resumed 'welcome' alone.
    if (atOnce) this.untoldMove = info;
    else this.emit("close", info);
    this.later(() => void this.attempt(), info.retryInMs);
  }

  /**
   * Keeps the entry URLs a version 7 Welcome lists (an older one lists none: what an earlier one
   * listed still holds) and counts a Welcome reached through one of them; the next attempt starts
   * at the entry URL again.
   */
  private noteEntries(w: Welcome): void {
    if (this.entryIndex > 0) this.counters.entryFallbacks += 1;
    this.entryIndex = 0;
    if (w.version >= ENTRIES_PROTOCOL) this.entries = websocketEntries(w.entries);
  }

  /**
   * After an attempt that no host answered (or one shutting down answered): true when it goes on
   * at once at the next entry URL the last Welcome listed; false when none is left (the next
   * attempt starts at the entry URL again, after the usual backoff).
   */
  private nextEntry(): boolean {
    if (this.entryIndex + 1 >= this.entryCandidates().length) {
      this.entryIndex = 0;
      return false;
    }
    this.entryIndex += 1;
    this.teardown();
    this.later(() => void this.attempt(), 0);
    return true;
  }

  /**
   * A Transfer on the open session (§5.3.2): keeps the source connection (and the world drawn
   * from it) as it is and starts the attempts at the new zone. A Transfer whose URL is not a
   * WebSocket URL is ignored ('transferError' `url`).
   */
  private onTransfer(m: Transfer): void {
    const url = transferTarget(m);
    if (url === null) {
      this.emit("transferError", new TransferError("url", `a Transfer to a URL that is not ws:// or wss://: ${m.url}`, null, true));
      return;
    }
    const info: TransferInfo = { from: this.welcomeMsg?.zoneId ?? "", to: m.zoneId, url };
    const origin = this.socket;
    // Detached, not closed: the source holds the player's last world until the new one is here.
    this.teardown();
    this.endTransfer("transferred again");
    this.transfer = {
      info,
      credential: m.ticket,
      deadline: this.sched.now() + credentialLifetimeMs(m.ticket),
      origin,
      direct: true,
      token: null,
      held: null,
      failures: 0,
    };
    this.zoneId = m.zoneId;
    this.entryIndex = 0;
    this.st = "transferring";
    this.emit("transfer", info);
    if (this.transfer === null || this.st !== "transferring") return; // a handler closed the connection
    void this.attempt();
  }

  /**
   * The new zone's BASELINE is here (the caller emits its 'delta' right after): tells the held
   * Welcome and closes the source connection. Nothing while no move waits for it.
   */
  private arrive(): void {
    const t = this.transfer;
    if (t === null || t.held === null) return;
    this.transfer = null;
    this.st = "open";
    this.counters.transfers += 1;
    this.closeOrigin(t, "transferred");
    this.emit("welcome", t.held.welcome, t.held.info);
  }

  /** Forgets a move under way (if any), closing its source connection. */
  private endTransfer(reason: string): void {
    const t = this.transfer;
    if (t === null) return;
    this.transfer = null;
    this.closeOrigin(t, reason);
  }

  private closeOrigin(t: TransferState, reason: string): void {
    const origin = t.origin;
    t.origin = null;
    if (origin === null) return;
    detach(origin);
    try {
      origin.close(1000, reason);
    } catch {
      // The source closes it after a while anyway.
    }
  }

  /**
   * An attempt at the new zone failed: the next listed entry at once when none answered, else
   * another attempt with backoff while the credential is valid, else the connection ends.
   */
  private transferAttemptFailed(code: number, reason: string, kick: Kick | null, localError: Error | null): void {
    const t = this.transfer;
    if (t === null) return;
    t.held = null;
    const kickCode = kick?.code ?? (code > 4000 && code <= 4999 ? code - 4000 : null);
    const hopeless =
      localError instanceof DecodeError || (localError instanceof RedirectError && localError.kind === "scheme");
    const unanswered =
      !hopeless && !(localError instanceof RedirectError) && (kickCode === null || kickCode === KickCode.SHUTTING_DOWN);
    if (unanswered && this.nextEntry()) return;
    t.direct = false;
    t.failures += 1;
    this.entryIndex = 0;
    const why = kick !== null ? `${kickCodeName(kick.code)}: ${kick.reason}` : (localError?.message ?? reason);
    if (kickCode === KickCode.CONTENT_OUTDATED) {
      this.endTransfer("content outdated");
      this.st = "closed";
      this.emit("reload", { message: reloadMessage(kick), kick });
      this.finish({ code, reason: reloadMessage(kick), kick, error: localError, willReconnect: false, retryInMs: 0, reload: true, movedElsewhere: false });
      return;
    }
    if (kickCode === KickCode.CHARACTER_MOVED) {
      // The character went into another zone meanwhile (another game or device): the move ends
      // with the session.
      this.endTransfer("character moved elsewhere");
      this.st = "closed";
      this.emit("movedElsewhere", { message: movedElsewhereMessage(kick), kick });
      this.finish({
        code,
        reason: movedElsewhereMessage(kick),
        kick,
        error: localError,
        willReconnect: false,
        retryInMs: 0,
        reload: false,
        movedElsewhere: true,
      });
      return;
    }
    const delay = backoffMs(this.opts.reconnect ?? {}, t.failures);
    let kind: TransferError["kind"] = "attempt";
    let willRetry = !hopeless && !(kickCode !== null && TRANSFER_FINAL_KICKS.has(kickCode));
    if (kickCode === KickCode.TICKET_REPLAYED && t.token === null) {
      // Already used, and no Welcome of the new zone gave a token to resume with.
      kind = "replayed";
      willRetry = false;
    } else if (willRetry && this.sched.now() + delay >= t.deadline) {
      kind = "expired";
      willRetry = false;
    }
    this.emit("transferError", new TransferError(kind, why, kick, willRetry));
    if (this.transfer !== t) return; // a handler closed the connection
    if (!willRetry) {
      this.endTransfer("transfer failed");
      this.st = "closed";
      this.finish({ code, reason: why, kick, error: localError, willReconnect: false, retryInMs: 0, reload: false, movedElsewhere: false });
      return;
    }
    this.later(() => void this.attempt(), delay);
  }

  private finish(info: CloseInfo): void {
    this.chatSink?.closed();
    this.emit("close", info);
    const first = this.firstWelcome;
    this.firstWelcome = null;
    first?.reject(
      info.reload
        ? new ContentOutdatedError(info.kick)
        : info.movedElsewhere
          ? new CharacterMovedError(info.kick)
          : new Error(`connection closed before Welcome: ${info.reason}`),
    );
  }
}
