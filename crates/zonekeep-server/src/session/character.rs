//! A joining player's character: the lease taken in the store for the zone it joins, after the
//! zone that held it (on this host) gave it back. A move takes it the same way, through
//! [`acquire`]: the target's host for the zone the player arrives in (the zone it left handed
//! the character back as it moved out, and a recall waits until that release is settled), and
//! the source's host again for a move that came back (`crate::transfer`).
//!
//! The lease is the zone's under its owner epoch, so the zone must be running first (a join that
//! starts it starts it on its own, then acquires). A zone of this host that holds the character —
//! another zone, or this same zone for an older connection of the player — is asked to give it
//! back ([`SimCommand::RecallCharacter`]): its players of that principal are kicked with
//! CHARACTER_MOVED and the character's release is settled in the store before the acquisition is
//! asked again. A zone of another live host is asked the same over the bus (a host note), and the
//! lease is read again until it is free or [`REMOTE_RECALL_WAIT`] passes. A holder whose host is
//! dead by the fleet's rules loses its zone to the fleet's failover (claimed here or by the
//! failover winner), which makes the lease stale: the character is then taken with its last
//! committed state. A holder that cannot be asked in time (its host paused, partitioned, or
//! without a bus) refuses the join with CHARACTER_ELSEWHERE, a retry hint.

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::oneshot;
use zonekeep_store::{CharacterAcquire, StoreError};

use crate::host::Shared;
use crate::persist::CharacterJob;
use crate::sim::{wait_running, JoinFailure, SimCommand, ZoneCreate, ZoneEntry};

/// How long a zone of this host may take to give a character back.
const RECALL_TIMEOUT: Duration = Duration::from_secs(10);

/// How long a join waits for a zone of another host to give a character back before it is told
/// to retry (the client's retry asks again).
const REMOTE_RECALL_WAIT: Duration = Duration::from_secs(3);

/// How often the lease is read while another host's zone gives the character back.
const REMOTE_READ_EVERY: Duration = Duration::from_millis(25);

/// Recalls and acquisitions one join makes at most before it gives up with a retry hint (each
/// recall frees the character; only a holder that takes it again in between costs another).
const ATTEMPTS: usize = 3;

/// The kind of the zone of `entry` that a join or a move enters: the one it is created as when
/// `create` (this entry's start) is still to be made, else the running zone's own — `fallback`
/// (the kind asked for) only while another start of it has not finished.
pub(crate) fn zone_kind(entry: &ZoneEntry, create: Option<&ZoneCreate>, fallback: &str) -> String {
    if let Some(c) = create {
        return c.kind.clone();
    }
    let running = entry
        .summary
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .kind
        .clone();
    if running.is_empty() {
        fallback.to_owned()
    } else {
        running
    }
}

/// One lock per principal whose character this host is acquiring: two joins of one player on this
/// host (or a join and a move's arrival) take turns, so neither recalls the character from the
/// other's zone half-way through the other's acquisition, and a delayed acquisition starts only
/// once the one before it settled. Across hosts the store's transactions order them. An entry lives
/// only while someone holds or waits for it.
#[derive(Debug, Default)]
pub(crate) struct PrincipalLocks {
    held: std::sync::Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
}

/// A held [`PrincipalLocks`] entry; dropping it lets the next acquisition of the principal go.
pub(crate) struct PrincipalGuard<'a> {
    locks: &'a PrincipalLocks,
    principal: String,
    guard: Option<tokio::sync::OwnedMutexGuard<()>>,
}

impl PrincipalLocks {
    fn map(&self) -> std::sync::MutexGuard<'_, HashMap<String, Arc<tokio::sync::Mutex<()>>>> {
        // Entries are inserted and removed in single statements: a poisoned map is whole.
        self.held.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Waits for `principal`'s turn.
    pub(crate) async fn lock(&self, principal: &str) -> PrincipalGuard<'_> {
        let entry = Arc::clone(self.map().entry(principal.to_owned()).or_default());
        let guard = entry.lock_owned().await;
        PrincipalGuard {
            locks: self,
            principal: principal.to_owned(),
            guard: Some(guard),
        }
    }

    /// Principals with an acquisition in progress or waiting.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.map().len()
    }
}

impl Drop for PrincipalGuard<'_> {
    fn drop(&mut self) {
        let mut map = self.locks.map();
        drop(self.guard.take());
        // Only the map's own reference left: nobody holds or waits for this principal.
        if map
            .get(&self.principal)
            .is_some_and(|m| Arc::strong_count(m) == 1)
        {
            map.remove(&self.principal);
        }
    }
}

/// Whether zones of `kind` take their players' characters.
pub(crate) fn kind_keeps_characters(shared: &Shared, kind: &str) -> bool {
    shared.sim.specs.get(kind).is_some_and(|s| {
        crate::code::keeps_characters(shared.sim.code.as_ref(), kind, s.config.characters)
    })
}

/// Takes `principal`'s character lease for the running zone of `entry` and answers the
/// character's bytes (empty for a new one).
pub(crate) async fn acquire(
    shared: &Arc<Shared>,
    entry: &Arc<ZoneEntry>,
    principal: &str,
) -> Result<Vec<u8>, JoinFailure> {
    let Some(persist) = shared.sim.persist.as_ref() else {
        return Err(JoinFailure::Unavailable(
            "this host keeps no characters".into(),
        ));
    };
    wait_running(entry)
        .await
        .map_err(JoinFailure::Unavailable)?;
    let _turn = shared.character_locks.lock(principal).await;
    let zone = entry.zone_id.as_str();
    let epoch = entry.epoch.load(Ordering::Acquire);
    let metrics = &persist.metrics().characters;
    // An older connection of the player in this very zone gives its character back first.
    recall(shared, entry, principal).await?;
    for _ in 0..ATTEMPTS {
        let asked = persist
            .store()
            .characters
            .acquire_character(principal, zone, epoch)
            .await;
        match asked {
            Ok(CharacterAcquire::Granted { character, from }) => {
                metrics.acquire(if from.is_some() {
                    "taken_stale"
                } else {
                    "granted"
                });
                if let Some((stale, stale_epoch)) = from {
                    tracing::info!(zone, stale_zone = %stale, stale_epoch, "a character's stale lease was taken over with its last committed state");
                }
                return Ok(character.data);
            }
            Ok(CharacterAcquire::Held {
                zone: holder,
                epoch: held_under,
            }) => {
                let local = shared
                    .registry
                    .get(&holder)
                    .filter(|e| e.epoch.load(Ordering::Acquire) == held_under);
                match local {
                    Some(holder_entry) => recall(shared, &holder_entry, principal).await?,
                    None => {
                        if let Err(why) =
                            recall_elsewhere(shared, &holder, held_under, principal).await
                        {
                            metrics.acquire("elsewhere");
                            return Err(JoinFailure::CharacterElsewhere(format!(
                                "your character is in zone {holder:?}, which could not give it back yet ({why}); retry shortly"
                            )));
                        }
                    }
                }
                metrics.acquire("recalled");
            }
            Err(e @ StoreError::Fenced { .. }) => {
                // This host no longer owns the zone: the client resumes at its new owner.
                tracing::warn!(zone, error = %e, "character not acquired: the zone was claimed by another owner");
                return Err(JoinFailure::Fenced);
            }
            Err(e) => return Err(JoinFailure::StoreUnreachable(format!("characters: {e}"))),
        }
    }
    metrics.acquire("elsewhere");
    Err(JoinFailure::CharacterElsewhere(
        "your character kept being taken by another zone; retry shortly".into(),
    ))
}

/// Whether the running zone of `entry` holds `principal`'s character's lease under its current
/// owner epoch (a player of it there has the character: a moved player's connection arriving
/// after its admission, or after a restart that restored it with the zone).
pub(crate) async fn held_here(
    shared: &Shared,
    entry: &ZoneEntry,
    principal: &str,
) -> Result<bool, JoinFailure> {
    let Some(persist) = shared.sim.persist.as_ref() else {
        return Ok(false);
    };
    let epoch = entry.epoch.load(Ordering::Acquire);
    let held = persist
        .store()
        .characters
        .load_character(principal)
        .await
        .map_err(|e| JoinFailure::StoreUnreachable(format!("characters: {e}")))?;
    Ok(held.and_then(|c| c.holder) == Some((entry.zone_id.clone(), epoch)))
}

/// Asks the zone of `entry` (on this host) to give `principal`'s character back, and waits until
/// the release is settled in the store.
async fn recall(shared: &Shared, entry: &ZoneEntry, principal: &str) -> Result<(), JoinFailure> {
    let (done, settled) = oneshot::channel();
    let cmd = SimCommand::RecallCharacter {
        zone_id: entry.zone_id.clone(),
        principal: principal.to_owned(),
        done,
    };
    if shared.pool.send(entry.thread, cmd).is_err() {
        return Err(JoinFailure::Busy);
    }
    match tokio::time::timeout(RECALL_TIMEOUT, settled).await {
        // Settled, or the zone is not on its thread any more (it gave everything back as it left).
        Ok(Ok(_)) | Ok(Err(_)) => Ok(()),
        Err(_) => Err(JoinFailure::CharacterElsewhere(format!(
            "zone {:?} did not give your character back in time; retry shortly",
            entry.zone_id
        ))),
    }
}

/// Gets `principal`'s character out of `zone`, which holds its lease under `epoch` and does not
/// run here: its live owner is asked over the bus, and the lease read until it is free (or held
/// under another epoch, which the caller's next acquisition sorts out); a dead owner's zone is
/// handed to the fleet's failover, whose claim makes the lease stale. `Err` says why the
/// character is still out of reach.
async fn recall_elsewhere(
    shared: &Arc<Shared>,
    zone: &str,
    epoch: u64,
    principal: &str,
) -> Result<(), String> {
    let Some(fleet) = shared.fleet() else {
        return Err("this host is in no fleet".into());
    };
    let Some(persist) = shared.sim.persist.as_ref() else {
        return Err("this host keeps no characters".into());
    };
    let located = crate::fleet::query(
        &fleet.metrics,
        "locate",
        fleet.directory.locate(zone, fleet.timing),
    )
    .await
    .map_err(|e| format!("fleet directory: {e}"))?;
    let Some(loc) = located else {
        return Err("the zone is not in the fleet's directory".into());
    };
    if loc.epoch > epoch {
        // Claimed since: the lease is stale already.
        return Ok(());
    }
    match &loc.owner {
        Some(owner) if loc.owner_alive && *owner != fleet.host_id => {
            crate::transfer::ask_recall(shared, owner, zone, principal, epoch).await?;
            let deadline = tokio::time::Instant::now() + REMOTE_RECALL_WAIT;
            while tokio::time::Instant::now() < deadline {
                tokio::time::sleep(REMOTE_READ_EVERY).await;
                let held = persist
                    .store()
                    .characters
                    .load_character(principal)
                    .await
                    .map_err(|e| e.to_string())?;
                if held.and_then(|c| c.holder) != Some((zone.to_owned(), epoch)) {
                    return Ok(());
                }
            }
            Err(format!("host {owner:?} did not answer in time"))
        }
        // This host owns the zone but does not run it (it restarted since): starting it claims a
        // new epoch, which makes the old run's lease stale.
        Some(owner) if *owner == fleet.host_id => start_to_fence(shared, zone, &loc).await,
        // The owner is dead (or gone): the fleet's failover takes the zone, which fences it.
        _ => match fleet.route(zone, &loc.kind, &loc.params).await {
            Ok(crate::fleet::route::Route::Owner { .. }) => Ok(()),
            Ok(crate::fleet::route::Route::Here(_)) => start_to_fence(shared, zone, &loc).await,
            Err(e) => Err(format!("fleet directory: {e}")),
        },
    }
}

/// Starts `zone` here (its claim raises the zone's fence past every older run's epoch).
async fn start_to_fence(
    shared: &Shared,
    zone: &str,
    loc: &zonekeep_store::ZoneLocation,
) -> Result<(), String> {
    match shared
        .start_zone(zone, &loc.kind, loc.params.clone(), None, false)
        .await
    {
        Ok(()) | Err(crate::sim::AdminFailure::Exists(_)) => Ok(()),
        Err(e) => Err(format!("starting its zone here: {e}")),
    }
}

/// A join (or a move's arrival) that took the character's lease did not reach its zone: the
/// lease is given up again, with the character as the store holds it.
pub(crate) fn give_back(shared: &Shared, entry: &ZoneEntry, principal: &str) {
    let Some(persist) = shared.sim.persist.as_ref() else {
        return;
    };
    let job = CharacterJob {
        zone: entry.zone_id.clone(),
        epoch: entry.epoch.load(Ordering::Acquire),
        principal: principal.to_owned(),
        data: None,
        release: true,
        done: None,
    };
    if persist.characters().try_send(job).is_err() {
        tracing::warn!(zone = %entry.zone_id, "the character worker is full: a refused join's character lease stays with the zone until its next owner");
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[tokio::test]
    async fn acquisitions_of_one_principal_take_turns_and_leave_nothing_behind() {
        let locks = Arc::new(PrincipalLocks::default());
        let first = locks.lock("ann").await;
        // Another principal is not held up.
        drop(locks.lock("bob").await);
        let (tx, mut rx) = tokio::sync::mpsc::channel(1);
        let waiter = {
            let locks = Arc::clone(&locks);
            tokio::spawn(async move {
                let _second = locks.lock("ann").await;
                tx.send(()).await.unwrap();
            })
        };
        tokio::task::yield_now().await;
        assert!(rx.try_recv().is_err(), "the second waits for the first");
        drop(first);
        rx.recv().await.unwrap();
        waiter.await.unwrap();
        assert_eq!(locks.len(), 0, "no entry outlives its acquisitions");
    }
}
