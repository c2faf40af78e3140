#![allow(clippy::unwrap_used, clippy::expect_used)]
//! The bus over a real NATS JetStream server (`ZONEKEEP_TEST_NATS`, e.g.
//! `nats://127.0.0.1:4222`). Each test works in its own namespace, so runs sharing a server
//! never see each other's streams, consumers or groups, and removes them at the end.

#[path = "support/service.rs"]
mod service;

use std::time::Duration;

use zonekeep_bus::naming::Names;
use zonekeep_bus::{
    Body, BusConfig, BusError, BusHandle, Delivered, Envelope, EnvelopeId, Origin, OutMessage,
    Target, ZoneInbox,
};

/// A fresh namespace and a config for one "host" in it.
fn namespace() -> String {
    let mut b = [0u8; 6];
    getrandom::fill(&mut b).unwrap();
    format!(
        "t{}",
        zonekeep_bus::naming::hex(&String::from_utf8_lossy(&b))
    )
    .chars()
    .filter(|c| c.is_ascii_alphanumeric())
    .take(20)
    .collect()
}

fn config(ns: &str, host: &str) -> BusConfig {
    BusConfig {
        host: host.into(),
        namespace: ns.into(),
        ack_wait: Duration::from_secs(1),
        ..BusConfig::default()
    }
}

/// Removes the namespace's stream and bucket.
async fn cleanup(url: &str, ns: &str) {
    let names = Names::new(ns).unwrap();
    if let Ok(client) = async_nats::connect(url).await {
        let js = async_nats::jetstream::new(client);
        let _ = js.delete_stream(&names.stream).await;
        let _ = js.delete_key_value(&names.groups_bucket).await;
    }
}

fn msg(from: &str, seq: u64, to: Target) -> OutMessage {
    OutMessage {
        id: EnvelopeId {
            sender: from.into(),
            epoch: 3,
            seq,
        },
        origin: Origin::Zone,
        from: from.into(),
        to,
        topic: 9,
        payload: seq.to_le_bytes().to_vec(),
        via_parent: seq % 2 == 0,
    }
}

async fn next(inbox: &mut ZoneInbox) -> Delivered {
    tokio::time::timeout(Duration::from_secs(20), inbox.recv_message())
        .await
        .expect("a delivery within 20 s")
        .expect("the inbox is open")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn messages_cross_hosts_in_order() {
    let Some(url) = service::service_url("ZONEKEEP_TEST_NATS", "messages_cross_hosts_in_order")
    else {
        return;
    };
    let ns = namespace();
    let h1 = BusHandle::connect(&url, config(&ns, "h1")).await.unwrap();
    let h2 = BusHandle::connect(&url, config(&ns, "h2")).await.unwrap();
    let mut b = h2.bind_zone("zone.b*>").unwrap();
    for seq in 1..=300 {
        h1.send(msg("a", seq, Target::Zone("zone.b*>".into())))
            .unwrap();
    }
    for seq in 1..=300 {
        let d = next(&mut b).await;
        assert_eq!(d.envelope.id.seq, seq);
        assert_eq!(d.envelope.from, "a");
        assert_eq!(
            d.envelope.body,
            Body::Message {
                topic: 9,
                payload: seq.to_le_bytes().to_vec(),
                via_parent: seq % 2 == 0
            }
        );
        h2.ack_upto("zone.b*>", d.token);
    }
    // The sender counts a send once NATS acknowledged it, which may follow the delivery.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while h1.stats().sent() < 300 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "sends not acknowledged"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert_eq!(h1.stats().sent(), 300);
    // Sends queued together leave in batches: never more NATS messages than sends.
    let published = h1.stats().published();
    assert!((1..=300).contains(&published), "{published} published");
    assert!(h1.stats().connected());
    h1.shutdown();
    h2.shutdown();
    cleanup(&url, &ns).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unacknowledged_messages_go_to_the_zones_next_host() {
    let Some(url) = service::service_url(
        "ZONEKEEP_TEST_NATS",
        "unacknowledged_messages_go_to_the_zones_next_host",
    ) else {
        return;
    };
    let ns = namespace();
    let sender = BusHandle::connect(&url, config(&ns, "s")).await.unwrap();
    let first = BusHandle::connect(&url, config(&ns, "first"))
        .await
        .unwrap();
    let mut b = first.bind_zone("b").unwrap();
    for seq in 1..=5 {
        sender
            .send(msg("a", seq, Target::Zone("b".into())))
            .unwrap();
    }
    // The first host applies all five but its save covers only the first two.
    let mut last = None;
    for seq in 1..=5 {
        let d = next(&mut b).await;
        assert_eq!(d.envelope.id.seq, seq);
        if seq == 2 {
            first.ack_upto("b", d.token);
        }
        last = Some(d.token);
    }
    assert!(last.is_some());
    // It dies (no more acks); the zone's next owner binds the same consumer.
    first.shutdown();
    first.unbind_zone(b);
    let second = BusHandle::connect(&url, config(&ns, "second"))
        .await
        .unwrap();
    let mut b = second.bind_zone("b").unwrap();
    // Every message the save did not cover comes again, in order. Sent together, the five may
    // have travelled as one batch, acknowledged only as a whole: then the ones the save did
    // cover come again too, ahead of the rest (the zone's dedup table drops them).
    let mut again = Vec::new();
    while again.last() != Some(&5) {
        let d = next(&mut b).await;
        again.push(d.envelope.id.seq);
        second.ack_upto("b", d.token);
    }
    assert!(again[0] <= 3, "{again:?}");
    assert!(
        again.windows(2).all(|w| w[1] == w[0] + 1),
        "in order: {again:?}"
    );
    // Acknowledged ones are never seen again: the next delivery is a new message.
    sender.send(msg("a", 6, Target::Zone("b".into()))).unwrap();
    assert_eq!(next(&mut b).await.envelope.id.seq, 6);
    sender.shutdown();
    second.shutdown();
    cleanup(&url, &ns).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_stream_drops_a_republished_copy() {
    let Some(url) =
        service::service_url("ZONEKEEP_TEST_NATS", "the_stream_drops_a_republished_copy")
    else {
        return;
    };
    let ns = namespace();
    let h = BusHandle::connect(&url, config(&ns, "h")).await.unwrap();
    let mut b = h.bind_zone("b").unwrap();
    h.send_now(msg("a", 1, Target::Zone("b".into())))
        .await
        .unwrap();
    h.send_now(msg("a", 1, Target::Zone("b".into())))
        .await
        .unwrap();
    assert_eq!(h.stats().duplicates(), 1);
    h.send_now(msg("a", 2, Target::Zone("b".into())))
        .await
        .unwrap();
    assert_eq!(next(&mut b).await.envelope.id.seq, 1);
    assert_eq!(next(&mut b).await.envelope.id.seq, 2);
    h.shutdown();
    cleanup(&url, &ns).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn groups_span_hosts_through_the_bucket() {
    let Some(url) =
        service::service_url("ZONEKEEP_TEST_NATS", "groups_span_hosts_through_the_bucket")
    else {
        return;
    };
    let ns = namespace();
    let h1 = BusHandle::connect(&url, config(&ns, "h1")).await.unwrap();
    let h2 = BusHandle::connect(&url, config(&ns, "h2")).await.unwrap();
    let mut x = h1.bind_zone("x").unwrap();
    let mut y = h2.bind_zone("y").unwrap();
    h1.join_group("x", "g.1").unwrap();
    h2.join_group("y", "g.1").unwrap();
    // Each host learns the other's member through the bucket's watch.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while h1.group_members("g.1") != ["x", "y"] || h2.group_members("g.1") != ["x", "y"] {
        assert!(
            tokio::time::Instant::now() < deadline,
            "membership did not spread"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    for seq in 1..=20 {
        h1.send(msg("a", seq, Target::Group("g.1".into()))).unwrap();
    }
    for inbox in [&mut x, &mut y] {
        for seq in 1..=20 {
            assert_eq!(next(inbox).await.envelope.id.seq, seq);
        }
    }
    h2.leave_group("y", "g.1").unwrap();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while h1.group_members("g.1") != ["x"] {
        assert!(
            tokio::time::Instant::now() < deadline,
            "leave did not spread"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    h1.shutdown();
    h2.shutdown();
    cleanup(&url, &ns).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_bytes_on_a_zone_subject_are_dropped_and_counted() {
    let Some(url) = service::service_url(
        "ZONEKEEP_TEST_NATS",
        "hostile_bytes_on_a_zone_subject_are_dropped_and_counted",
    ) else {
        return;
    };
    let ns = namespace();
    let h = BusHandle::connect(&url, config(&ns, "h")).await.unwrap();
    let mut b = h.bind_zone("b").unwrap();
    let client = async_nats::connect(&url).await.unwrap();
    let js = async_nats::jetstream::new(client);
    let subject = Names::new(&ns).unwrap().zone_subject("b");
    // Junk, a truncated envelope, a batch with no envelopes and a batch claiming more than
    // it holds.
    let batch = zonekeep_bus::batch::BATCH_VERSION;
    for junk in [
        &b""[..],
        &[1, 0, 0, 255, 255][..],
        &[9; 64][..],
        &[batch, 0, 0][..],
        &[batch, 2, 0, 1, 0, 0, 0, 1][..],
    ] {
        js.publish(subject.clone(), junk.to_vec().into())
            .await
            .unwrap()
            .await
            .unwrap();
    }
    // An envelope addressed to another zone, on b's subject, is refused too.
    let mut wrong = zonekeep_bus::Envelope {
        id: EnvelopeId {
            sender: "a".into(),
            epoch: 1,
            seq: 1,
        },
        origin: Origin::Zone,
        from: "a".into(),
        to_zone: "c".into(),
        body: Body::Transfer(vec![]),
    };
    js.publish(subject.clone(), wrong.encode().into())
        .await
        .unwrap()
        .await
        .unwrap();
    wrong.to_zone = "b".into();
    h.send_now(msg("a", 7, Target::Zone("b".into())))
        .await
        .unwrap();
    assert_eq!(next(&mut b).await.envelope.id.seq, 7);
    assert_eq!(h.stats().decode_errors(), 6);
    h.shutdown();
    cleanup(&url, &ns).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn transfer_notes_reach_the_named_host_whether_or_not_the_zone_runs_there() {
    let Some(url) = service::service_url(
        "ZONEKEEP_TEST_NATS",
        "transfer_notes_reach_the_named_host_whether_or_not_the_zone_runs_there",
    ) else {
        return;
    };
    let ns = namespace();
    let h1 = BusHandle::connect(&url, config(&ns, "h1")).await.unwrap();
    let h2 = BusHandle::connect(&url, config(&ns, "h2")).await.unwrap();
    let mut to_h1 = h1.take_transfer_deliveries().unwrap();
    let mut to_h2 = h2.take_transfer_deliveries().unwrap();
    // Zone "b" is bound nowhere: a note about it still reaches the host it names, at once.
    h1.send_transfer("h2", "b", b"player 7".to_vec())
        .await
        .unwrap();
    let t = tokio::time::timeout(Duration::from_secs(20), to_h2.recv())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        (t.to_zone.as_str(), t.from.as_str(), t.bytes.as_slice()),
        ("b", "h1", &b"player 7"[..])
    );
    // Bytes on a host's subject that are no transfer envelope (anyone may publish there) are
    // dropped and counted; a note after them, on the same connection, still arrives.
    let raw = async_nats::connect(&url).await.unwrap();
    let subject = Names::new(&ns).unwrap().host_subject("h1");
    raw.publish(subject.clone(), b"\xff not an envelope".as_ref().into())
        .await
        .unwrap();
    let note = Envelope {
        id: EnvelopeId {
            sender: "host:h2".into(),
            epoch: 1,
            seq: 1,
        },
        origin: Origin::Host,
        from: "h2".into(),
        to_zone: "a".into(),
        body: Body::Transfer(b"accepted".to_vec()),
    };
    raw.publish(subject, note.encode().into()).await.unwrap();
    raw.flush().await.unwrap();
    let t = tokio::time::timeout(Duration::from_secs(20), to_h1.recv())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        (t.to_zone.as_str(), t.from.as_str(), t.bytes.as_slice()),
        ("a", "h2", &b"accepted"[..])
    );
    assert_eq!(h1.stats().decode_errors(), 1);
    // The answer of a target host reaches the source host it names.
    h2.send_transfer("h1", "a", b"refused".to_vec())
        .await
        .unwrap();
    let t = tokio::time::timeout(Duration::from_secs(20), to_h1.recv())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(t.bytes, b"refused");
    assert!(
        to_h2.try_recv().is_err(),
        "a note reached a host it did not name"
    );
    h1.shutdown();
    h2.shutdown();
    cleanup(&url, &ns).await;
}

#[tokio::test]
async fn an_unreachable_server_is_a_typed_error() {
    // Port 9 (discard) on loopback: nothing listens there.
    let err = BusHandle::connect("nats://127.0.0.1:9", BusConfig::default())
        .await
        .unwrap_err();
    assert!(matches!(err, BusError::Setup(_)), "{err:?}");
}
