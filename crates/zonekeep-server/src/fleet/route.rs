//! Where a zone lives: the answer a host gives a Hello for a zone it is not running.
//!
//! The directory is asked once per such Hello (a zone running here needs no query). A zone with a
//! live owner is that owner's. A zone without one — new, released when it went dormant, or owned
//! by a dead host — is assigned first: placement (most free capacity) for a zone without owner,
//! the failover winner (rendezvous hashing over live hosts) for a dead host's zone. The
//! assignment is a claim in the database on the target's behalf, so every host that races to
//! assign the same zone agrees on one owner; the target loads the zone when the client arrives
//! or when its reconcile task sees the assignment, whichever is first.

use serde_json::Value;
use zonekeep_fleet::failover::rendezvous;
use zonekeep_fleet::place::{place, Candidate};
use zonekeep_store::{HostRecord, ZoneClaim, ZoneLocation};

use super::{query, Fleet, FleetError};

/// Where to serve a zone.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Route {
    /// Here. The directory entry, when the zone has one, holds the kind and params to run it with.
    Here(Option<ZoneLocation>),
    /// At another host.
    Owner {
        /// The owner's host id.
        host: String,
        /// The owner's advertised base URL.
        url: String,
    },
}

/// Why no host can take a zone right now.
#[derive(Debug, Clone, thiserror::Error)]
pub(crate) enum RouteError {
    /// The directory could not be asked.
    #[error(transparent)]
    Fleet(#[from] FleetError),
    /// No live host has room for a new zone.
    #[error("no host of the fleet has room for another zone")]
    NoRoom,
}

/// Live hosts as placement candidates.
fn candidates<'a>(fleet: &Fleet, hosts: &'a [HostRecord]) -> Vec<Candidate<'a>> {
    hosts
        .iter()
        .map(|h| Candidate {
            host_id: &h.host_id,
            capacity: h.capacity,
            zones: h.zones,
            draining: h.draining,
            alive: fleet
                .timing
                .is_alive(std::time::Duration::from_millis(h.heartbeat_age_ms), h.left),
        })
        .collect()
}

impl Fleet {
    /// Where `zone_id` is served; `kind` and `params` describe it if it is new.
    pub(crate) async fn route(
        &self,
        zone_id: &str,
        kind: &str,
        params: &Value,
    ) -> Result<Route, RouteError> {
        let found = query(
            &self.metrics,
            "locate",
            self.directory.locate(zone_id, self.timing),
        )
        .await?;
        if let Some(loc) = &found {
            match &loc.owner {
                Some(owner) if *owner == self.host_id => return Ok(Route::Here(found)),
                Some(owner) if loc.owner_alive => {
                    if let Some(url) = &loc.owner_url {
                        return Ok(Route::Owner {
                            host: owner.clone(),
                            url: url.clone(),
                        });
                    }
                }
                _ => {}
            }
        }
        let dead_owner = found.as_ref().is_some_and(|l| l.owner.is_some());
        let hosts = query(&self.metrics, "hosts", self.directory.hosts()).await?;
        let cands = candidates(self, &hosts);
        let target = if dead_owner {
            // The same answer on every host: the failover winner among live, non-draining hosts.
            rendezvous(
                zone_id,
                cands
                    .iter()
                    .filter(|c| c.alive && !c.draining)
                    .map(|c| c.host_id),
            )
        } else {
            place(&cands)
        }
        .ok_or(RouteError::NoRoom)?
        .to_owned();
        if target == self.host_id {
            // Counted once the zone has started here (the claim decides between racing Hellos).
            return Ok(Route::Here(found));
        }
        let (kind, params) = match &found {
            Some(l) => (l.kind.as_str(), &l.params),
            None => (kind, params),
        };
        let loc = match self.claim_for(zone_id, kind, params, &target).await? {
            ZoneClaim::Claimed { location, .. } => {
                if dead_owner {
                    // Counted here, by the host that took the zone from the dead one; the winner
                    // then only loads it.
                    self.metrics.takeovers.inc();
                    tracing::info!(zone = %zone_id, to = %target, "assigned a dead host's zone to its failover winner");
                }
                location
            }
            ZoneClaim::Owned(location) => location,
        };
        match (loc.owner, loc.owner_url) {
            (Some(owner), _) if owner == self.host_id => Ok(Route::Here(found)),
            (Some(host), Some(url)) => Ok(Route::Owner { host, url }),
            _ => {
                let url = hosts
                    .iter()
                    .find(|h| h.host_id == target)
                    .map(|h| h.url.clone())
                    .ok_or(RouteError::NoRoom)?;
                Ok(Route::Owner { host: target, url })
            }
        }
    }
}
