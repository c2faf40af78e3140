//! The lease watchdog: an OS thread, independent of the async runtime, that notices the lease
//! lapse and makes every simulation thread stop its zones.
//!
//! The zones would stop anyway — their simulation threads check the lease at every wake — but a
//! thread with only idle zones may sleep for a while, and a stuck runtime could not tell anyone.
//! The watchdog wakes the threads at once, logs the lapse at ERROR and counts it, and keeps the
//! heartbeat-age gauge current.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use super::Fleet;

/// How often the watchdog looks at the lease.
const PERIOD: Duration = Duration::from_millis(100);

/// Starts the watchdog. `wake` is called once per lapse (it pokes every simulation thread);
/// the thread ends when `stop` is set.
pub(crate) fn spawn(
    fleet: Arc<Fleet>,
    stop: Arc<AtomicBool>,
    wake: impl Fn() + Send + 'static,
) -> std::io::Result<std::thread::JoinHandle<()>> {
    std::thread::Builder::new()
        .name("zonekeep-watchdog".into())
        .spawn(move || {
            let (gate, metrics) = (&fleet.gate, &fleet.metrics);
            let fence_after = fleet.timing.fence_after;
            let mut held = gate.holds_now();
            while !stop.load(Ordering::Relaxed) {
                std::thread::sleep(PERIOD);
                let age = gate.heartbeat_age(fence_after).unwrap_or_default();
                metrics
                    .heartbeat_age_ms
                    .set(i64::try_from(age.as_millis()).unwrap_or(i64::MAX));
                let holds = gate.holds_now();
                // A host leaving the fleet gives its lease up on purpose (it is set to have left
                // before the lease is revoked): that is no lapse.
                if !holds && fleet.has_left() {
                    return;
                }
                if held && !holds && !stop.load(Ordering::Relaxed) {
                    metrics.lease_lapses.inc();
                    tracing::error!(
                        since_last_landed_ms = age.as_millis() as u64,
                        "lease lapsed: no heartbeat landed within the fence bound; stopping every zone and refusing every store write"
                    );
                    wake();
                }
                held = holds;
            }
        })
}
