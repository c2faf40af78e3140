/**
 * The shooting gallery's canvas: the wall, the targets as the replica draws them, the marks the shots
 * left, and the mapping between the page's pixels and world units (a click is aimed through it).
 */
/** The gallery wall in world units (`GALLERY_W`, `GALLERY_H` in examples/arena/src/gallery/rails.rs). */
export const GALLERY_W = 32;
export const GALLERY_H = 20;
/** A target's radius in world units (`TARGET_RADIUS` in examples/arena/src/gallery/mod.rs). */
export const TARGET_RADIUS = 1;
/** How long a shot's mark stays, ms. */
export const MARK_MS = 1500;
/** Draws the gallery and maps pixels to world units and back. */
export class GalleryView {
    canvas;
    ctx;
    /** Pixels per world unit, and where the wall's top-left corner is (CSS pixels). */
    scale = 1;
    ox = 0;
    oy = 0;
    /** A panel over the canvas's right side (the NetSim panel) the wall is fitted beside, not under. */
    clearOf = null;
    constructor(canvas) {
        this.canvas = canvas;
        const ctx = canvas.getContext("2d");
        if (ctx === null)
            throw new Error("no 2d canvas context");
        this.ctx = ctx;
    }
    /** The world point under client coordinates (a mouse event's `clientX`, `clientY`). */
    toWorld(clientX, clientY) {
        const r = this.canvas.getBoundingClientRect();
        return { x: (clientX - r.left - this.ox) / this.scale, y: (clientY - r.top - this.oy) / this.scale };
    }
    /** The client coordinates of a world point (inverse of {@link toWorld}). */
    toClient(x, y) {
        const r = this.canvas.getBoundingClientRect();
        return { x: r.left + this.ox + x * this.scale, y: r.top + this.oy + y * this.scale };
    }
    /** Fits the wall to the left of `panel` (a panel on the right of the view), so no target flies under it. */
    keepClearOf(panel) {
        this.clearOf = panel;
    }
    /** Sizes the canvas to its box and fits the wall in it with a margin (left of the panel kept clear). */
    fit() {
        const dpr = window.devicePixelRatio || 1;
        const w = this.canvas.clientWidth;
        const h = this.canvas.clientHeight;
        if (this.canvas.width !== Math.round(w * dpr) || this.canvas.height !== Math.round(h * dpr)) {
            this.canvas.width = Math.round(w * dpr);
            this.canvas.height = Math.round(h * dpr);
        }
        const margin = 24;
        let right = 0;
        if (this.clearOf !== null && this.clearOf.offsetWidth > 0) {
            const r = this.canvas.getBoundingClientRect();
            right = Math.max(0, Math.min(w / 2, r.right - this.clearOf.getBoundingClientRect().left));
        }
        const room = w - right;
        this.scale = Math.max(1, Math.min((room - 2 * margin) / GALLERY_W, (h - 2 * margin) / GALLERY_H));
        this.ox = (room - GALLERY_W * this.scale) / 2;
        this.oy = (h - GALLERY_H * this.scale) / 2;
        this.ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    }
    /** Draws one frame. */
    draw(scene) {
        this.fit();
        const c = this.ctx;
        const s = this.scale;
        c.fillStyle = "#0b0e14";
        c.fillRect(0, 0, this.canvas.clientWidth, this.canvas.clientHeight);
        c.save();
        c.translate(this.ox, this.oy);
        c.fillStyle = "#141a26";
        c.fillRect(0, 0, GALLERY_W * s, GALLERY_H * s);
        c.strokeStyle = "#2a3446";
        c.lineWidth = 2;
        c.strokeRect(0, 0, GALLERY_W * s, GALLERY_H * s);
        // A rail under each target.
        c.strokeStyle = "#252e40";
        c.lineWidth = 3;
        for (const y of new Set(scene.targets.map((t) => t.y))) {
            c.beginPath();
            c.moveTo(s, y * s);
            c.lineTo((GALLERY_W - 1) * s, y * s);
            c.stroke();
        }
        for (const t of scene.targets) {
            const rings = ["#e84a4a", "#f2f2f2", "#e84a4a"];
            rings.forEach((color, i) => {
                c.fillStyle = color;
                c.beginPath();
                c.arc(t.x * s, t.y * s, (TARGET_RADIUS * s * (3 - i)) / 3, 0, Math.PI * 2);
                c.fill();
            });
        }
        for (const m of scene.marks) {
            const age = scene.nowMs - m.at;
            if (age > MARK_MS)
                continue;
            c.globalAlpha = 1 - age / MARK_MS;
            c.strokeStyle =
                m.outcome === "hit"
                    ? "#5fe38a"
                    : m.outcome === "pending"
                        ? "#c8d0e0"
                        : m.outcome === "taken"
                            ? "#f0c060"
                            : "#ff8080";
            c.lineWidth = 2;
            const r = 0.35 * s;
            c.beginPath();
            c.moveTo(m.x * s - r, m.y * s - r);
            c.lineTo(m.x * s + r, m.y * s + r);
            c.moveTo(m.x * s + r, m.y * s - r);
            c.lineTo(m.x * s - r, m.y * s + r);
            c.stroke();
            if (m.outcome === "hit" || m.outcome === "miss" || m.outcome === "taken") {
                c.fillStyle = c.strokeStyle;
                c.font = "600 13px system-ui, sans-serif";
                c.fillText(m.outcome === "taken" ? "taken first" : m.outcome, m.x * s + r + 3, m.y * s - r);
            }
            c.globalAlpha = 1;
        }
        if (scene.aim !== null) {
            const { x, y } = scene.aim;
            c.strokeStyle = "#ffd54a";
            c.lineWidth = 1.5;
            c.beginPath();
            c.arc(x * s, y * s, 0.5 * s, 0, Math.PI * 2);
            c.moveTo(x * s - 0.9 * s, y * s);
            c.lineTo(x * s + 0.9 * s, y * s);
            c.moveTo(x * s, y * s - 0.9 * s);
            c.lineTo(x * s, y * s + 0.9 * s);
            c.stroke();
        }
        c.restore();
    }
}
