// ZoneConnection: one attempt at a session: the ticket, the Hello at the entry URL, Redirects followed to the
// zone's owner (§5.3.1), and the handshake timer.
using System;
using System.Threading.Tasks;

namespace Zonekeep
{
    public sealed partial class ZoneConnection
    {
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
                CloseQuietly(old, "redirected");
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
            string m = error.Message ?? string.Empty;
            if (sock != null) CloseQuietly(sock, m.Length > 120 ? m.Substring(0, 120) : m);
            OnSocketGone(gen, 1006, error.Message, error);
        }
    }
}
