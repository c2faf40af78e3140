// Test doubles for driving a ZoneConnection without a network, ported from clients/js/test/helpers.ts (its
// WebSocket half): a manual clock, sockets that deliver through the clock with configurable latency, a
// small zone server built on the SDK's own codec, and a fleet of them behind one socket factory. The same
// latency model and PRNG as the TypeScript tests, so the same run gives the same figures.
using System;
using System.Collections.Generic;
using System.Linq;

namespace Zonekeep.Tests
{
    /// <summary>mulberry32, as the TypeScript tests' rng(): "random" latency that is reproducible.</summary>
    public static class Rng
    {
        public static Func<double> Mulberry32(uint seed)
        {
            uint a = seed;
            return () =>
            {
                unchecked
                {
                    a = a + 0x6d2b79f5;
                    uint t = a;
                    t = (t ^ (t >> 15)) * (t | 1);
                    t ^= t + (t ^ (t >> 7)) * (t | 61);
                    return (t ^ (t >> 14)) / 4294967296.0;
                }
            };
        }
    }

    public sealed class FakeEntity
    {
        public int Kind;
        public int Qx;
        public int Qy;
        public FieldValue[] Fields;

        public FakeEntity Copy() { return new FakeEntity { Kind = Kind, Qx = Qx, Qy = Qy, Fields = (FieldValue[])Fields.Clone() }; }
    }

    /// <summary>Delivery through the manual clock with a latency function (one way), in order like TCP.</summary>
    public sealed class FakeNet
    {
        public readonly ManualScheduler Sched;
        public Func<double> Latency;
        private double _lastAt;

        public FakeNet(ManualScheduler sched, Func<double> latency)
        {
            Sched = sched;
            Latency = latency ?? (() => 20);
        }

        public void Deliver(Action fn)
        {
            // In-order delivery like TCP: a message never overtakes the previous one.
            double at = Math.Max(Sched.Now() + Latency(), _lastAt);
            _lastAt = at;
            Sched.SetTimeout(fn, at - Sched.Now());
        }
    }

    /// <summary>One client's socket as the server sees it.</summary>
    public sealed class ServerSession
    {
        public readonly FakeSocket Socket;
        public string Url = "";
        public Dictionary<uint, FakeEntity> Sent = new Dictionary<uint, FakeEntity>();
        public long LastDeltaTick;
        public uint PlayerId;
        public uint Ack;
        public uint? Controlled;
        public bool ControlDirty = true;
        public bool Welcomed;
        public uint Version;
        /// <summary>A transfer moved this session's player away: it gets no Deltas any more (§5.3.2).</summary>
        public bool Moving;
        public readonly List<ClientMessage> Received = new List<ClientMessage>();
        /// <summary>The principal its ticket named (the sub of a JWS ticket, else p&lt;player id&gt;).</summary>
        public string Principal = "";

        public ServerSession(FakeSocket socket) { Socket = socket; }
    }

    /// <summary>A socket pair end seen by the client; delivery goes through the scheduler with latency.</summary>
    public sealed class FakeSocket : ISocket
    {
        private readonly FakeServer _server;
        public ServerSession Session;
        public bool ClientClosed;
        public bool ServerClosed;
        public bool IsClosed { get { return ClientClosed || ServerClosed; } }

        public Action OnOpen { get; set; }
        public Action<byte[], bool> OnMessage { get; set; }
        public Action<int, string> OnClose { get; set; }

        public FakeSocket(FakeServer server) { _server = server; }

        public void Send(byte[] data)
        {
            if (IsClosed) return;
            byte[] copy = (byte[])data.Clone();
            _server.Net.Deliver(() => _server.OnClientBytes(Session, copy));
        }

        public void Close(int code, string reason)
        {
            if (IsClosed) return;
            ClientClosed = true;
            _server.Net.Deliver(() => { if (OnClose != null) OnClose(code, reason); });
        }

        public void Pump() { }

        /// <summary>Server side: deliver a message to the client.</summary>
        public void Push(byte[] bytes)
        {
            if (ServerClosed) return;
            byte[] copy = (byte[])bytes.Clone();
            _server.Net.Deliver(() =>
            {
                if (!ClientClosed && OnMessage != null) OnMessage(copy, false);
            });
        }

        /// <summary>Server side: the connection drops (the client sees the code after latency).</summary>
        public void Drop(int code = 1006, string reason = "")
        {
            if (IsClosed) return;
            ServerClosed = true;
            _server.Net.Deliver(() => { if (OnClose != null) OnClose(code, reason); });
        }
    }

    /// <summary>A minimal zone host speaking the protocol through the SDK codec.</summary>
    public sealed class FakeServer
    {
        public static readonly Schema TestSchema = new Schema(0.01f,
            new KindDef("avatar", new FieldDef("hp", FieldType.Quant(0, 100, 7)), new FieldDef("name", FieldType.Str(16))));

        public readonly FakeNet Net;
        public readonly ManualScheduler Sched;
        public readonly List<ServerSession> Sessions = new List<ServerSession>();
        public readonly Dictionary<uint, FakeEntity> Entities = new Dictionary<uint, FakeEntity>();
        public readonly uint TickHz = 30;
        public uint PatchEvery = 1;
        public double OffsetMs;
        public long Tick;
        public bool Up = true;
        public Dictionary<string, uint> Tokens = new Dictionary<string, uint>();
        public bool RefuseTokens;
        public Func<string, int?> CheckTicket = t => null;
        public Func<Hello, ServerSession, string> RedirectTo = (h, s) => null;
        public uint NextPlayer = 1;
        /// <summary>The newest version this host speaks (11: with chat).</summary>
        public uint MaxVersion = 11;
        /// <summary>Chat: every channel's lines, by the store's key (a DM under dm: + the two principals sorted).</summary>
        public readonly Dictionary<string, List<ChatWireLine>> ChatStore = new Dictionary<string, List<ChatWireLine>>();
        /// <summary>Chat: lines of each channel sent to a session on attach (0 = none).</summary>
        public int ChatHistoryOnAttach = 50;
        /// <summary>Chat: a refusal of a line (its ChatReply, ref filled in), or null to accept it.</summary>
        public Func<ServerSession, Chat, ChatReply> ChatRefuse = (s, m) => null;
        /// <summary>Chat: hold the echo of accepted lines until ReleaseChat (as a slow store would).</summary>
        public bool ChatHold;
        private readonly List<Action> _chatHeld = new List<Action>();
        /// <summary>Chat: reports filed, in order.</summary>
        public readonly List<ChatReport> Reports = new List<ChatReport>();
        public string ZoneId = "test-zone";
        public string ContentVersion = "1.0.0";
        public List<string> EntriesList = new List<string>();
        public string MinContentVersion;
        public Func<long, bool> SkipPatch = t => false;
        public Action<FakeEntity, byte[], uint> ApplyInput = (e, p, s) => { };

        public FakeServer(ManualScheduler sched, Func<double> latency = null)
        {
            Sched = sched;
            Net = new FakeNet(sched, latency);
        }

        /// <summary>The socket factory to give the connection.</summary>
        public ISocket Factory(string url)
        {
            FakeSocket sock = new FakeSocket(this);
            ServerSession session = new ServerSession(sock) { Url = url };
            sock.Session = session;
            Sessions.Add(session);
            if (Up) Net.Deliver(() => { if (sock.OnOpen != null) sock.OnOpen(); });
            else sock.Drop(1006, "connection refused");
            return sock;
        }

        public ServerSession Last { get { return Sessions[Sessions.Count - 1]; } }

        public double ServerMs() { return Sched.Now() + OffsetMs; }

        public void Send(ServerSession s, ServerMessage m) { s.Socket.Push(MessageCodec.EncodeServer(m)); }

        public void Kick(ServerSession s, int code, string reason = "")
        {
            Send(s, new Kick { Code = code, Reason = reason });
            s.Socket.Drop(4000 + code);
        }

        /// <summary>Reads what clients send and answers nothing (a host that hangs).</summary>
        public bool Silent;

        public void OnClientBytes(ServerSession s, byte[] bytes)
        {
            if (s.Socket.IsClosed || Silent) return;
            ClientMessage m = MessageCodec.DecodeClient(bytes);
            s.Received.Add(m);
            switch (m.Type)
            {
                case MessageType.Hello:
                    OnHello(s, (Hello)m);
                    return;
                case MessageType.Input:
                {
                    InputMessage i = (InputMessage)m;
                    FakeEntity e;
                    if (s.Controlled.HasValue && Entities.TryGetValue(s.Controlled.Value, out e)) ApplyInput(e, i.Payload, i.Seq);
                    s.Ack = Math.Max(s.Ack, i.Seq);
                    return;
                }
                case MessageType.Resync:
                    // As the real host: the next Delta this session gets is a BASELINE.
                    SendDelta(s, true);
                    return;
                case MessageType.Chat:
                case MessageType.ChatReport:
                case MessageType.ChatHistory:
                    if (s.Version < 11)
                    {
                        // As Inputs over WebSocket: a protocol error in an older session.
                        Kick(s, KickCode.ProtocolError, m.Type + " in a version " + s.Version + " session");
                        return;
                    }
                    OnChat(s, m);
                    return;
                case MessageType.Ping:
                    Send(s, new Pong
                    {
                        ClientTime = ((Ping)m).ClientTime,
                        ServerTimeUs = (long)Math.Floor(ServerMs() * 1000),
                        Tick = (long)Math.Floor((ServerMs() * TickHz) / 1000),
                    });
                    return;
            }
        }

        private void OnHello(ServerSession s, Hello m)
        {
            // A current host speaks versions 2 to 10 (over WebSocket 6 is byte for byte 5).
            uint version = 0;
            foreach (uint v in m.Versions) if (v >= 2 && v <= MaxVersion && v > version) version = v;
            if (VersionPick.HasValue) version = VersionPick.Value;
            if (version == 0)
            {
                Send(s, new Kick { Code = KickCode.VersionMismatch, Reason = "no common version" });
                s.Socket.Drop(1000);
                return;
            }
            if (MinContentVersion != null)
            {
                int? cmp = ContentVersions.Compare(m.ContentVersion, MinContentVersion);
                if (version < 5 || !cmp.HasValue || cmp.Value < 0)
                {
                    int code = version < 5 ? KickCode.VersionMismatch : KickCode.ContentOutdated;
                    Send(s, new Kick { Code = code, Reason = "this host needs content version " + MinContentVersion + " or newer" });
                    s.Socket.Drop(4000 + code);
                    return;
                }
            }
            int? refusal = CheckTicket(m.Ticket);
            if (refusal.HasValue)
            {
                Send(s, new Kick { Code = refusal.Value, Reason = "ticket refused" });
                s.Socket.Drop(1000);
                return;
            }
            string elsewhere = RedirectTo(m, s);
            if (elsewhere != null)
            {
                Send(s, new Redirect { Url = elsewhere, ZoneId = ZoneId });
                s.Socket.Drop(1000);
                return;
            }
            bool continued = false;
            if (m.ReconnectToken.Length > 0)
            {
                uint pid;
                if (RefuseTokens || !Tokens.TryGetValue(Hex.ToHex(m.ReconnectToken), out pid))
                {
                    Send(s, new Kick { Code = KickCode.ReconnectRefused, Reason = "unknown token" });
                    s.Socket.Drop(1000);
                    return;
                }
                s.PlayerId = pid;
                ServerSession prev = Sessions.AsEnumerable().Reverse().FirstOrDefault(o => o != s && o.PlayerId == pid);
                if (prev != null)
                {
                    s.Ack = prev.Ack;
                    s.Controlled = prev.Controlled;
                    List<uint> ids = prev.Sent.Keys.OrderBy(x => x).ToList();
                    ResumeFrom from = m.ResumeFrom;
                    continued = from != null && from.Tick == prev.LastDeltaTick && from.Count == ids.Count && from.Hash == KnownSet.Hash(ids);
                    if (continued) s.Sent = new Dictionary<uint, FakeEntity>(prev.Sent);
                }
            }
            else
            {
                s.PlayerId = NextPlayer++;
                s.Controlled = 100 + s.PlayerId;
                Entities[s.Controlled.Value] = new FakeEntity { Kind = 0, Fields = new[] { FieldValue.Int(100), FieldValue.Str("p" + s.PlayerId) } };
            }
            byte[] token = new byte[16];
            for (int i = 0; i < 16; i++) token[i] = (byte)((s.PlayerId + i * Sessions.Count) & 0xff);
            Tokens[Hex.ToHex(token)] = s.PlayerId;
            Send(s, new Welcome
            {
                Version = version,
                PlayerId = s.PlayerId,
                ZoneId = ZoneId,
                Role = Role.Player,
                TickHz = TickHz,
                PatchEvery = PatchEvery,
                Tick = Tick,
                Features = version >= 11 ? 1u : 0u,
                IdleTimeoutMs = 30000,
                HandshakeTimeoutMs = 5000,
                ReconnectGraceMs = 30000,
                ReconnectToken = token,
                Schema = TestSchema,
                ContentVersion = version >= 5 ? ContentVersion : "",
                Entries = version >= 7 ? new List<string>(EntriesList) : new List<string>(),
            });
            s.Welcomed = true;
            s.Version = version;
            if (!continued) s.Sent.Clear();
            s.ControlDirty = true;
            SendDelta(s, !continued);
            s.Principal = TicketSub(m.Ticket) ?? "p" + s.PlayerId;
            if (version >= 11) ChatAttach(s);
        }

        /// <summary>The sub of a JWS ticket, or null when <paramref name="ticket"/> is not one.</summary>
        public static string TicketSub(string ticket)
        {
            string[] parts = ticket.Split('.');
            if (parts.Length < 2) return null;
            string json = MiniJson.Base64UrlText(parts[1]);
            return json == null ? null : MiniJson.StringMember(json, "sub");
        }

        /// <summary>A ticket as a host mints it (a compact JWS; the signature is not checked here) for <paramref name="sub"/>.</summary>
        public static string JwsTicket(string sub, int n = 1)
        {
            Func<string, string> b64 = t => Convert.ToBase64String(System.Text.Encoding.UTF8.GetBytes(t)).TrimEnd('=').Replace('+', '-').Replace('/', '_');
            return b64("{\"alg\":\"HS256\"}") + "." + b64("{\"sub\":\"" + sub + "\",\"zone\":\"test-zone\",\"exp\":4000000000,\"jti\":\"j" + n + "\",\"role\":\"player\"}") + ".sig";
        }

        /// <summary>The store's key of a channel as <paramref name="s"/> names it (a DM: dm: + both principals sorted, 0x1F between).</summary>
        public string ChatKey(ServerSession s, string channel)
        {
            if (!channel.StartsWith("dm:", StringComparison.Ordinal)) return channel;
            string other = channel.Substring(3);
            return string.CompareOrdinal(s.Principal, other) <= 0 ? "dm:" + s.Principal + "\u001f" + other : "dm:" + other + "\u001f" + s.Principal;
        }

        /// <summary>The channel <paramref name="s"/> hears the lines of the store's <paramref name="key"/> on (null: it does not hear them).</summary>
        public string ChatChannelOf(ServerSession s, string key)
        {
            if (!key.StartsWith("dm:", StringComparison.Ordinal)) return key == "zone:" + ZoneId || key.StartsWith("group:", StringComparison.Ordinal) ? key : null;
            string[] pair = key.Substring(3).Split('\u001f');
            if (pair[0] == s.Principal) return "dm:" + pair[1];
            if (pair[1] == s.Principal) return "dm:" + pair[0];
            return null;
        }

        /// <summary>Sends a session the recent lines of the channels it hears (as a host does on attach).</summary>
        public void ChatAttach(ServerSession s)
        {
            if (ChatHistoryOnAttach == 0) return;
            foreach (var kv in ChatStore)
            {
                string channel = ChatChannelOf(s, kv.Key);
                if (channel == null || kv.Value.Count == 0) continue;
                Send(s, new ChatLines { Channel = channel, History = true, Lines = kv.Value.Skip(Math.Max(0, kv.Value.Count - ChatHistoryOnAttach)).ToList() });
            }
        }

        /// <summary>Appends a line as the store does (the next seq of its channel) and tells every session hearing it.</summary>
        public ChatWireLine SayLine(string key, string sender, string body)
        {
            List<ChatWireLine> lines;
            if (!ChatStore.TryGetValue(key, out lines)) ChatStore[key] = lines = new List<ChatWireLine>();
            ChatWireLine line = new ChatWireLine { Seq = lines.Count == 0 ? 1 : lines[lines.Count - 1].Seq + 1, Sender = sender, SentAtMs = 1700000000000L + (long)Sched.Now(), Body = body };
            lines.Add(line);
            Action fanOut = () =>
            {
                foreach (ServerSession o in Sessions.ToList())
                {
                    if (!o.Welcomed || o.Socket.IsClosed || o.Moving || o.Version < 11) continue;
                    string channel = ChatChannelOf(o, key);
                    if (channel != null) Send(o, new ChatLines { Channel = channel, Lines = new List<ChatWireLine> { line } });
                }
            };
            if (ChatHold) _chatHeld.Add(fanOut);
            else fanOut();
            return line;
        }

        /// <summary>Tells the held lines (see ChatHold).</summary>
        public void ReleaseChat()
        {
            List<Action> held = new List<Action>(_chatHeld);
            _chatHeld.Clear();
            foreach (Action f in held) f();
        }

        private void OnChat(ServerSession s, ClientMessage m)
        {
            switch (m.Type)
            {
                case MessageType.Chat:
                {
                    Chat c = (Chat)m;
                    ChatReply refused = ChatRefuse(s, c);
                    if (refused != null)
                    {
                        refused.Ref = c.Ref;
                        Send(s, refused);
                    }
                    else SayLine(ChatKey(s, c.Channel), s.Principal, c.Body);
                    return;
                }
                case MessageType.ChatReport:
                {
                    ChatReport r = (ChatReport)m;
                    List<ChatWireLine> kept;
                    ChatStore.TryGetValue(ChatKey(s, r.Channel), out kept);
                    if (kept == null || !r.Seqs.All(q => kept.Any(l => l.Seq == q)))
                    {
                        Send(s, new ChatReply { Ref = r.Ref, Code = ChatReplyCode.NotFound, Text = "a reported line is not kept" });
                        return;
                    }
                    Reports.Add(r);
                    Send(s, new ChatReply { Ref = r.Ref, Code = ChatReplyCode.Ok, Text = Reports.Count.ToString() });
                    return;
                }
                case MessageType.ChatHistory:
                {
                    ChatHistory h = (ChatHistory)m;
                    List<ChatWireLine> all;
                    if (!ChatStore.TryGetValue(ChatKey(s, h.Channel), out all)) all = new List<ChatWireLine>();
                    List<ChatWireLine> page = all.Where(l => h.Before == 0 || l.Seq < h.Before).ToList();
                    page = page.Skip(Math.Max(0, page.Count - h.Limit)).ToList();
                    Send(s, new ChatLines { Channel = h.Channel, History = true, Ref = h.Ref, Lines = page });
                    return;
                }
            }
        }

        /// <summary>The Delta from what a client holds (<paramref name="sent"/>, or nothing for a BASELINE) to the world now.</summary>
        private Delta Diff(Dictionary<uint, FakeEntity> sent, bool baseline, uint ack, out List<KnownEntry> knownBefore)
        {
            knownBefore = baseline ? new List<KnownEntry>() : sent.OrderBy(kv => kv.Key).Select(kv => new KnownEntry(kv.Key, kv.Value.Kind)).ToList();
            Delta delta = new Delta { Tick = Tick, Ack = ack, Baseline = baseline };
            if (!baseline) foreach (KnownEntry e in knownBefore) if (!Entities.ContainsKey(e.Id)) delta.Despawns.Add(e.Id);
            List<KnownEntry> after = knownBefore.Where(e => Entities.ContainsKey(e.Id)).ToList();
            for (int index = 0; index < after.Count; index++)
            {
                FakeEntity now = Entities[after[index].Id];
                FakeEntity was = sent[after[index].Id];
                Update u = new Update { Index = index, Id = after[index].Id, Kind = after[index].Kind };
                for (int i = 0; i < now.Fields.Length; i++)
                {
                    if (!now.Fields[i].Equals(was.Fields[i]))
                    {
                        u.Fields.Add(new FieldChange(i, now.Fields[i]));
                        u.Mask |= 1u << i;
                    }
                }
                u.Pos = DeltaCodec.CanonicalPosForm(now.Qx, now.Qy, was.Qx, was.Qy, u.Fields.Count > 0);
                if (!u.Pos.HasValue && u.Fields.Count == 0) continue;
                delta.Updates.Add(u);
            }
            foreach (var kv in Entities.Where(kv => baseline || !sent.ContainsKey(kv.Key)).OrderBy(kv => kv.Key))
                delta.Spawns.Add(new Spawn { Id = kv.Key, Kind = kv.Value.Kind, Qx = kv.Value.Qx, Qy = kv.Value.Qy, Fields = (FieldValue[])kv.Value.Fields.Clone() });
            return delta;
        }

        /// <summary>Builds and sends this session's Delta: the diff between the world and what it was sent.</summary>
        public Delta SendDelta(ServerSession s, bool baseline = false, List<ZoneEvent> events = null)
        {
            List<KnownEntry> knownBefore;
            Delta delta = Diff(s.Sent, baseline, s.Ack, out knownBefore);
            delta.Events = events;
            if (s.ControlDirty)
            {
                delta.WithControl(s.Controlled);
                s.ControlDirty = false;
            }
            s.Socket.Push(DeltaCodec.Encode(delta, TestSchema, knownBefore));
            s.LastDeltaTick = delta.Tick;
            if (baseline) s.Sent.Clear();
            foreach (uint id in delta.Despawns) s.Sent.Remove(id);
            foreach (var kv in Entities) s.Sent[kv.Key] = kv.Value.Copy();
            return delta;
        }

        /// <summary>Moves the session's player to <paramref name="zoneId"/> (§5.3.2): its entity leaves, no more Deltas, a Transfer.</summary>
        public void Transfer(ServerSession s, string zoneId, string credential, string url)
        {
            if (s.Controlled.HasValue) Entities.Remove(s.Controlled.Value);
            s.Moving = true;
            Send(s, new Transfer { ZoneId = zoneId, Ticket = credential, Url = url });
        }

        /// <summary>The version the host picks, whatever the Hello offered (null: the newest both speak).</summary>
        public uint? VersionPick;

        /// <summary>Sends the session a KnownSetCheck of what the server believes it sent.</summary>
        public void SendKnownSetCheck(ServerSession s)
        {
            List<uint> ids = s.Sent.Keys.OrderBy(x => x).ToList();
            Send(s, new KnownSetCheck { Tick = Tick, Count = (uint)ids.Count, Hash = KnownSet.Hash(ids) });
        }

        /// <summary>Advances the zone one tick; on patch ticks every welcomed, open session gets a Delta.</summary>
        public void Step(Action<long> simulate)
        {
            Tick += 1;
            simulate(Tick);
            if (Tick % PatchEvery == 0 && !SkipPatch(Tick))
            {
                foreach (ServerSession s in Sessions.ToList())
                {
                    if (!s.Welcomed || s.Socket.IsClosed || s.Moving) continue;
                    SendDelta(s);
                }
            }
        }

        /// <summary>Runs the zone on the manual clock: one tick every 1000/TickHz ms of server time.</summary>
        public void Run(Action<long> simulate = null)
        {
            Action<long> sim = simulate ?? (t => { });
            Action loop = null;
            loop = () =>
            {
                long due = (long)Math.Floor((ServerMs() * TickHz) / 1000);
                while (Tick < due) Step(sim);
                double nextAt = ((Tick + 1) * 1000.0) / TickHz - OffsetMs;
                // At least 1 ms, so float rounding at a tick boundary can never spin at one instant.
                Sched.SetTimeout(loop, Math.Max(1, Math.Ceiling(nextAt - Sched.Now())));
            };
            Tick = (long)Math.Floor((ServerMs() * TickHz) / 1000);
            loop();
        }
    }

    /// <summary>Hosts of a fleet on one manual clock, each reached at ws://NAME/...; the factory routes by host.</summary>
    public sealed class FakeFleet
    {
        public readonly Dictionary<string, FakeServer> Hosts = new Dictionary<string, FakeServer>();
        public readonly List<string> Opened = new List<string>();

        public FakeFleet(ManualScheduler sched, params string[] names)
        {
            foreach (string n in names) Hosts[n] = new FakeServer(sched);
        }

        public FakeServer Host(string name) { return Hosts[name]; }

        public ISocket Factory(string url)
        {
            Opened.Add(url);
            return Host(new Uri(url).Host).Factory(url);
        }
    }
}
