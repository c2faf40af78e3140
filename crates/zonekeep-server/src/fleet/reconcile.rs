//! Making this host run what the directory says it should: the zones assigned to it, and the
//! zones of dead hosts for which it is the failover winner.
//!
//! Every heartbeat period, while the lease holds and the host is not draining, one pass:
//! 1. **failover** — the zones whose owner is dead or left; for each whose rendezvous winner
//!    among live, non-draining hosts is this host, start it here (the claim in its start raises
//!    the epoch, fencing the dead owner for good, and it restores from the last save). Every live
//!    host computes the same winner, and the claim is atomic, so a zone starts once;
//! 2. **assignments** — zones the directory names this host as owner of that are not running
//!    here (placed here by another host, or stopped by a lease lapse): start them.
//!
//! Zones this host is retiring (dormant, saved, about to be released), zones it was fenced
//! from, and zones that failed here (until an operator stops them or their kind is deployed
//! anew) are left alone; a zone whose kind refused its params never stays in the directory. Starts run a few at a time so a takeover of hundreds of zones does not
//! flood the store.

use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt;
use tokio_util::sync::CancellationToken;
use zonekeep_fleet::failover::rendezvous;
use zonekeep_store::ZoneLocation;

use super::{query, Fleet, FleetError};
use crate::host::Shared;

/// Directory entries read per pass (orphans, and the zone list for assignments).
const BATCH: u32 = 10_000;
/// Zones started at once.
const STARTS_AT_ONCE: usize = 4;

/// Runs passes until `stop` is cancelled.
pub(crate) async fn run(shared: Arc<Shared>, fleet: Arc<Fleet>, stop: CancellationToken) {
    let mut every = tokio::time::interval(fleet.timing.heartbeat_every);
    every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            () = stop.cancelled() => return,
            _ = every.tick() => {}
        }
        if !fleet.gate.holds_now()
            || fleet.draining()
            || fleet.has_left()
            || shared.shutdown.is_cancelled()
        {
            continue;
        }
        if let Err(e) = pass(&shared, &fleet).await {
            tracing::warn!(host = %fleet.host_id, error = %e, "fleet reconcile pass failed");
        }
    }
}

/// Whether this host should start `zone` now. A zone that failed here stays failed until an
/// operator stops it or its kind is deployed anew: starting it again would only fail again.
fn startable(shared: &Shared, zone: &ZoneLocation) -> bool {
    shared.registry.get(&zone.zone_id).is_none()
        && shared.registry.failure(&zone.zone_id).is_none()
        && !shared
            .sim
            .persist
            .as_ref()
            .is_some_and(|p| p.storage().knows(&zone.zone_id))
}

/// One reconcile pass.
pub(crate) async fn pass(shared: &Arc<Shared>, fleet: &Fleet) -> Result<(), FleetError> {
    let hosts = query(&fleet.metrics, "hosts", fleet.directory.hosts()).await?;
    let entries = hosts.iter().filter(|h| {
        !h.draining
            && fleet
                .timing
                .is_alive(Duration::from_millis(h.heartbeat_age_ms), h.left)
    });
    shared
        .sim
        .entries
        .set(&fleet.url, entries.map(|h| h.url.as_str()));
    let live: Vec<&str> = hosts
        .iter()
        .filter(|h| {
            !h.draining
                && fleet
                    .timing
                    .is_alive(Duration::from_millis(h.heartbeat_age_ms), h.left)
        })
        .map(|h| h.host_id.as_str())
        .collect();
    let orphans = query(
        &fleet.metrics,
        "orphans",
        fleet.directory.orphans(fleet.timing, BATCH),
    )
    .await?;
    let mine: Vec<ZoneLocation> = orphans
        .into_iter()
        .filter(|z| rendezvous(&z.zone_id, live.iter().copied()) == Some(fleet.host_id.as_str()))
        .filter(|z| startable(shared, z))
        .collect();
    start_all(shared, fleet, mine, true).await;
    let listed = query(
        &fleet.metrics,
        "zones",
        fleet.directory.zones(fleet.timing, BATCH),
    )
    .await?;
    let assigned: Vec<ZoneLocation> = listed
        .into_iter()
        .filter(|z| z.owner.as_deref() == Some(fleet.host_id.as_str()))
        .filter(|z| !shared.registry.is_fenced(&z.zone_id) && startable(shared, z))
        .collect();
    start_all(shared, fleet, assigned, false).await;
    Ok(())
}

async fn start_all(shared: &Arc<Shared>, fleet: &Fleet, zones: Vec<ZoneLocation>, takeover: bool) {
    futures_util::stream::iter(zones)
        .for_each_concurrent(STARTS_AT_ONCE, |z| async move {
            if takeover {
                // The directory hands the zone to this host: an earlier local fence no longer applies.
                shared.registry.unmark_fenced(&z.zone_id);
            }
            match crate::admin::start_here(shared, &z.zone_id, &z.kind, z.params.clone()).await {
                Ok(()) => {
                    if takeover {
                        fleet.metrics.takeovers.inc();
                        tracing::info!(zone = %z.zone_id, from = ?z.owner, "took over a dead host's zone");
                    } else {
                        tracing::info!(zone = %z.zone_id, "started a zone the directory assigns to this host");
                    }
                }
                Err(e) => {
                    tracing::debug!(zone = %z.zone_id, error = %e, "zone not started by reconcile")
                }
            }
        })
        .await;
}
