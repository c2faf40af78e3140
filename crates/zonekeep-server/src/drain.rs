//! Graceful shutdown: no acknowledged state is lost.
//!
//! A client trusts an input once a Delta acknowledged it, and a client kicked
//! with SHUTTING_DOWN or ZONE_MOVED reconnects at once (to this host
//! restarting, or to another). So the order, per zone, is: freeze it (it stops
//! ticking, so nothing more is acknowledged, and its final save and last facts
//! are queued), wait until the store confirms that save, hand it to an heir in
//! the directory, and only then kick its clients. The zone's facts need not be
//! committed before the kick: those still in flight are in the final save and
//! are re-sent, under the same keys, by whichever host restores it.
//!
//! Zones are handed over a few at a time ([`HANDOVERS_AT_ONCE`]), each frozen
//! only when its turn comes: a zone's players see the game stand still only
//! for their own zone's save and move, never for a queue of every zone's
//! saves, and the zones waiting for their turn keep ticking. Zones still
//! running when half the bound has passed are frozen all at once.
//!
//! One deadline (`shutdown_timeout_ms`, computed once at SIGTERM) bounds the
//! whole shutdown, from the signal to the exit: every phase — leaving the
//! fleet included — gets what is left of it, and the phase that runs into it
//! is logged. No store call is waited for past it, however slow the store. A final save that was refused or not confirmed by the
//! deadline is logged at ERROR and reported, so the process exits non-zero.

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;
use tokio_util::task::TaskTracker;

use crate::host::Shared;
use crate::persist::FinalSave;
use crate::sim::{FrozenZone, SimCommand};
use zonekeep_fleet::failover::rendezvous;

/// What a graceful shutdown left undone.
#[derive(Debug, Default)]
pub(crate) struct DrainReport {
    /// Zones whose final save is not durable, sorted.
    pub unsaved: Vec<String>,
    /// Simulation threads that did not freeze their zones in time (their
    /// zones were saved, if at all, without confirmation).
    pub unfrozen_threads: usize,
}

impl DrainReport {
    /// Whether every zone's acknowledged state is known to be durable.
    pub fn is_complete(&self) -> bool {
        self.unsaved.is_empty() && self.unfrozen_threads == 0
    }
}

/// Save writes allowed in flight during a drain beyond the normal cap (the final saves of every
/// zone are written at once, and each zone's players wait for theirs).
const DRAIN_EXTRA_WRITES: usize = 4;

/// Most of the bound kept for telling clients (see `Deadline::saves_by`).
const TELL_CLIENTS_MAX: Duration = Duration::from_secs(1);

/// Zones frozen, saved and handed over at once while the drain goes zone by zone: the normal
/// write cap plus [`DRAIN_EXTRA_WRITES`], so each zone's final save finds a writer free.
const HANDOVERS_AT_ONCE: usize = 4;

/// The one deadline every phase shares.
struct Deadline {
    at: Instant,
    /// When waiting for final saves stops: a quarter of the bound (at most
    /// [`TELL_CLIENTS_MAX`]) before `at`, kept for the Kicks to be written.
    saves_by: Instant,
    /// When the drain stops freezing zones one by one and freezes the rest at
    /// once: half the bound.
    one_by_one_until: Instant,
}

impl Deadline {
    /// A deadline `bound` from now.
    fn new(bound: Duration) -> Self {
        let now = Instant::now();
        let at = now + bound;
        Deadline {
            at,
            saves_by: at - (bound / 4).min(TELL_CLIENTS_MAX),
            one_by_one_until: now + bound / 2,
        }
    }

    fn left(&self) -> Duration {
        self.at.saturating_duration_since(Instant::now())
    }

    /// Log the start of `phase` with the time left for it and every later one.
    fn begin(&self, phase: &'static str) {
        let left_ms = u64::try_from(self.left().as_millis()).unwrap_or(u64::MAX);
        tracing::info!(phase, left_ms, "shutting down");
    }

    /// Note that `phase` did not finish by the deadline. Logged as a warning:
    /// what it costs (a lost save) is logged at ERROR where it happens.
    fn missed(&self, phase: &'static str) {
        tracing::warn!(phase, "shutdown deadline reached");
    }
}

/// Stop admitting (the accept loop has stopped), freeze the zones, confirm
/// their final saves, kick each zone's clients once its save is durable, then
/// close the remaining sessions, commit what facts can be, stop the
/// simulation threads and leave the fleet — all within `shutdown_timeout_ms`.
pub(crate) async fn shutdown_host(shared: &Arc<Shared>, conns: &TaskTracker) -> DrainReport {
    let deadline = Deadline::new(Duration::from_millis(shared.config.shutdown_timeout_ms));
    // New joins and zone starts are refused from here; attached sessions stay.
    shared.shutdown.cancel();
    shared.sessions.close();
    if let Some(fleet) = shared.fleet() {
        // Other hosts stop choosing this one for placement, failover and their own drains. Told
        // alongside the freeze, not before it: a slow store must not eat the shutdown's bound.
        let fleet = std::sync::Arc::clone(fleet);
        let at = deadline.at;
        tokio::spawn(async move {
            let _ = tokio::time::timeout_at(at, fleet.start_draining()).await;
        });
    }

    if let Some(p) = &shared.sim.persist {
        p.storage().widen_for_drain(DRAIN_EXTRA_WRITES);
    }
    let began = Instant::now();
    let heirs = heirs(shared).await;
    deadline.begin("zone by zone");
    let (mut unsaved, mut timed_out) = one_by_one(shared, &heirs, &deadline, began).await;

    // Zones the one-by-one pass did not reach in time (or that started meanwhile).
    deadline.begin("freeze");
    let (frozen, unfrozen_threads) = freeze(shared, &deadline).await;
    if unfrozen_threads > 0 {
        deadline.missed("freeze");
    }
    tracing::info!(zones = frozen.len(), "remaining zones frozen at once");
    deadline.begin("final saves");
    let outcomes = futures_util::future::join_all(
        frozen
            .into_iter()
            .map(|z| hand_over_frozen(shared, z, &heirs, &deadline, began)),
    )
    .await;
    note_outcomes(outcomes, &mut unsaved, &mut timed_out);
    if timed_out {
        deadline.missed("final saves");
    }

    // Sessions not attached to a zone (a handshake in progress), and clients of
    // zones that could not be frozen, are told now.
    deadline.begin("closing connections");
    shared.sessions_end.cancel();
    if tokio::time::timeout_at(deadline.at, conns.wait())
        .await
        .is_err()
        || tokio::time::timeout_at(deadline.at, shared.sessions.wait())
            .await
            .is_err()
    {
        deadline.missed("closing connections");
    }

    deadline.begin("stopping zones");
    let s = shared.clone();
    let left = deadline.left();
    if !matches!(
        tokio::task::spawn_blocking(move || s.pool.shutdown(left)).await,
        Ok(true)
    ) {
        deadline.missed("stopping zones");
    }

    if let Some(p) = &shared.sim.persist {
        deadline.begin("committing facts");
        let done = p.shutdown(deadline.at).await;
        // Zones that were never frozen were saved (or not) by their thread's stop.
        unsaved.extend(done.saves.unsaved);
        if done.facts_abandoned > 0 {
            deadline.missed("committing facts");
        }
    }
    if let Some(fleet) = shared.fleet() {
        // The final saves are durable (or given up on): other hosts may take the zones now. A
        // store too slow to record that within the bound does not hold the exit: the others
        // take the zones once this host's heartbeat is silent for the takeover bound.
        deadline.begin("leaving the fleet");
        if tokio::time::timeout_at(deadline.at, fleet.leave())
            .await
            .is_err()
        {
            deadline.missed("leaving the fleet");
        }
    }
    unsaved.sort();
    unsaved.dedup();
    let report = DrainReport {
        unsaved,
        unfrozen_threads,
    };
    if report.is_complete() {
        tracing::info!("shutdown complete");
    } else {
        tracing::error!(unsaved = ?report.unsaved, unfrozen_threads, "shutdown complete, but acknowledged state may be lost");
    }
    report
}

/// Ask every simulation thread to freeze its zones; returns the frozen zones
/// and how many threads did not answer by the deadline.
async fn freeze(shared: &Arc<Shared>, deadline: &Deadline) -> (Vec<FrozenZone>, usize) {
    let mut replies = Vec::new();
    let mut missing = 0;
    for thread in 0..shared.pool.threads() {
        let (tx, rx) = tokio::sync::oneshot::channel();
        if send(
            shared,
            thread,
            SimCommand::Freeze { reply: tx },
            deadline.left(),
        )
        .await
        {
            replies.push(rx);
        } else {
            missing += 1;
        }
    }
    let mut frozen = Vec::new();
    for rx in replies {
        match tokio::time::timeout_at(deadline.at, rx).await {
            Ok(Ok(zones)) => frozen.extend(zones),
            _ => missing += 1,
        }
    }
    (frozen, missing)
}

/// Freezes, saves, hands over and releases the running zones [`HANDOVERS_AT_ONCE`] at a time,
/// each frozen only when its turn comes, until half the bound has passed. Returns the zones
/// whose final save is not durable and whether a save was still unconfirmed at the deadline.
async fn one_by_one(
    shared: &Arc<Shared>,
    heirs: &[String],
    deadline: &Deadline,
    began: Instant,
) -> (Vec<String>, bool) {
    use futures_util::StreamExt;
    let zones: Vec<(String, usize)> = shared
        .registry
        .lock()
        .values()
        .map(|e| (e.zone_id.clone(), e.thread))
        .collect();
    let outcomes: Vec<Option<(String, Durable)>> = futures_util::stream::iter(zones)
        .map(|(zone_id, thread)| async move {
            if Instant::now() >= deadline.one_by_one_until {
                return None; // frozen with the rest
            }
            let (reply, frozen) = tokio::sync::oneshot::channel();
            let freeze = SimCommand::FreezeZone {
                zone_id: zone_id.clone(),
                drain: true,
                reply,
            };
            if !send(shared, thread, freeze, deadline.left()).await {
                return None;
            }
            match tokio::time::timeout_at(deadline.saves_by, frozen).await {
                // Gone meanwhile (stopped, fenced, dormant): nothing of it to hand over.
                Ok(Ok(None)) | Ok(Err(_)) => None,
                Ok(Ok(Some(z))) => Some(hand_over_frozen(shared, z, heirs, deadline, began).await),
                // The thread did not answer in time: the zone may be frozen with no one to
                // confirm its save, so it is reported as unsaved.
                Err(_) => {
                    tracing::error!(zone = %zone_id, "zone not frozen by the shutdown deadline");
                    Some((zone_id, Durable::NotYet))
                }
            }
        })
        .buffer_unordered(HANDOVERS_AT_ONCE)
        .collect()
        .await;
    let (mut unsaved, mut timed_out) = (Vec::new(), false);
    note_outcomes(outcomes.into_iter().flatten(), &mut unsaved, &mut timed_out);
    (unsaved, timed_out)
}

/// Adds the zones whose final save is not durable to `unsaved`; sets `timed_out` when one was
/// still unwritten at the deadline.
fn note_outcomes(
    outcomes: impl IntoIterator<Item = (String, Durable)>,
    unsaved: &mut Vec<String>,
    timed_out: &mut bool,
) {
    for (zone, durable) in outcomes {
        match durable {
            Durable::Yes => {}
            Durable::No => unsaved.push(zone),
            Durable::NotYet => {
                *timed_out = true;
                unsaved.push(zone);
            }
        }
    }
}

/// One frozen zone: wait for the store to confirm its final save, move it to its heir, then
/// release it (its clients get ZONE_MOVED, or SHUTTING_DOWN when it was not handed over). A
/// zone whose save is not durable by the deadline is released too (the process is leaving).
async fn hand_over_frozen(
    shared: &Arc<Shared>,
    z: FrozenZone,
    heirs: &[String],
    deadline: &Deadline,
    began: Instant,
) -> (String, Durable) {
    let (at, end) = (deadline.saves_by, deadline.at);
    let durable = confirm(shared, &z, at).await;
    let moved =
        matches!(durable, Durable::Yes) && hand_over(shared, &z.zone_id, heirs, at).await.is_ok();
    if moved {
        if let Some(f) = shared.fleet() {
            f.metrics
                .drain_seconds
                .observe(began.elapsed().as_secs_f64());
        }
    }
    if !release(shared, &z, moved, end).await {
        tracing::warn!(zone = %z.zone_id, "zone not released before the deadline; its thread's stop kicks its clients");
    }
    (z.zone_id, durable)
}

/// Tells the frozen zone's thread to kick its clients (ZONE_MOVED when `moved`, SHUTTING_DOWN
/// otherwise) and dispose it; whether that was done by `end`.
async fn release(shared: &Arc<Shared>, z: &FrozenZone, moved: bool, end: Instant) -> bool {
    let (done, told) = tokio::sync::oneshot::channel();
    let release = SimCommand::Release {
        zone_id: z.zone_id.clone(),
        moved,
        done,
    };
    let left = end.saturating_duration_since(Instant::now());
    send(shared, z.thread, release, left).await && tokio::time::timeout_at(end, told).await.is_ok()
}

/// Why an operator's move of one zone (`POST /admin/zones/{id}/move`) did not happen.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum MoveError {
    /// The zone does not run on this host (or stopped before it could be frozen).
    #[error("zone {0:?} does not run on this host")]
    Absent(String),
    /// The zone's thread did not take the freeze within the bound (its queue stayed full): the
    /// zone runs on untouched.
    #[error("zone {0:?} was not moved: its thread is too busy to take the move; it runs on here")]
    Busy(String),
    /// The zone's thread did not freeze it within the bound. Whenever it does, the zone is
    /// released unmoved, as below: it never stays frozen with no one to release it.
    #[error("zone {0:?} was not frozen in time; once it is, its clients are told SHUTTING_DOWN and it starts again from its last save at its next join")]
    StillTicking(String),
    /// Frozen, but not moved (its final save not durable, or the directory refused the move):
    /// its clients were told SHUTTING_DOWN, as a drain does, and its next join starts it again
    /// from its last save.
    #[error("zone {zone:?} was not moved: {why}; its clients were told SHUTTING_DOWN and its next join starts it again from its last save")]
    Released {
        /// The zone.
        zone: String,
        /// What stopped the move.
        why: String,
    },
}

/// An operator's move of zone `zone_id`, which runs here, to host `to` (`POST
/// /admin/zones/{id}/move`), the way a drain hands a zone over, within `bound` (the shutdown
/// bound): the zone is frozen after its next tick (this thread's other zones keep ticking, and
/// it keeps taking new ones), its final save confirmed by the store, the directory moved to `to`
/// (a new epoch, which fences this host), and only then are its clients kicked with ZONE_MOVED,
/// so they resume there. Answers the epoch the directory moved it under (`to` raises it once
/// more as it loads the zone).
///
/// A frozen zone's save and facts are handed off as it freezes, so it cannot be unfrozen: when
/// the save is not durable in time or the directory refuses, the zone is released with
/// SHUTTING_DOWN as a drain does, and this host gives up its directory ownership once its last
/// save is durable, so the next join anywhere starts it again from that save.
pub(crate) async fn move_zone(
    shared: &Arc<Shared>,
    zone_id: &str,
    to: &str,
    bound: Duration,
) -> Result<u64, MoveError> {
    let deadline = Deadline::new(bound);
    let not_here = || MoveError::Absent(zone_id.to_owned());
    let thread = shared.registry.get(zone_id).ok_or_else(not_here)?.thread;
    let (reply, mut frozen) = tokio::sync::oneshot::channel();
    let freeze = SimCommand::FreezeZone {
        zone_id: zone_id.to_owned(),
        drain: false,
        reply,
    };
    if !send(shared, thread, freeze, deadline.left()).await {
        return Err(MoveError::Busy(zone_id.to_owned()));
    }
    let z = match tokio::time::timeout_at(deadline.saves_by, &mut frozen).await {
        Ok(Ok(Some(z))) => z,
        // Gone meanwhile (stopped, fenced, dormant, failed).
        Ok(Ok(None) | Err(_)) => return Err(not_here()),
        Err(_) => {
            let shared = Arc::clone(shared);
            tokio::spawn(async move {
                if let Ok(Some(z)) = frozen.await {
                    let _ = release(&shared, &z, false, Instant::now() + bound).await;
                    forget(&shared, &z.zone_id);
                }
            });
            return Err(MoveError::StillTicking(zone_id.to_owned()));
        }
    };
    let moved = match confirm(shared, &z, deadline.saves_by).await {
        Durable::Yes => hand_over(shared, zone_id, &[to.to_owned()], deadline.saves_by).await,
        Durable::No => Err("its final save was refused".to_owned()),
        Durable::NotYet => Err("its final save was not written in time".to_owned()),
    };
    if !release(shared, &z, moved.is_ok(), deadline.at).await {
        tracing::warn!(zone = %zone_id, "moved zone not released in time; its thread kicks its clients when it gets to it");
    }
    forget(shared, zone_id);
    match moved {
        Ok(epoch) => {
            tracing::info!(zone = %zone_id, to = %to, epoch, "zone moved by an operator");
            Ok(epoch)
        }
        Err(why) => {
            tracing::warn!(zone = %zone_id, to = %to, %why, "zone not moved; released");
            Err(MoveError::Released {
                zone: zone_id.to_owned(),
                why,
            })
        }
    }
}

/// A zone released here without a shutdown: the storage worker forgets it once its last save
/// is written, and gives up this host's directory ownership then if it still holds it (not when
/// the zone moved: its new owner holds it under a new epoch). So the reconcile pass and a later
/// start here find no stale registration.
fn forget(shared: &Shared, zone_id: &str) {
    if let Some(p) = &shared.sim.persist {
        p.storage().retire(zone_id);
    }
}

/// The live, non-draining other hosts of the fleet a drain may hand zones to.
async fn heirs(shared: &Shared) -> Vec<String> {
    let Some(fleet) = shared.fleet() else {
        return Vec::new();
    };
    match crate::fleet::query(&fleet.metrics, "hosts", fleet.directory.hosts()).await {
        Ok(hosts) => hosts
            .into_iter()
            .filter(|h| {
                h.host_id != fleet.host_id
                    && !h.draining
                    && fleet
                        .timing
                        .is_alive(Duration::from_millis(h.heartbeat_age_ms), h.left)
            })
            .map(|h| h.host_id)
            .collect(),
        Err(e) => {
            tracing::warn!(error = %e, "no host list for the drain: zones are started elsewhere once this host has left");
            Vec::new()
        }
    }
}

/// Moves a saved zone to its heir in the directory (a new epoch, which fences this host), so
/// its clients resume there at once; answers the new epoch, or why it was not moved. Without an
/// heir the zone stays this host's until it leaves, and is then taken over like a dead host's.
async fn hand_over(
    shared: &Shared,
    zone_id: &str,
    heirs: &[String],
    by: Instant,
) -> Result<u64, String> {
    let Some(fleet) = shared.fleet() else {
        return Err("this host has no fleet".into());
    };
    let Some(heir) = rendezvous(zone_id, heirs.iter().map(String::as_str)) else {
        return Err("no live host to hand it to".into());
    };
    let Some(epoch) = shared
        .sim
        .persist
        .as_ref()
        .and_then(|p| p.storage().status(zone_id))
        .map(|s| s.epoch)
    else {
        return Err("this host holds no owner epoch for it".into());
    };
    let moved = tokio::time::timeout_at(
        by,
        crate::fleet::query(
            &fleet.metrics,
            "move",
            fleet
                .directory
                .move_zone(zone_id, &fleet.host_id, epoch, heir),
        ),
    )
    .await;
    match moved {
        Ok(Ok(new_epoch)) => {
            tracing::info!(zone = %zone_id, to = %heir, epoch = new_epoch, "zone handed over");
            Ok(new_epoch)
        }
        Ok(Err(e)) => {
            tracing::warn!(zone = %zone_id, to = %heir, error = %e, "zone not handed over; it is started elsewhere once this host has left");
            Err(format!("the fleet directory did not move it: {e}"))
        }
        Err(_) => Err("the fleet directory did not answer in time".into()),
    }
}

/// Whether a frozen zone's final save reached the store.
enum Durable {
    Yes,
    /// Refused: the state is lost whatever the deadline.
    No,
    /// Still unwritten at the deadline.
    NotYet,
}

async fn confirm(shared: &Arc<Shared>, z: &FrozenZone, at: Instant) -> Durable {
    let seq = match &z.save {
        FinalSave::NotPersisted => return Durable::Yes,
        // Logged at ERROR where it was refused.
        FinalSave::Refused(_) => return Durable::No,
        FinalSave::Queued(seq) => *seq,
    };
    let Some(p) = &shared.sim.persist else {
        return Durable::Yes;
    };
    let storage = p.storage();
    if tokio::time::timeout_at(at, storage.flush(&z.zone_id))
        .await
        .is_err()
    {
        tracing::error!(zone = %z.zone_id, seq, "final save not written by the shutdown deadline");
        return Durable::NotYet;
    }
    // The characters its players handed back as it stopped are written before another host
    // takes the zone (and them) over.
    if tokio::time::timeout_at(at, p.characters().flush())
        .await
        .is_err()
    {
        tracing::error!(zone = %z.zone_id, "characters not written by the shutdown deadline");
    }
    let status = storage.status(&z.zone_id);
    if status.as_ref().and_then(|s| s.last_saved_seq) >= Some(seq) {
        tracing::info!(zone = %z.zone_id, seq, "final save written");
        Durable::Yes
    } else {
        let error = status.and_then(|s| s.last_error).unwrap_or_default();
        tracing::error!(zone = %z.zone_id, seq, %error, "final save dropped");
        Durable::No
    }
}

/// Queue a command for a simulation thread, waiting at most `bound` for room.
pub(crate) async fn send(
    shared: &Arc<Shared>,
    thread: usize,
    cmd: SimCommand,
    bound: Duration,
) -> bool {
    let cmd = match shared.pool.send(thread, cmd) {
        Ok(()) => return true,
        Err(cmd) => *cmd,
    };
    let s = shared.clone();
    tokio::task::spawn_blocking(move || s.pool.send_within(thread, cmd, bound))
        .await
        .unwrap_or(false)
}
