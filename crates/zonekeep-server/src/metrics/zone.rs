//! One zone's metric handles ([`ZoneMetrics`]) and the life of its `zone` label: a new zone takes
//! a labelled slot while one is free (else it reports under `_other`), its tier moves the tier
//! gauges, and when it stops its gauge contributions are taken back, its series removed and its
//! slot freed for the next zone.

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use zonekeep_core::{InputCounters, Tier};

use super::{
    zone_label, zone_outcome, Labels, Metrics, ZoneStageMetrics, INPUT_OUTCOMES, OTHER_ZONE,
};

impl Metrics {
    /// Handles for a new zone (labelled if a slot is free).
    pub fn zone(&self, zone_id: &str) -> ZoneMetrics {
        let label = {
            let mut set = self.labelled.lock().unwrap_or_else(|p| p.into_inner());
            if set.len() < self.max_labelled && zone_id != OTHER_ZONE {
                set.insert(zone_id.to_owned());
                zone_id.to_owned()
            } else {
                OTHER_ZONE.to_owned()
            }
        };
        self.zones.inc();
        let l = zone_label(&label);
        let inputs = INPUT_OUTCOMES
            .iter()
            .map(|o| self.inputs.get_or_create_owned(&zone_outcome(&label, o)))
            .collect();
        ZoneMetrics {
            tick_duration: self.tick_duration.get_or_create_owned(&l),
            ticks: self.ticks.get_or_create_owned(&l),
            ticks_dropped: self.ticks_dropped.get_or_create_owned(&l),
            players: self.players.get_or_create_owned(&l),
            observers: self.observers.get_or_create_owned(&l),
            entities: self.entities.get_or_create_owned(&l),
            bytes_out: self.bytes_out.get_or_create_owned(&l),
            frames_out: self.frames_out.get_or_create_owned(&l),
            quiet_skipped: self.quiet_skipped.get_or_create_owned(&l),
            inputs,
            stages: self.stage_families.zone(&label),
            last: GaugeValues::default(),
            tier: None,
            label,
        }
    }

    /// A zone stopped: take back its gauge contributions and free its label slot.
    pub fn release_zone(&self, mut zm: ZoneMetrics) {
        zm.set_population(0, 0, 0);
        if let Some(t) = zm.tier.take() {
            self.zones_by_tier.get_or_create(&tier_label(t)).dec();
        }
        self.zones.dec();
        if zm.label == OTHER_ZONE {
            return;
        }
        let l = zone_label(&zm.label);
        self.tick_duration.remove(&l);
        self.ticks.remove(&l);
        self.ticks_dropped.remove(&l);
        self.tier.remove(&l);
        self.players.remove(&l);
        self.observers.remove(&l);
        self.entities.remove(&l);
        self.bytes_out.remove(&l);
        self.frames_out.remove(&l);
        self.quiet_skipped.remove(&l);
        self.stage_families.release(&zm.label);
        for o in INPUT_OUTCOMES {
            self.inputs.remove(&zone_outcome(&zm.label, o));
        }
        let mut set = self.labelled.lock().unwrap_or_else(|p| p.into_inner());
        set.remove(&zm.label);
    }

    /// Record a zone's tier.
    pub fn set_tier(&self, zm: &mut ZoneMetrics, tier: Tier) {
        if zm.tier == Some(tier) {
            return;
        }
        if let Some(old) = zm.tier.replace(tier) {
            self.zones_by_tier.get_or_create(&tier_label(old)).dec();
        }
        self.zones_by_tier.get_or_create(&tier_label(tier)).inc();
        if zm.label != OTHER_ZONE {
            self.tier
                .get_or_create(&zone_label(&zm.label))
                .set(tier_value(tier));
        }
    }
}

fn tier_value(t: Tier) -> i64 {
    match t {
        Tier::Hot => 0,
        Tier::Idle => 1,
        Tier::Dormant => 2,
    }
}

fn tier_label(t: Tier) -> Labels {
    let name = match t {
        Tier::Hot => "hot",
        Tier::Idle => "idle",
        Tier::Dormant => "dormant",
    };
    vec![("tier", name.to_owned())]
}

#[derive(Debug, Default, Clone, Copy)]
struct GaugeValues {
    players: i64,
    observers: i64,
    entities: i64,
}

/// One zone's metric handles (owned by its simulation thread; the input
/// counters are cloned out for the network tasks).
#[derive(Debug)]
pub struct ZoneMetrics {
    label: String,
    tick_duration: Histogram,
    ticks: Counter,
    ticks_dropped: Counter,
    players: Gauge,
    observers: Gauge,
    entities: Gauge,
    bytes_out: Counter,
    frames_out: Counter,
    quiet_skipped: Counter,
    inputs: Vec<Counter>,
    stages: ZoneStageMetrics,
    last: GaugeValues,
    tier: Option<Tier>,
}

impl ZoneMetrics {
    /// The label this zone reports under (its id or `_other`).
    pub fn label(&self) -> &str {
        &self.label
    }

    /// Observes the stage durations of one step.
    pub fn record_stages(&self, durations: &zonekeep_core::StageDurations) {
        if !durations.is_empty() {
            self.stages.record(durations);
        }
    }

    /// Adds one step's work (counter increases in [`WORK_COUNTERS`](super::WORK_COUNTERS) order).
    pub fn record_work(&self, by: &[(&'static str, u64)]) {
        self.stages.add_work(by);
    }

    /// The counter for input `outcome` (one of [`INPUT_OUTCOMES`]).
    pub fn input_counter(&self, outcome: &str) -> Option<Counter> {
        INPUT_OUTCOMES
            .iter()
            .position(|o| *o == outcome)
            .and_then(|i| self.inputs.get(i).cloned())
    }

    /// Record one advance: ticks, their durations and input outcomes.
    pub fn record_advance(
        &self,
        ticks: u64,
        dropped: u64,
        durations: &[std::time::Duration],
        inputs: &InputCounters,
    ) {
        self.ticks.inc_by(ticks);
        self.ticks_dropped.inc_by(dropped);
        for d in durations {
            self.tick_duration.observe(d.as_secs_f64());
        }
        let by = [
            inputs.accepted,
            inputs.duplicate,
            inputs.stale,
            inputs.overflowed,
            inputs.refused,
            inputs.superseded,
            inputs.unroutable,
        ];
        for (c, n) in self.inputs.iter().zip(by) {
            if n > 0 {
                c.inc_by(n);
            }
        }
    }

    /// Record a quiet Delta that was not sent.
    pub fn record_quiet_skipped(&self) {
        self.quiet_skipped.inc();
    }

    /// Record frames sent.
    pub fn record_out(&self, frames: u64, bytes: u64) {
        self.frames_out.inc_by(frames);
        self.bytes_out.inc_by(bytes);
    }

    /// Set the zone's population (applied as deltas so `_other` sums correctly).
    pub fn set_population(&mut self, players: i64, observers: i64, entities: i64) {
        self.players.inc_by(players - self.last.players);
        self.observers.inc_by(observers - self.last.observers);
        self.entities.inc_by(entities - self.last.entities);
        self.last = GaugeValues {
            players,
            observers,
            entities,
        };
    }
}
