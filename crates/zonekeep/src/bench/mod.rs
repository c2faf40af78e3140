//! `zonekeep bench`: the load generator (bots over the Rust client), `zonekeep bench merge` and
//! `zonekeep bench ab` (in `ab`). Everything it runs lives in the `zonekeep-bench` crate; this
//! module maps flags onto its config.
//!
//! The other subcommands each load one service of a running host and live in a file of their
//! own: `lobby`, `matchmaking` (`bench match`), `boards` and `chat`; `http` is the HTTP client
//! the benches that speak HTTP share.

mod ab;
mod boards;
mod chat;
mod http;
mod lobby;
mod matchmaking;

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use clap::{Args, Subcommand, ValueEnum};
use zonekeep_bench::arena::{zone::kind_for, ArenaParams, Scenario};
use zonekeep_bench::template::{InputFormat, Template};
use zonekeep_bench::{
    AimTarget, Auth, BenchConfig, DecodeMode, Report, ServerSource, Workload, ZoneTarget,
};
use zonekeep_client::NetSimConfig;

/// Parses `20s`, `500ms`, `2m` or a plain number of seconds.
fn duration(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    let (num, scale) = if let Some(n) = s.strip_suffix("ms") {
        (n, 0.001)
    } else if let Some(n) = s.strip_suffix('s') {
        (n, 1.0)
    } else if let Some(n) = s.strip_suffix('m') {
        (n, 60.0)
    } else {
        (s, 1.0)
    };
    let v: f64 = num
        .trim()
        .parse()
        .map_err(|_| format!("not a duration: {s:?} (e.g. 20s, 500ms, 2m)"))?;
    if !v.is_finite() || v < 0.0 || v * scale > 86_400.0 {
        return Err(format!("duration out of range: {s:?}"));
    }
    Ok(Duration::from_secs_f64(v * scale))
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum WorkloadArg {
    /// Send --input templates at --rate.
    Generic,
    /// The arena workload of docs/WORKLOADS.md (zone kind `arena-workload`: the host must run with
    /// --dev or --dev-kinds).
    Arena,
    /// Idle authenticated connections (a keep-alive Ping every --idle-ping).
    Idle,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum ScenarioArg {
    /// Broadcast: every client sees everything.
    A,
    /// Interest: each client sees what is within R of its player.
    B,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum DecodeArg {
    /// Bot 0 decodes (and validates, in the arena); the others read Delta headers only.
    Probe,
    /// Every bot decodes into an interpolating replica.
    All,
    /// Nobody decodes.
    None,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum TransportArg {
    /// Deltas in order over WebSocket.
    Websocket,
    /// States in datagrams over WebTransport (the host's `GET /webtransport` says where); bots
    /// read State headers only, so it needs `--decode none`.
    Webtransport,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum StateAcksArg {
    /// As the SDKs do: held up to 20 ms for an input to carry it, then sent alone
    /// (PROTOCOL.md §4.5).
    Held,
    /// An Inputs datagram at once for every newer State: measures what the hold saves.
    EveryState,
    /// Only in the Inputs datagrams the bot's inputs go in: measures what acknowledging every
    /// State costs the host.
    WithInputs,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum FormatArg {
    /// JSON text.
    Json,
    /// MessagePack.
    Msgpack,
    /// An array of integers sent as raw bytes.
    Bytes,
}

/// Flags of one run.
#[derive(Debug, Args)]
pub struct RunArgs {
    /// Server base URL; zones are at /zones/{id}.
    #[arg(long, default_value = "ws://127.0.0.1:7350")]
    url: String,
    /// The zone every bot joins.
    #[arg(long, default_value = "bench-1", conflicts_with = "zones")]
    zone: String,
    /// Zone pattern spreading bots over zones: `{i}` is replaced by `bot % --zone-count`.
    #[arg(long)]
    zones: Option<String>,
    /// Number of zones the --zones pattern spreads over.
    #[arg(long, default_value_t = 1)]
    zone_count: u32,
    /// Bots in this process.
    #[arg(long, default_value_t = 10)]
    bots: u32,
    /// Index of this process's first bot (keeps identities distinct across machines).
    #[arg(long, default_value_t = 0)]
    bot_offset: u32,
    /// Inputs per second per bot (generic and arena workloads; the arena's scenarios are defined
    /// at 10, and a higher rate moves its bots faster, each input being one step).
    #[arg(long, default_value_t = 10.0)]
    rate: f64,
    /// Measured window (e.g. 20s).
    #[arg(long, default_value = "20s", value_parser = duration)]
    duration: Duration,
    /// Warm-up after every bot joined.
    #[arg(long, default_value = "5s", value_parser = duration)]
    warmup: Duration,
    /// Warm-up starts at this deadline even if not every bot joined.
    #[arg(long, default_value = "60s", value_parser = duration)]
    join_deadline: Duration,
    /// Joins in flight at once.
    #[arg(long, default_value_t = 10)]
    join_concurrency: usize,
    /// Reconnect attempts after each drop (the default outlives a fleet's 10 s takeover).
    #[arg(long, default_value_t = 60)]
    reconnect_attempts: u32,
    /// Longest wait between two reconnect attempts (doubling from 100ms).
    #[arg(long, default_value = "1s", value_parser = duration)]
    reconnect_backoff_max: Duration,
    /// Read the server's figures at the entry URL even when the zone runs on another host of
    /// a fleet (by default they are read at the zone's owner, found from the Redirect).
    #[arg(long)]
    no_follow_owner: bool,
    /// HS256 ticket secret shared with the host. Prefer the environment variable.
    #[arg(long, env = "ZONEKEEP_TICKET_SECRET", hide_env_values = true)]
    ticket_secret: Option<String>,
    /// Key id of the ticket secret.
    #[arg(long, env = "ZONEKEEP_TICKET_KID", default_value = "default")]
    ticket_kid: String,
    /// Instead of a secret: GET <join>?bot=<b>&zone=<zone> returns {"zone": ..., "ticket": ...}.
    #[arg(long, conflicts_with = "ticket_secret")]
    join: Option<String>,
    /// Input template (JSON), sent in turn with the others; placeholders $rand:A:B (a float in
    /// [A, B]), $int:A:B (an integer in [A, B]), $bot (the bot's index), $tick (the newest server
    /// tick). E.g. the dots kind's move, two bytes each -1..=1:
    /// --kind dots --input '["$int:-1:1","$int:-1:1"]' --input-format bytes
    #[arg(long = "input", value_name = "TEMPLATE")]
    inputs: Vec<String>,
    /// Encoding of rendered inputs.
    #[arg(long, value_enum, default_value = "json")]
    input_format: FormatArg,
    /// Zone kind tickets ask for when they create the zone (generic/idle workloads).
    #[arg(long)]
    kind: Option<String>,
    /// Zone create params (JSON) tickets carry (generic/idle workloads).
    #[arg(long)]
    params: Option<String>,
    /// What bots do.
    #[arg(long, value_enum, default_value = "generic")]
    workload: WorkloadArg,
    /// Shoot instead of sending --input: every bot draws the zone like a client and shoots at an
    /// entity of this kind (or the entity with this id) where it draws it, at --rate shots per
    /// second, and the zone's verdicts are counted (the shooting gallery: kind `target`; --kind
    /// defaults to `gallery`). Every bot decodes.
    #[arg(long, value_name = "KIND_OR_ENTITY", conflicts_with_all = ["inputs", "workload"])]
    aim: Option<String>,
    /// Arena scenario.
    #[arg(long, value_enum, default_value = "a")]
    scenario: ScenarioArg,
    /// Arena NPCs (M).
    #[arg(long, default_value_t = 1000)]
    npcs: u32,
    /// Arena: byte budget per patch per client (creates kind `arena-workload-budget`; 1200 only).
    #[arg(long)]
    budget: Option<usize>,
    /// Arena: keep every player inside a square of this half side around the world centre
    /// (53 keeps all players within one view radius of each other).
    #[arg(long)]
    crowd_half: Option<f64>,
    /// Who decodes what they receive.
    #[arg(long, value_enum, default_value = "probe")]
    decode: DecodeArg,
    /// How bots reach the host.
    #[arg(long, value_enum, default_value = "websocket")]
    transport: TransportArg,
    /// WebTransport: when bots acknowledge the States they applied.
    #[arg(long, value_enum, default_value = "held")]
    state_acks: StateAcksArg,
    /// Client-side added latency per message, ms.
    #[arg(long, default_value_t = 0.0)]
    net_delay: f64,
    /// Client-side latency jitter (±), ms.
    #[arg(long, default_value_t = 0.0)]
    net_jitter: f64,
    /// Client-side loss probability (0..1), simulated as TCP retransmission delay.
    #[arg(long, default_value_t = 0.0)]
    net_loss: f64,
    /// Idle workload: keep-alive Ping interval (below the host's idle timeout).
    #[arg(long, default_value = "10s", value_parser = duration)]
    idle_ping: Duration,
    /// Read the server's CPU and memory from /proc/<pid> (server on this machine).
    #[arg(long)]
    server_pid: Option<u32>,
    /// Scrape this /metrics URL [default: derived from --url].
    #[arg(long)]
    metrics_url: Option<String>,
    /// Do not scrape /metrics.
    #[arg(long)]
    no_metrics: bool,
    /// Write the full report (every figure, mergeable) to this file.
    #[arg(long)]
    report: Option<PathBuf>,
    /// Print the report as JSON on stdout instead of the table.
    #[arg(long)]
    json: bool,
    /// Bots join as observers (minted tickets): they watch the zone and send no inputs; with
    /// --workload idle, a crowd watching a match.
    #[arg(long)]
    observers: bool,
    /// No live progress line.
    #[arg(long)]
    no_progress: bool,
}

/// `zonekeep bench` flags.
#[derive(Debug, Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct BenchArgs {
    #[command(subcommand)]
    sub: Option<BenchSub>,
    #[command(flatten)]
    run: Box<RunArgs>,
}

#[derive(Debug, Subcommand)]
enum BenchSub {
    /// Combine reports of runs made at the same time from several machines.
    Merge {
        /// Report files.
        #[arg(required = true, num_args = 2..)]
        files: Vec<PathBuf>,
        /// Write the merged report here.
        #[arg(long)]
        report: Option<PathBuf>,
        /// Print JSON instead of the table.
        #[arg(long)]
        json: bool,
    },
    /// Compare two builds: run each with the same bots against a fresh host of its own, in pairs
    /// A B, B A, A B, … and print the medians of the host's CPU, tick times and per-zone work
    /// counters with B/A.
    Ab(Box<crate::bench::ab::AbArgs>),
    /// Load the lobby of a running fleet with join_or_create requests: seats per second,
    /// latency, and a check that no room got more seats than it has.
    Lobby(crate::bench::lobby::LobbyArgs),
    /// Load the matchmaker with bots that each ask for a match (create, probe, queue, long
    /// poll): matches formed per second, time to match, and a check that every match has
    /// exactly its size of players.
    Match(crate::bench::matchmaking::MatchArgs),
    /// Load a leaderboard of a running host: fill it with --entries principals, submit
    /// --updates more scores, read its top and around-me pages, and check it holds exactly what
    /// was submitted: updates per second, submit and query latency.
    Boards(crate::bench::boards::BoardsArgs),
    /// Load a running host's chat: sessions in --zones fresh zones, --senders of each saying
    /// --rate lines a second, the others listening; lines kept per second, fan-out latency over
    /// every delivery, and a check that every kept line reached every session of its zone.
    Chat(crate::bench::chat::ChatArgs),
}

/// The config of one `bench ab` run against a host it started: that host's URL, ticket secret
/// and process (its CPU); the figures are read at its `/metrics`.
pub(crate) fn config_for_host(
    a: &mut RunArgs,
    url: &str,
    secret: &str,
    pid: Option<u32>,
) -> Result<BenchConfig> {
    a.url = url.to_owned();
    a.ticket_secret = Some(secret.to_owned());
    a.join = None;
    a.server_pid = pid;
    a.metrics_url = None;
    a.no_metrics = false;
    a.no_follow_owner = false;
    a.json = false;
    config(a)
}

fn config(a: &RunArgs) -> Result<BenchConfig> {
    let auth = match (&a.ticket_secret, &a.join) {
        (Some(secret), None) => Auth::Secret {
            secret: secret.clone(),
            kid: a.ticket_kid.clone(),
        },
        (None, Some(url)) => Auth::Join { url: url.clone() },
        _ => bail!("{NO_TICKETS}"),
    };
    if matches!(a.workload, WorkloadArg::Generic) && a.inputs.is_empty() && a.aim.is_none() {
        bail!("{NO_INPUTS}");
    }
    let zone = a.zones.clone().unwrap_or_else(|| a.zone.clone());
    let mut cfg = BenchConfig::new(a.url.clone(), zone, a.bots, auth);
    cfg.zones = ZoneTarget {
        pattern: cfg.zones.pattern.clone(),
        count: a.zone_count,
    };
    cfg.bot_offset = a.bot_offset;
    cfg.rate = a.rate;
    cfg.duration = a.duration;
    cfg.warmup = a.warmup;
    cfg.join_deadline = a.join_deadline;
    cfg.join_concurrency = a.join_concurrency;
    if a.reconnect_attempts == 0 {
        bail!("--reconnect-attempts must be at least 1");
    }
    cfg.reconnect_attempts = a.reconnect_attempts;
    cfg.reconnect_backoff_max = a.reconnect_backoff_max;
    cfg.follow_owner = !a.no_follow_owner;
    cfg.decode = match a.decode {
        DecodeArg::Probe => DecodeMode::Probe,
        DecodeArg::All => DecodeMode::All,
        DecodeArg::None => DecodeMode::None,
    };
    if !(0.0..=1.0).contains(&a.net_loss) || a.net_delay < 0.0 || a.net_jitter < 0.0 {
        bail!("--net-delay/--net-jitter must be >= 0 and --net-loss in 0..=1");
    }
    cfg.netsim = NetSimConfig {
        delay: Duration::from_secs_f64(a.net_delay / 1000.0),
        jitter: Duration::from_secs_f64(a.net_jitter / 1000.0),
        loss: a.net_loss,
        ..NetSimConfig::default()
    };
    cfg.server = ServerSource {
        pid: a.server_pid,
        metrics_url: if a.no_metrics {
            None
        } else {
            Some(
                a.metrics_url
                    .clone()
                    .unwrap_or_else(|| zonekeep_bench::http::metrics_url_for(&a.url)),
            )
        },
    };
    cfg.progress = !a.no_progress && !a.json;
    cfg.observers = a.observers;
    cfg.zone_kind = a.kind.clone();
    cfg.zone_params = a
        .params
        .as_deref()
        .map(serde_json::from_str)
        .transpose()
        .context("--params is not JSON")?;
    cfg.workload = match a.workload {
        WorkloadArg::Generic if a.aim.is_some() => {
            let target = AimTarget::parse(a.aim.as_deref().unwrap_or_default())
                .map_err(anyhow::Error::msg)?;
            cfg.decode = DecodeMode::All;
            cfg.zone_kind.get_or_insert_with(|| "gallery".to_owned());
            Workload::Aim(target)
        }
        WorkloadArg::Generic => Workload::Generic {
            templates: a
                .inputs
                .iter()
                .map(|t| Template::parse(t))
                .collect::<Result<_, _>>()?,
            format: match a.input_format {
                FormatArg::Json => InputFormat::Json,
                FormatArg::Msgpack => InputFormat::Msgpack,
                FormatArg::Bytes => InputFormat::Bytes,
            },
        },
        WorkloadArg::Idle => Workload::Idle {
            ping_every: a.idle_ping,
        },
        WorkloadArg::Arena => {
            let p = ArenaParams {
                scenario: match a.scenario {
                    ScenarioArg::A => Scenario::Broadcast,
                    ScenarioArg::B => Scenario::Interest,
                },
                npcs: a.npcs,
                budget: a.budget,
                crowd_half: a.crowd_half,
                ..ArenaParams::default()
            };
            if let Some(b) = p.budget {
                if b != zonekeep_bench::arena::zone::BUDGET_BYTES {
                    bail!("--budget: the host's budgeted arena kind runs with 1200 bytes");
                }
            }
            cfg.zone_kind = Some(kind_for(&p).to_owned());
            Workload::Arena(p)
        }
    };
    if let TransportArg::Webtransport = a.transport {
        // Only the light bot speaks WebTransport: it reads each State's header and acknowledges it.
        if cfg.decode != DecodeMode::None {
            bail!(
                "--transport webtransport needs --decode none (the decoding bots speak WebSocket)"
            );
        }
        cfg.transport = zonekeep_bench::Transport::WebTransport;
    }
    let state_acks = match a.state_acks {
        StateAcksArg::EveryState => zonekeep_bench::StateAcks::EveryState,
        StateAcksArg::WithInputs => zonekeep_bench::StateAcks::WithInputs,
        StateAcksArg::Held => zonekeep_bench::StateAcks::Held,
    };
    if state_acks != zonekeep_bench::StateAcks::default()
        && !matches!(a.transport, TransportArg::Webtransport)
    {
        bail!(
            "--state-acks {} needs --transport webtransport (a WebSocket bot acknowledges nothing)",
            state_acks.name()
        );
    }
    cfg.state_acks = state_acks;
    Ok(cfg)
}

/// What a bare `zonekeep bench` is missing, and the shortest way to a useful first run.
const NO_TICKETS: &str = "the bots need tickets the host accepts: set ZONEKEEP_TICKET_SECRET to \
the host's ticket secret (or give --ticket-secret, or --join URL for a ticket service). A first \
run: start the host with `ZONEKEEP_TICKET_SECRET=<32+ bytes> zonekeep serve --dev-kinds`, then run \
`zonekeep bench --workload arena` with the same ZONEKEEP_TICKET_SECRET";

/// The generic workload sends only what it is given.
const NO_INPUTS: &str = "the generic workload sends the --input templates and none was given: \
add --input '<template>' in the zone's input format (e.g. --input '[\"$int:-1:1\", \"$int:-1:1\"]'), \
or try --workload arena (the host needs --dev or --dev-kinds)";

/// Warnings about a run whose figures do not measure what was meant.
/// Aimed shots over the bots' own NetSim: it delays their messages, not the WebSocket Pings the
/// host times each connection's round trip with, so lag compensation allows them only the real
/// round trip plus its view delay and judges shots aimed further back there.
fn aim_over_client_netsim(cfg: &zonekeep_bench::BenchConfig) -> Option<&'static str> {
    let slowed = !cfg.netsim.delay.is_zero() || !cfg.netsim.jitter.is_zero();
    (matches!(cfg.workload, Workload::Aim(_)) && slowed).then_some(
        "--net-delay/--net-jitter slow the bots' messages but not the WebSocket Pings the host \
         times round trips with, so lag compensation reaches back only the real round trip \
         plus its view delay: shots drawn further back are judged there and miss. For aimed \
         shots over a slow link, set the host's NetSim instead (POST /admin/netsim on a --dev \
         host, or /dev/netsim?sub=SUBJECT for one subject), which the host adds to the round \
         trips it reports",
    )
}

pub(crate) fn run_warnings(report: &Report) -> Vec<String> {
    let c = &report.counts;
    let mut w = Vec::new();
    if c.inputs_sent > 0 && c.inputs_acked == 0 {
        w.push(format!(
            "no input was acknowledged ({} sent): the zone refused or ignored every input; \
             check --input against the zone's input format and --kind",
            c.inputs_sent
        ));
    }
    if let Some(a) = &report.aim {
        if a.shots > 0 && a.hits + a.misses + a.taken + a.unjudged == 0 {
            w.push(format!(
                "no verdict came back for {} aimed shots: --aim shoots at the shooting gallery \
                 (zone kind `gallery`); check --kind and --zone",
                a.shots
            ));
        }
        if a.shots == 0 && a.nothing_drawn > 0 {
            w.push(
                "the bots drew nothing to aim at: check --aim against the zone's entity kinds"
                    .into(),
            );
        }
    }
    w
}

fn output(report: &Report, file: Option<&PathBuf>, json: bool) -> Result<()> {
    let text = serde_json::to_string_pretty(report)?;
    if let Some(path) = file {
        std::fs::write(path, &text).with_context(|| format!("writing {}", path.display()))?;
    }
    if json {
        println!("{text}");
    } else {
        print!("{}", zonekeep_bench::summary::render(report));
    }
    Ok(())
}

/// Runs `zonekeep bench`.
pub fn run(args: BenchArgs) -> Result<()> {
    match args.sub {
        Some(BenchSub::Ab(ab)) => return crate::bench::ab::run(*ab),
        Some(BenchSub::Lobby(lobby)) => return crate::bench::lobby::run(lobby),
        Some(BenchSub::Match(m)) => return crate::bench::matchmaking::run(m),
        Some(BenchSub::Boards(b)) => return crate::bench::boards::run(b),
        Some(BenchSub::Chat(c)) => return crate::bench::chat::run(c),
        Some(BenchSub::Merge {
            files,
            report,
            json,
        }) => {
            let mut reports = Vec::with_capacity(files.len());
            for f in &files {
                let text = std::fs::read_to_string(f)
                    .with_context(|| format!("reading {}", f.display()))?;
                reports.push(
                    serde_json::from_str::<Report>(&text)
                        .with_context(|| format!("parsing {}", f.display()))?,
                );
            }
            let merged = zonekeep_bench::merge(&reports)?;
            return output(&merged, report.as_ref(), json);
        }
        None => {}
    }
    let a = *args.run;
    let cfg = config(&a)?;
    if let Some(note) = aim_over_client_netsim(&cfg) {
        eprintln!("zonekeep bench: warning: {note}");
    }
    crate::cli::init_logging("warn");
    // One thread: the bots must not compete with the server for more than one core.
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let report = runtime.block_on(zonekeep_bench::run(cfg))?;
    output(&report, a.report.as_ref(), a.json)?;
    for w in run_warnings(&report) {
        eprintln!("zonekeep bench: warning: {w}");
    }
    if let Some(p) = &report.probe {
        if p.mismatches() > 0 {
            bail!(
                "the probe found {} mismatches (see the report)",
                p.mismatches()
            );
        }
    }
    if report.counts.joined == 0 {
        bail!("no bot joined: {:?}", report.counts.join_failed);
    }
    Ok(())
}

#[cfg(test)]
mod tests;
