#![allow(clippy::unwrap_used, clippy::expect_used)]
use super::*;
use crate::schema::{FieldDef, FieldType};

fn kind() -> KindDef {
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
            FieldDef {
                name: "tag".into(),
                ty: FieldType::Str { max_len: 4 },
            },
        ],
    }
}

fn vals() -> Vec<FieldValue> {
    vec![
        FieldValue::Q(100),
        FieldValue::U(300),
        FieldValue::Str("ab".into()),
    ]
}

fn pu(dx: i32, dy: i32) -> PosUpdate {
    PosUpdate {
        qx: 1000 + dx,
        qy: -1000 + dy,
        last_qx: 1000,
        last_qy: -1000,
    }
}

fn rec(pos: Option<PosUpdate>, mask: u32) -> Result<Vec<u8>, EncodeError> {
    let mut o = Vec::new();
    write_update_record(&mut o, pos, mask, &kind(), &vals()).map(|_| o)
}

#[test]
fn canonical_position_forms() {
    // tiny: v = (dx+5)*11 + (dy+5)
    assert_eq!(rec(Some(pu(-5, -5)), 0).unwrap(), [0]);
    assert_eq!(rec(Some(pu(1, -1)), 0).unwrap(), [6 * 11 + 4]);
    assert_eq!(rec(Some(pu(5, 5)), 0).unwrap(), [120]);
    // nibbles when out of tiny range, or when fields ride along
    assert_eq!(rec(Some(pu(6, -8)), 0).unwrap(), [0x81, 0x86]);
    assert_eq!(
        rec(Some(pu(1, -1)), 0b10).unwrap(),
        [0x85, 0xf1, 0x02, 0xac, 0x02]
    );
    // delta when shorter or equal to absolute
    assert_eq!(rec(Some(pu(100, 0)), 0).unwrap(), [0x82, 0xc8, 0x01, 0x00]);
    // absolute when shorter than delta
    let p = PosUpdate {
        qx: 0,
        qy: 0,
        last_qx: 100_000,
        last_qy: 100_000,
    };
    assert_eq!(rec(Some(p), 0).unwrap(), [0x83, 0, 0]);
    // delta not representable in i32 → absolute
    let p = PosUpdate {
        qx: i32::MAX,
        qy: 0,
        last_qx: i32::MIN,
        last_qy: 0,
    };
    assert_eq!(rec(Some(p), 0).unwrap()[0], 0x83);
}

#[test]
fn fields_only_and_still_positions() {
    assert_eq!(rec(None, 0b101).unwrap(), [0x84, 0x05, 100, 2, b'a', b'b']);
    assert_eq!(rec(Some(pu(0, 0)), 0b1).unwrap(), [0x84, 0x01, 100]);
    assert!(rec(Some(pu(0, 0)), 0).is_err());
    assert!(rec(None, 0).is_err());
    assert!(rec(None, 0b1000).is_err());
    let mut o = vec![9];
    let bad = [
        FieldValue::Q(200),
        FieldValue::U(1),
        FieldValue::Str(String::new()),
    ];
    assert!(write_update_record(&mut o, None, 1, &kind(), &bad).is_err());
    assert_eq!(o, [9], "a failed record leaves the buffer as it was");
}

#[test]
fn spawn_body_has_every_field() {
    let mut o = Vec::new();
    write_spawn_body(&mut o, 1, &kind(), -1, 2, &vals()).unwrap();
    assert_eq!(o, [1, 1, 4, 100, 0xac, 0x02, 2, b'a', b'b']);
    assert!(write_spawn_body(&mut o, 1, &kind(), 0, 0, &vals()[..2]).is_err());
}

fn header(baseline: bool, has_events: bool) -> DeltaHeader {
    DeltaHeader {
        base: None,
        tick: 300,
        ack: 7,
        baseline,
        control: Some(Some(4)),
        has_events,
    }
}

#[test]
fn writer_sections_in_order() {
    let mut o = Vec::new();
    let mut w = DeltaWriter::new(&mut o, &header(false, true));
    w.despawns(&[3, 10]).unwrap();
    w.updates(5, &[0, 2], &[60, 61]).unwrap();
    w.spawns([(12u32, &[0u8, 0, 0][..])].into_iter()).unwrap();
    w.events([(2u16, &b"hi"[..])].into_iter()).unwrap();
    let n = w.finish().unwrap();
    assert_eq!(n, o.len());
    assert_eq!(
        o,
        [
            0x82, 0xac, 0x02, 7, 0b110, 5, // tag tick ack flags control(4+1)
            2, 3, 6, // despawns 3, 10
            2, 0, 0, 1, 60, 61, // updates: gaps 0, 2 (gap 1)
            1, 12, 0, 0, 0, // spawn 12
            1, 2, 2, b'h', b'i', // event
        ]
    );
}

#[test]
fn writer_picks_bitset_when_shorter() {
    let mut o = Vec::new();
    let idx: Vec<u32> = (0..16).map(|i| i * 2).collect();
    let recs = vec![60u8; 16];
    let mut w = DeltaWriter::new(
        &mut o,
        &DeltaHeader {
            control: None,
            ..header(false, false)
        },
    );
    w.despawns(&[]).unwrap();
    w.updates(40, &idx, &recs).unwrap();
    w.spawns(std::iter::empty()).unwrap();
    w.finish().unwrap();
    // header 5 bytes, despawns 1, count 1, mode 1, len 1, 4 bitset bytes 0x55
    assert_eq!(&o[6..13], &[16, 1, 4, 0x55, 0x55, 0x55, 0x55]);
}

#[test]
fn writer_misuse_is_an_error_and_truncates() {
    let mut o = vec![0xaa];
    let mut w = DeltaWriter::new(&mut o, &header(false, false));
    assert!(w.updates(1, &[0], &[60]).is_err());
    assert!(w.despawns(&[]).is_err(), "poisoned after a failure");
    assert!(w.finish().is_err());
    assert_eq!(o, [0xaa]);

    let mut o = Vec::new();
    let mut w = DeltaWriter::new(&mut o, &header(false, false));
    assert!(w.despawns(&[4, 4]).is_err());
    assert!(o.is_empty());

    let mut o = Vec::new();
    let mut w = DeltaWriter::new(&mut o, &header(true, false));
    assert!(w.despawns(&[1]).is_err(), "baseline has no despawns");

    let mut o = Vec::new();
    let mut w = DeltaWriter::new(&mut o, &header(false, false));
    w.despawns(&[]).unwrap();
    assert!(w.updates(2, &[2], &[60]).is_err(), "index beyond known set");

    let mut o = Vec::new();
    let mut w = DeltaWriter::new(&mut o, &header(false, false));
    w.despawns(&[]).unwrap();
    w.updates(0, &[], &[]).unwrap();
    assert!(w
        .spawns([(5u32, &[][..]), (5, &[][..])].into_iter())
        .is_err());

    let mut o = Vec::new();
    let mut w = DeltaWriter::new(&mut o, &header(false, false));
    w.despawns(&[]).unwrap();
    w.updates(0, &[], &[]).unwrap();
    w.spawns(std::iter::empty()).unwrap();
    assert!(
        w.events(std::iter::empty()).is_err(),
        "events not announced"
    );

    let mut o = Vec::new();
    let mut w = DeltaWriter::new(&mut o, &header(false, true));
    w.despawns(&[]).unwrap();
    w.updates(0, &[], &[]).unwrap();
    w.spawns(std::iter::empty()).unwrap();
    assert!(w.finish().is_err(), "announced events missing");
}

#[test]
fn control_none_is_zero() {
    let mut o = Vec::new();
    let h = DeltaHeader {
        base: None,
        tick: 1,
        ack: 0,
        baseline: true,
        control: Some(None),
        has_events: false,
    };
    let mut w = DeltaWriter::new(&mut o, &h);
    w.despawns(&[]).unwrap();
    w.updates(0, &[], &[]).unwrap();
    w.spawns(std::iter::empty()).unwrap();
    assert_eq!(w.finish().unwrap(), 8);
    assert_eq!(o, [0x82, 1, 0, 0b011, 0, 0, 0, 0]);
}
