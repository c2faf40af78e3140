/**
 * Presence for a game client (docs/PRESENCE.md): {@link watchPresence} follows the principals the
 * game's back end lets this player watch — a stream of server-sent events from
 * `GET /presence/watch`, first a snapshot of every watched principal, then one change at a time —
 * as typed {@link Presence} entries, and reconnects by itself with a new ticket after a dropped
 * stream (each new stream starts with a fresh snapshot, so nothing is missed across a reconnect).
 *
 * The ticket (audience `@presence`, `params.watch` listing whom to watch) goes in the
 * `Authorization` header, never in a URL; it is single use, so every attempt asks `ticket()` for a
 * new one. The back end's own query (`GET /presence?principals=…`) takes the back end's credential
 * and is not part of this SDK: a player's machine never holds that credential.
 */

import { systemScheduler, type Scheduler, type TimerHandle } from "./scheduler.js";
import type { ReadableLike, StreamReaderLike } from "./webtransport.js";
import type { AbortSignalLike } from "./matchmaker.js";
import { isObject, refusalParts } from "./refusal.js";

/** One zone a principal is in. */
export interface PresenceZone {
  zone: string;
  /** The host running the zone's session. */
  host: string;
  /** When the principal arrived in the zone, UNIX ms (kept across a resume, on another host too). */
  since_ms: number;
}

/** A principal's presence: online while it is in at least one zone. */
export interface Presence {
  principal: string;
  online: boolean;
  zones: PresenceZone[];
}

/**
 * Why watching failed. `code` is the host's (`bad_request`, `unauthorized`, `presence_full`,
 * `presence_off`, `unavailable`, …), one made from the status when the answer carries none
 * (`bad_request`, `unauthorized`, `not_found`, `rate_limited`, `unavailable`, `http_N`), or one of
 * this SDK's: `network` (no answer, or the stream broke), `closed` (the host ended the stream),
 * `no_ticket` (`ticket()` failed), `malformed` (an answer or event that is not what the host sends)
 * and `too_large` (one event over `maxEventBytes`).
 */
export class PresenceError extends Error {
  readonly code: string;
  /** The HTTP status (0 without an answer, or for a failure of the stream after it). */
  readonly status: number;
  /** True when the watcher reconnects by itself after this error; false when it has stopped. */
  readonly retryable: boolean;

  constructor(code: string, status: number, message: string, retryable: boolean) {
    super(message);
    this.name = "PresenceError";
    this.code = code;
    this.status = status;
    this.retryable = retryable;
  }
}

function retryableStatus(status: number): boolean {
  return status === 0 || status === 401 || status === 429 || status >= 500;
}

/** The refusal an answer of `status` with `body` (`{"error":{"code","message"}}`, or anything) stands for. */
export function presenceRefusal(status: number, body: unknown): PresenceError {
  const { code, message } = refusalParts(status, body);
  return new PresenceError(code, status, message, retryableStatus(status));
}

function malformed(what: string): PresenceError {
  return new PresenceError("malformed", 0, `not a presence event: ${what}`, true);
}

/** Checks that `value` is one principal's presence; a {@link PresenceError} `malformed` otherwise. */
export function parsePresence(value: unknown): Presence {
  if (!isObject(value)) throw malformed("an entry is not an object");
  const { principal, online, zones } = value;
  if (typeof principal !== "string" || principal === "") throw malformed("an entry has no principal");
  if (typeof online !== "boolean") throw malformed(`${principal}: online is not a boolean`);
  if (!Array.isArray(zones)) throw malformed(`${principal}: zones is not a list`);
  return {
    principal,
    online,
    zones: zones.map((z): PresenceZone => {
      if (!isObject(z)) throw malformed(`${principal}: a zone is not an object`);
      if (typeof z.zone !== "string" || z.zone === "") throw malformed(`${principal}: a zone has no id`);
      if (typeof z.host !== "string") throw malformed(`${principal}: a zone has no host`);
      const since = z.since_ms;
      if (typeof since !== "number" || !Number.isSafeInteger(since) || since < 0) {
        throw malformed(`${principal}: since_ms is not a time in ms`);
      }
      return { zone: z.zone, host: z.host, since_ms: since };
    }),
  };
}

/** The part of an `AbortSignal` the client passes on (a real `AbortSignal` is one). */
export type PresenceAbortSignal = AbortSignalLike;

/** The `fetch` the watcher calls (the platform's by default): the answer's body is read as a stream. */
export type PresenceFetch = (
  url: string,
  init: { method: string; headers: Record<string, string>; signal?: PresenceAbortSignal },
) => Promise<{ status: number; body: ReadableLike<Uint8Array> | null; json(): Promise<unknown> }>;

/** What {@link watchPresence} does and whom it tells. */
export interface WatchPresenceOptions {
  /**
   * A new ticket for `@presence` from the game's back end, asked for every attempt (tickets are
   * single use). A rejection is reported as `no_ticket` and retried.
   */
  ticket: () => Promise<string>;
  /** Every watched principal, at the start of each stream: it replaces whatever was known before. */
  onSnapshot: (presence: Presence[]) => void;
  /** One watched principal's presence changed. */
  onChange: (presence: Presence) => void;
  /** Every failure; `retryable` says whether the watcher goes on (else it has stopped). */
  onError?: (error: PresenceError) => void;
  /** Default: the global `fetch`. */
  fetch?: PresenceFetch;
  /** Time and timers (default: the platform's). */
  scheduler?: Scheduler;
  /**
   * The wait before reconnecting after a failure, in ms (default 1000), plus up to half of it at
   * random; it doubles with each failure in a row, up to `maxRetryMs`, and is back to `retryMs`
   * once a stream has delivered its snapshot.
   */
  retryMs?: number;
  /** The longest wait before reconnecting, in ms (default 30000). */
  maxRetryMs?: number;
  /** Source of jitter in [0, 1) (default `Math.random`): each wait is lengthened by up to half of it, at random. */
  random?: () => number;
  /** The largest event (its lines, in bytes) the watcher reads before giving up the stream (default 1 MiB). */
  maxEventBytes?: number;
}

/** A running watch: what it knows, and how to stop it. */
export interface PresenceWatch {
  /** Each watched principal's presence as last told (empty before the first snapshot). */
  readonly presence: ReadonlyMap<string, Presence>;
  /** True once stopped: by {@link PresenceWatch.close}, or a refusal that is not retried. */
  readonly closed: boolean;
  /** Stops watching: the request is aborted, no callback is called after this. */
  close(): void;
}

/** Default bound of one event: a snapshot of 200 principals with long names and several zones fits. */
export const MAX_PRESENCE_EVENT_BYTES = 1 << 20;

const CR = 0x0d;
const LF = 0x0a;

/**
 * Server-sent events (the WHATWG `text/event-stream` format) from bytes in chunks split anywhere:
 * lines end with LF, CR LF or CR; `event:` and `data:` fields (several data lines joined with
 * LF), comments (`:`) and other fields skipped, an event dispatched at a blank line. One event's
 * lines, and an unfinished line, may not exceed `max` bytes.
 */
class SseParser {
  private line: Uint8Array[] = [];
  private lineBytes = 0;
  private afterCr = false;
  private event = "";
  private data: string[] | null = null;
  private eventBytes = 0;
  private started = false;
  private readonly text = new TextDecoder();

  constructor(private readonly max: number) {}

  /** The events completed by `chunk`. Throws a {@link PresenceError} `too_large`. */
  push(chunk: Uint8Array): Array<{ event: string; data: string }> {
    const out: Array<{ event: string; data: string }> = [];
    let start = 0;
    for (let i = 0; i < chunk.length; i++) {
      const b = chunk[i];
      if (b !== CR && b !== LF) continue;
      if (b === LF && this.afterCr && i === start && this.lineBytes === 0) {
        // The LF of a CR LF whose CR ended the line before.
        this.afterCr = false;
        start = i + 1;
        continue;
      }
      this.afterCr = b === CR;
      this.take(chunk.subarray(start, i));
      this.endLine(out);
      start = i + 1;
    }
    if (start < chunk.length) {
      this.afterCr = false;
      this.take(chunk.subarray(start));
    }
    return out;
  }

  private take(bytes: Uint8Array): void {
    if (bytes.length === 0) return;
    this.lineBytes += bytes.length;
    if (this.eventBytes + this.lineBytes > this.max) {
      throw new PresenceError("too_large", 0, `an event longer than ${this.max} bytes`, true);
    }
    // A copy: the platform may reuse the chunk's buffer.
    this.line.push(bytes.slice());
  }

  private endLine(out: Array<{ event: string; data: string }>): void {
    let bytes: Uint8Array;
    if (this.line.length === 1) bytes = this.line[0] as Uint8Array;
    else {
      bytes = new Uint8Array(this.lineBytes);
      let at = 0;
      for (const part of this.line) {
        bytes.set(part, at);
        at += part.length;
      }
    }
    const size = this.lineBytes;
    this.line = [];
    this.lineBytes = 0;
    let line = this.text.decode(bytes);
    if (!this.started) {
      this.started = true;
      if (line.startsWith("\uFEFF")) line = line.slice(1);
    }
    if (line === "") {
      if (this.data !== null) out.push({ event: this.event, data: this.data.join("\n") });
      this.event = "";
      this.data = null;
      this.eventBytes = 0;
      return;
    }
    if (line.startsWith(":")) return;
    const colon = line.indexOf(":");
    const field = colon < 0 ? line : line.slice(0, colon);
    let value = colon < 0 ? "" : line.slice(colon + 1);
    if (value.startsWith(" ")) value = value.slice(1);
    if (field === "event") {
      this.event = value;
      this.eventBytes += size;
    } else if (field === "data") {
      (this.data ??= []).push(value);
      this.eventBytes += size;
    }
  }
}

/**
 * Watches presence at the host `baseUrl` (e.g. `http://127.0.0.1:7350`; a page on the host may pass
 * `location.origin`): `GET {baseUrl}/presence/watch` with a ticket from `options.ticket()`, the
 * stream's first event handed to `onSnapshot`, each later one to `onChange`.
 *
 * When the stream ends or breaks, or an answer is 401, 429 or 5xx, `onError` is told (`retryable`
 * true) and the watcher asks for a new ticket and reconnects after `retryMs`, doubling the wait
 * with each failure in a row up to `maxRetryMs`. Any other refusal (400 `bad_request`: a ticket
 * without `params.watch` or watching too many; 404 `presence_off`) stops the watcher, with
 * `retryable` false. A callback that throws does not stop it: its error is thrown again from a timer.
 */
export function watchPresence(baseUrl: string, options: WatchPresenceOptions): PresenceWatch {
  return new Watcher(baseUrl, options);
}

class Watcher implements PresenceWatch {
  private readonly url: string;
  private readonly fetch: PresenceFetch;
  private readonly sched: Scheduler;
  private readonly retryMs: number;
  private readonly maxRetryMs: number;
  private readonly random: () => number;
  private readonly maxEventBytes: number;
  private readonly current = new Map<string, Presence>();
  private stopped = false;
  /** Failures in a row since the last snapshot. */
  private failures = 0;
  private timer: TimerHandle | null = null;
  private abort: (() => void) | null = null;
  private reader: StreamReaderLike<Uint8Array> | null = null;

  constructor(
    baseUrl: string,
    private readonly options: WatchPresenceOptions,
  ) {
    this.url = `${baseUrl.replace(/\/+$/, "")}/presence/watch`;
    const f = options.fetch ?? (globalThis as { fetch?: PresenceFetch }).fetch;
    if (f === undefined) throw new Error("no fetch: pass one in WatchPresenceOptions.fetch");
    // The platform's fetch must be called as a plain function (not as a method of this object).
    this.fetch = options.fetch ?? ((url, init) => f(url, init));
    this.sched = options.scheduler ?? systemScheduler;
    this.retryMs = options.retryMs ?? 1000;
    this.maxRetryMs = options.maxRetryMs ?? 30_000;
    if (!(this.retryMs > 0) || !(this.maxRetryMs >= this.retryMs)) {
      throw new RangeError(`retryMs must be positive and at most maxRetryMs, not ${this.retryMs} and ${this.maxRetryMs}`);
    }
    this.random = options.random ?? Math.random;
    this.maxEventBytes = options.maxEventBytes ?? MAX_PRESENCE_EVENT_BYTES;
    if (!(this.maxEventBytes > 0)) throw new RangeError(`maxEventBytes must be positive, not ${this.maxEventBytes}`);
    void this.attempt();
  }

  get presence(): ReadonlyMap<string, Presence> {
    return this.current;
  }

  get closed(): boolean {
    return this.stopped;
  }

  close(): void {
    if (this.stopped) return;
    this.stopped = true;
    if (this.timer !== null) this.sched.clearTimeout(this.timer);
    this.timer = null;
    this.abort?.();
    this.abort = null;
    const reader = this.reader;
    this.reader = null;
    reader?.cancel().catch(() => {});
  }

  /** One attempt: a ticket, the request, then the stream until it ends. */
  private async attempt(): Promise<void> {
    this.timer = null;
    let ticket: string;
    try {
      ticket = await this.options.ticket();
    } catch (e) {
      return this.fail(new PresenceError("no_ticket", 0, `no ticket: ${describe(e)}`, true));
    }
    if (this.stopped) return;
    const Controller = (globalThis as { AbortController?: new () => { signal: PresenceAbortSignal; abort(): void } })
      .AbortController;
    const controller = Controller === undefined ? null : new Controller();
    this.abort = controller === null ? null : () => controller.abort();
    const init = {
      method: "GET",
      headers: { authorization: `Bearer ${ticket}`, accept: "text/event-stream" },
    };
    let res;
    try {
      res = await this.fetch(this.url, controller === null ? init : { ...init, signal: controller.signal });
    } catch (e) {
      return this.fail(new PresenceError("network", 0, `no answer from ${this.url}: ${describe(e)}`, true));
    }
    if (this.stopped) {
      res.body?.getReader().cancel().catch(() => {});
      return;
    }
    if (res.status !== 200) {
      let json: unknown = null;
      try {
        json = await res.json();
      } catch {
        // Not the host's JSON (a proxy's page): the status says what it can.
      }
      return this.fail(presenceRefusal(res.status, json));
    }
    if (res.body === null || res.body === undefined) {
      return this.fail(new PresenceError("malformed", 200, `the answer of ${this.url} has no body`, true));
    }
    const reader = res.body.getReader();
    this.reader = reader;
    const parser = new SseParser(this.maxEventBytes);
    let snapshot = false;
    try {
      for (;;) {
        const { done, value } = await reader.read();
        if (this.stopped) return;
        if (done) break;
        if (value === undefined) continue;
        for (const e of parser.push(value)) {
          if (this.stopped) return;
          snapshot = this.deliver(e.event, e.data, snapshot);
        }
      }
    } catch (e) {
      if (this.stopped) return;
      reader.cancel().catch(() => {});
      this.reader = null;
      return this.fail(
        e instanceof PresenceError ? e : new PresenceError("network", 0, `the stream broke: ${describe(e)}`, true),
      );
    }
    this.reader = null;
    this.fail(new PresenceError("closed", 0, "the host ended the stream", true));
  }

  /** Hands one event on; true once the stream's snapshot has been delivered. */
  private deliver(event: string, data: string, snapshot: boolean): boolean {
    if (event === "snapshot") {
      if (snapshot) throw malformed("a second snapshot in one stream");
      let list: unknown;
      try {
        list = (JSON.parse(data) as Record<string, unknown> | null)?.presence;
      } catch {
        throw malformed("a snapshot that is not JSON");
      }
      if (!Array.isArray(list)) throw malformed("a snapshot without a presence list");
      const entries = list.map(parsePresence);
      this.current.clear();
      for (const p of entries) this.current.set(p.principal, p);
      this.failures = 0;
      this.call(() => this.options.onSnapshot(entries));
      return true;
    }
    if (event === "presence") {
      if (!snapshot) throw malformed("a change before the snapshot");
      let value: unknown;
      try {
        value = JSON.parse(data);
      } catch {
        throw malformed("a change that is not JSON");
      }
      const p = parsePresence(value);
      this.current.set(p.principal, p);
      this.call(() => this.options.onChange(p));
      return true;
    }
    // An event this SDK does not know (a newer host's): skipped.
    return snapshot;
  }

  /**
   * Calls a game's callback: an error it throws never reaches the watcher; it is thrown again from
   * a timer of its own, so the platform reports it as uncaught (as it does an event listener's).
   */
  private call(fn: () => void): void {
    try {
      fn();
    } catch (e) {
      this.sched.setTimeout(() => {
        throw e;
      }, 0);
    }
  }

  /** Reports `error`; reconnects later if it is retryable, else stops. */
  private fail(error: PresenceError): void {
    this.abort = null;
    if (this.stopped) return;
    if (!error.retryable) this.stopped = true;
    else {
      this.failures += 1;
      const exp = this.retryMs * 2 ** Math.min(this.failures - 1, 30);
      const wait = Math.min(this.maxRetryMs, exp + (exp / 2) * this.random());
      this.timer = this.sched.setTimeout(() => void this.attempt(), wait);
    }
    const onError = this.options.onError;
    if (onError !== undefined) this.call(() => onError(error));
  }
}

function describe(e: unknown): string {
  return e instanceof Error ? e.message : String(e);
}
