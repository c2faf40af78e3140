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

mod binding;
mod error;
mod reader;
mod writer;

pub use binding::{bind_kind, SchemaMismatch};
pub use error::PayloadError;
pub use reader::PayloadReader;
pub use writer::PayloadWriter;

#[cfg(test)]
mod tests;
