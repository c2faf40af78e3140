//! Per-zone stage histograms and work counters (`zonekeep_zone_stage_seconds`,
//! `zonekeep_zone_work_total`), under the same bounded `zone` labels as every zone series.

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;
use zonekeep_core::{Stage, StageDurations};

use super::Labels;

/// Names of the work counters, in `WorkCounters::named` order.
pub const WORK_COUNTERS: [&str; 14] = [
    "ticks",
    "patches",
    "frames",
    "delta_bytes",
    "records_encoded",
    "records_reused",
    "updates_sent",
    "spawns_sent",
    "despawns_sent",
    "updates_held_back",
    "inputs_accepted",
    "inputs_refused",
    "facts_emitted",
    "world_writes",
];

fn stage_histogram() -> Histogram {
    // 1 µs .. ~33 s: a cheap stage of a small zone up to a save on a struggling store.
    Histogram::new(exponential_buckets(0.000_001, 2.0, 26))
}

fn labels(zone: &str, key: &'static str, value: &str) -> Labels {
    vec![("zone", zone.to_owned()), (key, value.to_owned())]
}

/// The families, registered once.
#[derive(Debug, Clone)]
pub(super) struct StageFamilies {
    stage: Family<Labels, Histogram, fn() -> Histogram>,
    work: Family<Labels, Counter>,
}

impl StageFamilies {
    pub(super) fn new(registry: &mut Registry) -> Self {
        let f = Self {
            stage: Family::new_with_constructor(stage_histogram),
            work: Family::default(),
        };
        registry.register(
            "zonekeep_zone_stage_seconds",
            "Time one stage of a zone's work took (summed per advance or patch; save and facts per write and settlement)",
            f.stage.clone(),
        );
        registry.register(
            "zonekeep_zone_work",
            "Work a zone did, in plain counts that do not move with machine load",
            f.work.clone(),
        );
        f
    }

    /// Handles for one zone label.
    pub(super) fn zone(&self, zone: &str) -> ZoneStageMetrics {
        ZoneStageMetrics {
            stages: Stage::ALL
                .iter()
                .map(|s| {
                    self.stage
                        .get_or_create_owned(&labels(zone, "stage", s.name()))
                })
                .collect(),
            work: WORK_COUNTERS
                .iter()
                .map(|w| self.work.get_or_create_owned(&labels(zone, "counter", w)))
                .collect(),
        }
    }

    /// Removes one zone label's series.
    pub(super) fn release(&self, zone: &str) {
        for s in Stage::ALL {
            self.stage.remove(&labels(zone, "stage", s.name()));
        }
        for w in WORK_COUNTERS {
            self.work.remove(&labels(zone, "counter", w));
        }
    }
}

/// One zone's stage histograms and work counters.
#[derive(Debug, Clone, Default)]
pub struct ZoneStageMetrics {
    stages: Vec<Histogram>,
    work: Vec<Counter>,
}

impl ZoneStageMetrics {
    /// Observes every stage that ran.
    pub fn record(&self, durations: &StageDurations) {
        for (stage, took) in durations.iter() {
            let i = Stage::ALL.iter().position(|s| *s == stage);
            if let Some(h) = i.and_then(|i| self.stages.get(i)) {
                h.observe(took.as_secs_f64());
            }
        }
    }

    /// Adds each counter's increase (in [`WORK_COUNTERS`] order).
    pub fn add_work(&self, by: &[(&'static str, u64)]) {
        for (c, (_, n)) in self.work.iter().zip(by) {
            if *n > 0 {
                c.inc_by(*n);
            }
        }
    }
}
