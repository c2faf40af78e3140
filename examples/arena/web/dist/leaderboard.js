/**
 * The "Top 10" panel of the arena pages: a board's best ten (`GET /boards/{board}?limit=10` through
 * the SDK's {@link BoardsClient}) on load, every five seconds, and whenever {@link LeaderboardPanel.refresh}
 * is called (the arena calls it when one of the player's scores is saved). Each row shows the rank,
 * the principal and the score; the player's own row is highlighted, and when the player is not in
 * the ten, a "you: #rank" line below comes from `GET /boards/{board}/around/{me}?radius=0`.
 *
 * A host without the board (`no_board`), without boards at all (`boards_off`) or without the routes
 * (a plain 404) hides the panel; any other failure keeps the last ranking on show with a "stale"
 * mark until a read succeeds again.
 */
import { BoardError, BoardsClient } from "./sdk/index.js";
function el(tag, cls, text = "") {
    const e = document.createElement(tag);
    e.className = cls;
    e.textContent = text;
    return e;
}
/** True for a failure that says the host has no such board to show (the panel hides). */
function noBoard(e) {
    return e instanceof BoardError && (e.noBoard || (e.status === 404 && e.code === "not_found"));
}
function describe(e) {
    return e instanceof BoardError ? `${e.code}: ${e.message}` : e instanceof Error ? e.message : String(e);
}
/** The panel (see the module's notes). */
export class LeaderboardPanel {
    /** The panel's state, also read by the browser test through `window.arena.board`. */
    debug;
    box;
    list;
    you;
    staleMark;
    client;
    board;
    limit;
    intervalMs;
    me;
    running = false;
    again = false;
    timer = null;
    /**
     * Appends the panel to `root` and starts reading. `me`: the player's principal (its ticket's
     * subject), null while it has none.
     */
    constructor(root, me, options = {}) {
        this.board = options.board ?? "score";
        this.limit = options.limit ?? 10;
        this.intervalMs = options.intervalMs ?? 5000;
        this.client = options.client ?? new BoardsClient(location.origin, undefined, { timeoutMs: 4000 });
        this.me = me;
        this.debug = { state: "loading", board: this.board, entries: [], me: null, mine: null, reads: 0, failures: 0, error: null };
        this.box = el("section", "leaderboard");
        this.box.setAttribute("aria-label", `Top ${this.limit}`);
        const head = el("div", "title", `Top ${this.limit}`);
        this.staleMark = el("span", "stale", "stale");
        this.staleMark.hidden = true;
        head.appendChild(this.staleMark);
        this.list = el("ol", "rows");
        this.you = el("div", "you");
        this.you.hidden = true;
        this.box.append(head, this.list, this.you);
        this.box.hidden = true;
        root.appendChild(this.box);
        void this.refresh();
    }
    /**
     * Reads the board now (or, while a read is under way, right after it), and again every
     * `intervalMs` after that, except once the host said it has no such board.
     */
    async refresh() {
        if (this.running) {
            this.again = true;
            return;
        }
        this.running = true;
        if (this.timer !== null)
            clearTimeout(this.timer);
        this.timer = null;
        try {
            do {
                this.again = false;
                await this.read();
            } while (this.again);
        }
        finally {
            this.running = false;
        }
        if (this.debug.state !== "hidden")
            this.timer = setTimeout(() => void this.refresh(), this.intervalMs);
    }
    async read() {
        const me = this.me();
        try {
            const top = await this.client.top(this.board, { limit: this.limit });
            let mine = null;
            if (me !== null && !top.entries.some((e) => e.principal === me)) {
                mine = (await this.client.around(this.board, me, { radius: 0 })).me;
            }
            this.debug.reads += 1;
            this.debug.error = null;
            this.show(top.entries, me, mine);
        }
        catch (e) {
            this.debug.failures += 1;
            this.debug.error = describe(e);
            if (noBoard(e)) {
                this.box.hidden = true;
                this.debug.state = "hidden";
            }
            else if (this.debug.state !== "loading") {
                // Keep the last ranking, marked as such.
                this.staleMark.hidden = false;
                this.staleMark.title = this.debug.error;
                this.debug.state = "stale";
            }
        }
    }
    show(entries, me, mine) {
        const rows = [];
        for (const e of entries) {
            const row = el("li", e.principal === me ? "row me" : "row");
            row.dataset.principal = e.principal;
            const name = el("span", "name", e.principal);
            name.title = e.principal;
            row.append(el("span", "rank", `#${e.rank}`), name, el("span", "score", String(e.score)));
            rows.push(row);
        }
        if (rows.length === 0)
            rows.push(el("li", "row empty", "no scores yet"));
        this.list.replaceChildren(...rows);
        this.you.hidden = mine === null;
        this.you.textContent = mine === null ? "" : `you: #${mine.rank} · ${mine.score}`;
        this.staleMark.hidden = true;
        this.box.hidden = false;
        this.debug.state = "shown";
        this.debug.entries = entries;
        this.debug.me = me;
        this.debug.mine = mine;
    }
}
