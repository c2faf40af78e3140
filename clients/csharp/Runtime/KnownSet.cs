// The known-set hash of PROTOCOL.md §5.7, which KnownSetCheck and a Hello's resume_from carry.
using System.Collections.Generic;

namespace Zonekeep
{
    /// <summary>The known-set hash of §5.7.</summary>
    public static class KnownSet
    {
        /// <summary>FNV-1a (32 bit) over each id's four little-endian bytes, in order.</summary>
        public static uint Hash(IReadOnlyList<uint> ids)
        {
            uint h = 0x811c9dc5;
            for (int i = 0; i < ids.Count; i++)
            {
                uint id = ids[i];
                for (int k = 0; k < 4; k++)
                {
                    h ^= (id >> (8 * k)) & 0xff;
                    unchecked { h *= 0x01000193; }
                }
            }
            return h;
        }
    }
}
