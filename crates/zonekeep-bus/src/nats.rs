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

use std::collections::VecDeque;
use std::future::IntoFuture;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_nats::jetstream::stream::ConsumerErrorKind as consumer_error;
use async_nats::jetstream::{self, consumer, kv, stream};
use futures_util::StreamExt;
use tokio::sync::mpsc;
use tokio::time::Instant;

use crate::handle::{envelope_for, expand, Backend, Outgoing, Shared, TransferDelivery};
use crate::inbox::{next_token, AckToken, PendingAck};
use crate::naming::Names;
use crate::{Body, BusConfig, BusError, BusStats, Delivered, Envelope, OutMessage, Undeliverable};

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
        let notes = client
            .subscribe(names.host_subject(&config.host))
            .await
            .map_err(|e| BusError::Setup(format!("host subject: {e}")))?;
        // The server registers the subscription when it reads it; until then a note to this
        // host is dropped (plain NATS keeps nothing). The flush's round trip returns once it has.
        client
            .flush()
            .await
            .map_err(|e| BusError::Setup(format!("host subject: {e}")))?;
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

/// One publish waiting for its acknowledgement, and whom to tell if it fails: the sender and
/// the notice of each envelope it carries.
struct InFlight {
    ack: jetstream::context::PublishAckFuture,
    deadline: Instant,
    carried: Vec<(String, Undeliverable)>,
}

/// Zone messages the publisher takes off the outgoing queue at once (each may expand to a
/// group's members): those for the same zone go out as one batch.
const TAKE_AT_ONCE: usize = 512;

/// The envelopes of one publish, for one zone, in order, with their senders' notices.
struct Pending {
    zone: String,
    envelopes: Vec<Envelope>,
    carried: Vec<(String, Undeliverable)>,
    bytes: usize,
}

async fn publisher(
    shared: Arc<Shared>,
    mut rx: mpsc::Receiver<Outgoing>,
    acks: mpsc::Sender<InFlight>,
) {
    let Backend::Nats(nats) = &shared.backend else {
        return;
    };
    let mut taken = Vec::with_capacity(TAKE_AT_ONCE);
    loop {
        let item = tokio::select! {
            _ = shared.cancel.cancelled() => return,
            item = rx.recv() => item,
        };
        let Some(Outgoing::Message(msg)) = item else {
            return;
        };
        // Whatever else is queued now joins this round: under load, sends for the same zone
        // leave as one batch; alone, a send leaves at once, as itself.
        taken.push(msg);
        while taken.len() < TAKE_AT_ONCE {
            match rx.try_recv() {
                Ok(Outgoing::Message(m)) => taken.push(m),
                Err(_) => break,
            }
        }
        for p in gather(&shared, taken.drain(..)) {
            let deadline = Instant::now() + shared.config.publish_timeout;
            let started = match p.envelopes.as_slice() {
                [one] => nats.start_publish(&shared.config, one).await,
                many => {
                    let id = nats.batch_id(&shared.config.host);
                    let payload = crate::batch::encode_batch(many);
                    nats.start_publish_bytes(&shared.config, &p.zone, id, payload)
                        .await
                }
            };
            match started {
                Ok(ack) => {
                    shared.stats.note_published();
                    let inflight = InFlight {
                        ack,
                        deadline,
                        carried: p.carried,
                    };
                    if acks.send(inflight).await.is_err() {
                        return;
                    }
                }
                Err(reason) => {
                    for (from, notice) in p.carried {
                        let notice = Undeliverable {
                            reason: reason.clone(),
                            ..notice
                        };
                        shared.registry.notify(&from, notice);
                    }
                }
            }
        }
    }
}

/// The envelopes of `messages` grouped by receiving zone (in order within each zone, zones in
/// the order they first appear), each group cut to what one batch holds.
fn gather(shared: &Shared, messages: impl Iterator<Item = OutMessage>) -> Vec<Pending> {
    let mut out: Vec<Pending> = Vec::new();
    let mut open: std::collections::HashMap<String, usize> = std::collections::HashMap::new();
    for msg in messages {
        for to_zone in expand(shared, &msg.to) {
            let envelope = envelope_for(&msg, to_zone);
            let size = envelope.encoded_len() + 4;
            let notice = Undeliverable {
                id: msg.id.clone(),
                to: msg.to.clone(),
                topic: msg.topic,
                reason: BusError::Closed,
            };
            let slot = open.get(&envelope.to_zone).copied().filter(|&i| {
                out[i].envelopes.len() < crate::batch::MAX_BATCH
                    && out[i].bytes + size <= crate::batch::MAX_BATCH_BYTES
            });
            let i = match slot {
                Some(i) => i,
                None => {
                    open.insert(envelope.to_zone.clone(), out.len());
                    out.push(Pending {
                        zone: envelope.to_zone.clone(),
                        envelopes: Vec::new(),
                        carried: Vec::new(),
                        bytes: 3,
                    });
                    out.len() - 1
                }
            };
            out[i].bytes += size;
            out[i].envelopes.push(envelope);
            out[i].carried.push((msg.from.clone(), notice));
        }
    }
    out
}

async fn ack_waiter(shared: Arc<Shared>, mut rx: mpsc::Receiver<InFlight>) {
    while let Some(inflight) = rx.recv().await {
        match finish_publish(inflight.ack, inflight.deadline, &shared.stats).await {
            Ok(()) => {
                for _ in &inflight.carried {
                    shared.stats.note_sent();
                }
            }
            Err(reason) => {
                for (from, notice) in inflight.carried {
                    let notice = Undeliverable {
                        reason: reason.clone(),
                        ..notice
                    };
                    shared.registry.notify(&from, notice);
                }
            }
        }
    }
}

/// Hands the transfer notes sent to this host's subject to its transfer channel. The
/// subscription outlives reconnections (the client subscribes again by itself); a note that
/// is no transfer envelope is dropped and counted, and one that finds the channel full is
/// counted as `receiver_full` (its move is decided by the record all the same).
async fn host_notes(shared: Arc<Shared>) {
    let Backend::Nats(nats) = &shared.backend else {
        return;
    };
    let Some(mut notes) = nats.notes.lock().unwrap_or_else(|p| p.into_inner()).take() else {
        return;
    };
    loop {
        let msg = tokio::select! {
            _ = shared.cancel.cancelled() => return,
            msg = notes.next() => match msg { Some(m) => m, None => return },
        };
        let (to_zone, from, bytes) = match Envelope::decode(&msg.payload) {
            Ok(Envelope {
                to_zone,
                from,
                body: Body::Transfer(bytes),
                ..
            }) => (to_zone, from, bytes),
            other => {
                if let Err(e) = &other {
                    tracing::warn!(error = %e, "bus: dropped a host note that is no envelope");
                }
                shared.stats.note_decode_error();
                continue;
            }
        };
        let delivery = TransferDelivery {
            to_zone: to_zone.clone(),
            from,
            bytes,
        };
        if shared.transfers_tx.try_send(delivery).is_err() {
            tracing::warn!(zone = %to_zone, "bus: this host's transfer channel is full; a note was dropped");
            shared
                .stats
                .note_undeliverable(&BusError::ReceiverFull(to_zone));
        }
    }
}

/// Writes membership changes to the bucket in order, retrying each until NATS takes it (a
/// change made while NATS is down lands when it is back).
async fn membership_writer(shared: Arc<Shared>) {
    let Backend::Nats(nats) = &shared.backend else {
        return;
    };
    let Some(mut rx) = nats
        .membership_rx
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .take()
    else {
        return;
    };
    loop {
        let item = tokio::select! {
            _ = shared.cancel.cancelled() => return,
            item = rx.recv() => item,
        };
        let Some((group, zone, join)) = item else {
            return;
        };
        let key = Names::group_key(&group, &zone);
        let mut backoff = Duration::from_millis(50);
        loop {
            let write = async {
                if join {
                    nats.kv
                        .put(&key, "1".into())
                        .await
                        .map(|_| ())
                        .map_err(|e| e.to_string())
                } else {
                    nats.kv.delete(&key).await.map_err(|e| e.to_string())
                }
            };
            match tokio::time::timeout(shared.config.publish_timeout, write).await {
                Ok(Ok(())) => break,
                Ok(Err(e)) => tracing::debug!(error = %e, "bus: group change not written yet"),
                Err(_) => tracing::debug!("bus: group change timed out"),
            }
            if !pause(&shared, &mut backoff).await {
                return;
            }
        }
    }
}

/// Keeps this host's group map equal to the bucket.
async fn group_watcher(shared: Arc<Shared>) {
    let Backend::Nats(nats) = &shared.backend else {
        return;
    };
    let mut backoff = Duration::from_millis(50);
    loop {
        match nats.kv.watch_with_history(">").await {
            Ok(mut watch) => loop {
                let next = tokio::select! {
                    _ = shared.cancel.cancelled() => return,
                    next = watch.next() => next,
                };
                match next {
                    Some(Ok(entry)) => {
                        backoff = Duration::from_millis(50);
                        if let Some((group, zone)) = Names::parse_group_key(&entry.key) {
                            match entry.operation {
                                kv::Operation::Put => shared.groups.join(&group, &zone),
                                kv::Operation::Delete | kv::Operation::Purge => {
                                    shared.groups.leave(&group, &zone)
                                }
                            }
                        }
                    }
                    Some(Err(e)) => {
                        tracing::debug!(error = %e, "bus: group watch broke; watching again");
                        break;
                    }
                    None => break,
                }
            },
            Err(e) => tracing::debug!(error = %e, "bus: cannot watch groups yet"),
        }
        if !pause(&shared, &mut backoff).await {
            return;
        }
    }
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

/// Binds `zone`'s durable consumer on this host and delivers what it pulls into the zone's
/// inbox until the zone unbinds. Re-binds by itself after NATS comes back.
pub(crate) fn consume(shared: Arc<Shared>, zone: String) {
    let Some((tx, pending, counter, cancel)) = shared.registry.consumer_parts(&zone) else {
        return;
    };
    let rt = shared.rt.clone();
    rt.spawn(async move {
        let Backend::Nats(nats) = &shared.backend else {
            return;
        };
        let mut backoff = Duration::from_millis(50);
        loop {
            let messages = tokio::select! {
                _ = cancel.cancelled() => return,
                m = async {
                    let consumer = nats.consumer(&shared.config, &zone).await?;
                    consumer
                        .messages()
                        .await
                        .map_err(|e| BusError::Unavailable(e.to_string()))
                } => m,
            };
            match messages {
                Ok(mut messages) => loop {
                    let next = tokio::select! {
                        _ = cancel.cancelled() => return,
                        next = messages.next() => next,
                    };
                    match next {
                        Some(Ok(msg)) => {
                            backoff = Duration::from_millis(50);
                            let delivered = deliver(&shared, &zone, msg, &pending, &counter);
                            for d in delivered.await {
                                tokio::select! {
                                    _ = cancel.cancelled() => return,
                                    sent = tx.send(d) => if sent.is_err() { return },
                                }
                            }
                        }
                        Some(Err(e)) => {
                            tracing::debug!(zone = %zone, error = %e, "bus: consumer broke; binding again");
                            break;
                        }
                        None => break,
                    }
                },
                Err(e) => tracing::debug!(zone = %zone, error = %e, "bus: cannot bind consumer yet"),
            }
            let wait = backoff;
            backoff = (backoff * 2).min(MAX_BACKOFF);
            tokio::select! {
                _ = cancel.cancelled() => return,
                _ = tokio::time::sleep(wait) => {}
            }
        }
    });
}

/// Turns one pulled message into deliveries for the zone (one envelope, or a batch's, in
/// order), remembering its acknowledgement under the last one's token, so it is acknowledged
/// once the zone applied all of them; or handles it here: a transfer goes to the host's
/// transfer channel and is acknowledged at once; bytes that are no envelope for this zone are
/// terminated and counted.
async fn deliver(
    shared: &Shared,
    zone: &str,
    msg: jetstream::Message,
    pending: &Mutex<VecDeque<(AckToken, PendingAck)>>,
    counter: &std::sync::atomic::AtomicU64,
) -> Vec<Delivered> {
    let envelopes = match crate::batch::decode_any(&msg.payload) {
        Ok(envelopes) if envelopes.iter().all(|e| e.to_zone == zone) => envelopes,
        other => {
            if let Err(e) = &other {
                tracing::warn!(zone = %zone, error = %e, "bus: dropped bytes that are no envelope");
            }
            shared.stats.note_decode_error();
            let _ = msg.ack_with(jetstream::AckKind::Term).await;
            return Vec::new();
        }
    };
    let mut out = Vec::with_capacity(envelopes.len());
    for envelope in envelopes {
        match envelope.body {
            Body::Transfer(bytes) => {
                // Only ever alone (a batch carries zone messages only).
                let delivery = TransferDelivery {
                    to_zone: envelope.to_zone,
                    from: envelope.from,
                    bytes,
                };
                if shared.transfers_tx.send(delivery).await.is_ok() {
                    let _ = msg.ack().await;
                }
                return Vec::new();
            }
            Body::Message { .. } => out.push(Delivered {
                envelope,
                token: next_token(counter),
            }),
        }
    }
    if let Some(last) = out.last() {
        let mut pending = pending.lock().unwrap_or_else(|p| p.into_inner());
        // Redeliveries of envelopes still waiting for a save add entries; past four times
        // the inbox the oldest are forgotten (NATS redelivers them again if need be).
        while pending.len() >= 4 * shared.config.inbox_capacity.max(1) {
            pending.pop_front();
        }
        pending.push_back((last.token, msg));
    }
    out
}
