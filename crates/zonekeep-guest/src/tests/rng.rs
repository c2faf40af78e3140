//! The zone's RNG: the same draws as a native zone's for the same seed and zone id, helpers that
//! stay in range, and a state that round-trips through a save.

use crate::Rng;

#[test]
fn rng_matches_the_native_zone_derivation() {
    // Reference values: rand_xoshiro's Xoshiro256StarStar seeded as zonekeep-core's
    // `zone_rng(42, "tag-1")`.
    let mut r = Rng::for_zone(42, "tag-1");
    assert_eq!(r.next_u64(), 0xc0d2_427c_675f_5444);
    assert_eq!(r.next_u64(), 0x7f11_a81f_cf15_19d8);
    assert_eq!(r.next_u64(), 0xb5cb_8eb4_d61b_534b);
    assert_eq!(r.next_u32(), 0xc5cb_9e14);
}

#[test]
fn rng_helpers_stay_in_range() {
    let mut r = Rng::for_zone(7, "z");
    for n in [1u32, 2, 3, 10, 1000, u32::MAX] {
        for _ in 0..200 {
            assert!(r.below(n) < n);
        }
    }
    assert_eq!(r.below(0), 0);
    for _ in 0..1000 {
        let f = r.next_f32();
        assert!((0.0..1.0).contains(&f));
        let g = r.range_f32(-5.0, 5.0);
        assert!((-5.0..5.0).contains(&g));
        assert!((0.0..1.0).contains(&r.next_f64()));
    }
    assert_eq!(r.range_f32(3.0, 3.0), 3.0);
    assert!(!r.chance(0.0));
    assert!(r.chance(1.0));
}

#[test]
fn rng_state_round_trips() {
    let mut a = Rng::for_zone(1, "x");
    a.next_u64();
    let mut b = Rng::from_state(a.state());
    for _ in 0..10 {
        assert_eq!(a.next_u64(), b.next_u64());
    }
}
