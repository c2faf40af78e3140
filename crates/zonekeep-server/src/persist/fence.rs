//! The alarm a zone's workers raise when the store refuses one of its
//! writes as fenced.
//!
//! A zone's owner epoch goes stale when another host claims the zone. The
//! storage worker (a refused save) or the fact worker (a refused fact) learns
//! it first, on the runtime; the zone's simulation thread reads the alarm at
//! every wake and unloads the zone at once, without a final save. A plain
//! atomic flag keeps that check free on the hot path and never makes the
//! tick wait on a worker.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// One zone registration's "fenced" flag; clones share it. Raised once,
/// never lowered: a new registration of the zone (after a new claim) gets a
/// new alarm.
#[derive(Debug, Clone, Default)]
pub struct FenceAlarm(Arc<AtomicBool>);

impl FenceAlarm {
    /// A lowered alarm.
    pub fn new() -> Self {
        Self::default()
    }

    /// The store refused a write of this zone's owner as fenced.
    pub fn raise(&self) {
        self.0.store(true, Ordering::Release);
    }

    /// Whether a write of this owner was refused as fenced.
    pub fn is_raised(&self) -> bool {
        self.0.load(Ordering::Acquire)
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
}
