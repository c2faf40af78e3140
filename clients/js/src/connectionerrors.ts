/**
 * How a {@link ZoneConnection} fails for good or in part: a Redirect it would not follow
 * ({@link RedirectError}), a Transfer it could not follow ({@link TransferError}, and the Kicks after
 * which a transfer credential cannot land), content the host refuses ({@link ContentOutdatedError},
 * {@link RELOAD_MESSAGE}) and a character taken into another zone ({@link CharacterMovedError},
 * {@link MOVED_ELSEWHERE_MESSAGE}), with the messages the app is told.
 */

import { KickCode, LIMITS, type Kick } from "./messages.js";

/**
 * A Redirect the connection would not follow (§5.3.1): `too_many` — a Redirect after the three an
 * attempt may follow (the attempt failed; the next starts at the entry URL again), or `scheme` — a
 * URL that is not `ws://` or `wss://` (the connection stops: a host handing out such URLs would hand
 * out the same again). Reported as the `error` of the {@link CloseInfo} that ends the attempt.
 */
export class RedirectError extends Error {
  /** Why the Redirect was refused. */
  readonly kind: "too_many" | "scheme";
  /** The URL the refused Redirect named. */
  readonly url: string;
  /** An error for a refused Redirect to `url`. */
  constructor(kind: "too_many" | "scheme", url: string) {
    super(
      kind === "too_many"
        ? `too many redirects: another after ${LIMITS.redirects}`
        : `redirected to a URL that is not ws:// or wss://: ${url}`,
    );
    this.name = "RedirectError";
    this.kind = kind;
    this.url = url;
  }
}

/**
 * A Transfer the connection could not follow (yet), as 'transferError' reports it: `url` — its URL
 * is not `ws://` or `wss://` (the Transfer is ignored, the session goes on where it was);
 * `attempt` — an attempt at the new zone failed (`willRetry` says whether another follows, with
 * backoff, while the credential is valid); `replayed` — the credential was already used and no
 * Welcome of the new zone gave a reconnect token to resume with; `expired` — the credential's
 * lifetime ran out before an attempt landed. Without `willRetry` the connection closes next.
 */
export class TransferError extends Error {
  /** What went wrong. */
  readonly kind: "url" | "attempt" | "replayed" | "expired";
  /** The Kick of the failed attempt, if the host sent one. */
  readonly kick: Kick | null;
  /** Whether the move goes on (another attempt, or, for `url`, the session where it was). */
  readonly willRetry: boolean;
  /** An error of `kind` with `message`. */
  constructor(kind: TransferError["kind"], message: string, kick: Kick | null, willRetry: boolean) {
    super(message);
    this.name = "TransferError";
    this.kind = kind;
    this.kick = kick;
    this.willRetry = willRetry;
  }
}

/** Kick codes after which another attempt with the same transfer credential cannot land. */
export const TRANSFER_FINAL_KICKS: ReadonlySet<number> = new Set([
  KickCode.VERSION_MISMATCH,
  KickCode.BAD_TICKET,
  KickCode.TICKET_EXPIRED,
  KickCode.TICKET_UNKNOWN_KEY,
  KickCode.TICKET_RETIRED_KEY,
  KickCode.TICKET_BAD_ALGORITHM,
  KickCode.TICKET_WRONG_ZONE,
]);

/**
 * What a {@link ZoneConnection} tells the app when the host refuses its content version: the page
 * must be reloaded to get the current build.
 */
export const RELOAD_MESSAGE = "The game was updated: reload the page to play the current version.";

/**
 * The host refused this client's content version (Kick CONTENT_OUTDATED, §4.1.2): the rejection of
 * {@link ZoneConnection.connect} when it happens before the first Welcome. Its message is
 * {@link RELOAD_MESSAGE} followed by the host's reason.
 */
export class ContentOutdatedError extends Error {
  /** The Kick, or null when only its close code (4027) arrived. */
  readonly kick: Kick | null;
  /** An error for the refusal `kick`. */
  constructor(kick: Kick | null) {
    super(reloadMessage(kick));
    this.name = "ContentOutdatedError";
    this.kick = kick;
  }
}

export function reloadMessage(kick: Kick | null): string {
  return kick !== null && kick.reason !== "" ? `${RELOAD_MESSAGE} (${kick.reason})` : RELOAD_MESSAGE;
}

/**
 * What a {@link ZoneConnection} tells the app when the player's character was taken into another
 * zone (Kick CHARACTER_MOVED, §5.3 "Characters"): the player is playing in another game or on
 * another device, and this session is over.
 */
export const MOVED_ELSEWHERE_MESSAGE = "Your character is now playing in another game or on another device.";

/**
 * The player's character was taken into another zone (Kick CHARACTER_MOVED, §5.3 "Characters"):
 * the rejection of {@link ZoneConnection.connect} when it happens before the first Welcome. Its
 * message is {@link MOVED_ELSEWHERE_MESSAGE} followed by the host's reason.
 */
export class CharacterMovedError extends Error {
  /** The Kick, or null when only its close code (4029) arrived. */
  readonly kick: Kick | null;
  /** An error for the Kick `kick`. */
  constructor(kick: Kick | null) {
    super(movedElsewhereMessage(kick));
    this.name = "CharacterMovedError";
    this.kick = kick;
  }
}

export function movedElsewhereMessage(kick: Kick | null): string {
  return kick !== null && kick.reason !== "" ? `${MOVED_ELSEWHERE_MESSAGE} (${kick.reason})` : MOVED_ELSEWHERE_MESSAGE;
}
