/**
 * The lobby (docs/LOBBY.md): a seat in a room, as a host's lobby answers it, for both ends of it.
 *
 * - Your game's back end (Node) calls the lobby of any host with its lobby credential:
 *   {@link LobbyClient} sends `join_or_create`, lists rooms, makes private rooms and joins by code,
 *   and turns every refusal into a {@link SeatError} that says whether trying again can help.
 * - Your game gets the {@link Seat} from its back end and joins with {@link seatConnection}: the
 *   seat's ticket for the first join, then a fresh ticket for the same room from the back end
 *   whenever the connection needs one (after its grace window), never a seat in another room.
 *
 * The lobby credential never reaches a player's machine: players ask your back end, which knows
 * who they are.
 */

import { ZoneConnection, type ZoneConnectionOptions } from "./connection.js";

/** A room as the lobby shows it. */
export interface Room {
  zone_id: string;
  kind: string;
  content_version: string;
  private: boolean;
  max_players: number;
  max_observers: number;
  players: number;
  observers: number;
  reserved_players: number;
  reserved_observers: number;
  free_players: number;
  free_observers: number;
  open: boolean;
  metadata: Record<string, unknown>;
  created_at_ms: number;
}

/** A seat the lobby handed out: where to connect and the ticket to connect with. */
export interface Seat {
  /** The room's zone. */
  zone: string;
  kind: string;
  /** True when the room was made for this seat. */
  created: boolean;
  /** A private room's code (only when this answer made or joined it by code). */
  code: string | null;
  /** WebSocket URL of the zone at its owner. */
  url: string;
  /** The owner's host id. */
  host: string | null;
  /** A single-use ticket for the seat's principal and zone. */
  ticket: string;
  /** When the ticket and the held seat lapse, in UNIX seconds. */
  expires_at: number;
  room: Room;
}

/** Lobby refusals a caller may meet again with the same request, and get a seat. */
const RETRYABLE = new Set(["room_full", "room_closed", "unavailable", "network", "address_full"]);

/** Why no seat was had: the lobby's refusal code (or `network`, `malformed`), and whether trying again can help. */
export class SeatError extends Error {
  /** The lobby's code: `room_full`, `address_full`, `room_closed`, `no_room`, `exists`, `bad_request`, `unauthorized`, `unavailable`, `lobby_off`; or `network` (no answer) and `malformed` (an answer that is not a seat). */
  readonly code: string;
  /** The HTTP status (0 without an answer). */
  readonly status: number;
  /** True when the same request may get a seat later (a full or closed room, a store or host in trouble). */
  readonly retryable: boolean;

  constructor(code: string, status: number, message: string) {
    super(message);
    this.name = "SeatError";
    this.code = code;
    this.status = status;
    this.retryable = RETRYABLE.has(code);
  }
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

/** Checks that `value` is a seat answer; a {@link SeatError} `malformed` otherwise. */
export function parseSeat(value: unknown): Seat {
  const bad = (what: string) => new SeatError("malformed", 0, `not a seat: ${what}`);
  if (!isObject(value)) throw bad("not an object");
  for (const k of ["zone", "kind", "url", "ticket"] as const) {
    if (typeof value[k] !== "string" || value[k] === "") throw bad(`${k} missing`);
  }
  if (typeof value.expires_at !== "number") throw bad("expires_at missing");
  if (!isObject(value.room)) throw bad("room missing");
  const url = value.url as string;
  if (!/^wss?:\/\//.test(url)) throw bad(`url ${url} is not a WebSocket URL`);
  return {
    zone: value.zone as string,
    kind: value.kind as string,
    created: value.created === true,
    code: typeof value.code === "string" ? value.code : null,
    url,
    host: typeof value.host === "string" ? value.host : null,
    ticket: value.ticket as string,
    expires_at: value.expires_at,
    room: value.room as unknown as Room,
  };
}

/** The refusal an answer of `status` with `body` stands for. */
export function seatRefusal(status: number, body: unknown): SeatError {
  const error = isObject(body) && isObject(body.error) ? body.error : {};
  const code = typeof error.code === "string" ? error.code : status === 401 ? "unauthorized" : "unavailable";
  const message = typeof error.message === "string" ? error.message : `the lobby answered ${status}`;
  return new SeatError(code, status, message);
}

/** The `fetch` the client calls (the platform's by default). */
export type LobbyFetch = (url: string, init: { method: string; headers: Record<string, string>; body?: string }) => Promise<{
  status: number;
  json(): Promise<unknown>;
}>;

/** Where the lobby is and the credential for it. */
export interface LobbyClientOptions {
  /** A host of the fleet, e.g. `http://127.0.0.1:7350`. */
  url: string;
  /** The hosts' lobby credential (`--lobby-token`). Keep it on your back end. */
  token: string;
  /** Default: the global `fetch`. */
  fetch?: LobbyFetch;
}

/** Who sits, for every seat request. */
export interface Sitter {
  /** The player's principal, as your back end authenticated it. */
  principal: string;
  /** The name other players see (the ticket's `name` claim). */
  name?: string;
  role?: "player" | "observer";
  /** The client's address as your back end saw it (seats per address are capped). */
  address?: string;
  /** More ticket claims of your own. */
  claims?: Record<string, unknown>;
}

/** A `join_or_create` request. */
export interface JoinOrCreate extends Sitter {
  kind: string;
  content_version?: string;
  /** Rooms whose metadata has each of these values; a new room gets them. */
  metadata?: Record<string, string | number | boolean>;
  max_players?: number;
  max_observers?: number;
  /** A new room's zone create params. */
  params?: unknown;
}

/** Which rooms a listing shows. */
export interface RoomQuery {
  kind: string;
  content_version?: string;
  min_free?: number;
  role?: "player" | "observer";
  metadata?: Record<string, string | number | boolean>;
  limit?: number;
}

/** The lobby of a fleet, for a game's back end (see the module's notes). */
export class LobbyClient {
  private readonly base: string;
  private readonly token: string;
  private readonly fetch: LobbyFetch;

  constructor(options: LobbyClientOptions) {
    this.base = options.url.replace(/\/+$/, "");
    this.token = options.token;
    const f = options.fetch ?? (globalThis as { fetch?: LobbyFetch }).fetch;
    if (f === undefined) throw new Error("no fetch: pass one in LobbyClientOptions.fetch");
    this.fetch = f;
  }

  /** A seat in the fullest matching room of the kind, or in a new one. */
  async joinOrCreate(request: JoinOrCreate): Promise<Seat> {
    return parseSeat(await this.call("POST", "/lobby/join_or_create", request));
  }

  /** A seat in the room `zone`. */
  async joinRoom(zone: string, sitter: Sitter): Promise<Seat> {
    return parseSeat(await this.call("POST", `/lobby/rooms/${encodeURIComponent(zone)}/join`, sitter));
  }

  /** A seat in the private room with `code`. */
  async joinByCode(code: string, sitter: Sitter): Promise<Seat> {
    return parseSeat(await this.call("POST", "/lobby/join_by_code", { code, ...sitter }));
  }

  /** A new room (private with a code when asked), seating `creator` when given. */
  async createRoom(
    room: { kind: string; private?: boolean; metadata?: Record<string, unknown>; max_players?: number; max_observers?: number; params?: unknown },
    creator?: Sitter,
  ): Promise<Seat | { zone: string; code: string | null; url: string; room: Room }> {
    const answer = await this.call("POST", "/lobby/rooms", { ...room, ...(creator ?? {}) });
    if (creator !== undefined) return parseSeat(answer);
    if (!isObject(answer) || typeof answer.zone !== "string") throw new SeatError("malformed", 0, "not a room");
    return answer as unknown as { zone: string; code: string | null; url: string; room: Room };
  }

  /** Listed, open rooms with a free seat, fullest first. */
  async rooms(query: RoomQuery): Promise<Room[]> {
    const q = new URLSearchParams({ kind: query.kind });
    if (query.content_version !== undefined) q.set("content_version", query.content_version);
    if (query.min_free !== undefined) q.set("min_free", String(query.min_free));
    if (query.role !== undefined) q.set("role", query.role);
    if (query.limit !== undefined) q.set("limit", String(query.limit));
    for (const [k, v] of Object.entries(query.metadata ?? {})) q.set(`meta.${k}`, String(v));
    const answer = await this.call("GET", `/lobby/rooms?${q.toString()}`);
    if (!isObject(answer) || !Array.isArray(answer.rooms)) throw new SeatError("malformed", 0, "not a room list");
    return answer.rooms as Room[];
  }

  /** One room, private ones too. */
  async room(zone: string): Promise<Room> {
    return (await this.call("GET", `/lobby/rooms/${encodeURIComponent(zone)}`)) as Room;
  }

  private async call(method: string, path: string, body?: unknown): Promise<unknown> {
    let res;
    try {
      res = await this.fetch(`${this.base}${path}`, {
        method,
        headers: { authorization: `Bearer ${this.token}`, "content-type": "application/json" },
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      });
    } catch (e) {
      throw new SeatError("network", 0, `the lobby did not answer: ${String(e)}`);
    }
    let json: unknown = null;
    try {
      json = await res.json();
    } catch {
      json = null;
    }
    if (res.status < 200 || res.status >= 300) throw seatRefusal(res.status, json);
    return json;
  }
}

/**
 * The tickets of a connection to the room of `seat`: the seat's own for the first join; after
 * that (the connection asks after its grace window, or when a host refuses a resume for a reason
 * a new ticket fixes) a new seat from `again`, which must be in the same room (your back end asks
 * `POST /lobby/rooms/{zone}/join` for it); a seat elsewhere is refused with a {@link SeatError}
 * `moved`, since the player's place is in this room.
 */
export function seatTickets(seat: Seat, again: (zone: string) => Promise<Seat>): () => Promise<string> {
  let first: string | null = seat.ticket;
  return async () => {
    if (first !== null) {
      const t = first;
      first = null;
      return t;
    }
    const next = await again(seat.zone);
    if (next.zone !== seat.zone) {
      throw new SeatError("moved", 0, `a seat in ${next.zone}, not in ${seat.zone}`);
    }
    return next.ticket;
  };
}

/** A connection (not yet connected) to the room of `seat`, with {@link seatTickets}. */
export function seatConnection(
  seat: Seat,
  again: (zone: string) => Promise<Seat>,
  options: Omit<ZoneConnectionOptions, "url" | "ticket"> = {},
): ZoneConnection {
  return new ZoneConnection({ ...options, url: seat.url, ticket: seatTickets(seat, again) });
}
