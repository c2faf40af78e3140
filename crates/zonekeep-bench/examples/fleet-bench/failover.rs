//! Scenario `failover`: three hosts; N zones on host A, each with one client that entered through
//! host B and was redirected to A. A is killed with `kill -9`; per zone, the time from the kill to
//! the first Delta its client receives after the zone was taken over (the client reconnects
//! through B by itself and follows B's Redirect to the new owner).

use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::place::owners;
use crate::probe::{self, Timeline};
use crate::report::{by_label, counter, dist, dist_json, fmt_counts, ms_between, secs_line};
use crate::stage::{self, Stage};
use crate::Ctx;

/// Runs the scenario with `zones` zones, waiting at most `recover` for every client to recover.
/// Returns the text report and its JSON.
pub async fn run(ctx: &Ctx, zones: usize, recover: Duration) -> Result<(String, Value), String> {
    let Stage { mut hosts, probes } = stage::set(ctx, "fo", zones).await?;

    let killed_at = Instant::now();
    hosts[0].kill()?;
    let all = probe::wait_all(&probes, recover, |t| recovered(t, killed_at).is_some()).await;
    let waited = killed_at.elapsed();

    let owners = owners(&hosts[1], &hosts).await?;
    let mut metrics = Vec::new();
    for h in &hosts[1..] {
        metrics.push((h, h.metrics().await?));
    }
    let finished = probe::finish_all(probes).await;

    let mut to_delta = Vec::new();
    let mut to_welcome = Vec::new();
    let mut stuck = Vec::new();
    let (mut redirects, mut resumes, mut fresh, mut disconnects) = (0, 0, 0, 0);
    for (zone, counters, t) in &finished {
        match recovered(t, killed_at) {
            Some((welcomed, delta)) => {
                to_welcome.push(ms_between(killed_at, welcomed));
                to_delta.push(ms_between(killed_at, delta));
            }
            None => stuck.push(format!(
                "{zone}: {} sessions, closed: {}",
                t.sessions.len(),
                t.closed.as_deref().unwrap_or("no")
            )),
        }
        redirects += counters.redirects;
        resumes += counters.resumes;
        // The first join is a fresh join too; only the ones after the kill are of interest.
        fresh += counters.fresh_joins.saturating_sub(1);
        disconnects += t.disconnects;
    }
    let (delta_s, welcome_s) = (dist(&to_delta), dist(&to_welcome));

    let mut text = format!(
        "failover: {zones} zones ({}) on host a, one client each entering through host b; kill -9 a\n",
        ctx.kind
    );
    text += &format!(
        "  recovered: {} / {zones} ({}; waited {:.1} s)\n",
        to_delta.len(),
        if all { "all" } else { "NOT all" },
        waited.as_secs_f64()
    );
    text += &format!(
        "  kill → first Delta after the takeover: {}\n",
        secs_line(&delta_s)
    );
    text += &format!(
        "  kill → Welcome at the new owner:       {}\n",
        secs_line(&welcome_s)
    );
    text += &format!("  zones now on: {}\n", fmt_counts(&owners));
    text += &format!(
        "  clients: {redirects} redirects followed (first joins included), {resumes} resumes, \
         {fresh} fresh joins after the kill, {disconnects} disconnects\n"
    );
    let mut host_json = serde_json::Map::new();
    for (h, m) in &metrics {
        let took = h.log_count("took over a dead host's zone");
        let assigned = h.log_count("assigned a dead host's zone to its failover winner");
        let takeovers = counter(m, "zonekeep_fleet_takeovers_total");
        let redirected = counter(m, "zonekeep_fleet_redirects_total");
        let restored = h.log_count("zone restored from its save");
        text += &format!(
            "  host {}: takeovers (metric) {takeovers}, 'took over' log lines {took}, \
             'assigned … to its failover winner' log lines {assigned}, redirects sent {redirected}, \
             zones restored from a save {restored}\n",
            h.name
        );
        host_json.insert(
            h.name.clone(),
            json!({"takeovers_metric": takeovers, "took_over_log_lines": took,
                   "assigned_log_lines": assigned, "redirects": redirected, "restored": restored,
                   "directory_queries": by_label(m, "zonekeep_fleet_directory_queries_total", "op")}),
        );
    }
    for s in stuck.iter().take(10) {
        text += &format!("  not recovered: {s}\n");
    }
    let json = json!({
        "scenario": "failover", "zones": zones, "kind": ctx.kind,
        "recovered": to_delta.len(), "waited_ms": waited.as_millis() as u64,
        "kill_to_first_delta_ms": dist_json(&delta_s),
        "kill_to_welcome_ms": dist_json(&welcome_s),
        "owners": owners, "redirects": redirects, "resumes": resumes,
        "fresh_joins_after_kill": fresh, "disconnects": disconnects,
        "hosts": host_json, "not_recovered": stuck,
        "backoff_max_ms": ctx.backoff.max.as_millis() as u64,
    });
    for h in hosts.iter_mut() {
        h.stop().await;
    }
    Ok((text, json))
}

/// When the client, after `killed_at`, was welcomed again and received its first Delta there.
fn recovered(t: &Timeline, killed_at: Instant) -> Option<(Instant, Instant)> {
    t.sessions
        .iter()
        .filter(|s| s.welcomed > killed_at)
        .find_map(|s| s.first_delta.map(|d| (s.welcomed, d)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::probe::Session;

    #[test]
    fn recovery_is_the_first_delta_of_a_session_welcomed_after_the_kill() {
        let base = Instant::now();
        let t = |ms| base + Duration::from_millis(ms);
        let mut before = Session::new(t(0), false);
        before.first_delta = Some(t(5));
        let mut late = Session::new(t(10_800), false);
        late.first_delta = Some(t(10_830));
        let mut t1 = Timeline {
            sessions: vec![before, Session::new(t(10_500), false)],
            ..Timeline::default()
        };
        // Only the session from before the kill has Deltas: not recovered.
        assert_eq!(recovered(&t1, t(1_000)), None);
        t1.sessions.push(late);
        assert_eq!(recovered(&t1, t(1_000)), Some((t(10_800), t(10_830))));
    }
}
