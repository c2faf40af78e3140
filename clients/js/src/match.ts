/**
 * The matchmaker (docs/MATCHMAKING.md): a match formed by measured latency, and a connection to it.
 *
 * {@link matchmake} is the whole way from "Play" to a connection:
 *
 * 1. it creates a search (`POST /match/searches`) with a ticket for `@match` from the game's back
 *    end (or a dev host's `/dev/ticket?zone=@match`);
 * 2. it measures every region the answer lists, in parallel ({@link MatchmakerClient.probe}: the
 *    region's host times three round trips on its own clock; a probe that fails is skipped, and
 *    when none succeeds the search is cancelled and the outcome is a retryable `no_probe_result`);
 * 3. it queues the search, sends a heartbeat every `heartbeat_secs` while it waits, and long-polls
 *    the search (`GET …?wait_ms=25000&state=S`) until its state moves on, retrying a poll that got
 *    no answer (the assignment is never lost: any later read returns it again) for as long as the
 *    search can live without a heartbeat;
 * 4. on `assigned` it calls `connect` with the assignment, and resolves with the search, the
 *    assignment and the connection.
 *
 * Exactly once: answers arrive from the long poll and from the heartbeats, so the same assignment
 * may arrive twice, and an answer sent earlier may arrive after a later one. A {@link SearchTracker}
 * keeps the furthest state reached and never goes back (except the matchmaker's own documented way
 * back from `proposed` or `allocated` to `queued`, which only the ordered long poll can report);
 * `connect` is called at most once per call of `matchmake`, for the first assignment seen, and any
 * answer after that — a repeat, an older state, or even another assignment — is ignored.
 *
 * Outcomes a game tells apart ({@link MatchError}): `client_outdated` (HTTP 426, {@link
 * MatchError.outdated}: "update to keep playing", never retried), retryable ones (no answer, a store
 * or region in trouble, no probe result, a search that expired or failed: "search again"), the
 * player's own cancel through `signal` (`cancelled`, {@link MatchError.aborted}; the search is
 * deleted) and the rest (a refused ticket, an unknown queue, a malformed answer).
 *
 * The `fetch`, the scheduler and the connection are injectable, so tests drive a whole search with
 * a fake matchmaker and a manual clock.
 */

import { ZoneConnection, type ZoneConnectionOptions } from "./connection.js";
import { SUPPORTED_VERSIONS } from "./messages.js";
import {
  MatchError,
  MatchmakerClient,
  SearchTracker,
  type AbortSignalLike,
  type Assignment,
  type MatchFetch,
  type Search,
  type SearchState,
} from "./matchmaker.js";
import { systemScheduler, type Scheduler, type TimerHandle } from "./scheduler.js";

/** The states of a search, in the order a search goes through them; the last four are final. */
/** A region measured (or not) for a search. */
export interface ProbeResult {
  region: string;
  /** The round trip the region's host measured, in ms; null when the probe failed. */
  rttMs: number | null;
  /** Why the probe failed, or null. */
  error: MatchError | null;
}

/** What {@link matchmake} resolves with. */
export interface Matched<C> {
  /** The search as it was when assigned. */
  search: Search;
  assignment: Assignment;
  /** What `connect` returned (by default a {@link ZoneConnection}, not yet connected). */
  connection: C;
  /** Each region's probe. */
  probes: ProbeResult[];
}

/** Options of {@link matchmake}. */
export interface MatchmakeOptions<C = ZoneConnection> {
  /** The matchmaker's base URL, e.g. `http://127.0.0.1:7350` (a page served by it: `location.origin`). */
  matchmaker: string;
  /**
   * A ticket for `@match` (its `zone` claim), single use, from the game's back end (or a dev host's
   * `/dev/ticket?zone=@match&name=…`); a function is called once per call of `matchmake`.
   */
  ticket: string | (() => Promise<string>);
  /** The queue to search in, e.g. `duel`. */
  queue: string;
  /**
   * The protocol version the matchmaker checks against its floor (default: the newest of
   * `connectionOptions.versions`, else of {@link SUPPORTED_VERSIONS}: the version this SDK speaks).
   */
  protocolVersion?: number;
  /** The game content version checked against the queue's floor (default: `connectionOptions.contentVersion`). */
  contentVersion?: string;
  /** Cancels the search: it is deleted and `matchmake` rejects with a {@link MatchError} `cancelled`. */
  signal?: AbortSignalLike;
  /** Called with the search each time its state moves on (never going back, see {@link SearchTracker}). */
  onState?: (search: Search) => void;
  /** Called as each region's probe ends. */
  onProbe?: (result: ProbeResult) => void;
  /**
   * Makes the connection to the match, called exactly once (default: {@link matchConnection} with
   * `connectionOptions`: a {@link ZoneConnection}, not yet connected, so the game attaches its
   * handlers before calling `connect()`).
   */
  connect?: (assignment: Assignment, search: Search) => C | Promise<C>;
  /** Options of the default connection (its `url` and `ticket` come from the assignment). */
  connectionOptions?: Omit<ZoneConnectionOptions, "url" | "ticket">;
  /** Default: the global `fetch`. */
  fetch?: MatchFetch;
  /** Time and timers: heartbeats, backoff and request timeouts (default: the platform's). */
  scheduler?: Scheduler;
  /** The long poll's wait, in ms (default 25000). */
  waitMs?: number;
}

/**
 * The tickets of a connection to a match: the assignment's for the first join (a resume inside the
 * grace window presents it again with the reconnect token); a join after that needs a seat the
 * match no longer holds, so it fails with a {@link MatchError} `ticket_spent` (retryable: search
 * again).
 */
export function matchTickets(assignment: Assignment): () => Promise<string> {
  let first = true;
  return async () => {
    if (first) {
      first = false;
      return assignment.ticket;
    }
    throw new MatchError("ticket_spent", `the match ${assignment.match} held its seat for one join: search again`, {
      retryable: true,
    });
  };
}

/** A connection (not yet connected) to the zone of `assignment`, with {@link matchTickets}. */
export function matchConnection(
  assignment: Assignment,
  options: Omit<ZoneConnectionOptions, "url" | "ticket"> = {},
): ZoneConnection {
  return new ZoneConnection({ ...options, url: assignment.url, ticket: matchTickets(assignment) });
}

/** Backoff of a long poll that got no answer: 0.5 s doubling up to 4 s. */
function pollBackoffMs(failures: number): number {
  return Math.min(4000, 500 * 2 ** Math.max(0, failures - 1));
}

/** Searches for a match and connects to it: see the module's notes for the steps and the guarantees. */
export async function matchmake<C = ZoneConnection>(options: MatchmakeOptions<C>): Promise<Matched<C>> {
  const sched = options.scheduler ?? systemScheduler;
  const client = new MatchmakerClient({
    url: options.matchmaker,
    scheduler: sched,
    ...(options.fetch === undefined ? {} : { fetch: options.fetch }),
  });
  const protocolVersion =
    options.protocolVersion ?? Math.max(...(options.connectionOptions?.versions ?? SUPPORTED_VERSIONS));
  const contentVersion = options.contentVersion ?? options.connectionOptions?.contentVersion;
  const connect = options.connect ?? ((a: Assignment) => matchConnection(a, options.connectionOptions) as unknown as C);
  const waitMs = options.waitMs ?? 25_000;
  const signal = options.signal;
  if (signal?.aborted === true) throw new MatchError("cancelled", "the search was cancelled", { aborted: true });

  const Controller = (globalThis as { AbortController?: new () => { signal: AbortSignalLike; abort(): void } })
    .AbortController;
  if (Controller === undefined) throw new Error("no AbortController on this platform");
  // Every request in flight and every wait stops once the search is decided.
  const inner = new Controller();
  const tracker = new SearchTracker();
  const probes: ProbeResult[] = [];
  let id: string | null = null;
  let token: string | null = null;
  let heartbeatTimer: TimerHandle | null = null;
  // running: searching; connecting: the assignment was taken, `connect` runs; done: settled.
  let phase: "running" | "connecting" | "done" = "running";
  let resolveRun: (m: Matched<C>) => void = () => {};
  let rejectRun: (e: unknown) => void = () => {};
  const outcome = new Promise<Matched<C>>((resolve, reject) => {
    resolveRun = resolve;
    rejectRun = reject;
  });

  const stopBackground = (): void => {
    signal?.removeEventListener("abort", onAbort);
    if (heartbeatTimer !== null) sched.clearTimeout(heartbeatTimer);
    heartbeatTimer = null;
    inner.abort();
  };
  /** Ends the run with `error`; `cancel`: delete the search too (best effort, nothing waits for it). */
  const fail = (error: unknown, cancel: boolean): void => {
    if (phase === "done") return;
    phase = "done";
    stopBackground();
    if (cancel && id !== null && token !== null) client.cancel(id, token).catch(() => {});
    rejectRun(error);
  };
  const onAbort = (): void => {
    if (phase === "running") fail(new MatchError("cancelled", "the search was cancelled", { aborted: true }), true);
  };
  signal?.addEventListener("abort", onAbort);

  /** One answer (from the long poll or a request of this run when `ordered`): reported, acted on once. */
  const see = (search: Search, ordered: boolean): void => {
    if (phase !== "running") return;
    const o = tracker.observe(search, ordered);
    const now = tracker.search;
    if (now === null) return;
    if (o.advanced) {
      try {
        options.onState?.(now);
      } catch (e) {
        console.warn("matchmake: onState threw", e);
      }
    }
    if (o.connect !== null) {
      // The one connect of this run: nothing that arrives from now on is looked at.
      const assignment = o.connect;
      phase = "connecting";
      stopBackground();
      let made: C | Promise<C>;
      try {
        made = connect(assignment, now);
      } catch (e) {
        phase = "done";
        rejectRun(e);
        return;
      }
      Promise.resolve(made).then(
        (connection) => {
          phase = "done";
          resolveRun({ search: now, assignment, connection, probes });
        },
        (e: unknown) => {
          phase = "done";
          rejectRun(e);
        },
      );
    } else if (o.ended) {
      const message = `the search ended: ${now.state}${now.reason === null ? "" : ` (${now.reason})`}`;
      fail(new MatchError(now.reason ?? now.state, message, { retryable: true, search: now }), false);
    }
  };

  const run = async (): Promise<void> => {
    // 1. The search.
    let ticket: string;
    if (typeof options.ticket === "string") ticket = options.ticket;
    else {
      try {
        ticket = await options.ticket();
      } catch (e) {
        const why = e instanceof Error ? e.message : String(e);
        throw new MatchError("no_ticket", `no ticket for @match: ${why}`, { retryable: true });
      }
    }
    if (phase !== "running") return;
    const created = await client.createSearch(
      ticket,
      { queue: options.queue, protocolVersion, ...(contentVersion === undefined ? {} : { contentVersion }) },
      inner.signal,
    );
    id = created.search;
    token = created.token ?? null;
    see(created, true);
    if (phase !== "running") return;

    // 2. Every region, in parallel; a probe that fails is skipped.
    await Promise.all(
      created.probes.map(async (p) => {
        let result: ProbeResult;
        try {
          result = { region: p.region, rttMs: await client.probe(p, inner.signal), error: null };
        } catch (e) {
          result = { region: p.region, rttMs: null, error: e instanceof MatchError ? e : new MatchError("network", String(e)) };
        }
        if (phase !== "running") return;
        probes.push(result);
        try {
          options.onProbe?.(result);
        } catch (e) {
          console.warn("matchmake: onProbe threw", e);
        }
      }),
    );
    if (phase !== "running") return;
    if (!probes.some((p) => p.rttMs !== null)) {
      const why = probes.map((p) => `${p.region}: ${p.error?.code ?? "?"}`).join(", ");
      throw new MatchError("no_probe_result", `no region could be measured${why === "" ? "" : ` (${why})`}`, {
        retryable: true,
      });
    }

    // 3. Queued; a heartbeat every heartbeat_secs while waiting; the long poll until assigned.
    const sid = created.search;
    const stoken = created.token as string;
    const queued = await client.queue(sid, stoken, inner.signal);
    let lastAnswerAt = sched.now();
    // The long poll asks to wait while the state is the one it last answered: its answers come in
    // order, so it never waits on a state the search already left.
    let pollState: SearchState = queued.state;
    see(queued, true);
    if (phase !== "running") return;

    const heartbeatMs = (): number => (tracker.search?.heartbeat_secs ?? queued.heartbeat_secs) * 1000;
    let beating = false;
    const beat = (): void => {
      heartbeatTimer = null;
      if (phase !== "running") return;
      heartbeatTimer = sched.setTimeout(beat, heartbeatMs());
      if (beating) return;
      beating = true;
      client.heartbeat(sid, stoken, inner.signal).then(
        (s) => {
          beating = false;
          lastAnswerAt = sched.now();
          see(s, false);
        },
        () => {
          // Made up by the next one; the long poll tells how the search is.
          beating = false;
        },
      );
    };
    heartbeatTimer = sched.setTimeout(beat, heartbeatMs());

    let failures = 0;
    while (phase === "running") {
      let s: Search;
      try {
        s = await client.read(sid, stoken, { waitMs, state: pollState, signal: inner.signal });
      } catch (e) {
        if (phase !== "running") return;
        const transient = e instanceof MatchError && (e.code === "network" || e.code === "unavailable");
        // Unheard, the search lapses after three missed heartbeats: asking longer finds nothing.
        if (!transient || sched.now() - lastAnswerAt > 3 * heartbeatMs()) throw e;
        failures += 1;
        await sleep(sched, pollBackoffMs(failures), inner.signal);
        continue;
      }
      failures = 0;
      lastAnswerAt = sched.now();
      pollState = s.state;
      see(s, true);
    }
  };

  run().then(
    () => {},
    (e: unknown) => {
      if (phase !== "running") return;
      // The client is outdated or the search is over: nothing to delete.
      const over = e instanceof MatchError && (e.outdated || e.search !== undefined);
      fail(e, !over);
    },
  );
  return outcome;
}

/** Waits `ms` on `sched`; resolves early when `signal` aborts (the caller checks). */
function sleep(sched: Scheduler, ms: number, signal: AbortSignalLike): Promise<void> {
  return new Promise((resolve) => {
    if (signal.aborted) {
      resolve();
      return;
    }
    const done = () => {
      sched.clearTimeout(timer);
      signal.removeEventListener("abort", done);
      resolve();
    };
    const timer = sched.setTimeout(done, ms);
    signal.addEventListener("abort", done);
  });
}
