/**
 * The HUD (network and game numbers), the NetSim panel (latency, jitter and loss sliders that POST
 * `/dev/netsim?sub=…` for this page's own connection, so a player can feel the netcode), the connection banner and short-lived toasts
 * ("+1 saved").
 */

/** Numbers the HUD shows. */
export interface HudNumbers {
  state: string;
  /** `webtransport` or `websocket` (null between sessions). */
  transport: string | null;
  /** Why the session is over WebSocket after WebTransport was tried (null = it was not). */
  fallback: string | null;
  rttMs: number;
  bytesInPerSec: number;
  bytesOutPerSec: number;
  serverTick: number;
  delayMs: number;
  score: number;
  pendingInputs: number;
  corrections: number;
  visible: number;
}

/** The NetSim setting sent to the host (`NetSimConfig` in the server). */
export interface NetSimSetting {
  latency_ms: number;
  jitter_ms: number;
  loss: number;
}

function el<K extends keyof HTMLElementTagNameMap>(tag: K, cls: string, text = ""): HTMLElementTagNameMap[K] {
  const e = document.createElement(tag);
  e.className = cls;
  e.textContent = text;
  return e;
}

function kb(n: number): string {
  return n >= 1024 ? `${(n / 1024).toFixed(1)} KiB/s` : `${Math.round(n)} B/s`;
}

/** The HUD box. */
export class Hud {
  private readonly box: HTMLElement;

  /** Appends the HUD to `root`. */
  constructor(root: HTMLElement) {
    this.box = el("pre", "hud");
    root.appendChild(this.box);
  }

  /** Shows `n`. */
  update(n: HudNumbers): void {
    this.box.textContent =
      `${n.state}\n` +
      `transport  ${n.transport ?? "–"}\n` +
      (n.fallback === null ? "" : `  (WebTransport: ${n.fallback})\n`) +
      `RTT        ${Number.isFinite(n.rttMs) ? n.rttMs.toFixed(0) : "–"} ms\n` +
      `down       ${kb(n.bytesInPerSec)}\n` +
      `up         ${kb(n.bytesOutPerSec)}\n` +
      `tick       ${n.serverTick}\n` +
      `interp     ${n.delayMs.toFixed(0)} ms\n` +
      `unacked    ${n.pendingInputs}\n` +
      `corrected  ${n.corrections}\n` +
      `visible    ${n.visible}\n` +
      `score      ${n.score}`;
  }
}

/** How serious a banner is. */
export type BannerKind = "info" | "warn" | "error";

/**
 * A line across the top of the view that says what the connection is doing whenever the page is not
 * simply playing: reconnecting and why, kicked and why, or what to do when it cannot join at all.
 */
export class Banner {
  private readonly box: HTMLElement;
  /** The text shown, "" when hidden (read by the browser test). */
  text = "";

  /** Appends the (hidden) banner to `root`. */
  constructor(root: HTMLElement) {
    this.box = el("div", "banner");
    this.box.setAttribute("role", "status");
    this.box.hidden = true;
    root.appendChild(this.box);
  }

  /** Shows `text`. */
  show(text: string, kind: BannerKind): void {
    this.text = text;
    this.box.textContent = text;
    this.box.className = `banner ${kind}`;
    this.box.hidden = false;
  }

  /** Hides the banner (playing normally). */
  hide(): void {
    this.text = "";
    this.box.hidden = true;
  }
}

/** Toasts that rise and fade. */
export class Toasts {
  private readonly box: HTMLElement;
  /** Every toast text shown, oldest first (bounded; read by the browser test). */
  readonly shown: string[] = [];

  /** Appends the toast area to `root`. */
  constructor(root: HTMLElement) {
    this.box = el("div", "toasts");
    root.appendChild(this.box);
  }

  /** Shows `text` for two seconds. */
  show(text: string, kind: "pending" | "saved" | "error"): void {
    this.shown.push(text);
    if (this.shown.length > 100) this.shown.shift();
    const t = el("div", `toast ${kind}`, text);
    this.box.appendChild(t);
    setTimeout(() => t.remove(), 2000);
  }
}

/** The NetSim panel; calls `apply` with each new setting. */
export class NetSimPanel {
  private readonly status: HTMLElement;
  private readonly sliders: Record<keyof NetSimSetting, HTMLInputElement>;

  /** Appends the panel to `root`. */
  constructor(root: HTMLElement, apply: (s: NetSimSetting) => Promise<void>) {
    const panel = el("form", "netsim");
    panel.appendChild(el("div", "title", "NetSim"));
    const sliders: Record<keyof NetSimSetting, HTMLInputElement> = {
      latency_ms: this.slider(panel, "latency", "ms", 0, 500, 10, 0),
      jitter_ms: this.slider(panel, "jitter", "ms", 0, 200, 5, 0),
      loss: this.slider(panel, "loss", "%", 0, 30, 1, 0),
    };
    this.status = el("div", "status", "off");
    panel.appendChild(this.status);
    const send = (): void => {
      const s: NetSimSetting = {
        latency_ms: Number(sliders.latency_ms.value),
        jitter_ms: Number(sliders.jitter_ms.value),
        loss: Number(sliders.loss.value) / 100,
      };
      apply(s).then(
        () => {
          const off = s.latency_ms === 0 && s.jitter_ms === 0 && s.loss === 0;
          this.status.textContent = off ? "off" : "applied";
        },
        (e: unknown) => {
          this.status.textContent = `failed: ${e instanceof Error ? e.message : String(e)}`;
        },
      );
    };
    panel.addEventListener("change", send);
    this.sliders = sliders;
    panel.addEventListener("submit", (e) => e.preventDefault());
    root.appendChild(panel);
  }

  /** Shows the setting the host applies to this page's connection. */
  show(s: NetSimSetting): void {
    // Never fight a slider the user is dragging.
    if (Object.values(this.sliders).some((i) => i === document.activeElement)) return;
    const set = (input: HTMLInputElement, v: number, unit: string): void => {
      input.value = String(v);
      const label = input.nextElementSibling;
      if (label !== null) label.textContent = `${input.value} ${unit}`;
    };
    set(this.sliders.latency_ms, s.latency_ms, "ms");
    set(this.sliders.jitter_ms, s.jitter_ms, "ms");
    set(this.sliders.loss, Math.round(s.loss * 100), "%");
    const off = s.latency_ms === 0 && s.jitter_ms === 0 && s.loss === 0;
    this.status.textContent = off ? "off" : "on";
  }

  private slider(
    panel: HTMLElement,
    label: string,
    unit: string,
    min: number,
    max: number,
    stepBy: number,
    value: number,
  ): HTMLInputElement {
    const row = el("label", "row");
    const name = el("span", "name", label);
    const input = document.createElement("input");
    input.type = "range";
    input.name = label;
    input.min = String(min);
    input.max = String(max);
    input.step = String(stepBy);
    input.value = String(value);
    const shown = el("span", "value", `${value} ${unit}`);
    input.addEventListener("input", () => {
      shown.textContent = `${input.value} ${unit}`;
    });
    row.append(name, input, shown);
    panel.appendChild(row);
    return input;
  }
}

/**
 * A NetSim panel wired to the dev host for this page's own connection (`subject()`: its ticket's
 * subject, null before the first ticket): each change is POSTed to `/dev/netsim?sub=…`, so it slows
 * this page and nobody else; the host's view of it is read back every two seconds, and a new subject
 * (a fresh ticket) gets the page's setting again.
 */
export function hostNetSimPanel(root: HTMLElement, subject: () => string | null): NetSimPanel {
  let chosen: NetSimSetting | null = null;
  let appliedTo: string | null = null;
  const post = async (s: NetSimSetting): Promise<void> => {
    const sub = subject();
    if (sub === null) throw new Error("not connected yet");
    const r = await fetch(`/dev/netsim?sub=${encodeURIComponent(sub)}`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify(s),
    });
    if (!r.ok) throw new Error(`HTTP ${r.status} ${await r.text()}`);
    appliedTo = sub;
  };
  const panel = new NetSimPanel(root, (s) => {
    chosen = s;
    return post(s);
  });
  const poll = async (): Promise<void> => {
    try {
      const sub = subject();
      if (sub !== null && chosen !== null && appliedTo !== sub) await post(chosen);
      if (sub !== null) {
        const r = await fetch(`/dev/netsim?sub=${encodeURIComponent(sub)}`, { cache: "no-store" });
        if (r.ok) panel.show(((await r.json()) as { applies: NetSimSetting }).applies);
      }
    } catch {
      // The next poll tries again; the panel keeps its last value meanwhile.
    }
    setTimeout(() => void poll(), 2000);
  };
  void poll();
  return panel;
}
