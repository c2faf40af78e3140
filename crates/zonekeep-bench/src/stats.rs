//! Summary statistics: the arena workload's summary rule (WORKLOADS.md arena §6) over exact samples, and a
//! mergeable log-linear histogram for the large latency distributions.
//!
//! Per-client rates are few (one per bot) and kept exactly, so their summaries follow that rule
//! bit for bit. Latencies (RTT, patch intervals) are many; they go into a [`Histogram`] that keeps
//! exact count, sum, sum of squares, min and max (so mean and stddev are exact) and quantiles to
//! within 1/128 relative error, and that merges exactly across runs and machines.

use serde::{Deserialize, Serialize};

/// The reference's summary of a set of numbers (all figures rounded to 3 decimals).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    /// Number of samples.
    pub n: u64,
    /// Mean.
    pub mean: f64,
    /// Population standard deviation.
    pub stddev: f64,
    /// Smallest.
    pub min: f64,
    /// Median (`s[floor(0.5 (n-1) + 0.5)]`).
    pub p50: f64,
    /// 90th percentile, same rule.
    pub p90: f64,
    /// 99th percentile, same rule.
    pub p99: f64,
    /// Largest.
    pub max: f64,
}

fn round3(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}

/// Index of quantile `p` in `n` sorted samples, the workload's rule.
fn q_index(n: u64, p: f64) -> u64 {
    ((p * (n - 1) as f64 + 0.5).floor() as u64).min(n - 1)
}

/// Summarizes `values` exactly by the workload's summary rule. Non-finite samples are
/// skipped (the workload never produces them; counting them would poison the mean).
pub fn summarize(values: &[f64]) -> Summary {
    let mut s: Vec<f64> = values.iter().copied().filter(|v| v.is_finite()).collect();
    let n = s.len() as u64;
    if n == 0 {
        return Summary::default();
    }
    s.sort_by(f64::total_cmp);
    let mean = s.iter().sum::<f64>() / n as f64;
    let sq: f64 = s.iter().map(|v| (v - mean) * (v - mean)).sum();
    let at = |p: f64| s.get(q_index(n, p) as usize).copied().unwrap_or(0.0);
    Summary {
        n,
        mean: round3(mean),
        stddev: round3((sq / n as f64).sqrt()),
        min: round3(at(0.0)),
        p50: round3(at(0.5)),
        p90: round3(at(0.9)),
        p99: round3(at(0.99)),
        max: round3(s.last().copied().unwrap_or(0.0)),
    }
}

/// Sub-buckets per power of two: quantiles are within 1/128 of the true sample.
const SUB_BITS: u32 = 7;
const SUB: u64 = 1 << SUB_BITS;

/// A mergeable histogram of non-negative integer samples (microseconds, by convention).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Histogram {
    /// `(bucket, count)` pairs, ascending by bucket, no zero counts.
    buckets: Vec<(u32, u64)>,
    count: u64,
    sum: f64,
    sum_sq: f64,
    min: u64,
    max: u64,
    #[serde(skip)]
    dense: Vec<u64>,
}

fn bucket_of(v: u64) -> u32 {
    if v < SUB {
        return v as u32;
    }
    let exp = 63 - v.leading_zeros() - SUB_BITS; // >= 0 since v >= SUB
    let mantissa = (v >> exp) - SUB; // 0..SUB
    ((exp + 1) as u64 * SUB + mantissa) as u32
}

/// The smallest value that falls into bucket `b` (the value a quantile reports).
fn bucket_low(b: u32) -> u64 {
    let b = u64::from(b);
    if b < SUB {
        return b;
    }
    let exp = b / SUB - 1;
    let mantissa = b % SUB;
    (SUB + mantissa) << exp
}

impl Histogram {
    /// An empty histogram.
    pub fn new() -> Self {
        Self::default()
    }

    /// Records one sample.
    pub fn record(&mut self, v: u64) {
        let b = bucket_of(v) as usize;
        if self.dense.len() <= b {
            self.dense.resize(b + 1, 0);
        }
        if let Some(c) = self.dense.get_mut(b) {
            *c += 1;
        }
        self.add_moments(v, 1);
    }

    fn add_moments(&mut self, v: u64, n: u64) {
        if self.count == 0 || v < self.min {
            self.min = v;
        }
        self.max = self.max.max(v);
        self.count += n;
        let f = v as f64;
        self.sum += f * n as f64;
        self.sum_sq += f * f * n as f64;
    }

    /// Folds the dense counters into the sparse, serializable form.
    fn settle(&mut self) {
        if self.dense.is_empty() {
            return;
        }
        let dense = std::mem::take(&mut self.dense);
        let mut merged: Vec<(u32, u64)> = Vec::with_capacity(self.buckets.len() + 64);
        let mut old = std::mem::take(&mut self.buckets).into_iter().peekable();
        for (b, &c) in dense.iter().enumerate() {
            let b = b as u32;
            while let Some(&(ob, oc)) = old.peek() {
                if ob >= b {
                    break;
                }
                merged.push((ob, oc));
                old.next();
            }
            let mut total = c;
            if let Some(&(ob, oc)) = old.peek() {
                if ob == b {
                    total += oc;
                    old.next();
                }
            }
            if total > 0 {
                merged.push((b, total));
            }
        }
        merged.extend(old);
        self.buckets = merged;
    }

    /// Adds every sample of `other`.
    pub fn merge(&mut self, other: &Histogram) {
        let mut other = other.clone();
        other.settle();
        self.settle();
        if other.count == 0 {
            return;
        }
        if self.count == 0 {
            self.min = other.min;
        } else {
            self.min = self.min.min(other.min);
        }
        self.max = self.max.max(other.max);
        self.count += other.count;
        self.sum += other.sum;
        self.sum_sq += other.sum_sq;
        let mut merged = Vec::with_capacity(self.buckets.len() + other.buckets.len());
        let (mut a, mut b) = (
            self.buckets.iter().peekable(),
            other.buckets.iter().peekable(),
        );
        loop {
            match (a.peek(), b.peek()) {
                (Some(&&(ab, ac)), Some(&&(bb, bc))) => {
                    if ab == bb {
                        merged.push((ab, ac + bc));
                        a.next();
                        b.next();
                    } else if ab < bb {
                        merged.push((ab, ac));
                        a.next();
                    } else {
                        merged.push((bb, bc));
                        b.next();
                    }
                }
                (Some(&&x), None) => {
                    merged.push(x);
                    a.next();
                }
                (None, Some(&&x)) => {
                    merged.push(x);
                    b.next();
                }
                (None, None) => break,
            }
        }
        self.buckets = merged;
    }

    /// Number of samples.
    pub fn count(&self) -> u64 {
        self.count
    }

    /// The summary in `unit`s per sample unit (e.g. `0.001` turns µs into ms), with the workload's
    /// quantile rule applied to bucket lower bounds (exact min, max, mean and stddev).
    pub fn summary(&self, unit: f64) -> Summary {
        let mut h = self.clone();
        h.settle();
        let n = h.count;
        if n == 0 {
            return Summary::default();
        }
        let mean = h.sum / n as f64;
        let var = (h.sum_sq / n as f64 - mean * mean).max(0.0);
        let quantile = |p: f64| -> f64 {
            let idx = q_index(n, p);
            let mut seen = 0u64;
            for &(b, c) in &h.buckets {
                seen += c;
                if seen > idx {
                    // Clamp into [min, max] so a bucket's lower bound never undershoots the data.
                    return bucket_low(b).clamp(h.min, h.max) as f64;
                }
            }
            h.max as f64
        };
        Summary {
            n,
            mean: round3(mean * unit),
            stddev: round3(var.sqrt() * unit),
            min: round3(h.min as f64 * unit),
            p50: round3(quantile(0.5) * unit),
            p90: round3(quantile(0.9) * unit),
            p99: round3(quantile(0.99) * unit),
            max: round3(h.max as f64 * unit),
        }
    }

    /// The histogram ready to serialize (dense counters folded in).
    pub fn settled(&self) -> Histogram {
        let mut h = self.clone();
        h.settle();
        h
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn summarize_matches_the_reference() {
        // The summary rule applied by hand to [5,1,3,2,4,10,7].
        let s = summarize(&[5.0, 1.0, 3.0, 2.0, 4.0, 10.0, 7.0]);
        assert_eq!(
            s,
            Summary {
                n: 7,
                mean: 4.571,
                stddev: 2.871,
                min: 1.0,
                p50: 4.0,
                p90: 7.0,
                p99: 10.0,
                max: 10.0
            }
        );
        assert_eq!(summarize(&[]).n, 0);
        assert_eq!(summarize(&[f64::NAN, 2.0]).n, 1);
    }

    #[test]
    fn buckets_round_trip_within_resolution() {
        for v in [0u64, 1, 127, 128, 129, 255, 256, 1000, 50_000, 1 << 40] {
            let b = bucket_of(v);
            let lo = bucket_low(b);
            assert!(lo <= v, "{v}: low {lo}");
            assert!(v - lo <= v / SUB, "{v}: low {lo}");
            assert_eq!(bucket_of(lo), b);
        }
        // Buckets are monotonic.
        let mut last = 0;
        for v in 0..100_000u64 {
            let b = bucket_of(v);
            assert!(b >= last);
            last = b;
        }
    }

    #[test]
    fn histogram_moments_are_exact_and_quantiles_close() {
        let mut h = Histogram::new();
        let xs: Vec<u64> = (1..=10_000).collect();
        for &x in &xs {
            h.record(x);
        }
        let exact = summarize(&xs.iter().map(|&x| x as f64).collect::<Vec<_>>());
        let s = h.summary(1.0);
        assert_eq!(s.n, exact.n);
        assert_eq!(s.mean, exact.mean);
        assert!((s.stddev - exact.stddev).abs() < 0.01);
        assert_eq!((s.min, s.max), (exact.min, exact.max));
        for (a, b) in [(s.p50, exact.p50), (s.p90, exact.p90), (s.p99, exact.p99)] {
            assert!(a <= b && b - a <= b / 128.0, "{a} vs {b}");
        }
    }

    #[test]
    fn merge_equals_recording_everything_once() {
        let (mut a, mut b, mut all) = (Histogram::new(), Histogram::new(), Histogram::new());
        for v in 0..5000u64 {
            let x = (v * 7919) % 100_003;
            if v % 3 == 0 {
                a.record(x);
            } else {
                b.record(x);
            }
            all.record(x);
        }
        // Survives a JSON round trip (the report format) before merging.
        let a: Histogram =
            serde_json::from_str(&serde_json::to_string(&a.settled()).unwrap()).unwrap();
        let mut m = a.clone();
        m.merge(&b);
        assert_eq!(m.settled(), all.settled());
        assert_eq!(m.summary(0.001), all.summary(0.001));
        // Recording after a merge still lands in the right buckets.
        m.record(42);
        all.record(42);
        assert_eq!(m.settled(), all.settled());
    }
}
