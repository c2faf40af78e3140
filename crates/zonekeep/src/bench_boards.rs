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

use std::collections::{BTreeMap, HashSet};
use std::future::Future;
use std::io::IsTerminal;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use clap::Args;
use hyper::Method;
use serde_json::{json, Value};
use zonekeep_bench::arena::math::Mulberry32;

use crate::bench_match::{call, enc, http_client, quantiles, retryable, HttpClient, Reply};

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

/// One request's end.
struct Outcome {
    /// The successful attempt's own time.
    took: Option<Duration>,
    /// `"STAGE STATUS CODE"` when it failed.
    failure: Option<String>,
    /// The answer's `source`, for reads.
    source: Option<&'static str>,
    /// Why each attempt sent again was refused (`"STAGE STATUS CODE"`).
    retried: Vec<String>,
}

/// A phase's figures.
struct Phase {
    requests: usize,
    ok: usize,
    failures: BTreeMap<String, u64>,
    /// Attempts sent again, by why.
    retries: BTreeMap<String, u64>,
    seconds: f64,
    latency_ms: Value,
    sources: BTreeMap<&'static str, u64>,
}

impl Phase {
    fn of(outcomes: Vec<Outcome>, seconds: f64) -> Phase {
        let mut failures: BTreeMap<String, u64> = BTreeMap::new();
        let mut sources: BTreeMap<&'static str, u64> = BTreeMap::new();
        let mut latencies = Vec::with_capacity(outcomes.len());
        let mut retries: BTreeMap<String, u64> = BTreeMap::new();
        let requests = outcomes.len();
        for o in outcomes {
            for why in o.retried {
                *retries.entry(why).or_default() += 1;
            }
            latencies.extend(o.took);
            if let Some(s) = o.source {
                *sources.entry(s).or_default() += 1;
            }
            if let Some(f) = o.failure {
                *failures.entry(f).or_default() += 1;
            }
        }
        Phase {
            requests,
            ok: latencies.len(),
            failures,
            retries,
            seconds,
            latency_ms: quantiles(latencies),
            sources,
        }
    }

    fn failed(&self) -> usize {
        self.requests - self.ok
    }

    fn per_second(&self) -> f64 {
        if self.seconds > 0.0 {
            self.ok as f64 / self.seconds
        } else {
            0.0
        }
    }

    fn to_json(&self) -> Value {
        json!({
            "requests": self.requests,
            "ok": self.ok,
            "failed": self.failed(),
            "failures": self.failures,
            "retries": self.retries.values().sum::<u64>(),
            "retried_for": self.retries,
            "seconds": self.seconds,
            "per_second": self.per_second(),
            "latency_ms": self.latency_ms,
            "sources": self.sources,
        })
    }
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
    let run = crate::bench_lobby::run_tag();
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

/// Runs `n` jobs, `concurrency` at once.
async fn phase<F, Fut>(
    ctx: &Arc<Ctx>,
    label: &str,
    n: usize,
    concurrency: usize,
    progress: bool,
    job: F,
) -> Result<Phase>
where
    F: Fn(Arc<Ctx>, usize) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Outcome> + Send + 'static,
{
    let job = Arc::new(job);
    let next = Arc::new(AtomicUsize::new(0));
    let done = Arc::new(AtomicU64::new(0));
    let started = Instant::now();
    let ticker = (progress && n > 0).then(|| {
        let (label, done) = (label.to_owned(), Arc::clone(&done));
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(Duration::from_millis(500)).await;
                let d = done.load(Ordering::Relaxed);
                let secs = started.elapsed().as_secs_f64();
                eprint!(
                    "\r[{label} {secs:>6.1} s] {d}/{n} ({:.0}/s)   ",
                    d as f64 / secs.max(1e-9)
                );
            }
        })
    });
    let mut workers = Vec::new();
    for _ in 0..concurrency.min(n) {
        let (ctx, next, done, job) = (
            Arc::clone(ctx),
            Arc::clone(&next),
            Arc::clone(&done),
            Arc::clone(&job),
        );
        workers.push(tokio::spawn(async move {
            let mut out = Vec::new();
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= n {
                    return out;
                }
                out.push(job(Arc::clone(&ctx), i).await);
                done.fetch_add(1, Ordering::Relaxed);
            }
        }));
    }
    let mut outcomes = Vec::with_capacity(n);
    for w in workers {
        outcomes.extend(w.await.context("a load worker failed")?);
    }
    let seconds = started.elapsed().as_secs_f64();
    if let Some(t) = ticker {
        t.abort();
        eprintln!();
    }
    Ok(Phase::of(outcomes, seconds))
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

fn ok(took: Duration, source: Option<&'static str>, retried: Vec<String>) -> Outcome {
    Outcome {
        took: Some(took),
        failure: None,
        source,
        retried,
    }
}

fn failed(why: String, retried: Vec<String>) -> Outcome {
    Outcome {
        took: None,
        failure: Some(why),
        source: None,
        retried,
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

/// What the bench knows the board should hold.
struct Truth {
    scores: Vec<i64>,
    /// Each principal's rank, when every submission's fate is known.
    ranks: Option<Vec<u64>>,
    /// The top entries `[rank, principal, score]`, when ranks are known.
    top: Option<Vec<(u64, usize, i64)>>,
    uncertain: usize,
}

fn truth(ctx: &Ctx, all_answered: bool) -> Truth {
    let scores: Vec<i64> = ctx
        .expected
        .iter()
        .map(|e| e.load(Ordering::Relaxed))
        .collect();
    let uncertain = ctx
        .uncertain
        .iter()
        .filter(|u| u.load(Ordering::Relaxed))
        .count();
    if !all_answered {
        return Truth {
            scores,
            ranks: None,
            top: None,
            uncertain,
        };
    }
    // Better first (higher, order desc), ties by principal byte order.
    let mut order: Vec<usize> = (0..scores.len()).collect();
    order.sort_unstable_by(|&a, &b| {
        scores[b].cmp(&scores[a]).then_with(|| {
            ctx.principals[a]
                .as_bytes()
                .cmp(ctx.principals[b].as_bytes())
        })
    });
    let mut ranks = vec![0u64; scores.len()];
    for (pos, &i) in order.iter().enumerate() {
        ranks[i] = pos as u64 + 1;
    }
    let top = order
        .iter()
        .take(TOP)
        .enumerate()
        .map(|(pos, &i)| (pos as u64 + 1, i, scores[i]))
        .collect();
    Truth {
        scores,
        ranks: Some(ranks),
        top: Some(top),
        uncertain,
    }
}

/// The principals the check reads back: up to [`SAMPLE`], drawn at random (seeded), whose
/// scores are known.
fn sample(ctx: &Ctx, seed: u32) -> Vec<usize> {
    let n = ctx.principals.len();
    let known = |i: &usize| !ctx.uncertain[*i].load(Ordering::Relaxed);
    if n <= SAMPLE {
        return (0..n).filter(known).collect();
    }
    let mut rng = Mulberry32::new(seed ^ 0x5eed_b0a7);
    let mut seen = HashSet::new();
    let mut out = Vec::new();
    for _ in 0..SAMPLE * 20 {
        let i = draw(&mut rng, n) as usize;
        if seen.insert(i) && known(&i) {
            out.push(i);
            if out.len() == SAMPLE {
                break;
            }
        }
    }
    out
}

/// One pass of reads compared with the truth.
struct Pass {
    size: Option<u64>,
    sources: BTreeMap<&'static str, u64>,
    mismatches: Vec<Value>,
}

/// Reads the board's size, top and the sampled principals (`from=store` or by default) and
/// compares them with what was submitted.
async fn pass(ctx: &Ctx, truth: &Truth, sampled: &[usize], entries: usize, store: bool) -> Pass {
    let from = if store { "&from=store" } else { "" };
    let mut p = Pass {
        size: None,
        sources: BTreeMap::new(),
        mismatches: Vec::new(),
    };
    let url = format!("{}/boards/{}?limit={TOP}{from}", ctx.base, ctx.board_path);
    match read(&ctx.client, &url).await {
        Ok(r) if r.status == 200 => {
            *p.sources.entry(source_of(&r.body)).or_default() += 1;
            let size = r.body["size"].as_u64();
            p.size = size;
            if size != Some(entries as u64) {
                p.mismatches
                    .push(json!({"what": "size", "expected": entries, "got": r.body["size"]}));
            }
            if let Some(top) = &truth.top {
                let want: Vec<Value> = top
                    .iter()
                    .map(|(rank, i, score)| {
                        json!({"rank": rank, "principal": ctx.principals[*i], "score": score})
                    })
                    .collect();
                let got = r.body["entries"].as_array().cloned().unwrap_or_default();
                let wrong = (0..want.len().max(got.len()))
                    .filter(|k| want.get(*k) != got.get(*k))
                    .count();
                if wrong > 0 {
                    p.mismatches.push(json!({
                        "what": "top", "entries_wrong": wrong, "expected": want, "got": got,
                    }));
                }
            }
        }
        Ok(r) => p
            .mismatches
            .push(json!({"what": "top", "error": r.failure("top")})),
        Err(w) => p
            .mismatches
            .push(json!({"what": "top", "error": format!("top 0 {w}")})),
    }
    for &i in sampled {
        let principal = &ctx.principals[i];
        let url = format!(
            "{}/boards/{}/around/{}?radius=0{from}",
            ctx.base,
            ctx.board_path,
            enc(principal)
        );
        let want_score = truth.scores[i];
        let want_rank = truth.ranks.as_ref().map(|r| r[i]);
        match read(&ctx.client, &url).await {
            Ok(r) if r.status == 200 => {
                *p.sources.entry(source_of(&r.body)).or_default() += 1;
                let me = &r.body["me"];
                let right = me["score"].as_i64() == Some(want_score)
                    && want_rank.is_none_or(|rank| me["rank"].as_u64() == Some(rank));
                if !right {
                    p.mismatches.push(json!({
                        "what": "around", "principal": principal,
                        "expected": {"score": want_score, "rank": want_rank}, "got": me,
                    }));
                }
            }
            Ok(r) => p.mismatches.push(json!({
                "what": "around", "principal": principal, "error": r.failure("around"),
            })),
            Err(w) => p.mismatches.push(json!({
                "what": "around", "principal": principal, "error": format!("around 0 {w}"),
            })),
        }
    }
    p
}

/// The exactness check: the store at once, the default read until it agrees or
/// `--settle-secs` passed.
async fn check(ctx: &Arc<Ctx>, args: &BoardsArgs) -> Value {
    let all_answered = !ctx.uncertain.iter().any(|u| u.load(Ordering::Relaxed));
    let truth = truth(ctx, all_answered);
    let sampled = sample(ctx, args.seed);
    let store = pass(ctx, &truth, &sampled, args.entries, true).await;
    let started = Instant::now();
    let deadline = started + Duration::from_secs(args.settle_secs);
    let mut reads = 1;
    let mut default = pass(ctx, &truth, &sampled, args.entries, false).await;
    // The first default read, as it found the board (the index may lag the store a moment).
    let first = json!({
        "bad": default.mismatches.len(),
        "sources": default.sources,
        "examples": default.mismatches.iter().take(EXAMPLES).collect::<Vec<_>>(),
    });
    // When the pass that agreed began, after the first one's start.
    let mut began = Duration::ZERO;
    while !default.mismatches.is_empty() && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(250)).await;
        began = started.elapsed();
        default = pass(ctx, &truth, &sampled, args.entries, false).await;
        reads += 1;
    }
    let settled_ms = default
        .mismatches
        .is_empty()
        .then_some(began.as_millis() as u64);
    let repeats = ctx.unexpected_repeats.load(Ordering::Relaxed);
    let bad = store.mismatches.len() as u64 + default.mismatches.len() as u64 + repeats;
    let examples: Vec<Value> = store
        .mismatches
        .iter()
        .map(|m| json!({"read": "store", "mismatch": m}))
        .chain(
            default
                .mismatches
                .iter()
                .map(|m| json!({"read": "default", "mismatch": m})),
        )
        .take(EXAMPLES)
        .collect();
    json!({
        "expected_size": args.entries,
        "store_size": store.size,
        "size": default.size,
        "ranks_checked": truth.ranks.is_some(),
        "sampled": sampled.len(),
        "uncertain_principals": truth.uncertain,
        "bad_store": store.mismatches.len(),
        "bad_default": default.mismatches.len(),
        "unexpected_repeats": repeats,
        "default_sources": default.sources,
        "default_reads": reads,
        "default_settled_ms": settled_ms,
        "default_first_read": first,
        "bad": bad,
        "examples": examples,
    })
}

/// The report as text.
fn render(r: &Value) -> String {
    let f = |v: &Value| v.as_f64().unwrap_or(0.0);
    let counts = |v: &Value| -> String {
        let m = v.as_object().cloned().unwrap_or_default();
        if m.is_empty() {
            return "none".into();
        }
        m.iter()
            .map(|(k, v)| format!("{k} {v}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let phase = |name: &str, key: &str, unit: &str| -> String {
        let p = &r[key];
        let mut line = format!(
            "{name:<18} {ok} in {secs:.2} s: {rate:.0} {unit}/s; latency p50 {p50:.2} ms, p99 {p99:.2} ms, max {max:.2} ms; {failed} failed",
            ok = p["ok"],
            secs = f(&p["seconds"]),
            rate = f(&p["per_second"]),
            p50 = f(&p["latency_ms"]["p50"]),
            p99 = f(&p["latency_ms"]["p99"]),
            max = f(&p["latency_ms"]["max"]),
            failed = p["failed"],
        );
        if p["retries"].as_u64().unwrap_or(0) > 0 {
            line += &format!(
                " ({} sent again: {})",
                p["retries"],
                counts(&p["retried_for"])
            );
        }
        if p["failed"].as_u64().unwrap_or(0) > 0 {
            line += &format!(" [{}]", counts(&p["failures"]));
        }
        if p["sources"].as_object().is_some_and(|m| !m.is_empty()) {
            line += &format!("; source {}", counts(&p["sources"]));
        }
        line + "\n"
    };
    let c = &r["check"];
    let mut out = format!(
        "board {board} at {url}: {entries} entries, {updates} updates, {queries} queries of each kind, concurrency {conc}, seed {seed}\n",
        board = r["board"].as_str().unwrap_or(""),
        url = r["url"].as_str().unwrap_or(""),
        entries = r["entries"],
        updates = r["updates"],
        queries = r["queries"],
        conc = r["concurrency"],
        seed = r["seed"],
    );
    out += &phase("fill", "fill", "updates");
    out += &phase("update", "update", "updates");
    out += &phase("top-10", "top", "reads");
    out += &phase("around-me", "around", "reads");
    out += &phase("top-10 (store)", "top_store", "reads");
    out += &phase("around-me (store)", "around_store", "reads");
    out += &format!(
        "check: size {size} (store {store_size}) of {expected} expected; top {TOP} and ranks {ranks}; {sampled} principals read back: {bs} bad from the store, {bd} bad by default ({settle}; sources {sources}); {rep} fresh keys answered as repeated\n",
        size = c["size"],
        store_size = c["store_size"],
        expected = c["expected_size"],
        ranks = if c["ranks_checked"] == true {
            "checked".to_owned()
        } else {
            format!(
                "not checked ({} principals' scores unknown)",
                c["uncertain_principals"]
            )
        },
        sampled = c["sampled"],
        bs = c["bad_store"],
        bd = c["bad_default"],
        settle = match c["default_settled_ms"].as_u64() {
            Some(0) => "agreed at once".to_owned(),
            Some(ms) => format!("agreed after {ms} ms"),
            None => format!("still disagreeing after {} reads", c["default_reads"]),
        },
        sources = counts(&c["default_sources"]),
        rep = c["unexpected_repeats"],
    );
    for e in c["examples"].as_array().into_iter().flatten() {
        out += &format!("  mismatch: {e}\n");
    }
    out += &format!(
        "{bad} bad, {failed} failed requests, {secs:.2} s in all; board {fate}\n",
        bad = r["bad"],
        failed = r["failed"],
        secs = f(&r["seconds"]),
        fate = if r["deleted"] == true {
            "deleted"
        } else {
            "kept"
        },
    );
    out
}
