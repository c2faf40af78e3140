/**
 * The chat panel of the arena pages: the lines of the zone's channel (`zone:<zone id>`, everyone
 * attached to the zone) with their senders, the page's own lines marked, and a box to say one
 * (Enter sends). It is a view of the SDK's `conn.chat`: the lines it keeps (`chat.lines(channel)`)
 * and those it tells once each (`on("line")`, `on("earlier")`), so the history the host sends on
 * every attach (a reload, a reconnect) shows each line once, before the lines said after it.
 *
 * - Only the newest {@link ChatPanelOptions.max} lines (100) stay in the page.
 * - Every text is put in with `textContent`: the lines are other players' words, never markup.
 * - A refused line is told under the lines in words: "slow down, n s" (RATE_LIMITED), "muted
 *   until …" (MUTED), the host's own text otherwise (INVALID, NOT_ALLOWED, UNAVAILABLE), until a
 *   line said after it is heard.
 * - Each line has a "report" action: `conn.chat.report(channel, [seq], "reported from the arena
 *   page")`, then "reported".
 * - A session that cannot chat (`conn.chat.available` false after the Welcome: a host older than
 *   chat) hides the panel.
 * - While the box has the focus the game's keys are the box's (keys.ts leaves keys typed into a text
 *   field alone); Enter elsewhere on the page puts the focus in the box, Escape takes it out.
 *
 * Its state is published for tools and the browser test as `window.arena.chat` ({@link ChatDebug}).
 */

import { ChatError, ChatRefusal, ChatReplyCode, type ChatLine, type ZoneConnection } from "./sdk/index.js";

/** The reason a report from this page files. */
export const REPORT_REASON = "reported from the arena page";

/** A line as the panel shows it. */
export interface ChatLineShown {
  seq: number;
  sender: string;
  body: string;
  /** Said by this page (a principal of one of its sessions). */
  mine: boolean;
  /** Came from the store (the history of an attach), not as said. */
  history: boolean;
  /** `""`, `reporting`, `reported` or `failed` (the report action's state). */
  report: string;
}

/** A refusal as the panel told it. */
export interface ChatRefusalShown {
  /** The host's code name (`RATE_LIMITED`, `MUTED`, …) or the SDK's error kind (`not_open`, `timeout`, …). */
  code: string;
  /** What the panel showed. */
  shown: string;
  /** The host's own text ("" when it gave none, or for an SDK error). */
  text: string;
  /** When the sender may speak again, UNIX ms (MUTED, RATE_LIMITED), else 0. */
  untilMs: number;
  /** The body refused. */
  body: string;
}

/** How the panel stands (published for tools and the browser test). */
export interface ChatDebug {
  /** `waiting` before the first Welcome, `shown`, or `hidden` (the session cannot chat). */
  state: "waiting" | "shown" | "hidden";
  /** Why the panel is hidden, or null. */
  hiddenWhy: string | null;
  /** The channel shown (`zone:<zone id>`), null before a Welcome. */
  channel: string | null;
  /** The principals of this page's sessions (a guest ticket names a new one each time). */
  me: string[];
  /** The lines on show, oldest first. */
  lines: ChatLineShown[];
  /** Lines this page sent, heard back, and refused. */
  sent: number;
  heard: number;
  refused: number;
  /** The last refusal, or null. */
  lastRefusal: ChatRefusalShown | null;
  /** The text under the lines ("" when none). */
  notice: string;
  /** Reports filed from this page: the line's seq and the report's id. */
  reports: Array<{ channel: string; seq: number; id: string }>;
  /** The last report that failed, in words, or null. */
  reportError: string | null;
}

/** What the panel shows. */
export interface ChatPanelOptions {
  /** Lines kept in the page, the newest (default 100). */
  max?: number;
  /** Called as the box takes the focus, so keys held for the game are let go (their keyup goes to the box). */
  onTyping?: () => void;
}

function el<K extends keyof HTMLElementTagNameMap>(tag: K, cls: string, text = ""): HTMLElementTagNameMap[K] {
  const e = document.createElement(tag);
  e.className = cls;
  e.textContent = text;
  return e;
}

/** Whether typing goes into `t` (the same test keys.ts makes). */
function takesText(t: EventTarget | null): boolean {
  if (t instanceof HTMLTextAreaElement || t instanceof HTMLSelectElement) return true;
  if (t instanceof HTMLInputElement) {
    return !["range", "checkbox", "radio", "button", "submit", "reset", "color", "file", "image"].includes(t.type);
  }
  return t instanceof HTMLElement && t.isContentEditable;
}

/** `untilMs` as the player reads it: the time of day, with the date when it is not today. */
function when(untilMs: number): string {
  const d = new Date(untilMs);
  const now = new Date();
  const sameDay = d.getFullYear() === now.getFullYear() && d.getMonth() === now.getMonth() && d.getDate() === now.getDate();
  return sameDay ? d.toLocaleTimeString() : d.toLocaleString();
}

/** What a failed send or report says to the player. */
export function refusalWords(e: unknown, nowMs: number = Date.now()): { code: string; shown: string; text: string; untilMs: number } {
  if (e instanceof ChatRefusal) {
    if (e.code === ChatReplyCode.RATE_LIMITED) {
      const secs = e.untilMs > 0 ? Math.max(1, Math.ceil((e.untilMs - nowMs) / 1000)) : 1;
      return { code: e.name, shown: `slow down, ${secs} s`, text: e.text, untilMs: e.untilMs };
    }
    if (e.code === ChatReplyCode.MUTED) {
      const shown = e.untilMs > 0 ? `muted until ${when(e.untilMs)}` : "muted";
      return { code: e.name, shown, text: e.text, untilMs: e.untilMs };
    }
    // INVALID, NOT_ALLOWED, UNAVAILABLE, NOT_FOUND: the host's words (the SDK's when it gave none).
    return { code: e.name, shown: e.message, text: e.text, untilMs: e.untilMs };
  }
  if (e instanceof ChatError) {
    const words: Record<string, string> = {
      not_open: "not connected: the line was not sent",
      timeout: "no answer from the host",
      disconnected: "the connection dropped before the host answered",
      closed: "disconnected",
      unsupported: "this host has no chat",
    };
    const prefix = `${e.kind}: `;
    const own = e.message.startsWith(prefix) ? e.message.slice(prefix.length) : e.message;
    return { code: e.kind, shown: words[e.kind] ?? own, text: "", untilMs: 0 };
  }
  return { code: "error", shown: e instanceof Error ? e.message : String(e), text: "", untilMs: 0 };
}

/** The panel (see the module's notes). */
export class ChatPanel {
  /** The panel's state, also read by the browser test through `window.arena.chat`. */
  readonly debug: ChatDebug;
  private readonly conn: ZoneConnection;
  private readonly max: number;
  private readonly box: HTMLElement;
  private readonly list: HTMLOListElement;
  private readonly notice: HTMLElement;
  private readonly input: HTMLInputElement;
  /** The rows on show by seq, and the seqs in order. */
  private readonly rows = new Map<number, HTMLLIElement>();
  private readonly shown = new Map<number, ChatLineShown>();
  private channel: string | null = null;
  private readonly principals = new Set<string>();
  /** Sends are numbered; the notice tells the newest one answered (a refusal, or "" once heard). */
  private sends = 0;
  private noticeOf = 0;

  /** Appends the panel to `root` (hidden until the connection's Welcome) and follows `conn.chat`. */
  constructor(root: HTMLElement, conn: ZoneConnection, options: ChatPanelOptions = {}) {
    this.conn = conn;
    this.max = Math.max(1, Math.floor(options.max ?? 100));
    this.debug = {
      state: "waiting",
      hiddenWhy: null,
      channel: null,
      me: [],
      lines: [],
      sent: 0,
      heard: 0,
      refused: 0,
      lastRefusal: null,
      notice: "",
      reports: [],
      reportError: null,
    };

    this.box = el("section", "chat");
    this.box.setAttribute("aria-label", "Chat");
    const head = el("div", "title", "Chat");
    this.list = el("ol", "lines");
    this.list.setAttribute("aria-live", "polite");
    this.notice = el("div", "notice");
    this.notice.setAttribute("role", "status");
    this.notice.hidden = true;
    this.input = el("input", "say");
    this.input.type = "text";
    this.input.autocomplete = "off";
    this.input.spellcheck = false;
    this.input.placeholder = "Say something · Enter";
    this.input.setAttribute("aria-label", "Say in the zone's chat");
    this.box.append(head, this.list, this.notice, this.input);
    this.box.hidden = true;
    root.appendChild(this.box);

    this.input.addEventListener("keydown", (e) => {
      if (e.key === "Enter" && !e.isComposing) {
        e.preventDefault();
        const body = this.input.value;
        if (body.trim() === "") return;
        this.input.value = "";
        void this.say(body);
      } else if (e.key === "Escape") {
        this.input.blur();
      }
    });
    this.input.addEventListener("focus", () => options.onTyping?.());
    // Enter anywhere else on the page opens the box.
    window.addEventListener("keydown", (e) => {
      if (e.key !== "Enter" || e.isComposing || this.box.hidden || takesText(e.target)) return;
      if (e.target instanceof HTMLButtonElement || e.target instanceof HTMLAnchorElement) return;
      e.preventDefault();
      this.input.focus();
    });

    conn.chat.on("line", (line) => {
      if (line.channel === this.channel) this.put([line]);
    });
    conn.chat.on("earlier", (channel, lines) => {
      if (channel === this.channel) this.put(lines);
    });
    conn.on("welcome", () => this.attached());
    // A connection already open (a page that attached late) is attached now.
    if (conn.state === "open") this.attached();
  }

  /** A session attached (a join, a resume, a move's arrival): which channel, whether to show at all. */
  private attached(): void {
    const me = this.conn.chat.principal;
    if (me !== null && !this.principals.has(me)) {
      this.principals.add(me);
      this.debug.me = [...this.principals];
      // Lines this page said under that principal before it knew it: mark them.
      for (const [seq, l] of this.shown) {
        if (!l.mine && this.principals.has(l.sender)) {
          l.mine = true;
          this.rows.get(seq)?.classList.add("mine");
        }
      }
    }
    if (!this.conn.chat.available) {
      this.box.hidden = true;
      this.debug.state = "hidden";
      this.debug.hiddenWhy = "the host is older than chat (protocol version 10 or older)";
      return;
    }
    const channel = this.conn.chat.zoneChannel;
    if (channel !== this.channel) {
      // Another zone (a move): its lines only.
      this.channel = channel;
      this.debug.channel = channel;
      this.rows.clear();
      this.shown.clear();
      this.list.replaceChildren();
    }
    // What the SDK kept and told before this page listened (none unless it attached late); the
    // rest comes as 'line' and 'earlier'. Repeats are dropped by seq.
    if (channel !== null) this.put(this.conn.chat.lines(channel));
    this.box.hidden = false;
    this.debug.state = "shown";
    this.debug.hiddenWhy = null;
  }

  /** Shows `lines` of the current channel in seq order, each once, the newest {@link max}. */
  private put(lines: readonly ChatLine[]): void {
    const follow = this.list.scrollHeight - this.list.scrollTop - this.list.clientHeight < 24;
    let changed = false;
    for (const line of lines) {
      if (this.rows.has(line.seq)) continue;
      const oldest = this.list.firstElementChild as HTMLLIElement | null;
      if (this.rows.size >= this.max && oldest !== null && line.seq < Number(oldest.dataset.seq)) continue;
      const row = this.row(line);
      // After the last row with a smaller seq (lines almost always come newest last).
      let after: Element | null = this.list.lastElementChild;
      while (after !== null && Number((after as HTMLElement).dataset.seq) > line.seq) after = after.previousElementSibling;
      if (after === null) this.list.prepend(row);
      else after.after(row);
      changed = true;
    }
    while (this.rows.size > this.max) {
      const oldest = this.list.firstElementChild as HTMLLIElement | null;
      if (oldest === null) break;
      const seq = Number(oldest.dataset.seq);
      oldest.remove();
      this.rows.delete(seq);
      this.shown.delete(seq);
    }
    if (!changed) return;
    this.publish();
    if (follow) this.list.scrollTop = this.list.scrollHeight;
  }

  private row(line: ChatLine): HTMLLIElement {
    const mine = this.principals.has(line.sender);
    const shown: ChatLineShown = { seq: line.seq, sender: line.sender, body: line.body, mine, history: line.history, report: "" };
    const row = el("li", mine ? "line mine" : "line");
    row.dataset.seq = String(line.seq);
    row.title = new Date(line.sentAtMs).toLocaleString();
    const sender = el("span", "sender", line.sender);
    sender.title = line.sender;
    const body = el("span", "body", line.body);
    const report = el("button", "report", "report");
    report.type = "button";
    report.title = "Report this line to the moderators";
    report.addEventListener("click", () => void this.report(line.seq, shown, report));
    row.append(sender, body, report);
    this.rows.set(line.seq, row);
    this.shown.set(line.seq, shown);
    return row;
  }

  private publish(): void {
    const lines: ChatLineShown[] = [];
    for (const row of this.list.children) {
      const l = this.shown.get(Number((row as HTMLElement).dataset.seq));
      if (l !== undefined) lines.push(l);
    }
    this.debug.lines = lines;
  }

  /** Says `body` on the zone's channel; a refusal is told under the lines. */
  private async say(body: string): Promise<void> {
    const n = ++this.sends;
    this.debug.sent += 1;
    try {
      const channel = this.channel;
      if (channel === null) throw new ChatError("not_open", "no session yet");
      await this.conn.chat.send(channel, body);
      this.debug.heard += 1;
      // Heard: an older refusal is no longer news.
      if (n > this.noticeOf) {
        this.noticeOf = n;
        this.tell("");
      }
    } catch (e) {
      const words = refusalWords(e);
      this.debug.refused += 1;
      this.debug.lastRefusal = { ...words, body };
      if (n > this.noticeOf) {
        this.noticeOf = n;
        this.tell(words.shown, words.text);
      }
    }
  }

  private tell(text: string, title = ""): void {
    this.notice.textContent = text;
    this.notice.title = title;
    this.notice.hidden = text === "";
    this.debug.notice = text;
  }

  /** Reports the line `seq` of the channel shown. */
  private async report(seq: number, shown: ChatLineShown, button: HTMLButtonElement): Promise<void> {
    const channel = this.channel;
    if (channel === null || shown.report === "reporting" || shown.report === "reported") return;
    button.disabled = true;
    button.textContent = "reporting…";
    shown.report = "reporting";
    try {
      const id = await this.conn.chat.report(channel, [seq], REPORT_REASON);
      shown.report = "reported";
      this.debug.reports.push({ channel, seq, id });
      const done = el("span", "reported", "reported");
      done.title = `report ${id}`;
      button.replaceWith(done);
    } catch (e) {
      const words = refusalWords(e);
      shown.report = "failed";
      this.debug.reportError = words.shown;
      button.disabled = false;
      button.textContent = "report";
      button.title = `The report failed: ${words.shown}. Try again.`;
      this.tell(`report failed: ${words.shown}`, words.text);
    }
  }
}
