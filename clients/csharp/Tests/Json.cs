// JSON for the golden fixtures and the host's HTTP answers, read with the library's own reader (MiniJson):
// objects become Dictionary<string, object>, arrays List<object>, numbers double, strings string,
// true/false bool, null null. Malformed text is refused.
using System;
using System.Collections.Generic;

namespace Zonekeep.Tests
{
    public static class Json
    {
        public static object Parse(string text)
        {
            object v = MiniJson.Parse(text);
            // MiniJson answers null for malformed text; only the text null is the value null.
            if (v == null && text.Trim(' ', '\t', '\n', '\r') != "null") throw new FormatException("malformed JSON");
            return v;
        }

        // Typed access for the fixtures.
        public static Dictionary<string, object> Obj(object o) { return (Dictionary<string, object>)o; }
        public static List<object> Arr(object o) { return (List<object>)o; }
        public static double Num(object o) { if (!(o is double)) throw new Exception("not a number: " + Check.Show(o)); return (double)o; }
        public static string Str(object o) { if (!(o is string)) throw new Exception("not a string: " + Check.Show(o)); return (string)o; }

        /// <summary>Structural equality of two parsed values (numbers compared as doubles); a path says where they differ.</summary>
        public static string Diff(object want, object got, string path = "$")
        {
            if (want == null || got == null) return want == null && got == null ? null : path + ": want " + Show(want) + ", got " + Show(got);
            var wo = want as Dictionary<string, object>;
            if (wo != null)
            {
                var go = got as Dictionary<string, object>;
                if (go == null) return path + ": want an object, got " + Show(got);
                foreach (var k in wo.Keys) if (!go.ContainsKey(k)) return path + "." + k + ": missing";
                foreach (var k in go.Keys) if (!wo.ContainsKey(k)) return path + "." + k + ": unexpected";
                foreach (var kv in wo)
                {
                    string d = Diff(kv.Value, go[kv.Key], path + "." + kv.Key);
                    if (d != null) return d;
                }
                return null;
            }
            var wl = want as List<object>;
            if (wl != null)
            {
                var gl = got as List<object>;
                if (gl == null) return path + ": want a list, got " + Show(got);
                if (wl.Count != gl.Count) return path + ": want " + wl.Count + " items, got " + gl.Count;
                for (int i = 0; i < wl.Count; i++)
                {
                    string d = Diff(wl[i], gl[i], path + "[" + i + "]");
                    if (d != null) return d;
                }
                return null;
            }
            if (want is double && got is double)
                return ((double)want).Equals((double)got) ? null : path + ": want " + Show(want) + ", got " + Show(got);
            return want.Equals(got) ? null : path + ": want " + Show(want) + ", got " + Show(got);
        }

        public static string Show(object o)
        {
            if (o is Dictionary<string, object>) return "{…}";
            if (o is List<object>) return "[…]";
            return Check.Show(o);
        }
    }
}
