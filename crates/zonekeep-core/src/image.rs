//! Zone images: a running zone's whole in-memory state, bit for bit, so a recording started while
//! the zone runs replays exactly as the zone ran.
//!
//! A save ([`Zone::save`](crate::Zone::save), [`crate::snapshot`]) keeps what must outlive the
//! process and is read back by later builds; an image keeps everything the zone's next tick
//! depends on — the world with its ids, change stamps and tombstones, the RNG's position, the
//! timers, the facts in flight and settlements not yet delivered, the tier, every participant
//! with its view request and queued inputs, and the zone's own [`Zone::image`](crate::Zone::image)
//! — and is read back only by the build that wrote it (the image names it; another build is
//! refused with [`ImageError::OtherBuild`]).
//!
//! Not in an image: what only shapes the frames (the replicator's per-subscriber state: a replay
//! starts every connected subscriber from a BASELINE, so it compares frame counts, not bytes)
//! and a lag-compensated zone's history of what each subscriber was sent (a replay builds it
//! afresh, so shots judged against frames sent before the recording started may be judged
//! differently).
//!
//! # Framing
//!
//! | bytes | field |
//! | --- | --- |
//! | 4 | magic `ZKIM` |
//! | 2 | version, `u16` little-endian (`1`) |
//! | 2 | flags (`0`) |
//! | varint + N | the build that wrote it (`str`) |
//! | varint + N | the body (see `host/image.rs`) |
//! | 8 | FNV-1a 64 of everything before it, little-endian |

use zonekeep_protocol::error::DecodeError;
use zonekeep_protocol::wire::{put_varint, Reader};

use crate::error::ZoneError;
use crate::rng::fnv1a64;

/// An image's first four bytes.
pub const IMAGE_MAGIC: [u8; 4] = *b"ZKIM";
/// The framing version this build writes and reads.
pub const IMAGE_VERSION: u16 = 3;
/// The largest body an image may have (a world of a million entities fits).
pub const MAX_IMAGE_BODY: usize = 256 << 20;

/// The build an image is tied to: the runtime's version. Images are for recordings replayed by
/// the build that made them; a body whose layout changed between commits of one version fails
/// to decode, or the replay reports the state hash it restored to.
const BUILD: &str = concat!("zonekeep-core ", env!("CARGO_PKG_VERSION"));

/// Why an image could not be taken or read back.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ImageError {
    /// The zone's kind keeps no image ([`Zone::image`](crate::Zone::image) returned `None`).
    #[error("zones of kind {0:?} keep no image")]
    NoImage(String),
    /// Not a zone image.
    #[error("not a zone image (bad magic)")]
    BadMagic,
    /// Another framing version.
    #[error("unsupported zone image version {0} (this build reads version {IMAGE_VERSION})")]
    UnsupportedVersion(u16),
    /// Written by another build.
    #[error("zone image written by {found:?}; this is {BUILD:?}")]
    OtherBuild {
        /// The build named in the image.
        found: String,
    },
    /// The bytes were damaged.
    #[error("zone image checksum mismatch")]
    Checksum,
    /// Well framed, but the content is inconsistent.
    #[error("malformed zone image: {0}")]
    Malformed(String),
    /// The zone's code (or the configuration) refused it.
    #[error("zone image refused: {0}")]
    Zone(#[from] ZoneError),
}

impl From<DecodeError> for ImageError {
    fn from(e: DecodeError) -> Self {
        ImageError::Malformed(e.to_string())
    }
}

/// Frames `body` as an image.
pub(crate) fn seal(body: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(body.len() + BUILD.len() + 32);
    out.extend_from_slice(&IMAGE_MAGIC);
    out.extend_from_slice(&IMAGE_VERSION.to_le_bytes());
    out.extend_from_slice(&0u16.to_le_bytes());
    put_varint(&mut out, BUILD.len() as u64);
    out.extend_from_slice(BUILD.as_bytes());
    put_varint(&mut out, body.len() as u64);
    out.extend_from_slice(body);
    let sum = fnv1a64(&out);
    out.extend_from_slice(&sum.to_le_bytes());
    out
}

/// Checks an image's framing and returns its body.
pub(crate) fn open(image: &[u8]) -> Result<&[u8], ImageError> {
    if image.len() < 4 || image[..4] != IMAGE_MAGIC {
        return Err(ImageError::BadMagic);
    }
    let Some(split) = image.len().checked_sub(8) else {
        return Err(ImageError::Malformed("truncated".into()));
    };
    let (framed, sum) = image.split_at(split);
    let mut r = Reader::new(framed);
    r.take(4)?;
    let version = u16::from_le_bytes([r.u8()?, r.u8()?]);
    if version != IMAGE_VERSION {
        return Err(ImageError::UnsupportedVersion(version));
    }
    if r.u8()? != 0 || r.u8()? != 0 {
        return Err(ImageError::Malformed("unknown flags".into()));
    }
    let mut want = [0u8; 8];
    want.copy_from_slice(sum);
    if fnv1a64(framed) != u64::from_le_bytes(want) {
        return Err(ImageError::Checksum);
    }
    let build = r.str(1024)?;
    if build != BUILD {
        return Err(ImageError::OtherBuild {
            found: build.to_owned(),
        });
    }
    let body = r.bytes_named("image body", MAX_IMAGE_BODY)?;
    r.finish()?;
    Ok(body)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sealed_bodies_open_and_damage_is_typed() {
        let image = seal(b"body");
        assert_eq!(open(&image), Ok(&b"body"[..]));
        assert_eq!(open(b"ZKSN...."), Err(ImageError::BadMagic));
        let mut flipped = image.clone();
        let last_body_byte = image.len() - 9;
        flipped[last_body_byte] ^= 1;
        assert_eq!(open(&flipped), Err(ImageError::Checksum));
        let mut newer = image.clone();
        newer[4] = 4;
        assert_eq!(open(&newer), Err(ImageError::UnsupportedVersion(4)));
        for cut in 0..image.len() {
            assert!(open(&image[..cut]).is_err(), "cut at {cut}");
        }
    }

    #[test]
    fn an_image_from_another_build_is_refused() {
        let mut out = Vec::new();
        out.extend_from_slice(&IMAGE_MAGIC);
        out.extend_from_slice(&IMAGE_VERSION.to_le_bytes());
        out.extend_from_slice(&0u16.to_le_bytes());
        put_varint(&mut out, 5);
        out.extend_from_slice(b"other");
        put_varint(&mut out, 0);
        let sum = fnv1a64(&out);
        out.extend_from_slice(&sum.to_le_bytes());
        assert_eq!(
            open(&out),
            Err(ImageError::OtherBuild {
                found: "other".into()
            })
        );
    }
}
