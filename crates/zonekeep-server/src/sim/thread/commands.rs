//! What a simulation thread does with each command it is sent: joins, resumes and moves into
//! its zones, a connection's notices, and the admin's and the host's requests.

use zonekeep_protocol::messages::KickCode;

use super::{SimThread, MOVED, RESTARTING};
use crate::persist::Unload;
use crate::sim::zone_run::{Admission, ZoneRun};
use crate::sim::{AdminFailure, JoinFailure, SimCommand};

impl SimThread {
    /// Handle one command; true means "stop the thread".
    pub(super) fn handle(&mut self, cmd: SimCommand) -> bool {
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
}
