//! What the admin API reads of a running zone: its participants with their connections, its
//! stage times and its work counters.

use std::time::Duration;

use zonekeep_core::Role;

use super::{Sub, ZoneRun};
use crate::sim::registry::{PlayerSummary, StageDetail, ZoneDetail};
use crate::sim::work::WorkCounters;

fn micros(d: Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX)
}

impl ZoneRun {
    /// The zone's detail for `GET /admin/zones/{id}`.
    pub fn detail(&self) -> ZoneDetail {
        let summary = self
            .entry
            .summary
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        let participants = self
            .host
            .players()
            .map(|p| {
                let sub = self.subs.get(&p.id);
                let conn = sub.and_then(|s| s.conn.as_ref());
                PlayerSummary {
                    id: p.id.0,
                    principal: p.principal.as_str().to_owned(),
                    name: p
                        .claims
                        .get("name")
                        .and_then(|n| n.as_str())
                        .map(str::to_owned),
                    role: match p.role {
                        Role::Player => "player",
                        Role::Observer => "observer",
                    },
                    connected: p.connected,
                    ack: self.host.last_processed_seq(p.id),
                    transport: conn.map(|c| c.transport().name()),
                    bytes_out: sub.map_or(0, Sub::bytes_out),
                    bytes_out_per_s: sub.map_or(0, |s| s.bytes_per_s),
                    rtt_ms: sub
                        .and_then(|s| s.rtt)
                        .filter(|_| conn.is_some())
                        .map(|r| (r.as_secs_f64() * 1_000_000.0).round() / 1_000.0),
                }
            })
            .collect();
        let stages = self
            .host
            .stage_times()
            .summaries()
            .into_iter()
            .map(|s| StageDetail {
                stage: s.stage.name(),
                count: s.count,
                p50_us: micros(s.p50),
                p95_us: micros(s.p95),
                max_us: micros(s.max),
            })
            .collect();
        let mut last_patch = WorkCounters::default();
        last_patch.built(&self.host.last_build_stats());
        last_patch.patches = 0;
        ZoneDetail {
            summary,
            participants,
            persistence: self.persist.as_ref().map(|p| p.detail(&self.host)),
            stages,
            work: self.work,
            last_patch,
        }
    }
}
