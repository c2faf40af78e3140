// The Delta message of PROTOCOL.md §5.5 as the SDK hands it around: tick, ack, CONTROL, despawns, updates
// (each keeping the exact position form it arrived in, so decode → encode is byte-identical), spawns and
// events, with the known-set entries it is decoded against. Its codec is DeltaCodec (DeltaCodec.cs).
//
// The State message of §5.8 (a WebTransport datagram) is a Delta with a base tick after its own tick,
// written against the state of that tick instead of the previous Delta. A decoded State is a Delta whose
// Base has a value.
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
}
