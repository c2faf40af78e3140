#![allow(clippy::unwrap_used, clippy::expect_used)]
use super::*;
use crate::delta::{Delta, PosForm, Spawn, Update};
use crate::schema::{FieldDef, FieldType, KindDef};

fn schema() -> Schema {
    Schema {
        pos_step: 0.1,
        kinds: vec![KindDef {
            name: "unit".into(),
            fields: vec![
                FieldDef {
                    name: "hp".into(),
                    ty: FieldType::UInt,
                },
                FieldDef {
                    name: "name".into(),
                    ty: FieldType::Str { max_len: 8 },
                },
            ],
        }],
    }
}

fn spawn(id: u32, qx: i32) -> Spawn {
    Spawn {
        id,
        kind: 0,
        qx,
        qy: -qx,
        fields: vec![FieldValue::U(id), FieldValue::Str("u".into())],
    }
}

fn empty(tick: u64) -> Delta {
    Delta {
        base: None,
        tick,
        ack: 0,
        baseline: false,
        control: None,
        despawns: vec![],
        updates: vec![],
        spawns: vec![],
        events: None,
    }
}

fn baseline() -> Delta {
    Delta {
        baseline: true,
        control: Some(Some(4)),
        spawns: vec![spawn(1, 10), spawn(4, 40), spawn(7, 70)],
        ..empty(1)
    }
}

/// Encodes against the mirror's known set and applies the decoded bytes, as a client would.
fn send(m: &mut Mirror, d: &Delta) -> Delta {
    let mut out = Vec::new();
    d.encode(&schema(), m.known(), &mut out).unwrap();
    m.decode_apply(&out, &schema()).unwrap()
}

#[test]
fn baseline_populates_in_id_order() {
    let mut m = Mirror::new();
    send(&mut m, &baseline());
    assert_eq!(m.known(), &[(1, 0), (4, 0), (7, 0)]);
    assert_eq!(m.control(), Some(4));
    assert_eq!(m.get(4).unwrap().qx, 40);
    // A second baseline replaces everything.
    send(
        &mut m,
        &Delta {
            baseline: true,
            spawns: vec![spawn(9, 1)],
            ..empty(2)
        },
    );
    assert_eq!(m.known(), &[(9, 0)]);
    assert_eq!(m.control(), Some(4), "control persists until announced");
}

#[test]
fn despawn_then_update_by_post_despawn_index_then_spawn() {
    let mut m = Mirror::new();
    send(&mut m, &baseline());
    let d = Delta {
        despawns: vec![4],
        updates: vec![Update {
            index: 1,
            id: 7,
            pos: Some(PosForm::Delta { dx: 100, dy: 0 }),
            mask: 0b10,
            fields: vec![(1, FieldValue::Str("boss".into()))],
        }],
        // Id 4 is despawned and respawned in the same Delta (allowed: it left the known set first).
        spawns: vec![spawn(2, 20), spawn(4, 44), spawn(8, 80)],
        ..empty(2)
    };
    send(&mut m, &d);
    assert_eq!(m.known(), &[(1, 0), (2, 0), (4, 0), (7, 0), (8, 0)]);
    let e7 = m.get(7).unwrap();
    assert_eq!((e7.qx, e7.qy), (170, -70));
    assert_eq!(
        e7.fields,
        vec![FieldValue::U(7), FieldValue::Str("boss".into())]
    );
    assert_eq!(m.get(4).unwrap().qx, 44);
    assert_eq!(m.tick(), 2);
    let ids: Vec<u32> = m.iter().map(|(id, _)| id).collect();
    assert_eq!(ids, [1, 2, 4, 7, 8]);
}

#[test]
fn every_position_form_applies() {
    let mut m = Mirror::new();
    send(&mut m, &baseline());
    let d = Delta {
        updates: vec![
            Update {
                index: 0,
                id: 1,
                pos: Some(PosForm::Tiny { dx: -5, dy: 5 }),
                mask: 0,
                fields: vec![],
            },
            Update {
                index: 1,
                id: 4,
                pos: Some(PosForm::Nibbles { dx: 7, dy: -8 }),
                mask: 0,
                fields: vec![],
            },
            Update {
                index: 2,
                id: 7,
                pos: Some(PosForm::Absolute { qx: -3, qy: 3 }),
                mask: 1,
                fields: vec![(0, FieldValue::U(0))],
            },
        ],
        ..empty(3)
    };
    send(&mut m, &d);
    let p = |id| m.get(id).map(|e| (e.qx, e.qy)).unwrap();
    assert_eq!(p(1), (5, -5));
    assert_eq!(p(4), (47, -48));
    assert_eq!(p(7), (-3, 3));
    assert_eq!(m.get(7).unwrap().fields[0], FieldValue::U(0));
}

#[test]
fn inconsistent_deltas_leave_the_mirror_unchanged() {
    let mut m = Mirror::new();
    send(&mut m, &baseline());
    let before = m.clone();
    let bad = [
        Delta {
            despawns: vec![5],
            ..empty(9)
        },
        Delta {
            spawns: vec![spawn(4, 0)],
            ..empty(9)
        },
        Delta {
            updates: vec![Update {
                index: 0,
                id: 4,
                pos: None,
                mask: 1,
                fields: vec![(0, FieldValue::U(1))],
            }],
            ..empty(9)
        },
        Delta {
            updates: vec![Update {
                index: 3,
                id: 9,
                pos: None,
                mask: 1,
                fields: vec![(0, FieldValue::U(1))],
            }],
            ..empty(9)
        },
        Delta {
            updates: vec![Update {
                index: 0,
                id: 1,
                pos: None,
                mask: 1,
                fields: vec![(0, FieldValue::Bool(true))],
            }],
            ..empty(9)
        },
        Delta {
            updates: vec![Update {
                index: 0,
                id: 1,
                pos: Some(PosForm::Delta {
                    dx: i32::MAX,
                    dy: 0,
                }),
                mask: 0,
                fields: vec![],
            }],
            ..empty(9)
        },
        Delta {
            baseline: true,
            despawns: vec![1],
            ..empty(9)
        },
        Delta {
            spawns: vec![spawn(9, 0), spawn(8, 0)],
            ..empty(9)
        },
    ];
    for d in &bad {
        assert!(
            matches!(m.apply(d), Err(MirrorError::Inconsistent(_))),
            "{d:?}"
        );
        assert_eq!(m, before);
    }
    assert!(matches!(
        m.decode_apply(&[0x82, 0], &schema()),
        Err(MirrorError::Decode(DecodeError::Truncated))
    ));
    assert_eq!(m, before);
}

#[test]
fn known_set_check_matches_only_the_same_ids() {
    let mut m = Mirror::new();
    send(&mut m, &baseline());
    let check = |count, ids: &[u32]| KnownSetCheck {
        tick: 1,
        count,
        hash: known_set_hash(ids.iter().copied()),
    };
    assert!(m.matches(&check(3, &[1, 4, 7])));
    assert!(!m.matches(&check(3, &[1, 4, 8])), "a different id");
    assert!(!m.matches(&check(2, &[1, 4])), "a missing id");
    assert!(!m.matches(&check(4, &[1, 4, 7])), "the count disagrees");
}

#[test]
fn resume_from_states_the_last_tick_and_what_a_known_set_check_would() {
    let mut m = Mirror::new();
    assert_eq!(
        m.resume_from(),
        None,
        "nothing applied yet: nothing to resume from"
    );
    m.apply(&baseline()).unwrap();
    let ids: Vec<u32> = m.known().iter().map(|e| e.0).collect();
    let from = m.resume_from().unwrap();
    assert_eq!(from.tick, m.tick());
    assert_eq!(from.count as usize, ids.len());
    assert_eq!(from.hash, crate::known_set_hash(ids));
    assert!(m.matches(&KnownSetCheck {
        tick: from.tick,
        count: from.count,
        hash: from.hash,
    }));
}
