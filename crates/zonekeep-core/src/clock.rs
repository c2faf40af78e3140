//! Injectable time sources.
//!
//! The runtime never reads the system time directly: every host receives an
//! `Arc<dyn Clock>`. Production uses [`SystemClock`]; tests and replays use
//! [`ManualClock`] so that every tick runs at exactly the time the test says.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A monotonic time source, measured from the clock's own origin.
///
/// Implementations must never go backwards for a given clock; a host that
/// observes an earlier time than before simply finds no tick due.
pub trait Clock: Send + Sync {
    /// Time elapsed since this clock's origin.
    fn now(&self) -> Duration;
}

/// The real monotonic clock, backed by [`Instant`]; its origin is its creation.
#[derive(Debug, Clone, Copy)]
pub struct SystemClock {
    origin: Instant,
}

impl SystemClock {
    /// A clock whose origin is now.
    pub fn new() -> Self {
        Self {
            origin: Instant::now(),
        }
    }
}

impl Default for SystemClock {
    fn default() -> Self {
        Self::new()
    }
}

impl Clock for SystemClock {
    fn now(&self) -> Duration {
        self.origin.elapsed()
    }
}

/// A monotonic clock read from the CPU's cycle counter (through `quanta`, calibrated against the
/// system's monotonic clock, falling back to it where no stable counter exists): a reading costs
/// a few nanoseconds instead of a system clock's tens. Hosts time stages with it
/// ([`crate::ZoneHost::set_stage_clock`]), where a tick reads the clock many times.
#[derive(Debug, Clone)]
pub struct CycleClock {
    clock: quanta::Clock,
    origin: quanta::Instant,
}

impl CycleClock {
    /// A clock whose origin is now.
    pub fn new() -> Self {
        let clock = quanta::Clock::new();
        let origin = clock.now();
        Self { clock, origin }
    }
}

impl Default for CycleClock {
    fn default() -> Self {
        Self::new()
    }
}

impl Clock for CycleClock {
    fn now(&self) -> Duration {
        self.clock.now().saturating_duration_since(self.origin)
    }
}

/// A clock moved only by hand; clones share the same time.
///
/// Stored as nanoseconds in one `Arc<AtomicU64>`, so a test can keep a clone
/// while the host owns another. Times past `u64::MAX` nanoseconds (~584 years)
/// saturate.
#[derive(Debug, Clone, Default)]
pub struct ManualClock {
    nanos: Arc<AtomicU64>,
}

fn to_nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

impl ManualClock {
    /// A clock reading zero.
    pub fn new() -> Self {
        Self::default()
    }

    /// Set the time. Setting it earlier than before is allowed (tests may
    /// want it) but hosts treat an earlier time as "nothing is due".
    pub fn set(&self, now: Duration) {
        self.nanos.store(to_nanos(now), Ordering::SeqCst);
    }

    /// Move the time forward by `by`, saturating.
    pub fn advance(&self, by: Duration) {
        let by = to_nanos(by);
        // fetch_update with a closure that always returns Some cannot fail.
        let _ = self
            .nanos
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| {
                Some(n.saturating_add(by))
            });
    }
}

impl Clock for ManualClock {
    fn now(&self) -> Duration {
        Duration::from_nanos(self.nanos.load(Ordering::SeqCst))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn manual_clock_clones_share_time() {
        let a = ManualClock::new();
        let b = a.clone();
        assert_eq!(a.now(), Duration::ZERO);
        a.advance(Duration::from_millis(250));
        assert_eq!(b.now(), Duration::from_millis(250));
        b.set(Duration::from_secs(3));
        assert_eq!(a.now(), Duration::from_secs(3));
    }

    #[test]
    fn manual_clock_saturates() {
        let c = ManualClock::new();
        c.set(Duration::MAX);
        assert_eq!(c.now(), Duration::from_nanos(u64::MAX));
        c.advance(Duration::from_secs(1));
        assert_eq!(c.now(), Duration::from_nanos(u64::MAX));
    }

    #[test]
    fn system_clock_is_monotonic() {
        let c = SystemClock::new();
        let a = c.now();
        let b = c.now();
        assert!(b >= a);
    }
}
