/**
 * Chat (protocol version 11): `conn.chat` of a {@link ZoneConnection}.
 *
 * ```ts
 * conn.chat.on("line", (line) => ui.append(line));          // every new line, in seq order per channel
 * await conn.chat.send(conn.chat.zoneChannel!, "gg");          // resolves when the line is heard back
 * await conn.chat.dm("bob", "rematch?");                       // = send("dm:bob", …)
 * const older = await conn.chat.history("zone:arena-1", { before: firstSeq, limit: 50 });
 * const reportId = await conn.chat.report("zone:arena-1", [41, 42], "spam");
 * ```
 *
 * Channels: `zone:<zone id>` (everyone attached to the zone), `group:<group name>` (everyone in any
 * zone of that zone group, a world), `dm:<principal>` (a direct message: a session names the
 * *other* principal; ann sends on `dm:bob`, bob hears it on `dm:ann`, ann's own sessions on
 * `dm:bob`). On attach the host sends each channel's recent lines (ChatLines with the history flag),
 * then lines as they are said.
 *
 * **Lines** are kept per channel (the newest {@link ChatOptions.keep}, default 200, oldest first:
 * {@link ChatClient.lines}) and told once each: 'line' for every line newer than the newest this
 * client told on its channel, in seq order — so the history a host sends again after a reconnect
 * repeats nothing the page already showed, and history comes before the live lines that follow it;
 * 'earlier' for lines older than that which join the kept lines (a page of
 * {@link ChatClient.history}, or recent lines that arrived after newer ones), to put above what is
 * shown. Lines older than a full window of kept lines are neither kept nor told (a history page
 * still resolves with them).
 *
 * **send** resolves with the line as the channel heard it: the first line on that channel, newer
 * than the newest the client knew there when it sent, whose sender is this session's principal (the
 * ticket's `sub`; not checked when the ticket is not a readable JWS) and whose body is the body
 * sent (or the same once trimmed, should the host trim it). Sends of the same body on one channel
 * resolve in the order they were made. It rejects with a {@link ChatRefusal} when the host refuses
 * the line (a ChatReply with that send's ref: RATE_LIMITED, MUTED, NOT_ALLOWED, INVALID,
 * UNAVAILABLE), and with a {@link ChatError} `timeout` when neither came within
 * {@link ChatOptions.timeoutMs} (default 10 s). A send survives a reconnect: the line may be heard in
 * the history the host sends on the next attach.
 *
 * Every method rejects with a {@link ChatError}: `unsupported` on a session of version 10 or older
 * (the host is older than chat), `not_open` while no session is open (connecting, reconnecting,
 * moving to another zone), `invalid` for an empty or over-long channel, body or request,
 * `disconnected` for a report or history request whose session ended before its answer, `closed`
 * once the connection closed for good.
 */

import {
  CHAT_LIMITS,
  CHAT_PROTOCOL,
  FEATURE_CHAT,
  ChatReplyCode,
  type Chat,
  type ChatHistory,
  type ChatLines,
  type ChatReply,
  type ChatReport,
  type ChatWireLine,
} from "./chatcodec.js";
import { ChatRefusal } from "./refusal.js";
import type { Scheduler, TimerHandle } from "./scheduler.js";
import { EncodeError } from "./wire.js";

/** One line of a channel, as {@link ChatClient} keeps and tells it. */
export interface ChatLine {
  /** The channel as this session names it (a DM: `dm:<the other principal>`). */
  channel: string;
  /** Its number in the channel: from 1, strictly increasing in the order lines were committed. */
  seq: number;
  /** The principal that said it (or the name a back end chose). */
  sender: string;
  /** When the host accepted it, UNIX ms. */
  sentAtMs: number;
  /** Its text. */
  body: string;
  /** True when it came from the store (on attach, or answering a history request), not as said. */
  history: boolean;
}

/** Why a chat call failed on the client's side (the host's refusals are {@link ChatRefusal}s). */
export type ChatErrorKind = "unsupported" | "not_open" | "invalid" | "timeout" | "disconnected" | "closed";

/** A chat call that failed without a refusal from the host. */
export class ChatError extends Error {
  /** What went wrong. */
  readonly kind: ChatErrorKind;
  constructor(kind: ChatErrorKind, message: string) {
    super(`${kind}: ${message}`);
    this.name = "ChatError";
    this.kind = kind;
  }
}

/** Chat tuning ({@link ZoneConnectionOptions.chat}). */
export interface ChatOptions {
  /** Lines kept per channel, the newest (default 200). */
  keep?: number;
  /** How long a send, report or history request waits for its answer, ms (default 10000). */
  timeoutMs?: number;
}

/** Event handlers of a {@link ChatClient}. */
export interface ChatEvents {
  /** A line newer than every line told on its channel: once per line, in seq order per channel. */
  line: (line: ChatLine) => void;
  /**
   * Lines of `channel` older than the newest told there and not told before, oldest first (a
   * history page, or recent lines that came after newer ones): put them above what is shown.
   */
  earlier: (channel: string, lines: readonly ChatLine[]) => void;
}

/** What a {@link ChatClient} is told by its connection. */
export interface ChatSink {
  /** A ChatLines of the open session. */
  lines(m: ChatLines): void;
  /** A ChatReply of the open session. */
  reply(m: ChatReply): void;
  /** The session ended (its socket is gone): answers to what it asked will not come. */
  ended(): void;
  /** The connection closed for good. */
  closed(): void;
}

/** What a {@link ChatClient} needs of its connection. */
export interface ChatPort {
  /** Time and timers. */
  readonly scheduler: Scheduler;
  /** The open session's negotiated protocol version, or null when no session is open. */
  version(): number | null;
  /** The open session's Welcome feature bits (0 when no session is open). */
  features(): number;
  /** This session's principal (its ticket's `sub`), or null when unknown. */
  principal(): string | null;
  /** The zone of the open session (null before a Welcome). */
  zoneId(): string | null;
  /** Sends on the open session. */
  send(m: Chat | ChatReport | ChatHistory): void;
  /** Takes the sink the connection tells what arrives. */
  listen(sink: ChatSink): void;
}

/** The channel of everyone attached to `zoneId`. */
export function zoneChannel(zoneId: string): string {
  return `zone:${zoneId}`;
}

/** The channel of everyone in any zone of the zone group (a world) `group`. */
export function groupChannel(group: string): string {
  return `group:${group}`;
}

/** The channel of the direct messages with `principal`. */
export function dmChannel(principal: string): string {
  return `dm:${principal}`;
}

const utf8 = new TextEncoder();

interface PendingSend {
  ref: number;
  channel: string;
  body: string;
  /** Only a line newer than this seq answers it. */
  afterSeq: number;
  resolve: (line: ChatLine) => void;
  reject: (e: Error) => void;
  timer: TimerHandle;
}

interface PendingRequest {
  kind: "report" | "history";
  resolve: (value: never) => void;
  reject: (e: Error) => void;
  timer: TimerHandle;
}

interface ChannelState {
  /** Kept lines, ascending by seq, at most `keep`. */
  lines: ChatLine[];
  /** The newest seq told as 'line' (0 = none). */
  newest: number;
}

/** Chat on a {@link ZoneConnection}: `conn.chat`. See the module's documentation. */
export class ChatClient {
  private readonly port: ChatPort;
  private readonly keep: number;
  private readonly timeoutMs: number;
  private readonly channelsState = new Map<string, ChannelState>();
  private readonly sends: PendingSend[] = [];
  private readonly requests = new Map<number, PendingRequest>();
  private readonly listeners: { [K in keyof ChatEvents]: Set<ChatEvents[K]> } = { line: new Set(), earlier: new Set() };
  private lastRef = 0;
  private over = false;

  /** A client talking through `port` (a {@link ZoneConnection} makes its own: `conn.chat`). */
  constructor(port: ChatPort, options: ChatOptions = {}) {
    this.port = port;
    this.keep = Math.max(1, Math.floor(options.keep ?? 200));
    this.timeoutMs = options.timeoutMs ?? 10_000;
    port.listen({
      lines: (m) => this.onLines(m),
      reply: (m) => this.onReply(m),
      ended: () => this.onEnded(),
      closed: () => this.onClosed(),
    });
  }

  /** Subscribes to an event; returns the unsubscribe function. */
  on<K extends keyof ChatEvents>(name: K, fn: ChatEvents[K]): () => void {
    this.listeners[name].add(fn);
    return () => this.off(name, fn);
  }

  /** Unsubscribes a handler. */
  off<K extends keyof ChatEvents>(name: K, fn: ChatEvents[K]): void {
    this.listeners[name].delete(fn);
  }

  /**
   * True while a session of version 11 or later is open on a host that keeps chat (its Welcome's
   * `CHAT` feature bit: a host without a store refuses every chat message).
   */
  get available(): boolean {
    return (this.port.version() ?? 0) >= CHAT_PROTOCOL && (this.port.features() & FEATURE_CHAT) !== 0;
  }

  /** This session's principal (the ticket's `sub`), or null when unknown. */
  get principal(): string | null {
    return this.port.principal();
  }

  /** The channel of the zone this session is in (`zone:<id>`), or null before a Welcome. */
  get zoneChannel(): string | null {
    const z = this.port.zoneId();
    return z === null ? null : zoneChannel(z);
  }

  /** The channels this client keeps lines of, in the order first heard. */
  channels(): string[] {
    return [...this.channelsState.keys()];
  }

  /** The lines kept of `channel`, oldest first (the newest {@link ChatOptions.keep}). */
  lines(channel: string): readonly ChatLine[] {
    return [...(this.channelsState.get(channel)?.lines ?? [])];
  }

  /**
   * Says `body` on `channel`; resolves with the line once the channel hears it back (see the
   * module's documentation for how it is matched), rejects with a {@link ChatRefusal} or a
   * {@link ChatError}.
   */
  send(channel: string, body: string): Promise<ChatLine> {
    return new Promise<ChatLine>((resolve, reject) => {
      const ref = this.begin(reject, () => {
        checkChannel(channel);
        if (body === "") throw new ChatError("invalid", "an empty line");
        if (utf8.encode(body).length > CHAT_LIMITS.body) throw new ChatError("invalid", `a line over ${CHAT_LIMITS.body} bytes`);
      });
      if (ref === null) return;
      const pending: PendingSend = {
        ref,
        channel,
        body,
        afterSeq: this.channelsState.get(channel)?.newest ?? 0,
        resolve,
        reject,
        timer: null,
      };
      pending.timer = this.port.scheduler.setTimeout(() => {
        this.dropSend(pending);
        reject(new ChatError("timeout", `no answer to the line on ${channel} within ${this.timeoutMs} ms`));
      }, this.timeoutMs);
      this.sends.push(pending);
      this.transmit({ type: "chat", ref, channel, body }, () => this.dropSend(pending), reject, pending.timer);
    });
  }

  /** Says `body` to `principal` directly: {@link send} on `dm:<principal>`. */
  dm(principal: string, body: string): Promise<ChatLine> {
    return this.send(dmChannel(principal), body);
  }

  /**
   * Reports lines of `channel` (1 to 20 seqs) to the moderators; resolves with the report's id.
   * Rejects with a {@link ChatRefusal} NOT_FOUND when the channel no longer keeps one of them.
   */
  report(channel: string, seqs: readonly number[], reason = ""): Promise<string> {
    return new Promise<string>((resolve, reject) => {
      const ref = this.begin(reject, () => {
        checkChannel(channel);
        if (seqs.length === 0) throw new ChatError("invalid", "a report names no line");
        if (seqs.length > CHAT_LIMITS.reportSeqs) throw new ChatError("invalid", `a report names over ${CHAT_LIMITS.reportSeqs} lines`);
        if (!seqs.every((s) => Number.isSafeInteger(s) && s > 0)) throw new ChatError("invalid", "a seq that is no line's");
        if (utf8.encode(reason).length > CHAT_LIMITS.reason) throw new ChatError("invalid", `a reason over ${CHAT_LIMITS.reason} bytes`);
      });
      if (ref === null) return;
      const timer = this.request(ref, "report", resolve as (v: never) => void, reject);
      this.transmit({ type: "chat_report", ref, channel, seqs: [...seqs], reason }, () => this.requests.delete(ref), reject, timer);
    });
  }

  /**
   * A page of `channel`'s stored lines: the newest `limit` (1 to 200, default 50) before seq
   * `before` (default: the newest), oldest first. They are kept and told like any line ('line'
   * for those newer than what was told, 'earlier' for the others) before the promise resolves.
   */
  history(channel: string, options: { before?: number; limit?: number } = {}): Promise<ChatLine[]> {
    const before = options.before ?? 0;
    const limit = options.limit ?? 50;
    return new Promise<ChatLine[]>((resolve, reject) => {
      const ref = this.begin(reject, () => {
        checkChannel(channel);
        if (!Number.isSafeInteger(before) || before < 0) throw new ChatError("invalid", `before ${before}`);
        if (!Number.isInteger(limit) || limit < 1 || limit > CHAT_LIMITS.historyLimit) {
          throw new ChatError("invalid", `limit ${limit} not in 1..=${CHAT_LIMITS.historyLimit}`);
        }
      });
      if (ref === null) return;
      const timer = this.request(ref, "history", resolve as (v: never) => void, reject);
      this.transmit({ type: "chat_history", ref, channel, before, limit }, () => this.requests.delete(ref), reject, timer);
    });
  }

  /** Checks that chat can be used now and the arguments; the next ref, or null after rejecting. */
  private begin(reject: (e: Error) => void, check: () => void): number | null {
    try {
      if (this.over) throw new ChatError("closed", "the connection is closed");
      const version = this.port.version();
      if (version === null) throw new ChatError("not_open", "no session is open (connecting, reconnecting or moving)");
      if (version < CHAT_PROTOCOL) {
        throw new ChatError(
          "unsupported",
          `chat needs protocol version ${CHAT_PROTOCOL}; this session speaks version ${version} (the host is older)`,
        );
      }
      check();
    } catch (e) {
      reject(e instanceof Error ? e : new Error(String(e)));
      return null;
    }
    return this.nextRef();
  }

  /** A ref no pending message holds (1..=2^32 − 1, wrapping). */
  private nextRef(): number {
    for (;;) {
      this.lastRef = this.lastRef >= 0xffff_ffff ? 1 : this.lastRef + 1;
      const ref = this.lastRef;
      if (!this.requests.has(ref) && !this.sends.some((s) => s.ref === ref)) return ref;
    }
  }

  private request(ref: number, kind: PendingRequest["kind"], resolve: (v: never) => void, reject: (e: Error) => void): TimerHandle {
    const timer = this.port.scheduler.setTimeout(() => {
      this.requests.delete(ref);
      reject(new ChatError("timeout", `no answer to the ${kind} request within ${this.timeoutMs} ms`));
    }, this.timeoutMs);
    this.requests.set(ref, { kind, resolve, reject, timer });
    return timer;
  }

  /** Sends `m`; an encoding failure undoes what was pending and rejects. */
  private transmit(m: Chat | ChatReport | ChatHistory, undo: () => void, reject: (e: Error) => void, timer: TimerHandle): void {
    try {
      this.port.send(m);
    } catch (e) {
      undo();
      this.port.scheduler.clearTimeout(timer);
      reject(e instanceof EncodeError ? new ChatError("invalid", e.message) : e instanceof Error ? e : new Error(String(e)));
    }
  }

  private dropSend(p: PendingSend): void {
    const i = this.sends.indexOf(p);
    if (i >= 0) this.sends.splice(i, 1);
  }

  private emit<K extends keyof ChatEvents>(name: K, ...args: Parameters<ChatEvents[K]>): void {
    for (const fn of [...this.listeners[name]]) (fn as (...a: Parameters<ChatEvents[K]>) => void)(...args);
  }

  private onLines(m: ChatLines): void {
    const lines = m.lines
      .map((l: ChatWireLine): ChatLine => ({ channel: m.channel, seq: l.seq, sender: l.sender, sentAtMs: l.sentAtMs, body: l.body, history: m.history }))
      .sort((a, b) => a.seq - b.seq);
    let ch = this.channelsState.get(m.channel);
    if (ch === undefined) {
      ch = { lines: [], newest: 0 };
      this.channelsState.set(m.channel, ch);
    }
    const fresh: ChatLine[] = [];
    const earlier: ChatLine[] = [];
    for (const line of lines) {
      if (line.seq > ch.newest) {
        fresh.push(line);
        ch.newest = line.seq;
        insertLine(ch.lines, line);
      } else if (ch.lines.length < this.keep || line.seq > (ch.lines[0]?.seq ?? 0)) {
        // Inside the kept window, where every line told is kept: one not there was never told.
        // Older than a full window: it would not be kept, and it may have been told before.
        if (insertLine(ch.lines, line)) earlier.push(line);
      }
    }
    while (ch.lines.length > this.keep) ch.lines.shift();
    if (earlier.length > 0) this.emit("earlier", m.channel, earlier);
    for (const line of fresh) this.emit("line", line);
    // Answers: the history page this is (by ref), and the sends these lines are.
    if (m.ref !== 0) {
      const req = this.requests.get(m.ref);
      if (req !== undefined && req.kind === "history") {
        this.requests.delete(m.ref);
        this.port.scheduler.clearTimeout(req.timer);
        (req.resolve as (v: ChatLine[]) => void)(lines);
      }
    }
    for (const line of lines) this.matchSend(line);
  }

  /** Resolves the oldest pending send `line` is the echo of, if any. */
  private matchSend(line: ChatLine): void {
    const me = this.port.principal();
    if (me !== null && line.sender !== me) return;
    const candidates = this.sends.filter((p) => p.channel === line.channel && line.seq > p.afterSeq);
    const p = candidates.find((c) => c.body === line.body) ?? candidates.find((c) => c.body.trim() === line.body.trim());
    if (p === undefined) return;
    this.dropSend(p);
    this.port.scheduler.clearTimeout(p.timer);
    p.resolve(line);
  }

  private onReply(m: ChatReply): void {
    const send = this.sends.find((p) => p.ref === m.ref);
    if (send !== undefined) {
      // A line said is answered by its echo; only a refusal comes as a reply.
      if (m.code === ChatReplyCode.OK) return;
      this.dropSend(send);
      this.port.scheduler.clearTimeout(send.timer);
      send.reject(new ChatRefusal(m));
      return;
    }
    const req = this.requests.get(m.ref);
    if (req === undefined) return;
    if (m.code === ChatReplyCode.OK && req.kind !== "report") return;
    this.requests.delete(m.ref);
    this.port.scheduler.clearTimeout(req.timer);
    if (m.code === ChatReplyCode.OK) (req.resolve as (v: string) => void)(m.text);
    else req.reject(new ChatRefusal(m));
  }

  /** The session ended: its answers will not come (sends wait on: the next attach's history may hold them). */
  private onEnded(): void {
    for (const [ref, req] of [...this.requests]) {
      this.requests.delete(ref);
      this.port.scheduler.clearTimeout(req.timer);
      req.reject(new ChatError("disconnected", `the session ended before the ${req.kind} request was answered`));
    }
  }

  private onClosed(): void {
    this.over = true;
    this.onEnded();
    for (const p of this.sends.splice(0)) {
      this.port.scheduler.clearTimeout(p.timer);
      p.reject(new ChatError("closed", "the connection closed before the line was heard"));
    }
  }
}

/** Inserts `line` into `lines` (ascending by seq); false when that seq is there already. */
function insertLine(lines: ChatLine[], line: ChatLine): boolean {
  let lo = 0;
  let hi = lines.length;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if ((lines[mid]?.seq ?? 0) < line.seq) lo = mid + 1;
    else hi = mid;
  }
  if (lines[lo]?.seq === line.seq) return false;
  lines.splice(lo, 0, line);
  return true;
}

function checkChannel(channel: string): void {
  if (channel === "") throw new ChatError("invalid", "an empty channel");
  if (utf8.encode(channel).length > CHAT_LIMITS.channel) throw new ChatError("invalid", `a channel over ${CHAT_LIMITS.channel} bytes`);
}
