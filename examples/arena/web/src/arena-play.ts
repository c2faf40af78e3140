/**
 * Playing the arena over a connection: the view the arena page (main.ts) and the Play page (play.ts)
 * share. It predicts the player with the shared movement step, draws everyone else through the SDK's
 * interpolating Replica, and shows a HUD, a NetSim panel, a "Top 10" leaderboard, the zone's chat, a
 * connection banner and toasts.
 * Page state for tools and the browser test is published as `window.arena` ({@link ArenaDebug}).
 */

import { ChatPanel, type ChatDebug } from "./chat.js";
import { HostUnreachable } from "./guest.js";
import { Banner, Hud, hostNetSimPanel, Toasts } from "./hud.js";
import { Keys } from "./keys.js";
import { LeaderboardPanel, type LeaderboardDebug } from "./leaderboard.js";
import * as api from "./generated/arena.js";
import { DT, loadRules, SPEED, step, TICK_HZ, type MoveInput, type MoveState, type Pillar } from "./movement.js";
import { Renderer, type PlayerSprite } from "./render.js";
import {
  KickCode,
  kickCodeName,
  Predictor,
  Replica,
  type CloseInfo,
  type Kick,
  type Mirror,
  type Welcome,
  type ZoneConnection,
} from "./sdk/index.js";

/** Milliseconds per input: one input moves the player for one tick. */
const INPUT_MS = 1000 / TICK_HZ;

/** Per watched entity: how smoothly it moved on screen. */
export interface MotionStats {
  /** Frames it was drawn in. */
  frames: number;
  /** Total distance drawn, world units. */
  travelled: number;
  /** Largest move between two consecutive frames, world units. */
  maxJump: number;
  /** Largest amount by which a frame's move exceeded the speed limit over the render time elapsed. */
  maxExcess: number;
  /** Last drawn position. */
  x: number;
  y: number;
}

/**
 * A recording of how one entity was drawn, for measuring the interpolation against the truth:
 * `frames` are [client ms, render tick, x, y] as drawn, `samples` [tick, x, y] as received (the
 * zone's positions). Set `entity` to start; both lists are bounded.
 */
export interface MotionTrace {
  entity: number | null;
  frames: Array<[number, number, number, number]>;
  samples: Array<[number, number, number]>;
}

/** Entries a {@link MotionTrace} list keeps (a minute at 60 frames per second). */
const TRACE_MAX = 3600;

/** What the page publishes on `window.arena`. */
export interface ArenaDebug {
  state: string;
  /** The transport of the current session (`webtransport` or `websocket`), null before one. */
  transport: string | null;
  /** Why the page went from WebTransport to WebSocket, if it did. */
  fallback: string | null;
  frame: number;
  playerId: number | null;
  entityId: number | null;
  /** Where the player is drawn (prediction + easing). */
  me: { x: number; y: number } | null;
  /** Frame number of the last key change, and of the first frame after it whose drawn position moved. */
  keyFrame: number;
  respondFrame: number;
  score: number;
  corrections: number;
  lastCorrection: number;
  inputsSent: number;
  /** The last input seq the zone acknowledged (it restarts at 1 for a new player). */
  ack: number;
  rttMs: number;
  /** Other players by entity id. */
  others: Record<number, PlayerSprite>;
  /** Motion of other players, by entity id. */
  motion: Record<number, MotionStats>;
  toasts: string[];
  errors: string[];
  /** Every socket close seen ("code reason"), bounded. */
  closes: string[];
  /** The connection banner's text ("" while playing normally). */
  banner: string;
  /** Every banner text shown, oldest first (bounded). */
  banners: string[];
  /** The name and hue the zone gave this player (made distinct from the players present). */
  myName: string;
  myHue: number;
  /** The replica's interpolation delay, ms. */
  delayMs: number;
  /** Frames the replica drew past the newest data. */
  extrapolatedFrames: number;
  /** Motion recording of one entity (off until `trace.entity` is set). */
  trace: MotionTrace;
  /** The leaderboard panel's state, null without one. */
  board: LeaderboardDebug | null;
  /** The chat panel's state, null without one. */
  chat: ChatDebug | null;
}

declare global {
  interface Window {
    arena: ArenaDebug;
  }
}

/** What {@link playArena} plays, and how it tells the player what to do when it ends. */
export interface ArenaPlayOptions {
  /** The element the view goes into (the page's `#app`). */
  root: HTMLElement;
  /** The connection to the arena zone, not yet connected: the view attaches to it, then connects. */
  conn: ZoneConnection;
  /** The zone's id, for the HUD. */
  zone: string;
  /** The player's name until the zone says which it gave. */
  name: string;
  /** The subject of the connection's tickets (the NetSim panel sets its connection), or null. */
  subject: () => string | null;
  /** Why the page cannot join at all (no retry helps), or null. Default: never. */
  cannotJoin?: () => string | null;
  /** What the banner tells to do once the connection ended for good (default: reload the page). */
  rejoin?: string;
  /** The board the "Top 10" panel shows (default `score`, the one `serve --dev` declares); null: no panel. */
  board?: string | null;
  /** Whether to show the zone's chat (default true; hidden anyway on a session that cannot chat). */
  chat?: boolean;
}

/**
 * Shows the arena in `options.root` and plays it over `options.conn`: loads the movement rule,
 * attaches the replica, the predictor and the view, and connects. Resolves with the page state
 * (also `window.arena`) once the connection is started; rejects if the movement rule did not load.
 */
export async function playArena(options: ArenaPlayOptions): Promise<ArenaDebug> {
  const { root, conn, zone, name } = options;
  const cannotJoin = options.cannotJoin ?? (() => null);
  const rejoin = options.rejoin ?? "Reload the page to join again.";
  const debug: ArenaDebug = {
    state: "idle",
    transport: null,
    fallback: null,
    frame: 0,
    playerId: null,
    entityId: null,
    me: null,
    keyFrame: -1,
    respondFrame: -1,
    score: 0,
    corrections: 0,
    lastCorrection: 0,
    inputsSent: 0,
    ack: 0,
    rttMs: Number.NaN,
    others: {},
    motion: {},
    toasts: [],
    errors: [],
    closes: [],
    banner: "",
    banners: [],
    myName: name,
    myHue: 0,
    delayMs: 0,
    extrapolatedFrames: 0,
    trace: { entity: null, frames: [], samples: [] },
    board: null,
    chat: null,
  };
  window.arena = debug;

  const canvas = document.createElement("canvas");
  canvas.className = "view";
  root.appendChild(canvas);
  const renderer = new Renderer(canvas);
  const hud = new Hud(root);
  const banner = new Banner(root);
  const toasts = new Toasts(root);
  hostNetSimPanel(root, options.subject);
  debug.toasts = toasts.shown;
  // The player's own row is the one of its tickets' subject: the principal its scores are saved under.
  const board = options.board === undefined ? "score" : options.board;
  const leaderboard = board === null ? null : new LeaderboardPanel(root, options.subject, { board });
  debug.board = leaderboard?.debug ?? null;
  // The zone's chat. Keys typed into its box are the box's (keys.ts leaves a text field's keys
  // alone); a key held for the game as the box takes the focus would then never be seen released,
  // so the game's keys are let go, as when the window loses the focus.
  const chat =
    options.chat === false ? null : new ChatPanel(root, conn, { onTyping: () => keys.release() });
  debug.chat = chat?.debug ?? null;

  // The rule the prediction steps with: the zone's own Rust code, compiled to WebAssembly.
  try {
    const res = await fetch("./arena-rules.wasm");
    if (!res.ok) throw new Error(`HTTP ${res.status}`);
    await loadRules(await res.arrayBuffer());
  } catch (e) {
    banner.show(`The movement rule (arena-rules.wasm) did not load: ${String(e)}. Reload the page.`, "error");
    throw e;
  }

  const replica = new Replica(conn.clock);

  /** Kind ids of the arena's entity kinds, bound from the Welcome's schema (`api` is the code
   * `zonekeep codegen --kind arena` wrote). */
  let kinds: api.ArenaKinds | null = null;
  /** Pillars from the world (global entities), in id order like the zone's list. */
  let pillars: Pillar[] = [];

  function readPillars(mirror: Mirror): Pillar[] {
    const kind = kinds?.pillar;
    const out: Pillar[] = [];
    for (const e of mirror.entities()) {
      if (e.kind !== kind) continue;
      out.push({ x: mirror.x(e), y: mirror.y(e), r: api.PillarEntity.read(e.fields).radius });
    }
    return out;
  }

  conn.on("welcome", (w: Welcome) => {
    kinds = api.ArenaKinds.bind(w.schema);
    debug.playerId = w.playerId;
    debug.transport = conn.transport;
    retries = 0;
    showBanner(null, "");
  });
  conn.on("fallback", (f) => {
    debug.fallback = f.reason;
  });
  // Registered before the predictor's handler, so the pillars are current when it replays inputs.
  conn.on("delta", (_d, info) => {
    if (info.changes.spawned.length > 0 || info.changes.removed.length > 0 || pillars.length === 0) {
      pillars = readPillars(info.mirror);
    }
  });
  replica.attach(conn);

  const predictor = new Predictor<MoveState, MoveInput>({
    step: (s, i) => step(s, i, DT, pillars),
    position: (s) => s,
    smoothing: "ease",
    easeMs: 120,
    snapDistance: 4,
    // Inputs go at the tick rate; the player glides between them on faster screens.
    stepMs: INPUT_MS,
  });
  predictor.attach(conn, (e, mirror) => ({ x: mirror.x(e), y: mirror.y(e) }));

  function pushBounded<T>(list: T[], item: T): void {
    list.push(item);
    if (list.length > TRACE_MAX) list.shift();
  }

  conn.on("delta", (d, info) => {
    const id = debug.trace.entity;
    const e = id === null ? undefined : info.mirror.get(id);
    if (e !== undefined) pushBounded(debug.trace.samples, [d.tick, info.mirror.x(e), info.mirror.y(e)]);
  });

  conn.on("event", (ev) => {
    let e: api.ArenaEvent | null;
    try {
      e = api.ArenaEvent.decode(ev.topic, ev.payload);
    } catch (err) {
      console.warn("an arena event the page cannot read", ev.topic, err);
      return;
    }
    if (e?.type === "picked") {
      toasts.show(`+${e.event.amount}`, "pending");
    } else if (e?.type === "saved") {
      debug.score = e.event.total;
      toasts.show(`+${e.event.amount} saved`, "saved");
      // The saved score is on the board now: show it without waiting for the next read.
      void leaderboard?.refresh();
    } else if (e?.type === "refused") {
      toasts.show(`not saved: ${e.event.reason}`, "error");
    }
  });
  // ---- what the player is told about the connection

  /** Consecutive attempts since the last Welcome. */
  let retries = 0;

  function showBanner(kind: "info" | "warn" | "error" | null, text: string): void {
    if (kind === null) banner.hide();
    else banner.show(text, kind);
    debug.banner = banner.text;
    if (banner.text !== "") debug.banners.push(banner.text);
    if (debug.banners.length > 50) debug.banners.shift();
  }

  /** A Kick in the player's words, with the host's code and reason for whoever reports it. */
  function kickText(k: Kick): string {
    const why: Partial<Record<number, string>> = {
      [KickCode.SHUTTING_DOWN]: "The host is shutting down",
      [KickCode.KICKED]: "You were removed from the zone",
      [KickCode.ZONE_STOPPED]: "The zone was stopped",
      [KickCode.ZONE_FULL]: "The zone is full",
      [KickCode.SLOW_CONSUMER]: "Your connection fell too far behind",
      [KickCode.IDLE_TIMEOUT]: "The host heard nothing from this page for too long",
      [KickCode.RATE_LIMITED]: "Too many inputs",
      [KickCode.JOIN_REFUSED]: "The zone refused to let you in",
      [KickCode.TOO_MANY_CONNECTIONS]: "The host has too many connections",
      [KickCode.VERSION_MISMATCH]: "This page speaks another protocol version than the host: reload it",
      [KickCode.ZONE_MOVED]: "The zone moved to another host",
      [KickCode.HOST_FENCED]: "The host lost this zone to another host",
      [KickCode.TOO_MANY_REDIRECTS]: "The hosts do not agree yet where this zone runs",
      [KickCode.CONTENT_OUTDATED]: "The game was updated since this page loaded: reload it",
      [KickCode.WORLD_HALTED]: "The world paused because its storage is failing; it resumes from its last save",
      [KickCode.CHARACTER_MOVED]: "Your character is now playing in another tab or on another device",
      [KickCode.CHARACTER_ELSEWHERE]: "Your character is still in another zone, which cannot hand it over yet",
    };
    const detail = k.reason !== "" ? `${kickCodeName(k.code)}: ${k.reason}` : kickCodeName(k.code);
    return `${why[k.code] ?? "The host closed the connection"} (${detail})`;
  }

  function onClose(info: CloseInfo): void {
    const refused = cannotJoin();
    if (refused !== null) {
      showBanner("error", refused);
      return;
    }
    const again = info.willReconnect
      ? ` Reconnecting (attempt ${retries}, next in ${(info.retryInMs / 1000).toFixed(1)} s)…`
      : info.movedElsewhere
        ? " Reload the page to play here instead."
        : ` ${rejoin}`;
    if (info.kick !== null) {
      showBanner(info.willReconnect ? "warn" : "error", `${kickText(info.kick)}.${again}`);
    } else if (info.movedElsewhere) {
      // Only the close code said so: the SDK's message stands for the Kick.
      showBanner("error", `${info.reason}${again}`);
    } else if (info.willReconnect) {
      const unreachable = info.error instanceof HostUnreachable || info.code === 1006;
      const what = unreachable ? "The host is down or unreachable" : `Connection lost (${info.reason})`;
      showBanner("warn", `${what}.${again}`);
    } else {
      showBanner("error", `Disconnected: ${info.reason}.${again}`);
    }
  }

  conn.on("close", (info) => {
    debug.closes.push(`${info.code} ${info.reason}`);
    if (debug.closes.length > 50) debug.closes.shift();
    debug.state = info.willReconnect ? "reconnecting" : `closed: ${info.reason}`;
    retries += 1;
    onClose(info);
  });

  // ---- input: one input per tick while a direction is held; a change is sent (and predicted) at once.

  const keys = new Keys(window);
  let nextSendAt = 0;

  function sendInput(now: number): void {
    const input = keys.current();
    if (input.dir === 0) return;
    if (predictor.send(conn, input, api.MoveInput.encode, performance.now()) !== null) debug.inputsSent += 1;
    nextSendAt = Math.max(nextSendAt + INPUT_MS, now - 3 * INPUT_MS);
  }

  keys.onChange = () => {
    const now = performance.now();
    debug.keyFrame = debug.frame;
    debug.respondFrame = -1;
    nextSendAt = now;
    sendInput(now);
  };

  // ---- frame loop

  let lastRenderTick = Number.NaN;
  let lastMe: { x: number; y: number } | null = null;

  function frame(now: number): void {
    debug.frame += 1;
    while (keys.current().dir !== 0 && now >= nextSendAt && conn.state === "open") sendInput(now);

    const f = replica.frame(now);
    // The clock inputs are recorded with (an event may run after this frame's timestamp was taken).
    const me = predictor.renderPosition(performance.now());
    const own = conn.controlledId;
    const players = kinds?.player;
    const drones = kinds?.drone;
    const pickups = kinds?.pickup;
    const others: PlayerSprite[] = [];
    const droneList: Array<{ x: number; y: number }> = [];
    const pickupList: Array<{ x: number; y: number }> = [];
    let myName = name;
    let myHue = 0;
    const othersById: Record<number, PlayerSprite> = {};
    const dTicks = Number.isFinite(lastRenderTick) ? Math.max(0, f.renderTick - lastRenderTick) : 0;
    for (const e of f.entities.values()) {
      if (e.kind === players) {
        const p = api.PlayerEntity.read(e.fields);
        const sprite: PlayerSprite = { x: e.x, y: e.y, name: p.name, hue: p.hue, connected: p.connected };
        if (e.id === own) {
          myName = sprite.name;
          myHue = sprite.hue;
          debug.myName = myName;
          debug.myHue = myHue;
          debug.score = Math.max(debug.score, p.score);
          continue;
        }
        others.push(sprite);
        othersById[e.id] = sprite;
        if (e.id === debug.trace.entity) pushBounded(debug.trace.frames, [now, f.renderTick, e.x, e.y]);
        const m = debug.motion[e.id];
        if (m === undefined) {
          debug.motion[e.id] = { frames: 1, travelled: 0, maxJump: 0, maxExcess: 0, x: e.x, y: e.y };
        } else {
          const jump = Math.hypot(e.x - m.x, e.y - m.y);
          m.frames += 1;
          m.travelled += jump;
          m.maxJump = Math.max(m.maxJump, jump);
          m.maxExcess = Math.max(m.maxExcess, jump - (SPEED * dTicks) / TICK_HZ);
          m.x = e.x;
          m.y = e.y;
        }
      } else if (e.kind === drones) droneList.push({ x: e.x, y: e.y });
      else if (e.kind === pickups) pickupList.push({ x: e.x, y: e.y });
    }
    for (const id of f.left) delete debug.motion[id];
    lastRenderTick = f.renderTick;

    if (me !== null && lastMe !== null && (me.x !== lastMe.x || me.y !== lastMe.y) && debug.respondFrame < 0 && debug.keyFrame >= 0) {
      debug.respondFrame = debug.frame;
    }
    lastMe = me;
    debug.me = me;
    debug.entityId = own;
    debug.others = othersById;
    // Everything drawn this frame besides the player itself: players, drones and pickups.
    visibleCount = Object.keys(othersById).length + droneList.length + pickupList.length;
    debug.state = conn.state;
    debug.corrections = predictor.corrections;
    debug.lastCorrection = predictor.lastError;
    debug.rttMs = conn.clock.rttMs;
    debug.ack = conn.ack;
    debug.delayMs = f.delayMs;
    debug.extrapolatedFrames = replica.extrapolatedFrames;

    renderer.draw({
      me: me === null ? null : { x: me.x, y: me.y, name: myName, hue: myHue, connected: true },
      others,
      drones: droneList,
      pickups: pickupList,
      pillars,
      nowMs: now,
    });
    requestAnimationFrame(frame);
  }

  /**
   * Why the session is over WebSocket though WebTransport was tried: the last fallback's reason, or
   * (after a reload, when the tab remembered an earlier fallback and did not try again) that.
   */
  function fallbackReason(): string | null {
    if (conn.transport !== "websocket") return null;
    if (debug.fallback !== null) return debug.fallback;
    return conn.webTransportDisabled ? "failed earlier in this tab" : null;
  }

  let hudAt = 0;
  /** Entities drawn in the last frame, other than the player's own (the HUD's `visible`). */
  let visibleCount = 0;
  function hudLoop(): void {
    const now = performance.now();
    if (now - hudAt >= 200) {
      hudAt = now;
      const s = conn.stats;
      hud.update({
        state: `${conn.state} · ${zone} · ${debug.myName}`,
        transport: conn.transport,
        fallback: fallbackReason(),
        rttMs: conn.clock.rttMs,
        bytesInPerSec: s.bytesInPerSec,
        bytesOutPerSec: s.bytesOutPerSec,
        serverTick: conn.latestTick,
        delayMs: replica.delayMs,
        score: debug.score,
        pendingInputs: predictor.pendingSeqs.length,
        corrections: predictor.corrections,
        visible: visibleCount,
      });
    }
    setTimeout(hudLoop, 200);
  }

  conn.connect().then(
    () => {
      debug.state = conn.state;
    },
    (e: unknown) => {
      // The banner already says why (the close that ended the connection came first).
      const msg = e instanceof Error ? e.message : String(e);
      if (cannotJoin() === null) debug.errors.push(msg);
      debug.state = `failed: ${msg}`;
    },
  );
  requestAnimationFrame(frame);
  hudLoop();
  return debug;
}
