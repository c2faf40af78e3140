//! Joining the fleet and keeping the lease: registration, then a heartbeat about once a second.
//!
//! The lease is measured on this host's monotonic clock from when each heartbeat was *sent*, and
//! only heartbeats that landed count (`zonekeep_fleet::Lease`). A heartbeat is abandoned after
//! the query timeout; one that lands in the database anyway only makes the database think the
//! host alive a little longer, never the host act longer — the safe direction.

use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;
use zonekeep_fleet::lease::{Lease, Millis};
use zonekeep_store::{HostRegistration, StoreError};

use super::{query, Fleet, FleetError};

/// How often a host whose id another process still holds retries its registration.
const REGISTER_RETRY: Duration = Duration::from_millis(500);

/// Registers the host and lands its first heartbeat, arming the lease gate. A host restarting
/// under an id whose previous process has not left waits until that process has been silent for
/// the takeover bound; one whose id a live host keeps using gives up after that bound. With
/// `predecessor_gone` (the data directory's lock is held: no earlier process on it still runs)
/// the id is taken at once.
pub(crate) async fn join(fleet: &Arc<Fleet>, predecessor_gone: bool) -> Result<Lease, FleetError> {
    let reg = HostRegistration {
        host_id: fleet.host_id.clone(),
        incarnation: fleet.incarnation(),
        url: fleet.url.clone(),
        capacity: fleet.capacity,
        region: fleet.region.clone(),
    };
    let silent = fleet.timing.dead_after;
    // Zero: any earlier incarnation's row counts as silent, unless it was stamped this very
    // millisecond (then the retry below takes it).
    let takeover_after = if predecessor_gone {
        Duration::ZERO
    } else {
        silent
    };
    let give_up = tokio::time::Instant::now() + silent + silent / 2;
    let mut waited = false;
    loop {
        match query(
            &fleet.metrics,
            "register",
            fleet.directory.register_host(&reg, takeover_after),
        )
        .await
        {
            Ok(()) => break,
            Err(FleetError::Store(StoreError::HostIdInUse {
                heartbeat_age_ms, ..
            })) => {
                if tokio::time::Instant::now() >= give_up {
                    return Err(FleetError::IdInUse {
                        host_id: fleet.host_id.clone(),
                        age_ms: heartbeat_age_ms,
                    });
                }
                if !waited && !predecessor_gone {
                    tracing::warn!(host = %fleet.host_id, heartbeat_age_ms, "an earlier process of this host id has not left; waiting until it has been silent for {} s", silent.as_secs());
                    waited = true;
                }
                tokio::time::sleep(REGISTER_RETRY).await;
            }
            Err(e) => return Err(e),
        }
    }
    let mut lease = Lease::new(fleet.timing);
    beat(fleet, &mut lease).await?;
    tracing::info!(host = %fleet.host_id, url = %fleet.url, capacity = fleet.capacity, "joined the fleet");
    Ok(lease)
}

/// Sends one heartbeat and publishes it to the gate if it lands.
async fn beat(fleet: &Fleet, lease: &mut Lease) -> Result<(), FleetError> {
    let sent = lease.send(Millis(fleet.gate.now_ms()));
    let r = query(
        &fleet.metrics,
        "heartbeat",
        fleet.directory.heartbeat(
            &fleet.host_id,
            &fleet.incarnation(),
            fleet.draining(),
            fleet.timing,
        ),
    )
    .await;
    match r {
        Ok(()) => {
            lease.landed(sent);
            fleet.metrics.heartbeat("ok");
            if let Some(until) = lease.valid_until() {
                if fleet.gate.publish(until.0) {
                    tracing::warn!(host = %fleet.host_id, "lease regained after a lapse: zones stopped by the lapse are claimed anew before they run here again");
                }
            }
            Ok(())
        }
        Err(e) => {
            lease.failed(sent);
            fleet.metrics.heartbeat(match e {
                FleetError::Timeout => "timeout",
                _ => "failed",
            });
            Err(e)
        }
    }
}

/// Registers again under a new incarnation after the database counted this process dead,
/// retrying until it works or `stop` is cancelled. A host id another live process holds is given
/// up on after the takeover bound (returns `None`).
async fn rejoin(fleet: &Arc<Fleet>, stop: &CancellationToken) -> Option<Lease> {
    loop {
        if let Err(e) = fleet.renew_incarnation() {
            tracing::error!(error = %e, "cannot make a new incarnation");
            return None;
        }
        tokio::select! {
            () = stop.cancelled() => return None,
            // Not at once: the lock proves no earlier process runs, but this one was counted
            // dead, and another process may have taken the id since.
            r = join(fleet, false) => match r {
                Ok(lease) => return Some(lease),
                Err(e @ FleetError::IdInUse { .. }) => {
                    tracing::error!(error = %e, "not rejoining the fleet");
                    return None;
                }
                Err(e) => tracing::warn!(error = %e, "rejoining the fleet failed; retrying"),
            }
        }
        tokio::select! {
            () = stop.cancelled() => return None,
            () = tokio::time::sleep(fleet.timing.heartbeat_every) => {}
        }
    }
}

/// Heartbeats until `stop` is cancelled or the host learns another process replaced it.
pub(crate) async fn run(fleet: Arc<Fleet>, mut lease: Lease, stop: CancellationToken) {
    let mut every = tokio::time::interval(fleet.timing.heartbeat_every);
    every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    every.tick().await;
    loop {
        tokio::select! {
            () = stop.cancelled() => return,
            _ = every.tick() => {}
        }
        if fleet.has_left() {
            return;
        }
        match beat(&fleet, &mut lease).await {
            Ok(()) => {}
            Err(FleetError::Store(StoreError::LeaseLost { .. })) => {
                // The database counts this process dead (it was paused, or its heartbeats hung)
                // or another process took the id: every zone of the old lease stops for good.
                tracing::error!(host = %fleet.host_id, "the fleet no longer counts this process as a live host: stopping every zone; rejoining under a new incarnation");
                fleet.gate.revoke();
                match rejoin(&fleet, &stop).await {
                    Some(l) => lease = l,
                    None => return,
                }
            }
            Err(e) => {
                let left = fleet.gate.remaining().unwrap_or_default();
                tracing::warn!(host = %fleet.host_id, error = %e, lease_left_ms = left.as_millis() as u64, "heartbeat did not land");
            }
        }
    }
}
