//! The bus over NATS JetStream.
//!
//! - One stream (`<NS>_ZONES`, work-queue retention, bounded by age and bytes, discarding the
//!   oldest) on subjects `<ns>.zone.<hex(zone)>`; every envelope carries a `Nats-Msg-Id`, so a
//!   republished copy inside the two-minute duplicate window is dropped by the server.
//! - One durable pull consumer per zone, bound by the host that runs the zone, with explicit
//!   acknowledgement and `max_ack_pending` = the zone's inbox size: a zone that does not keep
//!   up stops the pulling for itself only; nothing is dropped.
//! - Group membership in the key-value bucket `<ns>_groups`, key `<hex(group)>.<hex(zone)>`,
//!   watched by every host into its in-memory map.
//! - Sends publish in order from one task (so each sender→receiver pair keeps its order) and
//!   wait for acknowledgements in a second one, each within the publish timeout. What is queued
//!   when the publisher wakes goes out together: the envelopes for one zone as one batch
//!   ([`crate::batch`]), so under load NATS stores, delivers and deletes one message per zone and
//!   round instead of one per envelope; a batch is acknowledged by the receiving host once its
//!   zone applied (and, when it saves, committed) every envelope in it.
//! - Transfer notes between hosts go to the receiving host's own subject `<ns>.host.<hex(host)>`
//!   as plain NATS messages: at once, with no per-zone consumer to wait for and nothing stored
//!   (the transfer's record in the store is what decides a move).

mod consume;
mod groups;
mod publish;

use std::future::IntoFuture;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_nats::jetstream::stream::ConsumerErrorKind as consumer_error;
use async_nats::jetstream::{self, consumer, kv, stream};
use futures_util::StreamExt;
use tokio::sync::mpsc;
use tokio::time::Instant;

use crate::handle::{Outgoing, Shared};
use crate::naming::Names;
use crate::{BusConfig, BusError, BusStats, Envelope};

use consume::host_notes;
use groups::{group_watcher, membership_writer};
use publish::{ack_waiter, publisher};

pub(crate) use consume::consume;

/// Publishes awaiting their acknowledgement at once, per host.
const IN_FLIGHT: usize = 4096;
/// Membership changes waiting for NATS.
const MEMBERSHIP_QUEUE: usize = 4096;
/// The longest pause between attempts to re-bind a consumer or re-watch the bucket.
const MAX_BACKOFF: Duration = Duration::from_secs(2);

pub(crate) struct Nats {
    client: async_nats::Client,
    js: jetstream::Context,
    names: Names,
    kv: kv::Store,
    membership_tx: mpsc::Sender<(String, String, bool)>,
    membership_rx: Mutex<Option<mpsc::Receiver<(String, String, bool)>>>,
    /// This host's own subject, for transfer notes; taken by the task that serves it.
    notes: Mutex<Option<async_nats::Subscriber>>,
    /// Batches published so far, and this run's boot time: a batch's id.
    batches: std::sync::atomic::AtomicU64,
    boot: u128,
}

impl Nats {
    pub(crate) async fn connect(
        url: &str,
        config: &BusConfig,
        stats: Arc<BusStats>,
    ) -> Result<Self, BusError> {
        let names = Names::new(&config.namespace)
            .ok_or_else(|| BusError::Setup(format!("bad namespace {:?}", config.namespace)))?;
        let events = stats.clone();
        let client = async_nats::ConnectOptions::new()
            .name(format!("zonekeep {}", config.host))
            .connection_timeout(config.publish_timeout)
            .request_timeout(Some(config.publish_timeout))
            .event_callback(move |event| {
                let events = events.clone();
                async move {
                    match event {
                        async_nats::Event::Connected => {
                            tracing::info!("bus: NATS connected");
                            events.set_connected(true);
                        }
                        async_nats::Event::Disconnected => {
                            tracing::warn!(
                                "bus: NATS disconnected; sends are undeliverable until it is back"
                            );
                            events.set_connected(false);
                        }
                        other => tracing::debug!(event = %other, "bus: NATS event"),
                    }
                }
            })
            .connect(url)
            .await
            .map_err(|e| BusError::Setup(format!("cannot reach NATS at {url}: {e}")))?;
        stats.set_connected(true);
        // The server registers the subscription when it reads it; until then a note to this host
        // is dropped (plain NATS keeps nothing), and a flush only empties this client's buffer.
        // The server reads a connection in order, so once the JetStream requests below (on the
        // same connection) are answered, the subscription stands before this call returns.
        let notes = client
            .subscribe(names.host_subject(&config.host))
            .await
            .map_err(|e| BusError::Setup(format!("host subject: {e}")))?;
        let js = jetstream::new(client.clone());
        ensure_stream(&js, &names, config).await?;
        // The bucket's backing stream is made here, as the key-value API lays it out:
        // `create_key_value` first asks for account details in a shape NATS 2.9 does not answer.
        let bucket = &names.groups_bucket;
        js.get_or_create_stream(stream::Config {
            name: format!("KV_{bucket}"),
            subjects: vec![format!("$KV.{bucket}.>")],
            max_messages_per_subject: 1,
            allow_rollup: true,
            deny_delete: true,
            allow_direct: true,
            discard: stream::DiscardPolicy::New,
            storage: stream::StorageType::File,
            ..Default::default()
        })
        .await
        .map_err(|e| BusError::Setup(format!("group bucket: {e}")))?;
        let kv = js
            .get_key_value(bucket.clone())
            .await
            .map_err(|e| BusError::Setup(format!("group bucket: {e}")))?;
        let (membership_tx, membership_rx) = mpsc::channel(MEMBERSHIP_QUEUE);
        Ok(Nats {
            client,
            js,
            names,
            kv,
            membership_tx,
            membership_rx: Mutex::new(Some(membership_rx)),
            notes: Mutex::new(Some(notes)),
            batches: std::sync::atomic::AtomicU64::new(0),
            boot: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos()),
        })
    }

    /// A `Nats-Msg-Id` for a batch this host publishes: its name's digest, the bus's boot
    /// epoch and a count, unique per host run (the duplicate window then drops only a true
    /// republished copy).
    fn batch_id(&self, host: &str) -> String {
        let n = self
            .batches
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        format!("b.{}.{}.{n}", crate::naming::digest(host), self.boot)
    }

    fn connected(&self) -> bool {
        self.client.connection_state() == async_nats::connection::State::Connected
    }

    /// Starts publishing one envelope: fails at once while NATS is down, and within the
    /// publish timeout otherwise. Returns the acknowledgement still to wait for.
    async fn start_publish(
        &self,
        config: &BusConfig,
        envelope: &Envelope,
    ) -> Result<jetstream::context::PublishAckFuture, BusError> {
        self.start_publish_bytes(
            config,
            &envelope.to_zone,
            envelope.msg_id(),
            envelope.encode(),
        )
        .await
    }

    /// Starts publishing `payload` (one envelope or a batch) on `zone`'s subject with
    /// `Nats-Msg-Id` `msg_id`.
    async fn start_publish_bytes(
        &self,
        config: &BusConfig,
        zone: &str,
        msg_id: String,
        payload: Vec<u8>,
    ) -> Result<jetstream::context::PublishAckFuture, BusError> {
        if !self.connected() {
            return Err(BusError::Unavailable("NATS is not connected".into()));
        }
        let mut headers = async_nats::HeaderMap::new();
        headers.insert(async_nats::header::NATS_MESSAGE_ID, msg_id.as_str());
        let publish =
            self.js
                .publish_with_headers(self.names.zone_subject(zone), headers, payload.into());
        match tokio::time::timeout(config.publish_timeout, publish).await {
            Ok(Ok(ack)) => Ok(ack),
            Ok(Err(e)) => Err(BusError::Unavailable(e.to_string())),
            Err(_) => Err(BusError::Timeout),
        }
    }

    /// Publishes one envelope and waits for JetStream to store it.
    pub(crate) async fn publish(
        &self,
        config: &BusConfig,
        stats: &BusStats,
        envelope: &Envelope,
    ) -> Result<(), BusError> {
        let deadline = Instant::now() + config.publish_timeout;
        let ack = self.start_publish(config, envelope).await?;
        finish_publish(ack, deadline, stats).await
    }

    /// Publishes a transfer note on `host`'s own subject (plain NATS: no storage, no
    /// acknowledgement): fails at once while NATS is down, within the publish timeout otherwise.
    pub(crate) async fn publish_note(
        &self,
        config: &BusConfig,
        host: &str,
        envelope: &Envelope,
    ) -> Result<(), BusError> {
        if !self.connected() {
            return Err(BusError::Unavailable("NATS is not connected".into()));
        }
        let publish = self
            .client
            .publish(self.names.host_subject(host), envelope.encode().into());
        match tokio::time::timeout(config.publish_timeout, publish).await {
            Ok(Ok(())) => Ok(()),
            Ok(Err(e)) => Err(BusError::Unavailable(e.to_string())),
            Err(_) => Err(BusError::Timeout),
        }
    }

    /// The zones with envelopes in the stream, at most `limit`, within the publish timeout.
    pub(crate) async fn waiting_zones(
        &self,
        config: &BusConfig,
        limit: usize,
    ) -> Result<Vec<String>, BusError> {
        if !self.connected() {
            return Err(BusError::Unavailable("NATS is not connected".into()));
        }
        let list = async {
            let stream = ensure_stream(&self.js, &self.names, config).await?;
            let mut subjects = stream
                .info_with_subjects(format!("{}.*", self.names.subject_prefix))
                .await
                .map_err(|e| BusError::Unavailable(e.to_string()))?;
            let mut zones = Vec::new();
            while let Some(next) = subjects.next().await {
                let (subject, count) = next.map_err(|e| BusError::Unavailable(e.to_string()))?;
                let zone = subject
                    .strip_prefix(&self.names.subject_prefix)
                    .and_then(|rest| rest.strip_prefix('.'))
                    .and_then(crate::naming::unhex);
                if let (Some(zone), true) = (zone, count > 0) {
                    zones.push(zone);
                    if zones.len() >= limit {
                        break;
                    }
                }
            }
            Ok(zones)
        };
        tokio::time::timeout(config.publish_timeout, list)
            .await
            .unwrap_or(Err(BusError::Timeout))
    }

    pub(crate) fn membership(&self, group: &str, zone: &str, join: bool) -> Result<(), BusError> {
        self.membership_tx
            .try_send((group.to_string(), zone.to_string(), join))
            .map_err(|_| BusError::QueueFull)
    }

    /// The zone's durable consumer, made afresh. Whatever an earlier binding (a dead or fenced
    /// host, or this host before NATS went away) was handed and did not acknowledge stays in the
    /// work-queue stream, and a new consumer delivers everything still there from the start, in
    /// stream order. Re-binding the old consumer instead would hand out the envelopes after the
    /// pending ones at once and the pending ones only when their ack wait ran out: the zone,
    /// having applied the later ones, would then drop the earlier ones as duplicates, and they
    /// would be lost. Envelopes the zone already applied come again and its dedup table drops
    /// them.
    async fn consumer(
        &self,
        config: &BusConfig,
        zone: &str,
    ) -> Result<consumer::Consumer<consumer::pull::Config>, BusError> {
        let stream = ensure_stream(&self.js, &self.names, config).await?;
        let name = self.names.consumer(zone);
        match stream.delete_consumer(&name).await {
            Ok(_) => {}
            Err(e)
                if matches!(e.kind(), consumer_error::JetStream(ref j)
                    if j.error_code() == jetstream::ErrorCode::CONSUMER_NOT_FOUND) => {}
            Err(e) => {
                return Err(BusError::Unavailable(format!(
                    "replacing the consumer for {zone}: {e}"
                )))
            }
        }
        stream
            .get_or_create_consumer(
                &name,
                consumer::pull::Config {
                    durable_name: Some(name.clone()),
                    filter_subject: self.names.zone_subject(zone),
                    ack_policy: consumer::AckPolicy::Explicit,
                    ack_wait: config.ack_wait,
                    max_ack_pending: config.inbox_capacity as i64,
                    deliver_policy: consumer::DeliverPolicy::All,
                    ..Default::default()
                },
            )
            .await
            .map_err(|e| BusError::Unavailable(format!("consumer for {zone}: {e}")))
    }
}

async fn ensure_stream(
    js: &jetstream::Context,
    names: &Names,
    config: &BusConfig,
) -> Result<stream::Stream, BusError> {
    js.get_or_create_stream(stream::Config {
        name: names.stream.clone(),
        subjects: vec![format!("{}.*", names.subject_prefix)],
        // Work-queue retention: an envelope leaves the stream once its zone acknowledged it;
        // until then it waits, for at most `max_age`, within `max_bytes` (oldest dropped).
        retention: stream::RetentionPolicy::WorkQueue,
        max_age: config.max_age,
        max_bytes: config.max_bytes,
        discard: stream::DiscardPolicy::Old,
        duplicate_window: Duration::from_secs(120),
        storage: stream::StorageType::File,
        ..Default::default()
    })
    .await
    .map_err(|e| BusError::Setup(format!("stream {}: {e}", names.stream)))
}

async fn finish_publish(
    ack: jetstream::context::PublishAckFuture,
    deadline: Instant,
    stats: &BusStats,
) -> Result<(), BusError> {
    match tokio::time::timeout_at(deadline, ack.into_future()).await {
        Ok(Ok(ack)) => {
            if ack.duplicate {
                stats.note_duplicate();
            }
            Ok(())
        }
        Ok(Err(e)) => Err(BusError::Unavailable(e.to_string())),
        Err(_) => Err(BusError::Timeout),
    }
}

/// Starts the NATS bus's host-wide tasks: the publisher, its acknowledgement waiter, the
/// membership writer and the group watcher.
pub(crate) fn start(shared: Arc<Shared>, rx: mpsc::Receiver<Outgoing>) {
    let (acks_tx, acks_rx) = mpsc::channel(IN_FLIGHT);
    shared.rt.spawn(publisher(shared.clone(), rx, acks_tx));
    shared.rt.spawn(ack_waiter(shared.clone(), acks_rx));
    shared.rt.spawn(membership_writer(shared.clone()));
    shared.rt.spawn(host_notes(shared.clone()));
    let rt = shared.rt.clone();
    rt.spawn(group_watcher(shared));
}

/// Waits `backoff` (doubling it up to [`MAX_BACKOFF`]); false when the bus is shutting down.
async fn pause(shared: &Shared, backoff: &mut Duration) -> bool {
    let wait = *backoff;
    *backoff = (*backoff * 2).min(MAX_BACKOFF);
    tokio::select! {
        _ = shared.cancel.cancelled() => false,
        _ = tokio::time::sleep(wait) => true,
    }
}
