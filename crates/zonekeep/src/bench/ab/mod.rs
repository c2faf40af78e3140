//! `zonekeep bench ab`: two builds on one workload. Each run starts a fresh host of one build (its
//! own data directory, a port it picks, a random ticket secret), runs the bots of `zonekeep bench`
//! against it from this process, reads the zones' work counters and stage times from its
//! `/metrics` at the edges of the measured window, and stops it (SIGTERM). Runs go in pairs
//! that alternate which build goes first (A B, B A, A B, …), so a drift of the machine's load
//! weighs on both builds alike; the table gives each build's median, its min..max spread and
//! B/A.
//!
//! This file holds the flags and the runs; [`host`] starts and stops one build's host, [`figures`]
//! reads a run's figures from its `/metrics` scrapes, and [`table`] gives the medians.

mod figures;
mod host;
mod table;

use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use clap::parser::ValueSource;
use clap::{ArgMatches, Args, Command, FromArgMatches};
use serde_json::{json, Value};

use crate::bench::RunArgs;
use figures::{zones_of, RunResult};
use host::{log_tail, random_secret, resolve, Binary, Host, RunDir};
use table::{num, run_line, Medians};

/// Run flags `bench ab` sets itself for every run (clap id, flag).
const SET_BY_AB: [(&str, &str); 8] = [
    ("url", "--url"),
    ("server_pid", "--server-pid"),
    ("metrics_url", "--metrics-url"),
    ("no_metrics", "--no-metrics"),
    ("report", "--report"),
    ("join", "--join"),
    ("ticket_secret", "--ticket-secret"),
    ("no_follow_owner", "--no-follow-owner"),
];

/// The flags of `bench ab` itself.
#[derive(Debug, Args)]
struct AbOnly {
    /// Build A: a `zonekeep` binary (a path, or a program name on PATH).
    #[arg(long = "a", value_name = "BIN_A", required = true)]
    bin_a: PathBuf,
    /// Build B, compared with A (B/A in the table).
    #[arg(long = "b", value_name = "BIN_B", required = true)]
    bin_b: PathBuf,
    /// Pairs of runs: 2 × N runs, ordered A B, B A, A B, … (each pair alternates which build
    /// goes first).
    #[arg(long, value_name = "N", default_value_t = 3)]
    pairs: u32,
    /// One more argument for every host's `serve` (repeat it: `--serve --sim-threads --serve 1`
    /// or `--serve=--sim-threads=1`). Every host runs `serve --listen 127.0.0.1:0 --dev-kinds
    /// --max-connections-per-ip 100000 --data-dir <fresh dir>` and these.
    #[arg(long = "serve", value_name = "ARG", allow_hyphen_values = true)]
    serve: Vec<String>,
    /// Write every run (its full report, work counters and stage times) and the medians to
    /// this file, as JSON.
    #[arg(long = "json", value_name = "FILE")]
    json_file: Option<PathBuf>,
}

/// `zonekeep bench ab` flags: its own and those of one `zonekeep bench` run.
#[derive(Debug)]
pub struct AbArgs {
    ab: AbOnly,
    run: RunArgs,
    /// Run flags given that `bench ab` sets itself.
    set_by_ab: Vec<&'static str>,
}

impl FromArgMatches for AbArgs {
    fn from_arg_matches(m: &ArgMatches) -> Result<Self, clap::Error> {
        let set_by_ab = SET_BY_AB
            .iter()
            .filter(|(id, _)| m.value_source(id) == Some(ValueSource::CommandLine))
            .map(|(_, flag)| *flag)
            .collect();
        Ok(Self {
            ab: AbOnly::from_arg_matches(m)?,
            run: RunArgs::from_arg_matches(m)?,
            set_by_ab,
        })
    }

    fn update_from_arg_matches(&mut self, m: &ArgMatches) -> Result<(), clap::Error> {
        *self = Self::from_arg_matches(m)?;
        Ok(())
    }
}

impl Args for AbArgs {
    fn augment_args(cmd: Command) -> Command {
        let cmd = AbOnly::augment_args(cmd)
            .next_help_heading("The bots of every run (as for `zonekeep bench`)");
        let cmd = RunArgs::augment_args(cmd);
        let cmd = SET_BY_AB
            .iter()
            .fold(cmd, |c, (id, _)| c.mut_arg(*id, |a| a.hide(true)));
        // A run's `--json` (its report on stdout) makes no sense here: `--json FILE` is ab's.
        cmd.mut_arg("json", |a| a.long("run-report-json").hide(true))
    }

    fn augment_args_for_update(cmd: Command) -> Command {
        Self::augment_args(cmd)
    }
}

/// A or B.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Build {
    A,
    B,
}

impl Build {
    fn name(self) -> &'static str {
        match self {
            Build::A => "A",
            Build::B => "B",
        }
    }
}

/// The order of `pairs` pairs: A B, B A, A B, …
fn run_order(pairs: u32) -> Vec<Build> {
    (0..pairs)
        .flat_map(|p| {
            if p % 2 == 0 {
                [Build::A, Build::B]
            } else {
                [Build::B, Build::A]
            }
        })
        .collect()
}

/// One run: a fresh host of `bin`, the bots, the scrapes, the host stopped.
async fn one_run(
    build: Build,
    bin: &Binary,
    serve: &[String],
    run_args: &mut RunArgs,
    index: usize,
) -> Result<RunResult> {
    let dir = RunDir::new(index)?;
    let secret = random_secret();
    let mut host = Host::start(&bin.path, serve, &secret, &dir.0).await?;
    let cfg = crate::bench::config_for_host(
        run_args,
        &format!("ws://{}", host.addr),
        &secret,
        Some(host.pid),
    )?;
    let zones = zones_of(&cfg);
    let outcome = tokio::select! {
        r = zonekeep_bench::run::run_with_window(cfg) => Ok(r),
        status = host.child.wait() => Err(status),
    };
    let (report, scrapes) = match outcome {
        Ok(r) => r.context("the bench run failed")?,
        Err(status) => bail!(
            "the host exited mid-run ({}); {}",
            status.map_or_else(|e| e.to_string(), |s| s.to_string()),
            log_tail(&host.log)
        ),
    };
    if let Some(status) = host.child.try_wait()? {
        bail!(
            "the host exited mid-run ({status}); {}",
            log_tail(&host.log)
        );
    }
    if report.counts.joined == 0 {
        bail!(
            "no bot joined: {:?}; the host's {}",
            report.counts.join_failed,
            log_tail(&host.log)
        );
    }
    let result = RunResult::from_scrapes(build, report, &scrapes, &zones)?;
    let log = host.log.clone();
    let status = host.stop().await?;
    if !status.success() {
        eprintln!(
            "zonekeep bench ab: warning: the host exited {status} after SIGTERM; {}",
            log_tail(&log)
        );
    }
    dir.remove();
    Ok(result)
}

/// Runs `zonekeep bench ab`.
pub fn run(args: AbArgs) -> Result<()> {
    let AbArgs {
        ab,
        run: mut run_args,
        set_by_ab,
    } = args;
    if !set_by_ab.is_empty() {
        bail!(
            "bench ab starts its own host for every run and sets {} itself: leave {} out",
            SET_BY_AB.map(|(_, f)| f).join(", "),
            set_by_ab.join(", ")
        );
    }
    if ab.pairs == 0 {
        bail!("--pairs must be at least 1: each pair is one run of A and one of B");
    }
    let a = resolve("--a", &ab.bin_a)?;
    let b = resolve("--b", &ab.bin_b)?;
    // The run flags, checked before any host starts.
    let probe_cfg =
        crate::bench::config_for_host(&mut run_args, "ws://127.0.0.1:1", &random_secret(), None)?;
    drop(probe_cfg);

    let order = run_order(ab.pairs);
    let order_text = order.iter().map(|b| b.name()).collect::<Vec<_>>().join(" ");
    eprintln!(
        "zonekeep bench ab: {} runs, order: {order_text}",
        order.len()
    );
    crate::cli::init_logging("warn");
    // One thread: the bots must not compete with the host for more than one core.
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let mut runs = Vec::with_capacity(order.len());
    for (i, build) in order.iter().copied().enumerate() {
        let bin = match build {
            Build::A => &a,
            Build::B => &b,
        };
        let r = runtime
            .block_on(one_run(build, bin, &ab.serve, &mut run_args, i))
            .with_context(|| {
                format!(
                    "run {}/{} ({}, {})",
                    i + 1,
                    order.len(),
                    build.name(),
                    bin.path.display()
                )
            })?;
        eprintln!("zonekeep bench ab: {}", run_line(i, order.len(), &r));
        for w in crate::bench::run_warnings(&r.report) {
            eprintln!(
                "zonekeep bench ab: warning: run {} ({}): {w}",
                i + 1,
                build.name()
            );
        }
        runs.push(r);
    }

    let medians = Medians::of(&runs);
    let mut out = String::new();
    if let Some(p) = runs.first().map(|r| &r.report.params) {
        out.push_str(&format!(
            "zonekeep bench ab: {} workload{}, {} bots on {}, {} s window after {} s warm-up\n",
            p.workload,
            p.scenario
                .as_deref()
                .map(|s| format!(" (scenario {s})"))
                .unwrap_or_default(),
            p.bots,
            p.zones,
            num(p.duration_s),
            num(p.warmup_s),
        ));
    }
    out.push_str(&format!("A: {} ({})\n", a.path.display(), a.version));
    out.push_str(&format!("B: {} ({})\n", b.path.display(), b.version));
    out.push_str(&format!(
        "order: {order_text} ({} pairs, medians of {} runs each)\n",
        ab.pairs, ab.pairs
    ));
    for (i, r) in runs.iter().enumerate() {
        out.push_str(&format!("  {}\n", run_line(i, runs.len(), r)));
    }
    out.push('\n');
    out.push_str(&medians.table());
    print!("{out}");

    if let Some(path) = &ab.json_file {
        let runs_json = runs
            .iter()
            .enumerate()
            .map(|(i, r)| {
                let stages: serde_json::Map<String, Value> = r
                    .stage_s
                    .iter()
                    .map(|(k, s)| {
                        let n = r.stage_n.get(k).copied().unwrap_or(0.0);
                        (k.clone(), json!({"sum_s": s, "count": n}))
                    })
                    .collect();
                Ok(json!({
                    "run": i + 1,
                    "build": r.build.name(),
                    "binary": match r.build { Build::A => &a.path, Build::B => &b.path },
                    "figures": r.figures(),
                    "work": r.work,
                    "work_at_window_end": r.work_at_end,
                    "stages": stages,
                    "report": serde_json::to_value(&r.report)?,
                }))
            })
            .collect::<Result<Vec<Value>>>()?;
        let doc = json!({
            "a": {"path": a.path, "version": a.version},
            "b": {"path": b.path, "version": b.version},
            "pairs": ab.pairs,
            "order": order.iter().map(|b| b.name()).collect::<Vec<_>>(),
            "serve": ab.serve,
            "runs": runs_json,
            "medians": medians.json(),
        });
        std::fs::write(path, serde_json::to_string_pretty(&doc)?)
            .with_context(|| format!("writing {}", path.display()))?;
    }

    let mismatched: Vec<String> = runs
        .iter()
        .enumerate()
        .filter_map(|(i, r)| {
            let m = r.report.probe.as_ref()?.mismatches();
            (m > 0).then(|| format!("run {} ({}): {m}", i + 1, r.build.name()))
        })
        .collect();
    if !mismatched.is_empty() {
        bail!(
            "the probe found mismatches (see the reports): {}",
            mismatched.join(", ")
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn pairs_alternate_which_build_goes_first() {
        let names = |p| {
            run_order(p)
                .iter()
                .map(|b| b.name())
                .collect::<Vec<_>>()
                .join(" ")
        };
        assert_eq!(names(1), "A B");
        assert_eq!(names(2), "A B B A");
        assert_eq!(names(3), "A B B A A B");
    }
}
