//! The report of `bench chat`: the figures, and the check of every kept line against every
//! session of its zone.

use std::collections::BTreeMap;

use serde_json::{json, Value};

use super::session::{Outcome, Seen};
use super::{ChatArgs, Ctx};

/// Lost lines the report names.
const EXAMPLES: usize = 5;

/// The report: the figures and the check of every kept line.
pub(super) fn report(args: &ChatArgs, ctx: &Ctx, outcomes: Vec<Outcome>) -> Value {
    let mut join_failures: BTreeMap<String, u64> = BTreeMap::new();
    let mut ended_early: BTreeMap<String, u64> = BTreeMap::new();
    let mut refused: BTreeMap<String, u64> = BTreeMap::new();
    let (mut joined, mut not_ready, mut failed) = (0u64, 0u64, 0u64);
    let (mut duplicates, mut out_of_order, mut misrouted) = (0u64, 0u64, 0u64);
    let (mut sent, mut unanswered, mut kept_and_refused) = (0u64, 0u64, 0u64);
    let mut deliveries = 0u64;
    let mut latency = Vec::new();
    // The sessions of each zone that heard its history and lasted to the end.
    let mut audience: Vec<Vec<&Seen>> = vec![Vec::new(); ctx.zones.len()];
    // Each sender's kept lines: (zone, sender, n).
    let mut kept: Vec<(usize, u32, u32)> = Vec::new();
    for o in &outcomes {
        if let Some(why) = &o.failed {
            *join_failures.entry(short(why)).or_default() += 1;
            failed += 1;
            continue;
        }
        joined += 1;
        let s = &o.seen;
        if let Some(why) = &s.ended {
            *ended_early.entry(short(why)).or_default() += 1;
        } else if s.ready {
            audience[o.spec.zone].push(s);
        }
        not_ready += u64::from(!s.ready);
        failed += u64::from(!s.ready || s.ended.is_some());
        duplicates += s.duplicates;
        out_of_order += s.out_of_order;
        misrouted += s.misrouted;
        deliveries += s.heard.len() as u64 + s.duplicates;
        latency.extend_from_slice(&s.latency_us);
        for (code, k) in &s.refused {
            *refused.entry(code.clone()).or_default() += k;
        }
        if let Some((g, _)) = o.spec.sender {
            sent += u64::from(o.sent);
            for n in 1..=o.sent {
                let heard = s.heard.contains(&(g, n));
                let refused = s.refused_refs.contains(&n);
                if heard {
                    kept.push((o.spec.zone, g, n));
                }
                kept_and_refused += u64::from(heard && refused);
                unanswered += u64::from(!heard && !refused);
            }
        }
    }
    let kept_n = kept.len() as u64;
    let (mut lost, mut missing) = (0u64, 0u64);
    let mut examples = Vec::new();
    let mut expected = 0u64;
    for &(z, g, n) in &kept {
        expected += audience[z].len() as u64;
        let m = audience[z]
            .iter()
            .filter(|s| !s.heard.contains(&(g, n)))
            .count();
        if m > 0 {
            lost += 1;
            missing += m as u64;
            if examples.len() < EXAMPLES {
                examples.push(json!({"zone": ctx.zones[z], "sender": g, "n": n, "missed_by": m}));
            }
        }
    }
    latency.sort_unstable();
    let q = |p: f64| -> f64 {
        if latency.is_empty() {
            return 0.0;
        }
        let i = ((latency.len() as f64 - 1.0) * p).round() as usize;
        latency[i.min(latency.len() - 1)] as f64 / 1000.0
    };
    let secs = ctx.window.as_secs_f64();
    let bad = lost + unanswered + duplicates + out_of_order + misrouted + kept_and_refused;
    json!({
        "url": args.url,
        "run": ctx.run,
        "kind": args.kind,
        "zones": args.zones,
        "listeners": args.listeners,
        "senders": args.senders,
        "sessions_per_zone": args.listeners + args.senders,
        "sessions": outcomes.len(),
        "rate": args.rate,
        "seconds": secs,
        "seed": args.seed,
        "offered_per_second": (args.zones * args.senders) as f64 * args.rate,
        "joined": joined,
        "join_failures": join_failures,
        "ended_early": ended_early,
        "not_ready": not_ready,
        "sent": sent,
        "kept": kept_n,
        "refused": refused,
        "unanswered": unanswered,
        "kept_and_refused": kept_and_refused,
        "kept_per_second": kept_n as f64 / secs,
        "deliveries": deliveries,
        "expected_deliveries": expected,
        "deliveries_per_second": deliveries as f64 / secs,
        "latency_ms": {"p50": q(0.50), "p90": q(0.90), "p99": q(0.99), "max": q(1.0), "count": latency.len()},
        "lost": lost,
        "missing_deliveries": missing,
        "lost_examples": examples,
        "duplicates": duplicates,
        "out_of_order": out_of_order,
        "misrouted": misrouted,
        "bad": bad,
        "failed": failed,
        "elapsed_seconds": ctx.origin.elapsed().as_secs_f64(),
    })
}

/// A reason cut to a length a report can group by.
fn short(why: &str) -> String {
    why.chars().take(160).collect()
}

/// `{"A": 1, "B": 2}` as `A 1, B 2` (or `none`).
pub(super) fn counts(v: &Value) -> String {
    let m = v.as_object().cloned().unwrap_or_default();
    if m.is_empty() {
        return "none".into();
    }
    m.iter()
        .map(|(k, v)| format!("{k} ({v})"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The report as text.
pub(super) fn render(r: &Value) -> String {
    let f = |k: &str| r[k].as_f64().unwrap_or(0.0);
    let l = |k: &str| r["latency_ms"][k].as_f64().unwrap_or(0.0);
    format!(
        "chat at {url}: {zones} zones x {spz} sessions ({listeners} listening, {senders} talking at \
         {rate}/s), kind {kind}, {offered:.0} lines/s offered for {secs:.1} s, seed {seed}\n\
         sessions: {joined} of {sessions} joined; join failures: {jf}; ended early: {ee}; without history: {nr}\n\
         lines: {sent} sent, {kept} kept ({kps:.1}/s), refused: {refused}, {unanswered} unanswered\n\
         deliveries: {del} of {exp} expected ({dps:.0}/s); fan-out latency p50 {p50:.2} ms, p90 {p90:.2} ms, \
         p99 {p99:.2} ms, max {max:.2} ms\n\
         check: {lost} kept lines lost ({missing} missing deliveries), {dup} duplicates, {ooo} out of order, \
         {mis} misrouted, {kar} kept and refused\n\
         {bad} bad, {failed} failed sessions, {el:.1} s in all\n",
        url = r["url"].as_str().unwrap_or(""),
        zones = r["zones"],
        spz = r["sessions_per_zone"],
        listeners = r["listeners"],
        senders = r["senders"],
        rate = r["rate"],
        kind = r["kind"].as_str().unwrap_or("(host default)"),
        offered = f("offered_per_second"),
        secs = f("seconds"),
        seed = r["seed"],
        joined = r["joined"],
        sessions = r["sessions"],
        jf = counts(&r["join_failures"]),
        ee = counts(&r["ended_early"]),
        nr = r["not_ready"],
        sent = r["sent"],
        kept = r["kept"],
        kps = f("kept_per_second"),
        refused = counts(&r["refused"]),
        unanswered = r["unanswered"],
        del = r["deliveries"],
        exp = r["expected_deliveries"],
        dps = f("deliveries_per_second"),
        p50 = l("p50"),
        p90 = l("p90"),
        p99 = l("p99"),
        max = l("max"),
        lost = r["lost"],
        missing = r["missing_deliveries"],
        dup = r["duplicates"],
        ooo = r["out_of_order"],
        mis = r["misrouted"],
        kar = r["kept_and_refused"],
        bad = r["bad"],
        failed = r["failed"],
        el = f("elapsed_seconds"),
    )
}
