// How a ZoneConnection reconnects: what a Kick code calls for (retry, renew the ticket, join fresh, or
// stop), the tuning a game may set, and the backoff between attempts.
using System;

namespace Zonekeep
{
    /// <summary>
    /// What to do after the connection ends: Retry the same way (the token inside the grace window), Renew the
    /// ticket (a new one, still presenting the token inside the grace window), join Fresh as a new player with a
    /// new ticket and no token, Stop, or Reload: stop because this client is built for older game content than
    /// the host accepts (Kick CONTENT_OUTDATED, §4.1.2), so the game must be updated.
    /// </summary>
    public enum ReconnectDecision
    {
        /// <summary>Give up.</summary>
        Stop,
        /// <summary>Try again the same way.</summary>
        Retry,
        /// <summary>Fetch a new ticket, keep the token.</summary>
        Renew,
        /// <summary>Join as a new player.</summary>
        Fresh,
        /// <summary>Stop: the client's content is outdated.</summary>
        Reload,
    }

    /// <summary>What the connection knows about the attempt a Kick ended.</summary>
    public struct ReconnectContext
    {
        /// <summary>True when the ticket presented had been used before (a resume, or a retry with an earlier join's ticket).</summary>
        public bool TicketReused;
    }

    /// <summary>Reconnect tuning.</summary>
    public sealed class ReconnectOptions
    {
        /// <summary>Consecutive failed attempts before giving up (default 8; 0 disables reconnecting).</summary>
        public int MaxAttempts = 8;
        /// <summary>First backoff delay in ms (default 250). After ZONE_MOVED or HOST_FENCED the first attempt waits for none.</summary>
        public double BaseDelayMs = 250;
        /// <summary>Largest backoff delay in ms (default 8000).</summary>
        public double MaxDelayMs = 8000;
        /// <summary>How long after a disconnect the reconnect token is presented, ms (default: the Welcome's grace window, or 30000 before one).</summary>
        public double? GraceMs;
        /// <summary>Source of jitter in [0, 1) (default: a System.Random).</summary>
        public Func<double> Random;
        /// <summary>
        /// Overrides <see cref="ReconnectPolicy.Default"/>. VERSION_MISMATCH and CHARACTER_MOVED always stop and
        /// CONTENT_OUTDATED always reloads, whatever it returns. The code is null when the socket closed without a Kick.
        /// </summary>
        public Func<int?, ReconnectContext, ReconnectDecision> Policy;
    }

    /// <summary>The default reconnect policy and the backoff.</summary>
    public static class ReconnectPolicy
    {
        private static readonly Random Shared = new Random();
        private static readonly object SharedLock = new object();

        /// <summary>
        /// The default decision for a Kick code (null = the socket closed without a Kick): Retry resumes with the
        /// token when still inside the grace window, Renew fetches a new ticket for a refusal a new ticket fixes,
        /// Fresh joins as a new player (the token was refused), Stop gives up.
        /// A reused ticket refused for its signature or key (BAD_TICKET, unknown or retired key) was signed with a
        /// key the host no longer has — typically a host restarted with a new key — so a new ticket fixes it; a
        /// ticket fetched for this very attempt refused that way would be refused again.
        /// </summary>
        public static ReconnectDecision Default(int? code, ReconnectContext context)
        {
            if (!code.HasValue) return ReconnectDecision.Retry;
            switch (code.Value)
            {
                case KickCode.ReconnectRefused:
                    return ReconnectDecision.Fresh;
                case KickCode.TicketExpired:
                case KickCode.TicketReplayed:
                case KickCode.TicketNotYetValid:
                    return ReconnectDecision.Renew;
                case KickCode.BadTicket:
                case KickCode.TicketUnknownKey:
                case KickCode.TicketRetiredKey:
                    return context.TicketReused ? ReconnectDecision.Renew : ReconnectDecision.Stop;
                case KickCode.TicketBadAlgorithm:
                case KickCode.TicketWrongZone:
                case KickCode.VersionMismatch:
                case KickCode.Kicked:
                case KickCode.ProtocolError:
                case KickCode.MessageTooLarge:
                case KickCode.JoinRefused:
                case KickCode.ZoneStopped:
                case KickCode.RateLimited:
                    return ReconnectDecision.Stop;
                case KickCode.ContentOutdated:
                    // No attempt can succeed until the client is the current build.
                    return ReconnectDecision.Reload;
                case KickCode.ZoneMoved:
                case KickCode.HostFenced:
                    // The session lives on at the zone's new owner: resume (at once, through the entry URL).
                    return ReconnectDecision.Retry;
                case KickCode.WorldHalted:
                    // The lasting world comes back from its last committed save once its store answers.
                    return ReconnectDecision.Retry;
                case KickCode.CharacterMoved:
                    // The character plays in another game or on another device: coming back would take it from there.
                    return ReconnectDecision.Stop;
                case KickCode.CharacterElsewhere:
                    // Another zone holds the character and could not give it back yet: come back with backoff.
                    return ReconnectDecision.Retry;
                case KickCode.Banned:
                    // Banned until a time the reason names (version 11): every join is refused until then.
                    return ReconnectDecision.Stop;
                default:
                    // SHUTTING_DOWN, ZONE_FULL, timeouts, SLOW_CONSUMER, INTERNAL_ERROR, TOO_MANY_REDIRECTS and
                    // unknown codes.
                    return ReconnectDecision.Retry;
            }
        }

        /// <summary>
        /// The delay before reconnect attempt <paramref name="attempt"/> (1-based), in ms: exponential from
        /// BaseDelayMs up to MaxDelayMs, with "equal jitter" — half fixed, half random, so attempts spread out but
        /// never collapse to zero.
        /// </summary>
        public static double BackoffMs(ReconnectOptions r, int attempt)
        {
            double exp = Math.Min(r.MaxDelayMs, r.BaseDelayMs * Math.Pow(2, Math.Max(0, attempt - 1)));
            double random;
            if (r.Random != null) random = r.Random();
            else lock (SharedLock) random = Shared.NextDouble();
            return exp / 2 + (exp / 2) * random;
        }
    }
}
