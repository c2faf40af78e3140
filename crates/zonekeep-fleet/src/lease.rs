//! A host's lease on its own zones, kept on the host's monotonic clock.
//!
//! The lease holds until [`Timing::fence_after`] after the host *sent* the last heartbeat that
//! *landed*. Anchoring on the send time, not on when the host heard back, is what makes the lease
//! safe against slow and hanging queries: the database stamped that heartbeat no earlier than it
//! was sent, so the database cannot count the host dead ([`Timing::dead_after`] after the stamp)
//! before the host has stopped acting. A heartbeat that fails, hangs or is refused never extends
//! the lease.

use std::time::Duration;

use crate::Timing;

/// A point on a host's monotonic clock: milliseconds since an arbitrary origin (the process's
/// start, say). Only differences between two `Millis` of the same clock mean anything.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Millis(pub u64);

impl Millis {
    /// `self` plus `d`, rounded down to whole milliseconds and saturating at the clock's end.
    pub fn saturating_add(self, d: Duration) -> Millis {
        Millis(self.0.saturating_add(whole_millis(d)))
    }

    /// How long after `earlier` this is; zero when `earlier` is later.
    pub fn saturating_since(self, earlier: Millis) -> Duration {
        Duration::from_millis(self.0.saturating_sub(earlier.0))
    }
}

/// `d` in whole milliseconds, rounded down (so a bound computed from it is never longer than
/// asked) and saturating.
pub(crate) fn whole_millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// One heartbeat attempt, handed out by [`Lease::send`] and given back to [`Lease::landed`] or
/// [`Lease::failed`] when the query's outcome is known.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Beat {
    seq: u64,
    sent: Millis,
}

impl Beat {
    /// When the heartbeat was sent, on the host's clock.
    pub fn sent(&self) -> Millis {
        self.sent
    }

    /// The attempt's number: beats of one lease are numbered 0, 1, 2, … in the order sent, so
    /// two attempts sent in the same millisecond stay distinct.
    pub fn seq(&self) -> u64 {
        self.seq
    }
}

/// A host's lease on its zones. See the [module documentation](self).
#[derive(Debug, Clone)]
pub struct Lease {
    fence_after: Duration,
    next_seq: u64,
    /// The latest send time among landed beats.
    last_landed_sent: Option<Millis>,
    /// Failed beats since the last landed one, for the host's logs and metrics.
    failed_since_landed: u32,
}

impl Lease {
    /// A lease that does not hold yet: no heartbeat has landed.
    pub fn new(timing: Timing) -> Lease {
        Lease {
            fence_after: timing.fence_after,
            next_seq: 0,
            last_landed_sent: None,
            failed_since_landed: 0,
        }
    }

    /// Records a heartbeat sent at `now` and returns the attempt, to report back with
    /// [`landed`](Lease::landed) or [`failed`](Lease::failed).
    pub fn send(&mut self, now: Millis) -> Beat {
        let beat = Beat {
            seq: self.next_seq,
            sent: now,
        };
        self.next_seq = self.next_seq.wrapping_add(1);
        beat
    }

    /// The heartbeat `beat` landed: the lease holds until `beat.sent() + fence_after`, unless it
    /// already held longer. Beats may land in any order; a late one never shortens the lease.
    pub fn landed(&mut self, beat: Beat) {
        if self.last_landed_sent.is_none_or(|last| beat.sent > last) {
            self.last_landed_sent = Some(beat.sent);
        }
        self.failed_since_landed = 0;
    }

    /// The heartbeat `beat` failed or was refused: the lease is not extended (nor shortened).
    pub fn failed(&mut self, beat: Beat) {
        // Only a beat newer than the last landed one says the connection is failing now.
        if self.last_landed_sent.is_none_or(|last| beat.sent > last) {
            self.failed_since_landed = self.failed_since_landed.saturating_add(1);
        }
    }

    /// Whether the host may act on its zones at `now`: a beat has landed and `now` is before
    /// [`valid_until`](Lease::valid_until). At that instant the lease has lapsed.
    pub fn may_act(&self, now: Millis) -> bool {
        self.valid_until().is_some_and(|until| now < until)
    }

    /// When the lease lapses: `fence_after` after the send of the latest landed beat. `None`
    /// before any beat landed.
    pub fn valid_until(&self) -> Option<Millis> {
        self.last_landed_sent
            .map(|sent| sent.saturating_add(self.fence_after))
    }

    /// How long ago (at `now`) the latest landed beat was sent. `None` before any beat landed.
    pub fn age(&self, now: Millis) -> Option<Duration> {
        self.last_landed_sent.map(|sent| now.saturating_since(sent))
    }

    /// How many beats sent after the latest landed one have failed.
    pub fn failed_since_landed(&self) -> u32 {
        self.failed_since_landed
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lease() -> Lease {
        Lease::new(Timing::default())
    }

    #[test]
    fn a_new_lease_does_not_hold() {
        let l = lease();
        assert!(!l.may_act(Millis(0)));
        assert_eq!(l.valid_until(), None);
        assert_eq!(l.age(Millis(100)), None);
    }

    #[test]
    fn a_landed_beat_holds_the_lease_for_the_fence_bound_after_its_send() {
        let mut l = lease();
        let b = l.send(Millis(1_000));
        assert!(!l.may_act(Millis(1_000)), "sent is not landed");
        // The answer comes back much later: the lease still counts from the send.
        l.landed(b);
        assert_eq!(l.valid_until(), Some(Millis(6_000)));
        assert!(l.may_act(Millis(5_999)));
        assert!(!l.may_act(Millis(6_000)), "lapsed at the bound itself");
        assert_eq!(l.age(Millis(3_500)), Some(Duration::from_millis(2_500)));
    }

    #[test]
    fn failed_beats_never_extend_the_lease() {
        let mut l = lease();
        let first = l.send(Millis(0));
        l.landed(first);
        let second = l.send(Millis(1_000));
        let third = l.send(Millis(2_000));
        l.failed(second);
        l.failed(third);
        assert_eq!(l.valid_until(), Some(Millis(5_000)));
        assert_eq!(l.failed_since_landed(), 2);
        assert!(!l.may_act(Millis(5_000)));
    }

    #[test]
    fn a_beat_landing_out_of_order_never_shortens_the_lease() {
        let mut l = lease();
        let old = l.send(Millis(1_000));
        let new = l.send(Millis(2_000));
        l.landed(new);
        l.landed(old);
        assert_eq!(l.valid_until(), Some(Millis(7_000)));
        assert_eq!(l.age(Millis(2_500)), Some(Duration::from_millis(500)));
    }

    #[test]
    fn a_late_landing_after_the_lease_lapsed_does_not_revive_it_past_its_bound() {
        let mut l = lease();
        let b = l.send(Millis(0));
        // Hung for 8 s, then landed: it proves only that the host was alive at its send.
        l.landed(b);
        assert!(!l.may_act(Millis(8_000)));
    }

    #[test]
    fn a_failure_older_than_the_last_landed_beat_is_not_counted() {
        let mut l = lease();
        let old = l.send(Millis(0));
        let new = l.send(Millis(1_000));
        l.landed(new);
        l.failed(old);
        assert_eq!(l.failed_since_landed(), 0);
    }

    #[test]
    fn beats_are_numbered_in_send_order() {
        let mut l = lease();
        let a = l.send(Millis(7));
        let b = l.send(Millis(7));
        assert_ne!(a, b);
        assert_eq!((a.seq(), b.seq()), (0, 1));
        assert_eq!(a.sent(), Millis(7));
    }

    #[test]
    fn millis_arithmetic_saturates() {
        assert_eq!(
            Millis(u64::MAX).saturating_add(Duration::from_secs(1)),
            Millis(u64::MAX)
        );
        assert_eq!(Millis(3).saturating_since(Millis(5)), Duration::ZERO);
        assert_eq!(
            Millis(10).saturating_add(Duration::from_micros(1_999)),
            Millis(11),
            "rounded down to whole milliseconds"
        );
    }
}
