//! Handing a returned move's state back when its player joins the source zone again.
//!
//! A move pending when the source host died is returned by the zone's new owner, but the player
//! is not in the restarted zone (participants are not saved) and the state `transfer_out` handed
//! out lives on only in the record. When that player joins the zone again, its join reclaims the
//! record — a compare-and-set fenced by the zone's epoch, so the state goes back once — and the
//! zone admits it through its return with that state instead of `on_join`. All of it happens in
//! the session's admission, before the join reaches the zone's thread: the tick never waits.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use tokio::sync::oneshot;
use zonekeep_store::{StoreError, StoredTransfer, TransferStatus};

use super::{ledger, RESEND_WINDOW};
use crate::host::Shared;
use crate::session::{count_takeover, start_failure};
use crate::sim::{admit_zone, JoinFailure, SimCommand, ZoneCreate, ZoneEntry};

/// The reason a move out of a restarted zone is returned with (as [`super::recover`] does).
pub(super) const RESTARTED: &str = "the source zone restarted";

/// Looks for a move of `principal` out of `zone_id` that a crash of the source left with its
/// state undelivered (returned and not reclaimed, or still pending from an earlier run, which
/// is returned first) and reclaims it for this join. Answers the record when this call
/// reclaimed it, and the zone's start when the join must still carry it (`create` untouched
/// when there is nothing to reclaim; started here otherwise, since the reclaim is fenced by the
/// epoch the start claims). A store that does not answer refuses the join, as at any admission.
pub(crate) async fn on_join(
    shared: &Arc<Shared>,
    zone_id: &str,
    principal: &str,
    entry: &Arc<ZoneEntry>,
    create: Option<ZoneCreate>,
    took_over: bool,
) -> Result<(Option<StoredTransfer>, Option<ZoneCreate>), JoinFailure> {
    // Without persistence no zone outlives its host, and every return is handed back live.
    let Some(ledger) = shared.sim.persist.as_ref().and(ledger(shared)) else {
        return Ok((None, create));
    };
    let unreachable =
        |e: StoreError| JoinFailure::StoreUnreachable(format!("transfer records: {e}"));
    let window = u64::try_from(RESEND_WINDOW.as_millis()).unwrap_or(u64::MAX);
    let since = crate::sim::now_ms().saturating_sub(window);
    // The pending moves are read before the returned one: the zone's start settles its previous
    // run's pending moves concurrently ([`super::recover`]), and a move it returns between the
    // two reads is then seen by the second, where the other order would miss it in both.
    let pending: Vec<StoredTransfer> = ledger
        .open_transfers(zone_id)
        .await
        .map_err(unreachable)?
        .into_iter()
        .filter(|t| {
            t.status == TransferStatus::Pending
                && t.transfer.source_zone == zone_id
                && t.transfer.principal == principal
                && t.created_at_ms >= since
        })
        .collect();
    let returned = ledger
        .unclaimed_return(zone_id, principal, since)
        .await
        .map_err(unreachable)?;
    if returned.is_none() && pending.is_empty() {
        return Ok((None, create));
    }
    if let Some(c) = create {
        start(shared, zone_id, entry, c, took_over).await?;
    }
    crate::sim::wait_running(entry)
        .await
        .map_err(JoinFailure::Unavailable)?;
    let epoch = entry.epoch.load(Ordering::Acquire);
    if epoch == 0 {
        return Ok((None, None));
    }
    let mut candidate = returned;
    for t in pending {
        // A move of this run is live (its player is in the zone, moving): not ours to settle.
        if candidate.is_some() || t.transfer.source_epoch >= epoch {
            continue;
        }
        let settled = ledger
            .return_transfer(&t.transfer.id, zone_id, epoch, RESTARTED)
            .await
            .map_err(|e| fenced_or(e, unreachable))?;
        if settled.status == TransferStatus::Returned && !settled.arrived {
            candidate = Some(settled);
        }
    }
    let Some(found) = candidate else {
        return Ok((None, None));
    };
    match ledger.reclaim_transfer(&found.transfer.id, epoch).await {
        Ok(r) if r.by_this_call => {
            shared.metrics.transfer("reclaimed");
            tracing::info!(zone = %zone_id, transfer = %found.transfer.id, "a returned move's state goes back to its joining player");
            Ok((Some(r.transfer), None))
        }
        // Another join of the same player reclaimed it first: this one joins afresh.
        Ok(_) => Ok((None, None)),
        Err(e) => Err(fenced_or(e, unreachable)),
    }
}

/// A fenced write means another host owns the zone now; anything else is the store's.
fn fenced_or(e: StoreError, other: impl Fn(StoreError) -> JoinFailure) -> JoinFailure {
    match e {
        StoreError::Fenced { .. } => JoinFailure::Fenced,
        e => other(e),
    }
}

/// Starts the zone on its own, so that the reclaim can be fenced by the epoch it claims.
async fn start(
    shared: &Arc<Shared>,
    zone_id: &str,
    entry: &Arc<ZoneEntry>,
    create: ZoneCreate,
    took_over: bool,
) -> Result<(), JoinFailure> {
    let (tx, rx) = oneshot::channel();
    admit_zone(&shared.sim, &shared.pool, entry, create, |start| {
        SimCommand::Create {
            zone_id: zone_id.to_owned(),
            create: start,
            reply: tx,
        }
    })
    .await
    .map_err(|e| start_failure(shared, entry, JoinFailure::Unavailable, e))?;
    count_takeover(shared, took_over);
    rx.await
        .map_err(|_| JoinFailure::Unavailable("the zone's thread is gone".into()))?
        .map_err(|e| JoinFailure::Unavailable(e.to_string()))
}
