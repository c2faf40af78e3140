/**
 * Server tick estimation. The client keeps an offset between its own clock and the server's tick
 * timeline (`serverMs = tick × 1000 / tick_hz`), learned from two sources:
 *
 * - Pong round trips: a Pong for a Ping sent at `s` and received at `r` says the server was at `tick`
 *   around `s + rtt/2`. Of the recent samples the one with the smallest RTT is trusted (its midpoint is
 *   the least uncertain), which filters out queueing delay.
 * - Delta arrivals: a Delta for tick `t` cannot arrive before the server reached `t`, so
 *   `t·msPerTick − arrival` is a lower bound of the offset; it seeds the estimate before the first
 *   Pong and corrects it if the round-trip estimate falls below the bound. The spread of arrival times
 *   against tick times gives the interarrival jitter (RFC 3550 style) that sizes the interpolation delay.
 *
 * Times are client milliseconds from an injectable clock; nothing here reads a clock itself.
 */
/** Estimates the server's current tick, RTT and jitter. */
export class ServerClock {
    tickHz = 0;
    msPerTick = 0;
    window;
    deltaWindow;
    snapMs;
    pongs = [];
    deltaBounds = [];
    offset = null;
    lastDelta = null;
    srtt = null;
    rttvar = 0;
    arrivalJitter = 0;
    arrivalLag = null;
    /** Pong samples received since the last reset. */
    pongCount = 0;
    /** A clock with no estimate yet. */
    constructor(options = {}) {
        this.window = Math.max(1, options.window ?? 16);
        this.deltaWindow = Math.max(1, options.deltaWindow ?? 64);
        this.snapMs = options.snapMs ?? 100;
    }
    /**
     * Starts over for a zone running at `tickHz` (called on Welcome). The Welcome's tick seeds the
     * estimate as a lower bound, like a Delta arrival. RTT and jitter are kept: the path is the same.
     */
    reset(tickHz, tick, nowMs) {
        this.tickHz = tickHz;
        this.msPerTick = 1000 / tickHz;
        this.pongs = [];
        this.deltaBounds = [];
        this.offset = null;
        this.lastDelta = null;
        this.arrivalLag = null;
        this.pongCount = 0;
        this.addBound(tick * this.msPerTick - nowMs);
    }
    /** Ticks per second of the zone (0 before the first {@link reset}). */
    get hz() {
        return this.tickHz;
    }
    /** True once a Pong has been measured. */
    get synced() {
        return this.pongCount > 0;
    }
    /** Smoothed round-trip time in ms (0 before the first Pong). */
    get rttMs() {
        return this.srtt ?? 0;
    }
    /** Mean deviation of the RTT in ms. */
    get rttVarMs() {
        return this.rttvar;
    }
    /** Interarrival jitter of Deltas in ms (how irregularly patches arrive). */
    get jitterMs() {
        return this.arrivalJitter;
    }
    /** Current estimate of `serverMs − clientMs` (null before any sample). */
    get offsetMs() {
        return this.offset;
    }
    /** Records the answer to a Ping sent at `sentMs` and received at `recvMs`. */
    onPong(sentMs, recvMs, tick) {
        if (this.tickHz === 0 || !(recvMs >= sentMs))
            return;
        const rtt = recvMs - sentMs;
        // The Pong's tick is an integer: the server was somewhere inside it, so take its middle.
        const offset = (tick + 0.5) * this.msPerTick - (sentMs + rtt / 2);
        this.pongs.push({ rtt, offset });
        if (this.pongs.length > this.window)
            this.pongs.shift();
        this.pongCount += 1;
        if (this.srtt === null) {
            this.srtt = rtt;
            this.rttvar = rtt / 2;
        }
        else {
            // RFC 6298 smoothing.
            this.rttvar += (Math.abs(this.srtt - rtt) - this.rttvar) / 4;
            this.srtt += (rtt - this.srtt) / 8;
        }
        this.update();
    }
    /** Records the arrival of the Delta for `tick` at `recvMs`. */
    onDelta(tick, recvMs) {
        if (this.tickHz === 0)
            return;
        if (this.lastDelta !== null && tick > this.lastDelta.tick) {
            const d = recvMs - this.lastDelta.at - (tick - this.lastDelta.tick) * this.msPerTick;
            this.arrivalJitter += (Math.abs(d) - this.arrivalJitter) / 16;
        }
        if (this.lastDelta === null || tick >= this.lastDelta.tick)
            this.lastDelta = { tick, at: recvMs };
        this.addBound(tick * this.msPerTick - recvMs);
        if (this.offset !== null) {
            // How old a Delta is when it arrives, by our own estimate of server time (one-way latency plus
            // estimation error): data for "now" is always this far behind, so interpolation must be too.
            const lag = Math.max(0, recvMs + this.offset - tick * this.msPerTick);
            this.arrivalLag = this.arrivalLag === null ? lag : this.arrivalLag + (lag - this.arrivalLag) / 8;
        }
    }
    /** Smoothed age of Deltas on arrival in ms (server time of arrival minus the Delta's tick time). */
    get deltaLagMs() {
        return this.arrivalLag ?? (this.srtt ?? 0) / 2;
    }
    addBound(bound) {
        this.deltaBounds.push(bound);
        if (this.deltaBounds.length > this.deltaWindow)
            this.deltaBounds.shift();
        this.update();
    }
    lowerBound() {
        if (this.deltaBounds.length === 0)
            return null;
        return Math.max(...this.deltaBounds);
    }
    update() {
        const bound = this.lowerBound();
        let target = null;
        let best = null;
        for (const s of this.pongs)
            if (best === null || s.rtt < best.rtt)
                best = s;
        if (best !== null)
            target = best.offset;
        else if (bound !== null)
            target = bound + (this.srtt ?? 0) / 2;
        if (target !== null && bound !== null && target < bound)
            target = bound;
        if (target === null)
            return;
        if (this.offset === null || Math.abs(target - this.offset) > this.snapMs)
            this.offset = target;
        else
            this.offset += (target - this.offset) / 4;
    }
    /** Estimated server tick (fractional) at client time `nowMs`; NaN before any sample. */
    serverTick(nowMs) {
        if (this.offset === null || this.tickHz === 0)
            return Number.NaN;
        return ((nowMs + this.offset) * this.tickHz) / 1000;
    }
    /** Milliseconds of server time for `ticks` ticks. */
    ticksToMs(ticks) {
        return ticks * this.msPerTick;
    }
}
