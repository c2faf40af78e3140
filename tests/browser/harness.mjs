// Shared helpers of the end-to-end tests: start and stop the real `zonekeep serve --dev` binary (it
// binds a free port itself and says which), and launch Debian's Chromium through playwright-core (no
// downloaded browser).
import { spawn } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, rmSync } from "node:fs";
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

/**
 * Resolves with the address from the host's listening line ("... listening on [http://]IP:PORT"),
 * rejects if the process exits first. The host binds the port itself (port 0 = any free one), so no
 * port is chosen here and hoped to stay free.
 */
function listeningAddress(child, lines) {
  return new Promise((resolveAddr, reject) => {
    let pending = "";
    const onData = (buf) => {
      pending += buf.toString();
      let nl;
      while ((nl = pending.indexOf("\n")) >= 0) {
        const line = pending.slice(0, nl);
        pending = pending.slice(nl + 1);
        const m = /listening\b.*?(\d+\.\d+\.\d+\.\d+):(\d+)/.exec(line);
        if (m !== null) {
          child.stdout.off("data", onData);
          child.off("exit", onExit);
          resolveAddr({ host: m[1], port: Number(m[2]) });
          return;
        }
      }
    };
    const onExit = (code) => {
      child.stdout.off("data", onData);
      reject(new Error(`zonekeep exited with code ${code} before listening\n${lines.join("\n")}`));
    };
    child.stdout.on("data", onData);
    child.once("exit", onExit);
  });
}

/**
 * Starts `zonekeep serve` (with `--dev` unless `dev: false`) in a scratch directory (its data, e.g.
 * the dev ticket key, stays there). Options: `port` (default 0: the host picks a free one), `dir`
 * (reuse the directory of an earlier run: the same data, as a restart would), `args` (more flags),
 * `dev` (default true), `env` (more environment, e.g. a ticket secret for a host without `--dev`).
 * An array as the first argument is taken as `args`, with the options second. Returns
 * `{ base, port, dir, stop({ keepDir }), kill({ keepDir }), log() }`; `stop()` sends SIGTERM and
 * waits for the exit (SIGKILL after a bound), `kill()` is `kill -9` (no drain, no final save); both
 * then remove the directory unless `keepDir` and resolve with how the process ended,
 * `{ code, signal }` (after an earlier exit: that one).
 */
export async function startServer(options = {}, more = {}) {
  const opts = Array.isArray(options) ? { ...more, args: options } : options;
  const dev = opts.dev ?? true;
  const env = opts.env ?? {};
  const bin = binaryPath();
  const dataDir = opts.dir ?? mkdtempSync(join(tmpdir(), "zonekeep-e2e-"));
  const args = [
    "serve",
    ...(dev ? ["--dev"] : []),
    "--listen",
    `127.0.0.1:${opts.port ?? 0}`,
    ...(opts.args ?? []),
  ];
  // Run in the scratch directory so anything the host writes (./data) stays out of the repo.
  const child = spawn(bin, args, {
    cwd: dataDir,
    stdio: ["ignore", "pipe", "pipe"],
    // A dev host gets the admin token, so a test may change its host-wide NetSim (`setNetSim`).
    env: { ...process.env, RUST_LOG: process.env.RUST_LOG ?? "warn", ...(dev ? { ZONEKEEP_ADMIN_TOKEN: ADMIN_TOKEN } : {}), ...env },
  });
  const lines = [];
  const keep = (buf) => {
    for (const line of buf.toString().split("\n")) if (line) lines.push(line);
    if (lines.length > 500) lines.splice(0, lines.length - 500);
  };
  child.stdout.on("data", keep);
  child.stderr.on("data", keep);
  const exited = new Promise((r) => child.once("exit", (code, signal) => r({ code, signal })));
  let addr;
  try {
    addr = await listeningAddress(child, lines);
  } catch (e) {
    child.kill("SIGKILL");
    throw e;
  }
  const base = `http://${addr.host}:${addr.port}`;
  return {
    base,
    port: addr.port,
    dir: dataDir,
    log: () => lines.join("\n"),
    async stop({ keepDir = false } = {}) {
      if (child.exitCode === null && child.signalCode === null) {
        child.kill("SIGTERM");
        const timer = setTimeout(() => child.kill("SIGKILL"), 15000);
        await exited;
        clearTimeout(timer);
      }
      if (!keepDir) rmSync(dataDir, { recursive: true, force: true });
      return exited;
    },
    async kill({ keepDir = false } = {}) {
      if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
      const how = await exited;
      if (!keepDir) rmSync(dataDir, { recursive: true, force: true });
      return how;
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

/** The admin token `startServer` gives a dev host. */
export const ADMIN_TOKEN = "browser-tests-admin-token-0123456789";

/**
 * Sets NetSim on the running dev server: host-wide (an admin action, with `ADMIN_TOKEN`), or, with
 * `sub`, for that ticket subject's connections only (what a page's own panel does).
 */
export async function setNetSim(base, setting, sub = null) {
  const path = sub === null ? "/admin/netsim" : `/dev/netsim?sub=${encodeURIComponent(sub)}`;
  const headers = { "content-type": "application/json" };
  if (sub === null) headers.authorization = `Bearer ${ADMIN_TOKEN}`;
  const r = await fetch(`${base}${path}`, { method: "POST", headers, body: JSON.stringify(setting) });
  if (!r.ok) throw new Error(`${path}: HTTP ${r.status} ${await r.text()}`);
}

/**
 * Launches headless Chromium with a fresh profile directory. Returns `{ context, close() }`.
 * Flags keep it offline and quiet: no background networking, updates or sync. QUIC (WebTransport)
 * is on unless `quic` is false.
 */
export async function launchChromium(executablePath, { quic = true } = {}) {
  const { chromium } = await import("playwright-core");
  const profile = mkdtempSync(join(tmpdir(), "zonekeep-chromium-"));
  const context = await chromium.launchPersistentContext(profile, {
    executablePath,
    headless: true,
    args: [
      "--headless",
      "--no-sandbox",
      "--disable-gpu",
      // QUIC carries WebTransport (HTTP/3), which the SDK tries first; `quic: false` blocks it.
      ...(quic ? [] : ["--disable-quic"]),
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

/**
 * Opens the arena page of zone `zone` at `base` as `name` in `browser` and waits until it has
 * joined and shows its own player; `query` adds page parameters (`&transport=webtransport`). Returns
 * the page and the page errors it collects.
 */
export async function openArenaPage(browser, base, zone, name, query = "") {
  const page = await browser.context.newPage();
  const errors = [];
  page.on("pageerror", (e) => errors.push(String(e)));
  await page.goto(`${base}/?zone=${zone}&name=${name}${query}`);
  await page.waitForFunction(() => window.arena?.state === "open" && window.arena.me !== null, null, {
    timeout: 20000,
  });
  return { page, errors };
}

/**
 * The arena player's drawn position once it came to rest: the same in two animation frames in a
 * row. The page draws its own player gliding between predicted steps (a step, or two when a late
 * frame sent the next input early), so right after the last input it may still be on its way.
 */
export async function settledMe(page) {
  await page.waitForFunction(
    () => {
      const m = window.arena.me;
      const key = m === null ? "" : `${m.x},${m.y}`;
      const same = window.__zkSettledMe === key;
      window.__zkSettledMe = key;
      return m !== null && same;
    },
    null,
    { polling: "raf", timeout: 10000 },
  );
  return page.evaluate(() => ({ ...window.arena.me }));
}
