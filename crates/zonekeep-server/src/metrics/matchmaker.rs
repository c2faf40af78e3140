//! The matchmaker's counters: searches by what became of them, matches formed and placed, probes
//! answered, and the candidate index's health.

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::registry::Registry;

type Labels = Vec<(&'static str, String)>;

/// The matchmaker's counters. Cheap to clone (each metric is an `Arc`ed atomic).
#[derive(Debug, Clone, Default)]
pub struct MatchMetrics {
    searches: Family<Labels, Counter>,
    refused: Family<Labels, Counter>,
    matches: Family<Labels, Counter>,
    probes: Family<Labels, Counter>,
    index: Family<Labels, Counter>,
}

/// Outcomes of a match's placement, each a labelled series from the start.
const MATCH_OUTCOMES: &[&str] = &[
    "proposed",
    "assigned",
    "no_capacity",
    "partner_left",
    "failed",
];
/// Ways the candidate index was read, and its failures.
const INDEX_EVENTS: &[&str] = &["redis", "store", "rebuilt", "failed"];

impl MatchMetrics {
    /// Adds every metric to `registry`, each labelled series from the start at 0.
    pub fn register(&self, registry: &mut Registry) {
        registry.register(
            "zonekeep_match_searches",
            "Searches by what happened to them here: `created`, `queued`, `cancelled`",
            self.searches.clone(),
        );
        registry.register(
            "zonekeep_match_refused",
            "Matchmaker requests refused, by code (`client_outdated`, `no_probe_result`, \
             `unauthorized`, ...)",
            self.refused.clone(),
        );
        registry.register(
            "zonekeep_match_matches",
            "Matches formed by this replica, by outcome: `proposed`, `assigned`, `no_capacity` \
             (no host of the region had room; its players queued again), `partner_left`, `failed`",
            self.matches.clone(),
        );
        registry.register(
            "zonekeep_match_probes",
            "Probe rounds this host answered: `measured` (a round trip recorded) or `refused`",
            self.probes.clone(),
        );
        registry.register(
            "zonekeep_match_index",
            "Candidate reads by source: `redis` (the index), `store` (Redis down or off: \
             formed from the store), `rebuilt` (the index refilled from the store), `failed` \
             (a Redis call that failed)",
            self.index.clone(),
        );
        for s in ["created", "queued", "cancelled"] {
            let _ = self.searches.get_or_create(&vec![("event", s.to_owned())]);
        }
        for o in MATCH_OUTCOMES {
            let _ = self
                .matches
                .get_or_create(&vec![("outcome", (*o).to_owned())]);
        }
        for o in ["measured", "refused"] {
            let _ = self.probes.get_or_create(&vec![("outcome", o.to_owned())]);
        }
        for e in INDEX_EVENTS {
            let _ = self.index.get_or_create(&vec![("source", (*e).to_owned())]);
        }
    }

    /// Counts a search event.
    pub fn search(&self, event: &'static str) {
        self.searches
            .get_or_create(&vec![("event", event.to_owned())])
            .inc();
    }

    /// Counts a refused request.
    pub fn refused(&self, code: &'static str) {
        self.refused
            .get_or_create(&vec![("code", code.to_owned())])
            .inc();
    }

    /// Counts matches with an outcome.
    pub fn matches(&self, outcome: &'static str, n: u64) {
        self.matches
            .get_or_create(&vec![("outcome", outcome.to_owned())])
            .inc_by(n);
    }

    /// Counts a probe round.
    pub fn probe(&self, outcome: &'static str) {
        self.probes
            .get_or_create(&vec![("outcome", outcome.to_owned())])
            .inc();
    }

    /// Counts an index event.
    pub fn index(&self, source: &'static str) {
        self.index
            .get_or_create(&vec![("source", source.to_owned())])
            .inc();
    }
}
