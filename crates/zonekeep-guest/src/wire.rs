//! Little-endian encoding: the [`Reader`] and [`Writer`] the SDK speaks the ABI with, also meant
//! for a zone's own saves.
//!
//! Integers and `f32` are fixed-width little-endian; `bytes` is a `u32` length then the bytes;
//! `str` is `bytes` holding UTF-8 (docs/MODULES.md, "Encoding"). A [`Reader`] checks every
//! length against what remains and never panics.

use std::fmt;

/// Why bytes could not be read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DecodeError {
    /// The input ended before a value (or a length's announced bytes) was complete.
    Truncated {
        /// Bytes the value needed.
        needed: usize,
        /// Bytes that remained.
        remaining: usize,
    },
    /// Bytes were left after the last value.
    Trailing(usize),
    /// A value is not one the format allows (bad UTF-8, a bool other than 0 or 1, an unknown
    /// tag...).
    Invalid(&'static str),
}

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Truncated { needed, remaining } => {
                write!(f, "truncated: needed {needed} bytes, {remaining} remain")
            }
            Self::Trailing(n) => write!(f, "{n} trailing bytes"),
            Self::Invalid(what) => write!(f, "invalid: {what}"),
        }
    }
}

impl std::error::Error for DecodeError {}

/// Reads little-endian values from a byte slice, front to back.
#[derive(Debug, Clone)]
pub struct Reader<'a> {
    bytes: &'a [u8],
}

impl<'a> Reader<'a> {
    /// A reader over `bytes`.
    pub fn new(bytes: &'a [u8]) -> Self {
        Self { bytes }
    }

    /// How many bytes remain.
    pub fn remaining(&self) -> usize {
        self.bytes.len()
    }

    /// Whether every byte was read.
    pub fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }

    /// The bytes not read yet (without consuming them).
    pub fn rest(&self) -> &'a [u8] {
        self.bytes
    }

    /// Succeed only if every byte was read ([`DecodeError::Trailing`] otherwise).
    pub fn finish(&self) -> Result<(), DecodeError> {
        match self.bytes.len() {
            0 => Ok(()),
            n => Err(DecodeError::Trailing(n)),
        }
    }

    /// The next `n` bytes.
    pub fn take(&mut self, n: usize) -> Result<&'a [u8], DecodeError> {
        if n > self.bytes.len() {
            return Err(DecodeError::Truncated {
                needed: n,
                remaining: self.bytes.len(),
            });
        }
        let (head, tail) = self.bytes.split_at(n);
        self.bytes = tail;
        Ok(head)
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N], DecodeError> {
        let mut out = [0u8; N];
        out.copy_from_slice(self.take(N)?);
        Ok(out)
    }

    /// A `u8`.
    pub fn u8(&mut self) -> Result<u8, DecodeError> {
        Ok(self.array::<1>()?[0])
    }

    /// A `u16`.
    pub fn u16(&mut self) -> Result<u16, DecodeError> {
        self.array().map(u16::from_le_bytes)
    }

    /// A `u32`.
    pub fn u32(&mut self) -> Result<u32, DecodeError> {
        self.array().map(u32::from_le_bytes)
    }

    /// A `u64`.
    pub fn u64(&mut self) -> Result<u64, DecodeError> {
        self.array().map(u64::from_le_bytes)
    }

    /// An `i8`.
    pub fn i8(&mut self) -> Result<i8, DecodeError> {
        self.array().map(i8::from_le_bytes)
    }

    /// An `i16`.
    pub fn i16(&mut self) -> Result<i16, DecodeError> {
        self.array().map(i16::from_le_bytes)
    }

    /// An `i32`.
    pub fn i32(&mut self) -> Result<i32, DecodeError> {
        self.array().map(i32::from_le_bytes)
    }

    /// An `i64`.
    pub fn i64(&mut self) -> Result<i64, DecodeError> {
        self.array().map(i64::from_le_bytes)
    }

    /// An `f32` (any bit pattern, NaN included).
    pub fn f32(&mut self) -> Result<f32, DecodeError> {
        self.array().map(f32::from_le_bytes)
    }

    /// A `bool`: one byte, 0 or 1.
    pub fn bool(&mut self) -> Result<bool, DecodeError> {
        match self.u8()? {
            0 => Ok(false),
            1 => Ok(true),
            _ => Err(DecodeError::Invalid("a bool must be 0 or 1")),
        }
    }

    /// `bytes`: a `u32` length, then that many bytes (the length is checked against what
    /// remains before anything is taken).
    pub fn bytes(&mut self) -> Result<&'a [u8], DecodeError> {
        let len = self.u32()?;
        let len = usize::try_from(len).map_err(|_| DecodeError::Truncated {
            needed: usize::MAX,
            remaining: self.bytes.len(),
        })?;
        self.take(len)
    }

    /// `str`: `bytes` holding UTF-8.
    pub fn str(&mut self) -> Result<&'a str, DecodeError> {
        std::str::from_utf8(self.bytes()?).map_err(|_| DecodeError::Invalid("a str is not UTF-8"))
    }
}

/// Appends little-endian values to a byte buffer. Every method returns `&mut Self`, so calls
/// chain: `w.u32(7).str("name")`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Writer {
    buf: Vec<u8>,
}

impl Writer {
    /// An empty writer.
    pub fn new() -> Self {
        Self::default()
    }

    /// A writer appending to `buf`.
    pub fn from_vec(buf: Vec<u8>) -> Self {
        Self { buf }
    }

    /// The bytes written.
    pub fn into_vec(self) -> Vec<u8> {
        self.buf
    }

    /// The bytes written so far.
    pub fn as_bytes(&self) -> &[u8] {
        &self.buf
    }

    /// How many bytes were written.
    pub fn len(&self) -> usize {
        self.buf.len()
    }

    /// Whether nothing was written.
    pub fn is_empty(&self) -> bool {
        self.buf.is_empty()
    }

    /// Raw bytes, without a length.
    pub fn raw(&mut self, bytes: &[u8]) -> &mut Self {
        self.buf.extend_from_slice(bytes);
        self
    }

    /// A `u8`.
    pub fn u8(&mut self, v: u8) -> &mut Self {
        self.buf.push(v);
        self
    }

    /// A `u16`.
    pub fn u16(&mut self, v: u16) -> &mut Self {
        self.raw(&v.to_le_bytes())
    }

    /// A `u32`.
    pub fn u32(&mut self, v: u32) -> &mut Self {
        self.raw(&v.to_le_bytes())
    }

    /// A `u64`.
    pub fn u64(&mut self, v: u64) -> &mut Self {
        self.raw(&v.to_le_bytes())
    }

    /// An `i8`.
    pub fn i8(&mut self, v: i8) -> &mut Self {
        self.raw(&v.to_le_bytes())
    }

    /// An `i16`.
    pub fn i16(&mut self, v: i16) -> &mut Self {
        self.raw(&v.to_le_bytes())
    }

    /// An `i32`.
    pub fn i32(&mut self, v: i32) -> &mut Self {
        self.raw(&v.to_le_bytes())
    }

    /// An `i64`.
    pub fn i64(&mut self, v: i64) -> &mut Self {
        self.raw(&v.to_le_bytes())
    }

    /// An `f32` (its bits, NaN included).
    pub fn f32(&mut self, v: f32) -> &mut Self {
        self.raw(&v.to_le_bytes())
    }

    /// A `bool` as one byte, 0 or 1.
    pub fn bool(&mut self, v: bool) -> &mut Self {
        self.u8(u8::from(v))
    }

    /// `bytes`: a `u32` length, then the bytes.
    ///
    /// # Panics
    /// If `v` is 4 GiB or longer (impossible on `wasm32`, whose memory is smaller).
    pub fn bytes(&mut self, v: &[u8]) -> &mut Self {
        let len = match u32::try_from(v.len()) {
            Ok(len) => len,
            Err(_) => panic!("a byte string of {} bytes has no u32 length", v.len()),
        };
        self.u32(len).raw(v)
    }

    /// `str`: `bytes` holding UTF-8.
    pub fn str(&mut self, v: &str) -> &mut Self {
        self.bytes(v.as_bytes())
    }
}
