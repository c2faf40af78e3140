#![allow(clippy::unwrap_used, clippy::expect_used)]
//! A crowd over a datagram's budget: the shape of a large arena on WebTransport, where every
//! State is chosen by priority from many more candidates than fit.

use super::tests::world;
use super::tests_e2e::assert_mirror_matches;
use super::*;
use zonekeep_protocol::mirror::Mirror;

/// A thousand entities in view, all moving every patch, against a budget of about a datagram:
/// every frame stays within the budget and is full to within a few bytes, only the candidates
/// the fill reads are encoded, nothing waits past the starvation bound of the module docs, and
/// once the crowd stands still the client holds exactly the world.
#[test]
fn a_crowd_over_a_datagram_budget_fills_it_and_starves_nothing() {
    let (mut w, unit, _) = world(0.01);
    let n = 1_000usize;
    // Each drifts three quanta a patch: a client one patch behind gets a one-byte record, one
    // further behind a longer one.
    let place = |i: usize, tick: u64| {
        let a = i as f32 * 0.37;
        let rad = 5.0 + (i % 190) as f32;
        (a.cos() * rad + tick as f32 * 0.03, a.sin() * rad)
    };
    let ids: Vec<EntityId> = (0..n)
        .map(|i| {
            let (x, y) = place(i, 0);
            w.spawn(unit, x, y).unwrap()
        })
        .collect();
    let schema = w.schema();
    let pd = 16.0f32;
    let mut r = Replicator::new(ReplicationConfig {
        cell_size: 32.0,
        priority_distance: pd,
    });
    let budget = 1_100usize;
    let radius = 200.0f32;
    r.add_subscriber(
        SubscriberId(0),
        SubscriberConfig {
            radius,
            margin: 0.0,
            budget: Some(budget),
            focus: Focus::Point(0.0, 0.0),
            control: None,
        },
    )
    .unwrap();
    let mut m = Mirror::new();
    let mut last_sent = vec![0u64; n];
    let mut worst = 0u64;
    let mut fewest = usize::MAX;
    let moving = 150u64;
    for tick in 1..=moving + 40 {
        if tick <= moving {
            for (i, id) in ids.iter().enumerate() {
                let (x, y) = place(i, tick);
                w.set_pos(*id, x, y).unwrap();
            }
        }
        let mut frame = Vec::new();
        let stats = r
            .build(
                &w,
                tick,
                |_, _| true,
                |_| FrameInput::default(),
                |_, f| frame = f.to_vec(),
            )
            .unwrap();
        assert!(
            frame.len() <= budget,
            "tick {tick}: {} > {budget}",
            frame.len()
        );
        let d = m.decode_apply(&frame, &schema).unwrap();
        let sent = d.updates.len() + d.spawns.len();
        if tick <= moving && d.spawns.is_empty() {
            // Every entity always has something pending, so the frame is full: the fill stops
            // only a few bytes short (16 candidates that did not fit, or the budget spent).
            // (Frames of spawns count each id at its full length, where the wire codes gaps,
            // so those fall shorter by design.)
            assert!(
                frame.len() + 32 >= budget,
                "tick {tick}: {} bytes of {budget}",
                frame.len()
            );
            // Only what the fill read was encoded: what it chose and the misses it stopped on.
            assert!(
                stats.encodings <= (sent + 16) as u64,
                "tick {tick}: {} encodings for {sent} items",
                stats.encodings
            );
        }
        if tick <= moving {
            assert_eq!(stats.deferred + sent as u64, n as u64, "tick {tick}");
            fewest = fewest.min(sent);
        }
        for id in d
            .spawns
            .iter()
            .map(|s| s.id)
            .chain(d.updates.iter().map(|u| u.id))
        {
            let i = id as usize - ids[0].0 as usize;
            if tick <= moving {
                worst = worst.max(tick - last_sent[i]);
            }
            last_sent[i] = tick;
        }
    }
    // The bound of the module docs, with k the fewest items any frame carried.
    let w_min = 1.0 / (1.0 + radius / pd);
    let rho = 1.0 / w_min;
    let bound = (2.0 * (n as f32 - 1.0) * (1.0 + rho) / fewest as f32).ceil() as u64 + 1;
    assert!(worst <= bound, "worst wait {worst} > bound {bound}");
    assert!(last_sent.iter().all(|&t| t > 0), "every entity was sent");
    let known = r.known(SubscriberId(0)).unwrap();
    assert_eq!(known.len(), n);
    assert_mirror_matches(&m, &w, &known);
}

/// When the most urgent items are each too large for the room a frame has, the fill reads on
/// to the smaller ones that fit instead of giving up: the frame stays within its budget, and the
/// large items wait (counted as deferred, not sent over the budget).
#[test]
fn small_items_fit_behind_urgent_ones_too_large_for_the_room_left() {
    let (mut w, unit, item) = world(0.01);
    // Twenty units with long names near the view's centre: the most urgent, each too large.
    for i in 0..20 {
        let e = w.spawn(unit, 1.0 + i as f32 * 0.1, 1.0).unwrap();
        w.set_str(e, 1, "sixteen-chars-xx").unwrap();
    }
    // Two small items far out: less urgent, but they fit (one at least).
    let far: Vec<EntityId> = (0..2)
        .map(|i| w.spawn(item, 90.0, 90.0 + i as f32).unwrap())
        .collect();
    let schema = w.schema();
    let mut r = Replicator::new(ReplicationConfig {
        cell_size: 32.0,
        priority_distance: 16.0,
    });
    let budget = 24usize;
    r.add_subscriber(
        SubscriberId(0),
        SubscriberConfig {
            radius: 200.0,
            margin: 0.0,
            budget: Some(budget),
            focus: Focus::Point(0.0, 0.0),
            control: None,
        },
    )
    .unwrap();
    let mut frame = Vec::new();
    let stats = r
        .build(
            &w,
            1,
            |_, _| true,
            |_| FrameInput::default(),
            |_, f| frame = f.to_vec(),
        )
        .unwrap();
    assert!(frame.len() <= budget, "{} > {budget}", frame.len());
    assert_eq!(stats.over_budget, 0);
    let d = Mirror::new().decode_apply(&frame, &schema).unwrap();
    let sent: Vec<u32> = d.spawns.iter().map(|s| s.id).collect();
    assert!(!sent.is_empty(), "a small item fit");
    assert!(
        sent.iter().all(|id| far.iter().any(|e| e.0 == *id)),
        "only small items went: {sent:?}"
    );
    assert_eq!(stats.deferred, 22 - sent.len() as u64);
}
