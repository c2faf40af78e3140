//! `zonekeep bench boards`: a leaderboard under load, as a game's back end and its players load
//! it. The bench declares a fresh board (`PUT /admin/boards/{name}`, op `incr`), then, with
//! `--concurrency` requests in flight:
//!
//! 1. **fill**: gives `--entries` principals of its own their first score
//!    (`POST /boards/{name}/scores`, one idempotency key each): the fill rate;
//! 2. **update**: submits `--updates` more scores to principals drawn at random (seeded): updates
//!    per second and the submit latency;
//! 3. **queries**: `--queries` top-10 reads and `--queries` around-me reads (radius 5, a principal
//!    drawn at random) as the host answers them by default (its Redis index when it holds the
//!    period, else the store), counting the `source` of every answer; then the same with
//!    `from=store`;
//! 4. **check**: the board's size is `--entries`, its top 10 are exactly the ranking of what the
//!    bench submitted, and a sample of 100 principals each hold the score (and rank) submitted to
//!    them, read from the store and by default. The default read may come from the index, which
//!    follows the store a moment behind; it is read again until it agrees (up to
//!    `--settle-secs`). Every disagreement counts as **bad** and makes the run exit non-zero.
//!
//! A submission that got no answer (or a 429/5xx) is sent again under the same key, so a score is
//! never counted twice and the bench knows what each principal holds; one that never got an
//! answer leaves its principal's score unknown (left out of the check, and the rank checks are
//! skipped). The board is deleted at the end when this run declared it, unless `--keep-board` or
//! the check found it wrong. The host needs `--admin-token`, `--lobby-token` and a store, and
//! `--max-connections-per-ip` of at least `--concurrency` (the default 32 answers the rest 429).
//!
//! This file holds the flags, the plan and the requests; `phase` runs a phase's requests and
//! sums up their ends, `check` is the exactness check, and `report` renders the report.

mod check;
mod phase;
mod report;

use std::collections::BTreeMap;
use std::io::IsTerminal;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Result};
use clap::Args;
use hyper::Method;
use serde_json::{json, Value};
use zonekeep_bench::arena::math::Mulberry32;

use crate::bench::http::{call, enc, http_client, retryable, HttpClient, Reply};
use check::check;
use phase::{failed, ok, phase, Outcome, Phase};
use report::render;

/// Longest a request may take before it counts as unanswered.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);
/// Times an unanswered (or 429/5xx) request is sent again.
const RETRIES: usize = 3;
/// Principals whose scores the check reads back.
const SAMPLE: usize = 100;
/// Entries of a top read.
const TOP: usize = 10;
/// Entries on each side of an around-me read.
const RADIUS: usize = 5;
/// Scores submitted are 1..=MAX_VALUE.
const MAX_VALUE: u32 = 1000;
/// Mismatches the report shows.
const EXAMPLES: usize = 5;

/// `zonekeep bench boards`.
#[derive(Debug, Args)]
pub(crate) struct BoardsArgs {
    /// The host, e.g. http://127.0.0.1:7350.
    #[arg(long)]
    url: String,
    /// The host's back-end (lobby) credential: scores are submitted with it.
    #[arg(long, env = "ZONEKEEP_LOBBY_TOKEN", hide_env_values = true)]
    lobby_token: String,
    /// The host's admin token: the board is declared (and deleted) with it.
    #[arg(long, env = "ZONEKEEP_ADMIN_TOKEN", hide_env_values = true)]
    admin_token: String,
    /// Principals the fill gives a first score, each its own.
    #[arg(long, default_value_t = 1_000_000)]
    entries: usize,
    /// Scores submitted after the fill, to principals drawn at random.
    #[arg(long, default_value_t = 100_000)]
    updates: usize,
    /// Requests in flight at once.
    #[arg(long, default_value_t = 64)]
    concurrency: usize,
    /// Top-10 reads, and as many around-me reads, by default and again from the store.
    #[arg(long, default_value_t = 20_000)]
    queries: usize,
    /// Reads of each kind from the store (`from=store`) [default: --queries]. A store read
    /// counts rows, so on a board of a million a few hundred say what `--queries` would.
    #[arg(long)]
    store_queries: Option<usize>,
    /// Store reads in flight at once [default: --concurrency]. The store answers them one
    /// after another, so more in flight measures the queue, not the read.
    #[arg(long)]
    store_concurrency: Option<usize>,
    /// The board to load [default: bench-RUN, a fresh one]; one that exists must be empty and
    /// declared `op=incr`, `order=desc`, `period=all`.
    #[arg(long)]
    board: Option<String>,
    /// Seed of the scores, the principals updated and the principals read around.
    #[arg(long, default_value_t = 1)]
    seed: u32,
    /// Longest the check waits for the default read (the index) to agree with the store, seconds.
    #[arg(long, default_value_t = 30)]
    settle_secs: u64,
    /// Keep the board after the run (one this run declared is deleted otherwise, unless the
    /// check found it wrong).
    #[arg(long)]
    keep_board: bool,
    /// Print the result as one line of JSON.
    #[arg(long)]
    json: bool,
    /// No live progress line (it is shown only on a terminal and without --json anyway).
    #[arg(long)]
    no_progress: bool,
}

/// What every request shares.
struct Ctx {
    client: HttpClient,
    /// The host's URL, without a trailing `/`.
    base: String,
    /// The board's name, percent-encoded for a path.
    board_path: String,
    lobby_token: String,
    /// Prefix of every idempotency key (the run's tag).
    run: String,
    /// Principal `i`'s name.
    principals: Vec<String>,
    /// The fill's score of principal `i`.
    fill_values: Vec<i64>,
    /// The updates: (principal, value).
    updates: Vec<(u32, i64)>,
    /// The principals read around.
    picks: Vec<u32>,
    /// What each principal should hold: the sum of its recorded scores.
    expected: Vec<AtomicI64>,
    /// Principals a submission of which may or may not have been recorded.
    uncertain: Vec<AtomicBool>,
    /// Fresh keys the host answered as repeated (each one a score not counted).
    unexpected_repeats: AtomicU64,
}

pub(crate) fn run(args: BoardsArgs) -> Result<()> {
    if args.concurrency == 0 || args.entries == 0 || args.store_concurrency == Some(0) {
        bail!("--concurrency, --store-concurrency and --entries must be at least 1");
    }
    if u32::try_from(args.entries).is_err() {
        bail!("--entries must be at most {}", u32::MAX);
    }
    if !args.url.starts_with("http://") {
        bail!("--url {}: give an http:// URL of a host", args.url);
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let report = runtime.block_on(load(&args))?;
    if args.json {
        println!("{}", serde_json::to_string(&report)?);
    } else {
        print!("{}", render(&report));
    }
    let bad = report["bad"].as_u64().unwrap_or(0);
    if bad > 0 {
        bail!(
            "{bad} bad: board {} does not hold what was submitted to it",
            report["board"]
        );
    }
    Ok(())
}

/// Declares the board; `true` when this run created it.
async fn declare(client: &HttpClient, args: &BoardsArgs, base: &str, board: &str) -> Result<bool> {
    let url = format!("{base}/admin/boards/{}", enc(board));
    let body = json!({"op": "incr", "order": "desc", "period": "all"});
    let r = call(
        client,
        Method::PUT,
        &url,
        Some(&args.admin_token),
        Some(&body),
        REQUEST_TIMEOUT,
    )
    .await
    .map_err(|w| anyhow::anyhow!("PUT {url}: no answer ({w})"))?;
    match r.status {
        201 => Ok(true),
        200 => {
            // It exists with these settings: it must hold nothing, or the check means nothing.
            let r = read(
                client,
                &format!("{base}/boards/{}?limit=1&from=store", enc(board)),
            )
            .await
            .map_err(|w| anyhow::anyhow!("reading board {board}: {w}"))?;
            let size = r.body["size"].as_u64().unwrap_or(0);
            if r.status != 200 || size > 0 {
                bail!(
                    "board {board} exists and holds {size} score(s): name a fresh one with \
                     --board, or leave --board out"
                );
            }
            Ok(false)
        }
        409 => bail!("board {board} exists with other settings than op=incr order=desc period=all"),
        _ => bail!("declaring board {board}: {}", describe(&r)),
    }
}

/// A refusal, for an error message.
fn describe(r: &Reply) -> String {
    let message = r.body["error"]["message"].as_str().unwrap_or("");
    format!("{} {message}", r.failure("answered"))
}

/// One GET without credentials.
async fn read(client: &HttpClient, url: &str) -> Result<Reply, &'static str> {
    call(client, Method::GET, url, None, None, REQUEST_TIMEOUT).await
}

async fn load(args: &BoardsArgs) -> Result<Value> {
    let client = http_client();
    let base = args.url.trim_end_matches('/').to_owned();
    let run = crate::bench::lobby::run_tag();
    let board = args.board.clone().unwrap_or_else(|| format!("bench-{run}"));
    let created = declare(&client, args, &base, &board).await?;
    let ctx = Arc::new(plan(args, client, &base, &board, &run));
    let progress = !args.no_progress && !args.json && std::io::stderr().is_terminal();
    let n = args.concurrency;
    let started = Instant::now();

    let fill = phase(
        &ctx,
        "fill",
        args.entries,
        n,
        progress,
        |ctx, i| async move { submit(&ctx, i, format!("f{i}"), ctx.fill_values[i]).await },
    )
    .await?;
    if fill.ok == 0 {
        let why = fill
            .failures
            .iter()
            .map(|(k, v)| format!("{k}: {v}"))
            .collect::<Vec<_>>()
            .join(", ");
        if created && !args.keep_board {
            delete(&ctx, &args.admin_token, &board).await;
        }
        bail!("every submission to board {board} failed ({why})");
    }
    let update = phase(
        &ctx,
        "update",
        args.updates,
        n,
        progress,
        |ctx, j| async move {
            let (p, value) = ctx.updates[j];
            submit(&ctx, p as usize, format!("u{j}"), value).await
        },
    )
    .await?;
    let mut reads = BTreeMap::new();
    for (label, store) in [("", false), ("_store", true)] {
        let from = if store { "&from=store" } else { "" };
        let (queries, n) = if store {
            (
                args.store_queries.unwrap_or(args.queries),
                args.store_concurrency.unwrap_or(n),
            )
        } else {
            (args.queries, n)
        };
        let top = phase(
            &ctx,
            &format!("top{label}"),
            queries,
            n,
            progress,
            move |ctx, _| async move {
                let path = format!("/boards/{}?limit={TOP}{from}", ctx.board_path);
                query(&ctx, path, "top", false).await
            },
        )
        .await?;
        let around = phase(
            &ctx,
            &format!("around{label}"),
            queries,
            n,
            progress,
            move |ctx, q| async move {
                let p = &ctx.principals[ctx.picks[q] as usize];
                let path = format!(
                    "/boards/{}/around/{}?radius={RADIUS}{from}",
                    ctx.board_path,
                    enc(p)
                );
                query(&ctx, path, "around", true).await
            },
        )
        .await?;
        reads.insert(format!("top{label}"), top);
        reads.insert(format!("around{label}"), around);
    }
    let check = check(&ctx, args).await;
    let seconds = started.elapsed().as_secs_f64();
    let bad = check["bad"].as_u64().unwrap_or(0);
    let deleted = if created && !args.keep_board && bad == 0 {
        delete(&ctx, &args.admin_token, &board).await
    } else {
        false
    };
    let failed = fill.failed() + update.failed() + reads.values().map(Phase::failed).sum::<usize>();
    let mut report = json!({
        "url": base,
        "board": board,
        "created": created,
        "deleted": deleted,
        "entries": args.entries,
        "updates": args.updates,
        "queries": args.queries,
        "store_queries": args.store_queries.unwrap_or(args.queries),
        "concurrency": args.concurrency,
        "seed": args.seed,
        "fill_per_second": fill.per_second(),
        "updates_per_second": update.per_second(),
        "submit_latency_ms": update.latency_ms,
        "fill": fill.to_json(),
        "update": update.to_json(),
        "size": check["size"],
        "store_size": check["store_size"],
        "check": check,
        "failed": failed,
        "bad": bad,
        "seconds": seconds,
    });
    if let Some(obj) = report.as_object_mut() {
        for (k, p) in &reads {
            obj.insert(k.clone(), p.to_json());
        }
    }
    Ok(report)
}

/// The run's principals, scores and draws (all from `--seed`).
fn plan(args: &BoardsArgs, client: HttpClient, base: &str, board: &str, run: &str) -> Ctx {
    let mut rng = Mulberry32::new(args.seed);
    let n = args.entries;
    let value = |rng: &mut Mulberry32| 1 + (rng.next() * f64::from(MAX_VALUE)) as i64;
    let fill_values = (0..n).map(|_| value(&mut rng)).collect();
    let updates = (0..args.updates)
        .map(|_| (draw(&mut rng, n), value(&mut rng)))
        .collect();
    // Store reads take the first picks too, so both sources read around the same principals.
    let reads = args.queries.max(args.store_queries.unwrap_or(0));
    let picks = (0..reads).map(|_| draw(&mut rng, n)).collect();
    Ctx {
        client,
        base: base.to_owned(),
        board_path: enc(board),
        lobby_token: args.lobby_token.clone(),
        run: run.to_owned(),
        principals: (0..n).map(|i| format!("bench-{run}-{i}")).collect(),
        fill_values,
        updates,
        picks,
        expected: (0..n).map(|_| AtomicI64::new(0)).collect(),
        uncertain: (0..n).map(|_| AtomicBool::new(false)).collect(),
        unexpected_repeats: AtomicU64::new(0),
    }
}

/// A principal drawn at random from `0..n`.
fn draw(rng: &mut Mulberry32, n: usize) -> u32 {
    let i = (rng.next() * n as f64) as usize;
    u32::try_from(i.min(n - 1)).unwrap_or(0)
}

/// Submits `value` to principal `p` under the run's key `key`, again under the same key while
/// unanswered.
async fn submit(ctx: &Ctx, p: usize, key: String, value: i64) -> Outcome {
    let url = format!("{}/boards/{}/scores", ctx.base, ctx.board_path);
    let body = json!({
        "principal": ctx.principals[p],
        "value": value,
        "key": format!("{}-{key}", ctx.run),
    });
    let mut retried = Vec::new();
    // Whether an attempt may have been recorded without the bench hearing so.
    let mut maybe = false;
    loop {
        let start = Instant::now();
        let answer = call(
            &ctx.client,
            Method::POST,
            &url,
            Some(&ctx.lobby_token),
            Some(&body),
            REQUEST_TIMEOUT,
        )
        .await;
        let took = start.elapsed();
        let (status, failure) = match answer {
            Ok(r) if r.status == 201 && r.body["recorded"] == true => {
                ctx.expected[p].fetch_add(value, Ordering::Relaxed);
                return ok(took, None, retried);
            }
            Ok(r) if r.status == 200 && r.body["recorded"] == false => {
                if maybe {
                    // An earlier attempt was recorded after all, and counted once.
                    ctx.expected[p].fetch_add(value, Ordering::Relaxed);
                    return ok(took, None, retried);
                }
                // The key is fresh: the host counted nothing for a score it never had.
                ctx.unexpected_repeats.fetch_add(1, Ordering::Relaxed);
                return failed("submit 200 repeated".into(), retried);
            }
            Ok(r) => (r.status, r.failure("submit")),
            Err(w) => (0, format!("submit 0 {w}")),
        };
        maybe |= status == 0 || status >= 500;
        if retryable(status) && retried.len() < RETRIES {
            retried.push(failure);
            tokio::time::sleep(Duration::from_millis(100 * retried.len() as u64)).await;
            continue;
        }
        if maybe {
            ctx.uncertain[p].store(true, Ordering::Relaxed);
        }
        return failed(failure, retried);
    }
}

/// One read at `path`; an around read must find its principal (`me`).
async fn query(ctx: &Ctx, path: String, stage: &str, around: bool) -> Outcome {
    let url = format!("{}{path}", ctx.base);
    let mut retried = Vec::new();
    loop {
        let start = Instant::now();
        let answer = read(&ctx.client, &url).await;
        let took = start.elapsed();
        let (status, failure) = match answer {
            Ok(r) if r.status == 200 => {
                let source = source_of(&r.body);
                if around && r.body["me"].is_null() {
                    let mut o = failed(format!("{stage} 200 no_me"), retried);
                    o.source = Some(source);
                    return o;
                }
                return ok(took, Some(source), retried);
            }
            Ok(r) => (r.status, r.failure(stage)),
            Err(w) => (0, format!("{stage} 0 {w}")),
        };
        if retryable(status) && retried.len() < RETRIES {
            retried.push(failure);
            tokio::time::sleep(Duration::from_millis(100 * retried.len() as u64)).await;
            continue;
        }
        return failed(failure, retried);
    }
}

fn source_of(body: &Value) -> &'static str {
    match body["source"].as_str() {
        Some("index") => "index",
        Some("store") => "store",
        _ => "other",
    }
}

/// Deletes the board; whether it went.
async fn delete(ctx: &Ctx, admin_token: &str, board: &str) -> bool {
    let url = format!("{}/admin/boards/{}", ctx.base, ctx.board_path);
    match call(
        &ctx.client,
        Method::DELETE,
        &url,
        Some(admin_token),
        None,
        REQUEST_TIMEOUT,
    )
    .await
    {
        Ok(r) if r.status == 200 => true,
        Ok(r) => {
            eprintln!("zonekeep: board {board} was not deleted: {}", describe(&r));
            false
        }
        Err(w) => {
            eprintln!("zonekeep: board {board} was not deleted: no answer ({w})");
            false
        }
    }
}
