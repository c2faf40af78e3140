//! When a zone's periodic save is due (used by the simulation thread).

use std::time::Duration;

/// A periodic save timer on the host clock: due every `every`, never more
/// than once per call, and never bunching up after a stall (a late check
/// schedules the next save a full period later).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SaveTimer {
    every: Duration,
    next: Duration,
}

impl SaveTimer {
    /// A timer whose first save falls due `every` after `now`.
    pub fn new(every: Duration, now: Duration) -> Self {
        SaveTimer {
            every,
            next: now.saturating_add(every),
        }
    }

    /// The period.
    pub fn every(&self) -> Duration {
        self.every
    }

    /// When the next save falls due.
    pub fn next_due(&self) -> Duration {
        self.next
    }

    /// Whether a save is due at `now`; if so the next one is scheduled.
    pub fn poll(&mut self, now: Duration) -> bool {
        if now < self.next {
            return false;
        }
        self.next = now.saturating_add(self.every);
        true
    }

    /// A save was just taken for another reason (Dormant, shutdown): restart the period.
    pub fn reset(&mut self, now: Duration) {
        self.next = now.saturating_add(self.every);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fires_once_per_period_without_bunching() {
        let s = Duration::from_secs;
        let mut t = SaveTimer::new(s(5), s(0));
        assert!(!t.poll(s(4)));
        assert!(t.poll(s(5)));
        assert!(!t.poll(s(6)));
        // A 30 s stall gives one save, not six.
        assert!(t.poll(s(40)));
        assert!(!t.poll(s(44)));
        assert!(t.poll(s(45)));
        t.reset(s(46));
        assert_eq!(t.next_due(), s(51));
    }
}
