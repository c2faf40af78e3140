/**
 * The entities the client sees, drawn through an interpolation buffer.
 *
 * Every Delta adds timed samples (server tick → quantized position and field values) to each changed
 * entity's track. A frame is drawn `delay` behind the estimated server time: each entity's position is
 * interpolated between the two samples around that render tick; field values, spawns and despawns take
 * effect exactly at the tick they happened. The delay covers one patch interval plus a multiple of the
 * measured arrival jitter, clamped to [minDelayMs, maxDelayMs], and changes slowly (a bounded time warp)
 * so motion never jumps when it adapts.
 */
/** The client's interpolated view of the zone. */
export class Replica {
    clock;
    minDelayMs;
    maxDelayMs;
    jitterFactor;
    adaptRate;
    maxSamples;
    schema = null;
    patchEvery = 1;
    live = new Map();
    retiring = [];
    lastDeltaTick = null;
    delay;
    lastFrameAt = null;
    lastRenderTick = Number.NEGATIVE_INFINITY;
    visible = new Set();
    /** Samples dropped because a track was full. */
    droppedSamples = 0;
    /** A replica drawing against `clock`'s server time estimate. */
    constructor(clock, options = {}) {
        this.clock = clock;
        this.minDelayMs = options.minDelayMs ?? 50;
        this.maxDelayMs = Math.max(this.minDelayMs, options.maxDelayMs ?? 400);
        this.jitterFactor = options.jitterFactor ?? 2;
        this.adaptRate = options.adaptRate ?? 0.1;
        this.maxSamples = Math.max(2, options.maxSamples ?? 32);
        this.delay = this.minDelayMs;
    }
    /** Starts a zone session (on Welcome): the schema and cadence the samples are read with. */
    setZone(schema, patchEvery) {
        this.schema = schema;
        this.patchEvery = patchEvery;
    }
    /** The current interpolation delay in ms. */
    get delayMs() {
        return this.delay;
    }
    /** The server tick of the last frame, floored (what an Input's `view_tick` should carry). */
    get viewTick() {
        return Number.isFinite(this.lastRenderTick) ? Math.max(0, Math.floor(this.lastRenderTick)) : 0;
    }
    /** The delay the replica is adapting towards. */
    targetDelayMs() {
        const hz = this.clock.hz || 1;
        const patchMs = (this.patchEvery * 1000) / hz;
        const want = patchMs + this.jitterFactor * this.clock.jitterMs;
        return Math.min(this.maxDelayMs, Math.max(this.minDelayMs, want));
    }
    /** Records a Delta that was just applied to `mirror` (the mirror holds the state after it). */
    onDelta(delta, mirror) {
        const t = delta.tick;
        // Entities a Delta does not mention were unchanged through the previous patch.
        const confirmed = Math.max(this.lastDeltaTick ?? t, t - this.patchEvery);
        if (delta.baseline) {
            const present = new Set(delta.spawns.map((s) => s.id));
            for (const [id, track] of this.live) {
                const spawn = mirror.get(id);
                if (!present.has(id) || spawn === undefined || spawn.kind !== track.kind)
                    this.retire(id, t);
            }
        }
        else {
            for (const id of delta.despawns)
                this.retire(id, t);
        }
        for (const u of delta.updates) {
            const e = mirror.get(u.id);
            const track = this.live.get(u.id);
            if (e !== undefined && track !== undefined)
                this.push(track, t, confirmed, e.qx, e.qy, e.fields);
        }
        for (const s of delta.spawns) {
            const e = mirror.get(s.id);
            if (e === undefined)
                continue;
            const track = this.live.get(s.id);
            if (track !== undefined) {
                // A BASELINE re-sent an entity we already draw: continue its track.
                this.push(track, t, confirmed, e.qx, e.qy, e.fields);
            }
            else {
                this.live.set(s.id, {
                    id: s.id,
                    kind: s.kind,
                    spawnTick: t,
                    despawnTick: null,
                    samples: [{ tick: t, qx: e.qx, qy: e.qy, fields: [...e.fields] }],
                });
            }
        }
        if (this.lastDeltaTick === null || t > this.lastDeltaTick)
            this.lastDeltaTick = t;
    }
    retire(id, tick) {
        const track = this.live.get(id);
        if (track === undefined)
            return;
        this.live.delete(id);
        track.despawnTick = tick;
        this.retiring.push(track);
    }
    push(track, t, confirmed, qx, qy, fields) {
        const last = track.samples[track.samples.length - 1];
        if (last !== undefined && last.tick < confirmed && confirmed < t) {
            // Hold the previous state until the patch before this one, so motion starts when it did.
            this.append(track, { ...last, tick: confirmed });
        }
        const sample = { tick: t, qx, qy, fields: [...fields] };
        const tail = track.samples[track.samples.length - 1];
        if (tail !== undefined && tail.tick >= t)
            track.samples[track.samples.length - 1] = sample;
        else
            this.append(track, sample);
    }
    append(track, s) {
        track.samples.push(s);
        if (track.samples.length > this.maxSamples) {
            track.samples.shift();
            this.droppedSamples += 1;
        }
    }
    /**
     * Feeds this replica from `conn` (Welcome and Delta events) and makes `conn` stamp inputs with this
     * replica's render tick. Returns a function that detaches it.
     */
    attach(conn) {
        const offWelcome = conn.on("welcome", (w, info) => {
            if (!info.resumed)
                this.clear();
            this.setZone(w.schema, w.patchEvery);
        });
        const offDelta = conn.on("delta", (d, info) => this.onDelta(d, info.mirror));
        conn.setViewTickSource(() => this.viewTick);
        return () => {
            offWelcome();
            offDelta();
            conn.setViewTickSource(null);
        };
    }
    /** Forgets everything (a new zone, or a fresh join). */
    clear() {
        this.live.clear();
        this.retiring = [];
        this.lastDeltaTick = null;
        this.lastRenderTick = Number.NEGATIVE_INFINITY;
        this.visible = new Set();
    }
    /** Computes the frame to draw at client time `nowMs`. */
    frame(nowMs) {
        const target = this.targetDelayMs();
        if (this.lastFrameAt === null) {
            // First frame: nothing is on screen yet, so start at the wanted delay.
            this.delay = target;
        }
        else {
            const dt = Math.min(100, Math.max(0, nowMs - this.lastFrameAt));
            const maxChange = this.adaptRate * dt;
            this.delay += Math.max(-maxChange, Math.min(maxChange, target - this.delay));
        }
        this.lastFrameAt = nowMs;
        const behindMs = this.clock.deltaLagMs + this.delay;
        let renderTick = this.clock.serverTick(nowMs) - (behindMs * this.clock.hz) / 1000;
        if (Number.isNaN(renderTick))
            renderTick = this.lastDeltaTick ?? Number.NaN;
        // Never draw backwards in time: a shrinking offset estimate holds the picture instead.
        if (renderTick < this.lastRenderTick)
            renderTick = this.lastRenderTick;
        if (Number.isFinite(renderTick))
            this.lastRenderTick = renderTick;
        const entities = new Map();
        const step = this.schema?.posStep ?? 1;
        const draw = (track) => {
            if (!(renderTick >= track.spawnTick))
                return;
            if (track.despawnTick !== null && renderTick >= track.despawnTick)
                return;
            entities.set(track.id, this.sampleAt(track, renderTick, step));
        };
        for (const track of this.live.values())
            draw(track);
        for (const track of this.retiring)
            draw(track);
        const entered = new Set();
        const left = new Set();
        for (const id of entities.keys())
            if (!this.visible.has(id))
                entered.add(id);
        for (const id of this.visible)
            if (!entities.has(id))
                left.add(id);
        this.visible = new Set(entities.keys());
        this.retiring = this.retiring.filter((t) => t.despawnTick !== null && !(renderTick >= t.despawnTick));
        for (const track of this.live.values())
            this.prune(track, renderTick);
        return { renderTick, delayMs: this.delay, entities, entered, left };
    }
    sampleAt(track, renderTick, step) {
        const samples = track.samples;
        let a = samples[0];
        let b;
        for (let i = 0; i < samples.length; i++) {
            const s = samples[i];
            if (s === undefined)
                continue;
            if (s.tick <= renderTick)
                a = s;
            else {
                b = s;
                break;
            }
        }
        if (a === undefined)
            return { id: track.id, kind: track.kind, x: 0, y: 0, fields: [] };
        let qx = a.qx;
        let qy = a.qy;
        if (b !== undefined && b.tick > a.tick && renderTick >= a.tick) {
            const alpha = (renderTick - a.tick) / (b.tick - a.tick);
            qx = a.qx + (b.qx - a.qx) * alpha;
            qy = a.qy + (b.qy - a.qy) * alpha;
        }
        return { id: track.id, kind: track.kind, x: qx * step, y: qy * step, fields: a.fields };
    }
    /** Drops samples no frame will need again (all but the last one at or before `renderTick`). */
    prune(track, renderTick) {
        let keepFrom = 0;
        for (let i = 0; i < track.samples.length; i++) {
            const s = track.samples[i];
            if (s !== undefined && s.tick <= renderTick)
                keepFrom = i;
        }
        if (keepFrom > 0)
            track.samples.splice(0, keepFrom);
    }
}
