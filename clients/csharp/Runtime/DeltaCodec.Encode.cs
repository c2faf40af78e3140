// DeltaCodec: encode of a Delta or State message (PROTOCOL.md §5.5, §5.8) in exactly the forms given, and the
// canonical choices a host makes (the position form of a move, the shorter update index set).
using System.Collections.Generic;

namespace Zonekeep
{
    public static partial class DeltaCodec
    {
        private static void WriteIdList(Writer w, List<uint> ids, string what)
        {
            long prev = -1;
            foreach (uint id in ids)
            {
                if (id <= prev) throw new EncodeException(EncodeErrorKind.Invalid, what + " ids must be ascending u32");
                w.Varint((ulong)(prev < 0 ? id : id - prev - 1));
                prev = id;
            }
        }

        private static void CheckDxy(int lo, int hi, int dx, int dy, string form)
        {
            if (dx < lo || dx > hi || dy < lo || dy > hi)
                throw new EncodeException(EncodeErrorKind.Invalid, form + " move (" + dx + ", " + dy + ") out of range");
        }

        /// <summary>Writes one update record (§5.5.3) in exactly the position form given.</summary>
        public static void WriteUpdateRecord(Writer w, KindDef kind, PosForm? pos, IReadOnlyList<FieldChange> fields)
        {
            uint mask = 0;
            int prev = -1;
            for (int n = 0; n < fields.Count; n++)
            {
                int i = fields[n].Index;
                if (i <= prev || i >= kind.Fields.Count)
                    throw new EncodeException(EncodeErrorKind.Invalid, "update fields must be ascending indices of the kind");
                mask |= 1u << i;
                prev = i;
            }
            if (pos.HasValue && pos.Value.Form == PosFormKind.Tiny)
            {
                if (mask != 0) throw new EncodeException(EncodeErrorKind.Invalid, "a tiny move carries no fields");
                CheckDxy(-5, 5, pos.Value.Dx, pos.Value.Dy, "tiny");
                w.U8((pos.Value.Dx + 5) * 11 + (pos.Value.Dy + 5));
                return;
            }
            if (!pos.HasValue && mask == 0) throw new EncodeException(EncodeErrorKind.Invalid, "update record changes nothing");
            int mode = !pos.HasValue ? 0 : pos.Value.Form == PosFormKind.Nibbles ? 1 : pos.Value.Form == PosFormKind.Delta ? 2 : 3;
            w.U8(0x80 | mode | (mask != 0 ? 4 : 0));
            if (pos.HasValue)
            {
                PosForm p = pos.Value;
                switch (p.Form)
                {
                    case PosFormKind.Nibbles:
                        CheckDxy(-8, 7, p.Dx, p.Dy, "nibbles");
                        w.U8((p.Dx & 0xf) | ((p.Dy & 0xf) << 4));
                        break;
                    case PosFormKind.Delta:
                        w.Zigzag32(p.Dx).Zigzag32(p.Dy);
                        break;
                    case PosFormKind.Absolute:
                        w.Zigzag32(p.Qx).Zigzag32(p.Qy);
                        break;
                }
            }
            if (mask != 0)
            {
                w.Varint((ulong)mask);
                for (int n = 0; n < fields.Count; n++) SchemaCodec.EncodeValue(w, kind.Fields[fields[n].Index].Type, fields[n].Value);
            }
        }

        private static int ZigzagLen(long v)
        {
            int i = (int)v;
            return Bits.VarintLen((uint)((i << 1) ^ (i >> 31)));
        }

        /// <summary>
        /// The canonical position form of §5.5.3 for a move from (<paramref name="lastQx"/>, <paramref name="lastQy"/>)
        /// to (<paramref name="qx"/>, <paramref name="qy"/>): tiny when there are no fields and both steps are in
        /// −5..=5, else nibbles in −8..=7, else delta when it is no longer than absolute (a tie takes delta),
        /// else absolute. Null when the position did not change.
        /// </summary>
        public static PosForm? CanonicalPosForm(int qx, int qy, int lastQx, int lastQy, bool hasFields)
        {
            long dx = (long)qx - lastQx;
            long dy = (long)qy - lastQy;
            if (dx == 0 && dy == 0) return null;
            if (!hasFields && dx >= -5 && dx <= 5 && dy >= -5 && dy <= 5) return PosForm.Step(PosFormKind.Tiny, (int)dx, (int)dy);
            if (dx >= -8 && dx <= 7 && dy >= -8 && dy <= 7) return PosForm.Step(PosFormKind.Nibbles, (int)dx, (int)dy);
            if (dx >= int.MinValue && dx <= int.MaxValue && dy >= int.MinValue && dy <= int.MaxValue)
            {
                if (ZigzagLen(dx) + ZigzagLen(dy) <= ZigzagLen(qx) + ZigzagLen(qy)) return PosForm.Step(PosFormKind.Delta, (int)dx, (int)dy);
            }
            return PosForm.At(qx, qy);
        }

        private static int GapsLen(List<int> indices)
        {
            int n = 0;
            int prev = -1;
            foreach (int i in indices)
            {
                n += Bits.VarintLen((ulong)(prev < 0 ? i : i - prev - 1));
                prev = i;
            }
            return n;
        }

        /// <summary>
        /// Writes the update index set (§5.5.2) in the shorter form (ties: gaps). The bitset is as long as
        /// needed to hold the highest index.
        /// </summary>
        public static void WriteIndexSet(Writer w, int knownLen, List<int> indices)
        {
            int prev = -1;
            foreach (int i in indices)
            {
                if (i <= prev || i >= knownLen)
                    throw new EncodeException(EncodeErrorKind.Invalid, "update indices must be ascending and < the known set's length");
                prev = i;
            }
            if (indices.Count == 0) return;
            int last = indices[indices.Count - 1];
            int bitsetBytes = last / 8 + 1;
            if (Bits.VarintLen((ulong)bitsetBytes) + bitsetBytes < GapsLen(indices))
            {
                w.U8(1).Varint((ulong)bitsetBytes);
                byte[] bits = new byte[bitsetBytes];
                foreach (int i in indices) bits[i >> 3] |= (byte)(1 << (i & 7));
                w.Raw(bits, 0, bits.Length);
            }
            else
            {
                w.U8(0);
                prev = -1;
                foreach (int i in indices)
                {
                    w.Varint((ulong)(prev < 0 ? i : i - prev - 1));
                    prev = i;
                }
            }
        }

        /// <summary>
        /// Encodes <paramref name="delta"/> (tag included) against the known set before it. The update indices
        /// are taken from <see cref="Update.Index"/>; ids and kinds are checked against the known set after the
        /// despawns. When <see cref="Delta.Base"/> has a value the message is a State (§5.8) and
        /// <paramref name="known"/> is its base's known set.
        /// </summary>
        public static byte[] Encode(Delta delta, Schema schema, IReadOnlyList<KnownEntry> known)
        {
            Writer w = new Writer(256);
            bool state = delta.Base.HasValue;
            w.U8(state ? Tag.State : Tag.Delta);
            EncodeBody(w, delta, schema, known, state);
            return w.ToArray();
        }

        /// <summary>Encodes a Delta body (after the tag) into <paramref name="w"/>; with <paramref name="state"/>, a State body.</summary>
        public static void EncodeBody(Writer w, Delta delta, Schema schema, IReadOnlyList<KnownEntry> known, bool state)
        {
            bool hasEvents = delta.Events != null;
            if (state)
            {
                if (!delta.Base.HasValue || delta.Base.Value < 0) throw new EncodeException(EncodeErrorKind.Invalid, "a State needs its base tick");
                string problem = StateHeaderProblem(delta.Base.Value, delta.Baseline, hasEvents);
                if (problem != null) throw new EncodeException(EncodeErrorKind.Invalid, problem);
            }
            else if (delta.Base.HasValue)
            {
                throw new EncodeException(EncodeErrorKind.Invalid, "a Delta has no base (a State does)");
            }
            if (delta.Baseline && (delta.Despawns.Count > 0 || delta.Updates.Count > 0))
                throw new EncodeException(EncodeErrorKind.Invalid, "a BASELINE delta has no despawns and no updates");
            if (delta.Despawns.Count > DeltaLimits.ListEntries) throw new EncodeException(EncodeErrorKind.TooLong, "despawns: " + delta.Despawns.Count);
            if (delta.Updates.Count > DeltaLimits.ListEntries) throw new EncodeException(EncodeErrorKind.TooLong, "updates: " + delta.Updates.Count);
            if (delta.Spawns.Count > DeltaLimits.ListEntries) throw new EncodeException(EncodeErrorKind.TooLong, "spawns: " + delta.Spawns.Count);
            w.Varint(delta.Tick);
            if (state) w.Varint(delta.Base.Value);
            w.Varint((ulong)delta.Ack);
            w.U8((delta.Baseline ? FlagBaseline : 0) | (delta.HasControl ? FlagControl : 0) | (hasEvents ? FlagEvents : 0));
            if (delta.HasControl) w.Varint(delta.Control.HasValue ? (ulong)delta.Control.Value + 1 : 0UL);
            w.Varint((ulong)delta.Despawns.Count);
            WriteIdList(w, delta.Despawns, "despawn");
            List<KnownEntry> after = RemoveDespawns(delta.Baseline ? (IReadOnlyList<KnownEntry>)EmptyKnown : known, delta.Despawns, true);
            w.Varint((ulong)delta.Updates.Count);
            if (delta.Updates.Count > 0)
            {
                List<int> indices = new List<int>(delta.Updates.Count);
                foreach (Update u in delta.Updates) indices.Add(u.Index);
                WriteIndexSet(w, after.Count, indices);
                foreach (Update u in delta.Updates)
                {
                    if (u.Index < 0 || u.Index >= after.Count || after[u.Index].Id != u.Id)
                        throw new EncodeException(EncodeErrorKind.Invalid, "update index " + u.Index + " does not name id " + u.Id);
                    KindDef kd = schema.KindAt(after[u.Index].Kind);
                    if (kd == null) throw new EncodeException(EncodeErrorKind.Invalid, "kind " + after[u.Index].Kind + " not in schema");
                    WriteUpdateRecord(w, kd, u.Pos, u.Fields);
                }
            }
            w.Varint((ulong)delta.Spawns.Count);
            long prev = -1;
            int k = 0;
            foreach (Spawn s in delta.Spawns)
            {
                if (s.Id <= prev) throw new EncodeException(EncodeErrorKind.Invalid, "spawn ids must be ascending u32");
                while (k < after.Count && after[k].Id < s.Id) k++;
                if (k < after.Count && after[k].Id == s.Id) throw new EncodeException(EncodeErrorKind.Invalid, "spawned id " + s.Id + " is already known");
                KindDef kd = schema.KindAt(s.Kind);
                if (kd == null) throw new EncodeException(EncodeErrorKind.Invalid, "kind " + s.Kind + " not in schema");
                if (s.Fields == null || s.Fields.Length != kd.Fields.Count)
                    throw new EncodeException(EncodeErrorKind.Invalid, "spawn of " + kd.Name + " needs " + kd.Fields.Count + " fields");
                w.Varint((ulong)(prev < 0 ? s.Id : s.Id - prev - 1));
                prev = s.Id;
                w.Varint((ulong)s.Kind).Zigzag32(s.Qx).Zigzag32(s.Qy);
                for (int i = 0; i < kd.Fields.Count; i++) SchemaCodec.EncodeValue(w, kd.Fields[i].Type, s.Fields[i]);
            }
            if (delta.Events != null)
            {
                if (delta.Events.Count > DeltaLimits.Events) throw new EncodeException(EncodeErrorKind.TooLong, "events");
                w.Varint((ulong)delta.Events.Count);
                WriteEvents(w, delta.Events);
            }
        }
    }
}
