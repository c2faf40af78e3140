// A minimal JSON reader, for the two things the SDK reads from JSON: a transfer credential's `exp` claim
// (how long the SDK keeps retrying a move, PROTOCOL.md §5.3.2) and a ticket's `sub` (whose chat lines are
// this session's own). Objects become dictionaries, arrays
// lists, numbers doubles. Malformed input answers null; nothing here throws.
using System;
using System.Collections.Generic;
using System.Globalization;
using System.Text;

namespace Zonekeep
{
    internal static class MiniJson
    {
        /// <summary>The parsed value, or null (also for malformed input).</summary>
        internal static object Parse(string text)
        {
            try
            {
                int i = 0;
                object v = Value(text, ref i, 0);
                Ws(text, ref i);
                return i == text.Length ? v : null;
            }
            catch (FormatException)
            {
                return null;
            }
        }

        /// <summary>The number under <paramref name="key"/> of a JSON object, or null.</summary>
        internal static double? NumberMember(string json, string key)
        {
            Dictionary<string, object> obj = Parse(json) as Dictionary<string, object>;
            object v;
            if (obj == null || !obj.TryGetValue(key, out v) || !(v is double)) return null;
            return (double)v;
        }

        /// <summary>The string under <paramref name="key"/> of a JSON object, or null.</summary>
        internal static string StringMember(string json, string key)
        {
            Dictionary<string, object> obj = Parse(json) as Dictionary<string, object>;
            object v;
            if (obj == null || !obj.TryGetValue(key, out v)) return null;
            return v as string;
        }

        private static void Ws(string s, ref int i)
        {
            while (i < s.Length && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r')) i++;
        }

        private static object Value(string s, ref int i, int depth)
        {
            if (depth > 64) throw new FormatException("too deep");
            Ws(s, ref i);
            if (i >= s.Length) throw new FormatException("end");
            char c = s[i];
            if (c == '{')
            {
                i++;
                Dictionary<string, object> obj = new Dictionary<string, object>();
                Ws(s, ref i);
                if (i < s.Length && s[i] == '}') { i++; return obj; }
                for (;;)
                {
                    Ws(s, ref i);
                    string key = Str(s, ref i);
                    Ws(s, ref i);
                    Expect(s, ref i, ':');
                    obj[key] = Value(s, ref i, depth + 1);
                    Ws(s, ref i);
                    if (i < s.Length && s[i] == ',') { i++; continue; }
                    Expect(s, ref i, '}');
                    return obj;
                }
            }
            if (c == '[')
            {
                i++;
                List<object> list = new List<object>();
                Ws(s, ref i);
                if (i < s.Length && s[i] == ']') { i++; return list; }
                for (;;)
                {
                    list.Add(Value(s, ref i, depth + 1));
                    Ws(s, ref i);
                    if (i < s.Length && s[i] == ',') { i++; continue; }
                    Expect(s, ref i, ']');
                    return list;
                }
            }
            if (c == '"') return Str(s, ref i);
            if (Word(s, ref i, "true")) return true;
            if (Word(s, ref i, "false")) return false;
            if (Word(s, ref i, "null")) return null;
            int start = i;
            while (i < s.Length && "+-0123456789.eE".IndexOf(s[i]) >= 0) i++;
            double d;
            if (i == start || !double.TryParse(s.Substring(start, i - start), NumberStyles.Float, CultureInfo.InvariantCulture, out d))
                throw new FormatException("number");
            return d;
        }

        private static bool Word(string s, ref int i, string w)
        {
            if (string.CompareOrdinal(s, i, w, 0, w.Length) != 0) return false;
            i += w.Length;
            return true;
        }

        private static void Expect(string s, ref int i, char c)
        {
            if (i >= s.Length || s[i] != c) throw new FormatException("expected " + c);
            i++;
        }

        private static string Str(string s, ref int i)
        {
            Expect(s, ref i, '"');
            StringBuilder sb = new StringBuilder();
            for (;;)
            {
                if (i >= s.Length) throw new FormatException("unterminated string");
                char c = s[i++];
                if (c == '"') return sb.ToString();
                if (c != '\\')
                {
                    sb.Append(c);
                    continue;
                }
                if (i >= s.Length) throw new FormatException("escape");
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
                    case 'u':
                        if (i + 4 > s.Length) throw new FormatException("escape");
                        int code;
                        if (!int.TryParse(s.Substring(i, 4), NumberStyles.HexNumber, CultureInfo.InvariantCulture, out code)) throw new FormatException("escape");
                        sb.Append((char)code);
                        i += 4;
                        break;
                    default: throw new FormatException("escape");
                }
            }
        }

        /// <summary>Unpadded base64url (a JWS part) to UTF-8 text, or null.</summary>
        internal static string Base64UrlText(string part)
        {
            try
            {
                string b64 = part.Replace('-', '+').Replace('_', '/');
                switch (b64.Length % 4)
                {
                    case 2: b64 += "=="; break;
                    case 3: b64 += "="; break;
                    case 1: return null;
                }
                return Encoding.UTF8.GetString(Convert.FromBase64String(b64));
            }
            catch (FormatException)
            {
                return null;
            }
        }
    }
}
