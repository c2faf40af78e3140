// A tiny JSON reader for the golden fixtures: objects become Dictionary<string, object>, arrays List<object>,
// numbers double, strings string, true/false bool, null null. Strict enough to refuse malformed files.
using System;
using System.Collections.Generic;
using System.Globalization;
using System.Text;

namespace Zonekeep.Tests
{
    public static class Json
    {
        public static object Parse(string text)
        {
            int i = 0;
            object v = Value(text, ref i);
            Ws(text, ref i);
            if (i != text.Length) throw new FormatException("trailing characters at " + i);
            return v;
        }

        private static void Ws(string s, ref int i)
        {
            while (i < s.Length && char.IsWhiteSpace(s[i])) i++;
        }

        private static object Value(string s, ref int i)
        {
            Ws(s, ref i);
            if (i >= s.Length) throw new FormatException("unexpected end");
            char c = s[i];
            if (c == '{')
            {
                i++;
                var obj = new Dictionary<string, object>();
                Ws(s, ref i);
                if (s[i] == '}') { i++; return obj; }
                for (;;)
                {
                    Ws(s, ref i);
                    string key = Str(s, ref i);
                    Ws(s, ref i);
                    if (s[i++] != ':') throw new FormatException("expected : at " + (i - 1));
                    obj[key] = Value(s, ref i);
                    Ws(s, ref i);
                    char d = s[i++];
                    if (d == '}') return obj;
                    if (d != ',') throw new FormatException("expected , or } at " + (i - 1));
                }
            }
            if (c == '[')
            {
                i++;
                var list = new List<object>();
                Ws(s, ref i);
                if (s[i] == ']') { i++; return list; }
                for (;;)
                {
                    list.Add(Value(s, ref i));
                    Ws(s, ref i);
                    char d = s[i++];
                    if (d == ']') return list;
                    if (d != ',') throw new FormatException("expected , or ] at " + (i - 1));
                }
            }
            if (c == '"') return Str(s, ref i);
            if (s.Length - i >= 4 && s.Substring(i, 4) == "true") { i += 4; return true; }
            if (s.Length - i >= 5 && s.Substring(i, 5) == "false") { i += 5; return false; }
            if (s.Length - i >= 4 && s.Substring(i, 4) == "null") { i += 4; return null; }
            int start = i;
            while (i < s.Length && "+-0123456789.eE".IndexOf(s[i]) >= 0) i++;
            if (i == start) throw new FormatException("unexpected character at " + i);
            return double.Parse(s.Substring(start, i - start), NumberStyles.Float, CultureInfo.InvariantCulture);
        }

        private static string Str(string s, ref int i)
        {
            if (s[i++] != '"') throw new FormatException("expected string at " + (i - 1));
            var sb = new StringBuilder();
            for (;;)
            {
                char c = s[i++];
                if (c == '"') return sb.ToString();
                if (c != '\\') { sb.Append(c); continue; }
                char e = s[i++];
                switch (e)
                {
                    case '"': sb.Append('"'); break;
                    case '\\': sb.Append('\\'); break;
                    case '/': sb.Append('/'); break;
                    case 'b': sb.Append('\b'); break;
                    case 'f': sb.Append('\f'); break;
                    case 'n': sb.Append('\n'); break;
                    case 'r': sb.Append('\r'); break;
                    case 't': sb.Append('\t'); break;
                    case 'u': sb.Append((char)int.Parse(s.Substring(i, 4), NumberStyles.HexNumber, CultureInfo.InvariantCulture)); i += 4; break;
                    default: throw new FormatException("bad escape at " + (i - 1));
                }
            }
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
