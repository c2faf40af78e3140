// MessageCodec: encode and total decode of the client → server messages (PROTOCOL.md §4).
using System;

namespace Zonekeep
{
    public static partial class MessageCodec
    {
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
                    if (h.ResumeFrom != null) WriteKnownSet(w.U8(1), h.ResumeFrom.Tick, h.ResumeFrom.Count, h.ResumeFrom.Hash);
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
                case MessageType.Chat:
                    WriteChat(w.U8(Tag.Chat), (Chat)m);
                    break;
                case MessageType.ChatReport:
                    WriteChatReport(w.U8(Tag.ChatReport), (ChatReport)m);
                    break;
                case MessageType.ChatHistory:
                    WriteChatHistory(w.U8(Tag.ChatHistory), (ChatHistory)m);
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
                        long tick;
                        uint count, hash;
                        ReadKnownSet(r, out tick, out count, out hash);
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
                case Tag.Chat:
                    m = ReadChat(r);
                    break;
                case Tag.ChatReport:
                    m = ReadChatReport(r);
                    break;
                case Tag.ChatHistory:
                    m = ReadChatHistory(r);
                    break;
                default:
                    throw new ProtocolException(DecodeErrorKind.UnknownTag, "client tag 0x" + tag.ToString("x"));
            }
            r.Finish();
            return m;
        }
    }
}
