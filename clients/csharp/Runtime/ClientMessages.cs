// The client → server messages of PROTOCOL.md §4: Hello, Input, Ping, Resync and the Inputs datagram.
using System.Collections.Generic;

namespace Zonekeep
{
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
}
