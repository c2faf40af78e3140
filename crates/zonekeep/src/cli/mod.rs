//! Command-line interface: subcommands, flags and how they layer over the config file.
//!
//! This file holds the subcommands, the flags every subcommand shares, `ticket`, and what the
//! subcommands that run a server share (logging, the shutdown signal); `serve`'s flags and the
//! host it runs are in `serve`.

mod serve;

use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use clap::{Args, Parser, Subcommand};
use serde_json::Value;
use zonekeep_core::{Claims, Role};
use zonekeep_server::ticket::{mint, unix_now, MintRequest};
use zonekeep_server::{Secret, ServerConfig};

use serve::{serve, ServeArgs};

/// Zonekeep: an authoritative multiplayer game server.
#[derive(Debug, Parser)]
#[command(
    name = "zonekeep",
    version,
    about = "Zonekeep, an authoritative multiplayer game server: run a host (serve), mint a ticket \
             (ticket), load-test a host with bots (bench), replay a zone recording (replay), deploy a \
             zone module (module push), write typed client code (codegen)."
)]
pub struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run a host: WebSocket zones at /zones/{id}, /metrics, /admin (with a token), /dev (with --dev).
    Serve(Box<ServeArgs>),
    /// Mint a ticket from the configured secret and print it.
    Ticket(Box<TicketArgs>),
    /// Load bots: join zones, send inputs, measure bytes, RTT and the server's cost (`bench merge`
    /// combines reports).
    Bench(Box<crate::bench::BenchArgs>),
    /// Replay a zone recording (from the admin API) against this build's zone kinds: exit 0 when
    /// every tick matches, 1 with a report of the first divergent tick, 2 when the file or its
    /// kind cannot be replayed.
    Replay(crate::replay::ReplayArgs),
    /// Zone modules: deploy one to a host (and through it to the fleet).
    Module(crate::module_cmd::ModuleArgs),
    /// Write typed client code (TypeScript, C#, Rust) for a zone kind: its entity kinds, inputs,
    /// events and constants.
    Codegen(Box<crate::codegen::CodegenArgs>),
    /// Serve a host's zones to clients for it: clients connect here as to the host, and the
    /// relay builds their frames from one link per zone to the host (started with
    /// --relay-token).
    Relay(Box<crate::relay_cmd::RelayArgs>),
}

/// Config file and secrets, shared by every subcommand.
#[derive(Debug, Args)]
struct Common {
    /// TOML config file (unknown keys are an error).
    #[arg(long, env = "ZONEKEEP_CONFIG")]
    config: Option<PathBuf>,
    /// HS256 ticket secret, at least 32 bytes. Prefer the environment variable: flags show up in `ps`.
    #[arg(long, env = "ZONEKEEP_TICKET_SECRET", hide_env_values = true)]
    ticket_secret: Option<String>,
    /// Key id of the ticket secret [default: "default"].
    #[arg(long, env = "ZONEKEEP_TICKET_KID")]
    ticket_kid: Option<String>,
}

#[derive(Debug, Args)]
struct TicketArgs {
    #[command(flatten)]
    common: Common,
    /// The principal.
    #[arg(long)]
    sub: String,
    /// Zone id, or a prefix pattern ending in '*' (e.g. "arena-*").
    #[arg(long)]
    zone: String,
    /// player or observer.
    #[arg(long, default_value = "player")]
    role: String,
    /// Lifetime in seconds (at most the host's ticket_max_lifetime_secs).
    #[arg(long, default_value_t = 300)]
    ttl: u64,
    /// Sign with this key id (default: the first active key).
    #[arg(long)]
    kid: Option<String>,
    /// Zone kind to create if the zone is not running.
    #[arg(long)]
    kind: Option<String>,
    /// Zone create params (JSON).
    #[arg(long)]
    params: Option<String>,
    /// Extra claims for the zone (a JSON object).
    #[arg(long)]
    claims: Option<String>,
}

/// Run the parsed command.
pub fn run(cli: Cli) -> Result<std::process::ExitCode> {
    let done = std::process::ExitCode::SUCCESS;
    match cli.command {
        Command::Serve(args) => serve(*args).map(|()| done),
        Command::Ticket(args) => ticket(*args).map(|()| done),
        Command::Bench(args) => crate::bench::run(*args).map(|()| done),
        Command::Replay(args) => Ok(crate::replay::run(&args)),
        Command::Module(args) => crate::module_cmd::run(args),
        Command::Codegen(args) => crate::codegen::run(*args),
        Command::Relay(args) => crate::relay_cmd::run(*args).map(|()| done),
    }
}

/// Config file (or defaults), then the shared secret overrides.
fn base_config(common: &Common) -> Result<ServerConfig> {
    let mut cfg = match &common.config {
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("reading {}", path.display()))?;
            ServerConfig::from_toml_str(&text).with_context(|| format!("in {}", path.display()))?
        }
        None => ServerConfig::default(),
    };
    if let Some(s) = &common.ticket_secret {
        cfg.ticket_secret = Some(Secret::new(s.clone()));
    }
    if let Some(k) = &common.ticket_kid {
        cfg.ticket_kid = k.clone();
    }
    Ok(cfg)
}

/// Logs to stderr; colours only when stderr is a terminal (a log file or a pipe gets plain text).
pub(crate) fn init_logging(default_filter: &str) {
    use std::io::IsTerminal;
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default_filter)),
        )
        .init();
}

/// SIGTERM or Ctrl-C.
pub(crate) async fn shutdown_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = term.recv() => tracing::info!("SIGTERM received"),
                    _ = tokio::signal::ctrl_c() => tracing::info!("Ctrl-C received"),
                }
            }
            Err(_) => {
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}

fn ticket(args: TicketArgs) -> Result<()> {
    let cfg = base_config(&args.common)?;
    let ring = cfg.key_ring()?.context(
        "no ticket key configured: set ZONEKEEP_TICKET_SECRET or ticket_keys in the config file",
    )?;
    let key = match &args.kid {
        Some(kid) => ring
            .active(kid)
            .with_context(|| format!("no active key {kid:?}"))?,
        None => ring.primary().context("no active ticket key")?,
    };
    let role = match args.role.as_str() {
        "player" => Role::Player,
        "observer" => Role::Observer,
        other => bail!("--role must be player or observer, not {other:?}"),
    };
    if args.ttl == 0 || args.ttl > cfg.ticket_max_lifetime_secs {
        bail!(
            "--ttl must be in 1..={} (ticket_max_lifetime_secs)",
            cfg.ticket_max_lifetime_secs
        );
    }
    let params = args
        .params
        .as_deref()
        .map(serde_json::from_str::<Value>)
        .transpose()
        .context("--params is not JSON")?;
    let mut claims: Claims = match args.claims.as_deref() {
        None => Claims::new(),
        Some(s) => match serde_json::from_str(s).context("--claims is not JSON")? {
            Value::Object(m) => m,
            _ => bail!("--claims must be a JSON object"),
        },
    };
    if let Some(kind) = args.kind {
        claims.insert("kind".into(), Value::from(kind));
    }
    let req = MintRequest {
        sub: args.sub,
        zone: args.zone,
        role,
        ttl_secs: args.ttl,
        params,
        claims,
    };
    println!("{}", mint(key, &req, unix_now())?);
    Ok(())
}

#[cfg(test)]
mod tests;
