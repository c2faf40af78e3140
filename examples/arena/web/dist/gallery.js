/**
 * The shooting gallery page: joins a `gallery` zone with a dev guest ticket, draws the targets
 * through the SDK's interpolating Replica exactly as the arena page draws entities, and shoots where
 * the player clicks. Each shot carries the aim point in world units and, through the Replica, the tick
 * the page was drawing; the zone judges it against that picture (lag compensation) or, with the
 * toggle off, against the world as it is when the shot arrives. The verdicts come back as events.
 *
 * Query parameters: `zone` (default `gallery-1`), `name` (as on the arena page).
 * Page state for tools and the browser test is published as `window.gallery` ({@link GalleryDebug}).
 */
import { GalleryView, MARK_MS, TARGET_RADIUS } from "./gallery-view.js";
import { guestConnection, GuestTickets, HostUnreachable, playerName, transportParam } from "./guest.js";
import { Banner, hostNetSimPanel } from "./hud.js";
import { kickCodeName, Replica } from "./sdk/index.js";
/** Event topic of a shot's verdict (`TOPIC_VERDICT` in examples/arena/src/gallery/mod.rs). */
const TOPIC_VERDICT = 1;
/** Shot flag: judge against what the shooter drew (`FLAG_COMPENSATED` in gallery/shot.rs). */
const FLAG_COMPENSATED = 1;
/** Verdict outcomes (`Outcome` in gallery/shot.rs). */
const OUTCOMES = ["miss", "hit", "unjudged", "taken"];
/** Shot records kept for the test hooks. */
const MAX_RECORDS = 2000;
const params = new URLSearchParams(location.search);
const zoneId = params.get("zone") ?? "gallery-1";
const name = playerName(params);
const tickets = new GuestTickets(zoneId, name, "gallery");
const root = document.getElementById("app") ?? document.body;
const canvas = document.createElement("canvas");
canvas.className = "view aim";
root.appendChild(canvas);
const view = new GalleryView(canvas);
const readout = document.createElement("pre");
readout.className = "hud";
root.appendChild(readout);
const banner = new Banner(root);
hostNetSimPanel(root, () => tickets.subject);
view.keepClearOf(root.querySelector(".netsim"));
const controls = document.createElement("label");
controls.className = "gallery-toggle";
const toggle = document.createElement("input");
toggle.type = "checkbox";
toggle.checked = params.get("compensation") !== "off";
controls.append(toggle, " lag compensation");
root.appendChild(controls);
const debug = {
    state: "idle",
    playerId: null,
    frame: 0,
    renderTick: Number.NaN,
    viewTick: 0,
    delayMs: 0,
    rttMs: Number.NaN,
    transport: null,
    subject: null,
    compensated: toggle.checked,
    targets: {},
    shotsFired: 0,
    sawHit: 0,
    confirmed: 0,
    hits: 0,
    misses: 0,
    taken: 0,
    unjudged: 0,
    score: { hits: 0, shots: 0 },
    shots: [],
    errors: [],
    toClient: (x, y) => view.toClient(x, y),
    setCompensation: (on) => {
        toggle.checked = on;
        debug.compensated = on;
    },
};
window.gallery = debug;
toggle.addEventListener("change", () => {
    debug.compensated = toggle.checked;
});
const conn = guestConnection(zoneId, tickets, transportParam(params));
// The Replica both draws the targets and stamps every shot with the tick it drew.
const replica = new Replica(conn.clock);
replica.attach(conn);
let targetKind;
/** Shots awaiting their verdict, by seq. */
const pending = new Map();
/** Marks of recent shots (bounded by their fade time). */
let marks = [];
const markOf = new Map();
conn.on("welcome", (w, info) => {
    targetKind = w.schema.kinds.findIndex((k) => k.name === "target");
    debug.playerId = w.playerId;
    banner.hide();
    if (!info.resumed) {
        // A new player: sequence numbers start again, so earlier shots will never be answered.
        for (const r of pending.values())
            r.outcome = "lost";
        pending.clear();
    }
});
conn.on("event", (ev) => {
    if (ev.topic !== TOPIC_VERDICT || ev.payload.byteLength !== 20)
        return;
    const v = new DataView(ev.payload.buffer, ev.payload.byteOffset, ev.payload.byteLength);
    const seq = v.getUint32(0, true);
    const outcome = OUTCOMES[v.getUint8(4)];
    if (outcome === undefined)
        return;
    debug.score = { hits: v.getUint32(12, true), shots: v.getUint32(16, true) };
    if (outcome === "hit")
        debug.hits += 1;
    else if (outcome === "miss")
        debug.misses += 1;
    else if (outcome === "taken")
        debug.taken += 1;
    else
        debug.unjudged += 1;
    const r = pending.get(seq);
    if (r === undefined)
        return;
    pending.delete(seq);
    r.outcome = outcome;
    r.target = v.getUint32(6, true);
    r.ticksBehind = v.getUint16(10, true);
    if (r.saw !== null && outcome === "hit")
        debug.confirmed += 1;
    const m = markOf.get(seq);
    if (m !== undefined)
        m.outcome = outcome;
    markOf.delete(seq);
});
conn.on("close", (info) => {
    debug.state = info.willReconnect ? "reconnecting" : `closed: ${info.reason}`;
    if (tickets.cannotJoin !== null) {
        banner.show(tickets.cannotJoin, "error");
        return;
    }
    const why = info.kick !== null
        ? `${kickCodeName(info.kick.code)}${info.kick.reason !== "" ? `: ${info.kick.reason}` : ""}`
        : info.error instanceof HostUnreachable || info.code === 1006
            ? "the host is down or unreachable"
            : info.reason;
    banner.show(`Disconnected (${why}).${info.willReconnect ? " Reconnecting…" : " Reload to join again."}`, info.willReconnect ? "warn" : "error");
});
// ---- shooting: a click fires at the world point under it, as the last frame drew the world
/** The drawn target under `p`, nearest centre first. */
function targetUnder(p) {
    let best = null;
    let bestD = Number.POSITIVE_INFINITY;
    for (const t of Object.values(debug.targets)) {
        const d = Math.hypot(t.x - p.x, t.y - p.y);
        if (d <= TARGET_RADIUS && d < bestD) {
            best = t.id;
            bestD = d;
        }
    }
    return best;
}
function shoot(at) {
    const bytes = new Uint8Array(9);
    const w = new DataView(bytes.buffer);
    w.setUint8(0, debug.compensated ? FLAG_COMPENSATED : 0);
    w.setFloat32(1, at.x, true);
    w.setFloat32(5, at.y, true);
    const viewTick = replica.viewTick;
    const seq = conn.sendInput(bytes);
    if (seq === null)
        return;
    const saw = targetUnder(at);
    const record = {
        seq,
        x: at.x,
        y: at.y,
        compensated: debug.compensated,
        viewTick,
        saw,
        outcome: null,
        target: 0,
        ticksBehind: 0,
    };
    debug.shotsFired += 1;
    if (saw !== null)
        debug.sawHit += 1;
    debug.shots.push(record);
    if (debug.shots.length > MAX_RECORDS)
        debug.shots.shift();
    pending.set(seq, record);
    // A verdict never comes for a shot the host dropped; forget the oldest rather than grow.
    if (pending.size > MAX_RECORDS) {
        const oldest = pending.keys().next().value;
        if (oldest !== undefined)
            pending.delete(oldest);
    }
    const mark = { x: at.x, y: at.y, outcome: "pending", at: performance.now() };
    marks.push(mark);
    markOf.set(seq, mark);
}
let aim = null;
canvas.addEventListener("pointermove", (e) => {
    aim = view.toWorld(e.clientX, e.clientY);
});
canvas.addEventListener("pointerleave", () => {
    aim = null;
});
canvas.addEventListener("pointerdown", (e) => {
    if (e.button !== 0)
        return;
    shoot(view.toWorld(e.clientX, e.clientY));
});
// ---- frame loop
function frame(now) {
    debug.frame += 1;
    const f = replica.frame(now);
    const targets = {};
    const list = [];
    for (const e of f.entities.values()) {
        if (e.kind !== targetKind)
            continue;
        const t = { id: e.id, x: e.x, y: e.y };
        targets[e.id] = t;
        list.push(t);
    }
    debug.targets = targets;
    debug.renderTick = f.renderTick;
    debug.viewTick = replica.viewTick;
    debug.delayMs = f.delayMs;
    debug.rttMs = conn.clock.rttMs;
    debug.transport = conn.transport;
    debug.subject = tickets.subject;
    debug.state = conn.state;
    marks = marks.filter((m) => now - m.at <= MARK_MS);
    for (const [seq, m] of markOf)
        if (now - m.at > MARK_MS)
            markOf.delete(seq);
    view.draw({ targets: list, marks, aim, nowMs: now });
    const s = debug.score;
    const rate = s.shots > 0 ? `${Math.round((100 * s.hits) / s.shots)} %` : "–";
    const last = debug.shots[debug.shots.length - 1];
    readout.textContent = [
        `${conn.state} · ${zoneId} · ${name}`,
        `transport ${conn.transport ?? "–"}`,
        `score ${s.hits} / ${s.shots} shots · hit rate ${rate}`,
        `shots you saw hit: ${debug.sawHit}, confirmed ${debug.confirmed}`,
        `last: ${last === undefined ? "–" : `${last.outcome ?? "…"}${last.outcome === "hit" || last.outcome === "miss" || last.outcome === "taken" ? ` (judged ${last.ticksBehind} ticks back)` : ""}`}`,
        `rtt ${Number.isFinite(debug.rttMs) ? Math.round(debug.rttMs) : "–"} ms · drawn ${Math.round(f.delayMs)} ms behind`,
    ].join("\n");
    requestAnimationFrame(frame);
}
conn.connect().then(() => {
    debug.state = conn.state;
}, (e) => {
    const msg = e instanceof Error ? e.message : String(e);
    if (tickets.cannotJoin === null)
        debug.errors.push(msg);
    debug.state = `failed: ${msg}`;
});
requestAnimationFrame(frame);
