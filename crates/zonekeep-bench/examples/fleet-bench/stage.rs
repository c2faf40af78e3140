//! The stage `failover` and `drain` share: three hosts (`a`, `b`, `c`), N zones placed on `a`,
//! and one client per zone that entered through `b` (so it was redirected to `a`) and is playing:
//! it has received a Delta. Then the stage settles for a while, so that every zone has a periodic
//! save behind it and a takeover restores a save rather than starting the zone afresh.

use std::time::Duration;

use crate::hosts::Host;
use crate::place::{place, zone_ids};
use crate::probe::{self, Probe};
use crate::Ctx;

/// The hosts (`a`, `b`, `c` in that order) and the playing clients, one per zone.
pub struct Stage {
    /// `a`, `b`, `c`.
    pub hosts: Vec<Host>,
    /// One client per zone.
    pub probes: Vec<Probe>,
}

/// Sets the stage with `zones` zones named `{prefix}-NNNN`.
pub async fn set(ctx: &Ctx, prefix: &str, zones: usize) -> Result<Stage, String> {
    let hosts = ctx.spec.start(&["a", "b", "c"]).await?;
    let ids = zone_ids(prefix, zones);
    let plan: Vec<(String, usize)> = ids.iter().map(|z| (z.clone(), 0)).collect();
    place(
        &hosts,
        &plan,
        &ctx.kind,
        &ctx.params,
        Duration::from_secs(120),
    )
    .await?;
    let entry = &hosts[1];
    let probes = probe::start_all(&ids, |z| entry.zone_url(z), &ctx.tickets, ctx.backoff).await?;
    let playing = probe::wait_all(&probes, Duration::from_secs(60), |t| {
        t.sessions.iter().any(|s| s.first_delta.is_some())
    })
    .await;
    if !playing {
        return Err("not every client received a Delta through host b within 60 s".into());
    }
    tokio::time::sleep(ctx.settle).await;
    Ok(Stage { hosts, probes })
}
