// The C# that `zonekeep codegen` writes, run against the cross-language vectors: Generated/Sample.g.cs is
// written by crates/zonekeep-codegen/tests/golden.rs for its sample kind, and tests/fixtures/codegen/vectors.json
// says what each SDK's generated code must do with it: encode every input to exactly its bytes, decode every
// event to exactly its values (floats by bit pattern), refuse every bad event, read every entity's wire values
// to its values, and bind kind ids by name, refusing a schema that differs.
using System;
using System.Collections.Generic;
using System.Globalization;
using System.IO;
using System.Linq;
using Zonekeep.Generated.Sample;
using static Zonekeep.Tests.Json;

namespace Zonekeep.Tests
{
    public static class GeneratedTests
    {
        const string Regenerate = "regenerate with `zonekeep codegen --kind sample`";

        static Dictionary<string, object> Vectors()
        {
            string path = Path.Combine(Fixtures.RepoRoot(), "tests", "fixtures", "codegen", "vectors.json");
            return Obj(Parse(File.ReadAllText(path)));
        }

        // ---- values in one comparable form: integers as long, u64/i64 as decimal strings, f32 by bit
        // pattern, bytes as hex, bools and strings as they are.

        static object F32Key(float f) { return "f32:" + Bits.F32Bits(f).ToString("x8", CultureInfo.InvariantCulture); }

        static object Normalize(string type, object json)
        {
            switch (type)
            {
                case "int": return (long)Num(json);
                case "wide": return Str(json);
                case "f32": return F32Key((float)Num(json));
                case "bool": return (bool)json;
                case "str": return Str(json);
                case "bytes": return Str(json).ToLowerInvariant();
                default: throw new Exception("type " + type);
            }
        }

        static string Dec(ulong v) { return v.ToString(CultureInfo.InvariantCulture); }
        static string Dec(long v) { return v.ToString(CultureInfo.InvariantCulture); }

        // The type of each event value, as Normalize reads it.
        static readonly Dictionary<string, Dictionary<string, string>> EventTypes = new Dictionary<string, Dictionary<string, string>>
        {
            { "hit", new Dictionary<string, string> { { "by", "int" }, { "damage", "f32" }, { "critical", "bool" } } },
            { "chat", new Dictionary<string, string> { { "from", "str" }, { "line", "str" } } },
            { "blob", new Dictionary<string, string> { { "data", "bytes" }, { "tail", "bytes" } } },
            { "tally", new Dictionary<string, string> { { "count", "wide" }, { "delta", "wide" }, { "small", "int" } } },
        };

        static Dictionary<string, object> EventMap(ISampleEvent e)
        {
            if (e is HitEvent)
            {
                var h = (HitEvent)e;
                return new Dictionary<string, object> { { "by", (long)h.By }, { "damage", F32Key(h.Damage) }, { "critical", h.Critical } };
            }
            if (e is ChatEvent)
            {
                var c = (ChatEvent)e;
                return new Dictionary<string, object> { { "from", c.From }, { "line", c.Line } };
            }
            if (e is BlobEvent)
            {
                var b = (BlobEvent)e;
                return new Dictionary<string, object> { { "data", Hex.ToHex(b.Data) }, { "tail", Hex.ToHex(b.Tail) } };
            }
            if (e is TallyEvent)
            {
                var t = (TallyEvent)e;
                return new Dictionary<string, object> { { "count", Dec(t.Count) }, { "delta", Dec(t.Delta) }, { "small", (long)t.Small } };
            }
            throw new Exception("not an event of the sample: " + (e == null ? "null" : e.GetType().Name));
        }

        static Dictionary<string, object> ShipMap(ShipEntity s)
        {
            return new Dictionary<string, object>
            {
                { "x_vel", F32Key(s.XVel) }, { "heading", F32Key(s.Heading) }, { "lean", F32Key(s.Lean) }, { "hp", (long)s.Hp },
                { "team_delta", (long)s.TeamDelta }, { "alive", s.Alive }, { "callsign", s.Callsign }, { "mass", F32Key(s.Mass) },
            };
        }

        static readonly Dictionary<string, string> ShipTypes = new Dictionary<string, string>
        {
            { "x_vel", "f32" }, { "heading", "f32" }, { "lean", "f32" }, { "hp", "int" },
            { "team_delta", "int" }, { "alive", "bool" }, { "callsign", "str" }, { "mass", "f32" },
        };

        static void SameMap(Dictionary<string, object> want, Dictionary<string, object> got, string what)
        {
            Check.Equal(string.Join(",", want.Keys.OrderBy(k => k, StringComparer.Ordinal)), string.Join(",", got.Keys.OrderBy(k => k, StringComparer.Ordinal)), what + ": value names");
            foreach (var kv in want) Check.Equal(kv.Value, got[kv.Key], what + "." + kv.Key);
        }

        static Dictionary<string, object> Expected(Dictionary<string, string> types, Dictionary<string, object> values)
        {
            var map = new Dictionary<string, object>();
            foreach (var kv in values) map[kv.Key] = Normalize(types[kv.Key], kv.Value);
            return map;
        }

        // ---- the sample's schema as a zone would declare it

        static KindDef Ship()
        {
            return new KindDef("ship",
                new FieldDef("x-vel", FieldType.Quant(-8f, 8f, 4)),
                new FieldDef("heading", FieldType.Angle(2)),
                new FieldDef("lean", FieldType.Centered(2f, 8)),
                new FieldDef("hp", FieldType.UInt()),
                new FieldDef("teamDelta", FieldType.SInt()),
                new FieldDef("alive", FieldType.Bool()),
                new FieldDef("callsign", FieldType.Str(16)),
                new FieldDef("mass", FieldType.F32()));
        }

        static Schema SchemaOf(IEnumerable<object> kindNames)
        {
            Schema s = new Schema(0.01f);
            foreach (object n in kindNames)
            {
                switch (Str(n))
                {
                    case "ship": s.Kinds.Add(Ship()); break;
                    case "rock": s.Kinds.Add(new KindDef("rock")); break;
                    default: throw new Exception("kind " + Str(n) + " is not in the sample");
                }
            }
            return s;
        }

        // ---- inputs

        static byte[] EncodeInput(string name, Dictionary<string, object> v)
        {
            switch (name)
            {
                case "steer":
                    return new SteerInput { Turn = (sbyte)Num(v["turn"]), Thrust = (ushort)Num(v["thrust"]), Boost = (byte)Num(v["boost"]), Trim = (float)Num(v["trim"]) }.Encode();
                case "say":
                    return new SayInput { Channel = (uint)Num(v["channel"]), Text = Str(v["text"]) }.Encode();
                case "wide":
                    return new WideInput
                    {
                        AU64 = ulong.Parse(Str(v["a_u64"]), CultureInfo.InvariantCulture),
                        BI16 = (short)Num(v["b_i16"]),
                        CI32 = (int)Num(v["c_i32"]),
                        DI64 = long.Parse(Str(v["d_i64"]), CultureInfo.InvariantCulture),
                        EF32 = (float)Num(v["e_f32"]),
                        FBool = (bool)v["f_bool"],
                        GBytes = Hex.FromHex(Str(v["g_bytes"])),
                        HStr = Str(v["h_str"]),
                        IRest = Hex.FromHex(Str(v["i_rest"])),
                    }.Encode();
                default:
                    throw new Exception("input " + name + " is not in the sample");
            }
        }

        [Test]
        public static void EveryInputEncodesToExactlyItsBytes()
        {
            var seen = new HashSet<string>();
            foreach (object o in Arr(Vectors()["inputs"]))
            {
                var c = Obj(o);
                string name = Str(c["input"]);
                seen.Add(name);
                string want = Str(c["bytes"]).ToLowerInvariant();
                Check.Equal(want, Hex.ToHex(EncodeInput(name, Obj(c["values"]))), "input " + name + " " + want);
            }
            Check.Equal("say,steer,wide", string.Join(",", seen.OrderBy(n => n, StringComparer.Ordinal)), "inputs covered");
            Check.Equal((byte)1, SteerInput.Tag, "steer tag");
            Check.Equal((byte)2, SayInput.Tag, "say tag");
            Check.Equal((byte)3, WideInput.Tag, "wide tag");
        }

        [Test]
        public static void OptionalValuesStopAfterTheLastNonzeroOneByBitPattern()
        {
            float negZero = Bits.Int32BitsToSingle(unchecked((int)0x80000000));
            Check.Equal("01000000", Hex.ToHex(new SteerInput().Encode()), "all zero");
            Check.Equal("01000000", Hex.ToHex(new SteerInput { Trim = 0f }.Encode()), "+0.0 is zero");
            Check.Equal("01000000000000c03f", Hex.ToHex(new SteerInput { Trim = 1.5f }.Encode()), "a zero boost before a nonzero trim is written");
            Check.Equal("010000000000000080", Hex.ToHex(new SteerInput { Trim = negZero }.Encode()), "-0.0 is written");
            Check.Equal("01000000000000c07f", Hex.ToHex(new SteerInput { Trim = Bits.Int32BitsToSingle(0x7fc00000) }.Encode()), "NaN is written");
            Check.Equal("01ff0000ff", Hex.ToHex(new SteerInput { Turn = -1, Boost = 255 }.Encode()), "boost alone");
        }

        [Test]
        public static void NullArraysAndStringsEncodeAsEmptyAndLoneSurrogatesAreRefused()
        {
            Check.Equal("0200000000", Hex.ToHex(new SayInput().Encode()), "null rest_str");
            string wide = Hex.ToHex(new WideInput().Encode());
            Check.Equal("03" + new string('0', 2 * 27) + "00000000" + "00000000", wide, "null bytes and str");
            Check.Equal("0201000000f09f9982", Hex.ToHex(new SayInput { Channel = 1, Text = "\U0001F642" }.Encode()), "a surrogate pair is one code point");
            Check.Throws<EncodeException>(() => new SayInput { Text = "a\ud800" }.Encode(), "lone surrogate in rest_str");
            Check.Throws<EncodeException>(() => new WideInput { HStr = "\udc00" }.Encode(), "lone surrogate in str");
        }

        // ---- events

        static ISampleEvent DecodeByType(string name, byte[] bytes)
        {
            switch (name)
            {
                case "hit": return HitEvent.Decode(bytes);
                case "chat": return ChatEvent.Decode(bytes);
                case "blob": return BlobEvent.Decode(bytes);
                case "tally": return TallyEvent.Decode(bytes);
                default: throw new Exception("event " + name + " is not in the sample");
            }
        }

        static string EventName(int topic)
        {
            switch (topic)
            {
                case HitEvent.Topic: return "hit";
                case ChatEvent.Topic: return "chat";
                case BlobEvent.Topic: return "blob";
                case TallyEvent.Topic: return "tally";
                default: return null;
            }
        }

        [Test]
        public static void EveryEventDecodesToExactlyItsValues()
        {
            var seen = new HashSet<string>();
            foreach (object o in Arr(Vectors()["events"]))
            {
                var c = Obj(o);
                string name = Str(c["event"]);
                seen.Add(name);
                ushort topic = (ushort)Num(c["topic"]);
                byte[] bytes = Hex.FromHex(Str(c["bytes"]));
                var want = Expected(EventTypes[name], Obj(c["values"]));
                string what = name + " " + Str(c["bytes"]);
                Check.Equal(name, EventName(topic), what + ": topic");
                SameMap(want, EventMap(DecodeByType(name, bytes)), what + " (" + name + " Decode)");
                ISampleEvent e = SampleEvents.Decode(topic, bytes);
                Check.True(e != null, what + ": the dispatcher knows the topic");
                Check.Equal(topic, e.Topic, what + ": the event's topic");
                SameMap(want, EventMap(e), what + " (SampleEvents.Decode)");
            }
            Check.Equal("blob,chat,hit,tally", string.Join(",", seen.OrderBy(n => n, StringComparer.Ordinal)), "events covered");
        }

        [Test]
        public static void EveryBadEventIsRefused()
        {
            int n = 0;
            foreach (object o in Arr(Vectors()["bad_events"]))
            {
                var c = Obj(o);
                ushort topic = (ushort)Num(c["topic"]);
                byte[] bytes = Hex.FromHex(Str(c["bytes"]));
                string why = Str(c["why"]);
                Check.Throws<ProtocolException>(() => SampleEvents.Decode(topic, bytes), "SampleEvents.Decode: " + why);
                string name = EventName(topic);
                Check.True(name != null, why + ": topic " + topic + " is the sample's");
                Check.Throws<ProtocolException>(() => DecodeByType(name, bytes), name + " Decode: " + why);
                n++;
            }
            Check.True(n > 0, "bad events listed");
        }

        [Test]
        public static void DecodeErrorsHaveTheirKinds()
        {
            Func<string, string, string> kind = (string name, string hex) => Check.Kind(() => DecodeByType(name, Hex.FromHex(hex)));
            Check.Equal("truncated", kind("hit", "2a00000000002041"), "missing bool");
            Check.Equal("invalid", kind("hit", "2a0000000000204102"), "bool 2");
            Check.Equal("trailing_bytes", kind("hit", "2a000000000020410100"), "byte left over");
            Check.Equal("invalid_utf8", kind("chat", "01000000ff"), "str 0xff");
            Check.Equal("invalid_utf8", kind("chat", "02000000c080"), "overlong NUL");
            Check.Equal("invalid_utf8", kind("chat", "03000000eda080"), "surrogate");
            Check.Equal("invalid_utf8", kind("chat", "00000000f4900000"), "past U+10FFFF");
            Check.Equal("truncated", kind("chat", "ffffffff"), "4 GiB length");
            Check.Equal("truncated", kind("blob", "010000"), "length cut");
            Check.Equal("truncated", kind("tally", "0000000000000080ffffffffffffffff05"), "half an optional i16");
            Check.Equal("truncated", kind("tally", "00000000000000"), "u64 cut");
            Check.Equal("ok", kind("chat", "00000000"), "empty chat");
            Check.Throws<ArgumentNullException>(() => HitEvent.Decode(null), "null payload");
        }

        [Test]
        public static void UnknownTopicsGiveNull()
        {
            int n = 0;
            foreach (object t in Arr(Vectors()["unknown_topics"]))
            {
                ushort topic = (ushort)Num(t);
                Check.True(SampleEvents.Decode(topic, new byte[0]) == null, "topic " + topic + ", no bytes");
                Check.True(SampleEvents.Decode(topic, new byte[] { 1, 2, 3 }) == null, "topic " + topic + ", some bytes");
                n++;
            }
            Check.True(n > 0, "unknown topics listed");
        }

        // ---- entities

        [Test]
        public static void EveryEntityReadsToItsValues()
        {
            KindDef ship = Ship();
            int n = 0;
            foreach (object o in Arr(Vectors()["entities"]))
            {
                var c = Obj(o);
                string kind = Str(c["kind"]);
                var json = Arr(c["fields"]);
                var values = Obj(c["values"]);
                switch (kind)
                {
                    case "ship":
                    {
                        Check.Equal(ship.Fields.Count, json.Count, "ship fields");
                        var fields = new FieldValue[json.Count];
                        for (int i = 0; i < fields.Length; i++) fields[i] = Fixtures.ValueFromJson(ship.Fields[i].Type, json[i]);
                        SameMap(Expected(ShipTypes, values), ShipMap(ShipEntity.Read(fields)), "ship " + n);
                        break;
                    }
                    case "rock":
                        Check.Equal(0, json.Count, "rock fields");
                        Check.Equal(0, values.Count, "rock values");
                        RockEntity.Read(new FieldValue[0]);
                        break;
                    default:
                        throw new Exception("kind " + kind + " is not in the sample");
                }
                n++;
            }
            Check.True(n > 0, "entities listed");
            Check.Equal("ship", ShipEntity.KindName, "ship KindName");
            Check.Equal("rock", RockEntity.KindName, "rock KindName");
            Check.Equal(0, ShipEntity.FieldXVel, "x-vel index");
            Check.Equal(4, ShipEntity.FieldTeamDelta, "teamDelta index");
            Check.Equal(7, ShipEntity.FieldMass, "mass index");
        }

        [Test]
        public static void ReadKeepsTheSignOfZeroAndNeverThrows()
        {
            // Mono's double parser reads the vectors' -0.0 as +0.0, so the sign of an f32 zero is checked here.
            float negZero = Bits.Int32BitsToSingle(unchecked((int)0x80000000));
            var f = new FieldValue[8];
            f[ShipEntity.FieldMass] = FieldValue.F32(negZero);
            Check.Equal(0x80000000u, Bits.F32Bits(ShipEntity.Read(f).Mass), "mass -0.0");

            var defaults = new Dictionary<string, object>
            {
                { "x_vel", F32Key(0f) }, { "heading", F32Key(0f) }, { "lean", F32Key(0f) }, { "hp", 0L },
                { "team_delta", 0L }, { "alive", false }, { "callsign", "" }, { "mass", F32Key(0f) },
            };
            SameMap(defaults, ShipMap(ShipEntity.Read(null)), "null fields");
            SameMap(defaults, ShipMap(ShipEntity.Read(new FieldValue[0])), "no fields");
            var wrong = Enumerable.Repeat(FieldValue.Str("x"), 5).Concat(new[] { FieldValue.Int(1), FieldValue.Bool(true), FieldValue.Int(3) }).ToArray();
            SameMap(defaults, ShipMap(ShipEntity.Read(wrong)), "wrong-typed fields");
            var outOfRange = new[] { FieldValue.Int(16), FieldValue.Int(4), FieldValue.Int(-1), FieldValue.Int(0), FieldValue.Int(0), FieldValue.Bool(false), FieldValue.Str(""), FieldValue.F32(0f) };
            SameMap(defaults, ShipMap(ShipEntity.Read(outOfRange)), "codes out of range");
            var shorter = new[] { FieldValue.Int(15) };
            Check.Equal(8f, ShipEntity.Read(shorter).XVel, "a shorter array reads what it has");
        }

        // ---- binding

        [Test]
        public static void BindFindsKindsByNameAndRefusesADifferentSchema()
        {
            var bind = Obj(Vectors()["bind"]);
            var order = Arr(bind["schema_kinds"]);
            var ids = Obj(bind["ids"]);
            SampleKinds kinds = SampleKinds.Bind(SchemaOf(order));
            Check.Equal((int)Num(ids["ship"]), kinds.Ship, "ship id");
            Check.Equal((int)Num(ids["rock"]), kinds.Rock, "rock id");
            Check.Equal(2, ids.Count, "ids listed");

            // Each change, applied alone to the schema, in the order the vectors list them.
            string[] marks = { "`hp`", "`x-vel`", "last field", "`rock`", "`comet`" };
            Action<Schema>[] changes =
            {
                s => s.Kinds[s.KindIndex("ship")].Fields[Ship().FieldIndex("hp")].Type = FieldType.SInt(),
                s => s.Kinds[s.KindIndex("ship")].Fields[Ship().FieldIndex("x-vel")].Type = FieldType.Quant(-8f, 8f, 5),
                s => { var f = s.Kinds[s.KindIndex("ship")].Fields; f.RemoveAt(f.Count - 1); },
                s => s.Kinds.RemoveAt(s.KindIndex("rock")),
                s => s.Kinds.Add(new KindDef("comet")),
            };
            string[] named = { "hp", "x-vel", "ship", "rock", null };
            var mismatches = Arr(bind["mismatches"]);
            Check.Equal(changes.Length, mismatches.Count, "mismatches listed");
            for (int i = 0; i < changes.Length; i++)
            {
                var m = Obj(mismatches[i]);
                string change = Str(m["change"]);
                Check.True(change.Contains(marks[i]), "mismatch " + i + " is " + marks[i] + ": " + change);
                Schema s = SchemaOf(order);
                changes[i](s);
                if ((bool)m["fails"])
                {
                    var e = Check.Throws<InvalidOperationException>(() => SampleKinds.Bind(s), change);
                    Check.True(e.Message.Contains(Regenerate), change + ": message says how to regenerate: " + e.Message);
                    Check.True(e.Message.Contains("\"" + named[i] + "\""), change + ": message names " + named[i] + ": " + e.Message);
                }
                else
                {
                    SampleKinds k = SampleKinds.Bind(s);
                    Check.Equal(s.KindIndex("ship"), k.Ship, change + ": ship id");
                    Check.Equal(s.KindIndex("rock"), k.Rock, change + ": rock id");
                }
            }
        }

        [Test]
        public static void BindComparesParametersBitForBit()
        {
            Action<Action<KindDef>, string> refused = (change, what) =>
            {
                Schema s = new Schema(0.01f, Ship(), new KindDef("rock"));
                change(s.Kinds[0]);
                Check.Throws<InvalidOperationException>(() => SampleKinds.Bind(s), what);
            };
            refused(k => k.Fields[0].Type = FieldType.Quant(-8f, 8.000001f, 4), "quant max one ulp off");
            refused(k => k.Fields[0].Type = FieldType.Quant(-8.000001f, 8f, 4), "quant min one ulp off");
            refused(k => k.Fields[2].Type = FieldType.Centered(2.0000002f, 8), "centered range one ulp off");
            refused(k => k.Fields[2].Type = FieldType.Centered(2f, 9), "centered bits");
            refused(k => k.Fields[1].Type = FieldType.Angle(3), "angle bits");
            refused(k => k.Fields[6].Type = FieldType.Str(15), "str max_len");
            refused(k => k.Fields[7].Type = FieldType.UInt(), "f32 becomes uint");
            refused(k => k.Fields[4].Name = "team_delta", "a field renamed");
            Check.Throws<ArgumentNullException>(() => SampleKinds.Bind(null), "null schema");
        }
    }
}
