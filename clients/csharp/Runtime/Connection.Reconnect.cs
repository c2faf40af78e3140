// ZoneConnection: after a socket is gone: the next listed entry URL, a resume or a fresh join with backoff, or
// the end of the session; and the entry URLs an attempt may start at.
using System;
using System.Collections.Generic;

namespace Zonekeep
{
    public sealed partial class ZoneConnection
    {
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
            int? kickCode = KickCodeOf(kick, code);
            bool hopeless = IsHopeless(localError);
            if (!wasOpen && NoHostAnswered(localError, kickCode) && NextEntry()) return;
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
                    : Why(kick, localError, reason),
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

        /// <summary>The Kick code a socket ended with: its Kick's, or from the close code when the Kick was lost in transit (§6: 4000 + the Kick code).</summary>
        private static int? KickCodeOf(Kick kick, int closeCode)
        {
            if (kick != null) return kick.Code;
            return closeCode > 4000 && closeCode <= 4999 ? closeCode - 4000 : (int?)null;
        }

        /// <summary>Undecodable bytes, or a Redirect to a non-WebSocket URL: the next attempt would meet the same.</summary>
        private static bool IsHopeless(Exception localError)
        {
            RedirectException redirectError = localError as RedirectException;
            return localError is ProtocolException || (redirectError != null && redirectError.Kind == RedirectErrorKind.Scheme);
        }

        /// <summary>No host answered an attempt (or the one that did is on its way out): the next listed entry may (§5.3.1).</summary>
        private static bool NoHostAnswered(Exception localError, int? kickCode)
        {
            return !IsHopeless(localError) && !(localError is RedirectException) && (!kickCode.HasValue || kickCode.Value == KickCode.ShuttingDown);
        }

        /// <summary>Why a socket ended, as a close reason: the Kick's name and reason, else the local error, else the socket's own reason.</summary>
        private static string Why(Kick kick, Exception localError, string reason)
        {
            if (kick != null) return KickCode.Name(kick.Code) + ": " + kick.Reason;
            return localError != null ? localError.Message : reason;
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
    }
}
