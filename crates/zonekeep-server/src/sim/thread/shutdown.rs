//! A simulation thread's part in the host's shutdown: its zones frozen (all at once, or one right
//! after its next tick), their final saves queued while their clients stay attached, and at the
//! thread's end whatever is left kicked and disposed.

use zonekeep_protocol::messages::KickCode;

use super::{SimThread, RESTARTING};
use crate::persist::Unload;
use crate::sim::zone_run::ZoneRun;
use crate::sim::FrozenZone;

impl SimThread {
    /// Stop ticking every zone and queue its final save; nothing more is
    /// acknowledged to their clients, who stay attached until the save is durable.
    pub(super) fn freeze(&mut self) -> Vec<FrozenZone> {
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
    pub(super) fn freeze_stepped(
        &mut self,
        stepped: &[String],
        fenced: &[String],
        unload: &[String],
    ) {
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
    pub(super) fn shutdown_all(&mut self) {
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
