/**
 * Canvas renderer: a camera centred on the player, the arena's floor and walls, pillars, pickups,
 * drones, other players (interpolated) and the player itself (predicted). Pure drawing: it reads a
 * {@link Scene} and keeps no game state.
 */
import { ARENA_H, ARENA_W, PLAYER_RADIUS } from "./movement.js";
/** The zone's view radius (`VIEW_RADIUS` in the zone): drawn as the edge of what can be seen. */
export const VIEW_RADIUS = 24;
/** A pickup's radius (`PICKUP_RADIUS` in the zone). */
const PICKUP_RADIUS = 0.5;
/** How a drone is drawn. */
const DRONE_RADIUS = 0.45;
/** Draws scenes on one canvas, sized to its element. */
export class Renderer {
    canvas;
    ctx;
    /** Draws on `canvas` (throws if 2D is unavailable). */
    constructor(canvas) {
        this.canvas = canvas;
        const ctx = canvas.getContext("2d");
        if (ctx === null)
            throw new Error("no 2D canvas");
        this.ctx = ctx;
    }
    /** Draws one frame. */
    draw(scene) {
        const { canvas, ctx } = this;
        const dpr = window.devicePixelRatio || 1;
        const w = canvas.clientWidth;
        const h = canvas.clientHeight;
        if (canvas.width !== Math.round(w * dpr) || canvas.height !== Math.round(h * dpr)) {
            canvas.width = Math.round(w * dpr);
            canvas.height = Math.round(h * dpr);
        }
        // Fit the view circle (plus a little) in the smaller dimension.
        const scale = Math.min(w, h) / (2 * VIEW_RADIUS + 4);
        const cx = scene.me?.x ?? ARENA_W / 2;
        const cy = scene.me?.y ?? ARENA_H / 2;
        ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
        ctx.fillStyle = "#0b0e14";
        ctx.fillRect(0, 0, w, h);
        ctx.setTransform(dpr * scale, 0, 0, dpr * scale, dpr * (w / 2 - cx * scale), dpr * (h / 2 - cy * scale));
        // Floor and grid.
        ctx.fillStyle = "#141a24";
        ctx.fillRect(0, 0, ARENA_W, ARENA_H);
        ctx.strokeStyle = "#1d2533";
        ctx.lineWidth = 1 / scale;
        ctx.beginPath();
        for (let x = 0; x <= ARENA_W; x += 5) {
            ctx.moveTo(x, 0);
            ctx.lineTo(x, ARENA_H);
        }
        for (let y = 0; y <= ARENA_H; y += 5) {
            ctx.moveTo(0, y);
            ctx.lineTo(ARENA_W, y);
        }
        ctx.stroke();
        ctx.strokeStyle = "#4a5a78";
        ctx.lineWidth = 3 / scale;
        ctx.strokeRect(0, 0, ARENA_W, ARENA_H);
        if (scene.me !== null) {
            ctx.strokeStyle = "rgba(120, 160, 255, 0.25)";
            ctx.setLineDash([6 / scale, 6 / scale]);
            ctx.beginPath();
            ctx.arc(scene.me.x, scene.me.y, VIEW_RADIUS, 0, Math.PI * 2);
            ctx.stroke();
            ctx.setLineDash([]);
        }
        for (const p of scene.pillars) {
            ctx.fillStyle = "#3b4252";
            ctx.strokeStyle = "#6b7894";
            ctx.lineWidth = 2 / scale;
            ctx.beginPath();
            ctx.arc(p.x, p.y, p.r, 0, Math.PI * 2);
            ctx.fill();
            ctx.stroke();
        }
        const pulse = 0.85 + 0.15 * Math.sin(scene.nowMs / 180);
        ctx.fillStyle = "#ffd54a";
        for (const k of scene.pickups) {
            const r = PICKUP_RADIUS * pulse;
            ctx.beginPath();
            ctx.moveTo(k.x, k.y - r);
            ctx.lineTo(k.x + r, k.y);
            ctx.lineTo(k.x, k.y + r);
            ctx.lineTo(k.x - r, k.y);
            ctx.closePath();
            ctx.fill();
        }
        ctx.fillStyle = "#e0605e";
        for (const d of scene.drones) {
            ctx.beginPath();
            ctx.arc(d.x, d.y, DRONE_RADIUS, 0, Math.PI * 2);
            ctx.fill();
        }
        for (const o of scene.others)
            this.player(o, false, scale);
        if (scene.me !== null)
            this.player(scene.me, true, scale);
    }
    player(p, mine, scale) {
        const { ctx } = this;
        // A disconnected player is a faded outline: still there (it may come back), clearly not playing.
        ctx.globalAlpha = p.connected ? 1 : 0.35;
        ctx.fillStyle = `hsl(${p.hue} 75% 58%)`;
        ctx.beginPath();
        ctx.arc(p.x, p.y, PLAYER_RADIUS, 0, Math.PI * 2);
        ctx.fill();
        if (mine) {
            ctx.strokeStyle = "#ffffff";
            ctx.lineWidth = 2 / scale;
            ctx.stroke();
        }
        ctx.save();
        ctx.translate(p.x, p.y - PLAYER_RADIUS - 0.5);
        ctx.scale(1 / scale, 1 / scale);
        ctx.font = "12px system-ui, sans-serif";
        ctx.textAlign = "center";
        ctx.fillStyle = mine ? "#ffffff" : "#c8d0e0";
        ctx.fillText(p.connected ? p.name : `${p.name} (disconnected)`, 0, 0);
        ctx.restore();
        ctx.globalAlpha = 1;
    }
}
