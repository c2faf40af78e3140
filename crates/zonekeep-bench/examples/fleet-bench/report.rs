//! Small pieces every scenario's report uses: durations as milliseconds, distributions as the
//! bench crate's exact summary (nearest-rank p50/p99), and counts of Prometheus samples by label.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use zonekeep_bench::prom::Scrape;
use zonekeep_bench::stats::{summarize, Summary};

/// `d` in milliseconds.
pub fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// `later − earlier` in milliseconds (0 when `later` is not later).
pub fn ms_between(earlier: Instant, later: Instant) -> f64 {
    ms(later.saturating_duration_since(earlier))
}

/// A distribution of milliseconds, exact.
pub fn dist(values: &[f64]) -> Summary {
    summarize(values)
}

/// `p50 · p99 · max` (and the sample count) of a distribution, in seconds, for the text report.
pub fn secs_line(s: &Summary) -> String {
    if s.n == 0 {
        return "no samples".to_owned();
    }
    format!(
        "p50 {:.2} s · p99 {:.2} s · max {:.2} s (min {:.2} s, n = {})",
        s.p50 / 1000.0,
        s.p99 / 1000.0,
        s.max / 1000.0,
        s.min / 1000.0,
        s.n
    )
}

/// `p50 · p99 · max` of a distribution in milliseconds, for the text report.
pub fn ms_line(s: &Summary) -> String {
    if s.n == 0 {
        return "no samples".to_owned();
    }
    format!(
        "p50 {:.0} ms · p99 {:.0} ms · max {:.0} ms (min {:.0} ms, n = {})",
        s.p50, s.p99, s.max, s.min, s.n
    )
}

/// A summary as JSON (milliseconds).
pub fn dist_json(s: &Summary) -> Value {
    json!({"n": s.n, "min": s.min, "p50": s.p50, "p90": s.p90, "p99": s.p99, "max": s.max, "mean": s.mean})
}

/// Samples of counter `name` by the value of `label` (each label value summed over the rest).
pub fn by_label(scrape: &Scrape, name: &str, label: &str) -> BTreeMap<String, f64> {
    let mut out = BTreeMap::new();
    for s in scrape.samples.iter().filter(|s| s.name == name) {
        if let Some((_, v)) = s.labels.iter().find(|(k, _)| k == label) {
            *out.entry(v.clone()).or_insert(0.0) += s.value;
        }
    }
    out
}

/// Counter `name` of a scrape, 0 when absent.
pub fn counter(scrape: &Scrape, name: &str) -> f64 {
    scrape.sum(name).unwrap_or(0.0)
}

/// `a 3, b 5`.
pub fn fmt_counts(m: &BTreeMap<String, usize>) -> String {
    m.iter()
        .map(|(k, v)| format!("{k} {v}"))
        .collect::<Vec<_>>()
        .join(", ")
}
