/**
 * What a {@link ZoneConnection}'s session shows of its zone: the known set ({@link Mirror}), the
 * tick of the newest patch, the last input the zone acknowledged and the entity the player
 * controls, kept by the Deltas (§5.5) and States (§5.8) that arrive. When the known set no longer
 * matches the host's (a KnownSetCheck disagrees, or a Delta does not apply) it asks for a BASELINE
 * with Resync and skips the Deltas before it (§5.7).
 */

import type { ServerClock } from "./clock.js";
import type { ZoneConnectionEvents } from "./connectiontypes.js";
import type { KnownSetCheck, Resync } from "./messages.js";
import type { Mirror } from "./mirror.js";
import { isBaseline } from "./sockets.js";
import type { StateApplied } from "./states.js";
import { DecodeError } from "./wire.js";

/** What a {@link ZoneView} needs of its connection. */
export interface ZoneViewPort {
  /** The server clock estimate: told the tick of every patch. */
  readonly clock: ServerClock;
  /** Sends on the current socket. */
  send(m: Resync): void;
  /** A patch arrived: the move to another zone waiting for it lands (before the patch is told). */
  arrive(): void;
  /** A Delta acknowledged the inputs up to `ack`. */
  acked(ack: number): void;
  /** Tells the app. */
  emit<K extends "delta" | "event">(name: K, ...args: Parameters<ZoneConnectionEvents[K]>): void;
}

/** The session's view of its zone, carried over reconnects. */
export class ZoneView {
  /** The known set (null before the first Welcome). */
  mirror: Mirror | null = null;
  /** The tick of the last Delta received. */
  lastDeltaTick = 0;
  /** The last input seq the zone acknowledged. */
  lastAck = 0;
  /** The entity this player controls, from the last Delta with CONTROL (null = none). */
  controlled: number | null = null;
  /** A Resync was sent: Deltas are skipped until the BASELINE that answers it. */
  awaitingBaseline = false;
  /** Resyncs sent, Deltas skipped while awaiting their BASELINE, and inputs the host refused. */
  readonly counts = { resyncs: 0, deltasSkipped: 0, inputsRefused: 0 };
  private readonly port: ZoneViewPort;

  /** A view with nothing known yet. */
  constructor(port: ZoneViewPort) {
    this.port = port;
  }

  /** A Delta message (tag included) of a WebSocket session, received at `now`. */
  receiveDelta(bytes: Uint8Array, now: number): void {
    const mirror = this.mirror;
    if (mirror === null) throw new DecodeError("invalid", "Delta before Welcome");
    if (this.awaitingBaseline) {
      if (!isBaseline(bytes)) {
        this.counts.deltasSkipped += 1;
        return;
      }
      this.awaitingBaseline = false;
    }
    let received: ReturnType<Mirror["receive"]>;
    try {
      received = mirror.receive(bytes);
    } catch (e) {
      // The known set no longer matches the host's: ask for a BASELINE on this socket.
      if (!(e instanceof DecodeError)) throw e;
      this.resync(mirror);
      return;
    }
    const { delta, changes } = received;
    this.port.arrive();
    this.port.clock.onDelta(delta.tick, now);
    this.lastDeltaTick = Math.max(this.lastDeltaTick, delta.tick);
    this.lastAck = delta.ack;
    this.port.acked(delta.ack);
    if (delta.control !== undefined) this.controlled = delta.control;
    this.port.emit("delta", delta, { mirror, changes, recvMs: now });
    for (const ev of delta.events ?? []) this.port.emit("event", ev, delta.tick);
  }

  /** A State the session's ring applied (§5.8), received at `now`: the ring's state is shown now. */
  showState(res: StateApplied, now: number): void {
    const { delta, changes, mirror, state } = res;
    this.port.arrive();
    this.mirror = mirror;
    this.port.clock.onDelta(delta.tick, now);
    this.lastDeltaTick = Math.max(this.lastDeltaTick, delta.tick);
    this.lastAck = delta.ack;
    if (delta.control !== undefined) this.controlled = delta.control;
    this.port.emit("delta", delta, { mirror, changes, recvMs: now, state });
  }

  /**
   * Compares the host's check with the known set (§5.7). A mismatch, or a check while a BASELINE
   * is still awaited (the host honours one Resync a second), sends Resync.
   */
  checkKnownSet(c: KnownSetCheck): void {
    const mirror = this.mirror;
    if (mirror === null) return;
    if (!this.awaitingBaseline && mirror.matches(c)) return;
    this.resync(mirror);
  }

  private resync(mirror: Mirror): void {
    this.awaitingBaseline = true;
    this.counts.resyncs += 1;
    this.port.send({ type: "resync", tick: mirror.tick });
  }
}
