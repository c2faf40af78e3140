//! Presence (see [`PresenceStore`]): who is online, in which zone, since when, fleet-wide.
//!
//! Each host writes who is in the zones it runs: a **join** when a principal becomes a
//! participant of a zone, a **leave** when it stops being one. A zone keeps a participant whose
//! connection dropped for its reconnect grace (it may resume), so presence lasts exactly as long
//! as the session's grace window. One row per principal and zone, naming the host and the
//! host's incarnation.
//!
//! A row is **live** while the host that wrote it is alive in the directory under that same
//! incarnation (heartbeat within the fleet's takeover bound, not left). So a host that dies
//! takes its players' presence with it after the takeover bound, without writing anything, and
//! a restarted host (a new incarnation) does not revive its old rows. Players that resume on
//! another host are written there and keep their `since` when the old row is live, or its host
//! was alive within three takeover bounds (the failover window: the zone moved and its players
//! resumed).

use std::time::Duration;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use crate::directory_rows::duration_ms;
use crate::error::{Result, StoreError};
use crate::validate::check_id;

/// Most principals one presence read takes.
pub const MAX_PRESENCE_QUERY: usize = 500;
/// Most changes one write takes.
pub const MAX_PRESENCE_BATCH: usize = 2000;
/// How many takeover bounds after its host's last heartbeat a row still lends its `since` to a
/// join of the same principal and zone (the failover window).
const RESUME_BOUNDS: i64 = 3;

/// What happened to a principal in a zone.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum PresenceEvent {
    /// It became a participant of the zone.
    Joined,
    /// It stopped being one (left, moved, or its reconnect grace ended).
    Left,
}

/// One change a host writes ([`PresenceStore::apply_presence`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PresenceChange {
    /// Whose session.
    pub principal: String,
    /// The zone it is in.
    pub zone_id: String,
    /// What happened.
    pub event: PresenceEvent,
}

/// A live presence row ([`PresenceStore::presence_of`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PresenceRow {
    /// Whose.
    pub principal: String,
    /// The zone it is in.
    pub zone_id: String,
    /// The host running the zone's session.
    pub host_id: String,
    /// When the principal arrived in the zone (ms since the Unix epoch, the database's clock);
    /// kept across resumes, also on another host.
    pub since_ms: u64,
}

/// Presence, shared by every host of a fleet.
#[async_trait]
pub trait PresenceStore: Send + Sync {
    /// Applies a host's changes in order, in one transaction, stamped by the database's clock:
    /// a join upserts the principal's row for the zone (this host, this incarnation; `since`
    /// kept when the row was live or its host, under any incarnation, left or not, heartbeated
    /// within `3 × dead_after_ms`, else now); a leave deletes the row if this host holds it
    /// under this incarnation (a row another host took over is left alone). At most
    /// [`MAX_PRESENCE_BATCH`] changes. `dead_after_ms` is the fleet's takeover bound (whether
    /// an existing row is live).
    async fn apply_presence(
        &self,
        host_id: &str,
        incarnation: &str,
        changes: &[PresenceChange],
        dead_after_ms: u64,
    ) -> Result<()>;

    /// The live rows of these principals (at most [`MAX_PRESENCE_QUERY`]), by principal then
    /// zone. `dead_after_ms` is the fleet's takeover bound: a host without a heartbeat for
    /// that long is dead.
    async fn presence_of(
        &self,
        principals: &[String],
        dead_after_ms: u64,
    ) -> Result<Vec<PresenceRow>>;

    /// Deletes rows that are no longer live (host dead, left or replaced), except those whose
    /// host died within the failover window (`3 × dead_after_ms`) under the row's incarnation:
    /// they still lend their `since` to the resume of their players elsewhere. Answers how many.
    async fn sweep_presence(&self, dead_after_ms: u64) -> Result<u64>;
}

/// Refuses a malformed batch.
pub(crate) fn check_changes(
    host_id: &str,
    incarnation: &str,
    changes: &[PresenceChange],
) -> Result<()> {
    check_id("host id", host_id)?;
    check_id("incarnation", incarnation)?;
    if changes.len() > MAX_PRESENCE_BATCH {
        return Err(StoreError::InvalidArgument(format!(
            "a presence write takes at most {MAX_PRESENCE_BATCH} changes"
        )));
    }
    for c in changes {
        check_id("principal", &c.principal)?;
        check_id("zone id", &c.zone_id)?;
    }
    Ok(())
}

/// Refuses a malformed read.
pub(crate) fn check_query(principals: &[String]) -> Result<()> {
    if principals.len() > MAX_PRESENCE_QUERY {
        return Err(StoreError::InvalidArgument(format!(
            "a presence read takes at most {MAX_PRESENCE_QUERY} principals"
        )));
    }
    for p in principals {
        check_id("principal", p)?;
    }
    Ok(())
}

/// The takeover bound in ms, as the SQL compares heartbeat ages with it: a row is live while its
/// host is not left and `db_now - heartbeat_ms <= dead_after` (the directory's rule,
/// `zonekeep_fleet::Timing::is_alive`). Saturating: a bound past `i64::MAX` ms is "forever".
pub(crate) fn dead_after(dead_after_ms: u64) -> i64 {
    duration_ms(Duration::from_millis(dead_after_ms))
}

/// The failover window in ms: a join keeps the existing row's `since` while that row's host
/// heartbeated within it (`db_now - heartbeat_ms <= window`). A live row's host heartbeated
/// within one takeover bound, so this covers "the row is live" too.
pub(crate) fn resume_window(dead_after_ms: u64) -> i64 {
    dead_after(dead_after_ms).saturating_mul(RESUME_BOUNDS)
}

/// The changes in the order both backends apply them: by principal, then zone (one global
/// order, so two hosts' writes never wait on each other's row locks in a cycle on PostgreSQL).
/// The sort is stable, so the changes of one row keep the order the host gave them, and rows
/// are independent of each other: the outcome is the host's order's.
pub(crate) fn in_row_order(changes: &[PresenceChange]) -> Vec<&PresenceChange> {
    let mut ordered: Vec<&PresenceChange> = changes.iter().collect();
    ordered.sort_by(|a, b| (&a.principal, &a.zone_id).cmp(&(&b.principal, &b.zone_id)));
    ordered
}

#[cfg(test)]
mod tests {
    use super::*;

    fn change(principal: &str, zone_id: &str, event: PresenceEvent) -> PresenceChange {
        PresenceChange {
            principal: principal.into(),
            zone_id: zone_id.into(),
            event,
        }
    }

    #[test]
    fn malformed_batches_and_reads_are_refused() {
        let ok = [change("ann", "z", PresenceEvent::Joined)];
        assert!(check_changes("h", "h-1", &ok).is_ok());
        assert!(check_changes("", "h-1", &ok).is_err());
        assert!(check_changes("h", "", &ok).is_err());
        assert!(check_changes("h", "h-1", &[change("", "z", PresenceEvent::Left)]).is_err());
        assert!(check_changes("h", "h-1", &[change("ann", "", PresenceEvent::Left)]).is_err());
        let many = vec![ok[0].clone(); MAX_PRESENCE_BATCH + 1];
        assert!(check_changes("h", "h-1", &many).is_err());
        assert!(check_changes("h", "h-1", &many[1..]).is_ok());
        assert!(check_query(&[]).is_ok());
        assert!(check_query(&[String::new()]).is_err());
        assert!(check_query(&vec!["p".to_owned(); MAX_PRESENCE_QUERY + 1]).is_err());
    }

    #[test]
    fn bounds_saturate() {
        assert_eq!(dead_after(10_000), 10_000);
        assert_eq!(resume_window(10_000), 30_000);
        assert_eq!(dead_after(u64::MAX), i64::MAX);
        assert_eq!(resume_window(u64::MAX / 2), i64::MAX);
    }

    #[test]
    fn row_order_keeps_each_rows_own_order() {
        let changes = [
            change("bob", "z", PresenceEvent::Joined),
            change("ann", "z", PresenceEvent::Joined),
            change("bob", "z", PresenceEvent::Left),
            change("ann", "a", PresenceEvent::Left),
            change("bob", "z", PresenceEvent::Joined),
        ];
        let got: Vec<_> = in_row_order(&changes)
            .into_iter()
            .map(|c| (c.principal.as_str(), c.zone_id.as_str(), c.event))
            .collect();
        assert_eq!(
            got,
            [
                ("ann", "a", PresenceEvent::Left),
                ("ann", "z", PresenceEvent::Joined),
                ("bob", "z", PresenceEvent::Joined),
                ("bob", "z", PresenceEvent::Left),
                ("bob", "z", PresenceEvent::Joined),
            ]
        );
    }
}
