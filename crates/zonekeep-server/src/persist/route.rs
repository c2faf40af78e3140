//! Routing answers — fact settlements from the fact worker and call results from the call
//! worker — to the zone's simulation thread.
//!
//! Each loaded zone has one bounded answer channel; the workers' tasks `try_send` into it and
//! the zone's thread drains it right before the zone's next `advance`. The channel is sized to
//! the zone's `max_facts_in_flight` plus `max_calls_in_flight`: an answer waiting in it belongs
//! to a fact or call still in flight in the zone, so it can only be full if a worker answered
//! the same key twice (a re-send after a restore). An answer that finds no room or no zone is
//! dropped and counted; the fact or call stays in flight in the zone's snapshots and its restore
//! re-sends it (the sink, or the call journal, answers the same again).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use crossbeam_channel::{Receiver, Sender, TrySendError};
use zonekeep_core::{CallAnswer, Settlement};

use super::calls::CallInbox;
use super::facts::SettlementInbox;

/// One answer on its way to a zone.
#[derive(Debug, Clone, PartialEq)]
pub enum ZoneAnswer {
    /// A fact's settlement.
    Fact(Settlement),
    /// A call's result.
    Call(CallAnswer),
}

/// One zone's route: which registration it is and where settlements go.
struct Route {
    generation: u64,
    tx: Sender<ZoneAnswer>,
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
    rx: Receiver<ZoneAnswer>,
    router: SettlementRouter,
}

impl SettlementRoute {
    /// The next answer waiting, without blocking.
    pub fn try_recv(&self) -> Option<ZoneAnswer> {
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

impl SettlementRouter {
    fn route(&self, zone_id: &str, answer: ZoneAnswer) -> bool {
        let tx = match self.lock().get(zone_id) {
            Some(r) => r.tx.clone(),
            None => return false,
        };
        match tx.try_send(answer) {
            Ok(()) => true,
            Err(TrySendError::Full(a)) => {
                tracing::warn!(zone = %zone_id, answer = ?a, "answer channel full; the fact or call stays in flight");
                false
            }
            Err(TrySendError::Disconnected(_)) => false,
        }
    }
}

impl SettlementInbox for SettlementRouter {
    fn deliver(&self, zone_id: &str, settlement: Settlement) -> bool {
        self.route(zone_id, ZoneAnswer::Fact(settlement))
    }
}

impl CallInbox for SettlementRouter {
    fn deliver(&self, zone_id: &str, answer: CallAnswer) -> bool {
        self.route(zone_id, ZoneAnswer::Call(answer))
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
        let settle = |k: &str| SettlementInbox::deliver(&router, "z", s(k));
        assert!(!settle("a"), "no route yet");
        let old = router.open("z", 2);
        assert!(settle("a"));
        assert_eq!(old.try_recv(), Some(ZoneAnswer::Fact(s("a"))));
        let new = router.open("z", 1);
        assert!(settle("b"));
        assert!(!settle("c"), "full: dropped, not blocked");
        assert!(old.try_recv().is_none(), "the replaced route sees nothing");
        assert_eq!(new.try_recv(), Some(ZoneAnswer::Fact(s("b"))));
        // Dropping the replaced route must not remove the newer one.
        drop(old);
        assert_eq!(router.len(), 1);
        assert!(settle("d"));
        drop(new);
        assert!(router.is_empty());
        assert!(!settle("e"));
    }

    #[test]
    fn call_results_share_the_zone_route_in_order() {
        let router = SettlementRouter::new();
        let route = router.open("z", 4);
        let answer = zonekeep_core::CallAnswer {
            key: zonekeep_core::CallKey("order-1".into()),
            result: zonekeep_core::CallResult::Ok(serde_json::json!(1)),
        };
        assert!(SettlementInbox::deliver(&router, "z", s("a")));
        assert!(CallInbox::deliver(&router, "z", answer.clone()));
        assert_eq!(route.try_recv(), Some(ZoneAnswer::Fact(s("a"))));
        assert_eq!(route.try_recv(), Some(ZoneAnswer::Call(answer)));
    }
}
