//! [`PayloadReader`]: reads a payload front to back, one named value at a time. It is total:
//! every way a payload can differ from the layout it is read with is a [`PayloadError`], never a
//! panic.

use super::error::PayloadError;

/// Reads one payload front to back. Every read names its value for the error it may return;
/// reads never panic.
#[derive(Debug, Clone)]
pub struct PayloadReader<'a> {
    rest: &'a [u8],
    len: usize,
    name: &'static str,
}

impl<'a> PayloadReader<'a> {
    /// A reader of `payload`, called "payload" in errors.
    pub fn new(payload: &'a [u8]) -> Self {
        Self::with_name(payload, "payload")
    }

    /// A reader of `payload`, called `name` in errors (for example "event `hit`").
    pub fn with_name(payload: &'a [u8], name: &'static str) -> Self {
        Self {
            rest: payload,
            len: payload.len(),
            name,
        }
    }

    /// The payload's name in errors.
    pub fn name(&self) -> &'static str {
        self.name
    }

    /// How many bytes have been read.
    pub fn position(&self) -> usize {
        self.len.saturating_sub(self.rest.len())
    }

    /// How many bytes are left.
    pub fn remaining(&self) -> usize {
        self.rest.len()
    }

    /// Whether every byte has been read.
    pub fn at_end(&self) -> bool {
        self.rest.is_empty()
    }

    fn cut_short(&self, value: &'static str, needed: usize) -> PayloadError {
        PayloadError::CutShort {
            payload: self.name,
            value,
            at: self.position(),
            needed,
            left: self.rest.len(),
        }
    }

    /// The next `N` bytes.
    fn array<const N: usize>(&mut self, value: &'static str) -> Result<[u8; N], PayloadError> {
        let Some((head, rest)) = self.rest.split_first_chunk::<N>() else {
            return Err(self.cut_short(value, N));
        };
        self.rest = rest;
        Ok(*head)
    }

    /// The next `len` bytes.
    fn take(&mut self, value: &'static str, len: usize) -> Result<&'a [u8], PayloadError> {
        let Some((head, rest)) = self.rest.split_at_checked(len) else {
            return Err(self.cut_short(value, len));
        };
        self.rest = rest;
        Ok(head)
    }

    /// A `u8`.
    pub fn u8(&mut self, value: &'static str) -> Result<u8, PayloadError> {
        self.array(value).map(u8::from_le_bytes)
    }

    /// A little-endian `u16`.
    pub fn u16(&mut self, value: &'static str) -> Result<u16, PayloadError> {
        self.array(value).map(u16::from_le_bytes)
    }

    /// A little-endian `u32`.
    pub fn u32(&mut self, value: &'static str) -> Result<u32, PayloadError> {
        self.array(value).map(u32::from_le_bytes)
    }

    /// A little-endian `u64`.
    pub fn u64(&mut self, value: &'static str) -> Result<u64, PayloadError> {
        self.array(value).map(u64::from_le_bytes)
    }

    /// An `i8`.
    pub fn i8(&mut self, value: &'static str) -> Result<i8, PayloadError> {
        self.array(value).map(i8::from_le_bytes)
    }

    /// A little-endian `i16`.
    pub fn i16(&mut self, value: &'static str) -> Result<i16, PayloadError> {
        self.array(value).map(i16::from_le_bytes)
    }

    /// A little-endian `i32`.
    pub fn i32(&mut self, value: &'static str) -> Result<i32, PayloadError> {
        self.array(value).map(i32::from_le_bytes)
    }

    /// A little-endian `i64`.
    pub fn i64(&mut self, value: &'static str) -> Result<i64, PayloadError> {
        self.array(value).map(i64::from_le_bytes)
    }

    /// A little-endian `f32`, bit for bit (NaN payloads and -0.0 included).
    pub fn f32(&mut self, value: &'static str) -> Result<f32, PayloadError> {
        self.array(value).map(f32::from_le_bytes)
    }

    /// A bool: one byte, 0 or 1; any other byte is [`PayloadError::NotABool`].
    pub fn bool(&mut self, value: &'static str) -> Result<bool, PayloadError> {
        let at = self.position();
        match self.array(value)? {
            [0] => Ok(false),
            [1] => Ok(true),
            [byte] => Err(PayloadError::NotABool {
                payload: self.name,
                value,
                at,
                byte,
            }),
        }
    }

    /// A `u32` length, then that many bytes (borrowed from the payload).
    pub fn bytes(&mut self, value: &'static str) -> Result<&'a [u8], PayloadError> {
        let len = self.u32(value)?;
        // A length past the address space cannot fit what is left either.
        let len = usize::try_from(len).unwrap_or(usize::MAX);
        self.take(value, len)
    }

    /// [`bytes`](Self::bytes) holding UTF-8.
    pub fn str(&mut self, value: &'static str) -> Result<&'a str, PayloadError> {
        let bytes = self.bytes(value)?;
        self.utf8(value, bytes)
    }

    /// Every byte left, without a length (a `rest_bytes` value).
    pub fn rest_bytes(&mut self) -> &'a [u8] {
        std::mem::take(&mut self.rest)
    }

    /// Every byte left, as UTF-8 (a `rest_str` value).
    pub fn rest_str(&mut self, value: &'static str) -> Result<&'a str, PayloadError> {
        let bytes = self.rest_bytes();
        self.utf8(value, bytes)
    }

    /// `bytes`, just taken from the payload, as UTF-8.
    fn utf8(&self, value: &'static str, bytes: &'a [u8]) -> Result<&'a str, PayloadError> {
        std::str::from_utf8(bytes).map_err(|e| PayloadError::NotUtf8 {
            payload: self.name,
            value,
            at: self.position().saturating_sub(bytes.len()),
            valid_up_to: e.valid_up_to(),
        })
    }

    /// An optional trailing value: `read` when bytes are left, the type's default (zero) when
    /// the payload has ended. A value only partly there is still an error.
    ///
    /// ```
    /// # use zonekeep_client::payload::PayloadReader;
    /// let mut r = PayloadReader::new(&[7]);
    /// assert_eq!(r.optional(|r| r.u8("boost")), Ok(7));
    /// assert_eq!(r.optional(|r| r.f32("trim")), Ok(0.0));
    /// ```
    pub fn optional<T: Default>(
        &mut self,
        read: impl FnOnce(&mut Self) -> Result<T, PayloadError>,
    ) -> Result<T, PayloadError> {
        if self.at_end() {
            return Ok(T::default());
        }
        read(self)
    }

    /// Ends the read: bytes left after the last value are [`PayloadError::LeftOver`].
    pub fn finish(self) -> Result<(), PayloadError> {
        if self.rest.is_empty() {
            return Ok(());
        }
        Err(PayloadError::LeftOver {
            payload: self.name,
            at: self.position(),
            left: self.rest.len(),
        })
    }
}
