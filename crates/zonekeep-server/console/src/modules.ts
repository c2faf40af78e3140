// The modules page: this host's module kinds and what each runs, the store's record of each kind's
// current deploy (every host follows it), a push (upload a .wasm) and a rollback per kind, each
// kind's deploy history from the store with a rollback to any entry of it, what the pushes and
// rollbacks made from this page did (refusals too, which the store does not keep), and the zones
// whose code failed.
import { call, describe, onHost, send } from "./api.js";
import { loadZones, type FleetZones } from "./fleet.js";
import { bytes, short, when } from "./format.js";
import { html, useState, type View } from "./html.js";
import { Head, SaidLine, useAction } from "./parts.js";
import { usePoll } from "./poll.js";
import type { DeployOutcome, HistoryAnswer, ModulesAnswer } from "./types.js";
import { Troubles } from "./zones.js";

/** One push or rollback made from this page. */
interface Done {
  at: number;
  kind: string;
  action: string;
  ok: boolean;
  text: string;
}

/** Kept while the page is open (the store keeps the deploys that held, not the refusals). */
const history: Done[] = [];

/** Deploys of each kind shown on this page. */
const HISTORY_SHOWN = 20;

/** Asks the operator to confirm a rollback of `kind` to its deploy `version`. */
export function confirmRollBack(kind: string, version: number): boolean {
  return confirm(`Roll ${kind} back to the module of its deploy ${version}? Its running zones are saved and restored into it, on every host.`);
}

/**
 * Takes `kind` back to the module of its stored deploy `version`, through `host` (this one when
 * null): every host follows the store's record.
 */
export function rollBackTo(host: string | null, kind: string, version: number): Promise<DeployOutcome> {
  return call<DeployOutcome>(onHost(host, `admin/modules/${encodeURIComponent(kind)}/rollback?version=${version}`), {
    method: "POST",
  });
}

/** A kind's deploys, newest first, each with a rollback to it (not to the module running now). */
export function DeployHistory({ h, busy, onRollBack }: { h: HistoryAnswer; busy: boolean; onRollBack: (version: number) => void }): View {
  if (h.history.length === 0) return html`<p class="none" data-testid="deploy-history-empty">no deploys stored for ${h.kind}</p>`;
  return html`<table data-testid="deploy-history" data-kind=${h.kind}>
    <thead><tr><th>version</th><th>cause</th><th>module</th><th>size</th><th>deployed</th><th></th></tr></thead>
    <tbody>${h.history.map((d) => {
      const running = d.sha256 === h.running;
      return html`<tr key=${d.version} data-testid="deploy-row" data-version=${d.version} data-cause=${d.cause} data-running=${running}>
        <td>${d.version}</td>
        <td>${d.cause}</td>
        <td class="mono" title=${d.sha256}>${short(d.sha256)}${running ? html` <span class="tag">running</span>` : null}</td>
        <td>${bytes(d.size)}</td>
        <td>${when(d.deployed_at_ms)}</td>
        <td>${running ? null : html`<button data-testid="roll-back-to" disabled=${busy} onClick=${() => onRollBack(d.version)}>roll back to this</button>`}</td>
      </tr>`;
    })}</tbody>
  </table>`;
}

/** What a push or rollback did, in a line. */
export function outcome(o: DeployOutcome): string {
  const v = o.version === undefined ? "" : ` version ${o.version}`;
  return `${o.rolled_back ? "rolled back to" : "now runs"} ${short(o.sha256)}${v}`;
}

interface Loaded {
  modules: ModulesAnswer;
  histories: HistoryAnswer[];
  zones: FleetZones | null;
  zonesError: string | null;
}

async function load(): Promise<Loaded> {
  const modules = await call<ModulesAnswer>("/admin/modules");
  const histories = await Promise.all(
    modules.kinds.map((k) => call<HistoryAnswer>(`/admin/modules/${encodeURIComponent(k.kind)}/history?limit=${HISTORY_SHOWN}`)),
  );
  try {
    return { modules, histories, zones: await loadZones(), zonesError: null };
  } catch (e) {
    return { modules, histories, zones: null, zonesError: describe(e) };
  }
}

function Push({ kinds, busy, onPush }: { kinds: string[]; busy: boolean; onPush: (kind: string, file: File, onRefusal: string) => void }): View {
  const [kind, setKind] = useState("");
  const [file, setFile] = useState<File | null>(null);
  const [onRefusal, setOnRefusal] = useState("roll_back");
  const chosen = kinds.includes(kind) ? kind : (kinds[0] ?? "");
  return html`<form class="push" data-testid="push" onSubmit=${(e: Event) => {
    e.preventDefault();
    if (file !== null && chosen !== "") onPush(chosen, file, onRefusal);
  }}>
    <label>kind <select value=${chosen} onChange=${(e: Event) => setKind((e.target as HTMLSelectElement).value)}>
      ${kinds.map((k) => html`<option key=${k} value=${k}>${k}</option>`)}
    </select></label>
    <label>module <input type="file" accept=".wasm,application/wasm"
      onChange=${(e: Event) => setFile((e.target as HTMLInputElement).files?.[0] ?? null)} /></label>
    <label>when a zone refuses its save <select value=${onRefusal} onChange=${(e: Event) => setOnRefusal((e.target as HTMLSelectElement).value)}>
      <option value="roll_back">roll every zone back</option>
      <option value="keep_upgraded">keep the others upgraded</option>
    </select></label>
    <button type="submit" disabled=${busy || file === null || chosen === ""}>push</button>
  </form>`;
}

export function Modules(): View {
  const p = usePoll("modules", 3000, load);
  const { said, busy, act } = useAction(p.reload);
  const remember = (kind: string, action: string) => async (f: () => Promise<DeployOutcome>) => {
    try {
      const o = await f();
      history.unshift({ at: Date.now(), kind, action, ok: !o.rolled_back || action.startsWith("rollback"), text: outcome(o) });
      return outcome(o);
    } catch (e) {
      history.unshift({ at: Date.now(), kind, action, ok: false, text: describe(e) });
      throw e;
    }
  };
  const rollback = (kind: string) => {
    if (!confirm(`Roll ${kind} back to the module it ran before its last deploy? Every host follows.`)) return;
    void act(`rollback ${kind}`, () =>
      remember(kind, "rollback")(() => call<DeployOutcome>(`/admin/modules/${encodeURIComponent(kind)}/rollback`, { method: "POST" })),
    );
  };
  const rollBack = (kind: string) => (version: number) => {
    if (!confirmRollBack(kind, version)) return;
    void act(`roll ${kind} back to version ${version}`, () =>
      remember(kind, `rollback to ${version}`)(() => rollBackTo(null, kind, version)),
    );
  };
  const push = (kind: string, file: File, onRefusal: string) => {
    if (!confirm(`Push ${file.name} (${bytes(file.size)}) as ${kind}? Its running zones are saved and restored into it.`)) return;
    void act(`push ${kind}`, () =>
      remember(kind, "push")(async () => {
        const res = await send(`/admin/modules/${encodeURIComponent(kind)}?on_refusal=${onRefusal}`, {
          method: "POST",
          raw: file,
          contentType: "application/wasm",
        });
        return (await res.json()) as DeployOutcome;
      }),
    );
  };
  const m = p.data?.modules;
  const deploys = new Map((m?.deploys ?? []).map((d) => [d.kind, d]));
  const kinds = (m?.kinds ?? []).map((k) => k.kind);
  const storeOnly = (m?.deploys ?? []).filter((d) => !kinds.includes(d.kind));
  return html`<section>
    <${Head} title="Modules" at=${p.at} error=${p.error} />
    <${SaidLine} said=${said} />
    ${m !== undefined && m.kinds.length === 0
      ? html`<p class="none">this host runs no module kinds (start it with <code>--module KIND[=FILE]</code>)</p>`
      : html`<table data-testid="modules">
          <thead><tr><th>kind</th><th>runs here</th><th>store version</th><th>size</th><th>deployed</th><th></th></tr></thead>
          <tbody>${(m?.kinds ?? []).map((k) => {
            const d = deploys.get(k.kind);
            return html`<tr key=${k.kind} data-testid="module-row" data-kind=${k.kind}>
              <td>${k.kind}</td>
              <td class="mono" title=${k.sha256 ?? ""}>${short(k.sha256)}</td>
              <td>${d === undefined ? "—" : `${d.version} (${d.cause})`}${d !== undefined && d.sha256 !== k.sha256 ? html` <span class="tag bad">store has ${short(d.sha256)}</span>` : null}</td>
              <td>${bytes(d?.size)}</td>
              <td>${when(d?.deployed_at_ms)}</td>
              <td><button data-testid="rollback" disabled=${busy} onClick=${() => rollback(k.kind)}>rollback</button></td>
            </tr>`;
          })}</tbody>
        </table>
        <h2>Push a module</h2>
        <${Push} kinds=${kinds} busy=${busy} onPush=${push} />
        ${(p.data?.histories ?? []).map(
          (h) => html`<h2 key=${h.kind}>Deploys of ${h.kind}</h2>
            <${DeployHistory} h=${h} busy=${busy} onRollBack=${rollBack(h.kind)} />`,
        )}`}
    ${storeOnly.length === 0
      ? null
      : html`<h2>Kinds other hosts run</h2>
        <table><thead><tr><th>kind</th><th>sha256</th><th>version</th><th>size</th><th>deployed</th></tr></thead>
          <tbody>${storeOnly.map(
            (d) => html`<tr key=${d.kind}><td>${d.kind}</td><td class="mono" title=${d.sha256}>${short(d.sha256)}</td><td>${d.version}</td><td>${bytes(d.size)}</td><td>${when(d.deployed_at_ms)}</td></tr>`,
          )}</tbody></table>`}
    <h2>Pushes and rollbacks from this page (refusals too)</h2>
    ${history.length === 0
      ? html`<p class="none">none yet</p>`
      : html`<table data-testid="push-history"><thead><tr><th>when</th><th>kind</th><th>action</th><th>result</th></tr></thead>
          <tbody>${history.map(
            (h) => html`<tr class=${h.ok ? "" : "bad"}><td>${when(h.at)}</td><td>${h.kind}</td><td>${h.action}</td><td>${h.text}</td></tr>`,
          )}</tbody></table>`}
    ${p.data?.zonesError ? html`<p class="error">${p.data.zonesError}</p>` : null}
    <${Troubles} data=${p.data?.zones ?? null} />
  </section>`;
}
