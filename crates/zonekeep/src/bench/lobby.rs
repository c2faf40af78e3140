//! `zonekeep bench lobby`: the lobby under load, as a game's back end loads it. Many concurrent
//! callers ask hosts of one fleet (in turn) for `join_or_create` seats, each for a principal of
//! its own, in rooms of `--seats`; the answers give the throughput, the latency (p50, p95, p99,
//! max) and a check that no room was handed more seats than it has.
//!
//! Every run tags its rooms with metadata of its own (`{"bench": RUN}`), so a run never fills the
//! rooms of an earlier one.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use bytes::Bytes;
use clap::Args;
use http_body_util::{BodyExt, Full, Limited};
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use serde_json::{json, Value};

/// Largest answer read.
const MAX_ANSWER: usize = 64 << 10;
/// Longest a request may take before it counts as failed.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// `zonekeep bench lobby`.
#[derive(Debug, Args)]
pub(crate) struct LobbyArgs {
    /// A host of the fleet, e.g. http://127.0.0.1:7350; give several to spread the requests.
    #[arg(long = "url", required = true)]
    urls: Vec<String>,
    /// The hosts' lobby credential.
    #[arg(long, env = "ZONEKEEP_LOBBY_TOKEN", hide_env_values = true)]
    lobby_token: String,
    /// The zone kind to seat players in.
    #[arg(long, default_value = "arena")]
    kind: String,
    /// Requests in flight at once.
    #[arg(long, default_value_t = 32)]
    concurrency: usize,
    /// Requests in all.
    #[arg(long, default_value_t = 2000)]
    requests: usize,
    /// Players a room seats.
    #[arg(long, default_value_t = 8)]
    seats: u32,
    /// Print the result as JSON.
    #[arg(long)]
    json: bool,
}

/// What a run measured.
#[derive(Debug)]
struct LobbyReport {
    requests: usize,
    seated: usize,
    failed: usize,
    /// Failures by status (0: no answer).
    failures: HashMap<u16, usize>,
    seconds: f64,
    seats_per_second: f64,
    latency_ms: Quantiles,
    rooms: usize,
    rooms_created: usize,
    most_seats_in_a_room: usize,
    seats_per_room: u32,
    /// Rooms whose players and reserved seats, read back after the run, exceed their seats.
    overfull: usize,
}

#[derive(Debug)]
struct Quantiles {
    p50: f64,
    p95: f64,
    p99: f64,
    max: f64,
}

impl LobbyReport {
    fn to_json(&self) -> Value {
        let failures: serde_json::Map<String, Value> = self
            .failures
            .iter()
            .map(|(status, n)| (status.to_string(), Value::from(*n)))
            .collect();
        json!({
            "requests": self.requests,
            "seated": self.seated,
            "failed": self.failed,
            "failures": failures,
            "seconds": self.seconds,
            "seats_per_second": self.seats_per_second,
            "latency_ms": {
                "p50": self.latency_ms.p50,
                "p95": self.latency_ms.p95,
                "p99": self.latency_ms.p99,
                "max": self.latency_ms.max,
            },
            "rooms": self.rooms,
            "rooms_created": self.rooms_created,
            "most_seats_in_a_room": self.most_seats_in_a_room,
            "seats_per_room": self.seats_per_room,
            "overfull": self.overfull,
        })
    }
}

/// A tag unique to this run (process id and clock), so a run's rooms or principals never meet
/// an earlier run's.
pub(crate) fn run_tag() -> String {
    format!(
        "{}-{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_millis())
            .unwrap_or(0)
    )
}

/// The `q` quantile of sorted `d`, in milliseconds.
pub(crate) fn quantile(d: &[Duration], q: f64) -> f64 {
    if d.is_empty() {
        return 0.0;
    }
    let i = ((d.len() as f64 - 1.0) * q).round() as usize;
    d[i.min(d.len() - 1)].as_secs_f64() * 1000.0
}

/// One answer: latency, status, and the seat's zone and whether it was created.
struct Answer {
    took: Duration,
    status: u16,
    zone: Option<String>,
    created: bool,
}

pub(crate) fn run(args: LobbyArgs) -> Result<()> {
    if args.concurrency == 0 || args.requests == 0 || args.seats == 0 {
        bail!("--concurrency, --requests and --seats must be at least 1");
    }
    for u in &args.urls {
        if !(u.starts_with("http://") || u.starts_with("https://")) {
            bail!("--url {u}: give an http:// URL of a host");
        }
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let report = runtime.block_on(load(&args))?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report.to_json())?);
    } else {
        println!(
            "{} seats in {:.2} s: {:.0} seats/s; latency p50 {:.2} ms, p95 {:.2} ms, p99 {:.2} ms, max {:.2} ms; {} rooms ({} created), at most {} seats handed out in one (of {}; a reservation that lapsed frees its seat); {} overfull; {} failed",
            report.seated,
            report.seconds,
            report.seats_per_second,
            report.latency_ms.p50,
            report.latency_ms.p95,
            report.latency_ms.p99,
            report.latency_ms.max,
            report.rooms,
            report.rooms_created,
            report.most_seats_in_a_room,
            report.seats_per_room,
            report.overfull,
            report.failed,
        );
    }
    if report.overfull > 0 {
        bail!("{} room(s) hold more seats than they have", report.overfull);
    }
    Ok(())
}

async fn load(args: &LobbyArgs) -> Result<LobbyReport> {
    let client: Client<_, Full<Bytes>> = Client::builder(TokioExecutor::new()).build_http();
    let run = run_tag();
    let next = Arc::new(AtomicUsize::new(0));
    let answers = Arc::new(Mutex::new(Vec::with_capacity(args.requests)));
    let started = Instant::now();
    let mut workers = Vec::new();
    for _ in 0..args.concurrency.min(args.requests) {
        let (client, next, answers) = (client.clone(), next.clone(), answers.clone());
        let (urls, token, kind, run) = (
            args.urls.clone(),
            args.lobby_token.clone(),
            args.kind.clone(),
            run.clone(),
        );
        let (requests, seats) = (args.requests, args.seats);
        workers.push(tokio::spawn(async move {
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= requests {
                    return;
                }
                let url = format!(
                    "{}/lobby/join_or_create",
                    urls[i % urls.len()].trim_end_matches('/')
                );
                let body = json!({
                    "kind": kind, "principal": format!("bench-{run}-{i}"),
                    "max_players": seats, "metadata": {"bench": run},
                });
                let answer = ask(&client, &url, &token, &body).await;
                answers
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .push(answer);
            }
        }));
    }
    for w in workers {
        w.await.context("a load worker failed")?;
    }
    let seconds = started.elapsed().as_secs_f64();
    let answers = std::mem::take(&mut *answers.lock().unwrap_or_else(|p| p.into_inner()));
    let mut latencies: Vec<Duration> = answers.iter().map(|a| a.took).collect();
    latencies.sort();
    let mut failures: HashMap<u16, usize> = HashMap::new();
    let mut per_room: HashMap<String, usize> = HashMap::new();
    let mut created = 0;
    for a in &answers {
        match &a.zone {
            Some(z) if a.status == 200 || a.status == 201 => {
                *per_room.entry(z.clone()).or_default() += 1;
                created += usize::from(a.created);
            }
            _ => *failures.entry(a.status).or_default() += 1,
        }
    }
    let seated = answers.len() - failures.values().sum::<usize>();
    // The invariant, read back from the lobby: no room holds more than it seats.
    let mut overfull = 0;
    for (i, zone) in per_room.keys().enumerate() {
        let url = format!(
            "{}/lobby/rooms/{zone}",
            args.urls[i % args.urls.len()].trim_end_matches('/')
        );
        let room = get(&client, &url, &args.lobby_token).await?;
        let held =
            room["players"].as_u64().unwrap_or(0) + room["reserved_players"].as_u64().unwrap_or(0);
        if held > room["max_players"].as_u64().unwrap_or(0) {
            overfull += 1;
        }
    }
    Ok(LobbyReport {
        requests: answers.len(),
        seated,
        failed: answers.len() - seated,
        failures,
        seconds,
        seats_per_second: seated as f64 / seconds.max(1e-9),
        latency_ms: Quantiles {
            p50: quantile(&latencies, 0.50),
            p95: quantile(&latencies, 0.95),
            p99: quantile(&latencies, 0.99),
            max: quantile(&latencies, 1.0),
        },
        rooms: per_room.len(),
        rooms_created: created,
        most_seats_in_a_room: per_room.values().copied().max().unwrap_or(0),
        seats_per_room: args.seats,
        overfull,
    })
}

/// A lobby room read back, as JSON.
async fn get(
    client: &Client<hyper_util::client::legacy::connect::HttpConnector, Full<Bytes>>,
    url: &str,
    token: &str,
) -> Result<Value> {
    let req = hyper::Request::get(url)
        .header("authorization", format!("Bearer {token}"))
        .body(Full::new(Bytes::new()))?;
    let resp = tokio::time::timeout(REQUEST_TIMEOUT, client.request(req))
        .await
        .context("the lobby did not answer in time")?
        .with_context(|| format!("GET {url}"))?;
    let bytes = Limited::new(resp.into_body(), MAX_ANSWER)
        .collect()
        .await
        .map_err(|e| anyhow::anyhow!("reading {url}: {e}"))?
        .to_bytes();
    Ok(serde_json::from_slice(&bytes).unwrap_or(Value::Null))
}

/// One `join_or_create`.
async fn ask(
    client: &Client<hyper_util::client::legacy::connect::HttpConnector, Full<Bytes>>,
    url: &str,
    token: &str,
    body: &Value,
) -> Answer {
    let start = Instant::now();
    let failed = |status: u16| Answer {
        took: start.elapsed(),
        status,
        zone: None,
        created: false,
    };
    let Ok(req) = hyper::Request::post(url)
        .header("authorization", format!("Bearer {token}"))
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from(body.to_string())))
    else {
        return failed(0);
    };
    let resp = match tokio::time::timeout(REQUEST_TIMEOUT, client.request(req)).await {
        Ok(Ok(r)) => r,
        _ => return failed(0),
    };
    let status = resp.status().as_u16();
    let Ok(bytes) = Limited::new(resp.into_body(), MAX_ANSWER).collect().await else {
        return failed(status);
    };
    let json: Value = serde_json::from_slice(&bytes.to_bytes()).unwrap_or(Value::Null);
    Answer {
        took: start.elapsed(),
        status,
        zone: json["zone"].as_str().map(str::to_owned),
        created: json["created"] == true,
    }
}
