/**
 * The entities the client sees, drawn through an interpolation buffer.
 *
 * Every Delta adds timed samples (server tick → quantized position and field values) to each changed
 * entity's track. A frame is drawn a delay behind the newest data: each entity's position is
 * interpolated between the two samples around that render tick; field values, spawns and despawns take
 * effect exactly at the tick they happened. The delay is measured ({@link Playout}): one patch interval
 * plus the lateness of nearly every recent Delta (including head-of-line stalls) plus a jitter margin,
 * clamped to [minDelayMs, maxDelayMs], and it changes at a bounded rate so motion never jumps when it
 * adapts. When a Delta is later still, entities that were moving keep moving along their last velocity
 * for at most `maxExtrapolationMs`; when the data arrives, the difference to what was drawn is blended
 * away over `blendMs` instead of being jumped.
 */
import { Playout } from "./playout.js";
/** The client's interpolated view of the zone. */
export class Replica {
    clock;
    playout;
    maxSamples;
    maxExtrapolationMs;
    blendMs;
    schema = null;
    patchEvery = 1;
    live = new Map();
    retiring = [];
    lastDeltaTick = null;
    lastFrameAt = null;
    lastRenderTick = Number.NEGATIVE_INFINITY;
    visible = new Set();
    /**
     * The next BASELINE is a new zone's after a transfer: its entities are drawn from the first
     * frame on (they were there before the client saw them), so the picture never goes blank.
     */
    arriving = false;
    /** Samples dropped because a track was full. */
    droppedSamples = 0;
    /** Frames drawn past the newest data (extrapolating). */
    extrapolatedFrames = 0;
    /** A replica timed by `clock` (its tick rate and jitter) and by the Deltas' arrivals. */
    constructor(clock, options = {}) {
        this.clock = clock;
        this.playout = new Playout(options);
        this.maxSamples = Math.max(2, options.maxSamples ?? 32);
        this.maxExtrapolationMs = Math.max(0, options.maxExtrapolationMs ?? 150);
        this.blendMs = Math.max(1, options.blendMs ?? 150);
    }
    /** Starts a zone session (on Welcome): the schema and cadence the samples are read with. */
    setZone(schema, patchEvery) {
        this.schema = schema;
        this.patchEvery = patchEvery;
    }
    /** The current interpolation delay in ms (above the fastest recent delivery). */
    get delayMs() {
        return this.playout.delayMs;
    }
    /** The server tick of the last frame, floored (what an Input's `view_tick` should carry). */
    get viewTick() {
        return Number.isFinite(this.lastRenderTick) ? Math.max(0, Math.floor(this.lastRenderTick)) : 0;
    }
    patchMs() {
        return (this.patchEvery * 1000) / (this.clock.hz || 1);
    }
    /** The delay the replica is adapting towards. */
    targetDelayMs() {
        return this.playout.targetDelayMs(this.patchMs(), this.clock.jitterMs);
    }
    /**
     * Records a Delta that was just applied to `mirror` (the mirror holds the state after it) and
     * arrived at client time `recvMs` (default: now, by `performance.now()`).
     */
    onDelta(delta, mirror, recvMs = performance.now()) {
        const t = delta.tick;
        if (this.clock.hz > 0)
            this.playout.observe(t, recvMs, 1000 / this.clock.hz);
        // Entities a Delta does not mention were unchanged through the previous patch.
        // Entities a Delta does not mention were unchanged as of the previous Delta. (A host that fell
        // behind a slow link sends one Delta for several patches, so the previous one may be older than
        // one patch interval: a move it reports happened somewhere after the previous Delta.)
        const confirmed = this.lastDeltaTick ?? t;
        const arrived = this.arriving && delta.baseline;
        if (delta.baseline)
            this.arriving = false;
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
                    spawnTick: arrived ? Number.NEGATIVE_INFINITY : t,
                    despawnTick: null,
                    samples: [{ tick: t, qx: e.qx, qy: e.qy, fields: [...e.fields] }],
                    extrapolated: null,
                    offsetX: 0,
                    offsetY: 0,
                    offsetAt: 0,
                });
            }
        }
        if (this.lastDeltaTick === null || t > this.lastDeltaTick)
            this.lastDeltaTick = t;
        this.settleExtrapolations();
    }
    /**
     * New data replaces what was extrapolated: keep the picture where it was by turning the
     * difference into an offset that fades over `blendMs` (a jump would show the guess was wrong).
     */
    settleExtrapolations() {
        const at = this.lastFrameAt ?? 0;
        for (const track of [...this.live.values(), ...this.retiring]) {
            const shown = track.extrapolated;
            if (shown === null)
                continue;
            // What that frame would have drawn with the data known now.
            const now = this.rawFor(track, shown.renderTick);
            const k = this.offsetWeight(track, at);
            track.offsetX = track.offsetX * k + (shown.qx - now.qx);
            track.offsetY = track.offsetY * k + (shown.qy - now.qy);
            track.offsetAt = at;
            track.extrapolated = now.extrapolated ? { renderTick: shown.renderTick, qx: now.qx, qy: now.qy } : null;
        }
    }
    /**
     * The raw position (quanta, no blending offset) of a track for a frame at `renderTick`: on or
     * before the newest data, interpolated (or held); past it, a track the newest Delta moved goes on
     * along its last velocity for at most `maxExtrapolationMs`, and the rest are held.
     */
    rawFor(track, renderTick) {
        const newest = this.lastDeltaTick ?? renderTick;
        const maxAhead = (this.maxExtrapolationMs * (this.clock.hz || 0)) / 1000;
        const ahead = Math.max(0, Math.min(renderTick - newest, maxAhead));
        if (ahead > 0 && this.movedInNewest(track)) {
            return { ...this.rawAt(track, newest + ahead, true), extrapolated: true };
        }
        // Held past the newest data is a guess too ("it stays where it was"): when the data comes, the
        // difference is blended like any other.
        return { ...this.rawAt(track, Math.min(renderTick, newest), false), extrapolated: renderTick > newest };
    }
    /** Whether the newest Delta moved (or changed) this track: only then may it be extrapolated. */
    movedInNewest(track) {
        const last = track.samples[track.samples.length - 1];
        return last !== undefined && this.lastDeltaTick !== null && last.tick >= this.lastDeltaTick && track.despawnTick === null;
    }
    offsetWeight(track, nowMs) {
        return Math.max(0, 1 - (nowMs - track.offsetAt) / this.blendMs);
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
            // A transfer's BASELINE comes in the same task: the new world replaces the old at once.
            if (info.transfer !== null)
                this.arriving = true;
            this.setZone(w.schema, w.patchEvery);
        });
        const offDelta = conn.on("delta", (d, info) => this.onDelta(d, info.mirror, info.recvMs));
        conn.setViewTickSource(() => this.viewTick);
        return () => {
            offWelcome();
            offDelta();
            conn.setViewTickSource(null);
        };
    }
    /**
     * Forgets everything and takes the next BASELINE as a whole new world drawn from the next frame
     * on: what a transfer to another zone needs (attached replicas do it on their own).
     */
    arrive() {
        this.clear();
        this.arriving = true;
    }
    /** Forgets everything (a new zone, or a fresh join). */
    clear() {
        this.live.clear();
        this.retiring = [];
        this.lastDeltaTick = null;
        this.lastRenderTick = Number.NEGATIVE_INFINITY;
        this.visible = new Set();
        // A fresh join may be on another host or zone whose ticks mean another time: measure again.
        this.playout.reset();
    }
    /** Computes the frame to draw at client time `nowMs`. */
    frame(nowMs) {
        const hz = this.clock.hz;
        const point = this.playout.advance(nowMs, this.patchMs(), this.clock.jitterMs, this.lastDeltaTick, hz > 0 ? 1000 / hz : 0);
        this.lastFrameAt = nowMs;
        let renderTick = point === null || !(hz > 0) ? Number.NaN : ((nowMs - point) * hz) / 1000;
        if (Number.isNaN(renderTick))
            renderTick = this.lastDeltaTick ?? Number.NaN;
        // Never draw backwards in time: a shrinking offset estimate holds the picture instead.
        if (renderTick < this.lastRenderTick)
            renderTick = this.lastRenderTick;
        if (Number.isFinite(renderTick))
            this.lastRenderTick = renderTick;
        // Past the newest data: entities that moved in it go on for a bounded time; the rest held still.
        const newest = this.lastDeltaTick ?? renderTick;
        const maxAhead = (this.maxExtrapolationMs * hz) / 1000;
        const ahead = Number.isFinite(renderTick) ? Math.max(0, Math.min(renderTick - newest, maxAhead)) : 0;
        if (renderTick > newest)
            this.extrapolatedFrames += 1;
        const entities = new Map();
        const step = this.schema?.posStep ?? 1;
        const draw = (track) => {
            if (!(renderTick >= track.spawnTick))
                return;
            if (track.despawnTick !== null && renderTick >= track.despawnTick)
                return;
            entities.set(track.id, this.drawTrack(track, renderTick, step, nowMs));
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
        return { renderTick, delayMs: this.playout.delayMs, extrapolatedTicks: ahead, entities, entered, left };
    }
    drawTrack(track, renderTick, step, nowMs) {
        const raw = this.rawFor(track, renderTick);
        const fields = this.fieldsAt(track, renderTick);
        track.extrapolated = raw.extrapolated ? { renderTick, qx: raw.qx, qy: raw.qy } : null;
        const k = this.offsetWeight(track, nowMs);
        const qx = raw.qx + track.offsetX * k;
        const qy = raw.qy + track.offsetY * k;
        return { id: track.id, kind: track.kind, x: qx * step, y: qy * step, fields };
    }
    /**
     * The position (quanta) of a track at `tick`: interpolated between samples; past the last one,
     * held, or continued along the last segment when `extrapolate` (the caller bounds how far).
     */
    rawAt(track, tick, extrapolate) {
        const samples = track.samples;
        let a;
        let b;
        for (const s of samples) {
            if (s.tick <= tick)
                a = s;
            else {
                b = s;
                break;
            }
        }
        if (a === undefined) {
            const first = samples[0];
            return first === undefined ? { qx: 0, qy: 0 } : { qx: first.qx, qy: first.qy };
        }
        if (b !== undefined && b.tick > a.tick) {
            const alpha = (tick - a.tick) / (b.tick - a.tick);
            return { qx: a.qx + (b.qx - a.qx) * alpha, qy: a.qy + (b.qy - a.qy) * alpha };
        }
        const prev = samples[samples.length - 2];
        if (extrapolate && prev !== undefined && a.tick > prev.tick && tick > a.tick) {
            const vx = (a.qx - prev.qx) / (a.tick - prev.tick);
            const vy = (a.qy - prev.qy) / (a.tick - prev.tick);
            return { qx: a.qx + vx * (tick - a.tick), qy: a.qy + vy * (tick - a.tick) };
        }
        return { qx: a.qx, qy: a.qy };
    }
    /** Field values as of `tick` (they change exactly at the tick they happened). */
    fieldsAt(track, tick) {
        let a = track.samples[0];
        for (const s of track.samples) {
            if (s.tick <= tick)
                a = s;
            else
                break;
        }
        return a?.fields ?? [];
    }
    /**
     * Drops samples no frame will need again: all before the last one at or before `renderTick`, but
     * never the one before the newest (the last segment's velocity is what an extrapolation follows).
     */
    prune(track, renderTick) {
        let keepFrom = 0;
        for (let i = 0; i < track.samples.length; i++) {
            const s = track.samples[i];
            if (s !== undefined && s.tick <= renderTick)
                keepFrom = i;
        }
        keepFrom = Math.min(keepFrom, track.samples.length - 2);
        if (keepFrom > 0)
            track.samples.splice(0, keepFrom);
    }
}
