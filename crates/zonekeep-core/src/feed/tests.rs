//! A replica fed by the feed holds its origin's world exactly and the replicator writes the same
//! bytes over either; a delta that is malformed, missed, repeated or does not fit is refused and
//! changes nothing.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use super::*;
use crate::replicate::{
    Focus, FrameInput, ReplicationConfig, Replicator, SubscriberConfig, SubscriberId,
};
use crate::world::{EntityId, KindId, World};
use proptest::prelude::*;
use std::collections::BTreeMap;
use zonekeep_protocol::schema::{FieldDef, FieldType, FieldValue, KindDef};
use zonekeep_protocol::wire::{put_f32, put_varint};

/// A world of two kinds: `unit` (a quantized `hp`, a `name`, an exact `f32` speed) and `item`
/// (a `count`).
fn world() -> (World, KindId, KindId) {
    let mut w = World::new(0.1).unwrap();
    let unit = w
        .declare_kind(KindDef {
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
                    ty: FieldType::Str { max_len: 8 },
                },
                FieldDef {
                    name: "speed".into(),
                    ty: FieldType::F32,
                },
            ],
        })
        .unwrap();
    let item = w
        .declare_kind(KindDef {
            name: "item".into(),
            fields: vec![FieldDef {
                name: "count".into(),
                ty: FieldType::UInt,
            }],
        })
        .unwrap();
    (w, unit, item)
}

/// One change to the origin's world.
#[derive(Debug, Clone)]
enum Op {
    Spawn(bool, f32, f32),
    Despawn(usize),
    /// A move to a new x, and a step along y smaller than the position quantum.
    Move(usize, f32, f32),
    /// A step along y alone, smaller than the quantum: only the true position changes.
    Nudge(usize, f32),
    Hp(usize, f32),
    Name(usize, u8),
    Speed(usize, f32),
    Count(usize, u32),
    Global(usize, bool),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        (any::<bool>(), -200.0f32..200.0, -200.0f32..200.0)
            .prop_map(|(u, x, y)| Op::Spawn(u, x, y)),
        (0usize..64).prop_map(Op::Despawn),
        (0usize..64, -200.0f32..200.0, -0.04f32..0.04).prop_map(|(i, x, dy)| Op::Move(i, x, dy)),
        (0usize..64, -0.04f32..0.04).prop_map(|(i, dy)| Op::Nudge(i, dy)),
        (0usize..64, 0.0f32..100.0).prop_map(|(i, v)| Op::Hp(i, v)),
        (0usize..64, 0u8..4).prop_map(|(i, n)| Op::Name(i, n)),
        (0usize..64, -5.0f32..5.0).prop_map(|(i, v)| Op::Speed(i, v)),
        (0usize..64, 0u32..1000).prop_map(|(i, v)| Op::Count(i, v)),
        (0usize..64, any::<bool>()).prop_map(|(i, g)| Op::Global(i, g)),
    ]
}

/// Applies `op` to the origin (ops that do not fit the entity's kind change nothing).
fn apply_op(w: &mut World, ids: &mut Vec<EntityId>, (unit, item): (KindId, KindId), op: &Op) {
    let pick = |i: usize| ids.get(i % ids.len().max(1)).copied();
    match *op {
        Op::Spawn(u, x, y) => ids.push(w.spawn(if u { unit } else { item }, x, y).unwrap()),
        Op::Despawn(i) => {
            if !ids.is_empty() {
                let id = ids.remove(i % ids.len());
                w.despawn(id).unwrap();
            }
        }
        Op::Move(i, x, dy) => {
            if let Some(id) = pick(i) {
                let (_, y) = w.pos(id).unwrap();
                w.set_pos(id, x, y + dy).unwrap();
            }
        }
        Op::Nudge(i, dy) => {
            if let Some(id) = pick(i) {
                let (x, y) = w.pos(id).unwrap();
                w.set_pos(id, x, y + dy).unwrap();
            }
        }
        Op::Hp(i, v) => {
            if let Some(id) = pick(i) {
                let _ = w.set_f32(id, 0, v);
            }
        }
        Op::Name(i, n) => {
            if let Some(id) = pick(i) {
                let _ = w.set_str(id, 1, &"ab".repeat(usize::from(n)));
            }
        }
        Op::Speed(i, v) => {
            if let Some(id) = pick(i) {
                let _ = w.set_f32(id, 2, v);
            }
        }
        Op::Count(i, v) => {
            if let Some(id) = pick(i) {
                let _ = w.set_uint(id, 0, v);
            }
        }
        Op::Global(i, g) => {
            if let Some(id) = pick(i) {
                w.set_global(id, g).unwrap();
            }
        }
    }
}

/// What the replicator reads of one entity: id, kind, true x and y (bits), global, the values'
/// wire bytes, the change stamps.
type Contents = (u32, u32, u32, u32, bool, Vec<u8>, Vec<u64>);

/// Everything the replicator reads of every live entity.
fn contents(w: &World) -> Vec<Contents> {
    w.iter()
        .map(|e| {
            let rank = w.rank_of(e.id).unwrap();
            let mut values = Vec::new();
            for (def, v) in w.kinds()[e.kind.0 as usize].fields.iter().zip(e.values) {
                def.ty.encode_value(v, &mut values).unwrap();
            }
            (
                e.id.0,
                e.kind.0,
                e.x.to_bits(),
                e.y.to_bits(),
                e.global,
                values,
                w.rank_changed(rank).unwrap().to_vec(),
            )
        })
        .collect()
}

fn assert_same(origin: &World, replica: &Replica) {
    let w = replica.world();
    assert_eq!(w.version(), origin.version());
    assert_eq!(w.next_id(), origin.next_id());
    assert_eq!(w.hash(), origin.hash());
    assert_eq!(contents(w), contents(origin));
}

/// Subscribers of every shape: near and far, following an entity, under a byte budget, and one
/// that sees everything.
fn subscribers(first: EntityId) -> Replicator {
    let mut r = Replicator::new(ReplicationConfig::default());
    let shapes = [
        (60.0, Focus::Point(0.0, 0.0), None, None),
        (30.0, Focus::Entity(first), Some(first), None),
        (80.0, Focus::Point(-50.0, 40.0), None, Some(200)),
        (f32::INFINITY, Focus::Point(0.0, 0.0), None, None),
    ];
    for (s, (radius, focus, control, budget)) in shapes.into_iter().enumerate() {
        let cfg = SubscriberConfig {
            radius,
            margin: 4.0,
            budget,
            focus,
            control,
        };
        r.add_subscriber(SubscriberId(s as u32), cfg).unwrap();
    }
    r
}

fn frames(r: &mut Replicator, w: &World, tick: u64) -> BTreeMap<u32, Vec<u8>> {
    let mut out = BTreeMap::new();
    r.build(
        w,
        tick,
        |_, _| true,
        |_| FrameInput::default(),
        |s, b| {
            out.insert(s.0, b.to_vec());
        },
    )
    .unwrap();
    out
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]
    #[test]
    fn a_replica_holds_its_world_exactly_and_the_replicator_writes_the_same_bytes_over_it(
        start in prop::collection::vec((any::<bool>(), -200.0f32..200.0, -200.0f32..200.0), 1..40),
        patches in prop::collection::vec(prop::collection::vec(op(), 0..12), 1..16),
        late in 0usize..16,
    ) {
        let (mut origin, unit, item) = world();
        let mut ids = Vec::new();
        for &(u, x, y) in &start {
            apply_op(&mut origin, &mut ids, (unit, item), &Op::Spawn(u, x, y));
        }
        let mut feed = WorldFeed::new(&origin);
        let mut image = Vec::new();
        WorldFeed::image(&origin, &mut image);
        let mut replica = Replica::from_image(&image).unwrap();
        assert_same(&origin, &replica);
        // A second replica joins later, from an image taken right after a delta.
        let mut joined: Option<Replica> = None;

        let mut at_origin = subscribers(ids[0]);
        let mut at_replica = at_origin.clone();
        for (t, patch) in patches.iter().enumerate() {
            for op in patch {
                apply_op(&mut origin, &mut ids, (unit, item), op);
            }
            let mut delta = Vec::new();
            feed.delta(&origin, &mut delta).unwrap();
            prop_assert_eq!(feed.version(), origin.version());
            replica.apply(&delta).unwrap();
            assert_same(&origin, &replica);
            if let Some(j) = joined.as_mut() {
                j.apply(&delta).unwrap();
                assert_same(&origin, j);
            }
            if t == late {
                let mut image = Vec::new();
                WorldFeed::image(&origin, &mut image);
                joined = Some(Replica::from_image(&image).unwrap());
            }
            let tick = t as u64 + 1;
            let direct = frames(&mut at_origin, &origin, tick);
            let relayed = frames(&mut at_replica, replica.world(), tick);
            prop_assert_eq!(direct, relayed, "tick {}", tick);
        }
    }
}

/// The origin's world after a few changes, its feed at the start, a replica, and the delta.
fn one_delta() -> (World, Replica, Vec<u8>) {
    let (mut origin, unit, item) = world();
    let a = origin.spawn(unit, 1.0, 2.0).unwrap();
    let b = origin.spawn(item, 3.0, 4.0).unwrap();
    let c = origin.spawn(unit, 5.0, 6.0).unwrap();
    let mut feed = WorldFeed::new(&origin);
    let mut image = Vec::new();
    WorldFeed::image(&origin, &mut image);
    let replica = Replica::from_image(&image).unwrap();
    origin.set_pos(a, 10.0, 20.0).unwrap();
    origin.set_uint(b, 0, 7).unwrap();
    origin.despawn(c).unwrap();
    origin.set_global(b, true).unwrap();
    let d = origin.spawn(unit, -1.0, -2.0).unwrap();
    origin.set_str(d, 1, "dee").unwrap();
    let mut delta = Vec::new();
    feed.delta(&origin, &mut delta).unwrap();
    (origin, replica, delta)
}

#[test]
fn a_delta_missed_or_repeated_is_a_gap_and_changes_nothing() {
    let (mut origin, mut replica, first) = one_delta();
    let mut feed = WorldFeed::new(&origin);
    let id = origin.iter().next().unwrap().id;
    origin.set_pos(id, 99.0, 99.0).unwrap();
    origin.set_f32(id, 0, 50.0).unwrap();
    let mut second = Vec::new();
    feed.delta(&origin, &mut second).unwrap();

    let before = contents(replica.world());
    assert!(matches!(replica.apply(&second), Err(FeedError::Gap { .. })));
    assert_eq!(contents(replica.world()), before);
    replica.apply(&first).unwrap();
    let after_first = contents(replica.world());
    assert!(matches!(replica.apply(&first), Err(FeedError::Gap { .. })));
    assert_eq!(contents(replica.world()), after_first);
    replica.apply(&second).unwrap();
    assert_same(&origin, &replica);
}

#[test]
fn a_patch_with_nothing_changed_is_a_delta_of_no_rows() {
    let (origin, mut replica, delta) = one_delta();
    replica.apply(&delta).unwrap();
    let mut feed = WorldFeed::new(&origin);
    let mut empty = Vec::new();
    feed.delta(&origin, &mut empty).unwrap();
    // base, version, next id, no despawns, no rows.
    assert_eq!(empty.len(), 5);
    replica.apply(&empty).unwrap();
    assert_same(&origin, &replica);
}

#[test]
fn every_truncation_of_a_delta_is_refused_and_changes_nothing() {
    let (origin, replica, delta) = one_delta();
    let before = contents(replica.world());
    for len in 0..delta.len() {
        let mut r = replica.clone();
        assert!(
            r.apply(&delta[..len]).is_err(),
            "{len} of {} bytes",
            delta.len()
        );
        assert_eq!(contents(r.world()), before, "{len} bytes");
        assert_eq!(r.version(), replica.version());
    }
    let mut longer = delta.clone();
    longer.push(0);
    let mut r = replica.clone();
    assert!(matches!(
        r.apply(&longer),
        Err(FeedError::Decode(DecodeError::TrailingBytes(1)))
    ));
    let mut r = replica.clone();
    r.apply(&delta).unwrap();
    assert_same(&origin, &r);
}

#[test]
fn every_corrupted_byte_is_refused_or_applied_whole_never_half() {
    let (_, replica, delta) = one_delta();
    let before = contents(replica.world());
    for i in 0..delta.len() {
        for flip in [0x01u8, 0x80, 0xFF] {
            let mut bad = delta.clone();
            bad[i] ^= flip;
            let mut r = replica.clone();
            if r.apply(&bad).is_err() {
                assert_eq!(contents(r.world()), before, "byte {i} ^ {flip:#x}");
                assert_eq!(r.version(), replica.version());
            }
        }
    }
}

/// A delta from `replica`'s version written by hand: despawned ids and rows as given.
fn crafted(replica: &Replica, version: u64, next: u32, gone: &[u64], rows: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    put_varint(&mut out, replica.version());
    put_varint(&mut out, version);
    put_varint(&mut out, u64::from(next));
    put_varint(&mut out, gone.len() as u64);
    for &g in gone {
        put_varint(&mut out, g);
    }
    out.extend_from_slice(rows);
    out
}

/// One row of a crafted delta (the row count 1 first).
fn row(gap: u64, parts: u8, tail: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    put_varint(&mut out, 1);
    put_varint(&mut out, gap);
    out.push(parts);
    out.extend_from_slice(tail);
    out
}

/// A position, then one field's value bytes and stamp (a row's `MOVE` and `FIELDS` parts).
fn parts_of(pos: bool, fields: &[(u64, &[u8], u64)]) -> Vec<u8> {
    let mut out = Vec::new();
    if pos {
        put_f32(&mut out, 1.0);
        put_f32(&mut out, 1.0);
    }
    if !fields.is_empty() {
        put_varint(&mut out, fields.len() as u64);
        for &(f, value, stamp) in fields {
            put_varint(&mut out, f);
            out.extend_from_slice(value);
            put_varint(&mut out, stamp);
        }
    }
    out
}

#[test]
fn deltas_that_do_not_fit_the_replica_are_refused_with_what_is_wrong() {
    let (_, replica, _) = one_delta();
    let v = replica.version();
    let next = replica.world().next_id();
    let refused = |delta: Vec<u8>, why: &str| {
        let mut r = replica.clone();
        let err = r.apply(&delta).unwrap_err();
        assert!(err.to_string().contains(why), "{why}: got {err}");
        assert_eq!(contents(r.world()), contents(replica.world()), "{why}");
    };
    let no_rows = [0u8];
    refused(
        crafted(&replica, v - 1, next, &[], &no_rows),
        "goes back in versions",
    );
    refused(
        crafted(&replica, v, next - 1, &[], &no_rows),
        "takes back issued ids",
    );
    refused(
        crafted(&replica, v, next, &[7], &no_rows),
        "despawns an unknown entity",
    );
    refused(
        crafted(&replica, v, next, &[0, 0], &no_rows),
        "do not ascend",
    );
    let moved = parts_of(true, &[]);
    refused(
        crafted(&replica, v, next, &[], &row(40, MOVE, &moved)),
        "unknown entity",
    );
    refused(
        crafted(&replica, v, next, &[], &row(0, 0x10, &[])),
        "unknown bits",
    );
    // A spawn (kind 1, `item`: its one field) under an id already issued, and one past the
    // delta's own next id.
    let mut spawn = vec![1u8];
    spawn.extend(parts_of(true, &[(0, &[5], v + 1)]));
    let spawn_at = |id: u32, next_after: u32| {
        crafted(
            &replica,
            v + 1,
            next_after,
            &[],
            &row(u64::from(id), SPAWN | FIELDS, &spawn),
        )
    };
    refused(spawn_at(0, next + 1), "not new");
    refused(spawn_at(next, next), "not new");
    // A field past its kind, a value its field cannot hold, a stamp outside the delta.
    let field = |f: u64, value: &[u8], stamp: u64| {
        crafted(
            &replica,
            v + 1,
            next,
            &[],
            &row(0, FIELDS, &parts_of(false, &[(f, value, stamp)])),
        )
    };
    refused(field(5, &[3], v + 1), "past its kind");
    refused(field(0, &[0x88, 0x27], v + 1), "out of range");
    refused(field(0, &[3], v), "stamp outside");
    refused(field(0, &[3], v + 2), "stamp outside");
    // A spawn past the replica's cap; the same spawn fits an uncapped replica.
    let mut capped = replica.clone();
    capped.set_max_entities(capped.world().len());
    assert!(matches!(
        capped.apply(&spawn_at(next, next + 1)),
        Err(FeedError::EntityCap { .. })
    ));
    let mut r = replica.clone();
    r.apply(&spawn_at(next, next + 1)).unwrap();
    assert_eq!(r.world().len(), replica.world().len() + 1);
    assert_eq!(
        r.world().get(EntityId(next)).unwrap().values,
        &[FieldValue::U(5)]
    );
}

#[test]
fn an_image_that_is_not_one_is_refused() {
    assert!(matches!(
        Replica::from_image(&[]),
        Err(FeedError::Decode(_))
    ));
    let (origin, _, _) = one_delta();
    let mut image = Vec::new();
    WorldFeed::image(&origin, &mut image);
    image.push(0);
    assert!(matches!(
        Replica::from_image(&image),
        Err(FeedError::Decode(DecodeError::TrailingBytes(1)))
    ));
}

/// The origin despawns a big world in scrambled order and the replica in id order, so after a
/// compaction each keeps other tombstones and the same entity has other ranks in each: still the
/// replicator writes the same bytes over either.
#[test]
fn compactions_at_other_moments_change_no_frame() {
    let (mut origin, unit, item) = world();
    let ids: Vec<EntityId> = (0..300)
        .map(|i| {
            let kind = if i % 3 == 0 { item } else { unit };
            origin
                .spawn(kind, (i % 40) as f32 * 3.0 - 60.0, (i / 40) as f32 * 5.0)
                .unwrap()
        })
        .collect();
    let mut feed = WorldFeed::new(&origin);
    let mut image = Vec::new();
    WorldFeed::image(&origin, &mut image);
    let mut replica = Replica::from_image(&image).unwrap();
    let mut at_origin = subscribers(ids[1]);
    let mut at_replica = at_origin.clone();
    for tick in 1..=4u64 {
        if tick > 1 {
            // 100 a patch, in the order 7k mod 300.
            for k in (tick - 2) * 100..(tick - 1) * 100 {
                let id = ids[(k as usize * 7) % 300];
                if origin.contains(id) {
                    origin.despawn(id).unwrap();
                }
            }
        }
        let mut delta = Vec::new();
        feed.delta(&origin, &mut delta).unwrap();
        replica.apply(&delta).unwrap();
        assert_same(&origin, &replica);
        if tick == 3 {
            let ranks = |w: &World| ids.iter().map(|&id| w.rank_of(id)).collect::<Vec<_>>();
            assert_ne!(ranks(&origin), ranks(replica.world()));
        }
        assert_eq!(
            frames(&mut at_origin, &origin, tick),
            frames(&mut at_replica, replica.world(), tick),
            "tick {tick}"
        );
    }
    assert_eq!(origin.len(), 0);
}
