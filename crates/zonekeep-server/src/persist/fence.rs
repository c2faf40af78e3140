//! The alarm a zone's workers raise when the store refuses one of its
//! writes as fenced.
//!
//! A zone's owner epoch goes stale when another host claims the zone. The
//! storage worker (a refused save) or the fact worker (a refused fact) learns
//! it first, on the runtime; the zone's simulation thread reads the alarm at
//! every wake and unloads the zone at once, without a final save. A plain
//! atomic flag keeps that check free on the hot path and never makes the
//! tick wait on a worker.
//!
//! The alarm also reads the host's lease ([`LeaseGate`]): a zone registered
//! under one lease generation counts as fenced as soon as that generation
//! ends (the lease lapsed), without anyone having to raise it. So a host whose
//! heartbeats stopped landing stops its zones and writes nothing, even when
//! every store call hangs instead of failing.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use crate::fleet::LeaseGate;

/// One zone registration's "fenced" flag; clones share it. Raised once,
/// never lowered: a new registration of the zone (after a new claim) gets a
/// new alarm.
#[derive(Debug, Clone, Default)]
pub struct FenceAlarm {
    raised: Arc<AtomicBool>,
    lease: Option<(Arc<LeaseGate>, u64)>,
}

impl FenceAlarm {
    /// A lowered alarm that only the store's refusal raises.
    pub fn new() -> Self {
        Self::default()
    }

    /// A lowered alarm that is also raised when `gate`'s current lease generation ends.
    pub fn leased(gate: Arc<LeaseGate>) -> Self {
        let generation = gate.generation();
        FenceAlarm {
            raised: Arc::default(),
            lease: Some((gate, generation)),
        }
    }

    /// The store refused a write of this zone's owner as fenced.
    pub fn raise(&self) {
        self.raised.store(true, Ordering::Release);
    }

    /// Whether this owner must stop: a write was refused as fenced, or the
    /// host's lease generation it was claimed under ended.
    pub fn is_raised(&self) -> bool {
        self.raised.load(Ordering::Acquire) || self.lease_ended()
    }

    /// Resolves once the alarm is raised (checked every 50 ms). A store call
    /// raced against it is abandoned when the lease lapses while the call
    /// still waits for a pooled connection or an answer, so a write queued
    /// behind a hung database is never sent after the lease ended.
    pub async fn raised(&self) {
        while !self.is_raised() {
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
    }

    /// Whether the host's lease generation this zone was claimed under ended
    /// (as opposed to a write refused by the store).
    pub fn lease_ended(&self) -> bool {
        self.lease
            .as_ref()
            .is_some_and(|(gate, generation)| !gate.holds(*generation))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clones_share_the_raised_state() {
        let a = FenceAlarm::new();
        let b = a.clone();
        assert!(!b.is_raised());
        a.raise();
        assert!(b.is_raised());
        assert!(!FenceAlarm::new().is_raised(), "a new alarm starts lowered");
    }

    #[test]
    fn a_leased_alarm_is_raised_when_its_lease_generation_ends() {
        let gate = Arc::new(LeaseGate::new());
        gate.publish(gate.now_ms() + 60_000);
        let a = FenceAlarm::leased(Arc::clone(&gate));
        assert!(!a.is_raised());
        gate.revoke();
        assert!(a.is_raised() && a.lease_ended());
    }
}
