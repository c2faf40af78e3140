//! Zone messages on the host: delivery order, deduplication, bounds, groups, the parent, tier
//! messages, saves, and a recording of all of it replayed.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use super::courier::{admin, config, host, init, join, msg, step, zone, Courier, ID};
use crate::message::{MAX_INBOX, MAX_SENDS_PER_TICK};
use crate::recording::{replay, RecordLimits};
use crate::{
    Clock, Delivery, GroupChange, LeaveReason, ManualClock, MessageId, MessageTarget, Role,
    ZoneHost, ZoneKinds, TIER_TOPIC,
};

fn id(sender: &str, epoch: u64, seq: u64) -> MessageId {
    MessageId {
        sender: sender.into(),
        epoch,
        seq,
    }
}

fn with_id(mut m: crate::InboundMessage, epoch: u64, seq: u64) -> crate::InboundMessage {
    m.id.epoch = epoch;
    m.id.seq = seq;
    m
}

fn messages_logged(h: &ZoneHost) -> Vec<String> {
    zone(h)
        .log
        .iter()
        .filter(|l| l.starts_with("message") || l.starts_with("input") || l.starts_with("child"))
        .cloned()
        .collect()
}

#[test]
fn messages_arrive_in_order_before_inputs_and_duplicates_are_dropped() {
    let (mut h, clock) = host();
    let mut m = BTreeMap::new();
    let a = join(&mut h, "ann", Role::Player);
    assert!(h.handle_input(a, 1, 0, &[1]).is_accepted());
    assert_eq!(
        h.handle_message(msg("zone-b", 1, 1, b"x")),
        Delivery::Queued
    );
    assert_eq!(
        h.handle_message(msg("zone-b", 2, 2, b"y")),
        Delivery::Queued
    );
    assert_eq!(h.handle_message(admin(1, 3, b"z")), Delivery::Queued);
    // The same id again, and an older one, are duplicates.
    assert_eq!(
        h.handle_message(msg("zone-b", 2, 2, b"y")),
        Delivery::Duplicate
    );
    assert_eq!(
        h.handle_message(msg("zone-b", 1, 1, b"x")),
        Delivery::Duplicate
    );
    // A restarted sender (higher epoch) starts its sequence afresh; its old run is over.
    let restarted = with_id(msg("zone-b", 0, 4, b"w"), 2, 1);
    assert_eq!(h.handle_message(restarted), Delivery::Queued);
    let old_run = with_id(msg("zone-b", 0, 4, b"v"), 1, 9);
    assert_eq!(h.handle_message(old_run), Delivery::Duplicate);
    step(&mut h, &clock, &mut m);
    assert_eq!(
        messages_logged(&h),
        vec![
            "message Zone(\"zone-b\") topic 1 [120]".to_owned(),
            "message Zone(\"zone-b\") topic 2 [121]".to_owned(),
            "message Admin topic 3 [122]".to_owned(),
            "message Zone(\"zone-b\") topic 4 [119]".to_owned(),
            format!("input {a} 1"),
        ]
    );
}

#[test]
fn a_full_inbox_refuses_and_counts() {
    let (mut h, clock) = host();
    for seq in 1..=MAX_INBOX as u64 {
        assert_eq!(
            h.handle_message(msg("zone-b", seq, 1, b"")),
            Delivery::Queued
        );
    }
    let over = msg("zone-b", MAX_INBOX as u64 + 1, 1, b"");
    assert_eq!(h.handle_message(over.clone()), Delivery::Full);
    clock.advance(Duration::from_millis(100));
    let report = h.advance(clock.now());
    assert_eq!(report.messages_full, 1);
    // Refused, not remembered: the sender's retry is taken.
    assert_eq!(h.handle_message(over), Delivery::Queued);
}

#[test]
fn sends_carry_ids_under_the_boot_epoch_and_limits_are_typed() {
    let (mut h, clock) = host();
    let mut m = BTreeMap::new();
    h.handle_message(admin(1, 24, &[3]));
    h.handle_message(admin(2, 25, b""));
    step(&mut h, &clock, &mut m);
    let out = h.drain_messages();
    let ids: Vec<MessageId> = out.iter().map(|o| o.id.clone()).collect();
    assert_eq!(ids, vec![id(ID, 7, 1), id(ID, 7, 2), id(ID, 7, 3)]);
    assert_eq!(out[0].to, MessageTarget::Zone("zone-b".into()));
    assert_eq!(
        (out[0].topic, out[0].tick, out[0].via_parent),
        (1, 1, false)
    );
    assert_eq!(out[2].payload, vec![2]);
    assert_eq!(zone(&h).answers.last().unwrap(), "send Err(ReservedTopic)");

    // 256 sends a tick; the rest are refused and counted.
    h.handle_message(admin(3, 24, &[255]));
    h.handle_message(admin(4, 24, &[2]));
    clock.advance(Duration::from_millis(100));
    let report = h.advance(clock.now());
    assert_eq!(h.drain_messages().len(), MAX_SENDS_PER_TICK);
    assert_eq!(report.messages_refused, 1);
    assert_eq!(zone(&h).answers.last().unwrap(), "send Err(RateLimited)");
}

#[test]
fn a_zone_reports_to_its_parent_and_the_parent_hears_its_children() {
    let (mut h, clock) = host();
    let mut m = BTreeMap::new();
    let a = join(&mut h, "ann", Role::Player);
    h.handle_message(admin(1, 23, b"early"));
    h.handle_message(admin(2, 22, b"world"));
    h.handle_message(admin(3, 23, b"hello"));
    step(&mut h, &clock, &mut m);
    assert_eq!(
        zone(&h).answers,
        vec!["to parent Err(NoParent)", "to parent Ok(())"]
    );
    assert_eq!(h.parent(), Some("world"));
    let out = h.drain_messages();
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].to, MessageTarget::Zone("world".into()));
    assert_eq!((out[0].topic, out[0].via_parent), (5, true));

    // Empty, the zone goes Idle then Dormant; the parent hears of each, Dormant before unload.
    h.handle_leave(a, LeaveReason::Left).unwrap();
    clock.advance(config().dormant_after);
    let report = h.advance(clock.now());
    assert_eq!(report.tier_transitions.len(), 2);
    let tiers: Vec<(u16, Vec<u8>, bool)> = h
        .drain_messages()
        .into_iter()
        .map(|o| (o.topic, o.payload, o.via_parent))
        .collect();
    assert_eq!(
        tiers,
        vec![
            (TIER_TOPIC, vec![0, 1], true),
            (TIER_TOPIC, vec![1, 2], true)
        ]
    );
    h.dispose();
    assert!(h.drain_messages().is_empty());

    // The receiving side: a child's messages go to on_child, tier ones decoded.
    let (mut p, clock) = host();
    let child = |seq, topic, payload: &[u8]| {
        let mut x = msg("zone-c", seq, topic, payload);
        x.via_parent = true;
        x
    };
    p.handle_message(child(1, TIER_TOPIC, &[0, 1]));
    p.handle_message(child(2, 5, b"hi"));
    p.handle_message(child(3, TIER_TOPIC, &[9, 9]));
    step(&mut p, &clock, &mut BTreeMap::new());
    assert_eq!(
        messages_logged(&p),
        vec![
            "child zone-c Tier { from: Hot, to: Idle }",
            "child zone-c Message { topic: 5, payload: [104, 105] }",
            "child zone-c Message { topic: 65535, payload: [9, 9] }",
        ]
    );
}

#[test]
fn an_undeliverable_message_is_told_to_the_zone_at_its_next_tick() {
    let (mut h, clock) = host();
    h.handle_undeliverable(
        id(ID, 7, 4),
        MessageTarget::Group("south".into()),
        2,
        "no bus in this fleet".into(),
    );
    assert!(!zone(&h).log.iter().any(|l| l.starts_with("undeliverable")));
    step(&mut h, &clock, &mut BTreeMap::new());
    assert!(zone(&h)
        .log
        .contains(&"undeliverable to Group(\"south\") topic 2: no bus in this fleet".to_owned()));
}

#[test]
fn groups_parent_dedup_and_undelivered_messages_survive_a_save() {
    let (mut h, clock) = host();
    let mut m = BTreeMap::new();
    h.handle_message(admin(1, 20, b"north"));
    h.handle_message(admin(2, 20, b"market"));
    h.handle_message(admin(3, 22, b"world"));
    h.handle_message(admin(4, 24, &[2]));
    step(&mut h, &clock, &mut m);
    assert_eq!(
        h.group_changes(),
        vec![
            GroupChange::Joined("market".into()),
            GroupChange::Joined("north".into())
        ]
    );
    assert!(h.group_changes().is_empty());
    h.handle_message(admin(5, 21, b"north"));
    step(&mut h, &clock, &mut m);
    assert_eq!(h.group_changes(), vec![GroupChange::Left("north".into())]);
    h.handle_message(admin(6, 20, b"south"));
    h.handle_message(msg("zone-b", 1, 1, b"late"));
    step(&mut h, &clock, &mut m);
    // Taken and not yet delivered when the save is written.
    assert_eq!(
        h.handle_message(msg("zone-b", 2, 1, b"pending")),
        Delivery::Queued
    );
    let save = h.snapshot().unwrap();

    for epoch in [7, 8] {
        let clock = ManualClock::new();
        let mut r =
            ZoneHost::restore::<Courier>(init(), config(), Arc::new(clock.clone()), epoch, &save)
                .unwrap();
        assert_eq!(r.groups().collect::<Vec<_>>(), vec!["market", "south"]);
        assert_eq!(r.parent(), Some("world"));
        let mut joined = r.group_changes();
        joined.sort_by_key(|c| format!("{c:?}"));
        assert_eq!(
            joined,
            vec![
                GroupChange::Joined("market".into()),
                GroupChange::Joined("south".into())
            ]
        );
        assert_eq!(
            r.handle_message(msg("zone-b", 1, 1, b"late")),
            Delivery::Duplicate
        );
        assert_eq!(
            r.handle_message(msg("zone-b", 2, 1, b"pending")),
            Delivery::Duplicate
        );
        step(&mut r, &clock, &mut BTreeMap::new());
        assert_eq!(
            zone(&r).log.last().unwrap(),
            "message Zone(\"zone-b\") topic 1 [112, 101, 110, 100, 105, 110, 103]",
            "the undelivered message is delivered after the restore"
        );
        // The sequence continues under the same epoch and starts afresh under a new one.
        r.handle_message(admin(9, 24, &[1]));
        step(&mut r, &clock, &mut BTreeMap::new());
        let sent = r.drain_messages();
        let expected = if epoch == 7 {
            id(ID, 7, 3)
        } else {
            id(ID, 8, 1)
        };
        assert_eq!(sent[0].id, expected);
    }
}

#[test]
fn a_recording_of_transfers_and_messages_replays_to_the_same_hashes() {
    let mut kinds = ZoneKinds::new();
    kinds.register::<Courier>("courier");
    let clock = ManualClock::new();
    let mut h = kinds
        .create_at(init(), config(), Arc::new(clock.clone()), 7)
        .unwrap();
    h.start_recording(RecordLimits::default()).unwrap();
    let mut m = BTreeMap::new();
    let a = join(&mut h, "ann", Role::Player);
    let b = join(&mut h, "bob", Role::Player);
    step(&mut h, &clock, &mut m);
    h.handle_input(a, 1, 0, &[0xff]);
    h.handle_message(msg("zone-b", 1, 1, b"hi"));
    h.handle_message(admin(1, 10, &b.0.to_le_bytes()));
    h.handle_message(admin(2, 24, &[3]));
    h.handle_message(admin(3, 20, b"north"));
    step(&mut h, &clock, &mut m);
    let _ = h.drain_transfers();
    let _ = h.drain_messages();
    assert_eq!(h.handle_input(a, 2, 0, &[1]), crate::InputOutcome::Moving);
    h.handle_transfer_back(a).unwrap();
    h.handle_transfer_done(b).unwrap();
    h.handle_message(msg("zone-b", 1, 1, b"hi"));
    h.handle_undeliverable(
        id(ID, 7, 1),
        MessageTarget::Zone("zone-b".into()),
        1,
        "gone".into(),
    );
    let c = h
        .handle_transfer_in(
            crate::Principal::new("cat"),
            crate::Claims::new(),
            crate::Claims::new(),
            "zone-b",
            &5i32.to_le_bytes(),
        )
        .unwrap();
    let r = h
        .handle_transfer_return(
            crate::Principal::new("dan"),
            crate::Claims::new(),
            crate::Claims::new(),
            "zone-b",
            &9i32.to_le_bytes(),
        )
        .unwrap();
    h.handle_input(r, 1, 0, &[1]);
    step(&mut h, &clock, &mut m);
    h.handle_rejoin(c).unwrap();
    h.handle_input(a, 3, 0, &[2]);
    step(&mut h, &clock, &mut m);
    let (bytes, _) = h.end_recording().unwrap();
    let report = replay(&kinds, &bytes).unwrap();
    assert_eq!(report.divergence, None, "{report}");
    assert_eq!(report.ticks_matched, 4);
    // Every new call is in the recording, so the replay had to feed each one.
    let mut reader = crate::recording::RecordReader::open(&bytes).unwrap().1;
    let mut seen = std::collections::BTreeSet::new();
    while let Some(r) = reader.next_record().unwrap() {
        use crate::recording::Record;
        let name = match r {
            Record::Message(_) => "message",
            Record::Undeliverable { .. } => "undeliverable",
            Record::TransferIn { .. } => "transfer in",
            Record::TransferReturn { .. } => "transfer return",
            Record::TransferBack(_) => "transfer back",
            Record::TransferDone(_) => "transfer done",
            Record::DrainMessages => "drain messages",
            Record::Outcome(crate::recording::Outcome::Moving) => "moving",
            _ => continue,
        };
        seen.insert(name);
    }
    assert_eq!(seen.len(), 8, "{seen:?}");
}
