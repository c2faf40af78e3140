// The Delta message of PROTOCOL.md §5.5: decoded against the client's known set, and encoded so that
// decode → encode is byte-identical (every update keeps the exact position form it arrived in).
//
// The State message of §5.8 (a WebTransport datagram) is a Delta with a base tick after its own tick,
// written against the state of that tick instead of the previous Delta; it shares all of this code.
// A decoded State is a Delta whose Base has a value.
//
// `known` is the known set BEFORE the delta: (id, kind) pairs, ascending by id. The decoder applies
// BASELINE and the despawns to it to resolve update indices into ids and kinds, and checks every rule
// of §5.5 (ids ascending, despawned ids known, spawned ids new, indices in range, masks within the kind).
using System;
using System.Collections.Generic;

namespace Zonekeep
{
    /// <summary>Which position form an update record used (§5.5.3).</summary>
    public enum PosFormKind : byte
    {
        /// <summary>One byte, both steps in −5..=5, no fields.</summary>
        Tiny,
        /// <summary>One byte of two 4-bit steps (−8..=7).</summary>
        Nibbles,
        /// <summary>Zigzag steps.</summary>
        Delta,
        /// <summary>Zigzag absolute position.</summary>
        Absolute,
    }

    /// <summary>How an update moved an entity, in the exact wire form it used (§5.5.3).</summary>
    public struct PosForm : IEquatable<PosForm>
    {
        /// <summary>The form.</summary>
        public PosFormKind Form;
        /// <summary>Step in x (tiny, nibbles, delta).</summary>
        public int Dx;
        /// <summary>Step in y (tiny, nibbles, delta).</summary>
        public int Dy;
        /// <summary>Absolute quantized x (absolute).</summary>
        public int Qx;
        /// <summary>Absolute quantized y (absolute).</summary>
        public int Qy;

        /// <summary>A relative move of form <paramref name="form"/>.</summary>
        public static PosForm Step(PosFormKind form, int dx, int dy) { return new PosForm { Form = form, Dx = dx, Dy = dy }; }
        /// <summary>An absolute position.</summary>
        public static PosForm At(int qx, int qy) { return new PosForm { Form = PosFormKind.Absolute, Qx = qx, Qy = qy }; }

        /// <summary>Same form and the same numbers.</summary>
        public bool Equals(PosForm o) { return Form == o.Form && Dx == o.Dx && Dy == o.Dy && Qx == o.Qx && Qy == o.Qy; }
        /// <inheritdoc/>
        public override bool Equals(object obj) { return obj is PosForm && Equals((PosForm)obj); }
        /// <inheritdoc/>
        public override int GetHashCode() { return (int)Form ^ (Dx * 31) ^ (Dy * 17) ^ Qx ^ (Qy << 3); }
        /// <inheritdoc/>
        public override string ToString()
        {
            return Form == PosFormKind.Absolute ? "absolute(" + Qx + ", " + Qy + ")" : Form.ToString().ToLowerInvariant() + "(" + Dx + ", " + Dy + ")";
        }
    }

    /// <summary>One changed field of an update: its index in the kind and its new value.</summary>
    public struct FieldChange
    {
        /// <summary>Field index in the kind.</summary>
        public int Index;
        /// <summary>New value (wire form).</summary>
        public FieldValue Value;

        /// <summary>Field <paramref name="index"/> now holds <paramref name="value"/>.</summary>
        public FieldChange(int index, FieldValue value) { Index = index; Value = value; }
    }

    /// <summary>One changed entity already known to the client.</summary>
    public sealed class Update
    {
        /// <summary>Index in the known set after the despawns.</summary>
        public int Index;
        /// <summary>Entity id (resolved from the index).</summary>
        public uint Id;
        /// <summary>Kind id (resolved from the index).</summary>
        public int Kind;
        /// <summary>Position change, or null when the position did not change.</summary>
        public PosForm? Pos;
        /// <summary>Bit i set ⇔ field i changed (0 = no fields).</summary>
        public uint Mask;
        /// <summary>Each changed field, ascending.</summary>
        public List<FieldChange> Fields = new List<FieldChange>();
    }

    /// <summary>An entity entering the view, with its full state.</summary>
    public sealed class Spawn
    {
        /// <summary>Entity id.</summary>
        public uint Id;
        /// <summary>Kind id (index into the schema's kinds).</summary>
        public int Kind;
        /// <summary>Quantized x (§3.4).</summary>
        public int Qx;
        /// <summary>Quantized y (§3.4).</summary>
        public int Qy;
        /// <summary>Every field of the kind, in order.</summary>
        public FieldValue[] Fields;
    }

    /// <summary>A zone event addressed to this subscriber.</summary>
    public sealed class ZoneEvent
    {
        /// <summary>Game-defined topic (u16).</summary>
        public int Topic;
        /// <summary>Opaque payload (≤ 16 KiB).</summary>
        public byte[] Payload;

        /// <summary>An event of <paramref name="topic"/> carrying <paramref name="payload"/>.</summary>
        public ZoneEvent(int topic, byte[] payload) { Topic = topic; Payload = payload ?? Empty.Bytes; }
    }

    /// <summary>A known-set entry: an id and its kind.</summary>
    public struct KnownEntry
    {
        /// <summary>Entity id.</summary>
        public uint Id;
        /// <summary>Kind id.</summary>
        public int Kind;

        /// <summary>Entity <paramref name="id"/> of kind <paramref name="kind"/>.</summary>
        public KnownEntry(uint id, int kind) { Id = id; Kind = kind; }
    }

    /// <summary>The fixed start of a Delta or State message (§5.5, §5.8), readable without any context.</summary>
    public struct DeltaHead
    {
        /// <summary><see cref="Tag.Delta"/> or <see cref="Tag.State"/>.</summary>
        public int Tag;
        /// <summary>Server tick of this patch.</summary>
        public long Tick;
        /// <summary>A State's base tick; null for a Delta.</summary>
        public long? Base;
        /// <summary>Last input seq the zone processed for this player.</summary>
        public uint Ack;
        /// <summary>The flags byte (BASELINE, CONTROL, EVENTS).</summary>
        public int Flags;
        /// <summary>The BASELINE flag.</summary>
        public bool Baseline { get { return (Flags & 1) != 0; } }
    }

    /// <summary>Limits of §7 that concern deltas.</summary>
    public static class DeltaLimits
    {
        /// <summary>Entities per Delta list (despawns, updates, spawns).</summary>
        public const int ListEntries = 65536;
        /// <summary>Events per Delta.</summary>
        public const int Events = 1024;
        /// <summary>Bytes of an event payload.</summary>
        public const int EventPayload = 16384;
    }

    /// <summary>A decoded Delta (or, with <see cref="Base"/> set, a State, §5.8).</summary>
    public sealed class Delta : ServerMessage
    {
        /// <summary>Server tick of this patch.</summary>
        public long Tick;
        /// <summary>Last input seq the zone processed for this player (0 = none).</summary>
        public uint Ack;
        /// <summary>BASELINE: the known set is cleared first.</summary>
        public bool Baseline;
        /// <summary>Whether the CONTROL field is present.</summary>
        public bool HasControl;
        /// <summary>With <see cref="HasControl"/>: the controlled entity id, or null = controls nothing.</summary>
        public uint? Control;
        /// <summary>Ids removed from the known set, ascending.</summary>
        public List<uint> Despawns = new List<uint>();
        /// <summary>Updates in ascending index order.</summary>
        public List<Update> Updates = new List<Update>();
        /// <summary>Spawns in ascending id order.</summary>
        public List<Spawn> Spawns = new List<Spawn>();
        /// <summary>Events (non-null iff the EVENTS flag is set).</summary>
        public List<ZoneEvent> Events;
        /// <summary>
        /// A State's base (§5.8): the tick of the state it applies to, 0 (the empty state) exactly when
        /// <see cref="Baseline"/>. Null for a Delta, which applies to the previous one.
        /// </summary>
        public long? Base;

        /// <inheritdoc/>
        public override MessageType Type { get { return Base.HasValue ? MessageType.State : MessageType.Delta; } }

        /// <summary>Sets CONTROL to <paramref name="entity"/> (null = controls nothing).</summary>
        public Delta WithControl(uint? entity)
        {
            HasControl = true;
            Control = entity;
            return this;
        }

        /// <summary>A shallow copy (the lists are new lists of the same items) without a base: the Delta part of a State.</summary>
        public Delta WithoutBase()
        {
            Delta d = (Delta)MemberwiseClone();
            d.Despawns = new List<uint>(Despawns);
            d.Updates = new List<Update>(Updates);
            d.Spawns = new List<Spawn>(Spawns);
            d.Events = Events == null ? null : new List<ZoneEvent>(Events);
            d.Base = null;
            return d;
        }
    }

    /// <summary>Encoding and decoding of Delta and State messages.</summary>
    public static class DeltaCodec
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

        /// <summary>Why a State header is invalid (§5.8), or null: a State carries no events, base 0 ⇔ BASELINE.</summary>
        private static string StateHeaderProblem(long @base, bool baseline, bool events)
        {
            if (events) return "a State carries no events";
            if ((@base == 0) != baseline) return "a State's base is 0 exactly when it is a BASELINE";
            return null;
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

        private static readonly KnownEntry[] EmptyKnown = new KnownEntry[0];

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
