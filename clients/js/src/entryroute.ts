/**
 * Where a {@link ZoneConnection}'s attempts send their Hello (§5.3.1): the entry URL first, then the
 * entry URLs the last version 7 Welcome (or Entries message) listed when no host answers there;
 * within an attempt, each Redirect's URL in turn (at most three, only `ws://` or `wss://`). After a
 * Transfer every entry URL names the new zone, and its first attempt starts at the Transfer's URL.
 */

import { RedirectError } from "./connectionerrors.js";
import { ENTRIES_PROTOCOL, LIMITS, redirectTarget, websocketEntries, type Redirect, type Welcome } from "./messages.js";
import { withZone } from "./tickets.js";

/** The entry URLs of a session and the Redirect hops of its current attempt. */
export class EntryRoute {
  /** Where else the zone may be entered, from the newest Welcome that listed them (§5.3.1). */
  entries: string[] = [];
  /** Which of {@link candidates} the current attempt tries: 0 = the entry URL. */
  index = 0;
  /** The zone a Transfer moved the session to: entry URLs name it from then on (null = none). */
  zoneId: string | null = null;
  /** The URL the last Redirect of the current attempt named (null = none yet). */
  hopUrl: string | null = null;
  /** Redirects followed in the current attempt. */
  private hops = 0;
  /** The entry URL the app gave. */
  private readonly url: string;

  /** A route starting at `url`, the entry URL. */
  constructor(url: string) {
    this.url = url;
  }

  /**
   * The entry URL, then each entry URL the last Welcome listed that differs from it; after a
   * Transfer they name its zone, and its first attempt starts at the Transfer's URL (`direct`).
   */
  candidates(direct: string | null): string[] {
    const zone = this.zoneId;
    const rezone = (u: string): string => (zone === null ? u : withZone(u, zone));
    const entry = rezone(this.url);
    const all = [entry, ...this.entries.map(rezone).filter((u) => u !== entry)];
    return direct !== null ? [direct, ...all.filter((u) => u !== direct)] : all;
  }

  /** Where the current attempt starts: the entry URL, or a listed one after it was unreachable. */
  entryUrl(direct: string | null): string {
    return this.candidates(direct)[this.index] ?? this.url;
  }

  /** Where the current attempt's Hello goes next: the last Redirect's URL, else its start. */
  targetUrl(direct: string | null): string {
    return this.hopUrl ?? this.entryUrl(direct);
  }

  /** A new attempt: no Redirect followed yet. */
  restart(): void {
    this.hops = 0;
    this.hopUrl = null;
  }

  /**
   * Takes a Redirect's hop: its URL, where the attempt's Hello goes next. Throws a
   * {@link RedirectError} for a fourth Redirect or a URL that is not a WebSocket URL.
   */
  hop(r: Redirect): string {
    if (this.hops >= LIMITS.redirects) throw new RedirectError("too_many", r.url);
    const url = redirectTarget(r);
    if (url === null) throw new RedirectError("scheme", r.url);
    this.hops += 1;
    this.hopUrl = url;
    return url;
  }

  /**
   * Keeps the entry URLs a version 7 Welcome lists (an older one lists none: what an earlier one
   * listed still holds); the next attempt starts at the entry URL again. True when the Welcome was
   * reached through one of the listed entries.
   */
  noteWelcome(w: Welcome): boolean {
    const listed = this.index > 0;
    this.index = 0;
    if (w.version >= ENTRIES_PROTOCOL) this.entries = websocketEntries(w.entries);
    return listed;
  }

  /**
   * After an attempt that no host answered (or one shutting down answered): true when the attempt
   * goes on at the next entry URL the last Welcome listed; false when none is left (the next
   * attempt starts at the entry URL again).
   */
  advance(direct: string | null): boolean {
    if (this.index + 1 >= this.candidates(direct).length) {
      this.index = 0;
      return false;
    }
    this.index += 1;
    return true;
  }
}
