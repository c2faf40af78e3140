//! Where a new zone goes: the usable host with the most room.
//!
//! Placement is a suggestion made from a snapshot of the directory; the store's claim
//! ([`claim::decide`](crate::claim::decide)) re-checks the chosen host inside its transaction, so
//! a host that died or started draining since the snapshot costs a retry, not a lost zone.

/// What placement needs to know of one host, as the directory reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Candidate<'a> {
    /// The host's id.
    pub host_id: &'a str,
    /// How many zones the host is configured to run.
    pub capacity: u32,
    /// How many zones it owns now.
    pub zones: u32,
    /// Whether it is draining (about to stop): it takes no new zones.
    pub draining: bool,
    /// Whether it is alive ([`Timing::is_alive`](crate::Timing::is_alive) by the database's
    /// clock).
    pub alive: bool,
}

impl Candidate<'_> {
    /// Zones the host can still take: `capacity - zones`, zero when it is over capacity.
    pub fn free(&self) -> u32 {
        self.capacity.saturating_sub(self.zones)
    }
}

/// The host a new zone should go to: among alive, non-draining hosts with free capacity, the one
/// with the most free capacity, ties going to the smallest host id. `None` when no host qualifies
/// (the caller reports the fleet full rather than overloading a host).
pub fn place<'a>(hosts: &[Candidate<'a>]) -> Option<&'a str> {
    hosts
        .iter()
        .filter(|h| h.alive && !h.draining && h.free() > 0)
        // Most room first, then the smallest id, so every host computes the same answer.
        .max_by(|a, b| a.free().cmp(&b.free()).then(b.host_id.cmp(a.host_id)))
        .map(|h| h.host_id)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn host(host_id: &str, capacity: u32, zones: u32) -> Candidate<'_> {
        Candidate {
            host_id,
            capacity,
            zones,
            draining: false,
            alive: true,
        }
    }

    #[test]
    fn the_host_with_the_most_room_wins() {
        let hosts = [host("a", 10, 8), host("b", 4, 0), host("c", 10, 7)];
        assert_eq!(place(&hosts), Some("b"));
    }

    #[test]
    fn ties_go_to_the_smallest_host_id_whatever_the_order() {
        let hosts = [host("c", 5, 0), host("a", 6, 1), host("b", 5, 0)];
        assert_eq!(place(&hosts), Some("a"));
        let mut reversed = hosts;
        reversed.reverse();
        assert_eq!(place(&reversed), Some("a"));
    }

    #[test]
    fn dead_draining_and_full_hosts_are_not_chosen() {
        let mut dead = host("a", 100, 0);
        dead.alive = false;
        let mut draining = host("b", 100, 0);
        draining.draining = true;
        let full = host("c", 3, 3);
        let over = host("d", 3, 9);
        assert_eq!(place(&[dead, draining, full, over]), None);
        assert_eq!(
            place(&[dead, draining, full, over, host("e", 2, 1)]),
            Some("e")
        );
    }

    #[test]
    fn over_capacity_counts_as_no_room() {
        assert_eq!(host("a", 3, 9).free(), 0);
        assert_eq!(place(&[]), None);
    }
}
