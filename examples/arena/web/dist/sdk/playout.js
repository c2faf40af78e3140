/**
 * The playout point of a {@link Replica}: how far behind the newest data frames are drawn.
 *
 * Every Delta's arrival gives `a = arrival − tick × msPerTick` (client time minus the tick's place on
 * the server's timeline: a constant clock offset plus that Delta's transit time). A frame drawn at
 * client time `now` shows server time `now − P`; the sample after that moment has arrived when
 * `P ≥ a + patch interval`. So the target P is a high quantile of the recent `a` values plus one
 * patch interval plus a margin of the RFC 3550 jitter — measured, not assumed: on a WebSocket a lost
 * packet holds every later message back until TCP retransmits it (head-of-line blocking), and those
 * stalls, not the average jitter, are what the delay must cover.
 *
 * The delay (P above the fastest recent delivery) is clamped, and P moves at a bounded rate: drawn
 * time runs at most `growRate` slower while the delay grows and `shrinkRate` faster while it shrinks,
 * so adapting never jumps or freezes the picture.
 *
 * A stall of the page is not network lateness: while the main thread is blocked (a long task, a
 * garbage collection, a tab switch) neither frames nor message handlers run, and the Deltas that
 * arrived meanwhile are handled together when it ends, stamped as if the network had held them
 * back. When nothing of the page ran for `pageStallMs` (no frame, no Delta), the Deltas handled in
 * the `pageBurstMs` after it are not measured (when the network delivered them is unknown), and no
 * frame in that burst counts a Delta as overdue. A network stall is still measured: the page keeps
 * drawing frames while the Deltas are held back.
 */
/** Adaptive playout delay from measured Delta arrivals. */
export class Playout {
    minDelayMs;
    maxDelayMs;
    jitterFactor;
    quantile;
    windowMs;
    maxArrivals;
    growRate;
    shrinkRate;
    starveRate;
    pageStallMs;
    pageBurstMs;
    arrivals = [];
    /** The last time anything of the page ran (a frame or a Delta), client ms. */
    aliveAt = null;
    /** Deltas handled before this client time came in the burst after a page stall. */
    pageBurstUntil = Number.NEGATIVE_INFINITY;
    /** Deltas not measured because the page, not the network, held them back. */
    pageHeldArrivals = 0;
    sorted = null;
    point = null;
    lastAt = null;
    /** A playout with no arrivals yet. */
    constructor(options = {}) {
        this.minDelayMs = Math.max(0, options.minDelayMs ?? 50);
        this.maxDelayMs = Math.max(this.minDelayMs, options.maxDelayMs ?? 500);
        this.jitterFactor = options.jitterFactor ?? 1;
        this.quantile = Math.min(1, Math.max(0, options.quantile ?? 0.99));
        this.windowMs = Math.max(1, options.windowMs ?? 10_000);
        this.maxArrivals = Math.max(2, options.maxArrivals ?? 1024);
        this.growRate = Math.max(0, options.growRate ?? 0.25);
        this.shrinkRate = Math.max(0, options.shrinkRate ?? 0.05);
        this.starveRate = Math.max(this.growRate, options.starveRate ?? 0.5);
        this.pageStallMs = Math.max(1, options.pageStallMs ?? 250);
        this.pageBurstMs = Math.max(0, options.pageBurstMs ?? 50);
    }
    /** Something of the page runs at `nowMs`: after a gap longer than `pageStallMs`, a burst begins. */
    alive(nowMs) {
        if (this.aliveAt !== null && nowMs - this.aliveAt > this.pageStallMs)
            this.pageBurstUntil = nowMs + this.pageBurstMs;
        if (this.aliveAt === null || nowMs > this.aliveAt)
            this.aliveAt = nowMs;
        return nowMs <= this.pageBurstUntil;
    }
    /** Records the arrival at client time `recvMs` of the Delta for tick `tick` (`msPerTick` > 0). */
    observe(tick, recvMs, msPerTick) {
        if (!(msPerTick > 0) || !Number.isFinite(recvMs))
            return;
        if (this.alive(recvMs)) {
            this.pageHeldArrivals += 1;
            return;
        }
        this.arrivals.push({ at: recvMs, a: recvMs - tick * msPerTick });
        if (this.arrivals.length > this.maxArrivals)
            this.arrivals.shift();
        this.sorted = null;
    }
    /** Forgets every arrival and the playout point (a new zone or host: a new timeline). */
    reset() {
        this.arrivals = [];
        this.sorted = null;
        this.point = null;
        this.lastAt = null;
        this.aliveAt = null;
        this.pageBurstUntil = Number.NEGATIVE_INFINITY;
    }
    expire(nowMs) {
        let drop = 0;
        // Keep at least two arrivals, so a long quiet spell does not forget the timeline.
        while (drop < this.arrivals.length - 2 && nowMs - (this.arrivals[drop]?.at ?? nowMs) > this.windowMs)
            drop++;
        if (drop > 0) {
            this.arrivals.splice(0, drop);
            this.sorted = null;
        }
    }
    values() {
        if (this.sorted === null)
            this.sorted = this.arrivals.map((r) => r.a).sort((x, y) => x - y);
        return this.sorted;
    }
    /** The fastest recent delivery (the smallest `a`), or null before any arrival. */
    fastest() {
        const v = this.values();
        return v.length === 0 ? null : (v[0] ?? null);
    }
    /**
     * The playout point wanted now, given the patch interval and jitter (null before any arrival).
     * `overdue` is a lower bound of the lateness of a Delta that has not arrived yet.
     */
    targetPoint(patchMs, jitterMs, overdue = Number.NEGATIVE_INFINITY) {
        const v = this.values();
        const lo = v[0];
        if (lo === undefined)
            return null;
        const hi = Math.max(v[Math.min(v.length - 1, Math.floor(this.quantile * (v.length - 1)))] ?? lo, overdue);
        const want = hi + patchMs + this.jitterFactor * jitterMs;
        return Math.min(lo + this.maxDelayMs, Math.max(lo + this.minDelayMs, want));
    }
    /**
     * Moves the playout point towards its target for a frame at `nowMs` and returns it (client ms
     * minus server-timeline ms: the frame shows server time `nowMs − point`), or null before any arrival.
     * `newestTick` is the newest Delta's tick: while the next one is overdue (a stall in progress), its
     * lateness so far already counts, so drawn time slows down before it runs out of data.
     */
    advance(nowMs, patchMs, jitterMs, newestTick = null, msPerTick = 0) {
        this.expire(nowMs);
        // Right after a page stall the Deltas it held may not be handled yet: not overdue by the network.
        const pageBurst = this.alive(nowMs);
        const overdue = newestTick !== null && msPerTick > 0 && !pageBurst
            ? nowMs - (newestTick + patchMs / msPerTick) * msPerTick
            : Number.NEGATIVE_INFINITY;
        const target = this.targetPoint(patchMs, jitterMs, overdue);
        if (target === null)
            return this.point;
        const measured = this.targetPoint(patchMs, jitterMs);
        const starving = measured !== null && target > measured;
        if (this.point === null || this.lastAt === null) {
            // First frame: nothing is on screen yet, so start where we want to be.
            this.point = target;
        }
        else {
            const dt = Math.min(100, Math.max(0, nowMs - this.lastAt));
            const step = target - this.point;
            const grow = starving ? this.starveRate : this.growRate;
            this.point += step > 0 ? Math.min(step, grow * dt) : Math.max(step, -this.shrinkRate * dt);
        }
        this.lastAt = nowMs;
        return this.point;
    }
    /** The current delay above the fastest recent delivery, ms (the minimum before any arrival). */
    get delayMs() {
        const lo = this.fastest();
        if (lo === null || this.point === null)
            return this.minDelayMs;
        return this.point - lo;
    }
    /** The delay the playout is moving towards, ms. */
    targetDelayMs(patchMs, jitterMs) {
        const lo = this.fastest();
        const target = this.targetPoint(patchMs, jitterMs);
        return lo === null || target === null ? this.minDelayMs : target - lo;
    }
}
