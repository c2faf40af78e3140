//! How long to pause after a failed request while a search waits: doubling from a floor to a
//! ceiling, each pause scaled by a random 50–100% so clients that failed together do not retry
//! together, and no retries once requests have failed for three heartbeat periods, when the
//! matchmaker has let the search lapse anyway.

use std::hash::BuildHasher;
use std::time::Duration;

use rand_core::{RngCore, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use tokio::time::Instant;

use super::{MatchError, MatchOptions};

/// Pauses between retries of failing requests, and gives up after a while.
pub(super) struct Backoff {
    min: Duration,
    max: Duration,
    next: Duration,
    patience: Duration,
    failing_since: Option<Instant>,
    rng: Xoshiro256PlusPlus,
}

impl Backoff {
    pub(super) fn new(opts: &MatchOptions, heartbeat_secs: u32) -> Self {
        // Jitter only needs to differ between clients, not be unpredictable.
        let seed = std::collections::hash_map::RandomState::new().hash_one(Instant::now());
        Self {
            min: opts.backoff_min,
            max: opts.backoff_max.max(opts.backoff_min),
            next: opts.backoff_min,
            patience: Duration::from_secs(3 * u64::from(heartbeat_secs.max(1))),
            failing_since: None,
            rng: Xoshiro256PlusPlus::seed_from_u64(seed),
        }
    }

    pub(super) fn reset(&mut self) {
        self.next = self.min;
        self.failing_since = None;
    }

    /// The pause before retrying after `err`, or `err` when failures have lasted too long.
    pub(super) fn pause(&mut self, err: MatchError) -> Result<Duration, MatchError> {
        let since = *self.failing_since.get_or_insert_with(Instant::now);
        if since.elapsed() >= self.patience {
            return Err(err);
        }
        let unit = (self.rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
        let pause = self.next.mul_f64(0.5 + 0.5 * unit);
        self.next = self.next.saturating_mul(2).min(self.max);
        Ok(pause)
    }
}
