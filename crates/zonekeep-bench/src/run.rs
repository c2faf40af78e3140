//! One run, end to end (WORKLOADS.md arena §6): join every bot (at most `join_concurrency` in flight, until
//! all joined or the join deadline), warm up, measure the window while sampling the server, stop
//! the bots, and assemble the [`Report`].

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use tokio::sync::{watch, Semaphore};
use tokio::task::JoinSet;

use crate::arena;
use crate::bot::{run_bot, BotResult, Phase, RunShared};
use crate::config::{BenchConfig, Workload};
use crate::error::BenchError;
use crate::procfs;
use crate::prom::Scrape;
use crate::report::{
    BotsProcess, ClientSample, Counts, Machine, Raw, Report, RunParams, REPORT_FORMAT,
};
use crate::server_cost::{figures, ServerCost};
use crate::stats::Histogram;
use crate::tickets::Tickets;

/// Extra time after the window before every loop is forced to end.
const HARD_GRACE: Duration = Duration::from_secs(30);

fn validate(cfg: &BenchConfig) -> Result<(), BenchError> {
    let bad = |m: &str| Err(BenchError::Config(m.to_owned()));
    if cfg.bots == 0 {
        return bad("--bots must be at least 1");
    }
    if cfg.duration.is_zero() {
        return bad("--duration must be positive");
    }
    if cfg.join_concurrency == 0 {
        return bad("join concurrency must be at least 1");
    }
    if !(cfg.url.starts_with("ws://") || cfg.url.starts_with("wss://")) {
        return bad("--url must start with ws:// or wss://");
    }
    if let Workload::Generic { templates, .. } = &cfg.workload {
        if templates.is_empty() && cfg.rate > 0.0 {
            return bad("a generic workload with --rate > 0 needs at least one --input template");
        }
    }
    if matches!(cfg.workload, Workload::Aim(_)) && cfg.decode != crate::DecodeMode::All {
        return bad(
            "the aim workload needs every bot to decode (--decode all): bots aim where they draw",
        );
    }
    if cfg.zones.pattern.contains("{i}") && cfg.zones.count == 0 {
        return bad("--zone-count must be at least 1");
    }
    Ok(())
}

/// The `/metrics` scrapes a run read the server's figures from, at its window's start and end
/// (`None` without a metrics URL or when the scrape failed): for series the [`Report`] does not
/// keep, such as the zones' work counters `zonekeep bench ab` compares.
#[derive(Debug, Clone, Default)]
pub struct WindowScrapes {
    /// Read just before the window.
    pub start: Option<Scrape>,
    /// Read just after the window, before the bots stop.
    pub end: Option<Scrape>,
}

/// Runs the bench described by `cfg` and returns its report.
pub async fn run(cfg: BenchConfig) -> Result<Report, BenchError> {
    run_with_window(cfg).await.map(|(report, _)| report)
}

/// [`run()`], also returning the window's `/metrics` scrapes.
pub async fn run_with_window(cfg: BenchConfig) -> Result<(Report, WindowScrapes), BenchError> {
    validate(&cfg)?;
    let (kind, params) = match &cfg.workload {
        Workload::Arena(p) => (
            Some(arena::zone::kind_for(p).to_owned()),
            Some(serde_json::to_value(p).map_err(|e| BenchError::Config(e.to_string()))?),
        ),
        _ => (cfg.zone_kind.clone(), cfg.zone_params.clone()),
    };
    let role = match cfg.observers {
        true => zonekeep_core::Role::Observer,
        false => zonekeep_core::Role::Player,
    };
    let tickets = Tickets::new(&cfg.auth, kind, params.clone())?.with_role(role);
    let server = ServerCost::new(&cfg.server);
    let started = std::time::SystemTime::now();
    let rss_before = server.rss().await;

    let (phase_tx, phase_rx) = watch::channel(Phase::Warmup);
    let hard_deadline = Instant::now() + cfg.join_deadline + cfg.warmup + cfg.duration + HARD_GRACE;
    let shared = Arc::new(RunShared {
        tickets,
        phase: phase_rx,
        join_gate: Semaphore::new(cfg.join_concurrency),
        joined: AtomicU64::new(0),
        failed: AtomicU64::new(0),
        connected: AtomicU64::new(0),
        bytes_in: AtomicU64::new(0),
        msgs_in: AtomicU64::new(0),
        mismatches: AtomicU64::new(0),
        rtt: Mutex::new(Histogram::new()),
        patch_interval: Mutex::new(Histogram::new()),
        hard_deadline,
        join_span: Mutex::new((None, None)),
        first_wave: watch::channel(0).0,
        webtransport: tokio::sync::OnceCell::new(),
        owner: Mutex::new(None),
        cfg: cfg.clone(),
    });
    let progress = crate::progress::Progress::start(shared.clone(), cfg.progress);

    let mut bots = JoinSet::new();
    for i in 0..cfg.bots {
        bots.spawn(run_bot(shared.clone(), i));
    }

    // Joins: until every bot joined or failed, or the join deadline.
    let join_deadline = Instant::now() + cfg.join_deadline;
    let total = u64::from(cfg.bots);
    while shared.joined.load(Ordering::Relaxed) + shared.failed.load(Ordering::Relaxed) < total
        && Instant::now() < join_deadline
    {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    progress.set_stage("warm-up");
    tokio::time::sleep(cfg.warmup).await;
    // In a fleet the zone may run on another host than the entry URL's: its cost is the owner's.
    let server = match shared.owner_base().filter(|_| cfg.follow_owner) {
        Some(owner) if cfg.server.metrics_url.is_some() => {
            tracing::info!(%owner, "the zone runs on another host than the entry URL; reading the server's figures there");
            server.at_owner(crate::http::metrics_url_for(&owner))
        }
        _ => server,
    };

    // The window.
    let start_reading = server.read().await;
    let self_cpu0 = procfs::cpu_seconds("self").ok();
    let machine0 = procfs::machine_jiffies().ok();
    let window_start = Instant::now();
    let window_end = window_start + cfg.duration;
    let _ = phase_tx.send(Phase::Measure);
    progress.set_stage("measure");

    let rss_samples = Arc::new(Mutex::new(Vec::new()));
    let sampler = {
        let server = server.clone();
        let samples = rss_samples.clone();
        tokio::spawn(async move {
            let mut next = Instant::now();
            while next < window_end {
                if let Some(r) = server.rss().await {
                    samples
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .push(r);
                }
                next += Duration::from_millis(250);
                tokio::time::sleep_until(next.into()).await;
            }
        })
    };
    // Event-loop lag: how late a 10 ms timer fires on the bots' runtime.
    let mut lag = Histogram::new();
    let mut next = window_start + Duration::from_millis(10);
    while next <= window_end {
        tokio::time::sleep_until(next.into()).await;
        lag.record(crate::bot::micros(next, Instant::now()));
        next += Duration::from_millis(10);
    }
    let _ = sampler.await;
    let end_reading = server.read().await;
    let window_s = window_start.elapsed().as_secs_f64();
    let self_cpu1 = procfs::cpu_seconds("self").ok();
    let machine1 = procfs::machine_jiffies().ok();
    let _ = phase_tx.send(Phase::Done);
    progress.set_stage("collect");

    let mut results: Vec<BotResult> = Vec::with_capacity(cfg.bots as usize);
    while let Some(r) = bots.join_next().await {
        match r {
            Ok(r) => results.push(r),
            Err(e) => tracing::warn!(error = %e, "bot task failed"),
        }
    }
    progress.finish();
    results.sort_by_key(|r| r.bot);

    let rss_samples = rss_samples
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .clone();
    let joined = results.iter().filter(|r| r.joined).count() as u64;
    let mut report = Report {
        format: REPORT_FORMAT,
        params: run_params(&cfg, params),
        machine: machine(started),
        window_s,
        counts: counts(&results, &shared),
        server: figures(
            server.source_name(),
            rss_before,
            &start_reading,
            &end_reading,
            &rss_samples,
            window_s,
            joined,
        ),
        bots_process: BotsProcess {
            cpu_util_cores: match (self_cpu0, self_cpu1) {
                (Some(a), Some(b)) => (b - a) / window_s.max(1e-9),
                _ => 0.0,
            },
            event_loop_lag_ms: Default::default(),
            host_cpu_busy_frac: match (machine0, machine1) {
                (Some((b0, t0)), Some((b1, t1))) if t1 > t0 => {
                    Some((b1 - b0) as f64 / (t1 - t0) as f64)
                }
                _ => None,
            },
        },
        probe: results.iter().find_map(|r| r.probe),
        aim: results.iter().filter_map(|r| r.aim).reduce(|mut a, b| {
            a.add(&b);
            a
        }),
        runs: 1,
        raw: Raw {
            clients: results
                .iter()
                .filter(|r| r.whole_window)
                .map(|r| client_sample(r, window_s))
                .collect(),
            rtt_us: shared
                .rtt
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .settled(),
            patch_interval_us: shared
                .patch_interval
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .settled(),
            loop_lag_us: lag.settled(),
        },
        ..Report::default()
    };
    report.server.read_at = server.metrics_url().map(str::to_owned);
    report.summarize();
    let scrapes = WindowScrapes {
        start: start_reading.scrape,
        end: end_reading.scrape,
    };
    Ok((report, scrapes))
}

fn client_sample(r: &BotResult, window_s: f64) -> ClientSample {
    let per_s = |v: u64| v as f64 / window_s.max(1e-9);
    ClientSample {
        bot: r.bot,
        recv_payload_bytes_per_s: per_s(r.window.bytes_in),
        recv_wire_bytes_per_s: per_s(r.window.bytes_in + r.window.frame_bytes_in),
        recv_msgs_per_s: per_s(r.window.msgs_in),
        recv_patches_per_s: per_s(r.window.deltas),
        sent_inputs_per_s: per_s(r.window.inputs),
        sent_payload_bytes_per_s: per_s(r.window.bytes_out),
        last_ack: r.last_ack,
    }
}

fn counts(results: &[BotResult], shared: &RunShared) -> Counts {
    let mut c = Counts::default();
    for r in results {
        if r.joined {
            c.joined += 1;
        }
        if let Some(e) = &r.join_error {
            *c.join_failed.entry(e.clone()).or_insert(0) += 1;
        }
        c.drops += r.drops;
        c.reconnects += r.reconnects;
        c.resumes += r.resumes;
        c.fresh_joins += r.fresh_joins;
        c.redirects += r.redirects;
        for (k, v) in &r.kicks {
            *c.kicks.entry(k.clone()).or_insert(0) += v;
        }
        if r.whole_window {
            c.whole_window += 1;
        }
        c.inputs_sent += r.window.inputs;
        c.inputs_acked += r.window.acked;
        c.deltas += r.window.deltas;
        c.delta_bytes += r.window.delta_bytes;
        c.total_bytes_in += r.total_bytes_in;
        c.total_delta_bytes += r.total_delta_bytes;
        c.total_deltas += r.total_deltas;
        c.outgoing_full += r.outgoing_full;
    }
    let span = *shared
        .join_span
        .lock()
        .unwrap_or_else(PoisonError::into_inner);
    if let (Some(a), Some(b)) = span {
        c.join_ms = b.saturating_duration_since(a).as_secs_f64() * 1000.0;
    }
    c
}

fn run_params(cfg: &BenchConfig, params: Option<serde_json::Value>) -> RunParams {
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    RunParams {
        workload: cfg.workload.name().to_owned(),
        scenario: match &cfg.workload {
            Workload::Arena(p) => Some(p.scenario.letter().to_owned()),
            _ => None,
        },
        url: cfg.url.clone(),
        zones: cfg.zones.pattern.clone(),
        zone_count: cfg.zones.distinct(),
        bots: cfg.bots,
        bot_offset: cfg.bot_offset,
        rate: match &cfg.workload {
            Workload::Idle { .. } => 0.0,
            Workload::Generic { .. } | Workload::Aim(_) | Workload::Arena(_) => cfg.rate,
        },
        duration_s: cfg.duration.as_secs_f64(),
        warmup_s: cfg.warmup.as_secs_f64(),
        decode: cfg.decode.name().to_owned(),
        state_acks: (cfg.transport == crate::config::Transport::WebTransport)
            .then(|| cfg.state_acks.name().to_owned()),
        net: (ms(cfg.netsim.delay), ms(cfg.netsim.jitter), cfg.netsim.loss),
        workload_params: params.unwrap_or(serde_json::Value::Null),
    }
}

fn read_trim(path: &str) -> Option<String> {
    std::fs::read_to_string(path)
        .ok()
        .map(|s| s.trim().to_owned())
}

fn machine(started: std::time::SystemTime) -> Machine {
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|t| {
            t.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split_once(':'))
                .map(|(_, v)| v.trim().to_owned())
        })
        .unwrap_or_default();
    Machine {
        hostname: read_trim("/proc/sys/kernel/hostname").unwrap_or_default(),
        cpu,
        cores: procfs::cpu_count(),
        date: rfc3339(started),
        zonekeep_version: env!("CARGO_PKG_VERSION").to_owned(),
        protocol_version: zonekeep_protocol::limits::PROTOCOL_VERSION,
    }
}

/// `YYYY-MM-DDTHH:MM:SSZ` for a system time (civil-from-days, proleptic Gregorian).
pub fn rfc3339(t: std::time::SystemTime) -> String {
    let secs = t
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs()) as i64;
    let days = secs.div_euclid(86_400);
    let rem = secs.rem_euclid(86_400);
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_format_as_rfc3339() {
        let t = |s: u64| std::time::UNIX_EPOCH + Duration::from_secs(s);
        assert_eq!(rfc3339(t(0)), "1970-01-01T00:00:00Z");
        assert_eq!(rfc3339(t(951_782_400)), "2000-02-29T00:00:00Z");
        assert_eq!(rfc3339(t(1_798_603_199)), "2026-12-30T03:59:59Z");
    }
}
