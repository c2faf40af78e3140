//! A small reader for the Prometheus text exposition the host serves at `/metrics`: samples by name
//! summed over labels, and quantiles from a histogram's cumulative buckets.
//!
//! It reads only what `zonekeep bench` reports (tick durations, ticks, dropped ticks, bytes and
//! frames out, process CPU and RSS); unknown lines and comments are skipped, never an error.

use std::collections::BTreeMap;

/// One sample line: `name{labels} value`.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    /// Metric name (with `_total`, `_bucket`, … suffixes as exposed).
    pub name: String,
    /// Label pairs in the order written.
    pub labels: Vec<(String, String)>,
    /// Value.
    pub value: f64,
}

/// Every sample of one scrape.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Scrape {
    /// Samples in exposition order.
    pub samples: Vec<Sample>,
}

fn parse_labels(s: &str) -> Option<Vec<(String, String)>> {
    let mut out = Vec::new();
    let mut rest = s;
    loop {
        rest = rest.trim_start_matches([',', ' ']);
        if rest.is_empty() {
            return Some(out);
        }
        let eq = rest.find('=')?;
        let key = rest.get(..eq)?.trim().to_owned();
        let after = rest.get(eq + 1..)?.strip_prefix('"')?;
        let mut value = String::new();
        let mut chars = after.char_indices();
        let end = loop {
            let (i, c) = chars.next()?;
            match c {
                '\\' => match chars.next()?.1 {
                    'n' => value.push('\n'),
                    other => value.push(other),
                },
                '"' => break i,
                c => value.push(c),
            }
        };
        out.push((key, value));
        rest = after.get(end + 1..)?;
    }
}

fn parse_value(s: &str) -> Option<f64> {
    match s {
        "+Inf" => Some(f64::INFINITY),
        "-Inf" => Some(f64::NEG_INFINITY),
        "NaN" => Some(f64::NAN),
        _ => s.parse().ok(),
    }
}

impl Scrape {
    /// Parses the text exposition; malformed lines are skipped.
    pub fn parse(text: &str) -> Self {
        let mut samples = Vec::new();
        for line in text.lines() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let (name, labels, rest) = match line.find('{') {
                Some(open) => {
                    let Some(close) = line.rfind('}') else {
                        continue;
                    };
                    let (Some(name), Some(inner), Some(rest)) = (
                        line.get(..open),
                        line.get(open + 1..close),
                        line.get(close + 1..),
                    ) else {
                        continue;
                    };
                    let Some(labels) = parse_labels(inner) else {
                        continue;
                    };
                    (name, labels, rest)
                }
                None => {
                    let mut it = line.splitn(2, ' ');
                    let (Some(name), Some(rest)) = (it.next(), it.next()) else {
                        continue;
                    };
                    (name, Vec::new(), rest)
                }
            };
            // A timestamp may follow the value.
            let Some(value) = rest.split_ascii_whitespace().next().and_then(parse_value) else {
                continue;
            };
            samples.push(Sample {
                name: name.to_owned(),
                labels,
                value,
            });
        }
        Self { samples }
    }

    /// The sum of every sample called `name` over all label sets; `None` if there is none.
    pub fn sum(&self, name: &str) -> Option<f64> {
        let mut found = false;
        let mut total = 0.0;
        for s in self.samples.iter().filter(|s| s.name == name) {
            found = true;
            total += s.value;
        }
        found.then_some(total)
    }

    /// The sum of the samples called `name` whose label `key` equals `value`.
    pub fn sum_where(&self, name: &str, key: &str, value: &str) -> Option<f64> {
        let mut found = false;
        let mut total = 0.0;
        for s in self.samples.iter().filter(|s| s.name == name) {
            if s.labels.iter().any(|(k, v)| k == key && v == value) {
                found = true;
                total += s.value;
            }
        }
        found.then_some(total)
    }

    /// Cumulative bucket counts of histogram `name` (its `_bucket` samples) summed over every label
    /// set but `le`, ascending by bound.
    pub fn buckets(&self, name: &str) -> Vec<(f64, f64)> {
        let bucket = format!("{name}_bucket");
        let mut by_le: BTreeMap<u64, (f64, f64)> = BTreeMap::new();
        for s in self.samples.iter().filter(|s| s.name == bucket) {
            let Some(le) = s
                .labels
                .iter()
                .find(|(k, _)| k == "le")
                .and_then(|(_, v)| parse_value(v))
            else {
                continue;
            };
            // Order bounds by their bits: positive floats order like their bit patterns.
            let e = by_le.entry(le.to_bits()).or_insert((le, 0.0));
            e.1 += s.value;
        }
        by_le.into_values().collect()
    }
}

/// Histogram counters between two scrapes (`after − before`, per bucket), for a window's figures.
pub fn bucket_delta(before: &[(f64, f64)], after: &[(f64, f64)]) -> Vec<(f64, f64)> {
    after
        .iter()
        .map(|&(le, c)| {
            let b = before
                .iter()
                .find(|(l, _)| l.to_bits() == le.to_bits())
                .map_or(0.0, |&(_, c)| c);
            (le, (c - b).max(0.0))
        })
        .collect()
}

/// The `q` quantile of cumulative buckets, interpolated linearly inside the bucket (as PromQL's
/// `histogram_quantile` does); `None` without samples. The `+Inf` bucket reports its lower bound.
pub fn quantile(buckets: &[(f64, f64)], q: f64) -> Option<f64> {
    let total = buckets.last()?.1;
    if total <= 0.0 {
        return None;
    }
    let rank = q * total;
    let mut prev_le = 0.0;
    let mut prev_c = 0.0;
    for &(le, c) in buckets {
        if c >= rank {
            if le.is_infinite() {
                return Some(prev_le);
            }
            let in_bucket = c - prev_c;
            let frac = if in_bucket > 0.0 {
                (rank - prev_c) / in_bucket
            } else {
                1.0
            };
            return Some(prev_le + (le - prev_le) * frac);
        }
        prev_le = le;
        prev_c = c;
    }
    Some(prev_le)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    const TEXT: &str = r#"# HELP zonekeep_ticks Ticks run.
# TYPE zonekeep_ticks counter
zonekeep_ticks_total{zone="a"} 100
zonekeep_ticks_total{zone="b \"q\""} 50
zonekeep_tick_duration_seconds_bucket{zone="a",le="0.001"} 10
zonekeep_tick_duration_seconds_bucket{zone="a",le="0.002"} 90
zonekeep_tick_duration_seconds_bucket{zone="a",le="+Inf"} 100
zonekeep_tick_duration_seconds_bucket{zone="b",le="0.001"} 0
zonekeep_tick_duration_seconds_bucket{zone="b",le="0.002"} 0
zonekeep_tick_duration_seconds_bucket{zone="b",le="+Inf"} 0
process_cpu_seconds_total 1.25
process_resident_memory_bytes 1.2e7 1700000000
garbage line without value
"#;

    #[test]
    fn sums_over_labels_and_reads_plain_samples() {
        let s = Scrape::parse(TEXT);
        assert_eq!(s.sum("zonekeep_ticks_total"), Some(150.0));
        assert_eq!(s.sum("process_cpu_seconds_total"), Some(1.25));
        assert_eq!(s.sum("process_resident_memory_bytes"), Some(1.2e7));
        assert_eq!(s.sum("absent"), None);
        assert_eq!(
            s.sum_where("zonekeep_ticks_total", "zone", "a"),
            Some(100.0)
        );
        assert_eq!(s.sum_where("zonekeep_ticks_total", "zone", "c"), None);
        let b = &s.samples[1].labels[0];
        assert_eq!(b.1, "b \"q\"");
    }

    #[test]
    fn quantiles_interpolate_inside_buckets() {
        let s = Scrape::parse(TEXT);
        let b = s.buckets("zonekeep_tick_duration_seconds");
        assert_eq!(b.len(), 3);
        let p50 = quantile(&b, 0.5).unwrap();
        assert!((p50 - 0.0015).abs() < 1e-12, "{p50}");
        assert_eq!(quantile(&b, 0.99), Some(0.002));
        let d = bucket_delta(&b, &b);
        assert_eq!(quantile(&d, 0.5), None);
    }
}
