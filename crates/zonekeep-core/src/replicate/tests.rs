#![allow(clippy::unwrap_used, clippy::expect_used)]

use super::*;
use crate::world::KindId;
use proptest::prelude::*;
use std::collections::BTreeMap;
use zonekeep_protocol::mirror::Mirror;
use zonekeep_protocol::schema::{FieldDef, FieldType, KindDef, Schema};

pub(super) fn kinds() -> Vec<KindDef> {
    vec![
        KindDef {
            name: "unit".into(),
            fields: vec![
                FieldDef {
                    name: "hp".into(),
                    ty: FieldType::Quant {
                        min: 0.0,
                        max: 100.0,
                        bits: 10,
                    },
                },
                FieldDef {
                    name: "name".into(),
                    ty: FieldType::Str { max_len: 16 },
                },
                FieldDef {
                    name: "dir".into(),
                    ty: FieldType::Angle { bits: 8 },
                },
            ],
        },
        KindDef {
            name: "item".into(),
            fields: vec![FieldDef {
                name: "count".into(),
                ty: FieldType::UInt,
            }],
        },
    ]
}

pub(super) fn world(step: f32) -> (World, KindId, KindId) {
    let mut w = World::new(step).unwrap();
    let mut ks = kinds().into_iter();
    let unit = w.declare_kind(ks.next().unwrap()).unwrap();
    let item = w.declare_kind(ks.next().unwrap()).unwrap();
    (w, unit, item)
}

fn cfg(radius: f32, focus: Focus, control: Option<EntityId>) -> SubscriberConfig {
    SubscriberConfig {
        radius,
        margin: 0.0,
        budget: None,
        focus,
        control,
    }
}

/// Runs one build and returns every frame by subscriber.
fn build_all(r: &mut Replicator, w: &World, tick: u64) -> (BTreeMap<u32, Vec<u8>>, BuildStats) {
    let mut frames = BTreeMap::new();
    let stats = r
        .build(
            w,
            tick,
            |_, _| true,
            |_| FrameInput::default(),
            |s, b| {
                frames.insert(s.0, b.to_vec());
            },
        )
        .unwrap();
    (frames, stats)
}

fn apply(m: &mut Mirror, bytes: &[u8], schema: &Schema) -> zonekeep_protocol::delta::Delta {
    m.decode_apply(bytes, schema).unwrap()
}

#[test]
fn despawn_reaches_every_subscriber_that_knew_it() {
    let (mut w, unit, _) = world(0.1);
    let a = w.spawn(unit, 0.0, 0.0).unwrap();
    let b = w.spawn(unit, 5.0, 0.0).unwrap();
    let far = w.spawn(unit, 1000.0, 0.0).unwrap();
    let schema = w.schema();
    let mut r = Replicator::new(ReplicationConfig::default());
    r.add_subscriber(SubscriberId(1), cfg(20.0, Focus::Entity(a), Some(a)))
        .unwrap();
    r.add_subscriber(SubscriberId(2), cfg(20.0, Focus::Point(5.0, 0.0), None))
        .unwrap();
    r.add_subscriber(SubscriberId(3), cfg(20.0, Focus::Entity(far), Some(far)))
        .unwrap();
    let mut mirrors: BTreeMap<u32, Mirror> = (1..=3).map(|i| (i, Mirror::new())).collect();
    let (frames, _) = build_all(&mut r, &w, 1);
    for (s, f) in &frames {
        let d = apply(mirrors.get_mut(s).unwrap(), f, &schema);
        assert!(d.baseline);
    }
    assert_eq!(r.known(SubscriberId(1)).unwrap(), vec![a.0, b.0]);
    assert_eq!(r.known(SubscriberId(3)).unwrap(), vec![far.0]);
    w.despawn(b).unwrap();
    let (frames, stats) = build_all(&mut r, &w, 2);
    assert_eq!(stats.despawns, 2);
    for (s, f) in &frames {
        let d = apply(mirrors.get_mut(s).unwrap(), f, &schema);
        let expect: Vec<u32> = if *s == 3 { vec![] } else { vec![b.0] };
        assert_eq!(d.despawns, expect, "subscriber {s}");
        assert!(mirrors[s].get(b.0).is_none());
    }
}

#[test]
fn control_ack_events_and_baseline_after_reset() {
    let (mut w, unit, _) = world(0.1);
    let a = w.spawn(unit, 0.0, 0.0).unwrap();
    let b = w.spawn(unit, 1.0, 0.0).unwrap();
    let schema = w.schema();
    let mut r = Replicator::new(ReplicationConfig::default());
    r.add_subscriber(SubscriberId(7), cfg(50.0, Focus::Entity(a), Some(a)))
        .unwrap();
    assert_eq!(
        r.add_subscriber(SubscriberId(7), cfg(1.0, Focus::Point(0.0, 0.0), None)),
        Err(ReplicateError::DuplicateSubscriber(SubscriberId(7)))
    );
    let payload = [1u8, 2, 3];
    let big = vec![0u8; 20_000];
    let events: Vec<(u16, &[u8])> = vec![(9, &payload[..]), (10, &big[..])];
    let mut frame = Vec::new();
    let stats = r
        .build(
            &w,
            5,
            |_, _| true,
            |_| FrameInput {
                ack: 42,
                events: &events,
            },
            |_, f| frame = f.to_vec(),
        )
        .unwrap();
    assert_eq!(stats.events_dropped, 1);
    let mut m = Mirror::new();
    let d = apply(&mut m, &frame, &schema);
    assert_eq!(
        (d.tick, d.ack, d.baseline, d.control),
        (5, 42, true, Some(Some(a.0)))
    );
    let ev = d.events.unwrap();
    assert_eq!(ev.len(), 1);
    assert_eq!((ev[0].topic, ev[0].payload.as_slice()), (9, &payload[..]));
    // Nothing changed: no control, no updates.
    let (frames, _) = build_all(&mut r, &w, 6);
    let d = apply(&mut m, &frames[&7], &schema);
    assert_eq!(d.control, None);
    assert!(d.updates.is_empty() && d.spawns.is_empty() && d.events.is_none());
    // The control entity changes: sent once.
    r.update_subscriber(SubscriberId(7), cfg(50.0, Focus::Entity(b), Some(b)))
        .unwrap();
    let (frames, _) = build_all(&mut r, &w, 7);
    assert_eq!(apply(&mut m, &frames[&7], &schema).control, Some(Some(b.0)));
    // A reset (reconnect) gives a BASELINE with full state and control again.
    r.reset_subscriber(SubscriberId(7)).unwrap();
    let (frames, _) = build_all(&mut r, &w, 8);
    let mut fresh = Mirror::new();
    let d = apply(&mut fresh, &frames[&7], &schema);
    assert!(d.baseline);
    assert_eq!(d.spawns.len(), 2);
    assert_eq!(d.control, Some(Some(b.0)));
    r.remove_subscriber(SubscriberId(7)).unwrap();
    assert!(r.is_empty());
    assert_eq!(
        r.reset_subscriber(SubscriberId(7)),
        Err(ReplicateError::UnknownSubscriber(SubscriberId(7)))
    );
}

#[test]
fn only_changed_fields_are_sent_and_encodings_are_shared() {
    let (mut w, unit, _) = world(0.01);
    let ids: Vec<EntityId> = (0..50)
        .map(|i| w.spawn(unit, i as f32, 0.0).unwrap())
        .collect();
    let schema = w.schema();
    let mut r = Replicator::new(ReplicationConfig::default());
    for s in 0..20 {
        let mut c = cfg(f32::INFINITY, Focus::Point(0.0, 0.0), None);
        // Different budgets and acks must not stop sharing record bytes.
        c.budget = (s % 2 == 0).then_some(100_000);
        r.add_subscriber(SubscriberId(s), c).unwrap();
    }
    let mut mirrors: Vec<Mirror> = (0..20).map(|_| Mirror::new()).collect();
    let (frames, _) = build_all(&mut r, &w, 1);
    for (s, f) in &frames {
        apply(&mut mirrors[*s as usize], f, &schema);
    }
    w.set_f32(ids[3], 0, 55.0).unwrap();
    w.set_pos(ids[4], 4.5, 0.0).unwrap();
    let (frames, stats) = build_all(&mut r, &w, 2);
    assert_eq!(stats.updates, 40);
    // Two distinct records this patch, encoded once each.
    assert_eq!(stats.encodings, 2);
    for (s, f) in &frames {
        let d = apply(&mut mirrors[*s as usize], f, &schema);
        assert_eq!(d.updates.len(), 2);
        assert_eq!(d.updates[0].id, ids[3].0);
        assert_eq!(d.updates[0].mask, 1, "only hp");
        assert!(d.updates[0].pos.is_none());
        assert_eq!(d.updates[1].mask, 0);
    }
    let e = mirrors[0].get(ids[3].0).unwrap();
    assert_eq!(&e.fields[0], w.field(ids[3], 0).unwrap());
}

#[test]
fn can_see_hides_and_observers_follow_their_focus() {
    let (mut w, unit, item) = world(0.1);
    let me = w.spawn(unit, 0.0, 0.0).unwrap();
    let hidden = w.spawn(unit, 1.0, 0.0).unwrap();
    let shown = w.spawn(item, 2.0, 0.0).unwrap();
    let global = w.spawn(item, 900.0, 900.0).unwrap();
    w.set_global(global, true).unwrap();
    let far = w.spawn(unit, 500.0, 500.0).unwrap();
    let mut r = Replicator::new(ReplicationConfig::default());
    r.add_subscriber(SubscriberId(0), cfg(10.0, Focus::Entity(me), Some(me)))
        .unwrap();
    r.add_subscriber(SubscriberId(1), cfg(10.0, Focus::Point(500.0, 500.0), None))
        .unwrap();
    r.build(
        &w,
        1,
        |s, e| !(s.0 == 0 && e == hidden) && e != me,
        |_| FrameInput::default(),
        |_, _| {},
    )
    .unwrap();
    // Its own entity is visible even though the filter says no; the global is seen from afar.
    assert_eq!(
        r.known(SubscriberId(0)).unwrap(),
        vec![me.0, shown.0, global.0]
    );
    assert_eq!(r.known(SubscriberId(1)).unwrap(), vec![global.0, far.0]);
}

/// Starvation bound (see the module docs): with `N` entities always pending, at least `k` fitting
/// per frame and `ρ = w_max / w_min`, every entity is sent within `⌈2 (N − 1)(1 + ρ) / k⌉ + 1`
/// patches.
#[test]
fn tight_budget_starves_nothing() {
    let (mut w, unit, _) = world(0.01);
    let n = 60usize;
    let ids: Vec<EntityId> = (0..n)
        .map(|i| {
            let a = i as f32 * 0.7;
            w.spawn(unit, a.cos() * (i as f32), a.sin() * (i as f32))
                .unwrap()
        })
        .collect();
    let schema = w.schema();
    let pd = 16.0f32;
    let mut r = Replicator::new(ReplicationConfig {
        cell_size: 32.0,
        priority_distance: pd,
    });
    let budget = 60usize;
    let mut c = cfg(100.0, Focus::Point(0.0, 0.0), None);
    c.budget = Some(budget);
    r.add_subscriber(SubscriberId(0), c).unwrap();
    let mut m = Mirror::new();
    let mut last_sent = vec![0u64; n];
    // Move everything by a lot every patch so every entity is always pending (absolute records,
    // at most 1 header + 2 × 3 bytes each); header ≤ 8 bytes, so k ≥ (60 − 8 − 4) / 7 = 6.
    let k = 6.0f32;
    let w_max = 1.0f32;
    let w_min = 1.0 / (1.0 + 100.0 / pd);
    let rho = w_max / w_min;
    let bound = (2.0 * (n as f32 - 1.0) * (1.0 + rho) / k).ceil() as u64 + 1;
    let mut worst = 0u64;
    for tick in 1..=200u64 {
        for (i, id) in ids.iter().enumerate() {
            let a = i as f32 * 0.7 + tick as f32 * 0.01;
            let rad = i as f32 + (tick % 2) as f32 * 0.5;
            w.set_pos(*id, a.cos() * rad, a.sin() * rad).unwrap();
        }
        let mut frame = Vec::new();
        r.build(
            &w,
            tick,
            |_, _| true,
            |_| FrameInput::default(),
            |_, f| frame = f.to_vec(),
        )
        .unwrap();
        assert!(frame.len() <= budget, "{} > {budget}", frame.len());
        let d = apply(&mut m, &frame, &schema);
        // The premise of the bound: at least k items fit in every frame.
        assert!(
            d.updates.len() + d.spawns.len() >= k as usize,
            "tick {tick}"
        );
        for id in d
            .spawns
            .iter()
            .map(|s| s.id)
            .chain(d.updates.iter().map(|u| u.id))
        {
            let i = id as usize;
            worst = worst.max(tick - last_sent[i]);
            last_sent[i] = tick;
        }
        if tick > bound {
            for (i, &t) in last_sent.iter().enumerate() {
                assert!(
                    tick - t <= bound,
                    "entity {i} waited {} > {bound}",
                    tick - t
                );
            }
        }
    }
    assert!(worst <= bound, "worst wait {worst} > bound {bound}");
}

fn arb_world() -> impl Strategy<Value = (Vec<(f32, f32, u8)>, usize, u64)> {
    (
        prop::collection::vec((0.0f32..200.0, 0.0f32..200.0, 0u8..4), 1..120),
        40usize..700,
        any::<u64>(),
    )
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, .. ProptestConfig::default() })]

    /// Every frame stays within its budget (unless even the header-only frame exceeds it) and
    /// decodes against the client's known set.
    #[test]
    fn budget_is_never_exceeded((ents, budget, seed) in arb_world()) {
        let (mut w, unit, item) = world(0.05);
        let ids: Vec<EntityId> = ents
            .iter()
            .map(|&(x, y, k)| w.spawn(if k == 0 { item } else { unit }, x, y).unwrap())
            .collect();
        let schema = w.schema();
        let mut r = Replicator::new(ReplicationConfig { cell_size: 30.0, priority_distance: 10.0 });
        for s in 0..4u32 {
            let mut c = cfg(40.0 + 30.0 * s as f32, Focus::Entity(ids[s as usize % ids.len()]),
                Some(ids[s as usize % ids.len()]));
            c.margin = 5.0;
            c.budget = Some(budget / (s as usize + 1));
            r.add_subscriber(SubscriberId(s), c).unwrap();
        }
        let mut mirrors: Vec<Mirror> = (0..4).map(|_| Mirror::new()).collect();
        let mut st = seed | 1;
        let mut next = move || { st ^= st << 13; st ^= st >> 7; st ^= st << 17; (st >> 40) as f32 / 16_777_216.0 };
        let mut alive: Vec<EntityId> = ids.clone();
        for tick in 1..30u64 {
            for id in &alive {
                let (x, y) = w.pos(*id).unwrap();
                w.set_pos(*id, x + (next() - 0.5) * 8.0, y + (next() - 0.5) * 8.0).unwrap();
                if next() < 0.1 && w.kind_of(*id).unwrap() == unit {
                    w.set_f32(*id, 0, next() * 100.0).unwrap();
                }
            }
            if next() < 0.3 && alive.len() > 4 {
                let i = (next() * (alive.len() - 4) as f32) as usize + 4;
                w.despawn(alive.remove(i)).unwrap();
            }
            if next() < 0.3 {
                alive.push(w.spawn(unit, next() * 200.0, next() * 200.0).unwrap());
            }
            let mut frames = Vec::new();
            let mut over = 0u64;
            let stats = r.build(&w, tick, |_, _| true, |_| FrameInput { ack: tick as u32, events: &[] },
                |s, f| frames.push((s, f.to_vec()))).unwrap();
            for (s, f) in &frames {
                let b = r.subscriber(*s).unwrap().budget.unwrap();
                let d = mirrors[s.0 as usize].decode_apply(f, &schema).unwrap();
                // A frame may only exceed the budget (counted in `over_budget`) if the header,
                // despawns and control alone were already over, or if one item that fits beside
                // nothing else goes alone (see the module docs).
                let items = d.updates.len() + d.spawns.len();
                prop_assert!(f.len() <= b || items <= 1, "frame {} > budget {b}", f.len());
                if f.len() > b {
                    over += 1;
                }
                let known: Vec<u32> = mirrors[s.0 as usize].known().iter().map(|k| k.0).collect();
                prop_assert_eq!(known, r.known(*s).unwrap());
                // The known-set check the host sends agrees with a client that applied every frame.
                let (count, hash) = r.known_check(*s).unwrap();
                let check = zonekeep_protocol::KnownSetCheck { tick, count, hash };
                prop_assert!(mirrors[s.0 as usize].matches(&check));
            }
            // Checked as a run, as the host sends them, they are the same.
            let ids: Vec<SubscriberId> = frames.iter().map(|(s, _)| *s).collect();
            let run: Vec<(u32, u32)> = r.known_checks(ids.iter().copied()).map(Result::unwrap).collect();
            let each: Vec<(u32, u32)> = ids.iter().map(|s| r.known_check(*s).unwrap()).collect();
            prop_assert_eq!(run, each);
            prop_assert_eq!(stats.frames, 4);
            prop_assert_eq!(stats.over_budget, over);
        }
    }
}

#[test]
fn edge_oscillation_within_the_margin_sends_no_despawn_spawn_pairs() {
    let (mut w, unit, _) = world(0.01);
    let me = w.spawn(unit, 0.0, 0.0).unwrap();
    let edge = w.spawn(unit, 9.5, 0.0).unwrap();
    let schema = w.schema();
    let mut r = Replicator::new(ReplicationConfig::default());
    let mut c = cfg(10.0, Focus::Entity(me), Some(me));
    c.margin = 2.0;
    r.add_subscriber(SubscriberId(0), c).unwrap();
    let mut m = Mirror::new();
    for tick in 1..100u64 {
        let x = if tick % 2 == 1 { 9.5 } else { 11.9 };
        w.set_pos(edge, x, 0.0).unwrap();
        let (frames, _) = build_all(&mut r, &w, tick);
        let d = apply(&mut m, &frames[&0], &schema);
        if tick > 1 {
            assert!(d.despawns.is_empty() && d.spawns.is_empty(), "tick {tick}");
            assert_eq!(d.updates.len(), 1);
        }
        assert!(m.get(edge.0).is_some());
    }
}

#[test]
fn shared_bodies_keep_each_subscribers_header_and_events() {
    let (mut w, unit, _) = world(0.01);
    let ids: Vec<EntityId> = (0..30)
        .map(|i| w.spawn(unit, i as f32, 1.0).unwrap())
        .collect();
    let schema = w.schema();
    let mut r = Replicator::new(ReplicationConfig::default());
    for s in 0..3u32 {
        let mut c = cfg(f32::INFINITY, Focus::Point(0.0, 0.0), Some(ids[s as usize]));
        c.budget = (s == 2).then_some(10_000);
        r.add_subscriber(SubscriberId(s), c).unwrap();
    }
    let mut mirrors: Vec<Mirror> = (0..3).map(|_| Mirror::new()).collect();
    let payload = vec![7u8; 300];
    for tick in 1..6u64 {
        for id in &ids {
            let (x, y) = w.pos(*id).unwrap();
            w.set_pos(*id, x + 0.3, y).unwrap();
        }
        let events: Vec<(u16, &[u8])> = vec![(3, &payload[..])];
        let mut frames = Vec::new();
        let stats = r
            .build(
                &w,
                tick,
                |_, _| true,
                |s| FrameInput {
                    ack: 100 + s.0,
                    events: if s.0 == 1 { &events } else { &[] },
                },
                |s, f| frames.push((s, f.to_vec())),
            )
            .unwrap();
        assert_eq!(stats.shared_bodies, 2, "tick {tick}");
        for (s, f) in frames {
            let d = mirrors[s.0 as usize].decode_apply(&f, &schema).unwrap();
            assert_eq!(d.ack, 100 + s.0);
            assert_eq!(d.events.is_some(), s.0 == 1);
            if tick == 1 {
                assert_eq!(d.control, Some(Some(ids[s.0 as usize].0)));
            }
            for (id, e) in mirrors[s.0 as usize].iter() {
                assert_eq!((e.qx, e.qy), w.qpos(EntityId(id)).unwrap());
            }
        }
    }
}

#[test]
fn an_item_larger_than_the_budget_still_goes_alone() {
    let (mut w, unit, _) = world(0.01);
    let e = w.spawn(unit, 1.0, 1.0).unwrap();
    w.set_str(e, 1, "sixteen-chars-xx").unwrap();
    let mut r = Replicator::new(ReplicationConfig::default());
    let mut c = cfg(f32::INFINITY, Focus::Point(0.0, 0.0), None);
    c.budget = Some(16); // the spawn body alone is longer than this
    r.add_subscriber(SubscriberId(1), c).unwrap();
    let schema = w.schema();
    let mut m = Mirror::new();
    let (frames, stats) = build_all(&mut r, &w, 1);
    apply(&mut m, &frames[&1], &schema);
    assert!(m.get(e.0).is_some(), "sent despite the budget");
    assert_eq!(stats.over_budget, 1);
    // With nothing pending the next frames are back within budget.
    let (frames, stats) = build_all(&mut r, &w, 2);
    assert!(frames[&1].len() <= 16);
    assert_eq!(stats.over_budget, 0);
}

/// A view holding more than one message can carry (2,000 entities with 1 KiB of text each, with no
/// byte budget): each frame stays under the protocol's cap, the first is a BASELINE with what
/// fits, and the rest follows in later patches.
#[test]
fn a_view_larger_than_a_message_is_sent_over_several_patches_each_under_the_cap() {
    use zonekeep_protocol::limits::MAX_SERVER_MESSAGE;
    let mut w = World::new(0.1).unwrap();
    let fields = (0..4)
        .map(|i| FieldDef {
            name: format!("text{i}"),
            ty: FieldType::Str { max_len: 255 },
        })
        .collect();
    let kind = w
        .declare_kind(KindDef {
            name: "scroll".into(),
            fields,
        })
        .unwrap();
    let text = "x".repeat(255);
    for i in 0..2000 {
        let e = w.spawn(kind, i as f32, 0.0).unwrap();
        for f in 0..4 {
            w.set_str(e, f, &text).unwrap();
        }
    }
    let schema = w.schema();
    let mut r = Replicator::new(ReplicationConfig::default());
    r.add_subscriber(
        SubscriberId(1),
        cfg(f32::INFINITY, Focus::Point(0.0, 0.0), None),
    )
    .unwrap();
    let mut mirror = Mirror::new();
    let mut tick = 0;
    while mirror.len() < 2000 {
        tick += 1;
        assert!(tick < 10, "the whole view arrives within a few patches");
        let (frames, _) = build_all(&mut r, &w, tick);
        let frame = &frames[&1];
        assert!(
            frame.len() <= MAX_SERVER_MESSAGE,
            "a frame of {} bytes",
            frame.len()
        );
        let d = apply(&mut mirror, frame, &schema);
        assert_eq!(d.baseline, tick == 1);
    }
    assert!(tick > 1, "one message could not hold it all");
}

#[test]
fn known_set_checks_in_a_run_match_what_each_client_holds() {
    let (mut w, unit, _) = world(0.05);
    let near = w.spawn(unit, 1.0, 1.0).unwrap();
    w.spawn(unit, 500.0, 500.0).unwrap();
    let mut r = Replicator::new(ReplicationConfig::default());
    // Three see everything (one sent state, shared), the fourth only what is near it.
    let ids: Vec<SubscriberId> = (1..=4).map(SubscriberId).collect();
    for s in &ids[..3] {
        r.add_subscriber(*s, cfg(f32::INFINITY, Focus::Point(0.0, 0.0), None))
            .unwrap();
    }
    r.add_subscriber(ids[3], cfg(10.0, Focus::Point(0.0, 0.0), None))
        .unwrap();
    let schema = w.schema();
    let mut mirrors: Vec<Mirror> = ids.iter().map(|_| Mirror::new()).collect();
    for tick in 1..=3 {
        w.set_pos(near, tick as f32, 1.0).unwrap();
        let (frames, _) = build_all(&mut r, &w, tick);
        for (i, s) in ids.iter().enumerate() {
            apply(&mut mirrors[i], &frames[&s.0], &schema);
        }
        // Interleaved, so the shared state is hashed, then another, then the shared one again.
        let order = [ids[0], ids[3], ids[1], SubscriberId(99), ids[2]];
        let checks: Vec<_> = r.known_checks(order).collect();
        assert!(matches!(
            checks[3],
            Err(ReplicateError::UnknownSubscriber(_))
        ));
        for (s, check) in order.iter().zip(&checks) {
            let Some(i) = ids.iter().position(|x| x == s) else {
                continue;
            };
            let &Ok((count, hash)) = check else {
                panic!("no check for {s:?}");
            };
            assert_eq!((count, hash), r.known_check(*s).unwrap());
            let check = zonekeep_protocol::KnownSetCheck { tick, count, hash };
            assert!(
                mirrors[i].matches(&check),
                "subscriber {s:?} at tick {tick}"
            );
        }
        assert_eq!(checks[0].as_ref().unwrap().0, 2);
        assert_eq!(checks[1].as_ref().unwrap().0, 1);
    }
}
