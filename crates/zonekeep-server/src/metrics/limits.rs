//! What the per-zone limits refused (ZoneConfig's `max_entities`, the event bounds,
//! `max_fact_bytes`, `max_facts_per_second`, `max_facts_in_flight`): host-wide counters, so a
//! zone's game code hitting them shows without a label per zone (the rate-limited WARN line
//! names the zone).

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::registry::Registry;
use zonekeep_core::AdvanceReport;

/// Counters of the per-zone limits. Cheap to clone (each metric is an `Arc`ed atomic).
#[derive(Debug, Clone, Default)]
pub struct LimitMetrics {
    spawns_refused: Counter,
    facts_refused: Family<Vec<(&'static str, String)>, Counter>,
    events_deferred: Counter,
}

impl LimitMetrics {
    /// Adds every metric to `registry`.
    pub fn register(&self, registry: &mut Registry) {
        registry.register(
            "zonekeep_zone_spawns_refused",
            "Entity spawns refused because the zone held its max_entities",
            self.spawns_refused.clone(),
        );
        registry.register(
            "zonekeep_zone_facts_refused",
            "Facts a zone emitted that were refused, by limit: too_large (max_fact_bytes), rate \
             (max_facts_per_second), in_flight (max_facts_in_flight)",
            self.facts_refused.clone(),
        );
        registry.register(
            "zonekeep_zone_events_deferred",
            "Zone events a patch could not carry, left for the next patch (once per patch waited)",
            self.events_deferred.clone(),
        );
    }

    /// Counts the refusals `report` carries.
    pub fn record(&self, report: &AdvanceReport) {
        if report.spawns_refused > 0 {
            self.spawns_refused.inc_by(report.spawns_refused);
        }
        for (limit, n) in [
            ("too_large", report.facts_refused.too_large),
            ("rate", report.facts_refused.rate),
            ("in_flight", report.facts_overflowed),
        ] {
            if n > 0 {
                self.facts_refused
                    .get_or_create(&vec![("limit", limit.to_owned())])
                    .inc_by(n);
            }
        }
    }

    /// Counts events a patch left for the next one.
    pub fn events_deferred(&self, n: u64) {
        if n > 0 {
            self.events_deferred.inc_by(n);
        }
    }
}
