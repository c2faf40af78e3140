//! Moves between hosts: the source host asks the target zone's owner, with a note on that host's
//! own bus subject, to admit the player (starting the zone there when it does not run yet); the
//! owner admits it, settles the record as accepted, and answers the source's host the same way. The record in
//! the store stays the truth: the source also reads it while it waits, so a lost answer costs
//! at most one read interval (25 ms), and a lost request ends as a return at the decision
//! timeout.

use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tokio::sync::{mpsc, oneshot};
use zonekeep_bus::TransferDelivery;
use zonekeep_store::{StoredTransfer, TransferLedger, TransferStatus};

use super::target::{admit_and_accept, Admitted, Decline};
use super::{ledger, DECISION_TIMEOUT};
use crate::host::Shared;

/// How often a waiting source reads the record, in case the answer was lost.
const READ_EVERY: Duration = Duration::from_millis(25);

/// What hosts say to each other about a move (the bus carries it as opaque bytes).
#[derive(Debug, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
enum Note {
    /// To the target zone's owner: admit the player of this pending transfer.
    Admit { id: String },
    /// To the source zone's owner: the target took the player.
    Accepted { id: String },
    /// To the source zone's owner: the target did not take it, for this reason.
    Refused { id: String, reason: String },
    /// To a zone's owner: another zone asks for `principal`'s character, whose lease the zone
    /// holds under `epoch`; its players of that principal give it back (see
    /// `session::character`). Not answered: the asking host reads the character's lease.
    RecallCharacter { principal: String, epoch: u64 },
}

/// A target's answer, as a waiting source hears it.
#[derive(Debug)]
pub(crate) enum Answer {
    Accepted,
    Refused(String),
}

/// The source's side: asks `host`'s zone to admit the player and waits for its answer (or the
/// record's decision). The settled record, or why the move is returned.
pub(super) async fn ask(
    shared: &Arc<Shared>,
    ledger: &Arc<dyn TransferLedger>,
    begun: &StoredTransfer,
    host: &str,
) -> Result<StoredTransfer, String> {
    let Some(bus) = shared.sim.bus.get().filter(|b| b.kind() == "nats") else {
        return Err(format!(
            "the target zone runs on host {host:?}; moving players between hosts needs the bus (start every host with --bus nats://…)"
        ));
    };
    let t = &begun.transfer;
    let (tx, mut answer) = oneshot::channel();
    shared.sim.transfers.wait_for(&t.id, tx);
    let note = Note::Admit { id: t.id.clone() };
    let sent = match serde_json::to_vec(&note) {
        Ok(bytes) => bus.send_transfer(host, &t.target_zone, bytes).await,
        Err(e) => {
            shared.sim.transfers.stop_waiting(&t.id);
            return Err(format!("the move could not be written down: {e}"));
        }
    };
    if let Err(e) = sent {
        shared.sim.transfers.stop_waiting(&t.id);
        return Err(format!("the target zone's host could not be asked: {e}"));
    }
    let mut read = tokio::time::interval(READ_EVERY);
    read.tick().await;
    // The answer comes once: after it, only the record is read.
    let mut answered = false;
    let outcome = loop {
        tokio::select! {
            a = &mut answer, if !answered => match a {
                Ok(Answer::Refused(reason)) => break Err(reason),
                // Confirmed from the record (the store is the truth).
                Ok(Answer::Accepted) | Err(_) => {
                    answered = true;
                    if let Ok(Some(r)) = ledger.transfer(&t.id).await {
                        if r.status != TransferStatus::Pending {
                            break Ok(r);
                        }
                    }
                }
            },
            _ = read.tick() => {
                if let Ok(Some(r)) = ledger.transfer(&t.id).await {
                    if r.status != TransferStatus::Pending {
                        break Ok(r);
                    }
                }
            }
        }
    };
    shared.sim.transfers.stop_waiting(&t.id);
    outcome
}

/// Serves the transfer notes the bus delivers to this host.
pub(crate) async fn serve(shared: Arc<Shared>, mut notes: mpsc::Receiver<TransferDelivery>) {
    loop {
        let delivery = tokio::select! {
            _ = shared.shutdown.cancelled() => break,
            d = notes.recv() => match d { Some(d) => d, None => break },
        };
        let note: Note = match serde_json::from_slice(&delivery.bytes) {
            Ok(n) => n,
            Err(e) => {
                tracing::warn!(from = %delivery.from, error = %e, "an unreadable transfer note was dropped");
                continue;
            }
        };
        match note {
            Note::Admit { id } => {
                let shared = Arc::clone(&shared);
                tokio::spawn(async move {
                    admit(&shared, &id, &delivery.to_zone, &delivery.from).await
                });
            }
            Note::RecallCharacter { principal, epoch } => {
                recall_here(&shared, &delivery.to_zone, &principal, epoch)
            }
            Note::Accepted { id } => shared.sim.transfers.answer(&id, Answer::Accepted),
            Note::Refused { id, reason } => {
                shared.sim.transfers.answer(&id, Answer::Refused(reason))
            }
        }
    }
}

/// Asks `host`, which owns `zone`, to have the zone give `principal`'s character back (the zone
/// holds its lease under `epoch`). Fire and forget: the asking host reads the lease.
pub(crate) async fn ask_recall(
    shared: &Shared,
    host: &str,
    zone: &str,
    principal: &str,
    epoch: u64,
) -> Result<(), String> {
    let Some(bus) = shared.sim.bus.get().filter(|b| b.kind() == "nats") else {
        return Err(format!(
            "the character is held on host {host:?}; asking another host for it needs the bus (start every host with --bus nats://…)"
        ));
    };
    let note = Note::RecallCharacter {
        principal: principal.to_owned(),
        epoch,
    };
    let bytes = serde_json::to_vec(&note).map_err(|e| e.to_string())?;
    bus.send_transfer(host, zone, bytes)
        .await
        .map_err(|e| format!("host {host:?} could not be asked: {e}"))
}

/// Another host asks for `principal`'s character from `zone`: the zone gives it back if it runs
/// here under `epoch` (a later run of it holds no lease of that epoch).
fn recall_here(shared: &Shared, zone: &str, principal: &str, epoch: u64) {
    let Some(entry) = shared
        .registry
        .get(zone)
        .filter(|e| e.epoch.load(std::sync::atomic::Ordering::Acquire) == epoch)
    else {
        return;
    };
    let (done, _settled) = oneshot::channel();
    let cmd = crate::sim::SimCommand::RecallCharacter {
        zone_id: zone.to_owned(),
        principal: principal.to_owned(),
        done,
    };
    if shared.pool.send(entry.thread, cmd).is_err() {
        tracing::warn!(
            zone,
            "a character recall was not queued: the zone's thread is busy; the asking host retries"
        );
    }
}

/// The target's side: admits the player of pending transfer `id` into `zone_id` here and
/// answers the source's host, `source_host`.
async fn admit(shared: &Arc<Shared>, id: &str, zone_id: &str, source_host: &str) {
    let Some(ledger) = ledger(shared) else { return };
    let record = match ledger.transfer(id).await {
        Ok(Some(r)) if r.status == TransferStatus::Pending && r.transfer.target_zone == zone_id => {
            r
        }
        // Decided already (the source timed out), or not for this zone: nothing to do.
        Ok(_) => return,
        Err(e) => {
            tracing::warn!(transfer = %id, error = %e, "a move to this host was not read; its source returns it");
            return;
        }
    };
    let mut admitted: Option<Admitted> = None;
    let decided = tokio::time::timeout(
        DECISION_TIMEOUT,
        admit_and_accept(shared, &ledger, &record, &mut admitted),
    )
    .await
    .unwrap_or_else(|_| {
        Err(Decline::Refused(
            "the target zone did not answer in time".into(),
        ))
    });
    let note = match decided {
        Ok(settled) if settled.status == TransferStatus::Accepted => {
            super::chaos::at(super::chaos::Step::Accepted, id).await;
            Note::Accepted { id: id.to_owned() }
        }
        Ok(settled) => {
            if let Some(a) = admitted {
                super::target::cancel(shared, zone_id, a);
            }
            Note::Refused {
                id: id.to_owned(),
                reason: settled
                    .reason
                    .unwrap_or_else(|| "the move was returned".into()),
            }
        }
        Err(decline) => {
            if let Some(a) = admitted {
                super::target::cancel(shared, zone_id, a);
            }
            Note::Refused {
                id: id.to_owned(),
                reason: decline.to_string(),
            }
        }
    };
    let Some(bus) = shared.sim.bus.get() else {
        return;
    };
    let sent = match serde_json::to_vec(&note) {
        Ok(bytes) => {
            bus.send_transfer(source_host, &record.transfer.source_zone, bytes)
                .await
        }
        Err(_) => return,
    };
    if let Err(e) = sent {
        tracing::warn!(transfer = %id, error = %e, "a move's answer was not sent; its source reads the record");
    }
}
