//! Each host's report of the lobby rooms it runs: about once a second, every running zone that
//! is a room has its players and observers, the principals present and what the zone published
//! ([`zonekeep_core::Ctx::publish_listing`]) written to the store under the zone's owner epoch (a host that lost the zone writes nothing).
//! Off the tick: it reads what each zone already publishes for the admin API, never waking a
//! simulation thread. Every so often it also forgets rooms idle past the host's limit.
//!
//! Which running zones are rooms is learnt from the store's answers: a zone reported once and
//! found not to be a room is not reported again until it restarts here.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use zonekeep_store::RoomReport;

use crate::host::Shared;

/// How often a host reports its rooms.
pub(crate) const REPORT_EVERY: Duration = Duration::from_secs(1);
/// Rounds between sweeps of lapsed reservations and idle rooms (by every host; sweeping twice is
/// harmless): a lapsed reservation's seat is free again within this many seconds of its expiry.
const FORGET_EVERY: u32 = 5;

/// Runs until the host stops.
pub(crate) async fn run(shared: Arc<Shared>) {
    let Some(persist) = shared.sim.persist.clone() else {
        return;
    };
    let store = persist.store().clone();
    let stop = shared.fleet_stop.clone();
    let mut not_rooms: HashSet<(String, u64)> = HashSet::new();
    let mut every = tokio::time::interval(REPORT_EVERY);
    every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut round: u32 = 0;
    loop {
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = every.tick() => {}
        }
        round = round.wrapping_add(1);
        let reports: Vec<RoomReport> = shared
            .registry
            .lobby_views()
            .into_iter()
            .filter(|v| !not_rooms.contains(&(v.zone_id.clone(), v.epoch)))
            .map(|v| RoomReport {
                zone_id: v.zone_id,
                epoch: v.epoch,
                players: v.players,
                observers: v.observers,
                present: v.present.to_vec(),
                open: v.listing.as_ref().map(|l| l.open),
                metadata: v.listing.map(|l| l.metadata),
            })
            .collect();
        if !reports.is_empty() {
            match tokio::time::timeout(REPORT_EVERY * 5, store.lobby.report_rooms(&reports)).await {
                Ok(Ok(out)) => {
                    let rooms: HashSet<&str> = out.rooms.iter().map(String::as_str).collect();
                    let fenced: HashSet<&str> = out.fenced.iter().map(String::as_str).collect();
                    for r in &reports {
                        if !rooms.contains(r.zone_id.as_str())
                            && !fenced.contains(r.zone_id.as_str())
                        {
                            not_rooms.insert((r.zone_id.clone(), r.epoch));
                        }
                    }
                    shared.metrics.lobby().reported(out.rooms.len() as u64);
                }
                Ok(Err(e)) => {
                    shared.metrics.lobby().report_failed();
                    tracing::warn!(error = %e, "lobby rooms not reported");
                }
                Err(_) => {
                    shared.metrics.lobby().report_failed();
                    tracing::warn!("lobby rooms not reported: the store did not answer in time");
                }
            }
        }
        // Forget what no running zone is any more.
        let running: HashSet<String> = shared.registry.zone_ids().into_iter().collect();
        not_rooms.retain(|(z, _)| running.contains(z));
        if round.is_multiple_of(FORGET_EVERY) {
            let idle = shared.config.lobby_room_idle_secs.saturating_mul(1000);
            match store.lobby.forget_idle_rooms(idle).await {
                Ok(0) => {}
                Ok(n) => tracing::info!(rooms = n, "forgot idle lobby rooms"),
                Err(e) => tracing::warn!(error = %e, "idle lobby rooms not forgotten"),
            }
        }
    }
}
