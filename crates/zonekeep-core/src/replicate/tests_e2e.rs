#![allow(clippy::unwrap_used, clippy::expect_used)]
//! End to end: every frame decoded by `zonekeep_protocol`'s client mirror, compared with the world.

use super::tests::world;
use super::*;
use proptest::prelude::*;
use zonekeep_protocol::mirror::Mirror;
use zonekeep_protocol::schema::Schema;

/// The mirror holds exactly `expect_ids`, each with the world's current kind, quantized position and
/// field values.
pub(super) fn assert_mirror_matches(m: &Mirror, w: &World, expect_ids: &[u32]) {
    let ids: Vec<u32> = m.known().iter().map(|k| k.0).collect();
    assert_eq!(ids, expect_ids);
    for (id, e) in m.iter() {
        let we = w.get(EntityId(id)).unwrap();
        assert_eq!(e.kind, we.kind.0, "kind of {id}");
        assert_eq!((e.qx, e.qy), (we.qx, we.qy), "position of {id}");
        assert_eq!(e.fields.as_slice(), we.values, "fields of {id}");
    }
}

/// A seeded xorshift: the same worlds on every run.
pub(super) struct Rng(pub(super) u64);
impl Rng {
    /// Uniform in [0, 1).
    pub(super) fn f(&mut self) -> f32 {
        let s = &mut self.0;
        *s ^= *s << 13;
        *s ^= *s >> 7;
        *s ^= *s << 17;
        (*s >> 40) as f32 / 16_777_216.0
    }
}

fn run(seed: u64, budgeted: bool) {
    let mut rng = Rng(seed | 1);
    let (mut w, unit, item) = world(0.05);
    let mut alive: Vec<EntityId> = (0..80)
        .map(|i| {
            let k = if i % 3 == 0 { item } else { unit };
            w.spawn(k, rng.f() * 300.0, rng.f() * 300.0).unwrap()
        })
        .collect();
    let schema: Schema = w.schema();
    let mut r = Replicator::new(ReplicationConfig {
        cell_size: 40.0,
        priority_distance: 20.0,
    });
    let subs: Vec<SubscriberConfig> = vec![
        SubscriberConfig {
            radius: 60.0,
            margin: 10.0,
            budget: None,
            focus: Focus::Entity(alive[1]),
            control: Some(alive[1]),
        },
        SubscriberConfig {
            radius: 60.0,
            margin: 10.0,
            budget: None,
            focus: Focus::Entity(alive[1]),
            control: Some(alive[1]),
        },
        SubscriberConfig {
            radius: 90.0,
            margin: 0.0,
            budget: None,
            focus: Focus::Point(150.0, 150.0),
            control: None,
        },
        SubscriberConfig {
            radius: f32::INFINITY,
            margin: 0.0,
            budget: if budgeted { Some(300) } else { None },
            focus: Focus::Entity(alive[2]),
            control: Some(alive[2]),
        },
    ];
    for (i, c) in subs.iter().enumerate() {
        r.add_subscriber(SubscriberId(i as u32), *c).unwrap();
    }
    let mut mirrors: Vec<Mirror> = (0..subs.len()).map(|_| Mirror::new()).collect();
    let hide = |s: SubscriberId, e: EntityId| !(s.0 == 2 && e.0 % 5 == 0);
    for tick in 1..=120u64 {
        let moving = tick <= 80;
        if moving {
            for id in alive.clone() {
                let (x, y) = w.pos(id).unwrap();
                w.set_pos(id, x + (rng.f() - 0.5) * 12.0, y + (rng.f() - 0.5) * 12.0)
                    .unwrap();
                if rng.f() < 0.05 {
                    if w.kind_of(id).unwrap() == unit {
                        w.set_f32(id, 0, rng.f() * 100.0).unwrap();
                        w.set_str(id, 1, if rng.f() < 0.5 { "a" } else { "bb" })
                            .unwrap();
                        w.set_f32(id, 2, rng.f() * 7.0).unwrap();
                    } else {
                        w.set_uint(id, 0, (rng.f() * 1000.0) as u32).unwrap();
                    }
                }
            }
            if rng.f() < 0.3 && alive.len() > 10 {
                let i = 3 + (rng.f() * (alive.len() - 3) as f32) as usize;
                let i = i.min(alive.len() - 1);
                w.despawn(alive.remove(i)).unwrap();
            }
            if rng.f() < 0.3 {
                alive.push(w.spawn(unit, rng.f() * 300.0, rng.f() * 300.0).unwrap());
            }
            if rng.f() < 0.1 {
                let id = alive[(rng.f() * alive.len() as f32) as usize % alive.len()];
                let g = w.is_global(id).unwrap();
                w.set_global(id, !g).unwrap();
            }
        }
        if tick == 50 {
            r.reset_subscriber(SubscriberId(1)).unwrap();
            mirrors[1] = Mirror::new();
        }
        let mut frames: Vec<(SubscriberId, Vec<u8>)> = Vec::new();
        r.build(
            &w,
            tick,
            hide,
            |_| FrameInput::default(),
            |s, f| frames.push((s, f.to_vec())),
        )
        .unwrap();
        for (s, f) in frames {
            let m = &mut mirrors[s.0 as usize];
            m.decode_apply(&f, &schema).unwrap();
            let known = r.known(s).unwrap();
            let exact = r.subscriber(s).unwrap().budget.is_none() || tick > 110;
            if exact {
                assert_mirror_matches(m, &w, &known);
                let visible = r.subs[s.0 as usize].view.visible().to_vec();
                assert_eq!(known, visible, "subscriber {s:?} holds its whole view");
            } else {
                let ids: Vec<u32> = m.known().iter().map(|k| k.0).collect();
                assert_eq!(ids, known);
            }
        }
    }
}

#[test]
fn mirrors_equal_the_visible_world_after_every_patch() {
    for seed in [1u64, 2, 3, 0xdead_beef] {
        run(seed, false);
    }
}

#[test]
fn budgeted_mirror_converges_once_motion_stops() {
    for seed in [5u64, 6] {
        run(seed, true);
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 8, .. ProptestConfig::default() })]
    #[test]
    fn random_worlds_replicate_exactly(seed in any::<u64>(), budgeted in any::<bool>()) {
        run(seed, budgeted);
    }
}
