// Chat (protocol version 11), ported from clients/js/test/chat.test.ts: the codec of its five messages and the
// Kick code BANNED, the refusal types, and conn.Chat over the fake host on a manual clock — sends completed by
// their echo and refused by their ref, DMs, reports, history pages, lines told once and in seq order across
// reconnects, timeouts, and the clear refusal of a host older than chat.
using System;
using System.Collections.Generic;
using System.Linq;
using System.Threading.Tasks;

namespace Zonekeep.Tests
{
    public static class ChatTests
    {
        const string Zone = "zone:test-zone";

        sealed class Player
        {
            public ZoneConnection Conn;
            public List<ChatLine> Told = new List<ChatLine>();
            public List<string> Earlier = new List<string>();
            public List<CloseInfo> Closes = new List<CloseInfo>();

            public Player(ManualScheduler sched, FakeServer server, string sub, ChatOptions chat = null)
            {
                int n = 0;
                Conn = new ZoneConnection(new ZoneConnectionOptions
                {
                    Url = "ws://test/zones/test-zone",
                    Ticket = () => Task.FromResult(FakeServer.JwsTicket(sub, ++n)),
                    Socket = server.Factory,
                    Scheduler = sched,
                    Reconnect = new ReconnectOptions { Random = () => 0.5, GraceMs = 60000, MaxAttempts = 20 },
                    Chat = chat,
                });
                Conn.Chat.LineReceived += l => Told.Add(l);
                Conn.Chat.EarlierLines += (c, ls) => Earlier.Add(c + " " + Seqs(ls));
                Conn.Closed += c => Closes.Add(c);
            }
        }

        static string Seqs(IEnumerable<ChatLine> lines) { return string.Join(",", lines.Select(l => l.Seq)); }

        static void Join(ManualScheduler sched, params Player[] players)
        {
            Task<Welcome>[] ws = players.Select(p => p.Conn.Connect()).ToArray();
            sched.Advance(100);
            foreach (Task<Welcome> w in ws) Check.True(w.IsCompleted && !w.IsFaulted, "joined");
        }

        static E Failed<E>(Task t, string what) where E : Exception
        {
            Check.True(t.IsFaulted, what + ": failed");
            E e = t.Exception.InnerException as E;
            Check.True(e != null, what + ": a " + typeof(E).Name + ", got " + t.Exception.InnerException);
            return e;
        }

        // ---- the codec

        [Test]
        public static void NumbersTagsCodesAndVersion()
        {
            Check.Equal(11u, ProtocolVersions.Chat, "version");
            Check.Equal("6,7,8,9,10,11", string.Join(",", ProtocolVersions.Supported), "offered");
            Check.Equal("06 07 08 8c 8d", string.Join(" ", new[] { Tag.Chat, Tag.ChatReport, Tag.ChatHistory, Tag.ChatLines, Tag.ChatReply }.Select(t => t.ToString("x2"))), "tags");
            Check.Equal("OK RATE_LIMITED MUTED NOT_ALLOWED INVALID UNAVAILABLE NOT_FOUND UNKNOWN(7)", string.Join(" ", Enumerable.Range(0, 8).Select(ChatReplyCode.Name)), "codes");
            Check.Equal(31, KickCode.Banned, "BANNED");
            Check.Equal("BANNED", KickCode.Name(31), "its name");
            Check.Equal(ReconnectDecision.Stop, ReconnectPolicy.Default(KickCode.Banned, new ReconnectContext()), "not retried");
        }

        [Test]
        public static void RoundTripsEveryChatMessageAtItsLimits()
        {
            ClientMessage[] client =
            {
                new Chat { Ref = uint.MaxValue, Channel = new string('c', 300), Body = string.Concat(Enumerable.Repeat("é", 512)) },
                new ChatReport { Ref = 1, Channel = "zone:a", Seqs = Enumerable.Range(1, 20).Select(i => (long)i).ToList(), Reason = new string('r', 500) },
                new ChatHistory { Ref = 3, Channel = "group:g", Before = long.MaxValue, Limit = 200 },
            };
            foreach (ClientMessage m in client)
            {
                byte[] b = MessageCodec.EncodeClient(m);
                Check.Equal(Hex.ToHex(b), Hex.ToHex(MessageCodec.EncodeClient(MessageCodec.DecodeClient(b))), m.Type.ToString());
            }
            var lines = new ChatLines { Channel = "dm:ann", History = true, Ref = 9 };
            for (int i = 1; i <= 200; i++) lines.Lines.Add(new ChatWireLine { Seq = i, Sender = new string('s', 256), SentAtMs = 1700000000000L + i, Body = "x" });
            byte[] lb = MessageCodec.EncodeServer(lines);
            ChatLines back = (ChatLines)MessageCodec.DecodeServer(lb);
            Check.Equal(200, back.Lines.Count, "200 lines");
            Check.True(back.History && back.Ref == 9 && back.Lines[199].Seq == 200, "flags, ref, lines");
            // The Rust codec's own examples (crates/zonekeep-protocol/src/messages/chat/tests.rs).
            Check.Equal("06ac0204646d3a62026869", Hex.ToHex(MessageCodec.EncodeClient(new Chat { Ref = 300, Channel = "dm:b", Body = "hi" })), "chat");
            Check.Equal("8dac0202e807016d", Hex.ToHex(MessageCodec.EncodeServer(new ChatReply { Ref = 300, Code = ChatReplyCode.Muted, UntilMs = 1000, Text = "m" })), "reply");
            Check.Equal("8c067a6f6e653a61010900", Hex.ToHex(MessageCodec.EncodeServer(new ChatLines { Channel = "zone:a", History = true, Ref = 9 })), "lines");
            ChatReply unknown = (ChatReply)MessageCodec.DecodeServer(MessageCodec.EncodeServer(new ChatReply { Code = 0xffff }));
            Check.Equal(0xffff, unknown.Code, "an unknown code is kept");
        }

        [Test]
        public static void RefusesWhatTheRustCodecRefusesInWireOrder()
        {
            Action<string, bool, string> refused = (hex, client, kind) =>
                Check.Equal(kind, Check.Kind(() => { if (client) MessageCodec.DecodeClient(Hex.FromHex(hex)); else MessageCodec.DecodeServer(Hex.FromHex(hex)); }), hex);
            refused("060100", true, "invalid");
            refused("0601017a00", true, "invalid");
            refused("0601ad02", true, "too_long");
            refused("0601017a8108", true, "too_long");
            refused("0601017a01ff", true, "invalid_utf8");
            refused("0707017a0000", true, "invalid");
            refused("0707017a15", true, "too_long");
            refused("0707017a0105", true, "truncated");
            refused("0801017a0000", true, "invalid");
            refused("0801017a00c901", true, "too_long");
            refused("0801017a000500", true, "trailing_bytes");
            foreach (string flags in new[] { "02", "03", "80" }) refused("8c017a" + flags + "0000", false, "invalid");
            refused("8c017a0000c901", false, "too_long");
            refused("8c017a000064", false, "truncated");
            refused("8d0080800400", false, "overflow");
            refused("8c", true, "unknown_tag");
            refused("06", false, "unknown_tag");
        }

        [Test]
        public static void RefusesToEncodeWhatCannotBeDecoded()
        {
            Func<ClientMessage, EncodeErrorKind> kind = m => Check.Throws<EncodeException>(() => MessageCodec.EncodeClient(m), m.Type.ToString()).Kind;
            Check.Equal(EncodeErrorKind.Invalid, kind(new Chat { Ref = 1, Channel = "", Body = "x" }), "empty channel");
            Check.Equal(EncodeErrorKind.Invalid, kind(new Chat { Ref = 1, Channel = "c", Body = "" }), "empty body");
            Check.Equal(EncodeErrorKind.TooLong, kind(new Chat { Ref = 1, Channel = "c", Body = new string('x', 1025) }), "long body");
            Check.Equal(EncodeErrorKind.Invalid, kind(new ChatReport { Ref = 1, Channel = "c" }), "no seq");
            Check.Equal(EncodeErrorKind.TooLong, kind(new ChatReport { Ref = 1, Channel = "c", Seqs = Enumerable.Range(1, 21).Select(i => (long)i).ToList() }), "21 seqs");
            Check.Equal(EncodeErrorKind.Invalid, kind(new ChatHistory { Ref = 1, Channel = "c", Limit = 0 }), "limit 0");
            Check.Equal(EncodeErrorKind.TooLong, kind(new ChatHistory { Ref = 1, Channel = "c", Limit = 201 }), "limit 201");
        }

        // ---- refusals

        [Test]
        public static void ARefusalCarriesCodeNameUntilTextAndRef()
        {
            var r = new ChatRefusedException(new ChatReply { Ref = 300, Code = ChatReplyCode.Muted, UntilMs = 1700000600000L, Text = "muted in zone:arena-1 until 1700000600000: spam" });
            Check.Equal("2 MUTED 1700000600000 300", r.Code + " " + r.Name + " " + r.UntilMs + " " + r.Ref, "fields");
            Check.Equal("MUTED: muted in zone:arena-1 until 1700000600000: spam", r.Message, "message");
            Check.True(!r.Retryable, "muted is not retried");
            Check.True(new ChatRefusedException(new ChatReply { Code = ChatReplyCode.RateLimited }).Retryable, "rate limited is");
            Check.Equal("UNKNOWN(42)", new ChatRefusedException(new ChatReply { Code = 42 }).Name, "unknown");
        }

        [Test]
        public static void BanInfoReadsBannedAndTheJoinRefusedOfOlderSessions()
        {
            const string reason = "banned from group:world-eu until 1700086400000: harassment";
            foreach (int code in new[] { KickCode.Banned, KickCode.JoinRefused })
            {
                BanInfo b = BanInfo.Of(new Kick { Code = code, Reason = reason });
                Check.Equal("group:world-eu 1700086400000 harassment", b.Scope + " " + b.UntilMs + " " + b.Reason, KickCode.Name(code));
            }
            Check.True(BanInfo.Of(new Kick { Code = KickCode.JoinRefused, Reason = "full" }) == null, "another refusal");
            Check.Equal("odd", BanInfo.Of(new Kick { Code = KickCode.Banned, Reason = "odd" }).Reason, "an odd reason");
            Check.True(BanInfo.Of(new Kick { Code = KickCode.Kicked, Reason = reason }) == null, "another code");
            Check.True(BanInfo.Of(null) == null, "none");
        }

        [Test]
        public static void AKickBannedStopsForGood()
        {
            var sched = new ManualScheduler(1000);
            var server = new FakeServer(sched);
            var ann = new Player(sched, server, "ann");
            Join(sched, ann);
            server.Kick(server.Last, KickCode.Banned, "banned from zone:test-zone until 1700086400000: spam");
            sched.Advance(5000);
            Check.Equal(ConnectionState.Closed, ann.Conn.State, "closed");
            Check.Equal(1, server.Sessions.Count, "no reconnect");
            Check.True(!ann.Closes[0].WillReconnect, "final");
            Check.Equal(1700086400000L, BanInfo.Of(ann.Closes[0].Kick).UntilMs, "until");
        }

        // ---- conn.Chat against a host

        [Test]
        public static void SendCompletesWithTheLineHeardBackAndEveryListenerHearsItOnce()
        {
            var sched = new ManualScheduler(1000);
            var server = new FakeServer(sched);
            var ann = new Player(sched, server, "ann");
            var bob = new Player(sched, server, "bob");
            Join(sched, ann, bob);
            Check.True(ann.Conn.Chat.Available, "available");
            Check.Equal("ann", ann.Conn.Chat.Principal, "principal");
            Check.Equal(Zone, ann.Conn.Chat.ZoneChannel, "zone channel");
            Task<ChatLine> sent = ann.Conn.Chat.Send(Zone, "gg");
            sched.Advance(100);
            Check.True(sent.IsCompleted && !sent.IsFaulted, "completed");
            Check.Equal("1 ann gg False", sent.Result.Seq + " " + sent.Result.Sender + " " + sent.Result.Body + " " + sent.Result.History, "the line");
            Chat chat = (Chat)server.Sessions[0].Received.First(m => m.Type == MessageType.Chat);
            Check.Equal("1 " + Zone + " gg", chat.Ref + " " + chat.Channel + " " + chat.Body, "what was sent");
            foreach (Player p in new[] { ann, bob })
            {
                Check.Equal("1", Seqs(p.Told), "told once");
                Check.Equal("1", Seqs(p.Conn.Chat.Lines(Zone)), "kept");
            }
        }

        [Test]
        public static void DmSendsOnTheOtherPrincipalsChannel()
        {
            var sched = new ManualScheduler(1000);
            var server = new FakeServer(sched);
            var ann = new Player(sched, server, "ann");
            var bob = new Player(sched, server, "bob");
            Join(sched, ann, bob);
            Task<ChatLine> sent = ann.Conn.Chat.Dm("bob", "trade? 3 ore for the épée");
            sched.Advance(100);
            Check.Equal("dm:bob", sent.Result.Channel, "ann's channel");
            Check.Equal("dm:ann ann trade? 3 ore for the épée", string.Join(";", bob.Told.Select(l => l.Channel + " " + l.Sender + " " + l.Body)), "bob hears it on dm:ann");
            Check.Equal("zone:z group:g dm:p", ChatChannel.Zone("z") + " " + ChatChannel.Group("g") + " " + ChatChannel.Dm("p"), "channel names");
        }

        [Test]
        public static void ARefusalFailsTheSendWhoseRefItCarries()
        {
            var sched = new ManualScheduler(1000);
            var server = new FakeServer(sched);
            var ann = new Player(sched, server, "ann");
            Join(sched, ann);
            server.ChatRefuse = (s, m) => m.Body == "spam" ? new ChatReply { Code = ChatReplyCode.Muted, UntilMs = 1700000600000L, Text = "muted" } : null;
            Task<ChatLine> a = ann.Conn.Chat.Send(Zone, "hello");
            Task<ChatLine> b = ann.Conn.Chat.Send(Zone, "spam");
            Task<ChatLine> c = ann.Conn.Chat.Send(Zone, "hello");
            sched.Advance(100);
            Check.Equal("1,2,3", string.Join(",", server.Last.Received.OfType<Chat>().Select(m => m.Ref)), "one ref per line");
            Check.Equal("1 2", a.Result.Seq + " " + c.Result.Seq, "equal bodies complete in order");
            ChatRefusedException e = Failed<ChatRefusedException>(b, "refused");
            Check.Equal("2 MUTED 1700000600000", e.Ref + " " + e.Name + " " + e.UntilMs, "the refusal");
        }

        [Test]
        public static void ALineOfAnotherSenderOrBodyDoesNotAnswerASend()
        {
            var sched = new ManualScheduler(1000);
            var server = new FakeServer(sched);
            var ann = new Player(sched, server, "ann");
            Join(sched, ann);
            Task<ChatLine> mine = ann.Conn.Chat.Send(Zone, "gg");
            server.SayLine(Zone, "bob", "gg");
            server.SayLine(Zone, "ann", "brb");
            sched.Advance(30);
            Check.Equal("1,2", Seqs(ann.Told), "the others' lines");
            Check.True(!mine.IsCompleted, "not hers");
            sched.Advance(100);
            Check.Equal(3L, mine.Result.Seq, "her own line");
        }

        [Test]
        public static void ASendNeitherHeardNorRefusedTimesOut()
        {
            var sched = new ManualScheduler(1000);
            var server = new FakeServer(sched);
            var ann = new Player(sched, server, "ann", new ChatOptions { TimeoutMs = 3000 });
            Join(sched, ann);
            server.ChatHold = true;
            Task<ChatLine> sent = ann.Conn.Chat.Send(Zone, "anyone?");
            sched.Advance(2900);
            Check.True(!sent.IsCompleted, "waiting");
            sched.Advance(200);
            Check.Equal(ChatErrorKind.Timeout, Failed<ChatException>(sent, "timed out").Kind, "kind");
        }

        [Test]
        public static void ReportCompletesWithItsIdAndAMissingLineIsNotFound()
        {
            var sched = new ManualScheduler(1000);
            var server = new FakeServer(sched);
            var ann = new Player(sched, server, "ann");
            Join(sched, ann);
            server.SayLine(Zone, "bob", "rude");
            server.SayLine(Zone, "bob", "ruder");
            Task<string> filed = ann.Conn.Chat.Report(Zone, new long[] { 1, 2 }, "spam");
            Task<string> missing = ann.Conn.Chat.Report(Zone, new long[] { 1, 99 });
            sched.Advance(100);
            Check.Equal("1", filed.Result, "the report id");
            Check.Equal("spam", server.Reports[0].Reason, "filed with its reason");
            Check.Equal("NOT_FOUND", Failed<ChatRefusedException>(missing, "missing").Name, "not found");
        }

        [Test]
        public static void HistoryPagesComeAsEarlierLinesNeverTwice()
        {
            var sched = new ManualScheduler(1000);
            var server = new FakeServer(sched);
            for (int i = 1; i <= 30; i++) server.SayLine(Zone, "bob", "line " + i);
            server.ChatHistoryOnAttach = 10;
            var ann = new Player(sched, server, "ann");
            Join(sched, ann);
            Check.Equal("21,22,23,24,25,26,27,28,29,30", Seqs(ann.Told), "the ten newest on attach");
            Check.True(ann.Told.All(l => l.History), "from the store");
            Task<IReadOnlyList<ChatLine>> page = ann.Conn.Chat.History(Zone, 21, 5);
            sched.Advance(100);
            Check.Equal("16,17,18,19,20", Seqs(page.Result), "the page");
            Check.Equal(Zone + " 16,17,18,19,20", string.Join(";", ann.Earlier), "told as earlier");
            Check.Equal(10, ann.Told.Count, "no new lines");
            Task<IReadOnlyList<ChatLine>> again = ann.Conn.Chat.History(Zone, 21, 5);
            sched.Advance(100);
            Check.Equal("16,17,18,19,20", Seqs(again.Result), "the same page");
            Check.Equal(1, ann.Earlier.Count, "nothing told twice");
            Check.Equal(15, ann.Conn.Chat.Lines(Zone).Count, "kept");
        }

        [Test]
        public static void AfterAReconnectTheHistorySentAgainRepeatsNothing()
        {
            var sched = new ManualScheduler(1000);
            var server = new FakeServer(sched);
            var ann = new Player(sched, server, "ann");
            Join(sched, ann);
            server.SayLine(Zone, "bob", "one");
            server.SayLine(Zone, "bob", "two");
            sched.Advance(100);
            server.Last.Socket.Drop(1006);
            sched.Advance(30);
            server.SayLine(Zone, "bob", "three");
            server.SayLine(Zone, "cy", "four");
            sched.Advance(2000);
            Check.Equal(ConnectionState.Open, ann.Conn.State, "back");
            Check.Equal(2, server.Sessions.Count, "one reconnect");
            server.SayLine(Zone, "bob", "five");
            sched.Advance(100);
            Check.Equal("1 one False;2 two False;3 three True;4 four True;5 five False", string.Join(";", ann.Told.Select(l => l.Seq + " " + l.Body + " " + l.History)), "once each, in order");
            Check.Equal(0, ann.Earlier.Count, "nothing earlier");
        }

        [Test]
        public static void ASendWhoseEchoWasLostCompletesFromTheNextAttach()
        {
            var sched = new ManualScheduler(1000);
            var server = new FakeServer(sched);
            var ann = new Player(sched, server, "ann");
            Join(sched, ann);
            server.SayLine(Zone, "ann", "gg");
            sched.Advance(100);
            server.ChatHold = true;
            Task<ChatLine> sent = ann.Conn.Chat.Send(Zone, "gg");
            sched.Advance(100);
            server.Last.Socket.Drop(1006);
            server.ChatHold = false;
            sched.Advance(2000);
            Check.Equal(2L, sent.Result.Seq, "the line after the send, not the older one");
            Check.True(sent.Result.History, "from the attach's history");
            Check.Equal("1,2", Seqs(ann.Told), "told once each");
        }

        [Test]
        public static void KeepsTheNewestLinesAndStillTellsNoneTwice()
        {
            var sched = new ManualScheduler(1000);
            var server = new FakeServer(sched);
            var ann = new Player(sched, server, "ann", new ChatOptions { Keep = 3 });
            Join(sched, ann);
            for (int i = 1; i <= 6; i++) server.SayLine(Zone, "bob", "l" + i);
            sched.Advance(100);
            Check.Equal("4,5,6", Seqs(ann.Conn.Chat.Lines(Zone)), "kept");
            server.Last.Socket.Drop(1006);
            sched.Advance(2000);
            Check.Equal(2, server.Sessions.Count, "reconnected");
            Check.Equal("1,2,3,4,5,6", Seqs(ann.Told), "none twice");
            Check.Equal(0, ann.Earlier.Count, "none earlier");
            Check.Equal("4,5,6", Seqs(ann.Conn.Chat.Lines(Zone)), "still three");
        }

        [Test]
        public static void RequestsOfAnEndedSessionAndCallsAfterCloseFail()
        {
            var sched = new ManualScheduler(1000);
            var server = new FakeServer(sched);
            var ann = new Player(sched, server, "ann");
            Check.Equal(ChatErrorKind.NotOpen, Failed<ChatException>(ann.Conn.Chat.Send(Zone, "early"), "before connect").Kind, "not open");
            Join(sched, ann);
            server.SayLine(Zone, "bob", "x");
            sched.Advance(100);
            Task<IReadOnlyList<ChatLine>> page = ann.Conn.Chat.History(Zone);
            server.Last.Socket.Drop(1006);
            sched.Advance(30);
            Check.Equal(ChatErrorKind.Disconnected, Failed<ChatException>(page, "page").Kind, "disconnected");
            Check.Equal(ChatErrorKind.NotOpen, Failed<ChatException>(ann.Conn.Chat.Report(Zone, new long[] { 1 }), "reconnecting").Kind, "not open");
            sched.Advance(2000);
            server.ChatHold = true;
            Task<ChatLine> pending = ann.Conn.Chat.Send(Zone, "bye");
            ann.Conn.Close();
            Check.Equal(ChatErrorKind.Closed, Failed<ChatException>(pending, "pending").Kind, "closed");
            Check.Equal(ChatErrorKind.Closed, Failed<ChatException>(ann.Conn.Chat.Send(Zone, "hello?"), "after").Kind, "closed");
        }

        [Test]
        public static void RefusesBadArgumentsBeforeSendingAnything()
        {
            var sched = new ManualScheduler(1000);
            var server = new FakeServer(sched);
            var ann = new Player(sched, server, "ann");
            Join(sched, ann);
            Task[] calls =
            {
                ann.Conn.Chat.Send("", "x"), ann.Conn.Chat.Send(Zone, ""), ann.Conn.Chat.Send(Zone, new string('x', 1025)),
                ann.Conn.Chat.Send(new string('c', 301), "x"), ann.Conn.Chat.Report(Zone, new long[0]),
                ann.Conn.Chat.Report(Zone, Enumerable.Range(1, 21).Select(i => (long)i)), ann.Conn.Chat.History(Zone, 0, 0),
                ann.Conn.Chat.History(Zone, 0, 201),
            };
            foreach (Task t in calls) Check.Equal(ChatErrorKind.Invalid, Failed<ChatException>(t, "bad").Kind, "invalid");
            Check.Equal(0, server.Last.Received.Count(m => m.Type == MessageType.Chat || m.Type == MessageType.ChatReport || m.Type == MessageType.ChatHistory), "nothing sent");
        }

        // ---- a host older than chat

        [Test]
        public static void AVersion10SessionRefusesEveryChatCallSayingTheHostIsOlder()
        {
            var sched = new ManualScheduler(1000);
            var server = new FakeServer(sched) { MaxVersion = 10 };
            var ann = new Player(sched, server, "ann");
            Join(sched, ann);
            Check.Equal(10u, ann.Conn.Welcome.Version, "version 10");
            Check.True(!ann.Conn.Chat.Available, "not available");
            Task[] calls = { ann.Conn.Chat.Send(Zone, "hi"), ann.Conn.Chat.Dm("bob", "hi"), ann.Conn.Chat.Report(Zone, new long[] { 1 }), ann.Conn.Chat.History(Zone) };
            foreach (Task t in calls)
            {
                ChatException e = Failed<ChatException>(t, "older host");
                Check.Equal(ChatErrorKind.Unsupported, e.Kind, "unsupported");
                Check.True(e.Message.Contains("version 11") && e.Message.Contains("version 10 (the host is older)"), e.Message);
            }
        }

        [Test]
        public static void ChatMessagesInAVersion10SessionAreAProtocolError()
        {
            var sched = new ManualScheduler(1000);
            var server = new FakeServer(sched) { MaxVersion = 10 };
            var ann = new Player(sched, server, "ann");
            Join(sched, ann);
            server.Send(server.Last, new ChatLines { Channel = Zone });
            sched.Advance(100);
            Check.True(ann.Closes.Count == 1 && ann.Closes[0].Error is ProtocolException, "a protocol error");
            Check.True(ann.Closes[0].Reason.Contains("ChatLines on a version 10 session"), ann.Closes[0].Reason);
        }

        // ---- the client alone: dedupe, order and ref matching

        sealed class StubPort : IChatPort
        {
            public readonly ManualScheduler Sched = new ManualScheduler(0);
            public uint? V = 11;
            public string Me = "ann";
            public readonly List<ClientMessage> Sent = new List<ClientMessage>();
            public IScheduler Scheduler { get { return Sched; } }
            public uint? Version() { return V; }
            public uint Features() { return V.HasValue && V.Value >= 11 ? 1u : 0u; }
            public string Principal() { return Me; }
            public string ZoneId() { return "z"; }
            public void Send(ClientMessage m) { Sent.Add(m); }
        }

        static ChatLines LinesOf(string channel, bool history, uint reference, params long[] seqs)
        {
            return new ChatLines
            {
                Channel = channel,
                History = history,
                Ref = reference,
                Lines = seqs.Select(s => new ChatWireLine { Seq = s, Sender = s % 2 == 0 ? "ann" : "bob", SentAtMs = s, Body = "b" + s }).ToList(),
            };
        }

        [Test]
        public static void TellsEachLineOnceInSeqOrderPerChannel()
        {
            var port = new StubPort();
            var chat = new ChatClient(port, null);
            var told = new List<string>();
            var earlier = new List<string>();
            chat.LineReceived += l => told.Add(l.Channel + "#" + l.Seq);
            chat.EarlierLines += (c, ls) => earlier.Add(Seqs(ls));
            chat.OnLines(LinesOf("zone:a", true, 0, 3, 1, 2));
            chat.OnLines(LinesOf("zone:b", false, 0, 1));
            chat.OnLines(LinesOf("zone:a", false, 0, 2, 3, 4));
            chat.OnLines(LinesOf("zone:a", false, 0, 4));
            Check.Equal("zone:a#1 zone:a#2 zone:a#3 zone:b#1 zone:a#4", string.Join(" ", told), "once each, sorted");
            chat.OnLines(LinesOf("zone:a", false, 0, 7));
            chat.OnLines(LinesOf("zone:a", true, 0, 5, 6, 7));
            Check.Equal("5,6", string.Join(";", earlier), "a gap filled later");
            Check.Equal("1,2,3,4,5,6,7", Seqs(chat.Lines("zone:a")), "kept");
            Check.Equal("zone:a zone:b", string.Join(" ", chat.Channels()), "channels");
        }

        [Test]
        public static void MatchesRefusalsByRefAndLinesByEcho()
        {
            var port = new StubPort();
            var chat = new ChatClient(port, null);
            chat.OnLines(LinesOf("zone:a", false, 0, 1, 2));
            Task<ChatLine> s1 = chat.Send("zone:a", "b2");
            Task<ChatLine> s2 = chat.Send("zone:a", "b4");
            Check.Equal("1,2", string.Join(",", port.Sent.Cast<Chat>().Select(m => m.Ref)), "refs");
            chat.OnReply(new ChatReply { Ref = 77, Code = ChatReplyCode.Muted });
            chat.OnReply(new ChatReply { Ref = 1, Code = ChatReplyCode.Ok });
            chat.OnLines(LinesOf("zone:a", false, 0, 3, 4));
            Check.Equal(4L, s2.Result.Seq, "its echo");
            Check.True(!s1.IsCompleted, "seq 2 was there before the send");
            chat.OnReply(new ChatReply { Ref = 1, Code = ChatReplyCode.RateLimited, UntilMs = 9000, Text = "slow down" });
            ChatRefusedException e = Failed<ChatRefusedException>(s1, "refused");
            Check.Equal("RATE_LIMITED 9000 1", e.Name + " " + e.UntilMs + " " + e.Ref, "the refusal");
            Task<IReadOnlyList<ChatLine>> h = chat.History("group:g", 10, 3);
            chat.OnLines(LinesOf("group:g", true, 0, 1, 2));
            Check.True(!h.IsCompleted, "an attach's history answers no request");
            chat.OnLines(LinesOf("group:g", true, 3, 7, 8, 9));
            Check.Equal("7,8,9", Seqs(h.Result), "by its ref");
            Task<string> r = chat.Report("group:g", new long[] { 7 }, "why");
            chat.OnReply(new ChatReply { Ref = 4, Code = ChatReplyCode.Ok, Text = "rep-17" });
            Check.Equal("rep-17", r.Result, "the report id");
        }

        [Test]
        public static void WithoutAPrincipalOrWithATrimmingHostASendIsStillAnswered()
        {
            var port = new StubPort { Me = null };
            var chat = new ChatClient(port, null);
            Task<ChatLine> s = chat.Send("zone:a", "b3");
            chat.OnLines(LinesOf("zone:a", false, 0, 3));
            Check.Equal("bob", s.Result.Sender, "channel and body alone");
            var port2 = new StubPort();
            var chat2 = new ChatClient(port2, null);
            Task<ChatLine> t = chat2.Send("zone:a", "  hi  ");
            chat2.OnLines(new ChatLines { Channel = "zone:a", Lines = new List<ChatWireLine> { new ChatWireLine { Seq = 1, Sender = "ann", Body = "hi" } } });
            Check.Equal("hi", t.Result.Body, "trimmed");
        }
    }
}
