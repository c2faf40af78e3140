//! The payload encoding's tests: every type round-trips little-endian, optional trailing values
//! read as zero, every malformed payload is refused with an error naming it, and `bind_kind`
//! refuses each way a schema can differ from the code.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use super::*;
use zonekeep_protocol::schema::{FieldDef, FieldType, KindDef, Schema};

#[test]
fn every_type_round_trips() {
    let mut w = PayloadWriter::with_capacity(64);
    assert!(w.is_empty());
    w.u8(0xfe)
        .u16(0xfedc)
        .u32(0xfedc_ba98)
        .u64(u64::MAX - 1)
        .i8(-2)
        .i16(i16::MIN)
        .i32(-123_456)
        .i64(i64::MIN + 1)
        .f32(-0.0)
        .f32(f32::from_bits(0x7fc0_0001))
        .bool(true)
        .bool(false)
        .bytes(&[1, 2, 3])
        .bytes(&[])
        .str("héllo")
        .raw(b"tail \xce\xbb");
    assert_eq!(w.len(), w.as_bytes().len());
    let payload = w.into_vec();

    let mut r = PayloadReader::new(&payload);
    assert_eq!(r.name(), "payload");
    assert_eq!(r.u8("a"), Ok(0xfe));
    assert_eq!(r.u16("b"), Ok(0xfedc));
    assert_eq!(r.u32("c"), Ok(0xfedc_ba98));
    assert_eq!(r.u64("d"), Ok(u64::MAX - 1));
    assert_eq!(r.i8("e"), Ok(-2));
    assert_eq!(r.i16("f"), Ok(i16::MIN));
    assert_eq!(r.i32("g"), Ok(-123_456));
    assert_eq!(r.i64("h"), Ok(i64::MIN + 1));
    assert_eq!(r.f32("i").map(f32::to_bits), Ok((-0.0_f32).to_bits()));
    assert_eq!(r.f32("j").map(f32::to_bits), Ok(0x7fc0_0001));
    assert_eq!(r.bool("k"), Ok(true));
    assert_eq!(r.bool("l"), Ok(false));
    assert_eq!(r.bytes("m"), Ok(&[1, 2, 3][..]));
    assert_eq!(r.bytes("n"), Ok(&[][..]));
    assert_eq!(r.str("o"), Ok("héllo"));
    let at = r.position();
    assert_eq!(r.remaining(), payload.len() - at);
    assert!(!r.at_end());
    assert_eq!(r.clone().rest_bytes(), b"tail \xce\xbb");
    assert_eq!(r.rest_str("p"), Ok("tail λ"));
    assert!(r.at_end());
    assert_eq!(r.rest_bytes(), b"");
    assert_eq!(r.position(), payload.len());
    r.finish().unwrap();
}

#[test]
fn values_are_little_endian_and_lengths_u32() {
    let mut w = PayloadWriter::new();
    w.u16(0x0102).i32(-2).f32(1.0).str("ab").bool(true);
    assert_eq!(
        w.as_bytes(),
        [2, 1, 0xfe, 0xff, 0xff, 0xff, 0, 0, 0x80, 0x3f, 2, 0, 0, 0, b'a', b'b', 1]
    );
}

#[test]
fn truncate_leaves_off_trailing_values() {
    let mut w = PayloadWriter::new();
    w.u8(1);
    let end = w.len();
    w.u32(0).f32(0.0);
    w.truncate(end);
    assert_eq!(w.into_vec(), [1]);
}

#[test]
fn absent_optional_values_read_as_zero_and_present_ones_strictly() {
    let mut r = PayloadReader::new(&[5, 0, 1]);
    assert_eq!(r.optional(|r| r.u8("a")), Ok(5));
    assert_eq!(
        r.optional(|r| r.u32("b")),
        Err(PayloadError::CutShort {
            payload: "payload",
            value: "b",
            at: 1,
            needed: 4,
            left: 2,
        })
    );
    let mut r = PayloadReader::new(&[]);
    assert_eq!(r.optional(|r| r.i64("c")), Ok(0));
    assert_eq!(r.optional(|r| r.f32("d")).map(f32::to_bits), Ok(0));
    assert_eq!(r.optional(|r| r.bool("e")), Ok(false));
    r.finish().unwrap();
}

#[test]
fn every_fixed_width_read_refuses_a_short_payload() {
    fn short<T: std::fmt::Debug>(
        read: fn(&mut PayloadReader<'static>, &'static str) -> Result<T, PayloadError>,
        width: usize,
    ) {
        const BYTES: [u8; 9] = [9; 9];
        for have in 0..width {
            // One byte read first, so the error's position is not 0.
            let mut r = PayloadReader::with_name(&BYTES[..=have], "event `e`");
            r.u8("head").unwrap();
            let err = read(&mut r, "v").unwrap_err();
            assert_eq!(
                err,
                PayloadError::CutShort {
                    payload: "event `e`",
                    value: "v",
                    at: 1,
                    needed: width,
                    left: have,
                }
            );
        }
    }
    short(PayloadReader::u8, 1);
    short(PayloadReader::u16, 2);
    short(PayloadReader::u32, 4);
    short(PayloadReader::u64, 8);
    short(PayloadReader::i8, 1);
    short(PayloadReader::i16, 2);
    short(PayloadReader::i32, 4);
    short(PayloadReader::i64, 8);
    short(PayloadReader::f32, 4);
    short(PayloadReader::bool, 1);
    // `bytes` and `str` without a whole length.
    short(PayloadReader::bytes, 4);
    short(PayloadReader::str, 4);
}

#[test]
fn a_length_past_the_payload_is_refused() {
    let payload = [3, 0, 0, 0, b'a', b'b'];
    let expected = PayloadError::CutShort {
        payload: "payload",
        value: "s",
        at: 4,
        needed: 3,
        left: 2,
    };
    assert_eq!(PayloadReader::new(&payload).bytes("s"), Err(expected));
    assert_eq!(PayloadReader::new(&payload).str("s"), Err(expected));
    let huge = [0xff, 0xff, 0xff, 0xff, 1];
    assert!(matches!(
        PayloadReader::new(&huge).bytes("s"),
        Err(PayloadError::CutShort {
            needed: 0xffff_ffff,
            left: 1,
            ..
        })
    ));
}

#[test]
fn a_bool_other_than_0_or_1_is_refused() {
    for byte in [2, 0x80, 0xff] {
        let payload = [1, byte];
        let mut r = PayloadReader::new(&payload);
        assert_eq!(r.bool("a"), Ok(true));
        assert_eq!(
            r.bool("b"),
            Err(PayloadError::NotABool {
                payload: "payload",
                value: "b",
                at: 1,
                byte,
            })
        );
        let mut r = PayloadReader::new(&payload[1..]);
        assert!(matches!(
            r.optional(|r| r.bool("c")),
            Err(PayloadError::NotABool { at: 0, .. })
        ));
    }
}

#[test]
fn text_that_is_not_utf8_is_refused() {
    let payload = [9, 3, 0, 0, 0, b'a', 0xc3, 0x28];
    let mut r = PayloadReader::new(&payload);
    r.u8("head").unwrap();
    assert_eq!(
        r.str("s"),
        Err(PayloadError::NotUtf8 {
            payload: "payload",
            value: "s",
            at: 5,
            valid_up_to: 1,
        })
    );
    let mut r = PayloadReader::new(&payload);
    r.u8("head").unwrap();
    r.u32("len").unwrap();
    assert_eq!(
        r.rest_str("t"),
        Err(PayloadError::NotUtf8 {
            payload: "payload",
            value: "t",
            at: 5,
            valid_up_to: 1,
        })
    );
}

#[test]
fn bytes_left_over_are_refused() {
    let mut r = PayloadReader::with_name(&[1, 2, 3], "event `hit`");
    r.u8("a").unwrap();
    let err = r.finish().unwrap_err();
    assert_eq!(
        err,
        PayloadError::LeftOver {
            payload: "event `hit`",
            at: 1,
            left: 2,
        }
    );
    assert_eq!(
        err.to_string(),
        "event `hit`: 2 bytes left over at byte 1, after the last value"
    );
}

#[test]
fn errors_name_the_payload_and_the_value() {
    let mut r = PayloadReader::with_name(&[1, 7], "event `hit`");
    r.u8("by").unwrap();
    assert_eq!(
        r.bool("critical").unwrap_err().to_string(),
        "event `hit`: `critical` at byte 1 is a bool of 7: a bool is 0 or 1"
    );
    assert_eq!(
        r.u16("damage").unwrap_err().to_string(),
        "event `hit`: `damage` at byte 2 is cut short: it needs 2 bytes, 0 are left"
    );
}

fn kind(name: &str, fields: &[(&str, FieldType)]) -> KindDef {
    KindDef {
        name: name.into(),
        fields: fields
            .iter()
            .map(|&(name, ty)| FieldDef {
                name: name.into(),
                ty,
            })
            .collect(),
    }
}

const SHIP: [(&str, FieldType); 3] = [
    (
        "x",
        FieldType::Quant {
            min: -8.0,
            max: 8.0,
            bits: 4,
        },
    ),
    (
        "lean",
        FieldType::Centered {
            range: 2.0,
            bits: 8,
        },
    ),
    ("hp", FieldType::UInt),
];

const HINT: &str = "regenerate with `zonekeep codegen`";

fn schema() -> Schema {
    Schema {
        pos_step: 0.01,
        kinds: vec![kind("rock", &[]), kind("ship", &SHIP)],
    }
}

#[test]
fn errors_are_small_enough_to_return() {
    // Clippy's `result_large_err` refuses `Err` types of 128 bytes and more, in the
    // generated code too.
    assert!(std::mem::size_of::<SchemaMismatch>() < 128);
    assert!(std::mem::size_of::<PayloadError>() < 128);
}

#[test]
fn bind_finds_a_kind_by_name() {
    let schema = schema();
    assert_eq!(bind_kind(&schema, "ship", &SHIP, HINT), Ok(1));
    assert_eq!(bind_kind(&schema, "rock", &[], HINT), Ok(0));
}

#[test]
fn bind_refuses_a_missing_kind() {
    let err = bind_kind(&schema(), "comet", &[], HINT).unwrap_err();
    assert_eq!(
        err,
        SchemaMismatch::NoKind {
            kind: "comet",
            hint: HINT,
        }
    );
    assert_eq!(
        err.to_string(),
        "the schema has no kind `comet`: regenerate with `zonekeep codegen`"
    );
    // No hint, no colon.
    let err = bind_kind(&schema(), "comet", &[], "").unwrap_err();
    assert_eq!(err.to_string(), "the schema has no kind `comet`");
}

#[test]
fn bind_refuses_a_field_of_another_name_or_type() {
    let renamed = [SHIP[0], ("tilt", SHIP[1].1), SHIP[2]];
    let err = bind_kind(&schema(), "ship", &renamed, HINT).unwrap_err();
    assert!(
        matches!(&err, SchemaMismatch::OtherField { index: 1, schema_name, name: "tilt", .. }
            if schema_name == "lean"),
        "{err:?}"
    );
    assert_eq!(
        err.to_string(),
        "the kind `ship` has `lean` Centered { range: 2.0, bits: 8 } where this code has \
         `tilt` Centered { range: 2.0, bits: 8 }: regenerate with `zonekeep codegen`"
    );
    let retyped = [SHIP[0], SHIP[1], ("hp", FieldType::SInt)];
    assert!(matches!(
        bind_kind(&schema(), "ship", &retyped, HINT),
        Err(SchemaMismatch::OtherField {
            index: 2,
            schema_type: FieldType::UInt,
            ty: FieldType::SInt,
            ..
        })
    ));
}

#[test]
fn bind_compares_float_parameters_bit_for_bit() {
    let changes = [
        FieldType::Quant {
            min: -8.0,
            max: 8.0,
            bits: 5,
        },
        FieldType::Quant {
            min: -8.0,
            max: f32::from_bits(8.0_f32.to_bits() + 1),
            bits: 4,
        },
        FieldType::Quant {
            min: -8.0,
            max: 8.0,
            bits: 4,
        },
    ];
    let refused = changes.map(|ty| {
        let fields = [("x", ty), SHIP[1], SHIP[2]];
        bind_kind(&schema(), "ship", &fields, HINT).is_err()
    });
    assert_eq!(refused, [true, true, false]);
    // -0.0 == 0.0, but not bit for bit.
    let mut schema = schema();
    schema.kinds.push(kind(
        "zero",
        &[(
            "z",
            FieldType::Centered {
                range: 0.0,
                bits: 2,
            },
        )],
    ));
    let neg = [(
        "z",
        FieldType::Centered {
            range: -0.0,
            bits: 2,
        },
    )];
    assert!(bind_kind(&schema, "zero", &neg, HINT).is_err());
}

#[test]
fn bind_refuses_a_missing_or_an_extra_field() {
    let err = bind_kind(&schema(), "ship", &SHIP[..2], HINT).unwrap_err();
    assert_eq!(
        err,
        SchemaMismatch::ExtraField {
            kind: "ship",
            index: 2,
            name: "hp".into(),
            hint: HINT,
        }
    );
    let longer = [SHIP[0], SHIP[1], SHIP[2], ("shield", FieldType::Bool)];
    let err = bind_kind(&schema(), "ship", &longer, HINT).unwrap_err();
    assert_eq!(
        err,
        SchemaMismatch::MissingField {
            kind: "ship",
            index: 3,
            name: "shield",
            hint: HINT,
        }
    );
    assert_eq!(
        err.to_string(),
        "the kind `ship` lacks the field `shield` in the schema: regenerate with `zonekeep codegen`"
    );
}
