// Runtime/Payload.cs on its own, the helpers generated code calls: PayloadWriter's little-endian bytes and
// sizing, PayloadReader's strict reads (each malformed payload refused with its kind), EntityFields' tolerant
// reads and SchemaCheck's refusals. Generated code against the cross-language vectors is GeneratedTests.
using System;

namespace Zonekeep.Tests
{
    public static class PayloadTests
    {
        static string Kind(string hex, Action<PayloadReader> read)
        {
            return Check.Kind(() => read(new PayloadReader(Hex.FromHex(hex))));
        }

        static string Message(string hex, Action<PayloadReader> read)
        {
            return Check.Throws<ProtocolException>(() => read(new PayloadReader(Hex.FromHex(hex))), hex).Message;
        }

        static string Hexed(PayloadWriter w) { return Hex.ToHex(w.ToArray()); }

        // ---- the writer

        [Test]
        public static void EveryTypeIsWrittenLittleEndian()
        {
            var w = new PayloadWriter(0);
            w.U8(0xab);
            w.U16(0x1234);
            w.U32(0x89abcdef);
            w.U64(0x0102030405060708);
            Check.Equal("ab" + "3412" + "efcdab89" + "0807060504030201", Hexed(w), "unsigned");
            w = new PayloadWriter(0);
            w.I8(-2);
            w.I16(-2);
            w.I32(-2);
            w.I64(-2);
            Check.Equal("fe" + "feff" + "feffffff" + "feffffffffffffff", Hexed(w), "signed, two's complement");
            w = new PayloadWriter(0);
            w.F32(1.5f);
            w.F32(Bits.Int32BitsToSingle(unchecked((int)0x80000000)));
            w.F32(Bits.Int32BitsToSingle(0x7fc00001));
            w.Bool(true);
            w.Bool(false);
            Check.Equal("0000c03f" + "00000080" + "0100c07f" + "01" + "00", Hexed(w), "f32 by bits (-0.0, a NaN payload), bools");
            w = new PayloadWriter(0);
            w.Bytes(new byte[] { 1, 2 });
            w.Str("hé");
            w.RawBytes(new byte[] { 9 });
            w.RawStr("\U0001F642");
            Check.Equal("02000000" + "0102" + "03000000" + "68c3a9" + "09" + "f09f9982", Hexed(w), "lengths, UTF-8, rest forms");
        }

        [Test]
        public static void NullArraysAndStringsWriteAsEmpty()
        {
            var w = new PayloadWriter(8);
            w.Bytes(null);
            w.Str(null);
            w.RawBytes(null);
            w.RawStr(null);
            w.Str("");
            w.RawStr("");
            w.RawBytes(new byte[0]);
            Check.Equal("00000000" + "00000000" + "00000000", Hexed(w), "three empty lengths, nothing raw");
            Check.Equal(0, PayloadWriter.Utf8Length(null), "null");
            Check.Equal(0, PayloadWriter.Utf8Length(""), "empty");
        }

        [Test]
        public static void Utf8LengthSizesAStringAndLoneSurrogatesAreRefused()
        {
            Check.Equal(1, PayloadWriter.Utf8Length("a"), "ASCII");
            Check.Equal(2, PayloadWriter.Utf8Length("é"), "two bytes");
            Check.Equal(4, PayloadWriter.Utf8Length("\U0001F642"), "a surrogate pair is one four-byte code point");
            var e = Check.Throws<EncodeException>(() => PayloadWriter.Utf8Length("a\ud800", "say.text"), "lone high surrogate");
            Check.Equal(EncodeErrorKind.Invalid, e.Kind, "kind");
            Check.True(e.Message.Contains("say.text"), "the message names the value: " + e.Message);
            Check.Throws<EncodeException>(() => PayloadWriter.Utf8Length("\udc00"), "lone low surrogate");

            var w = new PayloadWriter(0);
            w.U8(7);
            e = Check.Throws<EncodeException>(() => w.Str("\udc00b", "wide.h_str"), "Str");
            Check.True(e.Message.Contains("wide.h_str"), "Str names the value: " + e.Message);
            Check.Throws<EncodeException>(() => w.RawStr("x\ud800"), "RawStr");
            Check.Equal(1, w.Length, "a refused string writes nothing");
            Check.Equal("07", Hexed(w), "the bytes before it");
        }

        [Test]
        public static void AnExactSizeGivesTheBufferItselfAndAShortOneGrows()
        {
            var exact = new PayloadWriter(5);
            exact.U8(1);
            exact.U32(2);
            byte[] first = exact.ToArray();
            Check.True(ReferenceEquals(first, exact.ToArray()), "a full buffer is returned, not copied");
            exact.U8(3);
            Check.Equal("0102000000", Hex.ToHex(first), "writing on grows into a new buffer, the payload given out is kept");
            Check.Equal("010200000003", Hexed(exact), "and the writer has every byte");

            var roomy = new PayloadWriter(64);
            roomy.U16(0xbeef);
            byte[] copy = roomy.ToArray();
            Check.Equal(2, copy.Length, "a copy of the bytes written");
            roomy.U8(0);
            Check.Equal("efbe", Hex.ToHex(copy), "the copy is the payload's own");

            var grown = new PayloadWriter(0);
            var blob = new byte[1000];
            for (int i = 0; i < blob.Length; i++) blob[i] = (byte)i;
            for (int i = 0; i < 3; i++) grown.Bytes(blob);
            Check.Equal(3 * 1004, grown.Length, "length");
            byte[] all = grown.ToArray();
            Check.Equal(3 * 1004, all.Length, "every byte kept across growth");
            Check.Equal((byte)231, all[2 * 1004 + 4 + 999], "the last byte");

            PayloadWriter unset = default(PayloadWriter);
            Check.Equal(0, unset.ToArray().Length, "an unset writer is empty");
            unset.U32(1);
            Check.Equal("01000000", Hexed(unset), "and writes like any other");
            Check.Equal(0, new PayloadWriter(0).ToArray().Length, "nothing written");
            Check.Throws<ArgumentOutOfRangeException>(() => new PayloadWriter(-1), "negative capacity");
        }

        // ---- the reader

        [Test]
        public static void EveryTypeRoundTripsAtItsLimits()
        {
            var w = new PayloadWriter(0);
            w.U8(byte.MaxValue); w.U16(ushort.MaxValue); w.U32(uint.MaxValue); w.U64(ulong.MaxValue);
            w.I8(sbyte.MinValue); w.I16(short.MinValue); w.I32(int.MinValue); w.I64(long.MinValue);
            w.I8(sbyte.MaxValue); w.I16(short.MaxValue); w.I32(int.MaxValue); w.I64(long.MaxValue);
            w.F32(float.Epsilon); w.F32(Bits.Int32BitsToSingle(unchecked((int)0xffc00123))); w.F32(float.NegativeInfinity);
            w.Bool(true); w.Bool(false);
            w.Bytes(new byte[] { 0, 255 }); w.Bytes(new byte[0]); w.Str("zone \u2603"); w.Str("");
            w.RawStr("\U0001F642 rest");

            var r = new PayloadReader(w.ToArray());
            Check.Equal(byte.MaxValue, r.U8(), "u8");
            Check.Equal(ushort.MaxValue, r.U16(), "u16");
            Check.Equal(uint.MaxValue, r.U32(), "u32");
            Check.Equal(ulong.MaxValue, r.U64(), "u64");
            Check.Equal(sbyte.MinValue, r.I8(), "i8 min");
            Check.Equal(short.MinValue, r.I16(), "i16 min");
            Check.Equal(int.MinValue, r.I32(), "i32 min");
            Check.Equal(long.MinValue, r.I64(), "i64 min");
            Check.Equal(sbyte.MaxValue, r.I8(), "i8 max");
            Check.Equal(short.MaxValue, r.I16(), "i16 max");
            Check.Equal(int.MaxValue, r.I32(), "i32 max");
            Check.Equal(long.MaxValue, r.I64(), "i64 max");
            Check.Equal(1u, Bits.F32Bits(r.F32()), "f32 smallest subnormal");
            Check.Equal(0xffc00123u, Bits.F32Bits(r.F32()), "f32 NaN payload");
            Check.Equal(float.NegativeInfinity, r.F32(), "f32 -inf");
            Check.Equal(true, r.Bool(), "true");
            Check.Equal(false, r.Bool(), "false");
            Check.Equal("00ff", Hex.ToHex(r.Bytes()), "bytes");
            Check.Equal(0, r.Bytes().Length, "empty bytes");
            Check.Equal("zone \u2603", r.Str(), "str");
            Check.Equal("", r.Str(), "empty str");
            Check.True(!r.AtEnd, "the rest is left");
            int offset = r.Offset;
            Check.Equal(4 + 5, r.Remaining, "remaining");
            Check.Equal("\U0001F642 rest", r.RestStr(), "rest str");
            Check.Equal(offset + 9, r.Offset, "offset after the rest");
            Check.True(r.AtEnd, "at the end");
            Check.Equal(0, r.RestBytes().Length, "nothing left for rest bytes");
            Check.Equal("", r.RestStr(), "nor for a rest str");
            r.End();
        }

        [Test]
        public static void BytesReadAreCopies()
        {
            byte[] payload = Hex.FromHex("02000000aabbccdd");
            var r = new PayloadReader(payload);
            byte[] b = r.Bytes();
            byte[] rest = r.RestBytes();
            b[0] = 0;
            rest[0] = 0;
            Check.Equal("02000000aabbccdd", Hex.ToHex(payload), "the payload is untouched");
            Check.Equal("00dd", Hex.ToHex(rest), "the rest");
        }

        [Test]
        public static void EveryMalformedReadIsRefusedWithItsKind()
        {
            Check.Equal("truncated", Kind("", r => r.U8()), "u8");
            Check.Equal("truncated", Kind("01", r => r.U16()), "u16");
            Check.Equal("truncated", Kind("010203", r => r.U32()), "u32");
            Check.Equal("truncated", Kind("01020304050607", r => r.U64()), "u64");
            Check.Equal("truncated", Kind("", r => r.I8()), "i8");
            Check.Equal("truncated", Kind("01", r => r.I16()), "i16");
            Check.Equal("truncated", Kind("010203", r => r.I32()), "i32");
            Check.Equal("truncated", Kind("01020304050607", r => r.I64()), "i64");
            Check.Equal("truncated", Kind("0000c0", r => r.F32()), "f32");
            Check.Equal("truncated", Kind("", r => r.Bool()), "bool");
            Check.Equal("invalid", Kind("02", r => r.Bool()), "bool 2");
            Check.Equal("invalid", Kind("ff", r => r.Bool()), "bool 255");
            Check.Equal("truncated", Kind("010000", r => r.Bytes()), "a cut length");
            Check.Equal("truncated", Kind("03000000aabb", r => r.Bytes()), "bytes past the end");
            Check.Equal("truncated", Kind("ffffffff", r => r.Bytes()), "a 4 GiB length");
            Check.Equal("truncated", Kind("ffffffff", r => r.Str()), "a 4 GiB str");
            Check.Equal("truncated", Kind("0500000068656c6c", r => r.Str()), "str past the end");
            Check.Equal("invalid_utf8", Kind("01000000ff", r => r.Str()), "0xff");
            Check.Equal("invalid_utf8", Kind("02000000c0af", r => r.Str()), "overlong '/'");
            Check.Equal("invalid_utf8", Kind("03000000eda080", r => r.Str()), "an encoded surrogate");
            Check.Equal("invalid_utf8", Kind("04000000f4908080", r => r.Str()), "past U+10FFFF");
            Check.Equal("invalid_utf8", Kind("02000000e282", r => r.Str()), "a cut sequence");
            Check.Equal("invalid_utf8", Kind("61ff", r => r.RestStr()), "rest str 0xff");
            Check.Equal("invalid_utf8", Kind("e282", r => r.RestStr()), "rest str cut");
            Check.Equal("trailing_bytes", Kind("0100", r => { r.U8(); r.End(); }), "a byte left over");
            Check.Equal("trailing_bytes", Kind("00", r => r.End()), "nothing read");
            Check.Equal("ok", Kind("03000000efbbbf", r => { Check.Equal("\ufeff", r.Str(), "a BOM is data"); r.End(); }), "a BOM");
            Check.Equal("ok", Kind("", r => { r.RestBytes(); r.RestStr(); r.End(); }), "an empty payload");
        }

        [Test]
        public static void RefusalsNameTheValueAndWhere()
        {
            string m = Message("2a000000", r => { r.U32("hit.by"); r.F32("hit.damage"); });
            Check.True(m.StartsWith("truncated: ", StringComparison.Ordinal) && m.Contains("hit.damage at offset 4"), m);
            m = Message("03", r => r.Bool("hit.critical"));
            Check.True(m.Contains("hit.critical: bool byte 3"), m);
            m = Message("0009000000aa", r => { r.U8(); r.Bytes("blob.data"); });
            Check.True(m.Contains("blob.data: length 9 at offset 1"), m);
            m = Message("01000000ff", r => r.Str("chat.from"));
            Check.True(m.StartsWith("invalid_utf8: ", StringComparison.Ordinal) && m.Contains("chat.from is not UTF-8"), m);
            m = Message("000102", r => { r.U8(); r.End("tally"); });
            Check.True(m.Contains("tally: 2 trailing bytes"), m);
        }

        [Test]
        public static void AnAbsentOptionalValueIsSeenAtTheEndAndAHalfOneIsRefused()
        {
            var r = new PayloadReader(Hex.FromHex("07"));
            Check.Equal((byte)7, r.U8(), "the value before it");
            Check.True(r.AtEnd, "absent");
            r.End();
            Check.Equal("truncated", Kind("0700", p => { p.U8(); if (!p.AtEnd) p.I16(); }), "half an i16");
        }

        [Test]
        public static void ANullPayloadIsAnArgumentErrorAndAnUnsetReaderIsEmpty()
        {
            var e = Check.Throws<ArgumentNullException>(() => new PayloadReader(null), "null");
            Check.Equal("payload", e.ParamName, "parameter");
            PayloadReader unset = default(PayloadReader);
            Check.True(unset.AtEnd, "empty");
            Check.Equal(0, unset.Remaining, "nothing remains");
            Check.Equal("truncated", Check.Kind(() => unset.U8()), "a read");
            Check.Equal(0, unset.RestBytes().Length, "rest bytes");
            unset.End();
        }

        // ---- entity fields

        [Test]
        public static void EntityFieldsReadTheirTypesDefaultAndNeverThrow()
        {
            FieldValue[] f = { FieldValue.Int(15), FieldValue.Int(-3), FieldValue.Bool(true), FieldValue.Str("ace"), FieldValue.F32(-0.5f), FieldValue.Int(16) };
            Check.Equal(15L, EntityFields.Code(f, 0, 15), "a code at its max");
            Check.Equal(-1L, EntityFields.Code(f, 5, 15), "a code past its max");
            Check.Equal(-1L, EntityFields.Code(f, 1, 15), "a negative code");
            Check.Equal(-1L, EntityFields.Code(f, 2, 15), "not an integer");
            Check.Equal(-3L, EntityFields.Int(f, 1), "an integer");
            Check.Equal(0L, EntityFields.Int(f, 3), "a string as an integer");
            Check.Equal(true, EntityFields.Bool(f, 2), "a bool");
            Check.Equal(false, EntityFields.Bool(f, 0), "an integer as a bool");
            Check.Equal("ace", EntityFields.Str(f, 3), "a string");
            Check.Equal("", EntityFields.Str(f, 0), "an integer as a string");
            Check.Equal(-0.5f, EntityFields.F32(f, 4), "an f32");
            Check.Equal(0f, EntityFields.F32(f, 0), "an integer as an f32");
            Check.Equal("", EntityFields.Str(new[] { default(FieldValue) }, 0), "an unset value");
            foreach (int i in new[] { -1, 6, int.MaxValue })
                CheckDefaults(f, i, "index " + i);
            CheckDefaults(null, 0, "null fields");
            CheckDefaults(new FieldValue[0], 0, "no fields");
        }

        static void CheckDefaults(FieldValue[] fields, int i, string what)
        {
            Check.Equal(-1L, EntityFields.Code(fields, i, 15), what);
            Check.Equal(0L, EntityFields.Int(fields, i), what);
            Check.Equal(false, EntityFields.Bool(fields, i), what);
            Check.Equal("", EntityFields.Str(fields, i), what);
            Check.Equal(0f, EntityFields.F32(fields, i), what);
        }

        // ---- schema checks

        const string Hint = "regenerate with `zonekeep codegen --kind test`";

        static Schema TestSchema()
        {
            return new Schema(0.01f,
                new KindDef("rock"),
                new KindDef("ship",
                    new FieldDef("x", FieldType.Quant(-8f, 8f, 4)),
                    new FieldDef("lean", FieldType.Centered(2f, 8)),
                    new FieldDef("heading", FieldType.Angle(6)),
                    new FieldDef("name", FieldType.Str(16)),
                    new FieldDef("hp", FieldType.UInt())));
        }

        static string Refusal(Action check, string what)
        {
            string m = Check.Throws<InvalidOperationException>(check, what).Message;
            Check.True(m.EndsWith("; " + Hint, StringComparison.Ordinal), what + ": ends with the hint: " + m);
            return m;
        }

        [Test]
        public static void FindKindGivesTheIdByName()
        {
            Schema s = TestSchema();
            KindDef kind;
            Check.Equal(1, SchemaCheck.FindKind(s, "ship", Hint, out kind), "ship's id");
            Check.Equal("ship", kind.Name, "the kind");
            Check.Equal(0, SchemaCheck.FindKind(s, "rock", Hint, out kind), "rock's id");
            string m = Refusal(() => SchemaCheck.FindKind(s, "comet", Hint, out kind), "no comet");
            Check.Equal("the zone's schema has no kind \"comet\"; " + Hint, m, "message");
            m = Check.Throws<InvalidOperationException>(() => SchemaCheck.FindKind(s, "comet", null, out kind), "no hint").Message;
            Check.Equal("the zone's schema has no kind \"comet\"", m, "without a hint, no \"; \"");
            s.Kinds[1] = null;
            Refusal(() => SchemaCheck.FindKind(s, "ship", Hint, out kind), "a null kind");
            Check.Throws<ArgumentNullException>(() => SchemaCheck.FindKind(null, "ship", Hint, out kind), "null schema");
        }

        [Test]
        public static void FieldCountAndFieldsAreCheckedExactly()
        {
            KindDef ship = TestSchema().Kinds[1];
            SchemaCheck.FieldCount(ship, 5, Hint);
            SchemaCheck.FieldCount(new KindDef("rock"), 0, Hint);
            SchemaCheck.FieldCount(new KindDef("rock") { Fields = null }, 0, Hint);
            string m = Refusal(() => SchemaCheck.FieldCount(ship, 4, Hint), "count");
            Check.True(m.Contains("the kind \"ship\" has 5 fields in the zone's schema, the code expects 4"), m);

            SchemaCheck.Field(ship, 0, "x", FieldType.Quant(-8f, 8f, 4), Hint);
            SchemaCheck.Field(ship, 1, "lean", FieldType.Centered(2f, 8), Hint);
            SchemaCheck.Field(ship, 2, "heading", FieldType.Angle(6), Hint);
            SchemaCheck.Field(ship, 3, "name", FieldType.Str(16), Hint);
            SchemaCheck.Field(ship, 4, "hp", FieldType.UInt(), Hint);

            m = Refusal(() => SchemaCheck.Field(ship, 0, "y", FieldType.Quant(-8f, 8f, 4), Hint), "renamed");
            Check.True(m.Contains("field 0 of the kind \"ship\" is \"x\" in the zone's schema, the code expects \"y\""), m);
            m = Refusal(() => SchemaCheck.Field(ship, 5, "extra", FieldType.Bool(), Hint), "past the last field");
            Check.True(m.Contains("field 5 of the kind \"ship\" is missing"), m);
            Refusal(() => SchemaCheck.Field(ship, -1, "x", FieldType.Bool(), Hint), "a negative index");

            m = Refusal(() => SchemaCheck.Field(ship, 0, "x", FieldType.Quant(-8f, 8f, 5), Hint), "quant bits");
            Check.True(m.Contains("the field \"x\" of the kind \"ship\" is quant(-8, 8, 4 bits) in the zone's schema, the code expects quant(-8, 8, 5 bits)"), m);
            Refusal(() => SchemaCheck.Field(ship, 0, "x", FieldType.Quant(-8f, 8.000001f, 4), Hint), "quant max one ulp off");
            m = Refusal(() => SchemaCheck.Field(ship, 0, "x", FieldType.Quant(-0f, 8f, 4), Hint), "quant min -0");
            Check.True(m.Contains("quant(-0, 8, 4 bits)"), "-0 is written with its sign: " + m);
            Refusal(() => SchemaCheck.Field(ship, 1, "lean", FieldType.Centered(2.0000002f, 8), Hint), "centered range one ulp off");
            Refusal(() => SchemaCheck.Field(ship, 1, "lean", FieldType.Centered(2f, 9), Hint), "centered bits");
            Refusal(() => SchemaCheck.Field(ship, 2, "heading", FieldType.Angle(5), Hint), "angle bits");
            m = Refusal(() => SchemaCheck.Field(ship, 3, "name", FieldType.Str(15), Hint), "str max_len");
            Check.True(m.Contains("is str(16) in the zone's schema, the code expects str(15)"), m);
            m = Refusal(() => SchemaCheck.Field(ship, 4, "hp", FieldType.SInt(), Hint), "uint becomes sint");
            Check.True(m.Contains("is uint in the zone's schema, the code expects sint"), m);
            ship.Fields[4].Type = null;
            m = Refusal(() => SchemaCheck.Field(ship, 4, "hp", FieldType.UInt(), Hint), "untyped");
            Check.True(m.Contains("is untyped"), m);

            Check.Throws<ArgumentNullException>(() => SchemaCheck.FieldCount(null, 0, Hint), "null kind (count)");
            Check.Throws<ArgumentNullException>(() => SchemaCheck.Field(null, 0, "x", FieldType.Bool(), Hint), "null kind");
            Check.Throws<ArgumentNullException>(() => SchemaCheck.Field(ship, 0, "x", null, Hint), "null type");
        }
    }
}
