//! The host's lease as every thread sees it: a few atomics read on the hot path.
//!
//! The heartbeat task publishes each landed heartbeat here; simulation threads and storage
//! workers ask [`LeaseGate::holds`] before they act for a zone, with the lease *generation* under
//! which the zone was claimed. A generation is one unbroken run of the lease: when a heartbeat
//! lands after the lease had already lapsed (the database hung, the process was paused), the
//! generation moves on, so every zone claimed before the gap stops — even though the lease holds
//! again — and is claimed anew (with a new epoch) before it runs here again. That is what makes a
//! paused process check its lease before it processes a single queued input: the input would be
//! applied to a zone of the old generation, which no longer holds.
//!
//! A gate that was never armed (a host without a store, or before the fleet started) always
//! holds: there is no lease to lose.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// The host-wide lease state. Cheap to read from any thread.
#[derive(Debug)]
pub struct LeaseGate {
    origin: Instant,
    armed: AtomicBool,
    /// Host-monotonic ms until which the lease holds.
    valid_until_ms: AtomicU64,
    /// Bumped whenever a heartbeat lands after a lapse.
    generation: AtomicU64,
}

impl Default for LeaseGate {
    fn default() -> Self {
        Self::new()
    }
}

impl LeaseGate {
    /// An unarmed gate: it holds until the fleet arms it with the first landed heartbeat.
    pub fn new() -> Self {
        LeaseGate {
            origin: Instant::now(),
            armed: AtomicBool::new(false),
            valid_until_ms: AtomicU64::new(0),
            generation: AtomicU64::new(0),
        }
    }

    /// Milliseconds of this host's monotonic clock since the gate was made (the time base of
    /// [`publish`](Self::publish)).
    pub fn now_ms(&self) -> u64 {
        u64::try_from(self.origin.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    /// The current lease generation: record it when claiming a zone.
    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::SeqCst)
    }

    /// Whether the host may still act for a zone claimed under `generation`: the gate is
    /// unarmed, or the lease holds now and has not lapsed since that generation began.
    pub fn holds(&self, generation: u64) -> bool {
        if !self.armed.load(Ordering::SeqCst) {
            return true;
        }
        // Read the deadline before the generation: a landing bumps the generation before it
        // extends the deadline, so seeing the new deadline implies seeing the new generation.
        let until = self.valid_until_ms.load(Ordering::SeqCst);
        let current = self.generation.load(Ordering::SeqCst);
        current == generation && self.now_ms() < until
    }

    /// Whether the lease holds right now (for any generation).
    pub fn holds_now(&self) -> bool {
        self.holds(self.generation())
    }

    /// Whether the gate has been armed by a landed heartbeat.
    pub fn is_armed(&self) -> bool {
        self.armed.load(Ordering::SeqCst)
    }

    /// Time left on the lease (zero once lapsed; `None` while unarmed).
    pub fn remaining(&self) -> Option<Duration> {
        if !self.is_armed() {
            return None;
        }
        let until = self.valid_until_ms.load(Ordering::SeqCst);
        Some(Duration::from_millis(until.saturating_sub(self.now_ms())))
    }

    /// Time since the last landed heartbeat was sent, given the fence bound the deadlines were
    /// computed with (`None` while unarmed).
    pub fn heartbeat_age(&self, fence_after: Duration) -> Option<Duration> {
        if !self.is_armed() {
            return None;
        }
        let until = self.valid_until_ms.load(Ordering::SeqCst);
        let sent = until.saturating_sub(u64::try_from(fence_after.as_millis()).unwrap_or(0));
        Some(Duration::from_millis(self.now_ms().saturating_sub(sent)))
    }

    /// A heartbeat landed: the lease now holds until `valid_until_ms` (host-monotonic ms).
    /// Returns whether the lease had lapsed before this landing (a new generation began).
    pub fn publish(&self, valid_until_ms: u64) -> bool {
        let now = self.now_ms();
        let was_armed = self.armed.load(Ordering::SeqCst);
        let old = self.valid_until_ms.load(Ordering::SeqCst);
        let lapsed = was_armed && now >= old;
        if lapsed {
            self.generation.fetch_add(1, Ordering::SeqCst);
        }
        self.valid_until_ms
            .store(old.max(valid_until_ms), Ordering::SeqCst);
        if !was_armed {
            self.armed.store(true, Ordering::SeqCst);
        }
        lapsed
    }

    /// The lease is given up for good (the host left the fleet or was replaced): nothing holds.
    pub fn revoke(&self) {
        self.generation.fetch_add(1, Ordering::SeqCst);
        self.valid_until_ms.store(0, Ordering::SeqCst);
        self.armed.store(true, Ordering::SeqCst);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unarmed_gate_holds_for_every_generation() {
        let g = LeaseGate::new();
        assert!(g.holds(0) && g.holds(7));
        assert_eq!(g.remaining(), None);
    }

    #[test]
    fn a_landed_heartbeat_holds_until_its_deadline() {
        let g = LeaseGate::new();
        let gen = g.generation();
        assert!(!g.publish(g.now_ms() + 60_000), "arming is not a lapse");
        assert!(g.holds(gen));
        assert!(g.remaining().is_some_and(|r| r > Duration::from_secs(50)));
    }

    #[test]
    fn a_lapse_ends_the_generation_even_when_the_lease_comes_back() {
        let g = LeaseGate::new();
        g.publish(g.now_ms()); // already expired when published
        let before = g.generation();
        assert!(!g.holds(before), "expired");
        assert!(g.publish(g.now_ms() + 60_000), "landing after the lapse");
        assert!(!g.holds(before), "zones of the old generation stay stopped");
        assert!(g.holds(g.generation()), "zones claimed now may run");
    }

    #[test]
    fn a_late_landing_never_shortens_the_lease() {
        let g = LeaseGate::new();
        let far = g.now_ms() + 60_000;
        g.publish(far);
        let gen = g.generation();
        assert!(!g.publish(g.now_ms() + 10_000));
        assert!(g.holds(gen));
        assert!(g.remaining().is_some_and(|r| r > Duration::from_secs(50)));
    }

    #[test]
    fn revoking_stops_everything() {
        let g = LeaseGate::new();
        g.publish(g.now_ms() + 60_000);
        g.revoke();
        assert!(!g.holds_now());
    }
}
