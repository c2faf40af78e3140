//! `zonekeep bench chat`: chat under load, end to end, as players load it (docs/CHAT.md). The
//! bench joins `--zones` fresh zones (`bench-chat-RUN-z{i}`) of a running host, each with
//! `--listeners` sessions that only listen and `--senders` that also talk, every session a
//! WebSocket of its own (protocol version 11, a ticket minted for its own principal and zone).
//! Once every session heard its zone channel's history (the host's promise that live lines
//! follow), each sender says `--rate` lines a second on `zone:<zone>` for `--seconds`, each line
//! carrying its sender, its number and its send instant on the bench's clock, so whoever hears it
//! knows its fan-out latency (one process, one monotonic clock). After a drain of 2 s the bench
//! counts:
//!
//! - **sent**, **kept** (its sender heard it back: the store kept it), **refused** by ChatReply
//!   code, **unanswered** (neither);
//! - **deliveries**: lines heard by a session of their zone, the sender's own echo included, and
//!   their latency (p50, p90, p99, max over every delivery);
//! - **bad**: a kept line that a session of its zone never heard (**lost**), a line heard twice
//!   or out of `seq` order by a session, a line heard in another zone, a line both kept and
//!   refused, and unanswered lines. Any bad, and any session that failed to join or ended early
//!   (a Kick, with its code and reason), makes the run exit non-zero.
//!
//! Sessions join as players of the zone kind (`--kind`, or the host's default), so
//! `--listeners + --senders` must fit its player cap (the arena's is 64), and the host must allow
//! this many connections from one address (`serve --max-connections-per-ip`, 32 by default) and
//! each sender's rate (`--chat-rate`, 2 by default, and `--chat-burst`: rates are per principal,
//! and each sender is its own).

mod report;
mod session;
mod ws;

use std::io::IsTerminal;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use clap::Args;
use serde_json::Value;
use tokio::sync::{mpsc, watch, Semaphore};
use tokio::time::timeout;
use zonekeep_bench::arena::math::Mulberry32;
use zonekeep_server::ticket::TicketKey;

use report::{counts, render, report};
use session::{session, Wires};

/// Sessions connecting at once.
const JOIN_CONCURRENCY: usize = 32;
/// Longest a session may take to be welcomed, and the longest wait for the next session to hear
/// its history.
const JOIN_TIMEOUT: Duration = Duration::from_secs(30);
/// How long after the last send a line may still be heard.
const DRAIN: Duration = Duration::from_secs(2);
/// Between every session hearing its history and the first line.
const LEAD: Duration = Duration::from_millis(250);

/// `zonekeep bench chat`.
#[derive(Debug, Args)]
pub(crate) struct ChatArgs {
    /// The host, e.g. http://127.0.0.1:7350 (zones are joined at ws://…/zones/{id}).
    #[arg(long)]
    url: String,
    /// The HS256 ticket secret the host verifies with. Prefer the environment variable.
    #[arg(long, env = "ZONEKEEP_TICKET_SECRET", hide_env_values = true)]
    ticket_secret: String,
    /// Key id of the ticket secret (the host's `ticket_kid`).
    #[arg(long, env = "ZONEKEEP_TICKET_KID", default_value = "default")]
    ticket_kid: String,
    /// Zones, each a fresh one with its own sessions.
    #[arg(long, default_value_t = 4)]
    zones: usize,
    /// Sessions per zone that only listen.
    #[arg(long, default_value_t = 50)]
    listeners: usize,
    /// Sessions per zone that also talk, each a principal of its own.
    #[arg(long, default_value_t = 5)]
    senders: usize,
    /// Lines per second per sender.
    #[arg(long, default_value_t = 10.0)]
    rate: f64,
    /// How long the senders talk, seconds.
    #[arg(long, default_value_t = 10.0)]
    seconds: f64,
    /// The zone kind to join [default: the host's default kind].
    #[arg(long)]
    kind: Option<String>,
    /// Print the result as one line of JSON.
    #[arg(long)]
    json: bool,
    /// No live progress line (it is shown only on a terminal and without --json anyway).
    #[arg(long)]
    no_progress: bool,
    /// Seed of the senders' phases (when in its period each sender talks).
    #[arg(long, default_value_t = 1)]
    seed: u32,
}

/// Counters the sessions bump as they go (the progress line).
#[derive(Default)]
struct Live {
    ready: AtomicU64,
    sent: AtomicU64,
    kept: AtomicU64,
    delivered: AtomicU64,
    refused: AtomicU64,
    ended: AtomicU64,
}

/// What every session shares.
struct Ctx {
    /// `host:port`.
    authority: String,
    key: TicketKey,
    kind: Option<String>,
    run: String,
    zones: Vec<String>,
    /// `zone:<zone>` of each zone.
    channels: Vec<String>,
    senders: usize,
    /// Between two lines of a sender.
    period: Duration,
    window: Duration,
    /// The bench's clock: send instants are microseconds since this.
    origin: Instant,
    live: Live,
}

impl Ctx {
    fn now_us(&self) -> u64 {
        u64::try_from(self.origin.elapsed().as_micros()).unwrap_or(u64::MAX)
    }

    /// A line's body: the run, its sender, its number and its send instant.
    fn body(&self, sender: u32, n: u32) -> String {
        format!("{} s{sender} n{n} t{}", self.run, self.now_us())
    }

    /// `(sender, n, sent_us)` of one of this run's lines.
    fn parse(&self, body: &str) -> Option<(u32, u32, u64)> {
        let mut parts = body.split(' ');
        if parts.next()? != self.run {
            return None;
        }
        let mut field = |p: char| parts.next()?.strip_prefix(p)?.parse::<u64>().ok();
        let (s, n, t) = (field('s')?, field('n')?, field('t')?);
        Some((u32::try_from(s).ok()?, u32::try_from(n).ok()?, t))
    }
}

/// One session: its zone, principal, and as a sender its index (over every zone) and phase.
struct Spec {
    zone: usize,
    principal: String,
    sender: Option<(u32, Duration)>,
}

pub(crate) fn run(args: ChatArgs) -> Result<()> {
    if args.zones == 0 || args.senders == 0 {
        bail!("--zones and --senders must be at least 1");
    }
    if !(args.rate.is_finite() && args.rate > 0.0 && args.rate <= 1000.0) {
        bail!("--rate must be in (0, 1000] lines per second");
    }
    if !(args.seconds.is_finite() && args.seconds > 0.0 && args.seconds <= 86_400.0) {
        bail!("--seconds must be in (0, 86400]");
    }
    let Some(rest) = args.url.strip_prefix("http://") else {
        bail!("--url {}: give an http:// URL of a host", args.url);
    };
    let authority = rest.split('/').next().unwrap_or_default().to_owned();
    if authority.is_empty() {
        bail!("--url {}: no host", args.url);
    }
    let key = crate::bench::matchmaking::ticket_key(&args.ticket_kid, &args.ticket_secret)?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let report = runtime.block_on(load(&args, authority, key))?;
    if args.json {
        println!("{}", serde_json::to_string(&report)?);
    } else {
        print!("{}", render(&report));
    }
    let (bad, failed) = (report["bad"].as_u64(), report["failed"].as_u64());
    let (bad, failed) = (bad.unwrap_or(0), failed.unwrap_or(0));
    if report["joined"] == 0 {
        bail!("no session joined: {}", counts(&report["join_failures"]));
    }
    if bad > 0 || failed > 0 {
        bail!(
            "{bad} bad (lost {}, unanswered {}, duplicates {}, out of order {}, misrouted {}); \
             {failed} session(s) failed (join: {}; ended early: {})",
            report["lost"],
            report["unanswered"],
            report["duplicates"],
            report["out_of_order"],
            report["misrouted"],
            counts(&report["join_failures"]),
            counts(&report["ended_early"]),
        );
    }
    Ok(())
}

async fn load(args: &ChatArgs, authority: String, key: TicketKey) -> Result<Value> {
    let run = crate::bench::lobby::run_tag();
    let zones: Vec<String> = (0..args.zones)
        .map(|z| format!("bench-chat-{run}-z{z}"))
        .collect();
    let ctx = Arc::new(Ctx {
        authority,
        key,
        kind: args.kind.clone(),
        channels: zones.iter().map(|z| format!("zone:{z}")).collect(),
        zones,
        run,
        senders: args.senders,
        period: Duration::from_secs_f64(1.0 / args.rate),
        window: Duration::from_secs_f64(args.seconds),
        origin: Instant::now(),
        live: Live::default(),
    });
    let mut rng = Mulberry32::new(args.seed);
    let mut specs = Vec::new();
    for z in 0..args.zones {
        for j in 0..args.senders {
            let g = u32::try_from(z * args.senders + j).context("too many senders")?;
            let phase = ctx.period.mul_f64(rng.next());
            let principal = format!("bench-chat-{}-z{z}-s{j}", ctx.run);
            specs.push(Spec {
                zone: z,
                principal,
                sender: Some((g, phase)),
            });
        }
        for j in 0..args.listeners {
            let principal = format!("bench-chat-{}-z{z}-l{j}", ctx.run);
            specs.push(Spec {
                zone: z,
                principal,
                sender: None,
            });
        }
    }
    let total = specs.len();
    let show = !args.no_progress && !args.json && std::io::stderr().is_terminal();
    let progress = show.then(|| tokio::spawn(progress(Arc::clone(&ctx), total)));
    let (ready_tx, mut ready_rx) = mpsc::unbounded_channel();
    let (go_tx, go_rx) = watch::channel(None);
    let (stop_tx, stop_rx) = watch::channel(false);
    let join = Arc::new(Semaphore::new(JOIN_CONCURRENCY));
    let sessions: Vec<_> = specs
        .into_iter()
        .map(|spec| {
            let wires = Wires {
                ready: Some(ready_tx.clone()),
                go: go_rx.clone(),
                stop: stop_rx.clone(),
            };
            tokio::spawn(session(Arc::clone(&ctx), spec, Arc::clone(&join), wires))
        })
        .collect();
    drop(ready_tx);
    // Every session says once whether it is ready; one that says nothing for JOIN_TIMEOUT
    // (and the ones after it) is left out.
    let mut reported = 0;
    while reported < total {
        match timeout(JOIN_TIMEOUT, ready_rx.recv()).await {
            Ok(Some(())) => reported += 1,
            Ok(None) | Err(_) => break,
        }
    }
    let ready = ctx.live.ready.load(Ordering::Relaxed);
    let t0 = Instant::now() + LEAD;
    if ready > 0 {
        let _ = go_tx.send(Some(t0));
        tokio::time::sleep_until((t0 + ctx.window + DRAIN).into()).await;
    }
    let _ = stop_tx.send(true);
    let mut outcomes = Vec::with_capacity(total);
    for s in sessions {
        outcomes.push(s.await.context("a session task failed")?);
    }
    if let Some(p) = progress {
        p.abort();
        eprintln!();
    }
    Ok(report(args, &ctx, outcomes))
}

/// The live progress line, on stderr.
async fn progress(ctx: Arc<Ctx>, total: usize) {
    let l = &ctx.live;
    loop {
        tokio::time::sleep(Duration::from_millis(500)).await;
        eprint!(
            "\r[{:>6.1} s] ready {}/{total} sent {} kept {} delivered {} refused {} ended {}   ",
            ctx.origin.elapsed().as_secs_f64(),
            l.ready.load(Ordering::Relaxed),
            l.sent.load(Ordering::Relaxed),
            l.kept.load(Ordering::Relaxed),
            l.delivered.load(Ordering::Relaxed),
            l.refused.load(Ordering::Relaxed),
            l.ended.load(Ordering::Relaxed),
        );
    }
}
