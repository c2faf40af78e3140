// ZoneConnection: a Transfer (§5.3.2): the move to another zone on a new connection while the old world stays
// drawn, until the new zone's Welcome and BASELINE are told together.
using System;
using System.Collections.Generic;

namespace Zonekeep
{
    public sealed partial class ZoneConnection
    {
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

        /// <summary>The principal a ticket admits (its <c>sub</c>), or null when it is not a JWS that can be read.</summary>
        private static string TicketSubject(string ticket)
        {
            string[] parts = (ticket ?? string.Empty).Split('.');
            if (parts.Length < 2) return null;
            string json = MiniJson.Base64UrlText(parts[1]);
            string sub = json == null ? null : MiniJson.StringMember(json, "sub");
            return string.IsNullOrEmpty(sub) ? null : sub;
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
            // Detached first: its close is not a lost connection. The source closes it after a while anyway.
            Detach(origin);
            CloseQuietly(origin, reason);
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
            int? kickCode = KickCodeOf(kick, code);
            bool hopeless = IsHopeless(localError);
            if (NoHostAnswered(localError, kickCode) && NextEntry()) return;
            t.Direct = false;
            t.Failures += 1;
            _entryIndex = 0;
            string why = Why(kick, localError, reason);
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
    }
}
