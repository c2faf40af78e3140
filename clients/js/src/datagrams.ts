/**
 * The datagrams of a {@link ZoneConnection}'s WebTransport session. States arrive through the
 * session's {@link StateRing} (§5.8): late, repeated and baseless ones are counted and dropped, an
 * applied one is shown as the change from the state shown before. Inputs leave in Inputs datagrams
 * (§4.5), each repeating the inputs no State has acknowledged and carrying the newest State applied
 * as its ack; when no input carries that ack soon enough, an Inputs datagram of its own does, at
 * most once a patch.
 */

import type { StateStats } from "./connectiontypes.js";
import { inputsDatagram, STATE_ACK_HOLD_MS } from "./inputs.js";
import { LIMITS, Tag, type DatagramInput, type Welcome } from "./messages.js";
import type { Mirror } from "./mirror.js";
import type { Scheduler, TimerHandle } from "./scheduler.js";
import { StateRing, type StateApplied } from "./states.js";
import type { Traffic } from "./traffic.js";
import type { WebTransportSocket } from "./webtransport.js";
import { DecodeError } from "./wire.js";

/** What {@link Datagrams} needs of its connection. */
export interface DatagramPort {
  /** Time. */
  readonly scheduler: Scheduler;
  /** The current socket when it is a WebTransport session (null otherwise). */
  socket(): WebTransportSocket | null;
  /** The current socket's Welcome arrived. */
  welcomed(): boolean;
  /** The last Welcome (null before the first). */
  welcome(): Welcome | null;
  /** Runs `fn` after `ms`, unless the socket is gone by then. */
  later(fn: () => void, ms: number): TimerHandle;
  /** What the connection counts. */
  readonly traffic: Traffic;
  /** Shows a State the ring applied, received at `now`. */
  show(res: StateApplied, now: number): void;
}

/** The States and Inputs of the WebTransport sessions of a connection. */
export class Datagrams {
  /** The states of a WebTransport session (§5.8); null over WebSocket. */
  ring: StateRing | null = null;
  /** Inputs no State has acknowledged yet, oldest first (at most {@link LIMITS.datagramInputs}). */
  pending: DatagramInput[] = [];
  /** What the WebTransport sessions did with their States (§5.8). */
  readonly counts: StateStats = { applied: 0, stale: 0, noBase: 0, undecodable: 0, early: 0 };
  /** The newest State tick an Inputs datagram carried as its ack. */
  private ackSent = 0;
  /** When the last ack-only Inputs datagram went (at most one per patch). */
  private ackOnlyAt = Number.NEGATIVE_INFINITY;
  private ackTimer: TimerHandle | null = null;
  /** The highest input ack any State carried (pending inputs at or below it are dropped). */
  private inputAck = 0;
  private readonly port: DatagramPort;

  /** Datagrams of no session yet. */
  constructor(port: DatagramPort) {
    this.port = port;
  }

  /**
   * A Welcome on a WebTransport session: a new ring, whose current state is the session's known set
   * (returned). A resumed player's unacknowledged inputs (`again`) are repeated with the next Inputs
   * datagram; a new player's sequence starts over.
   */
  begin(w: Welcome, resumed: boolean, again: DatagramInput[]): Mirror {
    this.ring = new StateRing(w.schema);
    this.ackSent = 0;
    this.ackOnlyAt = Number.NEGATIVE_INFINITY;
    if (resumed) this.pending = again.slice(-LIMITS.datagramInputs);
    else this.inputAck = 0;
    return this.ring.current;
  }

  /** The socket is gone, and with it the timer of its acknowledgement. */
  dropped(): void {
    this.ackTimer = null;
  }

  /**
   * Sends a new input in an Inputs datagram with the unacknowledged ones (§4.5); throws an
   * {@link EncodeError} when it does not fit the session's datagrams (the input is not kept then).
   */
  queue(input: DatagramInput): void {
    this.pending.push(input);
    try {
      this.send(true);
    } catch (e) {
      this.pending = this.pending.filter((p) => p !== input);
      throw e;
    }
    while (this.pending.length > LIMITS.datagramInputs) this.pending.shift();
  }

  /**
   * Sends an Inputs datagram (§4.5): the pending inputs, newest last, as many as fit the session's
   * datagrams, and the newest State applied as `ack`. With `newInput`, the newest pending input is
   * one being sent for the first time and must fit (else {@link EncodeError} `too_long`: a platform
   * drops an oversized datagram without a word); an acknowledgement sheds inputs down to none.
   */
  private send(newInput = false): void {
    const sock = this.port.socket();
    if (sock === null) return;
    const ack = this.ring?.ackTick ?? 0;
    const max = sock.maxDatagramSize;
    const bytes = inputsDatagram(this.pending, ack, max, newInput);
    if (bytes === null) return;
    if (!sock.sendDatagram(bytes)) return;
    this.ackSent = Math.max(this.ackSent, ack);
    this.port.traffic.sent(bytes.length, this.port.scheduler.now(), true);
  }

  /**
   * After a State was applied: acknowledge it with the next input, or with an Inputs datagram of its
   * own (the pending inputs, if any) when no input went within {@link STATE_ACK_HOLD_MS}, at most once
   * per patch (§4.5).
   */
  private ackStates(): void {
    const ring = this.ring;
    const w = this.port.welcome();
    const sock = this.port.socket();
    if (ring === null || w === null || sock === null || ring.ackTick <= this.ackSent || this.ackTimer !== null) return;
    const patchMs = (w.patchEvery * 1000) / w.tickHz;
    const now = this.port.scheduler.now();
    const due = Math.max(this.ackOnlyAt + patchMs, now + STATE_ACK_HOLD_MS);
    const go = (): void => {
      if (this.ring === null || this.ring.ackTick <= this.ackSent) return;
      this.ackOnlyAt = this.port.scheduler.now();
      this.send();
    };
    this.ackTimer = this.port.later(() => {
      this.ackTimer = null;
      go();
    }, due - now);
  }

  /** A State acknowledged inputs up to `ack`: they need not be repeated any more. */
  private onInputAck(ack: number): void {
    if (ack <= this.inputAck) return;
    this.inputAck = ack;
    this.pending = this.pending.filter((p) => p.seq > ack);
  }

  /** One datagram of a WebTransport session: a State (§5.8). */
  receive(bytes: Uint8Array): void {
    const now = this.port.scheduler.now();
    this.port.traffic.received(bytes.length, now, true);
    // A State may overtake the Welcome on the stream: drop it, the host repeats what is not acknowledged.
    if (!this.port.welcomed() || this.ring === null) {
      this.counts.early += 1;
      return;
    }
    if (bytes[0] !== Tag.State) {
      this.counts.undecodable += 1;
      return;
    }
    this.apply(bytes, now);
  }

  /**
   * Applies a State through the ring (§5.8) and reports it as 'delta': the change from the state
   * shown before. Late, repeated and baseless States are counted and dropped; so is one that does
   * not apply to its base (the host falls back to a BASELINE when no acknowledgement comes).
   */
  apply(bytes: Uint8Array, now: number): void {
    const ring = this.ring;
    if (ring === null) throw new DecodeError("invalid", "State before Welcome");
    let res: ReturnType<StateRing["apply"]>;
    try {
      res = ring.apply(bytes);
    } catch (e) {
      if (!(e instanceof DecodeError)) throw e;
      this.counts.undecodable += 1;
      return;
    }
    this.onInputAck(res.head.ack);
    if (res.status !== "applied") {
      if (res.status === "stale") this.counts.stale += 1;
      else this.counts.noBase += 1;
      return;
    }
    this.counts.applied += 1;
    this.port.show(res, now);
    this.ackStates();
  }
}
