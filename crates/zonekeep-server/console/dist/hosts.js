// The hosts page: every host of the fleet — alive, heartbeat age, capacity, zones, draining — with
// the version each reports of itself, and a drain button (a graceful shutdown, as SIGTERM does).
import { onHost, post } from "./api.js";
import { loadHosts } from "./fleet.js";
import { ms, yes } from "./format.js";
import { html } from "./html.js";
import { Head, SaidLine, useAction } from "./parts.js";
import { usePoll } from "./poll.js";
export function Hosts() {
    const p = usePoll("hosts", 2000, loadHosts);
    const { said, busy, act } = useAction(p.reload);
    const drain = (id) => {
        if (!confirm(`Drain ${id}? Its zones are handed to other hosts and the process exits.`))
            return;
        void act(`drain ${id}`, async () => {
            const r = await post(onHost(id, "admin/drain"));
            return `draining ${r.draining}`;
        });
    };
    const single = p.data?.answer.fleet === false;
    return html `<section>
    <${Head} title="Hosts" at=${p.at} error=${p.error} />
    <${SaidLine} said=${said} />
    ${single ? html `<p class="note">This host has no store: it is a fleet of its own.</p>` : null}
    <table data-testid="hosts">
      <thead><tr>
        <th>id</th><th>url</th><th>alive</th><th>heartbeat age</th><th>capacity</th><th>zones</th>
        <th>draining</th><th>version</th><th></th>
      </tr></thead>
      <tbody>
        ${(p.data?.hosts ?? []).map((h) => html `<tr key=${h.id} data-testid="host-row" data-host=${h.id} data-alive=${String(h.alive)} class=${h.alive ? "" : "dead"}>
            <td>${h.id}${h.self ? html ` <span class="tag">this host</span>` : null}</td>
            <td class="mono">${h.url}</td>
            <td data-testid="host-alive">${h.left ? "left" : yes(h.alive)}</td>
            <td>${ms(h.heartbeat_age_ms)}</td>
            <td>${h.capacity}</td>
            <td>${h.zones}</td>
            <td>${yes(h.draining)}</td>
            <td title=${h.build ?? h.versionError ?? ""} data-testid="host-version">${h.version ?? (h.versionError === null ? "—" : "?")}</td>
            <td>${h.alive && !h.draining && !h.left
        ? html `<button data-testid="drain" disabled=${busy} onClick=${() => drain(h.id)}>drain</button>`
        : null}</td>
          </tr>`)}
      </tbody>
    </table>
  </section>`;
}
