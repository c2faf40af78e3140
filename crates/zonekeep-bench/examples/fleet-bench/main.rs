//! Fleet benchmarks against real `zonekeep serve` processes on PostgreSQL: how long players wait
//! when a host dies (`failover`), the gap a deploy drain leaves (`drain`), and the load the hosts
//! put on the directory (`directory`).
//!
//! ```text
//! cargo build --release -p zonekeep
//! cargo run --release -p zonekeep-bench --example fleet-bench -- \
//!     --zonekeep target/release/zonekeep --store postgres://postgres@127.0.0.1:5432/test \
//!     --scenario failover --zones 200
//! ```
//!
//! Each scenario starts three hosts (`a`, `b`, `c`: `--dev-kinds --sim-threads 1`, distinct
//! `--host-id`s, the admin API) in a PostgreSQL schema of the run's own, created at the start and
//! dropped at the end; the hosts' logs are kept in `--log-dir`. Clients are the Rust client
//! (`zonekeep-client`), one per zone, entering through host `b`. The report is printed as text,
//! and written as JSON with `--json FILE`.
#![allow(clippy::print_stdout, clippy::print_stderr)]

mod directory;
mod drain;
mod failover;
mod hosts;
mod http;
mod place;
mod probe;
mod report;
mod schema;
mod stage;

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use clap::{Parser, ValueEnum};
use serde_json::Value;
use zonekeep_bench::tickets::Tickets;
use zonekeep_bench::Auth;

use hosts::FleetSpec;
use probe::Backoff;
use schema::Schema;

/// Which measurement to run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Scenario {
    /// kill -9 the host of N zones (default 200); time to the first Delta after the takeover.
    Failover,
    /// SIGTERM the host of N zones (default 50); the gap each client sees across the hand-over.
    Drain,
    /// N zones (default 1,000) over three hosts; directory queries per second per host.
    Directory,
    /// The three, one after the other, each with its default zone count.
    All,
}

/// Fleet benchmarks: failover time, drain gap, directory load.
#[derive(Debug, Parser)]
#[command(name = "fleet-bench")]
struct Args {
    /// The `zonekeep` binary to run (a release build).
    #[arg(long)]
    zonekeep: PathBuf,
    /// PostgreSQL URL; the run creates a schema of its own there and drops it at the end.
    #[arg(long)]
    store: String,
    /// The measurement.
    #[arg(long, value_enum, default_value = "all")]
    scenario: Scenario,
    /// Zones (default: 200 failover, 50 drain, 1,000 directory).
    #[arg(long)]
    zones: Option<usize>,
    /// The zone kind (a dev kind the host serves with `--dev-kinds`).
    #[arg(long, default_value = "ledger-test")]
    kind: String,
    /// The zones' create params, JSON (e.g. `{"npcs":20}` for `--kind arena-workload`, whose
    /// server-driven NPCs keep a Delta going to every client at each patch).
    #[arg(long, default_value = "null", value_parser = parse_json)]
    params: Value,
    /// Longest wait for every client to be back in play after the kill or SIGTERM, seconds.
    #[arg(long, default_value_t = 60)]
    recover_secs: u64,
    /// The directory scenario's window, seconds.
    #[arg(long, default_value_t = 30)]
    window_secs: u64,
    /// Time between every client playing and the kill or SIGTERM, seconds: longer than the hosts'
    /// `--save-every` (default 5 s), so every zone has a save to be restored from.
    #[arg(long, default_value_t = 6)]
    settle_secs: u64,
    /// Largest backoff between a client's reconnect attempts, ms (the client's default is 5,000).
    #[arg(long, default_value_t = 1_000)]
    backoff_max_ms: u64,
    /// Reconnect attempts before a client gives up (the client's default is 8).
    #[arg(long, default_value_t = 100)]
    reconnect_attempts: u32,
    /// Where the hosts' logs go (a directory per run is made in it).
    #[arg(long, default_value = "target/fleet-bench")]
    log_dir: PathBuf,
    /// Also write the report as JSON here.
    #[arg(long)]
    json: Option<PathBuf>,
}

/// What every scenario of a run shares.
#[derive(Debug)]
pub struct Ctx {
    /// How hosts are started.
    pub spec: FleetSpec,
    /// Tickets for the clients (minted with the hosts' secret).
    pub tickets: Tickets,
    /// The clients' reconnect bounds.
    pub backoff: Backoff,
    /// The zone kind.
    pub kind: String,
    /// The zones' create params.
    pub params: Value,
    /// How long a stage settles before the kill or SIGTERM.
    pub settle: Duration,
}

/// `--params`: any JSON value.
fn parse_json(text: &str) -> Result<Value, String> {
    serde_json::from_str(text).map_err(|e| format!("not JSON: {e}"))
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> ExitCode {
    let args = Args::parse();
    match run(&args).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("fleet-bench: {e}");
            ExitCode::FAILURE
        }
    }
}

async fn run(args: &Args) -> Result<(), String> {
    let stamp = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_err(|e| e.to_string())?
        .as_millis();
    let run = format!("fb{stamp}");
    let log_dir = hosts::log_dir(&args.log_dir.join(&run))?;
    println!(
        "fleet-bench run {run}: logs in {}, client backoff ≤ {} ms × {} attempts",
        log_dir.display(),
        args.backoff_max_ms,
        args.reconnect_attempts
    );
    let which = match args.scenario {
        Scenario::All => vec![Scenario::Failover, Scenario::Drain, Scenario::Directory],
        s => vec![s],
    };
    let mut reports = Vec::new();
    for s in which {
        let (text, json) = scenario(args, s, &run, &log_dir).await?;
        println!("{text}");
        reports.push(json);
    }
    if let Some(path) = &args.json {
        let doc = serde_json::json!({"run": run, "reports": reports});
        let text = serde_json::to_string_pretty(&doc).map_err(|e| e.to_string())?;
        std::fs::write(path, text).map_err(|e| format!("{}: {e}", path.display()))?;
    }
    Ok(())
}

/// Runs one scenario in a schema of its own (so no zone or host of an earlier scenario is in its
/// directory); its text report and JSON.
async fn scenario(
    args: &Args,
    which: Scenario,
    run: &str,
    log_dir: &std::path::Path,
) -> Result<(String, Value), String> {
    let name = format!("{which:?}").to_ascii_lowercase();
    let log_dir = hosts::log_dir(&log_dir.join(&name))?;
    let schema = Schema::create(&args.store, &format!("{run}_{name}")).await?;
    // A secret of the run's own: tickets from other runs mean nothing here.
    let secret = format!("fleet-bench-secret-{run}-{}", std::process::id());
    let tickets = Tickets::new(
        &Auth::Secret {
            secret: secret.clone(),
            kid: "default".into(),
        },
        Some(args.kind.clone()),
        None,
    )
    .map_err(|e| e.to_string())?;
    let ctx = Ctx {
        spec: FleetSpec {
            binary: args.zonekeep.clone(),
            store: schema.store_url(),
            secret,
            log_dir,
            run: format!("{run}-{name}"),
        },
        tickets,
        backoff: Backoff {
            max: Duration::from_millis(args.backoff_max_ms),
            attempts: args.reconnect_attempts,
        },
        kind: args.kind.clone(),
        params: args.params.clone(),
        settle: Duration::from_secs(args.settle_secs),
    };
    let recover = Duration::from_secs(args.recover_secs);
    let outcome = match which {
        Scenario::Failover => failover::run(&ctx, args.zones.unwrap_or(200), recover).await,
        Scenario::Drain => drain::run(&ctx, args.zones.unwrap_or(50), recover).await,
        Scenario::Directory => {
            let window = Duration::from_secs(args.window_secs);
            directory::run(&ctx, &schema, args.zones.unwrap_or(1_000), window).await
        }
        Scenario::All => Err("`all` is not one scenario".into()),
    };
    // The schema goes whatever happened: by now the scenario's hosts are stopped (each scenario
    // stops its own, and dropping a host kills it).
    let dropped = schema.drop_all().await;
    let report = outcome?;
    dropped?;
    Ok(report)
}
