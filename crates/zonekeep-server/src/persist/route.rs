//! Routing settlements from the fact worker to the zone's simulation thread.
//!
//! Each loaded zone has one bounded settlement channel; the fact worker's
//! commit tasks `try_send` into it and the zone's thread drains it right
//! before the zone's next `advance`. The channel is sized to the zone's
//! `max_facts_in_flight`: a settlement waiting in it belongs to a fact that
//! is still in flight in the zone, so it can only be full if the fact worker
//! answered the same key twice (a re-send after a restore). A settlement that
//! finds no room or no zone is dropped and counted; the fact stays in flight
//! in the zone's snapshots and its restore re-sends it (the sink answers the
//! same again).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use crossbeam_channel::{Receiver, Sender, TrySendError};
use zonekeep_core::Settlement;

use super::facts::SettlementInbox;

/// One zone's route: which registration it is and where settlements go.
struct Route {
    generation: u64,
    tx: Sender<Settlement>,
}

/// Settlement routes by zone id. Cheap to clone.
#[derive(Clone, Default)]
pub struct SettlementRouter {
    routes: Arc<Mutex<HashMap<String, Route>>>,
    next_generation: Arc<AtomicU64>,
}

impl std::fmt::Debug for SettlementRouter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SettlementRouter")
            .field("zones", &self.lock().len())
            .finish()
    }
}

/// The zone's end of its route: drained by its simulation thread.
#[derive(Debug)]
pub struct SettlementRoute {
    zone_id: String,
    generation: u64,
    rx: Receiver<Settlement>,
    router: SettlementRouter,
}

impl SettlementRoute {
    /// The next settlement waiting, without blocking.
    pub fn try_recv(&self) -> Option<Settlement> {
        self.rx.try_recv().ok()
    }
}

impl Drop for SettlementRoute {
    /// The zone was unloaded: later settlements for it are orphaned (its
    /// restore re-sends the facts), unless a newer registration took over.
    fn drop(&mut self) {
        let mut routes = self.router.lock();
        if routes
            .get(&self.zone_id)
            .is_some_and(|r| r.generation == self.generation)
        {
            routes.remove(&self.zone_id);
        }
    }
}

impl SettlementRouter {
    /// A router with no zones.
    pub fn new() -> Self {
        Self::default()
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<String, Route>> {
        // A plain map updated in single statements: poisoning cannot leave it half-changed.
        self.routes.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Opens `zone_id`'s route with room for `capacity` settlements,
    /// replacing any older one (whose receiver then sees nothing more).
    pub fn open(&self, zone_id: &str, capacity: usize) -> SettlementRoute {
        let (tx, rx) = crossbeam_channel::bounded(capacity.max(1));
        let generation = self.next_generation.fetch_add(1, Ordering::Relaxed);
        self.lock()
            .insert(zone_id.to_owned(), Route { generation, tx });
        SettlementRoute {
            zone_id: zone_id.to_owned(),
            generation,
            rx,
            router: self.clone(),
        }
    }

    /// Zones with an open route.
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    /// Whether no zone has a route.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl SettlementInbox for SettlementRouter {
    fn deliver(&self, zone_id: &str, settlement: Settlement) -> bool {
        let tx = match self.lock().get(zone_id) {
            Some(r) => r.tx.clone(),
            None => return false,
        };
        match tx.try_send(settlement) {
            Ok(()) => true,
            Err(TrySendError::Full(s)) => {
                tracing::warn!(zone = %zone_id, key = %s.key, "settlement channel full; the fact stays in flight");
                false
            }
            Err(TrySendError::Disconnected(_)) => false,
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use zonekeep_core::{FactKey, FactOutcome};

    fn s(k: &str) -> Settlement {
        Settlement {
            key: FactKey(k.into()),
            outcome: FactOutcome::Ok(serde_json::Value::Null),
        }
    }

    #[test]
    fn routes_to_the_newest_registration_and_bounds_each_zone() {
        let router = SettlementRouter::new();
        assert!(!router.deliver("z", s("a")), "no route yet");
        let old = router.open("z", 2);
        assert!(router.deliver("z", s("a")));
        assert_eq!(old.try_recv().unwrap().key.as_str(), "a");
        let new = router.open("z", 1);
        assert!(router.deliver("z", s("b")));
        assert!(!router.deliver("z", s("c")), "full: dropped, not blocked");
        assert!(old.try_recv().is_none(), "the replaced route sees nothing");
        assert_eq!(new.try_recv().unwrap().key.as_str(), "b");
        // Dropping the replaced route must not remove the newer one.
        drop(old);
        assert_eq!(router.len(), 1);
        assert!(router.deliver("z", s("d")));
        drop(new);
        assert!(router.is_empty());
        assert!(!router.deliver("z", s("e")));
    }
}
