// The protocol's numbers (PROTOCOL.md §4, §5, §7): message tags, size and count limits, and the protocol
// versions this SDK speaks with what each added.

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
        /// <summary>Chat: a line said on a channel (version 11).</summary>
        public const byte Chat = 0x06;
        /// <summary>ChatReport: lines reported to the moderators (version 11).</summary>
        public const byte ChatReport = 0x07;
        /// <summary>ChatHistory: a page of a channel's stored lines (version 11).</summary>
        public const byte ChatHistory = 0x08;
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
        /// <summary>ChatLines: lines of one channel (version 11).</summary>
        public const byte ChatLines = 0x8c;
        /// <summary>ChatReply: a report filed, or a chat message refused (version 11).</summary>
        public const byte ChatReply = 0x8d;
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
        /// The versions this SDK implements and offers by default, as the TypeScript SDK: 6 to 11 (over
        /// WebSocket version 6 is byte for byte version 5; a host of an earlier release picks 10, 9, 8, 7 or 6).
        /// </summary>
        public static readonly uint[] Supported = { 6, 7, 8, 9, 10, 11 };
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
        /// <summary>
        /// The version that added chat (Chat, ChatReport, ChatHistory, ChatLines, ChatReply) and the Kick code
        /// BANNED. A host sends a session of an older version none of them (JOIN_REFUSED in place of BANNED).
        /// </summary>
        public const uint Chat = 11;
        /// <summary>Welcome's feature bit 0 (version 11): the host keeps chat (a host without a store does not).</summary>
        public const uint FeatureChat = 1;
    }
}
