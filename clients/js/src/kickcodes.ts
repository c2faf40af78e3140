/**
 * Kick codes (PROTOCOL.md §5.3): their numbers and names, and which of them only move the session
 * to another host.
 */

/** Kick codes of §5.3. Unknown codes decode fine and are shown as numbers. */
export const KickCode = {
  BAD_TICKET: 1,
  TICKET_EXPIRED: 2,
  TICKET_NOT_YET_VALID: 3,
  TICKET_UNKNOWN_KEY: 4,
  TICKET_RETIRED_KEY: 5,
  TICKET_BAD_ALGORITHM: 6,
  TICKET_WRONG_ZONE: 7,
  TICKET_REPLAYED: 8,
  ZONE_FULL: 9,
  VERSION_MISMATCH: 10,
  KICKED: 11,
  SHUTTING_DOWN: 12,
  RATE_LIMITED: 13,
  PROTOCOL_ERROR: 14,
  MESSAGE_TOO_LARGE: 15,
  HANDSHAKE_TIMEOUT: 16,
  IDLE_TIMEOUT: 17,
  SLOW_CONSUMER: 18,
  JOIN_REFUSED: 19,
  RECONNECT_REFUSED: 20,
  ZONE_STOPPED: 21,
  TOO_MANY_CONNECTIONS: 22,
  INTERNAL_ERROR: 23,
  /** The zone moved to another host; resume there (version 3). */
  ZONE_MOVED: 24,
  /** This host lost its lease on the zone; resume elsewhere (version 3). */
  HOST_FENCED: 25,
  /** The connection attempt took too many hops; the host refused another (version 3). */
  TOO_MANY_REDIRECTS: 26,
  /**
   * The client's content version is older than the host accepts; reload the client (version 5,
   * §4.1.2). Final: {@link ZoneConnection} stops and emits 'reload'.
   */
  CONTENT_OUTDATED: 27,
  /**
   * The lasting world stopped because its saves failed; it resumes by itself from its last
   * committed save once its store answers, so whatever happened since that save is gone (version 9,
   * §5.3). Like INTERNAL_ERROR, {@link defaultReconnectPolicy} retries it with backoff through the
   * entry URL, with the reconnect token inside the grace window. A session of an older version gets
   * INTERNAL_ERROR instead.
   */
  WORLD_HALTED: 28,
  /**
   * The player's character (what travels with the player: inventory, level, gold) was taken into
   * another zone — the player started playing in another game or on another device — so this
   * session is over (version 10, §5.3 "Characters"). Final: {@link ZoneConnection} does not
   * reconnect (that would take the character back at once), and emits 'movedElsewhere' so the game
   * can tell the player. A session of an older version gets KICKED instead.
   */
  CHARACTER_MOVED: 29,
  /**
   * Another zone holds the player's character and could not be asked to give it back yet (its host
   * does not answer); the join may succeed shortly (version 10, §5.3 "Characters"). Like
   * INTERNAL_ERROR, {@link defaultReconnectPolicy} retries it with backoff through the entry URL,
   * keeping the ticket and reconnect-token rules. A session of an older version gets INTERNAL_ERROR
   * instead.
   */
  CHARACTER_ELSEWHERE: 30,
  /**
   * The principal is banned from this zone, its zone group, or the whole fleet, until a time the
   * reason names: `banned from <scope> until <until_ms>: <reason>` (`banOf` in the SDK reads it). Final:
   * {@link defaultReconnectPolicy} stops, since every join is refused until the ban ends
   * (version 11, {@link CHAT_PROTOCOL}). A session of an older version gets JOIN_REFUSED with the
   * same reason instead.
   */
  BANNED: 31,
} as const;

/**
 * Whether a Kick code ends the connection but not the session (§5.3): ZONE_MOVED and HOST_FENCED,
 * after which the client resumes at once through its entry URL with its reconnect token.
 */
export function kickResumesElsewhere(code: number): boolean {
  return code === KickCode.ZONE_MOVED || code === KickCode.HOST_FENCED;
}

/** The name of a kick code, or `UNKNOWN(n)`. */
export function kickCodeName(code: number): string {
  for (const [name, value] of Object.entries(KickCode)) if (value === code) return name;
  return `UNKNOWN(${code})`;
}
