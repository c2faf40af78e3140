// MessageCodec: encode and total decode of the server → client messages (PROTOCOL.md §5); a Delta or a
// State only with its context (the schema from Welcome and the known set).
using System.Collections.Generic;

namespace Zonekeep
{
    public static partial class MessageCodec
    {
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
                    DeltaCodec.WriteEvents(w, e.Events);
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
                    w.U8(Tag.Kick).VarintU16(k.Code, "kick code").Str(k.Reason, Limits.KickReason, "kick reason");
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
                    w.U8(Tag.InputRefused).Varint((ulong)i.Seq).VarintU16(i.Code, "refusal code");
                    break;
                }
                case MessageType.KnownSetCheck:
                {
                    KnownSetCheck c = (KnownSetCheck)m;
                    WriteKnownSet(w.U8(Tag.KnownSetCheck), c.Tick, c.Count, c.Hash);
                    break;
                }
                case MessageType.ChatLines:
                    WriteChatLines(w.U8(Tag.ChatLines), (ChatLines)m);
                    break;
                case MessageType.ChatReply:
                    WriteChatReply(w.U8(Tag.ChatReply), (ChatReply)m);
                    break;
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
                case Tag.State:
                {
                    bool state = tag == Tag.State;
                    if (ctx == null) throw new ProtocolException(DecodeErrorKind.Invalid, (state ? "a State" : "a Delta") + " needs a schema and known set");
                    m = DeltaCodec.DecodeBody(r, ctx.Schema, ctx.Known, state);
                    break;
                }
                case Tag.Events:
                {
                    long tick = r.VarintU64AsLong();
                    int n = r.Count(DeltaLimits.Events, "events");
                    if (n == 0) throw new ProtocolException(DecodeErrorKind.Invalid, "an Events message carries no events");
                    EventsMessage e = new EventsMessage { Tick = tick };
                    DeltaCodec.ReadEvents(r, n, e.Events);
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
                    long tick;
                    uint count, hash;
                    ReadKnownSet(r, out tick, out count, out hash);
                    m = new KnownSetCheck { Tick = tick, Count = count, Hash = hash };
                    break;
                }
                case Tag.ChatLines:
                    m = ReadChatLines(r);
                    break;
                case Tag.ChatReply:
                    m = ReadChatReply(r);
                    break;
                default:
                    throw new ProtocolException(DecodeErrorKind.UnknownTag, "server tag 0x" + tag.ToString("x"));
            }
            r.Finish();
            return m;
        }
    }
}
