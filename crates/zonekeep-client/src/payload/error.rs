//! [`PayloadError`]: why a payload could not be read, naming the payload, the value and the byte
//! where it starts. The reader returns it; generated event decoders pass it on.

/// Why a payload could not be read: it does not have the layout it was read with. Each variant
/// names the payload (see [`PayloadReader::with_name`](super::PayloadReader::with_name)) and, but
/// for [`PayloadError::LeftOver`], the value being read.
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
