//! Where zones are: putting them where a scenario wants them (`POST /admin/zones` with a named
//! `host`, then waiting until each host runs every zone it was given), and reading where the
//! directory says they are afterwards.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use futures_util::StreamExt;

use crate::hosts::Host;

/// Admin creates in flight at once (each is a directory claim and a zone start).
const CREATES_AT_ONCE: usize = 8;

/// Zone ids `{prefix}-0000`, `{prefix}-0001`, …
pub fn zone_ids(prefix: &str, n: usize) -> Vec<String> {
    (0..n).map(|i| format!("{prefix}-{i:04}")).collect()
}

/// Creates each zone of `plan` — (zone, index of the host to run it) — through that host's own
/// admin API, then waits (up to `bound`) until every host lists its zones as running.
pub async fn place(
    hosts: &[Host],
    plan: &[(String, usize)],
    kind: &str,
    params: &serde_json::Value,
    bound: Duration,
) -> Result<(), String> {
    let creates = plan.iter().map(|(zone, at)| async move {
        let host = hosts
            .get(*at)
            .ok_or_else(|| format!("no host {at} for {zone}"))?;
        host.create_zone(zone, kind, params, &host.id).await
    });
    let results: Vec<Result<(), String>> = futures_util::stream::iter(creates)
        .buffer_unordered(CREATES_AT_ONCE)
        .collect()
        .await;
    results.into_iter().collect::<Result<Vec<()>, String>>()?;
    let deadline = Instant::now() + bound;
    for (i, host) in hosts.iter().enumerate() {
        let want: BTreeSet<&str> = plan
            .iter()
            .filter(|(_, at)| *at == i)
            .map(|(z, _)| z.as_str())
            .collect();
        loop {
            let running = host.running_zones().await?;
            let running: BTreeSet<&str> = running.iter().map(String::as_str).collect();
            let missing = want.difference(&running).count();
            if missing == 0 {
                break;
            }
            if Instant::now() >= deadline {
                return Err(format!(
                    "host {} runs {} of its {} zones after {bound:?}",
                    host.name,
                    want.len() - missing,
                    want.len()
                ));
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
    Ok(())
}

/// Zones per owner (by host name) in the directory as `via` lists it.
pub async fn owners(via: &Host, hosts: &[Host]) -> Result<BTreeMap<String, usize>, String> {
    let list = via.admin_get("/admin/zones").await?;
    let mut out = BTreeMap::new();
    for z in list["zones"].as_array().into_iter().flatten() {
        let id = z["host"].as_str().unwrap_or("none");
        let name = hosts
            .iter()
            .find(|h| h.id == id)
            .map_or_else(|| id.to_owned(), |h| h.name.clone());
        *out.entry(name).or_insert(0) += 1;
    }
    Ok(out)
}
