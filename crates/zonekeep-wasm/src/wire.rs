//! The ABI's byte layout (docs/MODULES.md): little-endian fixed-width fields, `u32`-length-prefixed
//! bytes and strings. The host writes call inputs with the `put_*` functions and reads command buffers
//! with [`Reader`], which checks every length against what remains.

use crate::error::Failure;

/// Appends `v`.
pub fn put_u8(out: &mut Vec<u8>, v: u8) {
    out.push(v);
}

/// Appends `v`, little-endian.
pub fn put_u32(out: &mut Vec<u8>, v: u32) {
    out.extend_from_slice(&v.to_le_bytes());
}

/// Appends `v`, little-endian.
pub fn put_u64(out: &mut Vec<u8>, v: u64) {
    out.extend_from_slice(&v.to_le_bytes());
}

/// Appends `b` with its `u32` length first. Inputs are bounded far below 4 GiB by the protocol's
/// limits; a longer slice is cut rather than mis-framed.
pub fn put_bytes(out: &mut Vec<u8>, b: &[u8]) {
    let len = u32::try_from(b.len()).unwrap_or(u32::MAX);
    put_u32(out, len);
    out.extend_from_slice(&b[..len as usize]);
}

/// Appends `s` as bytes.
pub fn put_str(out: &mut Vec<u8>, s: &str) {
    put_bytes(out, s.as_bytes());
}

/// Reads a command buffer; every read is checked, and running short is the module's ABI error.
#[derive(Debug)]
pub struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    /// A reader at the start of `buf`.
    pub fn new(buf: &'a [u8]) -> Self {
        Self { buf, pos: 0 }
    }

    /// Bytes not read yet.
    pub fn remaining(&self) -> usize {
        self.buf.len().saturating_sub(self.pos)
    }

    /// Whether everything was read.
    pub fn is_empty(&self) -> bool {
        self.pos >= self.buf.len()
    }

    fn take(&mut self, n: usize, what: &str) -> Result<&'a [u8], Failure> {
        let end = self.pos.checked_add(n).filter(|&e| e <= self.buf.len());
        let Some(end) = end else {
            return Err(Failure::Abi(format!(
                "{what} runs past the end of the buffer at byte {}",
                self.pos
            )));
        };
        let s = &self.buf[self.pos..end];
        self.pos = end;
        Ok(s)
    }

    fn array<const N: usize>(&mut self, what: &str) -> Result<[u8; N], Failure> {
        let mut a = [0; N];
        a.copy_from_slice(self.take(N, what)?);
        Ok(a)
    }

    /// A `u8`.
    pub fn u8(&mut self, what: &str) -> Result<u8, Failure> {
        Ok(self.array::<1>(what)?[0])
    }

    /// Everything not read yet.
    pub fn rest(self) -> &'a [u8] {
        self.buf.get(self.pos..).unwrap_or_default()
    }

    /// A little-endian `u16`.
    pub fn u16(&mut self, what: &str) -> Result<u16, Failure> {
        Ok(u16::from_le_bytes(self.array(what)?))
    }

    /// A little-endian `u32`.
    pub fn u32(&mut self, what: &str) -> Result<u32, Failure> {
        Ok(u32::from_le_bytes(self.array(what)?))
    }

    /// A little-endian `i32`.
    pub fn i32(&mut self, what: &str) -> Result<i32, Failure> {
        Ok(i32::from_le_bytes(self.array(what)?))
    }

    /// A little-endian `u64`.
    pub fn u64(&mut self, what: &str) -> Result<u64, Failure> {
        Ok(u64::from_le_bytes(self.array(what)?))
    }

    /// A little-endian `f32`.
    pub fn f32(&mut self, what: &str) -> Result<f32, Failure> {
        Ok(f32::from_le_bytes(self.array(what)?))
    }

    /// `u32` length, then that many bytes.
    pub fn bytes(&mut self, what: &str) -> Result<&'a [u8], Failure> {
        let n = self.u32(what)? as usize;
        self.take(n, what)
    }

    /// [`bytes`](Self::bytes) holding UTF-8.
    pub fn str(&mut self, what: &str) -> Result<&'a str, Failure> {
        std::str::from_utf8(self.bytes(what)?)
            .map_err(|_| Failure::Abi(format!("{what} is not UTF-8")))
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn a_reader_refuses_lengths_past_the_end() {
        let mut buf = Vec::new();
        put_u32(&mut buf, 10);
        buf.extend_from_slice(b"abc");
        let e = Reader::new(&buf).bytes("name").unwrap_err();
        assert!(e.to_string().contains("name runs past the end"), "{e}");
        let mut r = Reader::new(&[1, 2]);
        assert!(r.u32("x").is_err());
    }

    #[test]
    fn what_is_put_reads_back() {
        let mut buf = Vec::new();
        put_u8(&mut buf, 7);
        put_u64(&mut buf, u64::MAX - 1);
        put_str(&mut buf, "zone");
        let mut r = Reader::new(&buf);
        assert_eq!(r.u8("a").unwrap(), 7);
        assert_eq!(r.u64("b").unwrap(), u64::MAX - 1);
        assert_eq!(r.str("c").unwrap(), "zone");
        assert!(r.is_empty());
    }
}
