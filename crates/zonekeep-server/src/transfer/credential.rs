//! The Transfer frame a moved player's connections get: where the target zone is and the
//! credential that admits the player there once (PROTOCOL.md §5.3.2, §8).

use bytes::Bytes;
use zonekeep_core::Principal;
use zonekeep_protocol::messages::{ServerMessage, Transfer};
use zonekeep_store::StoredTransfer;

use crate::fleet::route::Route;
use crate::host::Shared;
use crate::ticket::{mint_transfer_credential, unix_now, TransferClaim};

/// Builds the Transfer frame of an accepted move: the target's URL at its owner and a fresh
/// credential for it.
pub(super) async fn transfer_frame(shared: &Shared, t: &StoredTransfer) -> Result<Bytes, String> {
    let target = &t.transfer.target_zone;
    let url = zone_url(shared, target).await?;
    let key = shared
        .verifier
        .keys()
        .primary()
        .ok_or("this host has no active ticket key to sign a transfer credential")?;
    let principal = Principal::new(t.transfer.principal.clone());
    let ticket = mint_transfer_credential(
        key,
        &principal,
        target,
        TransferClaim {
            id: t.transfer.id.clone(),
            from: t.transfer.source_zone.clone(),
            player: t.transfer.player,
        },
        unix_now(),
    )
    .map_err(|e| format!("the transfer credential could not be signed: {e}"))?;
    let msg = ServerMessage::Transfer(Transfer {
        zone_id: target.clone(),
        ticket,
        url,
    });
    msg.to_bytes(None)
        .map(Bytes::from)
        .map_err(|e| format!("the Transfer frame does not encode: {e}"))
}

/// The zone's WebSocket URL at its owner: this host's when it runs the zone here, otherwise the
/// owner's the directory names.
async fn zone_url(shared: &Shared, zone_id: &str) -> Result<String, String> {
    let here = || {
        shared
            .base_url
            .get()
            .map(|b| format!("{b}/zones/{zone_id}"))
            .ok_or_else(|| "this host does not know its own URL yet".to_owned())
    };
    if shared.registry.get(zone_id).is_some() {
        return here();
    }
    match shared.fleet() {
        // The zone exists by now (it accepted the player), so the kind and params are unused.
        Some(fleet) => match fleet
            .route(zone_id, &shared.default_kind, &serde_json::Value::Null)
            .await
        {
            Ok(Route::Owner { url, .. }) => Ok(format!("{url}/zones/{zone_id}")),
            Ok(Route::Here(_)) => here(),
            Err(e) => Err(format!("the fleet directory did not answer: {e}")),
        },
        None => here(),
    }
}
