#![allow(clippy::unwrap_used, clippy::expect_used)]
//! The bus's throughput and latency between two hosts over NATS JetStream
//! (`ZONEKEEP_TEST_NATS`), measured, not asserted: ignored by default, run with
//!
//! ```text
//! ZONEKEEP_TEST_NATS=nats://127.0.0.1:4222 cargo test --release -p zonekeep-bus \
//!     --test nats_bench -- --ignored --nocapture
//! ```
//!
//! Two `BusHandle`s with a NATS connection each stand for two hosts, each on a tokio runtime of
//! its own with two workers, as two host processes on two cores would have: sender zones on the
//! first send numbered messages to receiver zones bound on the second, which acknowledge in batches
//! (as a zone without saves does on delivery). Each payload carries its send instant, so the
//! latency is publish queue + NATS store + consumer pull + inbox, measured on one clock.
//! Phase 1 sends as fast as the bus takes them (throughput); then sends are paced at 5,000 and
//! at 50,000 a second (latency at that load). BENCHMARKS.md records the results.

#[path = "support/service.rs"]
mod service;

use std::sync::Arc;
use std::time::{Duration, Instant};

use zonekeep_bus::naming::Names;
use zonekeep_bus::{BusConfig, BusError, BusHandle, EnvelopeId, Origin, OutMessage, Target};

/// Sender and receiver zones.
const ZONES: usize = 8;
/// Messages in the throughput phase.
const BURST: u64 = 200_000;
/// Messages per second in the latency phases, and for how long each runs.
const PACED_RATES: [u64; 2] = [5_000, 50_000];
const PACED_FOR: Duration = Duration::from_secs(5);

fn namespace() -> String {
    let mut b = [0u8; 6];
    getrandom::fill(&mut b).unwrap();
    let hex: String = b.iter().map(|x| format!("{x:02x}")).collect();
    format!("bench{hex}")
}

fn config(ns: &str, host: &str) -> BusConfig {
    BusConfig {
        host: host.into(),
        namespace: ns.into(),
        ..BusConfig::default()
    }
}

/// What the receivers saw in one phase.
struct Seen {
    latencies_us: Vec<u64>,
    last_at: Instant,
}

/// Receives `expect` messages over every receiver zone; returns their latencies.
async fn receive(
    host: &tokio::runtime::Handle,
    inboxes: Vec<zonekeep_bus::ZoneInbox>,
    bus: &BusHandle,
    base: Instant,
    expect: u64,
) -> (Seen, Vec<zonekeep_bus::ZoneInbox>) {
    let (tx, mut rx) = tokio::sync::mpsc::channel::<(u64, Instant)>(1 << 16);
    let mut tasks = Vec::new();
    let per_zone = expect / inboxes.len() as u64;
    for mut inbox_owned in inboxes {
        // Each zone's inbox is moved into a task for the phase and handed back after.
        let tx = tx.clone();
        let bus = bus.clone();
        tasks.push(host.spawn(async move {
            let zone = inbox_owned.zone().to_string();
            for n in 1..=per_zone {
                let d = tokio::time::timeout(Duration::from_secs(60), inbox_owned.recv_message())
                    .await
                    .expect("a delivery within 60 s")
                    .expect("open inbox");
                let now = Instant::now();
                let zonekeep_bus::Body::Message { payload, .. } = &d.envelope.body else {
                    panic!("a message")
                };
                let sent = u64::from_le_bytes(payload[8..16].try_into().unwrap());
                let at = now.duration_since(base).as_micros() as u64;
                let lat = at.saturating_sub(sent);
                let _ = tx.send((lat, now)).await;
                if n % 256 == 0 || n == per_zone {
                    bus.ack_upto(&zone, d.token);
                }
            }
            inbox_owned
        }));
    }
    drop(tx);
    let mut latencies_us = Vec::with_capacity(expect as usize);
    let mut last_at = Instant::now();
    while let Some((lat, at)) = rx.recv().await {
        latencies_us.push(lat);
        last_at = at;
    }
    let mut back = Vec::new();
    for t in tasks {
        back.push(t.await.unwrap());
    }
    (
        Seen {
            latencies_us,
            last_at,
        },
        back,
    )
}

/// Sends message `seq` from sender zone `i` to receiver zone `i`, retrying while the outgoing
/// queue is full.
async fn send(bus: &BusHandle, base: Instant, i: usize, seq: u64) {
    loop {
        let mut payload = seq.to_le_bytes().to_vec();
        payload.extend_from_slice(&(base.elapsed().as_micros() as u64).to_le_bytes());
        let msg = OutMessage {
            id: EnvelopeId {
                sender: format!("tx-{i}"),
                epoch: 1,
                seq,
            },
            origin: Origin::Zone,
            from: format!("tx-{i}"),
            to: Target::Zone(format!("rx-{i}")),
            topic: 2,
            payload,
            via_parent: false,
        };
        match bus.send(msg) {
            Ok(()) => return,
            Err(BusError::QueueFull) => tokio::time::sleep(Duration::from_micros(200)).await,
            Err(e) => panic!("send: {e}"),
        }
    }
}

fn percentile(sorted: &[u64], p: f64) -> u64 {
    if sorted.is_empty() {
        return 0;
    }
    let i = ((sorted.len() - 1) as f64 * p).round() as usize;
    sorted[i]
}

fn summary(name: &str, n: u64, took: Duration, seen: &mut Seen) {
    seen.latencies_us.sort_unstable();
    let l = &seen.latencies_us;
    println!(
        "{name}: {n} messages in {:.2} s = {:.0} msgs/s; latency p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms",
        took.as_secs_f64(),
        n as f64 / took.as_secs_f64(),
        percentile(l, 0.50) as f64 / 1000.0,
        percentile(l, 0.99) as f64 / 1000.0,
        l.last().copied().unwrap_or(0) as f64 / 1000.0,
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 1)]
#[ignore = "a benchmark: run with --ignored --nocapture (BENCHMARKS.md)"]
async fn bus_throughput_and_latency_between_two_hosts() {
    let Some(url) = service::service_url(
        "ZONEKEEP_TEST_NATS",
        "bus_throughput_and_latency_between_two_hosts",
    ) else {
        return;
    };
    let ns = namespace();
    // Each host's own runtime: its bus tasks and its zones' sends or receives run there.
    let runtime = || {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap()
    };
    let (h1, h2) = (runtime(), runtime());
    let connect = |rt: &tokio::runtime::Runtime, host: &str| {
        let (url, config) = (url.clone(), config(&ns, host));
        rt.spawn(async move { BusHandle::connect(&url, config).await })
    };
    let sender = Arc::new(connect(&h1, "h1").await.unwrap().unwrap());
    let receiver = connect(&h2, "h2").await.unwrap().unwrap();
    let inboxes: Vec<_> = (0..ZONES)
        .map(|i| receiver.bind_zone(&format!("rx-{i}")).unwrap())
        .collect();
    // Let the consumers bind before the clock starts.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let base = Instant::now();

    // Phase 1: as fast as the bus takes them.
    let start = Instant::now();
    let s = sender.clone();
    let sending = h1.spawn(async move {
        let per_zone = BURST / ZONES as u64;
        for seq in 1..=per_zone {
            for i in 0..ZONES {
                send(&s, base, i, seq).await;
            }
        }
    });
    let (mut seen, inboxes) = receive(h2.handle(), inboxes, &receiver, base, BURST).await;
    sending.await.unwrap();
    summary("burst", BURST, seen.last_at - start, &mut seen);
    let mut published = sender.stats().published();
    println!("  in {published} NATS messages");

    // Then fixed rates, in 1 ms batches.
    let mut inboxes = inboxes;
    let mut first = BURST / ZONES as u64 + 1;
    for rate in PACED_RATES {
        let total = rate * PACED_FOR.as_secs();
        let s = sender.clone();
        let start = Instant::now();
        let from = first;
        let sending = h1.spawn(async move {
            let per_ms = (rate / 1000).max(1);
            let mut tick = tokio::time::interval(Duration::from_millis(1));
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Burst);
            let mut sent = 0u64;
            let mut seq = from;
            while sent < total {
                tick.tick().await;
                for _ in 0..per_ms {
                    let i = (sent % ZONES as u64) as usize;
                    send(&s, base, i, seq).await;
                    sent += 1;
                    if i == ZONES - 1 {
                        seq += 1;
                    }
                }
            }
        });
        let (mut seen, back) = receive(h2.handle(), inboxes, &receiver, base, total).await;
        inboxes = back;
        sending.await.unwrap();
        summary(
            &format!("paced at {rate}/s"),
            total,
            seen.last_at - start,
            &mut seen,
        );
        let now = sender.stats().published();
        println!("  in {} NATS messages", now - published);
        published = now;
        first += total / ZONES as u64;
    }

    let sent = sender.stats().sent();
    let undeliverable: Vec<String> = sender
        .stats()
        .undeliverable()
        .filter(|(_, n)| *n > 0)
        .map(|(reason, n)| format!("{n} {reason}"))
        .collect();
    // `queue_full` are sends the outgoing queue refused at once, which this bench retries.
    println!("sender host: {sent} sent; refused: {undeliverable:?}");
    for inbox in inboxes {
        receiver.unbind_zone(inbox);
    }
    sender.shutdown();
    receiver.shutdown();
    h1.shutdown_background();
    h2.shutdown_background();
    let names = Names::new(&ns).unwrap();
    if let Ok(client) = async_nats::connect(&url).await {
        let js = async_nats::jetstream::new(client);
        let _ = js.delete_stream(&names.stream).await;
        let _ = js.delete_key_value(&names.groups_bucket).await;
    }
}
