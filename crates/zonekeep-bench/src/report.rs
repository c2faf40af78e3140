//! The report of one `zonekeep bench` run (`--report out.json`), and [`merge`] for runs made from
//! several machines against one host.
//!
//! A report keeps the **raw material** of every distribution (one sample per bot for the rates,
//! mergeable histograms for latencies) beside the summaries computed from it, so a merge
//! recomputes exact summaries instead of averaging percentiles.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use thiserror::Error;

use crate::aim::AimCounts;
use crate::arena::probe::ProbeCounts;
use crate::stats::{summarize, Histogram, Summary};

/// Version of the report format; [`merge`] refuses others.
pub const REPORT_FORMAT: u32 = 1;

/// What was run.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RunParams {
    /// `generic`, `arena` or `idle`.
    pub workload: String,
    /// Arena scenario (`A` or `B`).
    pub scenario: Option<String>,
    /// Server base URL.
    pub url: String,
    /// The zone, or the zone pattern.
    pub zones: String,
    /// Number of distinct zones the bots spread over.
    pub zone_count: u32,
    /// Bots requested.
    pub bots: u32,
    /// First bot index.
    pub bot_offset: u32,
    /// Inputs per second per bot.
    pub rate: f64,
    /// Measured window, seconds.
    pub duration_s: f64,
    /// Warm-up, seconds.
    pub warmup_s: f64,
    /// `probe`, `all` or `none`.
    pub decode: String,
    /// When WebTransport bots acknowledged States; absent over WebSocket (and in reports written
    /// before bots held acknowledgements, where it meant `every-state`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state_acks: Option<String>,
    /// Client-side NetSim: delay, jitter (ms) and loss.
    pub net: (f64, f64, f64),
    /// Workload parameters (arena params as JSON).
    pub workload_params: serde_json::Value,
}

/// Where and when.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Machine {
    /// Host name of the bots machine.
    pub hostname: String,
    /// CPU model of the bots machine.
    pub cpu: String,
    /// Online CPUs.
    pub cores: usize,
    /// Start of the run, RFC 3339 UTC.
    pub date: String,
    /// `zonekeep` version.
    pub zonekeep_version: String,
    /// Protocol version spoken.
    pub protocol_version: u32,
}

/// One bot's figures over the window (only bots connected for the whole window).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct ClientSample {
    /// Bot index.
    pub bot: u32,
    /// WebSocket message payload bytes received per second.
    pub recv_payload_bytes_per_s: f64,
    /// Payload plus server→client frame headers per second.
    pub recv_wire_bytes_per_s: f64,
    /// Messages received per second.
    pub recv_msgs_per_s: f64,
    /// Delta (patch) messages received per second.
    pub recv_patches_per_s: f64,
    /// Inputs sent per second.
    pub sent_inputs_per_s: f64,
    /// Payload bytes sent per second.
    pub sent_payload_bytes_per_s: f64,
    /// The highest input ack this bot saw (the zone processed its inputs up to this sequence).
    pub last_ack: u32,
}

/// Counts over the whole run.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Counts {
    /// Bots that completed the handshake.
    pub joined: u64,
    /// Bots that failed to join, by Kick code name (or `connect` / `timeout` / `deadline`).
    pub join_failed: BTreeMap<String, u64>,
    /// Transport drops seen.
    pub drops: u64,
    /// Successful reconnects (resumed or fresh).
    pub reconnects: u64,
    /// Reconnects that resumed the same player with the token.
    pub resumes: u64,
    /// Reconnects that joined as a new player (each bot's first join not included).
    #[serde(default)]
    pub fresh_joins: u64,
    /// Redirects the bots followed during handshakes (first joins included).
    #[serde(default)]
    pub redirects: u64,
    /// Kicks received after joining, by code name.
    pub kicks: BTreeMap<String, u64>,
    /// Bots connected for the whole window.
    pub whole_window: u64,
    /// Inputs sent in the window.
    pub inputs_sent: u64,
    /// Inputs acknowledged in the window (by a Delta's ack).
    pub inputs_acked: u64,
    /// Deltas received in the window.
    pub deltas: u64,
    /// Delta payload bytes received in the window.
    pub delta_bytes: u64,
    /// All payload bytes received over the bots' whole lives (handshake included).
    pub total_bytes_in: u64,
    /// Delta payload bytes over the bots' whole lives.
    pub total_delta_bytes: u64,
    /// Delta messages over the bots' whole lives.
    pub total_deltas: u64,
    /// Inputs refused locally because the bot's outgoing queue was full.
    pub outgoing_full: u64,
    /// Time from the first connect to the last join, ms.
    pub join_ms: f64,
}

/// Server-side figures over the window.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ServerFigures {
    /// `proc` (read from `/proc/<pid>`), `metrics` (scraped `process_*`), or `none`.
    pub source: String,
    /// The `/metrics` URL the figures were read at: the entry host's, or in a fleet the zone
    /// owner's (found from the Redirect the bots followed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_at: Option<String>,
    /// CPU seconds (user + system) over the window.
    pub cpu_s: Option<f64>,
    /// `cpu_s / window_s`.
    pub cpu_util_cores: Option<f64>,
    /// VmHWM at window end, MB (proc only).
    pub rss_peak_mb_vmhwm: Option<f64>,
    /// Largest RSS sampled every 250 ms in the window, MB.
    pub rss_window_max_mb: Option<f64>,
    /// RSS before the bots connected, MB (for memory per connection).
    pub rss_before_mb: Option<f64>,
    /// `(rss_window_max − rss_before) / joined`, bytes.
    pub rss_per_connection_bytes: Option<f64>,
    /// Ticks run in the window (all zones).
    pub ticks: Option<f64>,
    /// Ticks dropped by the catch-up cap in the window.
    pub dropped_ticks: Option<f64>,
    /// Tick duration p50 over the window, ms (interpolated from the histogram).
    pub tick_p50_ms: Option<f64>,
    /// Tick duration p99 over the window, ms.
    pub tick_p99_ms: Option<f64>,
    /// Frame bytes the host sent over its life (for the bots-vs-host byte check).
    pub bytes_out_total: Option<f64>,
    /// Frames the host sent over its life.
    pub frames_out_total: Option<f64>,
    /// Bytes out in the window.
    pub bytes_out: Option<f64>,
    /// Frames out in the window.
    pub frames_out: Option<f64>,
    /// Inputs the zones accepted in the window (`zonekeep_inputs_total{outcome="accepted"}`).
    pub inputs_accepted: Option<f64>,
    /// Ticks per second over the window, all zones together.
    pub tick_rate_hz: Option<f64>,
    /// Kicks the host sent over its life, all codes.
    pub kicks_total: Option<f64>,
}

/// The bots process's own cost, to judge whether the bots were the bottleneck.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct BotsProcess {
    /// CPU seconds of the bots process over the window / window seconds.
    pub cpu_util_cores: f64,
    /// Lateness of a 10 ms timer on the bots' event loop, ms.
    pub event_loop_lag_ms: Summary,
    /// Whole machine busy fraction over the window (from `/proc/stat`).
    pub host_cpu_busy_frac: Option<f64>,
}

/// Raw material for exact merges.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Raw {
    /// One sample per whole-window bot.
    pub clients: Vec<ClientSample>,
    /// Input send → acknowledging Delta, µs.
    pub rtt_us: Histogram,
    /// Time between consecutive patches on one connection, µs.
    pub patch_interval_us: Histogram,
    /// Event-loop lag, µs.
    pub loop_lag_us: Histogram,
}

/// Per-client summaries (WORKLOADS.md arena §6 `per_client`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PerClient {
    /// Payload bytes received per second.
    pub recv_payload_bytes_per_s: Summary,
    /// Wire bytes (payload + WebSocket headers) received per second.
    pub recv_wire_bytes_per_s: Summary,
    /// Messages received per second.
    pub recv_msgs_per_s: Summary,
    /// Patches received per second.
    pub recv_patches_per_s: Summary,
    /// Inputs sent per second.
    pub sent_inputs_per_s: Summary,
}

/// A whole run.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Report {
    /// [`REPORT_FORMAT`].
    pub format: u32,
    /// What was run.
    pub params: RunParams,
    /// Where and when.
    pub machine: Machine,
    /// Measured window length, seconds.
    pub window_s: f64,
    /// Counts.
    pub counts: Counts,
    /// Per-client summaries.
    pub per_client: PerClient,
    /// Input → ack RTT, ms.
    pub rtt_ms: Summary,
    /// Patch intervals at the client, ms.
    pub patch_interval_ms_at_client: Summary,
    /// Server figures.
    pub server: ServerFigures,
    /// The bots process.
    pub bots_process: BotsProcess,
    /// Probe results (arena).
    pub probe: Option<ProbeCounts>,
    /// Aimed shots and their verdicts, summed over bots (aim workload).
    #[serde(default)]
    pub aim: Option<AimCounts>,
    /// Runs merged into this one (1 for a single run).
    pub runs: u32,
    /// Raw material.
    pub raw: Raw,
}

impl Report {
    /// Recomputes every summary from the raw material.
    pub fn summarize(&mut self) {
        let col = |f: fn(&ClientSample) -> f64| -> Summary {
            summarize(&self.raw.clients.iter().map(f).collect::<Vec<_>>())
        };
        self.per_client = PerClient {
            recv_payload_bytes_per_s: col(|c| c.recv_payload_bytes_per_s),
            recv_wire_bytes_per_s: col(|c| c.recv_wire_bytes_per_s),
            recv_msgs_per_s: col(|c| c.recv_msgs_per_s),
            recv_patches_per_s: col(|c| c.recv_patches_per_s),
            sent_inputs_per_s: col(|c| c.sent_inputs_per_s),
        };
        self.rtt_ms = self.raw.rtt_us.summary(0.001);
        self.patch_interval_ms_at_client = self.raw.patch_interval_us.summary(0.001);
        self.bots_process.event_loop_lag_ms = self.raw.loop_lag_us.summary(0.001);
        self.raw.rtt_us = self.raw.rtt_us.settled();
        self.raw.patch_interval_us = self.raw.patch_interval_us.settled();
        self.raw.loop_lag_us = self.raw.loop_lag_us.settled();
    }
}

/// Why reports cannot be merged.
#[derive(Debug, Error, PartialEq)]
pub enum MergeError {
    /// Nothing to merge.
    #[error("no reports to merge")]
    Empty,
    /// A report of another format version.
    #[error("report format {0} is not {REPORT_FORMAT}")]
    Format(u32),
    /// Reports of different workloads or targets.
    #[error("reports describe different runs ({0})")]
    Different(&'static str),
    /// Two runs used overlapping bot indices (use `--bot-offset`).
    #[error("bots {0}..{1} overlap another report's bots: give each machine its own --bot-offset")]
    Overlap(u32, u32),
}

fn add_map(into: &mut BTreeMap<String, u64>, from: &BTreeMap<String, u64>) {
    for (k, v) in from {
        *into.entry(k.clone()).or_insert(0) += v;
    }
}

/// Combines runs made at the same time from several machines against one host: counts add up,
/// distributions are recomputed from the pooled raw samples, and the server figures (one server)
/// are taken from the first report. Bot index ranges must not overlap.
pub fn merge(reports: &[Report]) -> Result<Report, MergeError> {
    let (first, rest) = reports.split_first().ok_or(MergeError::Empty)?;
    for r in reports {
        if r.format != REPORT_FORMAT {
            return Err(MergeError::Format(r.format));
        }
        if r.params.workload != first.params.workload || r.params.scenario != first.params.scenario
        {
            return Err(MergeError::Different("workload"));
        }
        if r.params.url != first.params.url {
            return Err(MergeError::Different("url"));
        }
    }
    let mut ranges: Vec<(u32, u32)> = reports
        .iter()
        .map(|r| {
            (
                r.params.bot_offset,
                r.params.bot_offset.saturating_add(r.params.bots),
            )
        })
        .collect();
    ranges.sort_unstable();
    for w in ranges.windows(2) {
        if let [a, b] = w {
            if b.0 < a.1 {
                return Err(MergeError::Overlap(b.0, b.1));
            }
        }
    }
    let mut out = first.clone();
    for r in rest {
        out.params.bots += r.params.bots;
        out.params.bot_offset = out.params.bot_offset.min(r.params.bot_offset);
        out.window_s = out.window_s.min(r.window_s);
        let (c, o) = (&mut out.counts, &r.counts);
        c.joined += o.joined;
        add_map(&mut c.join_failed, &o.join_failed);
        c.drops += o.drops;
        c.reconnects += o.reconnects;
        c.resumes += o.resumes;
        c.fresh_joins += o.fresh_joins;
        c.redirects += o.redirects;
        add_map(&mut c.kicks, &o.kicks);
        c.whole_window += o.whole_window;
        c.inputs_sent += o.inputs_sent;
        c.inputs_acked += o.inputs_acked;
        c.deltas += o.deltas;
        c.delta_bytes += o.delta_bytes;
        c.total_bytes_in += o.total_bytes_in;
        c.total_delta_bytes += o.total_delta_bytes;
        c.total_deltas += o.total_deltas;
        c.outgoing_full += o.outgoing_full;
        c.join_ms = c.join_ms.max(o.join_ms);
        out.raw.clients.extend_from_slice(&r.raw.clients);
        out.raw.rtt_us.merge(&r.raw.rtt_us);
        out.raw.patch_interval_us.merge(&r.raw.patch_interval_us);
        out.raw.loop_lag_us.merge(&r.raw.loop_lag_us);
        out.bots_process.cpu_util_cores += r.bots_process.cpu_util_cores;
        out.probe = match (out.probe, r.probe) {
            (Some(mut a), Some(b)) => {
                a.add(&b);
                Some(a)
            }
            (a, b) => a.or(b),
        };
        out.aim = match (out.aim, r.aim) {
            (Some(mut a), Some(b)) => {
                a.add(&b);
                Some(a)
            }
            (a, b) => a.or(b),
        };
        out.runs += r.runs.max(1);
    }
    out.raw.clients.sort_by_key(|c| c.bot);
    out.summarize();
    Ok(out)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    fn run(offset: u32, bots: u32, rate: f64) -> Report {
        let mut r = Report {
            format: REPORT_FORMAT,
            runs: 1,
            window_s: 20.0,
            ..Report::default()
        };
        r.params.workload = "arena".into();
        r.params.url = "ws://127.0.0.1:7350".into();
        r.params.bots = bots;
        r.params.bot_offset = offset;
        r.counts.joined = u64::from(bots);
        r.counts.join_failed.insert("ZONE_FULL".into(), 1);
        r.counts.resumes = u64::from(bots);
        r.counts.fresh_joins = 1;
        r.counts.redirects = u64::from(bots) * 2;
        for b in offset..offset + bots {
            r.raw.clients.push(ClientSample {
                bot: b,
                recv_payload_bytes_per_s: rate * f64::from(b + 1),
                ..ClientSample::default()
            });
            r.raw.rtt_us.record(u64::from(b) * 1000);
        }
        r.probe = Some(ProbeCounts {
            patches: 10,
            max_unsent_ticks: u64::from(offset),
            ..ProbeCounts::default()
        });
        r.summarize();
        r
    }

    #[test]
    fn merge_pools_raw_samples() {
        let a = run(0, 3, 1.0);
        let b = run(3, 2, 1.0);
        let m = merge(&[a.clone(), b.clone()]).unwrap();
        assert_eq!(m.params.bots, 5);
        assert_eq!(m.counts.joined, 5);
        assert_eq!(m.counts.join_failed["ZONE_FULL"], 2);
        assert_eq!(
            (m.counts.resumes, m.counts.fresh_joins, m.counts.redirects),
            (5, 2, 10)
        );
        assert_eq!(m.runs, 2);
        let all = run(0, 5, 1.0);
        assert_eq!(m.per_client, all.per_client);
        assert_eq!(m.rtt_ms, all.rtt_ms);
        let p = m.probe.unwrap();
        assert_eq!((p.patches, p.max_unsent_ticks), (20, 3));
        // Survives the JSON file format.
        let text = serde_json::to_string(&m).unwrap();
        let back: Report = serde_json::from_str(&text).unwrap();
        assert_eq!(back.per_client, m.per_client);
        assert_eq!(back.counts, m.counts);
    }

    #[test]
    fn reports_from_before_the_fleet_counters_still_load() {
        let mut v = serde_json::to_value(run(0, 2, 1.0)).unwrap();
        let counts = v["counts"].as_object_mut().unwrap();
        counts.remove("fresh_joins").unwrap();
        counts.remove("redirects").unwrap();
        let back: Report = serde_json::from_value(v).unwrap();
        assert_eq!((back.counts.fresh_joins, back.counts.redirects), (0, 0));
        assert_eq!(back.counts.resumes, 2);
    }

    #[test]
    fn merge_refuses_overlaps_and_mismatches() {
        assert_eq!(merge(&[]), Err(MergeError::Empty));
        assert_eq!(
            merge(&[run(0, 3, 1.0), run(2, 3, 1.0)]),
            Err(MergeError::Overlap(2, 5))
        );
        let mut other = run(10, 1, 1.0);
        other.params.workload = "idle".into();
        assert_eq!(
            merge(&[run(0, 3, 1.0), other]),
            Err(MergeError::Different("workload"))
        );
        let mut old = run(10, 1, 1.0);
        old.format = 0;
        assert_eq!(merge(&[run(0, 3, 1.0), old]), Err(MergeError::Format(0)));
    }
}
