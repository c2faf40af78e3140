//! Waking a dormant zone for a message.
//!
//! A message to a zone that does not run on this host waits for it: in the stream over NATS,
//! in the bus's bounded parking in process ([`zonekeep_bus::Location::Asleep`]). This task
//! looks at what waits every [`LOCAL_EVERY`] (in process) or [`NATS_EVERY`] (over NATS) and
//! asks the directory about each such zone:
//! - known, with no live owner (it went dormant and was released, or its host died): it is
//!   placed as for a join — started here, or assigned to the host with room, whose reconcile
//!   starts it — with the kind and params it was created with, and restores from its last save;
//!   its messages are then delivered in order;
//! - owned by another live host: over NATS that host's consumer has them; in process there is
//!   no way there, and the senders hear `no_bus`;
//! - unknown to the directory (never created, or deleted): in process the senders hear
//!   `unknown_zone`; over NATS the stream keeps the envelopes, for at most its age bound, in
//!   case the zone is made later.
//!
//! Over NATS the stream also holds envelopes of running zones until their saves let them be
//! acknowledged, so zones found running or unknown are not asked about again for
//! [`REMEMBER`]. Nothing here runs on a simulation thread.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;
use zonekeep_bus::BusError;

use crate::fleet::route::Route;
use crate::host::Shared;

/// How often the in-process bus's parked messages are looked at.
pub(crate) const LOCAL_EVERY: Duration = Duration::from_millis(100);
/// How often the stream's waiting subjects are listed over NATS.
pub(crate) const NATS_EVERY: Duration = Duration::from_secs(1);
/// How long a zone found running elsewhere, or unknown, is not asked about again (over NATS).
pub(crate) const REMEMBER: Duration = Duration::from_secs(5);
/// Waiting zones looked at per pass.
const PER_PASS: usize = 256;

/// What the directory said about a zone with waiting messages.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Found {
    /// Started here, assigned to a host that starts it, or starting already.
    Woken,
    /// Not now (a dormant save still being written here, or the directory did not answer):
    /// asked again at the next pass.
    Later,
    /// Another live host owns it.
    Elsewhere,
    /// The directory does not know it.
    Unknown,
    /// It could not be started, for this reason.
    Failed(String),
}

/// Runs passes until the host shuts down.
pub(crate) async fn run(shared: Arc<Shared>) {
    let Some(bus) = shared.sim.bus.get().cloned() else {
        return;
    };
    let nats = bus.kind() == "nats";
    let mut every = tokio::time::interval(if nats { NATS_EVERY } else { LOCAL_EVERY });
    every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut remembered: HashMap<String, Instant> = HashMap::new();
    loop {
        tokio::select! {
            () = shared.shutdown.cancelled() => return,
            _ = every.tick() => {}
        }
        let waiting = match bus.waiting_zones(PER_PASS).await {
            Ok(w) => w,
            Err(e) => {
                tracing::debug!(error = %e, "bus: waiting zones not listed");
                continue;
            }
        };
        let now = Instant::now();
        remembered.retain(|_, at| now.duration_since(*at) < REMEMBER);
        for zone in waiting {
            if shared.registry.get(&zone).is_some() || remembered.contains_key(&zone) {
                continue;
            }
            let found = wake(&shared, &zone).await;
            match (&found, nats) {
                (Found::Woken, _) => {
                    tracing::info!(zone = %zone, "woke a zone for the messages waiting for it")
                }
                (Found::Later, _) => {}
                (Found::Elsewhere | Found::Unknown, true) => {
                    remembered.insert(zone, now);
                }
                (Found::Elsewhere, false) => bus.refuse_waiting(&zone, BusError::NoBus),
                (Found::Unknown, false) => {
                    bus.refuse_waiting(&zone, BusError::UnknownZone(zone.clone()))
                }
                (Found::Failed(reason), _) => {
                    tracing::warn!(zone = %zone, %reason, "a zone with waiting messages could not be woken");
                    if nats {
                        remembered.insert(zone, now);
                    } else {
                        bus.refuse_waiting(
                            &zone,
                            BusError::Unavailable(format!("the zone could not be woken: {reason}")),
                        );
                    }
                }
            }
        }
    }
}

/// Asks the directory about `zone` and wakes it if it sleeps.
async fn wake(shared: &Arc<Shared>, zone: &str) -> Found {
    let Some(fleet) = shared.fleet() else {
        return Found::Unknown;
    };
    let located = crate::fleet::query(
        &fleet.metrics,
        "locate",
        fleet.directory.locate(zone, fleet.timing),
    )
    .await;
    let loc = match located {
        Ok(Some(loc)) => loc,
        Ok(None) => return Found::Unknown,
        Err(_) => return Found::Later,
    };
    if loc.owner_alive && loc.owner.as_deref() != Some(fleet.host_id.as_str()) {
        return Found::Elsewhere;
    }
    // A zone this host is unloading (its dormant save, then its release) is woken after that.
    if shared
        .sim
        .persist
        .as_ref()
        .is_some_and(|p| p.storage().knows(zone))
    {
        return Found::Later;
    }
    match fleet.route(zone, &loc.kind, &loc.params).await {
        Ok(Route::Here(_)) => {
            match crate::admin::start_here(shared, zone, &loc.kind, loc.params.clone()).await {
                Ok(()) => Found::Woken,
                // Started by a join or a reconcile meanwhile.
                Err(_) if shared.registry.get(zone).is_some() => Found::Woken,
                Err(e) => Found::Failed(e.to_string()),
            }
        }
        Ok(Route::Owner { .. }) if shared.sim.bus.get().is_some_and(|b| b.kind() == "nats") => {
            Found::Woken
        }
        Ok(Route::Owner { .. }) => Found::Elsewhere,
        Err(_) => Found::Later,
    }
}
