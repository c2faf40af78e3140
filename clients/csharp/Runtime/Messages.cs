// Every message of PROTOCOL.md §4–§5: encode and total decode. Client → server tags are 0x01..=0x7f,
// server → client 0x80..=0xff. A Delta (or a State, its datagram form) can only be decoded with its
// context (the schema from Welcome and the known set), so DecodeServer takes that context.
//
// The messages are in ClientMessages.cs and ServerMessages.cs, their codec in MessageCodec.cs (what both
// directions share), MessageCodec.Client.cs and MessageCodec.Server.cs.

namespace Zonekeep
{
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
        /// <summary>Chat (version 11): a line said on a channel.</summary>
        Chat,
        /// <summary>ChatReport (version 11).</summary>
        ChatReport,
        /// <summary>ChatHistory (version 11).</summary>
        ChatHistory,
        /// <summary>ChatLines (version 11).</summary>
        ChatLines,
        /// <summary>ChatReply (version 11).</summary>
        ChatReply,
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
}
