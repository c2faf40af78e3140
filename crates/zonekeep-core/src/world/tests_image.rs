#![allow(clippy::unwrap_used, clippy::expect_used)]

use super::tests::unit_kind;
use super::*;
use proptest::prelude::*;
use zonekeep_protocol::error::DecodeError;
use zonekeep_protocol::wire::Reader;

/// A kind without fields: its rows carry no values and no stamps.
fn marker_kind() -> KindDef {
    KindDef {
        name: "marker".into(),
        fields: Vec::new(),
    }
}

fn world() -> (World, KindId, KindId) {
    let mut w = World::new(0.01).unwrap();
    let unit = w.declare_kind(unit_kind()).unwrap();
    let marker = w.declare_kind(marker_kind()).unwrap();
    (w, unit, marker)
}

fn image(w: &World) -> Vec<u8> {
    let mut out = Vec::new();
    w.put_image(&mut out);
    out
}

fn read(bytes: &[u8]) -> Result<World, DecodeError> {
    let mut r = Reader::new(bytes);
    let w = World::get_image(&mut r)?;
    r.finish()?;
    Ok(w)
}

/// Writes and reads `w` back, checks the copy is the same world, and returns it.
fn round_trip(w: &World) -> World {
    let bytes = image(w);
    let copy = read(&bytes).unwrap();
    assert_same(w, &copy);
    assert_eq!(image(&copy), bytes, "the copy writes the same image");
    copy
}

fn bits(v: &[f32]) -> Vec<u32> {
    v.iter().map(|f| f.to_bits()).collect()
}

/// Every field equal (floats by bit pattern), the id maps equal, and what callers observe equal.
fn assert_same(a: &World, b: &World) {
    assert_eq!(a.pos_step.to_bits(), b.pos_step.to_bits());
    assert_eq!(a.kinds, b.kinds);
    assert_eq!(a.ids, b.ids);
    assert_eq!(bits(&a.xs), bits(&b.xs));
    assert_eq!(bits(&a.ys), bits(&b.ys));
    assert_eq!(a.qxs, b.qxs);
    assert_eq!(a.qys, b.qys);
    assert_eq!(a.flags, b.flags);
    assert_eq!(a.kind_of, b.kind_of);
    assert_eq!(a.values.len(), b.values.len());
    for (va, vb) in a.values.iter().zip(&b.values) {
        assert_eq!(va.len(), vb.len());
        assert!(va.iter().zip(vb.iter()).all(|(x, y)| x.same_bits(y)));
    }
    assert_eq!(a.changed, b.changed);
    assert_eq!(a.last_change, b.last_change);
    assert_eq!(a.next_id, b.next_id);
    assert_eq!(a.version, b.version);
    assert_eq!(a.dead, b.dead);
    assert_eq!(a.layout, b.layout);
    assert!(a.map == b.map, "the id maps differ");
    assert_eq!(a.map.allocated_pages(), b.map.allocated_pages());

    assert_eq!(a.hash(), b.hash());
    assert_eq!(a.version(), b.version());
    assert_eq!(a.len(), b.len());
    let ea: Vec<_> = a.iter().collect();
    let eb: Vec<_> = b.iter().collect();
    assert_eq!(ea.len(), eb.len());
    for (x, y) in ea.iter().zip(&eb) {
        assert_eq!((x.id, x.kind, x.global), (y.id, y.kind, y.global));
        assert_eq!(
            (x.x.to_bits(), x.y.to_bits()),
            (y.x.to_bits(), y.y.to_bits())
        );
        assert_eq!((x.qx, x.qy), (y.qx, y.qy));
        assert!(x.values.iter().zip(y.values).all(|(p, q)| p.same_bits(q)));
    }
    for id in 0..a.next_id.max(b.next_id) {
        assert_eq!(
            a.rank_of(EntityId(id)),
            b.rank_of(EntityId(id)),
            "rank of {id}"
        );
    }
}

/// One round of edits, the same on any world: spawns of both kinds, every setter, globals, odd
/// floats (negative zero, NaN payloads) and despawns of a third of the live entities.
fn edit(w: &mut World, unit: KindId, marker: KindId, round: u32) {
    for i in 0..40u32 {
        let kind = if i % 5 == 0 { marker } else { unit };
        w.spawn(kind, (i + round) as f32 * 1.37, -(i as f32) * 0.21)
            .unwrap();
    }
    let live: Vec<EntityId> = w.iter().map(|e| e.id).collect();
    for (n, &id) in live.iter().enumerate() {
        let n32 = n as u32 + round;
        if w.kind_of(id).unwrap() == unit {
            match n32 % 7 {
                0 => w.set_f32(id, 0, n32 as f32 % 100.0).unwrap(),
                1 => w.set_uint(id, 2, n32).unwrap(),
                2 => w.set_str(id, 3, &format!("n{}", n32 % 100)).unwrap(),
                3 => w.set_bool(id, 4, n32 % 2 == 0).unwrap(),
                4 => w.set_int(id, 5, -(n32 as i32)).unwrap(),
                5 => w.set_f32(id, 6, f32::from_bits(0x7fc0_0000 | n32)).unwrap(),
                _ => w.set_f32(id, 1, n32 as f32 * 0.1).unwrap(),
            }
        }
        if n32 % 4 == 1 {
            w.set_global(id, n32 % 8 == 1).unwrap();
        }
        if n32 % 9 == 2 {
            w.set_pos(id, -0.0, f32::from_bits(0x7f80_0001)).unwrap();
        }
    }
    for &id in live.iter().skip(round as usize % 3).step_by(3) {
        w.despawn(id).unwrap();
    }
}

#[test]
fn image_round_trips_after_every_kind_of_edit() {
    // No kinds, then kinds and no entity.
    round_trip(&World::new(0.25).unwrap());
    let (mut w, unit, marker) = world();
    round_trip(&w);

    // Spawns, field writes and globals, no tombstone yet.
    let ids: Vec<EntityId> = (0..200)
        .map(|i| {
            let kind = if i % 4 == 0 { marker } else { unit };
            w.spawn(kind, i as f32 * 0.5, 3.0 - i as f32).unwrap()
        })
        .collect();
    for &id in ids.iter().filter(|id| id.0 % 4 != 0) {
        w.set_f32(id, 0, 42.0).unwrap();
        w.set_str(id, 3, "bob").unwrap();
        w.set_f32(id, 6, -0.0).unwrap();
    }
    w.set_global(ids[3], true).unwrap();
    w.set_global(ids[4], true).unwrap();
    round_trip(&w);

    // A few despawns leave tombstones.
    for &id in ids.iter().take(30) {
        w.despawn(id).unwrap();
    }
    assert_eq!((w.dead, w.layout), (30, 0));
    round_trip(&w);

    // Despawning more than half compacts; later despawns leave new tombstones.
    for &id in ids.iter().skip(30).take(80) {
        w.despawn(id).unwrap();
    }
    assert_eq!(w.layout, 1, "a compaction ran");
    for &id in ids.iter().skip(110).take(5) {
        w.despawn(id).unwrap();
    }
    assert!(w.dead > 0);
    let mut copy = round_trip(&w);

    // What follows is the same too: the ids handed out, the ranks, the next compaction.
    for round in 0..6 {
        edit(&mut w, unit, marker, round);
        edit(&mut copy, unit, marker, round);
        assert_same(&w, &copy);
        copy = round_trip(&copy);
    }
    assert!(w.layout > 1, "the later rounds compacted again");
}

#[test]
fn restored_id_pages_are_allocated_and_retired_as_the_originals() {
    let (mut w, unit, _) = world();
    let ids: Vec<EntityId> = (0..3000)
        .map(|_| w.spawn(unit, 0.0, 0.0).unwrap())
        .collect();
    // Page 0 empties (retired), page 1 keeps one id, page 2 is partly issued.
    for &id in ids.iter().take(2047) {
        w.despawn(id).unwrap();
    }
    assert_eq!(w.map.allocated_pages(), 2);
    let mut copy = round_trip(&w);
    // Filling page 2 and emptying it retires it in both; a fresh page 3 is allocated in both.
    for w in [&mut w, &mut copy] {
        for _ in 3000..3100 {
            let e = w.spawn(unit, 1.0, 1.0).unwrap();
            w.despawn(e).unwrap();
        }
        for &id in ids.iter().skip(2048) {
            w.despawn(id).unwrap();
        }
    }
    assert_same(&w, &copy);
    assert_eq!(w.map.allocated_pages(), 2);
    round_trip(&copy);
}

/// A world with tombstones, small enough to cut at every length.
fn small_world() -> World {
    let (mut w, unit, marker) = world();
    edit(&mut w, unit, marker, 0);
    w
}

#[test]
fn every_truncation_is_refused() {
    let bytes = image(&small_world());
    for len in 0..bytes.len() {
        assert!(
            read(&bytes[..len]).is_err(),
            "cut at {len} of {}",
            bytes.len()
        );
    }
}

fn refused(w: &World) -> DecodeError {
    read(&image(w)).expect_err("an inconsistent world must be refused")
}

#[test]
fn inconsistent_worlds_are_refused() {
    let good = small_world();
    let first_tombstone = good.flags.iter().position(|&f| f == 0).unwrap();
    let first_live = good.flags.iter().position(|&f| f & ALIVE != 0).unwrap();
    let unit_row = (0..good.ids.len())
        .find(|&r| good.flags[r] & ALIVE != 0 && good.kind_of[r] == 0)
        .unwrap();
    type Break = fn(&mut World, usize, usize, usize);
    let cases: [(&str, Break); 10] = [
        ("ids repeat", |w, _, _, _| w.ids[1] = w.ids[0]),
        ("id never issued", |w, _, _, _| {
            w.next_id = w.ids[w.ids.len() - 1]
        }),
        ("undeclared kind", |w, dead, _, _| w.kind_of[dead] = 7),
        ("unknown flag bit", |w, _, live, _| w.flags[live] |= 4),
        ("tombstone flagged global", |w, dead, _, _| {
            w.flags[dead] = GLOBAL
        }),
        ("dead miscounted", |w, _, _, _| w.dead += 1),
        ("stamp after last change", |w, _, _, unit| {
            w.changed[unit][0] = w.last_change[unit] + 1;
        }),
        ("last change after version", |w, _, live, _| {
            w.last_change[live] = w.version + 1;
        }),
        ("live row without its values", |w, _, _, unit| {
            w.values[unit] = Box::new([]);
            w.changed[unit] = Box::new([]);
        }),
        ("tombstone with values", |w, dead, _, unit| {
            w.kind_of[dead] = 0;
            w.values[dead] = w.values[unit].clone();
            w.changed[dead] = w.changed[unit].clone();
        }),
    ];
    for (what, break_it) in cases {
        let mut w = good.clone();
        break_it(&mut w, first_tombstone, first_live, unit_row);
        // The decoder's own check refuses it (not a framing error, nor the encoder's poison).
        match refused(&w) {
            DecodeError::Invalid(why) if why.contains("world") => {}
            other => panic!("{what}: refused as {other:?}"),
        }
    }
    assert!(read(&image(&good)).is_ok());

    // More than 64 tombstones and more than half the rows: the last despawn would have compacted.
    let (mut w, unit, _) = world();
    for _ in 0..130 {
        w.spawn(unit, 0.0, 0.0).unwrap();
    }
    for r in 0..66 {
        w.flags[r] = 0;
        w.values[r] = Box::new([]);
        w.changed[r] = Box::new([]);
    }
    w.dead = 66;
    assert!(
        read(&image(&w)).is_err(),
        "uncompacted tombstones were accepted"
    );
    for r in 64..66 {
        w.flags[r] = ALIVE;
        w.values[r] = w.values[66].clone();
        w.changed[r] = w.changed[66].clone();
        w.last_change[r] = w.last_change[66];
    }
    w.dead = 64;
    // At exactly 64 tombstones no despawn compacts yet.
    assert!(read(&image(&w)).is_ok());
}

#[test]
fn an_unencodable_world_writes_an_image_that_is_refused() {
    // Values that broke the type rules cannot be written; the image says so instead of lying.
    let mut w = small_world();
    let row = (0..w.ids.len())
        .find(|&r| w.flags[r] & ALIVE != 0 && w.kind_of[r] == 0)
        .unwrap();
    w.values[row][2] = FieldValue::Bool(true);
    let mut out = vec![9];
    w.put_image(&mut out);
    assert_eq!(out.len(), 5, "only the poison follows what was there");
    assert!(read(&out[1..]).is_err());
}

proptest! {
    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
        let _ = read(&bytes);
    }

    #[test]
    fn damaged_images_never_panic(
        flips in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..8)
    ) {
        let mut bytes = image(&small_world());
        for (at, byte) in flips {
            let i = at.index(bytes.len());
            bytes[i] ^= byte;
        }
        if let Ok(w) = read(&bytes) {
            // Whatever is accepted is a world that writes itself back the same.
            prop_assert_eq!(image(&w), bytes);
        }
    }
}
