/**
 * The Play page: a "Play" button that finds a match with the SDK's `matchmake()` and plays the
 * arena in the match's zone, as the arena page does ({@link playArena}).
 *
 * The page gets a ticket for `@match` from the dev host (`/dev/ticket?zone=@match&name=…`), asks
 * the matchmaker at its own origin for a match in the `duel` queue (two arena players; `?queue=`
 * names another), and shows how the search goes: each region's measured round trip, queued, found,
 * connecting. A cancel button stops a search. A search that failed in a way another search may not
 * ("search again"), and a build of the game the matchmaker no longer accepts says "update to keep
 * playing" with no retry.
 *
 * Query parameters: `name` (as on the arena page), `queue` (default `duel`), `transport`.
 * Page state for tools is published as `window.play` ({@link PlayModel}), the arena's as
 * `window.arena` once playing.
 *
 * The model and its view are pure functions (tested in test/play.test.mjs); the page below them only
 * runs in a browser.
 */

import { playArena } from "./arena-play.js";
import { GuestTickets, playerName, transportParam } from "./guest.js";
import {
  MATCH_OUTDATED_MESSAGE,
  MatchError,
  matchmake,
  type Assignment,
  type CloseInfo,
  type ProbeResult,
  type Search,
  type SearchState,
} from "./sdk/index.js";

/** Where the page is. */
export type PlayPhase = "idle" | "searching" | "connecting" | "playing" | "ended" | "outdated" | "failed";

/** A region's probe as the page knows it: measuring, measured (ms) or failed (the error code). */
export type RegionProbe = { status: "measuring" } | { status: "measured"; rttMs: number } | { status: "failed"; code: string };

/** Everything the page shows. */
export interface PlayModel {
  phase: PlayPhase;
  queue: string;
  /** The search's state, null before one. */
  state: SearchState | null;
  /** Each region's probe, by region. */
  probes: Record<string, RegionProbe>;
  /** The round trips the matchmaker recorded, by region (from `queued` on). */
  rttMs: Record<string, number>;
  /** The region the search is matched in, once known. */
  region: string | null;
  /** The match's zone and players, once assigned. */
  zone: string | null;
  players: string[];
  /** Why the last search or match ended, null while none did. */
  error: { code: string; message: string; retryable: boolean } | null;
  /** A note about the last search (e.g. "Search cancelled."), or "". */
  note: string;
}

/** The page before any search. */
export function initialModel(queue: string): PlayModel {
  return { phase: "idle", queue, state: null, probes: {}, rttMs: {}, region: null, zone: null, players: [], error: null, note: "" };
}

/** A new search starts. */
export function searchStarted(m: PlayModel): PlayModel {
  return { ...initialModel(m.queue), phase: "searching" };
}

/** The search moved on (matchmake's `onState`). */
export function searchChanged(m: PlayModel, s: Search): PlayModel {
  const probes = { ...m.probes };
  for (const p of s.probes) if (probes[p.region] === undefined) probes[p.region] = { status: "measuring" };
  return {
    ...m,
    state: s.state,
    probes,
    rttMs: Object.keys(s.rtt_ms).length > 0 ? { ...s.rtt_ms } : m.rttMs,
    region: s.region ?? m.region,
    players: s.assignment?.players ?? m.players,
  };
}

/** A region's probe ended (matchmake's `onProbe`). */
export function probeEnded(m: PlayModel, p: ProbeResult): PlayModel {
  const probe: RegionProbe =
    p.rttMs !== null ? { status: "measured", rttMs: p.rttMs } : { status: "failed", code: p.error?.code ?? "error" };
  return { ...m, probes: { ...m.probes, [p.region]: probe } };
}

/** Matched: the connection to the match's zone is being made. */
export function matched(m: PlayModel, a: Assignment): PlayModel {
  return { ...m, phase: "connecting", state: "assigned", zone: a.zone, players: a.players };
}

/** The zone welcomed the player. */
export function playing(m: PlayModel): PlayModel {
  return { ...m, phase: "playing" };
}

/**
 * The search failed (`cannotJoin`: the dev host's word that no ticket will come, which no retry
 * fixes): outdated, cancelled by the player (back to idle), or failed, retryable or not.
 */
export function searchFailed(m: PlayModel, e: unknown, cannotJoin: string | null = null): PlayModel {
  if (e instanceof MatchError && e.outdated) {
    return { ...m, phase: "outdated", error: { code: e.code, message: MATCH_OUTDATED_MESSAGE, retryable: false } };
  }
  if (e instanceof MatchError && e.aborted) return { ...initialModel(m.queue), note: "Search cancelled." };
  if (cannotJoin !== null) return { ...m, phase: "failed", error: { code: "no_ticket", message: cannotJoin, retryable: false } };
  const code = e instanceof MatchError ? e.code : "error";
  const message = e instanceof Error ? e.message : String(e);
  return { ...m, phase: "failed", error: { code, message, retryable: e instanceof MatchError ? e.retryable : false } };
}

/** The match's connection ended for good. */
export function matchEnded(m: PlayModel, info: Pick<CloseInfo, "reason" | "reload">): PlayModel {
  if (info.reload) {
    return { ...m, phase: "outdated", error: { code: "content_outdated", message: MATCH_OUTDATED_MESSAGE, retryable: false } };
  }
  return { ...m, phase: "ended", error: { code: "closed", message: info.reason, retryable: true } };
}

/** Failure codes in the player's words. */
const WHY: Record<string, string> = {
  network: "the matchmaker did not answer",
  unavailable: "the matchmaker is having trouble",
  probe_unavailable: "a region could not be measured",
  no_probe_result: "no region answered the latency check",
  no_heartbeat: "the search lost touch with the matchmaker",
  no_show: "a player did not arrive in time",
  expired: "the search expired",
  failed: "the match could not be set up",
  cancelled: "the matchmaker cancelled the search",
  no_ticket: "no ticket for the matchmaker",
  ticket_spent: "the match's seat is gone",
};

/** One line of the region list. */
export interface RegionRow {
  region: string;
  text: string;
  /** The region the search is matched in. */
  chosen: boolean;
}

/** What the page shows for a model. */
export interface PlayView {
  /** The panel is shown (hidden while playing). */
  visible: boolean;
  headline: string;
  detail: string;
  tone: "info" | "warn" | "error";
  regions: RegionRow[];
  /** Which buttons are there. */
  play: boolean;
  cancel: boolean;
  again: boolean;
}

/** The regions, sorted: measuring, the round trip (the matchmaker's record when it has one), or why not. */
export function regionRows(m: PlayModel): RegionRow[] {
  const names = [...new Set([...Object.keys(m.probes), ...Object.keys(m.rttMs)])].sort();
  return names.map((region) => {
    const p = m.probes[region];
    const recorded = m.rttMs[region];
    let text: string;
    if (recorded !== undefined) text = `${Math.round(recorded)} ms`;
    else if (p?.status === "measured") text = `${Math.round(p.rttMs)} ms`;
    else if (p?.status === "failed") text = `no answer (${p.code})`;
    else text = "measuring…";
    return { region, text, chosen: region === m.region };
  });
}

/** The headline of a search in `state`. */
export function stateHeadline(state: SearchState | null, queue: string): string {
  switch (state) {
    case null:
    case "probing":
      return "Measuring your distance to each region…";
    case "queued":
      return `Looking for an opponent (queue ${queue})…`;
    case "proposed":
    case "allocated":
      return "Opponent found: setting up the match…";
    case "assigned":
    case "connected":
      return "Match found: connecting…";
    default:
      return "The search ended.";
  }
}

/** The view of `m`. */
export function playView(m: PlayModel): PlayView {
  const regions = regionRows(m);
  const base = { visible: true, detail: "", tone: "info" as const, regions, play: false, cancel: false, again: false };
  switch (m.phase) {
    case "idle":
      return {
        ...base,
        headline: "Play a duel against another player, in the region closest to you both.",
        detail: m.note,
        play: true,
      };
    case "searching":
      return { ...base, headline: stateHeadline(m.state, m.queue), cancel: true };
    case "connecting":
      return {
        ...base,
        headline: "Match found: connecting…",
        detail: m.players.length > 0 ? `Players: ${m.players.join(", ")}` : "",
      };
    case "playing":
      return { ...base, visible: false, headline: "", regions: [] };
    case "outdated":
      return { ...base, headline: "Update to keep playing.", detail: m.error?.message ?? MATCH_OUTDATED_MESSAGE, tone: "error" };
    case "ended":
      return { ...base, headline: "The match is over.", detail: m.error?.message ?? "", tone: "warn", again: true };
    case "failed": {
      const e = m.error;
      const why = e === null ? "" : (WHY[e.code] ?? e.code);
      if (e?.retryable === true) {
        return { ...base, headline: `No match this time: ${why}.`, detail: e.message, tone: "warn", again: true };
      }
      return { ...base, headline: `Cannot search for a match: ${why}.`, detail: e?.message ?? "", tone: "error" };
    }
  }
}

// ---- the page (in a browser only: the tests import the model above)

declare global {
  interface Window {
    play: PlayModel;
  }
}

/** Set (for one load) when "search again" after a match reloads the page to search at once. */
const AGAIN_KEY = "arena.play.again";

function el<K extends keyof HTMLElementTagNameMap>(tag: K, cls: string, text = ""): HTMLElementTagNameMap[K] {
  const e = document.createElement(tag);
  e.className = cls;
  e.textContent = text;
  return e;
}

function startPage(): void {
  const params = new URLSearchParams(location.search);
  const name = playerName(params);
  const queue = params.get("queue") ?? "duel";
  const tickets = new GuestTickets("@match", name);
  const app = document.getElementById("app") ?? document.body;

  let model = initialModel(queue);
  let search: AbortController | null = null;

  const panel = el("section", "play-panel");
  panel.setAttribute("data-testid", "play-panel");
  const title = el("h1", "", "Zonekeep duel");
  const who = el("p", "who", `You are ${name}`);
  const headline = el("p", "headline");
  headline.setAttribute("role", "status");
  headline.setAttribute("data-testid", "play-headline");
  const list = el("ul", "regions");
  const detail = el("p", "detail");
  const buttons = el("div", "buttons");
  const playButton = el("button", "primary", "Play");
  playButton.setAttribute("data-testid", "play");
  const cancelButton = el("button", "", "Cancel");
  cancelButton.setAttribute("data-testid", "cancel");
  const againButton = el("button", "primary", "Search again");
  againButton.setAttribute("data-testid", "search-again");
  buttons.append(playButton, cancelButton, againButton);
  panel.append(title, who, headline, list, detail, buttons);
  document.body.appendChild(panel);

  const render = (): void => {
    window.play = model;
    const v = playView(model);
    panel.hidden = !v.visible;
    panel.className = `play-panel ${v.tone}`;
    headline.textContent = v.headline;
    detail.textContent = v.detail;
    list.replaceChildren(
      ...v.regions.map((r) => {
        const li = el("li", r.chosen ? "chosen" : "");
        li.setAttribute("data-region", r.region);
        li.append(el("span", "region", r.region), el("span", "rtt", r.text));
        return li;
      }),
    );
    playButton.hidden = !v.play;
    cancelButton.hidden = !v.cancel;
    againButton.hidden = !v.again;
  };
  const set = (next: PlayModel): void => {
    model = next;
    render();
  };

  const find = async (): Promise<void> => {
    if (search !== null) return;
    const controller = new AbortController();
    search = controller;
    set(searchStarted(model));
    try {
      const found = await matchmake({
        matchmaker: location.origin,
        ticket: () => tickets.fetch(),
        queue,
        signal: controller.signal,
        onState: (s) => set(searchChanged(model, s)),
        onProbe: (p) => set(probeEnded(model, p)),
        connectionOptions: { transport: transportParam(params) },
      });
      set(matched(model, found.assignment));
      const conn = found.connection;
      conn.on("welcome", () => set(playing(model)));
      conn.on("close", (info) => {
        if (!info.willReconnect) set(matchEnded(model, info));
      });
      await playArena({
        root: app,
        conn,
        zone: found.assignment.zone,
        name,
        subject: () => tickets.subject,
        rejoin: "Search again for a new match.",
      });
    } catch (e) {
      set(searchFailed(model, e, tickets.cannotJoin));
    } finally {
      search = null;
    }
  };

  playButton.addEventListener("click", () => void find());
  cancelButton.addEventListener("click", () => search?.abort());
  againButton.addEventListener("click", () => {
    if (model.phase === "ended") {
      // The arena view of the last match is still on the page: start afresh, searching at once.
      sessionStorage.setItem(AGAIN_KEY, "1");
      location.reload();
    } else {
      void find();
    }
  });

  render();
  if (sessionStorage.getItem(AGAIN_KEY) !== null) {
    sessionStorage.removeItem(AGAIN_KEY);
    void find();
  }
}

if (typeof document !== "undefined") startPage();
