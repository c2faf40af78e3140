/**
 * A {@link ZoneConnection}'s move to another zone (§5.3.2, version 8). A Transfer keeps the source
 * connection open and its world untouched while attempts go to the new zone with the transfer
 * credential; the move lands when the new zone's Welcome and its BASELINE have both arrived (told
 * together, so no frame is drawn between the two worlds), and only then does the source connection
 * close. A failed attempt is retried with backoff while the credential is valid.
 */

import {
  movedElsewhereMessage,
  reloadMessage,
  TRANSFER_FINAL_KICKS,
  TransferError,
} from "./connectionerrors.js";
import type {
  CloseInfo,
  ConnectionState,
  SocketLike,
  TransferInfo,
  WelcomeInfo,
  ZoneConnectionEvents,
} from "./connectiontypes.js";
import type { EntryRoute } from "./entryroute.js";
import { KickCode, kickCodeName, transferTarget, type Kick, type Transfer, type Welcome } from "./messages.js";
import { backoffMs, type ReconnectOptions } from "./reconnect.js";
import { lostSocket } from "./rejoin.js";
import type { Scheduler } from "./scheduler.js";
import { detach } from "./sockets.js";
import { credentialLifetimeMs } from "./tickets.js";

/** A move to another zone under way (§5.3.2). */
export interface TransferState {
  info: TransferInfo;
  credential: string;
  /** Scheduler time after which the credential is no longer valid. */
  deadline: number;
  /** The source connection: open until the new zone's BASELINE, so nothing is torn down early. */
  origin: SocketLike | null;
  /** The next attempt starts at the Transfer's URL (the first one does). */
  direct: boolean;
  /** The new zone's reconnect token, once one of its Welcomes gave it. */
  token: Uint8Array | null;
  /** The new zone's Welcome, told together with its BASELINE. */
  held: { welcome: Welcome; info: WelcomeInfo } | null;
  failures: number;
}

/** What {@link Transfers} needs of its connection. */
export interface TransferPort {
  /** Time. */
  readonly scheduler: Scheduler;
  /** Reconnect tuning: the backoff between attempts. */
  reconnect(): ReconnectOptions | undefined;
  /** The connection's lifecycle state. */
  state(): ConnectionState;
  /** Sets the connection's lifecycle state. */
  setState(s: ConnectionState): void;
  /** The zone of the last Welcome ("" before one). */
  zoneId(): string;
  /** The current socket. */
  socket(): SocketLike | null;
  /** Drops the current socket (detached, not closed) and its timers. */
  teardown(): void;
  /** Goes on at once at the next listed entry; false when none is left. */
  nextEntry(): boolean;
  /** Starts an attempt now. */
  attempt(): void;
  /** Starts an attempt after `ms`. */
  retry(ms: number): void;
  /** Counts a move that landed. */
  landed(): void;
  /** Ends the connection: its 'close', and `connect()` rejects if still waiting. */
  finish(info: CloseInfo): void;
  /** Tells the app. */
  emit<K extends "welcome" | "transfer" | "transferError" | "reload" | "movedElsewhere">(
    name: K,
    ...args: Parameters<ZoneConnectionEvents[K]>
  ): void;
}

/** The move of a connection to another zone, while one is under way. */
export class Transfers {
  /** A move to another zone under way (§5.3.2). */
  current: TransferState | null = null;
  private readonly route: EntryRoute;
  private readonly port: TransferPort;

  /** Moves that rewrite `route` to the zone they move to. */
  constructor(route: EntryRoute, port: TransferPort) {
    this.route = route;
    this.port = port;
  }

  /** The Transfer's URL while the next attempt starts there (null otherwise). */
  directUrl(): string | null {
    const t = this.current;
    return t !== null && t.direct ? t.info.url : null;
  }

  /**
   * A Transfer on the open session (§5.3.2): keeps the source connection (and the world drawn
   * from it) as it is and starts the attempts at the new zone. A Transfer whose URL is not a
   * WebSocket URL is ignored ('transferError' `url`).
   */
  begin(m: Transfer): void {
    const url = transferTarget(m);
    if (url === null) {
      this.port.emit("transferError", new TransferError("url", `a Transfer to a URL that is not ws:// or wss://: ${m.url}`, null, true));
      return;
    }
    const info: TransferInfo = { from: this.port.zoneId(), to: m.zoneId, url };
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
    if (this.current === null || this.port.state() !== "transferring") return; // a handler closed the connection
    this.port.attempt();
  }

  /**
   * The new zone's BASELINE is here (the caller emits its 'delta' right after): tells the held
   * Welcome and closes the source connection. Nothing while no move waits for it.
   */
  arrive(): void {
    const t = this.current;
    if (t === null || t.held === null) return;
    this.current = null;
    this.port.setState("open");
    this.port.landed();
    closeOrigin(t, "transferred");
    this.port.emit("welcome", t.held.welcome, t.held.info);
  }

  /** Forgets a move under way (if any), closing its source connection. */
  end(reason: string): void {
    const t = this.current;
    if (t === null) return;
    this.current = null;
    closeOrigin(t, reason);
  }

  /**
   * An attempt at the new zone failed: the next listed entry at once when none answered, else
   * another attempt with backoff while the credential is valid, else the connection ends.
   */
  attemptFailed(code: number, reason: string, kick: Kick | null, localError: Error | null): void {
    const t = this.current;
    if (t === null) return;
    t.held = null;
    // An attempt of the move never had a session open: read as a lost socket that was not.
    const { kickCode, hopeless, unanswered } = lostSocket(code, reason, kick, localError, false, false);
    if (unanswered && this.port.nextEntry()) return;
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
    let kind: TransferError["kind"] = "attempt";
    let willRetry = !hopeless && !(kickCode !== null && TRANSFER_FINAL_KICKS.has(kickCode));
    if (kickCode === KickCode.TICKET_REPLAYED && t.token === null) {
      // Already used, and no Welcome of the new zone gave a token to resume with.
      kind = "replayed";
      willRetry = false;
    } else if (willRetry && this.port.scheduler.now() + delay >= t.deadline) {
      kind = "expired";
      willRetry = false;
    }
    this.port.emit("transferError", new TransferError(kind, why, kick, willRetry));
    if (this.current !== t) return; // a handler closed the connection
    if (!willRetry) {
      this.end("transfer failed");
      this.port.setState("closed");
      this.port.finish({ code, reason: why, kick, error: localError, willReconnect: false, retryInMs: 0, reload: false, movedElsewhere: false });
      return;
    }
    this.port.retry(delay);
  }
}

function closeOrigin(t: TransferState, reason: string): void {
  const origin = t.origin;
  t.origin = null;
  if (origin === null) return;
  detach(origin);
  try {
    origin.close(1000, reason);
  } catch {
    // The source closes it after a while anyway.
  }
}
