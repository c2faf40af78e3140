//! Recordings: a zone's every stimulus and a state hash per tick in a compact file, so a bug
//! seen in production becomes a test ([`replay`] re-runs it and names the first divergent tick).
//!
//! The host is deterministic: time comes from the `now` of each `advance` and the injected
//! [`Clock`](crate::Clock) (read only by the host itself: zone code sees ticks), randomness from
//! the seeded [`ZoneRng`](crate::ZoneRng). So a recording holds the zone's creation (kind, id,
//! params, whole config with its world seed, owner epoch, the clock reading its schedule starts
//! at) or the image (or, for a kind without one, the snapshot) a running zone was recorded from, then every call in, in order, each
//! followed by its effects: the clock readings the host took during it, what it returned, the
//! state hash after each tick run, and a digest of the frames and facts handed out. A replay
//! feeds the calls and clock readings to a fresh host of the same kind and compares every effect.
//!
//! Recording is a [`ZoneHost`](crate::ZoneHost) feature ([`ZoneHost::start_recording`](crate::ZoneHost::start_recording)): the
//! host appends to an in-memory buffer bounded by [`RecordLimits`]; the driver takes the bytes
//! ([`ZoneHost::take_recorded`](crate::ZoneHost::take_recorded)) and writes them off the simulation thread. Past the size cap or
//! the buffer bound the recording stops with a [`StopReason`]; it never waits. When nothing is
//! recorded each call costs one branch.
//!
//! # Format, version 6
//!
//! | bytes | field |
//! | --- | --- |
//! | 4 | magic `ZKRC` |
//! | 2 | version, `u16` little-endian (`6`; versions `2` to `5` are still read) |
//! | 2 | flags, `u16` little-endian (`0`; readers refuse others) |
//! | varint + N | the header body |
//! | ... | records: a tag byte, a varint body length (at most [`MAX_RECORD_BODY`]), the body |
//!
//! Varints are the protocol's canonical LEB128 (`zonekeep_protocol::wire`); a `str`/`bytes` is a
//! varint length and the bytes. Header: `str zone_id`, `str kind`, `str params` (JSON),
//! the config (every [`ZoneConfig`](crate::ZoneConfig) field: varints, durations as
//! nanoseconds, `f32` little-endian; the limits `max_pending_event_bytes`, `max_entities`,
//! `max_fact_bytes` and `max_facts_per_second` last, since version 4, older files replaying
//! under the defaults), `varint boot_epoch`, `varint start` (nanoseconds),
//! `varint start_tick`, then `u8 origin`: 0 created; 1 snapshot followed by `bytes envelope`,
//! `u64 state_hash` (LE) and the ids of the connected participants (a varint count, varints); or
//! (since version 3) 2 image followed by `bytes image` ([`crate::image`]) and `u64 state_hash`.
//!
//! Times (advance, clock readings) are zig-zag differences from the previous time in the
//! stream (the first from `start`); an input's view tick is a zig-zag difference from the
//! current tick; tick records carry only the hash (the tick is one more than the last).
//!
//! | tag | record | body |
//! | --- | --- | --- |
//! | `01` | join | `str principal`, `str claims` (JSON object), `u8 role` |
//! | `02` | input | `varint player`, `varint seq`, `zigzag tick - view_tick`, payload (the rest) |
//! | `03` / `04` / `07` | drop / rejoin / resync | `varint player` |
//! | `05` | leave | `varint player`, `u8 reason` |
//! | `06` | settlement | `str key`, `u8` 0 ok + JSON result / 1 refused + reason (the rest) |
//! | `08` | advance | time |
//! | `09` / `0a` / `0b` / `0c` | drain frames / drain facts / dispose / tick at once | empty |
//! | `0d` | round trip | `varint player`, `varint` nanoseconds |
//! | `0e` | rejoin from a resume point | `varint player`, `varint tick`, `varint count`, `u32 hash` (LE) |
//! | `0f` | datagrams | `varint player`, `varint max_frame` |
//! | `10` | state acknowledged | `varint player`, `varint tick` |
//! | `11` | transfer in (since 5) | `str principal`, `str player_claims`, `str claims` (JSON objects), `str from_zone`, state (the rest) |
//! | `12` / `13` | transfer back / transfer done (since 5) | `varint player` |
//! | `14` | message (since 5) | id (`str sender`, `varint epoch`, `varint seq`), `u8 from` (0 zone + `str`, 1 operator), `varint topic`, `u8 via_parent`, payload (the rest) |
//! | `15` | undeliverable (since 5) | id, `u8 target` (0 zone, 1 group), `str name`, `varint topic`, reason (the rest) |
//! | `16` | drain messages (since 5) | empty |
//! | `17` | transfer return (since 6) | as transfer in: `str principal`, `str player_claims`, `str claims`, `str from_zone` (the zone the move did not reach), state (the rest) |
//! | `40` | clock reading | time |
//! | `41` | outcome | `u8 code` (+ `varint` id or refusal code); a rejoin from a resume point answers 14 (continues with a Delta) or 15 (a BASELINE); an input from a moving player 16; a message 0 (queued), 10 (duplicate) or 3 (full); an accepted input has none |
//! | `42` | tick | `u64` state hash (LE) |
//! | `43` | frames | `varint count`, `varint bytes`, `u64` hash (headers and lengths of all, bytes of one participant's frames in 16 by turns) |
//! | `44` | facts | `varint count`, `u64` hash |
//! | `7f` | end | `u8 reason` (+ `str` for a writer failure) |
//!
//! Version 2 changed what the hashes are, not the layout: the world's default state hash and the
//! frame digest are taken a word at a time (and the frame digest reads the bytes of one frame in
//! 16), so a version 1 file would report a divergence at its first tick; it is refused as an
//! unsupported version instead.
//!
//! [`RecordReader`] decodes any byte string to records or a typed [`RecordingError`]
//! (truncated, corrupt, bad magic, unknown version) without allocating past the input's size.
//!
//! # From a running zone
//!
//! A zone recorded while running starts from its [image](crate::image): everything the host
//! holds — world, RNG position, timers, facts, participants and their queued inputs — and the
//! zone's own [`Zone::image`](crate::Zone::image). The replay builds the zone from it and first
//! compares the state hash with the one recorded. Subscribers' replication state is not in the
//! image (a replay starts them from a BASELINE), so with participants connected only frame
//! counts are compared, not their bytes; and a lag-compensated zone's history of what each
//! subscriber was sent starts empty, so a shot aimed at a frame sent before the recording
//! started may be judged differently.
//!
//! A kind that keeps no image is recorded from its snapshot instead: the replay restores it and
//! rejoins the participants who were connected. Where the save leaves out state the hash
//! covers, the replay diverges right there, and the report says so.

mod config_codec;
mod format;
mod header;
mod read;
mod recorder;
mod replay;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_image;

pub use format::{
    Outcome, Record, RecordingError, StopReason, MAX_HEADER_BODY, MAX_RECORD_BODY,
    OLDEST_READ_VERSION, RECORDING_MAGIC, RECORDING_VERSION,
};
pub use header::{Header, Origin};
pub use read::RecordReader;
pub(crate) use recorder::{calls_digest, facts_digest, Recorder};
pub use recorder::{
    RecordLimits, RecordingStatus, StartRecordingError, DEFAULT_MAX_BUFFERED, DEFAULT_MAX_BYTES,
};
pub use replay::{replay, Divergence, ReplayError, ReplayReport, ScriptedClock};
