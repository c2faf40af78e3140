//! The loop of one simulation thread: it ticks the zones that are due, sleeps until the next
//! is or a command comes, and stops the zones that failed, halted, were fenced or went dormant.
//! What each command does is in `commands`; the shutdown's freezes and releases in `shutdown`.

mod commands;
mod shutdown;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use crossbeam_channel::{Receiver, RecvTimeoutError};
use tokio::sync::oneshot;
use zonekeep_core::Tier;
use zonekeep_protocol::messages::KickCode;

use super::zone_run::ZoneRun;
use super::{FrozenZone, JoinFailure, SimCommand, SimContext, ZoneStart};
use crate::persist::Unload;

/// Longest sleep with no zone due (so a thread with no zones still notices shutdown promptly
/// through its queue; this only bounds the idle wake-up rate).
const MAX_SLEEP: Duration = Duration::from_millis(500);
/// The Kick reason of a graceful shutdown.
const RESTARTING: &str = "the server is restarting";
/// The Kick reason of a zone handed to another host by a drain.
const MOVED: &str = "the zone moved to another host; resume there";
/// Commands handled per wake-up before zones get their turn again.
const COMMANDS_PER_WAKE: usize = 256;

struct SimThread {
    index: usize,
    ctx: Arc<SimContext>,
    zones: BTreeMap<String, ZoneRun>,
    /// Zones stopped for shutdown: not ticked, clients still attached, until released.
    frozen: BTreeMap<String, ZoneRun>,
    /// Set by the shutdown freeze: zones that arrive afterwards are not started.
    draining: bool,
    /// Zones to freeze right after their next tick (see [`SimCommand::FreezeZone`]), with
    /// whoever waits for them.
    freeze_after_tick: Vec<(String, oneshot::Sender<Option<FrozenZone>>)>,
}

pub(crate) fn run(index: usize, rx: Receiver<SimCommand>, ctx: Arc<SimContext>) {
    let mut t = SimThread {
        index,
        ctx,
        zones: BTreeMap::new(),
        frozen: BTreeMap::new(),
        draining: false,
        freeze_after_tick: Vec::new(),
    };
    tracing::debug!(thread = index, "sim thread started");
    loop {
        let now = t.ctx.clock.now();
        t.run_due(now);
        let next = t
            .zones
            .values()
            .map(|z| z.host.next_tick_due())
            .min()
            .unwrap_or(now + MAX_SLEEP);
        let wait = next.saturating_sub(t.ctx.clock.now()).min(MAX_SLEEP);
        match rx.recv_timeout(wait) {
            Ok(cmd) => {
                if t.handle(cmd) {
                    break;
                }
                for _ in 0..COMMANDS_PER_WAKE {
                    let Ok(cmd) = rx.try_recv() else { break };
                    if t.handle(cmd) {
                        tracing::debug!(thread = index, "sim thread stopped");
                        return;
                    }
                }
            }
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => {
                t.shutdown_all();
                break;
            }
        }
    }
    tracing::debug!(thread = index, "sim thread stopped");
}

impl SimThread {
    fn run_due(&mut self, now: Duration) {
        let mut unload = Vec::new();
        let mut fenced = Vec::new();
        let mut stepped = Vec::new();
        let mut failed = Vec::new();
        let mut halted = Vec::new();
        for (id, z) in self.zones.iter_mut() {
            // Checked before anything else on every wake, due or not: a fenced
            // zone runs no further tick and takes no further input.
            if z.fenced() {
                fenced.push(id.clone());
            } else if z.due(now) {
                z.step(&self.ctx, now);
                // Dormant, and no join on its way to it (else asked again at the next step).
                if z.host.tier() == Tier::Dormant && self.ctx.registry.retire(&z.entry) {
                    unload.push(id.clone());
                }
                // A call stopped because the lease lapsed is the fence's business, next wake.
                if z.failure().is_some() && !z.fenced() {
                    failed.push(id.clone());
                } else if let Some(unsaved) = z.storage_lost() {
                    // Checked after the step, so the tick that found it is the world's last.
                    halted.push((id.clone(), unsaved));
                }
                stepped.push(id.clone());
            }
        }
        for id in failed {
            if let Some(mut z) = self.zones.remove(&id) {
                let reason = z.failure().unwrap_or_default().to_owned();
                self.ctx.lifecycle.failed(&id, &reason);
                z.fail(&self.ctx, &reason);
                // A freeze waiting on it finds it gone and is answered `None`.
                self.ctx.metrics.release_zone(z.metrics);
            }
        }
        for (id, unsaved) in halted {
            if let Some(mut z) = self.zones.remove(&id) {
                z.halt(&self.ctx, unsaved);
                self.ctx.metrics.release_zone(z.metrics);
            }
        }
        if !self.freeze_after_tick.is_empty() {
            self.freeze_stepped(&stepped, &fenced, &unload);
        }
        for id in fenced {
            if let Some(mut z) = self.zones.remove(&id) {
                self.ctx.lifecycle.fenced(&id, z.lease_ended());
                z.unload_fenced(&self.ctx);
                self.ctx.metrics.release_zone(z.metrics);
            }
        }
        for id in unload {
            if let Some(mut z) = self.zones.remove(&id) {
                self.ctx.lifecycle.ended(&id, "unloaded", "dormant");
                z.teardown(
                    &self.ctx,
                    KickCode::ZONE_STOPPED,
                    "zone unloaded",
                    Unload::Hibernate,
                );
                self.ctx.metrics.release_zone(z.metrics);
            }
        }
    }

    /// A join that carried a reclaimed move's state was not admitted (the zone was full, or not
    /// running): the state is given up again, through the transfer worker, for the player's
    /// next join.
    fn give_up_reclaim(&self, zone_id: &str, reclaimed: Option<&zonekeep_store::StoredTransfer>) {
        let Some(r) = reclaimed else {
            return;
        };
        let Some(entry) = self.ctx.registry.get(zone_id) else {
            return;
        };
        let job = crate::transfer::Job::Unclaimed {
            id: r.transfer.id.clone(),
            epoch: entry.epoch.load(std::sync::atomic::Ordering::Acquire),
        };
        if self.ctx.transfers.submit(job).is_err() {
            tracing::warn!(zone = %zone_id, transfer = %r.transfer.id, "the transfer worker is full: a refused join's reclaimed state is not given up");
        }
    }

    /// Takes over a zone built on the runtime (see `start.rs`).
    fn start(&mut self, zone_id: &str, start: ZoneStart) -> Result<(), String> {
        let entry = self.ctx.registry.get(zone_id).filter(|_| !self.draining);
        let Some(entry) = entry else {
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
            self.ctx.metrics.release_zone(metrics);
            return Err(if self.draining {
                "the host is shutting down".into()
            } else {
                "zone was removed before it started".into()
            });
        };
        let ZoneStart {
            mut host,
            persist,
            inbox,
            mut metrics,
            record,
        } = start;
        host.set_stage_clock(self.ctx.stage_clock.clone());
        self.ctx.metrics.set_tier(&mut metrics, host.tier());
        self.ctx
            .lifecycle
            .started(zone_id, host.kind(), host.tick());
        if let Some(flag) = host.stop_handle() {
            self.ctx.interrupts.register(&flag);
        }
        let epoch = persist.as_ref().map(crate::persist::ZonePersist::epoch);
        let mut run = ZoneRun::new(host, persist, entry, inbox, self.ctx.zone_inbox, metrics);
        if let Some(epoch) = epoch {
            // Moves out of the zone's previous run that were left undecided are settled now.
            let job = crate::transfer::Job::Started {
                zone_id: zone_id.to_owned(),
                epoch,
            };
            if self.ctx.transfers.submit(job).is_err() {
                tracing::warn!(zone = %zone_id, "the transfer worker is full: moves the zone's previous run left open wait for their other zone");
            }
        }
        if let Some(limits) = record {
            // Before its first tick: the recording starts at the zone's creation (or restore).
            if let Err(e) = run.start_recording(&self.ctx, limits) {
                tracing::warn!(zone = %zone_id, error = %e, "the zone's recording did not start");
            }
        }
        self.zones.insert(zone_id.to_owned(), run);
        Ok(())
    }

    /// Starts the zone a command carries, if it carries one: whether it did, or why it could not
    /// (the command is then answered with it).
    fn start_carried(
        &mut self,
        zone_id: &str,
        create: Option<ZoneStart>,
    ) -> Result<bool, JoinFailure> {
        match create {
            None => Ok(false),
            Some(c) => self
                .start(zone_id, c)
                .map(|()| true)
                .map_err(|e| self.unavailable(e)),
        }
    }

    /// A join or start that finds no running zone: during shutdown the client
    /// is told so (and reconnects), otherwise the zone is unavailable.
    fn unavailable(&self, why: String) -> JoinFailure {
        if self.draining {
            JoinFailure::ShuttingDown
        } else {
            JoinFailure::Unavailable(why)
        }
    }
}
