//! The envelope round trips, older versions read with their later sections empty, and every
//! cut, flipped byte or malformed field is a typed [`SnapshotError`], never a panic.
#![allow(clippy::unwrap_used, clippy::expect_used)]
use super::*;
use crate::message::{InboundMessage, MessageFrom, MessageTarget};
use proptest::prelude::*;
use serde_json::json;

fn sample() -> Snapshot {
    Snapshot {
        tick: 42,
        boot_epoch: 3,
        fact_counter: 9,
        facts: vec![
            Fact {
                key: FactKey("z:3:7".into()),
                kind: "kill".into(),
                payload: json!({"add": {"score": 50}}),
                principal: Some("alice".into()),
                tick: 40,
            },
            Fact {
                key: FactKey("custom".into()),
                kind: "loot".into(),
                payload: json!(null),
                principal: None,
                tick: 41,
            },
        ],
        zone: vec![1, 2, 3, 0, 255],
        next_player: 4,
        roster: vec![
            SavedParticipant {
                id: PlayerId(1),
                principal: Principal::new("alice"),
                role: Role::Player,
                claims: json!({"name": "Al"})
                    .as_object()
                    .cloned()
                    .unwrap_or_default(),
                last_seq: Some(17),
            },
            SavedParticipant {
                id: PlayerId(3),
                principal: Principal::new("watcher"),
                role: Role::Observer,
                claims: Claims::new(),
                last_seq: None,
            },
        ],
        state_version: 1,
        build: String::new(),
        characters: Vec::new(),
        calls: vec![Call {
            key: CallKey("order-9".into()),
            function: "buy".into(),
            args: serde_json::json!({"item": 9}),
            tick: 41,
        }],
    }
}

#[test]
fn a_version_1_envelope_is_read_with_an_empty_roster() {
    // Version 1 is version 3 without the roster and the links (21 bytes when empty):
    // rebuild one from a version-3 body.
    let mut s = sample();
    s.roster.clear();
    s.next_player = 0;
    s.calls.clear();
    let v4 = s.encode();
    let body_len = u64::from_le_bytes(v4[8..16].try_into().unwrap()) as usize;
    // Without the empty roster (8), the empty links (21), the state stamp (8), no
    // characters (4) and no calls (4).
    let v1_body = &v4[16..16 + body_len - 8 - 21 - 8 - 4 - 4];
    let mut v1 = Vec::new();
    v1.extend_from_slice(&SNAPSHOT_MAGIC);
    v1.extend_from_slice(&1u16.to_le_bytes());
    v1.extend_from_slice(&0u16.to_le_bytes());
    v1.extend_from_slice(&(v1_body.len() as u64).to_le_bytes());
    v1.extend_from_slice(v1_body);
    let sum = checksum(&v1);
    v1.extend_from_slice(&sum.to_le_bytes());
    assert_eq!(Snapshot::decode(&v1).unwrap(), s);
}

#[test]
fn a_version_4_envelope_is_read_with_no_calls() {
    let s = sample();
    let v5 = s.encode();
    let body_len = u64::from_le_bytes(v5[8..16].try_into().unwrap()) as usize;
    let calls_len = 4 + (4 + 7) + (4 + 3) + (4 + r#"{"item":9}"#.len()) + 8;
    let body = &v5[16..16 + body_len - calls_len];
    let mut v4 = Vec::new();
    v4.extend_from_slice(&SNAPSHOT_MAGIC);
    v4.extend_from_slice(&4u16.to_le_bytes());
    v4.extend_from_slice(&0u16.to_le_bytes());
    v4.extend_from_slice(&(body.len() as u64).to_le_bytes());
    v4.extend_from_slice(body);
    let sum = checksum(&v4);
    v4.extend_from_slice(&sum.to_le_bytes());
    let old = Snapshot::decode(&v4).unwrap();
    assert!(old.calls.is_empty());
    assert_eq!(
        Snapshot {
            calls: Vec::new(),
            ..s
        },
        old
    );
}

#[test]
fn round_trip() {
    let s = sample();
    assert_eq!(Snapshot::decode(&s.encode()).unwrap(), s);
}

fn links() -> SavedLinks {
    let id = |sender: &str, seq| MessageId {
        sender: sender.into(),
        epoch: 4,
        seq,
    };
    SavedLinks {
        parent: Some("world".into()),
        groups: vec!["market".into(), "north".into()],
        message_seq: 12,
        dedup: vec![id("zone-b", 3), id("admin:ops", 1)],
        inbox: vec![
            Inbound::Message(InboundMessage {
                id: id("zone-b", 3),
                from: MessageFrom::Zone("zone-b".into()),
                topic: 9,
                payload: vec![1, 2, 3],
                via_parent: true,
            }),
            Inbound::Message(InboundMessage {
                id: id("admin:ops", 1),
                from: MessageFrom::Admin,
                topic: 1,
                payload: vec![],
                via_parent: false,
            }),
            Inbound::Undeliverable {
                id: id("zone-a", 11),
                to: MessageTarget::Group("south".into()),
                topic: 2,
                reason: "no bus".into(),
            },
        ],
    }
}

#[test]
fn links_round_trip_and_every_cut_is_an_error() {
    let s = sample();
    let bytes = s.encode_with(&links());
    assert_eq!(Snapshot::decode_with_links(&bytes).unwrap(), (s, links()));
    for cut in 0..bytes.len() {
        assert!(Snapshot::decode(&bytes[..cut]).is_err(), "cut at {cut}");
    }
}

#[test]
fn a_version_2_envelope_is_read_with_no_links() {
    // Version 2 is version 4 without the links and the state stamp: rebuild one from a
    // version-5 body (empty links take 21 bytes, state version 1 and no build 8, no characters
    // 4, no calls 4).
    let s = Snapshot {
        calls: Vec::new(),
        ..sample()
    };
    let v4 = s.encode();
    let body_len = u64::from_le_bytes(v4[8..16].try_into().unwrap()) as usize;
    let v2_body = &v4[16..16 + body_len - 21 - 8 - 4 - 4];
    let mut v2 = Vec::new();
    v2.extend_from_slice(&SNAPSHOT_MAGIC);
    v2.extend_from_slice(&2u16.to_le_bytes());
    v2.extend_from_slice(&0u16.to_le_bytes());
    v2.extend_from_slice(&(v2_body.len() as u64).to_le_bytes());
    v2.extend_from_slice(v2_body);
    let sum = checksum(&v2);
    v2.extend_from_slice(&sum.to_le_bytes());
    assert_eq!(
        Snapshot::decode_with_links(&v2).unwrap(),
        (s, SavedLinks::default())
    );
}

/// `s` (with no calls) encoded as an envelope of `version` 3: version 5 without the state
/// stamp, the characters and the calls.
fn as_version_3(s: &Snapshot) -> Vec<u8> {
    let v4 = s.encode();
    let body_len = u64::from_le_bytes(v4[8..16].try_into().unwrap()) as usize;
    let stamp = 4 + 4 + s.build.len() + 4 + 4;
    let body = &v4[16..16 + body_len - stamp];
    let mut v3 = Vec::new();
    v3.extend_from_slice(&SNAPSHOT_MAGIC);
    v3.extend_from_slice(&3u16.to_le_bytes());
    v3.extend_from_slice(&0u16.to_le_bytes());
    v3.extend_from_slice(&(body.len() as u64).to_le_bytes());
    v3.extend_from_slice(body);
    let sum = checksum(&v3);
    v3.extend_from_slice(&sum.to_le_bytes());
    v3
}

#[test]
fn the_state_version_and_build_round_trip_and_older_envelopes_are_version_1() {
    let s = Snapshot {
        state_version: 3,
        build: "module sha256:0a1b".into(),
        calls: Vec::new(),
        ..sample()
    };
    assert_eq!(Snapshot::decode(&s.encode()).unwrap(), s);
    // A version-3 envelope was written before state versions: it holds version 1.
    let old = Snapshot::decode(&as_version_3(&s)).unwrap();
    assert_eq!((old.state_version, old.build.as_str()), (1, ""));
    assert_eq!(old.zone, s.zone);
}

#[test]
fn every_flipped_byte_is_detected() {
    let bytes = sample().encode();
    for i in 0..bytes.len() {
        let mut b = bytes.clone();
        b[i] ^= 0x5a;
        assert!(Snapshot::decode(&b).is_err(), "flip at {i} went unnoticed");
    }
}

#[test]
fn typed_errors() {
    let bytes = sample().encode();
    assert_eq!(
        Snapshot::decode(&bytes[..10]),
        Err(SnapshotError::Truncated)
    );
    assert_eq!(
        Snapshot::decode(&bytes[..bytes.len() - 1]),
        Err(SnapshotError::Truncated)
    );
    let mut b = bytes.clone();
    b[0] = b'X';
    assert_eq!(Snapshot::decode(&b), Err(SnapshotError::BadMagic));
    let mut b = bytes.clone();
    b[4] = 6;
    assert_eq!(
        Snapshot::decode(&b),
        Err(SnapshotError::UnsupportedVersion(6))
    );
    let mut b = bytes.clone();
    let last = b.len() - 1;
    b[last] ^= 1;
    assert_eq!(Snapshot::decode(&b), Err(SnapshotError::Checksum));
}

proptest! {
    #[test]
    fn decoder_is_total(bytes in proptest::collection::vec(any::<u8>(), 0..256)) {
        let _ = Snapshot::decode(&bytes);
    }

    #[test]
    fn decoder_is_total_on_valid_header(tail in proptest::collection::vec(any::<u8>(), 0..128)) {
        let mut b = Vec::new();
        b.extend_from_slice(&SNAPSHOT_MAGIC);
        b.extend_from_slice(&SNAPSHOT_VERSION.to_le_bytes());
        b.extend_from_slice(&0u16.to_le_bytes());
        b.extend_from_slice(&(tail.len() as u64).to_le_bytes());
        b.extend_from_slice(&tail);
        let sum = checksum(&b);
        b.extend_from_slice(&sum.to_le_bytes());
        let _ = Snapshot::decode(&b);
    }
}
