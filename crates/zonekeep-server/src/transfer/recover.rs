//! Finishing the moves a zone's previous owner left undecided.

use zonekeep_store::TransferStatus;

use super::ledger;
use crate::host::Shared;

/// Called when `zone_id` starts on this host under `epoch`: every move out of it still pending
/// is returned (the player was in the zone's previous run, which no longer exists, so it
/// belongs to the source and reconnects there), unless the target's acceptance lands first, in
/// which case the player is the target's and a connection that comes back is sent there.
///
/// Moves *into* the zone are left alone: a pending one is settled by its source (which may be
/// admitting it into this very run), and an accepted one whose player has not arrived is
/// admitted again from the record when the player's connection arrives.
pub(crate) async fn recover(shared: &Shared, zone_id: &str, epoch: u64) {
    let Some(ledger) = ledger(shared) else { return };
    let open = match ledger.open_transfers(zone_id).await {
        Ok(open) => open,
        Err(e) => {
            tracing::warn!(zone = %zone_id, error = %e, "open transfers of a started zone not read; they are settled by their other zone");
            return;
        }
    };
    for t in open {
        if t.status != TransferStatus::Pending || t.transfer.source_zone != zone_id {
            continue;
        }
        match ledger
            .return_transfer(&t.transfer.id, zone_id, epoch, super::reclaim::RESTARTED)
            .await
        {
            Ok(settled) => {
                shared.metrics.transfer(match settled.status {
                    TransferStatus::Accepted => "recovered_accepted",
                    _ => "recovered_returned",
                });
                tracing::info!(zone = %zone_id, transfer = %t.transfer.id, status = settled.status.as_str(), "settled a move the zone's previous run left open");
            }
            Err(e) => {
                tracing::warn!(zone = %zone_id, transfer = %t.transfer.id, error = %e, "a move the zone's previous run left open was not settled");
            }
        }
    }
}
