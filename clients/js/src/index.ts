/**
 * @zonekeep/client — the TypeScript SDK of Zonekeep.
 *
 * - Codec (PROTOCOL.md, protocol version 11, byte-exact with the Rust codec): {@link encodeClientMessage},
 *   {@link decodeServerMessage}, {@link decodeDelta}, {@link encodeDelta}, quantization helpers.
 * - {@link PayloadReader} and {@link PayloadWriter}: the little-endian encoding of zone inputs and events
 *   that code written by `zonekeep codegen` builds and reads them with (docs/CODEGEN.md).
 * - {@link ZoneConnection}: handshake, events, reconnect, clock sync, inputs, counters; over
 *   WebSocket or WebTransport (§1.1), falling back from the one to the other.
 * - {@link StateRing}: the client's states of a WebTransport session (§5.8).
 * - {@link Replica}: interpolated view of the zone's entities.
 * - {@link Predictor}: client-side prediction and reconciliation of the player's entity.
 * - {@link CellGrid}, {@link NeighbourSet}, {@link pickCopies}: a world cut into cells, one zone each.
 * - {@link BoardsClient}: a host's leaderboards, read as typed {@link Ranking}s.
 * - {@link watchPresence}: who of the principals a player may watch is online, kept current across reconnects.
 * - {@link ChatClient} (`conn.chat`, protocol version 11): channel lines, sends, DMs, reports and
 *   history; {@link ChatRefusal} for what the host refuses, {@link banOf} for a Kick BANNED.
 */

export * from "./wire.js";
export * from "./payload.js";
export * from "./quant.js";
export * from "./schema.js";
export * from "./delta.js";
export * from "./messages.js";
export * from "./chatcodec.js";
export * from "./mirror.js";
export * from "./states.js";
export * from "./clock.js";
export * from "./scheduler.js";
export * from "./playout.js";
export * from "./replica.js";
export * from "./predictor.js";
export * from "./reconnect.js";
export * from "./connection.js";
export * from "./webtransport.js";
export * from "./cells.js";
export * from "./lobby.js";
export * from "./matchmaker.js";
export * from "./match.js";
export * from "./boards.js";
export * from "./presence.js";
export * from "./chat.js";
export { banOf, ChatRefusal, type BanInfo } from "./refusal.js";
