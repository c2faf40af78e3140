//! [`PayloadWriter`]: builds a payload value by value in the same encoding the reader reads;
//! generated code writes inputs with it.

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
