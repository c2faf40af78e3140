// Wire primitives of PROTOCOL.md §2: canonical LEB128 varints, zigzag, little-endian f32, and
// length-prefixed strings/bytes whose length is checked against a limit before anything is allocated.
//
// Decoders are total: every malformed input becomes a ProtocolException with a Kind, never a crash.
using System;
using System.Runtime.InteropServices;
using System.Text;

namespace Zonekeep
{
    /// <summary>Why a byte string was refused: the error kinds PROTOCOL.md §2 and the golden fixtures name.</summary>
    public enum DecodeErrorKind
    {
        /// <summary>The message ended before a field it announced.</summary>
        Truncated,
        /// <summary>A count or length over its limit (checked before the items it announces).</summary>
        TooLong,
        /// <summary>A tag this side does not read.</summary>
        UnknownTag,
        /// <summary>A string that is not UTF-8.</summary>
        InvalidUtf8,
        /// <summary>A varint with a redundant final zero group.</summary>
        NonCanonicalVarint,
        /// <summary>A value wider than its field.</summary>
        Overflow,
        /// <summary>A value the protocol forbids (a rule of a message, a schema or a Delta).</summary>
        Invalid,
        /// <summary>Bytes after the end of the message.</summary>
        TrailingBytes,
    }

    /// <summary>
    /// A typed decoding failure: <see cref="Kind"/> says which rule the input broke, the message says where.
    /// Every decoder of this SDK answers malformed input with this exception and nothing else.
    /// </summary>
    public sealed class ProtocolException : Exception
    {
        /// <summary>The rule the input broke.</summary>
        public DecodeErrorKind Kind { get; }

        /// <summary>An error of <paramref name="kind"/>, <paramref name="detail"/> saying where.</summary>
        public ProtocolException(DecodeErrorKind kind, string detail)
            : base(KindName(kind) + ": " + detail)
        {
            Kind = kind;
        }

        /// <summary>The fixtures' (and Rust's) name of <paramref name="kind"/>, e.g. <c>non_canonical_varint</c>.</summary>
        public static string KindName(DecodeErrorKind kind)
        {
            switch (kind)
            {
                case DecodeErrorKind.Truncated: return "truncated";
                case DecodeErrorKind.TooLong: return "too_long";
                case DecodeErrorKind.UnknownTag: return "unknown_tag";
                case DecodeErrorKind.InvalidUtf8: return "invalid_utf8";
                case DecodeErrorKind.NonCanonicalVarint: return "non_canonical_varint";
                case DecodeErrorKind.Overflow: return "overflow";
                case DecodeErrorKind.Invalid: return "invalid";
                default: return "trailing_bytes";
            }
        }
    }

    /// <summary>Why a value could not be encoded.</summary>
    public enum EncodeErrorKind
    {
        /// <summary>A length or count over its limit.</summary>
        TooLong,
        /// <summary>A value the wire cannot carry.</summary>
        Invalid,
    }

    /// <summary>A typed encoding failure (a length over its limit, or a value the wire cannot carry).</summary>
    public sealed class EncodeException : Exception
    {
        /// <summary>The rule the value broke.</summary>
        public EncodeErrorKind Kind { get; }

        /// <summary>An error of <paramref name="kind"/>.</summary>
        public EncodeException(EncodeErrorKind kind, string detail)
            : base((kind == EncodeErrorKind.TooLong ? "too_long: " : "invalid: ") + detail)
        {
            Kind = kind;
        }
    }

    /// <summary>Strict UTF-8 (RFC 3629) checks, the same on every runtime a game runs on.</summary>
    internal static class Utf8
    {
        // Encoding's own fallback behaviour has differed between runtimes (Mono, .NET Framework, CoreCLR),
        // so validity is decided here and the platform decoder only converts bytes already known good.
        internal static readonly UTF8Encoding Encoding = new UTF8Encoding(false, true);

        /// <summary>Whether <c>b[offset..offset+count)</c> is well-formed UTF-8 (no overlongs, surrogates or values past U+10FFFF).</summary>
        internal static bool IsValid(byte[] b, int offset, int count)
        {
            int i = offset;
            int end = offset + count;
            while (i < end)
            {
                byte c = b[i];
                if (c < 0x80) { i++; continue; }
                int need;
                int min;
                int cp;
                if ((c & 0xE0) == 0xC0) { need = 1; min = 0x80; cp = c & 0x1F; }
                else if ((c & 0xF0) == 0xE0) { need = 2; min = 0x800; cp = c & 0x0F; }
                else if ((c & 0xF8) == 0xF0) { need = 3; min = 0x10000; cp = c & 0x07; }
                else return false;
                if (end - i - 1 < need) return false;
                for (int k = 1; k <= need; k++)
                {
                    byte cc = b[i + k];
                    if ((cc & 0xC0) != 0x80) return false;
                    cp = (cp << 6) | (cc & 0x3F);
                }
                if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
                i += need + 1;
            }
            return true;
        }

        /// <summary>The UTF-8 byte count of <paramref name="s"/>; lone surrogates are an <see cref="EncodeException"/>.</summary>
        internal static int ByteCount(string s, string what)
        {
            try
            {
                return Encoding.GetByteCount(s);
            }
            catch (EncoderFallbackException)
            {
                throw new EncodeException(EncodeErrorKind.Invalid, what + " has a lone surrogate");
            }
        }
    }

    /// <summary>
    /// A cursor over one message's bytes. Every read checks bounds and limits first; a failure is a
    /// <see cref="ProtocolException"/>.
    /// </summary>
    public sealed class Reader
    {
        private readonly byte[] _bytes;
        private readonly int _end;
        private int _pos;

        /// <summary>Reads all of <paramref name="bytes"/> from the start.</summary>
        public Reader(byte[] bytes) : this(bytes, 0, bytes == null ? 0 : bytes.Length) { }

        /// <summary>Reads <paramref name="count"/> bytes of <paramref name="bytes"/> from <paramref name="offset"/>.</summary>
        public Reader(byte[] bytes, int offset, int count)
        {
            if (bytes == null) throw new ArgumentNullException(nameof(bytes));
            if (offset < 0 || count < 0 || offset + count > bytes.Length) throw new ArgumentOutOfRangeException(nameof(count));
            _bytes = bytes;
            _pos = offset;
            _end = offset + count;
        }

        /// <summary>Bytes not read yet.</summary>
        public int Remaining { get { return _end - _pos; } }

        /// <summary>Offset of the next byte to read in the underlying array.</summary>
        public int Offset { get { return _pos; } }

        /// <summary>One byte.</summary>
        public byte U8()
        {
            if (_pos >= _end) throw new ProtocolException(DecodeErrorKind.Truncated, "byte at offset " + _pos);
            return _bytes[_pos++];
        }

        /// <summary>
        /// A canonical varint of a <paramref name="bits"/>-wide field. Checks run in the Rust reader's order
        /// (read the byte, check the group fits, then canonical form) so both refuse an input with the same kind.
        /// </summary>
        private ulong VarintBits(int bits, string what)
        {
            ulong value = 0;
            int shift = 0;
            for (;;)
            {
                byte b = U8();
                int group = b & 0x7f;
                if (shift >= bits || (bits - shift < 7 && (group >> (bits - shift)) != 0))
                    throw new ProtocolException(DecodeErrorKind.Overflow, "varint exceeds " + what);
                value |= (ulong)group << shift;
                if ((b & 0x80) == 0)
                {
                    if (group == 0 && shift > 0)
                        throw new ProtocolException(DecodeErrorKind.NonCanonicalVarint, "redundant final zero group");
                    return value;
                }
                shift += 7;
            }
        }

        /// <summary>A varint holding a u32.</summary>
        public uint VarintU32() { return (uint)VarintBits(32, "u32"); }

        /// <summary>A varint holding a u64, at full width.</summary>
        public ulong VarintU64() { return VarintBits(64, "u64"); }

        /// <summary>
        /// A varint holding a u64 that this SDK keeps as a <c>long</c> (ticks, times): values above
        /// 2^63 − 1 are refused as <see cref="DecodeErrorKind.Overflow"/> (no zone reaches such a tick).
        /// </summary>
        public long VarintU64AsLong()
        {
            ulong v = VarintBits(64, "u64");
            if (v > long.MaxValue) throw new ProtocolException(DecodeErrorKind.Overflow, "u64 value above 2^63-1");
            return (long)v;
        }

        /// <summary>A varint holding a u16.</summary>
        public ushort VarintU16()
        {
            uint v = VarintU32();
            if (v > 0xffff) throw new ProtocolException(DecodeErrorKind.Overflow, "varint exceeds u16");
            return (ushort)v;
        }

        /// <summary>A zigzag-coded i32.</summary>
        public int Zigzag32()
        {
            uint u = VarintU32();
            return (int)(u >> 1) ^ -(int)(u & 1);
        }

        /// <summary>A zigzag-coded i64.</summary>
        public long Zigzag64()
        {
            ulong u = VarintU64();
            return (long)(u >> 1) ^ -(long)(u & 1);
        }

        /// <summary>A little-endian IEEE-754 binary32.</summary>
        public float F32()
        {
            if (Remaining < 4) throw new ProtocolException(DecodeErrorKind.Truncated, "f32 at offset " + _pos);
            int bits = _bytes[_pos] | (_bytes[_pos + 1] << 8) | (_bytes[_pos + 2] << 16) | (_bytes[_pos + 3] << 24);
            _pos += 4;
            return Bits.Int32BitsToSingle(bits);
        }

        /// <summary>A little-endian u32 (4 bytes), as the known-set hash travels.</summary>
        public uint U32Le()
        {
            if (Remaining < 4) throw new ProtocolException(DecodeErrorKind.Truncated, "4 bytes at offset " + _pos);
            uint v = (uint)(_bytes[_pos] | (_bytes[_pos + 1] << 8) | (_bytes[_pos + 2] << 16) | (_bytes[_pos + 3] << 24));
            _pos += 4;
            return v;
        }

        /// <summary>Skips <paramref name="n"/> raw bytes and returns the offset they start at in the underlying array.</summary>
        public int Skip(int n)
        {
            if (n < 0 || Remaining < n) throw new ProtocolException(DecodeErrorKind.Truncated, n + " bytes at offset " + _pos);
            int at = _pos;
            _pos += n;
            return at;
        }

        /// <summary>The underlying array (for reading what <see cref="Skip"/> passed over without a copy).</summary>
        public byte[] Buffer { get { return _bytes; } }

        /// <summary>A length-prefixed byte string of at most <paramref name="max"/> bytes, copied out of the input.</summary>
        public byte[] BytesField(int max, string what = "bytes")
        {
            int len = LengthPrefix(max, what);
            int at = Skip(len);
            byte[] copy = new byte[len];
            System.Buffer.BlockCopy(_bytes, at, copy, 0, len);
            return copy;
        }

        /// <summary>A length-prefixed UTF-8 string of at most <paramref name="max"/> bytes.</summary>
        public string Str(int max, string what = "string")
        {
            int len = LengthPrefix(max, what);
            int at = Skip(len);
            if (!Utf8.IsValid(_bytes, at, len)) throw new ProtocolException(DecodeErrorKind.InvalidUtf8, what + " is not UTF-8");
            return len == 0 ? string.Empty : Utf8.Encoding.GetString(_bytes, at, len);
        }

        /// <summary>A u32 length, refused (<c>too_long</c>) as soon as it is read when over <paramref name="max"/>.</summary>
        private int LengthPrefix(int max, string what)
        {
            uint len = VarintU32();
            if (len > (uint)max) throw new ProtocolException(DecodeErrorKind.TooLong, what + ": length " + len + " > " + max);
            return (int)len;
        }

        /// <summary>A count (u32 varint) of at most <paramref name="max"/>, refused as soon as it is read.</summary>
        public int Count(int max, string what)
        {
            uint n = VarintU32();
            if (n > (uint)max) throw new ProtocolException(DecodeErrorKind.TooLong, what + ": " + n + " > " + max);
            return (int)n;
        }

        /// <summary>Checks that the whole message was consumed.</summary>
        public void Finish()
        {
            int left = Remaining;
            if (left != 0) throw new ProtocolException(DecodeErrorKind.TrailingBytes, left + " trailing bytes");
        }
    }

    /// <summary>A growable output buffer with the encoders matching <see cref="Reader"/>. Reusable with <see cref="Reset"/>.</summary>
    public sealed class Writer
    {
        private byte[] _buf;
        private int _len;

        /// <summary>An empty writer; <paramref name="capacity"/> is only a first allocation hint.</summary>
        public Writer(int capacity = 64)
        {
            _buf = new byte[Math.Max(16, capacity)];
        }

        /// <summary>Bytes written so far.</summary>
        public int Length { get { return _len; } }

        /// <summary>The buffer the bytes are in (valid up to <see cref="Length"/>).</summary>
        public byte[] Buffer { get { return _buf; } }

        /// <summary>Forgets what was written, keeping the buffer.</summary>
        public void Reset() { _len = 0; }

        private void Reserve(int n)
        {
            if (_len + n <= _buf.Length) return;
            int cap = _buf.Length * 2;
            while (cap < _len + n) cap *= 2;
            byte[] next = new byte[cap];
            System.Buffer.BlockCopy(_buf, 0, next, 0, _len);
            _buf = next;
        }

        /// <summary>One byte.</summary>
        public Writer U8(int v)
        {
            if (v < 0 || v > 0xff) throw new EncodeException(EncodeErrorKind.Invalid, "u8 " + v);
            Reserve(1);
            _buf[_len++] = (byte)v;
            return this;
        }

        /// <summary>A varint of an unsigned value (any width up to u64).</summary>
        public Writer Varint(ulong v)
        {
            Reserve(10);
            while (v >= 0x80)
            {
                _buf[_len++] = (byte)((v & 0x7f) | 0x80);
                v >>= 7;
            }
            _buf[_len++] = (byte)v;
            return this;
        }

        /// <summary>A varint of a u16 (codes, topics); <paramref name="what"/> names the value when it is out of range.</summary>
        internal Writer VarintU16(int v, string what)
        {
            if (v < 0 || v > 0xffff) throw new EncodeException(EncodeErrorKind.Invalid, what + " " + v);
            return Varint((ulong)v);
        }

        /// <summary>A varint of a non-negative <c>long</c> (ticks, times, counts).</summary>
        public Writer Varint(long v)
        {
            if (v < 0) throw new EncodeException(EncodeErrorKind.Invalid, "varint " + v);
            return Varint((ulong)v);
        }

        /// <summary>A zigzag-coded i32.</summary>
        public Writer Zigzag32(int v)
        {
            return Varint((ulong)(uint)((v << 1) ^ (v >> 31)));
        }

        /// <summary>A zigzag-coded i64.</summary>
        public Writer Zigzag64(long v)
        {
            return Varint((ulong)((v << 1) ^ (v >> 63)));
        }

        /// <summary>A little-endian binary32.</summary>
        public Writer F32(float v)
        {
            Reserve(4);
            int bits = Bits.SingleToInt32Bits(v);
            _buf[_len++] = (byte)bits;
            _buf[_len++] = (byte)(bits >> 8);
            _buf[_len++] = (byte)(bits >> 16);
            _buf[_len++] = (byte)(bits >> 24);
            return this;
        }

        /// <summary>A little-endian u32 (4 bytes).</summary>
        public Writer U32Le(uint v)
        {
            Reserve(4);
            _buf[_len++] = (byte)v;
            _buf[_len++] = (byte)(v >> 8);
            _buf[_len++] = (byte)(v >> 16);
            _buf[_len++] = (byte)(v >> 24);
            return this;
        }

        /// <summary>Raw bytes with no prefix.</summary>
        public Writer Raw(byte[] b, int offset, int count)
        {
            Reserve(count);
            System.Buffer.BlockCopy(b, offset, _buf, _len, count);
            _len += count;
            return this;
        }

        /// <summary>A length-prefixed byte string of at most <paramref name="max"/> bytes.</summary>
        public Writer BytesField(byte[] b, int max, string what = "bytes")
        {
            if (b == null) b = Empty.Bytes;
            if (b.Length > max) throw new EncodeException(EncodeErrorKind.TooLong, what + ": length " + b.Length + " > " + max);
            Varint((ulong)b.Length);
            return Raw(b, 0, b.Length);
        }

        /// <summary>A length-prefixed UTF-8 string of at most <paramref name="max"/> bytes. Lone surrogates are refused.</summary>
        public Writer Str(string s, int max, string what = "string")
        {
            if (s == null) s = string.Empty;
            int n = Utf8.ByteCount(s, what);
            if (n > max) throw new EncodeException(EncodeErrorKind.TooLong, what + ": length " + n + " > " + max);
            Varint((ulong)n);
            Reserve(n);
            if (n > 0) Utf8.Encoding.GetBytes(s, 0, s.Length, _buf, _len);
            _len += n;
            return this;
        }

        /// <summary>The bytes written, as a fresh array.</summary>
        public byte[] ToArray()
        {
            byte[] out_ = new byte[_len];
            System.Buffer.BlockCopy(_buf, 0, out_, 0, _len);
            return out_;
        }
    }

    /// <summary>Shared empty arrays (no allocation for "nothing").</summary>
    internal static class Empty
    {
        internal static readonly byte[] Bytes = new byte[0];
    }

    /// <summary>Bit-level conversions between floats and integers (the BCL's are not in .NET Standard 2.0).</summary>
    public static class Bits
    {
        // A union rather than pointers: no unsafe code (Unity assemblies need not allow it) and no allocation.
        [StructLayout(LayoutKind.Explicit)]
        private struct FloatInt
        {
            [FieldOffset(0)] public float F;
            [FieldOffset(0)] public int I;
        }

        /// <summary>The IEEE-754 bit pattern of <paramref name="v"/>.</summary>
        public static int SingleToInt32Bits(float v)
        {
            FloatInt u = default(FloatInt);
            u.F = v;
            return u.I;
        }

        /// <summary>The float whose bit pattern is <paramref name="bits"/>.</summary>
        public static float Int32BitsToSingle(int bits)
        {
            FloatInt u = default(FloatInt);
            u.I = bits;
            return u.F;
        }

        /// <summary>The f32 bit pattern of <paramref name="v"/> as an unsigned integer (for exact comparisons).</summary>
        public static uint F32Bits(float v) { return (uint)SingleToInt32Bits(v); }

        /// <summary>The f32 whose bit pattern is <paramref name="bits"/>.</summary>
        public static float F32FromBits(uint bits) { return Int32BitsToSingle((int)bits); }

        /// <summary>Bytes <c>varint(v)</c> takes.</summary>
        public static int VarintLen(ulong v)
        {
            int n = 1;
            while (v >= 0x80) { v >>= 7; n++; }
            return n;
        }
    }

    /// <summary>Hex strings (debugging, fixtures).</summary>
    public static class Hex
    {
        private const string Digits = "0123456789abcdef";

        /// <summary>Lowercase hex of <paramref name="b"/>.</summary>
        public static string ToHex(byte[] b)
        {
            if (b == null) return string.Empty;
            return ToHex(b, 0, b.Length);
        }

        /// <summary>Lowercase hex of <paramref name="count"/> bytes of <paramref name="b"/> from <paramref name="offset"/>.</summary>
        public static string ToHex(byte[] b, int offset, int count)
        {
            char[] c = new char[count * 2];
            for (int i = 0; i < count; i++)
            {
                c[2 * i] = Digits[b[offset + i] >> 4];
                c[2 * i + 1] = Digits[b[offset + i] & 15];
            }
            return new string(c);
        }

        /// <summary>Parses lowercase or uppercase hex; odd lengths and non-hex digits are a <see cref="ProtocolException"/> (<c>invalid</c>).</summary>
        public static byte[] FromHex(string hex)
        {
            if (hex == null || hex.Length % 2 != 0) throw new ProtocolException(DecodeErrorKind.Invalid, "not a hex string");
            byte[] out_ = new byte[hex.Length / 2];
            for (int i = 0; i < out_.Length; i++)
            {
                int hi = Digit(hex[2 * i]);
                int lo = Digit(hex[2 * i + 1]);
                if (hi < 0 || lo < 0) throw new ProtocolException(DecodeErrorKind.Invalid, "not a hex string");
                out_[i] = (byte)((hi << 4) | lo);
            }
            return out_;
        }

        private static int Digit(char c)
        {
            if (c >= '0' && c <= '9') return c - '0';
            if (c >= 'a' && c <= 'f') return c - 'a' + 10;
            if (c >= 'A' && c <= 'F') return c - 'A' + 10;
            return -1;
        }
    }
}
