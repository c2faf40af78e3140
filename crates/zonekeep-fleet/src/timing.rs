//! The protocol's three durations.

use std::time::Duration;

/// The lease protocol's timing. The defaults are the product's contract: heartbeat every second,
/// stop acting 5 s after the last landed heartbeat, be taken over after 10 s of silence.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timing {
    /// How often a host heartbeats.
    pub heartbeat_every: Duration,
    /// How long after sending its last landed heartbeat a host may still act on its zones.
    pub fence_after: Duration,
    /// How long a host may go without a landed heartbeat (database clock) before others may take
    /// its zones. Must exceed `fence_after` by more than any clock drift over that span.
    pub dead_after: Duration,
}

impl Default for Timing {
    fn default() -> Self {
        Timing {
            heartbeat_every: Duration::from_secs(1),
            fence_after: Duration::from_secs(5),
            dead_after: Duration::from_secs(10),
        }
    }
}

impl Timing {
    /// Whether the timing is safe: heartbeats come more often than the fence bound, and the fence
    /// bound is below the takeover bound (with at least the heartbeat period between them).
    pub fn is_safe(&self) -> bool {
        !self.heartbeat_every.is_zero()
            && self.heartbeat_every < self.fence_after
            && self.fence_after + self.heartbeat_every <= self.dead_after
    }

    /// Whether a host whose last landed heartbeat is `heartbeat_age` old (database clock), and
    /// which has `left` or not, still counts as alive: its zones may not be taken.
    pub fn is_alive(&self, heartbeat_age: Duration, left: bool) -> bool {
        !left && heartbeat_age <= self.dead_after
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_safe_and_unsafe_timings_are_caught() {
        assert!(Timing::default().is_safe());
        let t = Timing {
            fence_after: Duration::from_secs(10),
            ..Timing::default()
        };
        assert!(!t.is_safe(), "fence bound equal to the takeover bound");
        let t = Timing {
            heartbeat_every: Duration::ZERO,
            ..Timing::default()
        };
        assert!(!t.is_safe());
    }

    #[test]
    fn liveness_follows_the_takeover_bound() {
        let t = Timing::default();
        assert!(t.is_alive(Duration::from_secs(10), false));
        assert!(!t.is_alive(Duration::from_millis(10_001), false));
        assert!(
            !t.is_alive(Duration::ZERO, true),
            "a host that left is not alive"
        );
    }
}
