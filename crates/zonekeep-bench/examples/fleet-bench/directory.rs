//! Scenario `directory`: three hosts with N zones in the directory (a third on each, placed by the
//! admin API, no clients), left alone for a window. The directory queries each host makes, by
//! operation, from `zonekeep_fleet_directory_queries_total` read before and after the window;
//! nothing else talks to the hosts in between (the admin API queries the directory too). Beside
//! them, what those queries cost the database: rows read per second per table of the run's schema.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::place::{place, zone_ids};
use crate::report::{by_label, counter};
use crate::schema::{Schema, TableReads};
use crate::Ctx;

/// The counter read.
const QUERIES: &str = "zonekeep_fleet_directory_queries_total";
/// Failed or timed-out directory queries.
const ERRORS: &str = "zonekeep_fleet_directory_errors_total";
/// The host's own CPU time.
const CPU: &str = "process_cpu_seconds_total";

/// Runs the scenario with `zones` zones over `window`. Returns the text report and its JSON.
pub async fn run(
    ctx: &Ctx,
    schema: &Schema,
    zones: usize,
    window: Duration,
) -> Result<(String, Value), String> {
    let mut hosts = ctx.spec.start(&["a", "b", "c"]).await?;
    let n = hosts.len();
    let plan: Vec<(String, usize)> = zone_ids("dl", zones)
        .into_iter()
        .enumerate()
        .map(|(i, z)| (z, i % n))
        .collect();
    place(
        &hosts,
        &plan,
        &ctx.kind,
        &ctx.params,
        Duration::from_secs(300),
    )
    .await?;
    // Let the placement's own queries fall out of the first reconcile passes.
    tokio::time::sleep(Duration::from_secs(2)).await;

    let mut before = Vec::new();
    for h in &hosts {
        before.push(h.metrics().await?);
    }
    let tables_before = schema.table_reads().await?;
    let began = Instant::now();
    tokio::time::sleep(window).await;
    let mut after = Vec::new();
    for h in &hosts {
        after.push(h.metrics().await?);
    }
    let secs = began.elapsed().as_secs_f64();
    let tables_after = schema.table_reads().await?;

    let ops: BTreeSet<String> = after
        .iter()
        .flat_map(|m| by_label(m, QUERIES, "op").into_keys())
        .collect();
    let mut text = format!(
        "directory load: {zones} zones ({}) in the directory, {} hosts (a third each, no clients); \
         window {secs:.1} s\n",
        ctx.kind, n
    );
    text += &format!(
        "  queries/s by op{}\n",
        ops.iter().map(|o| format!(" | {o}")).collect::<String>() + " | total | errors | host CPU"
    );
    let mut per_host = serde_json::Map::new();
    for (i, ((h, b), a)) in hosts.iter().zip(&before).zip(&after).enumerate() {
        let (qb, qa) = (by_label(b, QUERIES, "op"), by_label(a, QUERIES, "op"));
        let rate: BTreeMap<String, f64> = ops
            .iter()
            .map(|o| {
                let d = qa.get(o).copied().unwrap_or(0.0) - qb.get(o).copied().unwrap_or(0.0);
                (o.clone(), d / secs)
            })
            .collect();
        let total: f64 = rate.values().sum();
        let errors = counter(a, ERRORS) - counter(b, ERRORS);
        let cpu = (counter(a, CPU) - counter(b, CPU)) / secs;
        text += &format!(
            "  host {} ({} zones){} | {total:.2} | {errors} | {cpu:.3} cores\n",
            h.name,
            plan.iter().filter(|(_, at)| *at == i).count(),
            rate.values()
                .map(|r| format!(" | {r:.2}"))
                .collect::<String>()
        );
        per_host.insert(
            h.name.clone(),
            json!({"queries_per_s": rate, "total_per_s": total, "errors": errors, "cpu_cores": cpu}),
        );
    }
    let (tables_text, tables_json) = table_rates(&tables_before, &tables_after, secs);
    text += &tables_text;
    let json = json!({
        "scenario": "directory", "zones": zones, "kind": ctx.kind, "window_s": secs,
        "hosts": per_host, "tables_per_s": tables_json,
    });
    for h in hosts.iter_mut() {
        h.stop().await;
    }
    Ok((text, json))
}

/// Per table: scans and rows read per second over the window (tables nobody read are left out).
fn table_rates(
    before: &BTreeMap<String, TableReads>,
    after: &BTreeMap<String, TableReads>,
    secs: f64,
) -> (String, Value) {
    let mut text = String::from(
        "  database, all hosts together (approximate: PostgreSQL publishes its counts lazily):\n",
    );
    let mut out = serde_json::Map::new();
    for (table, a) in after {
        let b = before.get(table).copied().unwrap_or_default();
        let per_s = |x: i64, y: i64| (x - y) as f64 / secs;
        let r = json!({
            "seq_scans": per_s(a.seq_scans, b.seq_scans),
            "seq_rows": per_s(a.seq_rows, b.seq_rows),
            "idx_scans": per_s(a.idx_scans, b.idx_scans),
            "idx_rows": per_s(a.idx_rows, b.idx_rows),
            "updated": per_s(a.updated, b.updated),
        });
        if *a == b {
            continue;
        }
        text += &format!(
            "    {table}: {:.1} seq scans/s reading {:.0} rows/s, {:.1} index scans/s fetching {:.0} rows/s, {:.1} rows updated/s\n",
            per_s(a.seq_scans, b.seq_scans),
            per_s(a.seq_rows, b.seq_rows),
            per_s(a.idx_scans, b.idx_scans),
            per_s(a.idx_rows, b.idx_rows),
            per_s(a.updated, b.updated),
        );
        out.insert(table.clone(), r);
    }
    (text, Value::Object(out))
}
