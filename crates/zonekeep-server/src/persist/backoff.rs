//! Capped exponential backoff, shared by the storage and fact workers.

use std::time::Duration;

/// Retry delays `initial, initial·2, initial·4, …` up to `max`.
///
/// No jitter: each zone retries on its own schedule already (failures start
/// at different times), and a deterministic delay keeps the workers testable.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Backoff {
    /// Delay before the first retry.
    pub initial: Duration,
    /// Largest delay between two attempts.
    pub max: Duration,
}

impl Default for Backoff {
    /// 100 ms doubling up to 10 s: quick recovery from a blip, at most one
    /// attempt per 10 s per zone during an outage.
    fn default() -> Self {
        Backoff {
            initial: Duration::from_millis(100),
            max: Duration::from_secs(10),
        }
    }
}

impl Backoff {
    /// The delay after `failures` consecutive failures (1 = the first failure).
    pub fn delay(&self, failures: u32) -> Duration {
        let shift = failures.saturating_sub(1).min(31);
        self.initial
            .checked_mul(1u32 << shift)
            .unwrap_or(self.max)
            .min(self.max)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn doubles_then_caps() {
        let b = Backoff {
            initial: Duration::from_millis(100),
            max: Duration::from_secs(1),
        };
        let delays: Vec<u64> = (1..=6).map(|n| b.delay(n).as_millis() as u64).collect();
        assert_eq!(delays, [100, 200, 400, 800, 1000, 1000]);
        assert_eq!(b.delay(0), Duration::from_millis(100));
        assert_eq!(b.delay(u32::MAX), Duration::from_secs(1));
    }
}
