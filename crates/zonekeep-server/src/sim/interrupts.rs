//! The stop flags of the running zones whose game code can be interrupted (modules): when the
//! lease lapses the watchdog sets them all, so a long call stops within an epoch instead of acting
//! on for a host that may no longer own its zone (see `Zone::stop_handle`).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, Weak};

/// Every registered flag, weakly: a zone that is gone drops its flag, and the list forgets it.
#[derive(Debug, Default)]
pub(crate) struct Interrupts {
    flags: Mutex<Vec<Weak<AtomicBool>>>,
}

impl Interrupts {
    /// Registers a running zone's stop flag.
    pub fn register(&self, flag: &Arc<AtomicBool>) {
        let mut flags = self.flags.lock().unwrap_or_else(|p| p.into_inner());
        // Forget the flags of zones that are gone whenever the list doubles: amortized O(1).
        if flags.len() >= 64 && flags.len().is_power_of_two() {
            flags.retain(|w| w.strong_count() > 0);
        }
        flags.push(Arc::downgrade(flag));
    }

    /// Sets every live flag; returns how many zones that stops.
    pub fn stop_all(&self) -> usize {
        let mut flags = self.flags.lock().unwrap_or_else(|p| p.into_inner());
        flags.retain(|w| w.strong_count() > 0);
        let mut stopped = 0;
        for flag in flags.iter().filter_map(Weak::upgrade) {
            flag.store(true, Ordering::Relaxed);
            stopped += 1;
        }
        stopped
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.flags.lock().unwrap_or_else(|p| p.into_inner()).len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stop_all_sets_the_live_flags_and_forgets_the_dead() {
        let interrupts = Interrupts::default();
        let live: Vec<Arc<AtomicBool>> = (0..3).map(|_| Arc::new(AtomicBool::new(false))).collect();
        for f in &live {
            interrupts.register(f);
        }
        for _ in 0..200 {
            // Zones that came and went.
            interrupts.register(&Arc::new(AtomicBool::new(false)));
        }
        assert!(
            interrupts.len() < 200,
            "dead flags are pruned as the list grows"
        );
        assert_eq!(interrupts.stop_all(), 3);
        assert!(live.iter().all(|f| f.load(Ordering::Relaxed)));
        assert_eq!(interrupts.len(), 3);
    }
}
