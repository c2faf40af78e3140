/**
 * How a {@link ZoneConnection} joins its zone on each attempt (§4.1.1): inside the grace window it
 * resumes the same player with the reconnect token of the last Welcome; after it, or once the host
 * refused the token, it joins fresh with a new ticket. After a lost socket, the reconnect policy's
 * word on the Kick decides between retrying, renewing the ticket, joining fresh and stopping,
 * except where the Kick decides by itself (VERSION_MISMATCH and CHARACTER_MOVED stop,
 * CONTENT_OUTDATED reloads, a resume_from refused as a protocol error is retried without it).
 */
import { movedElsewhereMessage, RedirectError, reloadMessage } from "./connectionerrors.js";
import { KickCode, kickCodeName, RESUME_FROM_VERSION } from "./messages.js";
import { defaultReconnectPolicy } from "./reconnect.js";
import { DecodeError } from "./wire.js";
/**
 * What a socket lost with close `code` and `reason` says, after Kick `kick` or a local error;
 * `wasOpen` when it carried an established session, `resumeFromSent` when its Hello carried
 * resume_from.
 */
export function lostSocket(code, reason, kick, localError, wasOpen, resumeFromSent) {
    // A Kick lost in transit is still known from the close code (§6: 4000 + the Kick code).
    const kickCode = kick?.code ?? (code > 4000 && code <= 4999 ? code - 4000 : null);
    // Undecodable bytes, or a Redirect to a non-WebSocket URL: the next attempt would meet the same.
    const hopeless = localError instanceof DecodeError || (localError instanceof RedirectError && localError.kind === "scheme");
    const unanswered = !wasOpen && !hopeless && !(localError instanceof RedirectError) &&
        (kickCode === null || kickCode === KickCode.SHUTTING_DOWN);
    return { code, reason, kick, kickCode, localError, hopeless, unanswered, wasOpen, resumeFromSent };
}
/** Who a connection's attempts join as, and how many have failed since the last Welcome. */
export class Rejoin {
    /** The ticket presented last (null before the first attempt). */
    ticket = null;
    /** The reconnect token of the last Welcome (empty before one). */
    token = new Uint8Array(0);
    /** The player of the last Welcome (null before one). */
    playerId = null;
    /** How the current attempt joins. */
    mode = "fresh";
    /**
     * A host refused this session's Hello with resume_from as a protocol error (a fleet part way
     * through an upgrade, §4.1.1): resume without it until a Welcome lands.
     */
    resumeFromRefused = false;
    /** Failed attempts since the last Welcome. */
    attempts = 0;
    /** When the established session was lost (null while none is). */
    disconnectedAt = null;
    /** The next attempt joins as a new player (the token was refused). */
    forceFresh = false;
    /** The next attempt fetches a new ticket (the last one was refused). */
    renewTicket = false;
    /** Whether the ticket of the current attempt had been presented before. */
    ticketReused = false;
    /**
     * Sets how this attempt joins: it resumes when there is a token, the session was lost less than
     * `graceMs` ago and the host did not refuse the token; otherwise it joins fresh.
     */
    chooseMode(now, graceMs) {
        const inGrace = this.disconnectedAt !== null && now - this.disconnectedAt < graceMs;
        this.mode = this.token.length > 0 && inGrace && !this.forceFresh ? "resume" : "fresh";
    }
    /**
     * Whether Welcome `w` resumed the same player. A move's Welcome (`transferring`) starts the
     * player afresh in the new zone, whatever token it presented.
     */
    resumes(w, transferring) {
        return !transferring && this.mode === "resume" && this.playerId === w.playerId;
    }
    /**
     * What a resuming Hello says the mirror holds (§4.1.1): only when the session's Welcome
     * negotiated version 4 or later (`negotiated`; a host that never spoke it would refuse the field),
     * `offered` includes one, and the mirror is sound (a Delta applied, no Resync waiting for its
     * BASELINE).
     */
    resumeFrom(view, negotiated, offered) {
        if (this.resumeFromRefused ||
            view.awaitingBaseline ||
            negotiated < RESUME_FROM_VERSION ||
            !offered.some((v) => v >= RESUME_FROM_VERSION)) {
            return null;
        }
        return view.mirror?.resumeFrom() ?? null;
    }
    /** A Welcome landed: the next lost session counts its attempts and its grace window anew. */
    landed() {
        this.resumeFromRefused = false;
        this.attempts = 0;
        this.disconnectedAt = null;
        this.forceFresh = false;
    }
    /**
     * After a lost socket that no listed entry took over: counts the attempt, decides with the
     * policy (`reconnect.policy`, else {@link defaultReconnectPolicy}) how the next one joins, if one
     * follows, and says how the close is told (its `retryInMs` still 0).
     */
    decide(lost, reconnect) {
        const { code, reason, kick, kickCode, localError, hopeless, wasOpen } = lost;
        const policy = reconnect?.policy ?? defaultReconnectPolicy;
        let decision = hopeless ? "stop" : policy(kickCode, { ticketReused: this.ticketReused });
        if (kickCode === KickCode.VERSION_MISMATCH)
            decision = "stop";
        // The character plays in another game or on another device now: coming back would take it
        // from there, so only the player may decide to (with a new connection).
        const movedElsewhere = kickCode === KickCode.CHARACTER_MOVED;
        if (movedElsewhere)
            decision = "stop";
        // Outdated content stays outdated on every attempt: only a reload fixes it.
        if (kickCode === KickCode.CONTENT_OUTDATED)
            decision = "reload";
        // A host that speaks no version 4 reads resume_from as trailing bytes: try again without it.
        if (!wasOpen && kickCode === KickCode.PROTOCOL_ERROR && lost.resumeFromSent && !this.resumeFromRefused) {
            this.resumeFromRefused = true;
            decision = "retry";
        }
        if (decision === "fresh")
            this.forceFresh = true;
        if (decision === "renew")
            this.renewTicket = true;
        const maxAttempts = reconnect?.maxAttempts ?? 8;
        this.attempts += 1;
        const reload = decision === "reload";
        const willReconnect = decision !== "stop" && !reload && this.attempts <= maxAttempts;
        return {
            code,
            reason: reload
                ? reloadMessage(kick)
                : movedElsewhere
                    ? movedElsewhereMessage(kick)
                    : kick !== null
                        ? `${kickCodeName(kick.code)}: ${kick.reason}`
                        : localError?.message ?? reason,
            kick,
            error: localError,
            willReconnect,
            retryInMs: 0,
            reload,
            movedElsewhere,
        };
    }
}
