#![allow(clippy::unwrap_used, clippy::expect_used)]

use super::*;
use zonekeep_protocol::quant::pos_decode;
use zonekeep_protocol::schema::{FieldDef, FieldType};

pub(super) fn unit_kind() -> KindDef {
    KindDef {
        name: "unit".into(),
        fields: vec![
            FieldDef {
                name: "hp".into(),
                ty: FieldType::Quant {
                    min: 0.0,
                    max: 100.0,
                    bits: 7,
                },
            },
            FieldDef {
                name: "heading".into(),
                ty: FieldType::Angle { bits: 8 },
            },
            FieldDef {
                name: "level".into(),
                ty: FieldType::UInt,
            },
            FieldDef {
                name: "name".into(),
                ty: FieldType::Str { max_len: 8 },
            },
            FieldDef {
                name: "alive".into(),
                ty: FieldType::Bool,
            },
            FieldDef {
                name: "dz".into(),
                ty: FieldType::SInt,
            },
            FieldDef {
                name: "raw".into(),
                ty: FieldType::F32,
            },
        ],
    }
}

fn world() -> (World, KindId) {
    let mut w = World::new(0.01).unwrap();
    let k = w.declare_kind(unit_kind()).unwrap();
    (w, k)
}

#[test]
fn ids_are_monotonic_and_never_reused() {
    let (mut w, k) = world();
    let a = w.spawn(k, 0.0, 0.0).unwrap();
    let b = w.spawn(k, 1.0, 0.0).unwrap();
    w.despawn(a).unwrap();
    let c = w.spawn(k, 2.0, 0.0).unwrap();
    assert_eq!((a.0, b.0, c.0), (0, 1, 2));
    assert_eq!(w.pos(a), Err(WorldError::UnknownEntity(0)));
    assert_eq!(w.despawn(a), Err(WorldError::UnknownEntity(0)));
    assert_eq!(w.len(), 2);
    assert_eq!(w.iter().map(|e| e.id.0).collect::<Vec<_>>(), vec![1, 2]);
}

#[test]
fn compaction_keeps_order_and_lookups() {
    let (mut w, k) = world();
    let ids: Vec<EntityId> = (0..3000)
        .map(|i| w.spawn(k, i as f32, 0.0).unwrap())
        .collect();
    for id in ids.iter().filter(|id| id.0 % 3 != 0) {
        w.despawn(*id).unwrap();
    }
    assert_eq!(w.len(), 1000);
    assert!(w.columns().ids.len() < 3000, "tombstones were compacted");
    assert!(w.columns().ids.windows(2).all(|p| p[0] < p[1]));
    for id in ids.iter().filter(|id| id.0 % 3 == 0) {
        assert_eq!(w.pos(*id).unwrap(), (id.0 as f32, 0.0));
    }
    // Fully despawned id pages are freed.
    let mut w2 = World::new(1.0).unwrap();
    let k2 = w2.declare_kind(unit_kind()).unwrap();
    for _ in 0..5000 {
        let e = w2.spawn(k2, 0.0, 0.0).unwrap();
        w2.despawn(e).unwrap();
    }
    assert!(w2.map.allocated_pages() <= 1);
}

#[test]
fn setters_quantize_on_write_and_check_types() {
    let (mut w, k) = world();
    let e = w.spawn(k, 1.234_56, -7.891).unwrap();
    assert_eq!(w.qpos(e).unwrap(), (123, -789));
    assert_eq!(pos_decode(123, 0.01), 1.23);
    let hp = w.field_index(e, "hp").unwrap();
    w.set_f32(e, hp, 50.3).unwrap();
    assert_eq!(w.field(e, hp).unwrap(), &FieldValue::Q(64));
    let decoded = w.get_f32(e, hp).unwrap();
    assert!((decoded - 50.3).abs() <= 100.0 / 127.0 / 2.0);
    assert_eq!(
        w.set_uint(e, hp, 3),
        Err(WorldError::WrongFieldType {
            field: hp,
            expected: "quant",
            got: "uint"
        })
    );
    assert_eq!(
        w.set_str(e, 3, "much too long"),
        Err(WorldError::StrTooLong { len: 13, max: 8 })
    );
    w.set_str(e, 3, "bob").unwrap();
    assert_eq!(w.get_str(e, 3).unwrap(), "bob");
    w.set_bool(e, 4, true).unwrap();
    w.set_int(e, 5, -4).unwrap();
    w.set_f32(e, 6, 0.1).unwrap();
    w.set_uint(e, 2, 9).unwrap();
    assert!(w.get_bool(e, 4).unwrap());
    assert_eq!(w.get_int(e, 5).unwrap(), -4);
    assert_eq!(w.get_f32(e, 6).unwrap(), 0.1);
    assert_eq!(w.get_uint(e, 2).unwrap(), 9);
    assert_eq!(
        w.set_uint(e, 99, 1),
        Err(WorldError::UnknownField { kind: 0, field: 99 })
    );
    assert!(matches!(
        w.field_index(e, "nope"),
        Err(WorldError::UnknownFieldName { .. })
    ));
    assert_eq!(
        w.spawn(KindId(7), 0.0, 0.0),
        Err(WorldError::UnknownKind(7))
    );
    assert_eq!(w.declare_kind(unit_kind()), Err(WorldError::SchemaFrozen));
    assert!(World::new(0.0).is_err());
}

#[test]
fn changes_are_stamped_only_when_the_value_changes() {
    let (mut w, k) = world();
    let e = w.spawn(k, 0.0, 0.0).unwrap();
    let v0 = w.version();
    w.set_f32(e, 0, 0.1).unwrap(); // quantizes to the same code as the default 0.0
    w.set_uint(e, 2, 0).unwrap();
    assert_eq!(w.version(), v0);
    w.set_uint(e, 2, 5).unwrap();
    assert!(w.version() > v0);
    let r = w.rank_of(e).unwrap();
    assert_eq!(w.rank_changed(r).unwrap()[2], w.version());
    assert!(w.rank_changed(r).unwrap()[0] < w.version());
    assert_eq!(w.rank_last_change(r), w.version());
}

#[test]
fn hash_follows_replicated_values_only() {
    let (mut w, k) = world();
    let e = w.spawn(k, 10.0, 10.0).unwrap();
    let h0 = w.hash();
    assert_eq!(w.hash(), h0, "stable");
    w.set_pos(e, 10.001, 10.0).unwrap(); // below the quantum: clients see nothing
    assert_eq!(w.hash(), h0);
    w.set_f32(e, 0, 0.2).unwrap(); // same hp code
    assert_eq!(w.hash(), h0);
    let mut last = h0;
    let mut check = |w: &World| {
        let h = w.hash();
        assert_ne!(h, last, "hash must change");
        last = h;
    };
    w.set_pos(e, 10.02, 10.0).unwrap();
    check(&w);
    w.set_f32(e, 0, 60.0).unwrap();
    check(&w);
    w.set_f32(e, 1, 1.0).unwrap();
    check(&w);
    w.set_uint(e, 2, 1).unwrap();
    check(&w);
    w.set_str(e, 3, "x").unwrap();
    check(&w);
    w.set_bool(e, 4, true).unwrap();
    check(&w);
    w.set_int(e, 5, -1).unwrap();
    check(&w);
    w.set_f32(e, 6, 2.5).unwrap();
    check(&w);
    w.set_global(e, true).unwrap();
    check(&w);
    let f = w.spawn(k, 0.0, 0.0).unwrap();
    check(&w);
    w.despawn(f).unwrap();
    check(&w);
}

#[test]
fn schema_carries_the_kinds() {
    let (w, _) = world();
    let s = w.schema();
    assert_eq!(s.pos_step, 0.01);
    assert_eq!(s.kinds, vec![unit_kind()]);
    s.validate().unwrap();
}

#[test]
fn the_state_hash_from_its_cache_equals_the_hash_computed_afresh() {
    // The hash reads the field words of unchanged entities from its cache: through spawns,
    // field writes, moves, despawns and compactions it must equal a hash with no cache.
    let (mut w, k) = world();
    let mut live: Vec<EntityId> = (0..150)
        .map(|i| w.spawn(k, i as f32, 0.0).unwrap())
        .collect();
    let mut rng = 0x2545_f491_4f6c_dd1du64;
    let mut next = move || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng
    };
    let layout_before = w.layout;
    for step in 0..600u64 {
        let pick = live[(next() % live.len() as u64) as usize];
        match next() % 6 {
            0 => w.set_uint(pick, 2, (next() % 50) as u32).unwrap(),
            1 => w.set_f32(pick, 0, (next() % 100) as f32).unwrap(),
            2 => w.set_pos(pick, (next() % 500) as f32, 1.0).unwrap(),
            3 | 4 if live.len() > 10 => {
                w.despawn(pick).unwrap();
                live.retain(|e| *e != pick);
            }
            _ => live.push(w.spawn(k, 3.0, 4.0).unwrap()),
        }
        if step % 3 == 0 {
            let mut fresh = w.clone();
            *fresh.words.get_mut() = WordCache::default();
            assert_eq!(w.hash(), fresh.hash(), "step {step}");
        }
    }
    assert!(w.layout > layout_before, "the run compacted the world");
}
