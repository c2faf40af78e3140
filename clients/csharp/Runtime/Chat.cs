// Chat (protocol version 11): conn.Chat of a ZoneConnection, as the TypeScript SDK's conn.chat.
//
// Channels: zone:<zone id> (everyone attached to the zone), group:<group name> (everyone in any zone of that
// zone group, a world), dm:<principal> (a direct message, named after the *other* principal: ann sends on
// dm:bob, bob hears it on dm:ann, ann's own sessions on dm:bob). On attach the host sends each channel's recent
// lines (ChatLines flagged history), then lines as they are said.
//
// Lines are kept per channel (the newest ChatOptions.Keep, default 200, oldest first: Lines) and told once
// each: LineReceived for every line newer than the newest told on its channel, in seq order — so the history a
// host sends again after a reconnect repeats nothing, and history comes before the live lines that follow it;
// EarlierLines for lines older than that which join the kept lines (a History page, or recent lines that came
// after newer ones). Lines older than a full window of kept lines are neither kept nor told.
//
// Send completes with the line as the channel heard it: the first line on that channel, newer than the newest
// the client knew there when it sent, whose sender is this session's principal (the ticket's sub; not checked
// when the ticket is not a readable JWS) and whose body is the body sent (or the same once trimmed); sends of
// the same body on one channel complete in order. It fails with a ChatRefusedException when the host refuses the
// line (a ChatReply with that send's ref), and with a ChatException Timeout after ChatOptions.TimeoutMs. A send
// survives a reconnect: the line may be heard in the history of the next attach.
//
// Every method fails with a ChatException: Unsupported on a session of version 10 or older (the host is older
// than chat), NotOpen while no session is open, Invalid for an empty or over-long channel, body or request,
// Disconnected for a report or history request whose session ended before its answer, Closed once the connection
// closed for good. Tasks complete inside ZoneConnection.Poll (on the game's thread); their continuations run
// asynchronously, as Connect's do.
using System;
using System.Collections.Generic;
using System.Text;
using System.Threading.Tasks;

namespace Zonekeep
{
    /// <summary>One line of a channel, as a <see cref="ChatClient"/> keeps and tells it.</summary>
    public sealed class ChatLine
    {
        /// <summary>The channel as this session names it (a DM: <c>dm:&lt;the other principal&gt;</c>).</summary>
        public string Channel = string.Empty;
        /// <summary>Its number in the channel: from 1, strictly increasing in the order lines were committed.</summary>
        public long Seq;
        /// <summary>The principal that said it (or the name a back end chose).</summary>
        public string Sender = string.Empty;
        /// <summary>When the host accepted it, UNIX ms.</summary>
        public long SentAtMs;
        /// <summary>Its text.</summary>
        public string Body = string.Empty;
        /// <summary>True when it came from the store (on attach, or answering a history request), not as said.</summary>
        public bool History;
    }

    /// <summary>Chat tuning (<see cref="ZoneConnectionOptions.Chat"/>).</summary>
    public sealed class ChatOptions
    {
        /// <summary>Lines kept per channel, the newest (default 200).</summary>
        public int Keep = 200;
        /// <summary>How long a send, report or history request waits for its answer, ms (default 10000).</summary>
        public double TimeoutMs = 10000;
    }

    /// <summary>Channel names.</summary>
    public static class ChatChannel
    {
        /// <summary>The channel of everyone attached to <paramref name="zoneId"/>.</summary>
        public static string Zone(string zoneId) { return "zone:" + zoneId; }
        /// <summary>The channel of everyone in any zone of the zone group (a world) <paramref name="group"/>.</summary>
        public static string Group(string group) { return "group:" + group; }
        /// <summary>The channel of the direct messages with <paramref name="principal"/>.</summary>
        public static string Dm(string principal) { return "dm:" + principal; }
    }

    /// <summary>What a <see cref="ChatClient"/> needs of its connection.</summary>
    internal interface IChatPort
    {
        IScheduler Scheduler { get; }
        /// <summary>The open session's negotiated version, or null when no session is open.</summary>
        uint? Version();
        /// <summary>The open session's Welcome feature bits (0 when no session is open).</summary>
        uint Features();
        /// <summary>This session's principal (its ticket's sub), or null when unknown.</summary>
        string Principal();
        /// <summary>The zone of the open session (null before a Welcome).</summary>
        string ZoneId();
        void Send(ClientMessage m);
    }

    /// <summary>Chat on a <see cref="ZoneConnection"/>: <c>conn.Chat</c>. See the file's comment.</summary>
    public sealed class ChatClient
    {
        private sealed class PendingSend
        {
            public uint Ref;
            public string Channel;
            public string Body;
            public long AfterSeq;
            public TaskCompletionSource<ChatLine> Task;
            public long Timer;
        }

        private sealed class PendingRequest
        {
            public bool IsReport;
            public TaskCompletionSource<string> Report;
            public TaskCompletionSource<IReadOnlyList<ChatLine>> History;
            public long Timer;

            public void Fail(Exception e)
            {
                if (Report != null) Report.TrySetException(e);
                else History.TrySetException(e);
            }
        }

        private sealed class ChannelState
        {
            public readonly List<ChatLine> Lines = new List<ChatLine>();
            public long Newest;
        }

        private readonly IChatPort _port;
        private readonly int _keep;
        private readonly double _timeoutMs;
        private readonly Dictionary<string, ChannelState> _channels = new Dictionary<string, ChannelState>();
        private readonly List<string> _channelOrder = new List<string>();
        private readonly List<PendingSend> _sends = new List<PendingSend>();
        private readonly Dictionary<uint, PendingRequest> _requests = new Dictionary<uint, PendingRequest>();
        private uint _lastRef;
        private bool _over;

        /// <summary>A line newer than every line told on its channel: once per line, in seq order per channel.</summary>
        public event Action<ChatLine> LineReceived;
        /// <summary>
        /// Lines of a channel older than the newest told there and not told before, oldest first (a History page,
        /// or recent lines that came after newer ones): put them above what is shown.
        /// </summary>
        public event Action<string, IReadOnlyList<ChatLine>> EarlierLines;

        internal ChatClient(IChatPort port, ChatOptions options)
        {
            _port = port;
            if (options == null) options = new ChatOptions();
            _keep = Math.Max(1, options.Keep);
            _timeoutMs = options.TimeoutMs;
        }

        /// <summary>True while a session of version 11 or later is open: the chat methods can be called.</summary>
        public bool Available
        {
            get
            {
                uint? v = _port.Version();
                return v.HasValue && v.Value >= ProtocolVersions.Chat && (_port.Features() & ProtocolVersions.FeatureChat) != 0;
            }
        }

        /// <summary>This session's principal (the ticket's sub), or null when unknown.</summary>
        public string Principal { get { return _port.Principal(); } }

        /// <summary>The channel of the zone this session is in (<c>zone:&lt;id&gt;</c>), or null before a Welcome.</summary>
        public string ZoneChannel { get { string z = _port.ZoneId(); return z == null ? null : ChatChannel.Zone(z); } }

        /// <summary>The channels this client keeps lines of, in the order first heard.</summary>
        public IReadOnlyList<string> Channels() { return _channelOrder.ToArray(); }

        /// <summary>The lines kept of <paramref name="channel"/>, oldest first (the newest <see cref="ChatOptions.Keep"/>).</summary>
        public IReadOnlyList<ChatLine> Lines(string channel)
        {
            ChannelState ch;
            return _channels.TryGetValue(channel, out ch) ? ch.Lines.ToArray() : new ChatLine[0];
        }

        /// <summary>
        /// Says <paramref name="body"/> on <paramref name="channel"/>; completes with the line once the channel hears it
        /// back, fails with a <see cref="ChatRefusedException"/> or a <see cref="ChatException"/>.
        /// </summary>
        public Task<ChatLine> Send(string channel, string body)
        {
            TaskCompletionSource<ChatLine> tcs = new TaskCompletionSource<ChatLine>(TaskCreationOptions.RunContinuationsAsynchronously);
            Exception refused = Check(() =>
            {
                CheckChannel(channel);
                if (string.IsNullOrEmpty(body)) throw new ChatException(ChatErrorKind.Invalid, "an empty line");
                if (Utf8Length(body) > ChatLimits.Body) throw new ChatException(ChatErrorKind.Invalid, "a line over " + ChatLimits.Body + " bytes");
            });
            if (refused != null)
            {
                tcs.SetException(refused);
                return tcs.Task;
            }
            ChannelState ch;
            PendingSend p = new PendingSend
            {
                Ref = NextRef(),
                Channel = channel,
                Body = body,
                AfterSeq = _channels.TryGetValue(channel, out ch) ? ch.Newest : 0,
                Task = tcs,
            };
            p.Timer = _port.Scheduler.SetTimeout(() =>
            {
                _sends.Remove(p);
                tcs.TrySetException(new ChatException(ChatErrorKind.Timeout, "no answer to the line on " + channel + " within " + _timeoutMs + " ms"));
            }, _timeoutMs);
            _sends.Add(p);
            Transmit(new Chat { Ref = p.Ref, Channel = channel, Body = body }, () => _sends.Remove(p), p.Timer, tcs.TrySetException);
            return tcs.Task;
        }

        /// <summary>Says <paramref name="body"/> to <paramref name="principal"/> directly: <see cref="Send"/> on <c>dm:&lt;principal&gt;</c>.</summary>
        public Task<ChatLine> Dm(string principal, string body) { return Send(ChatChannel.Dm(principal), body); }

        /// <summary>
        /// Reports lines of <paramref name="channel"/> (1 to 20 seqs) to the moderators; completes with the report's id.
        /// Fails with a <see cref="ChatRefusedException"/> NOT_FOUND when the channel no longer keeps one of them.
        /// </summary>
        public Task<string> Report(string channel, IEnumerable<long> seqs, string reason = "")
        {
            TaskCompletionSource<string> tcs = new TaskCompletionSource<string>(TaskCreationOptions.RunContinuationsAsynchronously);
            List<long> list = seqs == null ? new List<long>() : new List<long>(seqs);
            if (reason == null) reason = string.Empty;
            Exception refused = Check(() =>
            {
                CheckChannel(channel);
                if (list.Count == 0) throw new ChatException(ChatErrorKind.Invalid, "a report names no line");
                if (list.Count > ChatLimits.ReportSeqs) throw new ChatException(ChatErrorKind.Invalid, "a report names over " + ChatLimits.ReportSeqs + " lines");
                foreach (long s in list) if (s <= 0) throw new ChatException(ChatErrorKind.Invalid, "a seq that is no line's");
                if (Utf8Length(reason) > ChatLimits.Reason) throw new ChatException(ChatErrorKind.Invalid, "a reason over " + ChatLimits.Reason + " bytes");
            });
            if (refused != null)
            {
                tcs.SetException(refused);
                return tcs.Task;
            }
            uint reference = NextRef();
            PendingRequest req = new PendingRequest { IsReport = true, Report = tcs };
            Request(reference, req);
            Transmit(new ChatReport { Ref = reference, Channel = channel, Seqs = list, Reason = reason }, () => _requests.Remove(reference), req.Timer, tcs.TrySetException);
            return tcs.Task;
        }

        /// <summary>
        /// A page of <paramref name="channel"/>'s stored lines: the newest <paramref name="limit"/> (1 to 200) before seq
        /// <paramref name="before"/> (0: the newest), oldest first. They are kept and told like any line before the task
        /// completes.
        /// </summary>
        public Task<IReadOnlyList<ChatLine>> History(string channel, long before = 0, int limit = 50)
        {
            TaskCompletionSource<IReadOnlyList<ChatLine>> tcs = new TaskCompletionSource<IReadOnlyList<ChatLine>>(TaskCreationOptions.RunContinuationsAsynchronously);
            Exception refused = Check(() =>
            {
                CheckChannel(channel);
                if (before < 0) throw new ChatException(ChatErrorKind.Invalid, "before " + before);
                if (limit < 1 || limit > ChatLimits.HistoryLimit) throw new ChatException(ChatErrorKind.Invalid, "limit " + limit + " not in 1..=" + ChatLimits.HistoryLimit);
            });
            if (refused != null)
            {
                tcs.SetException(refused);
                return tcs.Task;
            }
            uint reference = NextRef();
            PendingRequest req = new PendingRequest { History = tcs };
            Request(reference, req);
            Transmit(new ChatHistory { Ref = reference, Channel = channel, Before = before, Limit = limit }, () => _requests.Remove(reference), req.Timer, tcs.TrySetException);
            return tcs.Task;
        }

        /// <summary>Checks that chat can be used now and the arguments: the failure, or null.</summary>
        private Exception Check(Action args)
        {
            try
            {
                if (_over) throw new ChatException(ChatErrorKind.Closed, "the connection is closed");
                uint? version = _port.Version();
                if (!version.HasValue) throw new ChatException(ChatErrorKind.NotOpen, "no session is open (connecting, reconnecting or moving)");
                if (version.Value < ProtocolVersions.Chat)
                    throw new ChatException(ChatErrorKind.Unsupported, "chat needs protocol version " + ProtocolVersions.Chat + "; this session speaks version " + version.Value + " (the host is older)");
                args();
                return null;
            }
            catch (ChatException e)
            {
                return e;
            }
        }

        /// <summary>A ref no pending message holds (1..=2^32 − 1, wrapping).</summary>
        private uint NextRef()
        {
            for (;;)
            {
                _lastRef = _lastRef == uint.MaxValue ? 1 : _lastRef + 1;
                uint r = _lastRef;
                if (!_requests.ContainsKey(r) && !_sends.Exists(s => s.Ref == r)) return r;
            }
        }

        private void Request(uint reference, PendingRequest req)
        {
            req.Timer = _port.Scheduler.SetTimeout(() =>
            {
                _requests.Remove(reference);
                req.Fail(new ChatException(ChatErrorKind.Timeout, "no answer to the " + (req.IsReport ? "report" : "history") + " request within " + _timeoutMs + " ms"));
            }, _timeoutMs);
            _requests[reference] = req;
        }

        /// <summary>Sends <paramref name="m"/>; an encoding failure undoes what was pending and fails the task.</summary>
        private void Transmit(ClientMessage m, Action undo, long timer, Func<Exception, bool> fail)
        {
            try
            {
                _port.Send(m);
            }
            catch (EncodeException e)
            {
                undo();
                _port.Scheduler.ClearTimeout(timer);
                fail(new ChatException(ChatErrorKind.Invalid, e.Message));
            }
        }

        internal void OnLines(ChatLines m)
        {
            List<ChatLine> lines = new List<ChatLine>(m.Lines.Count);
            foreach (ChatWireLine l in m.Lines)
                lines.Add(new ChatLine { Channel = m.Channel, Seq = l.Seq, Sender = l.Sender, SentAtMs = l.SentAtMs, Body = l.Body, History = m.History });
            // Stable: the host sends them ascending; a repeat of one seq keeps its first copy.
            lines = StableSortBySeq(lines);
            ChannelState ch;
            if (!_channels.TryGetValue(m.Channel, out ch))
            {
                ch = new ChannelState();
                _channels[m.Channel] = ch;
                _channelOrder.Add(m.Channel);
            }
            List<ChatLine> fresh = new List<ChatLine>();
            List<ChatLine> earlier = new List<ChatLine>();
            foreach (ChatLine line in lines)
            {
                if (line.Seq > ch.Newest)
                {
                    fresh.Add(line);
                    ch.Newest = line.Seq;
                    Insert(ch.Lines, line);
                }
                else if (ch.Lines.Count < _keep || line.Seq > ch.Lines[0].Seq)
                {
                    // Inside the kept window, where every line told is kept: one not there was never told. Older than
                    // a full window: it would not be kept, and it may have been told before.
                    if (Insert(ch.Lines, line)) earlier.Add(line);
                }
            }
            if (ch.Lines.Count > _keep) ch.Lines.RemoveRange(0, ch.Lines.Count - _keep);
            if (earlier.Count > 0)
            {
                Action<string, IReadOnlyList<ChatLine>> he = EarlierLines;
                if (he != null) he(m.Channel, earlier);
            }
            Action<ChatLine> hl = LineReceived;
            if (hl != null) foreach (ChatLine line in fresh) hl(line);
            PendingRequest req;
            if (m.Ref != 0 && _requests.TryGetValue(m.Ref, out req) && !req.IsReport)
            {
                _requests.Remove(m.Ref);
                _port.Scheduler.ClearTimeout(req.Timer);
                req.History.TrySetResult(lines);
            }
            foreach (ChatLine line in lines) MatchSend(line);
        }

        /// <summary>Completes the oldest pending send <paramref name="line"/> is the echo of, if any.</summary>
        private void MatchSend(ChatLine line)
        {
            string me = _port.Principal();
            if (me != null && line.Sender != me) return;
            PendingSend found = _sends.Find(p => p.Channel == line.Channel && line.Seq > p.AfterSeq && p.Body == line.Body)
                ?? _sends.Find(p => p.Channel == line.Channel && line.Seq > p.AfterSeq && p.Body.Trim() == line.Body.Trim());
            if (found == null) return;
            _sends.Remove(found);
            _port.Scheduler.ClearTimeout(found.Timer);
            found.Task.TrySetResult(line);
        }

        internal void OnReply(ChatReply m)
        {
            PendingSend send = _sends.Find(p => p.Ref == m.Ref);
            if (send != null)
            {
                // A line said is answered by its echo; only a refusal comes as a reply.
                if (m.Code == ChatReplyCode.Ok) return;
                _sends.Remove(send);
                _port.Scheduler.ClearTimeout(send.Timer);
                send.Task.TrySetException(new ChatRefusedException(m));
                return;
            }
            PendingRequest req;
            if (!_requests.TryGetValue(m.Ref, out req)) return;
            if (m.Code == ChatReplyCode.Ok && !req.IsReport) return;
            _requests.Remove(m.Ref);
            _port.Scheduler.ClearTimeout(req.Timer);
            if (m.Code == ChatReplyCode.Ok) req.Report.TrySetResult(m.Text);
            else req.Fail(new ChatRefusedException(m));
        }

        /// <summary>The session ended: its answers will not come (sends wait on: the next attach's history may hold them).</summary>
        internal void OnEnded()
        {
            List<PendingRequest> all = new List<PendingRequest>(_requests.Values);
            _requests.Clear();
            foreach (PendingRequest req in all)
            {
                _port.Scheduler.ClearTimeout(req.Timer);
                req.Fail(new ChatException(ChatErrorKind.Disconnected, "the session ended before the " + (req.IsReport ? "report" : "history") + " request was answered"));
            }
        }

        internal void OnClosed()
        {
            _over = true;
            OnEnded();
            List<PendingSend> all = new List<PendingSend>(_sends);
            _sends.Clear();
            foreach (PendingSend p in all)
            {
                _port.Scheduler.ClearTimeout(p.Timer);
                p.Task.TrySetException(new ChatException(ChatErrorKind.Closed, "the connection closed before the line was heard"));
            }
        }

        private static List<ChatLine> StableSortBySeq(List<ChatLine> lines)
        {
            List<ChatLine> sorted = new List<ChatLine>(lines.Count);
            foreach (ChatLine l in lines)
            {
                int i = sorted.Count;
                while (i > 0 && sorted[i - 1].Seq > l.Seq) i--;
                sorted.Insert(i, l);
            }
            return sorted;
        }

        /// <summary>Inserts <paramref name="line"/> into <paramref name="lines"/> (ascending by seq); false when that seq is there already.</summary>
        private static bool Insert(List<ChatLine> lines, ChatLine line)
        {
            int lo = 0, hi = lines.Count;
            while (lo < hi)
            {
                int mid = (lo + hi) >> 1;
                if (lines[mid].Seq < line.Seq) lo = mid + 1;
                else hi = mid;
            }
            if (lo < lines.Count && lines[lo].Seq == line.Seq) return false;
            lines.Insert(lo, line);
            return true;
        }

        private static int Utf8Length(string s)
        {
            try
            {
                return new UTF8Encoding(false, true).GetByteCount(s);
            }
            catch (ArgumentException)
            {
                throw new ChatException(ChatErrorKind.Invalid, "text with a lone surrogate");
            }
        }

        private static void CheckChannel(string channel)
        {
            if (string.IsNullOrEmpty(channel)) throw new ChatException(ChatErrorKind.Invalid, "an empty channel");
            if (Utf8Length(channel) > ChatLimits.Channel) throw new ChatException(ChatErrorKind.Invalid, "a channel over " + ChatLimits.Channel + " bytes");
        }
    }
}
