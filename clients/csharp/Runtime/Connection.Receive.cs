// ZoneConnection: what the host sends: Welcome, Deltas onto the known set, Pong, Kick, KnownSetCheck, Transfer,
// Redirect and Entries; and the Pings that keep the clock.
using System;
using System.Collections.Generic;
using System.Threading.Tasks;

namespace Zonekeep
{
    public sealed partial class ZoneConnection
    {
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
                case MessageType.ChatLines:
                case MessageType.ChatReply:
                    // A host sends them only to a session of version 11 or later.
                    if (_welcome == null || _welcome.Version < ProtocolVersions.Chat)
                        throw new ProtocolException(DecodeErrorKind.Invalid, (m.Type == MessageType.ChatLines ? "ChatLines" : "ChatReply") + " on a version " + (_welcome != null ? _welcome.Version : 0) + " session");
                    if (m.Type == MessageType.ChatLines) Chat.OnLines((ChatLines)m);
                    else Chat.OnReply((ChatReply)m);
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
            _principal = _hello != null ? TicketSubject(_hello.Ticket) : null;
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
    }
}
