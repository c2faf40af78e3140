//! What the core's benchmarks share: the workloads' random source (docs/WORKLOADS.md).

/// xorshift64 (13, 7, 17), the generator every workload names with its seed; each draw is the
/// top 24 bits of the state as a float in [0, 1).
pub struct XorShift(pub u64);

impl XorShift {
    /// The next draw.
    pub fn next(&mut self) -> f32 {
        let mut s = self.0;
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        self.0 = s;
        (s >> 40) as f32 / 16_777_216.0
    }
}
