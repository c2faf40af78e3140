// ZoneConnection: one client's session with a zone over a WebSocket.
//
// It performs the Hello/Welcome handshake (offering the versions this SDK speaks and checking the host's
// pick; following Redirects to the zone's owner: at most three per attempt, the same Hello at every hop,
// only to ws:// or wss:// URLs, every attempt starting at the entry URL), keeps the known set (Mirror) and
// the server clock estimate (ServerClock), pings once a second, stamps inputs with seq and view tick,
// counts bytes and messages, and reconnects: inside the grace window it resumes the same player with the
// reconnect token from Welcome; after it, or when the host refuses the token, it asks the game for a fresh
// ticket and joins as a new player. A ticket the host refuses on a resume (expired, replayed, or signed
// with a key it no longer has) is replaced by a fresh one too; a freshly fetched ticket refused for its
// signature is not retried, since another from the same source would fail the same way. Attempts back off
// exponentially with jitter and are bounded. A Kick ZONE_MOVED or HOST_FENCED resumes at once. When the
// entry host cannot be reached (nothing answers, or it is shutting down), the attempt goes on at once
// through the entry URLs the last version 7 Welcome listed, in order; the next attempt starts at the
// entry URL again (§5.3.1).
//
// Content versions (§4.1.2): CONTENT_OUTDATED stops the connection for good with ReloadRequired.
// Characters (§5.3): CHARACTER_MOVED stops it for good with MovedElsewhere; CHARACTER_ELSEWHERE is
// retried with backoff. Transfers (§5.3.2): a Transfer is followed on a new connection with the
// credential while the old world stays drawn; the new zone's Welcome and BASELINE are told together.
//
// This is the TypeScript SDK's ZoneConnection over WebSocket (WebTransport is not part of the C# SDK).
//
// Threading: a game calls Poll() on its main thread every frame. Poll delivers what the socket received
// (it arrives on a background thread and waits in a bounded queue) and runs the connection's due timers;
// every event below is raised from inside Poll, on that thread. Nothing here is thread-safe otherwise:
// call every method from the thread that polls.
using System;
using System.Collections.Generic;
using System.Threading.Tasks;

namespace Zonekeep
{
    /// <summary>Lifecycle of a <see cref="ZoneConnection"/>.</summary>
    public enum ConnectionState
    {
        /// <summary>Before <see cref="ZoneConnection.Connect"/>.</summary>
        Idle,
        /// <summary>The first attempt is under way.</summary>
        Connecting,
        /// <summary>The socket is open and the Hello sent.</summary>
        Handshaking,
        /// <summary>Welcomed: the session runs.</summary>
        Open,
        /// <summary>Between attempts, or a later attempt under way.</summary>
        Reconnecting,
        /// <summary>Moving to another zone (§5.3.2): the old world stays on screen; not a disconnect.</summary>
        Transferring,
        /// <summary>Ended for good.</summary>
        Closed,
    }

    /// <summary>Why a Redirect was not followed.</summary>
    public enum RedirectErrorKind
    {
        /// <summary>A Redirect after the three an attempt may follow.</summary>
        TooMany,
        /// <summary>A URL that is not ws:// or wss://.</summary>
        Scheme,
    }

    /// <summary>
    /// A Redirect the connection would not follow (§5.3.1): TooMany (the attempt failed; the next starts at the
    /// entry URL again) or Scheme (the connection stops). The <see cref="CloseInfo.Error"/> of the attempt.
    /// </summary>
    public sealed class RedirectException : Exception
    {
        /// <summary>Why the Redirect was refused.</summary>
        public RedirectErrorKind Kind { get; }
        /// <summary>The URL it named.</summary>
        public string Url { get; }

        /// <summary>An error for a refused Redirect to <paramref name="url"/>.</summary>
        public RedirectException(RedirectErrorKind kind, string url)
            : base(kind == RedirectErrorKind.TooMany ? "too many redirects: another after " + Limits.Redirects : "redirected to a URL that is not ws:// or wss://: " + url)
        {
            Kind = kind;
            Url = url;
        }
    }

    /// <summary>What went wrong with a Transfer.</summary>
    public enum TransferErrorKind
    {
        /// <summary>Its URL is not ws:// or wss:// (the Transfer is ignored).</summary>
        Url,
        /// <summary>An attempt at the new zone failed.</summary>
        Attempt,
        /// <summary>The credential was already used and no Welcome of the new zone gave a token.</summary>
        Replayed,
        /// <summary>The credential's lifetime ran out.</summary>
        Expired,
    }

    /// <summary>A Transfer the connection could not follow (yet). Without <see cref="WillRetry"/> the connection closes next.</summary>
    public sealed class TransferException : Exception
    {
        /// <summary>What went wrong.</summary>
        public TransferErrorKind Kind { get; }
        /// <summary>The Kick of the failed attempt, if the host sent one.</summary>
        public Kick Kick { get; }
        /// <summary>Whether the move goes on.</summary>
        public bool WillRetry { get; }

        /// <summary>An error of <paramref name="kind"/>.</summary>
        public TransferException(TransferErrorKind kind, string message, Kick kick, bool willRetry) : base(message)
        {
            Kind = kind;
            Kick = kick;
            WillRetry = willRetry;
        }
    }

    /// <summary>The host refused this client's content version (CONTENT_OUTDATED, §4.1.2).</summary>
    public sealed class ContentOutdatedException : Exception
    {
        /// <summary>The Kick, or null when only its close code (4027) arrived.</summary>
        public Kick Kick { get; }

        /// <summary>An error for <paramref name="kick"/>.</summary>
        public ContentOutdatedException(Kick kick) : base(ZoneConnection.ReloadText(kick)) { Kick = kick; }
    }

    /// <summary>The player's character was taken into another zone (CHARACTER_MOVED, §5.3).</summary>
    public sealed class CharacterMovedException : Exception
    {
        /// <summary>The Kick, or null when only its close code (4029) arrived.</summary>
        public Kick Kick { get; }

        /// <summary>An error for <paramref name="kick"/>.</summary>
        public CharacterMovedException(Kick kick) : base(ZoneConnection.MovedElsewhereText(kick)) { Kick = kick; }
    }

    /// <summary>The connection ended before its first Welcome.</summary>
    public sealed class ConnectionClosedException : Exception
    {
        /// <summary>How it ended.</summary>
        public CloseInfo Info { get; }

        /// <summary>An error for <paramref name="info"/>.</summary>
        public ConnectionClosedException(CloseInfo info) : base("connection closed before Welcome: " + info.Reason) { Info = info; }
    }

    /// <summary>Why the connection (or one socket of it) closed.</summary>
    public sealed class CloseInfo
    {
        /// <summary>WebSocket close code (1006 when unknown).</summary>
        public int Code;
        /// <summary>Close reason, or the Kick's, or the error's message.</summary>
        public string Reason = string.Empty;
        /// <summary>The Kick the host sent before closing, if any.</summary>
        public Kick Kick;
        /// <summary>A local failure (decode error, handshake timeout…) that ended the socket, if any.</summary>
        public Exception Error;
        /// <summary>True if another attempt is scheduled.</summary>
        public bool WillReconnect;
        /// <summary>True when the host refused this client's content version: the game must be updated.</summary>
        public bool Reload;
        /// <summary>True when the player's character now plays elsewhere: the connection stopped for good.</summary>
        public bool MovedElsewhere;
        /// <summary>Delay before the next attempt, in ms (0 when not reconnecting).</summary>
        public double RetryInMs;
    }

    /// <summary>Extra facts delivered with a Delta.</summary>
    public sealed class DeltaInfo
    {
        /// <summary>The known set after the Delta.</summary>
        public Mirror Mirror;
        /// <summary>What the Delta changed.</summary>
        public MirrorChanges Changes;
        /// <summary>Client time of arrival (the connection's scheduler clock).</summary>
        public double RecvMs;
    }

    /// <summary>What a Transfer says: the player is being moved from one zone to another (§5.3.2).</summary>
    public sealed class TransferInfo
    {
        /// <summary>The zone the player leaves.</summary>
        public string From;
        /// <summary>The zone the player now belongs to.</summary>
        public string To;
        /// <summary>The new zone's WebSocket URL at its owner.</summary>
        public string Url;
    }

    /// <summary>What a Welcome event carries besides the Welcome.</summary>
    public sealed class WelcomeInfo
    {
        /// <summary>True when the reconnect token resumed the same player.</summary>
        public bool Resumed;
        /// <summary>The move this Welcome completes, or null; its BASELINE Delta follows in the same Poll.</summary>
        public TransferInfo Transfer;
    }

    /// <summary>What the ReloadRequired and MovedElsewhere events carry.</summary>
    public sealed class FinalNotice
    {
        /// <summary>What to tell the player (the SDK's message plus the host's reason).</summary>
        public string Message;
        /// <summary>The Kick, or null when only its close code arrived.</summary>
        public Kick Kick;
    }

    /// <summary>Byte and message counters for HUDs.</summary>
    public sealed class ConnectionStats
    {
        /// <summary>Bytes received (message payloads).</summary>
        public long BytesIn;
        /// <summary>Bytes sent.</summary>
        public long BytesOut;
        /// <summary>Messages received.</summary>
        public long MessagesIn;
        /// <summary>Messages sent.</summary>
        public long MessagesOut;
        /// <summary>Bytes received over the last second.</summary>
        public double BytesInPerSec;
        /// <summary>Bytes sent over the last second.</summary>
        public double BytesOutPerSec;
        /// <summary>Redirects followed during handshakes.</summary>
        public int Redirects;
        /// <summary>Welcomes reached through a listed entry URL, the entry URL being unreachable.</summary>
        public int EntryFallbacks;
        /// <summary>Welcomes that resumed the same player.</summary>
        public int Resumes;
        /// <summary>Welcomes that started a new player.</summary>
        public int FreshJoins;
        /// <summary>Transfers completed.</summary>
        public int Transfers;
        /// <summary>Resyncs sent.</summary>
        public int Resyncs;
        /// <summary>Deltas skipped while a BASELINE was awaited.</summary>
        public int DeltasSkipped;
        /// <summary>Inputs the host refused.</summary>
        public int InputsRefused;

        internal ConnectionStats Copy() { return (ConnectionStats)MemberwiseClone(); }
    }

    /// <summary>Options of a <see cref="ZoneConnection"/>.</summary>
    public sealed class ZoneConnectionOptions
    {
        /// <summary>
        /// WebSocket URL of the zone, e.g. <c>ws://127.0.0.1:7350/zones/arena-1</c>: the entry URL. Every reconnect
        /// starts here again, never at a URL a Redirect named.
        /// </summary>
        public string Url;
        /// <summary>
        /// Gets a fresh ticket from the game's backend: called for the first join, after the grace window, and
        /// when the host refuses a resume for a reason a new ticket fixes. It may complete later (an HTTP call);
        /// the connection waits for it without blocking the game's thread.
        /// </summary>
        public Func<Task<string>> Ticket;
        /// <summary>Opens sockets (default: <see cref="WebSocketTransport.Connect"/>).</summary>
        public Func<string, ISocket> Socket;
        /// <summary>Time and timers (default: a <see cref="GameLoopScheduler"/>, run by <see cref="ZoneConnection.Poll"/>).</summary>
        public IScheduler Scheduler;
        /// <summary>Protocol versions offered (default: <see cref="ProtocolVersions.Supported"/>).</summary>
        public uint[] Versions;
        /// <summary>The game content version this client was built for, sent in Hello (default empty = none).</summary>
        public string ContentVersion = string.Empty;
        /// <summary>Ping period in ms (default 1000).</summary>
        public double PingIntervalMs = 1000;
        /// <summary>Give up on a handshake after this many ms without Welcome, Redirects included (default 10000).</summary>
        public double HandshakeTimeoutMs = 10000;
        /// <summary>Reconnect tuning.</summary>
        public ReconnectOptions Reconnect = new ReconnectOptions();
        /// <summary>Server clock tuning.</summary>
        public ClockOptions Clock;
    }

    /// <summary>One client session with a zone, carried over reconnects.</summary>
    public sealed class ZoneConnection
    {
        /// <summary>What the connection tells the game when the host refuses its content version.</summary>
        public const string ReloadMessage = "The game was updated: update or restart it to play the current version.";
        /// <summary>What the connection tells the game when the player's character went into another zone.</summary>
        public const string MovedElsewhereMessage = "Your character is now playing in another game or on another device.";

        /// <summary>Unacknowledged inputs kept to send again after a resume: under the host's default input burst of 30 (§4.6).</summary>
        private const int UnackedKept = 24;

        private sealed class TransferState
        {
            public TransferInfo Info;
            public string Credential;
            public double Deadline;
            public ISocket Origin;
            public bool Direct;
            public byte[] Token;
            public Welcome HeldWelcome;
            public WelcomeInfo HeldInfo;
            public int Failures;
        }

        private sealed class RateMeter
        {
            private readonly double[] _buckets = new double[10];
            private long _bucketStart;
            private int _head;

            public void Add(double nowMs, double n)
            {
                Roll(nowMs);
                _buckets[_head] += n;
            }

            public double PerSecond(double nowMs)
            {
                Roll(nowMs);
                double sum = 0;
                foreach (double b in _buckets) sum += b;
                return sum;
            }

            private void Roll(double nowMs)
            {
                long bucket = (long)Math.Floor(nowMs / 100);
                long steps = Math.Min(10, bucket - _bucketStart);
                if (steps <= 0) return;
                for (int i = 0; i < steps; i++)
                {
                    _head = (_head + 1) % 10;
                    _buckets[_head] = 0;
                }
                _bucketStart = bucket;
            }
        }

        /// <summary>The server clock estimate (kept across reconnects, restarted on each Welcome).</summary>
        public readonly ServerClock Clock;
        private readonly ZoneConnectionOptions _opts;
        private readonly IScheduler _sched;
        private readonly uint[] _versions;
        private readonly Func<string, ISocket> _socketFactory;
        private ISocket _socket;
        private int _gen;
        private ConnectionState _st = ConnectionState.Idle;
        private Mirror _mirror;
        private Welcome _welcome;
        private string _ticketValue;
        private byte[] _token = Empty.Bytes;
        private uint? _playerId;
        private bool _resumeMode;
        // A host refused this session's Hello with resume_from as a protocol error (a fleet part way through an
        // upgrade, §4.1.1): resume without it until a Welcome lands.
        private bool _resumeFromRefused;
        private int _attempts;
        private double? _disconnectedAt;
        // The close of a session the host moved (ZONE_MOVED or HOST_FENCED), held back while the first attempt at
        // the new owner is under way: told only if that attempt does not land.
        private CloseInfo _untoldMove;
        private bool _forceFresh;
        private bool _renewTicket;
        private bool _ticketReused;
        private uint _seq;
        private uint _lastAck;
        private uint? _controlled;
        private long _lastDeltaTick;
        private Kick _lastKick;
        private Exception _localError;
        private readonly HashSet<long> _timers = new HashSet<long>();
        private long _handshakeTimer = -1;
        private Func<long> _viewTickSource;
        private readonly RateMeter _inMeter = new RateMeter();
        private readonly RateMeter _outMeter = new RateMeter();
        private readonly ConnectionStats _counters = new ConnectionStats();
        private bool _welcomed;
        private TransferState _transfer;
        private string _zoneId;
        private Hello _hello;
        private int _hops;
        private List<string> _entries = new List<string>();
        private int _entryIndex;
        private bool _awaitingBaseline;
        private TaskCompletionSource<Welcome> _firstWelcome;
        // Inputs sent that no Delta has acknowledged yet, oldest first (at most UnackedKept). A resume sends them
        // again (§4.2): a zone handed over in a drain keeps only the inputs it consumed.
        private readonly List<DatagramInput> _sentUnacked = new List<DatagramInput>();
        private readonly Writer _out = new Writer(256);

        /// <summary>A Welcome; see <see cref="WelcomeInfo"/>.</summary>
        public event Action<Welcome, WelcomeInfo> Welcomed;
        /// <summary>A Delta, after it was applied to the known set.</summary>
        public event Action<Delta, DeltaInfo> DeltaApplied;
        /// <summary>One zone event from a Delta (after the Delta's DeltaApplied), with the Delta's tick.</summary>
        public event Action<ZoneEvent, long> ZoneEventReceived;
        /// <summary>A Kick. A Closed follows, except after ZONE_MOVED or HOST_FENCED when the resume lands at once.</summary>
        public event Action<Kick> Kicked;
        /// <summary>The socket closed; <see cref="CloseInfo.WillReconnect"/> says whether the connection carries on.</summary>
        public event Action<CloseInfo> Closed;
        /// <summary>The zone refused one of this client's inputs (§5.6).</summary>
        public event Action<InputRefused> InputRefused;
        /// <summary>The host moved the player to another zone (§5.3.2): keep drawing the world you have.</summary>
        public event Action<TransferInfo> TransferStarted;
        /// <summary>A Transfer could not be followed, or an attempt at the new zone failed.</summary>
        public event Action<TransferException> TransferFailed;
        /// <summary>The host refused this client's content version: stopped for good (a Closed with Reload follows).</summary>
        public event Action<FinalNotice> ReloadRequired;
        /// <summary>The player's character went into another zone: stopped for good (a Closed with MovedElsewhere follows).</summary>
        public event Action<FinalNotice> MovedElsewhere;
        /// <summary>The handshake is being redirected (for logs and HUDs).</summary>
        public event Action<Redirect> Redirected;

        /// <summary>A connection that does nothing until <see cref="Connect"/>.</summary>
        public ZoneConnection(ZoneConnectionOptions options)
        {
            if (options == null || options.Url == null || options.Ticket == null) throw new ArgumentException("Url and Ticket are required");
            _opts = options;
            _sched = options.Scheduler ?? new GameLoopScheduler();
            _versions = options.Versions ?? (uint[])ProtocolVersions.Supported.Clone();
            _socketFactory = options.Socket ?? WebSocketTransport.Connect;
            if (_opts.Reconnect == null) _opts.Reconnect = new ReconnectOptions();
            Clock = new ServerClock(options.Clock);
        }

        /// <summary>The connection's clock (ms): what <see cref="Replica.Frame"/> and the predictor should be given.</summary>
        public double Now { get { return _sched.Now(); } }

        /// <summary>The scheduler.</summary>
        public IScheduler Scheduler { get { return _sched; } }

        /// <summary>Current lifecycle state.</summary>
        public ConnectionState State { get { return _st; } }

        /// <summary>The known set (null before the first Welcome).</summary>
        public Mirror Mirror { get { return _mirror; } }

        /// <summary>The last Welcome (null before the first).</summary>
        public Welcome Welcome { get { return _welcome; } }

        /// <summary>The entity this player controls, from the last Delta with CONTROL (null = none).</summary>
        public uint? ControlledId { get { return _controlled; } }

        /// <summary>The last input seq the zone acknowledged.</summary>
        public uint Ack { get { return _lastAck; } }

        /// <summary>The tick of the last Delta received.</summary>
        public long LatestTick { get { return _lastDeltaTick; } }

        /// <summary>Where else the zone may be entered, as the last version 7 Welcome or Entries listed them.</summary>
        public IReadOnlyList<string> ListedEntries { get { return _entries.AsReadOnly(); } }

        /// <summary>Byte, message, redirect, join and sync counters.</summary>
        public ConnectionStats Stats
        {
            get
            {
                double now = _sched.Now();
                ConnectionStats s = _counters.Copy();
                s.BytesInPerSec = _inMeter.PerSecond(now);
                s.BytesOutPerSec = _outMeter.PerSecond(now);
                return s;
            }
        }

        /// <summary>Sets what an input's view tick carries (a Replica's render tick); default: the latest Delta's tick.</summary>
        public void SetViewTickSource(Func<long> fn) { _viewTickSource = fn; }

        /// <summary>
        /// Delivers what the socket received and runs due timers; every event is raised from here. Call it once
        /// per frame on the game's main thread.
        /// </summary>
        public void Poll()
        {
            ISocket s = _socket;
            if (s != null) s.Pump();
            TransferState t = _transfer;
            if (t != null && t.Origin != null) t.Origin.Pump();
            IPolledScheduler polled = _sched as IPolledScheduler;
            if (polled != null) polled.RunDue();
        }

        /// <summary>
        /// Starts the session; the task completes with the first Welcome, or fails if the session ends before one
        /// (<see cref="ContentOutdatedException"/>, <see cref="CharacterMovedException"/> or
        /// <see cref="ConnectionClosedException"/>). Its continuations run asynchronously (never inside Poll);
        /// a game without a synchronization context uses the <see cref="Welcomed"/> event instead of awaiting it.
        /// </summary>
        public Task<Welcome> Connect()
        {
            if (_st != ConnectionState.Idle) throw new InvalidOperationException("Connect() in state " + _st);
            _firstWelcome = new TaskCompletionSource<Welcome>(TaskCreationOptions.RunContinuationsAsynchronously);
            Attempt();
            return _firstWelcome.Task;
        }

        /// <summary>Ends the session for good (no reconnect).</summary>
        public void Close(string reason = "client closed")
        {
            if (_st == ConnectionState.Closed) return;
            ISocket sock = _socket;
            Teardown();
            EndTransfer("client closed");
            _st = ConnectionState.Closed;
            if (sock != null)
            {
                try
                {
                    sock.Close(1000, reason);
                }
                catch (Exception)
                {
                    // Closing an already-failed socket is not an error worth reporting.
                }
            }
            Finish(new CloseInfo { Code = 1000, Reason = reason });
        }

        /// <summary>
        /// Sends an input stamped with the next seq and the view tick; returns the seq, or null when the session is
        /// not open (the input was not sent and must not be predicted). Throws an <see cref="EncodeException"/>
        /// for a payload over 4,096 bytes; no seq is used then.
        /// </summary>
        public uint? SendInput(byte[] payload)
        {
            if (_st != ConnectionState.Open) return null;
            if (_seq >= uint.MaxValue) throw new InvalidOperationException("input seq space exhausted");
            uint seq = _seq + 1;
            long viewTick = Math.Max(0, _viewTickSource != null ? _viewTickSource() : _lastDeltaTick);
            Send(new InputMessage { Seq = seq, ViewTick = viewTick, Payload = payload });
            KeepUnacked(new DatagramInput { Seq = seq, ViewTick = viewTick, Payload = payload });
            _seq = seq;
            return seq;
        }

        private void KeepUnacked(DatagramInput input)
        {
            _sentUnacked.Add(input);
            while (_sentUnacked.Count > UnackedKept) _sentUnacked.RemoveAt(0);
        }

        /// <summary>After a resume: the inputs no Delta acknowledged, oldest first; the list is emptied.</summary>
        private List<DatagramInput> UnackedToResend()
        {
            SortedDictionary<uint, DatagramInput> bySeq = new SortedDictionary<uint, DatagramInput>();
            foreach (DatagramInput i in _sentUnacked) if (i.Seq > _lastAck && !bySeq.ContainsKey(i.Seq)) bySeq[i.Seq] = i;
            _sentUnacked.Clear();
            List<DatagramInput> all = new List<DatagramInput>(bySeq.Values);
            return all.Count > UnackedKept ? all.GetRange(all.Count - UnackedKept, UnackedKept) : all;
        }

        private void Send(ClientMessage m)
        {
            _out.Reset();
            MessageCodec.EncodeClient(m, _out);
            ISocket sock = _socket;
            if (sock == null) return;
            byte[] bytes = _out.ToArray();
            sock.Send(bytes);
            _counters.BytesOut += bytes.Length;
            _counters.MessagesOut += 1;
            _outMeter.Add(_sched.Now(), bytes.Length);
        }

        private long Later(Action fn, double ms)
        {
            long h = 0;
            h = _sched.SetTimeout(() =>
            {
                _timers.Remove(h);
                fn();
            }, ms);
            _timers.Add(h);
            return h;
        }

        private void Cancel(long h)
        {
            if (h < 0) return;
            _sched.ClearTimeout(h);
            _timers.Remove(h);
        }

        private static void Detach(ISocket sock)
        {
            sock.OnOpen = null;
            sock.OnMessage = null;
            sock.OnClose = null;
        }

        private void Teardown()
        {
            _gen += 1;
            foreach (long h in _timers) _sched.ClearTimeout(h);
            _timers.Clear();
            _handshakeTimer = -1;
            _welcomed = false;
            ISocket sock = _socket;
            _socket = null;
            if (sock != null) Detach(sock);
        }

        private void Attempt()
        {
            int gen = ++_gen;
            TransferState transfer = _transfer;
            if (transfer != null)
            {
                // §5.3.2: a fresh Hello with the credential (the new zone's token once it gave one).
                _resumeMode = transfer.Token != null;
                _ticketReused = transfer.Failures > 0;
                StartAttempt(gen, transfer.Credential, transfer.Token ?? Empty.Bytes, null);
                return;
            }
            _st = _welcome == null && _attempts == 0 ? ConnectionState.Connecting : ConnectionState.Reconnecting;
            double grace = _opts.Reconnect.GraceMs ?? (_welcome != null ? _welcome.ReconnectGraceMs : 30000);
            bool inGrace = _disconnectedAt.HasValue && _sched.Now() - _disconnectedAt.Value < grace;
            _resumeMode = _token.Length > 0 && inGrace && !_forceFresh;
            // A Kick or error of an earlier attempt says nothing about this one.
            _lastKick = null;
            _localError = null;
            if (!_resumeMode || _ticketValue == null || _renewTicket)
            {
                Task<string> task;
                try
                {
                    task = _opts.Ticket();
                    if (task == null) throw new InvalidOperationException("Ticket() returned no task");
                }
                catch (Exception e)
                {
                    OnSocketGone(gen, 1006, "ticket() failed", e);
                    return;
                }
                AwaitTicket(gen, task);
            }
            else
            {
                _ticketReused = true;
                Continue(gen, _ticketValue);
            }
        }

        /// <summary>Waits for the ticket without blocking: checked on the scheduler's timers until it completes.</summary>
        private void AwaitTicket(int gen, Task<string> task)
        {
            if (gen != _gen) return; // closed while waiting for the ticket
            if (!task.IsCompleted)
            {
                Later(() => AwaitTicket(gen, task), 5);
                return;
            }
            if (task.IsFaulted || task.IsCanceled || task.Result == null)
            {
                Exception e = task.IsFaulted ? task.Exception.GetBaseException() : new InvalidOperationException("ticket() gave no ticket");
                OnSocketGone(gen, 1006, "ticket() failed", e);
                return;
            }
            _ticketValue = task.Result;
            _renewTicket = false;
            _ticketReused = false;
            Continue(gen, task.Result);
        }

        private void Continue(int gen, string ticket)
        {
            StartAttempt(gen, ticket, _resumeMode ? _token : Empty.Bytes, _resumeMode ? ResumeFromValue() : null);
        }

        /// <summary>Sends this attempt's Hello to where it starts (the entry URL, or a Transfer's URL).</summary>
        private void StartAttempt(int gen, string ticket, byte[] reconnectToken, ResumeFrom resumeFrom)
        {
            _hello = new Hello
            {
                Versions = _versions,
                Ticket = ticket,
                ReconnectToken = reconnectToken,
                ContentVersion = _opts.ContentVersion ?? string.Empty,
                ResumeFrom = resumeFrom,
            };
            _hops = 0;
            _lastKick = null;
            _localError = null;
            StartHandshakeTimer(gen);
            // Every attempt starts at the entry URL: the zone's owner may have changed since the last.
            OpenSocket(gen, EntryUrl());
        }

        /// <summary>
        /// The entry URL, then each entry URL the last Welcome listed that differs from it; after a Transfer they
        /// name its zone, and its first attempt starts at the Transfer's URL.
        /// </summary>
        private List<string> EntryCandidates()
        {
            string zone = _zoneId;
            string entry = zone == null ? _opts.Url : WithZone(_opts.Url, zone);
            List<string> all = new List<string> { entry };
            foreach (string e in _entries)
            {
                string u = zone == null ? e : WithZone(e, zone);
                if (u != entry) all.Add(u);
            }
            TransferState t = _transfer;
            if (t == null || !t.Direct) return all;
            List<string> first = new List<string> { t.Info.Url };
            foreach (string u in all) if (u != t.Info.Url) first.Add(u);
            return first;
        }

        private string EntryUrl()
        {
            List<string> c = EntryCandidates();
            return _entryIndex < c.Count ? c[_entryIndex] : _opts.Url;
        }

        /// <summary><paramref name="url"/> naming <paramref name="zone"/> in its <c>/zones/{zone}</c> path (unchanged otherwise).</summary>
        internal static string WithZone(string url, string zone)
        {
            int scheme = url.IndexOf("://", StringComparison.Ordinal);
            if (scheme < 0) return url;
            int pathStart = url.IndexOfAny(new[] { '/', '?', '#' }, scheme + 3);
            if (pathStart < 0 || url[pathStart] != '/') return url;
            int pathEnd = url.IndexOfAny(new[] { '?', '#' }, pathStart);
            if (pathEnd < 0) pathEnd = url.Length;
            string path = url.Substring(pathStart, pathEnd - pathStart);
            const string prefix = "/zones/";
            if (!path.StartsWith(prefix, StringComparison.Ordinal) || path.Length == prefix.Length || path.IndexOf('/', prefix.Length) >= 0) return url;
            return url.Substring(0, pathStart) + prefix + Uri.EscapeDataString(zone) + url.Substring(pathEnd);
        }

        private void StartHandshakeTimer(int gen)
        {
            Cancel(_handshakeTimer);
            _handshakeTimer = Later(() => Fail(gen, new TimeoutException("handshake timeout: no Welcome")), _opts.HandshakeTimeoutMs);
        }

        /// <summary>Opens a socket to <paramref name="url"/> that sends this attempt's Hello.</summary>
        private void OpenSocket(int gen, string url)
        {
            ISocket sock;
            try
            {
                sock = _socketFactory(url);
            }
            catch (Exception e)
            {
                OnSocketGone(gen, 1006, "socket factory failed", e);
                return;
            }
            _socket = sock;
            sock.OnOpen = () =>
            {
                if (gen != _gen || _hello == null) return;
                _st = ConnectionState.Handshaking;
                Send(_hello);
            };
            sock.OnMessage = (data, text) =>
            {
                if (gen != _gen) return;
                try
                {
                    OnMessage(data, text, gen);
                }
                catch (Exception e)
                {
                    // A message we cannot decode means the two sides disagree: end this socket.
                    Fail(gen, e);
                }
            };
            sock.OnClose = (code, reason) => OnSocketGone(gen, code, reason ?? string.Empty, null);
        }

        /// <summary>Follows a Redirect (§5.3.1): closes this socket quietly and sends the same Hello to its URL.</summary>
        private void Follow(int gen, Redirect r)
        {
            if (_hops >= Limits.Redirects) throw new RedirectException(RedirectErrorKind.TooMany, r.Url);
            string url = MessageCodec.WebSocketTarget(r.Url);
            if (url == null) throw new RedirectException(RedirectErrorKind.Scheme, r.Url);
            _hops += 1;
            _counters.Redirects += 1;
            ISocket old = _socket;
            _socket = null;
            if (old != null)
            {
                // Not a lost connection: this socket's close must not reach OnSocketGone.
                Detach(old);
                try
                {
                    old.Close(1000, "redirected");
                }
                catch (Exception)
                {
                    // The host closes after a Redirect anyway.
                }
            }
            Action<Redirect> h = Redirected;
            if (h != null) h(r);
            if (gen != _gen) return; // a handler closed the connection
            OpenSocket(gen, url);
        }

        /// <summary>Ends the current socket because of a local error.</summary>
        private void Fail(int gen, Exception error)
        {
            if (gen != _gen) return;
            ISocket sock = _socket;
            _localError = error;
            try
            {
                string m = error.Message ?? string.Empty;
                if (sock != null) sock.Close(1000, m.Length > 120 ? m.Substring(0, 120) : m);
            }
            catch (Exception)
            {
                // The socket may already be gone; the outcome is the same.
            }
            OnSocketGone(gen, 1006, error.Message, error);
        }

        private static bool IsBaseline(byte[] bytes)
        {
            try
            {
                Reader r = new Reader(bytes);
                r.U8();
                r.VarintU64();
                r.VarintU32();
                return (r.U8() & 1) != 0;
            }
            catch (ProtocolException)
            {
                return false;
            }
        }

        private void OnMessage(byte[] bytes, bool text, int gen)
        {
            if (text) throw new ProtocolException(DecodeErrorKind.Invalid, "text frame from the server");
            double now = _sched.Now();
            _counters.BytesIn += bytes.Length;
            _counters.MessagesIn += 1;
            _inMeter.Add(now, bytes.Length);
            byte tag = MessageCodec.PeekTag(bytes);
            if (!_welcomed && tag != Tag.Welcome && tag != Tag.Kick && tag != Tag.Redirect)
                throw new ProtocolException(DecodeErrorKind.Invalid, "message 0x" + tag.ToString("x") + " before Welcome");
            if (tag == Tag.State) throw new ProtocolException(DecodeErrorKind.Invalid, "a State over WebSocket");
            if (tag == Tag.Events) throw new ProtocolException(DecodeErrorKind.Invalid, "Events over WebSocket");
            if (tag == Tag.Delta)
            {
                Mirror mirror = _mirror;
                if (mirror == null) throw new ProtocolException(DecodeErrorKind.Invalid, "Delta before Welcome");
                if (_awaitingBaseline)
                {
                    if (!IsBaseline(bytes))
                    {
                        _counters.DeltasSkipped += 1;
                        return;
                    }
                    _awaitingBaseline = false;
                }
                Delta delta;
                MirrorChanges changes;
                try
                {
                    delta = mirror.Receive(bytes, out changes);
                }
                catch (ProtocolException)
                {
                    // The known set no longer matches the host's: ask for a BASELINE on this socket.
                    Resync(mirror);
                    return;
                }
                Arrive();
                Clock.OnDelta(delta.Tick, now);
                _lastDeltaTick = Math.Max(_lastDeltaTick, delta.Tick);
                _lastAck = delta.Ack;
                _sentUnacked.RemoveAll(p => p.Seq <= delta.Ack);
                if (delta.HasControl) _controlled = delta.Control;
                Action<Delta, DeltaInfo> hd = DeltaApplied;
                if (hd != null) hd(delta, new DeltaInfo { Mirror = mirror, Changes = changes, RecvMs = now });
                if (delta.Events != null)
                {
                    Action<ZoneEvent, long> he = ZoneEventReceived;
                    if (he != null) foreach (ZoneEvent ev in delta.Events) he(ev, delta.Tick);
                }
                return;
            }
            ServerMessage m = MessageCodec.DecodeServer(bytes);
            switch (m.Type)
            {
                case MessageType.Welcome:
                    if (_welcomed) throw new ProtocolException(DecodeErrorKind.Invalid, "second Welcome");
                    OnWelcome((Welcome)m, now);
                    return;
                case MessageType.Pong:
                {
                    Pong p = (Pong)m;
                    if (p.ClientTime <= now) Clock.OnPong(p.ClientTime, now, p.Tick);
                    return;
                }
                case MessageType.Kick:
                {
                    _lastKick = (Kick)m;
                    Action<Kick> hk = Kicked;
                    if (hk != null) hk(_lastKick);
                    return;
                }
                case MessageType.InputRefused:
                {
                    _counters.InputsRefused += 1;
                    Action<InputRefused> hr = InputRefused;
                    if (hr != null) hr((InputRefused)m);
                    return;
                }
                case MessageType.KnownSetCheck:
                    CheckKnownSet((KnownSetCheck)m);
                    return;
                case MessageType.Transfer:
                    // §5.3.2: a host sends it only to a session of version 8 or later.
                    if (_welcome == null || _welcome.Version < ProtocolVersions.Transfer)
                        throw new ProtocolException(DecodeErrorKind.Invalid, "Transfer on a version " + (_welcome != null ? _welcome.Version : 0) + " session");
                    OnTransfer((Transfer)m);
                    return;
                case MessageType.Redirect:
                    // A Redirect answers a Hello only (§5.3.1).
                    if (_welcomed) throw new ProtocolException(DecodeErrorKind.Invalid, "Redirect in the middle of a session");
                    Follow(gen, (Redirect)m);
                    return;
                case MessageType.Entries:
                    // The fleet changed since the Welcome: where else to enter now (§5.3.1).
                    _entries = MessageCodec.WebSocketEntries(((Entries)m).Urls);
                    return;
                default:
                    return;
            }
        }

        /// <summary>
        /// Compares the host's check with the known set (§5.7). A mismatch, or a check while a BASELINE is still
        /// awaited (the host honours one Resync a second), sends Resync.
        /// </summary>
        private void CheckKnownSet(KnownSetCheck c)
        {
            Mirror mirror = _mirror;
            if (mirror == null) return;
            if (!_awaitingBaseline && mirror.Matches(c)) return;
            Resync(mirror);
        }

        private void Resync(Mirror mirror)
        {
            _awaitingBaseline = true;
            _counters.Resyncs += 1;
            Send(new Resync { Tick = mirror.Tick });
        }

        /// <summary>
        /// What a resuming Hello says the mirror holds (§4.1.1): only when the session's Welcome negotiated version
        /// 4 or later and the mirror is sound (a Delta applied, no Resync waiting for its BASELINE).
        /// </summary>
        private ResumeFrom ResumeFromValue()
        {
            bool offers = false;
            foreach (uint v in _versions) if (v >= ProtocolVersions.ResumeFrom) offers = true;
            if (_resumeFromRefused || _awaitingBaseline || _welcome == null || _welcome.Version < ProtocolVersions.ResumeFrom || !offers) return null;
            return _mirror != null ? _mirror.ResumeFrom() : null;
        }

        private void OnWelcome(Welcome w, double now)
        {
            if (Array.IndexOf(_versions, w.Version) < 0)
                throw new ProtocolException(DecodeErrorKind.Invalid, "host picked version " + w.Version + ", which was not offered");
            TransferState transfer = _transfer;
            // A move's Welcome starts the player afresh in the new zone, whatever token it presented.
            bool resumed = transfer == null && _resumeMode && _playerId.HasValue && _playerId.Value == w.PlayerId;
            if (resumed) _counters.Resumes += 1;
            else if (transfer == null) _counters.FreshJoins += 1;
            Cancel(_handshakeTimer);
            _handshakeTimer = -1;
            _welcome = w;
            // Inputs sent before the drop that no Delta acknowledged go again with their numbers (§4.2): the host
            // drops those it already has. A new player's mean nothing to it.
            List<DatagramInput> again = resumed ? UnackedToResend() : new List<DatagramInput>();
            if (!resumed) _sentUnacked.Clear();
            NoteEntries(w);
            _playerId = w.PlayerId;
            _token = w.ReconnectToken;
            if (transfer != null) transfer.Token = w.ReconnectToken;
            // A resume from the mirror keeps it until the first Delta: a BASELINE replaces it, an ordinary Delta
            // continues from it. Anything else starts from nothing.
            bool keep = resumed && _hello != null && _hello.ResumeFrom != null && w.Version >= ProtocolVersions.ResumeFrom && _mirror != null;
            if (!keep) _mirror = new Mirror(w.Schema);
            _awaitingBaseline = false;
            _resumeFromRefused = false;
            Clock.Reset(w.TickHz, w.Tick, now);
            _lastDeltaTick = w.Tick;
            _attempts = 0;
            _disconnectedAt = null;
            _untoldMove = null;
            _forceFresh = false;
            if (!resumed)
            {
                // A new player: its input sequence starts again at 1.
                _seq = 0;
                _lastAck = 0;
                _controlled = null;
            }
            _welcomed = true;
            if (transfer == null) _st = ConnectionState.Open;
            foreach (DatagramInput i in again)
            {
                Send(new InputMessage { Seq = i.Seq, ViewTick = i.ViewTick, Payload = i.Payload });
                KeepUnacked(i);
            }
            Ping();
            WelcomeInfo info = new WelcomeInfo { Resumed = resumed, Transfer = transfer != null ? transfer.Info : null };
            if (transfer != null)
            {
                // Told with the BASELINE (Arrive): until then the game draws the old world.
                transfer.HeldWelcome = w;
                transfer.HeldInfo = info;
                return;
            }
            Action<Welcome, WelcomeInfo> h = Welcomed;
            if (h != null) h(w, info);
            TaskCompletionSource<Welcome> first = _firstWelcome;
            _firstWelcome = null;
            if (first != null) first.TrySetResult(w);
        }

        private void Ping()
        {
            if (!_welcomed) return;
            Send(new Ping { ClientTime = (long)Math.Max(0, Math.Floor(_sched.Now())) });
            Later(Ping, _opts.PingIntervalMs);
        }

        private void OnSocketGone(int gen, int code, string reason, Exception error)
        {
            if (gen != _gen || _st == ConnectionState.Closed) return;
            bool wasOpen = _st == ConnectionState.Open;
            Kick kick = _lastKick;
            Exception localError = error ?? _localError;
            Teardown();
            // A move whose first attempt did not land is a disconnect after all: told now, before this one.
            CloseInfo untold = _untoldMove;
            _untoldMove = null;
            if (untold != null) EmitClose(untold);
            if (_transfer != null)
            {
                TransferAttemptFailed(code, reason, kick, localError);
                return;
            }
            // The grace window runs from the moment an established session was lost.
            if (wasOpen && !_disconnectedAt.HasValue) _disconnectedAt = _sched.Now();
            Func<int?, ReconnectContext, ReconnectDecision> policy = _opts.Reconnect.Policy ?? ReconnectPolicy.Default;
            // A Kick lost in transit is still known from the close code (§6: 4000 + the Kick code).
            int? kickCode = kick != null ? kick.Code : (code > 4000 && code <= 4999 ? code - 4000 : (int?)null);
            // Undecodable bytes, or a Redirect to a non-WebSocket URL: the next attempt would meet the same.
            RedirectException redirectError = localError as RedirectException;
            bool hopeless = localError is ProtocolException || (redirectError != null && redirectError.Kind == RedirectErrorKind.Scheme);
            // No host answered (or the one that did is on its way out): the next listed entry may (§5.3.1).
            bool unanswered = !wasOpen && !hopeless && redirectError == null && (!kickCode.HasValue || kickCode.Value == KickCode.ShuttingDown);
            if (unanswered && NextEntry()) return;
            ReconnectDecision decision = hopeless ? ReconnectDecision.Stop : policy(kickCode, new ReconnectContext { TicketReused = _ticketReused });
            if (kickCode == KickCode.VersionMismatch) decision = ReconnectDecision.Stop;
            // The character plays in another game or on another device now: coming back would take it from there.
            bool movedElsewhere = kickCode == KickCode.CharacterMoved;
            if (movedElsewhere) decision = ReconnectDecision.Stop;
            // Outdated content stays outdated on every attempt: only an update fixes it.
            if (kickCode == KickCode.ContentOutdated) decision = ReconnectDecision.Reload;
            // A host that speaks no version 4 reads resume_from as trailing bytes: try again without it.
            if (!wasOpen && kickCode == KickCode.ProtocolError && _hello != null && _hello.ResumeFrom != null && !_resumeFromRefused)
            {
                _resumeFromRefused = true;
                decision = ReconnectDecision.Retry;
            }
            if (decision == ReconnectDecision.Fresh) _forceFresh = true;
            if (decision == ReconnectDecision.Renew) _renewTicket = true;
            _attempts += 1;
            bool reload = decision == ReconnectDecision.Reload;
            bool willReconnect = decision != ReconnectDecision.Stop && !reload && _attempts <= _opts.Reconnect.MaxAttempts;
            CloseInfo info = new CloseInfo
            {
                Code = code,
                Reason = reload ? ReloadText(kick)
                    : movedElsewhere ? MovedElsewhereText(kick)
                    : kick != null ? KickCode.Name(kick.Code) + ": " + kick.Reason
                    : localError != null ? localError.Message : reason,
                Kick = kick,
                Error = localError,
                WillReconnect = willReconnect,
                Reload = reload,
                MovedElsewhere = movedElsewhere,
            };
            if (!willReconnect)
            {
                _st = ConnectionState.Closed;
                if (reload) EmitReload(kick);
                if (movedElsewhere) EmitMoved(kick);
                Finish(info);
                return;
            }
            // The zone moved while the player was in it: its new owner waits for the resume, so the first attempt
            // goes at once (later ones back off as usual).
            bool atOnce = wasOpen && kickCode.HasValue && KickCode.ResumesElsewhere(kickCode.Value);
            info.RetryInMs = atOnce ? 0 : ReconnectPolicy.BackoffMs(_opts.Reconnect, _attempts);
            _st = ConnectionState.Reconnecting;
            // The player's socket changes, the player does not: a move that lands at once is told by its Kick and
            // the resumed Welcome alone.
            if (atOnce) _untoldMove = info;
            else EmitClose(info);
            Later(Attempt, info.RetryInMs);
        }

        private void EmitClose(CloseInfo info)
        {
            Action<CloseInfo> h = Closed;
            if (h != null) h(info);
        }

        private void EmitReload(Kick kick)
        {
            Action<FinalNotice> h = ReloadRequired;
            if (h != null) h(new FinalNotice { Message = ReloadText(kick), Kick = kick });
        }

        private void EmitMoved(Kick kick)
        {
            Action<FinalNotice> h = MovedElsewhere;
            if (h != null) h(new FinalNotice { Message = MovedElsewhereText(kick), Kick = kick });
        }

        internal static string ReloadText(Kick kick)
        {
            return kick != null && kick.Reason.Length > 0 ? ReloadMessage + " (" + kick.Reason + ")" : ReloadMessage;
        }

        internal static string MovedElsewhereText(Kick kick)
        {
            return kick != null && kick.Reason.Length > 0 ? MovedElsewhereMessage + " (" + kick.Reason + ")" : MovedElsewhereMessage;
        }

        /// <summary>
        /// Keeps the entry URLs a version 7 Welcome lists (an older one lists none: what an earlier one listed still
        /// holds) and counts a Welcome reached through one of them; the next attempt starts at the entry URL again.
        /// </summary>
        private void NoteEntries(Welcome w)
        {
            if (_entryIndex > 0) _counters.EntryFallbacks += 1;
            _entryIndex = 0;
            if (w.Version >= ProtocolVersions.Entries) _entries = MessageCodec.WebSocketEntries(w.Entries);
        }

        /// <summary>
        /// After an attempt no host answered: true when it goes on at once at the next listed entry URL; false when
        /// none is left (the next attempt starts at the entry URL again, after the usual backoff).
        /// </summary>
        private bool NextEntry()
        {
            if (_entryIndex + 1 >= EntryCandidates().Count)
            {
                _entryIndex = 0;
                return false;
            }
            _entryIndex += 1;
            Teardown();
            Later(Attempt, 0);
            return true;
        }

        /// <summary>How long a credential is valid from now, ms, by its <c>exp</c> (600 s when it cannot be read).</summary>
        private static double CredentialLifetimeMs(string ticket)
        {
            string[] parts = ticket.Split('.');
            if (parts.Length >= 2)
            {
                string json = MiniJson.Base64UrlText(parts[1]);
                double? exp = json == null ? null : MiniJson.NumberMember(json, "exp");
                if (exp.HasValue && !double.IsNaN(exp.Value) && !double.IsInfinity(exp.Value))
                {
                    double nowMs = (DateTime.UtcNow - new DateTime(1970, 1, 1, 0, 0, 0, DateTimeKind.Utc)).TotalMilliseconds;
                    return Math.Max(0, exp.Value * 1000 - nowMs);
                }
            }
            return 600000;
        }

        /// <summary>
        /// A Transfer on the open session (§5.3.2): keeps the source connection (and the world drawn from it) and
        /// starts the attempts at the new zone. A Transfer whose URL is not a WebSocket URL is ignored.
        /// </summary>
        private void OnTransfer(Transfer m)
        {
            string url = MessageCodec.WebSocketTarget(m.Url);
            if (url == null)
            {
                Action<TransferException> hf = TransferFailed;
                if (hf != null) hf(new TransferException(TransferErrorKind.Url, "a Transfer to a URL that is not ws:// or wss://: " + m.Url, null, true));
                return;
            }
            TransferInfo info = new TransferInfo { From = _welcome != null ? _welcome.ZoneId : string.Empty, To = m.ZoneId, Url = url };
            ISocket origin = _socket;
            // Detached, not closed: the source holds the player's last world until the new one is here.
            Teardown();
            EndTransfer("transferred again");
            TransferState t = new TransferState
            {
                Info = info,
                Credential = m.Ticket,
                Deadline = _sched.Now() + CredentialLifetimeMs(m.Ticket),
                Origin = origin,
                Direct = true,
            };
            _transfer = t;
            _zoneId = m.ZoneId;
            _entryIndex = 0;
            _st = ConnectionState.Transferring;
            Action<TransferInfo> hs = TransferStarted;
            if (hs != null) hs(info);
            if (_transfer != t || _st != ConnectionState.Transferring) return; // a handler closed the connection
            Attempt();
        }

        /// <summary>The new zone's BASELINE is here: tells the held Welcome and closes the source connection.</summary>
        private void Arrive()
        {
            TransferState t = _transfer;
            if (t == null || t.HeldWelcome == null) return;
            _transfer = null;
            _st = ConnectionState.Open;
            _counters.Transfers += 1;
            CloseOrigin(t, "transferred");
            Action<Welcome, WelcomeInfo> h = Welcomed;
            if (h != null) h(t.HeldWelcome, t.HeldInfo);
        }

        private void EndTransfer(string reason)
        {
            TransferState t = _transfer;
            if (t == null) return;
            _transfer = null;
            CloseOrigin(t, reason);
        }

        private static void CloseOrigin(TransferState t, string reason)
        {
            ISocket origin = t.Origin;
            t.Origin = null;
            if (origin == null) return;
            Detach(origin);
            try
            {
                origin.Close(1000, reason);
            }
            catch (Exception)
            {
                // The source closes it after a while anyway.
            }
        }

        private static readonly HashSet<int> TransferFinalKicks = new HashSet<int>
        {
            KickCode.VersionMismatch, KickCode.BadTicket, KickCode.TicketExpired, KickCode.TicketUnknownKey,
            KickCode.TicketRetiredKey, KickCode.TicketBadAlgorithm, KickCode.TicketWrongZone,
        };

        /// <summary>
        /// An attempt at the new zone failed: the next listed entry at once when none answered, else another attempt
        /// with backoff while the credential is valid, else the connection ends.
        /// </summary>
        private void TransferAttemptFailed(int code, string reason, Kick kick, Exception localError)
        {
            TransferState t = _transfer;
            if (t == null) return;
            t.HeldWelcome = null;
            t.HeldInfo = null;
            int? kickCode = kick != null ? kick.Code : (code > 4000 && code <= 4999 ? code - 4000 : (int?)null);
            RedirectException redirectError = localError as RedirectException;
            bool hopeless = localError is ProtocolException || (redirectError != null && redirectError.Kind == RedirectErrorKind.Scheme);
            bool unanswered = !hopeless && redirectError == null && (!kickCode.HasValue || kickCode.Value == KickCode.ShuttingDown);
            if (unanswered && NextEntry()) return;
            t.Direct = false;
            t.Failures += 1;
            _entryIndex = 0;
            string why = kick != null ? KickCode.Name(kick.Code) + ": " + kick.Reason : (localError != null ? localError.Message : reason);
            if (kickCode == KickCode.ContentOutdated)
            {
                EndTransfer("content outdated");
                _st = ConnectionState.Closed;
                EmitReload(kick);
                Finish(new CloseInfo { Code = code, Reason = ReloadText(kick), Kick = kick, Error = localError, Reload = true });
                return;
            }
            if (kickCode == KickCode.CharacterMoved)
            {
                // The character went into another zone meanwhile: the move ends with the session.
                EndTransfer("character moved elsewhere");
                _st = ConnectionState.Closed;
                EmitMoved(kick);
                Finish(new CloseInfo { Code = code, Reason = MovedElsewhereText(kick), Kick = kick, Error = localError, MovedElsewhere = true });
                return;
            }
            double delay = ReconnectPolicy.BackoffMs(_opts.Reconnect, t.Failures);
            TransferErrorKind kind = TransferErrorKind.Attempt;
            bool willRetry = !hopeless && !(kickCode.HasValue && TransferFinalKicks.Contains(kickCode.Value));
            if (kickCode == KickCode.TicketReplayed && t.Token == null)
            {
                // Already used, and no Welcome of the new zone gave a token to resume with.
                kind = TransferErrorKind.Replayed;
                willRetry = false;
            }
            else if (willRetry && _sched.Now() + delay >= t.Deadline)
            {
                kind = TransferErrorKind.Expired;
                willRetry = false;
            }
            Action<TransferException> hf = TransferFailed;
            if (hf != null) hf(new TransferException(kind, why, kick, willRetry));
            if (_transfer != t) return; // a handler closed the connection
            if (!willRetry)
            {
                EndTransfer("transfer failed");
                _st = ConnectionState.Closed;
                Finish(new CloseInfo { Code = code, Reason = why, Kick = kick, Error = localError });
                return;
            }
            Later(Attempt, delay);
        }

        private void Finish(CloseInfo info)
        {
            EmitClose(info);
            TaskCompletionSource<Welcome> first = _firstWelcome;
            _firstWelcome = null;
            if (first == null) return;
            if (info.Reload) first.TrySetException(new ContentOutdatedException(info.Kick));
            else if (info.MovedElsewhere) first.TrySetException(new CharacterMovedException(info.Kick));
            else first.TrySetException(new ConnectionClosedException(info));
        }
    }
}
