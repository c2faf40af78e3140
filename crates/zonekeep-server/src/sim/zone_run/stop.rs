//! How a zone stops on its thread: saved and disposed (unloaded, stopped, shut down), failed
//! (its game code failed), halted (a lasting world whose saves failed), or fenced (another host
//! owns it now, or this host's lease lapsed) — and what tells the thread it must.

use zonekeep_protocol::messages::KickCode;

use super::ZoneRun;
use crate::persist::{FinalSave, Unload, ZonePersist};
use crate::sim::SimContext;

impl ZoneRun {
    /// Queue the final save, kick every connection with `code` and dispose
    /// (hibernation, admin stop). The save is queued before the zone leaves
    /// the registry, so a join that recreates it finds the save pending and
    /// waits for it (`ZoneLoader::claim`).
    pub fn teardown(&mut self, ctx: &SimContext, code: KickCode, reason: &str, why: Unload) {
        self.queue_final_save(ctx, why);
        self.release(ctx, code, reason);
    }

    /// The zone's last act as a live zone: last facts handed to the fact
    /// queue, final snapshot queued, the dispose hook run. The caller stops
    /// ticking the zone from here on, so no input is acknowledged after the
    /// state this save holds. Says what became of the final snapshot.
    pub fn queue_final_save(&mut self, ctx: &SimContext, why: Unload) -> FinalSave {
        let mut save = FinalSave::NotPersisted;
        if let Some(p) = self.persist.take() {
            save = p.unload(&mut self.host, why);
            tracing::info!(zone = %self.entry.zone_id, save = ?save, facts_in_flight = self.host.facts_in_flight(), "zone frozen; final save queued");
        }
        if let Some(hook) = &ctx.dispose_hook {
            hook(&self.entry.zone_id, &mut self.host);
        }
        save
    }

    /// Kick every connection with `code` and dispose the zone.
    pub fn release(&mut self, ctx: &SimContext, code: KickCode, reason: &str) {
        self.host.dispose();
        self.leave_bus(ctx, true);
        self.pump_recording();
        ctx.reconnect.forget_zone(&self.entry.zone_id);
        ctx.registry.remove(&self.entry);
        // Clients are told last, so one that hears the Kick and looks at the host finds the zone
        // already gone.
        for (_, sub) in std::mem::take(&mut self.subs) {
            if let Some(c) = sub.conn {
                c.kick(code, reason);
            }
        }
    }

    /// The zone's game code failed with `reason` (see
    /// [`ZoneHost::failure`](zonekeep_core::ZoneHost::failure)): its players are kicked with
    /// ZONE_STOPPED and the reason, no final save is written (the last good one stays), and the
    /// failure is listed by the admin API, and refuses joins, until an operator removes it.
    pub fn fail(&mut self, ctx: &SimContext, reason: &str) {
        let failed = crate::sim::FailedZone {
            id: self.entry.zone_id.clone(),
            kind: self.host.kind().to_owned(),
            reason: reason.to_owned(),
            tick: self.host.tick(),
            at_start: false,
            at_ms: crate::sim::registry::now_ms(),
        };
        if ctx.registry.mark_failed(failed) {
            tracing::warn!("more failed zones than the host remembers: the oldest was forgotten");
        }
        ctx.metrics.zone_failed();
        if let Some(p) = self.persist.take() {
            p.fail(&mut self.host);
        }
        self.release(
            ctx,
            KickCode::ZONE_STOPPED,
            &format!("zone failed: {reason}"),
        );
    }

    /// For a lasting world: how long its newest state has waited unsaved, once that passed its
    /// bound (see [`ZonePersist::storage_lost`]); the world must halt.
    pub fn storage_lost(&self) -> Option<std::time::Duration> {
        self.persist.as_ref().and_then(ZonePersist::storage_lost)
    }

    /// The lasting world halts because its saves failed for `unsaved` (see
    /// [`crate::halt`]): no final save, the snapshot still waiting is dropped, its players are
    /// kicked with WORLD_HALTED, and the host's resumer starts it again from its last committed
    /// save once the store answers.
    pub fn halt(&mut self, ctx: &SimContext, unsaved: std::time::Duration) {
        let status = self.persist.as_ref().and_then(|p| p.save_status());
        let world = crate::halt::HaltedWorld::new(
            &self.entry.zone_id,
            self.host.kind(),
            self.host.init().params.clone(),
            self.host.tick(),
            status.as_ref().map_or(0, |s| s.epoch),
            status.as_ref().and_then(|s| s.last_saved_seq),
            unsaved,
            status.as_ref().and_then(|s| s.last_error.as_deref()),
        );
        let message = world.message();
        ctx.lifecycle.halted(
            &self.entry.zone_id,
            world.tick,
            world.last_saved_seq,
            &world.reason,
        );
        if let Some(p) = self.persist.take() {
            p.halt();
        }
        // Recorded before the players hear it, so one that retries at once is refused with it.
        if ctx.halts.halt(world) {
            tracing::warn!("more halted worlds than the host remembers: the oldest was forgotten");
        }
        self.release(ctx, KickCode::WORLD_HALTED, &message);
    }

    /// The zone leaves the bus on this host; with `carry`, what it still sent (the Dormant tier
    /// message of an unloading zone) goes out first.
    fn leave_bus(&mut self, ctx: &SimContext, carry: bool) {
        let Some(bus) = ctx.bus.get() else {
            return;
        };
        if carry {
            crate::bus::ZoneBus::carry(bus, &self.entry.zone_id, &mut self.host);
        }
        if let Some(zb) = self.bus.take() {
            zb.unbind(bus);
        }
    }

    /// Whether the store refused a save or fact of this zone's owner epoch:
    /// another host claimed it, and it must stop here at once.
    pub fn fenced(&self) -> bool {
        self.persist.as_ref().is_some_and(ZonePersist::fenced)
    }

    /// Whether the zone stops because this host's lease lapsed (rather than
    /// because the store refused one of its writes).
    pub fn lease_ended(&self) -> bool {
        self.persist.as_ref().is_some_and(ZonePersist::lease_ended)
    }

    /// This host may not act for the zone any more — another host claimed it,
    /// or this host's lease lapsed: stop it without writing anything more (no
    /// final save, no dispose hook, no further facts) and tell every client to
    /// resume elsewhere (HOST_FENCED: both SDKs resume through their entry URL,
    /// which leads to the zone's owner). A zone another host claimed is marked
    /// fenced before it leaves the registry, so no join can slip in and claim
    /// it back; one stopped by a lapse may be claimed here again once the lease
    /// holds (with a new epoch).
    pub fn unload_fenced(&mut self, ctx: &SimContext) {
        let zone_id = self.entry.zone_id.clone();
        let lapsed = self.lease_ended();
        let forgot = !lapsed && ctx.registry.mark_fenced(&zone_id);
        let reason = if lapsed {
            "this host lost its lease on the zone; resume elsewhere"
        } else {
            "the zone moved to another host; resume there"
        };
        if let Some(p) = self.persist.take() {
            p.discard();
        }
        if let Some(p) = &ctx.persist {
            p.metrics().zones_fenced.inc();
            if forgot {
                p.metrics().fenced_zones_forgotten.inc();
            }
        }
        self.host.dispose();
        // Fenced: the new owner sends what this run would have (from its save); nothing leaves.
        self.leave_bus(ctx, false);
        self.pump_recording();
        ctx.reconnect.forget_zone(&zone_id);
        ctx.registry.remove(&self.entry);
        // Clients are told last, so one that hears HOST_FENCED and looks at the host (its admin
        // API, its metrics) finds the zone already gone and counted.
        for (_, sub) in std::mem::take(&mut self.subs) {
            if let Some(c) = sub.conn {
                c.kick(KickCode::HOST_FENCED, reason);
            }
        }
    }

    /// Whether the zone is a lasting world ([`zonekeep_core::ZoneConfig::lasting`]).
    pub fn lasting(&self) -> bool {
        self.host.config().lasting
    }

    /// Why the zone's game code failed, once it has
    /// ([`ZoneHost::failure`](zonekeep_core::ZoneHost::failure)).
    pub fn failure(&self) -> Option<&str> {
        self.host.failure()
    }
}
