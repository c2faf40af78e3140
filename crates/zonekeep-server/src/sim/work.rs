//! A zone's work counters: plain counts of what it did that do not move with the machine's
//! load, so two builds can be compared exactly on the same workload (the admin API's `work`,
//! `zonekeep_zone_work_total`).

use serde::Serialize;
use zonekeep_core::replicate::BuildStats;
use zonekeep_core::AdvanceReport;

/// What a zone did since it started on this host (and in its last patch).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct WorkCounters {
    /// Ticks simulated.
    pub ticks: u64,
    /// Patches built.
    pub patches: u64,
    /// Frames (Deltas and States) built.
    pub frames: u64,
    /// Bytes of those frames.
    pub delta_bytes: u64,
    /// Update records and spawn bodies encoded.
    pub records_encoded: u64,
    /// Update records and spawn bodies copied from another subscriber's encoding.
    pub records_reused: u64,
    /// Update records sent.
    pub updates_sent: u64,
    /// Spawns sent.
    pub spawns_sent: u64,
    /// Despawns sent.
    pub despawns_sent: u64,
    /// Updates and spawns held back for a later patch by a byte budget.
    pub updates_held_back: u64,
    /// Inputs applied (accepted and buffered).
    pub inputs_accepted: u64,
    /// Inputs refused by the zone's `sanitize`.
    pub inputs_refused: u64,
    /// Facts the zone emitted.
    pub facts_emitted: u64,
    /// World writes: spawns, despawns and field changes.
    pub world_writes: u64,
}

impl WorkCounters {
    /// Counts world writes: the world's version went from `before` to `after`.
    pub fn wrote(&mut self, before: u64, after: u64) {
        self.world_writes += after.saturating_sub(before);
    }

    /// Every counter with its name, as `/metrics` labels them.
    pub fn named(&self) -> [(&'static str, u64); 14] {
        [
            ("ticks", self.ticks),
            ("patches", self.patches),
            ("frames", self.frames),
            ("delta_bytes", self.delta_bytes),
            ("records_encoded", self.records_encoded),
            ("records_reused", self.records_reused),
            ("updates_sent", self.updates_sent),
            ("spawns_sent", self.spawns_sent),
            ("despawns_sent", self.despawns_sent),
            ("updates_held_back", self.updates_held_back),
            ("inputs_accepted", self.inputs_accepted),
            ("inputs_refused", self.inputs_refused),
            ("facts_emitted", self.facts_emitted),
            ("world_writes", self.world_writes),
        ]
    }

    /// Counts one advance: its ticks and inputs.
    pub fn advanced(&mut self, report: &AdvanceReport) {
        self.ticks += report.ticks_run;
        self.inputs_accepted += report.inputs.accepted;
        self.inputs_refused += report.inputs.refused;
    }

    /// Counts one patch.
    pub fn built(&mut self, b: &BuildStats) {
        self.patches += 1;
        self.frames += b.frames;
        self.delta_bytes += b.bytes;
        self.records_encoded += b.encodings;
        self.records_reused += b.cache_hits;
        self.updates_sent += b.updates;
        self.spawns_sent += b.spawns;
        self.despawns_sent += b.despawns;
        self.updates_held_back += b.deferred;
    }

    /// The difference since `earlier`, counter by counter.
    pub fn since(&self, earlier: &WorkCounters) -> WorkCounters {
        let (a, b) = (self.named(), earlier.named());
        let d = |i: usize| a[i].1.saturating_sub(b[i].1);
        WorkCounters {
            ticks: d(0),
            patches: d(1),
            frames: d(2),
            delta_bytes: d(3),
            records_encoded: d(4),
            records_reused: d(5),
            updates_sent: d(6),
            spawns_sent: d(7),
            despawns_sent: d(8),
            updates_held_back: d(9),
            inputs_accepted: d(10),
            inputs_refused: d(11),
            facts_emitted: d(12),
            world_writes: d(13),
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn a_patch_and_an_advance_add_up_and_differences_come_back() {
        let mut w = WorkCounters::default();
        let before = w;
        w.built(&BuildStats {
            frames: 3,
            bytes: 120,
            updates: 7,
            spawns: 2,
            encodings: 5,
            cache_hits: 4,
            deferred: 1,
            ..BuildStats::default()
        });
        let mut report = AdvanceReport {
            ticks_run: 2,
            ..AdvanceReport::default()
        };
        report.inputs.accepted = 6;
        report.inputs.refused = 1;
        w.advanced(&report);
        let d = w.since(&before);
        assert_eq!(d, w);
        assert_eq!(
            (
                d.patches,
                d.frames,
                d.delta_bytes,
                d.records_encoded,
                d.records_reused
            ),
            (1, 3, 120, 5, 4)
        );
        assert_eq!(
            (d.updates_sent, d.spawns_sent, d.updates_held_back),
            (7, 2, 1)
        );
        assert_eq!((d.ticks, d.inputs_accepted, d.inputs_refused), (2, 6, 1));
        assert_eq!(w.since(&w), WorkCounters::default());
    }
}
