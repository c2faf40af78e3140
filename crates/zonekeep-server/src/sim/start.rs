//! Starting a zone: built on the tokio runtime (claim and restore with
//! persistence, plain create without), then handed to its simulation thread.
//!
//! [`admit_zone`] is the one admission path, used by sessions and the admin API
//! alike: the zone is registered first (so a second join for it finds the
//! entry) and marked [`Startup::Starting`]; it is built; the command that
//! hands it to its thread is queued; then it is marked [`Startup::Running`].
//! Joins that find it starting wait for `Running` before queuing their Join,
//! which keeps every Join behind the command that hands the zone to its
//! thread. A zone that cannot start, or whose command cannot be queued, is
//! abandoned: unregistered and marked [`Startup::Failed`] with the reason,
//! which the waiting joins are refused with. When the kind's code is what
//! failed ([`StartError::Failed`]) the zone is also remembered as failed, so
//! nothing starts it again until an operator stops it or the kind is deployed
//! anew; when the kind refused the params ([`StartError::Invalid`]) nothing of
//! the request is kept.

use std::sync::Arc;
use std::time::Duration;

use zonekeep_core::{ZoneError, ZoneHost, ZoneInit};

use super::context::SimContext;
use super::registry::ZoneEntry;
use super::{SimCommand, SimPool, ZoneCreate, ZoneStart};
use crate::metrics::ZoneMetrics;
use crate::persist::{ClaimRefusal, ZonePersist};

/// Longest a zone may take to start (claim, load, restore). A store that
/// does not answer within it fails the join instead of holding it forever.
pub(crate) const START_TIMEOUT: Duration = Duration::from_secs(30);

/// Where a registered zone is in its start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Startup {
    /// Being built; joins wait.
    Starting,
    /// Handed to its thread; joins go straight to it.
    Running,
    /// Did not start, for this reason; it is no longer registered.
    Failed(String),
}

/// Why a zone did not start.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum StartError {
    /// The kind or its params refused to create the zone (the request is wrong).
    #[error("{0}")]
    Invalid(String),
    /// The kind's code could not create the zone or restore its save: the zone is marked
    /// failed, and stays so until an operator stops it or the kind is deployed anew.
    #[error("{0}")]
    Failed(String),
    /// The store failed or the start timed out.
    #[error("{0}")]
    Unavailable(String),
    /// Another live host of the fleet owns the zone.
    #[error("the zone is served by host {host:?}")]
    Moved {
        /// Its host id.
        host: String,
        /// Its advertised base URL.
        url: String,
    },
}

/// Why [`admit_zone`] did not hand a new zone to its thread.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum AdmitError {
    /// The zone did not start.
    #[error(transparent)]
    Start(#[from] StartError),
    /// The zone's thread queue is full; the built zone was abandoned.
    #[error("the zone's thread is busy")]
    Busy,
}

/// The one admission path for a zone registered as `entry` (see the module
/// docs): build it from `create`, queue the command `hand_over` makes of it
/// on its thread, and mark it running. On failure the zone is abandoned
/// (unregistered, nothing saved) and waiting joins learn why.
pub(crate) async fn admit_zone(
    sim: &Arc<SimContext>,
    pool: &SimPool,
    entry: &Arc<ZoneEntry>,
    create: ZoneCreate,
    hand_over: impl FnOnce(ZoneStart) -> SimCommand,
) -> Result<(), AdmitError> {
    let start = start_zone(sim, entry, create).await?;
    if let Err(cmd) = pool.send(entry.thread, hand_over(start)) {
        if let Some(start) = cmd.into_start() {
            abandon(sim, entry, start, &AdmitError::Busy.to_string());
        }
        return Err(AdmitError::Busy);
    }
    // Queued behind the start command: later joins may follow it.
    mark_running(entry);
    Ok(())
}

/// Unregisters a zone whose start was abandoned (failed, timed out, or the
/// future was dropped), unless defused.
struct StartGuard<'a> {
    sim: &'a SimContext,
    entry: &'a Arc<ZoneEntry>,
    metrics: Option<ZoneMetrics>,
    reason: String,
}

impl Drop for StartGuard<'_> {
    fn drop(&mut self) {
        if let Some(m) = self.metrics.take() {
            self.sim.registry.remove(self.entry);
            self.sim.metrics.release_zone(m);
            self.entry
                .ready
                .send_replace(Startup::Failed(std::mem::take(&mut self.reason)));
        }
    }
}

/// Builds the zone registered as `entry` from `create`. On failure the zone
/// is unregistered, waiting joins learn why, and the reason is returned.
async fn start_zone(
    sim: &Arc<SimContext>,
    entry: &Arc<ZoneEntry>,
    create: ZoneCreate,
) -> Result<ZoneStart, StartError> {
    let ZoneCreate {
        kind,
        params,
        inbox,
        metrics,
    } = create;
    let mut guard = StartGuard {
        sim,
        entry,
        metrics: Some(metrics),
        reason: "the zone's start was abandoned".into(),
    };
    let built = tokio::time::timeout(START_TIMEOUT, build(sim, &entry.zone_id, &kind, params))
        .await
        .unwrap_or_else(|_| {
            Err(StartError::Unavailable(format!(
                "the zone did not start within {} s (is the store reachable?)",
                START_TIMEOUT.as_secs()
            )))
        });
    match built {
        Ok((host, persist)) => {
            if let Some(p) = &persist {
                entry
                    .epoch
                    .store(p.epoch(), std::sync::atomic::Ordering::Release);
            }
            let metrics = guard
                .metrics
                .take()
                .ok_or_else(|| StartError::Unavailable("zone metrics missing".into()))?;
            Ok(ZoneStart {
                host,
                persist,
                inbox,
                metrics,
                record: None,
            })
        }
        Err(e) => {
            if let StartError::Failed(reason) = &e {
                // Marked while the zone is still registered: a join racing this start either
                // waits on the entry or finds the failure, never a free id to start again.
                let failed = super::FailedZone::at_start(&entry.zone_id, &kind, reason);
                if sim.registry.mark_failed(failed) {
                    tracing::warn!(
                        "more failed zones than the host remembers: the oldest was forgotten"
                    );
                }
                sim.metrics.zone_failed();
            }
            guard.reason = e.to_string();
            Err(e)
        }
    }
}

/// The zone's thread has it (its start command is queued): joins may go.
fn mark_running(entry: &ZoneEntry) {
    entry.ready.send_replace(Startup::Running);
}

/// A built zone whose start command could not be queued: unregister it and
/// release what it holds, without saving (it never ran).
fn abandon(sim: &SimContext, entry: &Arc<ZoneEntry>, start: ZoneStart, reason: &str) {
    let ZoneStart {
        mut host,
        persist,
        metrics,
        ..
    } = start;
    if let Some(p) = persist {
        p.abandon();
    }
    host.dispose();
    sim.registry.remove(entry);
    sim.metrics.release_zone(metrics);
    entry.ready.send_replace(Startup::Failed(reason.to_owned()));
}

/// Waits until a zone another join is starting is running (or failed).
pub(crate) async fn wait_running(entry: &ZoneEntry) -> Result<(), String> {
    let mut rx = entry.ready.subscribe();
    let state = rx
        .wait_for(|s| *s != Startup::Starting)
        .await
        .map(|s| s.clone())
        .map_err(|_| "the zone's start was abandoned".to_owned())?;
    match state {
        Startup::Failed(reason) => Err(reason),
        _ => Ok(()),
    }
}

async fn build(
    sim: &Arc<SimContext>,
    zone_id: &str,
    kind: &str,
    params: serde_json::Value,
) -> Result<(ZoneHost, Option<ZonePersist>), StartError> {
    let spec = sim
        .specs
        .get(kind)
        .ok_or_else(|| StartError::Invalid(format!("unknown zone kind {kind:?}")))?;
    let init = ZoneInit {
        zone_id: zone_id.to_owned(),
        kind: kind.to_owned(),
        params,
    };
    // A module kind nothing was deployed to yet cannot make the zone: refused before the claim,
    // which would raise the zone's epoch and record a failure for code that does not exist yet.
    if let Some(code) = &sim.code {
        if code.current(kind).is_none() && code.kinds().iter().any(|k| k == kind) {
            return Err(StartError::Unavailable(format!(
                "zone kind {kind:?} has no module deployed yet: push one (zonekeep module push FILE --kind {kind}), then join again"
            )));
        }
    }
    let config = spec.config.clone();
    let s = Arc::clone(sim);
    match sim.persist.clone() {
        None => {
            let host = tokio::task::spawn_blocking(move || {
                s.kinds.create(init, config, Arc::clone(&s.clock))
            })
            .await
            .map_err(|e| StartError::Unavailable(format!("creating the zone: {e}")))?
            .map_err(|e| match e {
                ZoneError::InvalidParams(_) | ZoneError::UnknownKind(_) => {
                    StartError::Invalid(e.to_string())
                }
                e => {
                    tracing::error!(zone = %zone_id, kind = %kind, reason = %e, "zone did not start");
                    StartError::Failed(format!("cannot create the zone: {e}"))
                }
            })?;
            // A module says it is a lasting world only in its settings, which shape the zone's
            // config as it is made: a host that saves nothing must not run one.
            if host.config().lasting {
                return Err(StartError::Invalid(format!(
                    "zone kind {kind:?} is a lasting world, and this host has no store to keep it in"
                )));
            }
            Ok((host, None))
        }
        Some(p) => {
            let claimed = p
                .claim(zone_id, kind, &init.params)
                .await
                .map_err(|r| match r {
                    ClaimRefusal::Failed(f) => {
                        StartError::Unavailable(format!("zone did not start: {}", f.reason))
                    }
                    ClaimRefusal::Moved { host, url } => StartError::Moved { host, url },
                })?;
            let characters =
                crate::code::keeps_characters(sim.code.as_ref(), kind, config.characters);
            let claimed = if characters {
                with_characters(&p, zone_id, claimed).await
            } else {
                claimed
            };
            let builder = Arc::clone(&p);
            let built = tokio::task::spawn_blocking(move || {
                builder.build(&s.kinds, init, config, Arc::clone(&s.clock), &claimed)
            })
            .await
            .map_err(|e| StartError::Unavailable(format!("restoring the zone: {e}")))?;
            match built {
                Ok((host, persist)) => Ok((host, Some(persist))),
                Err(f) if f.params_refused => {
                    // The claim put the zone in the directory; it never ran and has no save.
                    p.forget_refused(zone_id).await;
                    Err(StartError::Invalid(f.reason))
                }
                // The save is kept (loader), for code that can read it.
                Err(f) => Err(StartError::Failed(f.reason)),
            }
        }
    }
}

/// A zone of a kind whose players bring characters is restored with the characters of its saved
/// players, taken under the new owner's epoch (the same zone takes its own lease again; a
/// character another zone took meanwhile stays there, and its player comes back by joining). A
/// player whose character this cannot take is left out of the restore.
async fn with_characters(
    p: &crate::persist::Persistence,
    zone_id: &str,
    mut claimed: crate::persist::ClaimedZone,
) -> crate::persist::ClaimedZone {
    let Some(save) = claimed.last.as_mut() else {
        return claimed;
    };
    let Ok((mut snap, links)) = zonekeep_core::Snapshot::decode_with_links(&save.bytes) else {
        // The restore reports the unreadable save.
        return claimed;
    };
    let characters = &p.store().characters;
    for saved in snap
        .roster
        .iter()
        .filter(|s| s.role == zonekeep_core::Role::Player)
    {
        let principal = saved.principal.as_str();
        match characters
            .acquire_character(principal, zone_id, claimed.epoch)
            .await
        {
            Ok(zonekeep_store::CharacterAcquire::Granted { character, .. }) => {
                snap.characters.push((saved.id, character.data));
            }
            Ok(zonekeep_store::CharacterAcquire::Held { zone, .. }) => {
                tracing::info!(zone = %zone_id, holder = %zone, "a saved player's character is held elsewhere: it comes back by joining");
            }
            Err(e) => {
                tracing::warn!(zone = %zone_id, error = %e, "a saved player's character was not taken for the restore: it comes back by joining");
            }
        }
    }
    save.bytes = snap.encode_with(&links);
    claimed
}
