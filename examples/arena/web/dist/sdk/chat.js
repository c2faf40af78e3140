/**
 * Chat (protocol version 11): `conn.chat` of a {@link ZoneConnection}.
 *
 * ```ts
 * conn.chat.on("line", (line) => ui.append(line));          // every new line, in seq order per channel
 * await conn.chat.send(conn.chat.zoneChannel!, "gg");          // resolves when the line is heard back
 * await conn.chat.dm("bob", "rematch?");                       // = send("dm:bob", …)
 * const older = await conn.chat.history("zone:arena-1", { before: firstSeq, limit: 50 });
 * const reportId = await conn.chat.report("zone:arena-1", [41, 42], "spam");
 * ```
 *
 * Channels: `zone:<zone id>` (everyone attached to the zone), `group:<group name>` (everyone in any
 * zone of that zone group, a world), `dm:<principal>` (a direct message: a session names the
 * *other* principal; ann sends on `dm:bob`, bob hears it on `dm:ann`, ann's own sessions on
 * `dm:bob`). On attach the host sends each channel's recent lines (ChatLines with the history flag),
 * then lines as they are said.
 *
 * **Lines** are kept per channel (the newest {@link ChatOptions.keep}, default 200, oldest first:
 * {@link ChatClient.lines}) and told once each: 'line' for every line newer than the newest this
 * client told on its channel, in seq order — so the history a host sends again after a reconnect
 * repeats nothing the page already showed, and history comes before the live lines that follow it;
 * 'earlier' for lines older than that which join the kept lines (a page of
 * {@link ChatClient.history}, or recent lines that arrived after newer ones), to put above what is
 * shown. Lines older than a full window of kept lines are neither kept nor told (a history page
 * still resolves with them).
 *
 * **send** resolves with the line as the channel heard it: the first line on that channel, newer
 * than the newest the client knew there when it sent, whose sender is this session's principal (the
 * ticket's `sub`; not checked when the ticket is not a readable JWS) and whose body is the body
 * sent (or the same once trimmed, should the host trim it). Sends of the same body on one channel
 * resolve in the order they were made. It rejects with a {@link ChatRefusal} when the host refuses
 * the line (a ChatReply with that send's ref: RATE_LIMITED, MUTED, NOT_ALLOWED, INVALID,
 * UNAVAILABLE), and with a {@link ChatError} `timeout` when neither came within
 * {@link ChatOptions.timeoutMs} (default 10 s). A send survives a reconnect: the line may be heard in
 * the history the host sends on the next attach.
 *
 * Every method rejects with a {@link ChatError}: `unsupported` on a session of version 10 or older
 * (the host is older than chat), `not_open` while no session is open (connecting, reconnecting,
 * moving to another zone), `invalid` for an empty or over-long channel, body or request,
 * `disconnected` for a report or history request whose session ended before its answer, `closed`
 * once the connection closed for good.
 */
import { CHAT_LIMITS, CHAT_PROTOCOL, FEATURE_CHAT, ChatReplyCode, } from "./chatcodec.js";
import { ChatRefusal } from "./refusal.js";
import { EncodeError } from "./wire.js";
/** A chat call that failed without a refusal from the host. */
export class ChatError extends Error {
    /** What went wrong. */
    kind;
    constructor(kind, message) {
        super(`${kind}: ${message}`);
        this.name = "ChatError";
        this.kind = kind;
    }
}
/** The channel of everyone attached to `zoneId`. */
export function zoneChannel(zoneId) {
    return `zone:${zoneId}`;
}
/** The channel of everyone in any zone of the zone group (a world) `group`. */
export function groupChannel(group) {
    return `group:${group}`;
}
/** The channel of the direct messages with `principal`. */
export function dmChannel(principal) {
    return `dm:${principal}`;
}
const utf8 = new TextEncoder();
/** Chat on a {@link ZoneConnection}: `conn.chat`. See the module's documentation. */
export class ChatClient {
    port;
    keep;
    timeoutMs;
    channelsState = new Map();
    sends = [];
    requests = new Map();
    listeners = { line: new Set(), earlier: new Set() };
    lastRef = 0;
    over = false;
    /** A client talking through `port` (a {@link ZoneConnection} makes its own: `conn.chat`). */
    constructor(port, options = {}) {
        this.port = port;
        this.keep = Math.max(1, Math.floor(options.keep ?? 200));
        this.timeoutMs = options.timeoutMs ?? 10_000;
        port.listen({
            lines: (m) => this.onLines(m),
            reply: (m) => this.onReply(m),
            ended: () => this.onEnded(),
            closed: () => this.onClosed(),
        });
    }
    /** Subscribes to an event; returns the unsubscribe function. */
    on(name, fn) {
        this.listeners[name].add(fn);
        return () => this.off(name, fn);
    }
    /** Unsubscribes a handler. */
    off(name, fn) {
        this.listeners[name].delete(fn);
    }
    /**
     * True while a session of version 11 or later is open on a host that keeps chat (its Welcome's
     * `CHAT` feature bit: a host without a store refuses every chat message).
     */
    get available() {
        return (this.port.version() ?? 0) >= CHAT_PROTOCOL && (this.port.features() & FEATURE_CHAT) !== 0;
    }
    /** This session's principal (the ticket's `sub`), or null when unknown. */
    get principal() {
        return this.port.principal();
    }
    /** The channel of the zone this session is in (`zone:<id>`), or null before a Welcome. */
    get zoneChannel() {
        const z = this.port.zoneId();
        return z === null ? null : zoneChannel(z);
    }
    /** The channels this client keeps lines of, in the order first heard. */
    channels() {
        return [...this.channelsState.keys()];
    }
    /** The lines kept of `channel`, oldest first (the newest {@link ChatOptions.keep}). */
    lines(channel) {
        return [...(this.channelsState.get(channel)?.lines ?? [])];
    }
    /**
     * Says `body` on `channel`; resolves with the line once the channel hears it back (see the
     * module's documentation for how it is matched), rejects with a {@link ChatRefusal} or a
     * {@link ChatError}.
     */
    send(channel, body) {
        return new Promise((resolve, reject) => {
            const ref = this.begin(reject, () => {
                checkChannel(channel);
                if (body === "")
                    throw new ChatError("invalid", "an empty line");
                if (utf8.encode(body).length > CHAT_LIMITS.body)
                    throw new ChatError("invalid", `a line over ${CHAT_LIMITS.body} bytes`);
            });
            if (ref === null)
                return;
            const pending = {
                ref,
                channel,
                body,
                afterSeq: this.channelsState.get(channel)?.newest ?? 0,
                resolve,
                reject,
                timer: null,
            };
            pending.timer = this.port.scheduler.setTimeout(() => {
                this.dropSend(pending);
                reject(new ChatError("timeout", `no answer to the line on ${channel} within ${this.timeoutMs} ms`));
            }, this.timeoutMs);
            this.sends.push(pending);
            this.transmit({ type: "chat", ref, channel, body }, () => this.dropSend(pending), reject, pending.timer);
        });
    }
    /** Says `body` to `principal` directly: {@link send} on `dm:<principal>`. */
    dm(principal, body) {
        return this.send(dmChannel(principal), body);
    }
    /**
     * Reports lines of `channel` (1 to 20 seqs) to the moderators; resolves with the report's id.
     * Rejects with a {@link ChatRefusal} NOT_FOUND when the channel no longer keeps one of them.
     */
    report(channel, seqs, reason = "") {
        return new Promise((resolve, reject) => {
            const ref = this.begin(reject, () => {
                checkChannel(channel);
                if (seqs.length === 0)
                    throw new ChatError("invalid", "a report names no line");
                if (seqs.length > CHAT_LIMITS.reportSeqs)
                    throw new ChatError("invalid", `a report names over ${CHAT_LIMITS.reportSeqs} lines`);
                if (!seqs.every((s) => Number.isSafeInteger(s) && s > 0))
                    throw new ChatError("invalid", "a seq that is no line's");
                if (utf8.encode(reason).length > CHAT_LIMITS.reason)
                    throw new ChatError("invalid", `a reason over ${CHAT_LIMITS.reason} bytes`);
            });
            if (ref === null)
                return;
            const timer = this.request(ref, "report", resolve, reject);
            this.transmit({ type: "chat_report", ref, channel, seqs: [...seqs], reason }, () => this.requests.delete(ref), reject, timer);
        });
    }
    /**
     * A page of `channel`'s stored lines: the newest `limit` (1 to 200, default 50) before seq
     * `before` (default: the newest), oldest first. They are kept and told like any line ('line'
     * for those newer than what was told, 'earlier' for the others) before the promise resolves.
     */
    history(channel, options = {}) {
        const before = options.before ?? 0;
        const limit = options.limit ?? 50;
        return new Promise((resolve, reject) => {
            const ref = this.begin(reject, () => {
                checkChannel(channel);
                if (!Number.isSafeInteger(before) || before < 0)
                    throw new ChatError("invalid", `before ${before}`);
                if (!Number.isInteger(limit) || limit < 1 || limit > CHAT_LIMITS.historyLimit) {
                    throw new ChatError("invalid", `limit ${limit} not in 1..=${CHAT_LIMITS.historyLimit}`);
                }
            });
            if (ref === null)
                return;
            const timer = this.request(ref, "history", resolve, reject);
            this.transmit({ type: "chat_history", ref, channel, before, limit }, () => this.requests.delete(ref), reject, timer);
        });
    }
    /** Checks that chat can be used now and the arguments; the next ref, or null after rejecting. */
    begin(reject, check) {
        try {
            if (this.over)
                throw new ChatError("closed", "the connection is closed");
            const version = this.port.version();
            if (version === null)
                throw new ChatError("not_open", "no session is open (connecting, reconnecting or moving)");
            if (version < CHAT_PROTOCOL) {
                throw new ChatError("unsupported", `chat needs protocol version ${CHAT_PROTOCOL}; this session speaks version ${version} (the host is older)`);
            }
            check();
        }
        catch (e) {
            reject(e instanceof Error ? e : new Error(String(e)));
            return null;
        }
        return this.nextRef();
    }
    /** A ref no pending message holds (1..=2^32 − 1, wrapping). */
    nextRef() {
        for (;;) {
            this.lastRef = this.lastRef >= 0xffff_ffff ? 1 : this.lastRef + 1;
            const ref = this.lastRef;
            if (!this.requests.has(ref) && !this.sends.some((s) => s.ref === ref))
                return ref;
        }
    }
    request(ref, kind, resolve, reject) {
        const timer = this.port.scheduler.setTimeout(() => {
            this.requests.delete(ref);
            reject(new ChatError("timeout", `no answer to the ${kind} request within ${this.timeoutMs} ms`));
        }, this.timeoutMs);
        this.requests.set(ref, { kind, resolve, reject, timer });
        return timer;
    }
    /** Sends `m`; an encoding failure undoes what was pending and rejects. */
    transmit(m, undo, reject, timer) {
        try {
            this.port.send(m);
        }
        catch (e) {
            undo();
            this.port.scheduler.clearTimeout(timer);
            reject(e instanceof EncodeError ? new ChatError("invalid", e.message) : e instanceof Error ? e : new Error(String(e)));
        }
    }
    dropSend(p) {
        const i = this.sends.indexOf(p);
        if (i >= 0)
            this.sends.splice(i, 1);
    }
    emit(name, ...args) {
        for (const fn of [...this.listeners[name]])
            fn(...args);
    }
    onLines(m) {
        const lines = m.lines
            .map((l) => ({ channel: m.channel, seq: l.seq, sender: l.sender, sentAtMs: l.sentAtMs, body: l.body, history: m.history }))
            .sort((a, b) => a.seq - b.seq);
        let ch = this.channelsState.get(m.channel);
        if (ch === undefined) {
            ch = { lines: [], newest: 0 };
            this.channelsState.set(m.channel, ch);
        }
        const fresh = [];
        const earlier = [];
        for (const line of lines) {
            if (line.seq > ch.newest) {
                fresh.push(line);
                ch.newest = line.seq;
                insertLine(ch.lines, line);
            }
            else if (ch.lines.length < this.keep || line.seq > (ch.lines[0]?.seq ?? 0)) {
                // Inside the kept window, where every line told is kept: one not there was never told.
                // Older than a full window: it would not be kept, and it may have been told before.
                if (insertLine(ch.lines, line))
                    earlier.push(line);
            }
        }
        while (ch.lines.length > this.keep)
            ch.lines.shift();
        if (earlier.length > 0)
            this.emit("earlier", m.channel, earlier);
        for (const line of fresh)
            this.emit("line", line);
        // Answers: the history page this is (by ref), and the sends these lines are.
        if (m.ref !== 0) {
            const req = this.requests.get(m.ref);
            if (req !== undefined && req.kind === "history") {
                this.requests.delete(m.ref);
                this.port.scheduler.clearTimeout(req.timer);
                req.resolve(lines);
            }
        }
        for (const line of lines)
            this.matchSend(line);
    }
    /** Resolves the oldest pending send `line` is the echo of, if any. */
    matchSend(line) {
        const me = this.port.principal();
        if (me !== null && line.sender !== me)
            return;
        const candidates = this.sends.filter((p) => p.channel === line.channel && line.seq > p.afterSeq);
        const p = candidates.find((c) => c.body === line.body) ?? candidates.find((c) => c.body.trim() === line.body.trim());
        if (p === undefined)
            return;
        this.dropSend(p);
        this.port.scheduler.clearTimeout(p.timer);
        p.resolve(line);
    }
    onReply(m) {
        const send = this.sends.find((p) => p.ref === m.ref);
        if (send !== undefined) {
            // A line said is answered by its echo; only a refusal comes as a reply.
            if (m.code === ChatReplyCode.OK)
                return;
            this.dropSend(send);
            this.port.scheduler.clearTimeout(send.timer);
            send.reject(new ChatRefusal(m));
            return;
        }
        const req = this.requests.get(m.ref);
        if (req === undefined)
            return;
        if (m.code === ChatReplyCode.OK && req.kind !== "report")
            return;
        this.requests.delete(m.ref);
        this.port.scheduler.clearTimeout(req.timer);
        if (m.code === ChatReplyCode.OK)
            req.resolve(m.text);
        else
            req.reject(new ChatRefusal(m));
    }
    /** The session ended: its answers will not come (sends wait on: the next attach's history may hold them). */
    onEnded() {
        for (const [ref, req] of [...this.requests]) {
            this.requests.delete(ref);
            this.port.scheduler.clearTimeout(req.timer);
            req.reject(new ChatError("disconnected", `the session ended before the ${req.kind} request was answered`));
        }
    }
    onClosed() {
        this.over = true;
        this.onEnded();
        for (const p of this.sends.splice(0)) {
            this.port.scheduler.clearTimeout(p.timer);
            p.reject(new ChatError("closed", "the connection closed before the line was heard"));
        }
    }
}
/** Inserts `line` into `lines` (ascending by seq); false when that seq is there already. */
function insertLine(lines, line) {
    let lo = 0;
    let hi = lines.length;
    while (lo < hi) {
        const mid = (lo + hi) >> 1;
        if ((lines[mid]?.seq ?? 0) < line.seq)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lines[lo]?.seq === line.seq)
        return false;
    lines.splice(lo, 0, line);
    return true;
}
function checkChannel(channel) {
    if (channel === "")
        throw new ChatError("invalid", "an empty channel");
    if (utf8.encode(channel).length > CHAT_LIMITS.channel)
        throw new ChatError("invalid", `a channel over ${CHAT_LIMITS.channel} bytes`);
}
