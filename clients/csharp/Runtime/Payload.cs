// The little-endian payload encoding of zone inputs and events (docs/MODULES.md, "Encoding";
// `zonekeep_protocol::contract`): integers and f32 fixed-width little-endian, bool one byte 0 or 1,
// bytes a u32 length then the bytes, str such bytes holding UTF-8, and the rest forms that take every
// byte left without a length. Code written by `zonekeep codegen --lang cs` builds inputs with
// PayloadWriter, reads events with PayloadReader, reads entities with EntityFields and binds a zone's
// schema with SchemaCheck; a game may use them directly for payloads of its own.
//
// The reader is total: a short payload, a bool other than 0 or 1, text that is not UTF-8 or bytes left
// over are a ProtocolException, never a crash. Both are structs, so a payload costs no allocation beyond
// the values it holds: keep one in a local variable and do not copy it.
using System;

namespace Zonekeep
{
    /// <summary>
    /// Builds one payload. Give the exact size to the constructor and <see cref="ToArray"/> returns the
    /// buffer itself, with no copy; a writer grows when given less. A null byte array or string writes
    /// as empty. A mutable struct: keep it in a local variable and do not copy it.
    /// </summary>
    public struct PayloadWriter
    {
        private static readonly byte[] NoBytes = new byte[0];

        private byte[] _buf;
        private int _len;

        /// <summary>A writer whose first buffer holds <paramref name="capacity"/> bytes.</summary>
        public PayloadWriter(int capacity)
        {
            if (capacity < 0) throw new ArgumentOutOfRangeException(nameof(capacity));
            _buf = capacity == 0 ? NoBytes : new byte[capacity];
            _len = 0;
        }

        /// <summary>Bytes written so far.</summary>
        public int Length { get { return _len; } }

        /// <summary>
        /// The UTF-8 byte count of <paramref name="v"/> (0 for null), to size a payload before writing
        /// it; a lone surrogate is an <see cref="EncodeException"/> naming <paramref name="what"/>.
        /// </summary>
        public static int Utf8Length(string v, string what = "str")
        {
            return string.IsNullOrEmpty(v) ? 0 : Utf8.ByteCount(v, what);
        }

        /// <summary>Makes room for <paramref name="n"/> more bytes and returns where they start.</summary>
        private int Room(int n)
        {
            if (_buf == null) _buf = NoBytes;
            if (n > _buf.Length - _len)
            {
                int cap = Math.Max(Math.Max(16, _buf.Length * 2), _len + n);
                byte[] next = new byte[cap];
                System.Buffer.BlockCopy(_buf, 0, next, 0, _len);
                _buf = next;
            }
            int at = _len;
            _len += n;
            return at;
        }

        /// <summary>A u8.</summary>
        public void U8(byte v)
        {
            int at = Room(1);
            _buf[at] = v;
        }

        /// <summary>A u16, little-endian.</summary>
        public void U16(ushort v)
        {
            int at = Room(2);
            unchecked
            {
                _buf[at] = (byte)v;
                _buf[at + 1] = (byte)(v >> 8);
            }
        }

        /// <summary>A u32, little-endian.</summary>
        public void U32(uint v)
        {
            int at = Room(4);
            unchecked
            {
                _buf[at] = (byte)v;
                _buf[at + 1] = (byte)(v >> 8);
                _buf[at + 2] = (byte)(v >> 16);
                _buf[at + 3] = (byte)(v >> 24);
            }
        }

        /// <summary>A u64, little-endian.</summary>
        public void U64(ulong v)
        {
            unchecked
            {
                U32((uint)v);
                U32((uint)(v >> 32));
            }
        }

        /// <summary>An i8 (two's complement).</summary>
        public void I8(sbyte v) { U8(unchecked((byte)v)); }

        /// <summary>An i16, little-endian two's complement.</summary>
        public void I16(short v) { U16(unchecked((ushort)v)); }

        /// <summary>An i32, little-endian two's complement.</summary>
        public void I32(int v) { U32(unchecked((uint)v)); }

        /// <summary>An i64, little-endian two's complement.</summary>
        public void I64(long v) { U64(unchecked((ulong)v)); }

        /// <summary>An f32, its IEEE-754 bits little-endian (NaN payloads and the sign of zero kept).</summary>
        public void F32(float v) { U32(unchecked((uint)Bits.SingleToInt32Bits(v))); }

        /// <summary>A bool, one byte 0 or 1.</summary>
        public void Bool(bool v) { U8(v ? (byte)1 : (byte)0); }

        /// <summary>A u32 length, then the bytes; null writes as empty.</summary>
        public void Bytes(byte[] v)
        {
            U32(v == null ? 0u : (uint)v.Length);
            RawBytes(v);
        }

        /// <summary>
        /// A u32 length, then <paramref name="v"/> as UTF-8; null writes as empty. A lone surrogate is an
        /// <see cref="EncodeException"/> naming <paramref name="what"/>, and nothing is written.
        /// </summary>
        public void Str(string v, string what = "str")
        {
            int n = Utf8Length(v, what);
            U32((uint)n);
            Utf8Into(v, n);
        }

        /// <summary>The bytes without a length, as a payload's last (rest) value; null writes nothing.</summary>
        public void RawBytes(byte[] v)
        {
            if (v == null || v.Length == 0) return;
            int at = Room(v.Length);
            System.Buffer.BlockCopy(v, 0, _buf, at, v.Length);
        }

        /// <summary>
        /// <paramref name="v"/> as UTF-8 without a length, as a payload's last (rest) value; null writes
        /// nothing. A lone surrogate is an <see cref="EncodeException"/> naming <paramref name="what"/>.
        /// </summary>
        public void RawStr(string v, string what = "str")
        {
            Utf8Into(v, Utf8Length(v, what));
        }

        private void Utf8Into(string v, int n)
        {
            if (n == 0) return;
            int at = Room(n);
            Utf8.Encoding.GetBytes(v, 0, v.Length, _buf, at);
        }

        /// <summary>
        /// The payload: the buffer itself when it is exactly full (the writer then grows into a new one if
        /// written again), else a copy of the bytes written.
        /// </summary>
        public byte[] ToArray()
        {
            if (_buf == null || _len == 0) return NoBytes;
            if (_len == _buf.Length) return _buf;
            byte[] copy = new byte[_len];
            System.Buffer.BlockCopy(_buf, 0, copy, 0, _len);
            return copy;
        }
    }

    /// <summary>
    /// Reads one payload front to back, strictly: every read names the value it is for
    /// (<c>what</c>), and a payload that ends early, a bool not 0 or 1 or text that is not UTF-8 is a
    /// <see cref="ProtocolException"/>; <see cref="End"/> refuses bytes left over. A mutable struct: keep
    /// it in a local variable and do not copy it.
    /// </summary>
    public struct PayloadReader
    {
        private static readonly byte[] NoBytes = new byte[0];

        private readonly byte[] _payload;
        private int _at;

        /// <summary>Reads <paramref name="payload"/> from its first byte.</summary>
        public PayloadReader(byte[] payload)
        {
            if (payload == null) throw new ArgumentNullException(nameof(payload));
            _payload = payload;
            _at = 0;
        }

        /// <summary>The offset of the next byte to read.</summary>
        public int Offset { get { return _at; } }

        /// <summary>Bytes not read yet.</summary>
        public int Remaining { get { return _payload == null ? 0 : _payload.Length - _at; } }

        /// <summary>Whether every byte has been read: an optional value a payload leaves out reads as 0.</summary>
        public bool AtEnd { get { return Remaining == 0; } }

        private void Need(int n, string what)
        {
            if (Remaining < n) throw new ProtocolException(DecodeErrorKind.Truncated, what + " at offset " + _at);
        }

        /// <summary>A u8.</summary>
        public byte U8(string what = "u8")
        {
            Need(1, what);
            return _payload[_at++];
        }

        /// <summary>A little-endian u16.</summary>
        public ushort U16(string what = "u16")
        {
            Need(2, what);
            ushort v = (ushort)(_payload[_at] | _payload[_at + 1] << 8);
            _at += 2;
            return v;
        }

        /// <summary>A little-endian u32.</summary>
        public uint U32(string what = "u32")
        {
            Need(4, what);
            uint v = _payload[_at] | (uint)_payload[_at + 1] << 8 | (uint)_payload[_at + 2] << 16 | (uint)_payload[_at + 3] << 24;
            _at += 4;
            return v;
        }

        /// <summary>A little-endian u64.</summary>
        public ulong U64(string what = "u64")
        {
            Need(8, what);
            ulong low = U32(what);
            ulong high = U32(what);
            return low | high << 32;
        }

        /// <summary>An i8 (two's complement).</summary>
        public sbyte I8(string what = "i8") { return unchecked((sbyte)U8(what)); }

        /// <summary>A little-endian two's complement i16.</summary>
        public short I16(string what = "i16") { return unchecked((short)U16(what)); }

        /// <summary>A little-endian two's complement i32.</summary>
        public int I32(string what = "i32") { return unchecked((int)U32(what)); }

        /// <summary>A little-endian two's complement i64.</summary>
        public long I64(string what = "i64") { return unchecked((long)U64(what)); }

        /// <summary>An f32 from its little-endian IEEE-754 bits (NaN payloads and the sign of zero kept).</summary>
        public float F32(string what = "f32") { return Bits.Int32BitsToSingle(unchecked((int)U32(what))); }

        /// <summary>A bool: one byte, 0 or 1; any other byte is <see cref="DecodeErrorKind.Invalid"/>.</summary>
        public bool Bool(string what = "bool")
        {
            byte b = U8(what);
            if (b > 1) throw new ProtocolException(DecodeErrorKind.Invalid, what + ": bool byte " + b);
            return b == 1;
        }

        /// <summary>A u32 length, checked against the bytes left before anything is allocated.</summary>
        private int Length(string what)
        {
            uint n = U32(what);
            if (n > (uint)Remaining) throw new ProtocolException(DecodeErrorKind.Truncated, what + ": length " + n + " at offset " + (_at - 4));
            return (int)n;
        }

        private byte[] Copy(int n)
        {
            if (n == 0) return NoBytes;
            byte[] v = new byte[n];
            System.Buffer.BlockCopy(_payload, _at, v, 0, n);
            _at += n;
            return v;
        }

        private string Text(int n, string what)
        {
            if (n == 0) return string.Empty;
            if (!Utf8.IsValid(_payload, _at, n)) throw new ProtocolException(DecodeErrorKind.InvalidUtf8, what + " is not UTF-8");
            string s = Utf8.Encoding.GetString(_payload, _at, n);
            _at += n;
            return s;
        }

        /// <summary>A u32 length, then that many bytes (a copy).</summary>
        public byte[] Bytes(string what = "bytes")
        {
            int n = Length(what);
            return Copy(n);
        }

        /// <summary>A u32 length, then that many bytes of UTF-8.</summary>
        public string Str(string what = "str")
        {
            int n = Length(what);
            return Text(n, what);
        }

        /// <summary>Every byte left (a copy), as a payload's last (rest) value.</summary>
        public byte[] RestBytes()
        {
            return Copy(Remaining);
        }

        /// <summary>Every byte left as UTF-8, as a payload's last (rest) value.</summary>
        public string RestStr(string what = "str")
        {
            return Text(Remaining, what);
        }

        /// <summary>Refuses bytes left after the last value (<see cref="DecodeErrorKind.TrailingBytes"/>).</summary>
        public void End(string what = "payload")
        {
            int left = Remaining;
            if (left != 0) throw new ProtocolException(DecodeErrorKind.TrailingBytes, what + ": " + left + " trailing bytes");
        }
    }

    /// <summary>
    /// Tolerant reads of a replica entity's field values (<see cref="FieldValue"/> in wire form) by index:
    /// a null array, a missing value or one of another kind reads as the type's default. Never throws.
    /// </summary>
    public static class EntityFields
    {
        /// <summary>
        /// The code of a quant, centered or angle field: the integer at <paramref name="index"/> when it
        /// is in <c>0..=<paramref name="max"/></c>, else -1.
        /// </summary>
        public static long Code(FieldValue[] fields, int index, long max)
        {
            if (!Has(fields, index, FieldValueKind.Int)) return -1;
            long q = fields[index].AsLong;
            return q >= 0 && q <= max ? q : -1;
        }

        /// <summary>The integer at <paramref name="index"/> (a uint or sint field), else 0.</summary>
        public static long Int(FieldValue[] fields, int index)
        {
            return Has(fields, index, FieldValueKind.Int) ? fields[index].AsLong : 0;
        }

        /// <summary>The bool at <paramref name="index"/>, else false.</summary>
        public static bool Bool(FieldValue[] fields, int index)
        {
            return fields != null && index >= 0 && index < fields.Length && fields[index].AsBool;
        }

        /// <summary>The string at <paramref name="index"/>, else empty (never null).</summary>
        public static string Str(FieldValue[] fields, int index)
        {
            return Has(fields, index, FieldValueKind.Str) ? fields[index].AsString ?? string.Empty : string.Empty;
        }

        /// <summary>The f32 at <paramref name="index"/>, exactly, else 0.</summary>
        public static float F32(FieldValue[] fields, int index)
        {
            return Has(fields, index, FieldValueKind.F32) ? fields[index].AsFloat : 0f;
        }

        private static bool Has(FieldValue[] fields, int index, FieldValueKind kind)
        {
            return fields != null && index >= 0 && index < fields.Length && fields[index].Kind == kind;
        }
    }

    /// <summary>
    /// Checks that a zone's schema has the entity kinds code was generated for, field for field. Each
    /// difference is a <c>System.InvalidOperationException</c> whose message names the kind or field and
    /// ends with the <c>regenerate</c> hint given (e.g. "regenerate with `zonekeep codegen ...`").
    /// </summary>
    public static class SchemaCheck
    {
        private static InvalidOperationException Mismatch(string what, string regenerate)
        {
            return new InvalidOperationException(string.IsNullOrEmpty(regenerate) ? what : what + "; " + regenerate);
        }

        /// <summary>The kind id of the kind named <paramref name="name"/>, and the kind; refused when the schema has none.</summary>
        public static int FindKind(Schema schema, string name, string regenerate, out KindDef kind)
        {
            if (schema == null) throw new ArgumentNullException(nameof(schema));
            if (schema.Kinds != null)
            {
                for (int id = 0; id < schema.Kinds.Count; id++)
                {
                    KindDef k = schema.Kinds[id];
                    if (k != null && k.Name == name)
                    {
                        kind = k;
                        return id;
                    }
                }
            }
            throw Mismatch("the zone's schema has no kind \"" + name + "\"", regenerate);
        }

        /// <summary>Refuses <paramref name="kind"/> unless it has exactly <paramref name="count"/> fields.</summary>
        public static void FieldCount(KindDef kind, int count, string regenerate)
        {
            if (kind == null) throw new ArgumentNullException(nameof(kind));
            int n = kind.Fields == null ? 0 : kind.Fields.Count;
            if (n != count) throw Mismatch("the kind \"" + kind.Name + "\" has " + n + " fields in the zone's schema, the code expects " + count, regenerate);
        }

        /// <summary>
        /// Refuses <paramref name="kind"/> unless its field <paramref name="index"/> is named
        /// <paramref name="name"/> and has the type <paramref name="type"/>: the same kind and the same
        /// parameters, floats compared bit for bit.
        /// </summary>
        public static void Field(KindDef kind, int index, string name, FieldType type, string regenerate)
        {
            if (kind == null) throw new ArgumentNullException(nameof(kind));
            if (type == null) throw new ArgumentNullException(nameof(type));
            FieldDef field = kind.Fields != null && index >= 0 && index < kind.Fields.Count ? kind.Fields[index] : null;
            if (field == null || field.Name != name)
                throw Mismatch("field " + index + " of the kind \"" + kind.Name + "\" is " + (field == null ? "missing" : "\"" + field.Name + "\"") + " in the zone's schema, the code expects \"" + name + "\"", regenerate);
            FieldType t = field.Type;
            bool same = t != null && t.Kind == type.Kind;
            if (same)
            {
                switch (type.Kind)
                {
                    case FieldTypeKind.Quant: same = SameBits(t.Min, type.Min) && SameBits(t.Max, type.Max) && t.Bits == type.Bits; break;
                    case FieldTypeKind.Centered: same = SameBits(t.Range, type.Range) && t.Bits == type.Bits; break;
                    case FieldTypeKind.Angle: same = t.Bits == type.Bits; break;
                    case FieldTypeKind.Str: same = t.MaxLen == type.MaxLen; break;
                }
            }
            if (!same)
            {
                string has = t == null ? "untyped" : Describe(t);
                throw Mismatch("the field \"" + name + "\" of the kind \"" + kind.Name + "\" is " + has + " in the zone's schema, the code expects " + Describe(type), regenerate);
            }
        }

        private static bool SameBits(float a, float b)
        {
            return Bits.SingleToInt32Bits(a) == Bits.SingleToInt32Bits(b);
        }

        private static string Describe(FieldType t)
        {
            switch (t.Kind)
            {
                case FieldTypeKind.Quant: return "quant(" + Number(t.Min) + ", " + Number(t.Max) + ", " + t.Bits + " bits)";
                case FieldTypeKind.Centered: return "centered(" + Number(t.Range) + ", " + t.Bits + " bits)";
                case FieldTypeKind.Angle: return "angle(" + t.Bits + " bits)";
                case FieldTypeKind.UInt: return "uint";
                case FieldTypeKind.SInt: return "sint";
                case FieldTypeKind.Bool: return "bool";
                case FieldTypeKind.Str: return "str(" + t.MaxLen + ")";
                case FieldTypeKind.F32: return "f32";
                default: return "type " + (int)t.Kind;
            }
        }

        private static string Number(float v)
        {
            if (Bits.SingleToInt32Bits(v) == int.MinValue) return "-0";
            return v.ToString("R", System.Globalization.CultureInfo.InvariantCulture);
        }
    }
}
