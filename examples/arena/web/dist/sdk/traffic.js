/**
 * What a {@link ZoneConnection} counts ({@link ConnectionStats}): bytes, messages and datagrams each
 * way, the bytes also as a rate over the last second; Redirects followed, Welcomes reached through a
 * listed entry, resumes, fresh joins and moves to another zone.
 */
/** The counters of a connection, over all its sessions. */
export class Traffic {
    /** Every count but the rates. */
    counts = {
        bytesIn: 0,
        bytesOut: 0,
        messagesIn: 0,
        messagesOut: 0,
        redirects: 0,
        entryFallbacks: 0,
        resumes: 0,
        freshJoins: 0,
        transfers: 0,
        datagramsIn: 0,
        datagramsOut: 0,
    };
    inMeter = new RateMeter();
    outMeter = new RateMeter();
    /** A message of `bytes` received at `now` (a datagram: a State). */
    received(bytes, now, datagram = false) {
        this.counts.bytesIn += bytes;
        this.counts.messagesIn += 1;
        if (datagram)
            this.counts.datagramsIn += 1;
        this.inMeter.add(now, bytes);
    }
    /** A message of `bytes` sent at `now` (a datagram: Inputs). */
    sent(bytes, now, datagram = false) {
        this.counts.bytesOut += bytes;
        this.counts.messagesOut += 1;
        if (datagram)
            this.counts.datagramsOut += 1;
        this.outMeter.add(now, bytes);
    }
    /** The counts, and the byte rates over the second before `now`. */
    stats(now) {
        return {
            ...this.counts,
            bytesInPerSec: this.inMeter.perSecond(now),
            bytesOutPerSec: this.outMeter.perSecond(now),
        };
    }
}
/** Bytes per second over a sliding one-second window of 100 ms buckets (bounded memory). */
class RateMeter {
    buckets = new Float64Array(10);
    bucketStart = 0;
    head = 0;
    /** `n` bytes at `nowMs`. */
    add(nowMs, n) {
        this.roll(nowMs);
        this.buckets[this.head] = (this.buckets[this.head] ?? 0) + n;
    }
    /** The bytes of the second before `nowMs`. */
    perSecond(nowMs) {
        this.roll(nowMs);
        let sum = 0;
        for (const b of this.buckets)
            sum += b;
        return sum;
    }
    roll(nowMs) {
        const bucket = Math.floor(nowMs / 100);
        const steps = Math.min(10, bucket - this.bucketStart);
        if (steps <= 0)
            return;
        for (let i = 0; i < steps; i++) {
            this.head = (this.head + 1) % 10;
            this.buckets[this.head] = 0;
        }
        this.bucketStart = bucket;
    }
}
