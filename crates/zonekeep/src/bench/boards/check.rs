//! The exactness check of `bench boards`: what the bench knows the board should hold (from what
//! it submitted and was answered), read back from the store and by default, the default read
//! again until it agrees.

use std::collections::{BTreeMap, HashSet};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use zonekeep_bench::arena::math::Mulberry32;

use super::{draw, read, source_of, BoardsArgs, Ctx, EXAMPLES, SAMPLE, TOP};
use crate::bench::http::enc;

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
pub(super) async fn check(ctx: &Arc<Ctx>, args: &BoardsArgs) -> Value {
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
