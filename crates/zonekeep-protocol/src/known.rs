//! The known-set check (PROTOCOL.md §5.7): a count and a 32-bit hash of the ids a client holds, so a
//! client whose known set drifted from the host's (a mis-applied Delta names every later update by
//! the wrong index) notices and asks for a BASELINE instead of silently corrupting its world.

/// FNV-1a offset basis (32 bit).
const FNV_OFFSET: u32 = 0x811c_9dc5;
/// FNV-1a prime (32 bit).
const FNV_PRIME: u32 = 0x0100_0193;

/// FNV-1a (32 bit) over each id's four little-endian bytes, in the order given (ascending for a
/// known set). Chosen because both codecs compute it in a few lines with no dependency, and a
/// desync of a known set (a missing, extra or shifted id) changes it with overwhelming likelihood.
pub fn known_set_hash(ids: impl IntoIterator<Item = u32>) -> u32 {
    let mut h = FNV_OFFSET;
    for id in ids {
        for b in id.to_le_bytes() {
            h ^= u32::from(b);
            h = h.wrapping_mul(FNV_PRIME);
        }
    }
    h
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_set_is_the_offset_basis_and_order_matters() {
        assert_eq!(known_set_hash([]), 0x811c_9dc5);
        // FNV-1a of the bytes 01 00 00 00.
        assert_eq!(known_set_hash([1]), 0xfb69_b604);
        assert_ne!(known_set_hash([1, 2]), known_set_hash([2, 1]));
        assert_ne!(known_set_hash([1, 2]), known_set_hash([1, 3]));
    }
}
