// The zone schema of PROTOCOL.md §5.4: entity kinds, their fields and how each field's value is
// carried. Values are kept in their wire form (the quantized integer q for quant/centered/angle);
// FieldValues.ToNumber turns one into the number it stands for.
using System;
using System.Collections.Generic;

namespace Zonekeep
{
    /// <summary>How one field is carried on the wire (§5.4 table); the value is the type code.</summary>
    public enum FieldTypeKind : byte
    {
        /// <summary><c>quant(min, max, bits)</c>, §3.1.</summary>
        Quant = 0,
        /// <summary><c>centered(range, bits)</c>, §3.2.</summary>
        Centered = 1,
        /// <summary><c>angle(bits)</c>, §3.3.</summary>
        Angle = 2,
        /// <summary>A u32.</summary>
        UInt = 3,
        /// <summary>A zigzag i32.</summary>
        SInt = 4,
        /// <summary>A byte 0 or 1.</summary>
        Bool = 5,
        /// <summary>A string of at most <c>max_len</c> bytes.</summary>
        Str = 6,
        /// <summary>An exact f32.</summary>
        F32 = 7,
    }

    /// <summary>A field's wire type and its parameters.</summary>
    public sealed class FieldType
    {
        /// <summary>The type.</summary>
        public FieldTypeKind Kind;
        /// <summary>quant: lower bound.</summary>
        public float Min;
        /// <summary>quant: upper bound.</summary>
        public float Max;
        /// <summary>centered: the half range.</summary>
        public float Range;
        /// <summary>quant, centered, angle: bits of the code.</summary>
        public int Bits;
        /// <summary>str: most bytes.</summary>
        public int MaxLen;

        /// <summary>A quant field.</summary>
        public static FieldType Quant(float min, float max, int bits) { return new FieldType { Kind = FieldTypeKind.Quant, Min = min, Max = max, Bits = bits }; }
        /// <summary>A centered field.</summary>
        public static FieldType Centered(float range, int bits) { return new FieldType { Kind = FieldTypeKind.Centered, Range = range, Bits = bits }; }
        /// <summary>An angle field.</summary>
        public static FieldType Angle(int bits) { return new FieldType { Kind = FieldTypeKind.Angle, Bits = bits }; }
        /// <summary>A uint field.</summary>
        public static FieldType UInt() { return new FieldType { Kind = FieldTypeKind.UInt }; }
        /// <summary>A sint field.</summary>
        public static FieldType SInt() { return new FieldType { Kind = FieldTypeKind.SInt }; }
        /// <summary>A bool field.</summary>
        public static FieldType Bool() { return new FieldType { Kind = FieldTypeKind.Bool }; }
        /// <summary>A str field.</summary>
        public static FieldType Str(int maxLen) { return new FieldType { Kind = FieldTypeKind.Str, MaxLen = maxLen }; }
        /// <summary>An f32 field.</summary>
        public static FieldType F32() { return new FieldType { Kind = FieldTypeKind.F32 }; }

        /// <summary>Why this is not a valid field type, or null when it is.</summary>
        public string Problem()
        {
            switch (Kind)
            {
                case FieldTypeKind.Quant:
                    if (!IsFinite(Min) || !IsFinite(Max) || !(Min < Max)) return "quant needs finite min < max";
                    return Bits >= 1 && Bits <= 32 ? null : "quant bits not in 1..=32";
                case FieldTypeKind.Centered:
                    if (!IsFinite(Range) || !(Range > 0)) return "centered range must be finite > 0";
                    return Bits >= 2 && Bits <= 32 ? null : "centered bits not in 2..=32";
                case FieldTypeKind.Angle:
                    return Bits >= 1 && Bits <= 16 ? null : "angle bits not in 1..=16";
                case FieldTypeKind.Str:
                    return MaxLen >= 0 && MaxLen <= SchemaLimits.StrMaxLen ? null : "str max_len not in 0..=255";
                default:
                    return null;
            }
        }

        internal static bool IsFinite(float f) { return !float.IsNaN(f) && !float.IsInfinity(f); }

        /// <summary>The largest code of a quant or centered field, <c>2^bits − 1</c>.</summary>
        internal double MaxCode { get { return Math.Pow(2, Bits) - 1; } }
    }

    /// <summary>A named field of a kind.</summary>
    public sealed class FieldDef
    {
        /// <summary>Field name (≤ 64 bytes).</summary>
        public string Name;
        /// <summary>How its value is carried.</summary>
        public FieldType Type;

        /// <summary>A field <paramref name="name"/> of type <paramref name="type"/>.</summary>
        public FieldDef(string name, FieldType type) { Name = name; Type = type; }
    }

    /// <summary>An entity kind: its index in <see cref="Schema.Kinds"/> is the kind id on the wire.</summary>
    public sealed class KindDef
    {
        /// <summary>Kind name (≤ 64 bytes).</summary>
        public string Name;
        /// <summary>Fields in wire order (≤ 32).</summary>
        public List<FieldDef> Fields;

        /// <summary>A kind <paramref name="name"/> with <paramref name="fields"/>.</summary>
        public KindDef(string name, params FieldDef[] fields) { Name = name; Fields = new List<FieldDef>(fields); }

        /// <summary>Index of the field named <paramref name="name"/>, or -1.</summary>
        public int FieldIndex(string name)
        {
            for (int i = 0; i < Fields.Count; i++) if (Fields[i].Name == name) return i;
            return -1;
        }
    }

    /// <summary>Limits of §7 that concern the schema.</summary>
    public static class SchemaLimits
    {
        /// <summary>Kinds per schema.</summary>
        public const int Kinds = 64;
        /// <summary>Fields per kind.</summary>
        public const int FieldsPerKind = 32;
        /// <summary>Bytes of a kind or field name.</summary>
        public const int NameBytes = 64;
        /// <summary>Largest <c>max_len</c> of a str field.</summary>
        public const int StrMaxLen = 255;
    }

    /// <summary>How a zone's entities are decoded.</summary>
    public sealed class Schema
    {
        /// <summary>Position quantum (§3.4), finite and &gt; 0.</summary>
        public float PosStep;
        /// <summary>Kinds, indexed by kind id (≤ 64).</summary>
        public List<KindDef> Kinds;

        /// <summary>A schema with <paramref name="posStep"/> and <paramref name="kinds"/>.</summary>
        public Schema(float posStep, params KindDef[] kinds) { PosStep = posStep; Kinds = new List<KindDef>(kinds); }

        /// <summary>The kind id of the kind named <paramref name="name"/>, or -1.</summary>
        public int KindIndex(string name)
        {
            for (int i = 0; i < Kinds.Count; i++) if (Kinds[i].Name == name) return i;
            return -1;
        }

        /// <summary>The kind of id <paramref name="kind"/>, or null.</summary>
        public KindDef KindAt(int kind) { return kind >= 0 && kind < Kinds.Count ? Kinds[kind] : null; }
    }

    /// <summary>What a <see cref="FieldValue"/> holds.</summary>
    public enum FieldValueKind : byte
    {
        /// <summary>An integer: the code of a quant/centered/angle field, a uint or a sint.</summary>
        Int,
        /// <summary>A bool field's value.</summary>
        Bool,
        /// <summary>A str field's value.</summary>
        Str,
        /// <summary>An f32 field's exact value.</summary>
        F32,
    }

    /// <summary>
    /// One field value in wire form: the integer code for quant/centered/angle, the integer for
    /// uint/sint, a bool, a string, or the exact f32. A struct, so arrays of them never box.
    /// </summary>
    public struct FieldValue : IEquatable<FieldValue>
    {
        private readonly long _int;
        private readonly float _f32;
        private readonly string _str;

        /// <summary>What it holds.</summary>
        public readonly FieldValueKind Kind;

        private FieldValue(FieldValueKind kind, long i, float f, string s)
        {
            Kind = kind;
            _int = i;
            _f32 = f;
            _str = s;
        }

        /// <summary>An integer value (a code, a uint or a sint).</summary>
        public static FieldValue Int(long v) { return new FieldValue(FieldValueKind.Int, v, 0, null); }
        /// <summary>A bool value.</summary>
        public static FieldValue Bool(bool v) { return new FieldValue(FieldValueKind.Bool, v ? 1 : 0, 0, null); }
        /// <summary>A string value.</summary>
        public static FieldValue Str(string v) { return new FieldValue(FieldValueKind.Str, 0, 0, v ?? string.Empty); }
        /// <summary>An exact f32 value.</summary>
        public static FieldValue F32(float v) { return new FieldValue(FieldValueKind.F32, 0, v, null); }

        /// <summary>The integer (0 unless <see cref="Kind"/> is Int; 1/0 for a bool).</summary>
        public long AsLong { get { return _int; } }
        /// <summary>The bool (false unless <see cref="Kind"/> is Bool).</summary>
        public bool AsBool { get { return Kind == FieldValueKind.Bool && _int != 0; } }
        /// <summary>The string (null unless <see cref="Kind"/> is Str).</summary>
        public string AsString { get { return _str; } }
        /// <summary>The f32 (0 unless <see cref="Kind"/> is F32).</summary>
        public float AsFloat { get { return _f32; } }

        /// <summary>
        /// Same kind and same value; f32 values compare by bit pattern (so NaN equals NaN and 0 differs
        /// from −0, as JavaScript's <c>Object.is</c>).
        /// </summary>
        public bool Equals(FieldValue o)
        {
            if (Kind != o.Kind) return false;
            switch (Kind)
            {
                case FieldValueKind.Str: return string.Equals(_str, o._str, StringComparison.Ordinal);
                case FieldValueKind.F32: return Zonekeep.Bits.SingleToInt32Bits(_f32) == Zonekeep.Bits.SingleToInt32Bits(o._f32);
                default: return _int == o._int;
            }
        }

        /// <inheritdoc/>
        public override bool Equals(object obj) { return obj is FieldValue && Equals((FieldValue)obj); }

        /// <inheritdoc/>
        public override int GetHashCode()
        {
            switch (Kind)
            {
                case FieldValueKind.Str: return _str == null ? 0 : _str.GetHashCode();
                case FieldValueKind.F32: return Zonekeep.Bits.SingleToInt32Bits(_f32);
                default: return _int.GetHashCode() ^ (int)Kind;
            }
        }

        /// <summary>Equality of two values.</summary>
        public static bool operator ==(FieldValue a, FieldValue b) { return a.Equals(b); }
        /// <summary>Inequality of two values.</summary>
        public static bool operator !=(FieldValue a, FieldValue b) { return !a.Equals(b); }

        /// <inheritdoc/>
        public override string ToString()
        {
            switch (Kind)
            {
                case FieldValueKind.Str: return "\"" + _str + "\"";
                case FieldValueKind.F32: return _f32.ToString("R", System.Globalization.CultureInfo.InvariantCulture) + "f";
                case FieldValueKind.Bool: return _int != 0 ? "true" : "false";
                default: return _int.ToString(System.Globalization.CultureInfo.InvariantCulture);
            }
        }
    }

    /// <summary>Encoding, decoding and interpretation of schemas and field values.</summary>
    public static class SchemaCodec
    {
        /// <summary>Writes <paramref name="schema"/> (§5.4), validating it first.</summary>
        public static void Encode(Writer w, Schema schema)
        {
            if (!FieldType.IsFinite(schema.PosStep) || !(schema.PosStep > 0))
                throw new EncodeException(EncodeErrorKind.Invalid, "pos_step must be finite and > 0");
            if (schema.Kinds.Count > SchemaLimits.Kinds) throw new EncodeException(EncodeErrorKind.TooLong, "too many kinds");
            w.F32(schema.PosStep);
            w.Varint((ulong)schema.Kinds.Count);
            foreach (KindDef kind in schema.Kinds)
            {
                w.Str(kind.Name, SchemaLimits.NameBytes, "kind name");
                if (kind.Fields.Count > SchemaLimits.FieldsPerKind)
                    throw new EncodeException(EncodeErrorKind.TooLong, "kind " + kind.Name + ": too many fields");
                w.Varint((ulong)kind.Fields.Count);
                foreach (FieldDef field in kind.Fields)
                {
                    string problem = field.Type.Problem();
                    if (problem != null) throw new EncodeException(EncodeErrorKind.Invalid, "field " + field.Name + ": " + problem);
                    w.Str(field.Name, SchemaLimits.NameBytes, "field name");
                    FieldType ty = field.Type;
                    w.U8((int)ty.Kind);
                    switch (ty.Kind)
                    {
                        case FieldTypeKind.Quant: w.F32(ty.Min).F32(ty.Max).U8(ty.Bits); break;
                        case FieldTypeKind.Centered: w.F32(ty.Range).U8(ty.Bits); break;
                        case FieldTypeKind.Angle: w.U8(ty.Bits); break;
                        case FieldTypeKind.Str: w.Varint((ulong)ty.MaxLen); break;
                    }
                }
            }
        }

        private static FieldType DecodeFieldType(Reader r)
        {
            byte code = r.U8();
            FieldType ty;
            switch (code)
            {
                case 0:
                {
                    float min = r.F32();
                    float max = r.F32();
                    ty = FieldType.Quant(min, max, r.U8());
                    break;
                }
                case 1:
                {
                    float range = r.F32();
                    ty = FieldType.Centered(range, r.U8());
                    break;
                }
                case 2: ty = FieldType.Angle(r.U8()); break;
                case 3: return FieldType.UInt();
                case 4: return FieldType.SInt();
                case 5: return FieldType.Bool();
                case 6:
                {
                    uint maxLen = r.VarintU32();
                    ty = FieldType.Str(maxLen > int.MaxValue ? int.MaxValue : (int)maxLen);
                    break;
                }
                case 7: return FieldType.F32();
                default: throw new ProtocolException(DecodeErrorKind.Invalid, "unknown field type " + code);
            }
            string problem = ty.Problem();
            if (problem != null) throw new ProtocolException(DecodeErrorKind.Invalid, problem);
            return ty;
        }

        /// <summary>Reads a schema (§5.4) and validates it.</summary>
        public static Schema Decode(Reader r)
        {
            float posStep = r.F32();
            if (!FieldType.IsFinite(posStep) || !(posStep > 0))
                throw new ProtocolException(DecodeErrorKind.Invalid, "pos_step must be finite and > 0");
            int kindCount = r.Count(SchemaLimits.Kinds, "kinds");
            Schema schema = new Schema(posStep);
            for (int k = 0; k < kindCount; k++)
            {
                string name = r.Str(SchemaLimits.NameBytes, "kind name");
                int fieldCount = r.Count(SchemaLimits.FieldsPerKind, "fields");
                KindDef kind = new KindDef(name);
                for (int i = 0; i < fieldCount; i++)
                {
                    string fname = r.Str(SchemaLimits.NameBytes, "field name");
                    kind.Fields.Add(new FieldDef(fname, DecodeFieldType(r)));
                }
                schema.Kinds.Add(kind);
            }
            return schema;
        }

        /// <summary>The value a field holds before anything was sent (what Rust's <c>default_value</c> gives).</summary>
        public static FieldValue DefaultValue(FieldType ty)
        {
            switch (ty.Kind)
            {
                case FieldTypeKind.Bool: return FieldValue.Bool(false);
                case FieldTypeKind.Str: return FieldValue.Str(string.Empty);
                case FieldTypeKind.F32: return FieldValue.F32(0);
                case FieldTypeKind.Centered: return FieldValue.Int((long)Math.Pow(2, ty.Bits - 1));
                default: return FieldValue.Int(0);
            }
        }

        private static EncodeException BadValue(FieldType ty, FieldValue v)
        {
            return new EncodeException(EncodeErrorKind.Invalid, "value " + v + " does not fit field type " + ty.Kind);
        }

        private static bool IsU32(FieldValue v) { return v.Kind == FieldValueKind.Int && v.AsLong >= 0 && v.AsLong <= uint.MaxValue; }

        /// <summary>Writes one field value in its type's wire form.</summary>
        public static void EncodeValue(Writer w, FieldType ty, FieldValue v)
        {
            switch (ty.Kind)
            {
                case FieldTypeKind.Quant:
                case FieldTypeKind.Centered:
                    if (!IsU32(v) || v.AsLong > ty.MaxCode) throw BadValue(ty, v);
                    w.Varint((ulong)v.AsLong);
                    return;
                case FieldTypeKind.Angle:
                    if (!IsU32(v) || v.AsLong >= Math.Pow(2, ty.Bits)) throw BadValue(ty, v);
                    w.Varint((ulong)v.AsLong);
                    return;
                case FieldTypeKind.UInt:
                    if (!IsU32(v)) throw BadValue(ty, v);
                    w.Varint((ulong)v.AsLong);
                    return;
                case FieldTypeKind.SInt:
                    if (v.Kind != FieldValueKind.Int || v.AsLong < int.MinValue || v.AsLong > int.MaxValue) throw BadValue(ty, v);
                    w.Zigzag32((int)v.AsLong);
                    return;
                case FieldTypeKind.Bool:
                    if (v.Kind != FieldValueKind.Bool) throw BadValue(ty, v);
                    w.U8(v.AsBool ? 1 : 0);
                    return;
                case FieldTypeKind.Str:
                    if (v.Kind != FieldValueKind.Str) throw BadValue(ty, v);
                    w.Str(v.AsString, ty.MaxLen, "str field");
                    return;
                default:
                    if (v.Kind != FieldValueKind.F32) throw BadValue(ty, v);
                    w.F32(v.AsFloat);
                    return;
            }
        }

        /// <summary>Reads one field value of type <paramref name="ty"/>, validating its range.</summary>
        public static FieldValue DecodeValue(Reader r, FieldType ty)
        {
            switch (ty.Kind)
            {
                case FieldTypeKind.Quant:
                case FieldTypeKind.Centered:
                {
                    uint q = r.VarintU32();
                    if (q > ty.MaxCode) throw new ProtocolException(DecodeErrorKind.Invalid, ty.Kind + " value out of range");
                    return FieldValue.Int(q);
                }
                case FieldTypeKind.Angle:
                {
                    uint q = r.VarintU32();
                    if (q >= Math.Pow(2, ty.Bits)) throw new ProtocolException(DecodeErrorKind.Invalid, "angle value out of range");
                    return FieldValue.Int(q);
                }
                case FieldTypeKind.UInt: return FieldValue.Int(r.VarintU32());
                case FieldTypeKind.SInt: return FieldValue.Int(r.Zigzag32());
                case FieldTypeKind.Bool:
                {
                    byte b = r.U8();
                    if (b > 1) throw new ProtocolException(DecodeErrorKind.Invalid, "bool byte " + b);
                    return FieldValue.Bool(b == 1);
                }
                case FieldTypeKind.Str: return FieldValue.Str(r.Str(ty.MaxLen, "str field"));
                default: return FieldValue.F32(r.F32());
            }
        }

        /// <summary>The number a field value stands for: dequantized for quant/centered/angle, as-is otherwise (bool: 1/0, str: NaN).</summary>
        public static double ToNumber(FieldType ty, FieldValue v)
        {
            switch (v.Kind)
            {
                case FieldValueKind.Bool: return v.AsBool ? 1 : 0;
                case FieldValueKind.Str: return double.NaN;
                case FieldValueKind.F32: return v.AsFloat;
            }
            switch (ty.Kind)
            {
                case FieldTypeKind.Quant: return Quant.QuantDecode((uint)v.AsLong, ty.Min, ty.Max, ty.Bits);
                case FieldTypeKind.Centered: return Quant.CenteredDecode((uint)v.AsLong, ty.Range, ty.Bits);
                case FieldTypeKind.Angle: return Quant.AngleDecode((uint)v.AsLong, ty.Bits);
                default: return v.AsLong;
            }
        }

        /// <summary>The wire value that stands for the number <paramref name="n"/> in a field of type <paramref name="ty"/> (quantizing if needed).</summary>
        public static FieldValue FromNumber(FieldType ty, double n)
        {
            switch (ty.Kind)
            {
                case FieldTypeKind.Quant: return FieldValue.Int(Quant.QuantEncode((float)n, ty.Min, ty.Max, ty.Bits));
                case FieldTypeKind.Centered: return FieldValue.Int(Quant.CenteredEncode((float)n, ty.Range, ty.Bits));
                case FieldTypeKind.Angle: return FieldValue.Int(Quant.AngleEncode((float)n, ty.Bits));
                case FieldTypeKind.Bool: return FieldValue.Bool(n != 0);
                case FieldTypeKind.Str: return FieldValue.Str(n.ToString(System.Globalization.CultureInfo.InvariantCulture));
                case FieldTypeKind.F32: return FieldValue.F32((float)n);
                default: return FieldValue.Int((long)Math.Truncate(n));
            }
        }
    }
}
