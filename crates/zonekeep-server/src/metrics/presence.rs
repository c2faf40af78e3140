//! Presence's counters: rows written by this host, failed writes, watchers and what they were
//! sent, and watchers dropped or refused.

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

type Labels = Vec<(&'static str, String)>;

/// Presence's counters. Cheap to clone (each metric is an `Arc`ed atomic).
#[derive(Debug, Clone, Default)]
pub struct PresenceMetrics {
    written: Counter,
    write_failed: Counter,
    watchers: Gauge,
    events: Counter,
    dropped: Family<Labels, Counter>,
}

const DROP_REASONS: &[&str] = &["slow", "full", "too_many_principals"];

impl PresenceMetrics {
    /// Adds every metric to `registry`, each labelled series from the start at 0.
    pub fn register(&self, registry: &mut Registry) {
        registry.register(
            "zonekeep_presence_written",
            "Presence changes (joins and leaves) this host wrote to the store",
            self.written.clone(),
        );
        registry.register(
            "zonekeep_presence_write_failed",
            "Presence writes that failed (written again next round)",
            self.write_failed.clone(),
        );
        registry.register(
            "zonekeep_presence_watchers",
            "Presence watch streams open on this host",
            self.watchers.clone(),
        );
        registry.register(
            "zonekeep_presence_events",
            "Presence events sent to watchers (snapshots included)",
            self.events.clone(),
        );
        registry.register(
            "zonekeep_presence_dropped",
            "Watchers refused or closed: `slow` (a watcher that did not read its events), \
             `full` (the host's watchers or watched principals at their bound), \
             `too_many_principals`",
            self.dropped.clone(),
        );
        for r in DROP_REASONS {
            let _ = self
                .dropped
                .get_or_create(&vec![("reason", (*r).to_owned())]);
        }
    }

    /// Counts written changes.
    pub fn written(&self, n: u64) {
        self.written.inc_by(n);
    }

    /// Counts a failed write.
    pub fn write_failed(&self) {
        self.write_failed.inc();
    }

    /// Sets the number of open watch streams.
    pub fn set_watchers(&self, n: usize) {
        self.watchers.set(i64::try_from(n).unwrap_or(i64::MAX));
    }

    /// Counts events sent.
    pub fn events(&self, n: u64) {
        self.events.inc_by(n);
    }

    /// Counts a watcher refused or closed.
    pub fn dropped(&self, reason: &'static str) {
        self.dropped
            .get_or_create(&vec![("reason", reason.to_owned())])
            .inc();
    }
}
