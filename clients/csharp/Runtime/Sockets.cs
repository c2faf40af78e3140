// The socket a ZoneConnection talks through, and the WebSocket transport a game uses.
//
// Threading: a WebSocketTransport's network I/O runs on background tasks (the thread pool). What it
// receives is put in a bounded, lock-protected queue; Pump(), called from ZoneConnection.Poll() on the
// game's main thread, hands the queued events to the connection there. So every SDK callback and every
// event a game subscribes to runs on the thread that polls, and the SDK's state needs no locks.
using System;
using System.Collections.Generic;
using System.IO;
using System.Net.WebSockets;
using System.Threading;
using System.Threading.Tasks;

namespace Zonekeep
{
    /// <summary>
    /// The part of a WebSocket a <see cref="ZoneConnection"/> uses. Events are raised only from
    /// <see cref="Pump"/> (or, for sockets without threads of their own, from the scheduler's timers), on the
    /// thread that polls the connection.
    /// </summary>
    public interface ISocket
    {
        /// <summary>Called once when the socket is open.</summary>
        Action OnOpen { get; set; }
        /// <summary>Called for each message: its bytes, and whether it came as a text frame (a protocol error).</summary>
        Action<byte[], bool> OnMessage { get; set; }
        /// <summary>Called once when the socket is closed, by either side or by an error: the close code (1006 when none) and reason.</summary>
        Action<int, string> OnClose { get; set; }
        /// <summary>Sends one binary message.</summary>
        void Send(byte[] data);
        /// <summary>Closes the socket.</summary>
        void Close(int code, string reason);
        /// <summary>Delivers the events queued since the last call, on the calling thread.</summary>
        void Pump();
    }

    /// <summary>Tuning of a <see cref="WebSocketTransport"/>.</summary>
    public sealed class WebSocketTransportOptions
    {
        /// <summary>Messages received and not yet pumped at most; past it the socket stops reading until the game polls (default 1024).</summary>
        public int MaxQueuedMessages = 1024;
        /// <summary>Bytes received and not yet pumped at most (default 8 MiB).</summary>
        public int MaxQueuedBytes = 8 << 20;
        /// <summary>Messages waiting to be sent at most; past it the socket fails as a dropped connection (default 256).</summary>
        public int MaxOutgoingMessages = 256;
        /// <summary>How long a close may take before the socket is aborted, ms (default 2000).</summary>
        public int CloseTimeoutMs = 2000;
        /// <summary>Largest message received, bytes (default: the protocol's 1 MiB).</summary>
        public int MaxMessageBytes = Limits.ServerMessage;
    }

    /// <summary>
    /// A WebSocket over <see cref="ClientWebSocket"/>: connects, receives and sends on background tasks, and
    /// hands what happened to the game's thread through <see cref="Pump"/>. Both queues are bounded: a game that
    /// stops polling stops the socket reading (the host then sees its Pings unanswered and ends the session with
    /// SLOW_CONSUMER, PROTOCOL.md §1), and more than MaxOutgoingMessages unsent messages fail the socket.
    /// </summary>
    public sealed class WebSocketTransport : ISocket
    {
        private enum EventKind { Open, Message, Close }

        private struct Event
        {
            public EventKind Kind;
            public byte[] Data;
            public bool Text;
            public int Code;
            public string Reason;
        }

        private readonly WebSocketTransportOptions _opts;
        private readonly ClientWebSocket _ws = new ClientWebSocket();
        private readonly CancellationTokenSource _cts = new CancellationTokenSource();
        private readonly object _lock = new object();
        private readonly Queue<Event> _inbox = new Queue<Event>();
        private int _inboxBytes;
        private bool _waitingForRoom;
        private readonly SemaphoreSlim _room = new SemaphoreSlim(0);
        private readonly Queue<byte[]> _outbox = new Queue<byte[]>();
        private readonly SemaphoreSlim _outSignal = new SemaphoreSlim(0);
        private bool _closeRequested;
        private int _closeCode = 1000;
        private string _closeReason = string.Empty;
        private bool _closeQueued;
        private bool _closeDelivered;

        /// <inheritdoc/>
        public Action OnOpen { get; set; }
        /// <inheritdoc/>
        public Action<byte[], bool> OnMessage { get; set; }
        /// <inheritdoc/>
        public Action<int, string> OnClose { get; set; }

        /// <summary>Opens a WebSocket to <paramref name="url"/> (the default socket factory of a <see cref="ZoneConnection"/>).</summary>
        public static ISocket Connect(string url) { return new WebSocketTransport(url, null); }

        /// <summary>Starts connecting to <paramref name="url"/> in the background.</summary>
        public WebSocketTransport(string url, WebSocketTransportOptions options)
        {
            _opts = options ?? new WebSocketTransportOptions();
            Uri uri = new Uri(url);
            Task.Run(() => RunAsync(uri));
        }

        private void Enqueue(Event ev)
        {
            lock (_lock)
            {
                if (_closeQueued) return;
                if (ev.Kind == EventKind.Close) _closeQueued = true;
                _inbox.Enqueue(ev);
                if (ev.Data != null) _inboxBytes += ev.Data.Length;
            }
        }

        private bool InboxFull()
        {
            return _inbox.Count >= _opts.MaxQueuedMessages || _inboxBytes >= _opts.MaxQueuedBytes;
        }

        private async Task RunAsync(Uri uri)
        {
            CancellationToken ct = _cts.Token;
            try
            {
                await _ws.ConnectAsync(uri, ct).ConfigureAwait(false);
                Enqueue(new Event { Kind = EventKind.Open });
                Task sender = SendLoopAsync(ct);
                byte[] buf = new byte[16384];
                MemoryStream message = new MemoryStream();
                for (;;)
                {
                    // Backpressure: while the game has not taken what came, read nothing more.
                    for (;;)
                    {
                        bool full;
                        lock (_lock)
                        {
                            full = InboxFull();
                            if (full) _waitingForRoom = true;
                        }
                        if (!full) break;
                        await _room.WaitAsync(ct).ConfigureAwait(false);
                    }
                    WebSocketReceiveResult r = await _ws.ReceiveAsync(new ArraySegment<byte>(buf), ct).ConfigureAwait(false);
                    if (r.MessageType == WebSocketMessageType.Close)
                    {
                        int code = _ws.CloseStatus.HasValue ? (int)_ws.CloseStatus.Value : 1005;
                        string reason = _ws.CloseStatusDescription ?? string.Empty;
                        try
                        {
                            if (_ws.State == WebSocketState.CloseReceived)
                                await _ws.CloseOutputAsync(WebSocketCloseStatus.NormalClosure, string.Empty, ct).ConfigureAwait(false);
                        }
                        catch (Exception)
                        {
                            // The peer is gone already: the close it sent is what counts.
                        }
                        Enqueue(new Event { Kind = EventKind.Close, Code = code, Reason = reason });
                        break;
                    }
                    if (message.Length + r.Count > _opts.MaxMessageBytes)
                    {
                        Enqueue(new Event { Kind = EventKind.Close, Code = 1009, Reason = "message over " + _opts.MaxMessageBytes + " bytes" });
                        _ws.Abort();
                        break;
                    }
                    message.Write(buf, 0, r.Count);
                    if (r.EndOfMessage)
                    {
                        Enqueue(new Event { Kind = EventKind.Message, Data = message.ToArray(), Text = r.MessageType == WebSocketMessageType.Text });
                        message.SetLength(0);
                    }
                }
                GC.KeepAlive(sender);
            }
            catch (Exception e)
            {
                bool ours;
                lock (_lock) ours = _closeRequested;
                Enqueue(new Event { Kind = EventKind.Close, Code = ours ? _closeCode : 1006, Reason = ours ? _closeReason : e.Message });
            }
            finally
            {
                _cts.Cancel();
                try
                {
                    _ws.Dispose();
                }
                catch (Exception)
                {
                    // Disposing a failed socket may throw on some runtimes; nothing is left to release.
                }
            }
        }

        private async Task SendLoopAsync(CancellationToken ct)
        {
            try
            {
                for (;;)
                {
                    await _outSignal.WaitAsync(ct).ConfigureAwait(false);
                    byte[] data = null;
                    bool close = false;
                    lock (_lock)
                    {
                        if (_outbox.Count > 0) data = _outbox.Dequeue();
                        else if (_closeRequested) close = true;
                    }
                    if (data != null)
                    {
                        await _ws.SendAsync(new ArraySegment<byte>(data), WebSocketMessageType.Binary, true, ct).ConfigureAwait(false);
                        continue;
                    }
                    if (close)
                    {
                        WebSocketCloseStatus status = (WebSocketCloseStatus)_closeCode;
                        using (CancellationTokenSource limit = new CancellationTokenSource(_opts.CloseTimeoutMs))
                        using (CancellationTokenSource both = CancellationTokenSource.CreateLinkedTokenSource(ct, limit.Token))
                        {
                            try
                            {
                                await _ws.CloseOutputAsync(status, Truncate(_closeReason), both.Token).ConfigureAwait(false);
                            }
                            catch (Exception)
                            {
                                _ws.Abort();
                            }
                        }
                        // The receive loop sees the peer's close (or the abort) and reports the end.
                        Task watchdog = Task.Delay(_opts.CloseTimeoutMs, ct).ContinueWith(t =>
                        {
                            if (!t.IsCanceled) _ws.Abort();
                        });
                        GC.KeepAlive(watchdog);
                        return;
                    }
                }
            }
            catch (Exception e)
            {
                if (!ct.IsCancellationRequested)
                {
                    Enqueue(new Event { Kind = EventKind.Close, Code = 1006, Reason = "send failed: " + e.Message });
                    _ws.Abort();
                }
            }
        }

        private static string Truncate(string reason)
        {
            // A close frame's reason is at most 123 bytes of UTF-8.
            if (reason == null) return string.Empty;
            while (System.Text.Encoding.UTF8.GetByteCount(reason) > 123) reason = reason.Substring(0, reason.Length - 1);
            return reason;
        }

        /// <summary>Queues one binary message; more than MaxOutgoingMessages unsent fail the socket (a dropped connection).</summary>
        public void Send(byte[] data)
        {
            bool overflow = false;
            lock (_lock)
            {
                if (_closeRequested || _closeQueued) return;
                if (_outbox.Count >= _opts.MaxOutgoingMessages) overflow = true;
                else _outbox.Enqueue(data);
            }
            if (overflow)
            {
                Enqueue(new Event { Kind = EventKind.Close, Code = 1006, Reason = "send queue over " + _opts.MaxOutgoingMessages + " messages" });
                _ws.Abort();
                _cts.Cancel();
                return;
            }
            _outSignal.Release();
        }

        /// <summary>Closes the socket with <paramref name="code"/> after the messages already queued.</summary>
        public void Close(int code, string reason)
        {
            lock (_lock)
            {
                if (_closeRequested) return;
                _closeRequested = true;
                _closeCode = code >= 1000 && code <= 4999 ? code : 1000;
                _closeReason = reason ?? string.Empty;
            }
            _outSignal.Release();
            if (_ws.State == WebSocketState.Connecting || _ws.State == WebSocketState.None)
            {
                // Not open yet: nothing to say to the peer.
                _cts.Cancel();
            }
        }

        /// <summary>Delivers queued events (open, messages, close) on the calling thread.</summary>
        public void Pump()
        {
            for (;;)
            {
                Event ev;
                bool release = false;
                lock (_lock)
                {
                    if (_inbox.Count == 0) break;
                    ev = _inbox.Dequeue();
                    if (ev.Data != null) _inboxBytes -= ev.Data.Length;
                    if (_waitingForRoom && !InboxFull())
                    {
                        _waitingForRoom = false;
                        release = true;
                    }
                }
                if (release) _room.Release();
                if (_closeDelivered) continue;
                switch (ev.Kind)
                {
                    case EventKind.Open:
                        if (OnOpen != null) OnOpen();
                        break;
                    case EventKind.Message:
                        if (OnMessage != null) OnMessage(ev.Data, ev.Text);
                        break;
                    default:
                        _closeDelivered = true;
                        if (OnClose != null) OnClose(ev.Code, ev.Reason);
                        break;
                }
            }
        }
    }
}
