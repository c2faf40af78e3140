// MessageCodec: the bodies of the chat messages (protocol version 11), after their tags, as the Rust codec
// writes and reads them: limits and counts checked before anything is read or allocated, and the first
// failure in wire order is the one reported.
using System.Collections.Generic;

namespace Zonekeep
{
    public static partial class MessageCodec
    {
        /// <summary>Bit 0 of ChatLines' flags: the lines come from the store.</summary>
        private const byte ChatLinesHistory = 0x01;

        private static void WriteChat(Writer w, Chat m)
        {
            if (string.IsNullOrEmpty(m.Channel)) throw new EncodeException(EncodeErrorKind.Invalid, "Chat with an empty channel");
            if (string.IsNullOrEmpty(m.Body)) throw new EncodeException(EncodeErrorKind.Invalid, "Chat with an empty body");
            w.Varint((ulong)m.Ref).Str(m.Channel, ChatLimits.Channel, "chat channel").Str(m.Body, ChatLimits.Body, "chat body");
        }

        private static Chat ReadChat(Reader r)
        {
            uint reference = r.VarintU32();
            string channel = r.Str(ChatLimits.Channel, "chat channel");
            if (channel.Length == 0) throw new ProtocolException(DecodeErrorKind.Invalid, "Chat with an empty channel");
            string body = r.Str(ChatLimits.Body, "chat body");
            if (body.Length == 0) throw new ProtocolException(DecodeErrorKind.Invalid, "Chat with an empty body");
            return new Chat { Ref = reference, Channel = channel, Body = body };
        }

        private static void WriteChatReport(Writer w, ChatReport m)
        {
            int n = m.Seqs == null ? 0 : m.Seqs.Count;
            if (n > ChatLimits.ReportSeqs) throw new EncodeException(EncodeErrorKind.TooLong, "ChatReport lines: " + n + " > " + ChatLimits.ReportSeqs);
            if (n == 0) throw new EncodeException(EncodeErrorKind.Invalid, "ChatReport names no line");
            w.Varint((ulong)m.Ref).Str(m.Channel, ChatLimits.Channel, "chat channel").Varint((ulong)n);
            foreach (long seq in m.Seqs) w.Varint(seq);
            w.Str(m.Reason, ChatLimits.Reason, "report reason");
        }

        private static ChatReport ReadChatReport(Reader r)
        {
            uint reference = r.VarintU32();
            string channel = r.Str(ChatLimits.Channel, "chat channel");
            int n = r.Count(ChatLimits.ReportSeqs, "ChatReport lines");
            if (n == 0) throw new ProtocolException(DecodeErrorKind.Invalid, "ChatReport names no line");
            List<long> seqs = new List<long>(n);
            for (int i = 0; i < n; i++) seqs.Add(r.VarintU64AsLong());
            return new ChatReport { Ref = reference, Channel = channel, Seqs = seqs, Reason = r.Str(ChatLimits.Reason, "report reason") };
        }

        private static void WriteChatHistory(Writer w, ChatHistory m)
        {
            if (m.Limit > ChatLimits.HistoryLimit) throw new EncodeException(EncodeErrorKind.TooLong, "ChatHistory limit: " + m.Limit + " > " + ChatLimits.HistoryLimit);
            if (m.Limit <= 0) throw new EncodeException(EncodeErrorKind.Invalid, "ChatHistory limit " + m.Limit);
            w.Varint((ulong)m.Ref).Str(m.Channel, ChatLimits.Channel, "chat channel").Varint(m.Before).Varint((ulong)m.Limit);
        }

        private static ChatHistory ReadChatHistory(Reader r)
        {
            uint reference = r.VarintU32();
            string channel = r.Str(ChatLimits.Channel, "chat channel");
            long before = r.VarintU64AsLong();
            int limit = r.Count(ChatLimits.HistoryLimit, "ChatHistory limit");
            if (limit == 0) throw new ProtocolException(DecodeErrorKind.Invalid, "ChatHistory limit 0");
            return new ChatHistory { Ref = reference, Channel = channel, Before = before, Limit = limit };
        }

        private static void WriteChatLines(Writer w, ChatLines m)
        {
            List<ChatWireLine> lines = m.Lines ?? new List<ChatWireLine>();
            if (lines.Count > ChatLimits.Lines) throw new EncodeException(EncodeErrorKind.TooLong, "chat lines: " + lines.Count + " > " + ChatLimits.Lines);
            w.Str(m.Channel, ChatLimits.Channel, "chat channel").U8(m.History ? ChatLinesHistory : 0);
            w.Varint((ulong)m.Ref).Varint((ulong)lines.Count);
            foreach (ChatWireLine l in lines)
            {
                w.Varint(l.Seq).Str(l.Sender, ChatLimits.Sender, "chat sender").Varint(l.SentAtMs);
                w.Str(l.Body, ChatLimits.Body, "chat body");
            }
        }

        private static ChatLines ReadChatLines(Reader r)
        {
            string channel = r.Str(ChatLimits.Channel, "chat channel");
            byte flags = r.U8();
            if ((flags & ~ChatLinesHistory) != 0) throw new ProtocolException(DecodeErrorKind.Invalid, "ChatLines flags 0x" + flags.ToString("x"));
            uint reference = r.VarintU32();
            int n = r.Count(ChatLimits.Lines, "chat lines");
            // Each line takes at least 4 bytes: no more room is reserved than the input could fill.
            ChatLines m = new ChatLines { Channel = channel, History = (flags & ChatLinesHistory) != 0, Ref = reference, Lines = new List<ChatWireLine>(System.Math.Min(n, r.Remaining / 4)) };
            for (int i = 0; i < n; i++)
            {
                long seq = r.VarintU64AsLong();
                string sender = r.Str(ChatLimits.Sender, "chat sender");
                long sentAtMs = r.VarintU64AsLong();
                m.Lines.Add(new ChatWireLine { Seq = seq, Sender = sender, SentAtMs = sentAtMs, Body = r.Str(ChatLimits.Body, "chat body") });
            }
            return m;
        }

        private static void WriteChatReply(Writer w, ChatReply m)
        {
            w.Varint((ulong)m.Ref).VarintU16(m.Code, "chat reply code").Varint(m.UntilMs).Str(m.Text, ChatLimits.ReplyText, "chat reply text");
        }

        private static ChatReply ReadChatReply(Reader r)
        {
            uint reference = r.VarintU32();
            int code = r.VarintU16();
            long untilMs = r.VarintU64AsLong();
            return new ChatReply { Ref = reference, Code = code, UntilMs = untilMs, Text = r.Str(ChatLimits.ReplyText, "chat reply text") };
        }
    }
}
