//! NetSim's link model and queues: delays, ordering, loss, bounds, and setting validation.

#![allow(clippy::unwrap_used)]
use std::time::Duration;

use tokio::time::Instant;

use super::*;

#[test]
fn datagrams_are_lost_and_reordered_but_never_late_beyond_their_own_delay() {
    let cfg = NetSimConfig {
        latency_ms: 100,
        jitter_ms: 40,
        loss: 0.2,
        rto_ms: 0,
        ..NetSimConfig::default()
    };
    let mut q = DatagramDelay::new(7, 10_000);
    let t0 = Instant::now();
    let (mut dropped, mut held) = (0, 0);
    for i in 0..1000u32 {
        match q.offer(&cfg, t0 + Duration::from_millis(u64::from(i)), i) {
            Datagram::Dropped => dropped += 1,
            Datagram::Held => held += 1,
            Datagram::Now(_) => panic!("NetSim is on"),
        }
    }
    assert!(
        (120..280).contains(&dropped),
        "about a fifth lost: {dropped}"
    );
    let mut out = Vec::new();
    let mut now = t0;
    while let Some(at) = q.next_release() {
        now = now.max(at);
        while let Some(i) = q.pop_due(now) {
            // Sent at t0 + i ms, due within [100, 140] ms of that.
            let sent = t0 + Duration::from_millis(u64::from(i));
            assert!(now >= sent + Duration::from_millis(100));
            assert!(now <= sent + Duration::from_millis(140));
            out.push(i);
        }
    }
    assert_eq!(out.len(), held);
    assert!(
        out.windows(2).any(|w| w[0] > w[1]),
        "jitter reorders datagrams"
    );
    let off = NetSimConfig::default();
    assert_eq!(q.offer(&off, now, 5), Datagram::Now(5));
    let mut full = DatagramDelay::new(1, 1);
    let lossless = NetSimConfig { loss: 0.0, ..cfg };
    assert_eq!(full.offer(&lossless, t0, 1), Datagram::Held);
    assert_eq!(full.offer(&lossless, t0, 2), Datagram::Dropped, "bounded");
}

#[test]
fn releases_are_ordered_and_delayed() {
    let cfg = NetSimConfig {
        latency_ms: 50,
        jitter_ms: 40,
        loss: 0.3,
        rto_ms: 0,
        ..NetSimConfig::default()
    };
    let mut link = Link::new(7);
    let t0 = Instant::now();
    let mut prev = t0;
    let mut lost_any = false;
    for i in 0..500u64 {
        let now = t0 + Duration::from_millis(i);
        let at = link.release_at(&cfg, now).unwrap();
        assert!(at >= now + Duration::from_millis(50));
        assert!(at >= prev, "never reordered");
        if at >= now + Duration::from_millis(250) {
            lost_any = true;
        }
        prev = at;
    }
    assert!(lost_any, "a 30% loss shows as retransmission delays");
}

#[test]
fn a_delay_queue_pipelines_messages_instead_of_serializing_their_delays() {
    let cfg = NetSimConfig {
        latency_ms: 150,
        ..NetSimConfig::default()
    };
    let mut q = DelayQueue::new(3, 64);
    let t0 = Instant::now();
    // 30 frames a second for one second: all in flight at once, each 150 ms late.
    for i in 0..30u64 {
        assert_eq!(q.offer(&cfg, t0 + Duration::from_millis(33 * i), i), None);
    }
    assert_eq!(q.pop_due(t0 + Duration::from_millis(149)), None);
    let mut released = Vec::new();
    let end = t0 + Duration::from_millis(150 + 33 * 29);
    while let Some(i) = q.pop_due(end) {
        released.push(i);
    }
    assert_eq!(released, (0..30).collect::<Vec<_>>(), "all due, in order");
    // Switching NetSim off while frames wait keeps them in order behind the held ones.
    assert_eq!(q.offer(&cfg, end, 30), None);
    assert_eq!(q.offer(&NetSimConfig::default(), end, 31), None);
    assert_eq!(q.pop_due(end + Duration::from_millis(150)), Some(30));
    assert_eq!(q.pop_due(end + Duration::from_millis(150)), Some(31));
    assert_eq!(q.offer(&NetSimConfig::default(), end, 32), Some(32));
}

#[test]
fn a_full_delay_queue_says_so() {
    let cfg = NetSimConfig {
        latency_ms: 10,
        ..NetSimConfig::default()
    };
    let mut q = DelayQueue::new(3, 2);
    let t0 = Instant::now();
    assert!(!q.is_full());
    assert_eq!(q.offer(&cfg, t0, 1), None);
    assert_eq!(q.offer(&cfg, t0, 2), None);
    assert!(q.is_full());
    assert_eq!(q.next_release(), Some(t0 + Duration::from_millis(10)));
}

#[test]
fn off_means_no_delay_and_validation() {
    let mut link = Link::new(1);
    assert_eq!(
        link.release_at(&NetSimConfig::default(), Instant::now()),
        None
    );
    let bad = NetSimConfig {
        loss: 1.0,
        ..NetSimConfig::default()
    };
    assert!(bad.validate().is_err());
    let sim = NetSim::default();
    assert!(sim.set(bad).is_err());
    sim.set(NetSimConfig {
        latency_ms: 10,
        ..NetSimConfig::default()
    })
    .unwrap();
    assert_eq!(sim.get().latency_ms, 10);
}
