// The zones page: every zone of the fleet (its owner's own view where the owner answered: tier and
// players; else the directory's entry), the zones whose code failed and why, halted lasting
// worlds, zones that did not start; each zone links to its page, and "move to…" hands a zone to
// another host (its owner freezes it, saves it and tells its players to resume there).
import { onHost, post } from "./api.js";
import { loadZones, type FleetZones } from "./fleet.js";
import { count, ms, when, yes } from "./format.js";
import { html, useState, type View } from "./html.js";
import { Head, SaidLine, useAction } from "./parts.js";
import { usePoll } from "./poll.js";
import type { HostRow, ZoneRow } from "./types.js";

/** The link to a zone's page. */
export function zoneHref(id: string): string {
  return `#/zones/${encodeURIComponent(id)}`;
}

/** A host select and a "move" button for one zone. */
function Move({ zone, hosts, busy, onMove }: { zone: ZoneRow; hosts: HostRow[]; busy: boolean; onMove: (to: string) => void }): View {
  const targets = hosts.filter((h) => h.alive && !h.draining && !h.left && h.id !== zone.host);
  const [to, setTo] = useState("");
  if (targets.length === 0 || zone.host === null) return null;
  const chosen = targets.some((h) => h.id === to) ? to : "";
  return html`<span class="move">
    <select data-testid="move-target" value=${chosen} onChange=${(e: Event) => setTo((e.target as HTMLSelectElement).value)}>
      <option value="">move to…</option>
      ${targets.map((h) => html`<option key=${h.id} value=${h.id}>${h.id}</option>`)}
    </select>
    <button data-testid="move" disabled=${busy || chosen === ""} onClick=${() => onMove(chosen)}>move</button>
  </span>`;
}

/** The tables of failed zones, halted worlds and start failures (also on the modules page). */
export function Troubles({ data }: { data: FleetZones | null }): View {
  if (data === null) return null;
  return html`<div>
    <h2>Failed zones</h2>
    ${data.failed.length === 0
      ? html`<p class="none">none</p>`
      : html`<table data-testid="failed-zones">
          <thead><tr><th>zone</th><th>kind</th><th>host</th><th>reason</th><th>tick</th><th>when</th></tr></thead>
          <tbody>${data.failed.map(
            (f) => html`<tr key=${f.id} data-testid="failed-row" data-zone=${f.id}>
              <td><a href=${zoneHref(f.id)}>${f.id}</a></td><td>${f.kind}</td><td>${f.host ?? "—"}</td>
              <td class="reason">${f.reason}</td><td>${f.at_start ? "at start" : count(f.tick)}</td><td>${when(f.at_ms)}</td>
            </tr>`,
          )}</tbody>
        </table>`}
    ${data.halted.length === 0
      ? null
      : html`<h2>Halted worlds</h2>
        <table data-testid="halted-worlds">
          <thead><tr><th>zone</th><th>kind</th><th>host</th><th>reason</th><th>tick</th><th>unsaved for</th><th>attempts</th></tr></thead>
          <tbody>${data.halted.map(
            (w) => html`<tr key=${w.id}>
              <td>${w.id}</td><td>${w.kind}</td><td>${w.host ?? "—"}</td><td class="reason">${w.reason}</td>
              <td>${count(w.tick)}</td><td>${ms(w.unsaved_ms)}</td><td>${w.attempts}</td>
            </tr>`,
          )}</tbody>
        </table>`}
    ${data.startFailures.length === 0
      ? null
      : html`<h2>Did not start</h2>
        <table data-testid="start-failures">
          <thead><tr><th>zone</th><th>kind</th><th>host</th><th>reason</th><th>when</th></tr></thead>
          <tbody>${data.startFailures.map(
            (f) => html`<tr key=${f.zone_id}>
              <td>${f.zone_id}</td><td>${f.kind}</td><td>${f.host ?? "—"}</td><td class="reason">${f.reason}</td><td>${when(f.at_ms)}</td>
            </tr>`,
          )}</tbody>
        </table>`}
  </div>`;
}

export function Zones(): View {
  const p = usePoll("zones", 2000, loadZones);
  const { said, busy, act } = useAction(p.reload);
  const move = (z: ZoneRow, to: string) => {
    if (!confirm(`Move ${z.id} from ${z.host} to ${to}? Its players resume there.`)) return;
    void act(`move ${z.id}`, async () => {
      const r = await post<{ moved: string; to: string; epoch: number }>(onHost(z.host, `admin/zones/${encodeURIComponent(z.id)}/move`), { host: to });
      return `moved to ${r.to} (epoch ${r.epoch})`;
    });
  };
  const d = p.data;
  return html`<section>
    <${Head} title="Zones" at=${p.at} error=${p.error} />
    <${SaidLine} said=${said} />
    ${(d?.problems ?? []).map((m) => html`<p class="error" data-testid="zones-problem">${m}</p>`)}
    <table data-testid="zones">
      <thead><tr>
        <th>zone</th><th>kind</th><th>host</th><th>running</th><th>tier</th><th>players</th><th>observers</th>
        <th>tick</th><th>epoch</th><th></th>
      </tr></thead>
      <tbody>
        ${(d?.zones ?? []).map(
          (z) => html`<tr key=${z.id} data-testid="zone-row" data-zone=${z.id} data-host=${z.host ?? ""}>
            <td><a href=${zoneHref(z.id)} data-testid="zone-link">${z.id}</a>${z.lasting ? html` <span class="tag">lasting</span>` : null}</td>
            <td>${z.kind}</td>
            <td data-testid="zone-host">${z.host ?? "—"}${z.host_alive === false ? html` <span class="tag bad">dead</span>` : null}</td>
            <td>${yes(z.running)}</td>
            <td>${z.tier ?? "—"}</td>
            <td data-testid="zone-players">${z.players ?? "—"}</td>
            <td>${z.observers ?? "—"}</td>
            <td>${count(z.tick)}</td>
            <td>${z.epoch ?? "—"}</td>
            <td><${Move} zone=${z} hosts=${d?.hosts ?? []} busy=${busy} onMove=${(to: string) => move(z, to)} /></td>
          </tr>`,
        )}
      </tbody>
    </table>
    ${d !== null && d.zones.length === 0 ? html`<p class="none">no zones</p>` : null}
    <${Troubles} data=${d} />
  </section>`;
}
