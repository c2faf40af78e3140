/**
 * Time and timers behind an interface, so that a connection can be driven by a manual clock in tests
 * (no sleeps) and by the platform's clock in a browser or in Node.
 */
/** The platform scheduler: `performance.now()` and the global timers. */
export const systemScheduler = {
    now: () => performance.now(),
    setTimeout: (fn, ms) => globalThis.setTimeout(fn, ms),
    clearTimeout: (h) => globalThis.clearTimeout(h),
};
/**
 * A manual scheduler: time only moves when {@link ManualScheduler.advance} is called, and due timers
 * fire in time order (ties in the order they were set). Used by the SDK's tests and useful for games'.
 */
export class ManualScheduler {
    t;
    nextId = 1;
    timers = new Map();
    /** A scheduler whose clock starts at `startMs`. */
    constructor(startMs = 0) {
        this.t = startMs;
    }
    /** Current manual time. */
    now() {
        return this.t;
    }
    /** Schedules `fn` at `now + ms`. */
    setTimeout(fn, ms) {
        const id = this.nextId++;
        this.timers.set(id, { at: this.t + Math.max(0, ms), fn, order: id });
        return id;
    }
    /** Cancels a timer. */
    clearTimeout(handle) {
        if (typeof handle === "number")
            this.timers.delete(handle);
    }
    /** Number of timers not yet fired. */
    get pending() {
        return this.timers.size;
    }
    /** Moves time forward by `ms`, firing every timer that falls due (including ones set meanwhile). */
    advance(ms) {
        const end = this.t + ms;
        for (;;) {
            let next = null;
            for (const entry of this.timers) {
                if (entry[1].at > end)
                    continue;
                if (next === null || entry[1].at < next[1].at || (entry[1].at === next[1].at && entry[1].order < next[1].order)) {
                    next = entry;
                }
            }
            if (next === null)
                break;
            this.timers.delete(next[0]);
            this.t = Math.max(this.t, next[1].at);
            next[1].fn();
        }
        this.t = end;
    }
}
