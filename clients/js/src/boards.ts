/**
 * Leaderboards (docs/LEADERBOARDS.md), read from a game's page: the boards a host declares
 * ({@link BoardsClient.list}), a board's top entries ({@link BoardsClient.top}) and the entries
 * around one principal ({@link BoardsClient.around}), as typed {@link Ranking}s; every refusal a
 * {@link BoardError} with the host's `code` and the HTTP `status`.
 *
 * Reads need no credential (the host answers any origin). Scores are not submitted from here:
 * they change through facts a zone records (a pickup's `{"add":{"score":n}}`), or through
 * `POST /boards/{name}/scores`, which takes the back end's (lobby) credential, and a player's
 * machine never holds that.
 */

import { systemScheduler, type Scheduler, type TimerHandle } from "./scheduler.js";
import type { AbortSignalLike } from "./matchmaker.js";
import { isObject, refusalParts } from "./refusal.js";

/** Which scores rank first: `desc` higher, `asc` lower. */
export type BoardOrder = "desc" | "asc";
/** How a score changes: added to, the better one kept, replaced. */
export type BoardOp = "incr" | "best" | "set";
/** How long one ranking lasts. */
export type BoardPeriodKind = "all" | "daily" | "weekly";

/** A board as `GET /boards` lists it. */
export interface Board {
  name: string;
  order: BoardOrder;
  op: BoardOp;
  period: BoardPeriodKind;
  /** The fact field summed into the board (`{"add":{T:n}}`), or null. */
  total: string | null;
  /** Past periods the board keeps. */
  keep_periods: number;
  /** Start of the current period, UNIX ms (0 for an `all` board). */
  current_period: number;
}

/** One principal's place on a board. */
export interface BoardEntry {
  /** 1 for the best; ties go by the principal's byte order. */
  rank: number;
  principal: string;
  score: number;
}

/** A page of a board's ranking, as `GET /boards/{name}` answers it. */
export interface Ranking {
  board: string;
  order: BoardOrder;
  /** The period's start, UNIX ms (0 for an `all` board). */
  period: number;
  /** Principals with a score in the period. */
  size: number;
  /** Where the host read it: its ranking index (Redis) or its store. */
  source: "index" | "store";
  /** Best first. */
  entries: BoardEntry[];
}

/** The entries around one principal (`GET /boards/{name}/around/{principal}`). */
export interface AroundRanking extends Ranking {
  /** The principal's own entry, or null when it has no score in the period (then `entries` is empty). */
  me: BoardEntry | null;
}

/** Which period to read: the current one (default), the one before it, or the one starting at this UNIX ms. */
export type BoardPeriodAsk = "current" | "previous" | number;

/** Options of {@link BoardsClient.top}. */
export interface TopOptions {
  /** Entries, 1..=1000 (default: the host's, 10). */
  limit?: number;
  /** Entries to skip (default 0). */
  offset?: number;
  period?: BoardPeriodAsk;
  /** Read the store even when the ranking index has the period. */
  fromStore?: boolean;
}

/** Options of {@link BoardsClient.around}. */
export interface AroundOptions {
  /** Entries on each side of the principal, 0..=500 (default: the host's, 5). */
  radius?: number;
  period?: BoardPeriodAsk;
  /** Read the store even when the ranking index has the period. */
  fromStore?: boolean;
}

/** Most entries one read returns (`limit`). */
export const MAX_BOARD_LIMIT = 1000;
/** Most entries on each side of a principal (`radius`). */
export const MAX_BOARD_RADIUS = 500;
/** Longest board name, in bytes. */
export const MAX_BOARD_NAME = 64;
/** Longest principal, in bytes. */
export const MAX_BOARD_PRINCIPAL = 256;

/**
 * A board read that failed. `code` is the host's (`bad_request`, `no_board`, `boards_off`,
 * `unavailable`, …), one made from the status when the answer carries none (`bad_request`,
 * `not_found`, `unavailable`, `http_N`), or one of this SDK's: `network` (no answer, or none in
 * time) and `malformed` (an answer that is not what the host sends). A request this client refuses
 * to send (a `limit` out of range, an empty board name) is `bad_request` with `status` 0.
 */
export class BoardError extends Error {
  readonly code: string;
  /** The HTTP status (0 without an answer, or for a request refused before sending). */
  readonly status: number;

  constructor(code: string, status: number, message: string) {
    super(message);
    this.name = "BoardError";
    this.code = code;
    this.status = status;
  }

  /** True when the host has no such board, or no boards at all (`no_board`, `boards_off`). */
  get noBoard(): boolean {
    return this.code === "no_board" || this.code === "boards_off";
  }
}

/** The refusal an answer of `status` with `body` (`{"error":{"code","message"}}`, or anything) stands for. */
export function boardRefusal(status: number, body: unknown): BoardError {
  const { code, message } = refusalParts(status, body);
  return new BoardError(code, status, message);
}

function malformed(status: number, what: string): BoardError {
  return new BoardError("malformed", status, `not a board answer: ${what}`);
}

function isCount(v: unknown): v is number {
  return typeof v === "number" && Number.isSafeInteger(v) && v >= 0;
}

function parseEntry(value: unknown, status: number): BoardEntry {
  if (!isObject(value)) throw malformed(status, "an entry is not an object");
  const { rank, principal, score } = value;
  if (!isCount(rank) || rank < 1) throw malformed(status, "an entry's rank is not a positive integer");
  if (typeof principal !== "string" || principal === "") throw malformed(status, "an entry has no principal");
  if (typeof score !== "number" || !Number.isFinite(score)) throw malformed(status, "an entry's score is not a number");
  return { rank, principal, score };
}

/** Checks that `value` is a ranking answer; a {@link BoardError} `malformed` otherwise. */
export function parseRanking(value: unknown, status = 200): Ranking {
  if (!isObject(value)) throw malformed(status, "not an object");
  if (typeof value.board !== "string" || value.board === "") throw malformed(status, "board missing");
  if (value.order !== "desc" && value.order !== "asc") throw malformed(status, `order ${String(value.order)}`);
  if (!isCount(value.period)) throw malformed(status, "period is not a start in ms");
  if (!isCount(value.size)) throw malformed(status, "size is not a count");
  if (!Array.isArray(value.entries)) throw malformed(status, "entries is not a list");
  return {
    board: value.board,
    order: value.order,
    period: value.period,
    size: value.size,
    source: value.source === "index" ? "index" : "store",
    entries: value.entries.map((e) => parseEntry(e, status)),
  };
}

/** Checks that `value` is an around answer (a ranking with `me`); a {@link BoardError} `malformed` otherwise. */
export function parseAroundRanking(value: unknown, status = 200): AroundRanking {
  const ranking = parseRanking(value, status);
  const me = (value as Record<string, unknown>).me;
  if (me !== null && me !== undefined && !isObject(me)) throw malformed(status, "me is neither an entry nor null");
  return { ...ranking, me: isObject(me) ? parseEntry(me, status) : null };
}

function parseBoard(value: unknown, status: number): Board {
  if (!isObject(value)) throw malformed(status, "a board is not an object");
  if (typeof value.name !== "string" || value.name === "") throw malformed(status, "a board has no name");
  const order = value.order === "asc" ? "asc" : "desc";
  const op = value.op === "best" || value.op === "set" ? value.op : "incr";
  const period = value.period === "daily" || value.period === "weekly" ? value.period : "all";
  return {
    name: value.name,
    order,
    op,
    period,
    total: typeof value.total === "string" ? value.total : null,
    keep_periods: isCount(value.keep_periods) ? value.keep_periods : 0,
    current_period: isCount(value.current_period) ? value.current_period : 0,
  };
}

/** The part of an `AbortSignal` the client passes on (a real `AbortSignal` is one). */
export type BoardsAbortSignal = AbortSignalLike;

/** The `fetch` the client calls (the platform's by default). */
export type BoardsFetch = (
  url: string,
  init: { method: string; headers?: Record<string, string>; signal?: BoardsAbortSignal },
) => Promise<{ status: number; json(): Promise<unknown> }>;

/** More settings of a {@link BoardsClient}. */
export interface BoardsClientOptions {
  /** How long a read may go unanswered before it fails with `network`, ms (default 5000). */
  timeoutMs?: number;
  /** Time and timers (default: the platform's). */
  scheduler?: Scheduler;
}

function refuse(message: string): BoardError {
  return new BoardError("bad_request", 0, message);
}

function checkInt(name: string, v: number | undefined, min: number, max: number): void {
  if (v === undefined) return;
  if (!Number.isInteger(v) || v < min || v > max) {
    throw refuse(`${name} must be an integer ${min}..=${max}, not ${String(v)}`);
  }
}

const utf8 = new TextEncoder();

function checkBoardName(board: string): void {
  if (typeof board !== "string" || board.length === 0 || board.length > MAX_BOARD_NAME || !/^[A-Za-z0-9._-]+$/.test(board)) {
    throw refuse(`board name ${JSON.stringify(board)} is not 1..=${MAX_BOARD_NAME} of A-Z a-z 0-9 - _ .`);
  }
}

function checkPrincipal(principal: string): void {
  const bytes = typeof principal === "string" ? utf8.encode(principal).length : 0;
  if (bytes === 0 || bytes > MAX_BOARD_PRINCIPAL) {
    throw refuse(`principal must be 1..=${MAX_BOARD_PRINCIPAL} bytes, not ${bytes}`);
  }
  // A URL path cannot carry these as a segment: the URL parser removes them (encoded too).
  if (principal === "." || principal === "..") throw refuse(`principal ${JSON.stringify(principal)} cannot be read through a URL path`);
}

function periodParam(q: URLSearchParams, period: BoardPeriodAsk | undefined): void {
  if (period === undefined) return;
  if (period === "current" || period === "previous") {
    q.set("period", period);
    return;
  }
  if (typeof period !== "number" || !Number.isSafeInteger(period) || period < 0) {
    throw refuse(`period must be "current", "previous" or a period's start in ms, not ${String(period)}`);
  }
  q.set("period", String(period));
}

/**
 * A host's leaderboards, read over HTTP (see the module's notes). Each read is bounded by
 * `timeoutMs` (the request is aborted then, and fails with `network`); arguments out of the host's
 * range are refused before anything is sent.
 */
export class BoardsClient {
  private readonly base: string;
  private readonly fetch: BoardsFetch;
  private readonly timeoutMs: number;
  private readonly sched: Scheduler;

  /**
   * `baseUrl`: a host, e.g. `http://127.0.0.1:7350` (a page on the host may pass `location.origin`);
   * `fetchImpl`: default the global `fetch`.
   */
  constructor(baseUrl: string, fetchImpl?: BoardsFetch, options: BoardsClientOptions = {}) {
    this.base = baseUrl.replace(/\/+$/, "");
    const f = fetchImpl ?? (globalThis as { fetch?: BoardsFetch }).fetch;
    if (f === undefined) throw new Error("no fetch: pass one to BoardsClient");
    // The platform's fetch must be called as a plain function (not as a method of this object).
    this.fetch = fetchImpl ?? ((url, init) => f(url, init));
    const t = options.timeoutMs ?? 5000;
    if (!(t > 0)) throw new RangeError(`timeoutMs must be positive, not ${t}`);
    this.timeoutMs = t;
    this.sched = options.scheduler ?? systemScheduler;
  }

  /** The boards the host declares. */
  async list(): Promise<Board[]> {
    const { status, json } = await this.get(`${this.base}/boards`);
    if (!isObject(json) || !Array.isArray(json.boards)) throw malformed(status, "boards is not a list");
    return json.boards.map((b) => parseBoard(b, status));
  }

  /** The entries of `board` ranked `offset + 1 ..= offset + limit`, best first. */
  async top(board: string, options: TopOptions = {}): Promise<Ranking> {
    checkBoardName(board);
    checkInt("limit", options.limit, 1, MAX_BOARD_LIMIT);
    checkInt("offset", options.offset, 0, Number.MAX_SAFE_INTEGER);
    const q = new URLSearchParams();
    if (options.limit !== undefined) q.set("limit", String(options.limit));
    if (options.offset !== undefined) q.set("offset", String(options.offset));
    periodParam(q, options.period);
    if (options.fromStore === true) q.set("from", "store");
    const { status, json } = await this.get(`${this.base}/boards/${encodeURIComponent(board)}${query(q)}`);
    return parseRanking(json, status);
  }

  /**
   * `principal`'s entry on `board` (`me`, null without a score) and up to `radius` entries on each
   * side of it.
   */
  async around(board: string, principal: string, options: AroundOptions = {}): Promise<AroundRanking> {
    checkBoardName(board);
    checkPrincipal(principal);
    checkInt("radius", options.radius, 0, MAX_BOARD_RADIUS);
    const q = new URLSearchParams();
    if (options.radius !== undefined) q.set("radius", String(options.radius));
    periodParam(q, options.period);
    if (options.fromStore === true) q.set("from", "store");
    const path = `/boards/${encodeURIComponent(board)}/around/${encodeURIComponent(principal)}`;
    const { status, json } = await this.get(`${this.base}${path}${query(q)}`);
    return parseAroundRanking(json, status);
  }

  /** One GET: its status and JSON answer, or a BoardError (`network`, `malformed`, a refusal). */
  private async get(url: string): Promise<{ status: number; json: unknown }> {
    const Controller = (globalThis as { AbortController?: new () => { signal: BoardsAbortSignal; abort(): void } }).AbortController;
    const controller = Controller === undefined ? null : new Controller();
    let fail: (e: BoardError) => void = () => {};
    const timedOut = new Promise<never>((_, reject) => {
      fail = reject;
    });
    const timer: TimerHandle = this.sched.setTimeout(() => {
      controller?.abort();
      fail(new BoardError("network", 0, `no answer from ${url} in ${this.timeoutMs} ms`));
    }, this.timeoutMs);
    const init = { method: "GET", headers: { accept: "application/json" } };
    try {
      const exchange = (async () => {
        let res;
        try {
          res = await this.fetch(url, controller === null ? init : { ...init, signal: controller.signal });
        } catch (e) {
          throw new BoardError("network", 0, `no answer from ${url}: ${e instanceof Error ? e.message : String(e)}`);
        }
        const ok = res.status >= 200 && res.status < 300;
        let json: unknown;
        try {
          json = await res.json();
        } catch {
          if (ok) throw malformed(res.status, `the answer of ${url} is not JSON`);
          json = null;
        }
        if (!ok) throw boardRefusal(res.status, json);
        return { status: res.status, json };
      })();
      // A failure of the exchange after the timeout won the race is nobody's concern.
      exchange.catch(() => {});
      return await Promise.race([exchange, timedOut]);
    } finally {
      this.sched.clearTimeout(timer);
    }
  }
}

function query(q: URLSearchParams): string {
  const s = q.toString();
  return s === "" ? "" : `?${s}`;
}
