/**
 * Joining as a guest, shared by the demo pages: the player's name for this tab, tickets from the
 * dev host's `/dev/ticket` route (with a clear reason when no retry can help; from the fleet's other
 * hosts when the page's own is gone), and the connection that uses them.
 */
import { defaultReconnectPolicy, ZoneConnection } from "./sdk/index.js";
/** Longest name the dev ticket route takes, in bytes. */
const MAX_NAME_BYTES = 32;
/** `raw` cut to what the dev ticket route accepts: letters, digits, `-` and `_`, at most 32 bytes. */
export function ticketName(raw) {
    const utf8 = new TextEncoder();
    let out = "";
    for (const c of raw.replace(/[^\p{Alphabetic}\p{N}_-]+/gu, "-")) {
        if (utf8.encode(out + c).length > MAX_NAME_BYTES)
            break;
        out += c;
    }
    return out.replace(/^-+|-+$/g, "");
}
/** This tab's name: `?name=`, else one made up once per tab (sessionStorage is per tab, so a second
 * window gets its own; a reload keeps it). */
export function playerName(params) {
    const asked = ticketName(params.get("name") ?? "");
    if (asked !== "")
        return asked;
    const kept = sessionStorage.getItem("arena.name");
    if (kept !== null && ticketName(kept) === kept && kept !== "")
        return kept;
    const made = `player-${Math.floor(Math.random() * 0x10000)
        .toString(16)
        .padStart(4, "0")}`;
    sessionStorage.setItem("arena.name", made);
    return made;
}
/** The host could not be reached (fetch failed before any answer). */
export class HostUnreachable extends Error {
}
/** Fetches guest tickets for one zone (and, if given, the kind to create it as). */
export class GuestTickets {
    zone;
    name;
    kind;
    role;
    /**
     * Why the page cannot join at all (no retry helps), or null. Set by {@link fetch}; a page's
     * reconnect policy then stops and its banner says what to do.
     */
    cannotJoin = null;
    /** The subject of the last ticket fetched (its connection's NetSim is set by it), or null. */
    subject = null;
    /**
     * The zone's entry URLs at the fleet's hosts (`ws://host/zones/…`), asked for a ticket when the
     * page's own host cannot be reached: a page whose host drained or died must still be able to join
     * afresh at the zone's new owner (every dev host of a fleet signs with the fleet's key, and its
     * ticket route answers any origin). {@link guestConnection} sets it to the connection's list.
     */
    otherHosts = () => [];
    /**
     * `zone`: the zone tickets are for (a page whose player was transferred sets the new one);
     * `role`: `observer` for tickets that only watch.
     */
    constructor(zone, name, kind = null, role = "player") {
        this.zone = zone;
        this.name = name;
        this.kind = kind;
        this.role = role;
    }
    /** A fresh ticket (the connection's `ticket` source). */
    async fetch() {
        const kind = this.kind === null ? "" : `&kind=${encodeURIComponent(this.kind)}`;
        const role = this.role === "observer" ? "&role=observer" : "";
        const url = `/dev/ticket?zone=${encodeURIComponent(this.zone)}&name=${encodeURIComponent(this.name)}${kind}${role}`;
        let r;
        try {
            r = await fetch(url, { method: "GET", cache: "no-store" });
        }
        catch (e) {
            const elsewhere = await this.fetchElsewhere(url);
            if (elsewhere === null) {
                throw new HostUnreachable(`host unreachable (${e instanceof Error ? e.message : String(e)})`);
            }
            r = elsewhere;
        }
        const body = await r.text();
        if (r.status === 404) {
            // The page is served but the guest-ticket route is not: the host runs without --dev.
            this.cannotJoin =
                "This host hands out no guest tickets: start it with zonekeep serve --dev (or sign tickets in your own backend), then reload.";
            throw new Error("ticket: /dev/ticket not found (host started without --dev)");
        }
        if (r.status >= 400 && r.status < 500) {
            this.cannotJoin = `The host refused a guest ticket: HTTP ${r.status} ${body}`;
            throw new Error(`ticket: HTTP ${r.status} ${body}`);
        }
        if (!r.ok)
            throw new Error(`ticket: HTTP ${r.status} ${body}`);
        if ((r.headers.get("content-type") ?? "").includes("json")) {
            const j = JSON.parse(body);
            if (typeof j.ticket !== "string")
                throw new Error("ticket: no `ticket` in the response");
            if (typeof j.sub === "string")
                this.subject = j.sub;
            return j.ticket;
        }
        return body.trim();
    }
    /** {@link fetchFromOthers} over {@link otherHosts}. */
    fetchElsewhere(path) {
        return fetchFromOthers(this.otherHosts(), path);
    }
}
/**
 * The first successful answer to `path` from the HTTP origins of `entries` other than the page's
 * own, in order, or null when none gives one (a host that refuses is passed over: only the page's
 * own host decides that the page cannot join).
 */
async function fetchFromOthers(entries, path) {
    for (const entry of entries) {
        let origin;
        try {
            const u = new URL(entry);
            const scheme = u.protocol === "wss:" ? "https:" : u.protocol === "ws:" ? "http:" : null;
            if (scheme === null)
                continue;
            origin = `${scheme}//${u.host}`;
        }
        catch {
            continue;
        }
        if (origin === location.origin)
            continue;
        try {
            const r = await fetch(`${origin}${path}`, { method: "GET", cache: "no-store" });
            if (r.ok)
                return r;
        }
        catch {
            // Gone too: the next one may answer.
        }
    }
    return null;
}
/**
 * The transport a page asks for with `?transport=auto|webtransport|websocket` (PROTOCOL.md §1.1);
 * anything else (or nothing) is the SDK's default.
 */
export function transportParam(params) {
    const t = params.get("transport");
    return t === "auto" || t === "webtransport" || t === "websocket" ? t : undefined;
}
/**
 * A connection to `zone` on the host that served the page, with guest tickets from `tickets` (from
 * the hosts the connection's last Welcome or Entries listed, when the page's host is unreachable). A
 * demo page keeps trying (backoff caps at 8 s), so a restarted host is found again, until the
 * tickets say no retry can help.
 */
export function guestConnection(zone, tickets, transport) {
    const wsScheme = location.protocol === "https:" ? "wss" : "ws";
    const conn = new ZoneConnection({
        transport,
        url: `${wsScheme}://${location.host}/zones/${encodeURIComponent(zone)}`,
        ticket: () => tickets.fetch(),
        reconnect: {
            maxAttempts: Number.POSITIVE_INFINITY,
            policy: (...args) => tickets.cannotJoin !== null ? "stop" : defaultReconnectPolicy(...args),
        },
    });
    // When the page's host is gone, its tickets come from the hosts the zone's host listed.
    tickets.otherHosts = () => conn.listedEntries;
    return conn;
}
