//! When a zone's save is due (used by the simulation thread): periodically, and promptly when
//! the zone asks for one (a durable change), spaced by [`PROMPT_GAP`].

use std::time::Duration;

/// The least time between two saves a zone asked for: a zone that asks every tick costs one
/// snapshot per gap, not one per tick (the storage worker keeps only the newest anyway).
pub const PROMPT_GAP: Duration = Duration::from_millis(100);

/// A save timer on the host clock: due every `every`, never more than once per call, and never
/// bunching up after a stall (a late check schedules the next save a full period later); and
/// due as soon as [`PROMPT_GAP`] allows after the zone asked for a save.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SaveTimer {
    every: Duration,
    next: Duration,
    /// The zone asked for a save that was not taken yet.
    asked: bool,
    /// When the last save was taken.
    last: Option<Duration>,
}

impl SaveTimer {
    /// A timer whose first save falls due `every` after `now`.
    pub fn new(every: Duration, now: Duration) -> Self {
        SaveTimer {
            every,
            next: now.saturating_add(every),
            asked: false,
            last: None,
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

    /// The zone asked for a save (see `Ctx::save_now`): [`poll`](Self::poll) answers it as
    /// soon as [`PROMPT_GAP`] has passed since the last save.
    pub fn ask(&mut self) {
        self.asked = true;
    }

    /// Whether a save is due at `now`, periodic or asked for; if so the next periodic one is
    /// scheduled a full period later.
    pub fn poll(&mut self, now: Duration) -> bool {
        let prompt = self.asked
            && self
                .last
                .is_none_or(|t| now.saturating_sub(t) >= PROMPT_GAP);
        if now < self.next && !prompt {
            return false;
        }
        self.next = now.saturating_add(self.every);
        self.asked = false;
        self.last = Some(now);
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

    #[test]
    fn a_save_asked_for_comes_at_once_then_no_closer_than_the_gap() {
        let ms = Duration::from_millis;
        let mut t = SaveTimer::new(ms(5000), ms(0));
        t.ask();
        assert!(t.poll(ms(10)), "the first ask is answered at once");
        assert_eq!(t.next_due(), ms(5010), "and restarts the period");
        t.ask();
        assert!(!t.poll(ms(50)), "within the gap it waits");
        assert!(!t.poll(ms(109)));
        assert!(t.poll(ms(110)), "and is not lost");
        assert!(!t.poll(ms(300)), "nothing asked, nothing due");
    }
}
