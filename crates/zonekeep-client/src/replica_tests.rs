#![allow(clippy::unwrap_used, clippy::expect_used)]

use super::*;
use crate::patch::{SpawnedEntity, UpdatedEntity};

/// 30 Hz, a patch every 2 ticks: the minimum delay is 2 ticks.
fn replica() -> Replica {
    Replica::new(ReplicaConfig::for_zone(30, 2))
}

/// Draws tick `render` exactly: no latency, no jitter, so the delay is its 2-tick minimum.
fn draw(r: &mut Replica, render: f64) -> f64 {
    r.frame(Timing {
        server_tick: render + 2.0,
        one_way_ticks: 0.0,
        jitter_ticks: 0.0,
    })
}

fn moved(tick: u64, id: u32, x: f32, y: f32) -> Patch {
    Patch {
        tick,
        updates: vec![UpdatedEntity {
            id,
            pos: Some((x, y)),
            fields: vec![],
        }],
        ..Patch::default()
    }
}

fn spawned(tick: u64, id: u32, x: f32, y: f32, baseline: bool) -> Patch {
    Patch {
        tick,
        baseline,
        spawns: vec![SpawnedEntity {
            id,
            kind: 0,
            x,
            y,
            fields: vec![FieldValue::U(0)],
        }],
        ..Patch::default()
    }
}

fn pos(r: &Replica, id: u32) -> (f32, f32) {
    let e = r.get(id).expect("visible");
    (e.x, e.y)
}

#[test]
fn draws_between_the_two_samples_around_the_drawn_tick() {
    let mut r = replica();
    r.apply(&spawned(10, 7, 0.0, 100.0, true));
    r.apply(&moved(12, 7, 2.0, 100.0));
    r.apply(&moved(14, 7, 4.0, 96.0));
    assert_eq!(draw(&mut r, 11.0), 11.0);
    assert_eq!(pos(&r, 7), (1.0, 100.0));
    draw(&mut r, 13.5);
    assert_eq!(pos(&r, 7), (3.5, 97.0));
    // Past the newest sample the entity holds there; it is never extrapolated.
    draw(&mut r, 20.0);
    assert_eq!(pos(&r, 7), (4.0, 96.0));
    assert_eq!(r.delay_ticks(), Some(2.0));
}

#[test]
fn a_quiet_stretch_is_held_not_smeared() {
    let mut r = replica();
    r.apply(&spawned(10, 1, 0.0, 0.0, true));
    // Patches at 12 and 14 said nothing about entity 1: it stood still until 14.
    r.apply(&Patch {
        tick: 12,
        ..Patch::default()
    });
    r.apply(&Patch {
        tick: 14,
        ..Patch::default()
    });
    r.apply(&moved(16, 1, 6.0, 0.0));
    draw(&mut r, 14.0);
    assert_eq!(pos(&r, 1), (0.0, 0.0));
    draw(&mut r, 15.0);
    assert_eq!(pos(&r, 1), (3.0, 0.0));
}

#[test]
fn a_patch_covering_several_is_spread_over_them() {
    // A host behind a slow link sends one patch for ticks 12..=16: the move it reports happened
    // somewhere after 10, the last patch received, so it is drawn over that whole stretch.
    let mut r = replica();
    r.apply(&spawned(10, 1, 0.0, 0.0, true));
    r.apply(&moved(16, 1, 6.0, 0.0));
    draw(&mut r, 13.0);
    assert_eq!(pos(&r, 1), (3.0, 0.0));
}

#[test]
fn spawns_and_despawns_apply_at_their_tick_with_entered_and_left() {
    let mut r = replica();
    r.apply(&spawned(10, 3, 5.0, 5.0, true));
    draw(&mut r, 9.0);
    assert!(r.get(3).is_none());
    assert!(r.entered().is_empty());
    assert_eq!(r.held_len(), 1);
    draw(&mut r, 10.0);
    assert_eq!(r.entered(), &[3]);
    draw(&mut r, 11.0);
    assert!(r.entered().is_empty(), "entered is per frame");

    r.apply(&Patch {
        tick: 14,
        despawns: vec![3],
        ..Patch::default()
    });
    draw(&mut r, 13.9);
    assert!(r.get(3).is_some(), "still drawn before its despawn tick");
    assert!(r.left().is_empty());
    draw(&mut r, 14.0);
    assert_eq!(r.left(), &[3]);
    assert!(r.get(3).is_none());
    assert_eq!(r.held_len(), 0);
    draw(&mut r, 15.0);
    assert!(r.left().is_empty(), "left is per frame");
}

#[test]
fn field_changes_apply_at_their_tick() {
    let mut r = replica();
    r.apply(&spawned(10, 2, 0.0, 0.0, true));
    r.apply(&Patch {
        tick: 12,
        updates: vec![UpdatedEntity {
            id: 2,
            pos: None,
            fields: vec![(0, FieldValue::U(42))],
        }],
        ..Patch::default()
    });
    draw(&mut r, 11.9);
    assert_eq!(r.get(2).unwrap().fields, &[FieldValue::U(0)]);
    draw(&mut r, 12.0);
    assert_eq!(r.get(2).unwrap().fields, &[FieldValue::U(42)]);
}

#[test]
fn delay_adapts_to_jitter_by_slewing_and_time_never_runs_backwards() {
    let mut r = replica();
    let cfg = r.config().clone();
    r.apply(&spawned(0, 1, 0.0, 0.0, true));
    let mut t = 100.0;
    r.frame(Timing {
        server_tick: t,
        one_way_ticks: 1.5,
        jitter_ticks: 0.0,
    });
    assert_eq!(r.delay_ticks(), Some(3.5));
    // Jitter of 3 ticks: the target becomes 1.5 + 2 + 2·3 = 9.5 ticks.
    assert_eq!(cfg.target_delay(1.5, 3.0, 0.0), 9.5);
    let mut last_render = r.render_tick();
    let mut last_delay = 3.5;
    for _ in 0..200 {
        t += 1.0;
        let render = r.frame(Timing {
            server_tick: t,
            one_way_ticks: 1.5,
            jitter_ticks: 3.0,
        });
        let d = r.delay_ticks().unwrap();
        assert!(
            d - last_delay <= 0.25 + 1e-9,
            "grows at most 25% of elapsed time"
        );
        assert!(render >= last_render, "drawn time never goes back");
        last_render = render;
        last_delay = d;
    }
    assert!((last_delay - 9.5).abs() < 1e-9);
    // Clamped to one second (30 ticks) however bad the jitter.
    assert_eq!(cfg.target_delay(10.0, 100.0, 0.0), 30.0);
    // A clock estimate stepping back does not move the drawn time back.
    let before = r.render_tick();
    r.frame(Timing {
        server_tick: t - 50.0,
        one_way_ticks: 1.5,
        jitter_ticks: 3.0,
    });
    assert_eq!(r.render_tick(), before);
}

#[test]
fn delay_covers_head_of_line_stalls_measured_on_arrival() {
    // 30 Hz, a patch every tick; 5 ticks of latency. Every 50th patch is lost once and retransmitted
    // 9 ticks (300 ms) later, holding back the ones behind it, as TCP does.
    let mut r = Replica::new(ReplicaConfig::for_zone(30, 1));
    r.apply(&spawned(0, 1, 0.0, 0.0, true));
    let mut held_until = 0u64;
    let mut delays = Vec::new();
    for tick in 1..=900u64 {
        let mut arrives = tick + 5;
        if tick % 50 == 0 {
            arrives += 9;
        }
        held_until = held_until.max(arrives);
        r.apply(&moved(tick, 1, tick as f32, 0.0));
        r.note_arrival(tick, held_until as f64);
        r.frame(Timing {
            server_tick: tick as f64 + 5.0,
            one_way_ticks: 5.0,
            jitter_ticks: 0.5,
        });
        delays.push(r.delay_ticks().unwrap());
    }
    assert_eq!(r.arrival_spread_ticks(), 9.0, "the stall is measured");
    let last = *delays.last().unwrap();
    // One-way latency, one patch and the 9-tick stall.
    assert!((last - 15.0).abs() < 1e-9, "delay {last}");
    // Without arrivals noted (or with a calm link) only latency, patch and jitter count.
    let calm = ReplicaConfig::for_zone(30, 1).target_delay(5.0, 0.5, 0.0);
    assert_eq!(calm, 7.0);
    // After a fresh join the old link's stalls no longer count.
    r.clear();
    assert_eq!(r.arrival_spread_ticks(), 0.0);
}

#[test]
fn baseline_after_resume_keeps_history_and_drops_the_unseen() {
    let mut r = replica();
    let mut first = spawned(10, 1, 0.0, 0.0, true);
    first.spawns.push(SpawnedEntity {
        id: 2,
        kind: 0,
        x: 50.0,
        y: 0.0,
        fields: vec![FieldValue::U(9)],
    });
    r.apply(&first);
    draw(&mut r, 10.0);
    assert_eq!(r.entered(), &[1, 2]);
    // A resume: a new baseline at 20 that spawns 1 again (moved) but not 2.
    r.apply(&spawned(20, 1, 10.0, 0.0, true));
    draw(&mut r, 19.0);
    assert!(r.entered().is_empty(), "entity 1 continues, no flicker");
    // Nothing was received between 10 and 20: the move is spread over the gap.
    assert_eq!(pos(&r, 1), (9.0, 0.0));
    assert!(r.get(2).is_some());
    draw(&mut r, 20.0);
    assert_eq!(r.left(), &[2]);
    assert_eq!(pos(&r, 1), (10.0, 0.0));
}

#[test]
fn buffers_are_bounded_and_count_what_they_drop() {
    let mut cfg = ReplicaConfig::for_zone(30, 1);
    cfg.buffer_capacity = 4;
    cfg.pending_capacity = 2;
    let mut r = Replica::new(cfg);
    r.apply(&spawned(0, 1, 0.0, 0.0, true));
    for t in 1..=10u64 {
        r.apply(&Patch {
            tick: t,
            updates: vec![UpdatedEntity {
                id: 1,
                pos: Some((t as f32, 0.0)),
                fields: vec![(0, FieldValue::U(t as u32))],
            }],
            ..Patch::default()
        });
    }
    let s = r.stats();
    assert_eq!(s.samples_dropped, 7);
    assert_eq!(s.fields_forced, 8);
    r.apply(&moved(11, 99, 0.0, 0.0));
    assert_eq!(r.stats().unknown_updates, 1);
    r.frame(Timing {
        server_tick: 12.0,
        one_way_ticks: 0.0,
        jitter_ticks: 0.0,
    });
    assert_eq!(pos(&r, 1), (10.0, 0.0));
    assert_eq!(r.get(1).unwrap().fields, &[FieldValue::U(10)]);
}

#[test]
fn clear_reports_visible_entities_as_left_once() {
    let mut r = replica();
    r.apply(&spawned(10, 4, 0.0, 0.0, true));
    draw(&mut r, 10.0);
    r.clear();
    assert_eq!(r.held_len(), 0);
    draw(&mut r, 11.0);
    assert_eq!(r.left(), &[4]);
    draw(&mut r, 12.0);
    assert!(r.left().is_empty());
}

mod props {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// Whatever the patches and however time moves, the drawn tick never goes back, and an
        /// entity is drawn on a segment between two of its samples (never beyond them).
        #[test]
        fn drawn_positions_stay_between_samples(
            moves in proptest::collection::vec((1u64..6, -1000i32..1000), 1..40),
            frames in proptest::collection::vec(0.0f64..3.0, 1..80),
        ) {
            let mut r = Replica::new(ReplicaConfig::for_zone(30, 2));
            r.apply(&spawned(0, 1, 0.0, 0.0, true));
            let mut tick = 0;
            let mut xs = vec![0.0f32];
            for (dt, x) in &moves {
                tick += dt;
                xs.push(*x as f32);
                r.apply(&moved(tick, 1, *x as f32, 0.0));
            }
            let lo = xs.iter().copied().fold(f32::INFINITY, f32::min);
            let hi = xs.iter().copied().fold(f32::NEG_INFINITY, f32::max);
            let mut now = 0.0;
            let mut last = f64::NEG_INFINITY;
            for step in frames {
                now += step;
                let drawn = r.frame(Timing { server_tick: now, one_way_ticks: 0.0, jitter_ticks: 0.0 });
                prop_assert!(drawn >= last);
                last = drawn;
                if let Some(e) = r.get(1) {
                    prop_assert!(e.x >= lo && e.x <= hi, "{} outside [{lo}, {hi}]", e.x);
                }
            }
        }
    }
}
