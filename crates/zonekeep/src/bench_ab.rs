//! `zonekeep bench ab`: two builds on one workload. Each run starts a fresh host of one build (its
//! own data directory, a port it picks, a random ticket secret), runs the bots of `zonekeep bench`
//! against it from this process, reads the zones' work counters and stage times from its
//! `/metrics` at the edges of the measured window, and stops it (SIGTERM). Runs go in pairs
//! that alternate which build goes first (A B, B A, A B, …), so a drift of the machine's load
//! weighs on both builds alike; the table gives each build's median, its min..max spread and
//! B/A.

use std::collections::{BTreeMap, BTreeSet};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use clap::parser::ValueSource;
use clap::{ArgMatches, Args, Command, FromArgMatches};
use serde_json::{json, Value};
use zonekeep_bench::prom::Scrape;
use zonekeep_bench::run::WindowScrapes;
use zonekeep_bench::{BenchConfig, Report};

use crate::bench::RunArgs;

/// How long a host may take to print its address.
const START_TIMEOUT: Duration = Duration::from_secs(60);
/// How long a host may take to exit after SIGTERM before it is killed.
const STOP_TIMEOUT: Duration = Duration::from_secs(30);
/// Lines of a host's log shown when it fails.
const LOG_TAIL_LINES: usize = 25;
/// The line a host prints once it listens (see `serve` in cli.rs).
const LISTENING: &str = "zonekeep listening on http://";

/// Work counter series and their names, in the host's order (`zonekeep_zone_work_total`).
const WORK_SERIES: &str = "zonekeep_zone_work_total";
const WORK_COUNTERS: [&str; 14] = [
    "ticks",
    "patches",
    "frames",
    "delta_bytes",
    "records_encoded",
    "records_reused",
    "updates_sent",
    "spawns_sent",
    "despawns_sent",
    "updates_held_back",
    "inputs_accepted",
    "inputs_refused",
    "facts_emitted",
    "world_writes",
];
const STAGE_SUM: &str = "zonekeep_zone_stage_seconds_sum";
const STAGE_COUNT: &str = "zonekeep_zone_stage_seconds_count";
/// The label zones past the host's labelled ones share.
const OTHER_ZONE: &str = "_other";

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

/// One of the two builds.
#[derive(Debug)]
struct Binary {
    path: PathBuf,
    version: String,
}

/// Finds `given` (a path, or a name on PATH) and checks it is an executable `zonekeep`.
fn resolve(flag: &str, given: &Path) -> Result<Binary> {
    let bare = given.components().count() == 1 && !given.exists();
    let path = if bare {
        std::env::var_os("PATH")
            .and_then(|paths| {
                std::env::split_paths(&paths)
                    .map(|d| d.join(given))
                    .find(|p| p.is_file())
            })
            .ok_or_else(|| {
                anyhow!(
                    "{flag} {}: no such file, nor a program of that name on PATH",
                    given.display()
                )
            })?
    } else {
        given.to_path_buf()
    };
    let meta = std::fs::metadata(&path).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => anyhow!("{flag} {}: no such file", path.display()),
        _ => anyhow!("{flag} {}: {e}", path.display()),
    })?;
    if meta.is_dir() {
        bail!(
            "{flag} {}: a directory, not a zonekeep binary (e.g. target/release/zonekeep)",
            path.display()
        );
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        if meta.permissions().mode() & 0o111 == 0 {
            bail!(
                "{flag} {}: not executable (its mode is {:o}); point it at a built zonekeep binary",
                path.display(),
                meta.permissions().mode() & 0o777
            );
        }
    }
    let path = path.canonicalize().unwrap_or(path);
    let version = version_of(&path).map_err(|e| anyhow!("{flag} {}: {e}", path.display()))?;
    Ok(Binary { path, version })
}

/// `BIN --version`, which must name zonekeep.
fn version_of(path: &Path) -> Result<String> {
    let mut child = std::process::Command::new(path)
        .arg("--version")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| anyhow!("cannot run it: {e}"))?;
    let deadline = Instant::now() + Duration::from_secs(20);
    let status = loop {
        if let Some(s) = child.try_wait()? {
            break s;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            bail!("`--version` did not answer within 20 s: not a zonekeep binary?");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let mut out = String::new();
    if let Some(mut s) = child.stdout.take() {
        let _ = s.read_to_string(&mut out);
    }
    let out = out.lines().next().unwrap_or_default().trim().to_owned();
    if !status.success() || !out.starts_with("zonekeep") {
        bail!(
            "not a zonekeep binary (`--version` {status}: {:?})",
            out.chars().take(80).collect::<String>()
        );
    }
    Ok(out)
}

/// A fresh ticket secret (64 hex digits).
fn random_secret() -> String {
    let mut bytes = [0u8; 32];
    let from_os = std::fs::File::open("/dev/urandom").and_then(|mut f| f.read_exact(&mut bytes));
    if from_os.is_err() {
        use std::hash::{BuildHasher, Hasher};
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        for (i, chunk) in bytes.chunks_mut(8).enumerate() {
            let mut h = std::collections::hash_map::RandomState::new().build_hasher();
            h.write_u128(nanos);
            h.write_usize(i);
            chunk.copy_from_slice(&h.finish().to_le_bytes());
        }
    }
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The last lines of a host's log.
fn log_tail(log: &Path) -> String {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    let from = lines.len().saturating_sub(LOG_TAIL_LINES);
    let tail = lines.get(from..).unwrap_or_default().join("\n");
    if tail.is_empty() {
        "(its log is empty)".to_owned()
    } else {
        format!("its log ({}) ends:\n{tail}", log.display())
    }
}

/// A fresh directory for one run's host: its data directory and its log. Removed after a run
/// that went well, kept (its log named in the error) after one that did not.
struct RunDir(PathBuf);

impl RunDir {
    fn new(run: usize) -> Result<Self> {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        let dir = std::env::temp_dir().join(format!(
            "zonekeep-bench-ab-{}-{run}-{nanos:09}",
            std::process::id()
        ));
        std::fs::create_dir_all(dir.join("data"))
            .with_context(|| format!("creating {}", dir.display()))?;
        Ok(Self(dir))
    }
}

impl RunDir {
    fn remove(self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// One build's host, killed if dropped while running.
struct Host {
    child: tokio::process::Child,
    pid: u32,
    addr: String,
    log: PathBuf,
}

impl Host {
    /// Starts `bin serve` on a port it picks and waits for it to print its address.
    async fn start(bin: &Path, serve: &[String], secret: &str, dir: &Path) -> Result<Host> {
        let log = dir.join("host.log");
        let out =
            std::fs::File::create(&log).with_context(|| format!("creating {}", log.display()))?;
        let mut child = tokio::process::Command::new(bin)
            .arg("serve")
            .args(["--listen", "127.0.0.1:0", "--dev-kinds"])
            .args(["--max-connections-per-ip", "100000"])
            .arg("--data-dir")
            .arg(dir.join("data"))
            .args(serve)
            .env("ZONEKEEP_TICKET_SECRET", secret)
            .stdin(Stdio::null())
            .stdout(out.try_clone()?)
            .stderr(out)
            .kill_on_drop(true)
            .spawn()
            .with_context(|| format!("starting {}", bin.display()))?;
        let pid = child
            .id()
            .ok_or_else(|| anyhow!("the host exited at once"))?;
        let deadline = Instant::now() + START_TIMEOUT;
        loop {
            let text = std::fs::read_to_string(&log).unwrap_or_default();
            if let Some(addr) = text.lines().find_map(|l| l.trim().strip_prefix(LISTENING)) {
                let addr = addr.trim_end_matches('/').to_owned();
                return Ok(Host {
                    child,
                    pid,
                    addr,
                    log,
                });
            }
            if let Some(status) = child.try_wait()? {
                bail!(
                    "the host did not start: `{} serve` exited ({status}) before it listened; {}",
                    bin.display(),
                    log_tail(&log)
                );
            }
            if Instant::now() > deadline {
                bail!(
                    "the host did not start: `{} serve` printed no \"{LISTENING}…\" line within \
                     {} s; {}",
                    bin.display(),
                    START_TIMEOUT.as_secs(),
                    log_tail(&log)
                );
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// SIGTERM, then waits for the exit (kills it after [`STOP_TIMEOUT`]).
    async fn stop(mut self) -> Result<ExitStatus> {
        let _ = tokio::process::Command::new("kill")
            .args(["-TERM", &self.pid.to_string()])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .await;
        match tokio::time::timeout(STOP_TIMEOUT, self.child.wait()).await {
            Ok(status) => Ok(status?),
            Err(_) => {
                self.child.kill().await?;
                bail!(
                    "the host did not exit within {} s of SIGTERM and was killed; {}",
                    STOP_TIMEOUT.as_secs(),
                    log_tail(&self.log)
                )
            }
        }
    }
}

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
struct RunResult {
    build: Build,
    report: Report,
    /// Work counters over the window.
    work: BTreeMap<String, f64>,
    /// Work counters at the window's end (since the host started).
    work_at_end: BTreeMap<String, f64>,
    /// Stage seconds and observations over the window.
    stage_s: BTreeMap<String, f64>,
    stage_n: BTreeMap<String, f64>,
}

impl RunResult {
    fn from_scrapes(
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
    fn figures(&self) -> BTreeMap<String, f64> {
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
        if let Some(t) = ticks {
            for (stage, secs) in &self.stage_s {
                f.insert(format!("{stage}_us_per_tick"), secs * 1e6 / t);
            }
        }
        f
    }
}

/// The table's sections: a title and its keys, in order.
fn sections(runs: &[RunResult]) -> Vec<(&'static str, Vec<String>)> {
    let mut counters: Vec<String> = WORK_COUNTERS.iter().map(|c| (*c).to_owned()).collect();
    let mut extra: BTreeSet<String> = BTreeSet::new();
    let mut stages: BTreeSet<String> = BTreeSet::new();
    for r in runs {
        extra.extend(
            r.work
                .keys()
                .filter(|k| !WORK_COUNTERS.contains(&k.as_str()))
                .cloned(),
        );
        stages.extend(r.stage_s.keys().cloned());
    }
    counters.extend(extra);
    vec![
        (
            "host over the window (times move with the machine's load)",
            [
                "server_cpu_cores",
                "tick_p50_ms",
                "tick_p99_ms",
                "tick_rate_hz",
                "rss_max_mb",
            ]
            .iter()
            .map(|k| (*k).to_owned())
            .collect(),
        ),
        (
            "work per tick (counts: runs of one workload should agree)",
            counters
                .iter()
                .filter(|c| *c != "ticks")
                .map(|c| format!("{c}_per_tick"))
                .collect(),
        ),
        ("work in the window", counters),
        (
            "stage time per tick, µs",
            stages.iter().map(|s| format!("{s}_us_per_tick")).collect(),
        ),
    ]
}

/// Median, min and max of some values.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Spread {
    median: f64,
    min: f64,
    max: f64,
    n: usize,
}

fn spread(values: &[f64]) -> Option<Spread> {
    let mut v: Vec<f64> = values.iter().copied().filter(|x| x.is_finite()).collect();
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    let mid = |i: usize| v.get(i).copied().unwrap_or(0.0);
    let median = if n % 2 == 1 {
        mid(n / 2)
    } else {
        (mid(n / 2 - 1) + mid(n / 2)) / 2.0
    };
    Some(Spread {
        median,
        min: mid(0),
        max: mid(n - 1),
        n,
    })
}

/// Four significant digits, never an exponent.
fn num(v: f64) -> String {
    if v == 0.0 || !v.is_finite() {
        return format!("{v}");
    }
    let a = v.abs();
    if a >= 1000.0 {
        return format!("{v:.0}");
    }
    let digits = (3 - a.log10().floor() as i32).clamp(0, 7) as usize;
    let s = format!("{v:.digits$}");
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_owned()
    } else {
        s
    }
}

/// B/A of two medians.
fn ratio(a: Option<Spread>, b: Option<Spread>) -> Option<f64> {
    match (a, b) {
        (Some(a), Some(b)) if a.median != 0.0 => Some(b.median / a.median),
        (Some(a), Some(b)) if a.median == 0.0 && b.median == 0.0 => Some(1.0),
        _ => None,
    }
}

/// Medians by build and key.
struct Medians {
    sections: Vec<(&'static str, Vec<String>)>,
    a: BTreeMap<String, Spread>,
    b: BTreeMap<String, Spread>,
}

impl Medians {
    fn of(runs: &[RunResult]) -> Self {
        let sections = sections(runs);
        let figures: Vec<(Build, BTreeMap<String, f64>)> =
            runs.iter().map(|r| (r.build, r.figures())).collect();
        let of_build = |build: Build| {
            let mut out = BTreeMap::new();
            for key in sections.iter().flat_map(|(_, keys)| keys) {
                let values: Vec<f64> = figures
                    .iter()
                    .filter(|(b, _)| *b == build)
                    .filter_map(|(_, f)| f.get(key).copied())
                    .collect();
                if let Some(s) = spread(&values) {
                    out.insert(key.clone(), s);
                }
            }
            out
        };
        Self {
            a: of_build(Build::A),
            b: of_build(Build::B),
            sections,
        }
    }

    fn table(&self) -> String {
        let dash = || "-".to_owned();
        let mut rows: Vec<Option<[String; 6]>> = vec![Some([
            String::new(),
            "A median".into(),
            "A min..max".into(),
            "B median".into(),
            "B min..max".into(),
            "B/A".into(),
        ])];
        let mut titles = Vec::new();
        for (title, keys) in &self.sections {
            let keys: Vec<&String> = keys
                .iter()
                .filter(|k| self.a.contains_key(*k) || self.b.contains_key(*k))
                .collect();
            if keys.is_empty() {
                continue;
            }
            titles.push((rows.len(), *title));
            rows.push(None);
            for key in keys {
                let (a, b) = (self.a.get(key).copied(), self.b.get(key).copied());
                let cells = |s: Option<Spread>| match s {
                    Some(s) => (num(s.median), format!("{}..{}", num(s.min), num(s.max))),
                    None => (dash(), dash()),
                };
                let ((am, asp), (bm, bsp)) = (cells(a), cells(b));
                rows.push(Some([
                    key.clone(),
                    am,
                    asp,
                    bm,
                    bsp,
                    ratio(a, b).map_or_else(dash, |r| format!("{r:.3}")),
                ]));
            }
        }
        let mut width = [0usize; 6];
        for row in rows.iter().flatten() {
            for (w, c) in width.iter_mut().zip(row) {
                *w = (*w).max(c.chars().count());
            }
        }
        let mut out = String::new();
        for (i, row) in rows.iter().enumerate() {
            match row {
                None => {
                    let title = titles.iter().find(|(at, _)| *at == i).map(|(_, t)| *t);
                    out.push_str(&format!("{}\n", title.unwrap_or_default()));
                }
                Some(cells) => {
                    let mut line = String::from("  ");
                    for (j, (c, w)) in cells.iter().zip(width).enumerate() {
                        let pad = w.saturating_sub(c.chars().count());
                        if j == 0 {
                            line.push_str(c);
                            line.push_str(&" ".repeat(pad));
                        } else {
                            line.push_str("  ");
                            line.push_str(&" ".repeat(pad));
                            line.push_str(c);
                        }
                    }
                    out.push_str(line.trim_end());
                    out.push('\n');
                }
            }
        }
        out
    }

    fn json(&self) -> Value {
        let side = |m: &BTreeMap<String, Spread>| -> Value {
            m.iter()
                .map(|(k, s)| {
                    (
                        k.clone(),
                        json!({"median": s.median, "min": s.min, "max": s.max, "runs": s.n}),
                    )
                })
                .collect::<serde_json::Map<_, _>>()
                .into()
        };
        let ratios: serde_json::Map<String, Value> = self
            .sections
            .iter()
            .flat_map(|(_, keys)| keys)
            .filter_map(|k| {
                ratio(self.a.get(k).copied(), self.b.get(k).copied()).map(|r| (k.clone(), r.into()))
            })
            .collect();
        json!({"A": side(&self.a), "B": side(&self.b), "b_over_a": ratios})
    }
}

/// One line about a finished run.
fn run_line(i: usize, total: usize, r: &RunResult) -> String {
    let s = &r.report.server;
    let opt = |v: Option<f64>| v.map_or_else(|| "-".to_owned(), num);
    format!(
        "run {}/{total} {}: cpu {} cores, tick p50 {} ms p99 {} ms; in the window {} ticks, {} frames",
        i + 1,
        r.build.name(),
        opt(s.cpu_util_cores),
        opt(s.tick_p50_ms),
        opt(s.tick_p99_ms),
        opt(r.work.get("ticks").copied()),
        opt(r.work.get("frames").copied()),
    )
}

/// The zones the bots of `cfg` join.
fn zones_of(cfg: &BenchConfig) -> BTreeSet<String> {
    (0..cfg.zones.distinct())
        .map(|i| cfg.zones.zone_of(i))
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

    #[test]
    fn medians_spreads_and_numbers() {
        assert_eq!(spread(&[]), None);
        let s = spread(&[3.0, 1.0, 2.0]).unwrap();
        assert_eq!((s.median, s.min, s.max, s.n), (2.0, 1.0, 3.0, 3));
        assert_eq!(spread(&[4.0, 1.0]).unwrap().median, 2.5);
        assert_eq!(num(1234.56), "1235");
        assert_eq!(num(12.3456), "12.35");
        assert_eq!(num(0.000_123_46), "0.0001235");
        assert_eq!(num(2.0), "2");
        assert_eq!(num(0.0), "0");
    }

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
        assert!((f.get("advance_us_per_tick").unwrap() - 100.0).abs() < 1e-9);
        let missing = RunResult::from_scrapes(
            Build::A,
            Report::default(),
            &WindowScrapes::default(),
            &zones,
        );
        assert!(missing.is_err());
    }

    #[test]
    fn the_table_shows_both_medians_spreads_and_the_ratio() {
        let run = |build, ticks: f64, frames: f64| RunResult {
            build,
            report: Report::default(),
            work: [("ticks".to_owned(), ticks), ("frames".to_owned(), frames)].into(),
            work_at_end: BTreeMap::new(),
            stage_s: BTreeMap::new(),
            stage_n: BTreeMap::new(),
        };
        let runs = [
            run(Build::A, 40.0, 80.0),
            run(Build::B, 40.0, 120.0),
            run(Build::B, 40.0, 120.0),
            run(Build::A, 42.0, 84.0),
        ];
        let t = Medians::of(&runs).table();
        let line = t
            .lines()
            .find(|l| l.trim_start().starts_with("frames_per_tick"))
            .unwrap();
        let cells: Vec<&str> = line.split_whitespace().collect();
        assert_eq!(
            cells,
            ["frames_per_tick", "2", "2..2", "3", "3..3", "1.500"]
        );
        let line = t
            .lines()
            .find(|l| l.trim_start().starts_with("ticks "))
            .unwrap();
        assert_eq!(line.split_whitespace().nth(2), Some("40..42"));
    }
}
