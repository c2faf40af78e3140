//! Fleet metrics: the lease, takeovers, routing and the directory's load.

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

/// One label pair, e.g. `("result", "ok")`.
type Labels = Vec<(&'static str, &'static str)>;

/// Fleet counters and gauges. Cheap to clone.
#[derive(Debug, Clone)]
pub struct FleetMetrics {
    /// Milliseconds since the last heartbeat that landed was sent (0 before the first).
    pub heartbeat_age_ms: Gauge,
    /// Heartbeats by `result`: `ok`, `failed`, `timeout`.
    pub heartbeats: Family<Labels, Counter>,
    /// Times the lease lapsed (every zone of the host stopped).
    pub lease_lapses: Counter,
    /// Zones this host took from a dead or departed host (starting them itself, or assigning
    /// them to the failover winner when a client asked for one first); summed over the fleet,
    /// one per takeover.
    pub takeovers: Counter,
    /// Hellos answered with a Redirect to the zone's owner.
    pub redirects: Counter,
    /// Connections forwarded to the zone's owner (`--route proxy`).
    pub proxied: Counter,
    /// Hellos refused because their redirect hop count was exhausted.
    pub redirect_loops: Counter,
    /// Directory queries by `op` (`heartbeat`, `locate`, `hosts`, `claim`, `orphans`, `zones`,
    /// `release`, `move`).
    pub queries: Family<Labels, Counter>,
    /// Directory queries that failed or timed out.
    pub query_errors: Counter,
    /// Seconds each zone's hand-over took during a drain (freeze to moved).
    pub drain_seconds: Histogram,
}

impl Default for FleetMetrics {
    fn default() -> Self {
        FleetMetrics {
            heartbeat_age_ms: Gauge::default(),
            heartbeats: Family::default(),
            lease_lapses: Counter::default(),
            takeovers: Counter::default(),
            redirects: Counter::default(),
            proxied: Counter::default(),
            redirect_loops: Counter::default(),
            queries: Family::default(),
            query_errors: Counter::default(),
            drain_seconds: Histogram::new([
                0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
            ]),
        }
    }
}

impl FleetMetrics {
    /// Counts one directory query of `op`.
    pub fn query(&self, op: &'static str) {
        self.queries.get_or_create(&vec![("op", op)]).inc();
    }

    /// Counts one heartbeat with `result`.
    pub fn heartbeat(&self, result: &'static str) {
        self.heartbeats
            .get_or_create(&vec![("result", result)])
            .inc();
    }

    /// Adds every metric to `registry` under `zonekeep_fleet_` names.
    pub fn register(&self, r: &mut Registry) {
        r.register(
            "zonekeep_fleet_heartbeat_age_ms",
            "Milliseconds since the last landed heartbeat was sent",
            self.heartbeat_age_ms.clone(),
        );
        r.register(
            "zonekeep_fleet_heartbeats",
            "Heartbeats by result",
            self.heartbeats.clone(),
        );
        r.register(
            "zonekeep_fleet_lease_lapses",
            "Times this host's lease lapsed and every zone stopped",
            self.lease_lapses.clone(),
        );
        r.register(
            "zonekeep_fleet_takeovers",
            "Zones taken over from a dead or departed host",
            self.takeovers.clone(),
        );
        r.register(
            "zonekeep_fleet_redirects",
            "Hellos redirected to the zone's owner",
            self.redirects.clone(),
        );
        r.register(
            "zonekeep_fleet_proxied_connections",
            "Connections forwarded to the zone's owner",
            self.proxied.clone(),
        );
        r.register(
            "zonekeep_fleet_redirect_loops",
            "Hellos refused after too many redirects",
            self.redirect_loops.clone(),
        );
        r.register(
            "zonekeep_fleet_directory_queries",
            "Directory queries by operation",
            self.queries.clone(),
        );
        r.register(
            "zonekeep_fleet_directory_errors",
            "Directory queries that failed or timed out",
            self.query_errors.clone(),
        );
        r.register(
            "zonekeep_fleet_drain_seconds",
            "Per-zone hand-over time during a deploy drain",
            self.drain_seconds.clone(),
        );
    }
}
