/**
 * A {@link ZoneConnection}'s move to another zone (§5.3.2, version 8). A Transfer keeps the source
 * connection open and its world untouched while attempts go to the new zone with the transfer
 * credential; the move lands when the new zone's Welcome and its BASELINE have both arrived (told
 * together, so no frame is drawn between the two worlds), and only then does the source connection
 * close. A failed attempt is retried with backoff while the credential is valid.
 */
import { movedElsewhereMessage, reloadMessage, TRANSFER_FINAL_KICKS, TransferError, } from "./connectionerrors.js";
import { KickCode, kickCodeName, transferTarget } from "./messages.js";
import { backoffMs } from "./reconnect.js";
import { lostSocket } from "./rejoin.js";
import { detach } from "./sockets.js";
import { credentialLifetimeMs } from "./tickets.js";
/** The move of a connection to another zone, while one is under way. */
export class Transfers {
    /** A move to another zone under way (§5.3.2). */
    current = null;
    route;
    port;
    /** Moves that rewrite `route` to the zone they move to. */
    constructor(route, port) {
        this.route = route;
        this.port = port;
    }
    /** The Transfer's URL while the next attempt starts there (null otherwise). */
    directUrl() {
        const t = this.current;
        return t !== null && t.direct ? t.info.url : null;
    }
    /**
     * A Transfer on the open session (§5.3.2): keeps the source connection (and the world drawn
     * from it) as it is and starts the attempts at the new zone. A Transfer whose URL is not a
     * WebSocket URL is ignored ('transferError' `url`).
     */
    begin(m) {
        const url = transferTarget(m);
        if (url === null) {
            this.port.emit("transferError", new TransferError("url", `a Transfer to a URL that is not ws:// or wss://: ${m.url}`, null, true));
            return;
        }
        const info = { from: this.port.zoneId(), to: m.zoneId, url };
        const origin = this.port.socket();
        // Detached, not closed: the source holds the player's last world until the new one is here.
        this.port.teardown();
        this.end("transferred again");
        this.current = {
            info,
            credential: m.ticket,
            deadline: this.port.scheduler.now() + credentialLifetimeMs(m.ticket),
            origin,
            direct: true,
            token: null,
            held: null,
            failures: 0,
        };
        this.route.zoneId = m.zoneId;
        this.route.index = 0;
        this.port.setState("transferring");
        this.port.emit("transfer", info);
        if (this.current === null || this.port.state() !== "transferring")
            return; // a handler closed the connection
        this.port.attempt();
    }
    /**
     * The new zone's BASELINE is here (the caller emits its 'delta' right after): tells the held
     * Welcome and closes the source connection. Nothing while no move waits for it.
     */
    arrive() {
        const t = this.current;
        if (t === null || t.held === null)
            return;
        this.current = null;
        this.port.setState("open");
        this.port.landed();
        closeOrigin(t, "transferred");
        this.port.emit("welcome", t.held.welcome, t.held.info);
    }
    /** Forgets a move under way (if any), closing its source connection. */
    end(reason) {
        const t = this.current;
        if (t === null)
            return;
        this.current = null;
        closeOrigin(t, reason);
    }
    /**
     * An attempt at the new zone failed: the next listed entry at once when none answered, else
     * another attempt with backoff while the credential is valid, else the connection ends.
     */
    attemptFailed(code, reason, kick, localError) {
        const t = this.current;
        if (t === null)
            return;
        t.held = null;
        // An attempt of the move never had a session open: read as a lost socket that was not.
        const { kickCode, hopeless, unanswered } = lostSocket(code, reason, kick, localError, false, false);
        if (unanswered && this.port.nextEntry())
            return;
        t.direct = false;
        t.failures += 1;
        this.route.index = 0;
        const why = kick !== null ? `${kickCodeName(kick.code)}: ${kick.reason}` : (localError?.message ?? reason);
        if (kickCode === KickCode.CONTENT_OUTDATED) {
            this.end("content outdated");
            this.port.setState("closed");
            this.port.emit("reload", { message: reloadMessage(kick), kick });
            this.port.finish({ code, reason: reloadMessage(kick), kick, error: localError, willReconnect: false, retryInMs: 0, reload: true, movedElsewhere: false });
            return;
        }
        if (kickCode === KickCode.CHARACTER_MOVED) {
            // The character went into another zone meanwhile (another game or device): the move ends
            // with the session.
            this.end("character moved elsewhere");
            this.port.setState("closed");
            this.port.emit("movedElsewhere", { message: movedElsewhereMessage(kick), kick });
            this.port.finish({
                code,
                reason: movedElsewhereMessage(kick),
                kick,
                error: localError,
                willReconnect: false,
                retryInMs: 0,
                reload: false,
                movedElsewhere: true,
            });
            return;
        }
        const delay = backoffMs(this.port.reconnect() ?? {}, t.failures);
        let kind = "attempt";
        let willRetry = !hopeless && !(kickCode !== null && TRANSFER_FINAL_KICKS.has(kickCode));
        if (kickCode === KickCode.TICKET_REPLAYED && t.token === null) {
            // Already used, and no Welcome of the new zone gave a token to resume with.
            kind = "replayed";
            willRetry = false;
        }
        else if (willRetry && this.port.scheduler.now() + delay >= t.deadline) {
            kind = "expired";
            willRetry = false;
        }
        this.port.emit("transferError", new TransferError(kind, why, kick, willRetry));
        if (this.current !== t)
            return; // a handler closed the connection
        if (!willRetry) {
            this.end("transfer failed");
            this.port.setState("closed");
            this.port.finish({ code, reason: why, kick, error: localError, willReconnect: false, retryInMs: 0, reload: false, movedElsewhere: false });
            return;
        }
        this.port.retry(delay);
    }
}
function closeOrigin(t, reason) {
    const origin = t.origin;
    t.origin = null;
    if (origin === null)
        return;
    detach(origin);
    try {
        origin.close(1000, reason);
    }
    catch {
        // The source closes it after a while anyway.
    }
}
