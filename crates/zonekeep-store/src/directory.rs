//! The fleet directory contract: which hosts exist (with leases stamped by the database's clock)
//! and which host owns which zone.
//!
//! The directory keeps no epoch of its own. A zone's epoch is its fence (the one
//! [`SaveStore`](crate::SaveStore) keeps): every claim or move through the directory raises it, so
//! the fenced saves and fact commits refuse the previous owner from that moment on.
//!
//! Every heartbeat is stamped, and every age computed, by the database's clock inside SQL, never by
//! a host's clock: hosts disagree about the time, the database is the one clock they share.

use std::time::Duration;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use zonekeep_fleet::Timing;

use crate::error::Result;
use crate::types::SaveRecord;

/// Longest host URL accepted, in bytes.
pub const MAX_URL_LEN: usize = 512;
/// Longest zone params accepted, in bytes of their JSON encoding. Params become a directory row;
/// bounding them bounds the table.
pub const MAX_PARAMS_LEN: usize = 64 * 1024;

/// What a host announces when it joins the fleet.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HostRegistration {
    /// The host's stable id (e.g. from its configuration); one running process per id.
    pub host_id: String,
    /// This process's unique id (new on every start), so a replaced process learns it was replaced.
    pub incarnation: String,
    /// Where clients reach the host (sent to clients of zones it owns).
    pub url: String,
    /// How many zones the host is willing to run.
    pub capacity: u32,
    /// The region it serves (the matchmaker places a match's zone in one region).
    pub region: String,
}

/// A host as the directory knows it, from [`Directory::hosts`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HostRecord {
    /// The host id.
    pub host_id: String,
    /// The incarnation that registered last.
    pub incarnation: String,
    /// Where clients reach it.
    pub url: String,
    /// How many zones it is willing to run.
    pub capacity: u32,
    /// The region it serves.
    pub region: String,
    /// Whether it is draining (takes no new zones).
    pub draining: bool,
    /// Whether it left the fleet (its zones may be taken at once).
    pub left: bool,
    /// How long ago its last heartbeat landed, by the database's clock.
    pub heartbeat_age_ms: u64,
    /// How many zones it owns in the directory.
    pub zones: u32,
}

/// A zone's directory entry.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ZoneLocation {
    /// The zone id.
    pub zone_id: String,
    /// The zone kind it runs as (stored by the first claim, kept ever after).
    pub kind: String,
    /// The params it is created with (stored by the first claim, kept ever after).
    pub params: serde_json::Value,
    /// The host that owns it, `None` when nobody does (never placed, or released while dormant).
    pub owner: Option<String>,
    /// The owner's URL, when the owner has a host row.
    pub owner_url: Option<String>,
    /// Whether the owner is alive by [`Timing::is_alive`] and the database's clock (`false` when
    /// there is no owner or no host row for it).
    pub owner_alive: bool,
    /// The zone's epoch: its fence (the highest epoch claimed or written).
    pub epoch: u64,
}

/// The outcome of [`Directory::claim_zone`] when the claim was decided (refusals are errors).
#[derive(Debug, Clone, PartialEq)]
pub enum ZoneClaim {
    /// `to` owns the zone now under `epoch` (fence raised); `last` is its latest save (when
    /// `to == by`, the caller restores from it); `location` holds the stored kind and params to run
    /// it with.
    Claimed {
        /// The new epoch, above every earlier one: every earlier owner is fenced.
        epoch: u64,
        /// The zone's latest save, if any.
        last: Option<SaveRecord>,
        /// The directory entry after the claim.
        location: ZoneLocation,
    },
    /// Nothing changed: the zone is (already) someone's; send the client to `location.owner_url`.
    Owned(ZoneLocation),
}

/// One claim of a zone: `by` asks for `to` to own it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ClaimRequest<'a> {
    /// The zone.
    pub zone_id: &'a str,
    /// The kind to run it as, used only when the zone has no directory entry yet.
    pub kind: &'a str,
    /// The params to create it with, used only when the zone has no directory entry yet.
    pub params: &'a serde_json::Value,
    /// The host asking.
    pub by: &'a str,
    /// The asking host's incarnation (its lease must hold under it).
    pub by_incarnation: &'a str,
    /// The host that will own the zone (`by` itself when it loads the zone).
    pub to: &'a str,
    /// The protocol timing to judge leases and liveness with.
    pub timing: Timing,
}

/// The fleet directory: hosts with leases, and zone ownership. See the module docs.
///
/// Every method is atomic with respect to other stores on the same database. Methods that change a
/// zone's entry take the zone's fence lock first (the lock saves and claims take), so they
/// serialize with every save, fact check and claim of that zone. Listings are ordered by the ids'
/// bytes on both backends.
#[async_trait]
pub trait Directory: Send + Sync {
    /// Registers (or re-registers) a host. Refused with
    /// [`StoreError::HostIdInUse`](crate::StoreError::HostIdInUse) while another incarnation of the
    /// same id is not `left` and heartbeated within `silent_after` (database clock). Otherwise
    /// upserts: new incarnation, url, capacity, draining=false, left=false, heartbeat=now.
    async fn register_host(&self, host: &HostRegistration, silent_after: Duration) -> Result<()>;

    /// Stamps the heartbeat with the database's now and sets the draining flag.
    /// [`StoreError::LeaseLost`](crate::StoreError::LeaseLost) when the row is missing, left, has
    /// another incarnation (this process was replaced: it must stop), or is already dead by
    /// `timing.dead_after` — a late heartbeat (a paused process, a query that hung) must never
    /// revive a host whose zones others may own by now.
    async fn heartbeat(
        &self,
        host_id: &str,
        incarnation: &str,
        draining: bool,
        timing: Timing,
    ) -> Result<()>;

    /// Marks the host left (only this incarnation's row; nothing happens when another incarnation
    /// replaced it); its zones may be taken at once.
    async fn leave_host(&self, host_id: &str, incarnation: &str) -> Result<()>;

    /// Every host row, sorted by id, with heartbeat ages by the database's clock and owned-zone
    /// counts.
    async fn hosts(&self) -> Result<Vec<HostRecord>>;

    /// The zone's directory entry (`owner_alive` computed with `timing`).
    async fn locate(&self, zone_id: &str, timing: Timing) -> Result<Option<ZoneLocation>>;

    /// Directory entries sorted by zone id, at most `limit`.
    async fn zones(&self, timing: Timing, limit: u32) -> Result<Vec<ZoneLocation>>;

    /// One atomic claim, decided by [`zonekeep_fleet::claim::decide`] on what the transaction reads
    /// under the zone's fence lock: whether `by`'s lease holds, whether `to` is usable (alive and
    /// not draining), and the current owner and its liveness.
    ///
    /// - granted: `to` becomes the owner (the entry is created with the request's kind and params
    ///   if the zone has none; an existing entry keeps its own), the fence is raised exactly as
    ///   [`SaveStore::claim`](crate::SaveStore::claim) raises it, and [`ZoneClaim::Claimed`] carries
    ///   the new epoch and the latest save;
    /// - the zone is already assigned to `to`, or owned by another live host: [`ZoneClaim::Owned`],
    ///   nothing changed;
    /// - `by`'s lease does not hold: [`StoreError::LeaseLost`](crate::StoreError::LeaseLost);
    /// - `to` is unknown, gone, dead or draining:
    ///   [`StoreError::HostUnavailable`](crate::StoreError::HostUnavailable).
    async fn claim_zone(&self, req: &ClaimRequest<'_>) -> Result<ZoneClaim>;

    /// Directory move (deploy drain): only the current owner `from` holding `from_epoch` (equal to
    /// the fence) may move it; sets owner = `to` and raises the fence (fencing `from`); returns the
    /// new epoch. `to` raises it once more when it loads the zone. Refused with
    /// [`StoreError::Fenced`](crate::StoreError::Fenced) when `from_epoch` is below the fence,
    /// [`StoreError::NotOwner`](crate::StoreError::NotOwner) otherwise. `to` is not checked here:
    /// a move to a host that then dies leaves an orphan, which failover reassigns.
    async fn move_zone(&self, zone_id: &str, from: &str, from_epoch: u64, to: &str) -> Result<u64>;

    /// Clears the owner when `host` still owns it with `epoch` (a dormant zone, saved and unloaded:
    /// the next join anywhere places it again). Returns whether it did. Keeps kind, params, fence.
    async fn release_zone(&self, zone_id: &str, host: &str, epoch: u64) -> Result<bool>;

    /// Zones with an owner that is not alive (left, silent past `timing.dead_after`, or no host
    /// row), sorted by zone id, at most `limit`. Zones without an owner are not orphans.
    async fn orphans(&self, timing: Timing, limit: u32) -> Result<Vec<ZoneLocation>>;

    /// Removes the zone's directory entry (admin delete); the fence is kept. Returns whether it
    /// existed.
    async fn forget_zone(&self, zone_id: &str) -> Result<bool>;

    /// Spends a ticket's single-use id for the whole fleet: `true` the first time `jti` is spent,
    /// `false` ever after (until `expires_at_ms`, milliseconds since the Unix epoch, has passed
    /// by the database's clock, after which the ticket is refused as expired anyway and the id may
    /// be forgotten). Each call also forgets a few ids long expired, so the table stays bounded
    /// by the tickets alive at once.
    async fn spend_ticket(&self, jti: &str, expires_at_ms: u64) -> Result<bool>;
}

/// Longest ticket id [`Directory::spend_ticket`] accepts, bytes.
pub const MAX_JTI_LEN: usize = 256;

/// Checks a ticket id for [`Directory::spend_ticket`].
pub(crate) fn check_jti(jti: &str) -> Result<()> {
    if jti.is_empty() || jti.len() > MAX_JTI_LEN || jti.chars().any(char::is_control) {
        return Err(crate::StoreError::InvalidArgument(format!(
            "ticket id must be 1..={MAX_JTI_LEN} bytes of printable text"
        )));
    }
    Ok(())
}
