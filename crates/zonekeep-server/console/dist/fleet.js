// The fleet as a whole: every host with its build, every zone with its owner's own view of it.
// Any host answers for the directory; what only the owner knows (a zone's tier and players, its
// failures) is asked of each live host through this host's fleet proxy.
import { ApiError, call, describe, onHost, self, setSelf } from "./api.js";
/** `GET /admin/hosts` here, and each live host's own version through the proxy. */
export async function loadHosts() {
    const answer = await call("/admin/hosts");
    setSelf(answer.self);
    const hosts = await Promise.all(answer.hosts.map(async (h) => {
        const view = { ...h, self: h.id === answer.self, version: null, build: null, versionError: null };
        if (view.self) {
            view.version = answer.version ?? null;
            view.build = answer.build ?? null;
        }
        else if (h.alive && !h.left) {
            try {
                const theirs = await call(onHost(h.id, "admin/hosts"));
                view.version = theirs.version ?? null;
                view.build = theirs.build ?? null;
            }
            catch (e) {
                view.versionError = describe(e);
            }
        }
        return view;
    }));
    return { answer, hosts };
}
/** `GET /admin/zones` of this host and of every other live host, merged. */
export async function loadZones() {
    let hosts = [];
    let me = self();
    try {
        const h = await call("/admin/hosts");
        hosts = h.hosts;
        me = h.self;
        setSelf(me);
    }
    catch (e) {
        // A host without the fleet routes still lists its zones; a refused credential ends here.
        if (e instanceof ApiError && e.status === 401)
            throw e;
    }
    const here = await call("/admin/zones");
    const others = hosts.filter((h) => h.id !== me && h.alive && !h.left);
    const problems = [];
    if (here.directory_error !== null)
        problems.push(here.directory_error);
    const answers = [{ host: here.host ?? me, answer: here }];
    await Promise.all(others.map(async (h) => {
        try {
            answers.push({ host: h.id, answer: await call(onHost(h.id, "admin/zones")) });
        }
        catch (e) {
            problems.push(`${h.id}: ${describe(e)}`);
        }
    }));
    const running = new Map();
    const out = { hosts, self: me, zones: [], failed: [], halted: [], startFailures: [], problems };
    for (const { host, answer } of answers) {
        for (const z of answer.zones)
            if (z.running)
                running.set(z.id, { ...z, host: z.host ?? host });
        out.failed.push(...answer.failed_zones.map((f) => ({ ...f, host })));
        out.halted.push(...answer.halted_worlds.map((f) => ({ ...f, host })));
        out.startFailures.push(...answer.start_failures.map((f) => ({ ...f, host })));
    }
    const listed = new Set(running.keys());
    out.zones = [...running.values(), ...here.zones.filter((z) => !z.running && !listed.has(z.id))];
    out.zones.sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
    return out;
}
