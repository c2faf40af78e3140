#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Frames against acknowledged states over a lossy, reordering path: every State a client applies
//! leaves it holding exactly what the host sent for that tick, and once the path clears, the client
//! holds the world; States against the same acknowledged state share one encoding.

use super::tests::world;
use super::*;
use proptest::prelude::*;
use std::collections::BTreeMap;
use zonekeep_protocol::mirror::Mirror;
use zonekeep_protocol::states::{Applied, StateRing};

use super::tests_e2e::Rng;

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        (self.f() * n as f32) as u64 % n.max(1)
    }
}

/// What a client must hold after applying the State of one tick: `(id, kind, qx, qy, fields)`.
type Expect = Vec<(
    u32,
    u32,
    i32,
    i32,
    Vec<zonekeep_protocol::schema::FieldValue>,
)>;

fn expect(r: &Replicator, w: &World, s: SubscriberId) -> Expect {
    r.known(s)
        .unwrap()
        .into_iter()
        .map(|id| {
            let e = w.get(EntityId(id)).unwrap();
            (id, e.kind.0, e.qx, e.qy, e.values.to_vec())
        })
        .collect()
}

fn held(m: &Mirror) -> Expect {
    m.iter()
        .map(|(id, e)| (id, e.kind, e.qx, e.qy, e.fields.clone()))
        .collect()
}

/// Loss and reordering of States and of the acknowledgements coming back, both ways `loss`.
fn run(seed: u64, loss: f32, budget: Option<usize>) {
    let mut rng = Rng(seed | 1);
    let (mut w, unit, item) = world(0.05);
    let mut alive: Vec<EntityId> = (0..60)
        .map(|i| {
            let k = if i % 3 == 0 { item } else { unit };
            w.spawn(k, rng.f() * 300.0, rng.f() * 300.0).unwrap()
        })
        .collect();
    let schema = w.schema();
    let mut r = Replicator::new(ReplicationConfig {
        cell_size: 40.0,
        priority_distance: 20.0,
    });
    let cfgs = [
        (60.0, Focus::Entity(alive[1]), Some(alive[1])),
        (60.0, Focus::Entity(alive[1]), Some(alive[1])),
        (90.0, Focus::Point(150.0, 150.0), None),
        (f32::INFINITY, Focus::Entity(alive[2]), Some(alive[2])),
    ];
    for (i, (radius, focus, control)) in cfgs.into_iter().enumerate() {
        let s = SubscriberId(i as u32);
        let cfg = SubscriberConfig {
            radius,
            margin: 10.0,
            budget: None,
            focus,
            control,
        };
        r.add_subscriber(s, cfg).unwrap();
        r.acknowledge_states(s, budget).unwrap();
    }
    let n = cfgs.len();
    let mut rings: Vec<StateRing> = (0..n).map(|_| StateRing::new()).collect();
    // What each subscriber must hold after the State of each tick.
    let mut expected: Vec<BTreeMap<u64, Expect>> = vec![BTreeMap::new(); n];
    // In flight: (arrival tick, subscriber, bytes) and (arrival tick, subscriber, acked tick).
    let mut states: Vec<(u64, usize, Vec<u8>)> = Vec::new();
    let mut acks: Vec<(u64, usize, u64)> = Vec::new();
    let (mut applied, mut stale, mut no_base, mut deferred) = (0u32, 0u32, 0u32, 0u64);
    let calm = 150u64;
    for tick in 1..=calm + 40 {
        let lossy = tick <= calm;
        if tick <= 100 {
            for id in alive.clone() {
                let (x, y) = w.pos(id).unwrap();
                w.set_pos(id, x + (rng.f() - 0.5) * 12.0, y + (rng.f() - 0.5) * 12.0)
                    .unwrap();
                if rng.f() < 0.05 {
                    if w.kind_of(id).unwrap() == unit {
                        w.set_f32(id, 0, rng.f() * 100.0).unwrap();
                    } else {
                        w.set_uint(id, 0, (rng.f() * 1000.0) as u32).unwrap();
                    }
                }
            }
            if rng.f() < 0.3 && alive.len() > 10 {
                let i = (3 + rng.below(alive.len() as u64 - 3) as usize).min(alive.len() - 1);
                w.despawn(alive.remove(i)).unwrap();
            }
            if rng.f() < 0.3 {
                alive.push(w.spawn(unit, rng.f() * 300.0, rng.f() * 300.0).unwrap());
            }
        }
        // Acknowledgements that arrive now reach the host before it builds.
        acks.retain(|&(at, s, t)| {
            if at <= tick {
                r.ack_state(SubscriberId(s as u32), t).unwrap();
                false
            } else {
                true
            }
        });
        let mut built: Vec<(usize, Vec<u8>, Option<u64>)> = Vec::new();
        let stats = r
            .build_with_heads(
                &w,
                tick,
                Some(|_: SubscriberId, _: EntityId| true),
                |_| FrameInput::default(),
                |s, head, b| built.push((s.0 as usize, b.to_vec(), head.base)),
            )
            .unwrap();
        deferred += stats.deferred;
        for (s, bytes, base) in built {
            assert!(base.is_some(), "a subscriber on datagrams is sent States");
            if let Some(max) = budget {
                assert!(bytes.len() <= max, "a State keeps to the frame limit");
            }
            expected[s].insert(tick, expect(&r, &w, SubscriberId(s as u32)));
            if lossy && rng.f() < loss {
                continue;
            }
            let delay = if lossy { rng.below(4) } else { 0 };
            states.push((tick + delay, s, bytes));
        }
        // Deliver what arrives now, in a shuffled order (reordering), and acknowledge.
        let mut now: Vec<(u64, usize, Vec<u8>)> = Vec::new();
        states.retain(|x| {
            if x.0 <= tick {
                now.push(x.clone());
                false
            } else {
                true
            }
        });
        if lossy {
            for i in (1..now.len()).rev() {
                let j = rng.below(i as u64 + 1) as usize;
                now.swap(i, j);
            }
        }
        for (_, s, bytes) in now {
            match rings[s].apply(&bytes, &schema).unwrap() {
                Applied::Newer(d) => {
                    applied += 1;
                    let got = held(rings[s].current());
                    let want = &expected[s][&d.tick];
                    if budget.is_none() {
                        assert_eq!(&got, want, "subscriber {s} after tick {}", d.tick);
                    } else {
                        // A budget defers some changes: the ids held are still exact.
                        let ids = |e: &Expect| e.iter().map(|x| x.0).collect::<Vec<_>>();
                        assert_eq!(ids(&got), ids(want), "subscriber {s} after tick {}", d.tick);
                    }
                    if !(lossy && rng.f() < loss) {
                        let delay = if lossy { rng.below(4) } else { 0 };
                        acks.push((tick + delay, s, rings[s].newest()));
                    }
                }
                Applied::Stale => stale += 1,
                Applied::NoBase { .. } => no_base += 1,
            }
        }
    }
    // After the path cleared and the world stood still, every client holds its whole view.
    for (s, ring) in rings.iter().enumerate() {
        let sid = SubscriberId(s as u32);
        assert_eq!(held(ring.current()), expect(&r, &w, sid));
        assert_eq!(r.known(sid).unwrap(), r.subs[s].view.visible().to_vec());
    }
    assert!(applied > 0);
    assert_eq!(
        budget.is_some(),
        deferred > 0,
        "the frame limit deferred changes"
    );
    if loss > 0.0 {
        assert!(
            stale + no_base > 0 || loss < 0.05,
            "the path reordered something"
        );
    }
}

#[test]
fn states_apply_exactly_over_a_lossy_reordering_path() {
    for seed in [1u64, 2, 3, 0xdead_beef] {
        run(seed, 0.2, None);
    }
}

#[test]
fn states_within_a_datagram_limit_converge() {
    for seed in [5u64, 6] {
        run(seed, 0.1, Some(120));
    }
}

/// Adds `s`, seeing every entity, on a datagram path with no frame limit.
fn add_seeing_all(r: &mut Replicator, s: SubscriberId) {
    let cfg = SubscriberConfig {
        radius: f32::INFINITY,
        margin: 0.0,
        budget: None,
        focus: Focus::Point(0.0, 0.0),
        control: None,
    };
    r.add_subscriber(s, cfg).unwrap();
    r.acknowledge_states(s, None).unwrap();
}

#[test]
fn every_state_is_a_baseline_until_one_is_acknowledged() {
    let (mut w, unit, _) = world(0.05);
    let a = w.spawn(unit, 1.0, 1.0).unwrap();
    let mut r = Replicator::new(ReplicationConfig::default());
    let s = SubscriberId(7);
    add_seeing_all(&mut r, s);
    let mut bases = Vec::new();
    for tick in 1..=3 {
        w.set_pos(a, tick as f32, 1.0).unwrap();
        r.build_with_heads(
            &w,
            tick,
            None::<fn(SubscriberId, EntityId) -> bool>,
            |_| FrameInput::default(),
            |_, head, _| bases.push(head.base),
        )
        .unwrap();
    }
    assert_eq!(bases, vec![Some(0), Some(0), Some(0)]);
    // An acknowledgement of a tick never built is ignored; one of tick 2 is the next base.
    assert!(!r.ack_state(s, 9).unwrap());
    assert!(r.ack_state(s, 2).unwrap());
    assert!(
        !r.ack_state(s, 1).unwrap(),
        "an older acknowledgement is not news"
    );
    r.build_with_heads(
        &w,
        4,
        None::<fn(SubscriberId, EntityId) -> bool>,
        |_| FrameInput::default(),
        |_, head, _| bases.push(head.base),
    )
    .unwrap();
    assert_eq!(bases.last(), Some(&Some(2)));
}

/// A subscriber on datagrams whose client holds the same acknowledged state as an earlier one's,
/// and sees the same entities, gets that State's body as encoded once; one acknowledged at another
/// state gets its own. Every client still holds exactly its view after applying what it got.
#[test]
fn states_against_the_same_acknowledged_state_share_one_encoding() {
    let (mut w, unit, _) = world(0.05);
    let ids: Vec<EntityId> = (0..40)
        .map(|i| w.spawn(unit, i as f32 * 3.0, 5.0).unwrap())
        .collect();
    let schema = w.schema();
    let mut r = Replicator::new(ReplicationConfig::default());
    let subs: Vec<SubscriberId> = (0..3).map(SubscriberId).collect();
    for &s in &subs {
        add_seeing_all(&mut r, s);
    }
    let mut rings: Vec<StateRing> = (0..3).map(|_| StateRing::new()).collect();
    // One patch: every entity moves; returns each subscriber's (State, base) and the shared count.
    let patch = |r: &mut Replicator, w: &mut World, tick: u64| {
        for id in &ids {
            let (x, y) = w.pos(*id).unwrap();
            w.set_pos(*id, x, y + 0.7).unwrap();
        }
        let mut built = vec![(Vec::new(), None); 3];
        let stats = r
            .build_with_heads(
                w,
                tick,
                None::<fn(SubscriberId, EntityId) -> bool>,
                |_| FrameInput::default(),
                |s, head, b| built[s.0 as usize] = (b.to_vec(), head.base),
            )
            .unwrap();
        (built, stats.shared_bodies)
    };
    // Each client applies its State, then holds every entity where it is now.
    let apply = |rings: &mut Vec<StateRing>, w: &World, built: &[(Vec<u8>, Option<u64>)]| {
        let whole: Vec<(u32, i32, i32)> = ids
            .iter()
            .map(|&id| {
                let (qx, qy) = w.qpos(id).unwrap();
                (id.0, qx, qy)
            })
            .collect();
        for (s, (bytes, _)) in built.iter().enumerate() {
            let applied = rings[s].apply(bytes, &schema).unwrap();
            assert!(matches!(applied, Applied::Newer(_)), "subscriber {s}");
            let got: Vec<(u32, i32, i32)> = held(rings[s].current())
                .into_iter()
                .map(|(id, _, qx, qy, _)| (id, qx, qy))
                .collect();
            assert_eq!(got, whole, "subscriber {s}");
        }
    };
    // Tick 1: nothing acknowledged, one BASELINE for all three.
    let (built, shared) = patch(&mut r, &mut w, 1);
    assert_eq!(shared, 2);
    assert!(built.iter().all(|b| b.1 == Some(0) && b.0 == built[0].0));
    apply(&mut rings, &w, &built);
    // Tick 2: the first two acknowledged tick 1, the third nothing yet.
    assert!(r.ack_state(subs[0], 1).unwrap());
    assert!(r.ack_state(subs[1], 1).unwrap());
    let (built, shared) = patch(&mut r, &mut w, 2);
    assert_eq!(shared, 1, "the second shares the first's State");
    assert_eq!(
        (built[0].1, built[1].1, built[2].1),
        (Some(1), Some(1), Some(0))
    );
    assert_eq!(built[0].0, built[1].0);
    assert_ne!(built[0].0, built[2].0, "a BASELINE again for the third");
    apply(&mut rings, &w, &built);
    // Tick 3: the first and third acknowledged tick 2 (reached by a Delta and by a BASELINE: the
    // same state all the same), the second still tick 1.
    assert!(r.ack_state(subs[0], 2).unwrap());
    assert!(r.ack_state(subs[2], 2).unwrap());
    let (built, shared) = patch(&mut r, &mut w, 3);
    assert_eq!(
        (built[0].1, built[1].1, built[2].1),
        (Some(2), Some(1), Some(2))
    );
    assert_eq!(shared, 1, "the third shares the first's State");
    assert_eq!(built[0].0, built[2].0);
    assert_ne!(built[0].0, built[1].0, "two ticks of motion against one");
    apply(&mut rings, &w, &built);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 6, .. ProptestConfig::default() })]
    #[test]
    fn random_lossy_paths_replicate_exactly(seed in any::<u64>(), loss in 0.0f32..0.5) {
        run(seed, loss, None);
    }
}
