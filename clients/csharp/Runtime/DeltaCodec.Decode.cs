// DeltaCodec: total decode of a Delta or State message (PROTOCOL.md §5.5, §5.8) against the known set before
// it, every rule checked in wire order as the Rust reader does; and the fixed start alone, readable without
// any context.
using System.Collections.Generic;

namespace Zonekeep
{
    public static partial class DeltaCodec
    {
        private static void ReadIdList(Reader r, int count, string what, List<uint> ids)
        {
            long prev = -1;
            for (int i = 0; i < count; i++)
            {
                uint gap = r.VarintU32();
                long id = i == 0 ? gap : prev + 1 + gap;
                if (id > uint.MaxValue) throw new ProtocolException(DecodeErrorKind.Overflow, what + " id exceeds u32");
                ids.Add((uint)id);
                prev = id;
            }
        }

        private static int Nibble(int v) { return v >= 8 ? v - 16 : v; }

        private static List<int> ReadIndexSet(Reader r, int n, int knownLen)
        {
            byte mode = r.U8();
            List<int> indices = new List<int>(n);
            if (mode == 0)
            {
                long prev = -1;
                for (int i = 0; i < n; i++)
                {
                    uint gap = r.VarintU32();
                    long idx = i == 0 ? gap : prev + 1 + gap;
                    if (idx >= knownLen) throw new ProtocolException(DecodeErrorKind.Invalid, "update index " + idx + " >= " + knownLen);
                    indices.Add((int)idx);
                    prev = idx;
                }
            }
            else if (mode == 1)
            {
                uint len = r.VarintU32();
                int maxLen = (knownLen + 7) / 8;
                if (len > (uint)maxLen) throw new ProtocolException(DecodeErrorKind.TooLong, "bitset of " + len + " bytes > " + maxLen);
                int at = r.Skip((int)len);
                byte[] buf = r.Buffer;
                for (int j = 0; j < (int)len; j++)
                {
                    int b = buf[at + j];
                    for (int i = 0; i < 8; i++)
                    {
                        if (((b >> i) & 1) != 0)
                        {
                            int idx = 8 * j + i;
                            if (idx >= knownLen) throw new ProtocolException(DecodeErrorKind.Invalid, "update index " + idx + " >= " + knownLen);
                            indices.Add(idx);
                        }
                    }
                }
                if (indices.Count != n)
                    throw new ProtocolException(DecodeErrorKind.Invalid, "bitset names " + indices.Count + " updates, count is " + n);
            }
            else
            {
                throw new ProtocolException(DecodeErrorKind.Invalid, "unknown index set mode " + mode);
            }
            return indices;
        }

        private static void ReadUpdateRecord(Reader r, KindDef kind, Update u)
        {
            byte header = r.U8();
            if ((header & 0x80) == 0)
            {
                if (header > 120) throw new ProtocolException(DecodeErrorKind.Invalid, "tiny move " + header + " > 120");
                u.Pos = PosForm.Step(PosFormKind.Tiny, header / 11 - 5, header % 11 - 5);
                return;
            }
            if ((header & 0x78) != 0) throw new ProtocolException(DecodeErrorKind.Invalid, "update header reserved bits set");
            if (header == 0x80) throw new ProtocolException(DecodeErrorKind.Invalid, "update record changes nothing");
            switch (header & 3)
            {
                case 0:
                    u.Pos = null;
                    break;
                case 1:
                {
                    byte b = r.U8();
                    u.Pos = PosForm.Step(PosFormKind.Nibbles, Nibble(b & 0xf), Nibble(b >> 4));
                    break;
                }
                case 2:
                {
                    int dx = r.Zigzag32();
                    u.Pos = PosForm.Step(PosFormKind.Delta, dx, r.Zigzag32());
                    break;
                }
                default:
                {
                    int qx = r.Zigzag32();
                    u.Pos = PosForm.At(qx, r.Zigzag32());
                    break;
                }
            }
            if ((header & 4) != 0)
            {
                uint mask = r.VarintU32();
                if (mask == 0) throw new ProtocolException(DecodeErrorKind.Invalid, "field mask is zero");
                int count = kind.Fields.Count;
                if (count < 32 && mask >= (1u << count))
                    throw new ProtocolException(DecodeErrorKind.Invalid, "field mask names a field beyond " + count);
                u.Mask = mask;
                for (int i = 0; i < count; i++)
                {
                    if (((mask >> i) & 1) != 0) u.Fields.Add(new FieldChange(i, SchemaCodec.DecodeValue(r, kind.Fields[i].Type)));
                }
            }
        }

        /// <summary>
        /// Decodes a whole Delta or State message (tag included) against <paramref name="schema"/> and the
        /// known set before it (for a State: the known set of its base state). Throws
        /// <see cref="ProtocolException"/> on any violation of §5.5 or §5.8.
        /// </summary>
        public static Delta Decode(byte[] bytes, Schema schema, IReadOnlyList<KnownEntry> known)
        {
            Reader r = new Reader(bytes);
            byte tag = r.U8();
            if (tag != Tag.Delta && tag != Tag.State)
                throw new ProtocolException(DecodeErrorKind.UnknownTag, "expected Delta or State, got 0x" + tag.ToString("x"));
            Delta delta = DecodeBody(r, schema, known, tag == Tag.State);
            r.Finish();
            return delta;
        }

        /// <summary>Reads tick, base (a State's), ack and flags, checking them in wire order as the Rust reader does.</summary>
        private static DeltaHead ReadHead(Reader r, bool state, int tag)
        {
            DeltaHead h = new DeltaHead();
            h.Tag = tag;
            h.Tick = r.VarintU64AsLong();
            if (state) h.Base = r.VarintU64AsLong();
            h.Ack = r.VarintU32();
            h.Flags = r.U8();
            if ((h.Flags & ~7) != 0) throw new ProtocolException(DecodeErrorKind.Invalid, "unknown delta flags 0x" + h.Flags.ToString("x"));
            if (h.Base.HasValue)
            {
                string problem = StateHeaderProblem(h.Base.Value, (h.Flags & FlagBaseline) != 0, (h.Flags & FlagEvents) != 0);
                if (problem != null) throw new ProtocolException(DecodeErrorKind.Invalid, problem);
            }
            return h;
        }

        /// <summary>
        /// Decodes only the fixed start of a Delta or State message (tag included): what a client needs to
        /// decide whether a State is new and whether it holds its base before decoding the rest.
        /// </summary>
        public static DeltaHead DecodeHead(byte[] bytes)
        {
            Reader r = new Reader(bytes);
            byte tag = r.U8();
            if (tag != Tag.Delta && tag != Tag.State)
                throw new ProtocolException(DecodeErrorKind.UnknownTag, "expected Delta or State, got 0x" + tag.ToString("x"));
            return ReadHead(r, tag == Tag.State, tag);
        }

        /// <summary>Decodes a Delta body (after the tag) from <paramref name="r"/>; with <paramref name="state"/>, a State body.</summary>
        public static Delta DecodeBody(Reader r, Schema schema, IReadOnlyList<KnownEntry> known, bool state = false)
        {
            DeltaHead h = ReadHead(r, state, state ? Tag.State : Tag.Delta);
            bool baseline = (h.Flags & FlagBaseline) != 0;
            Delta delta = new Delta { Tick = h.Tick, Ack = h.Ack, Baseline = baseline, Base = h.Base };
            if ((h.Flags & FlagControl) != 0)
            {
                ulong c = r.VarintU64();
                if (c > 0x100000000UL) throw new ProtocolException(DecodeErrorKind.Overflow, "control id exceeds u32");
                delta.HasControl = true;
                delta.Control = c == 0 ? (uint?)null : (uint)(c - 1);
            }

            int despawnCount = r.Count(DeltaLimits.ListEntries, "despawns");
            ReadIdList(r, despawnCount, "despawn", delta.Despawns);
            if (baseline && despawnCount > 0) throw new ProtocolException(DecodeErrorKind.Invalid, "BASELINE with despawns");
            List<KnownEntry> after = RemoveDespawns(baseline ? (IReadOnlyList<KnownEntry>)EmptyKnown : known, delta.Despawns, false);

            int updateCount = r.Count(DeltaLimits.ListEntries, "updates");
            if (baseline && updateCount > 0) throw new ProtocolException(DecodeErrorKind.Invalid, "BASELINE with updates");
            if (updateCount > 0)
            {
                List<int> indices = ReadIndexSet(r, updateCount, after.Count);
                foreach (int index in indices)
                {
                    KnownEntry entry = after[index];
                    Update u = new Update { Index = index, Id = entry.Id, Kind = entry.Kind };
                    ReadUpdateRecord(r, KindOf(schema, entry.Kind), u);
                    delta.Updates.Add(u);
                }
            }

            int spawnCount = r.Count(DeltaLimits.ListEntries, "spawns");
            int k = 0;
            long prev = -1;
            for (int i = 0; i < spawnCount; i++)
            {
                uint gap = r.VarintU32();
                long id = i == 0 ? gap : prev + 1 + gap;
                if (id > uint.MaxValue) throw new ProtocolException(DecodeErrorKind.Overflow, "spawn id exceeds u32");
                prev = id;
                while (k < after.Count && after[k].Id < id) k++;
                if (k < after.Count && after[k].Id == id) throw new ProtocolException(DecodeErrorKind.Invalid, "spawned id " + id + " is already known");
                uint kindId = r.VarintU32();
                KindDef kd = KindOf(schema, kindId > int.MaxValue ? -1 : (int)kindId);
                int qx = r.Zigzag32();
                int qy = r.Zigzag32();
                FieldValue[] fields = new FieldValue[kd.Fields.Count];
                for (int f = 0; f < fields.Length; f++) fields[f] = SchemaCodec.DecodeValue(r, kd.Fields[f].Type);
                delta.Spawns.Add(new Spawn { Id = (uint)id, Kind = (int)kindId, Qx = qx, Qy = qy, Fields = fields });
            }

            if ((h.Flags & FlagEvents) != 0)
            {
                int n = r.Count(DeltaLimits.Events, "events");
                List<ZoneEvent> events = new List<ZoneEvent>(n);
                ReadEvents(r, n, events);
                delta.Events = events;
            }
            return delta;
        }
    }
}
