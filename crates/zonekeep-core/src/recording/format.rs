//! The recording format's fixed parts: the magic, the versions and size limits, the record tag
//! codes, the [`RecordingError`] a reader reports, what the encoder and decoder of one stream
//! both track, and the blob and time primitives the header shares with the records (see the
//! [module docs](super) for the layout). What a record is lives in `format/record.rs`, how one
//! is written in `format/encode.rs`; `header.rs` writes and reads the header, `read.rs` reads
//! records back.

mod encode;
mod record;

use std::time::Duration;

use zonekeep_protocol::wire::put_varint;

pub(crate) use encode::{encode_input_record, encode_record};
pub use record::{Outcome, Record, StopReason};

/// A recording's first four bytes.
pub const RECORDING_MAGIC: [u8; 4] = *b"ZKRC";
/// The format version this build writes (it also reads [`OLDEST_READ_VERSION`] and later).
pub const RECORDING_VERSION: u16 = 12;
/// The oldest format version this build reads (version 3 only added an origin, version 4 the
/// zone's limits to the config, version 5 the transfer and message records, version 6 the
/// transfer return record, version 7 whether the zone is a lasting world, version 8 the
/// zone's state version, version 9 joins that bring a character, version 10 durable calls and
/// moves that carry a character, version 11 relayed participants, version 12 the observers'
/// patch rate in the config).
pub const OLDEST_READ_VERSION: u16 = 2;
/// Bytes before the header record: magic, version, flags.
pub(crate) const PREAMBLE_LEN: usize = 8;
/// Largest body a record other than the header may have (an input payload, a claims object, a
/// settlement's result are all far smaller): a corrupt length never makes a reader allocate more.
pub const MAX_RECORD_BODY: usize = 1 << 20;
/// Largest header body (it carries the snapshot a recording starts from).
pub const MAX_HEADER_BODY: usize = 256 << 20;

/// Why a recording could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RecordingError {
    /// The first bytes are not `ZKRC`: not a Zonekeep recording.
    #[error("not a zonekeep recording (bad magic)")]
    BadMagic,
    /// Written by another format version.
    #[error(
        "unsupported recording version {found} (this build reads versions {OLDEST_READ_VERSION} to {RECORDING_VERSION})"
    )]
    UnsupportedVersion {
        /// The version in the file.
        found: u16,
    },
    /// The file ends in the middle of a record (at byte `offset`).
    #[error("recording truncated at byte {offset}")]
    Truncated {
        /// Where the incomplete record starts.
        offset: usize,
    },
    /// A record is malformed (at byte `offset`): bad varint, length past its limit, bad UTF-8,
    /// unknown tag or inconsistent content.
    #[error("corrupt recording at byte {offset}: {reason}")]
    Corrupt {
        /// Where the bad record starts.
        offset: usize,
        /// What is wrong.
        reason: String,
    },
}

pub(super) mod tag {
    pub const JOIN: u8 = 0x01;
    pub const INPUT: u8 = 0x02;
    pub const DROP: u8 = 0x03;
    pub const REJOIN: u8 = 0x04;
    pub const LEAVE: u8 = 0x05;
    pub const SETTLE: u8 = 0x06;
    pub const RESYNC: u8 = 0x07;
    pub const ADVANCE: u8 = 0x08;
    pub const DRAIN_FRAMES: u8 = 0x09;
    pub const DRAIN_FACTS: u8 = 0x0a;
    pub const DISPOSE: u8 = 0x0b;
    pub const TICK_AT_ONCE: u8 = 0x0c;
    pub const RTT: u8 = 0x0d;
    pub const REJOIN_FROM: u8 = 0x0e;
    pub const DATAGRAMS: u8 = 0x0f;
    pub const ACK_STATE: u8 = 0x10;
    pub const TRANSFER_IN: u8 = 0x11;
    pub const TRANSFER_BACK: u8 = 0x12;
    pub const TRANSFER_DONE: u8 = 0x13;
    pub const MESSAGE: u8 = 0x14;
    pub const UNDELIVERABLE: u8 = 0x15;
    pub const DRAIN_MESSAGES: u8 = 0x16;
    pub const TRANSFER_RETURN: u8 = 0x17;
    pub const JOIN_CHARACTER: u8 = 0x18;
    pub const TRANSFER_IN_CHARACTER: u8 = 0x20;
    pub const TRANSFER_RETURN_CHARACTER: u8 = 0x21;
    pub const TRANSFER_BACK_CHARACTER: u8 = 0x22;
    pub const CALL_RESULT: u8 = 0x1a;
    pub const DRAIN_CALLS: u8 = 0x1b;
    pub const RELAY: u8 = 0x1c;
    pub const CLOCK: u8 = 0x40;
    pub const OUTCOME: u8 = 0x41;
    pub const TICK: u8 = 0x42;
    pub const FRAMES: u8 = 0x43;
    pub const FACTS: u8 = 0x44;
    pub const CALLS: u8 = 0x45;
    pub const END: u8 = 0x7f;
}

/// What the encoder and decoder of one stream both track, so times are written as differences
/// and view ticks relative to the current tick.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct StreamState {
    /// Nanoseconds of the last time written (clock reads and advances).
    pub last_time: u64,
    /// The last tick run.
    pub tick: u64,
}

pub(super) fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

pub(super) fn put_blob(out: &mut Vec<u8>, b: &[u8]) {
    put_varint(out, b.len() as u64);
    out.extend_from_slice(b);
}
