//! A zone's input type: `#[derive(Input)]` reading fields in order, little-endian, and
//! `Vec<u8>` taking the payload as is.

use crate::{DecodeError, Input, Writer};

#[test]
fn derived_input_reads_fields_in_order_little_endian() {
    #[derive(Debug, PartialEq, Input)]
    struct All {
        a: u8,
        b: u16,
        c: u32,
        d: u64,
        e: i8,
        f: i16,
        g: i32,
        h: f32,
        i: bool,
    }
    let mut w = Writer::new();
    w.u8(1)
        .u16(2)
        .u32(3)
        .u64(4)
        .i8(-5)
        .i16(-6)
        .i32(-7)
        .f32(8.5)
        .bool(true);
    let bytes = w.into_vec();
    assert_eq!(
        All::decode(&bytes),
        Ok(All {
            a: 1,
            b: 2,
            c: 3,
            d: 4,
            e: -5,
            f: -6,
            g: -7,
            h: 8.5,
            i: true
        })
    );
    for cut in 0..bytes.len() {
        assert!(All::decode(&bytes[..cut]).is_err());
    }
    let mut long = bytes.clone();
    long.push(0);
    assert_eq!(All::decode(&long), Err(DecodeError::Trailing(1)));
    let mut bad_bool = bytes;
    *bad_bool.last_mut().unwrap() = 2;
    assert!(matches!(
        All::decode(&bad_bool),
        Err(DecodeError::Invalid(_))
    ));
}

#[test]
fn vec_input_takes_the_payload_as_is() {
    assert_eq!(Vec::<u8>::decode(&[1, 2]), Ok(vec![1, 2]));
    assert_eq!(Vec::<u8>::decode(&[]), Ok(vec![]));
}
