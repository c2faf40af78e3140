// The chat messages of protocol version 11: Chat, ChatReport and ChatHistory (client → server), ChatLines and
// ChatReply (server → client), their limits and the ChatReply codes. They exist only in a session that
// negotiated version 11 (ProtocolVersions.Chat); their codec is in MessageCodec.Chat.cs.
using System.Collections.Generic;

namespace Zonekeep
{
    /// <summary>Size and count limits of the chat messages (§7).</summary>
    public static class ChatLimits
    {
        /// <summary>Bytes of a channel name (<c>zone:&lt;id&gt;</c>, <c>group:&lt;name&gt;</c>, <c>dm:&lt;principal&gt;</c>).</summary>
        public const int Channel = 300;
        /// <summary>Bytes of a line's body on the wire (a host may allow fewer: <c>chat_max_line</c>, default 500).</summary>
        public const int Body = 1024;
        /// <summary>Bytes of a line's sender (a principal).</summary>
        public const int Sender = 256;
        /// <summary>Bytes of a report's reason.</summary>
        public const int Reason = 500;
        /// <summary>Bytes of a ChatReply's text.</summary>
        public const int ReplyText = 1024;
        /// <summary>Lines one ChatReport names, at least 1.</summary>
        public const int ReportSeqs = 20;
        /// <summary>Lines one ChatHistory asks for, at least 1.</summary>
        public const int HistoryLimit = 200;
        /// <summary>Lines one ChatLines carries.</summary>
        public const int Lines = 200;
    }

    /// <summary>ChatReply codes. Unknown codes decode fine (a newer host may add some).</summary>
    public static class ChatReplyCode
    {
        /// <summary>A report was filed; the reply's text is the report id.</summary>
        public const int Ok = 0;
        /// <summary>Too many lines too fast; <see cref="ChatReply.UntilMs"/> says when the sender may speak again.</summary>
        public const int RateLimited = 1;
        /// <summary>A moderator muted the sender; <see cref="ChatReply.UntilMs"/> says until when.</summary>
        public const int Muted = 2;
        /// <summary>The channel is not open to this session (or the host keeps no chat).</summary>
        public const int NotAllowed = 3;
        /// <summary>Empty after trimming, too long for this host, control characters, or a malformed channel.</summary>
        public const int Invalid = 4;
        /// <summary>The store did not answer or the host's chat queue is full; try again.</summary>
        public const int Unavailable = 5;
        /// <summary>A report names lines the channel does not keep.</summary>
        public const int NotFound = 6;

        private static readonly string[] Names = { "OK", "RATE_LIMITED", "MUTED", "NOT_ALLOWED", "INVALID", "UNAVAILABLE", "NOT_FOUND" };

        /// <summary>The protocol's name of a ChatReply code, or <c>UNKNOWN(n)</c>.</summary>
        public static string Name(int code)
        {
            return code >= 0 && code < Names.Length ? Names[code] : "UNKNOWN(" + code + ")";
        }
    }

    /// <summary>Chat <c>0x06</c> (version 11): a line to say on a channel.</summary>
    public sealed class Chat : ClientMessage
    {
        /// <summary>The client's number for this line, echoed in a <see cref="ChatReply"/> refusing it.</summary>
        public uint Ref;
        /// <summary>1..=300 bytes: <c>zone:&lt;id&gt;</c>, <c>group:&lt;name&gt;</c> or <c>dm:&lt;principal&gt;</c>.</summary>
        public string Channel = string.Empty;
        /// <summary>1..=1024 bytes of UTF-8.</summary>
        public string Body = string.Empty;
        /// <inheritdoc/>
        public override MessageType Type { get { return MessageType.Chat; } }
    }

    /// <summary>ChatReport <c>0x07</c> (version 11): lines of a channel reported to the moderators.</summary>
    public sealed class ChatReport : ClientMessage
    {
        /// <summary>Echoed in the <see cref="ChatReply"/> answering it (code OK: the text is the report id).</summary>
        public uint Ref;
        /// <summary>The channel the lines were said on.</summary>
        public string Channel = string.Empty;
        /// <summary>1..=20 line seqs of that channel.</summary>
        public List<long> Seqs = new List<long>();
        /// <summary>Up to 500 bytes; may be empty.</summary>
        public string Reason = string.Empty;
        /// <inheritdoc/>
        public override MessageType Type { get { return MessageType.ChatReport; } }
    }

    /// <summary>ChatHistory <c>0x08</c> (version 11): a page of a channel's stored lines.</summary>
    public sealed class ChatHistory : ClientMessage
    {
        /// <summary>Echoed in the <see cref="ChatLines"/> answering it.</summary>
        public uint Ref;
        /// <summary>The channel.</summary>
        public string Channel = string.Empty;
        /// <summary>The lines before this seq; 0 = the newest.</summary>
        public long Before;
        /// <summary>1..=200 lines.</summary>
        public int Limit;
        /// <inheritdoc/>
        public override MessageType Type { get { return MessageType.ChatHistory; } }
    }

    /// <summary>One line as ChatLines carries it.</summary>
    public sealed class ChatWireLine
    {
        /// <summary>The line's number in its channel: from 1, strictly increasing in commit order.</summary>
        public long Seq;
        /// <summary>The principal that said it (or the name a back end chose).</summary>
        public string Sender = string.Empty;
        /// <summary>When the host accepted it, UNIX ms.</summary>
        public long SentAtMs;
        /// <summary>Its text.</summary>
        public string Body = string.Empty;
    }

    /// <summary>ChatLines <c>0x8c</c> (version 11): lines of one channel.</summary>
    public sealed class ChatLines : ServerMessage
    {
        /// <summary>The channel as this session names it (a DM: <c>dm:&lt;the other principal&gt;</c>).</summary>
        public string Channel = string.Empty;
        /// <summary>Flags bit 0: lines from the store (on attach, or answering a ChatHistory), oldest first.</summary>
        public bool History;
        /// <summary>The ChatHistory's ref this answers; 0 otherwise.</summary>
        public uint Ref;
        /// <summary>0..=200 lines.</summary>
        public List<ChatWireLine> Lines = new List<ChatWireLine>();
        /// <inheritdoc/>
        public override MessageType Type { get { return MessageType.ChatLines; } }
    }

    /// <summary>ChatReply <c>0x8d</c> (version 11): a report filed (code 0), or a chat message refused.</summary>
    public sealed class ChatReply : ServerMessage
    {
        /// <summary>The ref of the message answered.</summary>
        public uint Ref;
        /// <summary>A <see cref="ChatReplyCode"/>; unknown codes decode fine.</summary>
        public int Code;
        /// <summary>When the sender may speak again, UNIX ms: only with MUTED or RATE_LIMITED, 0 otherwise.</summary>
        public long UntilMs;
        /// <summary>The report id (code OK), or why it was refused.</summary>
        public string Text = string.Empty;
        /// <inheritdoc/>
        public override MessageType Type { get { return MessageType.ChatReply; } }
    }
}
