//! A stable hasher for zone state hashes.

use std::hash::Hasher;

/// FNV-1a 64-bit [`Hasher`] whose output is the same on every platform and
/// Rust version (unlike `DefaultHasher`), with integers fed little-endian.
/// Zones can use it to implement [`Zone::state_hash`](crate::Zone::state_hash).
#[derive(Debug, Clone, Copy)]
pub struct StateHasher(u64);

impl StateHasher {
    /// A hasher at the FNV-1a offset basis.
    pub fn new() -> Self {
        Self(0xcbf2_9ce4_8422_2325)
    }
}

impl Default for StateHasher {
    fn default() -> Self {
        Self::new()
    }
}

impl Hasher for StateHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 = (self.0 ^ u64::from(*b)).wrapping_mul(0x0000_0100_0000_01b3);
        }
    }

    fn write_u16(&mut self, i: u16) {
        self.write(&i.to_le_bytes());
    }

    fn write_u32(&mut self, i: u32) {
        self.write(&i.to_le_bytes());
    }

    fn write_u64(&mut self, i: u64) {
        self.write(&i.to_le_bytes());
    }

    fn write_u128(&mut self, i: u128) {
        self.write(&i.to_le_bytes());
    }

    fn write_usize(&mut self, i: usize) {
        // Widen so 32- and 64-bit targets agree.
        self.write_u64(i as u64);
    }

    fn write_i16(&mut self, i: i16) {
        self.write(&i.to_le_bytes());
    }

    fn write_i32(&mut self, i: i32) {
        self.write(&i.to_le_bytes());
    }

    fn write_i64(&mut self, i: i64) {
        self.write(&i.to_le_bytes());
    }

    fn write_i128(&mut self, i: i128) {
        self.write(&i.to_le_bytes());
    }

    fn write_isize(&mut self, i: isize) {
        self.write_i64(i as i64);
    }
}

/// A stable word-at-a-time hash for bulk state (the replicated world, frame bytes): words are
/// folded in with a full 64 × 64 → 128-bit multiply ("mum", as wyhash does), which mixes two
/// words per multiply, so hashing a crowded world or a patch's frames costs a fraction of a
/// byte-wise FNV. Internal: the values it gives are not part of any wire or file contract beyond
/// "the same build gives the same value" (recordings carry them, under their format version).
#[derive(Debug, Clone, Copy)]
pub(crate) struct WordHasher(u64);

/// wyhash's secrets: odd, with well-spread bits, so that no small word zeroes a product.
const P0: u64 = 0xa076_1d64_78bd_642f;
const P1: u64 = 0xe703_7ed1_a0b4_28db;
const P2: u64 = 0x8ebc_6af0_9c88_c6e3;

/// The folded 128-bit product of two words.
#[inline]
pub(crate) fn mum(a: u64, b: u64) -> u64 {
    let r = u128::from(a) * u128::from(b);
    (r as u64) ^ ((r >> 64) as u64)
}

impl WordHasher {
    /// A hasher at a fixed seed.
    pub(crate) fn new(seed: u64) -> Self {
        Self(seed ^ P0)
    }

    /// Folds in one word.
    #[inline]
    pub(crate) fn word(&mut self, w: u64) {
        self.0 = mum(self.0 ^ P1, w ^ P2);
    }

    /// Folds in two 32-bit values as one word.
    #[inline]
    pub(crate) fn pair(&mut self, hi: u32, lo: u32) {
        self.word(u64::from(hi) << 32 | u64::from(lo));
    }

    /// Folds in bytes, thirty-two at a step on two independent chains (two words per multiply,
    /// so the chains' multiplies overlap), then their length.
    pub(crate) fn bytes(&mut self, bytes: &[u8]) {
        let word = |c: &[u8]| {
            let mut w = [0u8; 8];
            w[..c.len()].copy_from_slice(c);
            u64::from_le_bytes(w)
        };
        let (mut a, mut b) = (self.0, self.0 ^ P2);
        let mut blocks = bytes.chunks_exact(32);
        for c in &mut blocks {
            a = mum(word(&c[0..8]) ^ P1 ^ a, word(&c[8..16]) ^ P2);
            b = mum(word(&c[16..24]) ^ P1 ^ b, word(&c[24..32]) ^ P2);
        }
        let mut h = a ^ b.rotate_left(32);
        for c in blocks.remainder().chunks(16) {
            let (x, y) = c.split_at(c.len().min(8));
            h = mum(word(x) ^ P1 ^ h, word(y) ^ P2);
        }
        self.0 = h;
        self.word(bytes.len() as u64);
    }

    /// The hash.
    pub(crate) fn finish(self) -> u64 {
        mum(self.0 ^ P0, P1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_fnv1a_and_is_little_endian() {
        let mut h = StateHasher::new();
        h.write(b"foobar");
        assert_eq!(h.finish(), 0x8594_4171_f739_67e8);
        let mut a = StateHasher::new();
        a.write_u32(0x0403_0201);
        let mut b = StateHasher::new();
        b.write(&[1, 2, 3, 4]);
        assert_eq!(a.finish(), b.finish());
    }

    #[test]
    fn word_hash_sees_every_byte_order_and_length() {
        let h = |b: &[u8]| {
            let mut w = WordHasher::new(1);
            w.bytes(b);
            w.finish()
        };
        assert_eq!(h(b"0123456789"), h(b"0123456789"));
        assert_ne!(h(b"0123456789"), h(b"0123456798"));
        assert_ne!(h(b"abc"), h(b"abc\0"), "a trailing zero is not padding");
        assert_ne!(h(b""), h(b"\0"));
        let mut a = WordHasher::new(1);
        a.pair(1, 2);
        let mut b = WordHasher::new(1);
        b.pair(2, 1);
        assert_ne!(a.finish(), b.finish());
    }
}
