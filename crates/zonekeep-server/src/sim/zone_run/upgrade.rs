//! Upgrading a running zone to its kind's current game code (a new module version) at a tick
//! boundary: save, restore into the new code, carry the connections over.

use std::time::Instant;

use serde::Serialize;
use zonekeep_protocol::messages::KickCode;

use super::ZoneRun;
use crate::sim::SimContext;

/// What a refused upgrade tells the developer to do (docs/MODULES.md, "Hot deploys need save and
/// restore").
const HOT_DEPLOYABLE: &str = "to be hot-deployable, a kind's code implements save and restore \
     (Zone::save and Zone::restore in the guest SDK), and its restore reads the saves of the \
     version it replaces";

/// What became of one zone in an upgrade of its kind.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ZoneUpgrade {
    /// Zone id.
    pub zone: String,
    /// True when the zone runs the new code now; false when it stays on the code it had.
    pub upgraded: bool,
    /// Why it stays on the old code (its new code refused its save, or it keeps no save).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub refused: Option<String>,
    /// Inputs accepted but not yet applied when the zone was frozen: a save leaves them out,
    /// so they are dropped (the client's prediction corrects itself from the next Delta).
    pub frozen_inputs: u64,
    /// Connections carried over to the new code, still connected (their next frame is a
    /// BASELINE).
    pub kept: u32,
    /// Connections told to resume (ZONE_MOVED) because the new code's entity schema differs
    /// from the one their Welcome announced.
    pub resumed: u32,
    /// How long the zone was frozen: from its save to running in the new code (or back on the
    /// old one), in microseconds. Its simulation thread did nothing else meanwhile.
    pub frozen_us: u64,
}

impl ZoneRun {
    /// Rebuilds the zone from its save through the kind's current factory (the freeze barrier
    /// of a module deploy: nothing ticks between the save and the restore, both happen here at
    /// a tick boundary). When the new code refuses the save the zone stays as it was. When the
    /// entity schema is unchanged, every connection stays connected and gets a BASELINE of the
    /// rebuilt world; otherwise each is told to resume, and gets the new schema in its Welcome.
    pub fn upgrade(&mut self, ctx: &SimContext) -> ZoneUpgrade {
        let started = Instant::now();
        let mut report = ZoneUpgrade {
            zone: self.entry.zone_id.clone(),
            upgraded: false,
            refused: None,
            frozen_inputs: 0,
            kept: 0,
            resumed: 0,
            frozen_us: 0,
        };
        let frozen_us = || u64::try_from(started.elapsed().as_micros()).unwrap_or(u64::MAX);
        let Some(envelope) = self.host.snapshot() else {
            report.refused = Some(format!(
                "the zone's code keeps no save, so its state cannot be carried into the new code; {HOT_DEPLOYABLE}"
            ));
            report.frozen_us = frozen_us();
            return report;
        };
        let mut next = match ctx.kinds.restore(
            self.host.init().clone(),
            self.host.config().clone(),
            ctx.clock.clone(),
            self.host.boot_epoch(),
            &envelope,
        ) {
            Ok(next) => next,
            Err(e @ zonekeep_core::RestoreError::Migration { .. }) => {
                report.refused = Some(format!(
                    "the new code could not carry the zone's save over: {e}; fix the migration \
                     and deploy again"
                ));
                report.frozen_us = frozen_us();
                return report;
            }
            Err(e) => {
                report.refused = Some(format!(
                    "the new code refused the zone's save ({e}); {HOT_DEPLOYABLE}"
                ));
                report.frozen_us = frozen_us();
                return report;
            }
        };
        // What a tick and a position mean must not change under the zone's saved and predicted
        // state (its clients' clocks and quantized positions): new code asking for another tick
        // rate or position step waits for the zone's restart.
        if let Some(why) = settings_change(self.host.config(), next.config()) {
            report.refused = Some(why);
            report.frozen_us = frozen_us();
            return report;
        }
        report.frozen_inputs = self.host.inputs_queued() as u64;
        // A recording holds the old code's stimuli; it ends here.
        self.stop_recording();
        let same_schema = next.schema() == self.host.schema();
        let grace = next.config().reconnect_grace;
        for (player, sub) in &mut self.subs {
            let Some(conn) = sub.conn.as_ref() else {
                continue; // still within its grace, as it was
            };
            if same_schema && next.handle_rejoin(*player).is_ok() {
                match conn.relay_link() {
                    // Its relay builds its frames on: from the new code's world, whose image
                    // every link gets next.
                    Some(link) => {
                        let _ = next.relay(*player, link.id());
                    }
                    None => next.resync(*player),
                }
                report.kept += 1;
            } else {
                conn.kick(
                    KickCode::ZONE_MOVED,
                    "the zone's game was upgraded; resume to get its new schema",
                );
                sub.conn = None;
                ctx.reconnect
                    .detach(&self.entry.zone_id, *player, Instant::now() + grace);
                report.resumed += 1;
            }
        }
        if !self.relay_links.is_empty() {
            for link in &mut self.relay_links {
                link.starting = true;
            }
            next.want_relay_image();
        }
        if let Some(flag) = next.stop_handle() {
            ctx.interrupts.register(&flag);
        }
        self.host = next;
        // The upgrade point is saved at once: a restart after it (or after a rollback that
        // follows) resumes from here, not from the save before the deploy.
        if let Some(p) = &mut self.persist {
            p.save(&self.host);
        }
        report.upgraded = true;
        report.frozen_us = frozen_us();
        ctx.metrics.zone_upgraded(report.frozen_inputs);
        self.publish();
        report
    }
}

/// Why a zone running with `now` cannot go on under `next` in place: another tick rate or
/// position step. `None`: it can.
fn settings_change(
    now: &zonekeep_core::ZoneConfig,
    next: &zonekeep_core::ZoneConfig,
) -> Option<String> {
    if now.tick_hz != next.tick_hz {
        return Some(format!(
            "the new code runs at {} Hz and this zone at {} Hz; restart the zone to change its tick rate",
            next.tick_hz, now.tick_hz
        ));
    }
    let (a, b) = (now.replication.pos_step, next.replication.pos_step);
    if a.to_bits() != b.to_bits() {
        return Some(format!(
            "the new code's position step is {b} and this zone's {a}; restart the zone to change it"
        ));
    }
    None
}
