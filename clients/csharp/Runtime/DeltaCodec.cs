// DeltaCodec: the Delta message of PROTOCOL.md §5.5, decoded against the client's known set, and encoded so
// that decode → encode is byte-identical. The State message of §5.8 shares all of it. Here are the rules
// both directions apply; decoding is in DeltaCodec.Decode.cs, encoding in DeltaCodec.Encode.cs.
//
// `known` is the known set BEFORE the delta: (id, kind) pairs, ascending by id. The decoder applies
// BASELINE and the despawns to it to resolve update indices into ids and kinds, and checks every rule
// of §5.5 (ids ascending, despawned ids known, spawned ids new, indices in range, masks within the kind).
using System;
using System.Collections.Generic;

namespace Zonekeep
{
    /// <summary>Encoding and decoding of Delta and State messages.</summary>
    public static partial class DeltaCodec
    {
        private const int FlagBaseline = 1;
        private const int FlagControl = 2;
        private const int FlagEvents = 4;

        private static KindDef KindOf(Schema schema, int kind)
        {
            KindDef k = schema.KindAt(kind);
            if (k == null) throw new ProtocolException(DecodeErrorKind.Invalid, "kind " + kind + " not in schema");
            return k;
        }

        /// <summary>Removes <paramref name="despawns"/> (ascending, each present) from <paramref name="known"/> (ascending).</summary>
        private static List<KnownEntry> RemoveDespawns(IReadOnlyList<KnownEntry> known, List<uint> despawns, bool asEncode)
        {
            List<KnownEntry> out_ = new List<KnownEntry>(known.Count);
            int d = 0;
            for (int i = 0; i < known.Count; i++)
            {
                KnownEntry entry = known[i];
                if (d < despawns.Count && entry.Id == despawns[d])
                {
                    d++;
                    continue;
                }
                if (d < despawns.Count && entry.Id > despawns[d]) throw NotKnown(despawns[d], asEncode);
                out_.Add(entry);
            }
            if (d < despawns.Count) throw NotKnown(despawns[d], asEncode);
            return out_;
        }

        private static Exception NotKnown(uint id, bool asEncode)
        {
            string m = "despawned id " + id + " is not known";
            return asEncode ? (Exception)new EncodeException(EncodeErrorKind.Invalid, m) : new ProtocolException(DecodeErrorKind.Invalid, m);
        }

        /// <summary>Why a State header is invalid (§5.8), or null: a State carries no events, base 0 ⇔ BASELINE.</summary>
        private static string StateHeaderProblem(long @base, bool baseline, bool events)
        {
            if (events) return "a State carries no events";
            if ((@base == 0) != baseline) return "a State's base is 0 exactly when it is a BASELINE";
            return null;
        }

        private static readonly KnownEntry[] EmptyKnown = new KnownEntry[0];

        /// <summary>Reads <paramref name="n"/> events (topic, payload) into <paramref name="into"/>: a Delta's and an Events message's.</summary>
        internal static void ReadEvents(Reader r, int n, List<ZoneEvent> into)
        {
            for (int i = 0; i < n; i++)
            {
                int topic = r.VarintU16();
                into.Add(new ZoneEvent(topic, r.BytesField(DeltaLimits.EventPayload, "event payload")));
            }
        }

        /// <summary>Writes each event (topic, payload), the count already written: a Delta's and an Events message's.</summary>
        internal static void WriteEvents(Writer w, List<ZoneEvent> events)
        {
            foreach (ZoneEvent ev in events) w.VarintU16(ev.Topic, "event topic").BytesField(ev.Payload, DeltaLimits.EventPayload, "event payload");
        }
    }
}
