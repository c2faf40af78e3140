// Content versions (PROTOCOL.md §4.1.2): dotted numbers compared component by component.
using System;
using System.Collections.Generic;

namespace Zonekeep
{
    /// <summary>Content versions (§4.1.2).</summary>
    public static class ContentVersions
    {
        private static List<string> Parse(string v)
        {
            if (string.IsNullOrEmpty(v) || System.Text.Encoding.UTF8.GetByteCount(v) > Limits.ContentVersion) return null;
            string[] raw = v.Split('.');
            List<string> parts = new List<string>(raw.Length);
            foreach (string p in raw)
            {
                if (p.Length == 0) return null;
                foreach (char c in p) if (c < '0' || c > '9') return null;
                parts.Add(p.TrimStart('0'));
            }
            while (parts.Count > 0 && parts[parts.Count - 1].Length == 0) parts.RemoveAt(parts.Count - 1);
            return parts;
        }

        /// <summary>
        /// Compares two dotted content versions numerically, component by component, a missing component
        /// counting as 0: negative when <paramref name="a"/> is older, 0 when the same, positive when newer;
        /// null when either is not a dotted number (empty included) or is longer than 64 bytes.
        /// </summary>
        public static int? Compare(string a, string b)
        {
            List<string> pa = Parse(a);
            List<string> pb = Parse(b);
            if (pa == null || pb == null) return null;
            int n = Math.Max(pa.Count, pb.Count);
            for (int i = 0; i < n; i++)
            {
                string x = i < pa.Count ? pa[i] : string.Empty;
                string y = i < pb.Count ? pb[i] : string.Empty;
                // Without leading zeros, the longer run of digits is the larger number (no precision limit).
                if (x.Length != y.Length) return x.Length < y.Length ? -1 : 1;
                int c = string.CompareOrdinal(x, y);
                if (c != 0) return c < 0 ? -1 : 1;
            }
            return 0;
        }
    }
}
