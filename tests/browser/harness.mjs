// Shared helpers of the end-to-end tests: start and stop the real `zonekeep serve --dev` binary on a
// free port, and launch Debian's Chromium through playwright-core (no downloaded browser).
import { spawn } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
/** The repository root. */
export const repo = resolve(here, "../..");

/** The zonekeep binary: $ZONEKEEP_BIN or target/debug/zonekeep (built by `cargo build -p zonekeep`). */
export function binaryPath() {
  const bin = process.env.ZONEKEEP_BIN ?? join(repo, "target", "debug", "zonekeep");
  if (!existsSync(bin)) {
    throw new Error(`zonekeep binary not found at ${bin}: run \`cargo build -p zonekeep\` or set ZONEKEEP_BIN`);
  }
  return bin;
}

/** The Chromium executable, or null when it is not installed (the browser test then skips). */
export function chromiumPath() {
  const p = process.env.ZONEKEEP_CHROMIUM || "/usr/bin/chromium";
  return existsSync(p) ? p : null;
}

/** A TCP port free right now on 127.0.0.1. */
export function freePort() {
  return new Promise((resolvePort, reject) => {
    const srv = createServer();
    srv.unref();
    srv.on("error", reject);
    srv.listen(0, "127.0.0.1", () => {
      const addr = srv.address();
      srv.close(() => resolvePort(typeof addr === "object" && addr !== null ? addr.port : 0));
    });
  });
}

/** Resolves when `url` answers 200, polling while the process is alive (bounded by `attempts`). */
async function waitHealthy(url, child, attempts = 300) {
  for (let i = 0; i < attempts; i++) {
    if (child.exitCode !== null) throw new Error(`zonekeep exited early with code ${child.exitCode}`);
    try {
      const r = await fetch(url);
      if (r.ok) return;
    } catch {
      // Not listening yet.
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`zonekeep did not become healthy at ${url}`);
}

/**
 * Starts `zonekeep serve --dev` on a free port with a fresh data directory. Returns
 * `{ base, port, stop(), log() }`; `stop()` sends SIGTERM and waits for the exit (SIGKILL after a bound).
 * `{ dev: false }` starts it without `--dev` (give it a ticket secret through `env`).
 */
export async function startServer(extraArgs = [], { dev = true, env = {} } = {}) {
  const bin = binaryPath();
  const port = await freePort();
  const dataDir = mkdtempSync(join(tmpdir(), "zonekeep-e2e-"));
  const args = ["serve", ...(dev ? ["--dev"] : []), "--listen", `127.0.0.1:${port}`, ...extraArgs];
  // Run in a scratch directory so anything the host writes (e.g. ./data) stays out of the repo.
  const child = spawn(bin, args, {
    cwd: dataDir,
    stdio: ["ignore", "pipe", "pipe"],
    env: { ...process.env, RUST_LOG: process.env.RUST_LOG ?? "warn", ...env },
  });
  const lines = [];
  const keep = (buf) => {
    for (const line of buf.toString().split("\n")) if (line) lines.push(line);
    if (lines.length > 500) lines.splice(0, lines.length - 500);
  };
  child.stdout.on("data", keep);
  child.stderr.on("data", keep);
  const base = `http://127.0.0.1:${port}`;
  try {
    await waitHealthy(`${base}/healthz`, child);
  } catch (e) {
    child.kill("SIGKILL");
    throw new Error(`${e.message}\n${lines.join("\n")}`);
  }
  return {
    base,
    port,
    log: () => lines.join("\n"),
    async stop() {
      if (child.exitCode === null) {
        const exited = new Promise((r) => child.once("exit", r));
        child.kill("SIGTERM");
        const timer = setTimeout(() => child.kill("SIGKILL"), 15000);
        await exited;
        clearTimeout(timer);
      }
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

/** Mints a dev guest ticket for `zone` from the running server. */
export async function devTicket(base, zone, name) {
  const r = await fetch(`${base}/dev/ticket?zone=${encodeURIComponent(zone)}&name=${encodeURIComponent(name)}`);
  const body = await r.text();
  if (!r.ok) throw new Error(`/dev/ticket: HTTP ${r.status} ${body}`);
  if ((r.headers.get("content-type") ?? "").includes("json")) return JSON.parse(body).ticket;
  return body.trim();
}

/** Sets NetSim on the running server. */
export async function setNetSim(base, setting) {
  const r = await fetch(`${base}/dev/netsim`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(setting),
  });
  if (!r.ok) throw new Error(`/dev/netsim: HTTP ${r.status} ${await r.text()}`);
}

/**
 * Launches headless Chromium with a fresh profile directory. Returns `{ context, close() }`.
 * Flags keep it offline and quiet: no QUIC, no background networking, updates or sync.
 */
export async function launchChromium(executablePath) {
  const { chromium } = await import("playwright-core");
  const profile = mkdtempSync(join(tmpdir(), "zonekeep-chromium-"));
  const context = await chromium.launchPersistentContext(profile, {
    executablePath,
    headless: true,
    args: [
      "--headless",
      "--no-sandbox",
      "--disable-gpu",
      "--disable-quic",
      "--no-first-run",
      "--disable-background-networking",
      "--disable-component-update",
      "--disable-sync",
      // Both pages must keep animating although only one has focus.
      "--disable-background-timer-throttling",
      "--disable-renderer-backgrounding",
      "--disable-backgrounding-occluded-windows",
    ],
    viewport: { width: 960, height: 640 },
  });
  return {
    context,
    async close() {
      await context.close();
      rmSync(profile, { recursive: true, force: true });
    },
  };
}

/** target/browser/ (created): where screenshots go for a person to look at. */
export function artifactsDir() {
  const dir = join(repo, "target", "browser");
  mkdirSync(dir, { recursive: true });
  return dir;
}

/** The committed build of the SDK the page ships (examples/arena/web/dist/sdk). */
export const sdkPath = join(repo, "examples", "arena", "web", "dist", "sdk", "index.js");
/** The page's movement step (examples/arena/web/dist/movement.js). */
export const movementPath = join(repo, "examples", "arena", "web", "dist", "movement.js");
