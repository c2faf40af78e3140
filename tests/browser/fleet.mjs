// A fleet of real `zonekeep serve --dev` hosts sharing one PostgreSQL store, for browser tests of
// what a page lives through when hosts drain or die. Each fleet gets a schema of its own in the test
// database (dropped when it stops), so runs never meet each other's hosts, zones or facts; every
// host has its own id, advertises its own listen address (the default) and shares one ticket
// secret, so a ticket or reconnect token from one host is good at every other.
import { execFile } from "node:child_process";
import { promisify } from "node:util";

import { ADMIN_TOKEN, startServer } from "./harness.mjs";

const run = promisify(execFile);

/** The ticket secret every host of a test fleet signs and checks tickets with. */
export const FLEET_TICKET_SECRET = "browser-fleet-ticket-secret-0123456789abcdef";

/** Runs one SQL statement with `psql` against `url`; throws with psql's message when it fails. */
async function sql(psql, url, statement) {
  await run(psql, [url, "-v", "ON_ERROR_STOP=1", "-q", "-c", statement], { timeout: 20000 });
}

/** `url` with PostgreSQL's search_path set to `schema`, as the hosts' store URL. */
function inSchema(url, schema) {
  const sep = url.includes("?") ? "&" : "?";
  return `${url}${sep}options=-csearch_path%3D${schema}`;
}

/** Polls `check` every 100 ms until it returns a value other than null; throws after `ms`. */
export async function until(what, check, ms = 20000) {
  const deadline = Date.now() + ms;
  let last;
  for (;;) {
    try {
      const v = await check();
      if (v !== null && v !== undefined) return v;
      last = null;
    } catch (e) {
      last = e;
    }
    if (Date.now() > deadline) {
      throw new Error(`timed out after ${ms} ms waiting for ${what}${last ? `: ${last}` : ""}`);
    }
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** An admin request with the dev hosts' token to `base`; the answer's JSON (throws on an HTTP error). */
export async function admin(base, path, body = undefined) {
  const r = await fetch(`${base}${path}`, {
    method: body === undefined ? "GET" : "POST",
    headers: { authorization: `Bearer ${ADMIN_TOKEN}`, "content-type": "application/json" },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await r.text();
  if (!r.ok) throw new Error(`${path}: HTTP ${r.status} ${text}`);
  return JSON.parse(text);
}

/**
 * Starts `n` hosts on PostgreSQL (`postgres`: `{ url, psql }` from `requirePostgres`) in a fresh
 * schema, and waits until the first of them sees all `n` alive. `saveEvery` is the hosts' zone save
 * interval (default 200ms: a killed host's zone comes back as it was a moment before); `args` more
 * arguments for every host (e.g. `--bus`); `idPrefix` names the hosts `PREFIX-1`… (default `host`).
 * Returns `{ hosts, stop() }`: each host is what `startServer` returns plus its fleet `id`,
 * `ws` (its advertised WebSocket base, `ws://IP:PORT`) and `alive` (false once the test stopped or
 * killed it through `drain()` or `kill()`). `stop()` stops the hosts still running and drops the
 * schema.
 */
export async function startFleet(n, postgres, { saveEvery = "200ms", args = [], idPrefix = "host" } = {}) {
  const schema = `browser_${process.pid}_${Date.now()}`;
  await sql(postgres.psql, postgres.url, `CREATE SCHEMA ${schema}`);
  const store = inSchema(postgres.url, schema);
  const hosts = [];
  const fleet = {
    hosts,
    async stop() {
      for (const h of hosts) if (h.alive) await h.stop();
      await sql(postgres.psql, postgres.url, `DROP SCHEMA IF EXISTS ${schema} CASCADE`);
    },
  };
  try {
    for (let i = 1; i <= n; i++) {
      const id = `${idPrefix}-${i}`;
      const server = await startServer({
        args: ["--store", store, "--host-id", id, "--save-every", saveEvery, "--sim-threads", "1", ...args],
        env: { ZONEKEEP_TICKET_SECRET: FLEET_TICKET_SECRET, RUST_LOG: process.env.RUST_LOG ?? "info" },
      });
      const host = {
        ...server,
        id,
        ws: server.base.replace(/^http:/, "ws:"),
        alive: true,
        /** SIGTERM: the host drains (hands its zones over) and exits; resolves with its exit. */
        async drain() {
          host.alive = false;
          return server.stop();
        },
        /** `kill -9`: no drain, no final save; resolves with its exit. */
        async kill() {
          host.alive = false;
          return server.kill();
        },
      };
      hosts.push(host);
    }
    await until(`${hosts[0].id} to see all ${n} hosts alive`, async () => {
      const seen = await admin(hosts[0].base, "/admin/hosts");
      return seen.hosts.filter((h) => h.alive).length === n ? seen : null;
    });
  } catch (e) {
    await fleet.stop();
    throw e;
  }
  return fleet;
}

/** Places a new zone `zone` of `kind` on `host` (through its admin API); returns the answer. */
export async function placeZone(host, zone, kind) {
  const created = await admin(host.base, "/admin/zones", { id: zone, kind, host: host.id });
  if (created.host !== host.id) throw new Error(`zone ${zone} went to ${created.host}, not ${host.id}`);
  return created;
}

/** The id of the host that owns `zone` by `host`'s view of the fleet directory, or null. */
export async function ownerOf(host, zone) {
  const list = await admin(host.base, "/admin/zones");
  return list.zones.find((z) => z.id === zone)?.host ?? null;
}
