// Kick codes (PROTOCOL.md §5.3): their numbers and names, and which of them only move the session.

namespace Zonekeep
{
    /// <summary>Kick codes of §5.3. Unknown codes decode fine and are shown as numbers.</summary>
    public static class KickCode
    {
        /// <summary>Malformed, tampered or unverifiable ticket.</summary>
        public const int BadTicket = 1;
        /// <summary><c>exp</c> passed.</summary>
        public const int TicketExpired = 2;
        /// <summary><c>nbf</c> in the future.</summary>
        public const int TicketNotYetValid = 3;
        /// <summary><c>kid</c> names no key the host knows.</summary>
        public const int TicketUnknownKey = 4;
        /// <summary><c>kid</c> names a retired key.</summary>
        public const int TicketRetiredKey = 5;
        /// <summary><c>alg</c> other than HS256.</summary>
        public const int TicketBadAlgorithm = 6;
        /// <summary>The ticket does not admit this zone.</summary>
        public const int TicketWrongZone = 7;
        /// <summary>The ticket's <c>jti</c> was already used.</summary>
        public const int TicketReplayed = 8;
        /// <summary>No slot left.</summary>
        public const int ZoneFull = 9;
        /// <summary>No common protocol version.</summary>
        public const int VersionMismatch = 10;
        /// <summary>Removed by an admin or by the zone.</summary>
        public const int Kicked = 11;
        /// <summary>The server is restarting; reconnect shortly.</summary>
        public const int ShuttingDown = 12;
        /// <summary>Sustained input or Pings above the allowed rate.</summary>
        public const int RateLimited = 13;
        /// <summary>Undecodable or misplaced message.</summary>
        public const int ProtocolError = 14;
        /// <summary>A frame or message over the host's limit.</summary>
        public const int MessageTooLarge = 15;
        /// <summary>No Hello in time.</summary>
        public const int HandshakeTimeout = 16;
        /// <summary>Nothing received for too long.</summary>
        public const int IdleTimeout = 17;
        /// <summary>The client did not read fast enough.</summary>
        public const int SlowConsumer = 18;
        /// <summary>The zone refused the join.</summary>
        public const int JoinRefused = 19;
        /// <summary>The reconnect token was refused.</summary>
        public const int ReconnectRefused = 20;
        /// <summary>The zone was stopped, or failed.</summary>
        public const int ZoneStopped = 21;
        /// <summary>Per-address connection cap.</summary>
        public const int TooManyConnections = 22;
        /// <summary>The host failed, or its store did not answer; retry with backoff.</summary>
        public const int InternalError = 23;
        /// <summary>The zone moved to another host; resume there (version 3).</summary>
        public const int ZoneMoved = 24;
        /// <summary>This host lost its lease on the zone; resume elsewhere (version 3).</summary>
        public const int HostFenced = 25;
        /// <summary>The connection attempt took too many hops (version 3).</summary>
        public const int TooManyRedirects = 26;
        /// <summary>The client's content is older than the host accepts; reload (version 5). Final.</summary>
        public const int ContentOutdated = 27;
        /// <summary>A lasting world stopped because its saves failed; retried with backoff (version 9).</summary>
        public const int WorldHalted = 28;
        /// <summary>The player's character was taken into another zone; the session is over (version 10). Final.</summary>
        public const int CharacterMoved = 29;
        /// <summary>Another zone holds the character and could not give it back yet; retried with backoff (version 10).</summary>
        public const int CharacterElsewhere = 30;
        /// <summary>
        /// Banned from the zone, its zone group or the fleet until a time the reason names (<c>banned from &lt;scope&gt;
        /// until &lt;until_ms&gt;: &lt;reason&gt;</c>, read by <see cref="BanInfo.Of"/>); not retried (version 11). A session of an
        /// older version gets JOIN_REFUSED with the same reason instead.
        /// </summary>
        public const int Banned = 31;

        private static readonly string[] Names =
        {
            null, "BAD_TICKET", "TICKET_EXPIRED", "TICKET_NOT_YET_VALID", "TICKET_UNKNOWN_KEY", "TICKET_RETIRED_KEY",
            "TICKET_BAD_ALGORITHM", "TICKET_WRONG_ZONE", "TICKET_REPLAYED", "ZONE_FULL", "VERSION_MISMATCH", "KICKED",
            "SHUTTING_DOWN", "RATE_LIMITED", "PROTOCOL_ERROR", "MESSAGE_TOO_LARGE", "HANDSHAKE_TIMEOUT", "IDLE_TIMEOUT",
            "SLOW_CONSUMER", "JOIN_REFUSED", "RECONNECT_REFUSED", "ZONE_STOPPED", "TOO_MANY_CONNECTIONS", "INTERNAL_ERROR",
            "ZONE_MOVED", "HOST_FENCED", "TOO_MANY_REDIRECTS", "CONTENT_OUTDATED", "WORLD_HALTED", "CHARACTER_MOVED",
            "CHARACTER_ELSEWHERE", "BANNED",
        };

        /// <summary>The protocol's name of a kick code, or <c>UNKNOWN(n)</c>.</summary>
        public static string Name(int code)
        {
            return code > 0 && code < Names.Length ? Names[code] : "UNKNOWN(" + code + ")";
        }

        /// <summary>
        /// Whether a Kick code ends the connection but not the session (§5.3): ZONE_MOVED and HOST_FENCED,
        /// after which the client resumes at once through its entry URL with its reconnect token.
        /// </summary>
        public static bool ResumesElsewhere(int code) { return code == ZoneMoved || code == HostFenced; }
    }
}
