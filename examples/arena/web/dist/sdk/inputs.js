/**
 * The inputs a {@link ZoneConnection} keeps until the host acknowledges them: how many it keeps to
 * send again after a resume and which those are (§4.2), how long a State's acknowledgement waits
 * for an input to carry it, and the Inputs datagram that repeats the unacknowledged ones (§4.5).
 */
import { encodeClientMessage, LIMITS } from "./messages.js";
import { EncodeError } from "./wire.js";
/**
 * Unacknowledged inputs a connection keeps to send again after a resume, at most: under the host's
 * default input burst of 30 (§4.6), so none of them is dropped for its rate.
 */
export const UNACKED_KEPT = 24;
/**
 * How long a State's acknowledgement waits for an input to carry it before it goes in an Inputs
 * datagram of its own (§4.5): every datagram costs the host a receive and a QUIC acknowledgement of
 * its own. Under QUIC's default `max_ack_delay` (25 ms), so the datagram still carries the
 * browser's QUIC acknowledgement of the State, and well under a patch interval, so the host still
 * writes the next State against it.
 */
export const STATE_ACK_HOLD_MS = 20;
/**
 * The inputs of `sent` (WebSocket) and `pending` (WebTransport) that no Delta or State acknowledged
 * (a seq after `lastAck`), each once, oldest first, at most {@link UNACKED_KEPT}.
 */
export function unackedAfter(sent, pending, lastAck) {
    const bySeq = new Map();
    for (const i of [...sent, ...pending]) {
        if (i.seq > lastAck && !bySeq.has(i.seq))
            bySeq.set(i.seq, i);
    }
    return [...bySeq.values()].sort((a, b) => a.seq - b.seq).slice(-UNACKED_KEPT);
}
/**
 * An Inputs datagram of at most `max` bytes: the newest of `pending` that fit, older ones shed
 * first, and `ack`; null when not even an ack-only one encodes. With `newInput`, the newest of
 * `pending` must fit (else {@link EncodeError} `too_long`).
 */
export function inputsDatagram(pending, ack, max, newInput) {
    let inputs = pending.slice(-LIMITS.datagramInputs);
    let bytes;
    for (;;) {
        try {
            bytes = encodeClientMessage({ type: "inputs", stateAck: ack, inputs });
        }
        catch (e) {
            // Too long with the older inputs (the 8,192-byte message limit): drop them first.
            if (!(e instanceof EncodeError && e.kind === "too_long") || (newInput && inputs.length <= 1))
                throw e;
            bytes = null;
        }
        if (bytes !== null && bytes.length <= max)
            break;
        if (newInput && inputs.length <= 1) {
            throw new EncodeError("too_long", `an Inputs datagram of ${bytes?.length ?? 0} bytes does not fit the session's ${max}`);
        }
        // An ack-only datagram is a few bytes: nothing left to shed, it goes as it is.
        if (inputs.length === 0)
            break;
        inputs = inputs.slice(1);
    }
    return bytes;
}
