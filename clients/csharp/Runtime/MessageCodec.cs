// MessageCodec: what decoding a Delta needs, the tag and URL checks a connection makes before decoding, and
// the readers and writers both directions share. Client messages are in MessageCodec.Client.cs, server
// messages in MessageCodec.Server.cs.
using System;
using System.Collections.Generic;

namespace Zonekeep
{
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

    /// <summary>Encode and total decode of every message.</summary>
    public static partial class MessageCodec
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

        private static Exception Err(bool decode, string m)
        {
            return decode ? (Exception)new ProtocolException(DecodeErrorKind.Invalid, m) : new EncodeException(EncodeErrorKind.Invalid, m);
        }

        /// <summary>What a known set holds: a Hello's <c>resume_from</c> (§4.1.1) after its marker, a KnownSetCheck (§5.7) after its tag.</summary>
        private static Writer WriteKnownSet(Writer w, long tick, uint count, uint hash)
        {
            return w.Varint(tick).Varint((ulong)count).U32Le(hash);
        }

        /// <summary>Reads what <see cref="WriteKnownSet"/> writes.</summary>
        private static void ReadKnownSet(Reader r, out long tick, out uint count, out uint hash)
        {
            tick = r.VarintU64AsLong();
            count = r.VarintU32();
            hash = r.U32Le();
        }
    }
}
