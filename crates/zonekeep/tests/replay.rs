//! `zonekeep replay` on the committed arena recording (made from a running host through the
//! admin API with bench bots): it matches all the way, and a changed input is reported at the
//! tick that consumed it.
//!
//! The recording (format version 2) was made so, with a release build and a ticket secret in
//! `ZONEKEEP_TICKET_SECRET`: `zonekeep serve --dev --admin-token T`, then
//! `POST /admin/zones {"id":"arena-demo","kind":"arena","record":{"max_bytes":1000000}}`,
//! `zonekeep bench --url ws://HOST --zone arena-demo --bots 6 --rate 10 --duration 12s
//! --input-format bytes --input '["$int:0:255"]'`, `POST /admin/zones/arena-demo/recording/stop`
//! and `GET /admin/zones/arena-demo/recording/file` (511 ticks, 34 kB).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::collections::BTreeMap;

use support::replay_cli::{assert_changed_input_diverges, replay};
use zonekeep_core::recording::{Record, RecordReader};

const RECORDING: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/arena.zkrec");

#[test]
fn the_committed_arena_recording_replays_to_a_match() {
    let (code, out, err) = replay(RECORDING.as_ref());
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("MATCH"), "{out}");
    assert!(
        out.contains("kind \"arena\", recorded from its creation"),
        "{out}"
    );
}

#[test]
fn a_changed_input_is_reported_at_the_tick_that_consumed_it() {
    let bytes = std::fs::read(RECORDING).unwrap();
    // An input offered with its sender's buffer empty (its previous input two ticks back or
    // more), so the next tick consumes it; its direction bit 0 flipped.
    let (_, mut reader) = RecordReader::open(&bytes).unwrap();
    let mut tick = 0;
    let mut last_input: BTreeMap<u32, u64> = BTreeMap::new();
    let mut seen = 0;
    let (at, offered) = loop {
        match reader.next_record().unwrap().expect("a suitable input") {
            Record::Tick { tick: t, .. } => tick = t,
            Record::Input {
                player, payload, ..
            } if payload.len() == 1 => {
                let spaced = last_input
                    .insert(player.0, tick)
                    .is_none_or(|prev| prev + 2 <= tick);
                seen += 1;
                if spaced && seen > 200 {
                    break (reader.offset() - 1, tick);
                }
            }
            _ => {}
        }
    };
    let dir = tempfile::tempdir().unwrap();
    let out = assert_changed_input_diverges(dir.path(), &bytes, at, 0x01, offered);
    assert!(
        out.contains(&format!("[{:02x}]", bytes[at] ^ 0x01)),
        "the input is listed: {out}"
    );
}

#[test]
fn a_file_that_is_no_recording_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("junk.zkrec");
    std::fs::write(&path, b"not a recording at all").unwrap();
    let (code, out, err) = replay(&path);
    assert_eq!(code, 2, "{out}{err}");
    assert!(err.contains("not a zonekeep recording"), "{err}");
}
