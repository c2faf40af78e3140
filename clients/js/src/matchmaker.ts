/**
 * The matchmaker's answers and its HTTP API (docs/MATCHMAKING.md), for {@link matchmake} and for
 * games that drive a search themselves: the {@link Search} and its {@link Assignment}, the
 * refusals as {@link MatchError}, a {@link MatchmakerClient} with one method per route, and the
 * {@link SearchTracker} that only moves forward and hands an assignment out once.
 */

import { systemScheduler, type Scheduler, type TimerHandle } from "./scheduler.js";

export type SearchState =
  | "probing"
  | "queued"
  | "proposed"
  | "allocated"
  | "assigned"
  | "connected"
  | "cancelled"
  | "expired"
  | "failed";

const STATES: readonly SearchState[] = [
  "probing",
  "queued",
  "proposed",
  "allocated",
  "assigned",
  "connected",
  "cancelled",
  "expired",
  "failed",
];

/** The states a search ends in: nothing follows them. */
export const FINAL_SEARCH_STATES: readonly SearchState[] = ["connected", "cancelled", "expired", "failed"];

/**
 * How far along a search in `state` is: probing 0, queued 1, proposed 2, allocated 3, assigned 4,
 * and 5 for every final state (connected, cancelled, expired, failed).
 */
export function searchRank(state: SearchState): number {
  const i = STATES.indexOf(state);
  return i < 0 ? -1 : Math.min(i, 5);
}

/** One region to measure: its host and the single-use challenge for this search. */
export interface Probe {
  region: string;
  /** The region host's HTTP base URL, e.g. `http://10.0.0.7:7350`. */
  url: string;
  challenge: string;
}

/** Where a search's match is: the zone and the ticket to join it with. */
export interface Assignment {
  match: string;
  /** The match's zone. */
  zone: string;
  /** The zone's kind. */
  kind: string;
  /** WebSocket URL of the zone. */
  url: string;
  /** The zone's host id, when the matchmaker says. */
  host: string | null;
  /** A single-use ticket for the player and the zone. */
  ticket: string;
  /** When the ticket and the held seat lapse, in UNIX seconds. */
  expires_at: number;
  /** The names of the match's players. */
  players: string[];
}

/** A search as the matchmaker answers it. */
export interface Search {
  /** The search's id (`s-…`). */
  search: string;
  queue: string;
  state: SearchState;
  /** Why a search ended (`no_heartbeat`, `no_show`, `no_probe_result`, …), or null. */
  reason: string | null;
  /** The round trip the server measured to each region, in ms. */
  rtt_ms: Record<string, number>;
  /** The region the search is matched in, once known. */
  region: string | null;
  /** How often the client must send a heartbeat while queued, in seconds. */
  heartbeat_secs: number;
  /** The search's bearer secret: only in the answer that created it. */
  token?: string;
  /** The regions to measure (in the answer that created it). */
  probes: Probe[];
  /** Present from `assigned` on, the same on every read. */
  assignment: Assignment | null;
}

/** What a player is told when the matchmaker refuses this build of the game (HTTP 426). */
export const MATCH_OUTDATED_MESSAGE = "This version of the game is out of date: update it to keep playing.";

/** Codes a caller may meet again with the same request and succeed (a search the game can retry). */
const RETRYABLE = new Set([
  "network",
  "unavailable",
  "probe_unavailable",
  "no_probe_result",
  "expired",
  "failed",
  "no_heartbeat",
  "no_show",
]);

/**
 * Why no match was had: the matchmaker's refusal code, the reason (or state) a search ended with, or
 * one of this SDK's own: `network` (no answer in time), `malformed` (an answer that is not what the
 * matchmaker sends), `no_probe_result` (no region could be measured), `no_ticket` (the ticket source
 * failed) and `cancelled` (the caller aborted, {@link aborted}).
 */
export class MatchError extends Error {
  /**
   * The refusal code (`bad_request`, `unauthorized`, `unknown_queue`, `no_search`, `wrong_state`,
   * `client_outdated`, `unavailable`, `probe_unavailable`, `match_off`, …), the final search's
   * `reason` or state, or one of the SDK's codes above.
   */
  readonly code: string;
  /** The HTTP status of the refusal (absent when there was no refusal). */
  readonly status?: number;
  /** True when searching again may find a match (the game shows "search again"). */
  readonly retryable: boolean;
  /** The search as it ended, for a search that reached a final failure state. */
  readonly search?: Search;

  constructor(
    code: string,
    message: string,
    options: { status?: number; retryable?: boolean; search?: Search; aborted?: boolean } = {},
  ) {
    super(message);
    this.name = options.aborted === true ? "AbortError" : "MatchError";
    this.code = code;
    if (options.status !== undefined) this.status = options.status;
    if (options.search !== undefined) this.search = options.search;
    this.retryable = options.aborted === true || code === "client_outdated" ? false : (options.retryable ?? RETRYABLE.has(code));
  }

  /**
   * True when the matchmaker refused this build of the game (HTTP 426 `client_outdated`): only an
   * update helps, so offer no retry ({@link MATCH_OUTDATED_MESSAGE}).
   */
  get outdated(): boolean {
    return this.code === "client_outdated";
  }

  /** True when the caller cancelled the search (its `signal` aborted); `name` is then `AbortError`. */
  get aborted(): boolean {
    return this.name === "AbortError";
  }
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

function malformed(what: string): MatchError {
  return new MatchError("malformed", `not a matchmaker answer: ${what}`);
}

function parseProbe(value: unknown): Probe {
  if (!isObject(value)) throw malformed("a probe is not an object");
  for (const k of ["region", "url", "challenge"] as const) {
    if (typeof value[k] !== "string" || value[k] === "") throw malformed(`a probe has no ${k}`);
  }
  return { region: value.region as string, url: value.url as string, challenge: value.challenge as string };
}

/** Checks that `value` is an assignment; a {@link MatchError} `malformed` otherwise. */
export function parseAssignment(value: unknown): Assignment {
  if (!isObject(value)) throw malformed("assignment is not an object");
  for (const k of ["match", "zone", "url", "ticket"] as const) {
    if (typeof value[k] !== "string" || value[k] === "") throw malformed(`assignment has no ${k}`);
  }
  const url = value.url as string;
  if (!/^wss?:\/\//.test(url)) throw malformed(`assignment url ${url} is not a WebSocket URL`);
  const players = Array.isArray(value.players) ? value.players.filter((p): p is string => typeof p === "string") : [];
  return {
    match: value.match as string,
    zone: value.zone as string,
    kind: typeof value.kind === "string" ? value.kind : "",
    url,
    host: typeof value.host === "string" ? value.host : null,
    ticket: value.ticket as string,
    expires_at: typeof value.expires_at === "number" ? value.expires_at : 0,
    players,
  };
}

/**
 * Checks that `value` is a search answer (known state, an assignment from `assigned` on); a
 * {@link MatchError} `malformed` otherwise.
 */
export function parseSearch(value: unknown): Search {
  if (!isObject(value)) throw malformed("not an object");
  if (typeof value.search !== "string" || value.search === "") throw malformed("search id missing");
  const state = value.state;
  if (typeof state !== "string" || !STATES.includes(state as SearchState)) throw malformed(`unknown state ${String(state)}`);
  const hb = value.heartbeat_secs;
  if (hb !== undefined && hb !== null && (typeof hb !== "number" || !(hb > 0))) throw malformed("heartbeat_secs is not positive");
  const rtt: Record<string, number> = {};
  if (isObject(value.rtt_ms)) {
    for (const [region, ms] of Object.entries(value.rtt_ms)) if (typeof ms === "number") rtt[region] = ms;
  }
  if (value.probes !== undefined && value.probes !== null && !Array.isArray(value.probes)) throw malformed("probes is not a list");
  const probes = Array.isArray(value.probes) ? value.probes.map(parseProbe) : [];
  const hasAssignment = value.assignment !== undefined && value.assignment !== null;
  if ((state === "assigned" || state === "connected") && !hasAssignment) throw malformed(`${state} without an assignment`);
  const search: Search = {
    search: value.search,
    queue: typeof value.queue === "string" ? value.queue : "",
    state: state as SearchState,
    reason: typeof value.reason === "string" ? value.reason : null,
    rtt_ms: rtt,
    region: typeof value.region === "string" ? value.region : null,
    heartbeat_secs: typeof hb === "number" ? hb : 10,
    probes,
    assignment: hasAssignment ? parseAssignment(value.assignment) : null,
  };
  if (typeof value.token === "string" && value.token !== "") search.token = value.token;
  return search;
}

/**
 * The refusal an answer of `status` with `body` stands for: `{"error": CODE, "message"}` (as
 * docs/MATCHMAKING.md writes it) or `{"error": {"code", "message"}}` (as the hosts' other routes
 * answer); without either, a code from the status.
 */
export function matchRefusal(status: number, body: unknown): MatchError {
  let code: string | null = null;
  let message: string | null = null;
  if (isObject(body)) {
    if (typeof body.error === "string") {
      code = body.error;
      if (typeof body.message === "string") message = body.message;
    } else if (isObject(body.error)) {
      if (typeof body.error.code === "string") code = body.error.code;
      if (typeof body.error.message === "string") message = body.error.message;
    }
  }
  if (code === null) {
    code =
      status === 426
        ? "client_outdated"
        : status === 401
          ? "unauthorized"
          : status === 404
            ? "match_off"
            : status >= 500
              ? "unavailable"
              : `http_${status}`;
  }
  if (code === "client_outdated") message = message ?? MATCH_OUTDATED_MESSAGE;
  return new MatchError(code, message ?? `the matchmaker answered ${status}`, { status });
}

/** The part of an `AbortSignal` the SDK uses (a real `AbortSignal` is one). */
export interface AbortSignalLike {
  readonly aborted: boolean;
  addEventListener(type: "abort", listener: () => void): void;
  removeEventListener(type: "abort", listener: () => void): void;
}

/** The `fetch` the matchmaker client calls (the platform's by default). */
export type MatchFetch = (
  url: string,
  init: { method: string; headers?: Record<string, string>; body?: string; signal?: AbortSignalLike },
) => Promise<{ status: number; json(): Promise<unknown> }>;

/** Where the matchmaker is and how to reach it. */
export interface MatchmakerClientOptions {
  /** The matchmaker's base URL, e.g. `http://127.0.0.1:7350`. */
  url: string;
  /** Default: the global `fetch`. */
  fetch?: MatchFetch;
  /** How long a request may go unanswered (a long poll: on top of its wait), in ms (default 10000). */
  timeoutMs?: number;
  /** Time and timers (default: the platform's). */
  scheduler?: Scheduler;
}

/** A long poll: wait up to `waitMs` (at most 30000) for the search to leave `state`. */
export interface ReadOptions {
  waitMs?: number;
  state?: SearchState;
  /** Aborts the request (a {@link MatchError} `cancelled`). */
  signal?: AbortSignalLike;
}

/** At most this many legs of one probe (1 + 3 are expected). */
const MAX_PROBE_LEGS = 8;

/**
 * The matchmaker's HTTP API, one method per route (docs/MATCHMAKING.md). Every refusal is a
 * {@link MatchError}; a request without an answer in time is `network`. Each method takes an
 * optional `signal`: aborting it rejects the call with a {@link MatchError} `cancelled`.
 */
export class MatchmakerClient {
  private readonly base: string;
  private readonly fetch: MatchFetch;
  private readonly timeoutMs: number;
  private readonly sched: Scheduler;

  constructor(options: MatchmakerClientOptions) {
    this.base = options.url.replace(/\/+$/, "");
    const f = options.fetch ?? (globalThis as { fetch?: MatchFetch }).fetch;
    if (f === undefined) throw new Error("no fetch: pass one in MatchmakerClientOptions.fetch");
    // The platform's fetch must be called as a plain function (not as a method of this object).
    this.fetch = options.fetch ?? ((url, init) => f(url, init));
    this.timeoutMs = options.timeoutMs ?? 10_000;
    this.sched = options.scheduler ?? systemScheduler;
  }

  /**
   * Creates a search in `queue` with a ticket for `@match` (single use): the answer is in state
   * `probing`, with the search's `token` and the `probes` to measure.
   */
  async createSearch(
    ticket: string,
    request: { queue: string; protocolVersion: number; contentVersion?: string },
    signal?: AbortSignalLike,
  ): Promise<Search> {
    const body: Record<string, unknown> = { queue: request.queue, protocol_version: request.protocolVersion };
    if (request.contentVersion !== undefined && request.contentVersion !== "") body.content_version = request.contentVersion;
    const search = parseSearch(
      await this.call(`${this.base}/match/searches`, {
        method: "POST",
        headers: { authorization: `Bearer ${ticket}`, "content-type": "application/json" },
        body: JSON.stringify(body),
      }, signal),
    );
    if (search.token === undefined) throw malformed("a created search has no token");
    return search;
  }

  /**
   * Measures the round trip to `probe`'s region: `POST {url}/match/probe?challenge=C`, then
   * `…&echo=E` with each answer's echo until the answer is `{"rtt_ms"}`, which this returns (the
   * region's host measured it, on its own clock). No body and no headers, so a browser sends no
   * CORS preflight.
   */
  async probe(probe: Probe, signal?: AbortSignalLike): Promise<number> {
    const at = `${probe.url.replace(/\/+$/, "")}/match/probe?challenge=${encodeURIComponent(probe.challenge)}`;
    let url = at;
    for (let leg = 0; leg < MAX_PROBE_LEGS; leg++) {
      const answer = await this.call(url, { method: "POST" }, signal);
      if (!isObject(answer)) throw malformed("a probe answer is not an object");
      if (typeof answer.rtt_ms === "number") {
        if (!(answer.rtt_ms >= 0)) throw malformed("a negative rtt_ms");
        return answer.rtt_ms;
      }
      const echo = answer.echo;
      if (typeof echo !== "string" && typeof echo !== "number") throw malformed("a probe answer with neither echo nor rtt_ms");
      url = `${at}&echo=${encodeURIComponent(String(echo))}`;
    }
    throw malformed(`a probe that took more than ${MAX_PROBE_LEGS} legs`);
  }

  /** Queues a search whose regions were measured: the answer is in state `queued` (or further). */
  async queue(search: string, token: string, signal?: AbortSignalLike): Promise<Search> {
    return parseSearch(await this.call(this.searchUrl(search, "/queue"), this.authed("POST", token), signal));
  }

  /** Tells the matchmaker the player still waits (every `heartbeat_secs` while queued). */
  async heartbeat(search: string, token: string, signal?: AbortSignalLike): Promise<Search> {
    return parseSearch(await this.call(this.searchUrl(search, "/heartbeat"), this.authed("POST", token), signal));
  }

  /**
   * Reads a search; with `waitMs` and `state`, a long poll answered when the state is no longer
   * `state`, or after `waitMs`.
   */
  async read(search: string, token: string, options: ReadOptions = {}): Promise<Search> {
    const q = new URLSearchParams();
    if (options.waitMs !== undefined) q.set("wait_ms", String(Math.max(0, Math.min(30_000, Math.floor(options.waitMs)))));
    if (options.state !== undefined) q.set("state", options.state);
    const query = q.toString();
    return parseSearch(
      await this.call(
        `${this.searchUrl(search, "")}${query === "" ? "" : `?${query}`}`,
        this.authed("GET", token),
        options.signal,
        options.waitMs ?? 0,
      ),
    );
  }

  /** Cancels a search: the answer is in state `cancelled`, or the state it reached if it was over. */
  async cancel(search: string, token: string, signal?: AbortSignalLike): Promise<Search> {
    return parseSearch(await this.call(this.searchUrl(search, ""), this.authed("DELETE", token), signal));
  }

  private searchUrl(search: string, suffix: string): string {
    return `${this.base}/match/searches/${encodeURIComponent(search)}${suffix}`;
  }

  private authed(method: string, token: string): { method: string; headers: Record<string, string> } {
    return { method, headers: { authorization: `Bearer ${token}` } };
  }

  /** One request: its JSON answer, or a MatchError (`network`, `cancelled`, `malformed`, a refusal). */
  private async call(
    url: string,
    init: { method: string; headers?: Record<string, string>; body?: string },
    signal: AbortSignalLike | undefined,
    extraMs = 0,
  ): Promise<unknown> {
    const cancelled = () => new MatchError("cancelled", "the search was cancelled", { aborted: true });
    if (signal?.aborted === true) throw cancelled();
    const Controller = (globalThis as { AbortController?: new () => { signal: AbortSignalLike; abort(): void } }).AbortController;
    const controller = Controller === undefined ? null : new Controller();
    let fail: (e: MatchError) => void = () => {};
    const stopped = new Promise<never>((_, reject) => {
      fail = reject;
    });
    const onAbort = () => {
      controller?.abort();
      fail(cancelled());
    };
    signal?.addEventListener("abort", onAbort);
    const timer: TimerHandle = this.sched.setTimeout(() => {
      controller?.abort();
      fail(new MatchError("network", `no answer from ${url} in ${this.timeoutMs + extraMs} ms`));
    }, this.timeoutMs + extraMs);
    try {
      const exchange = (async () => {
        let res;
        try {
          res = await this.fetch(url, controller === null ? init : { ...init, signal: controller.signal });
        } catch (e) {
          throw new MatchError("network", `no answer from ${url}: ${e instanceof Error ? e.message : String(e)}`);
        }
        const ok = res.status >= 200 && res.status < 300;
        let json: unknown;
        try {
          json = await res.json();
        } catch {
          if (ok) throw malformed(`the answer of ${url} is not JSON`);
          json = null;
        }
        if (!ok) throw matchRefusal(res.status, json);
        return json;
      })();
      // A failure of the exchange after the race was lost is nobody's concern.
      exchange.catch(() => {});
      return await Promise.race([exchange, stopped]);
    } finally {
      this.sched.clearTimeout(timer);
      signal?.removeEventListener("abort", onAbort);
    }
  }
}

/** What {@link SearchTracker.observe} made of one answer. */
export interface Observation {
  /** True when the answer moved the search on (it is now {@link SearchTracker.search}). */
  advanced: boolean;
  /** The assignment to connect to now: only once, for the first assignment seen. */
  connect: Assignment | null;
  /** True when the answer is a final failure (`cancelled`, `expired`, `failed`) taken as the search's end. */
  ended: boolean;
}

/**
 * The search as far as it got, from answers that may repeat or arrive out of order: the furthest
 * state reached is kept and never gone back from (an older answer arriving late is ignored), except
 * the matchmaker's own way back from `proposed` or `allocated` to `queued` when an `ordered` source
 * (the long poll, whose answers come one after the other) reports it. The first answer carrying an
 * assignment is handed out once for connecting; nothing after that (a repeat, an older answer, a
 * different assignment, a final state) changes the search.
 */
export class SearchTracker {
  private current: Search | null = null;
  private assigned: Assignment | null = null;

  /** The search as far as it got, or null before the first answer. */
  get search(): Search | null {
    return this.current;
  }

  /** The assignment handed out for connecting, or null. */
  get assignment(): Assignment | null {
    return this.assigned;
  }

  /** Takes one answer (`ordered`: from the long poll) into account. */
  observe(search: Search, ordered = false): Observation {
    const none: Observation = { advanced: false, connect: null, ended: false };
    if (this.current !== null && search.search !== this.current.search) return none;
    if (this.assigned !== null) return none;
    const cur = this.current;
    if (cur !== null && FINAL_SEARCH_STATES.includes(cur.state)) return none;
    const forward = cur === null || searchRank(search.state) > searchRank(cur.state);
    const backToQueue = ordered && cur !== null && search.state === "queued" && (cur.state === "proposed" || cur.state === "allocated");
    const same = cur !== null && search.state === cur.state;
    if (!forward && !backToQueue && !same) return none;
    // A repeat of the state may carry more (the measured round trips); the token stays.
    const token = search.token ?? cur?.token;
    this.current = token === undefined ? search : { ...search, token };
    const advanced = !same;
    if (search.assignment !== null && (search.state === "assigned" || search.state === "connected")) {
      this.assigned = search.assignment;
      return { advanced, connect: search.assignment, ended: false };
    }
    const ended = search.state === "cancelled" || search.state === "expired" || search.state === "failed";
    return { advanced, connect: null, ended };
  }
}
