//! The leaderboards' counters: where reads were answered from, the Redis index's health, and
//! scores submitted over HTTP.

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::registry::Registry;

type Labels = Vec<(&'static str, String)>;

/// The leaderboards' counters. Cheap to clone (each metric is an `Arc`ed atomic).
#[derive(Debug, Clone, Default)]
pub struct BoardMetrics {
    reads: Family<Labels, Counter>,
    index: Family<Labels, Counter>,
    submits: Family<Labels, Counter>,
}

const READ_SOURCES: &[&str] = &["index", "store"];
const INDEX_EVENTS: &[&str] = &["applied", "rebuilt", "failed", "missing"];
const SUBMIT_OUTCOMES: &[&str] = &["recorded", "repeated", "refused"];

impl BoardMetrics {
    /// Adds every metric to `registry`, each labelled series from the start at 0.
    pub fn register(&self, registry: &mut Registry) {
        registry.register(
            "zonekeep_board_reads",
            "Leaderboard reads by where they were answered: `index` (Redis) or `store` (no \
             index, the index not built yet, or Redis failing)",
            self.reads.clone(),
        );
        registry.register(
            "zonekeep_board_index",
            "The Redis leaderboard index: `applied` (score rows copied from the store's feed), \
             `rebuilt` (a board's period refilled from the store), `failed` (a Redis call that \
             failed), `missing` (a read found the period not built: Redis flushed or new)",
            self.index.clone(),
        );
        registry.register(
            "zonekeep_board_submits",
            "Scores submitted by a back end over HTTP: `recorded`, `repeated` (the key was \
             recorded before: nothing counted again), `refused`",
            self.submits.clone(),
        );
        for s in READ_SOURCES {
            let _ = self.reads.get_or_create(&vec![("source", (*s).to_owned())]);
        }
        for e in INDEX_EVENTS {
            let _ = self.index.get_or_create(&vec![("event", (*e).to_owned())]);
        }
        for o in SUBMIT_OUTCOMES {
            let _ = self
                .submits
                .get_or_create(&vec![("outcome", (*o).to_owned())]);
        }
    }

    /// Counts a read answered from `source`.
    pub fn read(&self, source: &'static str) {
        self.reads
            .get_or_create(&vec![("source", source.to_owned())])
            .inc();
    }

    /// Counts `n` index events.
    pub fn index(&self, event: &'static str, n: u64) {
        self.index
            .get_or_create(&vec![("event", event.to_owned())])
            .inc_by(n);
    }

    /// Counts a submitted score.
    pub fn submit(&self, outcome: &'static str) {
        self.submits
            .get_or_create(&vec![("outcome", outcome.to_owned())])
            .inc();
    }
}
