//! The byte codec every call input and command buffer is written with: what `Writer` writes,
//! and what `Reader` refuses (truncations, lengths beyond the input, bad values, trailing bytes).

use crate::{DecodeError, Reader, Writer};

#[test]
fn writer_and_reader_round_trip_every_type() {
    let mut w = Writer::new();
    w.u8(0xab)
        .u16(0xbeef)
        .u32(0xdead_beef)
        .u64(0x0123_4567_89ab_cdef)
        .i8(-2)
        .i16(-300)
        .i32(-70_000)
        .i64(-5)
        .f32(1.5)
        .bool(true)
        .bytes(&[1, 2, 3])
        .str("héllo");
    let bytes = w.into_vec();
    let mut r = Reader::new(&bytes);
    assert_eq!(r.u8(), Ok(0xab));
    assert_eq!(r.u16(), Ok(0xbeef));
    assert_eq!(r.u32(), Ok(0xdead_beef));
    assert_eq!(r.u64(), Ok(0x0123_4567_89ab_cdef));
    assert_eq!(r.i8(), Ok(-2));
    assert_eq!(r.i16(), Ok(-300));
    assert_eq!(r.i32(), Ok(-70_000));
    assert_eq!(r.i64(), Ok(-5));
    assert_eq!(r.f32(), Ok(1.5));
    assert_eq!(r.bool(), Ok(true));
    assert_eq!(r.bytes(), Ok(&[1u8, 2, 3][..]));
    assert_eq!(r.str(), Ok("héllo"));
    assert_eq!(r.finish(), Ok(()));
}

#[test]
fn writer_is_little_endian() {
    let mut w = Writer::new();
    w.u16(0x0102).u32(0x0304_0506).f32(1.0).str("ab");
    assert_eq!(
        w.as_bytes(),
        &[0x02, 0x01, 0x06, 0x05, 0x04, 0x03, 0, 0, 0x80, 0x3f, 2, 0, 0, 0, b'a', b'b']
    );
}

#[test]
fn reader_refuses_every_truncation() {
    let mut w = Writer::new();
    w.u8(1)
        .u16(2)
        .u32(3)
        .u64(4)
        .f32(5.0)
        .bytes(&[6, 7])
        .str("eight");
    let bytes = w.into_vec();
    let read_all = |b: &[u8]| -> Result<(), DecodeError> {
        let mut r = Reader::new(b);
        r.u8()?;
        r.u16()?;
        r.u32()?;
        r.u64()?;
        r.f32()?;
        r.bytes()?;
        r.str()?;
        r.finish()
    };
    assert_eq!(read_all(&bytes), Ok(()));
    for cut in 0..bytes.len() {
        let err = read_all(&bytes[..cut]).unwrap_err();
        assert!(
            matches!(err, DecodeError::Truncated { .. }),
            "cut {cut}: {err:?}"
        );
    }
}

#[test]
fn reader_checks_lengths_before_taking() {
    // A length of 4 GiB - 1 with two bytes behind it.
    let bytes = [0xff, 0xff, 0xff, 0xff, 1, 2];
    let mut r = Reader::new(&bytes);
    assert_eq!(
        r.bytes(),
        Err(DecodeError::Truncated {
            needed: 0xffff_ffff,
            remaining: 2
        })
    );
    // Nothing was consumed but the length.
    assert_eq!(r.remaining(), 2);
}

#[test]
fn reader_refuses_bad_values_and_trailing_bytes() {
    assert!(matches!(
        Reader::new(&[2]).bool(),
        Err(DecodeError::Invalid(_))
    ));
    assert!(matches!(
        Reader::new(&[2, 0, 0, 0, 0xc3, 0x28]).str(),
        Err(DecodeError::Invalid(_))
    ));
    let mut r = Reader::new(&[1, 2, 3]);
    r.u8().unwrap();
    assert_eq!(r.finish(), Err(DecodeError::Trailing(2)));
}
