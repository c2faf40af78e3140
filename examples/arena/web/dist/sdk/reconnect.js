/**
 * How a {@link ZoneConnection} reconnects: what a Kick code calls for (retry, renew the ticket, join
 * fresh, or stop), the tuning a game may set, and the backoff between attempts.
 */
import { KickCode } from "./messages.js";
/**
 * The default reconnect policy for a Kick code (null = the socket closed without a Kick):
 * 'retry' resumes with the token when still inside the grace window, 'renew' fetches a new ticket
 * for a refusal a new ticket fixes, 'fresh' joins as a new player (the token was refused), 'stop'
 * gives up (the reason will not go away by retrying).
 *
 * A reused ticket refused for its signature or key (BAD_TICKET, unknown or retired key) was signed
 * with a key the host no longer has — typically a host restarted with a new key — so a new ticket
 * fixes it; a ticket fetched for this very attempt refused that way would be refused again.
 *
 * WORLD_HALTED (version 9) is retried like INTERNAL_ERROR: the lasting world comes back by itself,
 * from its last committed save, once its store answers.
 *
 * Of the character codes (version 10), CHARACTER_MOVED stops: the character now plays in another
 * game or on another device, and coming back would take it from there. CHARACTER_ELSEWHERE is
 * retried like INTERNAL_ERROR: the zone that holds the character gives it back once it can be asked.
 *
 * BANNED (version 11) stops: the principal is banned until a time the Kick's reason names
 * (`banOf` reads it), and every join until then is refused.
 */
export function defaultReconnectPolicy(code, context = { ticketReused: false }) {
    switch (code) {
        case null:
            return "retry";
        case KickCode.RECONNECT_REFUSED:
            return "fresh";
        case KickCode.TICKET_EXPIRED:
        case KickCode.TICKET_REPLAYED:
        case KickCode.TICKET_NOT_YET_VALID:
            return "renew";
        case KickCode.BAD_TICKET:
        case KickCode.TICKET_UNKNOWN_KEY:
        case KickCode.TICKET_RETIRED_KEY:
            return context.ticketReused ? "renew" : "stop";
        case KickCode.TICKET_BAD_ALGORITHM:
        case KickCode.TICKET_WRONG_ZONE:
        case KickCode.VERSION_MISMATCH:
        case KickCode.KICKED:
        case KickCode.PROTOCOL_ERROR:
        case KickCode.MESSAGE_TOO_LARGE:
        case KickCode.JOIN_REFUSED:
        case KickCode.ZONE_STOPPED:
        case KickCode.RATE_LIMITED:
            return "stop";
        case KickCode.CONTENT_OUTDATED:
            // No attempt can succeed until the client is the current build.
            return "reload";
        case KickCode.ZONE_MOVED:
        case KickCode.HOST_FENCED:
            // The session lives on at the zone's new owner: resume (at once, through the entry URL).
            return "retry";
        case KickCode.WORLD_HALTED:
            // The lasting world stopped because its saves failed and resumes from its last committed
            // save once its store answers: come back with backoff, like INTERNAL_ERROR, keeping the
            // token inside the grace window.
            return "retry";
        case KickCode.CHARACTER_MOVED:
            // The character was taken into another zone (another game or device): this session is over,
            // and a reconnect would take the character back from the player's other game at once.
            return "stop";
        case KickCode.BANNED:
            // Banned from the zone, its group or the fleet until a time its reason names (version 11):
            // every join is refused until then. `banOf(kick)` tells the game until when.
            return "stop";
        case KickCode.CHARACTER_ELSEWHERE:
            // Another zone holds the character and could not give it back yet: come back with backoff,
            // like INTERNAL_ERROR, keeping the ticket and the token inside the grace window.
            return "retry";
        default:
            // SHUTTING_DOWN, ZONE_FULL, timeouts, SLOW_CONSUMER, INTERNAL_ERROR, TOO_MANY_REDIRECTS (the
            // fleet is still settling who owns the zone) and unknown codes.
            return "retry";
    }
}
/**
 * The delay before reconnect attempt `attempt` (1-based), in ms: exponential from `baseDelayMs`
 * (default 250) up to `maxDelayMs` (default 8000), with "equal jitter" — half fixed, half random,
 * so attempts spread out but never collapse to zero.
 */
export function backoffMs(r, attempt) {
    const base = r.baseDelayMs ?? 250;
    const cap = r.maxDelayMs ?? 8000;
    const exp = Math.min(cap, base * 2 ** Math.max(0, attempt - 1));
    const random = r.random ?? Math.random;
    return exp / 2 + (exp / 2) * random();
}
