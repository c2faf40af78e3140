//! A relay link message is what its format says, carries only what changed, and a damaged or
//! hostile one changes nothing at the relay.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use super::tests::{relay_zone, Bench};
use super::{LinkEvent, LinkPatch, RelayError, RelayZone};
use crate::{Clock, PlayerId, Role};

impl Bench {
    /// One tick at the host alone (no relay applies it), and link 0's message of its patch.
    fn host_patch(&mut self) -> Vec<u8> {
        self.clock.advance(Duration::from_millis(100));
        self.origin.advance(self.clock.now());
        let _ = self.origin.drain_frames().unwrap();
        let mut message = Vec::new();
        self.origin
            .relay_output()
            .unwrap()
            .write_link(&mut message, false, 0)
            .unwrap();
        message
    }
}

/// A link started and fed for a few patches, and the message of the next.
fn fed_relay() -> (RelayZone, Vec<u8>) {
    let mut b = Bench::new(None);
    for _ in 0..3 {
        b.join(Role::Player, Some(0));
    }
    for _ in 0..3 {
        b.step();
    }
    b.input(PlayerId(2), 7);
    let message = b.host_patch();
    let relay = std::mem::replace(&mut b.relays[0], relay_zone(None));
    (relay, message)
}

#[test]
fn a_damaged_link_message_changes_nothing() {
    let (mut relay, message) = fed_relay();
    let tick = relay.tick();
    let hash = relay.world().unwrap().hash();
    for len in 0..message.len() {
        assert!(relay.apply(&message[..len]).is_err(), "cut at {len}");
        assert_eq!(relay.tick(), tick);
        assert_eq!(relay.world().unwrap().hash(), hash);
        assert_eq!(relay.drain_frames().len(), 0);
    }
    let mut longer = message.clone();
    longer.push(0);
    assert!(matches!(relay.apply(&longer), Err(RelayError::Decode(_))));
    // Every single-byte change is refused, or applied whole; never a panic.
    for at in 0..message.len() {
        for flip in [0x01u8, 0x80, 0xff] {
            let (mut r, _) = (fed_relay().0, ());
            let mut bad = message.clone();
            bad[at] ^= flip;
            match r.apply(&bad) {
                Ok(()) => {}
                Err(_) => assert_eq!(r.tick(), tick),
            }
        }
    }
    relay.apply(&message).unwrap();
    assert_eq!(relay.drain_frames().len(), 3);
    // The same message again is stale; a delta with no image before it is refused.
    assert!(matches!(
        relay.apply(&message),
        Err(RelayError::Stale { .. })
    ));
    assert!(matches!(
        relay_zone(None).apply(&message),
        Err(RelayError::NoImage)
    ));
}

#[test]
fn link_messages_carry_changes_and_events_once() {
    let mut b = Bench::new(None);
    for _ in 0..3 {
        b.join(Role::Player, Some(0));
    }
    b.step();
    b.step();
    b.input(PlayerId(2), 7);
    let following = b.host_patch();
    let out = b.origin.relay_output().unwrap();
    let patch = LinkPatch::read(&following).unwrap();
    assert_eq!(patch.since, patch.tick - 1);
    // Player 2's input emitted one event for it and one for everyone: each sent once.
    assert_eq!(
        patch.events,
        [
            LinkEvent {
                to: Some(PlayerId(2)),
                topic: 9,
                payload: &[1, 2, 2]
            },
            LinkEvent {
                to: None,
                topic: 3,
                payload: &[]
            }
        ]
    );
    // Only player 2 changed (its ack); players 1 and 3 have no record.
    assert_eq!(patch.records.len(), 1);
    assert_eq!(patch.records[0].player, PlayerId(2));
    assert_eq!(patch.records[0].ack, Some(1));
    assert_eq!(patch.records[0].view, None);
    // A link serving none of them gets no event addressed to player 2.
    let mut other = Vec::new();
    out.write_link(&mut other, false, 7).unwrap();
    let patch = LinkPatch::read(&other).unwrap();
    assert_eq!(patch.events.len(), 1);
    assert!(patch.records.is_empty());
    // A link starting now: the image, and a full record of each of its participants.
    assert!(matches!(
        out.write_link(&mut Vec::new(), true, 0),
        Err(RelayError::Unavailable("image"))
    ));
}

#[test]
fn idle_relayed_participants_cost_the_origin_no_bytes() {
    // The origin's messages of several patches in a row, with `observers` relayed observers
    // served one patch in `every`.
    let sizes = |observers: usize, every: u32| {
        let mut b = Bench::with_rates(None, (1, every));
        b.join(Role::Player, Some(0));
        for _ in 0..observers {
            b.join(Role::Observer, Some(0));
        }
        for _ in 0..3 {
            b.step();
        }
        b.input(PlayerId(1), 3);
        (0..5).map(|_| b.host_patch().len()).collect::<Vec<_>>()
    };
    assert_eq!(sizes(10, 1), sizes(300, 1));
    // At a lower rate too: the relay learns it once, not each observer's turn each patch.
    assert_eq!(sizes(10, 4), sizes(300, 4));
    assert_eq!(sizes(10, 1), sizes(300, 1000));
}

#[test]
fn a_participant_no_longer_relayed_is_forgotten_by_its_relay() {
    let mut b = Bench::new(None);
    b.join(Role::Player, Some(0));
    b.join(Role::Player, Some(0));
    b.step();
    b.leave(PlayerId(2));
    let patch = b.host_patch();
    let patch = LinkPatch::read(&patch).unwrap();
    assert_eq!(patch.records.len(), 1);
    assert!(patch.records[0].gone);
    assert_eq!(patch.records[0].player, PlayerId(2));
}

#[test]
fn hostile_link_messages_are_refused_whole() {
    let (_, message) = fed_relay();
    let view = crate::replicate::SubscriberConfig {
        radius: 10.0,
        margin: 1.0,
        budget: None,
        focus: crate::replicate::Focus::Point(0.0, 0.0),
        control: None,
    };
    let head = |out: &mut Vec<u8>, since: u64, world: u8| {
        zonekeep_protocol::wire::put_varint(out, 9);
        zonekeep_protocol::wire::put_varint(out, since);
        out.push(world);
        out.push(0); // an empty feed part
        out.push(0); // no events
    };
    // Two records out of order.
    let mut out = Vec::new();
    head(&mut out, 8, 1);
    out.push(2);
    for id in [5u8, 4] {
        out.extend_from_slice(&[id, 2 | 4, 0]);
        super::put_view(&mut out, &view);
    }
    assert!(LinkPatch::read(&out).is_err());
    // An undefined record part; a record gone and listed, or gone and an observer.
    for parts in [32u8, 8 | 1, 8 | 16] {
        let mut out = Vec::new();
        head(&mut out, 8, 1);
        out.extend_from_slice(&[1, 4, parts]);
        assert!(LinkPatch::read(&out).is_err(), "parts {parts}");
    }
    // An image: its replicator settings, its observer rate and the patch before, then an
    // empty feed, no events and no records.
    let image = |since: u8, cell: f32, distance: f32, every: u32, observers: u32| {
        let mut out = vec![9, since, 2];
        zonekeep_protocol::wire::put_f32(&mut out, cell);
        zonekeep_protocol::wire::put_f32(&mut out, distance);
        zonekeep_protocol::wire::put_varint(&mut out, u64::from(every));
        zonekeep_protocol::wire::put_varint(&mut out, u64::from(observers));
        zonekeep_protocol::wire::put_varint(&mut out, 7);
        out.extend_from_slice(&[0, 0, 0]);
        out
    };
    let good = image(0, 64.0, 16.0, 2, 1000);
    let read = LinkPatch::read(&good).unwrap();
    assert!(matches!(
        read.world,
        super::LinkWorld::Image {
            rate: super::ObserverRate {
                patch_every: 2,
                observer_patch_every: 1000
            },
            before: 7,
            ..
        }
    ));
    // An image that claims to follow a patch; an image with settings no replicator takes.
    assert!(LinkPatch::read(&image(8, 64.0, 16.0, 1, 1)).is_err());
    for (cell, distance) in [
        (f32::NAN, 16.0),
        (64.0, 0.0),
        (-1.0, 16.0),
        (64.0, f32::INFINITY),
    ] {
        let out = image(0, cell, distance, 1, 1);
        assert!(LinkPatch::read(&out).is_err(), "{cell} {distance}");
    }
    // An observer rate no zone runs.
    for (every, observers) in [(0, 1), (1, 0), (1, 1001)] {
        let out = image(0, 64.0, 16.0, every, observers);
        assert!(LinkPatch::read(&out).is_err(), "{every} {observers}");
    }
    // An event count past the protocol's limit is refused before anything is read.
    let mut many = Vec::new();
    zonekeep_protocol::wire::put_varint(&mut many, 9);
    many.extend_from_slice(&[8, 1, 0]);
    zonekeep_protocol::wire::put_varint(&mut many, 5000);
    many.extend(std::iter::repeat_n(0u8, 20_000));
    assert!(LinkPatch::read(&many).is_err());
    // A message that skips a patch is a gap; the relay stays as it was.
    let (mut relay, _) = fed_relay();
    let at = relay.tick();
    let mut skipped = message.clone();
    skipped[1] = skipped[1].wrapping_sub(1);
    assert!(matches!(
        relay.apply(&skipped),
        Err(RelayError::Gap { .. }) | Err(RelayError::Stale { .. })
    ));
    assert_eq!(relay.tick(), at);
    // A first record without its ack and view, for a participant the relay does not know.
    let mut partial = Vec::new();
    zonekeep_protocol::wire::put_varint(&mut partial, at + 1);
    zonekeep_protocol::wire::put_varint(&mut partial, at);
    partial.push(1);
    let mut empty_delta = Vec::new();
    let feed = LinkPatch::read(&message).unwrap();
    let super::LinkWorld::Delta(d) = feed.world else {
        panic!("a delta")
    };
    // The same delta as `message` (its base is the relay's version).
    empty_delta.extend_from_slice(d);
    zonekeep_protocol::wire::put_varint(&mut partial, empty_delta.len() as u64);
    partial.extend_from_slice(&empty_delta);
    partial.push(0);
    partial.extend_from_slice(&[1, 77, 1]);
    let hash = relay.world().unwrap().hash();
    assert!(matches!(relay.apply(&partial), Err(RelayError::Decode(_))));
    assert_eq!(relay.world().unwrap().hash(), hash);
    assert_eq!(relay.tick(), at);
}
