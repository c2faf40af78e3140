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
//
// The class is in parts: this file holds its state, events and public surface; Connection.Handshake.cs
// an attempt (ticket, Hello, Redirects); Connection.Receive.cs what the host sends; Connection.Reconnect.cs
// what follows a lost socket; Connection.Transfer.cs a move to another zone; Connection.Inputs.cs inputs.
using System;
using System.Collections.Generic;
using System.Threading.Tasks;

namespace Zonekeep
{
    /// <summary>One client session with a zone, carried over reconnects.</summary>
    public sealed partial class ZoneConnection
    {
        /// <summary>What the connection tells the game when the host refuses its content version.</summary>
        public const string ReloadMessage = "The game was updated: update or restart it to play the current version.";
        /// <summary>What the connection tells the game when the player's character went into another zone.</summary>
        public const string MovedElsewhereMessage = "Your character is now playing in another game or on another device.";

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
        /// <summary>
        /// Chat (protocol version 11): lines of the channels this session hears, Send, Dm, Report and History. See
        /// <see cref="ChatClient"/>; on a session of version 10 or older its methods fail with a
        /// <see cref="ChatException"/> Unsupported.
        /// </summary>
        public readonly ChatClient Chat;
        // The principal of the current session (its ticket's sub), or null when unknown.
        private string _principal;

        /// <summary>What <see cref="Chat"/> needs of the connection.</summary>
        private sealed class ChatPort : IChatPort
        {
            private readonly ZoneConnection _c;
            public ChatPort(ZoneConnection c) { _c = c; }
            public IScheduler Scheduler { get { return _c._sched; } }
            public uint? Version()
            {
                if (!_c._welcomed || _c._st != ConnectionState.Open || _c._socket == null || _c._welcome == null) return null;
                return _c._welcome.Version;
            }
            public uint Features() { return Version().HasValue ? _c._welcome.Features : 0u; }
            public string Principal() { return _c._principal; }
            public string ZoneId() { return _c._welcome != null ? _c._welcome.ZoneId : null; }
            public void Send(ClientMessage m) { _c.Send(m); }
        }
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
            Chat = new ChatClient(new ChatPort(this), options.Chat);
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
            if (sock != null) CloseQuietly(sock, reason);
            Finish(new CloseInfo { Code = 1000, Reason = reason });
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

        /// <summary>Closes <paramref name="sock"/> normally: one that already failed (or is closed by its host anyway) is no error worth reporting.</summary>
        private static void CloseQuietly(ISocket sock, string reason)
        {
            try
            {
                sock.Close(1000, reason);
            }
            catch (Exception)
            {
                // The outcome is the same: the socket is gone.
            }
        }

        private void Teardown()
        {
            // A session's chat requests are answered on its socket only.
            if (_welcomed) Chat.OnEnded();
            _gen += 1;
            foreach (long h in _timers) _sched.ClearTimeout(h);
            _timers.Clear();
            _handshakeTimer = -1;
            _welcomed = false;
            ISocket sock = _socket;
            _socket = null;
            if (sock != null) Detach(sock);
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

        private void Finish(CloseInfo info)
        {
            Chat.OnClosed();
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
