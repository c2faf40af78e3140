// Every message of PROTOCOL.md §4–§5: encode and total decode. Client → server tags are 0x01..=0x7f,
// server → client 0x80..=0xff. A Delta (or a State, its datagram form) can only be decoded with its
// context (the schema from Welcome and the known set), so DecodeServer takes that context.
using System;
using System.Collections.Generic;

namespace Zonekeep
{
    /// <summary>Message tags (§4, §5).</summary>
    public static class Tag
    {
        /// <summary>Hello (§4.1).</summary>
        public const byte Hello = 0x01;
        /// <summary>Input (§4.2).</summary>
        public const byte Input = 0x02;
        /// <summary>Ping (§4.3).</summary>
        public const byte Ping = 0x03;
        /// <summary>Resync (§4.4).</summary>
        public const byte Resync = 0x04;
        /// <summary>The Inputs datagram (§4.5, version 6).</summary>
        public const byte Inputs = 0x05;
        /// <summary>Welcome (§5.1).</summary>
        public const byte Welcome = 0x81;
        /// <summary>Delta (§5.5).</summary>
        public const byte Delta = 0x82;
        /// <summary>Pong (§5.2).</summary>
        public const byte Pong = 0x83;
        /// <summary>Kick (§5.3).</summary>
        public const byte Kick = 0x84;
        /// <summary>Redirect (§5.3.1).</summary>
        public const byte Redirect = 0x85;
        /// <summary>Transfer (§5.3.2).</summary>
        public const byte Transfer = 0x86;
        /// <summary>InputRefused (§5.6).</summary>
        public const byte InputRefused = 0x87;
        /// <summary>KnownSetCheck (§5.7).</summary>
        public const byte KnownSetCheck = 0x88;
        /// <summary>The State datagram (§5.8, version 6).</summary>
        public const byte State = 0x89;
        /// <summary>Events on a WebTransport session's control stream (§5.9).</summary>
        public const byte Events = 0x8a;
        /// <summary>Entries (§5.10, version 7).</summary>
        public const byte Entries = 0x8b;
    }

    /// <summary>Size and count limits of §7.</summary>
    public static class Limits
    {
        /// <summary>Bytes of a client → server message.</summary>
        public const int ClientMessage = 8192;
        /// <summary>Bytes of a server → client message (decoders refuse larger).</summary>
        public const int ServerMessage = 1048576;
        /// <summary>Protocol versions a Hello offers at most.</summary>
        public const int Versions = 8;
        /// <summary>Bytes of a ticket.</summary>
        public const int Ticket = 4096;
        /// <summary>Bytes of a reconnect token.</summary>
        public const int ReconnectToken = 64;
        /// <summary>Bytes of a zone id.</summary>
        public const int ZoneId = 128;
        /// <summary>Bytes of a content version.</summary>
        public const int ContentVersion = 64;
        /// <summary>Bytes of a kick reason.</summary>
        public const int KickReason = 256;
        /// <summary>Bytes of an input payload.</summary>
        public const int InputPayload = 4096;
        /// <summary>Bytes of a URL (Redirect, Transfer, entries).</summary>
        public const int Url = 512;
        /// <summary>Entry URLs a Welcome or Entries lists (§5.3.1, version 7).</summary>
        public const int Entries = 8;
        /// <summary>Redirects a client follows in one connection attempt (§5.3.1).</summary>
        public const int Redirects = 3;
        /// <summary>Inputs one Inputs datagram carries (§4.5).</summary>
        public const int DatagramInputs = 8;
        /// <summary>States a client keeps to apply onto (§5.8).</summary>
        public const int StateRing = 32;
    }

    /// <summary>Protocol versions and what each added (§4.1).</summary>
    public static class ProtocolVersions
    {
        /// <summary>
        /// The versions this SDK implements and offers by default, as the TypeScript SDK: 6 to 10 (over
        /// WebSocket version 6 is byte for byte version 5; a host of an earlier release picks 9, 8, 7 or 6).
        /// </summary>
        public static readonly uint[] Supported = { 6, 7, 8, 9, 10 };
        /// <summary>The version that added <c>resume_from</c> to Hello (§4.1.1).</summary>
        public const uint ResumeFrom = 4;
        /// <summary>The version that added Welcome's content version and CONTENT_OUTDATED (§4.1.2).</summary>
        public const uint ContentVersion = 5;
        /// <summary>The version that added WebTransport datagrams (§1.1).</summary>
        public const uint Datagram = 6;
        /// <summary>The version that added Welcome's <c>entries</c> and the Entries message (§5.3.1).</summary>
        public const uint Entries = 7;
        /// <summary>The version that added Transfer (§5.3.2).</summary>
        public const uint Transfer = 8;
        /// <summary>The version that added WORLD_HALTED (§5.3).</summary>
        public const uint Halt = 9;
        /// <summary>The version that added CHARACTER_MOVED and CHARACTER_ELSEWHERE (§5.3).</summary>
        public const uint Character = 10;
    }

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

        private static readonly string[] Names =
        {
            null, "BAD_TICKET", "TICKET_EXPIRED", "TICKET_NOT_YET_VALID", "TICKET_UNKNOWN_KEY", "TICKET_RETIRED_KEY",
            "TICKET_BAD_ALGORITHM", "TICKET_WRONG_ZONE", "TICKET_REPLAYED", "ZONE_FULL", "VERSION_MISMATCH", "KICKED",
            "SHUTTING_DOWN", "RATE_LIMITED", "PROTOCOL_ERROR", "MESSAGE_TOO_LARGE", "HANDSHAKE_TIMEOUT", "IDLE_TIMEOUT",
            "SLOW_CONSUMER", "JOIN_REFUSED", "RECONNECT_REFUSED", "ZONE_STOPPED", "TOO_MANY_CONNECTIONS", "INTERNAL_ERROR",
            "ZONE_MOVED", "HOST_FENCED", "TOO_MANY_REDIRECTS", "CONTENT_OUTDATED", "WORLD_HALTED", "CHARACTER_MOVED",
            "CHARACTER_ELSEWHERE",
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

    /// <summary>What kind of message a <see cref="ProtocolMessage"/> is.</summary>
    public enum MessageType
    {
        /// <summary>§4.1</summary>
        Hello,
        /// <summary>§4.2</summary>
        Input,
        /// <summary>§4.3</summary>
        Ping,
        /// <summary>§4.4</summary>
        Resync,
        /// <summary>§4.5</summary>
        Inputs,
        /// <summary>§5.1</summary>
        Welcome,
        /// <summary>§5.5</summary>
        Delta,
        /// <summary>§5.8</summary>
        State,
        /// <summary>§5.2</summary>
        Pong,
        /// <summary>§5.3</summary>
        Kick,
        /// <summary>§5.3.1</summary>
        Redirect,
        /// <summary>§5.3.2</summary>
        Transfer,
        /// <summary>§5.6</summary>
        InputRefused,
        /// <summary>§5.7</summary>
        KnownSetCheck,
        /// <summary>§5.9</summary>
        Events,
        /// <summary>§5.10</summary>
        Entries,
    }

    /// <summary>Any protocol message.</summary>
    public abstract class ProtocolMessage
    {
        /// <summary>Which message this is.</summary>
        public abstract MessageType Type { get; }
    }

    /// <summary>A client → server message.</summary>
    public abstract class ClientMessage : ProtocolMessage { }

    /// <summary>A server → client message.</summary>
    public abstract class ServerMessage : ProtocolMessage { }

    /// <summary>§4.1.1: what a resuming client's known set holds.</summary>
    public sealed class ResumeFrom
    {
        /// <summary>Tick of the last Delta applied.</summary>
        public long Tick;
        /// <summary>Entities in the known set.</summary>
        public uint Count;
        /// <summary><see cref="KnownSet.Hash"/> of the known ids, ascending.</summary>
        public uint Hash;
    }

    /// <summary>§4.1</summary>
    public sealed class Hello : ClientMessage
    {
        /// <summary>Protocol versions offered (1..=8, distinct).</summary>
        public uint[] Versions;
        /// <summary>The signed ticket.</summary>
        public string Ticket;
        /// <summary>Token from an earlier Welcome; empty = none.</summary>
        public byte[] ReconnectToken = Empty.Bytes;
        /// <summary>The content version the client was built for (§4.1.2); empty = none.</summary>
        public string ContentVersion = string.Empty;
        /// <summary>§4.1.1: null = absent.</summary>
        public ResumeFrom ResumeFrom;
        /// <inheritdoc/>
        public override MessageType Type { get { return MessageType.Hello; } }
    }

    /// <summary>§4.2 Input. (Named InputMessage so it never clashes with a game engine's own Input class.)</summary>
    public sealed class InputMessage : ClientMessage
    {
        /// <summary>Sequence, from 1, +1 per input.</summary>
        public uint Seq;
        /// <summary>The server tick the client was displaying.</summary>
        public long ViewTick;
        /// <summary>Game-defined input bytes.</summary>
        public byte[] Payload = Empty.Bytes;
        /// <inheritdoc/>
        public override MessageType Type { get { return MessageType.Input; } }
    }

    /// <summary>One input inside an <see cref="Inputs"/> datagram: the fields of <see cref="InputMessage"/>.</summary>
    public sealed class DatagramInput
    {
        /// <summary>Sequence.</summary>
        public uint Seq;
        /// <summary>The server tick the client was displaying.</summary>
        public long ViewTick;
        /// <summary>Game-defined input bytes.</summary>
        public byte[] Payload = Empty.Bytes;
    }

    /// <summary>§4.5 (version 6, a WebTransport datagram).</summary>
    public sealed class Inputs : ClientMessage
    {
        /// <summary>Tick of the newest State the client applied; 0 = none yet.</summary>
        public long StateAck;
        /// <summary>At most 8, seq strictly ascending; may be empty.</summary>
        public List<DatagramInput> Items = new List<DatagramInput>();
        /// <inheritdoc/>
        public override MessageType Type { get { return MessageType.Inputs; } }
    }

    /// <summary>§4.3</summary>
    public sealed class Ping : ClientMessage
    {
        /// <summary>Opaque to the server; echoed in Pong.</summary>
        public long ClientTime;
        /// <inheritdoc/>
        public override MessageType Type { get { return MessageType.Ping; } }
    }

    /// <summary>§4.4: the client's known set failed a check; it asks for a BASELINE.</summary>
    public sealed class Resync : ClientMessage
    {
        /// <summary>Tick of the last Delta the client applied (0 = none).</summary>
        public long Tick;
        /// <inheritdoc/>
        public override MessageType Type { get { return MessageType.Resync; } }
    }

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

    /// <summary>What decoding a Delta needs: the schema from Welcome and the known set before the Delta.</summary>
    public sealed class DeltaContext
    {
        /// <summary>Schema from Welcome.</summary>
        public Schema Schema;
        /// <summary>(id, kind) ascending.</summary>
        public IReadOnlyList<KnownEntry> Known;

        /// <summary>A context of <paramref name="schema"/> and <paramref name="known"/>.</summary>
        public DeltaContext(Schema schema, IReadOnlyList<KnownEntry> known) { Schema = schema; Known = known; }
    }

    /// <summary>The known-set hash of §5.7.</summary>
    public static class KnownSet
    {
        /// <summary>FNV-1a (32 bit) over each id's four little-endian bytes, in order.</summary>
        public static uint Hash(IReadOnlyList<uint> ids)
        {
            uint h = 0x811c9dc5;
            for (int i = 0; i < ids.Count; i++)
            {
                uint id = ids[i];
                for (int k = 0; k < 4; k++)
                {
                    h ^= (id >> (8 * k)) & 0xff;
                    unchecked { h *= 0x01000193; }
                }
            }
            return h;
        }
    }

    /// <summary>Content versions (§4.1.2).</summary>
    public static class ContentVersions
    {
        private static List<string> Parse(string v)
        {
            if (string.IsNullOrEmpty(v) || System.Text.Encoding.UTF8.GetByteCount(v) > Limits.ContentVersion) return null;
            string[] raw = v.Split('.');
            List<string> parts = new List<string>(raw.Length);
            foreach (string p in raw)
            {
                if (p.Length == 0) return null;
                foreach (char c in p) if (c < '0' || c > '9') return null;
                parts.Add(p.TrimStart('0'));
            }
            while (parts.Count > 0 && parts[parts.Count - 1].Length == 0) parts.RemoveAt(parts.Count - 1);
            return parts;
        }

        /// <summary>
        /// Compares two dotted content versions numerically, component by component, a missing component
        /// counting as 0: negative when <paramref name="a"/> is older, 0 when the same, positive when newer;
        /// null when either is not a dotted number (empty included) or is longer than 64 bytes.
        /// </summary>
        public static int? Compare(string a, string b)
        {
            List<string> pa = Parse(a);
            List<string> pb = Parse(b);
            if (pa == null || pb == null) return null;
            int n = Math.Max(pa.Count, pb.Count);
            for (int i = 0; i < n; i++)
            {
                string x = i < pa.Count ? pa[i] : string.Empty;
                string y = i < pb.Count ? pb[i] : string.Empty;
                // Without leading zeros, the longer run of digits is the larger number (no precision limit).
                if (x.Length != y.Length) return x.Length < y.Length ? -1 : 1;
                int c = string.CompareOrdinal(x, y);
                if (c != 0) return c < 0 ? -1 : 1;
            }
            return 0;
        }
    }

    /// <summary>Encode and total decode of every message.</summary>
    public static class MessageCodec
    {
        /// <summary>
        /// The URL a Redirect (or Transfer, or listed entry) leads to, or null when it is not an absolute
        /// <c>ws://</c> or <c>wss://</c> URL, which a client must refuse (§5.3.1): a ticket goes nowhere but to a
        /// zone host. The scheme is matched without regard to case.
        /// </summary>
        public static string WebSocketTarget(string url)
        {
            if (url == null) return null;
            int i = url.IndexOf("://", StringComparison.Ordinal);
            if (i < 0) return null;
            string scheme = url.Substring(0, i).ToLowerInvariant();
            string rest = url.Substring(i + 3);
            // An empty authority (ws:///zones/a) names no host.
            if ((scheme != "ws" && scheme != "wss") || rest.Length == 0 || rest[0] == '/') return null;
            return url;
        }

        /// <summary>The URLs of <paramref name="entries"/> a client may connect to: absolute ws:// or wss:// URLs.</summary>
        public static List<string> WebSocketEntries(IEnumerable<string> entries)
        {
            List<string> out_ = new List<string>();
            if (entries == null) return out_;
            foreach (string e in entries) if (WebSocketTarget(e) != null) out_.Add(e);
            return out_;
        }

        /// <summary>The tag of a message without decoding it (empty input is a <see cref="ProtocolException"/>).</summary>
        public static byte PeekTag(byte[] bytes)
        {
            if (bytes == null || bytes.Length == 0) throw new ProtocolException(DecodeErrorKind.Truncated, "empty message");
            return bytes[0];
        }

        private static void CheckResumeFrom(uint[] versions, byte[] token, bool present, bool decode)
        {
            if (!present) return;
            string problem = null;
            if (token == null || token.Length == 0) problem = "Hello has resume_from without a reconnect token";
            else
            {
                bool any = false;
                foreach (uint v in versions) if (v >= ProtocolVersions.ResumeFrom) any = true;
                if (!any) problem = "Hello has resume_from without offering version 4 or later";
            }
            if (problem != null) throw Err(decode, problem);
        }

        private static void CheckVersions(uint[] versions, bool decode)
        {
            if (versions == null || versions.Length < 1 || versions.Length > Limits.Versions) throw Err(decode, "versions count not in 1..=8");
            for (int i = 0; i < versions.Length; i++)
                for (int j = 0; j < i; j++)
                    if (versions[i] == versions[j]) throw Err(decode, "versions are not distinct");
        }

        private static Exception Err(bool decode, string m)
        {
            return decode ? (Exception)new ProtocolException(DecodeErrorKind.Invalid, m) : new EncodeException(EncodeErrorKind.Invalid, m);
        }

        private static void WriteInput(Writer w, uint seq, long viewTick, byte[] payload)
        {
            if (seq == 0) throw new EncodeException(EncodeErrorKind.Invalid, "input seq 0");
            w.Varint((ulong)seq).Varint(viewTick);
            w.BytesField(payload, Limits.InputPayload, "input payload");
        }

        private static DatagramInput ReadInput(Reader r)
        {
            uint seq = r.VarintU32();
            if (seq == 0) throw new ProtocolException(DecodeErrorKind.Invalid, "input seq 0");
            long viewTick = r.VarintU64AsLong();
            return new DatagramInput { Seq = seq, ViewTick = viewTick, Payload = r.BytesField(Limits.InputPayload, "input payload") };
        }

        /// <summary>Encodes a client → server message.</summary>
        public static byte[] EncodeClient(ClientMessage m)
        {
            Writer w = new Writer(64);
            EncodeClient(m, w);
            return w.ToArray();
        }

        /// <summary>Encodes a client → server message into <paramref name="w"/> (after what it holds).</summary>
        public static void EncodeClient(ClientMessage m, Writer w)
        {
            int start = w.Length;
            switch (m.Type)
            {
                case MessageType.Hello:
                {
                    Hello h = (Hello)m;
                    CheckVersions(h.Versions, false);
                    w.U8(Tag.Hello).Varint((ulong)h.Versions.Length);
                    foreach (uint v in h.Versions) w.Varint((ulong)v);
                    w.Str(h.Ticket, Limits.Ticket, "ticket");
                    w.BytesField(h.ReconnectToken, Limits.ReconnectToken, "reconnect token");
                    w.Str(h.ContentVersion, Limits.ContentVersion, "content version");
                    CheckResumeFrom(h.Versions, h.ReconnectToken, h.ResumeFrom != null, false);
                    if (h.ResumeFrom != null) w.U8(1).Varint(h.ResumeFrom.Tick).Varint((ulong)h.ResumeFrom.Count).U32Le(h.ResumeFrom.Hash);
                    break;
                }
                case MessageType.Input:
                {
                    InputMessage i = (InputMessage)m;
                    w.U8(Tag.Input);
                    WriteInput(w, i.Seq, i.ViewTick, i.Payload);
                    break;
                }
                case MessageType.Inputs:
                {
                    Inputs d = (Inputs)m;
                    if (d.Items.Count > Limits.DatagramInputs)
                        throw new EncodeException(EncodeErrorKind.TooLong, "inputs in a datagram: " + d.Items.Count + " > " + Limits.DatagramInputs);
                    for (int i = 1; i < d.Items.Count; i++)
                        if (d.Items[i - 1].Seq >= d.Items[i].Seq) throw new EncodeException(EncodeErrorKind.Invalid, "datagram inputs not ascending by seq");
                    w.U8(Tag.Inputs).Varint(d.StateAck).Varint((ulong)d.Items.Count);
                    foreach (DatagramInput i in d.Items) WriteInput(w, i.Seq, i.ViewTick, i.Payload);
                    break;
                }
                case MessageType.Ping:
                    w.U8(Tag.Ping).Varint(((Ping)m).ClientTime);
                    break;
                case MessageType.Resync:
                    w.U8(Tag.Resync).Varint(((Resync)m).Tick);
                    break;
                default:
                    throw new EncodeException(EncodeErrorKind.Invalid, "not a client message: " + m.Type);
            }
            if (w.Length - start > Limits.ClientMessage) throw new EncodeException(EncodeErrorKind.TooLong, "client message over 8192 bytes");
        }

        /// <summary>Decodes a client → server message (what a host or a test server reads).</summary>
        public static ClientMessage DecodeClient(byte[] bytes)
        {
            if (bytes.Length > Limits.ClientMessage) throw new ProtocolException(DecodeErrorKind.TooLong, "client message of " + bytes.Length + " bytes");
            Reader r = new Reader(bytes);
            byte tag = r.U8();
            ClientMessage m;
            switch (tag)
            {
                case Tag.Hello:
                {
                    int n = r.Count(Limits.Versions, "versions");
                    if (n < 1) throw new ProtocolException(DecodeErrorKind.Invalid, "Hello offers no version");
                    uint[] versions = new uint[n];
                    for (int i = 0; i < n; i++) versions[i] = r.VarintU32();
                    CheckVersions(versions, true);
                    Hello h = new Hello { Versions = versions };
                    h.Ticket = r.Str(Limits.Ticket, "ticket");
                    h.ReconnectToken = r.BytesField(Limits.ReconnectToken, "reconnect token");
                    h.ContentVersion = r.Str(Limits.ContentVersion, "content version");
                    // Absent unless bytes follow the content version (§4.1.1).
                    if (r.Remaining > 0)
                    {
                        if (r.U8() != 1) throw new ProtocolException(DecodeErrorKind.Invalid, "Hello resume_from marker is not 1");
                        // Refused at the marker (§4.1.1): what follows it is not read.
                        CheckResumeFrom(versions, h.ReconnectToken, true, true);
                        long tick = r.VarintU64AsLong();
                        uint count = r.VarintU32();
                        uint hash = r.U32Le();
                        h.ResumeFrom = new ResumeFrom { Tick = tick, Count = count, Hash = hash };
                    }
                    m = h;
                    break;
                }
                case Tag.Input:
                {
                    DatagramInput i = ReadInput(r);
                    m = new InputMessage { Seq = i.Seq, ViewTick = i.ViewTick, Payload = i.Payload };
                    break;
                }
                case Tag.Inputs:
                {
                    long stateAck = r.VarintU64AsLong();
                    int n = r.Count(Limits.DatagramInputs, "inputs in a datagram");
                    Inputs d = new Inputs { StateAck = stateAck };
                    for (int i = 0; i < n; i++)
                    {
                        DatagramInput input = ReadInput(r);
                        if (d.Items.Count > 0 && d.Items[d.Items.Count - 1].Seq >= input.Seq)
                            throw new ProtocolException(DecodeErrorKind.Invalid, "datagram inputs not ascending by seq");
                        d.Items.Add(input);
                    }
                    m = d;
                    break;
                }
                case Tag.Ping:
                    m = new Ping { ClientTime = r.VarintU64AsLong() };
                    break;
                case Tag.Resync:
                    m = new Resync { Tick = r.VarintU64AsLong() };
                    break;
                default:
                    throw new ProtocolException(DecodeErrorKind.UnknownTag, "client tag 0x" + tag.ToString("x"));
            }
            r.Finish();
            return m;
        }

        private static void WriteEntries(Writer w, List<string> entries)
        {
            if (entries == null) entries = new List<string>();
            if (entries.Count > Limits.Entries) throw new EncodeException(EncodeErrorKind.TooLong, "entries: " + entries.Count + " > " + Limits.Entries);
            w.Varint((ulong)entries.Count);
            foreach (string e in entries) w.Str(e, Limits.Url, "entry url");
        }

        private static List<string> ReadEntries(Reader r)
        {
            int n = r.Count(Limits.Entries, "entries");
            List<string> entries = new List<string>(n);
            for (int i = 0; i < n; i++) entries.Add(r.Str(Limits.Url, "entry url"));
            return entries;
        }

        private static void WriteEvents(Writer w, List<ZoneEvent> events)
        {
            foreach (ZoneEvent ev in events)
            {
                if (ev.Topic < 0 || ev.Topic > 0xffff) throw new EncodeException(EncodeErrorKind.Invalid, "event topic " + ev.Topic);
                w.Varint((ulong)ev.Topic).BytesField(ev.Payload, DeltaLimits.EventPayload, "event payload");
            }
        }

        /// <summary>Encodes a server → client message; a Delta or a State needs its context.</summary>
        public static byte[] EncodeServer(ServerMessage m, DeltaContext ctx = null)
        {
            Writer w = new Writer(128);
            switch (m.Type)
            {
                case MessageType.Welcome:
                {
                    Welcome x = (Welcome)m;
                    if (x.TickHz < 1 || x.TickHz > 1000) throw new EncodeException(EncodeErrorKind.Invalid, "tick_hz not in 1..=1000");
                    if (x.PatchEvery < 1) throw new EncodeException(EncodeErrorKind.Invalid, "patch_every must be >= 1");
                    string contentVersion = x.ContentVersion ?? string.Empty;
                    if (x.Version < ProtocolVersions.ContentVersion && contentVersion.Length != 0)
                        throw new EncodeException(EncodeErrorKind.Invalid, "Welcome content_version needs version 5");
                    List<string> entries = x.Entries ?? new List<string>();
                    if (x.Version < ProtocolVersions.Entries && entries.Count > 0)
                        throw new EncodeException(EncodeErrorKind.Invalid, "Welcome entries need version 7");
                    w.U8(Tag.Welcome).Varint((ulong)x.Version).Varint((ulong)x.PlayerId);
                    w.Str(x.ZoneId, Limits.ZoneId, "zone id");
                    w.U8(x.Role == Role.Player ? 0 : 1);
                    w.Varint((ulong)x.TickHz).Varint((ulong)x.PatchEvery).Varint(x.Tick).Varint((ulong)x.Features);
                    w.Varint((ulong)x.IdleTimeoutMs).Varint((ulong)x.HandshakeTimeoutMs).Varint((ulong)x.ReconnectGraceMs);
                    w.BytesField(x.ReconnectToken, Limits.ReconnectToken, "reconnect token");
                    SchemaCodec.Encode(w, x.Schema);
                    // Version 5 on: the host's content version follows the schema (§5.1).
                    if (x.Version >= ProtocolVersions.ContentVersion) w.Str(contentVersion, Limits.ContentVersion, "content version");
                    // Version 7 on: the entry URLs follow the content version (§5.1).
                    if (x.Version >= ProtocolVersions.Entries) WriteEntries(w, entries);
                    break;
                }
                case MessageType.Delta:
                case MessageType.State:
                {
                    if (ctx == null) throw new EncodeException(EncodeErrorKind.Invalid, "a Delta needs a schema and known set");
                    Delta d = (Delta)m;
                    bool state = d.Base.HasValue;
                    w.U8(state ? Tag.State : Tag.Delta);
                    DeltaCodec.EncodeBody(w, d, ctx.Schema, ctx.Known, state);
                    break;
                }
                case MessageType.Entries:
                    w.U8(Tag.Entries);
                    WriteEntries(w, ((Entries)m).Urls);
                    break;
                case MessageType.Events:
                {
                    EventsMessage e = (EventsMessage)m;
                    if (e.Events.Count == 0) throw new EncodeException(EncodeErrorKind.Invalid, "an Events message carries no events");
                    if (e.Events.Count > DeltaLimits.Events) throw new EncodeException(EncodeErrorKind.TooLong, "events: " + e.Events.Count);
                    w.U8(Tag.Events).Varint(e.Tick).Varint((ulong)e.Events.Count);
                    WriteEvents(w, e.Events);
                    break;
                }
                case MessageType.Pong:
                {
                    Pong p = (Pong)m;
                    w.U8(Tag.Pong).Varint(p.ClientTime).Varint(p.ServerTimeUs).Varint(p.Tick);
                    break;
                }
                case MessageType.Kick:
                {
                    Kick k = (Kick)m;
                    if (k.Code < 0 || k.Code > 0xffff) throw new EncodeException(EncodeErrorKind.Invalid, "kick code " + k.Code);
                    w.U8(Tag.Kick).Varint((ulong)k.Code).Str(k.Reason, Limits.KickReason, "kick reason");
                    break;
                }
                case MessageType.Redirect:
                {
                    Redirect r = (Redirect)m;
                    w.U8(Tag.Redirect).Str(r.Url, Limits.Url, "url").Str(r.ZoneId, Limits.ZoneId, "zone id");
                    break;
                }
                case MessageType.Transfer:
                {
                    Transfer t = (Transfer)m;
                    w.U8(Tag.Transfer).Str(t.ZoneId, Limits.ZoneId, "zone id");
                    w.Str(t.Ticket, Limits.Ticket, "ticket").Str(t.Url, Limits.Url, "url");
                    break;
                }
                case MessageType.InputRefused:
                {
                    InputRefused i = (InputRefused)m;
                    if (i.Seq == 0) throw new EncodeException(EncodeErrorKind.Invalid, "input seq 0");
                    if (i.Code < 0 || i.Code > 0xffff) throw new EncodeException(EncodeErrorKind.Invalid, "refusal code " + i.Code);
                    w.U8(Tag.InputRefused).Varint((ulong)i.Seq).Varint((ulong)i.Code);
                    break;
                }
                case MessageType.KnownSetCheck:
                {
                    KnownSetCheck c = (KnownSetCheck)m;
                    w.U8(Tag.KnownSetCheck).Varint(c.Tick).Varint((ulong)c.Count).U32Le(c.Hash);
                    break;
                }
                default:
                    throw new EncodeException(EncodeErrorKind.Invalid, "not a server message: " + m.Type);
            }
            if (w.Length > Limits.ServerMessage) throw new EncodeException(EncodeErrorKind.TooLong, "server message over 1 MiB");
            return w.ToArray();
        }

        /// <summary>
        /// Decodes a server → client message. A Delta (or a State) is decoded against <paramref name="ctx"/>;
        /// without one it is a <see cref="ProtocolException"/> (a Delta before Welcome is out of place).
        /// </summary>
        public static ServerMessage DecodeServer(byte[] bytes, DeltaContext ctx = null)
        {
            if (bytes.Length > Limits.ServerMessage) throw new ProtocolException(DecodeErrorKind.TooLong, "server message of " + bytes.Length + " bytes");
            Reader r = new Reader(bytes);
            byte tag = r.U8();
            ServerMessage m;
            switch (tag)
            {
                case Tag.Welcome:
                {
                    Welcome x = new Welcome();
                    x.Version = r.VarintU32();
                    x.PlayerId = r.VarintU32();
                    x.ZoneId = r.Str(Limits.ZoneId, "zone id");
                    byte role = r.U8();
                    if (role > 1) throw new ProtocolException(DecodeErrorKind.Invalid, "role " + role);
                    x.Role = role == 0 ? Role.Player : Role.Observer;
                    x.TickHz = r.VarintU32();
                    if (x.TickHz < 1 || x.TickHz > 1000) throw new ProtocolException(DecodeErrorKind.Invalid, "tick_hz " + x.TickHz);
                    x.PatchEvery = r.VarintU32();
                    if (x.PatchEvery < 1) throw new ProtocolException(DecodeErrorKind.Invalid, "patch_every 0");
                    x.Tick = r.VarintU64AsLong();
                    x.Features = r.VarintU32();
                    x.IdleTimeoutMs = r.VarintU32();
                    x.HandshakeTimeoutMs = r.VarintU32();
                    x.ReconnectGraceMs = r.VarintU32();
                    x.ReconnectToken = r.BytesField(Limits.ReconnectToken, "reconnect token");
                    x.Schema = SchemaCodec.Decode(r);
                    x.ContentVersion = x.Version >= ProtocolVersions.ContentVersion ? r.Str(Limits.ContentVersion, "content version") : string.Empty;
                    x.Entries = x.Version >= ProtocolVersions.Entries ? ReadEntries(r) : new List<string>();
                    m = x;
                    break;
                }
                case Tag.Delta:
                    if (ctx == null) throw new ProtocolException(DecodeErrorKind.Invalid, "a Delta needs a schema and known set");
                    m = DeltaCodec.DecodeBody(r, ctx.Schema, ctx.Known, false);
                    break;
                case Tag.State:
                    if (ctx == null) throw new ProtocolException(DecodeErrorKind.Invalid, "a State needs a schema and known set");
                    m = DeltaCodec.DecodeBody(r, ctx.Schema, ctx.Known, true);
                    break;
                case Tag.Events:
                {
                    long tick = r.VarintU64AsLong();
                    int n = r.Count(DeltaLimits.Events, "events");
                    if (n == 0) throw new ProtocolException(DecodeErrorKind.Invalid, "an Events message carries no events");
                    EventsMessage e = new EventsMessage { Tick = tick };
                    for (int i = 0; i < n; i++)
                    {
                        int topic = r.VarintU16();
                        e.Events.Add(new ZoneEvent(topic, r.BytesField(DeltaLimits.EventPayload, "event payload")));
                    }
                    m = e;
                    break;
                }
                case Tag.Entries:
                    m = new Entries { Urls = ReadEntries(r) };
                    break;
                case Tag.Pong:
                {
                    long clientTime = r.VarintU64AsLong();
                    long serverTimeUs = r.VarintU64AsLong();
                    m = new Pong { ClientTime = clientTime, ServerTimeUs = serverTimeUs, Tick = r.VarintU64AsLong() };
                    break;
                }
                case Tag.Kick:
                {
                    int code = r.VarintU16();
                    m = new Kick { Code = code, Reason = r.Str(Limits.KickReason, "kick reason") };
                    break;
                }
                case Tag.Redirect:
                {
                    string url = r.Str(Limits.Url, "url");
                    m = new Redirect { Url = url, ZoneId = r.Str(Limits.ZoneId, "zone id") };
                    break;
                }
                case Tag.Transfer:
                {
                    string zoneId = r.Str(Limits.ZoneId, "zone id");
                    string ticket = r.Str(Limits.Ticket, "ticket");
                    m = new Transfer { ZoneId = zoneId, Ticket = ticket, Url = r.Str(Limits.Url, "url") };
                    break;
                }
                case Tag.InputRefused:
                {
                    uint seq = r.VarintU32();
                    if (seq == 0) throw new ProtocolException(DecodeErrorKind.Invalid, "input seq 0");
                    m = new InputRefused { Seq = seq, Code = r.VarintU16() };
                    break;
                }
                case Tag.KnownSetCheck:
                {
                    long tick = r.VarintU64AsLong();
                    uint count = r.VarintU32();
                    m = new KnownSetCheck { Tick = tick, Count = count, Hash = r.U32Le() };
                    break;
                }
                default:
                    throw new ProtocolException(DecodeErrorKind.UnknownTag, "server tag 0x" + tag.ToString("x"));
            }
            r.Finish();
            return m;
        }
    }
}
