// What a ZoneConnection tells the game: its lifecycle state, what its events carry, and its counters.
using System;

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
}
