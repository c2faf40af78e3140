//! Host tests: fixed timestep, catch-up, patches, timers, tiers, inputs.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use super::probe::{host, host_with, join, observe, step, val, Probe};
use crate::{
    Clock, IdlePolicy, InputOutcome, InputPolicy, InputRefusal, Tier, TierTransition, ZoneConfig,
};

fn cfg() -> ZoneConfig {
    ZoneConfig {
        max_catch_up: 1000,
        ..ZoneConfig::default()
    }
}

#[test]
fn runs_one_tick_per_dt() {
    let (mut h, clock) = host(cfg());
    assert_eq!(h.advance(clock.now()).ticks_run, 0);
    assert_eq!(h.next_tick_due(), h.config().dt());
    clock.advance(h.config().dt() - Duration::from_nanos(1));
    assert_eq!(h.advance(clock.now()).ticks_run, 0, "not due yet");
    let r = step(&mut h, &clock, 0); // just re-advance at the same time
    assert_eq!(r.ticks_run, 0);
    clock.advance(Duration::from_nanos(1));
    let r = h.advance(clock.now());
    assert_eq!((r.ticks_run, r.tick), (1, 1));
    assert_eq!(h.state_hash(), Some(1));
    let r = step(&mut h, &clock, 30);
    assert_eq!((r.ticks_run, r.ticks_dropped, h.tick()), (30, 0, 31));
    assert_eq!(h.zone::<Probe>().unwrap().ticks, 31);
    // Advancing again at the same time runs nothing.
    assert_eq!(h.advance(clock.now()).ticks_run, 0);
}

#[test]
fn catch_up_is_capped_and_excess_dropped_without_snowball() {
    let config = ZoneConfig {
        max_catch_up: 5,
        ..ZoneConfig::default()
    };
    let (mut h, clock) = host(config);
    let _p = join(&mut h, "a"); // keep it Hot
    clock.set(Duration::from_secs(1)); // 30 ticks due after a stall
    let r = h.advance(clock.now());
    assert_eq!((r.ticks_run, r.ticks_dropped), (5, 25));
    assert_eq!(r.tick_durations.len(), 5);
    // The schedule moved forward: the next advance one dt later runs one tick.
    let r = step(&mut h, &clock, 1);
    assert_eq!((r.ticks_run, r.ticks_dropped), (1, 0));
    assert_eq!(h.tick(), 6);
}

#[test]
fn clock_going_backwards_runs_nothing() {
    let (mut h, clock) = host(cfg());
    step(&mut h, &clock, 10);
    assert_eq!(h.advance(Duration::ZERO).ticks_run, 0);
    assert_eq!(h.advance(clock.now()).ticks_run, 0);
    assert_eq!(step(&mut h, &clock, 1).ticks_run, 1);
}

#[test]
fn patch_cadence_is_independent_of_tick_rate() {
    let (mut h, clock) = host(ZoneConfig {
        tick_hz: 60,
        patch_every: 3,
        ..cfg()
    });
    let r = step(&mut h, &clock, 60);
    assert_eq!(r.ticks_run, 60);
    assert_eq!(r.patch_ticks, (1..=20).map(|k| k * 3).collect::<Vec<u64>>());
    assert!(!h.is_patch_tick(0) && !h.is_patch_tick(4) && h.is_patch_tick(6));

    let (mut h, clock) = host(ZoneConfig {
        tick_hz: 20,
        patch_every: 1,
        ..cfg()
    });
    let r = step(&mut h, &clock, 20);
    assert_eq!(
        r.patch_ticks.len(),
        20,
        "same 20 Hz patches from 20 Hz ticks"
    );
}

#[test]
fn tick_durations_are_measured_with_the_clock() {
    let (mut h, clock) = host(cfg());
    h.zone_mut::<Probe>().unwrap().clock = Some(clock.clone());
    let r = step(&mut h, &clock, 3);
    assert_eq!(r.tick_durations, vec![Duration::from_millis(1); 3]);
}

#[test]
fn timers_fire_in_simulation_ticks() {
    let (mut h, clock) = host_with(cfg(), serde_json::json!({ "every": 2 }));
    step(&mut h, &clock, 7);
    assert_eq!(
        h.zone::<Probe>().unwrap().timer_fires,
        vec![(2, 7), (4, 7), (6, 7)]
    );
}

#[test]
fn events_are_bounded_and_overflow_counted() {
    let config = ZoneConfig {
        max_pending_events: 4,
        // No patch tick: nothing builds frames, so the events wait to be drained.
        patch_every: 1000,
        ..cfg()
    };
    let (mut h, clock) = host_with(config, serde_json::json!({ "events": 3 }));
    let r = step(&mut h, &clock, 2);
    assert_eq!(r.events_dropped, 2);
    let events: Vec<_> = h.drain_events().collect();
    assert_eq!(events.len(), 4);
    assert_eq!(events[3].tick, 2);
    let r = step(&mut h, &clock, 1);
    assert_eq!((h.drain_events().count(), r.events_dropped), (3, 0));
    step(&mut h, &clock, 0);
    assert_eq!(h.drain_events().count(), 0);
}

fn tier_cfg(policy: IdlePolicy) -> ZoneConfig {
    ZoneConfig {
        idle_after: Duration::from_secs(1),
        dormant_after: Duration::from_secs(10),
        idle_policy: policy,
        ..cfg()
    }
}

#[test]
fn empty_zone_goes_idle_and_ticks_slower() {
    let (mut h, clock) = host(tier_cfg(IdlePolicy::Slow(3)));
    let r = step(&mut h, &clock, 30); // 0.99999999 s: still Hot
    assert_eq!((r.ticks_run, h.tier()), (30, Tier::Hot));
    clock.set(Duration::from_secs(1));
    let r = h.advance(clock.now());
    assert_eq!(
        r.tier_transitions,
        vec![TierTransition {
            tick: 30,
            from: Tier::Hot,
            to: Tier::Idle
        }]
    );
    // No new slot fell due between 30 * dt and 1 s.
    assert_eq!((r.ticks_run, r.ticks_skipped), (0, 0));
    let r = step(&mut h, &clock, 9);
    assert_eq!((r.ticks_run, r.ticks_skipped, r.ticks_dropped), (3, 6, 0));
    assert_eq!(h.zone::<Probe>().unwrap().log, vec!["tier Hot->Idle"]);
}

#[test]
fn idle_pause_runs_nothing_and_join_wakes() {
    let (mut h, clock) = host(tier_cfg(IdlePolicy::Pause));
    clock.set(Duration::from_secs(2));
    let r = h.advance(clock.now());
    assert_eq!(h.tier(), Tier::Idle);
    assert_eq!(r.ticks_run, 0);
    assert_eq!(r.ticks_skipped, 60);
    let before = h.tick();
    assert_eq!(step(&mut h, &clock, 30).ticks_run, 0);
    assert_eq!(h.tick(), before);

    join(&mut h, "a");
    assert_eq!(h.tier(), Tier::Hot);
    let r = step(&mut h, &clock, 2);
    assert_eq!(r.ticks_run, 2, "no burst of paused ticks after waking");
    assert_eq!(r.tier_transitions.len(), 1);
    assert_eq!(
        (r.tier_transitions[0].from, r.tier_transitions[0].to),
        (Tier::Idle, Tier::Hot)
    );
}

#[test]
fn dormant_is_reported_and_stops_ticks() {
    let (mut h, clock) = host(tier_cfg(IdlePolicy::Slow(2)));
    let p = join(&mut h, "a");
    clock.set(Duration::from_secs(5));
    h.advance(clock.now());
    h.handle_leave(p, crate::LeaveReason::Left).unwrap(); // empty from 5 s
    clock.set(Duration::from_secs(20));
    let r = h.advance(clock.now());
    let steps: Vec<_> = r.tier_transitions.iter().map(|t| (t.from, t.to)).collect();
    assert_eq!(
        steps,
        vec![(Tier::Hot, Tier::Idle), (Tier::Idle, Tier::Dormant)]
    );
    assert_eq!(r.ticks_run, 0);
    assert_eq!(step(&mut h, &clock, 10).ticks_run, 0);
    observe(&mut h, "watcher");
    assert_eq!(h.tier(), Tier::Hot, "an observer also makes the zone Hot");
    assert!(h
        .zone::<Probe>()
        .unwrap()
        .log
        .contains(&"tier Dormant->Hot".to_string()));
}

#[test]
fn a_lasting_world_left_empty_stays_idle_and_keeps_ticking() {
    let (mut h, clock) = host(ZoneConfig {
        lasting: true,
        ..tier_cfg(IdlePolicy::Slow(2))
    });
    let p = join(&mut h, "a");
    clock.set(Duration::from_secs(5));
    h.advance(clock.now());
    h.handle_leave(p, crate::LeaveReason::Left).unwrap(); // empty from 5 s
                                                          // Far past the dormant timeout: the world went Idle and no further.
    clock.set(Duration::from_secs(3600));
    let r = h.advance(clock.now());
    let steps: Vec<_> = r.tier_transitions.iter().map(|t| (t.from, t.to)).collect();
    assert_eq!(steps, vec![(Tier::Hot, Tier::Idle)]);
    assert_eq!(h.tier(), Tier::Idle);
    assert!(
        step(&mut h, &clock, 10).ticks_run > 0,
        "its world goes on at the idle rate"
    );
}

#[test]
fn present_players_keep_the_zone_hot() {
    let (mut h, clock) = host(tier_cfg(IdlePolicy::Pause));
    let p = join(&mut h, "a");
    h.handle_drop(p).unwrap(); // dropped but within grace: still present
    clock.set(Duration::from_secs(3));
    let r = h.advance(clock.now());
    assert_eq!(h.tier(), Tier::Hot);
    assert!(r.ticks_run > 0);
}

#[test]
fn duplicate_stale_overflow_and_counters() {
    let (mut h, clock) = host(ZoneConfig {
        input_buffer: 2,
        ..cfg()
    });
    let p = join(&mut h, "a");
    assert_eq!(h.handle_input(p, 1, 0, &val(1)), InputOutcome::Accepted);
    assert_eq!(h.handle_input(p, 1, 0, &val(1)), InputOutcome::Duplicate);
    assert_eq!(h.handle_input(p, 3, 0, &val(3)), InputOutcome::Accepted);
    assert_eq!(h.handle_input(p, 2, 0, &val(2)), InputOutcome::Stale);
    assert_eq!(
        h.handle_input(p, 4, 0, &val(4)),
        InputOutcome::AcceptedDroppedOldest
    );
    assert_eq!(
        h.handle_input(p, 5, 0, &[1, 2]),
        InputOutcome::Refused(InputRefusal::new(1, "need 4 bytes"))
    );
    let r = step(&mut h, &clock, 3);
    let c = r.inputs;
    assert_eq!(
        (c.accepted, c.duplicate, c.stale, c.overflowed, c.refused),
        (3, 1, 1, 1, 1)
    );
    let seqs: Vec<u32> = h
        .zone::<Probe>()
        .unwrap()
        .inputs
        .iter()
        .map(|i| i.3)
        .collect();
    assert_eq!(seqs, vec![3, 4], "the oldest (seq 1) was dropped");
    // A refused seq was not recorded, so it can be resent.
    assert_eq!(h.handle_input(p, 5, 0, &val(5)), InputOutcome::Accepted);
    assert_eq!(
        step(&mut h, &clock, 0).inputs.accepted,
        1,
        "counters reset per advance"
    );
}

#[test]
fn sanitize_clamps_before_buffering() {
    let (mut h, clock) = host(cfg());
    let p = join(&mut h, "a");
    h.handle_input(p, 1, 0, &val(5000));
    step(&mut h, &clock, 1);
    assert_eq!(h.zone::<Probe>().unwrap().inputs, vec![(1, p, 100, 1)]);
}

fn run_policy(policy: InputPolicy) -> (Vec<(u64, u32)>, u64, Option<u32>) {
    let (mut h, clock) = host(ZoneConfig {
        input_policy: policy,
        ..cfg()
    });
    let p = join(&mut h, "a");
    for seq in 1..=3 {
        h.handle_input(p, seq, 0, &val(0));
    }
    let r = step(&mut h, &clock, 2);
    let applied = h
        .zone::<Probe>()
        .unwrap()
        .inputs
        .iter()
        .map(|i| (i.0, i.3))
        .collect();
    (applied, r.inputs.superseded, h.last_processed_seq(p))
}

#[test]
fn policy_next_applies_one_per_tick() {
    assert_eq!(
        run_policy(InputPolicy::Next),
        (vec![(1, 1), (2, 2)], 0, Some(2))
    );
}

#[test]
fn policy_latest_applies_newest_and_counts_superseded() {
    assert_eq!(run_policy(InputPolicy::Latest), (vec![(1, 3)], 2, Some(3)));
}

#[test]
fn policy_drain_applies_all_in_order() {
    assert_eq!(
        run_policy(InputPolicy::Drain),
        (vec![(1, 1), (1, 2), (1, 3)], 0, Some(3))
    );
}

#[test]
fn inputs_apply_in_player_id_order() {
    let (mut h, clock) = host(ZoneConfig {
        input_policy: InputPolicy::Drain,
        ..cfg()
    });
    let a = join(&mut h, "a");
    let b = join(&mut h, "b");
    h.handle_input(b, 1, 0, &val(2));
    h.handle_input(a, 1, 0, &val(1));
    step(&mut h, &clock, 1);
    let who: Vec<_> = h
        .zone::<Probe>()
        .unwrap()
        .inputs
        .iter()
        .map(|i| i.1)
        .collect();
    assert_eq!(who, vec![a, b]);
}

#[test]
fn last_processed_seq_tracks_consumption() {
    let (mut h, clock) = host(cfg());
    let p = join(&mut h, "a");
    assert_eq!(h.last_processed_seq(p), None);
    h.handle_input(p, 10, 0, &val(0));
    h.handle_input(p, 11, 0, &val(0));
    assert_eq!(h.last_processed_seq(p), None, "buffered is not processed");
    step(&mut h, &clock, 1);
    assert_eq!(h.last_processed_seq(p), Some(10));
    step(&mut h, &clock, 1);
    assert_eq!(h.last_processed_seq(p), Some(11));
    assert_eq!(h.last_processed_seq(crate::PlayerId(999)), None);
}

#[test]
fn view_tick_is_clamped_to_host_tick() {
    let (mut h, clock) = host(cfg());
    let p = join(&mut h, "a");
    step(&mut h, &clock, 4);
    h.handle_input(p, 1, 1_000_000, &val(0));
    h.handle_input(p, 2, 2, &val(0));
    step(&mut h, &clock, 2); // one input per tick under the default policy
    let metas: Vec<u32> = h.zone::<Probe>().unwrap().view_ticks.clone();
    assert_eq!(metas, vec![4, 2]);
}

#[test]
fn observer_cannot_send_input() {
    let (mut h, clock) = host(cfg());
    let o = observe(&mut h, "watcher");
    assert_eq!(h.handle_input(o, 1, 0, &val(1)), InputOutcome::Observer);
    assert_eq!(h.last_processed_seq(o), None);
    let r = step(&mut h, &clock, 1);
    assert_eq!(r.inputs.unroutable, 1);
    assert_eq!(r.inputs.accepted, 0);
    assert!(h.zone::<Probe>().unwrap().inputs.is_empty());
}
