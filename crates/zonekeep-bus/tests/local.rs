#![allow(clippy::unwrap_used, clippy::expect_used)]
//! The in-process bus: order, ids, groups, bounds and where undeliverable messages are told.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use zonekeep_bus::{
    Body, BusConfig, BusError, BusHandle, EnvelopeId, Location, Origin, OutMessage, Target,
    ZoneInbox, ZoneLocator,
};

/// Zones this "host" runs or can start, and zones another host owns.
struct Fleet {
    here: Mutex<BTreeSet<String>>,
    started: Mutex<Vec<String>>,
}

impl ZoneLocator for Fleet {
    fn locate(&self, zone: &str) -> Location {
        if zone.starts_with("far") {
            Location::Elsewhere
        } else if self.here.lock().unwrap().contains(zone) {
            self.started.lock().unwrap().push(zone.to_string());
            Location::Here
        } else {
            Location::Unknown
        }
    }
}

fn bus(config: BusConfig, here: &[&str]) -> (BusHandle, Arc<Fleet>) {
    let fleet = Arc::new(Fleet {
        here: Mutex::new(here.iter().map(|s| s.to_string()).collect()),
        started: Mutex::new(Vec::new()),
    });
    (BusHandle::local(config, fleet.clone()).unwrap(), fleet)
}

fn msg(from: &str, seq: u64, to: Target, payload: &[u8]) -> OutMessage {
    OutMessage {
        id: EnvelopeId {
            sender: from.into(),
            epoch: 1,
            seq,
        },
        origin: Origin::Zone,
        from: from.into(),
        to,
        topic: 7,
        payload: payload.to_vec(),
        via_parent: false,
    }
}

async fn next(inbox: &mut ZoneInbox) -> zonekeep_bus::Delivered {
    tokio::time::timeout(Duration::from_secs(10), inbox.recv_message())
        .await
        .expect("a delivery within 10 s")
        .expect("the inbox is open")
}

#[tokio::test]
async fn messages_arrive_in_order_with_their_ids() {
    let (bus, _) = bus(BusConfig::default(), &["a", "b"]);
    let mut b = bus.bind_zone("b").unwrap();
    for seq in 1..=500u64 {
        bus.send(msg("a", seq, Target::Zone("b".into()), &seq.to_le_bytes()))
            .unwrap();
    }
    for seq in 1..=500u64 {
        let d = next(&mut b).await;
        assert_eq!(d.envelope.id.seq, seq);
        assert_eq!(d.envelope.id.sender, "a");
        assert_eq!(d.envelope.from, "a");
        assert_eq!(d.envelope.to_zone, "b");
        assert_eq!(
            d.envelope.body,
            Body::Message {
                topic: 7,
                payload: seq.to_le_bytes().to_vec(),
                via_parent: false
            }
        );
    }
    assert!(b.next_message().is_none());
    assert_eq!(bus.stats().sent(), 500);
}

#[tokio::test]
async fn a_zone_that_is_not_running_is_started_and_gets_what_waited() {
    let (bus, fleet) = bus(BusConfig::default(), &["a", "sleepy"]);
    for seq in 1..=3 {
        bus.send(msg("a", seq, Target::Zone("sleepy".into()), b"x"))
            .unwrap();
    }
    // Every send asked the host to start the zone (the host starts it once).
    let mut sleepy = loop {
        if fleet.started.lock().unwrap().len() == 3 {
            break bus.bind_zone("sleepy").unwrap();
        }
        tokio::task::yield_now().await;
    };
    for seq in 1..=3 {
        assert_eq!(next(&mut sleepy).await.envelope.id.seq, seq);
    }
    // Unbound again, what arrives waits for the next binding on this host.
    bus.unbind_zone(sleepy);
    bus.send(msg("a", 4, Target::Zone("sleepy".into()), b"x"))
        .unwrap();
    while fleet.started.lock().unwrap().len() < 4 {
        tokio::task::yield_now().await;
    }
    let mut sleepy = bus.bind_zone("sleepy").unwrap();
    assert_eq!(next(&mut sleepy).await.envelope.id.seq, 4);
}

#[tokio::test]
async fn the_sender_is_told_what_could_not_be_delivered() {
    let (bus, _) = bus(BusConfig::default(), &["a"]);
    let mut a = bus.bind_zone("a").unwrap();
    bus.send(msg("a", 1, Target::Zone("far-away".into()), b"x"))
        .unwrap();
    bus.send(msg("a", 2, Target::Zone("nowhere".into()), b"x"))
        .unwrap();
    let n1 = tokio::time::timeout(Duration::from_secs(10), a.recv_notice())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(n1.id.seq, 1);
    assert_eq!(n1.to, Target::Zone("far-away".into()));
    assert_eq!(n1.reason, BusError::NoBus);
    assert!(n1
        .reason
        .to_string()
        .contains("start every host with --bus"));
    let n2 = tokio::time::timeout(Duration::from_secs(10), a.recv_notice())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(n2.reason, BusError::UnknownZone("nowhere".into()));
    let counted: u64 = bus.stats().undeliverable().map(|(_, n)| n).sum();
    assert_eq!(counted, 2);
    // Hostile sizes are refused at the call.
    let big = msg("a", 3, Target::Zone("a".into()), &vec![0; 16 * 1024 + 1]);
    assert!(matches!(bus.send(big), Err(BusError::Invalid(_))));
    let unnamed = msg("a", 3, Target::Zone(String::new()), b"");
    assert!(matches!(bus.send(unnamed), Err(BusError::Invalid(_))));
}

#[tokio::test]
async fn a_full_inbox_refuses_and_keeps_order_for_what_it_took() {
    let config = BusConfig {
        inbox_capacity: 4,
        ..BusConfig::default()
    };
    let (bus, _) = bus(config, &["a", "b"]);
    let mut a = bus.bind_zone("a").unwrap();
    let mut b = bus.bind_zone("b").unwrap();
    for seq in 1..=6 {
        bus.send(msg("a", seq, Target::Zone("b".into()), b"x"))
            .unwrap();
    }
    for want in [5, 6] {
        let notice = tokio::time::timeout(Duration::from_secs(10), a.recv_notice())
            .await
            .unwrap()
            .unwrap();
        assert_eq!(notice.id.seq, want);
        assert_eq!(notice.reason, BusError::ReceiverFull("b".into()));
    }
    for seq in 1..=4 {
        assert_eq!(next(&mut b).await.envelope.id.seq, seq);
    }
    // A delivery put back comes out first.
    bus.send(msg("a", 7, Target::Zone("b".into()), b"x"))
        .unwrap();
    let d = next(&mut b).await;
    b.hold(d);
    assert_eq!(b.next_message().map(|d| d.envelope.id.seq), Some(7));
}

#[tokio::test]
async fn the_outgoing_queue_is_bounded() {
    let config = BusConfig {
        outgoing_capacity: 1,
        ..BusConfig::default()
    };
    // A current-thread runtime: the dispatcher cannot run between these sends.
    let (bus, _) = bus(config, &["a", "b"]);
    bus.send(msg("a", 1, Target::Zone("b".into()), b"x"))
        .unwrap();
    assert_eq!(
        bus.send(msg("a", 2, Target::Zone("b".into()), b"x")),
        Err(BusError::QueueFull)
    );
    assert_eq!(bus.stats().queue_full(), 1);
}

#[tokio::test]
async fn a_group_send_reaches_each_member_once_in_order() {
    let (bus, _) = bus(BusConfig::default(), &["a", "b", "c"]);
    let mut b = bus.bind_zone("b").unwrap();
    let mut c = bus.bind_zone("c").unwrap();
    bus.join_group("b", "g.*").unwrap();
    bus.join_group("c", "g.*").unwrap();
    assert_eq!(bus.group_members("g.*"), vec!["b", "c"]);
    for seq in 1..=10 {
        bus.send(msg("a", seq, Target::Group("g.*".into()), b"hi"))
            .unwrap();
    }
    for inbox in [&mut b, &mut c] {
        for seq in 1..=10 {
            assert_eq!(next(inbox).await.envelope.id.seq, seq);
        }
    }
    bus.leave_group("c", "g.*").unwrap();
    bus.send(msg("a", 11, Target::Group("g.*".into()), b"hi"))
        .unwrap();
    assert_eq!(next(&mut b).await.envelope.id.seq, 11);
    // c is no longer a member: a direct message after the group one is the next it sees.
    bus.send(msg("a", 12, Target::Zone("c".into()), b"direct"))
        .unwrap();
    assert_eq!(next(&mut c).await.envelope.id.seq, 12);
}

#[tokio::test]
async fn transfers_reach_the_host_channel() {
    let (bus, _) = bus(BusConfig::default(), &["b"]);
    let mut transfers = bus.take_transfer_deliveries().unwrap();
    assert!(bus.take_transfer_deliveries().is_none());
    let here = bus.host().to_string();
    bus.send_transfer(&here, "b", vec![1, 2, 3]).await.unwrap();
    let t = transfers.recv().await.unwrap();
    assert_eq!(
        (t.to_zone.as_str(), t.from.as_str(), t.bytes.as_slice()),
        ("b", here.as_str(), &[1, 2, 3][..])
    );
    // In process there is no other host to reach.
    assert_eq!(
        bus.send_transfer("host-2", "b", vec![1]).await,
        Err(BusError::NoBus)
    );
}
