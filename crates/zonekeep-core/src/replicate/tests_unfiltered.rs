//! `build_unfiltered` (the broadcast fast path) must produce exactly the frames `build` produces
//! with a filter that shows everything, while the world churns, and copy-on-write sharing of sent
//! state between subscribers must never let one subscriber's change leak into another's.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use super::tests::world;
use super::*;
use proptest::prelude::*;
use std::collections::BTreeMap;
use zonekeep_protocol::mirror::Mirror;

/// One step of world churn, chosen by the test.
#[derive(Debug, Clone)]
enum Op {
    Spawn(f32, f32),
    Despawn(usize),
    Move(usize, f32, f32),
    Hp(usize, f32),
    Global(usize, bool),
    Reset(u32),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        (-300.0f32..300.0, -300.0f32..300.0).prop_map(|(x, y)| Op::Spawn(x, y)),
        (0usize..64).prop_map(Op::Despawn),
        (0usize..64, -300.0f32..300.0, -300.0f32..300.0).prop_map(|(i, x, y)| Op::Move(i, x, y)),
        (0usize..64, 0.0f32..100.0).prop_map(|(i, v)| Op::Hp(i, v)),
        (0usize..64, any::<bool>()).prop_map(|(i, g)| Op::Global(i, g)),
        (0u32..6).prop_map(Op::Reset),
    ]
}

fn frames(r: &mut Replicator, w: &World, tick: u64, fast: bool) -> BTreeMap<u32, Vec<u8>> {
    let mut out = BTreeMap::new();
    let inputs = |s: SubscriberId| FrameInput {
        ack: s.0 % 2,
        events: &[],
    };
    let sink = |s: SubscriberId, b: &[u8]| {
        out.insert(s.0, b.to_vec());
    };
    if fast {
        r.build_unfiltered(w, tick, inputs, sink).unwrap();
    } else {
        r.build(w, tick, |_, _| true, inputs, sink).unwrap();
    }
    out
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]
    #[test]
    fn unfiltered_frames_equal_filtered_frames(
        start in prop::collection::vec((-300.0f32..300.0, -300.0f32..300.0), 1..40),
        ops in prop::collection::vec(prop::collection::vec(op(), 0..6), 1..12),
    ) {
        let (mut w, unit, _) = world(0.1);
        let mut ids: Vec<EntityId> =
            start.iter().map(|&(x, y)| w.spawn(unit, x, y).unwrap()).collect();
        let schema = w.schema();
        let mut slow = Replicator::new(ReplicationConfig::default());
        let own = ids.first().copied();
        let subs = [
            (f32::INFINITY, Focus::Point(0.0, 0.0), None),
            (f32::INFINITY, Focus::Point(10.0, 5.0), None),
            (f32::INFINITY, Focus::Entity(ids[0]), own),
            (f32::INFINITY, Focus::Point(f32::NAN, 0.0), None),
            (50.0, Focus::Point(0.0, 0.0), None),
            (f32::INFINITY, Focus::Point(0.0, 0.0), own),
        ];
        for (i, &(radius, focus, control)) in subs.iter().enumerate() {
            let cfg = SubscriberConfig { radius, margin: 2.0, budget: None, focus, control };
            slow.add_subscriber(SubscriberId(i as u32), cfg).unwrap();
        }
        let mut fast = slow.clone();
        let mut mirrors: BTreeMap<u32, Mirror> = BTreeMap::new();
        for (t, step) in ops.iter().enumerate() {
            let tick = t as u64 + 1;
            for o in step {
                match *o {
                    Op::Spawn(x, y) => ids.push(w.spawn(unit, x, y).unwrap()),
                    Op::Despawn(i) if i < ids.len() => {
                        let _ = w.despawn(ids.remove(i));
                    }
                    Op::Move(i, x, y) => {
                        if let Some(&id) = ids.get(i) { w.set_pos(id, x, y).unwrap(); }
                    }
                    Op::Hp(i, v) => {
                        if let Some(&id) = ids.get(i) { w.set_f32(id, 0, v).unwrap(); }
                    }
                    Op::Global(i, g) => {
                        if let Some(&id) = ids.get(i) { w.set_global(id, g).unwrap(); }
                    }
                    Op::Reset(s) => {
                        slow.reset_subscriber(SubscriberId(s)).unwrap();
                        fast.reset_subscriber(SubscriberId(s)).unwrap();
                        mirrors.remove(&s);
                    }
                    Op::Despawn(_) => {}
                }
            }
            let a = frames(&mut slow, &w, tick, false);
            let b = frames(&mut fast, &w, tick, true);
            prop_assert_eq!(&a, &b, "tick {}", tick);
            // Every frame also applies cleanly on a client that follows it from its baseline.
            for (s, f) in &b {
                let m = mirrors.entry(*s).or_default();
                prop_assert!(m.decode_apply(f, &schema).is_ok(), "subscriber {} tick {}", s, tick);
            }
            for s in 0..subs.len() as u32 {
                let id = SubscriberId(s);
                prop_assert_eq!(slow.known(id).unwrap(), fast.known(id).unwrap());
            }
        }
    }
}

/// Subscribers in the same state share their sent state; resetting or advancing one must leave
/// the others exactly as they were.
#[test]
fn shared_sent_state_is_copy_on_write() {
    let (mut w, unit, _) = world(0.1);
    let ids: Vec<EntityId> = (0..20)
        .map(|i| w.spawn(unit, i as f32, 0.0).unwrap())
        .collect();
    let mut r = Replicator::new(ReplicationConfig::default());
    let cfg = |budget| SubscriberConfig {
        radius: f32::INFINITY,
        margin: 0.0,
        budget,
        focus: Focus::Point(0.0, 0.0),
        control: None,
    };
    for s in 0..3 {
        r.add_subscriber(SubscriberId(s), cfg(None)).unwrap();
    }
    frames(&mut r, &w, 1, true);
    let all: Vec<u32> = ids.iter().map(|e| e.0).collect();
    w.set_pos(ids[3], 50.0, 0.0).unwrap();
    frames(&mut r, &w, 2, true);
    r.reset_subscriber(SubscriberId(1)).unwrap();
    assert_eq!(r.known(SubscriberId(0)).unwrap(), all);
    assert_eq!(r.known(SubscriberId(1)).unwrap(), Vec::<u32>::new());
    assert_eq!(r.known(SubscriberId(2)).unwrap(), all);
    // A tight budget on one subscriber diverges it from the others without touching them.
    r.update_subscriber(SubscriberId(2), cfg(Some(40))).unwrap();
    let f = frames(&mut r, &w, 3, true);
    assert!(f[&2].len() <= 40);
    assert_eq!(r.known(SubscriberId(0)).unwrap(), all);
    assert!(r.known(SubscriberId(1)).unwrap().len() == all.len());
    assert_eq!(r.known(SubscriberId(2)).unwrap(), all);
}
