/**
 * The client's state ring (PROTOCOL.md §5.8): on a WebTransport session every patch is a State
 * datagram written against a **base**, a state the client acknowledged, so any State may be lost,
 * repeated or reordered. The client keeps the states produced by the last 32 States it applied, by
 * tick, each a full copy of the known set ({@link Mirror}); it applies a new State to a copy of its
 * base and acknowledges the newest tick it applied (the `ack` of its Inputs datagrams, §4.5).
 *
 * What a State changed is reported relative to the state shown before it, not to its base, in the
 * form a Delta reports it (a {@link Delta} and {@link MirrorChanges}), so a {@link Replica} and a
 * {@link Predictor} consume States exactly as they consume Deltas.
 */
import { canonicalPosForm, decodeDelta, decodeDeltaHead, STATE_TAG } from "./delta.js";
import { LIMITS } from "./messages.js";
import { Mirror } from "./mirror.js";
import { DecodeError } from "./wire.js";
function sameField(a, b) {
    return Object.is(a, b);
}
/**
 * A Delta taking `from` to `to` (two known sets of one schema), with `tick`, `ack` and `control`
 * as given, and what it changes as {@link Mirror.apply} reports it. Despawns: ids `to` lacks (or
 * holds with another kind); updates: changed positions (canonical form) and fields; spawns: ids new
 * in `to`. Applying the Delta to a copy of `from` yields `to`.
 */
export function deltaBetween(from, to, meta) {
    const despawns = [];
    const after = [];
    for (const e of from.entities()) {
        const next = to.get(e.id);
        if (next === undefined || next.kind !== e.kind)
            despawns.push(e.id);
        else
            after.push(e);
    }
    const updates = [];
    after.forEach((e, index) => {
        const n = to.get(e.id);
        if (n === undefined)
            return;
        const fields = [];
        let mask = 0;
        const count = Math.max(e.fields.length, n.fields.length);
        for (let i = 0; i < count; i++) {
            if (!sameField(e.fields[i], n.fields[i])) {
                fields.push([i, n.fields[i]]);
                mask += 2 ** i;
            }
        }
        const pos = canonicalPosForm(n.qx, n.qy, e.qx, e.qy, fields.length > 0);
        if (pos === null && fields.length === 0)
            return;
        updates.push({ index, id: e.id, kind: e.kind, pos, mask, fields });
    });
    const kept = new Set(after.map((e) => e.id));
    const spawns = [];
    for (const n of to.entities()) {
        if (!kept.has(n.id))
            spawns.push({ id: n.id, kind: n.kind, qx: n.qx, qy: n.qy, fields: n.fields.slice() });
    }
    const delta = { tick: meta.tick, ack: meta.ack, baseline: false, despawns, updates, spawns, events: null };
    if (meta.control !== undefined)
        delta.control = meta.control;
    return {
        delta,
        changes: { removed: despawns.slice(), updated: updates.map((u) => u.id), spawned: spawns.map((s) => s.id) },
    };
}
/** The states of the last {@link LIMITS.stateRing} States a client applied (§5.8). */
export class StateRing {
    /** The schema the states are decoded with. */
    schema;
    /** How many states are kept (32 by the protocol). */
    capacity;
    states = new Map();
    cur;
    newest = 0;
    /** An empty ring: nothing applied, the current state empty. */
    constructor(schema, capacity = LIMITS.stateRing) {
        this.schema = schema;
        this.capacity = Math.max(1, Math.floor(capacity));
        this.cur = new Mirror(schema);
    }
    /** The state shown: that of the newest State applied (empty before the first). */
    get current() {
        return this.cur;
    }
    /** The tick to acknowledge (§4.5): the newest State applied, 0 = none yet. */
    get ackTick() {
        return this.newest;
    }
    /** How many states are held. */
    get size() {
        return this.states.size;
    }
    /** Whether the state of `tick` is held (0, the empty state, always is). */
    has(tick) {
        return tick === 0 || this.states.has(tick);
    }
    /** The held ticks, ascending. */
    ticks() {
        return [...this.states.keys()].sort((a, b) => a - b);
    }
    /** Forgets every state (a new session): the next State must be a BASELINE. */
    reset() {
        this.states.clear();
        this.cur = new Mirror(this.schema);
        this.newest = 0;
    }
    /**
     * Applies one State message (tag included). A tick not newer than the newest applied is `stale`;
     * a base the ring does not hold is `no_base`; both leave the ring as it was. Otherwise the State is
     * applied to a copy of its base (the empty state for base 0), kept as the state of its tick (the
     * oldest beyond {@link capacity} dropped) and made current. Throws {@link DecodeError} when the
     * bytes are not a State or do not apply to their base; the ring is then unchanged.
     */
    apply(bytes) {
        const head = decodeDeltaHead(bytes);
        if (head.tag !== STATE_TAG || head.base === null) {
            throw new DecodeError("unknown_tag", `expected State, got 0x${head.tag.toString(16)}`);
        }
        if (head.tick <= this.newest)
            return { status: "stale", head };
        const base = head.base === 0 ? new Mirror(this.schema) : this.states.get(head.base);
        if (base === undefined)
            return { status: "no_base", head };
        const state = decodeDelta(bytes, this.schema, base.known());
        // A fresh empty state needs no copy; a held one is copied so that it stays as it was.
        const next = head.base === 0 ? base : base.clone();
        const own = next.apply(state);
        const prev = this.cur;
        let delta;
        let changes;
        if (state.baseline) {
            // As a BASELINE Delta: everything shown before goes, everything in it comes.
            delta = withoutBase(state);
            changes = { removed: [...prev.entities()].map((e) => e.id), updated: [], spawned: own.spawned };
        }
        else if (base === prev) {
            // Written against the state shown: the State is that Delta.
            delta = withoutBase(state);
            changes = own;
        }
        else {
            // Written against an older state: what the screen needs is the change from the state shown.
            ({ delta, changes } = deltaBetween(prev, next, { tick: state.tick, ack: state.ack, control: state.control }));
        }
        this.states.set(head.tick, next);
        // Ticks only grow, so insertion order is tick order: the first key is the oldest.
        while (this.states.size > this.capacity) {
            const oldest = this.states.keys().next();
            if (oldest.done === true)
                break;
            this.states.delete(oldest.value);
        }
        this.cur = next;
        this.newest = head.tick;
        return { status: "applied", head, state, delta, changes, mirror: next };
    }
}
/** A copy of a State's Delta part, without its base: a Delta from the state it applied to. */
function withoutBase(state) {
    const d = { ...state };
    delete d.base;
    return d;
}
