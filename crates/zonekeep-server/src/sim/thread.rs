//! The loop of one simulation thread.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use crossbeam_channel::{Receiver, RecvTimeoutError};
use tokio::sync::oneshot;
use zonekeep_core::{Clock, Tier, ZoneConfig, ZoneKinds};
use zonekeep_protocol::messages::KickCode;

use super::registry::Registry;
use super::zone_run::{Admission, ZoneRun};
use super::{AdminFailure, DisposeHook, FrozenZone, JoinFailure, SimCommand, ZoneStart};
use crate::metrics::Metrics;
use crate::persist::{Persistence, Unload};
use crate::reconnect::ReconnectStore;

/// Longest sleep with no zone due (so a thread with no zones still notices shutdown promptly
/// through its queue; this only bounds the idle wake-up rate).
const MAX_SLEEP: Duration = Duration::from_millis(500);
/// The Kick reason of a graceful shutdown.
const RESTARTING: &str = "the server is restarting";
/// The Kick reason of a zone handed to another host by a drain.
const MOVED: &str = "the zone moved to another host; resume there";
/// Commands handled per wake-up before zones get their turn again.
const COMMANDS_PER_WAKE: usize = 256;

/// How one zone kind is run.
#[derive(Debug, Clone)]
pub(crate) struct KindSpec {
    pub config: ZoneConfig,
    pub default_params: serde_json::Value,
}

/// The session limits a Welcome announces (PROTOCOL.md §5.1).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct SessionTimeouts {
    /// Silence after which a connection is kicked with IDLE_TIMEOUT.
    pub idle_ms: u32,
    /// Time allowed for the Hello.
    pub handshake_ms: u32,
}

/// Everything the threads share.
pub(crate) struct SimContext {
    pub kinds: ZoneKinds,
    pub specs: HashMap<String, KindSpec>,
    pub clock: Arc<dyn Clock>,
    pub metrics: Arc<Metrics>,
    pub reconnect: Arc<ReconnectStore>,
    pub registry: Arc<Registry>,
    pub dispose_hook: Option<DisposeHook>,
    pub zone_inbox: usize,
    /// What Welcome tells clients about the host's session timeouts.
    pub timeouts: SessionTimeouts,
    /// The content version Welcome tells clients, and the oldest a Hello may carry.
    pub content: crate::content::ContentPolicy,
    /// Saves, hibernation and facts; `None` runs zones in memory only.
    pub persist: Option<Arc<Persistence>>,
    /// Where else a client may enter, which Welcome lists (version 7); empty outside a fleet.
    pub entries: Arc<crate::fleet::EntryUrls>,
    /// Zone recordings.
    pub recordings: Arc<crate::recording::Recordings>,
    /// Stop flags of the running zones whose game code can be interrupted.
    pub interrupts: Arc<super::Interrupts>,
    /// The host's module kinds, if it has any: a zone of one with no module yet is not started.
    pub code: Option<Arc<dyn crate::code::CodeKinds>>,
    /// Moves of players out of this host's zones, on their way to the transfer worker.
    pub transfers: Arc<crate::transfer::TransferQueue>,
    /// The cross-zone bus, set once the host serves (in process, or NATS with `--bus`); zones
    /// bind to it at their next step once it is there.
    pub bus: Arc<std::sync::OnceLock<zonekeep_bus::BusHandle>>,
    /// Lasting worlds halted because their saves failed, until they resume.
    pub halts: Arc<crate::halt::Halts>,
    /// The clock every zone's stages are timed on (`stage_timing`); `None`: not timed.
    pub stage_clock: Option<Arc<dyn Clock>>,
    /// Which zone lifecycle lines are written.
    pub lifecycle: super::lifecycle::Lifecycle,
}

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

    /// Handle one command; true means "stop the thread".
    fn handle(&mut self, cmd: SimCommand) -> bool {
        match cmd {
            SimCommand::Arriving { arrival, cmd } => {
                let stop = self.handle(*cmd);
                // Only now: the zone has its player (or refused it), and may go dormant again.
                drop(arrival);
                return stop;
            }
            SimCommand::Join {
                zone_id,
                create,
                principal,
                claims,
                role,
                version,
                conn,
                reclaimed,
                character,
                reply,
            } => {
                if let Err(e) = self.start_carried(&zone_id, create) {
                    self.give_up_reclaim(&zone_id, reclaimed.as_deref());
                    let _ = reply.send(Err(e));
                    return false;
                }
                let r = match self.zones.get_mut(&zone_id) {
                    Some(z) => z.join(
                        &self.ctx,
                        principal,
                        claims,
                        match reclaimed.as_deref() {
                            Some(r) => Admission::Return(r),
                            None => Admission::Join(role),
                        },
                        character,
                        version,
                        conn,
                    ),
                    None => Err(self.unavailable("zone is not running".into())),
                };
                if r.is_err() {
                    self.give_up_reclaim(&zone_id, reclaimed.as_deref());
                }
                let _ = reply.send(r);
            }
            SimCommand::Resume {
                zone_id,
                create,
                player,
                principal,
                version,
                resume_from,
                conn,
                reply,
            } => {
                let started = match self.start_carried(&zone_id, create) {
                    Ok(started) => started,
                    Err(e) => {
                        let _ = reply.send(Err(e));
                        return false;
                    }
                };
                let r = match self.zones.get_mut(&zone_id) {
                    Some(z) => {
                        let r = z.resume(&self.ctx, player, &principal, version, resume_from, conn);
                        if started && r.is_ok() {
                            // The player waits on this zone: its BASELINE comes from a tick now.
                            z.host.tick_at_once();
                        }
                        r
                    }
                    None if self.draining => Err(JoinFailure::ShuttingDown),
                    None => Err(JoinFailure::ReconnectRefused("zone is not running".into())),
                };
                let _ = reply.send(r);
            }
            SimCommand::TransferIn {
                zone_id,
                create,
                record,
                character,
                reply,
            } => {
                if let Err(e) = self.start_carried(&zone_id, create) {
                    let _ = reply.send(Err(e));
                    return false;
                }
                let r = match self.zones.get_mut(&zone_id) {
                    Some(z) => z.transfer_in(&self.ctx, &record, character),
                    None => Err(self.unavailable("zone is not running".into())),
                };
                let _ = reply.send(r);
            }
            SimCommand::TransferCancel { zone_id, player } => {
                if let Some(z) = self.zones.get_mut(&zone_id) {
                    z.transfer_cancel(&self.ctx, player);
                }
            }
            SimCommand::TransferResolved {
                zone_id,
                player,
                resolution,
            } => {
                if let Some(z) = self.zones.get_mut(&zone_id) {
                    z.transfer_resolved(&self.ctx, player, resolution);
                }
            }
            SimCommand::Arrive {
                zone_id,
                create,
                record,
                principal,
                version,
                conn,
                character,
                reply,
            } => {
                let started = match self.start_carried(&zone_id, create) {
                    Ok(started) => started,
                    Err(e) => {
                        let _ = reply.send(Err(e));
                        return false;
                    }
                };
                let r = match self.zones.get_mut(&zone_id) {
                    Some(z) => {
                        let r = z.arrive(&self.ctx, &record, &principal, version, conn, character);
                        if started && r.is_ok() {
                            z.host.tick_at_once();
                        }
                        r
                    }
                    None if self.draining => Err(JoinFailure::ShuttingDown),
                    None => Err(self.unavailable("zone is not running".into())),
                };
                let _ = reply.send(r);
            }
            SimCommand::Disconnected {
                zone_id,
                player,
                conn_id,
            } => {
                if let Some(z) = self.zones.get_mut(&zone_id) {
                    z.disconnected(&self.ctx, player, conn_id);
                }
            }
            SimCommand::Resync {
                zone_id,
                player,
                conn_id,
            } => {
                if let Some(z) = self.zones.get_mut(&zone_id) {
                    z.resync(&self.ctx, player, conn_id);
                }
            }
            SimCommand::RoundTrip {
                zone_id,
                player,
                conn_id,
                rtt,
            } => {
                if let Some(z) = self.zones.get_mut(&zone_id) {
                    z.round_trip(player, conn_id, rtt);
                }
            }
            SimCommand::Create {
                zone_id,
                create,
                reply,
            } => {
                let r = self
                    .start(&zone_id, create)
                    .map_err(AdminFailure::Unavailable);
                let _ = reply.send(r);
            }
            SimCommand::Inspect { zone_id, reply } => {
                let z = self
                    .zones
                    .get(&zone_id)
                    .or_else(|| self.frozen.get(&zone_id));
                let _ = reply.send(z.map(ZoneRun::detail));
            }
            SimCommand::RecallCharacter {
                zone_id,
                principal,
                done,
            } => match self.zones.get_mut(&zone_id) {
                Some(z) => z.recall(&self.ctx, &principal, done),
                // Not here (any more): nothing of it to give back from this thread.
                None => {
                    let _ = done.send(false);
                }
            },
            SimCommand::Kick {
                zone_id,
                player,
                reason,
                reply,
            } => {
                let r = match self.zones.get_mut(&zone_id) {
                    None => Err(AdminFailure::NoZone(zone_id)),
                    Some(z) => {
                        if z.kick(&self.ctx, player, &reason) {
                            Ok(())
                        } else {
                            Err(AdminFailure::NoPlayer(player.0))
                        }
                    }
                };
                let _ = reply.send(r);
            }
            SimCommand::Stop {
                zone_id,
                force,
                reply,
            } => {
                let lasting = self.zones.get(&zone_id).is_some_and(|z| z.lasting());
                let r = if lasting && !force {
                    Err(AdminFailure::Lasting(zone_id))
                } else if let Some(mut z) = self.zones.remove(&zone_id) {
                    if lasting {
                        tracing::warn!(target: "zonekeep::audit", zone = %zone_id, "a lasting world was stopped by force (admin)");
                    }
                    z.teardown(
                        &self.ctx,
                        KickCode::ZONE_STOPPED,
                        "the zone was stopped",
                        Unload::Hibernate,
                    );
                    self.ctx.metrics.release_zone(z.metrics);
                    self.ctx
                        .lifecycle
                        .ended(&zone_id, "stopped", "by an operator");
                    Ok(())
                } else {
                    Err(AdminFailure::NoZone(zone_id))
                };
                let _ = reply.send(r);
            }
            SimCommand::Record {
                zone_id,
                limits,
                reply,
            } => {
                let r = match self.zones.get_mut(&zone_id) {
                    None => Err(AdminFailure::NoZone(zone_id)),
                    Some(z) => z
                        .start_recording(&self.ctx, limits)
                        .map_err(AdminFailure::BadRequest),
                };
                let _ = reply.send(r);
            }
            SimCommand::StopRecording { zone_id, reply } => {
                let r = match self.zones.get_mut(&zone_id) {
                    None => Err(AdminFailure::NoZone(zone_id)),
                    Some(z) => {
                        z.stop_recording();
                        Ok(())
                    }
                };
                let _ = reply.send(r);
            }
            SimCommand::Freeze { reply } => {
                let _ = reply.send(self.freeze());
            }
            SimCommand::FreezeZone {
                zone_id,
                drain,
                reply,
            } => {
                if drain {
                    self.draining = true;
                }
                if self.zones.contains_key(&zone_id) {
                    self.freeze_after_tick.push((zone_id, reply));
                } else {
                    let _ = reply.send(None);
                }
            }
            SimCommand::Release {
                zone_id,
                moved,
                done,
            } => {
                if let Some(mut z) = self.frozen.remove(&zone_id) {
                    let (code, reason) = if moved {
                        (KickCode::ZONE_MOVED, MOVED)
                    } else {
                        (KickCode::SHUTTING_DOWN, RESTARTING)
                    };
                    z.release(&self.ctx, code, reason);
                    self.ctx.metrics.release_zone(z.metrics);
                    let to = if moved {
                        "moved to another host"
                    } else {
                        "before a restart"
                    };
                    self.ctx.lifecycle.ended(&zone_id, "released", to);
                }
                let _ = done.send(());
            }
            SimCommand::Shutdown { reply } => {
                self.shutdown_all();
                let _ = reply.send(());
                return true;
            }
            // The loop looks at every zone (lease included) right after this.
            SimCommand::Wake => {}
            SimCommand::Upgrade { kind, reply } => {
                let upgraded = self
                    .zones
                    .values_mut()
                    .filter(|z| z.host.kind() == kind)
                    .map(|z| z.upgrade(&self.ctx))
                    .collect();
                let _ = reply.send(upgraded);
            }
        }
        false
    }

    /// A join or start that finds no running zone: during shutdown the client
    /// is told so (and reconnects), otherwise the zone is unavailable.
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

    fn unavailable(&self, why: String) -> JoinFailure {
        if self.draining {
            JoinFailure::ShuttingDown
        } else {
            JoinFailure::Unavailable(why)
        }
    }

    /// Stop ticking every zone and queue its final save; nothing more is
    /// acknowledged to their clients, who stay attached until the save is durable.
    fn freeze(&mut self) -> Vec<FrozenZone> {
        self.draining = true;
        // Whoever waited for one of these alone has given up (the drain freezes the rest at once
        // only after its zone-by-zone pass); the zones are in this freeze's answer.
        for (_, reply) in std::mem::take(&mut self.freeze_after_tick) {
            let _ = reply.send(None);
        }
        let zones = std::mem::take(&mut self.zones);
        zones
            .into_iter()
            .map(|(id, z)| self.freeze_one(id, z))
            .collect()
    }

    /// Freezes the zones waiting for their next tick that have just run it, so their clients'
    /// last Delta is as recent as the freeze (the game stands still for them only from here).
    /// Zones that were fenced or went dormant meanwhile are answered `None`: nothing of them is
    /// left to hand over.
    fn freeze_stepped(&mut self, stepped: &[String], fenced: &[String], unload: &[String]) {
        let waiting = std::mem::take(&mut self.freeze_after_tick);
        for (id, reply) in waiting {
            if fenced.contains(&id) || unload.contains(&id) {
                let _ = reply.send(None);
            } else if stepped.contains(&id) {
                let frozen = self.zones.remove(&id).map(|z| self.freeze_one(id, z));
                let _ = reply.send(frozen);
            } else {
                self.freeze_after_tick.push((id, reply));
            }
        }
    }

    /// Stop ticking one zone (already taken out of the running ones) and queue its final save;
    /// it stays, frozen, with its clients attached until it is released.
    fn freeze_one(&mut self, id: String, mut z: ZoneRun) -> FrozenZone {
        let save = z.queue_final_save(&self.ctx, Unload::Shutdown);
        self.frozen.insert(id.clone(), z);
        FrozenZone {
            zone_id: id,
            thread: self.index,
            save,
        }
    }

    /// The end of the thread: zones still frozen (their saves were not
    /// confirmed in time) and zones never frozen are kicked and disposed.
    fn shutdown_all(&mut self) {
        for (_, mut z) in std::mem::take(&mut self.frozen) {
            z.release(&self.ctx, KickCode::SHUTTING_DOWN, RESTARTING);
            self.ctx.metrics.release_zone(z.metrics);
        }
        for (_, mut z) in std::mem::take(&mut self.zones) {
            z.teardown(
                &self.ctx,
                KickCode::SHUTTING_DOWN,
                RESTARTING,
                Unload::Shutdown,
            );
            self.ctx.metrics.release_zone(z.metrics);
        }
    }
}
