/**
 * Test doubles for driving a ZoneConnection without a network: a manual clock, sockets that deliver
 * through the clock with configurable latency, a small zone server built on the SDK's own codec, and
 * a fleet of them behind one socket factory. The zone server also serves WebTransport (PROTOCOL.md
 * §1.1) through an in-memory session: `GET /webtransport` discovery, a control stream framed as
 * varint length + message, State datagrams written against the state the client acknowledged, and
 * Inputs datagrams; datagrams may be delayed, lost, duplicated and reordered.
 */

import {
  canonicalPosForm,
  compareContentVersions,
  decodeClientMessage,
  encodeDelta,
  encodeServerMessage,
  frameMessage,
  CHARACTER_PROTOCOL,
  HALT_PROTOCOL,
  KickCode,
  LIMITS,
  ManualScheduler,
  MessageFramer,
  type BidirectionalStreamLike,
  type Delta,
  type FetchLike,
  type FetchResponseLike,
  type ReadableLike,
  type StreamReadResultLike,
  type StreamReaderLike,
  type WebTransportCloseInfoLike,
  type WebTransportFactory,
  type WebTransportLike,
  type WebTransportOptionsLike,
  type WritableLike,
  type ZoneEvent,
  type FieldValue,
  type KnownEntry,
  type Schema,
  type ServerMessage,
  type SocketLike,
  type Update,
  type ClientMessage,
  type Chat,
  type ChatHistory,
  type ChatReply,
  type ChatReport,
  type ChatWireLine,
  ChatReplyCode,
  type Hello,
  type SocketFactory,
  knownSetHash,
  toHex,
  ZoneConnection,
  type ReconnectOptions,
} from "../src/index.js";

/** The `sub` of a JWS ticket, or null when `ticket` is not one. */
export function ticketSub(ticket: string): string | null {
  try {
    const claims = JSON.parse(Buffer.from(ticket.split(".")[1] ?? "", "base64url").toString("utf8")) as { sub?: unknown };
    return typeof claims.sub === "string" ? claims.sub : null;
  } catch {
    return null;
  }
}

/** A ticket as a host mints it (a compact JWS; the signature is not checked here) for `sub`. */
export function jwsTicket(sub: string, n = 1): string {
  const b64 = (v: unknown) => Buffer.from(JSON.stringify(v)).toString("base64url");
  return `${b64({ alg: "HS256" })}.${b64({ sub, zone: "test-zone", exp: 4_000_000_000, jti: `j${n}`, role: "player" })}.sig`;
}

/** A small deterministic PRNG (mulberry32) so "random" latency is reproducible. */
export function rng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/**
 * Lets pending promise callbacks (the async ticket() call, stream reads) run; not a sleep: no time
 * passes. Microtasks only, so a promise a test rejects-checks later is not reported as unhandled.
 */
export async function flush(): Promise<void> {
  for (let i = 0; i < 20; i++) await Promise.resolve();
}

/** Advances the manual clock in small steps, letting promise callbacks run in between. */
export async function advance(sched: ManualScheduler, ms: number, stepMs = 5): Promise<void> {
  for (let t = 0; t < ms; t += stepMs) {
    await flush();
    sched.advance(Math.min(stepMs, ms - t));
  }
  await flush();
}

/** The test zone's schema: one "avatar" kind with an hp and a name. */
export const SCHEMA: Schema = {
  posStep: 0.01,
  kinds: [
    {
      name: "avatar",
      fields: [
        { name: "hp", ty: { type: "quant", min: 0, max: 100, bits: 7 } },
        { name: "name", ty: { type: "str", maxLen: 16 } },
      ],
    },
  ],
};

/** One entity of the fake zone. */
export interface FakeEntity {
  kind: number;
  qx: number;
  qy: number;
  fields: FieldValue[];
}

/** The server's end of one client connection: a WebSocket, or a WebTransport session's control stream. */
export interface ServerEnd {
  /** Sends one message (on a WebTransport session: framed onto the control stream). */
  push(bytes: Uint8Array): void;
  /** Closes the connection with `code` (after a Kick: 4000 + the Kick code). */
  drop(code?: number, reason?: string): void;
  /** Either side closed it. */
  readonly closed: boolean;
}

/** One client's socket as the server sees it. */
export class ServerSession {
  readonly socket: ServerEnd;
  /** The WebTransport session, when the client came that way. */
  wt: FakeWebTransport | null = null;
  /** WebTransport: what each of the last 32 States sent held (tick → id → entity), oldest first. */
  states = new Map<number, Map<number, FakeEntity>>();
  /** WebTransport: the newest State tick the client acknowledged. */
  stateAck = 0;
  /** WebTransport: the base of each State sent, in order. */
  stateBases: number[] = [];
  /** WebTransport: the highest input seq received (repeats are dropped, §4.2). */
  highestSeq = 0;
  /** WebTransport: the seqs of the inputs applied, in order. */
  applied: number[] = [];
  /** The URL the client opened this socket with. */
  url = "";
  /** What this client was last sent: id → state. */
  sent = new Map<number, FakeEntity>();
  /** Tick of the last Delta sent on this socket (0 = none). */
  lastDeltaTick = 0;
  playerId = 0;
  ack = 0;
  controlled: number | null = null;
  controlDirty = true;
  welcomed = false;
  /** The protocol version its Welcome negotiated (0 before one). */
  version = 0;
  /** A transfer moved this session's player away: it gets no Deltas any more (§5.3.2). */
  moving = false;
  /** The BASELINE waits for the client's first Ping (see `FakeServer.pongBeforeBaseline`). */
  baselineHeld = false;
  received: ClientMessage[] = [];
  /** The principal its ticket named (the `sub` of a JWS ticket, else `p<player id>`). */
  principal = "";
  constructor(socket: ServerEnd) {
    this.socket = socket;
  }
}

/** A socket pair end seen by the client; delivery goes through the scheduler with latency. */
export class FakeSocket implements SocketLike, ServerEnd {
  binaryType = "blob";
  onopen: ((ev: unknown) => void) | null = null;
  onmessage: ((ev: { data: unknown }) => void) | null = null;
  onclose: ((ev: { code?: number; reason?: string }) => void) | null = null;
  onerror: ((ev: unknown) => void) | null = null;
  /** The client called close(). */
  clientClosed = false;
  /** The server dropped the connection. */
  serverClosed = false;
  get closed(): boolean {
    return this.clientClosed || this.serverClosed;
  }
  constructor(
    private readonly server: FakeServer,
    readonly session: () => ServerSession,
  ) {}

  send(data: Uint8Array): void {
    if (this.closed) return;
    const copy = data.slice();
    this.server.net.deliver(() => this.server.onClientBytes(this.session(), copy));
  }

  close(code = 1000, reason = ""): void {
    if (this.closed) return;
    this.clientClosed = true;
    this.server.onClientClosed(this.session());
    this.server.net.deliver(() => this.onclose?.({ code, reason }));
  }

  /** Server side: deliver a message to the client. */
  push(bytes: Uint8Array): void {
    if (this.serverClosed) return;
    const buf = bytes.slice().buffer;
    this.server.net.deliver(() => {
      if (!this.clientClosed) this.onmessage?.({ data: buf });
    });
  }

  /** Server side: the connection drops (no close handshake; the client sees 1006 after latency). */
  drop(code = 1006, reason = ""): void {
    if (this.closed) return;
    this.serverClosed = true;
    this.server.onClientClosed(this.session());
    this.server.net.deliver(() => this.onclose?.({ code, reason }));
  }
}

/** Delivery through the manual clock with a latency function (one way). */
export class FakeNet {
  constructor(
    readonly sched: ManualScheduler,
    public latency: () => number = () => 20,
  ) {}
  private lastAt = 0;
  deliver(fn: () => void): void {
    // In-order delivery like TCP: a message never overtakes the previous one.
    const at = Math.max(this.sched.now() + this.latency(), this.lastAt);
    this.lastAt = at;
    this.sched.setTimeout(fn, at - this.sched.now());
  }
}

/** The code a halted lasting world is told by to a session of `version` (§5.3). */
function haltedCode(version: number): number {
  return version >= HALT_PROTOCOL ? KickCode.WORLD_HALTED : KickCode.INTERNAL_ERROR;
}

/**
 * The code a session of `version` is told by when the player's character was taken into another
 * zone (§5.3 "Characters"): KICKED below version 10.
 */
function characterMovedCode(version: number): number {
  return version >= CHARACTER_PROTOCOL ? KickCode.CHARACTER_MOVED : KickCode.KICKED;
}

/**
 * The code a join of `version` is refused with while another zone holds the player's character
 * (§5.3 "Characters"): INTERNAL_ERROR below version 10.
 */
function characterElsewhereCode(version: number): number {
  return version >= CHARACTER_PROTOCOL ? KickCode.CHARACTER_ELSEWHERE : KickCode.INTERNAL_ERROR;
}

/** A minimal zone host speaking the protocol through the SDK codec. */
export class FakeServer {
  readonly net: FakeNet;
  readonly sched: ManualScheduler;
  readonly sessions: ServerSession[] = [];
  readonly entities = new Map<number, FakeEntity>();
  readonly tickHz = 30;
  patchEvery = 1;
  /** serverMs = clientMs + offsetMs. */
  offsetMs = 0;
  tick = 0;
  up = true;
  /** Tokens the server honours: token hex → player id. */
  tokens = new Map<string, number>();
  refuseTokens = false;
  /** Ticket check: a Kick code refusing `ticket`, or null to accept it (default: accept all). */
  checkTicket: (ticket: string) => number | null = () => null;
  /**
   * Where a Hello that passed the ticket check is redirected (a fleet host that does not own the
   * zone, §5.3.1), or null to admit it here (default).
   */
  redirect: (hello: Hello, session: ServerSession) => string | null = () => null;
  nextPlayer = 1;
  versionPick: number | null = null;
  /**
   * The newest version this host speaks (11: it moves players between zones, §5.3.2, tells a
   * halted lasting world by WORLD_HALTED, §5.3, the whereabouts of a player's character by
   * CHARACTER_MOVED and CHARACTER_ELSEWHERE, §5.3 "Characters", and serves chat).
   */
  maxVersion = 11;
  /** Chat: every channel's lines, by the store's key (a DM under `dm:` + the two principals sorted). */
  chatStore = new Map<string, ChatWireLine[]>();
  /** Chat: lines of each channel sent to a session on attach (0 = none). */
  chatHistoryOnAttach = 50;
  /** Chat: the host's clock for `sent_at_ms`, UNIX ms. */
  chatClock: () => number = () => 1_700_000_000_000 + Math.floor(this.sched.now());
  /** Chat: a refusal of a line (its ChatReply), or null to accept it (default: accept all). */
  chatRefuse: (s: ServerSession, m: Chat) => Omit<ChatReply, "type" | "ref"> | null = () => null;
  /** Chat: hold the echo of accepted lines until {@link releaseChat} (as a slow store would). */
  chatHold = false;
  /** Chat: lines accepted and held (see {@link chatHold}). */
  private chatHeld: Array<() => void> = [];
  /** Chat: reports filed, in order. */
  reports: ChatReport[] = [];
  /**
   * The zone is a lasting world halted because its saves failed (§5.3): every join is refused with
   * WORLD_HALTED (INTERNAL_ERROR to a session below version 9) until it is false again. See
   * {@link halt}.
   */
  halted = false;
  /**
   * Another zone holds the player's character and cannot be asked to give it back (§5.3
   * "Characters"): every join is refused with CHARACTER_ELSEWHERE (INTERNAL_ERROR to a session below
   * version 10) until it is false again.
   */
  characterHeldElsewhere = false;
  /** The zone this host runs (its Welcome's and Redirect's `zoneId`). */
  zoneId = "test-zone";
  /** The content version the host runs, in version 5 Welcomes (§4.1.2). */
  contentVersion = "1.0.0";
  /** Where else the zone may be entered, in version 7 Welcomes (§5.3.1). */
  entries: string[] = [];
  /**
   * The oldest content version the host admits, or null to admit every client (default). As the
   * real host: checked right after the protocol version, before the ticket.
   */
  minContentVersion: string | null = null;
  /** How each resume's first Delta came out (§4.1.1), in order. */
  resumes: Array<"delta" | "baseline"> = [];
  /** Answer the client's first Ping before sending the BASELINE (the protocol allows it). */
  pongBeforeBaseline = false;
  /** Patch ticks sent no Delta (as a host behind a slow link does: the next Delta covers them). */
  skipPatch: (tick: number) => boolean = () => false;
  /** Server-side input rule: applied to the controlled entity for each input. */
  applyInput: (e: FakeEntity, payload: Uint8Array, seq: number) => void = () => {};
  /**
   * What `GET /webtransport` answers (§1.1), or null when WebTransport is off (404). Default: off.
   */
  wtEndpoint: { url: string; certificate_hashes: Array<{ algorithm: string; value: string }> } | null = null;
  /** Every discovery URL fetched. */
  fetched: string[] = [];
  /** Every WebTransport session opened: its URL and options. */
  wtOpened: Array<{ url: string; options: WebTransportOptionsLike | undefined }> = [];
  /** How a WebTransport session's `ready` goes: established, refused, or never settled. */
  wtReady: "ok" | "fail" | "hang" = "ok";
  /** One-way latency of each datagram, ms (default: the stream's latency); datagrams may overtake. */
  datagramLatency: (() => number) | null = null;
  /** Latency of the client's datagrams, ms (default: {@link datagramLatency}). */
  datagramUpLatency: (() => number) | null = null;
  /** Whether a datagram (either way) is lost. */
  datagramLoss: () => boolean = () => false;
  /** Whether a datagram to the client arrives twice. */
  datagramDuplicate: () => boolean = () => false;
  /** The largest datagram the fake path carries; a larger State goes on the control stream. */
  maxDatagramSize = 1200;
  /** Zone events raised since the last patch (WebSocket: in the Delta; WebTransport: an Events message). */
  events: ZoneEvent[] = [];

  constructor(sched: ManualScheduler, latency?: () => number) {
    this.sched = sched;
    this.net = new FakeNet(sched, latency);
  }

  /** The socket factory to give the connection. */
  factory = (url: string): SocketLike => {
    let session!: ServerSession;
    const sock = new FakeSocket(this, () => session);
    session = new ServerSession(sock);
    session.url = url;
    this.sessions.push(session);
    if (this.up) this.net.deliver(() => sock.onopen?.({}));
    else sock.drop(1006, "connection refused");
    return sock;
  };

  /** `fetch` for the connection: answers `GET {origin}/webtransport` after one latency. */
  fetch: FetchLike = async (url: string): Promise<FetchResponseLike> => {
    this.fetched.push(url);
    await new Promise<void>((resolve) => this.sched.setTimeout(resolve, this.net.latency()));
    if (!this.up) throw new Error("connection refused");
    const body = this.wtEndpoint;
    if (body === null || !url.endsWith("/webtransport")) return { status: 404, ok: false, json: async () => ({}) };
    return { status: 200, ok: true, json: async () => JSON.parse(JSON.stringify(body)) as unknown };
  };

  /** The WebTransport factory for the connection: an in-memory session with this host. */
  webTransport: WebTransportFactory = (url, options): WebTransportLike => {
    this.wtOpened.push({ url, options });
    return new FakeWebTransport(this, url);
  };

  /** Opens the server side of a WebTransport session's control stream. */
  acceptWebTransport(wt: FakeWebTransport): ServerSession {
    const session = new ServerSession(wt.serverEnd);
    session.url = wt.url;
    session.wt = wt;
    this.sessions.push(session);
    return session;
  }

  /** An Inputs datagram from the client (§4.5). */
  onClientDatagram(s: ServerSession, bytes: Uint8Array): void {
    if (s.socket.closed) return;
    const m = decodeClientMessage(bytes);
    if (m.type !== "inputs" || !s.welcomed) throw new Error(`unexpected datagram ${m.type}`);
    s.received.push(m);
    s.stateAck = Math.max(s.stateAck, m.stateAck);
    for (const i of m.inputs) {
      // §4.2: a seq already received (a repeat) is dropped; a higher one is taken, gaps included.
      if (i.seq <= s.highestSeq) continue;
      s.highestSeq = i.seq;
      const e = s.controlled === null ? undefined : this.entities.get(s.controlled);
      if (e !== undefined) this.applyInput(e, i.payload, i.seq);
      s.applied.push(i.seq);
      s.ack = Math.max(s.ack, i.seq);
    }
  }

  get last(): ServerSession {
    const s = this.sessions[this.sessions.length - 1];
    if (s === undefined) throw new Error("no session");
    return s;
  }

  serverMs(): number {
    return this.sched.now() + this.offsetMs;
  }

  send(s: ServerSession, m: ServerMessage): void {
    s.socket.push(encodeServerMessage(m));
  }

  onClientBytes(s: ServerSession, bytes: Uint8Array): void {
    if (s.socket.closed) return;
    const m = decodeClientMessage(bytes);
    s.received.push(m);
    switch (m.type) {
      case "hello": {
        // A current host speaks versions 2 to 10 (over WebSocket 6 is byte for byte 5);
        // a WebTransport session speaks 6 or later.
        const version =
          this.versionPick ?? Math.max(...m.versions.filter((v) => v >= (s.wt !== null ? 6 : 2) && v <= this.maxVersion));
        if (!Number.isFinite(version)) {
          this.send(s, { type: "kick", code: 10, reason: "no common version" });
          s.socket.drop(1000);
          return;
        }
        const min = this.minContentVersion;
        if (min !== null) {
          const cmp = compareContentVersions(m.contentVersion, min);
          const refusal =
            version < 5
              ? { code: 10, reason: `this host needs content version ${min} or newer, which takes protocol version 5` }
              : cmp === null || cmp < 0
                ? { code: 27, reason: `this host needs content version ${min} or newer` }
                : null;
          if (refusal !== null) {
            this.send(s, { type: "kick", ...refusal });
            s.socket.drop(4000 + refusal.code);
            return;
          }
        }
        const refusal = this.checkTicket(m.ticket);
        if (refusal !== null) {
          this.send(s, { type: "kick", code: refusal, reason: "ticket refused" });
          s.socket.drop(1000);
          return;
        }
        const elsewhere = this.redirect(m, s);
        if (elsewhere !== null) {
          this.send(s, { type: "redirect", url: elsewhere, zoneId: this.zoneId });
          s.socket.drop(1000);
          return;
        }
        if (this.halted) {
          this.kick(s, haltedCode(version), "the world's saves failed; it resumes from its last committed save");
          return;
        }
        if (this.characterHeldElsewhere) {
          this.kick(s, characterElsewhereCode(version), "your character is in zone dungeon-2; retry shortly");
          return;
        }
        if (version < 4 && m.resumeFrom != null) {
          // What a version 3 host makes of the field: trailing bytes, a protocol error.
          this.send(s, { type: "kick", code: 14, reason: "undecodable Hello: trailing bytes" });
          s.socket.drop(1000);
          return;
        }
        let continued = false;
        const tokenHex = Buffer.from(m.reconnectToken).toString("hex");
        if (m.reconnectToken.length > 0) {
          const pid = this.tokens.get(tokenHex);
          if (this.refuseTokens || pid === undefined) {
            this.send(s, { type: "kick", code: 20, reason: "unknown token" });
            s.socket.drop(1000);
            return;
          }
          s.playerId = pid;
          // The newest earlier session of this player holds what its client was last sent.
          const prev = [...this.sessions].reverse().find((o) => o !== s && o.playerId === pid);
          if (prev !== undefined) {
            s.ack = prev.ack;
            s.highestSeq = Math.max(prev.highestSeq, prev.ack);
            s.controlled = prev.controlled;
            // As the real host: continue from what the client holds when it says exactly that.
            const ids = [...prev.sent.keys()].sort((a, b) => a - b);
            const from = m.resumeFrom;
            continued =
              s.wt === null &&
              from != null &&
              from.tick === prev.lastDeltaTick &&
              from.count === ids.length &&
              from.hash === knownSetHash(ids);
            if (continued) s.sent = new Map(prev.sent);
            this.resumes.push(continued ? "delta" : "baseline");
          }
        } else {
          s.playerId = this.nextPlayer++;
          s.controlled = 100 + s.playerId;
          this.entities.set(s.controlled, { kind: 0, qx: 0, qy: 0, fields: [100, `p${s.playerId}`] });
        }
        const token = new Uint8Array(16).fill(s.playerId).map((b, i) => (b + i * this.sessions.length) & 0xff);
        this.tokens.set(Buffer.from(token).toString("hex"), s.playerId);
        this.send(s, {
          type: "welcome",
          version,
          playerId: s.playerId,
          zoneId: this.zoneId,
          role: "player",
          tickHz: this.tickHz,
          patchEvery: this.patchEvery,
          tick: this.tick,
          features: version >= 11 ? 1 : 0,
          idleTimeoutMs: 30_000,
          handshakeTimeoutMs: 5_000,
          reconnectGraceMs: 30_000,
          reconnectToken: token,
          schema: SCHEMA,
          contentVersion: version >= 5 ? this.contentVersion : "",
          entries: version >= 7 ? this.entries : [],
        });
        s.welcomed = true;
        s.version = version;
        if (!continued) s.sent.clear();
        s.controlDirty = true;
        if (s.wt !== null) this.sendState(s);
        else if (this.pongBeforeBaseline) s.baselineHeld = true;
        else this.sendDelta(s, !continued);
        s.principal = ticketSub(m.ticket) ?? `p${s.playerId}`;
        if (version >= 11) this.chatAttach(s);
        return;
      }
      case "chat":
      case "chat_report":
      case "chat_history":
        if (s.version < 11) {
          // As Inputs over WebSocket: a protocol error in an older session.
          this.kick(s, KickCode.PROTOCOL_ERROR, `${m.type} in a version ${s.version} session`);
          return;
        }
        this.onChat(s, m);
        return;
      case "inputs":
        throw new Error("Inputs on the control stream");
      case "input": {
        const e = s.controlled === null ? undefined : this.entities.get(s.controlled);
        if (e !== undefined) this.applyInput(e, m.payload, m.seq);
        s.ack = Math.max(s.ack, m.seq);
        return;
      }
      case "resync":
        // As the real host: the next Delta this session gets is a BASELINE.
        this.sendDelta(s, true);
        return;
      case "ping":
        this.send(s, {
          type: "pong",
          clientTime: m.clientTime,
          serverTimeUs: Math.floor(this.serverMs() * 1000),
          tick: Math.floor((this.serverMs() * this.tickHz) / 1000),
        });
        if (s.baselineHeld) {
          s.baselineHeld = false;
          this.sendDelta(s, true);
        }
        return;
    }
  }

  onClientClosed(_s: ServerSession): void {}

  /** The store's key of a channel as `s` names it (a DM: `dm:` + both principals sorted, 0x1F between). */
  chatKey(s: ServerSession, channel: string): string {
    if (!channel.startsWith("dm:")) return channel;
    const pair = [s.principal, channel.slice(3)].sort();
    return `dm:${pair[0]}\u001f${pair[1]}`;
  }

  /** The channel `s` hears the lines of the store's `key` on (null: it does not hear them). */
  chatChannelOf(s: ServerSession, key: string): string | null {
    if (!key.startsWith("dm:")) return key === `zone:${this.zoneId}` || key.startsWith("group:") ? key : null;
    const [a, b] = key.slice(3).split("\u001f");
    if (a === s.principal) return `dm:${b}`;
    if (b === s.principal) return `dm:${a}`;
    return null;
  }

  /** Sends a session the recent lines of the channels it hears (as a host does on attach). */
  chatAttach(s: ServerSession): void {
    if (this.chatHistoryOnAttach === 0) return;
    for (const [key, lines] of this.chatStore) {
      const channel = this.chatChannelOf(s, key);
      if (channel === null || lines.length === 0) continue;
      this.send(s, { type: "chat_lines", channel, history: true, ref: 0, lines: lines.slice(-this.chatHistoryOnAttach) });
    }
  }

  /** Appends a line as the store does (the next seq of its channel) and tells every session hearing it. */
  sayLine(key: string, sender: string, body: string): ChatWireLine {
    const lines = this.chatStore.get(key) ?? [];
    this.chatStore.set(key, lines);
    const line: ChatWireLine = { seq: (lines.at(-1)?.seq ?? 0) + 1, sender, sentAtMs: this.chatClock(), body };
    lines.push(line);
    const fanOut = (): void => {
      for (const o of this.sessions) {
        if (!o.welcomed || o.socket.closed || o.moving || o.version < 11) continue;
        const channel = this.chatChannelOf(o, key);
        if (channel !== null) this.send(o, { type: "chat_lines", channel, history: false, ref: 0, lines: [line] });
      }
    };
    if (this.chatHold) this.chatHeld.push(fanOut);
    else fanOut();
    return line;
  }

  /** Tells the held lines (see {@link chatHold}). */
  releaseChat(): void {
    for (const f of this.chatHeld.splice(0)) f();
  }

  private onChat(s: ServerSession, m: Chat | ChatReport | ChatHistory): void {
    const reply = (code: number, text: string, untilMs = 0): void =>
      this.send(s, { type: "chat_reply", ref: m.ref, code, untilMs, text });
    const key = this.chatKey(s, m.channel);
    switch (m.type) {
      case "chat": {
        const refused = this.chatRefuse(s, m);
        if (refused !== null) this.send(s, { type: "chat_reply", ref: m.ref, ...refused });
        else this.sayLine(key, s.principal, m.body);
        return;
      }
      case "chat_report": {
        const kept = new Set((this.chatStore.get(key) ?? []).map((l) => l.seq));
        if (!m.seqs.every((q) => kept.has(q))) {
          reply(ChatReplyCode.NOT_FOUND, "a reported line is not kept");
          return;
        }
        this.reports.push(m);
        reply(ChatReplyCode.OK, String(this.reports.length));
        return;
      }
      case "chat_history": {
        const all = this.chatStore.get(key) ?? [];
        const lines = all.filter((l) => m.before === 0 || l.seq < m.before).slice(-m.limit);
        this.send(s, { type: "chat_lines", channel: m.channel, history: true, ref: m.ref, lines });
        return;
      }
    }
  }

  /**
   * Moves the session's player to `zoneId` (§5.3.2): its entity leaves this zone, the session is
   * sent no more Deltas, and a Transfer tells the client where to go with `credential`.
   */
  transfer(s: ServerSession, zoneId: string, credential: string, url: string): void {
    if (s.controlled !== null) this.entities.delete(s.controlled);
    s.moving = true;
    this.send(s, { type: "transfer", zoneId, ticket: credential, url });
  }

  /**
   * Halts the zone as a lasting world whose saves failed (§5.3): every session in it is kicked with
   * WORLD_HALTED (INTERNAL_ERROR below version 9) and joins are refused until `halted` is false.
   */
  halt(reason = "the world's saves failed; it resumes from its last committed save"): void {
    this.halted = true;
    for (const s of this.sessions) {
      if (s.welcomed && !s.moving && !s.socket.closed) this.kick(s, haltedCode(s.version), reason);
    }
  }

  /**
   * The player's character was taken into another zone (§5.3 "Characters": the player joined from
   * another game or device): every session in this zone is kicked with CHARACTER_MOVED (KICKED below
   * version 10).
   */
  moveCharacter(reason = "your character joined zone dungeon-2"): void {
    for (const s of this.sessions) {
      if (s.welcomed && !s.moving && !s.socket.closed) this.kick(s, characterMovedCode(s.version), reason);
    }
  }

  /** Kicks the session and closes with 4000 + the code, as a host does (§6). */
  kick(s: ServerSession, code: number, reason = ""): void {
    this.send(s, { type: "kick", code, reason });
    s.socket.drop(4000 + code);
  }

  /** Sends the session a KnownSetCheck of what the server believes it sent. */
  sendKnownSetCheck(s: ServerSession): void {
    const ids = [...s.sent.keys()].sort((a, b) => a - b);
    this.send(s, { type: "known_set_check", tick: this.tick, count: ids.length, hash: knownSetHash(ids) });
  }

  /** The Delta from what a client holds (`sent`, or nothing for a BASELINE) to the world now. */
  private diff(sent: Map<number, FakeEntity>, baseline: boolean, ack: number): { delta: Delta; knownBefore: KnownEntry[] } {
    const knownBefore: KnownEntry[] = baseline
      ? []
      : [...sent.entries()].sort((a, b) => a[0] - b[0]).map(([id, e]) => [id, e.kind] as const);
    const despawns = baseline ? [] : knownBefore.map(([id]) => id).filter((id) => !this.entities.has(id));
    const after = knownBefore.filter(([id]) => this.entities.has(id));
    const updates: Update[] = [];
    after.forEach(([id, kind], index) => {
      const now = this.entities.get(id);
      const was = sent.get(id);
      if (now === undefined || was === undefined) return;
      const fields: Array<[number, FieldValue]> = [];
      now.fields.forEach((v, i) => {
        if (v !== was.fields[i]) fields.push([i, v]);
      });
      const pos = canonicalPosForm(now.qx, now.qy, was.qx, was.qy, fields.length > 0);
      if (pos === null && fields.length === 0) return;
      const mask = fields.reduce((m, [i]) => m | (1 << i), 0);
      updates.push({ index, id, kind, pos, mask, fields });
    });
    const spawns = [...this.entities.entries()]
      .filter(([id]) => baseline || !sent.has(id))
      .sort((a, b) => a[0] - b[0])
      .map(([id, e]) => ({ id, kind: e.kind, qx: e.qx, qy: e.qy, fields: [...e.fields] }));
    const delta: Delta = { tick: this.tick, ack, baseline, despawns, updates, spawns, events: null };
    return { delta, knownBefore };
  }

  /** A copy of the world as a client would hold it. */
  private snapshot(): Map<number, FakeEntity> {
    return new Map([...this.entities].map(([id, e]) => [id, { ...e, fields: [...e.fields] }]));
  }

  /**
   * Builds and sends this WebTransport session's State (§5.8): against the newest state the client
   * acknowledged that is still kept, or a BASELINE; as a datagram when it fits, else on the stream.
   */
  sendState(s: ServerSession): Delta {
    const wt = s.wt;
    if (wt === null) throw new Error("not a WebTransport session");
    const baseState = s.states.get(s.stateAck);
    const base = s.stateAck !== 0 && baseState !== undefined ? s.stateAck : 0;
    const { delta, knownBefore } = this.diff(baseState ?? new Map(), base === 0, s.ack);
    // Every State repeats the CONTROL field: any of them may be the one that arrives.
    delta.control = s.controlled;
    const bytes = encodeServerMessage({ ...delta, type: "state", base }, { schema: SCHEMA, known: knownBefore });
    s.states.set(this.tick, this.snapshot());
    while (s.states.size > LIMITS.stateRing) s.states.delete(s.states.keys().next().value as number);
    s.stateBases.push(base);
    s.lastDeltaTick = this.tick;
    if (bytes.length > this.maxDatagramSize) s.socket.push(bytes);
    else wt.serverEnd.pushDatagram(bytes);
    return { ...delta, base };
  }

  /** Builds and sends this session's Delta: the diff between the world and what it was sent. */
  sendDelta(s: ServerSession, baseline = false, events: ZoneEvent[] | null = null): Delta {
    const { delta, knownBefore } = this.diff(s.sent, baseline, s.ack);
    const despawns = delta.despawns;
    delta.events = events;
    if (s.controlDirty) {
      delta.control = s.controlled;
      s.controlDirty = false;
    }
    s.socket.push(encodeDelta(delta, SCHEMA, knownBefore));
    s.lastDeltaTick = delta.tick;
    if (baseline) s.sent.clear();
    for (const id of despawns) s.sent.delete(id);
    for (const [id, e] of this.entities) s.sent.set(id, { ...e, fields: [...e.fields] });
    return delta;
  }

  /** Raises a zone event: delivered with the next patch. */
  raise(topic: number, payload: Uint8Array): void {
    this.events.push({ topic, payload });
  }

  /**
   * Advances the zone one tick; on patch ticks every welcomed, open session gets a Delta (over
   * WebTransport: the patch's Events message on the stream, then its State).
   */
  step(simulate: (tick: number) => void = () => {}): void {
    this.tick += 1;
    simulate(this.tick);
    if (this.tick % this.patchEvery === 0 && !this.skipPatch(this.tick)) {
      const events = this.events.splice(0);
      for (const s of this.sessions) {
        if (!s.welcomed || s.socket.closed || s.moving) continue;
        if (s.wt !== null) {
          if (events.length > 0) this.send(s, { type: "events", tick: this.tick, events });
          this.sendState(s);
        } else this.sendDelta(s, false, events.length > 0 ? events : null);
      }
    }
  }

  /** Runs the zone on the manual clock: one tick every 1000/tickHz ms of server time. */
  run(simulate: (tick: number) => void = () => {}): void {
    const loop = (): void => {
      const due = Math.floor((this.serverMs() * this.tickHz) / 1000);
      while (this.tick < due) this.step(simulate);
      const nextAt = ((this.tick + 1) * 1000) / this.tickHz - this.offsetMs;
      // At least 1 ms, so float rounding at a tick boundary can never spin at one instant.
      this.sched.setTimeout(loop, Math.max(1, Math.ceil(nextAt - this.sched.now())));
    };
    this.tick = Math.floor((this.serverMs() * this.tickHz) / 1000);
    loop();
  }
}

/**
 * Hosts of a fleet on one manual clock, each a {@link FakeServer} reached at `ws://<name>/...`; the
 * socket factory routes by the URL's host and records every URL opened.
 */
export class FakeFleet {
  readonly hosts = new Map<string, FakeServer>();
  readonly opened: string[] = [];
  constructor(
    readonly sched: ManualScheduler,
    names: string[],
  ) {
    for (const n of names) this.hosts.set(n, new FakeServer(sched));
  }

  host(name: string): FakeServer {
    const h = this.hosts.get(name);
    if (h === undefined) throw new Error(`no host ${name}`);
    return h;
  }

  factory: SocketFactory = (url: string): SocketLike => {
    this.opened.push(url);
    return this.host(new URL(url).host).factory(url);
  };
}

/** One direction of an in-memory stream: what the reader gets, in order. */
export class Pipe implements ReadableLike<Uint8Array> {
  private queue: Uint8Array[] = [];
  private waiting: Array<(r: StreamReadResultLike<Uint8Array>) => void> = [];
  private ended = false;

  /** Delivers one chunk to the reader. */
  push(chunk: Uint8Array): void {
    if (this.ended) return;
    const w = this.waiting.shift();
    if (w !== undefined) w({ done: false, value: chunk });
    else this.queue.push(chunk);
  }

  /** Ends the stream: the reader gets `done` after what is queued. */
  end(): void {
    this.ended = true;
    for (const w of this.waiting.splice(0)) w({ done: true });
  }

  getReader(): StreamReaderLike<Uint8Array> {
    return {
      read: () => {
        const v = this.queue.shift();
        if (v !== undefined) return Promise.resolve({ done: false, value: v });
        if (this.ended) return Promise.resolve({ done: true });
        return new Promise((resolve) => this.waiting.push(resolve));
      },
      cancel: async () => this.end(),
    };
  }
}

function writable(write: (chunk: Uint8Array) => void): WritableLike<Uint8Array> {
  return {
    getWriter: () => ({
      write: async (chunk: Uint8Array) => write(chunk.slice()),
      close: async () => {},
    }),
  };
}

/**
 * An in-memory WebTransport session with a {@link FakeServer}, speaking real protocol bytes: the
 * control stream framed as varint length + message (chunks split at arbitrary points), datagrams
 * one message each, delayed, lost, duplicated and reordered as the server says.
 */
export class FakeWebTransport implements WebTransportLike {
  readonly ready: Promise<unknown>;
  readonly closed: Promise<WebTransportCloseInfoLike>;
  readonly datagrams: WebTransportLike["datagrams"];
  /** What the server does with the session. */
  readonly serverEnd: ServerEnd & { pushDatagram(bytes: Uint8Array): void };
  /** Bytes the server sent on the control stream, as the client reads them. */
  readonly toClient = new Pipe();
  /** Datagrams to the client. */
  readonly toClientDatagrams = new Pipe();
  clientClosed = false;
  serverClosed = false;
  /** The close info the client gave. */
  clientCloseInfo: WebTransportCloseInfoLike | null = null;
  streamsOpened = 0;
  /** Client time of each datagram the client wrote, in order (lost ones included). */
  readonly datagramsSentAt: number[] = [];
  session: ServerSession | null = null;
  private settleReady: (ok: boolean) => void = () => {};
  private settleClosed: (info: WebTransportCloseInfoLike | Error) => void = () => {};
  private split = 0;

  constructor(
    readonly server: FakeServer,
    readonly url: string,
  ) {
    this.ready = new Promise((resolve, reject) => {
      this.settleReady = (ok) => (ok ? resolve(undefined) : reject(new Error("WebTransport connection refused")));
    });
    this.closed = new Promise((resolve, reject) => {
      let done = false;
      this.settleClosed = (info) => {
        if (done) return;
        done = true;
        if (info instanceof Error) reject(info);
        else resolve(info);
      };
    });
    // Unobserved rejections are the connection's business; keep node quiet when it does not look.
    this.ready.catch(() => {});
    this.closed.catch(() => {});
    const net = server.net;
    if (!server.up || server.wtReady === "fail") {
      net.deliver(() => {
        this.settleReady(false);
        this.settleClosed(new Error("WebTransport connection refused"));
      });
    } else if (server.wtReady === "ok") {
      net.deliver(() => this.settleReady(true));
    }
    const self = this;
    this.datagrams = {
      readable: this.toClientDatagrams,
      writable: writable((chunk) => {
        self.datagramsSentAt.push(server.sched.now());
        if (self.closedEither || server.datagramLoss()) return;
        server.sched.setTimeout(() => {
          const s = self.session;
          if (s !== null && !self.closedEither) server.onClientDatagram(s, chunk);
        }, (server.datagramUpLatency ?? server.datagramLatency ?? server.net.latency)());
      }),
      get maxDatagramSize() {
        return server.maxDatagramSize;
      },
    };
    this.serverEnd = {
      push: (bytes: Uint8Array) => {
        if (this.closedEither) return;
        // Split each frame at a varying point: the client must reassemble whatever the chunking.
        const framed = frameMessage(bytes);
        const at = framed.length > 1 ? 1 + (this.split++ % (framed.length - 1)) : framed.length;
        for (const part of [framed.subarray(0, at), framed.subarray(at)]) {
          if (part.length === 0) continue;
          const copy = part.slice();
          net.deliver(() => {
            if (!this.clientClosed) this.toClient.push(copy);
          });
        }
      },
      pushDatagram: (bytes: Uint8Array) => {
        if (this.closedEither) return;
        const copies = server.datagramLoss() ? 0 : server.datagramDuplicate() ? 2 : 1;
        for (let i = 0; i < copies; i++) {
          const copy = bytes.slice();
          server.sched.setTimeout(() => {
            if (!this.clientClosed) this.toClientDatagrams.push(copy);
          }, this.datagramLatency());
        }
      },
      drop: (code = 0, reason = "") => {
        if (this.closedEither) return;
        this.serverClosed = true;
        net.deliver(() => {
          this.toClient.end();
          this.toClientDatagrams.end();
          this.settleClosed({ closeCode: code, reason });
        });
      },
      get closed(): boolean {
        return self.closedEither;
      },
    };
  }

  private get closedEither(): boolean {
    return this.clientClosed || this.serverClosed;
  }

  private datagramLatency(): number {
    return (this.server.datagramLatency ?? this.server.net.latency)();
  }

  createBidirectionalStream(): Promise<BidirectionalStreamLike> {
    this.streamsOpened += 1;
    if (this.streamsOpened > 1) throw new Error("a second stream is a protocol error");
    const session = this.server.acceptWebTransport(this);
    this.session = session;
    const framer = new MessageFramer(LIMITS.clientMessage);
    return Promise.resolve({
      readable: this.toClient,
      writable: writable((chunk) => {
        this.server.net.deliver(() => {
          if (this.closedEither) return;
          for (const m of framer.push(chunk)) this.server.onClientBytes(session, m);
        });
      }),
    });
  }

  close(info?: WebTransportCloseInfoLike): void {
    if (this.clientClosed) return;
    this.clientClosed = true;
    this.clientCloseInfo = info ?? {};
    this.toClient.end();
    this.toClientDatagrams.end();
    this.settleReady(false);
    this.settleClosed({ closeCode: info?.closeCode ?? 0, reason: info?.reason ?? "" });
  }
}

/** The entry URL of a {@link retryingConnection}. */
export const RETRY_ENTRY = "ws://test/zones/test-zone";

/**
 * A connection to a {@link FakeServer} at {@link RETRY_ENTRY} that retries patiently (20
 * attempts, a minute's grace, no jitter), each attempt with a new numbered ticket.
 */
export function retryingConnection(reconnect: ReconnectOptions = {}) {
  const sched = new ManualScheduler(1000);
  const server = new FakeServer(sched, () => 20);
  let tickets = 0;
  const conn = new ZoneConnection({
    url: RETRY_ENTRY,
    ticket: async () => `ticket-${++tickets}`,
    socket: server.factory,
    scheduler: sched,
    reconnect: { random: () => 0.5, graceMs: 60_000, maxAttempts: 20, ...reconnect },
  });
  return { sched, server, conn, tickets: () => tickets };
}

/** The Hellos `server` received after the first, as (ticket, token hex, URL). */
export function laterHellos(server: FakeServer): Array<[string, string, string]> {
  return server.sessions.slice(1).map((s) => {
    const m = s.received[0];
    if (m?.type !== "hello") throw new Error(`expected a Hello, got ${m?.type}`);
    return [m.ticket, toHex(m.reconnectToken), s.url];
  });
}
