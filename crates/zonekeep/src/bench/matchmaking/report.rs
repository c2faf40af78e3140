//! The report of `bench match`: the figures of the bots' runs, the check of every match as its
//! bots saw it, and the report as text.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use serde_json::{json, Value};

use super::{quantiles, BotRun, Counters, End, MatchArgs};

/// The report as text.
pub(super) fn render(r: &Value) -> String {
    let q = |k: &str, p: &str| r[k][p].as_f64().unwrap_or(0.0);
    let counts = |k: &str| -> String {
        let m = r[k].as_object().cloned().unwrap_or_default();
        if m.is_empty() {
            return "none".into();
        }
        m.iter()
            .map(|(k, v)| format!("{k}: {v}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    format!(
        "{bots} bots in queue {queue:?}: {assigned} assigned, {failed} failed, {ended} ended otherwise\n\
         {matches} matches in {ms:.2} s (first queue to last assignment): {mps:.1} matches/s\n\
         time to match: p50 {p50:.1} ms, p95 {p95:.1} ms, p99 {p99:.1} ms, max {max:.1} ms\n\
         create+probe+queue: p50 {s50:.1} ms, p99 {s99:.1} ms\n\
         overfull/underfull matches: {badsize}; inconsistent (players disagree on zone or players): {disagree}; principals in two matches: {two}\n\
         failures: {failures}\n\
         ended: {endings}\n\
         long polls {polls} ({retries} retried), heartbeats {hb} ({hbf} failed), {secs:.2} s in all\n",
        bots = r["bots"],
        queue = r["queue"].as_str().unwrap_or(""),
        assigned = r["assigned"],
        failed = r["failed"],
        ended = r["ended"],
        matches = r["matches"],
        ms = r["match_seconds"].as_f64().unwrap_or(0.0),
        mps = r["matches_per_second"].as_f64().unwrap_or(0.0),
        p50 = q("time_to_match_ms", "p50"),
        p95 = q("time_to_match_ms", "p95"),
        p99 = q("time_to_match_ms", "p99"),
        max = q("time_to_match_ms", "max"),
        s50 = q("setup_ms", "p50"),
        s99 = q("setup_ms", "p99"),
        badsize = r["overfull"].as_u64().unwrap_or(0) + r["underfull"].as_u64().unwrap_or(0),
        disagree = r["inconsistent"],
        two = r["principals_in_two_matches"],
        failures = counts("failures"),
        endings = counts("endings"),
        polls = r["polls"],
        retries = r["poll_retries"],
        hb = r["heartbeats"],
        hbf = r["heartbeat_failures"],
        secs = r["seconds"].as_f64().unwrap_or(0.0),
    )
}

/// One match as its bots saw it.
#[derive(Default)]
struct Seen<'a> {
    zones: HashSet<&'a str>,
    /// Each bot's players, sorted.
    players: HashSet<Vec<&'a str>>,
    bots: usize,
    /// Bots handed the match without being among its players.
    unlisted: usize,
}

/// The report: the figures and the check of every match.
pub(super) fn report(args: &MatchArgs, c: &Counters, runs: &[BotRun], seconds: f64) -> Value {
    let mut failures: BTreeMap<&str, u64> = BTreeMap::new();
    let mut endings: BTreeMap<&str, u64> = BTreeMap::new();
    let mut to_match = Vec::new();
    let mut setups = Vec::new();
    let first_queue = runs.iter().filter_map(|r| r.queued_at).min();
    let mut last_assignment: Option<Instant> = None;
    let mut matches: HashMap<&str, Seen> = HashMap::new();
    for r in runs {
        setups.extend(r.setup);
        match &r.end {
            End::Assigned {
                at,
                match_id,
                zone,
                players,
            } => {
                if let Some(q) = r.queued_at {
                    to_match.push(at.saturating_duration_since(q));
                }
                last_assignment = last_assignment.max(Some(*at));
                let seen = matches.entry(match_id).or_default();
                seen.zones.insert(zone);
                let mut sorted: Vec<&str> = players.iter().map(String::as_str).collect();
                sorted.sort_unstable();
                seen.players.insert(sorted);
                seen.bots += 1;
                if !players.contains(&r.principal) {
                    seen.unlisted += 1;
                }
            }
            End::Failed(why) => *failures.entry(why).or_default() += 1,
            End::Ended(how) => *endings.entry(how).or_default() += 1,
        }
    }
    let size = args.size;
    let (mut overfull, mut underfull, mut inconsistent) = (0u64, 0u64, 0u64);
    let (mut malformed, mut partly_seen) = (0u64, 0u64);
    let mut examples = Vec::new();
    let mut principal_matches: HashMap<&str, HashSet<&str>> = HashMap::new();
    for (id, seen) in &matches {
        let listed = seen.players.iter().map(Vec::len).max().unwrap_or(0);
        let duplicates = seen
            .players
            .iter()
            .any(|p| p.windows(2).any(|w| w[0] == w[1]));
        let over = listed > size || seen.bots > size;
        let under = !over && listed < size;
        let disagree =
            seen.zones.len() != 1 || seen.players.len() != 1 || seen.unlisted > 0 || duplicates;
        overfull += u64::from(over);
        underfull += u64::from(under);
        inconsistent += u64::from(disagree);
        malformed += u64::from(over || under || disagree);
        if (over || under || disagree) && examples.len() < 5 {
            examples.push(json!({
                "match": id, "bots": seen.bots, "unlisted_bots": seen.unlisted,
                "zones": seen.zones, "players": seen.players,
            }));
        }
        if seen.bots < size {
            partly_seen += 1;
        }
        for p in seen.players.iter().flatten() {
            principal_matches.entry(p).or_default().insert(id);
        }
    }
    let in_two = principal_matches.values().filter(|m| m.len() > 1).count();
    let assigned = to_match.len();
    let match_seconds = match (first_queue, last_assignment) {
        (Some(f), Some(l)) => l.saturating_duration_since(f).as_secs_f64(),
        _ => 0.0,
    };
    let load = |a: &AtomicU64| a.load(Ordering::Relaxed);
    json!({
        "bots": runs.len(),
        "queue": args.queue,
        "size": size,
        "concurrency": args.concurrency,
        "replicas": args.urls.len(),
        "assigned": assigned,
        "failed": failures.values().sum::<u64>(),
        "failures": failures,
        "ended": endings.values().sum::<u64>(),
        "endings": endings,
        "matches": matches.len(),
        "match_seconds": match_seconds,
        "matches_per_second": if match_seconds > 0.0 { matches.len() as f64 / match_seconds } else { 0.0 },
        "time_to_match_ms": quantiles(to_match),
        "setup_ms": quantiles(setups),
        "overfull": overfull,
        "underfull": underfull,
        "inconsistent": inconsistent,
        "malformed": malformed,
        "malformed_examples": examples,
        "principals_in_two_matches": in_two,
        "matches_partly_seen": partly_seen,
        "polls": load(&c.polls),
        "poll_retries": load(&c.poll_retries),
        "heartbeats": load(&c.heartbeats),
        "heartbeat_failures": load(&c.heartbeat_failures),
        "seconds": seconds,
    })
}
