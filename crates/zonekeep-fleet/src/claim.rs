//! Who may claim a zone: the one rule both store backends apply inside their claim transaction,
//! and the protocol simulation applies to its model database.
//!
//! A claim names the host asking (`by`) and the host that will own the zone (`to`). They are the
//! same when a host loads a zone itself; they differ when a host places a new zone on another
//! host, or assigns a dead host's zone to the failover winner. A claim that is granted raises the
//! zone's epoch (the store does that), which fences every earlier owner.

/// The directory's current owner of the zone, as the store sees it inside the transaction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Owner<'a> {
    /// No host owns the zone: never placed, or released when it went dormant.
    None,
    /// `id` owns it; `alive` is [`Timing::is_alive`](crate::Timing::is_alive) of that host by the
    /// database's clock (a host with no directory row is not alive).
    Host {
        /// The owner's host id.
        id: &'a str,
        /// Whether the owner is alive.
        alive: bool,
    },
}

/// One claim, with what the store knows of the hosts involved.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ask<'a> {
    /// The host asking.
    pub by: &'a str,
    /// Whether the asking host's lease holds by the database's clock: registered under the
    /// incarnation it claims with, not left, last heartbeat within the fence bound. A host whose
    /// lease lapsed must not hand out or take zones.
    pub by_lease_holds: bool,
    /// The host that will own the zone.
    pub to: &'a str,
    /// Whether `to` is alive and not draining (always checked, also when `to == by`).
    pub to_usable: bool,
}

/// The store's answer to a claim.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// Make `to` the owner and raise the zone's epoch.
    Take,
    /// The zone is already assigned to `to`, which has not loaded it yet (`to != by`): change
    /// nothing; `to` raises the epoch itself when it loads the zone.
    AlreadyAssigned,
    /// Another live host owns the zone: change nothing, send the client there.
    OwnedElsewhere,
    /// The asking host's lease does not hold: it must stop acting, not claim.
    LeaseLost,
    /// The target host is dead, gone or draining: choose another.
    TargetUnusable,
}

/// Decides a claim of a zone whose current owner is `owner`. See [`Decision`] for the outcomes.
pub fn decide(owner: Owner<'_>, ask: &Ask<'_>) -> Decision {
    if !ask.by_lease_holds {
        return Decision::LeaseLost;
    }
    if !ask.to_usable {
        return Decision::TargetUnusable;
    }
    match owner {
        Owner::None => Decision::Take,
        Owner::Host { id, .. } if id == ask.to => {
            if ask.to == ask.by {
                Decision::Take
            } else {
                Decision::AlreadyAssigned
            }
        }
        Owner::Host { alive: false, .. } => Decision::Take,
        Owner::Host { alive: true, .. } => Decision::OwnedElsewhere,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ask<'a>(by: &'a str, to: &'a str) -> Ask<'a> {
        Ask {
            by,
            by_lease_holds: true,
            to,
            to_usable: true,
        }
    }

    #[test]
    fn an_unowned_zone_is_taken() {
        assert_eq!(decide(Owner::None, &ask("a", "a")), Decision::Take);
        assert_eq!(decide(Owner::None, &ask("a", "b")), Decision::Take);
    }

    #[test]
    fn a_live_owner_keeps_its_zone() {
        let owner = Owner::Host {
            id: "b",
            alive: true,
        };
        assert_eq!(decide(owner, &ask("a", "a")), Decision::OwnedElsewhere);
        assert_eq!(decide(owner, &ask("a", "c")), Decision::OwnedElsewhere);
    }

    #[test]
    fn a_dead_owner_loses_its_zone() {
        let owner = Owner::Host {
            id: "b",
            alive: false,
        };
        assert_eq!(decide(owner, &ask("a", "a")), Decision::Take);
        assert_eq!(decide(owner, &ask("a", "c")), Decision::Take);
    }

    #[test]
    fn the_assigned_host_loads_its_zone_and_others_leave_it_alone() {
        let owner = Owner::Host {
            id: "b",
            alive: true,
        };
        assert_eq!(decide(owner, &ask("b", "b")), Decision::Take);
        assert_eq!(decide(owner, &ask("a", "b")), Decision::AlreadyAssigned);
    }

    #[test]
    fn a_lapsed_lease_or_an_unusable_target_claims_nothing() {
        let mut a = ask("a", "a");
        a.by_lease_holds = false;
        assert_eq!(decide(Owner::None, &a), Decision::LeaseLost);
        let mut a = ask("a", "b");
        a.to_usable = false;
        assert_eq!(decide(Owner::None, &a), Decision::TargetUnusable);
    }
}
