// The server → client messages of PROTOCOL.md §5 other than the Delta (Delta.cs): Welcome, Pong, Kick,
// Redirect, Transfer, InputRefused, KnownSetCheck, Events and Entries.
using System.Collections.Generic;

namespace Zonekeep
{
    /// <summary>A player or an observer.</summary>
    public enum Role
    {
        /// <summary>Plays: sends inputs, controls an entity.</summary>
        Player = 0,
        /// <summary>Watches.</summary>
        Observer = 1,
    }

    /// <summary>§5.1</summary>
    public sealed class Welcome : ServerMessage
    {
        /// <summary>Negotiated protocol version.</summary>
        public uint Version;
        /// <summary>This connection's player (or observer) id.</summary>
        public uint PlayerId;
        /// <summary>Zone id.</summary>
        public string ZoneId = string.Empty;
        /// <summary>Player or observer.</summary>
        public Role Role;
        /// <summary>Simulation ticks per second (1..=1000).</summary>
        public uint TickHz;
        /// <summary>Ticks per Delta (≥ 1).</summary>
        public uint PatchEvery;
        /// <summary>The zone's current tick.</summary>
        public long Tick;
        /// <summary>Feature bits (none defined yet; unknown bits are ignored).</summary>
        public uint Features;
        /// <summary>Milliseconds of client silence after which the host kicks with IDLE_TIMEOUT.</summary>
        public uint IdleTimeoutMs;
        /// <summary>Milliseconds the host waits for a Hello.</summary>
        public uint HandshakeTimeoutMs;
        /// <summary>Milliseconds a dropped player stays resumable with the reconnect token.</summary>
        public uint ReconnectGraceMs;
        /// <summary>Token to resume this player within the grace window.</summary>
        public byte[] ReconnectToken = Empty.Bytes;
        /// <summary>How to decode entities.</summary>
        public Schema Schema;
        /// <summary>The content version the host runs (version 5 on; empty = none or older version).</summary>
        public string ContentVersion = string.Empty;
        /// <summary>Where else the zone may be entered (version 7 on; empty otherwise).</summary>
        public List<string> Entries = new List<string>();
        /// <inheritdoc/>
        public override MessageType Type { get { return MessageType.Welcome; } }
    }

    /// <summary>§5.2</summary>
    public sealed class Pong : ServerMessage
    {
        /// <summary>Echoed from Ping.</summary>
        public long ClientTime;
        /// <summary>Host monotonic clock, microseconds.</summary>
        public long ServerTimeUs;
        /// <summary>Zone tick when the host answered.</summary>
        public long Tick;
        /// <inheritdoc/>
        public override MessageType Type { get { return MessageType.Pong; } }
    }

    /// <summary>§5.3</summary>
    public sealed class Kick : ServerMessage
    {
        /// <summary>A <see cref="KickCode"/> value (unknown codes are kept as-is).</summary>
        public int Code;
        /// <summary>Human-readable reason.</summary>
        public string Reason = string.Empty;
        /// <inheritdoc/>
        public override MessageType Type { get { return MessageType.Kick; } }
    }

    /// <summary>§5.3.1: the answer to a Hello at a host that does not own the zone.</summary>
    public sealed class Redirect : ServerMessage
    {
        /// <summary>The zone's full WebSocket URL at its owner.</summary>
        public string Url = string.Empty;
        /// <summary>The zone there.</summary>
        public string ZoneId = string.Empty;
        /// <inheritdoc/>
        public override MessageType Type { get { return MessageType.Redirect; } }
    }

    /// <summary>§5.3.2 (version 8): the player was moved to another zone.</summary>
    public sealed class Transfer : ServerMessage
    {
        /// <summary>The zone the player now belongs to.</summary>
        public string ZoneId = string.Empty;
        /// <summary>The transfer credential: a single-use ticket for that zone (§8).</summary>
        public string Ticket = string.Empty;
        /// <summary>The zone's full WebSocket URL at its owner.</summary>
        public string Url = string.Empty;
        /// <inheritdoc/>
        public override MessageType Type { get { return MessageType.Transfer; } }
    }

    /// <summary>§5.6: the zone refused input <see cref="Seq"/>; a predictor drops it.</summary>
    public sealed class InputRefused : ServerMessage
    {
        /// <summary>The refused input's sequence number.</summary>
        public uint Seq;
        /// <summary>The zone's reason code (game-defined; 0xFFFF: being moved).</summary>
        public int Code;
        /// <inheritdoc/>
        public override MessageType Type { get { return MessageType.InputRefused; } }
    }

    /// <summary>§5.7: what the client's known set should be after the Delta of <see cref="Tick"/>.</summary>
    public sealed class KnownSetCheck : ServerMessage
    {
        /// <summary>Tick of the last Delta the check covers.</summary>
        public long Tick;
        /// <summary>Entities in the known set.</summary>
        public uint Count;
        /// <summary><see cref="KnownSet.Hash"/> of the known ids, ascending.</summary>
        public uint Hash;
        /// <inheritdoc/>
        public override MessageType Type { get { return MessageType.KnownSetCheck; } }
    }

    /// <summary>§5.9 (version 6): the zone events of the patch of <see cref="Tick"/>.</summary>
    public sealed class EventsMessage : ServerMessage
    {
        /// <summary>The tick whose patch carried them.</summary>
        public long Tick;
        /// <summary>1..=1024 events.</summary>
        public List<ZoneEvent> Events = new List<ZoneEvent>();
        /// <inheritdoc/>
        public override MessageType Type { get { return MessageType.Events; } }
    }

    /// <summary>§5.10 (version 7): where else the zone may be entered, anew.</summary>
    public sealed class Entries : ServerMessage
    {
        /// <summary>At most 8 WebSocket URLs of the zone, its owner first.</summary>
        public List<string> Urls = new List<string>();
        /// <inheritdoc/>
        public override MessageType Type { get { return MessageType.Entries; } }
    }
}
