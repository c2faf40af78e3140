/**
 * Refusals, read the same way by every part of the SDK: what the host's JSON routes answer when
 * they refuse (`{"error": {"code", "message"}}`), a chat message the host refused
 * ({@link ChatRefusal}, protocol version 11) and the ban a Kick tells ({@link banOf}).
 */
import { chatReplyCodeName, ChatReplyCode } from "./chatcodec.js";
import { KickCode } from "./messages.js";
/**
 * What the host's JSON routes answer when they refuse: `{"error": {"code", "message"}}`, read
 * the same way by every HTTP client of the SDK that is not a game connection.
 */
/** True for a plain JSON object. */
export function isObject(v) {
    return typeof v === "object" && v !== null && !Array.isArray(v);
}
/**
 * The code and message a refusal of `status` with `body` stands for: the body's own, or, for an
 * answer without one (a proxy's page, an empty body), a code named after the status.
 */
export function refusalParts(status, body) {
    const error = isObject(body) && isObject(body.error) ? body.error : {};
    const own = typeof error.code === "string" && error.code !== "" ? error.code : null;
    const code = own ??
        (status === 400
            ? "bad_request"
            : status === 401
                ? "unauthorized"
                : status === 404
                    ? "not_found"
                    : status === 429
                        ? "rate_limited"
                        : status >= 500
                            ? "unavailable"
                            : `http_${status}`);
    const message = typeof error.message === "string" ? error.message : `the host answered ${status}`;
    return { code, message };
}
/**
 * A chat message the host refused (a ChatReply with a non-zero code, protocol version 11): what a
 * `conn.chat` promise rejects with. `code` is a {@link ChatReplyCode}, `name` its name (`MUTED`,
 * `RATE_LIMITED`, …, or `UNKNOWN(n)` for a code this SDK does not know), `untilMs` when the sender
 * may speak again (UNIX ms; only with MUTED and RATE_LIMITED, 0 otherwise), `text` the host's words.
 */
export class ChatRefusal extends Error {
    /** The ChatReply code. */
    code;
    /** The code's name: what `String(refusal)` starts with too. */
    name;
    /** When the sender may speak again, UNIX ms; 0 unless MUTED or RATE_LIMITED. */
    untilMs;
    /** The host's reason, as it wrote it (may be empty). */
    text;
    /** The ref of the refused message. */
    ref;
    constructor(reply) {
        const name = chatReplyCodeName(reply.code);
        super(reply.text !== "" ? reply.text : CHAT_REFUSAL_TEXT[reply.code] ?? `the host refused the message (${name})`);
        this.name = name;
        this.code = reply.code;
        this.untilMs = reply.untilMs;
        this.text = reply.text;
        this.ref = reply.ref;
    }
    /**
     * True when the same message may go through later unchanged: RATE_LIMITED (after `untilMs`) and
     * UNAVAILABLE (the host's store or queue); not MUTED, NOT_ALLOWED, INVALID or NOT_FOUND.
     */
    get retryable() {
        return this.code === ChatReplyCode.RATE_LIMITED || this.code === ChatReplyCode.UNAVAILABLE;
    }
}
/** What a refusal says when the host gave no text, by code. */
const CHAT_REFUSAL_TEXT = {
    [ChatReplyCode.RATE_LIMITED]: "too many messages too fast",
    [ChatReplyCode.MUTED]: "muted by a moderator",
    [ChatReplyCode.NOT_ALLOWED]: "this channel is not open to this session",
    [ChatReplyCode.INVALID]: "the message is empty, too long, or has control characters",
    [ChatReplyCode.UNAVAILABLE]: "chat is unavailable right now; try again",
    [ChatReplyCode.NOT_FOUND]: "the channel no longer keeps those lines",
};
const BAN_REASON = /^banned from (\S+) until (\d+): ?([\s\S]*)$/;
/**
 * The ban a Kick tells, or null when it tells none: a Kick BANNED (version 11), or the JOIN_REFUSED
 * a session of an older version is sent instead, whose reason has the same form. For a close:
 * `conn.on("close", (c) => { const ban = banOf(c.kick); if (ban) showBanned(ban.untilMs, ban.reason); })`.
 * A Kick BANNED whose reason does not have the form gives scope `""` and `untilMs` 0 with the whole
 * reason.
 */
export function banOf(kick) {
    if (kick == null || (kick.code !== KickCode.BANNED && kick.code !== KickCode.JOIN_REFUSED))
        return null;
    const m = BAN_REASON.exec(kick.reason);
    const until = m === null ? NaN : Number(m[2]);
    if (m === null || !Number.isSafeInteger(until)) {
        return kick.code === KickCode.BANNED ? { scope: "", untilMs: 0, reason: kick.reason } : null;
    }
    return { scope: m[1] ?? "", untilMs: until, reason: m[3] ?? "" };
}
