// The starter's page: joins the zone with a dev guest ticket, sends the held direction once per
// tick, and draws every walker through the SDK's interpolating Replica.
//
// Query parameters: `zone` (default `walkers-1`), `name` (default `guest`).
import { Replica, ZoneConnection } from "@zonekeep/client";

/** Field size and input rate: `SIZE` in src/zone.rs and the zone's tick rate. */
const SIZE = 40;
const TICK_MS = 1000 / 30;

const params = new URLSearchParams(location.search);
const zone = params.get("zone") ?? "walkers-1";
const name = params.get("name") ?? "guest";
const status = document.getElementById("status");
const canvas = document.getElementById("field");
const ctx = canvas.getContext("2d");

/** A guest ticket from the host's dev route (your backend mints real ones). */
async function ticket() {
  const r = await fetch(`/dev/ticket?zone=${encodeURIComponent(zone)}&name=${encodeURIComponent(name)}`);
  if (r.status === 404) throw new Error("the host has no /dev/ticket: serve it in dev mode");
  if (!r.ok) throw new Error(`ticket: HTTP ${r.status} ${await r.text()}`);
  return (await r.json()).ticket;
}

const scheme = location.protocol === "https:" ? "wss" : "ws";
const conn = new ZoneConnection({ url: `${scheme}://${location.host}/zones/${encodeURIComponent(zone)}`, ticket });
const replica = new Replica(conn.clock);
replica.attach(conn);

conn.on("welcome", () => (status.textContent = `playing in ${zone} as ${name}`));
conn.on("close", (c) => (status.textContent = c.willReconnect ? `reconnecting (${c.reason})` : `closed: ${c.reason}`));

// Held keys → one [dx, dy] input per tick.
const held = new Set();
const AXES = { ArrowLeft: [-1, 0], KeyA: [-1, 0], ArrowRight: [1, 0], KeyD: [1, 0], ArrowUp: [0, -1], KeyW: [0, -1], ArrowDown: [0, 1], KeyS: [0, 1] };
addEventListener("keydown", (e) => AXES[e.code] && (held.add(e.code), e.preventDefault()));
addEventListener("keyup", (e) => held.delete(e.code));
addEventListener("blur", () => held.clear());
setInterval(() => {
  let dx = 0;
  let dy = 0;
  for (const code of held) [dx, dy] = [dx + AXES[code][0], dy + AXES[code][1]];
  if (dx !== 0 || dy !== 0) conn.sendInput(new Uint8Array([dx & 0xff, dy & 0xff]));
}, TICK_MS);

function frame(now) {
  const scale = canvas.width / SIZE;
  ctx.clearRect(0, 0, canvas.width, canvas.height);
  for (const e of replica.frame(now).entities.values()) {
    const mine = e.id === conn.controlledId;
    ctx.fillStyle = mine ? "#7ee787" : "#79c0ff";
    ctx.beginPath();
    ctx.arc(e.x * scale, e.y * scale, 0.6 * scale, 0, 2 * Math.PI);
    ctx.fill();
    ctx.fillText(String(e.fields[0] ?? ""), e.x * scale + 10, e.y * scale - 10);
  }
  requestAnimationFrame(frame);
}
requestAnimationFrame(frame);
conn.connect().catch((e) => (status.textContent = `failed: ${e.message}`));
