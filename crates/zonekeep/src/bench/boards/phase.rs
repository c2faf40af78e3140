//! A phase of `bench boards`: its requests run `concurrency` at once (with a live progress line),
//! each request's end, and the phase's figures made of them (the latency, failures, retries and
//! where the reads were answered from).

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use serde_json::{json, Value};

use super::Ctx;
use crate::bench::matchmaking::quantiles;

/// One request's end.
pub(super) struct Outcome {
    /// The successful attempt's own time.
    took: Option<Duration>,
    /// `"STAGE STATUS CODE"` when it failed.
    failure: Option<String>,
    /// The answer's `source`, for reads.
    pub(super) source: Option<&'static str>,
    /// Why each attempt sent again was refused (`"STAGE STATUS CODE"`).
    retried: Vec<String>,
}

/// A phase's figures.
pub(super) struct Phase {
    requests: usize,
    pub(super) ok: usize,
    pub(super) failures: BTreeMap<String, u64>,
    /// Attempts sent again, by why.
    retries: BTreeMap<String, u64>,
    seconds: f64,
    pub(super) latency_ms: Value,
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

    pub(super) fn failed(&self) -> usize {
        self.requests - self.ok
    }

    pub(super) fn per_second(&self) -> f64 {
        if self.seconds > 0.0 {
            self.ok as f64 / self.seconds
        } else {
            0.0
        }
    }

    pub(super) fn to_json(&self) -> Value {
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

/// Runs `n` jobs, `concurrency` at once.
pub(super) async fn phase<F, Fut>(
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

pub(super) fn ok(took: Duration, source: Option<&'static str>, retried: Vec<String>) -> Outcome {
    Outcome {
        took: Some(took),
        failure: None,
        source,
        retried,
    }
}

pub(super) fn failed(why: String, retried: Vec<String>) -> Outcome {
    Outcome {
        took: None,
        failure: Some(why),
        source: None,
        retried,
    }
}
