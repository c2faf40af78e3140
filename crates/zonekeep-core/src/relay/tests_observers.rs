//! Observers at a lower patch rate (`ZoneConfig::observer_patch_every`) through relays: a
//! relayed observer sits out the patches a direct one sits out and gets the same frames, with
//! the same held events, byte for byte.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use super::tests::{churn_on, Bench};
use crate::{PlayerId, Role};

/// The churn of `relay::tests` with observers at one patch in `every` (patches every
/// `patch_every` ticks), some relayed and some direct, and a host that now and then catches up
/// three ticks at once; every frame compared with the direct host's as it goes.
fn observer_churn(seed: u64, budget: Option<usize>, patch_every: u32, every: u32) -> Bench {
    let mut b = Bench::with_rates(budget, (patch_every, every));
    for i in 0..6 {
        let relay = if i % 3 == 0 { None } else { Some(0) };
        b.join(Role::Observer, relay);
    }
    churn_on(b, seed, true)
}

#[test]
fn relayed_observers_at_a_lower_rate_get_the_frames_a_direct_connection_gets() {
    let (mut relayed, mut direct) = (0, 0);
    for seed in 1..=8 {
        for budget in [None, Some(400)] {
            for (patch_every, every) in [(1, 3), (2, 4), (1, 7)] {
                let b = observer_churn(seed, budget, patch_every, every);
                relayed += b.compared.0;
                direct += b.compared.1;
            }
        }
    }
    assert!(relayed > 2_000, "{relayed} relayed frames compared");
    assert!(direct > 500, "{direct} direct frames compared");
}

#[test]
fn observers_sit_out_most_patches_at_a_relay_and_at_their_host() {
    // Step by step: at one patch in four, about a quarter of the observers get a frame each
    // patch, relayed or not (each step compares them all with the direct host's).
    let mut b = Bench::with_rates(None, (1, 4));
    let observers: Vec<PlayerId> = (0..24)
        .map(|i| b.join(Role::Observer, if i % 2 == 0 { Some(0) } else { None }))
        .collect();
    let player = b.join(Role::Player, Some(0));
    b.step();
    assert_eq!(b.served.len(), 25, "the first patch serves everyone");
    for _ in 0..12 {
        b.step();
        assert!(b.served.contains(&player));
        let watching = b.served.iter().filter(|p| observers.contains(p)).count();
        assert_eq!(watching, 6, "{:?}", b.served);
    }
    let (relayed, direct) = b.compared;
    assert_eq!(relayed + direct, 25 + 12 * 7);
}

#[test]
fn a_relay_starting_mid_way_counts_turns_from_the_origins_last_patch() {
    // The new relay's first message is an image: the observers attached to it at once must be
    // served on their turns, as the direct host serves them, not all at once.
    let mut b = Bench::with_rates(None, (2, 4));
    b.join(Role::Player, Some(0));
    for _ in 0..7 {
        b.step();
    }
    b.add_relay();
    let observers: Vec<PlayerId> = (0..8).map(|_| b.join(Role::Observer, Some(1))).collect();
    let mut served = 0;
    for _ in 0..8 {
        b.step();
        served += b.served.iter().filter(|p| observers.contains(p)).count();
    }
    // Four patches: each observer once (one patch in four), not at the relay's first as well.
    assert_eq!(served, 8);
}

#[test]
fn an_observer_that_drops_and_resumes_between_two_patches_waits_for_nothing_it_held() {
    // Events held for observers, then their clients drop and resume (from what they hold)
    // before the next patch: relayed or direct, what they held goes with the old connection.
    let mut b = Bench::with_rates(None, (1, 5));
    let player = b.join(Role::Player, Some(0));
    let observers: Vec<PlayerId> = (0..10)
        .map(|i| b.join(Role::Observer, if i % 2 == 0 { Some(0) } else { None }))
        .collect();
    b.step();
    for round in 0..6 {
        b.input(player, 7);
        b.step();
        b.input(player, 7);
        b.step();
        for &o in observers.iter().skip(round % 2).step_by(2) {
            b.drop_client(o);
            b.rejoin(o);
        }
        b.step();
    }
}
