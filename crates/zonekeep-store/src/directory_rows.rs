//! What both backends conclude from the directory rows they read, as plain functions.
//!
//! Each backend reads the same logical rows (a host row, a zone's entry joined with its owner's host
//! row and its fence) inside its own locked transaction, with ages already computed by the
//! database's clock; everything decided from those rows lives here, so SQLite and PostgreSQL
//! cannot drift apart. Liveness and the claim rule themselves come from `zonekeep_fleet`.

use std::time::Duration;

use serde_json::Value;
use zonekeep_fleet::claim::{self, Ask, Decision, Owner};
use zonekeep_fleet::Timing;

use crate::directory::{
    ClaimRequest, HostRegistration, ZoneClaim, ZoneLocation, MAX_PARAMS_LEN, MAX_URL_LEN,
};
use crate::error::{Result, StoreError};
use crate::validate::{check_id, check_url, from_db};

/// A duration in whole milliseconds, for comparing with ages in SQL (saturating: a bound beyond
/// `i64::MAX` ms is "forever").
pub(crate) fn duration_ms(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

/// A count read from the database as a `u32` (saturating: only a display value).
pub(crate) fn count_u32(what: &str, n: i64) -> Result<u32> {
    Ok(u32::try_from(from_db(what, n)?).unwrap_or(u32::MAX))
}

/// Checks a registration's fields before any transaction starts.
pub(crate) fn check_registration(host: &HostRegistration) -> Result<()> {
    check_id("host id", &host.host_id)?;
    check_id("host incarnation", &host.incarnation)?;
    check_id("region", &host.region)?;
    check_url("host url", &host.url, MAX_URL_LEN)
}

/// Checks a claim's fields before any transaction starts; returns the params' JSON text.
pub(crate) fn check_claim(req: &ClaimRequest<'_>) -> Result<String> {
    check_id("zone id", req.zone_id)?;
    check_id("zone kind", req.kind)?;
    check_id("host id", req.by)?;
    check_id("host incarnation", req.by_incarnation)?;
    check_id("host id", req.to)?;
    encode_params(req.params)
}

/// The JSON text of zone params, refused beyond [`MAX_PARAMS_LEN`].
fn encode_params(params: &Value) -> Result<String> {
    let text = serde_json::to_string(params)
        .map_err(|e| StoreError::InvalidArgument(format!("zone params not encodable: {e}")))?;
    if text.len() > MAX_PARAMS_LEN {
        return Err(StoreError::InvalidArgument(format!(
            "zone params must encode to at most {MAX_PARAMS_LEN} bytes, got {}",
            text.len()
        )));
    }
    Ok(text)
}

/// A host's row as a claim or a registration needs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct HostRow {
    /// The incarnation that registered last.
    pub incarnation: String,
    /// Whether it left.
    pub left: bool,
    /// Whether it is draining.
    pub draining: bool,
    /// Age of its last heartbeat in ms, by the database's clock (never negative: clamped in SQL).
    pub age_ms: i64,
}

impl HostRow {
    fn age(&self) -> Result<Duration> {
        Ok(Duration::from_millis(from_db(
            "heartbeat age",
            self.age_ms,
        )?))
    }

    /// Whether this host's lease holds for `incarnation`: same incarnation, not left, last
    /// heartbeat within the fence bound.
    fn lease_holds(&self, incarnation: &str, timing: &Timing) -> Result<bool> {
        Ok(self.incarnation == incarnation && !self.left && self.age()? <= timing.fence_after)
    }

    /// Whether the host may be given a zone: alive and not draining.
    fn usable(&self, timing: &Timing) -> Result<bool> {
        Ok(!self.draining && timing.is_alive(self.age()?, self.left))
    }
}

/// Refuses a registration while another incarnation of the id is not left and heartbeated
/// within `silent_after`; `existing` is the id's current row.
pub(crate) fn check_host_id_free(
    existing: Option<&HostRow>,
    host: &HostRegistration,
    silent_after: Duration,
) -> Result<()> {
    let Some(row) = existing else {
        return Ok(());
    };
    let age = row.age()?;
    if row.incarnation != host.incarnation && !row.left && age <= silent_after {
        return Err(StoreError::HostIdInUse {
            host_id: host.host_id.clone(),
            heartbeat_age_ms: from_db("heartbeat age", row.age_ms)?,
        });
    }
    Ok(())
}

/// A zone's directory entry as read, joined with its owner's host row (all `None` when the owner
/// has none) and its fence.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct LocationRow {
    /// The zone id.
    pub zone_id: String,
    /// Stored kind.
    pub kind: String,
    /// Stored params.
    pub params: Value,
    /// Owner host id.
    pub owner: Option<String>,
    /// Owner's URL.
    pub owner_url: Option<String>,
    /// Whether the owner left.
    pub owner_left: Option<bool>,
    /// Owner's heartbeat age in ms (database clock).
    pub owner_age_ms: Option<i64>,
    /// The fence: max of the fence row and the save's epoch.
    pub epoch: i64,
}

impl LocationRow {
    /// The entry, with the owner's liveness judged by `timing`.
    pub(crate) fn into_location(self, timing: &Timing) -> Result<ZoneLocation> {
        let owner_alive = match (&self.owner, self.owner_left, self.owner_age_ms) {
            (Some(_), Some(left), Some(age_ms)) => {
                let age = Duration::from_millis(from_db("heartbeat age", age_ms)?);
                timing.is_alive(age, left)
            }
            _ => false,
        };
        Ok(ZoneLocation {
            zone_id: self.zone_id,
            kind: self.kind,
            params: self.params,
            owner_url: self.owner.as_ref().and(self.owner_url),
            owner: self.owner,
            owner_alive,
            epoch: from_db("epoch", self.epoch)?,
        })
    }
}

/// Applies [`claim::decide`] to what the claim transaction read: the asking host's row, the
/// target's row and the zone's current entry.
pub(crate) fn decide_claim(
    req: &ClaimRequest<'_>,
    by: Option<&HostRow>,
    to: Option<&HostRow>,
    current: Option<&ZoneLocation>,
) -> Result<Decision> {
    let by_lease_holds = match by {
        Some(row) => row.lease_holds(req.by_incarnation, &req.timing)?,
        None => false,
    };
    let to_usable = match to {
        Some(row) => row.usable(&req.timing)?,
        None => false,
    };
    let owner = match current.and_then(|loc| loc.owner.as_deref().map(|id| (id, loc))) {
        Some((id, loc)) => Owner::Host {
            id,
            alive: loc.owner_alive,
        },
        None => Owner::None,
    };
    Ok(claim::decide(
        owner,
        &Ask {
            by: req.by,
            by_lease_holds,
            to: req.to,
            to_usable,
        },
    ))
}

/// The answer to a claim that changes nothing (every [`Decision`] but `Take`, which the backend
/// carries out itself).
pub(crate) fn unchanged(
    decision: Decision,
    req: &ClaimRequest<'_>,
    current: Option<ZoneLocation>,
) -> Result<ZoneClaim> {
    match decision {
        Decision::LeaseLost => Err(StoreError::LeaseLost {
            host_id: req.by.to_owned(),
        }),
        Decision::TargetUnusable => Err(StoreError::HostUnavailable {
            host_id: req.to.to_owned(),
        }),
        Decision::AlreadyAssigned | Decision::OwnedElsewhere => {
            current.map(ZoneClaim::Owned).ok_or_else(|| {
                // decide() only answers these for a zone with an owner, i.e. with an entry.
                StoreError::Corrupt(format!(
                    "zone {:?} judged owned without a directory entry",
                    req.zone_id
                ))
            })
        }
        Decision::Take => Err(StoreError::Corrupt(
            "a granted claim reached the unchanged path".into(),
        )),
    }
}

/// Refuses a move unless `from` owns the zone under exactly the current `fence`.
pub(crate) fn check_move(
    zone_id: &str,
    fence: u64,
    owner: Option<&str>,
    from: &str,
    from_epoch: u64,
) -> Result<()> {
    if from_epoch < fence {
        return Err(StoreError::Fenced {
            stored_epoch: fence,
            attempted: from_epoch,
        });
    }
    if owner != Some(from) || from_epoch != fence {
        return Err(StoreError::NotOwner {
            zone_id: zone_id.to_owned(),
            host_id: from.to_owned(),
            epoch: from_epoch,
        });
    }
    Ok(())
}

/// Whether `host` may release the zone: it owns it under exactly the current `fence`.
pub(crate) fn may_release(fence: u64, owner: Option<&str>, host: &str, epoch: u64) -> bool {
    owner == Some(host) && epoch == fence
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use serde_json::json;

    fn row(incarnation: &str, age_ms: i64) -> HostRow {
        HostRow {
            incarnation: incarnation.into(),
            left: false,
            draining: false,
            age_ms,
        }
    }

    fn reg(incarnation: &str) -> HostRegistration {
        HostRegistration {
            host_id: "h".into(),
            incarnation: incarnation.into(),
            url: "ws://h:1".into(),
            capacity: 10,
            region: "local".into(),
        }
    }

    #[test]
    fn a_fresh_other_incarnation_holds_the_id() {
        let silent = Duration::from_secs(10);
        assert_eq!(
            check_host_id_free(Some(&row("a", 3_000)), &reg("b"), silent),
            Err(StoreError::HostIdInUse {
                host_id: "h".into(),
                heartbeat_age_ms: 3_000
            })
        );
        assert!(check_host_id_free(Some(&row("a", 3_000)), &reg("a"), silent).is_ok());
        assert!(check_host_id_free(Some(&row("a", 10_001)), &reg("b"), silent).is_ok());
        let left = HostRow {
            left: true,
            ..row("a", 0)
        };
        assert!(check_host_id_free(Some(&left), &reg("b"), silent).is_ok());
        assert!(check_host_id_free(None, &reg("b"), silent).is_ok());
    }

    #[test]
    fn claims_judge_lease_and_target_by_the_rows() {
        let params = json!(null);
        let req = ClaimRequest {
            zone_id: "z",
            kind: "k",
            params: &params,
            by: "a",
            by_incarnation: "a1",
            to: "a",
            timing: Timing::default(),
        };
        let fresh = row("a1", 0);
        assert_eq!(
            decide_claim(&req, Some(&fresh), Some(&fresh), None),
            Ok(Decision::Take)
        );
        let lapsed = row("a1", 5_001);
        assert_eq!(
            decide_claim(&req, Some(&lapsed), Some(&fresh), None),
            Ok(Decision::LeaseLost)
        );
        let replaced = row("a2", 0);
        assert_eq!(
            decide_claim(&req, Some(&replaced), Some(&fresh), None),
            Ok(Decision::LeaseLost)
        );
        assert_eq!(
            decide_claim(&req, None, Some(&fresh), None),
            Ok(Decision::LeaseLost)
        );
        let draining = HostRow {
            draining: true,
            ..fresh.clone()
        };
        assert_eq!(
            decide_claim(&req, Some(&fresh), Some(&draining), None),
            Ok(Decision::TargetUnusable)
        );
        assert_eq!(
            decide_claim(&req, Some(&fresh), None, None),
            Ok(Decision::TargetUnusable)
        );
    }

    #[test]
    fn owner_liveness_needs_a_host_row() {
        let raw = LocationRow {
            zone_id: "z".into(),
            kind: "k".into(),
            params: json!({}),
            owner: Some("gone".into()),
            owner_url: None,
            owner_left: None,
            owner_age_ms: None,
            epoch: 3,
        };
        let loc = raw.clone().into_location(&Timing::default()).unwrap();
        assert!(!loc.owner_alive);
        let alive = LocationRow {
            owner_url: Some("ws://x".into()),
            owner_left: Some(false),
            owner_age_ms: Some(10_000),
            ..raw.clone()
        };
        let loc = alive.clone().into_location(&Timing::default()).unwrap();
        assert!(loc.owner_alive);
        assert_eq!(loc.owner_url.as_deref(), Some("ws://x"));
        let dead = LocationRow {
            owner_age_ms: Some(10_001),
            ..alive
        };
        assert!(!dead.into_location(&Timing::default()).unwrap().owner_alive);
    }

    #[test]
    fn only_the_owner_at_the_fence_moves_or_releases() {
        assert!(check_move("z", 4, Some("a"), "a", 4).is_ok());
        assert!(matches!(
            check_move("z", 4, Some("a"), "a", 3),
            Err(StoreError::Fenced {
                stored_epoch: 4,
                attempted: 3
            })
        ));
        for (owner, from, epoch) in [(Some("a"), "b", 4), (None, "a", 4), (Some("a"), "a", 5)] {
            assert!(matches!(
                check_move("z", 4, owner, from, epoch),
                Err(StoreError::NotOwner { .. })
            ));
        }
        assert!(may_release(4, Some("a"), "a", 4));
        assert!(!may_release(4, Some("a"), "a", 3));
        assert!(!may_release(4, Some("a"), "b", 4));
        assert!(!may_release(4, None, "a", 4));
    }

    #[test]
    fn params_are_bounded() {
        assert!(encode_params(&json!({"map": "dunes"})).is_ok());
        let big = json!("x".repeat(MAX_PARAMS_LEN));
        assert!(matches!(
            encode_params(&big),
            Err(StoreError::InvalidArgument(_))
        ));
    }
}
