//! The target's side of a move: admitting the player (starting the zone here when it is not
//! running, and taking its character's lease first for a kind that keeps characters), settling
//! the record as accepted, and the moved player's connection arriving.

use std::sync::Arc;

use serde_json::Value;
use tokio::sync::oneshot;
use zonekeep_core::PlayerId;
use zonekeep_store::{StoredTransfer, TransferLedger, TransferStatus, ZoneLocation};

use super::{ledger, DECISION_TIMEOUT};
use crate::error::SessionError;
use crate::fleet::route::Route;
use crate::host::{Routed, Shared};
use crate::net::conn::ConnHandle;
use crate::session::{enter_zone, give_back_character, spend_ticket};
use crate::sim::{JoinFailure, Joined, SimCommand};
use crate::ticket::VerifiedTicket;

/// A player a zone of this host admitted for a move still being decided.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Admitted {
    thread: usize,
    player: PlayerId,
}

/// Has the target take the player and settles the record: the settled record (accepted, or
/// returned when the source's return landed first), or why the target did not take it. A target
/// owned by another host is asked through the bus.
pub(super) async fn decide(
    shared: &Arc<Shared>,
    ledger: &Arc<dyn TransferLedger>,
    begun: &StoredTransfer,
    admitted: &mut Option<Admitted>,
) -> Result<StoredTransfer, String> {
    match admit_and_accept(shared, ledger, begun, admitted).await {
        Ok(settled) => Ok(settled),
        Err(Decline::Elsewhere(host)) => super::remote::ask(shared, ledger, begun, &host).await,
        Err(Decline::Refused(reason)) => Err(reason),
    }
}

/// Why a zone of this host did not take a moved player.
pub(super) enum Decline {
    /// The target zone is owned by this other host.
    Elsewhere(String),
    /// It refused, or could not be started or placed, for this reason.
    Refused(String),
}

impl std::fmt::Display for Decline {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Decline::Elsewhere(host) => write!(f, "the target zone moved to host {host:?}"),
            Decline::Refused(reason) => f.write_str(reason),
        }
    }
}

/// Admits the player of `record` into its target zone on this host (starting the zone here when
/// the fleet places it here) and settles the record as accepted under the zone's epoch.
pub(super) async fn admit_and_accept(
    shared: &Arc<Shared>,
    ledger: &Arc<dyn TransferLedger>,
    record: &StoredTransfer,
    admitted: &mut Option<Admitted>,
) -> Result<StoredTransfer, Decline> {
    let t = &record.transfer;
    let (kind, params) = kind_and_params(shared, record);
    let listed = match shared.fleet() {
        Some(fleet) if shared.registry.get(&t.target_zone).is_none() => {
            match fleet.route(&t.target_zone, &kind, &params).await {
                Ok(Route::Here(listed)) => listed,
                Ok(Route::Owner { host, .. }) => return Err(Decline::Elsewhere(host)),
                Err(e) => {
                    return Err(Decline::Refused(format!(
                        "the target zone cannot be placed: {e}"
                    )))
                }
            }
        }
        _ => None,
    };
    // The admission runs on its own: a move decided meanwhile (the bound passed) must not leave
    // a character's lease taken, or a player admitted, for nobody. It undoes what it did instead.
    let (tx, rx) = oneshot::channel();
    let admitting = {
        let shared = Arc::clone(shared);
        let record = record.clone();
        async move {
            let admitted = admit_here(&shared, &record, listed, kind, params).await;
            if let Err(Ok((player, _, thread))) = tx.send(admitted) {
                let zone = &record.transfer.target_zone;
                cancel(&shared, zone, Admitted { thread, player });
            }
        }
    };
    tokio::spawn(admitting);
    let (player, epoch, thread) = rx
        .await
        .map_err(|_| Decline::Refused("the target zone's admission ended".into()))?
        .map_err(|f| Decline::Refused(f.to_string()))?;
    *admitted = Some(Admitted { thread, player });
    super::chaos::at(super::chaos::Step::Admitted, &t.id).await;
    super::worker::write_within(DECISION_TIMEOUT, || ledger.accept_transfer(&t.id, epoch))
        .await
        .map_err(|e| Decline::Refused(format!("the target's acceptance was not recorded: {e}")))
}

/// The kind and params a target zone that is not running yet is created with: the move's
/// claims may name them (`kind`, `params`); else it is of the source zone's kind (a door of a
/// dungeon leads to more dungeon), or the host's default kind when the source is not here, with
/// that kind's default params.
fn kind_and_params(shared: &Shared, t: &StoredTransfer) -> (String, Value) {
    let claims: Value = serde_json::from_str(&t.transfer.claims).unwrap_or(Value::Null);
    let source_kind = || {
        shared.registry.get(&t.transfer.source_zone).map(|e| {
            e.summary
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .kind
                .clone()
        })
    };
    let kind = claims
        .get("kind")
        .and_then(Value::as_str)
        .map(str::to_owned)
        .or_else(source_kind)
        .unwrap_or_else(|| shared.default_kind.clone());
    let params = claims.get("params").cloned().unwrap_or_else(|| {
        shared
            .sim
            .specs
            .get(&kind)
            .map_or(Value::Null, |s| s.default_params.clone())
    });
    (kind, params)
}

/// Admits the moved player into the target zone on this host, starting it when needed:
/// `(player, the zone's owner epoch, its thread)`.
async fn admit_here(
    shared: &Arc<Shared>,
    record: &StoredTransfer,
    listed: Option<ZoneLocation>,
    kind: String,
    params: Value,
) -> Result<(PlayerId, u64, usize), JoinFailure> {
    let zone_id = record.transfer.target_zone.clone();
    // A zone the directory knows runs as the kind and params it was created with.
    let (kind, params) = match listed {
        Some(l) => (l.kind, l.params),
        None => (kind, params),
    };
    let Routed {
        entry,
        create,
        arrival,
    } = shared.route_join(&zone_id, Some(&kind), Some(params))?;
    let principal = record.transfer.principal.clone();
    let (character, create) =
        super::characters::take_for_arrival(shared, &entry, create, &kind, &principal, false)
            .await?;
    let holds_character = character.is_some();
    let (tx, rx) = oneshot::channel();
    let record = record.clone();
    let entered = enter_zone(
        shared,
        &entry,
        create,
        arrival,
        false,
        JoinFailure::Unavailable,
        |create| SimCommand::TransferIn {
            zone_id,
            create,
            record,
            character,
            reply: tx,
        },
    )
    .await;
    let admitted = match entered {
        Ok(()) => rx
            .await
            .map_err(|_| JoinFailure::Unavailable("the zone's thread is gone".into()))
            .and_then(|r| r),
        Err(e) => Err(e),
    };
    match admitted {
        Ok((player, epoch)) => Ok((player, epoch, entry.thread)),
        Err(e) => {
            // A refusal handed the character back in the zone; one that never reached the zone
            // gives the lease up here (refused as lost, harmlessly, when the zone had it).
            if holds_character && !matches!(e, JoinFailure::Full | JoinFailure::Refused(_)) {
                give_back_character(shared, &entry, &principal);
            }
            Err(e)
        }
    }
}

/// Undoes an admission whose move was returned after all.
pub(super) fn cancel(shared: &Shared, zone_id: &str, a: Admitted) {
    let cmd = SimCommand::TransferCancel {
        zone_id: zone_id.to_owned(),
        player: a.player,
    };
    if shared.pool.send(a.thread, cmd).is_err() {
        tracing::warn!(zone = %zone_id, player = %a.player, "a returned move's admission was not undone: the zone's thread did not take it");
    }
}

/// A moved player's connection arrives with its transfer credential: checks the credential
/// against the record, spends it, and attaches the connection to the player the target zone
/// admitted (admitting it again from the record when the zone restarted since). Answers the
/// zone's thread and the principal, as a join does.
pub(crate) async fn arrival(
    shared: &Arc<Shared>,
    zone_id: &str,
    ticket: VerifiedTicket,
    listed: Option<ZoneLocation>,
    version: u32,
    conn: &ConnHandle,
    reply: oneshot::Sender<Result<Joined, JoinFailure>>,
) -> Result<(usize, String), SessionError> {
    let Some(claim) = ticket.transfer().cloned() else {
        return Err(JoinFailure::Unavailable("not a transfer credential".into()).into());
    };
    let Some(ledger) = ledger(shared) else {
        return Err(JoinFailure::Unavailable("this host keeps no transfer records".into()).into());
    };
    let record = match ledger.transfer(&claim.id).await {
        Ok(Some(t)) => t,
        Ok(None) => {
            return Err(
                JoinFailure::Unavailable(format!("no transfer {:?} is recorded", claim.id)).into(),
            )
        }
        Err(e) => {
            return Err(JoinFailure::StoreUnreachable(format!("transfer records: {e}")).into())
        }
    };
    let t = &record.transfer;
    let matches = record.status == TransferStatus::Accepted
        && t.target_zone == zone_id
        && t.principal == ticket.sub.as_str()
        && t.source_zone == claim.from
        && t.player == claim.player;
    if !matches {
        return Err(JoinFailure::Unavailable(
            "this transfer credential does not admit this player to this zone".into(),
        )
        .into());
    }
    spend_ticket(shared, &ticket).await?;
    let sub = ticket.sub.as_str().to_owned();
    let (kind, params) = match listed {
        Some(l) => (Some(l.kind), Some(l.params)),
        None => {
            let (k, p) = kind_and_params(shared, &record);
            (Some(k), Some(p))
        }
    };
    let Routed {
        entry,
        create,
        arrival,
    } = shared.route_join(zone_id, kind.as_deref(), params)?;
    let resolved_kind = kind.as_deref().unwrap_or(&shared.default_kind);
    // A kind with characters: the player has its character here already, unless the zone
    // restarted without it (or its admission ended): then it is taken as at the first admission.
    let (character, create) = super::characters::take_for_arrival(
        shared,
        &entry,
        create,
        resolved_kind,
        ticket.sub.as_str(),
        true,
    )
    .await?;
    let holds_character = character.is_some();
    let principal = ticket.sub;
    let entered = enter_zone(
        shared,
        &entry,
        create,
        arrival,
        false,
        JoinFailure::Unavailable,
        |create| SimCommand::Arrive {
            zone_id: zone_id.to_owned(),
            create,
            record,
            principal,
            version,
            conn: conn.clone(),
            character,
            reply,
        },
    )
    .await;
    if let Err(e) = entered {
        if holds_character {
            give_back_character(shared, &entry, &sub);
        }
        return Err(e.into());
    }
    Ok((entry.thread, sub))
}
