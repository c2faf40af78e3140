//! The simulation's seeded random numbers: splitmix64, small, fast and the same on every platform,
//! so a seed names one run forever.

use crate::failover::splitmix64;

/// A splitmix64 stream. Not for cryptography; only for choosing faults and latencies.
#[derive(Debug, Clone)]
pub(crate) struct Rng(u64);

impl Rng {
    /// The stream for `seed`; `stream` separates independent uses of one seed.
    pub(crate) fn new(seed: u64, stream: u64) -> Rng {
        Rng(splitmix64(seed ^ splitmix64(stream)))
    }

    pub(crate) fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        splitmix64(self.0)
    }

    /// A number in `lo..=hi` (`lo` when `hi < lo`). The multiply-shift reduction's bias is below
    /// 2^-32 for the small ranges used here.
    pub(crate) fn range(&mut self, lo: u64, hi: u64) -> u64 {
        if hi <= lo {
            return lo;
        }
        let span = u128::from(hi - lo) + 1;
        let r = (u128::from(self.next_u64()) * span) >> 64;
        lo + u64::try_from(r).unwrap_or(0)
    }

    /// True with probability `per_mille / 1000`.
    pub(crate) fn chance(&mut self, per_mille: u64) -> bool {
        self.range(0, 999) < per_mille
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_seed_names_one_stream_and_ranges_hold() {
        let mut a = Rng::new(7, 1);
        let mut b = Rng::new(7, 1);
        let mut c = Rng::new(7, 2);
        let xs: Vec<u64> = (0..5).map(|_| a.next_u64()).collect();
        let ys: Vec<u64> = (0..5).map(|_| b.next_u64()).collect();
        let zs: Vec<u64> = (0..5).map(|_| c.next_u64()).collect();
        assert_eq!(xs, ys);
        assert_ne!(xs, zs);
        for _ in 0..1_000 {
            let r = a.range(3, 9);
            assert!((3..=9).contains(&r));
        }
        assert_eq!(a.range(5, 5), 5);
        assert_eq!(a.range(5, 1), 5);
        assert!(!a.chance(0));
        assert!(a.chance(1_000));
    }
}
