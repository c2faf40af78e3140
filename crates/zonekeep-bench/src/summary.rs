//! The human summary table printed at the end of a run.

use std::fmt::Write;

use crate::report::Report;
use crate::stats::Summary;

fn opt(v: Option<f64>, digits: usize) -> String {
    v.map_or_else(|| "n/a".to_owned(), |v| format!("{v:.digits$}"))
}

fn dist(s: &Summary) -> String {
    if s.n == 0 {
        return "n/a".to_owned();
    }
    format!(
        "mean {:.1}  p50 {:.1}  p90 {:.1}  p99 {:.1}  max {:.1}  (n {})",
        s.mean, s.p50, s.p90, s.p99, s.max, s.n
    )
}

/// Renders `r` as an aligned text table.
pub fn render(r: &Report) -> String {
    let mut rows: Vec<(String, String)> = Vec::new();
    let mut row = |k: &str, v: String| rows.push((k.to_owned(), v));
    let p = &r.params;
    row(
        "workload",
        format!(
            "{}{} bots={} (offset {}) zones={} ({}) decode={} rate={}/s{}",
            p.workload,
            p.scenario
                .as_deref()
                .map(|s| format!(" {s}"))
                .unwrap_or_default(),
            p.bots,
            p.bot_offset,
            p.zone_count,
            p.zones,
            p.decode,
            p.rate,
            p.state_acks
                .as_deref()
                .map(|a| format!(" state-acks={a}"))
                .unwrap_or_default()
        ),
    );
    row(
        "machine",
        format!(
            "{} · {} · {} cores · {}",
            r.machine.hostname, r.machine.cpu, r.machine.cores, r.machine.date
        ),
    );
    row(
        "window",
        format!("{:.2} s (warm-up {} s)", r.window_s, p.warmup_s),
    );
    let c = &r.counts;
    row(
        "joined",
        format!(
            "{} / {} in {:.0} ms; failed {:?}",
            c.joined, p.bots, c.join_ms, c.join_failed
        ),
    );
    row(
        "connections",
        format!(
            "whole window {}; drops {}; reconnects {} (resumed {}, fresh {}); redirects {}; kicks {:?}",
            c.whole_window, c.drops, c.reconnects, c.resumes, c.fresh_joins, c.redirects, c.kicks
        ),
    );
    row(
        "inputs",
        format!(
            "sent {} acked {} in the window",
            c.inputs_sent, c.inputs_acked
        ),
    );
    let pc = &r.per_client;
    row(
        "recv payload B/s/client",
        dist(&pc.recv_payload_bytes_per_s),
    );
    row("recv wire B/s/client", dist(&pc.recv_wire_bytes_per_s));
    row("recv msgs/s/client", dist(&pc.recv_msgs_per_s));
    row("recv patches/s/client", dist(&pc.recv_patches_per_s));
    row("sent inputs/s/client", dist(&pc.sent_inputs_per_s));
    row("input→ack RTT ms", dist(&r.rtt_ms));
    row(
        "patch interval ms",
        format!(
            "{}  stddev {:.2}",
            dist(&r.patch_interval_ms_at_client),
            r.patch_interval_ms_at_client.stddev
        ),
    );
    let s = &r.server;
    row(
        "server CPU",
        format!(
            "{} s = {} cores (source {})",
            opt(s.cpu_s, 3),
            opt(s.cpu_util_cores, 4),
            s.source
        ),
    );
    row(
        "server RSS MB",
        format!(
            "peak (VmHWM) {}  window max {}  before bots {}  per connection {} B",
            opt(s.rss_peak_mb_vmhwm, 1),
            opt(s.rss_window_max_mb, 1),
            opt(s.rss_before_mb, 1),
            opt(s.rss_per_connection_bytes, 0)
        ),
    );
    row(
        "server ticks",
        format!(
            "{} run, {} dropped; tick p50 {} ms p99 {} ms",
            opt(s.ticks, 0),
            opt(s.dropped_ticks, 0),
            opt(s.tick_p50_ms, 3),
            opt(s.tick_p99_ms, 3)
        ),
    );
    row(
        "server traffic",
        format!(
            "{} frames, {} bytes, {} inputs accepted in the window; {} ticks/s (all zones)",
            opt(s.frames_out, 0),
            opt(s.bytes_out, 0),
            opt(s.inputs_accepted, 0),
            opt(s.tick_rate_hz, 1)
        ),
    );
    let b = &r.bots_process;
    row(
        "bots process",
        format!(
            "{:.3} cores; loop lag p50 {:.2} p99 {:.2} max {:.2} ms; machine busy {}",
            b.cpu_util_cores,
            b.event_loop_lag_ms.p50,
            b.event_loop_lag_ms.p99,
            b.event_loop_lag_ms.max,
            opt(b.host_cpu_busy_frac, 3)
        ),
    );
    if let Some(pr) = &r.probe {
        row(
            "probe",
            format!(
                "mismatches {} (pos {} hp {} missing {} unexpected {} own {} malformed {}); {} patches, {} NPC values checked; max unsent {} ticks",
                pr.mismatches(),
                pr.pos_mismatch,
                pr.hp_mismatch,
                pr.missing,
                pr.unexpected,
                pr.own_mismatch,
                pr.malformed,
                pr.patches,
                pr.npcs_checked,
                pr.max_unsent_ticks
            ),
        );
    }
    if let Some(a) = &r.aim {
        row(
            "aim",
            format!(
                "{} shots at drawn targets: {} hits, {} misses (hit rate {}), {} taken first by another, {} unjudged, {} refused, {} unanswered; nothing drawn {} times",
                a.shots,
                a.hits,
                a.misses,
                a.hit_rate()
                    .map_or_else(|| "-".to_owned(), |h| format!("{:.1} %", 100.0 * h)),
                a.taken,
                a.unjudged,
                a.refused,
                a.unanswered,
                a.nothing_drawn
            ),
        );
    }
    let w = rows
        .iter()
        .map(|(k, _)| k.chars().count())
        .max()
        .unwrap_or(0);
    let mut out = String::new();
    for (k, v) in rows {
        let _ = writeln!(out, "{k:<w$}  {v}");
    }
    out
}
