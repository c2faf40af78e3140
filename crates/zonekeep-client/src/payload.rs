//! The little-endian payload encoding of zone inputs and events (docs/MODULES.md, "Encoding";
//! `zonekeep_protocol::contract`): integers and `f32` fixed-width little-endian, `bool` one byte
//! 0 or 1, `bytes` a `u32` length then the bytes, `str` such bytes holding UTF-8, and the rest
//! forms that take every byte left without a length. A trailing run of fixed-width values may be
//! optional: left off while zero, read as zero when absent.
//!
//! Code written by `zonekeep codegen --lang rust` builds inputs with [`PayloadWriter`], decodes
//! events with [`PayloadReader`] and checks a Welcome's schema with [`bind_kind`]; a game that
//! lays out payloads by hand can use them the same way.
//!
//! The reader is total: a payload cut short, a bool other than 0 or 1, text that is not UTF-8 or
//! bytes left over is a [`PayloadError`] naming the value and where it starts, never a panic.
//!
//! ```
//! use zonekeep_client::payload::{PayloadError, PayloadReader, PayloadWriter};
//!
//! let mut w = PayloadWriter::new();
//! w.u8(1).i16(-2).str("hi").bool(true);
//! let payload = w.into_vec();
//!
//! let mut r = PayloadReader::with_name(&payload, "event `greet`");
//! assert_eq!(r.u8("tag"), Ok(1));
//! assert_eq!(r.i16("turn"), Ok(-2));
//! assert_eq!(r.str("text"), Ok("hi"));
//! assert_eq!(r.bool("loud"), Ok(true));
//! // An optional trailing value the writer left off reads as zero.
//! assert_eq!(r.optional(|r| r.u32("extra")), Ok(0));
//! r.finish()?;
//! # Ok::<(), PayloadError>(())
//! ```

use std::fmt;

use zonekeep_protocol::schema::{FieldType, Schema};

/// Why a payload could not be read: it does not have the layout it was read with. Each variant
/// names the payload (see [`PayloadReader::with_name`]) and, but for [`PayloadError::LeftOver`],
/// the value being read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PayloadError {
    /// A value needs more bytes than the payload has left (for `bytes` and `str`: more than
    /// their length prefix says, or the prefix itself).
    #[error(
        "{payload}: `{value}` at byte {at} is cut short: it needs {needed} bytes, {left} are left"
    )]
    CutShort {
        /// The payload's name.
        payload: &'static str,
        /// The value's name.
        value: &'static str,
        /// Where the missing bytes start.
        at: usize,
        /// How many bytes it needs there.
        needed: usize,
        /// How many the payload has left.
        left: usize,
    },
    /// A bool's byte is neither 0 nor 1.
    #[error("{payload}: `{value}` at byte {at} is a bool of {byte}: a bool is 0 or 1")]
    NotABool {
        /// The payload's name.
        payload: &'static str,
        /// The value's name.
        value: &'static str,
        /// Where the byte is.
        at: usize,
        /// The byte.
        byte: u8,
    },
    /// A `str` value's bytes are not UTF-8.
    #[error(
        "{payload}: `{value}` at byte {at} is not UTF-8 (valid for its first {valid_up_to} bytes)"
    )]
    NotUtf8 {
        /// The payload's name.
        payload: &'static str,
        /// The value's name.
        value: &'static str,
        /// Where the text starts (after its length).
        at: usize,
        /// How many of its bytes are valid UTF-8.
        valid_up_to: usize,
    },
    /// Bytes are left after the last value.
    #[error("{payload}: {left} bytes left over at byte {at}, after the last value")]
    LeftOver {
        /// The payload's name.
        payload: &'static str,
        /// Where the extra bytes start.
        at: usize,
        /// How many there are.
        left: usize,
    },
}

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

/// Builds one payload; [`into_vec`](Self::into_vec) returns the bytes written. Writes chain:
/// `w.u8(1).f32(0.5)`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PayloadWriter {
    out: Vec<u8>,
}

impl PayloadWriter {
    /// An empty payload.
    pub fn new() -> Self {
        Self::default()
    }

    /// An empty payload with room for `capacity` bytes.
    pub fn with_capacity(capacity: usize) -> Self {
        Self {
            out: Vec::with_capacity(capacity),
        }
    }

    /// A `u8`.
    pub fn u8(&mut self, v: u8) -> &mut Self {
        self.raw(&v.to_le_bytes())
    }

    /// A little-endian `u16`.
    pub fn u16(&mut self, v: u16) -> &mut Self {
        self.raw(&v.to_le_bytes())
    }

    /// A little-endian `u32`.
    pub fn u32(&mut self, v: u32) -> &mut Self {
        self.raw(&v.to_le_bytes())
    }

    /// A little-endian `u64`.
    pub fn u64(&mut self, v: u64) -> &mut Self {
        self.raw(&v.to_le_bytes())
    }

    /// An `i8`.
    pub fn i8(&mut self, v: i8) -> &mut Self {
        self.raw(&v.to_le_bytes())
    }

    /// A little-endian `i16`.
    pub fn i16(&mut self, v: i16) -> &mut Self {
        self.raw(&v.to_le_bytes())
    }

    /// A little-endian `i32`.
    pub fn i32(&mut self, v: i32) -> &mut Self {
        self.raw(&v.to_le_bytes())
    }

    /// A little-endian `i64`.
    pub fn i64(&mut self, v: i64) -> &mut Self {
        self.raw(&v.to_le_bytes())
    }

    /// A little-endian `f32`, bit for bit (-0.0 and NaN payloads included).
    pub fn f32(&mut self, v: f32) -> &mut Self {
        self.raw(&v.to_le_bytes())
    }

    /// A bool: one byte, 0 or 1.
    pub fn bool(&mut self, v: bool) -> &mut Self {
        self.u8(u8::from(v))
    }

    /// A `u32` length, then the bytes. No payload comes near 4 GiB (zones refuse inputs far
    /// shorter); past `u32::MAX` bytes the length saturates rather than panics.
    pub fn bytes(&mut self, v: &[u8]) -> &mut Self {
        self.u32(u32::try_from(v.len()).unwrap_or(u32::MAX));
        self.raw(v)
    }

    /// A string's UTF-8 as [`bytes`](Self::bytes).
    pub fn str(&mut self, v: &str) -> &mut Self {
        self.bytes(v.as_bytes())
    }

    /// Bytes as they are, without a length (a `rest_bytes` or `rest_str` value, or a tag).
    pub fn raw(&mut self, v: &[u8]) -> &mut Self {
        self.out.extend_from_slice(v);
        self
    }

    /// How many bytes have been written.
    pub fn len(&self) -> usize {
        self.out.len()
    }

    /// Whether nothing has been written.
    pub fn is_empty(&self) -> bool {
        self.out.is_empty()
    }

    /// Drops every byte past the first `len`: trailing optional values that are zero are left
    /// off by noting [`len`](Self::len) after the last nonzero one and truncating to it.
    pub fn truncate(&mut self, len: usize) {
        self.out.truncate(len);
    }

    /// The bytes written so far.
    pub fn as_bytes(&self) -> &[u8] {
        &self.out
    }

    /// The payload.
    pub fn into_vec(self) -> Vec<u8> {
        self.out
    }
}

/// Why [`bind_kind`] refused a schema: it differs from the one the code was generated from.
/// Every variant carries the hint given to `bind_kind` (what to do about it, such as the command
/// that regenerates the code), shown after the problem. Names from the code are the `'static`
/// strings it was built with; names from the schema are owned.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum SchemaMismatch {
    /// The schema has no kind of that name.
    #[error("the schema has no kind `{kind}`{}", Hint(hint))]
    NoKind {
        /// The kind's name.
        kind: &'static str,
        /// What to do about it.
        hint: &'static str,
    },
    /// A field differs in name, type or a type parameter (floats compared bit for bit).
    #[error(
        "the kind `{kind}` has `{schema_name}` {schema_type:?} where this code has `{name}` {ty:?}{}",
        Hint(hint)
    )]
    OtherField {
        /// The kind's name.
        kind: &'static str,
        /// The field's index.
        index: usize,
        /// The field's name in the schema.
        schema_name: String,
        /// Its type in the schema.
        schema_type: FieldType,
        /// The name the code expects.
        name: &'static str,
        /// The type the code expects.
        ty: FieldType,
        /// What to do about it.
        hint: &'static str,
    },
    /// The schema's kind lacks a field the code expects.
    #[error(
        "the kind `{kind}` lacks the field `{name}` in the schema{}",
        Hint(hint)
    )]
    MissingField {
        /// The kind's name.
        kind: &'static str,
        /// The field's index.
        index: usize,
        /// The field's name.
        name: &'static str,
        /// What to do about it.
        hint: &'static str,
    },
    /// The schema's kind has a field the code does not know.
    #[error(
        "the kind `{kind}` has a field `{name}` this code does not know{}",
        Hint(hint)
    )]
    ExtraField {
        /// The kind's name.
        kind: &'static str,
        /// The field's index.
        index: usize,
        /// The field's name.
        name: String,
        /// What to do about it.
        hint: &'static str,
    },
    /// The kind's index in the schema does not fit a `u32` kind id.
    #[error("the kind `{kind}` is at index {index}, past every kind id")]
    NoKindId {
        /// The kind's name.
        kind: &'static str,
        /// Its index in the schema.
        index: usize,
    },
}

/// A hint after a colon, or nothing when it is empty.
struct Hint<'a>(&'a str);

impl fmt::Display for Hint<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0.is_empty() {
            Ok(())
        } else {
            write!(f, ": {}", self.0)
        }
    }
}

/// Whether two field types are the same with float parameters compared bit for bit (so `-0.0`
/// and `0.0` differ, and a NaN equals itself).
fn same_type(a: FieldType, b: FieldType) -> bool {
    /// The type with its floats as bit patterns.
    fn key(ty: FieldType) -> (u8, u32, u32, u8) {
        match ty {
            FieldType::Quant { min, max, bits } => (0, min.to_bits(), max.to_bits(), bits),
            FieldType::Centered { range, bits } => (1, range.to_bits(), 0, bits),
            FieldType::Angle { bits } => (2, 0, 0, bits),
            FieldType::UInt => (3, 0, 0, 0),
            FieldType::SInt => (4, 0, 0, 0),
            FieldType::Bool => (5, 0, 0, 0),
            FieldType::Str { max_len } => (6, 0, 0, max_len),
            FieldType::F32 => (7, 0, 0, 0),
        }
    }
    key(a) == key(b)
}

/// The kind id of the kind called `kind` in `schema` (its index), once its fields are checked
/// to be exactly `fields` in order: names equal, types and their parameters equal bit for bit.
/// Other kinds of the schema are not looked at. The first difference is refused, naming the kind
/// and field, with `regenerate_hint` after it (for example "regenerate with `zonekeep codegen`").
///
/// ```
/// use zonekeep_client::payload::{bind_kind, SchemaMismatch};
/// use zonekeep_client::protocol::schema::{FieldDef, FieldType, KindDef, Schema};
///
/// let field = |name: &str, ty| FieldDef { name: name.into(), ty };
/// let schema = Schema {
///     pos_step: 0.01,
///     kinds: vec![
///         KindDef { name: "rock".into(), fields: vec![] },
///         KindDef { name: "ship".into(), fields: vec![field("hp", FieldType::UInt)] },
///     ],
/// };
/// assert_eq!(bind_kind(&schema, "ship", &[("hp", FieldType::UInt)], "regenerate"), Ok(1));
/// let refused = bind_kind(&schema, "ship", &[("hp", FieldType::SInt)], "regenerate");
/// assert!(matches!(refused, Err(SchemaMismatch::OtherField { index: 0, .. })));
/// ```
pub fn bind_kind(
    schema: &Schema,
    kind: &'static str,
    fields: &[(&'static str, FieldType)],
    regenerate_hint: &'static str,
) -> Result<u32, SchemaMismatch> {
    let hint = regenerate_hint;
    let mut kinds = schema.kinds.iter().enumerate();
    let Some((id, def)) = kinds.find(|(_, k)| k.name == kind) else {
        return Err(SchemaMismatch::NoKind { kind, hint });
    };
    for index in 0..def.fields.len().max(fields.len()) {
        match (def.fields.get(index), fields.get(index)) {
            (Some(theirs), Some(&(name, ty))) => {
                if theirs.name != name || !same_type(theirs.ty, ty) {
                    return Err(SchemaMismatch::OtherField {
                        kind,
                        index,
                        schema_name: theirs.name.clone(),
                        schema_type: theirs.ty,
                        name,
                        ty,
                        hint,
                    });
                }
            }
            (None, Some(&(name, _))) => {
                return Err(SchemaMismatch::MissingField {
                    kind,
                    index,
                    name,
                    hint,
                });
            }
            (Some(theirs), None) => {
                return Err(SchemaMismatch::ExtraField {
                    kind,
                    index,
                    name: theirs.name.clone(),
                    hint,
                });
            }
            (None, None) => {}
        }
    }
    u32::try_from(id).map_err(|_| SchemaMismatch::NoKindId { kind, index: id })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;
    use zonekeep_protocol::schema::{FieldDef, KindDef};

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
}
