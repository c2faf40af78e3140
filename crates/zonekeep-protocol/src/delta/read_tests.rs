#![allow(clippy::unwrap_used, clippy::expect_used)]
use super::*;
use crate::schema::{FieldDef, FieldType};

fn schema() -> Schema {
    Schema {
        pos_step: 0.01,
        kinds: vec![
            KindDef {
                name: "ship".into(),
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
                        name: "score".into(),
                        ty: FieldType::UInt,
                    },
                ],
            },
            KindDef {
                name: "rock".into(),
                fields: vec![FieldDef {
                    name: "open".into(),
                    ty: FieldType::Bool,
                }],
            },
        ],
    }
}

const KNOWN: [(u32, u32); 5] = [(2, 0), (3, 1), (5, 0), (9, 0), (10, 1)];

fn sample() -> Delta {
    Delta {
        base: None,
        tick: 500,
        ack: 12,
        baseline: false,
        control: Some(Some(2)),
        despawns: vec![3, 10],
        updates: vec![
            Update {
                index: 0,
                id: 2,
                pos: Some(PosForm::Tiny { dx: 1, dy: -1 }),
                mask: 0,
                fields: vec![],
            },
            Update {
                index: 2,
                id: 9,
                pos: Some(PosForm::Absolute { qx: -40, qy: 7 }),
                mask: 0b11,
                fields: vec![(0, FieldValue::Q(127)), (1, FieldValue::U(5))],
            },
        ],
        spawns: vec![
            Spawn {
                id: 3,
                kind: 1,
                qx: 1,
                qy: 2,
                fields: vec![FieldValue::Bool(true)],
            },
            Spawn {
                id: 11,
                kind: 0,
                qx: 0,
                qy: 0,
                fields: vec![FieldValue::Q(3), FieldValue::U(0)],
            },
        ],
        events: Some(vec![Event {
            topic: 9,
            payload: b"boom".to_vec(),
        }]),
    }
}

#[test]
fn round_trip_against_known_set() {
    let d = sample();
    let mut out = Vec::new();
    let n = d.encode(&schema(), &KNOWN, &mut out).unwrap();
    assert_eq!(n, out.len());
    let back = decode_delta(&out, &schema(), &KNOWN).unwrap();
    assert_eq!(back, d);
    let mut again = Vec::new();
    back.encode(&schema(), &KNOWN, &mut again).unwrap();
    assert_eq!(again, out);
}

#[test]
fn index_resolution_skips_despawns() {
    // After despawning 3 and 10 the set is [2, 5, 9]: index 1 is 5, index 2 is 9.
    let mut d = sample();
    d.updates[1].index = 1;
    d.updates[1].id = 9;
    assert!(d.encode(&schema(), &KNOWN, &mut Vec::new()).is_err());
    d.updates[1].id = 5;
    let mut out = Vec::new();
    d.encode(&schema(), &KNOWN, &mut out).unwrap();
    assert_eq!(
        decode_delta(&out, &schema(), &KNOWN).unwrap().updates[1].id,
        5
    );
}

fn bytes(d: &Delta) -> Vec<u8> {
    let mut out = Vec::new();
    d.encode(&schema(), &KNOWN, &mut out).unwrap();
    out
}

#[test]
fn rejects_inconsistent_deltas() {
    let good = bytes(&sample());
    // Decoding against a known set lacking a despawned id.
    assert_eq!(
        decode_delta(&good, &schema(), &[(2, 0), (5, 0), (9, 0), (10, 1)]),
        Err(DecodeError::Invalid("despawned id not in the known set"))
    );
    // Spawn of an id still known.
    let mut d = sample();
    d.spawns[0].id = 5;
    d.spawns.swap(0, 1);
    d.spawns.sort_by_key(|s| s.id);
    assert!(d.encode(&schema(), &KNOWN, &mut Vec::new()).is_err());
    // Unknown flag bits, trailing bytes, truncation at every length.
    let mut bad = good.clone();
    bad[4] |= 0x08;
    assert_eq!(
        decode_delta(&bad, &schema(), &KNOWN),
        Err(DecodeError::Invalid("unknown Delta flag bits"))
    );
    let mut long = good.clone();
    long.push(0);
    assert_eq!(
        decode_delta(&long, &schema(), &KNOWN),
        Err(DecodeError::TrailingBytes(1))
    );
    for n in 0..good.len() {
        assert!(
            decode_delta(&good[..n], &schema(), &KNOWN).is_err(),
            "prefix {n}"
        );
    }
    // Known set out of order is the caller's bug, reported rather than misread.
    assert!(decode_delta(&good, &schema(), &[(5, 0), (2, 0)]).is_err());
}

#[test]
fn record_header_rules() {
    let k = &schema().kinds[0];
    let rd = |b: &[u8]| read_record(&mut Reader::new(b), k);
    assert_eq!(rd(&[60]).unwrap().0, Some(PosForm::Tiny { dx: 0, dy: 0 }));
    assert!(rd(&[121]).is_err());
    assert!(rd(&[0x80]).is_err());
    assert!(rd(&[0x88]).is_err());
    assert_eq!(
        rd(&[0x81, 0x8f]).unwrap().0,
        Some(PosForm::Nibbles { dx: -1, dy: -8 })
    );
    assert!(rd(&[0x84, 0x00]).is_err(), "empty mask");
    assert!(rd(&[0x84, 0x04, 1]).is_err(), "mask beyond the kind");
    assert!(rd(&[0x84, 0x01, 0x80]).is_err(), "quant code out of range");
}

#[test]
fn bitset_rules() {
    // known_len 9: L may be at most 2, bits must name indices < 9, count must match.
    assert_eq!(
        read_index_set(&mut Reader::new(&[1, 1, 0b101]), 2, 9).unwrap(),
        vec![0, 2]
    );
    assert_eq!(
        read_index_set(&mut Reader::new(&[1, 2, 0, 1]), 1, 9).unwrap(),
        vec![8]
    );
    assert!(read_index_set(&mut Reader::new(&[1, 2, 0, 2]), 1, 9).is_err());
    assert!(read_index_set(&mut Reader::new(&[1, 3, 0, 0, 1]), 1, 9).is_err());
    assert!(read_index_set(&mut Reader::new(&[1, 1, 0b111]), 2, 9).is_err());
    assert!(read_index_set(&mut Reader::new(&[1, 1, 0b1]), 2, 9).is_err());
    assert!(read_index_set(&mut Reader::new(&[2]), 1, 9).is_err());
    assert!(read_index_set(&mut Reader::new(&[0, 8, 0]), 2, 9).is_err());
    assert!(read_index_set(&mut Reader::new(&[0, 0]), 10, 9).is_err());
}

#[test]
fn baseline_and_control_edges() {
    let d = Delta {
        base: None,
        tick: 1,
        ack: 0,
        baseline: true,
        control: Some(Some(u32::MAX)),
        despawns: vec![],
        updates: vec![],
        spawns: vec![Spawn {
            id: 2,
            kind: 1,
            qx: 0,
            qy: 0,
            fields: vec![FieldValue::Bool(false)],
        }],
        events: None,
    };
    // A baseline ignores the known set: id 2 may be spawned although it is known.
    let b = bytes(&d);
    assert_eq!(&b[3..9], &[0x03, 0x80, 0x80, 0x80, 0x80, 0x10]);
    assert_eq!(decode_delta(&b, &schema(), &KNOWN).unwrap(), d);
    let mut over = b.clone();
    over[8] = 0x11; // control = 2^32 + 2^28: beyond u32 + 1
    assert!(decode_delta(&over, &schema(), &KNOWN).is_err());
    let mut d2 = d.clone();
    d2.despawns = vec![2];
    assert!(d2.encode(&schema(), &KNOWN, &mut Vec::new()).is_err());
}

#[test]
fn the_head_alone_reads_as_the_full_decoder_does() {
    let d = sample();
    let mut bytes = Vec::new();
    d.encode(&schema(), &KNOWN, &mut bytes).unwrap();
    let head = decode_delta_head(&bytes).unwrap();
    assert_eq!((head.tick, head.ack), (d.tick, d.ack));
    assert_eq!(head.flags, FLAG_CONTROL | FLAG_EVENTS);
    assert_eq!(
        decode_delta_head(&[0x84, 0, 0]),
        Err(DecodeError::UnknownTag(0x84))
    );
    assert!(decode_delta_head(&bytes[..2]).is_err(), "cut short");
    let mut bad = bytes.clone();
    bad[4] |= 0x80; // tag, tick 500 (two bytes), ack 12, then the flags
    assert!(decode_delta_head(&bad).is_err(), "unknown flag bits");
}
