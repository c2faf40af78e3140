/**
 * The arena page: joins with a dev guest ticket and plays the arena ({@link playArena}: the player
 * predicted with the shared movement step, everyone else drawn through the SDK's interpolating
 * Replica, a HUD and a NetSim panel).
 *
 * Query parameters: `zone` (default `arena-1`), `name` (default: a `player-xxxx` name kept for this
 * tab, so two windows are two different players).
 * Page state for tools and the browser test is published as `window.arena` ({@link ArenaDebug}).
 */

import { playArena } from "./arena-play.js";
import { guestConnection, GuestTickets, playerName, transportParam } from "./guest.js";

export type { ArenaDebug, MotionStats, MotionTrace } from "./arena-play.js";

const params = new URLSearchParams(location.search);
const zoneId = params.get("zone") ?? "arena-1";
const name = playerName(params);
const tickets = new GuestTickets(zoneId, name);

await playArena({
  root: document.getElementById("app") ?? document.body,
  conn: guestConnection(zoneId, tickets, transportParam(params)),
  zone: zoneId,
  name,
  subject: () => tickets.subject,
  cannotJoin: () => tickets.cannotJoin,
});
