//! Scenario `drain`: three hosts; N zones on host A, each with one client that entered through
//! host B. A gets SIGTERM: it freezes each zone, confirms its final save, moves it in the
//! directory to a live host and kicks its clients with ZONE_MOVED; they come back through B.
//! Per zone, the gap the player sees: the last Delta before the kick → the first Delta after
//! resuming at the new owner. Also whether the client resumed its player or joined afresh.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use zonekeep_protocol::messages::KickCode;

use crate::place::owners;
use crate::probe::{self, Session, Timeline};
use crate::report::{by_label, dist, dist_json, fmt_counts, ms_between, ms_line};
use crate::stage::{self, Stage};
use crate::Ctx;

/// Runs the scenario with `zones` zones, waiting at most `recover` for every client to come back.
/// Returns the text report and its JSON.
pub async fn run(ctx: &Ctx, zones: usize, recover: Duration) -> Result<(String, Value), String> {
    let Stage { mut hosts, probes } = stage::set(ctx, "dr", zones).await?;

    let term_at = Instant::now();
    hosts[0].sigterm()?;
    let all = probe::wait_all(&probes, recover, |t| moved(t, term_at).is_some()).await;
    let waited = term_at.elapsed();
    let exit = hosts[0].wait_exit(Duration::from_secs(30)).await;
    let exited_after = term_at.elapsed();
    let owners = owners(&hosts[1], &hosts).await?;
    let mut host_metrics = Vec::new();
    for h in &hosts[1..] {
        host_metrics.push((h.name.clone(), h.metrics().await?));
    }
    let finished = probe::finish_all(probes).await;

    let mut gaps = Vec::new();
    // The gap in three parts: until the kick (the host's freeze, final save and hand-over), kick
    // to Welcome (the client's reconnect through B), Welcome to the first Delta.
    let (mut to_kick, mut to_welcome, mut to_delta) = (Vec::new(), Vec::new(), Vec::new());
    let mut kicks: BTreeMap<String, usize> = BTreeMap::new();
    let mut stuck = Vec::new();
    // Zones whose client was not told ZONE_MOVED, and what it was told instead.
    let mut not_moved = Vec::new();
    let (mut resumed, mut fresh, mut disconnects, mut redirects) = (0, 0, 0, 0);
    for (zone, counters, t) in &finished {
        disconnects += t.disconnects;
        redirects += counters.redirects;
        let Some((before, after)) = moved(t, term_at) else {
            stuck.push(format!(
                "{zone}: {} sessions, closed: {}",
                t.sessions.len(),
                t.closed.as_deref().unwrap_or("no")
            ));
            continue;
        };
        let code = before.kick.map_or_else(
            || "no Kick (transport dropped)".to_owned(),
            |k| {
                k.name()
                    .map_or_else(|| format!("code {}", k.0), str::to_owned)
            },
        );
        if before.kick != Some(KickCode::ZONE_MOVED) {
            not_moved.push(format!("{zone}: {code}"));
        }
        *kicks.entry(code).or_insert(0) += 1;
        if let (Some(last), Some(end), Some(first)) =
            (before.last_delta, before.ended, after.first_delta)
        {
            gaps.push(ms_between(last, first));
            to_kick.push(ms_between(last, end));
            to_welcome.push(ms_between(end, after.welcomed));
            to_delta.push(ms_between(after.welcomed, first));
        }
        if after.resumed {
            resumed += 1;
        } else {
            fresh += 1;
        }
    }
    let gap = dist(&gaps);
    let parts = [dist(&to_kick), dist(&to_welcome), dist(&to_delta)];
    let a = &hosts[0];
    let handed = a.log_count("zone handed over");
    let saved = a.log_count("final save written");
    let not_handed = a.log_count("zone not handed over");
    let restored: usize = hosts[1..]
        .iter()
        .map(|h| h.log_count("zone restored from its save"))
        .sum();
    let exit_text = match exit {
        Some(s) => format!("exited {s} after {:.2} s", exited_after.as_secs_f64()),
        None => format!(
            "still running after {:.0} s (killed)",
            exited_after.as_secs_f64()
        ),
    };

    let mut text = format!(
        "drain: {zones} zones ({}) on host a, one client each entering through host b; SIGTERM a\n",
        ctx.kind
    );
    text += &format!(
        "  back in play: {} / {zones} ({}; waited {:.1} s); host a {exit_text}\n",
        gaps.len(),
        if all { "all" } else { "NOT all" },
        waited.as_secs_f64()
    );
    text += &format!(
        "  gap, last Delta before the kick → first Delta after: {}\n",
        ms_line(&gap)
    );
    text += &format!("    last Delta → the kick:  {}\n", ms_line(&parts[0]));
    text += &format!("    kick → Welcome:         {}\n", ms_line(&parts[1]));
    text += &format!("    Welcome → first Delta:  {}\n", ms_line(&parts[2]));
    text += &format!("  kicks that ended the session: {}\n", fmt_counts(&kicks));
    if !not_moved.is_empty() {
        text += &format!("    not told ZONE_MOVED: {}\n", not_moved.join(", "));
    }
    text += &format!(
        "  came back as: {resumed} resumed players, {fresh} fresh joins; \
         {disconnects} disconnects; {redirects} redirects followed (first joins included)\n"
    );
    text += &format!(
        "  host a log: {saved} final saves written, {handed} zones handed over, {not_handed} not handed over\n"
    );
    text += &format!(
        "  zones now on: {} ({restored} restored from a save by b and c)\n",
        fmt_counts(&owners)
    );
    for s in stuck.iter().take(10) {
        text += &format!("  not back: {s}\n");
    }
    let mut metrics_json = serde_json::Map::new();
    for (name, m) in &host_metrics {
        metrics_json.insert(
            name.clone(),
            json!({"directory_queries": by_label(m, "zonekeep_fleet_directory_queries_total", "op")}),
        );
    }
    let json = json!({
        "scenario": "drain", "zones": zones, "kind": ctx.kind,
        "back": gaps.len(), "waited_ms": waited.as_millis() as u64,
        "gap_ms": dist_json(&gap), "last_delta_to_kick_ms": dist_json(&parts[0]),
        "kick_to_welcome_ms": dist_json(&parts[1]), "welcome_to_first_delta_ms": dist_json(&parts[2]),
        "kicks": kicks, "not_told_zone_moved": not_moved,
        "resumed": resumed, "fresh_joins": fresh, "disconnects": disconnects,
        "redirects": redirects, "exit": exit_text, "final_saves_written": saved,
        "handed_over": handed, "not_handed_over": not_handed, "owners": owners, "restored": restored,
        "hosts": metrics_json, "not_back": stuck,
    });
    for h in hosts.iter_mut() {
        h.stop().await;
    }
    Ok((text, json))
}

/// The session that ended after `term_at` and the next one once it has received a Delta.
fn moved(t: &Timeline, term_at: Instant) -> Option<(&Session, &Session)> {
    let i = t
        .sessions
        .iter()
        .position(|s| s.ended.is_some_and(|e| e > term_at))?;
    let after = t
        .sessions
        .get(i + 1..)?
        .iter()
        .find(|s| s.first_delta.is_some())?;
    Some((t.sessions.get(i)?, after))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    /// A session welcomed at `at` ms with Deltas from `first` to `last` ms, ended at `end` ms.
    fn session(base: Instant, at: u64, deltas: Option<(u64, u64)>, end: Option<u64>) -> Session {
        let t = |ms| base + Duration::from_millis(ms);
        let mut s = Session::new(t(at), false);
        if let Some((first, last)) = deltas {
            s.first_delta = Some(t(first));
            s.last_delta = Some(t(last));
            s.deltas = 2;
        }
        s.ended = end.map(t);
        s.kick = end.map(|_| KickCode::ZONE_MOVED);
        s
    }

    #[test]
    fn the_gap_runs_from_the_kicked_session_to_the_next_one_that_received_a_delta() {
        let base = Instant::now();
        let t = Timeline {
            sessions: vec![
                // Ended before the SIGTERM (at 1,000 ms): not the drain's doing.
                session(base, 0, Some((10, 400)), Some(500)),
                session(base, 600, Some((610, 1_100)), Some(1_300)),
                // Welcomed, then dropped before any Delta: the player still waits.
                session(base, 1_400, None, Some(1_450)),
                session(base, 1_600, Some((1_650, 2_000)), None),
            ],
            ..Timeline::default()
        };
        let (before, after) = moved(&t, base + Duration::from_millis(1_000)).unwrap();
        assert_eq!(before.last_delta, Some(base + Duration::from_millis(1_100)));
        assert_eq!(after.first_delta, Some(base + Duration::from_millis(1_650)));
        let waiting = Timeline {
            sessions: t.sessions[..3].to_vec(),
            ..Timeline::default()
        };
        assert!(moved(&waiting, base + Duration::from_millis(1_000)).is_none());
    }
}
