/**
 * Chat (protocol version 11): the codec of its five messages and the Kick code BANNED, and
 * `conn.chat` over a fake host on a manual clock — sends resolved by their echo and refused by
 * their ref, DMs, reports, history pages, the lines kept per channel told once each and in seq
 * order across reconnects, timeouts, and the clear refusal of a host older than chat.
 */

import assert from "node:assert/strict";
import { describe, it } from "node:test";

import {
  banOf,
  CHAT_LIMITS,
  CHAT_PROTOCOL,
  ChatClient,
  ChatError,
  ChatRefusal,
  ChatReplyCode,
  chatReplyCodeName,
  decodeClientMessage,
  decodeServerMessage,
  DecodeError,
  defaultReconnectPolicy,
  dmChannel,
  encodeClientMessage,
  encodeServerMessage,
  EncodeError,
  groupChannel,
  KickCode,
  kickCodeName,
  ManualScheduler,
  SUPPORTED_VERSIONS,
  Tag,
  toHex,
  fromHex,
  zoneChannel,
  ZoneConnection,
  type Chat,
  type ChatHistory,
  type ChatLine,
  type ChatLines,
  type ChatPort,
  type ChatReply,
  type ChatReport,
  type ChatSink,
  type CloseInfo,
} from "../src/index.js";
import { advance, FakeServer, jwsTicket } from "./helpers.js";

/** What a promise came to, caught at once (so a rejection is never unhandled). */
function settle<T>(p: Promise<T>): { value?: T; error?: unknown; done: boolean } {
  const out: { value?: T; error?: unknown; done: boolean } = { done: false };
  p.then(
    (v) => {
      out.value = v;
      out.done = true;
    },
    (e: unknown) => {
      out.error = e;
      out.done = true;
    },
  );
  return out;
}

/** A connection for `sub` to `server` (both on `sched`), with the 'line' events it tells. */
function player(sched: ManualScheduler, server: FakeServer, sub: string, options: { keep?: number; timeoutMs?: number } = {}) {
  let n = 0;
  const conn = new ZoneConnection({
    url: "ws://test/zones/test-zone",
    ticket: async () => jwsTicket(sub, ++n),
    socket: server.factory,
    scheduler: sched,
    reconnect: { random: () => 0.5, graceMs: 60_000, maxAttempts: 20 },
    chat: options,
  });
  const told: ChatLine[] = [];
  const earlier: Array<[string, number[]]> = [];
  conn.chat.on("line", (l) => told.push(l));
  conn.chat.on("earlier", (c, ls) => earlier.push([c, ls.map((l) => l.seq)]));
  const closes: CloseInfo[] = [];
  conn.on("close", (c) => closes.push(c));
  return { conn, told, earlier, closes };
}

async function joined(sched: ManualScheduler, ...conns: ZoneConnection[]): Promise<void> {
  const ps = conns.map((c) => c.connect());
  await advance(sched, 100);
  await Promise.all(ps);
}

const ZONE = "zone:test-zone";
const seqs = (lines: readonly ChatLine[]): number[] => lines.map((l) => l.seq);

describe("chat in the codec (version 11)", () => {
  it("numbers its tags, limits, codes and version", () => {
    assert.equal(CHAT_PROTOCOL, 11);
    assert.deepEqual(SUPPORTED_VERSIONS, [6, 7, 8, 9, 10, 11]);
    assert.deepEqual([Tag.Chat, Tag.ChatReport, Tag.ChatHistory, Tag.ChatLines, Tag.ChatReply], [0x06, 0x07, 0x08, 0x8c, 0x8d]);
    assert.deepEqual(
      [0, 1, 2, 3, 4, 5, 6, 7].map(chatReplyCodeName),
      ["OK", "RATE_LIMITED", "MUTED", "NOT_ALLOWED", "INVALID", "UNAVAILABLE", "NOT_FOUND", "UNKNOWN(7)"],
    );
    assert.equal(KickCode.BANNED, 31);
    assert.equal(kickCodeName(31), "BANNED");
    assert.equal(defaultReconnectPolicy(KickCode.BANNED), "stop");
    assert.equal(CHAT_LIMITS.channel, 300);
    assert.equal(CHAT_LIMITS.body, 1024);
  });

  it("round-trips every chat message at its limits", () => {
    const client: Array<Chat | ChatReport | ChatHistory> = [
      { type: "chat", ref: 0xffff_ffff, channel: "c".repeat(300), body: "é".repeat(512) },
      { type: "chat_report", ref: 1, channel: "zone:a", seqs: Array.from({ length: 20 }, (_, i) => i + 1), reason: "r".repeat(500) },
      { type: "chat_report", ref: 2, channel: "zone:a", seqs: [Number.MAX_SAFE_INTEGER], reason: "" },
      { type: "chat_history", ref: 3, channel: "group:g", before: 0, limit: 1 },
      { type: "chat_history", ref: 4, channel: "group:g", before: 1000, limit: 200 },
    ];
    for (const m of client) assert.deepEqual(decodeClientMessage(encodeClientMessage(m)), m);
    const server: Array<ChatLines | ChatReply> = [
      { type: "chat_lines", channel: "zone:a", history: false, ref: 0, lines: [] },
      {
        type: "chat_lines",
        channel: "dm:ann",
        history: true,
        ref: 9,
        lines: Array.from({ length: 200 }, (_, i) => ({ seq: i + 1, sender: "s".repeat(256), sentAtMs: 1_700_000_000_000 + i, body: "x" })),
      },
      { type: "chat_reply", ref: 300, code: ChatReplyCode.MUTED, untilMs: 1000, text: "m" },
      { type: "chat_reply", ref: 0, code: 0xffff, untilMs: 0, text: "" },
    ];
    for (const m of server) assert.deepEqual(decodeServerMessage(encodeServerMessage(m)), m);
    // The Rust codec's own examples (crates/zonekeep-protocol/src/messages/chat/tests.rs).
    assert.equal(toHex(encodeClientMessage({ type: "chat", ref: 300, channel: "dm:b", body: "hi" })), "06ac0204646d3a62026869");
    assert.equal(
      toHex(encodeServerMessage({ type: "chat_reply", ref: 300, code: ChatReplyCode.MUTED, untilMs: 1000, text: "m" })),
      "8dac0202e807016d",
    );
    assert.equal(toHex(encodeServerMessage({ type: "chat_lines", channel: "zone:a", history: true, ref: 9, lines: [] })), "8c067a6f6e653a61010900");
  });

  it("refuses what the Rust codec refuses, with the same kinds, in wire order", () => {
    const refused = (hex: string, decoder: "client" | "server", kind: string) =>
      assert.throws(
        () => (decoder === "client" ? decodeClientMessage(fromHex(hex)) : decodeServerMessage(fromHex(hex))),
        (e: unknown) => e instanceof DecodeError && e.kind === kind,
        `${hex}: ${kind}`,
      );
    refused("060100", "client", "invalid"); // an empty channel, before the missing body
    refused("0601017a00", "client", "invalid"); // an empty body
    refused("0601ad02", "client", "too_long"); // a channel declaring 301 bytes
    refused("0601017a8108", "client", "too_long"); // a body declaring 1025 bytes
    refused("0601017a01ff", "client", "invalid_utf8");
    refused("0707017a0000", "client", "invalid"); // a report naming no line
    refused("0707017a15", "client", "too_long"); // 21 lines
    refused("0707017a0105", "client", "truncated"); // no reason
    refused("0801017a0000", "client", "invalid"); // limit 0
    refused("0801017a00c901", "client", "too_long"); // limit 201
    refused("0801017a000500", "client", "trailing_bytes");
    for (const flags of ["02", "03", "80"]) refused(`8c017a${flags}0000`, "server", "invalid");
    refused("8c017a0000c901", "server", "too_long"); // 201 lines
    refused("8c017a000064", "server", "truncated"); // 100 lines announced, none there
    refused("8d0080800400", "server", "overflow"); // a code above u16
    // Each tag belongs to its direction.
    refused("8c", "client", "unknown_tag");
    refused("06", "server", "unknown_tag");
    refused("06", "client", "truncated");
    refused("8d", "server", "truncated");
  });

  it("refuses to encode what cannot be decoded", () => {
    const bad = (m: Chat | ChatReport | ChatHistory, kind: string) =>
      assert.throws(() => encodeClientMessage(m), (e: unknown) => e instanceof EncodeError && e.kind === kind, JSON.stringify(m).slice(0, 80));
    bad({ type: "chat", ref: 1, channel: "", body: "x" }, "invalid");
    bad({ type: "chat", ref: 1, channel: "c", body: "" }, "invalid");
    bad({ type: "chat", ref: 1, channel: "c".repeat(301), body: "x" }, "too_long");
    bad({ type: "chat", ref: 1, channel: "c", body: "x".repeat(1025) }, "too_long");
    bad({ type: "chat", ref: 2 ** 32, channel: "c", body: "x" }, "invalid");
    bad({ type: "chat_report", ref: 1, channel: "c", seqs: [], reason: "" }, "invalid");
    bad({ type: "chat_report", ref: 1, channel: "c", seqs: Array.from({ length: 21 }, (_, i) => i + 1), reason: "" }, "too_long");
    bad({ type: "chat_report", ref: 1, channel: "c", seqs: [1], reason: "r".repeat(501) }, "too_long");
    bad({ type: "chat_history", ref: 1, channel: "c", before: 0, limit: 0 }, "invalid");
    bad({ type: "chat_history", ref: 1, channel: "c", before: 0, limit: 201 }, "too_long");
    assert.throws(
      () => encodeServerMessage({ type: "chat_lines", channel: "c", history: false, ref: 0, lines: Array.from({ length: 201 }, (_, i) => ({ seq: i + 1, sender: "p", sentAtMs: 0, body: "x" })) }),
      (e: unknown) => e instanceof EncodeError && e.kind === "too_long",
    );
  });
});

describe("refusals: chat codes and the BANNED kick", () => {
  it("a ChatRefusal carries the code, its name, until when, the text and the ref", () => {
    const r = new ChatRefusal({ ref: 300, code: ChatReplyCode.MUTED, untilMs: 1_700_000_600_000, text: "muted in zone:arena-1 until 1700000600000: spam" });
    assert.ok(r instanceof Error);
    assert.deepEqual([r.code, r.name, r.untilMs, r.ref], [2, "MUTED", 1_700_000_600_000, 300]);
    assert.equal(r.text, "muted in zone:arena-1 until 1700000600000: spam");
    assert.equal(String(r), "MUTED: muted in zone:arena-1 until 1700000600000: spam");
    assert.equal(r.retryable, false);
    assert.equal(new ChatRefusal({ ref: 1, code: ChatReplyCode.RATE_LIMITED, untilMs: 5, text: "" }).retryable, true);
    assert.equal(new ChatRefusal({ ref: 1, code: ChatReplyCode.UNAVAILABLE, untilMs: 0, text: "" }).retryable, true);
    // Without a text the refusal still says something, and an unknown code is named as a number.
    assert.match(new ChatRefusal({ ref: 1, code: ChatReplyCode.NOT_ALLOWED, untilMs: 0, text: "" }).message, /not open/);
    assert.equal(new ChatRefusal({ ref: 1, code: 42, untilMs: 0, text: "" }).name, "UNKNOWN(42)");
  });

  it("banOf reads the ban of a Kick BANNED, and of the JOIN_REFUSED an older session gets", () => {
    const reason = "banned from group:world-eu until 1700086400000: harassment";
    const ban = { scope: "group:world-eu", untilMs: 1_700_086_400_000, reason: "harassment" };
    assert.deepEqual(banOf({ code: KickCode.BANNED, reason }), ban);
    assert.deepEqual(banOf({ code: KickCode.JOIN_REFUSED, reason }), ban);
    assert.deepEqual(banOf({ code: KickCode.BANNED, reason: "banned from fleet until 5: " }), { scope: "fleet", untilMs: 5, reason: "" });
    assert.equal(banOf({ code: KickCode.JOIN_REFUSED, reason: "the zone is full of rocks" }), null);
    assert.deepEqual(banOf({ code: KickCode.BANNED, reason: "odd" }), { scope: "", untilMs: 0, reason: "odd" });
    assert.equal(banOf({ code: KickCode.KICKED, reason }), null);
    assert.equal(banOf(null), null);
  });

  it("a Kick BANNED stops the connection for good; the close tells the ban", async () => {
    const sched = new ManualScheduler(1000);
    const server = new FakeServer(sched);
    const { conn, closes } = player(sched, server, "ann");
    await joined(sched, conn);
    server.kick(server.last, KickCode.BANNED, "banned from zone:test-zone until 1700086400000: spam");
    await advance(sched, 5_000);
    assert.equal(conn.state, "closed");
    assert.equal(server.sessions.length, 1, "no reconnect");
    assert.equal(closes.length, 1);
    assert.equal(closes[0]?.willReconnect, false);
    assert.deepEqual(banOf(closes[0]?.kick), { scope: "zone:test-zone", untilMs: 1_700_086_400_000, reason: "spam" });
  });
});

describe("conn.chat against a host", () => {
  it("send resolves with the line heard back; every listener hears it once", async () => {
    const sched = new ManualScheduler(1000);
    const server = new FakeServer(sched);
    const ann = player(sched, server, "ann");
    const bob = player(sched, server, "bob");
    await joined(sched, ann.conn, bob.conn);
    assert.equal(ann.conn.chat.available, true);
    assert.equal(ann.conn.chat.principal, "ann");
    assert.equal(ann.conn.chat.zoneChannel, ZONE);
    const sent = settle(ann.conn.chat.send(ZONE, "gg"));
    await advance(sched, 100);
    assert.deepEqual(sent.value, { channel: ZONE, seq: 1, sender: "ann", sentAtMs: sent.value?.sentAtMs, body: "gg", history: false });
    const chat = server.sessions[0]?.received.find((m) => m.type === "chat");
    assert.deepEqual(chat, { type: "chat", ref: 1, channel: ZONE, body: "gg" });
    for (const p of [ann, bob]) {
      assert.deepEqual(p.told.map((l) => [l.channel, l.seq, l.sender, l.body]), [[ZONE, 1, "ann", "gg"]]);
      assert.deepEqual(seqs(p.conn.chat.lines(ZONE)), [1]);
    }
    assert.deepEqual(ann.conn.chat.channels(), [ZONE]);
  });

  it("dm sends on dm:<principal>; the other side hears it on dm:<sender>", async () => {
    const sched = new ManualScheduler(1000);
    const server = new FakeServer(sched);
    const ann = player(sched, server, "ann");
    const bob = player(sched, server, "bob");
    await joined(sched, ann.conn, bob.conn);
    const sent = settle(ann.conn.chat.dm("bob", "trade? 3 ore for the épée"));
    await advance(sched, 100);
    assert.equal(sent.value?.channel, dmChannel("bob"));
    assert.deepEqual(ann.told.map((l) => l.channel), ["dm:bob"]);
    assert.deepEqual(bob.told.map((l) => [l.channel, l.sender, l.body]), [["dm:ann", "ann", "trade? 3 ore for the épée"]]);
    assert.equal(zoneChannel("z"), "zone:z");
    assert.equal(groupChannel("world-eu"), "group:world-eu");
  });

  it("a refusal rejects the send whose ref it carries, and only that one", async () => {
    const sched = new ManualScheduler(1000);
    const server = new FakeServer(sched);
    const ann = player(sched, server, "ann");
    await joined(sched, ann.conn);
    server.chatRefuse = (_s, m) =>
      m.body === "spam" ? { code: ChatReplyCode.MUTED, untilMs: 1_700_000_600_000, text: "muted until 1700000600000: spam" } : null;
    const a = settle(ann.conn.chat.send(ZONE, "hello"));
    const b = settle(ann.conn.chat.send(ZONE, "spam"));
    const c = settle(ann.conn.chat.send(ZONE, "hello"));
    await advance(sched, 100);
    const refs = server.last.received.flatMap((m) => (m.type === "chat" ? [m.ref] : []));
    assert.deepEqual(refs, [1, 2, 3], "one ref per line");
    assert.deepEqual([a.value?.seq, c.value?.seq], [1, 2], "equal bodies resolve in order");
    assert.ok(b.error instanceof ChatRefusal);
    assert.deepEqual([b.error.ref, b.error.code, b.error.name, b.error.untilMs], [2, 2, "MUTED", 1_700_000_600_000]);
    assert.equal(b.error.text, "muted until 1700000600000: spam");
  });

  it("a line from another session of the same principal, or another body, does not answer a send", async () => {
    const sched = new ManualScheduler(1000);
    const server = new FakeServer(sched);
    const ann = player(sched, server, "ann", { timeoutMs: 2_000 });
    const bob = player(sched, server, "bob");
    await joined(sched, ann.conn, bob.conn);
    const mine = settle(ann.conn.chat.send(ZONE, "gg"));
    // While her line travels, bob says the same words and ann something else from another device:
    // neither is her line.
    server.sayLine(ZONE, "bob", "gg");
    server.sayLine(ZONE, "ann", "brb");
    await advance(sched, 30);
    assert.deepEqual(seqs(ann.told), [1, 2]);
    assert.equal(mine.done, false);
    await advance(sched, 100);
    assert.equal(mine.value?.seq, 3, "her own line, after the others");
  });

  it("a send neither heard nor refused rejects with a timeout", async () => {
    const sched = new ManualScheduler(1000);
    const server = new FakeServer(sched);
    const ann = player(sched, server, "ann", { timeoutMs: 3_000 });
    await joined(sched, ann.conn);
    server.chatHold = true;
    const sent = settle(ann.conn.chat.send(ZONE, "anyone?"));
    await advance(sched, 2_900);
    assert.equal(sent.done, false);
    await advance(sched, 200);
    assert.ok(sent.error instanceof ChatError);
    assert.equal(sent.error.kind, "timeout");
    // Heard after all: told as a line, answering nothing.
    server.releaseChat();
    await advance(sched, 100);
    assert.deepEqual(seqs(ann.told), [1]);
  });

  it("report resolves with the report id; a line the channel does not keep is NOT_FOUND", async () => {
    const sched = new ManualScheduler(1000);
    const server = new FakeServer(sched);
    const ann = player(sched, server, "ann");
    await joined(sched, ann.conn);
    server.sayLine(ZONE, "bob", "rude");
    server.sayLine(ZONE, "bob", "ruder");
    const filed = settle(ann.conn.chat.report(ZONE, [1, 2], "spam"));
    const missing = settle(ann.conn.chat.report(ZONE, [1, 99]));
    await advance(sched, 100);
    assert.equal(filed.value, "1");
    assert.deepEqual(server.reports.map((r) => [r.channel, r.seqs, r.reason]), [[ZONE, [1, 2], "spam"]]);
    assert.ok(missing.error instanceof ChatRefusal);
    assert.equal(missing.error.name, "NOT_FOUND");
  });

  it("history resolves with a page; lines older than those told come as 'earlier', never twice", async () => {
    const sched = new ManualScheduler(1000);
    const server = new FakeServer(sched);
    for (let i = 1; i <= 30; i++) server.sayLine(ZONE, "bob", `line ${i}`);
    server.chatHistoryOnAttach = 10;
    const ann = player(sched, server, "ann");
    await joined(sched, ann.conn);
    // On attach: the ten newest, as lines, oldest first.
    assert.deepEqual(seqs(ann.told), [21, 22, 23, 24, 25, 26, 27, 28, 29, 30]);
    assert.ok(ann.told.every((l) => l.history));
    const page = settle(ann.conn.chat.history(ZONE, { before: 21, limit: 5 }));
    await advance(sched, 100);
    assert.deepEqual(seqs(page.value ?? []), [16, 17, 18, 19, 20]);
    assert.deepEqual(ann.earlier, [[ZONE, [16, 17, 18, 19, 20]]]);
    assert.equal(ann.told.length, 10, "no 'line' for older lines");
    assert.deepEqual(seqs(ann.conn.chat.lines(ZONE)), [16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30]);
    const msg = server.last.received.find((m) => m.type === "chat_history");
    assert.deepEqual(msg, { type: "chat_history", ref: 1, channel: ZONE, before: 21, limit: 5 });
    // The same page again: nothing new to tell.
    const again = settle(ann.conn.chat.history(ZONE, { before: 21, limit: 5 }));
    await advance(sched, 100);
    assert.deepEqual(seqs(again.value ?? []), [16, 17, 18, 19, 20]);
    assert.equal(ann.earlier.length, 1);
  });

  it("after a reconnect the history sent again repeats nothing; what was said meanwhile comes once, in order", async () => {
    const sched = new ManualScheduler(1000);
    const server = new FakeServer(sched);
    const ann = player(sched, server, "ann");
    await joined(sched, ann.conn);
    server.sayLine(ZONE, "bob", "one");
    server.sayLine(ZONE, "bob", "two");
    await advance(sched, 100);
    server.last.socket.drop(1006);
    await advance(sched, 30);
    // Said while ann is away.
    server.sayLine(ZONE, "bob", "three");
    server.sayLine(ZONE, "cy", "four");
    await advance(sched, 2_000);
    assert.equal(ann.conn.state, "open");
    assert.equal(server.sessions.length, 2);
    server.sayLine(ZONE, "bob", "five");
    await advance(sched, 100);
    assert.deepEqual(ann.told.map((l) => [l.seq, l.body, l.history]), [
      [1, "one", false],
      [2, "two", false],
      [3, "three", true],
      [4, "four", true],
      [5, "five", false],
    ]);
    assert.deepEqual(ann.earlier, []);
  });

  it("a send whose echo was lost with the socket resolves from the history of the next attach", async () => {
    const sched = new ManualScheduler(1000);
    const server = new FakeServer(sched);
    const ann = player(sched, server, "ann");
    await joined(sched, ann.conn);
    server.sayLine(ZONE, "ann", "gg");
    await advance(sched, 100);
    server.chatHold = true;
    const sent = settle(ann.conn.chat.send(ZONE, "gg"));
    await advance(sched, 100);
    server.last.socket.drop(1006);
    server.chatHold = false;
    await advance(sched, 2_000);
    assert.equal(ann.conn.state, "open");
    // The older "gg" (seq 1) was there before the send: only seq 2 answers it.
    assert.equal(sent.value?.seq, 2);
    assert.equal(sent.value?.history, true);
    assert.deepEqual(seqs(ann.told), [1, 2]);
  });

  it("keeps the newest lines of each channel, and still tells none twice", async () => {
    const sched = new ManualScheduler(1000);
    const server = new FakeServer(sched);
    const ann = player(sched, server, "ann", { keep: 3 });
    await joined(sched, ann.conn);
    for (let i = 1; i <= 6; i++) server.sayLine(ZONE, "bob", `l${i}`);
    await advance(sched, 100);
    assert.deepEqual(seqs(ann.conn.chat.lines(ZONE)), [4, 5, 6]);
    server.last.socket.drop(1006);
    await advance(sched, 2_000);
    assert.equal(server.sessions.length, 2);
    // The attach sent all six again: none told twice, none kept beyond three.
    assert.deepEqual(seqs(ann.told), [1, 2, 3, 4, 5, 6]);
    assert.deepEqual(ann.earlier, []);
    assert.deepEqual(seqs(ann.conn.chat.lines(ZONE)), [4, 5, 6]);
  });

  it("a report or history request whose session ends is rejected; one after close is too", async () => {
    const sched = new ManualScheduler(1000);
    const server = new FakeServer(sched);
    const ann = player(sched, server, "ann");
    const before = settle(ann.conn.chat.send(ZONE, "early"));
    await flushOnly();
    assert.ok(before.error instanceof ChatError);
    assert.equal(before.error.kind, "not_open");
    await joined(sched, ann.conn);
    server.sayLine(ZONE, "bob", "x");
    await advance(sched, 100);
    // The host never answers: the socket drops first.
    const page = settle(ann.conn.chat.history(ZONE));
    server.last.socket.drop(1006);
    await advance(sched, 30);
    assert.ok(page.error instanceof ChatError);
    assert.equal(page.error.kind, "disconnected");
    const during = settle(ann.conn.chat.report(ZONE, [1]));
    await flushOnly();
    assert.equal((during.error as ChatError).kind, "not_open");
    await advance(sched, 2_000);
    server.chatHold = true;
    const pending = settle(ann.conn.chat.send(ZONE, "bye"));
    ann.conn.close();
    await flushOnly();
    assert.equal((pending.error as ChatError).kind, "closed");
    const after = settle(ann.conn.chat.send(ZONE, "hello?"));
    await flushOnly();
    assert.equal((after.error as ChatError).kind, "closed");
  });

  it("refuses bad arguments before sending anything", async () => {
    const sched = new ManualScheduler(1000);
    const server = new FakeServer(sched);
    const ann = player(sched, server, "ann");
    await joined(sched, ann.conn);
    const calls = [
      ann.conn.chat.send("", "x"),
      ann.conn.chat.send(ZONE, ""),
      ann.conn.chat.send(ZONE, "x".repeat(1025)),
      ann.conn.chat.send("c".repeat(301), "x"),
      ann.conn.chat.report(ZONE, []),
      ann.conn.chat.report(ZONE, Array.from({ length: 21 }, (_, i) => i + 1)),
      ann.conn.chat.history(ZONE, { limit: 0 }),
      ann.conn.chat.history(ZONE, { limit: 201 }),
    ].map((p: Promise<unknown>) => settle(p));
    await flushOnly();
    for (const c of calls) assert.equal((c.error as ChatError).kind, "invalid", String(c.error));
    assert.equal(server.last.received.filter((m) => m.type.startsWith("chat")).length, 0);
  });
});

describe("conn.chat with a host older than chat", () => {
  it("a version 10 session rejects every chat call, saying the host is older", async () => {
    const sched = new ManualScheduler(1000);
    const server = new FakeServer(sched);
    server.maxVersion = 10;
    const ann = player(sched, server, "ann");
    await joined(sched, ann.conn);
    assert.equal(ann.conn.welcome?.version, 10);
    assert.equal(ann.conn.chat.available, false);
    const calls = [ann.conn.chat.send(ZONE, "hi"), ann.conn.chat.dm("bob", "hi"), ann.conn.chat.report(ZONE, [1]), ann.conn.chat.history(ZONE)].map((p: Promise<unknown>) => settle(p));
    await flushOnly();
    for (const c of calls) {
      assert.ok(c.error instanceof ChatError);
      assert.equal(c.error.kind, "unsupported");
      assert.match(c.error.message, /version 11.*version 10 \(the host is older\)/);
    }
    assert.equal(server.last.received.filter((m) => m.type.startsWith("chat")).length, 0, "nothing sent");
  });

  it("chat messages in a version 10 session are a protocol error", async () => {
    const sched = new ManualScheduler(1000);
    const server = new FakeServer(sched);
    server.maxVersion = 10;
    const ann = player(sched, server, "ann");
    await joined(sched, ann.conn);
    server.send(server.last, { type: "chat_lines", channel: ZONE, history: false, ref: 0, lines: [] });
    await advance(sched, 100);
    assert.equal(ann.closes.length, 1);
    assert.ok(ann.closes[0]?.error instanceof DecodeError);
    assert.match(ann.closes[0]?.reason ?? "", /ChatLines on a version 10 session/);
  });
});

/** A port for driving a ChatClient directly: what it sent, a sink to feed, a manual clock. */
function stubPort(version: number | null = 11, principal: string | null = "ann") {
  const sched = new ManualScheduler(0);
  const sent: Array<Chat | ChatReport | ChatHistory> = [];
  let sink: ChatSink | null = null;
  const port: ChatPort = {
    scheduler: sched,
    version: () => version,
    features: () => (version !== null && version >= 11 ? 1 : 0),
    principal: () => principal,
    zoneId: () => "z",
    send: (m) => sent.push(m),
    listen: (s) => {
      sink = s;
    },
  };
  const client = new ChatClient(port);
  const told: ChatLine[] = [];
  const earlier: number[][] = [];
  client.on("line", (l) => told.push(l));
  client.on("earlier", (_c, ls) => earlier.push(ls.map((l) => l.seq)));
  const lines = (channel: string, history: boolean, ref: number, ...ss: number[]) =>
    sink?.lines({
      type: "chat_lines",
      channel,
      history,
      ref,
      lines: ss.map((seq) => ({ seq, sender: seq % 2 === 0 ? "ann" : "bob", sentAtMs: seq, body: `b${seq}` })),
    });
  return { sched, sent, client, told, earlier, lines, sink: () => sink };
}

async function flushOnly(): Promise<void> {
  for (let i = 0; i < 20; i++) await Promise.resolve();
}

describe("ChatClient: dedupe and order", () => {
  it("tells each line once, in seq order per channel; channels are independent", () => {
    const { client, told, earlier, lines } = stubPort();
    lines("zone:a", true, 0, 3, 1, 2); // out of order within a message: told sorted
    lines("zone:b", false, 0, 1);
    lines("zone:a", false, 0, 2, 3, 4);
    lines("zone:a", false, 0, 4);
    assert.deepEqual(told.map((l) => `${l.channel}#${l.seq}`), ["zone:a#1", "zone:a#2", "zone:a#3", "zone:b#1", "zone:a#4"]);
    assert.deepEqual(earlier, []);
    // A gap filled later: the missing line is an earlier one, not a repeat of anything.
    lines("zone:a", false, 0, 7);
    lines("zone:a", true, 0, 5, 6, 7);
    assert.deepEqual(told.map((l) => l.seq).slice(-1), [7]);
    assert.deepEqual(earlier, [[5, 6]]);
    assert.deepEqual(client.lines("zone:a").map((l) => l.seq), [1, 2, 3, 4, 5, 6, 7]);
    assert.deepEqual(client.lines("nowhere"), []);
  });

  it("matches a send by ref for refusals and by echo for lines; a reply for nobody is ignored", async () => {
    const { client, sent, lines, sink } = stubPort();
    lines("zone:a", false, 0, 1, 2); // seq 2 is ann's "b2", said before the send
    const s1 = settle(client.send("zone:a", "b2"));
    const s2 = settle(client.send("zone:a", "b4"));
    assert.deepEqual(sent.map((m) => m.ref), [1, 2]);
    sink()?.reply({ type: "chat_reply", ref: 77, code: ChatReplyCode.MUTED, untilMs: 0, text: "" });
    sink()?.reply({ type: "chat_reply", ref: 1, code: ChatReplyCode.OK, untilMs: 0, text: "" }); // OK answers no send
    lines("zone:a", false, 0, 3, 4);
    await flushOnly();
    assert.equal(s2.value?.seq, 4);
    assert.equal(s1.done, false, "seq 2 was there before the send, and 4 is another body");
    sink()?.reply({ type: "chat_reply", ref: 1, code: ChatReplyCode.RATE_LIMITED, untilMs: 9_000, text: "slow down" });
    await flushOnly();
    assert.ok(s1.error instanceof ChatRefusal);
    assert.deepEqual([s1.error.name, s1.error.untilMs, s1.error.ref], ["RATE_LIMITED", 9_000, 1]);
  });

  it("a history answer is matched by its ref; refs skip 0 and those in use", async () => {
    const { client, sent, lines, sink } = stubPort();
    const h = settle(client.history("group:g", { before: 10, limit: 3 }));
    lines("group:g", true, 0, 1, 2); // an attach's history: answers no request
    await flushOnly();
    assert.equal(h.done, false);
    lines("group:g", true, 1, 7, 8, 9);
    await flushOnly();
    assert.deepEqual(h.value?.map((l) => l.seq), [7, 8, 9]);
    const r = settle(client.report("group:g", [7], "why"));
    sink()?.reply({ type: "chat_reply", ref: 2, code: ChatReplyCode.OK, untilMs: 0, text: "rep-17" });
    await flushOnly();
    assert.equal(r.value, "rep-17");
    assert.deepEqual(sent.map((m) => [m.type, m.ref]), [["chat_history", 1], ["chat_report", 2]]);
  });

  it("without a readable principal a send is matched by channel and body alone", async () => {
    const { client, lines } = stubPort(11, null);
    const s = settle(client.send("zone:a", "b3"));
    lines("zone:a", false, 0, 3);
    await flushOnly();
    assert.equal(s.value?.sender, "bob");
  });

  it("a host that trims the body still answers the send", async () => {
    const { client, sink } = stubPort();
    const s = settle(client.send("zone:a", "  hi  "));
    sink()?.lines({ type: "chat_lines", channel: "zone:a", history: false, ref: 0, lines: [{ seq: 1, sender: "ann", sentAtMs: 1, body: "hi" }] });
    await flushOnly();
    assert.equal(s.value?.body, "hi");
  });

  it("no session: not_open; an older one: unsupported", async () => {
    const none = settle(stubPort(null).client.send("zone:a", "x"));
    const old = settle(stubPort(10).client.history("zone:a"));
    await flushOnly();
    assert.equal((none.error as ChatError).kind, "not_open");
    assert.equal((old.error as ChatError).kind, "unsupported");
  });
});
