//! The server's cost over the measured window (WORKLOADS.md arena §6): CPU and memory from `/proc/<pid>`
//! when the server runs on this machine, otherwise its `process_*` metrics; tick figures, bytes
//! and frames from `/metrics` either way.

use crate::config::ServerSource;
use crate::http::Http;
use crate::procfs;
use crate::prom::{bucket_delta, quantile, Scrape};
use crate::report::ServerFigures;

const MB: f64 = 1024.0 * 1024.0;

/// One reading of the server.
#[derive(Debug, Clone, Default)]
pub struct Reading {
    /// CPU seconds so far.
    pub cpu_s: Option<f64>,
    /// RSS now, bytes.
    pub rss: Option<f64>,
    /// Peak RSS (VmHWM), bytes (proc only).
    pub hwm: Option<f64>,
    /// The `/metrics` scrape, if any.
    pub scrape: Option<Scrape>,
}

/// Reads the server per its [`ServerSource`].
#[derive(Debug, Clone)]
pub struct ServerCost {
    pid: Option<String>,
    metrics_url: Option<String>,
    http: Http,
}

impl ServerCost {
    /// A reader for `source`.
    pub fn new(source: &ServerSource) -> Self {
        Self {
            pid: source.pid.map(|p| p.to_string()),
            metrics_url: source.metrics_url.clone(),
            http: Http::default(),
        }
    }

    /// The same reader pointed at another host's `/metrics` (the zone's owner in a fleet):
    /// CPU and memory come from its metrics then, not from a local process id.
    pub fn at_owner(&self, metrics_url: String) -> Self {
        Self {
            pid: None,
            metrics_url: Some(metrics_url),
            http: self.http.clone(),
        }
    }

    /// The `/metrics` URL read, if any.
    pub fn metrics_url(&self) -> Option<&str> {
        self.metrics_url.as_deref()
    }

    /// `proc`, `metrics` or `none`: where CPU and RSS come from.
    pub fn source_name(&self) -> &'static str {
        if self.pid.is_some() {
            "proc"
        } else if self.metrics_url.is_some() {
            "metrics"
        } else {
            "none"
        }
    }

    /// Scrapes `/metrics` (if configured).
    pub async fn scrape(&self) -> Option<Scrape> {
        let url = self.metrics_url.as_deref()?;
        match self.http.get_text(url).await {
            Ok(t) => Some(Scrape::parse(&t)),
            Err(e) => {
                tracing::warn!(error = %e, "metrics scrape failed");
                None
            }
        }
    }

    /// RSS only (the 250 ms samples).
    pub async fn rss(&self) -> Option<f64> {
        if let Some(pid) = &self.pid {
            return procfs::memory(pid).ok().map(|(_, rss)| rss as f64);
        }
        self.scrape().await?.sum("process_resident_memory_bytes")
    }

    /// A full reading.
    pub async fn read(&self) -> Reading {
        let scrape = self.scrape().await;
        let mut r = Reading::default();
        if let Some(pid) = &self.pid {
            r.cpu_s = procfs::cpu_seconds(pid).ok();
            if let Ok((hwm, rss)) = procfs::memory(pid) {
                r.hwm = Some(hwm as f64);
                r.rss = Some(rss as f64);
            }
        } else if let Some(s) = &scrape {
            r.cpu_s = s.sum("process_cpu_seconds_total");
            r.rss = s.sum("process_resident_memory_bytes");
        }
        r.scrape = scrape;
        r
    }
}

/// The window's server figures from readings at its start and end, the RSS samples taken in it,
/// the RSS before any bot connected, and the bots joined.
pub fn figures(
    source: &str,
    before_rss: Option<f64>,
    start: &Reading,
    end: &Reading,
    rss_samples: &[f64],
    window_s: f64,
    joined: u64,
) -> ServerFigures {
    let cpu_s = match (start.cpu_s, end.cpu_s) {
        (Some(a), Some(b)) => Some(b - a),
        _ => None,
    };
    let window_max = rss_samples
        .iter()
        .copied()
        .chain(end.rss)
        .chain(start.rss)
        .fold(None, |m: Option<f64>, v| Some(m.map_or(v, |m| m.max(v))));
    let mut f = ServerFigures {
        source: source.to_owned(),
        read_at: None,
        cpu_s,
        cpu_util_cores: cpu_s.map(|c| c / window_s.max(1e-9)),
        rss_peak_mb_vmhwm: end.hwm.map(|h| h / MB),
        rss_window_max_mb: window_max.map(|r| r / MB),
        rss_before_mb: before_rss.map(|r| r / MB),
        rss_per_connection_bytes: match (window_max, before_rss) {
            (Some(m), Some(b)) if joined > 0 => Some((m - b) / joined as f64),
            _ => None,
        },
        ..ServerFigures::default()
    };
    if let (Some(a), Some(b)) = (&start.scrape, &end.scrape) {
        let diff = |name: &str| match (a.sum(name), b.sum(name)) {
            (Some(x), Some(y)) => Some(y - x),
            (None, Some(y)) => Some(y),
            _ => None,
        };
        f.ticks = diff("zonekeep_ticks_total");
        f.dropped_ticks = diff("zonekeep_ticks_dropped_total");
        f.bytes_out = diff("zonekeep_bytes_out_total");
        f.frames_out = diff("zonekeep_frames_out_total");
        f.tick_rate_hz = f.ticks.map(|t| t / window_s.max(1e-9));
        f.inputs_accepted = match (
            a.sum_where("zonekeep_inputs_total", "outcome", "accepted"),
            b.sum_where("zonekeep_inputs_total", "outcome", "accepted"),
        ) {
            (Some(x), Some(y)) => Some(y - x),
            (None, Some(y)) => Some(y),
            _ => None,
        };
        let d = bucket_delta(
            &a.buckets("zonekeep_tick_duration_seconds"),
            &b.buckets("zonekeep_tick_duration_seconds"),
        );
        f.tick_p50_ms = quantile(&d, 0.5).map(|s| s * 1000.0);
        f.tick_p99_ms = quantile(&d, 0.99).map(|s| s * 1000.0);
    }
    if let Some(b) = &end.scrape {
        f.bytes_out_total = b.sum("zonekeep_bytes_out_total");
        f.frames_out_total = b.sum("zonekeep_frames_out_total");
        f.kicks_total = b.sum("zonekeep_kicks_total");
    }
    f
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn window_figures_are_differences() {
        let start = Reading {
            cpu_s: Some(10.0),
            rss: Some(10.0 * MB),
            hwm: Some(11.0 * MB),
            scrape: Some(Scrape::parse(
                "zonekeep_ticks_total{zone=\"a\"} 100\nzonekeep_bytes_out_total 5\n",
            )),
        };
        let end = Reading {
            cpu_s: Some(10.5),
            rss: Some(12.0 * MB),
            hwm: Some(13.0 * MB),
            scrape: Some(Scrape::parse(
                "zonekeep_ticks_total{zone=\"a\"} 500\nzonekeep_ticks_dropped_total 0\nzonekeep_bytes_out_total 105\n",
            )),
        };
        let f = figures(
            "proc",
            Some(8.0 * MB),
            &start,
            &end,
            &[14.0 * MB],
            20.0,
            1000,
        );
        assert_eq!(f.cpu_s, Some(0.5));
        assert_eq!(f.cpu_util_cores, Some(0.025));
        assert_eq!(f.rss_peak_mb_vmhwm, Some(13.0));
        assert_eq!(f.rss_window_max_mb, Some(14.0));
        assert_eq!(f.ticks, Some(400.0));
        assert_eq!(f.tick_rate_hz, Some(20.0));
        assert_eq!(f.dropped_ticks, Some(0.0));
        assert_eq!(f.bytes_out, Some(100.0));
        assert_eq!(f.bytes_out_total, Some(105.0));
        let per = f.rss_per_connection_bytes.unwrap();
        assert!((per - 6.0 * MB / 1000.0).abs() < 1e-6);
    }
}
