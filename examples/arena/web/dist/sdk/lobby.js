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
import { ZoneConnection } from "./connection.js";
/** Lobby refusals a caller may meet again with the same request, and get a seat. */
const RETRYABLE = new Set(["room_full", "room_closed", "unavailable", "network", "address_full"]);
/** Why no seat was had: the lobby's refusal code (or `network`, `malformed`), and whether trying again can help. */
export class SeatError extends Error {
    /** The lobby's code: `room_full`, `address_full`, `room_closed`, `no_room`, `exists`, `bad_request`, `unauthorized`, `unavailable`, `lobby_off`; or `network` (no answer) and `malformed` (an answer that is not a seat). */
    code;
    /** The HTTP status (0 without an answer). */
    status;
    /** True when the same request may get a seat later (a full or closed room, a store or host in trouble). */
    retryable;
    constructor(code, status, message) {
        super(message);
        this.name = "SeatError";
        this.code = code;
        this.status = status;
        this.retryable = RETRYABLE.has(code);
    }
}
function isObject(v) {
    return typeof v === "object" && v !== null && !Array.isArray(v);
}
/** Checks that `value` is a seat answer; a {@link SeatError} `malformed` otherwise. */
export function parseSeat(value) {
    const bad = (what) => new SeatError("malformed", 0, `not a seat: ${what}`);
    if (!isObject(value))
        throw bad("not an object");
    for (const k of ["zone", "kind", "url", "ticket"]) {
        if (typeof value[k] !== "string" || value[k] === "")
            throw bad(`${k} missing`);
    }
    if (typeof value.expires_at !== "number")
        throw bad("expires_at missing");
    if (!isObject(value.room))
        throw bad("room missing");
    const url = value.url;
    if (!/^wss?:\/\//.test(url))
        throw bad(`url ${url} is not a WebSocket URL`);
    return {
        zone: value.zone,
        kind: value.kind,
        created: value.created === true,
        code: typeof value.code === "string" ? value.code : null,
        url,
        host: typeof value.host === "string" ? value.host : null,
        ticket: value.ticket,
        expires_at: value.expires_at,
        room: value.room,
    };
}
/** The refusal an answer of `status` with `body` stands for. */
export function seatRefusal(status, body) {
    const error = isObject(body) && isObject(body.error) ? body.error : {};
    const code = typeof error.code === "string" ? error.code : status === 401 ? "unauthorized" : "unavailable";
    const message = typeof error.message === "string" ? error.message : `the lobby answered ${status}`;
    return new SeatError(code, status, message);
}
/** The lobby of a fleet, for a game's back end (see the module's notes). */
export class LobbyClient {
    base;
    token;
    fetch;
    constructor(options) {
        this.base = options.url.replace(/\/+$/, "");
        this.token = options.token;
        const f = options.fetch ?? globalThis.fetch;
        if (f === undefined)
            throw new Error("no fetch: pass one in LobbyClientOptions.fetch");
        this.fetch = f;
    }
    /** A seat in the fullest matching room of the kind, or in a new one. */
    async joinOrCreate(request) {
        return parseSeat(await this.call("POST", "/lobby/join_or_create", request));
    }
    /** A seat in the room `zone`. */
    async joinRoom(zone, sitter) {
        return parseSeat(await this.call("POST", `/lobby/rooms/${encodeURIComponent(zone)}/join`, sitter));
    }
    /** A seat in the private room with `code`. */
    async joinByCode(code, sitter) {
        return parseSeat(await this.call("POST", "/lobby/join_by_code", { code, ...sitter }));
    }
    /** A new room (private with a code when asked), seating `creator` when given. */
    async createRoom(room, creator) {
        const answer = await this.call("POST", "/lobby/rooms", { ...room, ...(creator ?? {}) });
        if (creator !== undefined)
            return parseSeat(answer);
        if (!isObject(answer) || typeof answer.zone !== "string")
            throw new SeatError("malformed", 0, "not a room");
        return answer;
    }
    /** Listed, open rooms with a free seat, fullest first. */
    async rooms(query) {
        const q = new URLSearchParams({ kind: query.kind });
        if (query.content_version !== undefined)
            q.set("content_version", query.content_version);
        if (query.min_free !== undefined)
            q.set("min_free", String(query.min_free));
        if (query.role !== undefined)
            q.set("role", query.role);
        if (query.limit !== undefined)
            q.set("limit", String(query.limit));
        for (const [k, v] of Object.entries(query.metadata ?? {}))
            q.set(`meta.${k}`, String(v));
        const answer = await this.call("GET", `/lobby/rooms?${q.toString()}`);
        if (!isObject(answer) || !Array.isArray(answer.rooms))
            throw new SeatError("malformed", 0, "not a room list");
        return answer.rooms;
    }
    /** One room, private ones too. */
    async room(zone) {
        return (await this.call("GET", `/lobby/rooms/${encodeURIComponent(zone)}`));
    }
    async call(method, path, body) {
        let res;
        try {
            res = await this.fetch(`${this.base}${path}`, {
                method,
                headers: { authorization: `Bearer ${this.token}`, "content-type": "application/json" },
                ...(body === undefined ? {} : { body: JSON.stringify(body) }),
            });
        }
        catch (e) {
            throw new SeatError("network", 0, `the lobby did not answer: ${String(e)}`);
        }
        let json = null;
        try {
            json = await res.json();
        }
        catch {
            json = null;
        }
        if (res.status < 200 || res.status >= 300)
            throw seatRefusal(res.status, json);
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
export function seatTickets(seat, again) {
    let first = seat.ticket;
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
export function seatConnection(seat, again, options = {}) {
    return new ZoneConnection({ ...options, url: seat.url, ticket: seatTickets(seat, again) });
}
