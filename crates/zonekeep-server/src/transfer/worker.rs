//! The transfer worker: records, decides and settles each move off every tick.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{mpsc, Semaphore};
use zonekeep_store::{NewTransfer, StoreError, StoredTransfer, TransferLedger, TransferStatus};

use super::target::{self, Admitted};
use super::{
    credential, ledger, transfer_id, Job, Outbound, Resolution, DECISION_TIMEOUT, IN_FLIGHT,
};
use crate::host::Shared;
use crate::sim::SimCommand;

/// Pause between attempts at a store write that failed for a transient reason.
const RETRY_PAUSE: Duration = Duration::from_millis(200);

/// Serves the transfer jobs of a host until its queue closes or it shuts down.
pub(crate) async fn run(shared: Arc<Shared>, mut jobs: mpsc::Receiver<Job>) {
    let permits = Arc::new(Semaphore::new(IN_FLIGHT));
    loop {
        let job = tokio::select! {
            _ = shared.shutdown.cancelled() => break,
            j = jobs.recv() => match j { Some(j) => j, None => break },
        };
        let Ok(permit) = Arc::clone(&permits).acquire_owned().await else {
            break;
        };
        let shared = Arc::clone(&shared);
        tokio::spawn(async move {
            match job {
                Job::Move(o) => move_player(&shared, o).await,
                Job::Arrived { id, epoch } => arrived(&shared, &id, epoch).await,
                Job::Unclaimed { id, epoch } => unclaimed(&shared, &id, epoch).await,
                Job::Started { zone_id, epoch } => {
                    super::recover::recover(&shared, &zone_id, epoch).await
                }
            }
            drop(permit);
        });
    }
}

/// Gives a reclaimed state up again after its join was refused, so the player's next join gets
/// it. Retried for the decision timeout while the store does not answer. Refused as fenced when
/// another host owns the zone by now: the reclaim then stands and the state is not handed back
/// (logged; the same as a crash of this host between the reclaim and the join).
async fn unclaimed(shared: &Shared, id: &str, epoch: u64) {
    let Some(ledger) = ledger(shared) else { return };
    match write_within(super::DECISION_TIMEOUT, || {
        ledger.release_reclaim(id, epoch)
    })
    .await
    {
        Ok(_) => {
            shared.metrics.transfer("unclaimed");
            tracing::info!(transfer = %id, "a refused join gave its reclaimed state up for the next one");
        }
        Err(e) => {
            tracing::warn!(transfer = %id, error = %e, "a refused join's reclaimed state was not given up");
        }
    }
}

/// Records a moved player's arrival, so a restart of its target zone does not admit it again.
async fn arrived(shared: &Shared, id: &str, epoch: u64) {
    let Some(ledger) = ledger(shared) else { return };
    if let Err(e) = ledger.arrive_transfer(id, epoch).await {
        tracing::warn!(transfer = %id, error = %e, "the arrival of a moved player was not recorded");
    }
}

/// One move, from the source's request to the source being told how it ended.
async fn move_player(shared: &Arc<Shared>, o: Outbound) {
    let metrics = &shared.metrics;
    let Some(ledger) = ledger(shared) else {
        return_to_source(shared, &o, "this host keeps no transfer records".into()).await;
        return;
    };
    let new = NewTransfer {
        id: transfer_id(&o),
        principal: o.request.principal.as_str().to_owned(),
        player: o.request.player.0,
        source_zone: o.zone_id.clone(),
        source_epoch: o.epoch,
        target_zone: o.request.target_zone.clone(),
        claims: serde_json::Value::Object(o.request.claims.clone()).to_string(),
        player_claims: serde_json::Value::Object(o.request.player_claims.clone()).to_string(),
        state: o.request.state.clone(),
    };
    let begun = match write_within(DECISION_TIMEOUT, || ledger.begin_transfer(&new)).await {
        Ok(t) => t,
        Err(e) => {
            metrics.transfer("not_recorded");
            return_to_source(shared, &o, format!("the move could not be recorded: {e}")).await;
            return;
        }
    };
    super::chaos::at(super::chaos::Step::Pending, &begun.transfer.id).await;
    let recorded_at = std::time::Instant::now();
    // The target's answer, within the bound; the source's own return settles anything else.
    let mut admitted: Option<Admitted> = None;
    let decided = tokio::time::timeout(
        DECISION_TIMEOUT,
        target::decide(shared, &ledger, &begun, &mut admitted),
    )
    .await;
    let settled = match decided {
        Ok(Ok(t)) => Some(t),
        Ok(Err(reason)) => give_back(shared, &ledger, &o, &begun, &reason).await,
        Err(_) => {
            give_back(
                shared,
                &ledger,
                &o,
                &begun,
                "the target zone did not answer in time",
            )
            .await
        }
    };
    tracing::debug!(
        transfer = %begun.transfer.id,
        decided_ms = u64::try_from(recorded_at.elapsed().as_millis()).unwrap_or(u64::MAX),
        "move decided"
    );
    let Some(settled) = settled else {
        // The source's owner changed while the move was decided: its new owner finishes it.
        metrics.transfer("fenced");
        return;
    };
    if settled.status != TransferStatus::Accepted {
        if let Some(a) = admitted {
            target::cancel(shared, &settled.transfer.target_zone, a);
        }
        // The state goes back to the zone now, live: marked so a later join cannot reclaim it.
        if !hand_back(shared, &ledger, &o, &settled).await {
            metrics.transfer("fenced");
            return;
        }
        metrics.transfer("returned");
        let why = settled
            .reason
            .clone()
            .unwrap_or_else(|| "the move did not happen".into());
        return_to_source(shared, &o, why).await;
        return;
    }
    super::chaos::at(super::chaos::Step::Accepted, &settled.transfer.id).await;
    match credential::transfer_frame(shared, &settled).await {
        Ok(frame) => {
            shared
                .sim
                .transfers
                .remember(&o.zone_id, &new.principal, frame.clone());
            metrics.transfer("moved");
            resolve(shared, &o, Resolution::Moved(frame));
        }
        Err(e) => {
            // The target has the player: it keeps it, and the client learns where when it comes
            // back to the source (which sends the Transfer then) — nothing else can be done.
            tracing::error!(transfer = %settled.transfer.id, error = %e, "no Transfer frame for an accepted move");
            metrics.transfer("moved_untold");
            return_to_source(
                shared,
                &o,
                format!("the move was accepted but cannot be told: {e}"),
            )
            .await;
        }
    }
}

/// The source takes the player back: settles the record as returned with `reason` (retrying a
/// store that does not answer, for as long as this host may act). Answers the settled record,
/// which may say the target accepted after all; `None` when the source's owner changed.
async fn give_back(
    shared: &Shared,
    ledger: &Arc<dyn TransferLedger>,
    o: &Outbound,
    begun: &StoredTransfer,
    reason: &str,
) -> Option<StoredTransfer> {
    loop {
        match ledger
            .return_transfer(&begun.transfer.id, &o.zone_id, o.epoch, reason)
            .await
        {
            Ok(t) => return Some(t),
            Err(StoreError::Fenced { .. }) => return None,
            Err(e) if e.is_retryable() && !shared.shutdown.is_cancelled() => {
                tracing::warn!(transfer = %begun.transfer.id, error = %e, "returning a moved player: retrying");
                tokio::time::sleep(RETRY_PAUSE).await;
            }
            Err(e) => {
                tracing::error!(transfer = %begun.transfer.id, error = %e, "returning a moved player failed");
                return None;
            }
        }
    }
}

/// Marks a returned move's state as handed back to the source zone, which takes the player
/// back live. False when the source's owner changed (its new run does not have the player: a
/// join of it there reclaims the state instead). A store that does not answer within the
/// bound is logged and the player taken back all the same: keeping it is worth the small risk
/// that a later join there after a crash of this host hands the state back again.
async fn hand_back(
    shared: &Shared,
    ledger: &Arc<dyn TransferLedger>,
    o: &Outbound,
    settled: &StoredTransfer,
) -> bool {
    let id = &settled.transfer.id;
    let deadline = tokio::time::Instant::now() + DECISION_TIMEOUT;
    loop {
        match tokio::time::timeout_at(deadline, ledger.reclaim_transfer(id, o.epoch)).await {
            Ok(Ok(_)) => return true,
            Ok(Err(StoreError::Fenced { .. })) => return false,
            Ok(Err(e))
                if e.is_retryable()
                    && !shared.shutdown.is_cancelled()
                    && tokio::time::Instant::now() + RETRY_PAUSE < deadline =>
            {
                tokio::time::sleep(RETRY_PAUSE).await;
            }
            Ok(Err(e)) => {
                tracing::warn!(transfer = %id, error = %e, "a returned move's state was not marked handed back");
                return true;
            }
            Err(_) => {
                tracing::warn!(transfer = %id, "a returned move's state was not marked handed back in time");
                return true;
            }
        }
    }
}

/// Runs a store write, retrying transient failures until `bound` has passed.
pub(super) async fn write_within<F, Fut>(
    bound: Duration,
    mut write: F,
) -> Result<StoredTransfer, StoreError>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<StoredTransfer, StoreError>>,
{
    let deadline = tokio::time::Instant::now() + bound;
    loop {
        match tokio::time::timeout_at(deadline, write()).await {
            Ok(Ok(t)) => return Ok(t),
            Ok(Err(e))
                if e.is_retryable() && tokio::time::Instant::now() + RETRY_PAUSE < deadline =>
            {
                tokio::time::sleep(RETRY_PAUSE).await;
            }
            Ok(Err(e)) => return Err(e),
            Err(_) => {
                return Err(StoreError::Backend(
                    "the store did not answer in time".into(),
                ))
            }
        }
    }
}

/// Tells the source zone's thread that its move was returned for `reason`, with the player's
/// character taken again for the zone when its kind keeps characters (the player handed it back
/// as it moved out).
async fn return_to_source(shared: &Arc<Shared>, o: &Outbound, reason: String) {
    let retaken = super::characters::retake(shared, o).await;
    resolve(shared, o, Resolution::Returned(reason, retaken));
}

/// Tells the source zone's thread how its move ended.
fn resolve(shared: &Shared, o: &Outbound, resolution: Resolution) {
    let cmd = SimCommand::TransferResolved {
        zone_id: o.zone_id.clone(),
        player: o.request.player,
        resolution,
    };
    if shared.pool.send(o.thread, cmd).is_err() {
        tracing::warn!(zone = %o.zone_id, player = %o.request.player, "the source zone's thread did not take a move's outcome");
    }
}
