//! Upgrading every running zone of a kind to the kind's current game code: the server side of
//! a module deploy. The caller first makes the new code current (for a module kind, by
//! replacing its module), then asks each simulation thread to rebuild its zones of the kind
//! through their saves (see `ZoneRun::upgrade`); rolling back is the same with the old code.

use std::sync::Arc;
use std::time::Duration;

use serde::Serialize;

use crate::host::Shared;
use crate::sim::{SimCommand, ZoneUpgrade};

/// How long an upgrade waits for a simulation thread's answer.
const THREAD_BOUND: Duration = Duration::from_secs(10);

/// What an upgrade of a kind did, zone by zone.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct UpgradeReport {
    /// Every running zone of the kind, in zone order.
    pub zones: Vec<ZoneUpgrade>,
    /// Simulation threads that did not answer in time (their zones may or may not have moved).
    pub threads_missing: usize,
}

impl UpgradeReport {
    /// Zones that stay on the old code, with why.
    pub fn refused(&self) -> impl Iterator<Item = &ZoneUpgrade> + '_ {
        self.zones.iter().filter(|z| !z.upgraded)
    }

    /// Inputs dropped because they were queued when their zone was frozen.
    pub fn frozen_inputs(&self) -> u64 {
        self.zones.iter().map(|z| z.frozen_inputs).sum()
    }
}

/// A handle that upgrades a host's running zones; cheap to clone and usable from any task.
#[derive(Clone)]
pub struct Upgrader {
    pub(crate) shared: Arc<Shared>,
}

impl std::fmt::Debug for Upgrader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Upgrader").finish_non_exhaustive()
    }
}

impl Upgrader {
    /// Rebuilds every running zone of `kind` into the kind's current game code. Each zone is
    /// frozen, saved and restored between two of its ticks; one whose new code refuses its
    /// save keeps running the old code and is reported with the reason.
    pub async fn upgrade_kind(&self, kind: &str) -> UpgradeReport {
        let mut report = UpgradeReport::default();
        let mut replies = Vec::new();
        for thread in 0..self.shared.pool.threads() {
            let (tx, rx) = tokio::sync::oneshot::channel();
            let cmd = SimCommand::Upgrade {
                kind: kind.to_owned(),
                reply: tx,
            };
            if crate::drain::send(&self.shared, thread, cmd, THREAD_BOUND).await {
                replies.push(rx);
            } else {
                report.threads_missing += 1;
            }
        }
        for rx in replies {
            match tokio::time::timeout(THREAD_BOUND, rx).await {
                Ok(Ok(zones)) => report.zones.extend(zones),
                _ => report.threads_missing += 1,
            }
        }
        report.zones.sort_by(|a, b| a.zone.cmp(&b.zone));
        report
    }

    /// A new version of `kind` was installed on this host (a module deploy, or a rollback to the
    /// old code): forgets the failures of the kind's zones — failed while running, or unable to
    /// start with the code they had — so they may start again, with the code now current, when
    /// next joined, created or assigned here. Returns the zones whose failures were forgotten.
    /// Call it once the new code is current, before or after [`upgrade_kind`](Self::upgrade_kind).
    pub fn kind_deployed(&self, kind: &str) -> Vec<String> {
        let shared = &self.shared;
        let mut forgotten = shared.registry.remove_failed_kind(kind);
        if let Some(p) = &shared.sim.persist {
            for f in p.failures().all().into_iter().filter(|f| f.kind == kind) {
                p.failures().clear(&f.zone_id);
                if !forgotten.contains(&f.zone_id) {
                    forgotten.push(f.zone_id);
                }
            }
        }
        if !forgotten.is_empty() {
            tracing::info!(%kind, zones = ?forgotten, "a new version of the kind was deployed: its failed zones may start again");
        }
        forgotten
    }
}
