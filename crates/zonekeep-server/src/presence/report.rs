//! Each host's presence writes: about once a second, who is a participant of each zone it runs
//! (what the zones already publish for the lobby's reports; no simulation thread is woken) is
//! compared with what this host wrote last, and the differences are written to the store in
//! batches: a join for each newcomer, a leave for each principal gone (left, moved, or its
//! reconnect grace ended). A batch that fails is written again next round, and a new
//! incarnation of the host (the database counted the old one dead) writes everything again.
//! Every minute it also sweeps rows no longer live. A round in which no zone's participants
//! changed (each zone publishes a new list only when they do) and nothing is left to write costs
//! a look at each zone, not a walk of every participant: a crowd of thousands watching a zone
//! costs nothing here while it stays.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use zonekeep_store::{PresenceChange, PresenceEvent, MAX_PRESENCE_BATCH};

use crate::fleet::Fleet;
use crate::host::Shared;
use crate::sim::LobbyView;

/// How often a host writes its presence changes.
pub(crate) const REPORT_EVERY: Duration = Duration::from_secs(1);
/// Rounds between sweeps of rows no longer live (by every host; sweeping twice is harmless).
const SWEEP_EVERY: u32 = 60;

type Here = BTreeSet<(String, String)>;

/// Who is in which zone on this host now: (principal, zone id).
fn here_now(views: &[LobbyView]) -> Here {
    let mut out = Here::new();
    for v in views {
        for p in v.present.iter() {
            out.insert((p.clone(), v.zone_id.clone()));
        }
    }
    out
}

/// Whether `views` hold the same zones with the same published lists as `seen`.
fn same_lists(seen: &[LobbyView], views: &[LobbyView]) -> bool {
    seen.len() == views.len()
        && seen
            .iter()
            .zip(views)
            .all(|(a, b)| a.zone_id == b.zone_id && Arc::ptr_eq(&a.present, &b.present))
}

/// The changes from `written` to `now`, leaves first (a principal moving between two zones of
/// this host is briefly in neither rather than in both).
pub(crate) fn diff(written: &Here, now: &Here) -> Vec<PresenceChange> {
    let left = written.difference(now).map(|(p, z)| PresenceChange {
        principal: p.clone(),
        zone_id: z.clone(),
        event: PresenceEvent::Left,
    });
    let joined = now.difference(written).map(|(p, z)| PresenceChange {
        principal: p.clone(),
        zone_id: z.clone(),
        event: PresenceEvent::Joined,
    });
    left.chain(joined).collect()
}

/// Runs until the host leaves the fleet.
pub(crate) async fn run(shared: Arc<Shared>, fleet: Arc<Fleet>) {
    let Some(persist) = shared.sim.persist.clone() else {
        return;
    };
    let store = persist.store().clone();
    let stop = shared.fleet_stop.clone();
    let dead_after_ms = u64::try_from(fleet.timing.dead_after.as_millis()).unwrap_or(u64::MAX);
    let mut written = Here::new();
    // The lists the last round read, and whether everything they hold was written.
    let mut seen: Vec<LobbyView> = Vec::new();
    let mut settled = false;
    let mut incarnation = String::new();
    let mut every = tokio::time::interval(REPORT_EVERY);
    every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut round: u32 = 0;
    loop {
        tokio::select! {
            () = stop.cancelled() => return,
            _ = every.tick() => {}
        }
        round = round.wrapping_add(1);
        let inc = fleet.incarnation();
        if inc != incarnation {
            // Rows of the old incarnation are not live any more: write everything again.
            written.clear();
            incarnation = inc;
            settled = false;
        }
        let views = shared.registry.lobby_views();
        let quiet = settled && same_lists(&seen, &views);
        let now = (!quiet).then(|| here_now(&views));
        seen = views;
        if let Some(now) = now {
            settled = write(
                &shared,
                &store,
                &fleet,
                &incarnation,
                dead_after_ms,
                &mut written,
                &now,
            )
            .await;
        }
        if round.is_multiple_of(SWEEP_EVERY) {
            match store.presence.sweep_presence(dead_after_ms).await {
                Ok(0) => {}
                Ok(n) => tracing::debug!(rows = n, "swept presence of dead hosts"),
                Err(e) => tracing::debug!(error = %e, "sweeping presence failed"),
            }
        }
    }
}

/// Writes the changes from `written` to `now` in batches, keeping `written` as the store has it;
/// whether all were written.
async fn write(
    shared: &Shared,
    store: &zonekeep_store::Store,
    fleet: &Fleet,
    incarnation: &str,
    dead_after_ms: u64,
    written: &mut Here,
    now: &Here,
) -> bool {
    let changes = diff(written, now);
    for batch in changes.chunks(MAX_PRESENCE_BATCH) {
        let call = store
            .presence
            .apply_presence(&fleet.host_id, incarnation, batch, dead_after_ms);
        match tokio::time::timeout(REPORT_EVERY * 5, call).await {
            Ok(Ok(())) => {
                for c in batch {
                    let key = (c.principal.clone(), c.zone_id.clone());
                    match c.event {
                        PresenceEvent::Joined => written.insert(key),
                        PresenceEvent::Left => written.remove(&key),
                    };
                }
                shared.metrics.presence().written(batch.len() as u64);
            }
            Ok(Err(e)) => {
                shared.metrics.presence().write_failed();
                tracing::warn!(error = %e, "presence not written; retrying next round");
                return false;
            }
            Err(_) => {
                shared.metrics.presence().write_failed();
                tracing::warn!("presence not written: the store did not answer in time");
                return false;
            }
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(items: &[(&str, &str)]) -> Here {
        items
            .iter()
            .map(|(p, z)| ((*p).to_owned(), (*z).to_owned()))
            .collect()
    }

    #[test]
    fn changes_are_leaves_then_joins() {
        let written = set(&[("ann", "a"), ("bob", "a")]);
        let now = set(&[("ann", "b"), ("bob", "a"), ("cat", "a")]);
        let c = diff(&written, &now);
        let seen: Vec<(&str, &str, PresenceEvent)> = c
            .iter()
            .map(|c| (c.principal.as_str(), c.zone_id.as_str(), c.event))
            .collect();
        assert_eq!(
            seen,
            [
                ("ann", "a", PresenceEvent::Left),
                ("ann", "b", PresenceEvent::Joined),
                ("cat", "a", PresenceEvent::Joined)
            ]
        );
        assert!(diff(&now, &now).is_empty());
    }
}
