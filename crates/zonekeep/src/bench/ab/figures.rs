//! A run's figures: the zones' work counters and stage times over the measured window, from the
//! host's `/metrics` at the window's edges, and the figures the table shows.

use std::collections::{BTreeMap, BTreeSet};

use anyhow::{bail, Result};
use zonekeep_bench::prom::Scrape;
use zonekeep_bench::run::WindowScrapes;
use zonekeep_bench::{BenchConfig, Report};

use super::Build;

/// The work counter series (`zonekeep_zone_work_total`); its counters are the host's own list.
const WORK_SERIES: &str = "zonekeep_zone_work_total";
pub(super) use zonekeep_server::metrics::WORK_COUNTERS;
const STAGE_SUM: &str = "zonekeep_zone_stage_seconds_sum";
const STAGE_COUNT: &str = "zonekeep_zone_stage_seconds_count";
/// The label zones past the host's labelled ones share.
const OTHER_ZONE: &str = "_other";

/// Sums of one series over the run's zones, by the value of label `key`.
fn by_label(s: &Scrape, name: &str, key: &str, zones: &BTreeSet<String>) -> BTreeMap<String, f64> {
    let mut out = BTreeMap::new();
    for sample in s.samples.iter().filter(|x| x.name == name) {
        let label = |k: &str| {
            sample
                .labels
                .iter()
                .find(|(lk, _)| lk == k)
                .map(|(_, v)| v.as_str())
        };
        let ours = label("zone").is_some_and(|z| zones.contains(z) || z == OTHER_ZONE);
        if let (true, Some(v)) = (ours, label(key)) {
            *out.entry(v.to_owned()).or_insert(0.0) += sample.value;
        }
    }
    out
}

/// `end − start`, key by key (a key absent at the start counts from 0).
fn window(start: &BTreeMap<String, f64>, end: &BTreeMap<String, f64>) -> BTreeMap<String, f64> {
    end.iter()
        .map(|(k, v)| {
            (
                k.clone(),
                (v - start.get(k).copied().unwrap_or(0.0)).max(0.0),
            )
        })
        .collect()
}

/// One run's figures.
#[derive(Debug)]
pub(super) struct RunResult {
    pub(super) build: Build,
    pub(super) report: Report,
    /// Work counters over the window.
    pub(super) work: BTreeMap<String, f64>,
    /// Work counters at the window's end (since the host started).
    pub(super) work_at_end: BTreeMap<String, f64>,
    /// Stage seconds and observations over the window.
    pub(super) stage_s: BTreeMap<String, f64>,
    pub(super) stage_n: BTreeMap<String, f64>,
}

impl RunResult {
    pub(super) fn from_scrapes(
        build: Build,
        report: Report,
        scrapes: &WindowScrapes,
        zones: &BTreeSet<String>,
    ) -> Result<Self> {
        let (Some(start), Some(end)) = (&scrapes.start, &scrapes.end) else {
            bail!(
                "the host's /metrics could not be read at the window's {} (see the warning above)",
                if scrapes.start.is_none() {
                    "start"
                } else {
                    "end"
                }
            );
        };
        let work_at_end = by_label(end, WORK_SERIES, "counter", zones);
        Ok(Self {
            build,
            work: window(
                &by_label(start, WORK_SERIES, "counter", zones),
                &work_at_end,
            ),
            work_at_end,
            stage_s: window(
                &by_label(start, STAGE_SUM, "stage", zones),
                &by_label(end, STAGE_SUM, "stage", zones),
            ),
            stage_n: window(
                &by_label(start, STAGE_COUNT, "stage", zones),
                &by_label(end, STAGE_COUNT, "stage", zones),
            ),
            report,
        })
    }

    /// Ticks in the window: the zones' own count, else the host's (every zone).
    fn ticks(&self) -> Option<f64> {
        self.work
            .get("ticks")
            .copied()
            .or(self.report.server.ticks)
            .filter(|t| *t > 0.0)
    }

    /// Every figure of the table, by key.
    pub(super) fn figures(&self) -> BTreeMap<String, f64> {
        let s = &self.report.server;
        let mut f = BTreeMap::new();
        let host = [
            ("server_cpu_cores", s.cpu_util_cores),
            ("tick_p50_ms", s.tick_p50_ms),
            ("tick_p99_ms", s.tick_p99_ms),
            ("tick_rate_hz", s.tick_rate_hz),
            ("rss_max_mb", s.rss_window_max_mb),
        ];
        for (k, v) in host {
            if let Some(v) = v {
                f.insert(k.to_owned(), v);
            }
        }
        let ticks = self.ticks();
        for (c, v) in &self.work {
            f.insert(c.clone(), *v);
            if let (Some(t), true) = (ticks, c != "ticks") {
                f.insert(format!("{c}_per_tick"), v / t);
            }
        }
        // A stage's mean per timed occurrence: a host may time some stages on a sample of its
        // patches only (one frame build in 16 is split into interest and encoding), so a sum
        // per tick would count the sample, not the work.
        for (stage, secs) in &self.stage_s {
            if let Some(n) = self.stage_n.get(stage).filter(|n| **n > 0.0) {
                f.insert(format!("{stage}_us_mean"), secs * 1e6 / n);
            }
        }
        f
    }
}

/// The zones the bots of `cfg` join.
pub(super) fn zones_of(cfg: &BenchConfig) -> BTreeSet<String> {
    (0..cfg.zones.distinct())
        .map(|i| cfg.zones.zone_of(i))
        .collect()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn work_is_summed_over_the_runs_zones_and_differenced() {
        let start = Scrape::parse(
            "zonekeep_zone_work_total{zone=\"z\",counter=\"ticks\"} 10\n\
             zonekeep_zone_work_total{zone=\"other-app\",counter=\"ticks\"} 999\n",
        );
        let end = Scrape::parse(
            "zonekeep_zone_work_total{zone=\"z\",counter=\"ticks\"} 50\n\
             zonekeep_zone_work_total{zone=\"z\",counter=\"frames\"} 80\n\
             zonekeep_zone_work_total{zone=\"_other\",counter=\"frames\"} 20\n\
             zonekeep_zone_work_total{zone=\"other-app\",counter=\"ticks\"} 2000\n\
             zonekeep_zone_stage_seconds_sum{zone=\"z\",stage=\"advance\"} 0.004\n\
             zonekeep_zone_stage_seconds_count{zone=\"z\",stage=\"advance\"} 40\n",
        );
        let zones: BTreeSet<String> = ["z".to_owned()].into();
        let r = RunResult::from_scrapes(
            Build::B,
            Report::default(),
            &WindowScrapes {
                start: Some(start),
                end: Some(end),
            },
            &zones,
        )
        .unwrap();
        assert_eq!(r.work.get("ticks"), Some(&40.0));
        assert_eq!(
            r.work.get("frames"),
            Some(&100.0),
            "with the shared _other label"
        );
        let f = r.figures();
        assert_eq!(f.get("frames_per_tick"), Some(&2.5));
        assert!((f.get("advance_us_mean").unwrap() - 100.0).abs() < 1e-9);
        let missing = RunResult::from_scrapes(
            Build::A,
            Report::default(),
            &WindowScrapes::default(),
            &zones,
        );
        assert!(missing.is_err());
    }
}
