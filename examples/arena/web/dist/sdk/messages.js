/**
 * Every message of PROTOCOL.md §4–§5: encode and total decode. Client → server tags are 0x01..=0x7f,
 * server → client 0x80..=0xff. A Delta (or a State, its datagram form) can only be decoded with its
 * context (the schema from Welcome and the known set), so {@link decodeServerMessage} takes that
 * context as an argument.
 */
import { decodeDeltaBody, DELTA_LIMITS, DELTA_TAG, encodeDeltaBody, STATE_TAG, } from "./delta.js";
import { readChat, readChatHistory, readChatLines, readChatReply, readChatReport, writeChat, writeChatHistory, writeChatLines, writeChatReply, writeChatReport, } from "./chatcodec.js";
import { decodeSchema, encodeSchema } from "./schema.js";
import { DecodeError, EncodeError, Reader, Writer } from "./wire.js";
/** Message tags (§4, §5). */
export const Tag = {
    Hello: 0x01,
    Input: 0x02,
    Ping: 0x03,
    Resync: 0x04,
    /** The Inputs datagram (§4.5, version 6). */
    Inputs: 0x05,
    /** A chat line (version 11). */
    Chat: 0x06,
    /** A report of chat lines to the moderators (version 11). */
    ChatReport: 0x07,
    /** A page of a channel's stored chat lines (version 11). */
    ChatHistory: 0x08,
    Welcome: 0x81,
    Delta: DELTA_TAG,
    Pong: 0x83,
    Kick: 0x84,
    Redirect: 0x85,
    Transfer: 0x86,
    InputRefused: 0x87,
    KnownSetCheck: 0x88,
    /** The State datagram (§5.8, version 6). */
    State: STATE_TAG,
    /** Events on a WebTransport session's control stream (§5.9, version 6). */
    Events: 0x8a,
    Entries: 0x8b,
    /** Chat lines of one channel (version 11). */
    ChatLines: 0x8c,
    /** A chat report filed, or a chat message refused (version 11). */
    ChatReply: 0x8d,
};
/** Size and count limits of §7. */
export const LIMITS = {
    clientMessage: 8_192,
    serverMessage: 1_048_576,
    versions: 8,
    ticket: 4_096,
    reconnectToken: 64,
    zoneId: 128,
    contentVersion: 64,
    kickReason: 256,
    inputPayload: 4_096,
    url: 512,
    /** Entry URLs a Welcome lists (§5.3.1, version 7). */
    entries: 8,
    /** Redirects a client follows in one connection attempt (§5.3.1). */
    redirects: 3,
    /** Inputs one Inputs datagram carries (§4.5): the newest and the unacknowledged ones before it. */
    datagramInputs: 8,
    /** States a client keeps to apply onto, and a host to diff against (§5.8). */
    stateRing: 32,
};
/**
 * The protocol versions this SDK implements, and offers by default: version 11 (chat: the Chat,
 * ChatReport and ChatHistory messages, ChatLines and ChatReply, and the Kick code BANNED; see
 * {@link CHAT_PROTOCOL}; a host of an older version picks 10), version 10 (the Kick codes
 * CHARACTER_MOVED and CHARACTER_ELSEWHERE, §5.3 "Characters": the player's character went into
 * another zone, or another zone holds it and could not give it back yet; otherwise the bytes of
 * version 9, which a host of that version picks), version 9 (the Kick code
 * WORLD_HALTED, §5.3: a lasting world whose saves failed stopped; otherwise the bytes of version 8,
 * which a host of that version picks), version 8 (the Transfer
 * message, §5.3.2: the player is moved to another zone), version 7 (Welcome's `entries`,
 * where else the zone may be entered, §5.3.1; a host that speaks only up to 6 picks 6), version 6 (the WebTransport
 * transport, §1.1, with its State and Inputs datagrams and the Events message; over WebSocket byte
 * for byte version 5), which includes version 5 (Welcome's `contentVersion` and the Kick code
 * CONTENT_OUTDATED, §4.1.2), version 4 (a resuming Hello's `resumeFrom`, §4.1.1) and version 3
 * (Redirect, and the Kick codes ZONE_MOVED, HOST_FENCED and TOO_MANY_REDIRECTS).
 */
export const SUPPORTED_VERSIONS = [6, 7, 8, 9, 10, 11];
/**
 * The version that added {@link Transfer} (§5.3.2): version 7 plus that message. A host sends it
 * only to a session that negotiated this version or a later one.
 */
export const TRANSFER_PROTOCOL = 8;
/**
 * The version that added {@link KickCode.WORLD_HALTED} (§5.3): version 8 plus that code, its bytes
 * otherwise version 8's. A host sends it only to a session that negotiated this version or a later
 * one, and INTERNAL_ERROR to an older one.
 */
export const HALT_PROTOCOL = 9;
/**
 * The version that added {@link KickCode.CHARACTER_MOVED} and {@link KickCode.CHARACTER_ELSEWHERE}
 * (§5.3, "Characters"): version 9 plus those codes, its bytes otherwise version 9's. A host sends
 * them only to a session that negotiated this version or a later one; an older one gets KICKED in
 * place of CHARACTER_MOVED (it stops) and INTERNAL_ERROR in place of CHARACTER_ELSEWHERE (it retries).
 */
export const CHARACTER_PROTOCOL = 10;
/**
 * The version that added the WebTransport transport (§1.1): State (§5.8) and Inputs (§4.5)
 * datagrams and the Events message (§5.9). A WebTransport session speaks it or a later one.
 */
export const DATAGRAM_VERSION = 6;
/** The version that added {@link ResumeFrom} to Hello (§4.1.1). */
export const RESUME_FROM_VERSION = 4;
/**
 * The version that added {@link Welcome.contentVersion} and {@link KickCode.CONTENT_OUTDATED}
 * (§4.1.2): a Welcome of an older version carries no content version.
 */
export const CONTENT_VERSION_PROTOCOL = 5;
/**
 * The version that added {@link Welcome.entries} (§5.3.1): a Welcome of an older version lists no
 * entry URLs.
 */
export const ENTRIES_PROTOCOL = 7;
/**
 * The URLs of `entries` a client may connect to (§5.3.1): absolute `ws://` or `wss://` URLs, the
 * others skipped, as a Redirect to them would be refused.
 */
export function websocketEntries(entries) {
    return (entries ?? []).filter((url) => redirectTarget({ type: "redirect", url, zoneId: "" }) !== null);
}
/** Kick codes of §5.3. Unknown codes decode fine and are shown as numbers. */
export const KickCode = {
    BAD_TICKET: 1,
    TICKET_EXPIRED: 2,
    TICKET_NOT_YET_VALID: 3,
    TICKET_UNKNOWN_KEY: 4,
    TICKET_RETIRED_KEY: 5,
    TICKET_BAD_ALGORITHM: 6,
    TICKET_WRONG_ZONE: 7,
    TICKET_REPLAYED: 8,
    ZONE_FULL: 9,
    VERSION_MISMATCH: 10,
    KICKED: 11,
    SHUTTING_DOWN: 12,
    RATE_LIMITED: 13,
    PROTOCOL_ERROR: 14,
    MESSAGE_TOO_LARGE: 15,
    HANDSHAKE_TIMEOUT: 16,
    IDLE_TIMEOUT: 17,
    SLOW_CONSUMER: 18,
    JOIN_REFUSED: 19,
    RECONNECT_REFUSED: 20,
    ZONE_STOPPED: 21,
    TOO_MANY_CONNECTIONS: 22,
    INTERNAL_ERROR: 23,
    /** The zone moved to another host; resume there (version 3). */
    ZONE_MOVED: 24,
    /** This host lost its lease on the zone; resume elsewhere (version 3). */
    HOST_FENCED: 25,
    /** The connection attempt took too many hops; the host refused another (version 3). */
    TOO_MANY_REDIRECTS: 26,
    /**
     * The client's content version is older than the host accepts; reload the client (version 5,
     * §4.1.2). Final: {@link ZoneConnection} stops and emits 'reload'.
     */
    CONTENT_OUTDATED: 27,
    /**
     * The lasting world stopped because its saves failed; it resumes by itself from its last
     * committed save once its store answers, so whatever happened since that save is gone (version 9,
     * §5.3). Like INTERNAL_ERROR, {@link defaultReconnectPolicy} retries it with backoff through the
     * entry URL, with the reconnect token inside the grace window. A session of an older version gets
     * INTERNAL_ERROR instead.
     */
    WORLD_HALTED: 28,
    /**
     * The player's character (what travels with the player: inventory, level, gold) was taken into
     * another zone — the player started playing in another game or on another device — so this
     * session is over (version 10, §5.3 "Characters"). Final: {@link ZoneConnection} does not
     * reconnect (that would take the character back at once), and emits 'movedElsewhere' so the game
     * can tell the player. A session of an older version gets KICKED instead.
     */
    CHARACTER_MOVED: 29,
    /**
     * Another zone holds the player's character and could not be asked to give it back yet (its host
     * does not answer); the join may succeed shortly (version 10, §5.3 "Characters"). Like
     * INTERNAL_ERROR, {@link defaultReconnectPolicy} retries it with backoff through the entry URL,
     * keeping the ticket and reconnect-token rules. A session of an older version gets INTERNAL_ERROR
     * instead.
     */
    CHARACTER_ELSEWHERE: 30,
    /**
     * The principal is banned from this zone, its zone group, or the whole fleet, until a time the
     * reason names: `banned from <scope> until <until_ms>: <reason>` (`banOf` in the SDK reads it). Final:
     * {@link defaultReconnectPolicy} stops, since every join is refused until the ban ends
     * (version 11, {@link CHAT_PROTOCOL}). A session of an older version gets JOIN_REFUSED with the
     * same reason instead.
     */
    BANNED: 31,
};
/**
 * Whether a Kick code ends the connection but not the session (§5.3): ZONE_MOVED and HOST_FENCED,
 * after which the client resumes at once through its entry URL with its reconnect token.
 */
export function kickResumesElsewhere(code) {
    return code === KickCode.ZONE_MOVED || code === KickCode.HOST_FENCED;
}
/**
 * Compares two content versions (§4.1.2), dotted numbers such as `1.4.0`, numerically component by
 * component, a missing component counting as 0: negative when `a` is older than `b`, 0 when they
 * are the same version (`1.4` and `1.4.0`), positive when `a` is newer. Null when either is not a
 * dotted number (empty included) or is longer than 64 bytes.
 */
export function compareContentVersions(a, b) {
    const parse = (v) => {
        if (v.length === 0 || v.length > LIMITS.contentVersion || !/^[0-9]+(\.[0-9]+)*$/.test(v))
            return null;
        const parts = v.split(".").map((p) => p.replace(/^0+/, ""));
        while (parts.length > 0 && parts[parts.length - 1] === "")
            parts.pop();
        return parts;
    };
    const pa = parse(a);
    const pb = parse(b);
    if (pa === null || pb === null)
        return null;
    for (let i = 0; i < Math.max(pa.length, pb.length); i++) {
        const x = pa[i] ?? "";
        const y = pb[i] ?? "";
        // Without leading zeros, the longer run of digits is the larger number (no precision limit).
        if (x.length !== y.length)
            return x.length < y.length ? -1 : 1;
        if (x !== y)
            return x < y ? -1 : 1;
    }
    return 0;
}
/** The name of a kick code, or `UNKNOWN(n)`. */
export function kickCodeName(code) {
    for (const [name, value] of Object.entries(KickCode))
        if (value === code)
            return name;
    return `UNKNOWN(${code})`;
}
/**
 * FNV-1a (32 bit) over each id's four little-endian bytes, in order (§5.7): what a
 * {@link KnownSetCheck} carries.
 */
export function knownSetHash(ids) {
    let h = 0x811c9dc5;
    for (const id of ids) {
        for (let k = 0; k < 4; k++) {
            h ^= (id >>> (8 * k)) & 0xff;
            h = Math.imul(h, 0x01000193) >>> 0;
        }
    }
    return h >>> 0;
}
/**
 * The URL a Redirect leads to, or null when it is not an absolute `ws://` or `wss://` URL, which a
 * client must refuse (§5.3.1): a Redirect must not send a ticket anywhere but to a zone host. The
 * scheme is matched without regard to case. The same rule as the Rust `Redirect::websocket_url`.
 */
export function redirectTarget(r) {
    const i = r.url.indexOf("://");
    if (i < 0)
        return null;
    const scheme = r.url.slice(0, i).toLowerCase();
    const rest = r.url.slice(i + 3);
    // An empty authority (`ws:///zones/a`) names no host.
    if ((scheme !== "ws" && scheme !== "wss") || rest === "" || rest.startsWith("/"))
        return null;
    return r.url;
}
/**
 * The URL a Transfer leads to, or null when it is not an absolute `ws://` or `wss://` URL: the
 * client then ignores the Transfer (§5.3.2), so the credential never goes anywhere but to a zone
 * host. The same rule as {@link redirectTarget} and the Rust `Transfer::websocket_url`.
 */
export function transferTarget(t) {
    return redirectTarget({ type: "redirect", url: t.url, zoneId: t.zoneId });
}
/** The tag of a message without decoding it (truncated input is a {@link DecodeError}). */
export function peekTag(bytes) {
    const t = bytes[0];
    if (t === undefined)
        throw new DecodeError("truncated", "empty message");
    return t;
}
/** A `resumeFrom` needs a reconnect token to resume and version 4 (or later) offered (§4.1.1). */
function checkResumeFrom(m, err) {
    if (m.resumeFrom == null)
        return;
    if (m.reconnectToken.length === 0)
        throw err("Hello has resume_from without a reconnect token");
    // Any version from 4 on defines it: a version 6 client offers only 6.
    if (!m.versions.some((v) => v >= RESUME_FROM_VERSION)) {
        throw err("Hello has resume_from without offering version 4 or later");
    }
}
function checkVersions(versions, err) {
    if (versions.length < 1 || versions.length > LIMITS.versions)
        throw err("versions count not in 1..=8");
    if (new Set(versions).size !== versions.length)
        throw err("versions are not distinct");
}
/** One input's fields (§4.2), as Input and the Inputs datagram both carry them. */
function writeInput(w, i) {
    if (i.seq === 0)
        throw new EncodeError("invalid", "input seq 0");
    w.varintU32(i.seq).varint(i.viewTick);
    w.bytesField(i.payload, LIMITS.inputPayload, "input payload");
}
function readInput(r) {
    const seq = r.varintU32();
    if (seq === 0)
        throw new DecodeError("invalid", "input seq 0");
    const viewTick = r.varintU64();
    return { seq, viewTick, payload: r.bytesField(LIMITS.inputPayload, "input payload") };
}
/** Encodes a client → server message. */
export function encodeClientMessage(m) {
    const w = new Writer(64);
    switch (m.type) {
        case "hello":
            checkVersions(m.versions, (s) => new EncodeError("invalid", s));
            w.u8(Tag.Hello).varint(m.versions.length);
            for (const v of m.versions)
                w.varintU32(v);
            w.str(m.ticket, LIMITS.ticket, "ticket");
            w.bytesField(m.reconnectToken, LIMITS.reconnectToken, "reconnect token");
            w.str(m.contentVersion, LIMITS.contentVersion, "content version");
            checkResumeFrom(m, (s) => new EncodeError("invalid", s));
            if (m.resumeFrom != null) {
                const h = m.resumeFrom.hash >>> 0;
                w.u8(1).varint(m.resumeFrom.tick).varintU32(m.resumeFrom.count);
                w.u8(h & 0xff).u8((h >>> 8) & 0xff).u8((h >>> 16) & 0xff).u8(h >>> 24);
            }
            break;
        case "input":
            w.u8(Tag.Input);
            writeInput(w, m);
            break;
        case "inputs": {
            if (m.inputs.length > LIMITS.datagramInputs) {
                throw new EncodeError("too_long", `inputs in a datagram: ${m.inputs.length} > ${LIMITS.datagramInputs}`);
            }
            for (let i = 1; i < m.inputs.length; i++) {
                if ((m.inputs[i - 1]?.seq ?? 0) >= (m.inputs[i]?.seq ?? 0)) {
                    throw new EncodeError("invalid", "datagram inputs not ascending by seq");
                }
            }
            w.u8(Tag.Inputs).varint(m.stateAck).varint(m.inputs.length);
            for (const i of m.inputs)
                writeInput(w, i);
            break;
        }
        case "ping":
            w.u8(Tag.Ping).varint(m.clientTime);
            break;
        case "resync":
            w.u8(Tag.Resync).varint(m.tick);
            break;
        case "chat":
            writeChat(w.u8(Tag.Chat), m);
            break;
        case "chat_report":
            writeChatReport(w.u8(Tag.ChatReport), m);
            break;
        case "chat_history":
            writeChatHistory(w.u8(Tag.ChatHistory), m);
            break;
    }
    if (w.length > LIMITS.clientMessage)
        throw new EncodeError("too_long", "client message over 8192 bytes");
    return w.finish();
}
/** Decodes a client → server message (what a host or a test server reads). */
export function decodeClientMessage(bytes) {
    if (bytes.length > LIMITS.clientMessage) {
        throw new DecodeError("too_long", `client message of ${bytes.length} bytes`);
    }
    const r = new Reader(bytes);
    const tag = r.u8();
    let m;
    switch (tag) {
        case Tag.Hello: {
            const n = r.varintU32();
            if (n > LIMITS.versions)
                throw new DecodeError("too_long", `versions: ${n} > ${LIMITS.versions}`);
            if (n < 1)
                throw new DecodeError("invalid", "Hello offers no version");
            const versions = [];
            for (let i = 0; i < n; i++)
                versions.push(r.varintU32());
            checkVersions(versions, (s) => new DecodeError("invalid", s));
            const ticket = r.str(LIMITS.ticket, "ticket");
            const reconnectToken = r.bytesField(LIMITS.reconnectToken, "reconnect token");
            const contentVersion = r.str(LIMITS.contentVersion, "content version");
            // Absent unless bytes follow the content version (§4.1.1).
            let resumeFrom = null;
            if (r.remaining() > 0) {
                if (r.u8() !== 1)
                    throw new DecodeError("invalid", "Hello resume_from marker is not 1");
                // Refused at the marker (§4.1.1): what follows it is not read.
                checkResumeFrom({ type: "hello", versions, ticket, reconnectToken, contentVersion, resumeFrom: { tick: 0, count: 0, hash: 0 } }, (s) => new DecodeError("invalid", s));
                const tick = r.varintU64();
                const count = r.varintU32();
                const b = r.raw(4);
                const hash = ((b[0] ?? 0) | ((b[1] ?? 0) << 8) | ((b[2] ?? 0) << 16) | ((b[3] ?? 0) << 24)) >>> 0;
                resumeFrom = { tick, count, hash };
            }
            const hello = { type: "hello", versions, ticket, reconnectToken, contentVersion, resumeFrom };
            checkResumeFrom(hello, (s) => new DecodeError("invalid", s));
            m = hello;
            break;
        }
        case Tag.Input:
            m = { type: "input", ...readInput(r) };
            break;
        case Tag.Inputs: {
            const stateAck = r.varintU64();
            const n = r.varintU32();
            if (n > LIMITS.datagramInputs) {
                throw new DecodeError("too_long", `inputs in a datagram: ${n} > ${LIMITS.datagramInputs}`);
            }
            const inputs = [];
            for (let i = 0; i < n; i++) {
                const input = readInput(r);
                const prev = inputs[inputs.length - 1];
                if (prev !== undefined && prev.seq >= input.seq) {
                    throw new DecodeError("invalid", "datagram inputs not ascending by seq");
                }
                inputs.push(input);
            }
            m = { type: "inputs", stateAck, inputs };
            break;
        }
        case Tag.Ping:
            m = { type: "ping", clientTime: r.varintU64() };
            break;
        case Tag.Resync:
            m = { type: "resync", tick: r.varintU64() };
            break;
        case Tag.Chat:
            m = readChat(r);
            break;
        case Tag.ChatReport:
            m = readChatReport(r);
            break;
        case Tag.ChatHistory:
            m = readChatHistory(r);
            break;
        default:
            throw new DecodeError("unknown_tag", `client tag 0x${tag.toString(16)}`);
    }
    r.finish();
    return m;
}
/** Encodes a server → client message; a Delta or a State needs its context. */
export function encodeServerMessage(m, ctx) {
    const w = new Writer(128);
    switch (m.type) {
        case "welcome": {
            if (!Number.isInteger(m.tickHz) || m.tickHz < 1 || m.tickHz > 1000) {
                throw new EncodeError("invalid", "tick_hz not in 1..=1000");
            }
            if (!Number.isInteger(m.patchEvery) || m.patchEvery < 1) {
                throw new EncodeError("invalid", "patch_every must be ≥ 1");
            }
            const contentVersion = m.contentVersion ?? "";
            if (m.version < CONTENT_VERSION_PROTOCOL && contentVersion !== "") {
                throw new EncodeError("invalid", "Welcome content_version needs version 5");
            }
            const entries = m.entries ?? [];
            if (m.version < ENTRIES_PROTOCOL && entries.length > 0) {
                throw new EncodeError("invalid", "Welcome entries need version 7");
            }
            w.u8(Tag.Welcome).varint(m.version).varintU32(m.playerId);
            w.str(m.zoneId, LIMITS.zoneId, "zone id");
            w.u8(m.role === "player" ? 0 : 1);
            w.varintU32(m.tickHz).varintU32(m.patchEvery).varint(m.tick).varintU32(m.features);
            w.varintU32(m.idleTimeoutMs).varintU32(m.handshakeTimeoutMs).varintU32(m.reconnectGraceMs);
            w.bytesField(m.reconnectToken, LIMITS.reconnectToken, "reconnect token");
            encodeSchema(w, m.schema);
            // Version 5 on: the host's content version follows the schema (§5.1).
            if (m.version >= CONTENT_VERSION_PROTOCOL)
                w.str(contentVersion, LIMITS.contentVersion, "content version");
            // Version 7 on: the entry URLs follow the content version (§5.1).
            if (m.version >= ENTRIES_PROTOCOL)
                writeEntries(w, entries);
            break;
        }
        case "delta":
            if (ctx === undefined)
                throw new EncodeError("invalid", "a Delta needs a schema and known set");
            w.u8(Tag.Delta);
            encodeDeltaBody(w, m, ctx.schema, ctx.known, false);
            break;
        case "state":
            if (ctx === undefined)
                throw new EncodeError("invalid", "a State needs a schema and known set");
            w.u8(Tag.State);
            encodeDeltaBody(w, m, ctx.schema, ctx.known, true);
            break;
        case "entries":
            w.u8(Tag.Entries);
            writeEntries(w, m.entries);
            break;
        case "events":
            if (m.events.length === 0)
                throw new EncodeError("invalid", "an Events message carries no events");
            if (m.events.length > DELTA_LIMITS.events) {
                throw new EncodeError("too_long", `events: ${m.events.length} > ${DELTA_LIMITS.events}`);
            }
            w.u8(Tag.Events).varint(m.tick).varint(m.events.length);
            for (const ev of m.events) {
                if (!Number.isInteger(ev.topic) || ev.topic < 0 || ev.topic > 0xffff) {
                    throw new EncodeError("invalid", `event topic ${ev.topic}`);
                }
                w.varint(ev.topic).bytesField(ev.payload, DELTA_LIMITS.eventPayload, "event payload");
            }
            break;
        case "pong":
            w.u8(Tag.Pong).varint(m.clientTime).varint(m.serverTimeUs).varint(m.tick);
            break;
        case "kick":
            if (!Number.isInteger(m.code) || m.code < 0 || m.code > 0xffff) {
                throw new EncodeError("invalid", `kick code ${m.code}`);
            }
            w.u8(Tag.Kick).varint(m.code).str(m.reason, LIMITS.kickReason, "kick reason");
            break;
        case "redirect":
            w.u8(Tag.Redirect).str(m.url, LIMITS.url, "url").str(m.zoneId, LIMITS.zoneId, "zone id");
            break;
        case "transfer":
            w.u8(Tag.Transfer).str(m.zoneId, LIMITS.zoneId, "zone id");
            w.str(m.ticket, LIMITS.ticket, "ticket").str(m.url, LIMITS.url, "url");
            break;
        case "input_refused":
            if (m.seq === 0)
                throw new EncodeError("invalid", "input seq 0");
            if (!Number.isInteger(m.code) || m.code < 0 || m.code > 0xffff) {
                throw new EncodeError("invalid", `refusal code ${m.code}`);
            }
            w.u8(Tag.InputRefused).varintU32(m.seq).varint(m.code);
            break;
        case "known_set_check": {
            w.u8(Tag.KnownSetCheck).varint(m.tick).varintU32(m.count);
            const h = m.hash >>> 0;
            w.u8(h & 0xff).u8((h >>> 8) & 0xff).u8((h >>> 16) & 0xff).u8(h >>> 24);
            break;
        }
        case "chat_lines":
            writeChatLines(w.u8(Tag.ChatLines), m);
            break;
        case "chat_reply":
            writeChatReply(w.u8(Tag.ChatReply), m);
            break;
    }
    if (w.length > LIMITS.serverMessage)
        throw new EncodeError("too_long", "server message over 1 MiB");
    return w.finish();
}
/**
 * Decodes a server → client message. A Delta (or a State) is decoded against `ctx`; without one it
 * is a {@link DecodeError} (a Delta before Welcome is out of place).
 */
export function decodeServerMessage(bytes, ctx) {
    if (bytes.length > LIMITS.serverMessage) {
        throw new DecodeError("too_long", `server message of ${bytes.length} bytes`);
    }
    const r = new Reader(bytes);
    const tag = r.u8();
    let m;
    switch (tag) {
        case Tag.Welcome: {
            const version = r.varintU32();
            const playerId = r.varintU32();
            const zoneId = r.str(LIMITS.zoneId, "zone id");
            const roleByte = r.u8();
            if (roleByte > 1)
                throw new DecodeError("invalid", `role ${roleByte}`);
            const tickHz = r.varintU32();
            if (tickHz < 1 || tickHz > 1000)
                throw new DecodeError("invalid", `tick_hz ${tickHz}`);
            const patchEvery = r.varintU32();
            if (patchEvery < 1)
                throw new DecodeError("invalid", "patch_every 0");
            const tick = r.varintU64();
            const features = r.varintU32();
            const idleTimeoutMs = r.varintU32();
            const handshakeTimeoutMs = r.varintU32();
            const reconnectGraceMs = r.varintU32();
            const reconnectToken = r.bytesField(LIMITS.reconnectToken, "reconnect token");
            const schema = decodeSchema(r);
            const contentVersion = version >= CONTENT_VERSION_PROTOCOL ? r.str(LIMITS.contentVersion, "content version") : "";
            const entries = version >= ENTRIES_PROTOCOL ? readEntries(r) : [];
            m = {
                type: "welcome",
                version,
                playerId,
                zoneId,
                role: roleByte === 0 ? "player" : "observer",
                tickHz,
                patchEvery,
                tick,
                features,
                idleTimeoutMs,
                handshakeTimeoutMs,
                reconnectGraceMs,
                reconnectToken,
                schema,
                contentVersion,
                entries,
            };
            break;
        }
        case Tag.Delta:
            if (ctx === undefined)
                throw new DecodeError("invalid", "a Delta needs a schema and known set");
            m = { type: "delta", ...decodeDeltaBody(r, ctx.schema, ctx.known) };
            break;
        case Tag.State: {
            if (ctx === undefined)
                throw new DecodeError("invalid", "a State needs a schema and known set");
            const d = decodeDeltaBody(r, ctx.schema, ctx.known, true);
            m = { ...d, type: "state", base: d.base ?? 0 };
            break;
        }
        case Tag.Events: {
            const tick = r.varintU64();
            const n = r.varintU32();
            if (n > DELTA_LIMITS.events)
                throw new DecodeError("too_long", `events: ${n} > ${DELTA_LIMITS.events}`);
            if (n === 0)
                throw new DecodeError("invalid", "an Events message carries no events");
            const events = [];
            for (let i = 0; i < n; i++) {
                const topic = r.varintU16();
                events.push({ topic, payload: r.bytesField(DELTA_LIMITS.eventPayload, "event payload") });
            }
            m = { type: "events", tick, events };
            break;
        }
        case Tag.Entries:
            m = { type: "entries", entries: readEntries(r) };
            break;
        case Tag.Pong: {
            const clientTime = r.varintU64();
            const serverTimeUs = r.varintU64();
            m = { type: "pong", clientTime, serverTimeUs, tick: r.varintU64() };
            break;
        }
        case Tag.Kick: {
            const code = r.varintU16();
            m = { type: "kick", code, reason: r.str(LIMITS.kickReason, "kick reason") };
            break;
        }
        case Tag.Redirect: {
            const url = r.str(LIMITS.url, "url");
            m = { type: "redirect", url, zoneId: r.str(LIMITS.zoneId, "zone id") };
            break;
        }
        case Tag.Transfer: {
            const zoneId = r.str(LIMITS.zoneId, "zone id");
            const ticket = r.str(LIMITS.ticket, "ticket");
            m = { type: "transfer", zoneId, ticket, url: r.str(LIMITS.url, "url") };
            break;
        }
        case Tag.InputRefused: {
            const seq = r.varintU32();
            if (seq === 0)
                throw new DecodeError("invalid", "input seq 0");
            m = { type: "input_refused", seq, code: r.varintU16() };
            break;
        }
        case Tag.KnownSetCheck: {
            const tick = r.varintU64();
            const count = r.varintU32();
            const b = r.raw(4);
            const hash = ((b[0] ?? 0) | ((b[1] ?? 0) << 8) | ((b[2] ?? 0) << 16) | ((b[3] ?? 0) << 24)) >>> 0;
            m = { type: "known_set_check", tick, count, hash };
            break;
        }
        case Tag.ChatLines:
            m = readChatLines(r);
            break;
        case Tag.ChatReply:
            m = readChatReply(r);
            break;
        default:
            throw new DecodeError("unknown_tag", `server tag 0x${tag.toString(16)}`);
    }
    r.finish();
    return m;
}
/** Writes a list of entry URLs (Welcome from version 7, Entries): a count, then each URL. */
function writeEntries(w, entries) {
    if (entries.length > LIMITS.entries) {
        throw new EncodeError("too_long", `entries: ${entries.length} > ${LIMITS.entries}`);
    }
    w.varint(entries.length);
    for (const e of entries)
        w.str(e, LIMITS.url, "entry url");
}
/** Reads a list of entry URLs written by {@link writeEntries}. */
function readEntries(r) {
    const n = r.varintU32();
    if (n > LIMITS.entries)
        throw new DecodeError("too_long", `entries: ${n} > ${LIMITS.entries}`);
    const entries = [];
    for (let i = 0; i < n; i++)
        entries.push(r.str(LIMITS.url, "entry url"));
    return entries;
}
