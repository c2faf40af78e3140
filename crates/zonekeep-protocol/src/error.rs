//! Typed errors for encoding and decoding. Decoders never panic: every malformed input maps to one of
//! these variants, so a host can answer `Kick(PROTOCOL_ERROR)` and a fuzzer can check totality.

/// Why a byte string is not a valid message (PROTOCOL.md §2, "Decoders are total").
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    /// The input ended before the message did (includes an empty message).
    #[error("message truncated")]
    Truncated,
    /// A length or count exceeds its declared limit (checked before allocating).
    #[error("{what} too long: {len} > {max}")]
    TooLong {
        /// Which field or list.
        what: &'static str,
        /// The length or count found on the wire.
        len: u64,
        /// The limit it exceeds.
        max: u64,
    },
    /// The first byte names no message this decoder knows.
    #[error("unknown message tag 0x{0:02x}")]
    UnknownTag(u8),
    /// A string field is not valid UTF-8.
    #[error("string is not valid UTF-8")]
    InvalidUtf8,
    /// A varint has a redundant final zero group (e.g. `80 00`).
    #[error("non-canonical varint")]
    NonCanonicalVarint,
    /// A varint does not fit the width of its field.
    #[error("varint overflows its field")]
    Overflow,
    /// A value is out of range or the message is internally inconsistent.
    #[error("invalid message: {0}")]
    Invalid(&'static str),
    /// The message was complete but this many bytes followed it.
    #[error("{0} trailing bytes after the message")]
    TrailingBytes(usize),
}

impl DecodeError {
    /// A stable snake_case name for the error kind (used by the golden fixtures and the TS SDK).
    pub fn kind(&self) -> &'static str {
        match self {
            DecodeError::Truncated => "truncated",
            DecodeError::TooLong { .. } => "too_long",
            DecodeError::UnknownTag(_) => "unknown_tag",
            DecodeError::InvalidUtf8 => "invalid_utf8",
            DecodeError::NonCanonicalVarint => "non_canonical_varint",
            DecodeError::Overflow => "overflow",
            DecodeError::Invalid(_) => "invalid",
            DecodeError::TrailingBytes(_) => "trailing_bytes",
        }
    }
}

/// Why a value cannot be encoded. The encoders refuse anything a conforming decoder would reject, so
/// a host never sends bytes its own clients cannot read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EncodeError {
    /// A length or count exceeds its limit.
    #[error("{what} too long: {len} > {max}")]
    TooLong {
        /// Which field or list.
        what: &'static str,
        /// The length or count given.
        len: u64,
        /// The limit it exceeds.
        max: u64,
    },
    /// A value is out of range, mismatches its type, or the API was misused (e.g. sections out of order).
    #[error("cannot encode: {0}")]
    Invalid(&'static str),
}
