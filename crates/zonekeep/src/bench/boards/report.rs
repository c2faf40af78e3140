//! The report of `bench boards` as text: one line per phase, the check, and the outcome.

use serde_json::Value;

use super::TOP;

/// The report as text.
pub(super) fn render(r: &Value) -> String {
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
