//! Lasting worlds halted because their saves failed: remembered, refused, resumed.
//!
//! A lasting world whose newest state waited unsaved past its bound (its saves failed or hung;
//! see `persist::ZonePersist::storage_lost`) halts on its simulation thread: it runs no further
//! tick, its players are kicked with WORLD_HALTED, the snapshot still waiting is dropped and no
//! final save is written, so the store keeps the world's last committed save. The thread records
//! the world here ([`Halts::halt`]). While it is recorded, joins and admin creates of it are
//! refused with WORLD_HALTED, and the admin API and `/metrics` show it.
//!
//! The host's resumer ([`run`]) then starts the world again, on this host, exactly as any start
//! does: a claim (a new owner epoch, which fences any write of the halted run still in the store's
//! queue) and a restore of the newest committed save. While the store still fails, the start
//! fails too and is tried again with backoff; once it answers, the world runs on from that save.
//! Nothing here waits inside a tick: the thread only records, the resumer runs on the runtime.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use serde::Serialize;
use serde_json::Value;
use tokio::sync::Notify;
use tokio::time::Instant;

use crate::host::Shared;
use crate::metrics::Metrics;
use crate::persist::Backoff;
use crate::sim::AdminFailure;

/// Most halted worlds remembered; past it the oldest is forgotten (a join may then start it,
/// which is a resume like the resumer's own).
const HALTED_CAP: usize = 4096;

/// How the resumer spaces its attempts at one world: soon after the halt, then at most every
/// 10 s while the store stays down.
const RESUME_BACKOFF: Backoff = Backoff {
    initial: Duration::from_millis(250),
    max: Duration::from_secs(10),
};

/// A lasting world halted because its saves failed, as the admin API lists it.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct HaltedWorld {
    /// Zone id.
    pub id: String,
    /// Zone kind.
    pub kind: String,
    /// Why it halted: how long its state waited unsaved, and the store's last error.
    pub reason: String,
    /// The last tick it ran.
    pub tick: u64,
    /// The owner epoch it ran under.
    pub epoch: u64,
    /// The sequence number of its last save the store committed in that epoch (`None`: none in
    /// that epoch; the world resumes from the save it was restored from, if any).
    pub last_saved_seq: Option<u64>,
    /// How long its newest state had waited unsaved when it halted, in milliseconds.
    pub unsaved_ms: u64,
    /// When it halted, in milliseconds since the Unix epoch.
    pub at_ms: u64,
    /// Attempts to resume it so far.
    pub attempts: u32,
    /// The params it was created with (a world that never saved starts from them again).
    #[serde(skip)]
    pub params: Value,
    /// When the resumer tries it next.
    #[serde(skip)]
    next_attempt: Option<Instant>,
}

impl HaltedWorld {
    /// A world of `kind` halted now after its state waited `unsaved` unsaved.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(
        id: &str,
        kind: &str,
        params: Value,
        tick: u64,
        epoch: u64,
        last_saved_seq: Option<u64>,
        unsaved: Duration,
        last_error: Option<&str>,
    ) -> Self {
        let unsaved_ms = u64::try_from(unsaved.as_millis()).unwrap_or(u64::MAX);
        let reason = match last_error {
            Some(e) => format!("its saves failed for {unsaved_ms} ms (last error: {e})"),
            None => format!("its saves did not complete for {unsaved_ms} ms"),
        };
        HaltedWorld {
            id: id.to_owned(),
            kind: kind.to_owned(),
            reason,
            tick,
            epoch,
            last_saved_seq,
            unsaved_ms,
            at_ms: crate::sim::now_ms(),
            attempts: 0,
            params,
            next_attempt: None,
        }
    }

    /// What a player of the world, or a join to it, is told.
    pub(crate) fn message(&self) -> String {
        format!(
            "the lasting world {:?} halted: {}; it resumes from its last committed save once its store answers",
            self.id, self.reason
        )
    }
}

/// The halted worlds of this host, and the resumer's wake-up.
#[derive(Debug)]
pub(crate) struct Halts {
    worlds: Mutex<BTreeMap<String, HaltedWorld>>,
    wake: Notify,
    metrics: Arc<Metrics>,
}

impl Halts {
    /// No world halted yet; `metrics` counts what becomes of them.
    pub fn new(metrics: Arc<Metrics>) -> Self {
        Halts {
            worlds: Mutex::default(),
            wake: Notify::new(),
            metrics,
        }
    }

    fn lock(&self) -> MutexGuard<'_, BTreeMap<String, HaltedWorld>> {
        self.worlds.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Records that `world` halted and wakes the resumer. Returns whether the oldest halted
    /// world had to be forgotten for it.
    pub fn halt(&self, mut world: HaltedWorld) -> bool {
        world.next_attempt = Some(Instant::now() + RESUME_BACKOFF.delay(1));
        let forgot = {
            let mut w = self.lock();
            w.insert(world.id.clone(), world);
            let over = w.len() > HALTED_CAP;
            if over {
                let oldest = w.values().min_by_key(|h| h.at_ms).map(|h| h.id.clone());
                if let Some(id) = oldest {
                    w.remove(&id);
                }
            }
            self.metrics.worlds_halted(w.len());
            over
        };
        self.metrics.world_halt("halted");
        self.wake.notify_one();
        forgot
    }

    /// The world, while it is halted.
    pub fn get(&self, zone_id: &str) -> Option<HaltedWorld> {
        self.lock().get(zone_id).cloned()
    }

    /// Every halted world, by id.
    pub fn all(&self) -> Vec<HaltedWorld> {
        self.lock().values().cloned().collect()
    }

    /// The worlds whose next attempt is due at `now`, and when the next one after them is.
    fn due(&self, now: Instant) -> (Vec<String>, Option<Instant>) {
        let w = self.lock();
        let due = w
            .values()
            .filter(|h| h.next_attempt.is_none_or(|t| t <= now))
            .map(|h| h.id.clone())
            .collect();
        let next = w
            .values()
            .filter_map(|h| h.next_attempt)
            .filter(|t| *t > now)
            .min();
        (due, next)
    }

    /// An attempt at `zone_id` failed: the next one waits longer.
    fn retry_later(&self, zone_id: &str) {
        if let Some(h) = self.lock().get_mut(zone_id) {
            h.attempts = h.attempts.saturating_add(1);
            h.next_attempt = Some(Instant::now() + RESUME_BACKOFF.delay(h.attempts));
        }
    }

    /// Forgets `zone_id`, counted as `outcome` (it runs again, or is another part's business
    /// now). Returns whether it was halted.
    fn forget(&self, zone_id: &str, outcome: &str) -> bool {
        let mut w = self.lock();
        let was = w.remove(zone_id).is_some();
        if was {
            self.metrics.worlds_halted(w.len());
            self.metrics.world_halt(outcome);
        }
        was
    }
}

/// The host's resumer: starts each halted world again once its store answers (see the module
/// docs). Runs until the host shuts down.
pub(crate) async fn run(shared: Arc<Shared>) {
    let halts = Arc::clone(&shared.sim.halts);
    loop {
        let (due, next) = halts.due(Instant::now());
        for id in due {
            if shared.shutdown.is_cancelled() {
                return;
            }
            attempt(&shared, &halts, &id).await;
        }
        let (due, next_after) = halts.due(Instant::now());
        if !due.is_empty() {
            continue;
        }
        let until = next_after.or(next);
        tokio::select! {
            () = shared.shutdown.cancelled() => return,
            () = halts.wake.notified() => {}
            () = sleep_until(until) => {}
        }
    }
}

/// Sleeps until `t`, or forever without one.
async fn sleep_until(t: Option<Instant>) {
    match t {
        Some(t) => tokio::time::sleep_until(t).await,
        None => std::future::pending().await,
    }
}

/// One attempt to start the halted world `id` again.
async fn attempt(shared: &Arc<Shared>, halts: &Halts, id: &str) {
    let Some(world) = halts.get(id) else {
        return;
    };
    let started = shared
        .start_zone(&world.id, &world.kind, world.params.clone(), None, true)
        .await;
    match started {
        // Running again (or a join started it first, from the same save).
        Ok(()) | Err(AdminFailure::Exists(_)) => {
            if halts.forget(id, "resumed") {
                tracing::info!(zone = %id, attempts = world.attempts + 1, "lasting world resumed from its last committed save");
            }
        }
        // Its code cannot start it (the failed zones list it now), or its kind is gone.
        Err(e @ (AdminFailure::Failed(_) | AdminFailure::BadRequest(_))) => {
            halts.forget(id, "failed");
            tracing::error!(zone = %id, error = %e, "a halted lasting world could not be started again");
        }
        Err(e) => {
            halts.retry_later(id);
            tracing::warn!(zone = %id, attempts = world.attempts + 1, error = %e, "a halted lasting world did not resume yet; its store is still failing");
        }
    }
}
