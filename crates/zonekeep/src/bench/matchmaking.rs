//! `zonekeep bench match`: the matchmaker under load, as many players load it. Each bot mints a
//! ticket for `@match` (a principal of its own, which is also its `name`, so a match's `players`
//! list principals), creates a search, answers every probe leg, queues,
//! and long-polls its search until it is `assigned` (or ends otherwise), heartbeating meanwhile.
//! The answers give the matches formed per second, each bot's time to match (from the queue's
//! answer to the first answer showing `assigned`: p50, p95, p99, max), what became of the bots
//! that were not matched, and a check of every match: exactly `--size` players, every bot of a
//! match seeing the same zone and players, no principal in two matches (any breach exits non-zero).
//!
//! At most `--concurrency` bots create, probe and queue at once; every queued bot then waits at
//! once, each with a long poll in flight (one HTTP/1.1 connection each, from one pooled client),
//! so the host holds about one connection per waiting bot, plus heartbeats and setups. A host's
//! defaults refuse that: `zonekeep serve` caps connections at `--max-connections` (10,000) in all
//! and `--max-connections-per-ip` (32; the next 32 are answered 429, the rest closed at accept),
//! and every match claims a zone, which needs room under `--capacity`/`--max-zones` (1,000; a
//! match with no room goes back to the queue). A 10,000-bot duel run against one host needs about
//! `--max-connections 20000 --max-connections-per-ip 20000 --max-zones 6000 --capacity 6000`
//! (5,000 matches, so 5,000 zones; close to 10,000 connections at once when setups outrun the
//! matching), and an open-file limit above the connections on both sides. Each match's zone
//! starts on its host as soon as it is placed, whether or not anyone joins, so on one host the
//! matchmaker shares the machine with the zones of the matches it formed.
//!
//! This file holds the flags and the bots; `report` gives the figures and the check of every
//! match. The HTTP client is the benches' shared one (`super::http`).

mod report;

use std::io::IsTerminal;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use clap::Args;
use hyper::Method;
use serde_json::{json, Value};
use tokio::sync::Semaphore;
use zonekeep_core::{Claims, Role};
use zonekeep_server::ticket::{mint, unix_now, MintRequest, TicketKey};

use super::http::{call, enc, http_client, retryable, HttpClient};
use report::{render, report};

/// Longest a request other than a long poll may take before it counts as failed.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);
/// How long each long poll asks the matchmaker to wait, ms.
const WAIT_MS: u64 = 25_000;
/// Longest a long poll may take before it counts as failed (its wait and a margin).
const POLL_TIMEOUT: Duration = Duration::from_millis(WAIT_MS + 10_000);
/// Long polls in a row that may fail (no answer, 429, 5xx) before the bot gives up.
const POLL_RETRIES: u32 = 3;
/// Ticket lifetime: well under the host's default maximum of 10 minutes.
const TICKET_TTL_SECS: u64 = 300;

/// `zonekeep bench match`.
#[derive(Debug, Args)]
pub(crate) struct MatchArgs {
    /// A matchmaker replica, e.g. http://127.0.0.1:7350; give several to spread the bots over
    /// them (each bot's calls go to one replica; its probes go where the search says).
    #[arg(long = "url", required = true)]
    urls: Vec<String>,
    /// The HS256 ticket secret the hosts verify with. Prefer the environment variable.
    #[arg(long, env = "ZONEKEEP_TICKET_SECRET", hide_env_values = true)]
    ticket_secret: String,
    /// Key id of the ticket secret (the host's `ticket_kid`).
    #[arg(long, env = "ZONEKEEP_TICKET_KID", default_value = "default")]
    ticket_kid: String,
    /// The queue to ask for a match in.
    #[arg(long, default_value = "duel")]
    queue: String,
    /// Players per match of the queue (its `size=`): every match is checked to have exactly this
    /// many.
    #[arg(long, default_value_t = 2)]
    size: usize,
    /// Bots in all, each a principal of its own.
    #[arg(long, default_value_t = 10_000)]
    bots: usize,
    /// Bots creating, probing and queueing at once (queued bots all wait at once).
    #[arg(long, default_value_t = 256)]
    concurrency: usize,
    /// The protocol version bots ask for a match with.
    #[arg(long, default_value_t = zonekeep_protocol::limits::PROTOCOL_VERSION)]
    protocol_version: u32,
    /// Longest a queued bot waits for its match, seconds; then it cancels its search and counts
    /// as unmatched (with an odd number of duel bots one is always left over).
    #[arg(long, default_value_t = 120)]
    max_wait: u64,
    /// Print the result as JSON.
    #[arg(long)]
    json: bool,
    /// No live progress line (it is shown only on a terminal and without --json anyway).
    #[arg(long)]
    no_progress: bool,
}

/// p50, p95, p99 and max of `d`, in milliseconds.
pub(crate) fn quantiles(mut d: Vec<Duration>) -> Value {
    d.sort();
    json!({
        "p50": crate::bench::lobby::quantile(&d, 0.50),
        "p95": crate::bench::lobby::quantile(&d, 0.95),
        "p99": crate::bench::lobby::quantile(&d, 0.99),
        "max": crate::bench::lobby::quantile(&d, 1.0),
    })
}

/// Counters the bots bump as they go (for the progress line and the report).
#[derive(Default)]
struct Counters {
    created: AtomicU64,
    queued: AtomicU64,
    assigned: AtomicU64,
    failed: AtomicU64,
    ended: AtomicU64,
    polls: AtomicU64,
    poll_retries: AtomicU64,
    heartbeats: AtomicU64,
    heartbeat_failures: AtomicU64,
}

/// What every bot shares.
struct Ctx {
    client: HttpClient,
    urls: Vec<String>,
    key: TicketKey,
    queue: String,
    protocol_version: u32,
    max_wait: Duration,
    run: String,
    counters: Counters,
}

/// How a bot's run ended.
enum End {
    /// Matched: when the answer showing `assigned` came, and the assignment.
    Assigned {
        at: Instant,
        match_id: String,
        zone: String,
        players: Vec<String>,
    },
    /// A call was refused or not answered: `"STAGE STATUS CODE"` (status 0: no answer).
    Failed(String),
    /// The search reached another final state: `"STATE/REASON"`.
    Ended(String),
}

/// One bot's run.
struct BotRun {
    principal: String,
    /// From creating the search to the queue's answer.
    setup: Option<Duration>,
    /// When the queue's answer came.
    queued_at: Option<Instant>,
    end: End,
}

pub(crate) fn run(args: MatchArgs) -> Result<()> {
    if args.concurrency == 0 || args.bots == 0 || args.max_wait == 0 || args.size < 2 {
        bail!("--concurrency, --bots and --max-wait must be at least 1, --size at least 2");
    }
    for u in &args.urls {
        if !u.starts_with("http://") {
            bail!("--url {u}: give an http:// URL of a matchmaker replica");
        }
    }
    let key = ticket_key(&args.ticket_kid, &args.ticket_secret)?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let report = runtime.block_on(load(&args, key))?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print!("{}", render(&report));
    }
    let malformed = report["malformed"].as_u64().unwrap_or(0);
    let shared = report["principals_in_two_matches"].as_u64().unwrap_or(0);
    if malformed > 0 || shared > 0 {
        bail!(
            "{malformed} malformed match(es) (overfull, underfull or seen differently by their \
             players) and {shared} principal(s) in two matches"
        );
    }
    Ok(())
}

/// The key a bench mints its bots' tickets with: the host's `--ticket-kid` and secret.
pub(crate) fn ticket_key(kid: &str, secret: &str) -> Result<TicketKey> {
    TicketKey::new(kid.to_owned(), secret.as_bytes().to_vec(), false)
        .context("--ticket-secret/--ticket-kid")
}

async fn load(args: &MatchArgs, key: TicketKey) -> Result<Value> {
    let client = http_client();
    let run = crate::bench::lobby::run_tag();
    let ctx = Arc::new(Ctx {
        client,
        urls: args
            .urls
            .iter()
            .map(|u| u.trim_end_matches('/').to_owned())
            .collect(),
        key,
        queue: args.queue.clone(),
        protocol_version: args.protocol_version,
        max_wait: Duration::from_secs(args.max_wait),
        run,
        counters: Counters::default(),
    });
    let show = !args.no_progress && !args.json && std::io::stderr().is_terminal();
    let progress = show.then(|| tokio::spawn(progress(Arc::clone(&ctx), args.bots)));
    let started = Instant::now();
    // The permit bounds the bots creating, probing and queueing; a bot gives it back once
    // queued, and then waits alongside every other queued bot.
    let setup = Arc::new(Semaphore::new(args.concurrency));
    let mut bots = Vec::with_capacity(args.bots);
    for i in 0..args.bots {
        let permit = Arc::clone(&setup)
            .acquire_owned()
            .await
            .context("the setup semaphore closed")?;
        let ctx = Arc::clone(&ctx);
        bots.push(tokio::spawn(bot(ctx, i, permit)));
    }
    let mut runs = Vec::with_capacity(args.bots);
    for b in bots {
        runs.push(b.await.context("a bot task failed")?);
    }
    let seconds = started.elapsed().as_secs_f64();
    if let Some(p) = progress {
        p.abort();
        eprintln!();
    }
    Ok(report(args, &ctx.counters, &runs, seconds))
}

/// The live progress line, on stderr.
async fn progress(ctx: Arc<Ctx>, bots: usize) {
    let c = &ctx.counters;
    let started = Instant::now();
    loop {
        tokio::time::sleep(Duration::from_millis(500)).await;
        eprint!(
            "\r[{:>6.1} s] created {}/{bots} queued {} assigned {} failed {} ended {}   ",
            started.elapsed().as_secs_f64(),
            c.created.load(Ordering::Relaxed),
            c.queued.load(Ordering::Relaxed),
            c.assigned.load(Ordering::Relaxed),
            c.failed.load(Ordering::Relaxed),
            c.ended.load(Ordering::Relaxed),
        );
    }
}

/// A bot's search, once queued.
struct Queued {
    id: String,
    token: String,
    heartbeat_secs: u64,
    /// When the queue's answer came.
    at: Instant,
    /// From creating the search to the queue's answer.
    setup: Duration,
}

/// One bot: create, probe and queue (holding `permit`), then wait for its match.
async fn bot(ctx: Arc<Ctx>, i: usize, permit: tokio::sync::OwnedSemaphorePermit) -> BotRun {
    let principal = format!("bench-{}-{i}", ctx.run);
    let base = ctx.urls[i % ctx.urls.len()].clone();
    let c = &ctx.counters;
    let queued = match setup(&ctx, &base, &principal).await {
        Ok(q) => q,
        Err(why) => {
            c.failed.fetch_add(1, Ordering::Relaxed);
            return BotRun {
                principal,
                setup: None,
                queued_at: None,
                end: End::Failed(why),
            };
        }
    };
    drop(permit);
    c.queued.fetch_add(1, Ordering::Relaxed);
    let heartbeat = tokio::spawn(heartbeats(
        Arc::clone(&ctx),
        format!("{base}/match/searches/{}/heartbeat", queued.id),
        queued.token.clone(),
        Duration::from_secs(queued.heartbeat_secs.max(1)),
    ));
    let deadline = tokio::time::Instant::from_std(queued.at + ctx.max_wait);
    let end = match tokio::time::timeout_at(deadline, wait(&ctx, &base, &queued)).await {
        Ok(end) => end,
        Err(_) => give_up(&ctx, &base, &queued).await,
    };
    heartbeat.abort();
    match &end {
        End::Assigned { .. } => c.assigned.fetch_add(1, Ordering::Relaxed),
        End::Failed(_) => c.failed.fetch_add(1, Ordering::Relaxed),
        End::Ended(_) => c.ended.fetch_add(1, Ordering::Relaxed),
    };
    BotRun {
        principal,
        setup: Some(queued.setup),
        queued_at: Some(queued.at),
        end,
    }
}

/// Creates the bot's search with a fresh ticket, answers its probes and queues it; `Err` is
/// `"STAGE STATUS CODE"`.
async fn setup(ctx: &Ctx, base: &str, principal: &str) -> Result<Queued, String> {
    // Named by its principal: a match's `players` are its players' names, so they are the
    // principals the check counts.
    let mut claims = Claims::new();
    claims.insert("name".into(), Value::from(principal.to_owned()));
    let ticket = mint(
        &ctx.key,
        &MintRequest {
            sub: principal.to_owned(),
            zone: "@match".into(),
            role: Role::Player,
            ttl_secs: TICKET_TTL_SECS,
            params: None,
            claims,
        },
        unix_now(),
    )
    .map_err(|_| "mint 0 error".to_owned())?;
    let start = Instant::now();
    let body = json!({"queue": ctx.queue, "protocol_version": ctx.protocol_version});
    let r = call(
        &ctx.client,
        Method::POST,
        &format!("{base}/match/searches"),
        Some(&ticket),
        Some(&body),
        REQUEST_TIMEOUT,
    )
    .await
    .map_err(|w| format!("create 0 {w}"))?;
    if r.status != 201 {
        return Err(r.failure("create"));
    }
    ctx.counters.created.fetch_add(1, Ordering::Relaxed);
    let (Some(id), Some(token)) = (r.body["search"].as_str(), r.body["token"].as_str()) else {
        return Err("create 201 no_search".into());
    };
    let heartbeat_secs = r.body["heartbeat_secs"].as_u64().unwrap_or(10);
    // Every probe, as a client does; the search may be queued once one was answered.
    let mut answered = 0;
    let mut refused = None;
    for p in r.body["probes"].as_array().into_iter().flatten() {
        let (Some(url), Some(challenge)) = (p["url"].as_str(), p["challenge"].as_str()) else {
            refused = Some("probe 201 malformed".to_owned());
            continue;
        };
        match probe(ctx, url, challenge).await {
            Ok(()) => answered += 1,
            Err(why) => refused = Some(why),
        }
    }
    if answered == 0 {
        return Err(refused.unwrap_or_else(|| "probe 201 no_probes".into()));
    }
    let q = call(
        &ctx.client,
        Method::POST,
        &format!("{base}/match/searches/{}/queue", enc(id)),
        Some(token),
        None,
        REQUEST_TIMEOUT,
    )
    .await
    .map_err(|w| format!("queue 0 {w}"))?;
    if q.status != 200 {
        return Err(q.failure("queue"));
    }
    Ok(Queued {
        id: enc(id),
        token: token.to_owned(),
        heartbeat_secs,
        at: Instant::now(),
        setup: start.elapsed(),
    })
}

/// Answers one probe: its legs until the host says `rtt_ms`.
async fn probe(ctx: &Ctx, url: &str, challenge: &str) -> Result<(), String> {
    if !url.starts_with("http://") {
        return Err("probe 0 not_http".into());
    }
    let first = format!(
        "{}/match/probe?challenge={}",
        url.trim_end_matches('/'),
        enc(challenge)
    );
    let mut target = first.clone();
    // Three legs on today's hosts; a bound, so a host answering echoes forever ends the bot.
    for _ in 0..16 {
        let r = call(
            &ctx.client,
            Method::POST,
            &target,
            None,
            None,
            REQUEST_TIMEOUT,
        )
        .await
        .map_err(|w| format!("probe 0 {w}"))?;
        if r.status != 200 {
            return Err(r.failure("probe"));
        }
        if r.body.get("rtt_ms").is_some() {
            return Ok(());
        }
        let Some(echo) = r.body["echo"].as_str() else {
            return Err("probe 200 no_echo".into());
        };
        target = format!("{first}&echo={}", enc(echo));
    }
    Err("probe 200 endless".into())
}

/// Heartbeats the search every `every` until aborted.
async fn heartbeats(ctx: Arc<Ctx>, url: String, token: String, every: Duration) {
    let mut tick = tokio::time::interval_at(tokio::time::Instant::now() + every, every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let c = &ctx.counters;
    loop {
        tick.tick().await;
        match call(
            &ctx.client,
            Method::POST,
            &url,
            Some(&token),
            None,
            REQUEST_TIMEOUT,
        )
        .await
        {
            Ok(r) if r.status == 200 => c.heartbeats.fetch_add(1, Ordering::Relaxed),
            _ => c.heartbeat_failures.fetch_add(1, Ordering::Relaxed),
        };
    }
}

/// Long-polls the queued search until it is assigned or over.
async fn wait(ctx: &Ctx, base: &str, q: &Queued) -> End {
    let c = &ctx.counters;
    let mut state = "queued".to_owned();
    let mut misses = 0u32;
    loop {
        let url = format!(
            "{base}/match/searches/{}?wait_ms={WAIT_MS}&state={state}",
            q.id
        );
        c.polls.fetch_add(1, Ordering::Relaxed);
        let answer = call(
            &ctx.client,
            Method::GET,
            &url,
            Some(&q.token),
            None,
            POLL_TIMEOUT,
        )
        .await;
        let r = match answer {
            Ok(r) if r.status == 200 => r,
            other => {
                let (status, why) = match other {
                    Ok(r) => (r.status, r.failure("poll")),
                    Err(w) => (0, format!("poll 0 {w}")),
                };
                misses += 1;
                if !retryable(status) || misses > POLL_RETRIES {
                    return End::Failed(why);
                }
                c.poll_retries.fetch_add(1, Ordering::Relaxed);
                tokio::time::sleep(Duration::from_millis(250 * u64::from(misses))).await;
                continue;
            }
        };
        let at = Instant::now();
        misses = 0;
        match r.body["state"].as_str().unwrap_or_default() {
            "assigned" | "connected" => return assigned(&r.body["assignment"], at),
            s @ ("cancelled" | "expired" | "failed") => {
                return End::Ended(format!("{s}/{}", r.body["reason"].as_str().unwrap_or("-")))
            }
            "" => return End::Failed("poll 200 no_state".into()),
            s => state = enc(s),
        }
    }
}

/// Cancels a search that waited `--max-wait` for its match: `unmatched/STATE` (the state the
/// cancel found), or the assignment when it came meanwhile.
async fn give_up(ctx: &Ctx, base: &str, q: &Queued) -> End {
    let r = call(
        &ctx.client,
        Method::DELETE,
        &format!("{base}/match/searches/{}", q.id),
        Some(&q.token),
        None,
        REQUEST_TIMEOUT,
    )
    .await;
    match r {
        Ok(r) if r.status == 200 => match r.body["state"].as_str().unwrap_or("-") {
            "assigned" | "connected" => assigned(&r.body["assignment"], Instant::now()),
            s => End::Ended(format!("unmatched/{s}")),
        },
        Ok(r) => End::Ended(format!(
            "unmatched/{}",
            r.failure("cancel").replace(' ', "_")
        )),
        Err(w) => End::Ended(format!("unmatched/cancel_0_{w}")),
    }
}

/// The assignment an answer showed at `at`.
fn assigned(a: &Value, at: Instant) -> End {
    let (Some(m), Some(z), Some(players)) = (
        a["match"].as_str(),
        a["zone"].as_str(),
        a["players"].as_array(),
    ) else {
        return End::Failed("poll 200 no_assignment".into());
    };
    End::Assigned {
        at,
        match_id: m.to_owned(),
        zone: z.to_owned(),
        players: players
            .iter()
            .map(|p| p.as_str().map_or_else(|| p.to_string(), str::to_owned))
            .collect(),
    }
}
