// A zone's page (#/zones/{id}), read from its owner through the fleet proxy every second: its
// players and observers (with kick), where its time goes (a live chart of each stage's p50 over the
// last 5 minutes, kept in page memory, and a table of p50/p95/max), its work counters, its saves
// and facts, its recording (start, stop, download), its module's deploy history with rollback (for
// a kind whose code is a module), and stop. When the zone moves, the host that had it points at
// the new owner and the page follows.
import { ApiError, call, onHost, post, self, send } from "./api.js";
import { Chart } from "./chart.js";
import { bytes, count, ms, us, when, yes } from "./format.js";
import { html, useRef, useState, type View } from "./html.js";
import { Head, SaidLine, useAction } from "./parts.js";
import { confirmRollBack, DeployHistory, outcome, rollBackTo } from "./modules.js";
import { usePoll } from "./poll.js";
import type { HistoryAnswer, Participant, Recording, Stage, ZoneDetail } from "./types.js";

/** How often the page asks. */
const EVERY_MS = 1000;
/** How much of the chart's history is kept, in seconds. */
const WINDOW_S = 300;

/** Each stage's p50 at each poll: the chart's data, kept while the page is open. */
interface History {
  times: number[];
  series: Map<string, (number | null)[]>;
}

const histories = new Map<string, History>();

function historyOf(zone: string): History {
  let h = histories.get(zone);
  if (h === undefined) {
    h = { times: [], series: new Map() };
    histories.set(zone, h);
  }
  return h;
}

/** Adds one poll's stages at `at` (seconds) and forgets what is older than the window. */
function record(h: History, at: number, stages: Stage[]): void {
  const before = h.times.length;
  h.times.push(at);
  const now = new Map(stages.map((s) => [s.stage, s.p50_us]));
  for (const s of stages) {
    if (!h.series.has(s.stage)) h.series.set(s.stage, new Array<number | null>(before).fill(null));
  }
  for (const [name, values] of h.series) values.push(now.get(name) ?? null);
  let drop = 0;
  while (drop < h.times.length && (h.times[drop] ?? at) < at - WINDOW_S) drop++;
  if (drop > 0) {
    h.times.splice(0, drop);
    for (const values of h.series.values()) values.splice(0, drop);
  }
}

/** What one poll read: the zone's detail, the host that answered, its recording, and its kind's
 * deploy history when the kind's code is a module. */
interface ZoneView {
  detail: ZoneDetail;
  owner: string | null;
  recording: Recording | null;
  code: HistoryAnswer | null;
}

/** Deploys of the zone's kind shown on its page. */
const CODE_HISTORY = 10;

/** `call`, with a 404 (the host has no such thing) as null. */
async function unlessMissing<T>(path: string): Promise<T | null> {
  try {
    return await call<T>(path);
  } catch (e) {
    if (e instanceof ApiError && e.status === 404) return null;
    throw e;
  }
}

/**
 * Asks the host believed to own `id` (at first this one). A host that does not run it answers with
 * the directory's entry, naming the owner: the page asks there (at most 3 hops) and keeps asking
 * there. When the owner does not answer, the next poll starts from this host again.
 */
async function loadZone(id: string, owner: { current: string | null }): Promise<ZoneView> {
  let at = owner.current;
  try {
    for (let hop = 0; ; hop++) {
      const d = await call<ZoneDetail>(onHost(at, `admin/zones/${encodeURIComponent(id)}`));
      const asked = at ?? self();
      const elsewhere = !d.running && d.url !== undefined && d.failed === undefined && d.halted === undefined;
      if (elsewhere && d.host !== null && d.host !== asked && hop < 3) {
        at = d.host;
        continue;
      }
      at = d.running ? (d.host ?? at) : at;
      owner.current = at;
      let recording: Recording | null = null;
      let code: HistoryAnswer | null = null;
      if (d.running) {
        recording = await unlessMissing<Recording>(onHost(at, `admin/zones/${encodeURIComponent(id)}/recording`));
        // A kind that is not a module (or a host without module kinds) answers 404.
        code = await unlessMissing<HistoryAnswer>(
          onHost(at, `admin/modules/${encodeURIComponent(d.kind)}/history?limit=${CODE_HISTORY}`),
        );
      }
      return { detail: d, owner: at ?? self(), recording, code };
    }
  } catch (e) {
    owner.current = null;
    throw e;
  }
}

function Participants({ list, busy, onKick }: { list: Participant[]; busy: boolean; onKick: (p: Participant) => void }): View {
  if (list.length === 0) return html`<p class="none" data-testid="no-participants">nobody here</p>`;
  return html`<table data-testid="participants">
    <thead><tr>
      <th>id</th><th>name</th><th>principal</th><th>role</th><th>connected</th><th>transport</th>
      <th>rtt</th><th>out/s</th><th>out</th><th>ack</th><th></th>
    </tr></thead>
    <tbody>${list.map(
      (p) => html`<tr key=${p.id} data-testid="participant-row" data-name=${p.name ?? ""} data-player=${p.id}>
        <td>${p.id}</td>
        <td data-testid="participant-name">${p.name ?? "—"}</td>
        <td class="mono">${p.principal}</td>
        <td>${p.role}</td>
        <td>${yes(p.connected)}</td>
        <td>${p.transport === undefined ? "—" : (p.transport ?? "dropped")}</td>
        <td>${p.rtt_ms === null || p.rtt_ms === undefined ? "—" : `${p.rtt_ms.toFixed(1)} ms`}</td>
        <td>${p.bytes_out_per_s === undefined ? "—" : `${bytes(p.bytes_out_per_s)}/s`}</td>
        <td>${bytes(p.bytes_out)}</td>
        <td>${p.ack ?? "—"}</td>
        <td><button data-testid="kick" disabled=${busy} onClick=${() => onKick(p)}>kick</button></td>
      </tr>`,
    )}</tbody>
  </table>`;
}

function Stages({ stages }: { stages: Stage[] }): View {
  return html`<table data-testid="stages">
    <thead><tr><th>stage</th><th>count</th><th>p50</th><th>p95</th><th>max</th></tr></thead>
    <tbody>${stages.map(
      (s) => html`<tr key=${s.stage}><td>${s.stage}</td><td>${count(s.count)}</td><td>${us(s.p50_us)}</td><td>${us(s.p95_us)}</td><td>${us(s.max_us)}</td></tr>`,
    )}</tbody>
  </table>`;
}

function Work({ work, last }: { work: Record<string, number>; last: Record<string, number> }): View {
  return html`<table data-testid="work">
    <thead><tr><th>counter</th><th>since start</th><th>last patch</th></tr></thead>
    <tbody>${Object.keys(work).map(
      (k) => html`<tr key=${k}><td>${k}</td><td>${count(work[k])}</td><td>${count(last[k])}</td></tr>`,
    )}</tbody>
  </table>`;
}

function Saves({ d }: { d: ZoneDetail }): View {
  const p = d.persistence;
  if (p === undefined) return html`<p class="none">this host runs without persistence</p>`;
  const s = p.save;
  return html`<table class="pairs" data-testid="persistence">
    <tbody>
      <tr><th>last save</th><td>${s?.last_saved_seq ?? "none yet"} ${s?.last_saved_at_ms ? `at ${when(s.last_saved_at_ms)}` : ""}</td></tr>
      <tr><th>newest submitted</th><td>${s?.last_submitted_seq ?? "—"}${s?.pending ? " (writing)" : ""}</td></tr>
      <tr><th>failed writes in a row</th><td class=${s && s.consecutive_failures > 0 ? "bad" : ""}>${s?.consecutive_failures ?? 0}${s?.last_error ? ` — ${s.last_error}` : ""}</td></tr>
      <tr><th>fenced</th><td>${yes(s?.fenced)}</td></tr>
      <tr><th>save every</th><td>${ms(p.save_every_ms)}</td></tr>
      <tr><th>facts pending</th><td data-testid="facts-pending">${p.facts_in_flight} emitted, not settled; ${p.facts_held} held for the queue</td></tr>
      <tr><th>facts settled</th><td data-testid="facts-settled">${count(p.facts_settled)} committed; <span class=${p.facts_refused > 0 ? "bad" : ""}>${count(p.facts_refused)} refused</span>${p.last_fact_refusal ? ` — last: ${p.last_fact_refusal}` : ""}</td></tr>
      <tr><th>calls</th><td>${p.calls_in_flight} in flight; ${p.calls_held} held</td></tr>
    </tbody>
  </table>`;
}

function RecordingPanel({ rec, busy, onStart, onStop, onDownload }: { rec: Recording | null; busy: boolean; onStart: () => void; onStop: () => void; onDownload: () => void }): View {
  const running = rec?.state === "running";
  return html`<div data-testid="recording">
    <p>${rec === null
      ? "not recorded"
      : html`${rec.state}${rec.reason ? ` (${rec.detail ?? rec.reason})` : ""}: ${count(rec.ticks)} ticks, ${bytes(rec.bytes)} of ${bytes(rec.max_bytes)}`}</p>
    <button data-testid="recording-start" disabled=${busy || running} onClick=${onStart}>start recording</button>
    <button data-testid="recording-stop" disabled=${busy || !running} onClick=${onStop}>stop recording</button>
    <button data-testid="recording-download" disabled=${busy || rec === null || running} onClick=${onDownload}>download</button>
  </div>`;
}

/** Saves `blob` as a file named `name` (the browser's download). */
function saveAs(blob: Blob, name: string): void {
  const url = URL.createObjectURL(blob);
  const a = document.createElement("a");
  a.href = url;
  a.download = name;
  document.body.append(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 60_000);
}

export function Zone({ id }: { id: string }): View {
  const owner = useRef<string | null>(null);
  const [, setPoints] = useState(0);
  const history = historyOf(id);
  const p = usePoll(`zone:${id}`, EVERY_MS, () => loadZone(id, owner), (v) => {
    if (v.detail.running && v.detail.stages !== undefined) {
      record(history, Date.now() / 1000, v.detail.stages);
      setPoints(history.times.length);
    }
  });
  const { said, busy, act } = useAction(p.reload);
  const v = p.data;
  const d = v?.detail;
  const path = (rest: string) => onHost(owner.current, `admin/zones/${encodeURIComponent(id)}${rest}`);

  const kick = (pl: Participant) => {
    const reason = prompt(`Kick ${pl.name ?? pl.principal} (player ${pl.id}): the reason they are shown`, "kicked by an operator");
    if (reason === null) return;
    void act(`kick ${pl.name ?? pl.id}`, async () => {
      await post(path("/kick"), { player: pl.id, reason });
      return "kicked";
    });
  };
  const stop = () => {
    if (!confirm(`Stop ${id}? It is saved and unloaded; its players are told it stopped.`)) return;
    void act(`stop ${id}`, async () => {
      try {
        await post(path("/stop"), {});
      } catch (e) {
        if (!(e instanceof ApiError && e.code === "lasting")) throw e;
        if (!confirm(`${id} is a lasting world. Stop it anyway?`)) return "not stopped";
        await post(path("/stop"), { force: true });
      }
      return "stopped";
    });
  };
  const rollBack = (version: number) => {
    if (d === undefined || !confirmRollBack(d.kind, version)) return;
    void act(`roll ${d.kind} back to version ${version}`, async () => outcome(await rollBackTo(owner.current, d.kind, version)));
  };
  const startRecording = () => void act("start recording", async () => void (await post(path("/recording"), {})));
  const stopRecording = () => void act("stop recording", async () => void (await post(path("/recording/stop"), {})));
  const download = () =>
    void act("download", async () => {
      const res = await send(path("/recording/file"));
      saveAs(await res.blob(), `${id.replace(/[^A-Za-z0-9._-]/g, "_")}.zkrec`);
      return "saved";
    });

  const names = [...history.series.keys()];
  const data = [history.times.slice(), ...names.map((n) => (history.series.get(n) ?? []).slice())];
  return html`<section>
    <${Head} title=${`Zone ${id}`} at=${p.at} error=${p.error}>
      ${d?.running ? html`<button class="danger" data-testid="zone-stop" disabled=${busy} onClick=${stop}>stop zone</button>` : null}
    </${Head}>
    <${SaidLine} said=${said} />
    ${d === undefined
      ? null
      : html`<table class="pairs" data-testid="zone-summary">
          <tbody>
            <tr><th>kind</th><td>${d.kind}${d.lasting ? " (lasting)" : ""}</td></tr>
            <tr><th>host</th><td data-testid="zone-owner">${v?.owner ?? d.host ?? "—"}</td></tr>
            <tr><th>running</th><td>${yes(d.running)}${d.failed ? html` — <span class="bad">failed: ${d.failed.reason}</span>` : null}${d.halted ? html` — <span class="bad">halted: ${d.halted.reason}</span>` : null}</td></tr>
            <tr><th>tick</th><td data-testid="last-tick">${d.tick ?? "—"}</td></tr>
            <tr><th>tier</th><td>${d.tier ?? "—"}</td></tr>
            <tr><th>epoch</th><td>${d.epoch ?? "—"}</td></tr>
            <tr><th>players / observers / entities</th><td>${d.players ?? "—"} / ${d.observers ?? "—"} / ${d.entities ?? "—"}</td></tr>
            <tr><th>tick time (last, mean, max)</th><td>${us(d.last_tick_us)}, ${d.mean_tick_us === undefined ? "—" : us(Math.round(d.mean_tick_us))}, ${us(d.max_tick_us)}</td></tr>
          </tbody>
        </table>`}
    ${d?.running
      ? html`
        <h2>Players and observers</h2>
        <${Participants} list=${d.participants ?? []} busy=${busy} onKick=${kick} />
        <h2>Where its time goes</h2>
        <p class="note">p50 of each stage (over the host's last 30–60 s; the scale is logarithmic past 1 µs), one point a second, last 5 minutes: <span data-testid="chart-points">${history.times.length}</span> points.</p>
        <${Chart} names=${names} data=${data} unit="µs" />
        <${Stages} stages=${d.stages ?? []} />
        <h2>Work</h2>
        ${d.work === undefined ? html`<p class="none">—</p>` : html`<${Work} work=${d.work} last=${d.last_patch ?? {}} />`}
        <h2>Saves and facts</h2>
        <${Saves} d=${d} />
        <h2>Recording</h2>
        <${RecordingPanel} rec=${v?.recording ?? null} busy=${busy} onStart=${startRecording} onStop=${stopRecording} onDownload=${download} />
        ${v?.code
          ? html`<h2>Code: module ${d.kind}</h2>
            <${DeployHistory} h=${v.code} busy=${busy} onRollBack=${rollBack} />`
          : null}`
      : null}
  </section>`;
}
