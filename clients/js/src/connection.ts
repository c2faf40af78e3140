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
import { CharacterMovedError, ContentOutdatedError, movedElsewhereMessage, reloadMessage } from "./connectionerrors.js";
import type {
  CloseInfo,
  ConnectionState,
  ConnectionStats,
  StateStats,
  WelcomeInfo,
  ZoneConnectionEvents,
  ZoneConnectionOptions,
} from "./connectiontypes.js";
import { Datagrams } from "./datagrams.js";
import { EntryRoute } from "./entryroute.js";
import { UNACKED_KEPT, unackedAfter } from "./inputs.js";
import {
  DATAGRAM_VERSION,
  decodeServerMessage,
  encodeClientMessage,
  kickResumesElsewhere,
  peekTag,
  RESUME_FROM_VERSION,
  SUPPORTED_VERSIONS,
  Tag,
  TRANSFER_PROTOCOL,
  websocketEntries,
  type ClientMessage,
  type DatagramInput,
  type Hello,
  type Kick,
  type ResumeFrom,
  type Welcome,
} from "./messages.js";
import { Mirror } from "./mirror.js";
import { backoffMs } from "./reconnect.js";
import { lostSocket, Rejoin } from "./rejoin.js";
import { systemScheduler, type Scheduler, type TimerHandle } from "./scheduler.js";
import { toBytes } from "./sockets.js";
import { ticketSubject } from "./tickets.js";
import { Traffic } from "./traffic.js";
import { Transfers } from "./transfers.js";
import { Transports } from "./transports.js";
import type { TransportKind } from "./webtransport.js";
import { DecodeError, EncodeError } from "./wire.js";
import { ZoneView } from "./zoneview.js";

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
  private gen = 0;
  private st: ConnectionState = "idle";
  private welcomeMsg: Welcome | null = null;
  /**
   * The 'close' of a session the host moved (ZONE_MOVED or HOST_FENCED), held back while the first
   * attempt at the new owner is under way: it is emitted only if that attempt does not land.
   */
  private untoldMove: CloseInfo | null = null;
  private seq = 0;
  private lastKick: Kick | null = null;
  private localError: Error | null = null;
  private timers = new Set<TimerHandle>();
  private handshakeTimer: TimerHandle | null = null;
  private viewTickSource: (() => number) | null = null;
  /** Byte, message, redirect and join counters. */
  private readonly traffic = new Traffic();
  /** The current socket's Welcome arrived (its messages are a session's, not a handshake's). */
  private welcomed = false;
  /** The Hello of the current attempt: every hop of it sends exactly this. */
  private hello: Hello | null = null;
  private firstWelcome: { resolve: (w: Welcome) => void; reject: (e: Error) => void } | null = null;
  /**
   * Inputs sent over WebSocket that no Delta has acknowledged yet, oldest first (at most
   * {@link UNACKED_KEPT}). A resume sends them again (§4.2): a zone handed over in a drain keeps only
   * the inputs it consumed, and the ack of a later input would otherwise vouch for them.
   */
  private sentUnacked: DatagramInput[] = [];
  /** What {@link chat} is told of the session's chat messages. */
  private chatSink: ChatSink | null = null;
  /** The principal of the current session (its ticket's `sub`), or null when unknown. */
  private principal: string | null = null;
  /** The zone as the session shows it: the known set, the newest tick, the input ack, the controlled entity. */
  private readonly view: ZoneView;
  /** Who the attempts join as, and how many failed. */
  private readonly rejoin = new Rejoin();
  /** Where the attempts send their Hello. */
  private readonly route: EntryRoute;
  /** The current attempt's socket, and the choice of its transport. */
  private readonly transports: Transports;
  /** The States and Inputs of the WebTransport sessions. */
  private readonly datagrams: Datagrams;
  /** A move to another zone, while one is under way. */
  private readonly transfers: Transfers;

  /** A connection that does nothing until {@link connect}. */
  constructor(options: ZoneConnectionOptions) {
    this.opts = options;
    this.sched = options.scheduler ?? systemScheduler;
    this.versions = options.versions ?? [...SUPPORTED_VERSIONS];
    this.clock = new ServerClock(options.clock);
    this.chat = new ChatClient(
      {
        scheduler: this.sched,
        version: () => (this.welcomed && this.st === "open" && this.transports.socket !== null ? (this.welcomeMsg?.version ?? null) : null),
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
    this.route = new EntryRoute(options.url);
    this.view = new ZoneView({
      clock: this.clock,
      send: (m) => this.send(m),
      arrive: () => this.transfers.arrive(),
      acked: (ack) => {
        this.sentUnacked = this.sentUnacked.filter((p) => p.seq > ack);
      },
      emit: (name, ...args) => this.emit(name, ...args),
    });
    this.transports = new Transports(options, this.versions, {
      gen: () => this.gen,
      later: (fn, ms) => this.later(fn, ms),
      cancel: (h) => this.cancel(h),
      entryUrl: () => this.route.entryUrl(this.transfers.directUrl()),
      targetUrl: () => this.route.targetUrl(this.transfers.directUrl()),
      redirected: () => this.route.hopUrl !== null,
      hop: (r) => {
        const url = this.route.hop(r);
        this.traffic.counts.redirects += 1;
        return url;
      },
      startHandshakeTimer: (gen) => this.startHandshakeTimer(gen),
      kicked: () => this.lastKick !== null,
      opened: () => {
        if (this.hello === null) return;
        this.st = "handshaking";
        this.send(this.hello);
      },
      message: (data, gen) => this.onMessage(data, gen),
      datagram: (bytes) => this.datagrams.receive(bytes),
      fail: (gen, error) => this.fail(gen, error),
      gone: (gen, code, reason, error) => this.onSocketGone(gen, code, reason, error),
      emit: (name, ...args) => this.emit(name, ...args),
    });
    this.datagrams = new Datagrams({
      scheduler: this.sched,
      socket: () => this.transports.wt,
      welcomed: () => this.welcomed,
      welcome: () => this.welcomeMsg,
      later: (fn, ms) => this.later(fn, ms),
      traffic: this.traffic,
      show: (res, now) => this.view.showState(res, now),
    });
    this.transfers = new Transfers(this.route, {
      scheduler: this.sched,
      reconnect: () => this.opts.reconnect,
      state: () => this.st,
      setState: (s) => {
        this.st = s;
      },
      zoneId: () => this.welcomeMsg?.zoneId ?? "",
      socket: () => this.transports.socket,
      teardown: () => this.teardown(),
      nextEntry: () => this.nextEntry(),
      attempt: () => void this.attempt(),
      retry: (ms) => {
        this.later(() => void this.attempt(), ms);
      },
      landed: () => {
        this.traffic.counts.transfers += 1;
      },
      finish: (info) => this.finish(info),
      emit: (name, ...args) => this.emit(name, ...args),
    });
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
    return this.view.mirror;
  }

  /** The last Welcome (null before the first). */
  get welcome(): Welcome | null {
    return this.welcomeMsg;
  }

  /** The entity this player controls, from the last Delta with CONTROL (null = none). */
  get controlledId(): number | null {
    return this.view.controlled;
  }

  /** The last input seq the zone acknowledged. */
  get ack(): number {
    return this.view.lastAck;
  }

  /** The tick of the last Delta received. */
  get latestTick(): number {
    return this.view.lastDeltaTick;
  }

  /**
   * The transport of the current session (or of the attempt under way, or of the last one): null
   * before the first attempt opens anything.
   */
  get transport(): TransportKind | null {
    return this.transports.kind;
  }

  /**
   * Where else the zone may be entered: its WebSocket URL at the fleet's hosts, its owner first, as
   * the last version 7 Welcome or Entries message listed them (§5.3.1); empty before one. An app
   * that gets its tickets from a zone host (a dev host's guest tickets) may ask the others when its
   * own is gone.
   */
  get listedEntries(): readonly string[] {
    return [...this.route.entries];
  }

  /** True once WebTransport failed in auto mode (here or, remembered, before a reload). */
  get webTransportDisabled(): boolean {
    return this.transports.webSocketOnly;
  }

  /** What the WebTransport sessions did with their States (§5.8). */
  get stateStats(): StateStats {
    return { ...this.datagrams.counts };
  }

  /** Byte, message, redirect and join counters. */
  get stats(): ConnectionStats {
    return this.traffic.stats(this.sched.now());
  }

  /** Resyncs sent, Deltas skipped while awaiting their BASELINE, and inputs the host refused. */
  get syncStats(): { resyncs: number; deltasSkipped: number; inputsRefused: number } {
    return { ...this.view.counts };
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
    const sock = this.transports.socket;
    this.teardown();
    this.transfers.end("client closed");
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
    const viewTick = Math.max(0, Math.floor(source !== null ? source() : this.view.lastDeltaTick));
    if (this.transports.wt !== null) {
      // §4.5: one Inputs datagram per input, repeating the ones no State has acknowledged.
      this.datagrams.queue({ seq, viewTick, payload });
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
    const again = unackedAfter(this.sentUnacked, this.datagrams.pending, this.view.lastAck);
    this.sentUnacked = [];
    this.datagrams.pending = [];
    return again;
  }

  private send(m: ClientMessage): void {
    const bytes = encodeClientMessage(m);
    const sock = this.transports.socket;
    if (sock === null) return;
    sock.send(bytes);
    this.traffic.sent(bytes.length, this.sched.now());
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
    this.handshakeTimer = null;
    this.datagrams.dropped();
    this.welcomed = false;
    this.transports.dropped();
  }

  private async attempt(): Promise<void> {
    const gen = ++this.gen;
    const transfer = this.transfers.current;
    if (transfer !== null) {
      // §5.3.2: a fresh Hello with the credential (the new zone's token once it gave one).
      this.rejoin.mode = transfer.token !== null ? "resume" : "fresh";
      this.rejoin.ticketReused = transfer.failures > 0;
      this.startAttempt(gen, transfer.credential, transfer.token ?? new Uint8Array(0), null);
      return;
    }
    this.st = this.welcomeMsg === null && this.rejoin.attempts === 0 ? "connecting" : "reconnecting";
    const graceMs = this.opts.reconnect?.graceMs ?? this.welcomeMsg?.reconnectGraceMs ?? 30_000;
    this.rejoin.chooseMode(this.sched.now(), graceMs);
    // A Kick or error of an earlier attempt says nothing about this one (a ticket() that fails is
    // told as itself, not as the last refusal).
    this.lastKick = null;
    this.localError = null;
    let ticket: string;
    try {
      if (this.rejoin.mode === "fresh" || this.rejoin.ticket === null || this.rejoin.renewTicket) {
        ticket = await this.opts.ticket();
        this.rejoin.ticket = ticket;
        this.rejoin.renewTicket = false;
        this.rejoin.ticketReused = false;
      } else {
        ticket = this.rejoin.ticket;
        this.rejoin.ticketReused = true;
      }
    } catch (e) {
      if (gen !== this.gen) return;
      this.onSocketGone(gen, 1006, "ticket() failed", e instanceof Error ? e : new Error(String(e)));
      return;
    }
    if (gen !== this.gen) return; // closed while waiting for the ticket
    const resume = this.rejoin.mode === "resume";
    const resumeFrom = resume ? this.rejoin.resumeFrom(this.view, this.welcomeMsg?.version ?? 0, this.versions) : null;
    this.startAttempt(gen, ticket, resume ? this.rejoin.token : new Uint8Array(0), resumeFrom);
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
    this.route.restart();
    this.lastKick = null;
    this.localError = null;
    this.startHandshakeTimer(gen);
    // Every attempt starts at the entry URL: the zone's owner may have changed since the last.
    this.transports.start(gen);
  }

  private startHandshakeTimer(gen: number): void {
    this.cancel(this.handshakeTimer);
    this.handshakeTimer = this.later(() => {
      this.fail(gen, new Error("handshake timeout: no Welcome"));
    }, this.opts.handshakeTimeoutMs ?? 10_000);
  }

  /** Ends the current socket because of a local error. */
  private fail(gen: number, error: Error): void {
    if (gen !== this.gen) return;
    const sock = this.transports.socket;
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
    this.traffic.received(bytes.length, now);
    const tag = peekTag(bytes);
    if (!this.welcomed) {
      if (tag !== Tag.Welcome && tag !== Tag.Kick && tag !== Tag.Redirect) {
        throw new DecodeError("invalid", `message 0x${tag.toString(16)} before Welcome`);
      }
    }
    if (tag === Tag.State) {
      // A State too large for a datagram comes on the control stream (§5.8); never over WebSocket.
      if (this.transports.wt === null) throw new DecodeError("invalid", "a State over WebSocket");
      this.datagrams.apply(bytes, now);
      return;
    }
    if ((tag === Tag.Delta || tag === Tag.KnownSetCheck) && this.transports.wt !== null) {
      throw new DecodeError("invalid", `message 0x${tag.toString(16)} on a WebTransport session`);
    }
    if (tag === Tag.Events && this.transports.wt === null) throw new DecodeError("invalid", "Events over WebSocket");
    if (tag === Tag.Delta) {
      this.view.receiveDelta(bytes, now);
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
        this.transports.kickHeard();
        this.emit("kick", m);
        return;
      case "input_refused":
        this.view.counts.inputsRefused += 1;
        this.emit("inputRefused", m);
        return;
      case "known_set_check":
        this.view.checkKnownSet(m);
        return;
      case "transfer":
        // §5.3.2: a host sends it only to a session of version 8 or later.
        if ((this.welcomeMsg?.version ?? 0) < TRANSFER_PROTOCOL) {
          throw new DecodeError("invalid", `Transfer on a version ${this.welcomeMsg?.version ?? 0} session`);
        }
        this.transfers.begin(m);
        return;
      case "redirect":
        // A Redirect answers a Hello only (§5.3.1).
        if (this.welcomed) throw new DecodeError("invalid", "Redirect in the middle of a session");
        this.transports.follow(gen, m);
        return;
      case "entries":
        // The fleet changed since the Welcome: where else to enter now (§5.3.1).
        this.route.entries = websocketEntries(m.entries);
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

  private onWelcome(w: Welcome, now: number): void {
    if (!this.versions.includes(w.version)) {
      throw new DecodeError("invalid", `host picked version ${w.version}, which was not offered`);
    }
    const transfer = this.transfers.current;
    const resumed = this.rejoin.resumes(w, transfer !== null);
    if (resumed) this.traffic.counts.resumes += 1;
    else if (transfer === null) this.traffic.counts.freshJoins += 1;
    this.cancel(this.handshakeTimer);
    this.handshakeTimer = null;
    this.welcomeMsg = w;
    this.principal = this.hello !== null ? ticketSubject(this.hello.ticket) : null;
    // Inputs sent before the drop that no Delta acknowledged go again with their numbers (§4.2):
    // the host drops those it already has. A new player's mean nothing to it.
    const again = resumed ? this.unackedToResend() : [];
    if (!resumed) {
      this.sentUnacked = [];
      this.datagrams.pending = [];
    }
    if (this.route.noteWelcome(w)) this.traffic.counts.entryFallbacks += 1;
    this.rejoin.playerId = w.playerId;
    this.rejoin.token = w.reconnectToken;
    if (transfer !== null) transfer.token = w.reconnectToken;
    if (this.transports.wt !== null) {
      // §1.1: a WebTransport session speaks version 6 or later; its first State is a BASELINE.
      if (w.version < DATAGRAM_VERSION) {
        throw new DecodeError("invalid", `version ${w.version} on a WebTransport session`);
      }
      this.transports.welcomed();
      this.view.mirror = this.datagrams.begin(w, resumed, again);
    } else {
      this.datagrams.ring = null;
      // A resume from the mirror keeps it until the first Delta: a BASELINE replaces it, an ordinary
      // Delta continues from it. Anything else starts from nothing.
      const keep =
        resumed && this.hello?.resumeFrom != null && w.version >= RESUME_FROM_VERSION && this.view.mirror !== null;
      if (!keep) this.view.mirror = new Mirror(w.schema);
    }
    this.view.awaitingBaseline = false;
    this.clock.reset(w.tickHz, w.tick, now);
    this.view.lastDeltaTick = w.tick;
    this.rejoin.landed();
    this.untoldMove = null;
    if (!resumed) {
      // A new player: its input sequence starts again at 1.
      this.seq = 0;
      this.view.lastAck = 0;
      this.view.controlled = null;
    }
    this.welcomed = true;
    if (transfer === null) this.st = "open";
    if (this.transports.wt === null) {
      for (const i of again) {
        this.send({ type: "input", seq: i.seq, viewTick: i.viewTick, payload: i.payload });
        this.keepUnacked(i);
      }
    }
    this.ping();
    const info: WelcomeInfo = {
      resumed,
      transport: this.transports.wt !== null ? "webtransport" : "websocket",
      transfer: transfer?.info ?? null,
    };
    if (transfer !== null) {
      // Told with the BASELINE ({@link Transfers.arrive}): until then the game draws the old world.
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
    this.later(() => this.ping(), this.opts.pingIntervalMs ?? 1000);
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
    if (this.transfers.current !== null) {
      this.transfers.attemptFailed(code, reason, kick, localError);
      return;
    }
    // The grace window runs from the moment an established session was lost.
    if (wasOpen && this.rejoin.disconnectedAt === null) this.rejoin.disconnectedAt = this.sched.now();
    const lost = lostSocket(code, reason, kick, localError, wasOpen, this.hello?.resumeFrom != null);
    // No host answered (or the one that did is on its way out): the next listed entry may (§5.3.1).
    if (lost.unanswered && this.nextEntry()) return;
    const info = this.rejoin.decide(lost, this.opts.reconnect);
    if (!info.willReconnect) {
      this.st = "closed";
      if (info.reload) this.emit("reload", { message: reloadMessage(kick), kick });
      if (info.movedElsewhere) this.emit("movedElsewhere", { message: movedElsewhereMessage(kick), kick });
      this.finish(info);
      return;
    }
    // The zone moved while the player was in it: its new owner waits for the resume, so the first
    // attempt goes at once (later ones back off as usual).
    const atOnce = wasOpen && lost.kickCode !== null && kickResumesElsewhere(lost.kickCode);
    info.retryInMs = atOnce ? 0 : backoffMs(this.opts.reconnect ?? {}, this.rejoin.attempts);
    this.st = "reconnecting";
    // The player's socket changes, the player does not: a move that lands at once is told by its
    // 'kick' and the resumed 'welcome' alone.
    if (atOnce) this.untoldMove = info;
    else this.emit("close", info);
    this.later(() => void this.attempt(), info.retryInMs);
  }

  /**
   * After an attempt that no host answered (or one shutting down answered): true when it goes on
   * at once at the next entry URL the last Welcome listed; false when none is left (the next
   * attempt starts at the entry URL again, after the usual backoff).
   */
  private nextEntry(): boolean {
    if (!this.route.advance(this.transfers.directUrl())) return false;
    this.teardown();
    this.later(() => void this.attempt(), 0);
    return true;
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
