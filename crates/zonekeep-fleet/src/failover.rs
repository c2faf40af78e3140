//! Which host takes over a zone whose owner died: rendezvous (highest-random-weight) hashing.
//!
//! Every live host computes the same answer from the same list of live hosts, without talking to
//! the others, so only one of them claims each orphaned zone; the claim itself is still decided by
//! the store ([`claim::decide`](crate::claim::decide)), so two hosts that disagree about who is
//! alive cost a refused claim, never two owners. When a host leaves, only its zones move, and they
//! spread over the remaining hosts.
//!
//! The weight is a hash that is part of the protocol and pinned forever (hosts of different
//! versions must agree): FNV-1a 64 over the zone id's bytes, one `0xFF` byte and the host id's
//! bytes, then the splitmix64 finalizer. `0xFF` never occurs in UTF-8, so the pair is
//! unambiguous (`"ab" + "c"` and `"a" + "bc"` hash apart); the finalizer spreads FNV's weak low
//! bits over the whole word.

/// FNV-1a 64's offset basis.
const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
/// FNV-1a 64's prime.
const FNV_PRIME: u64 = 0x0000_0100_0000_01b3;

/// The splitmix64 finalizer: a bijection of `u64` in which every input bit affects every output
/// bit. The simulation's random numbers use it too.
pub(crate) fn splitmix64(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// The pinned weight of `host_id` for `zone_id`. See the [module documentation](self).
fn weight(zone_id: &str, host_id: &str) -> u64 {
    let bytes = zone_id
        .as_bytes()
        .iter()
        .chain(&[0xFF])
        .chain(host_id.as_bytes());
    let hash = bytes.fold(FNV_OFFSET, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(FNV_PRIME)
    });
    splitmix64(hash)
}

/// The host among `hosts` that should own `zone_id`: the one with the highest weight, ties going
/// to the smallest host id. The order of `hosts` does not matter, nor do repeats. `None` when
/// `hosts` is empty.
pub fn rendezvous<'a, I: IntoIterator<Item = &'a str>>(zone_id: &str, hosts: I) -> Option<&'a str> {
    let mut best: Option<(u64, &'a str)> = None;
    for host in hosts {
        let candidate = (weight(zone_id, host), host);
        if best.is_none_or(|b| outranks(candidate, b)) {
            best = Some(candidate);
        }
    }
    best.map(|(_, host)| host)
}

/// Whether `(weight, host)` `a` beats `b`: the higher weight, then the smaller host id. A total
/// order on distinct ids, which is what makes the answer independent of the input order.
fn outranks(a: (u64, &str), b: (u64, &str)) -> bool {
    a.0 > b.0 || (a.0 == b.0 && a.1 < b.1)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    const HOSTS: [&str; 3] = ["host-a", "host-b", "host-c"];

    #[test]
    fn the_weight_is_pinned() {
        // Computed independently of this code; a change here moves zones between hosts of
        // different versions, which the protocol forbids.
        assert_eq!(weight("zone-1", "host-a"), 0xdaad_ec25_30df_e0e8);
        assert_eq!(weight("zone-1", "host-b"), 0xfc19_a83f_db70_755d);
        assert_eq!(weight("zone-1", "host-c"), 0x8f00_1715_ffc4_5524);
        assert_eq!(weight("", ""), 0x4f2d_b50f_1240_40cd);
        assert_eq!(weight("arena/lobby", "h0"), 0xb49c_bd8e_19bb_b352);
    }

    #[test]
    fn the_choice_is_pinned() {
        let expected = [
            "host-b", "host-b", "host-c", "host-a", "host-a", "host-c", "host-b", "host-c",
        ];
        for (i, want) in expected.iter().enumerate() {
            let zone = format!("zone-{i}");
            assert_eq!(rendezvous(&zone, HOSTS), Some(*want), "{zone}");
        }
    }

    #[test]
    fn the_separator_keeps_zone_and_host_apart() {
        assert_ne!(weight("ab", "c"), weight("a", "bc"));
    }

    #[test]
    fn no_hosts_no_choice() {
        assert_eq!(rendezvous("zone-1", []), None);
    }

    #[test]
    fn the_order_and_repeats_of_hosts_do_not_matter() {
        let orders: [&[&str]; 4] = [
            &["host-a", "host-b", "host-c"],
            &["host-c", "host-b", "host-a"],
            &["host-b", "host-a", "host-c"],
            &["host-c", "host-a", "host-c", "host-b", "host-a"],
        ];
        for i in 0..200 {
            let zone = format!("zone-{i}");
            let first = rendezvous(&zone, orders[0].iter().copied());
            for order in &orders[1..] {
                assert_eq!(rendezvous(&zone, order.iter().copied()), first, "{zone}");
            }
        }
    }

    #[test]
    fn ties_go_to_the_smallest_host_id() {
        // The same id twice has the same weight: a tie that must resolve to that id.
        assert_eq!(rendezvous("z", ["h", "h"]), Some("h"));
        // A real tie between different ids is astronomically rare; check the ranking itself.
        assert!(outranks((7, "a"), (7, "b")));
        assert!(!outranks((7, "b"), (7, "a")));
        assert!(outranks((8, "b"), (7, "a")), "weight first");
    }

    #[test]
    fn zones_spread_fairly() {
        let mut counts = [0u32; 3];
        for i in 0..1_000 {
            let zone = format!("zone-{i}");
            let chosen = rendezvous(&zone, HOSTS);
            let idx = HOSTS.iter().position(|h| Some(*h) == chosen);
            counts[idx.unwrap()] += 1;
        }
        // A fair share is 333; a binomial spread stays far within ±80.
        for (host, n) in HOSTS.iter().zip(counts) {
            assert!((253..=413).contains(&n), "{host} got {n} of 1000 zones");
        }
    }

    #[test]
    fn removing_a_host_moves_only_its_zones() {
        let mut moved = 0;
        for i in 0..1_000 {
            let zone = format!("zone-{i}");
            let before = rendezvous(&zone, HOSTS);
            let after = rendezvous(&zone, ["host-a", "host-c"]);
            if before == Some("host-b") {
                moved += 1;
                assert!(after == Some("host-a") || after == Some("host-c"));
            } else {
                assert_eq!(after, before, "{zone} moved though its host stayed");
            }
        }
        assert!(moved > 0);
    }
}
