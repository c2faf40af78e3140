// A port of clients/js/test/codec.test.ts: the wire primitives refuse what the Rust reader refuses, and a
// Delta matches the Rust writer's bytes and applies in the §5.5 order.
using System;
using System.Collections.Generic;
using System.Linq;

namespace Zonekeep.Tests
{
    public static class CodecTests
    {
        static readonly Schema Ship = new Schema(0.01f,
            new KindDef("ship",
                new FieldDef("hp", FieldType.Quant(0, 100, 7)),
                new FieldDef("score", FieldType.UInt()),
                new FieldDef("tag", FieldType.Str(4))));

        static string Kind(string hex, Action<Reader> read)
        {
            return Check.Kind(() => read(new Reader(Hex.FromHex(hex))));
        }

        [Test]
        public static void RefusesNonCanonicalAndOverflowingVarintsLikeTheRustReader()
        {
            Check.Equal("non_canonical_varint", Kind("8000", r => r.VarintU32()), "8000");
            Check.Equal("ok", Kind("ffffffff0f", r => r.VarintU32()), "u32 max");
            Check.Equal("overflow", Kind("ffffffff1f", r => r.VarintU32()), "past u32");
            Check.Equal("truncated", Kind("8080808080", r => r.VarintU32()), "5 continued bytes");
            Check.Equal("overflow", Kind("808080808000", r => r.VarintU32()), "a sixth byte");
            Check.Equal("ok", Kind("ffffffffffffffffff01", r => r.VarintU64()), "u64 max");
            Check.Equal("overflow", Kind("ffffffffffffffffff01", r => r.VarintU64AsLong()), "u64 max as a long");
            Check.Equal("truncated", Kind("80", r => r.VarintU32()), "80");
            Check.Equal("truncated", Kind("05616263", r => r.Str(10)), "short string");
            Check.Equal("too_long", Kind("0b", r => r.Str(10)), "long string");
            Check.Equal("invalid_utf8", Kind("01ff", r => r.Str(10)), "ff");
            Check.Equal("ok", Kind("03efbbbf", r => r.Str(10)), "a BOM is data, not stripped");
            Check.Equal("\ufeff", new Reader(Hex.FromHex("03efbbbf")).Str(10), "the BOM is kept");
            Check.Equal("03efbbbf", Hex.ToHex(new Writer().Str("\ufeff", 10).ToArray()), "a BOM is written");
            Check.Throws<EncodeException>(() => new Writer().Str("\ud800", 10), "a lone surrogate");
            // Strict UTF-8 whatever the runtime's decoder accepts: overlong forms, surrogates, past U+10FFFF.
            Check.Equal("invalid_utf8", Kind("02c0af", r => r.Str(10)), "overlong '/'");
            Check.Equal("invalid_utf8", Kind("03eda080", r => r.Str(10)), "an encoded surrogate");
            Check.Equal("invalid_utf8", Kind("04f4908080", r => r.Str(10)), "past U+10FFFF");
            Check.Equal("invalid_utf8", Kind("02e282", r => r.Str(10)), "a cut sequence");
        }

        static Delta ShipDelta()
        {
            Delta d = new Delta { Tick = 300, Ack = 7 }.WithControl(4);
            d.Despawns.AddRange(new uint[] { 3, 10 });
            d.Updates.Add(new Update { Index = 0, Id = 5, Kind = 0, Pos = PosForm.Step(PosFormKind.Tiny, 1, -1) });
            var u = new Update { Index = 2, Id = 9, Kind = 0, Mask = 5 };
            u.Fields.Add(new FieldChange(0, FieldValue.Int(100)));
            u.Fields.Add(new FieldChange(2, FieldValue.Str("ab")));
            d.Updates.Add(u);
            d.Spawns.Add(new Spawn { Id = 12, Kind = 0, Qx = -1, Qy = 2, Fields = new[] { FieldValue.Int(100), FieldValue.Int(300), FieldValue.Str("ab") } });
            d.Events = new List<ZoneEvent> { new ZoneEvent(2, new byte[] { 0x68, 0x69 }) };
            return d;
        }

        [Test]
        public static void DeltaMatchesTheRustWritersBytesAndAppliesInSpecOrder()
        {
            var known = new List<KnownEntry>(new uint[] { 3, 5, 7, 9, 10 }.Select(id => new KnownEntry(id, 0)));
            Delta delta = ShipDelta();
            byte[] bytes = DeltaCodec.Encode(delta, Ship, known);
            // tag tick ack flags control | despawns 3,10 | 2 updates, gaps 0,1 | tiny, fields-only | spawn 12 | event
            Check.Equal("82ac020706" + "05" + "020306" + "02000001" + "46" + "840564026162" + "010c0001046" + "4ac02026162" + "0102026869", Hex.ToHex(bytes), "bytes");
            string d = Json.Diff(Fixtures.DeltaToJson(delta), Fixtures.DeltaToJson(DeltaCodec.Decode(bytes, Ship, known)));
            Check.True(d == null, "decodes to what was encoded: " + d);

            var mirror = new Mirror(Ship);
            var baseline = new Delta { Tick = 1, Baseline = true };
            foreach (KnownEntry e in known)
                baseline.Spawns.Add(new Spawn { Id = e.Id, Kind = 0, Qx = (int)e.Id, Qy = 0, Fields = new[] { FieldValue.Int(1), FieldValue.Int(0), FieldValue.Str("") } });
            mirror.Apply(baseline);
            MirrorChanges changes;
            mirror.Receive(bytes, out changes);
            Check.Equal("3,10", string.Join(",", changes.Removed), "removed");
            Check.Equal("5,9", string.Join(",", changes.Updated), "updated");
            Check.Equal("12", string.Join(",", changes.Spawned), "spawned");
            Check.Equal("5:0,7:0,9:0,12:0", string.Join(",", mirror.Known().Select(e => e.Id + ":" + e.Kind)), "known");
            Check.Equal(6, mirror.Get(5).Qx, "qx of 5");
            Check.Equal(-1, mirror.Get(5).Qy, "qy of 5");
            Check.Equal("100,0,\"ab\"", string.Join(",", mirror.Get(9).Fields.Select(f => f.ToString())), "fields of 9");
            // The same bytes again are inconsistent (3 is no longer known) and change nothing.
            var err = Check.Throws<ProtocolException>(() => mirror.Receive(bytes, out changes), "the same Delta twice");
            Check.Equal(DecodeErrorKind.Invalid, err.Kind, "kind");
            Check.Equal(4, mirror.Count, "size");
        }
    }
}
