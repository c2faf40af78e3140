// The fleet as a whole: every host with its build, every zone with its owner's own view of it.
// Any host answers for the directory; what only the owner knows (a zone's tier and players, its
// failures) is asked of each live host through this host's fleet proxy.
import { ApiError, call, describe, onHost, self, setSelf } from "./api.js";
import type { FailedZone, HaltedWorld, HostRow, HostsAnswer, StartFailure, ZoneRow, ZonesAnswer } from "./types.js";

/** A host with what it says of its own build (or why it did not say). */
export interface HostView extends HostRow {
  self: boolean;
  version: string | null;
  build: string | null;
  versionError: string | null;
}

/** `GET /admin/hosts` here, and each live host's own version through the proxy. */
export async function loadHosts(): Promise<{ answer: HostsAnswer; hosts: HostView[] }> {
  const answer = await call<HostsAnswer>("/admin/hosts");
  setSelf(answer.self);
  const hosts = await Promise.all(
    answer.hosts.map(async (h): Promise<HostView> => {
      const view: HostView = { ...h, self: h.id === answer.self, version: null, build: null, versionError: null };
      if (view.self) {
        view.version = answer.version ?? null;
        view.build = answer.build ?? null;
      } else if (h.alive && !h.left) {
        try {
          const theirs = await call<HostsAnswer>(onHost(h.id, "admin/hosts"));
          view.version = theirs.version ?? null;
          view.build = theirs.build ?? null;
        } catch (e) {
          view.versionError = describe(e);
        }
      }
      return view;
    }),
  );
  return { answer, hosts };
}

/** Something that belongs to one host (a failure, a halted world). */
export type OnHost<T> = T & { host: string | null };

/** The fleet's zones and troubles, gathered from every live host. */
export interface FleetZones {
  hosts: HostRow[];
  self: string | null;
  zones: ZoneRow[];
  failed: OnHost<FailedZone>[];
  halted: OnHost<HaltedWorld>[];
  startFailures: OnHost<StartFailure>[];
  /** Hosts that did not answer, and why; the directory's own error. */
  problems: string[];
}

/** `GET /admin/zones` of this host and of every other live host, merged. */
export async function loadZones(): Promise<FleetZones> {
  let hosts: HostRow[] = [];
  let me = self();
  try {
    const h = await call<HostsAnswer>("/admin/hosts");
    hosts = h.hosts;
    me = h.self;
    setSelf(me);
  } catch (e) {
    // A host without the fleet routes still lists its zones; a refused credential ends here.
    if (e instanceof ApiError && e.status === 401) throw e;
  }
  const here = await call<ZonesAnswer>("/admin/zones");
  const others = hosts.filter((h) => h.id !== me && h.alive && !h.left);
  const problems: string[] = [];
  if (here.directory_error !== null) problems.push(here.directory_error);
  const answers: { host: string | null; answer: ZonesAnswer }[] = [{ host: here.host ?? me, answer: here }];
  await Promise.all(
    others.map(async (h) => {
      try {
        answers.push({ host: h.id, answer: await call<ZonesAnswer>(onHost(h.id, "admin/zones")) });
      } catch (e) {
        problems.push(`${h.id}: ${describe(e)}`);
      }
    }),
  );
  const running = new Map<string, ZoneRow>();
  const out: FleetZones = { hosts, self: me, zones: [], failed: [], halted: [], startFailures: [], problems };
  for (const { host, answer } of answers) {
    for (const z of answer.zones) if (z.running) running.set(z.id, { ...z, host: z.host ?? host });
    out.failed.push(...answer.failed_zones.map((f) => ({ ...f, host })));
    out.halted.push(...answer.halted_worlds.map((f) => ({ ...f, host })));
    out.startFailures.push(...answer.start_failures.map((f) => ({ ...f, host })));
  }
  const listed = new Set(running.keys());
  out.zones = [...running.values(), ...here.zones.filter((z) => !z.running && !listed.has(z.id))];
  out.zones.sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
  return out;
}
