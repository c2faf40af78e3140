//! Persistence metrics: host-wide counters (per-zone detail is in
//! [`SaveStatus`](super::SaveStatus), so no zone label is needed here).

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

/// Counters shared by the storage and fact workers. Cheap to clone (each
/// metric is an `Arc`ed atomic); register once with [`PersistMetrics::register`].
#[derive(Debug, Clone, Default)]
pub struct PersistMetrics {
    /// Character writes and acquisitions.
    pub characters: super::characters::CharacterMetrics,
    /// Durable calls.
    pub calls: super::calls::CallMetrics,
    /// Saves the store accepted (including `AlreadyDone` repeats).
    pub saves_ok: Counter,
    /// Save attempts that failed (each retry counts).
    pub saves_failed: Counter,
    /// Unwritten snapshots replaced by a newer one of the same zone.
    pub save_replaced: Counter,
    /// Saves refused because a newer owner claimed the zone.
    pub saves_fenced: Counter,
    /// Zones started afresh because their save held a state version their kind cannot read.
    pub zones_started_fresh: Counter,
    /// Snapshots of lasting worlds that halted, dropped unwritten so the last committed save
    /// stays the world's state.
    pub saves_dropped_halted: Counter,
    /// Snapshots that could not be queued (zone not registered or fenced).
    pub saves_rejected: Counter,
    /// Facts queued or being committed.
    pub facts_pending: Gauge,
    /// Facts the sink accepted.
    pub facts_settled: Counter,
    /// Facts the sink refused for good.
    pub facts_refused: Counter,
    /// Fact commit attempts that failed and will be retried.
    pub fact_retries: Counter,
    /// Facts refused at the zone's fact queue because it was full.
    pub facts_queue_full: Counter,
    /// Settlements whose zone was no longer loaded (its restore re-sends the fact).
    pub settlements_orphaned: Counter,
    /// Store calls (saves, claims, fact records) that returned an error.
    pub store_errors: Counter,
    /// Writes the store refused because a newer owner holds the zone, by
    /// `write` (`save` or `fact`).
    pub fenced_writes_refused: Family<Vec<(&'static str, String)>, Counter>,
    /// Zones unloaded because one of their writes was refused as fenced.
    pub zones_fenced: Counter,
    /// Fenced zones forgotten because the bounded set of them was full (joins
    /// may then claim such a zone here again).
    pub fenced_zones_forgotten: Counter,
}

impl PersistMetrics {
    /// New zeroed metrics.
    pub fn new() -> Self {
        Self::default()
    }

    /// Counts one `write` (`save` or `fact`) refused as fenced.
    pub fn fenced_write_refused(&self, write: &str) {
        self.fenced_writes_refused
            .get_or_create(&vec![("write", write.to_owned())])
            .inc();
    }

    /// Adds every metric to `registry` under `zonekeep_`-prefixed names.
    pub fn register(&self, registry: &mut Registry) {
        let r = registry;
        self.characters.register(r);
        self.calls.register(r);
        r.register(
            "zonekeep_saves_ok",
            "Zone saves written",
            self.saves_ok.clone(),
        );
        r.register(
            "zonekeep_saves_failed",
            "Zone save attempts that failed",
            self.saves_failed.clone(),
        );
        r.register(
            "zonekeep_save_queue_replaced",
            "Unwritten zone snapshots replaced by a newer one",
            self.save_replaced.clone(),
        );
        r.register(
            "zonekeep_saves_dropped_halted",
            "Snapshots of lasting worlds halted by failing saves, dropped unwritten: the last \
             committed save stays the world's state",
            self.saves_dropped_halted.clone(),
        );
        r.register(
            "zonekeep_zones_started_fresh",
            "Zones (not lasting worlds) started afresh because their save held a state version \
             their kind cannot read and has no migration from (reason state-changed); the next \
             save replaces it",
            self.zones_started_fresh.clone(),
        );
        r.register(
            "zonekeep_saves_fenced",
            "Zone saves refused because a newer owner holds the zone",
            self.saves_fenced.clone(),
        );
        r.register(
            "zonekeep_saves_rejected",
            "Snapshots not queued (zone unknown or fenced)",
            self.saves_rejected.clone(),
        );
        r.register(
            "zonekeep_facts_pending",
            "Facts queued or being committed",
            self.facts_pending.clone(),
        );
        r.register(
            "zonekeep_facts_settled",
            "Facts committed by the sink",
            self.facts_settled.clone(),
        );
        r.register(
            "zonekeep_facts_refused",
            "Facts refused by the sink",
            self.facts_refused.clone(),
        );
        r.register(
            "zonekeep_fact_retries",
            "Fact commit attempts that failed and were retried",
            self.fact_retries.clone(),
        );
        r.register(
            "zonekeep_facts_queue_full",
            "Facts refused because the zone's fact queue was full",
            self.facts_queue_full.clone(),
        );
        r.register(
            "zonekeep_settlements_orphaned",
            "Settlements for zones no longer loaded",
            self.settlements_orphaned.clone(),
        );
        r.register(
            "zonekeep_store_errors",
            "Store calls that returned an error",
            self.store_errors.clone(),
        );
        r.register(
            "zonekeep_fenced_writes_refused",
            "Writes refused because a newer owner holds the zone, by write (save, fact)",
            self.fenced_writes_refused.clone(),
        );
        r.register(
            "zonekeep_zones_fenced",
            "Zones unloaded because the store refused one of their writes as fenced",
            self.zones_fenced.clone(),
        );
        r.register(
            "zonekeep_fenced_zones_forgotten",
            "Fenced zones forgotten because the bounded set of them was full",
            self.fenced_zones_forgotten.clone(),
        );
    }
}
