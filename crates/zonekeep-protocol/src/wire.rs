//! Wire primitives of PROTOCOL.md §2: LEB128 varints (canonical only), zig-zag, little-endian `f32`,
//! and length-prefixed strings and byte strings whose lengths are checked before anything is read.

use crate::error::{DecodeError, EncodeError};

/// Appends `v` as an unsigned LEB128 varint (canonical: no redundant zero group).
pub fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        // Truncation is the point: the low seven bits plus the continuation flag.
        out.push((v as u8 & 0x7f) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// Number of bytes `put_varint(v)` writes (1..=10).
pub fn varint_len(v: u64) -> usize {
    let bits = 64 - v.leading_zeros() as usize;
    bits.div_ceil(7).max(1)
}

/// Maps an `i32` to the zig-zag `u32` (0→0, -1→1, 1→2, …).
pub fn zigzag32(v: i32) -> u32 {
    ((v << 1) ^ (v >> 31)) as u32
}

/// Inverse of [`zigzag32`].
pub fn unzigzag32(v: u32) -> i32 {
    ((v >> 1) as i32) ^ -((v & 1) as i32)
}

/// Maps an `i64` to the zig-zag `u64`.
pub fn zigzag64(v: i64) -> u64 {
    ((v << 1) ^ (v >> 63)) as u64
}

/// Inverse of [`zigzag64`].
pub fn unzigzag64(v: u64) -> i64 {
    ((v >> 1) as i64) ^ -((v & 1) as i64)
}

/// Appends a zig-zag encoded `i32`.
pub fn put_zigzag32(out: &mut Vec<u8>, v: i32) {
    put_varint(out, u64::from(zigzag32(v)));
}

/// Appends a zig-zag encoded `i64`.
pub fn put_zigzag64(out: &mut Vec<u8>, v: i64) {
    put_varint(out, zigzag64(v));
}

/// Appends an IEEE-754 binary32, little-endian (bit pattern preserved, NaN payloads included).
pub fn put_f32(out: &mut Vec<u8>, v: f32) {
    out.extend_from_slice(&v.to_le_bytes());
}

/// Appends `string(max)`: varint byte length, then the UTF-8 bytes. Refuses strings over `max` bytes.
pub fn put_str(out: &mut Vec<u8>, s: &str, max: usize) -> Result<(), EncodeError> {
    put_bytes_named(out, "string", s.as_bytes(), max)
}

/// Appends `bytes(max)`: varint length, then the bytes. Refuses more than `max` bytes.
pub fn put_bytes(out: &mut Vec<u8>, b: &[u8], max: usize) -> Result<(), EncodeError> {
    put_bytes_named(out, "bytes", b, max)
}

/// Like [`put_bytes`], naming the field in the error.
pub fn put_bytes_named(
    out: &mut Vec<u8>,
    what: &'static str,
    b: &[u8],
    max: usize,
) -> Result<(), EncodeError> {
    if b.len() > max {
        return Err(EncodeError::TooLong {
            what,
            len: b.len() as u64,
            max: max as u64,
        });
    }
    put_varint(out, b.len() as u64);
    out.extend_from_slice(b);
    Ok(())
}

/// Like [`put_str`], naming the field in the error.
pub fn put_str_named(
    out: &mut Vec<u8>,
    what: &'static str,
    s: &str,
    max: usize,
) -> Result<(), EncodeError> {
    put_bytes_named(out, what, s.as_bytes(), max)
}

/// Appends one message as a WebTransport control stream carries it (PROTOCOL.md §1.1): its length
/// as a §2 `varint` (LEB128, not QUIC's variable-length integer), then the message.
pub fn put_frame(out: &mut Vec<u8>, message: &[u8]) {
    put_varint(out, message.len() as u64);
    out.extend_from_slice(message);
}

/// The length in front of a message on a WebTransport control stream (PROTOCOL.md §1.1), read a
/// byte at a time as the stream delivers them: a canonical §2 `varint` of the u32 width (at most
/// 5 bytes), refused over `max` as soon as it is complete, before the message is read.
#[derive(Debug, Clone)]
pub struct FrameLength {
    value: u64,
    read: u32,
    max: u32,
}

impl FrameLength {
    /// A length to read, refused beyond `max` bytes (the direction's §7 limit).
    pub fn new(max: u32) -> Self {
        FrameLength {
            value: 0,
            read: 0,
            max,
        }
    }

    /// Takes the next byte of the length: `Ok(Some(len))` once it is complete, `Ok(None)` while
    /// more bytes follow; `NonCanonicalVarint` for a redundant final zero group, `Overflow` past
    /// the u32 width, `TooLong` over the limit.
    pub fn push(&mut self, byte: u8) -> Result<Option<u32>, DecodeError> {
        if self.read == 4 && byte > 0x0f {
            return Err(DecodeError::Overflow);
        }
        if self.read > 0 && byte == 0 {
            return Err(DecodeError::NonCanonicalVarint);
        }
        self.value |= u64::from(byte & 0x7f) << (7 * self.read);
        self.read += 1;
        if byte & 0x80 != 0 {
            return Ok(None);
        }
        let len = u32::try_from(self.value).map_err(|_| DecodeError::Overflow)?;
        if len > self.max {
            return Err(DecodeError::TooLong {
                what: "framed message",
                len: u64::from(len),
                max: u64::from(self.max),
            });
        }
        Ok(Some(len))
    }
}

/// A cursor over one message's bytes. Every read is bounds-checked and returns a typed error; slices and
/// strings borrow from the input, so reading never allocates.
#[derive(Debug, Clone)]
pub struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    /// A reader at the start of `buf`.
    pub fn new(buf: &'a [u8]) -> Self {
        Reader { buf, pos: 0 }
    }

    /// Bytes not read yet.
    pub fn remaining(&self) -> usize {
        self.buf.len().saturating_sub(self.pos)
    }

    /// Bytes read so far.
    pub fn position(&self) -> usize {
        self.pos
    }

    /// Succeeds only if every byte was consumed (PROTOCOL.md §1: trailing bytes are an error).
    pub fn finish(&self) -> Result<(), DecodeError> {
        match self.remaining() {
            0 => Ok(()),
            n => Err(DecodeError::TrailingBytes(n)),
        }
    }

    /// Reads one byte.
    pub fn u8(&mut self) -> Result<u8, DecodeError> {
        let b = *self.buf.get(self.pos).ok_or(DecodeError::Truncated)?;
        self.pos += 1;
        Ok(b)
    }

    /// Reads exactly `n` bytes.
    pub fn take(&mut self, n: usize) -> Result<&'a [u8], DecodeError> {
        if n > self.remaining() {
            return Err(DecodeError::Truncated);
        }
        let s = self
            .buf
            .get(self.pos..self.pos + n)
            .ok_or(DecodeError::Truncated)?;
        self.pos += n;
        Ok(s)
    }

    /// Reads a canonical varint of at most `bits` significant bits (32 or 64).
    fn varint_bits(&mut self, bits: u32) -> Result<u64, DecodeError> {
        let mut v: u64 = 0;
        let mut shift: u32 = 0;
        loop {
            let b = self.u8()?;
            let group = u64::from(b & 0x7f);
            // The group must fit in what is left of the field's width.
            if shift >= bits || (bits - shift < 7 && group >> (bits - shift) != 0) {
                return Err(DecodeError::Overflow);
            }
            v |= group << shift;
            if b & 0x80 == 0 {
                if group == 0 && shift > 0 {
                    return Err(DecodeError::NonCanonicalVarint);
                }
                return Ok(v);
            }
            shift += 7;
        }
    }

    /// Reads a varint that must fit a `u32` (at most 5 bytes).
    pub fn varint_u32(&mut self) -> Result<u32, DecodeError> {
        let v = self.varint_bits(32)?;
        u32::try_from(v).map_err(|_| DecodeError::Overflow)
    }

    /// Reads a varint that must fit a `u64` (at most 10 bytes).
    pub fn varint_u64(&mut self) -> Result<u64, DecodeError> {
        self.varint_bits(64)
    }

    /// Reads a varint that must fit a `u16` (wider values are [`DecodeError::Overflow`]).
    pub fn varint_u16(&mut self) -> Result<u16, DecodeError> {
        let v = self.varint_u32()?;
        u16::try_from(v).map_err(|_| DecodeError::Overflow)
    }

    /// Reads a zig-zag `i32`.
    pub fn zigzag32(&mut self) -> Result<i32, DecodeError> {
        Ok(unzigzag32(self.varint_u32()?))
    }

    /// Reads a zig-zag `i64`.
    pub fn zigzag64(&mut self) -> Result<i64, DecodeError> {
        Ok(unzigzag64(self.varint_u64()?))
    }

    /// A `u32`, 4 bytes little-endian (a KnownSetCheck's or a resume_from's hash).
    pub fn u32_le(&mut self) -> Result<u32, DecodeError> {
        let b: [u8; 4] = self
            .take(4)?
            .try_into()
            .map_err(|_| DecodeError::Truncated)?;
        Ok(u32::from_le_bytes(b))
    }

    /// Reads a little-endian `f32` (bit pattern preserved).
    pub fn f32(&mut self) -> Result<f32, DecodeError> {
        let b = self.take(4)?;
        let arr: [u8; 4] = b.try_into().map_err(|_| DecodeError::Truncated)?;
        Ok(f32::from_le_bytes(arr))
    }

    /// Reads a count or length varint and checks it against `max` before the caller allocates.
    pub fn count(&mut self, what: &'static str, max: usize) -> Result<usize, DecodeError> {
        let n = self.varint_u32()?;
        if n as u64 > max as u64 {
            return Err(DecodeError::TooLong {
                what,
                len: u64::from(n),
                max: max as u64,
            });
        }
        Ok(n as usize)
    }

    /// Reads `bytes(max)`.
    pub fn bytes(&mut self, max: usize) -> Result<&'a [u8], DecodeError> {
        self.bytes_named("bytes", max)
    }

    /// Reads `bytes(max)`, naming the field in a [`DecodeError::TooLong`].
    pub fn bytes_named(&mut self, what: &'static str, max: usize) -> Result<&'a [u8], DecodeError> {
        let n = self.count(what, max)?;
        self.take(n)
    }

    /// Reads `string(max)`.
    pub fn str(&mut self, max: usize) -> Result<&'a str, DecodeError> {
        self.str_named("string", max)
    }

    /// Reads `string(max)`, naming the field in a [`DecodeError::TooLong`].
    pub fn str_named(&mut self, what: &'static str, max: usize) -> Result<&'a str, DecodeError> {
        let b = self.bytes_named(what, max)?;
        std::str::from_utf8(b).map_err(|_| DecodeError::InvalidUtf8)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    fn enc(v: u64) -> Vec<u8> {
        let mut o = Vec::new();
        put_varint(&mut o, v);
        o
    }

    #[test]
    fn varint_known_encodings() {
        assert_eq!(enc(0), [0x00]);
        assert_eq!(enc(1), [0x01]);
        assert_eq!(enc(127), [0x7f]);
        assert_eq!(enc(128), [0x80, 0x01]);
        assert_eq!(enc(300), [0xac, 0x02]);
        assert_eq!(enc(u64::from(u32::MAX)), [0xff, 0xff, 0xff, 0xff, 0x0f]);
        assert_eq!(enc(u64::MAX).len(), 10);
        for v in [0, 1, 127, 128, 16383, 16384, u64::from(u32::MAX), u64::MAX] {
            assert_eq!(enc(v).len(), varint_len(v));
            assert_eq!(Reader::new(&enc(v)).varint_u64().unwrap(), v);
        }
    }

    /// Feeds `bytes` to a frame length of limit `max`: the length, or the first error.
    fn frame_len(bytes: &[u8], max: u32) -> Result<Option<u32>, DecodeError> {
        let mut f = FrameLength::new(max);
        let mut last = Ok(None);
        for &b in bytes {
            last = f.push(b);
            if !matches!(last, Ok(None)) {
                break;
            }
        }
        last
    }

    #[test]
    fn frame_lengths_are_canonical_leb128_of_the_u32_width() {
        // LEB128, not QUIC's varint (which would write 300 as `41 2c`).
        assert_eq!(frame_len(&[0xac, 0x02], 8192), Ok(Some(300)));
        assert_eq!(frame_len(&[0x00], 8192), Ok(Some(0)));
        assert_eq!(
            frame_len(&[0xff, 0xff, 0xff, 0xff, 0x0f], u32::MAX),
            Ok(Some(u32::MAX))
        );
        let mut framed = Vec::new();
        put_frame(&mut framed, &[7; 300]);
        assert_eq!(&framed[..2], [0xac, 0x02]);
        assert_eq!(framed.len(), 302);
        // A redundant zero group, a sixth byte, a value past u32, a length over the limit.
        assert_eq!(
            frame_len(&[0x80, 0x00], 8192),
            Err(DecodeError::NonCanonicalVarint)
        );
        assert_eq!(
            frame_len(&[0x80, 0x80, 0x80, 0x80, 0x80], u32::MAX),
            Err(DecodeError::Overflow)
        );
        assert_eq!(
            frame_len(&[0xff, 0xff, 0xff, 0xff, 0x10], u32::MAX),
            Err(DecodeError::Overflow)
        );
        assert_eq!(
            frame_len(&[0x81, 0x40], 8192),
            Err(DecodeError::TooLong {
                what: "framed message",
                len: 8193,
                max: 8192
            })
        );
        // Incomplete: more bytes to come.
        assert_eq!(frame_len(&[0x80, 0x80], 8192), Ok(None));
    }

    #[test]
    fn varint_rejects_noncanonical_and_overflow() {
        assert_eq!(
            Reader::new(&[0x80, 0x00]).varint_u32(),
            Err(DecodeError::NonCanonicalVarint)
        );
        assert_eq!(
            Reader::new(&[0xff, 0xff, 0xff, 0xff, 0x1f]).varint_u32(),
            Err(DecodeError::Overflow)
        );
        assert_eq!(
            Reader::new(&[0x80, 0x80, 0x80, 0x80, 0x80, 0x01]).varint_u32(),
            Err(DecodeError::Overflow)
        );
        let mut max64 = vec![0xff; 9];
        max64.push(0x01);
        assert_eq!(Reader::new(&max64).varint_u64(), Ok(u64::MAX));
        max64[9] = 0x02;
        assert_eq!(Reader::new(&max64).varint_u64(), Err(DecodeError::Overflow));
        assert_eq!(
            Reader::new(&[0x80]).varint_u32(),
            Err(DecodeError::Truncated)
        );
        assert_eq!(Reader::new(&[]).varint_u32(), Err(DecodeError::Truncated));
        assert_eq!(
            Reader::new(&[0x80, 0x80, 0x04]).varint_u16(),
            Err(DecodeError::Overflow)
        );
    }

    #[test]
    fn zigzag_maps() {
        for (v, z) in [
            (0, 0u32),
            (-1, 1),
            (1, 2),
            (-2, 3),
            (i32::MAX, u32::MAX - 1),
            (i32::MIN, u32::MAX),
        ] {
            assert_eq!(zigzag32(v), z);
            assert_eq!(unzigzag32(z), v);
        }
        for v in [0i64, -1, 1, i64::MIN, i64::MAX] {
            assert_eq!(unzigzag64(zigzag64(v)), v);
        }
    }

    #[test]
    fn strings_and_bytes_check_limits() {
        let mut o = Vec::new();
        put_str(&mut o, "héllo", 16).unwrap();
        assert_eq!(o[0], 6);
        let mut r = Reader::new(&o);
        assert_eq!(r.str(16).unwrap(), "héllo");
        r.finish().unwrap();
        assert!(matches!(
            Reader::new(&o).str(5),
            Err(DecodeError::TooLong { len: 6, max: 5, .. })
        ));
        assert!(put_bytes(&mut o, &[0; 5], 4).is_err());
        assert_eq!(
            Reader::new(&[2, 0xc3, 0x28]).str(8),
            Err(DecodeError::InvalidUtf8)
        );
        // A huge declared length is refused by the limit, not by trying to read it.
        assert!(matches!(
            Reader::new(&[0xff, 0xff, 0xff, 0xff, 0x0f]).bytes(64),
            Err(DecodeError::TooLong { .. })
        ));
        assert_eq!(
            Reader::new(&[3, 1, 2]).bytes(8),
            Err(DecodeError::Truncated)
        );
        assert_eq!(
            Reader::new(&[1, 2]).finish(),
            Err(DecodeError::TrailingBytes(2))
        );
    }

    #[test]
    fn f32_little_endian_bits() {
        let mut o = Vec::new();
        put_f32(&mut o, 1.0);
        assert_eq!(o, [0x00, 0x00, 0x80, 0x3f]);
        let nan = f32::from_bits(0x7fc0_1234);
        o.clear();
        put_f32(&mut o, nan);
        assert_eq!(Reader::new(&o).f32().unwrap().to_bits(), 0x7fc0_1234);
        assert_eq!(Reader::new(&[1, 2, 3]).f32(), Err(DecodeError::Truncated));
    }
}
