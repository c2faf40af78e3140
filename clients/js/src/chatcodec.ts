/**
 * The chat messages of protocol version 11 (PROTOCOL.md, "Chat"): their types, limits and the
 * bodies {@link encodeClientMessage} and {@link decodeServerMessage} write and read after the tag.
 * Client → server: Chat `0x06`, ChatReport `0x07`, ChatHistory `0x08`; server → client: ChatLines
 * `0x8c`, ChatReply `0x8d`. They exist only in a session that negotiated version 11
 * ({@link CHAT_PROTOCOL}); the host sends a session of an older version none of them.
 *
 * Decoders are total, as every decoder of the SDK: each malformed input is a {@link DecodeError}
 * with the Rust codec's kind, every length and count checked before anything is allocated.
 */

import { DecodeError, EncodeError, type Reader, type Writer } from "./wire.js";

/** The version that added chat (Chat, ChatReport, ChatHistory, ChatLines, ChatReply, Kick BANNED). */
export const CHAT_PROTOCOL = 11;

/** Welcome's feature bit 0 (version 11): the host keeps chat (a host without a store does not). */
export const FEATURE_CHAT = 1;

/** Size and count limits of the chat messages (§7). */
export const CHAT_LIMITS = {
  /** Bytes of a channel name (`zone:<id>`, `group:<name>`, `dm:<principal>`). */
  channel: 300,
  /** Bytes of a line's body on the wire (a host may allow fewer: `chat_max_line`, default 500). */
  body: 1024,
  /** Bytes of a line's sender (a principal). */
  sender: 256,
  /** Bytes of a report's reason. */
  reason: 500,
  /** Bytes of a ChatReply's text. */
  replyText: 1024,
  /** Lines one ChatReport names, at least 1. */
  reportSeqs: 20,
  /** Lines one ChatHistory asks for, at least 1. */
  historyLimit: 200,
  /** Lines one ChatLines carries. */
  lines: 200,
} as const;

/** Bit 0 of ChatLines' flags: the lines come from the store (on attach, or answering ChatHistory). */
export const CHAT_LINES_HISTORY = 0x01;

/** Chat `0x06`: a line to say on `channel`. */
export interface Chat {
  type: "chat";
  /** The client's number for this line (u32), echoed in a {@link ChatReply} refusing it. */
  ref: number;
  /** 1..=300 bytes: `zone:<id>`, `group:<name>` or `dm:<principal>`. */
  channel: string;
  /** 1..=1024 bytes of UTF-8. */
  body: string;
}

/** ChatReport `0x07`: report lines of a channel to the moderators. */
export interface ChatReport {
  type: "chat_report";
  /** Echoed in the {@link ChatReply} answering it (code OK: `text` is the report id). */
  ref: number;
  /** The channel the lines were said on. */
  channel: string;
  /** 1..=20 line seqs of that channel. */
  seqs: number[];
  /** Up to 500 bytes; may be empty. */
  reason: string;
}

/** ChatHistory `0x08`: a page of a channel's stored lines. */
export interface ChatHistory {
  type: "chat_history";
  /** Echoed in the {@link ChatLines} answering it. */
  ref: number;
  channel: string;
  /** The lines before this seq; 0 = the newest. */
  before: number;
  /** 1..=200 lines. */
  limit: number;
}

/** One line as ChatLines carries it. */
export interface ChatWireLine {
  /** The line's number in its channel: from 1, strictly increasing in commit order. */
  seq: number;
  /** The principal that said it (or the name a back end chose). */
  sender: string;
  /** When the host accepted it, UNIX ms. */
  sentAtMs: number;
  /** Its text. */
  body: string;
}

/** ChatLines `0x8c`: lines of one channel. */
export interface ChatLines {
  type: "chat_lines";
  channel: string;
  /**
   * Flags bit 0: lines from the store, sent on attach or answering a ChatHistory, oldest first;
   * false for lines as they are said.
   */
  history: boolean;
  /** The ChatHistory's ref this answers; 0 otherwise. */
  ref: number;
  /** 0..=200 lines. */
  lines: ChatWireLine[];
}

/** ChatReply `0x8d`: a report was filed (code 0), or a Chat, ChatReport or ChatHistory was refused. */
export interface ChatReply {
  type: "chat_reply";
  /** The ref of the message answered. */
  ref: number;
  /** A {@link ChatReplyCode}; unknown codes decode fine. */
  code: number;
  /** When the sender may speak again, UNIX ms: only with MUTED or RATE_LIMITED, 0 otherwise. */
  untilMs: number;
  /** The report id (code OK), or why it was refused. */
  text: string;
}

/**
 * ChatReply codes. Unknown codes decode fine (a newer host may add some) and are shown as numbers
 * by {@link chatReplyCodeName}.
 */
export const ChatReplyCode = {
  /** A report was filed; the reply's `text` is the report id. */
  OK: 0,
  /** Too many lines too fast; `untilMs` says when the sender may speak again. */
  RATE_LIMITED: 1,
  /** A moderator muted the sender; `untilMs` says until when. */
  MUTED: 2,
  /** The channel is not open to this session (or the host keeps no chat). */
  NOT_ALLOWED: 3,
  /** Empty after trimming, too long for this host, control characters, or a malformed channel. */
  INVALID: 4,
  /** The store did not answer or the host's chat queue is full; try again. */
  UNAVAILABLE: 5,
  /** A report names lines the channel does not keep. */
  NOT_FOUND: 6,
} as const;

/** The name of a ChatReply code, or `UNKNOWN(n)`. */
export function chatReplyCodeName(code: number): string {
  for (const [name, value] of Object.entries(ChatReplyCode)) if (value === code) return name;
  return `UNKNOWN(${code})`;
}

/** A ref is a u32. */
function checkRef(ref: number): void {
  if (!Number.isInteger(ref) || ref < 0 || ref > 0xffff_ffff) throw new EncodeError("invalid", `chat ref ${ref}`);
}

/** Writes a Chat's body (after its tag). */
export function writeChat(w: Writer, m: Chat): void {
  checkRef(m.ref);
  if (m.channel === "") throw new EncodeError("invalid", "Chat with an empty channel");
  if (m.body === "") throw new EncodeError("invalid", "Chat with an empty body");
  w.varintU32(m.ref).str(m.channel, CHAT_LIMITS.channel, "chat channel").str(m.body, CHAT_LIMITS.body, "chat body");
}

/** Reads a Chat's body (after its tag). */
export function readChat(r: Reader): Chat {
  const ref = r.varintU32();
  const channel = r.str(CHAT_LIMITS.channel, "chat channel");
  if (channel === "") throw new DecodeError("invalid", "Chat with an empty channel");
  const body = r.str(CHAT_LIMITS.body, "chat body");
  if (body === "") throw new DecodeError("invalid", "Chat with an empty body");
  return { type: "chat", ref, channel, body };
}

/** Writes a ChatReport's body (after its tag). */
export function writeChatReport(w: Writer, m: ChatReport): void {
  checkRef(m.ref);
  if (m.seqs.length === 0) throw new EncodeError("invalid", "ChatReport names no line");
  if (m.seqs.length > CHAT_LIMITS.reportSeqs) {
    throw new EncodeError("too_long", `ChatReport lines: ${m.seqs.length} > ${CHAT_LIMITS.reportSeqs}`);
  }
  w.varintU32(m.ref).str(m.channel, CHAT_LIMITS.channel, "chat channel").varint(m.seqs.length);
  for (const seq of m.seqs) w.varint(seq);
  w.str(m.reason, CHAT_LIMITS.reason, "report reason");
}

/** Reads a ChatReport's body (after its tag). */
export function readChatReport(r: Reader): ChatReport {
  const ref = r.varintU32();
  const channel = r.str(CHAT_LIMITS.channel, "chat channel");
  const n = r.varintU32();
  if (n === 0) throw new DecodeError("invalid", "ChatReport names no line");
  if (n > CHAT_LIMITS.reportSeqs) throw new DecodeError("too_long", `ChatReport lines: ${n} > ${CHAT_LIMITS.reportSeqs}`);
  const seqs: number[] = [];
  for (let i = 0; i < n; i++) seqs.push(r.varintU64());
  const reason = r.str(CHAT_LIMITS.reason, "report reason");
  return { type: "chat_report", ref, channel, seqs, reason };
}

/** Writes a ChatHistory's body (after its tag). */
export function writeChatHistory(w: Writer, m: ChatHistory): void {
  checkRef(m.ref);
  if (m.limit === 0) throw new EncodeError("invalid", "ChatHistory limit 0");
  if (m.limit > CHAT_LIMITS.historyLimit) {
    throw new EncodeError("too_long", `ChatHistory limit: ${m.limit} > ${CHAT_LIMITS.historyLimit}`);
  }
  w.varintU32(m.ref).str(m.channel, CHAT_LIMITS.channel, "chat channel").varint(m.before).varintU32(m.limit);
}

/** Reads a ChatHistory's body (after its tag). */
export function readChatHistory(r: Reader): ChatHistory {
  const ref = r.varintU32();
  const channel = r.str(CHAT_LIMITS.channel, "chat channel");
  const before = r.varintU64();
  const limit = r.varintU32();
  if (limit === 0) throw new DecodeError("invalid", "ChatHistory limit 0");
  if (limit > CHAT_LIMITS.historyLimit) {
    throw new DecodeError("too_long", `ChatHistory limit: ${limit} > ${CHAT_LIMITS.historyLimit}`);
  }
  return { type: "chat_history", ref, channel, before, limit };
}

/** Writes a ChatLines' body (after its tag). */
export function writeChatLines(w: Writer, m: ChatLines): void {
  checkRef(m.ref);
  if (m.lines.length > CHAT_LIMITS.lines) throw new EncodeError("too_long", `chat lines: ${m.lines.length} > ${CHAT_LIMITS.lines}`);
  w.str(m.channel, CHAT_LIMITS.channel, "chat channel").u8(m.history ? CHAT_LINES_HISTORY : 0);
  w.varintU32(m.ref).varint(m.lines.length);
  for (const l of m.lines) {
    w.varint(l.seq).str(l.sender, CHAT_LIMITS.sender, "chat sender").varint(l.sentAtMs);
    w.str(l.body, CHAT_LIMITS.body, "chat body");
  }
}

/** Reads a ChatLines' body (after its tag). */
export function readChatLines(r: Reader): ChatLines {
  const channel = r.str(CHAT_LIMITS.channel, "chat channel");
  const flags = r.u8();
  if ((flags & ~CHAT_LINES_HISTORY) !== 0) throw new DecodeError("invalid", `ChatLines flags 0x${flags.toString(16)}`);
  const ref = r.varintU32();
  const n = r.varintU32();
  if (n > CHAT_LIMITS.lines) throw new DecodeError("too_long", `chat lines: ${n} > ${CHAT_LIMITS.lines}`);
  const lines: ChatWireLine[] = [];
  for (let i = 0; i < n; i++) {
    const seq = r.varintU64();
    const sender = r.str(CHAT_LIMITS.sender, "chat sender");
    const sentAtMs = r.varintU64();
    lines.push({ seq, sender, sentAtMs, body: r.str(CHAT_LIMITS.body, "chat body") });
  }
  return { type: "chat_lines", channel, history: (flags & CHAT_LINES_HISTORY) !== 0, ref, lines };
}

/** Writes a ChatReply's body (after its tag). */
export function writeChatReply(w: Writer, m: ChatReply): void {
  checkRef(m.ref);
  if (!Number.isInteger(m.code) || m.code < 0 || m.code > 0xffff) throw new EncodeError("invalid", `chat reply code ${m.code}`);
  w.varintU32(m.ref).varint(m.code).varint(m.untilMs).str(m.text, CHAT_LIMITS.replyText, "chat reply text");
}

/** Reads a ChatReply's body (after its tag). */
export function readChatReply(r: Reader): ChatReply {
  const ref = r.varintU32();
  const code = r.varintU16();
  const untilMs = r.varintU64();
  return { type: "chat_reply", ref, code, untilMs, text: r.str(CHAT_LIMITS.replyText, "chat reply text") };
}
