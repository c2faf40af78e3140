//! [`BusHandle`]: what the host holds: send, bind zones, acknowledge, transfers.

use std::sync::Arc;
use std::time::Duration;

use tokio::runtime::Handle;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::envelope::{valid_name, MAX_MESSAGE_PAYLOAD, MAX_TRANSFER_BYTES};
use crate::groups::Groups;
use crate::inbox::Registry;
use crate::nats::Nats;
use crate::{
    AckToken, Body, BusError, BusStats, Envelope, EnvelopeId, Origin, Target, Undeliverable,
    ZoneInbox,
};

/// The bus's limits and NATS settings.
#[derive(Debug, Clone)]
pub struct BusConfig {
    /// This host's name on the bus: the sender of transfers and admin messages it originates.
    pub host: String,
    /// Envelopes waiting to leave this host (sends past it fail as `QueueFull`).
    pub outgoing_capacity: usize,
    /// Envelopes waiting per zone on this host; over NATS, also the consumer's
    /// `max_ack_pending`, so a zone that does not keep up stops the pulling, not the stream.
    pub inbox_capacity: usize,
    /// How long a publish may wait for NATS's acknowledgement before it is undeliverable.
    pub publish_timeout: Duration,
    /// How long NATS waits for a delivered envelope's acknowledgement before redelivering it;
    /// longer than the receiving zones' save interval (they acknowledge after a committed save).
    pub ack_wait: Duration,
    /// How long an envelope may wait in the stream for its zone.
    pub max_age: Duration,
    /// The most bytes the stream keeps (the oldest go first).
    pub max_bytes: i64,
    /// The NATS namespace: stream `<NS>_ZONES`, subjects `<ns>.zone.*`, bucket `<ns>_groups`.
    pub namespace: String,
    /// Transfers delivered to this host and not yet taken by it.
    pub transfer_capacity: usize,
}

impl Default for BusConfig {
    fn default() -> Self {
        BusConfig {
            host: "host".into(),
            outgoing_capacity: 65_536,
            inbox_capacity: 1024,
            publish_timeout: Duration::from_secs(2),
            ack_wait: Duration::from_secs(30),
            max_age: Duration::from_secs(3600),
            max_bytes: 1 << 30,
            namespace: "zk".into(),
            transfer_capacity: 1024,
        }
    }
}

/// Where a zone lives, as the host knows it. Used by the in-process bus for a zone not bound
/// on this host.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Location {
    /// This host runs it or has just started it: envelopes wait in its inbox until it binds.
    Here,
    /// Another host owns it.
    Elsewhere,
    /// No host runs it and this host cannot start it.
    Unknown,
    /// Not running here, but the host may know it (a dormant zone, or one another host owns):
    /// envelopes wait for it, bounded, until the host wakes it here
    /// ([`BusHandle::waiting_zones`]) or refuses them ([`BusHandle::refuse_waiting`]).
    Asleep,
}

/// The host's answer to "where is this zone?". Called on the bus's task, never on a
/// simulation thread; it must not block (start a dormant zone in the background and answer
/// [`Location::Here`]).
pub trait ZoneLocator: Send + Sync + 'static {
    /// Where `zone` is; may start it on this host.
    fn locate(&self, zone: &str) -> Location;
}

/// A zone message leaving a zone (or the operator) of this host.
#[derive(Debug, Clone)]
pub struct OutMessage {
    /// The message id.
    pub id: EnvelopeId,
    /// Who sends it.
    pub origin: Origin,
    /// The sending zone's id (for admin messages, the host's name).
    pub from: String,
    /// One zone or a group.
    pub to: Target,
    /// The topic.
    pub topic: u16,
    /// At most [`MAX_MESSAGE_PAYLOAD`] bytes.
    pub payload: Vec<u8>,
    /// Sent with `to_parent`.
    pub via_parent: bool,
}

/// A transfer delivered to a zone this host runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TransferDelivery {
    /// The receiving zone.
    pub to_zone: String,
    /// The sender's name (a host's name).
    pub from: String,
    /// The transfer record, as sent.
    pub bytes: Vec<u8>,
}

pub(crate) enum Outgoing {
    Message(OutMessage),
}

pub(crate) enum Backend {
    Local(Arc<dyn ZoneLocator>),
    Nats(Box<Nats>),
}

pub(crate) struct Shared {
    pub(crate) config: BusConfig,
    pub(crate) stats: Arc<BusStats>,
    pub(crate) registry: Registry,
    pub(crate) groups: Groups,
    pub(crate) backend: Backend,
    pub(crate) rt: Handle,
    pub(crate) cancel: CancellationToken,
    pub(crate) transfers_tx: mpsc::Sender<TransferDelivery>,
    transfers_rx: std::sync::Mutex<Option<mpsc::Receiver<TransferDelivery>>>,
    outgoing: mpsc::Sender<Outgoing>,
    seq: std::sync::atomic::AtomicU64,
    epoch: u64,
}

/// One host's bus: in process (no `--bus`) or over NATS JetStream. Cheap to clone; every
/// method a simulation thread calls returns at once.
#[derive(Clone)]
pub struct BusHandle {
    pub(crate) shared: Arc<Shared>,
}

impl std::fmt::Debug for BusHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BusHandle")
            .field("kind", &self.kind())
            .finish_non_exhaustive()
    }
}

impl BusHandle {
    /// An in-process bus, for a host without `--bus`: envelopes go straight into the receiving
    /// zone's inbox on this host; a zone owned elsewhere is [`BusError::NoBus`]. Must be called
    /// inside a tokio runtime.
    pub fn local(config: BusConfig, locator: Arc<dyn ZoneLocator>) -> Result<Self, BusError> {
        let rt = Handle::try_current().map_err(|e| BusError::Setup(e.to_string()))?;
        let (handle, rx) = Self::build(config, Backend::Local(locator), rt);
        handle.shared.stats.set_connected(true);
        let shared = handle.shared.clone();
        handle.shared.rt.spawn(local_dispatch(shared, rx));
        Ok(handle)
    }

    /// A bus over NATS JetStream at `url`: creates (or binds) the stream and the group bucket
    /// of `config.namespace`. Fails if NATS cannot be reached now; once up, the client
    /// reconnects by itself and sends made while it is down are undeliverable, not queued.
    pub async fn connect(url: &str, config: BusConfig) -> Result<Self, BusError> {
        let stats = Arc::new(BusStats::default());
        let nats = Nats::connect(url, &config, stats.clone()).await?;
        let rt = Handle::current();
        let (handle, rx) = Self::build_with(config, Backend::Nats(Box::new(nats)), rt, stats);
        crate::nats::start(handle.shared.clone(), rx);
        Ok(handle)
    }

    fn build(config: BusConfig, backend: Backend, rt: Handle) -> (Self, mpsc::Receiver<Outgoing>) {
        Self::build_with(config, backend, rt, Arc::new(BusStats::default()))
    }

    fn build_with(
        config: BusConfig,
        backend: Backend,
        rt: Handle,
        stats: Arc<BusStats>,
    ) -> (Self, mpsc::Receiver<Outgoing>) {
        let (outgoing, rx) = mpsc::channel(config.outgoing_capacity.max(1));
        let (transfers_tx, transfers_rx) = mpsc::channel(config.transfer_capacity.max(1));
        let epoch = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(1);
        let shared = Arc::new(Shared {
            registry: Registry::new(config.inbox_capacity.max(1), stats.clone()),
            config,
            stats,
            groups: Groups::default(),
            backend,
            rt,
            cancel: CancellationToken::new(),
            transfers_tx,
            transfers_rx: std::sync::Mutex::new(Some(transfers_rx)),
            outgoing,
            seq: std::sync::atomic::AtomicU64::new(1),
            epoch,
        });
        (BusHandle { shared }, rx)
    }

    /// `"local"` or `"nats"`.
    pub fn kind(&self) -> &'static str {
        match self.shared.backend {
            Backend::Local(_) => "local",
            Backend::Nats(_) => "nats",
        }
    }

    /// The bus's counters.
    pub fn stats(&self) -> &BusStats {
        &self.shared.stats
    }

    /// Queues a zone message without waiting. A full outgoing queue refuses it at once
    /// ([`BusError::QueueFull`], counted); later failures reach the sending zone's inbox as
    /// [`Undeliverable`] notices.
    pub fn send(&self, msg: OutMessage) -> Result<(), BusError> {
        check_message(&msg)?;
        match self.shared.outgoing.try_send(Outgoing::Message(msg)) {
            Ok(()) => Ok(()),
            Err(mpsc::error::TrySendError::Full(_)) => {
                self.shared.stats.note_undeliverable(&BusError::QueueFull);
                Err(BusError::QueueFull)
            }
            Err(mpsc::error::TrySendError::Closed(_)) => Err(BusError::Closed),
        }
    }

    /// Delivers a message and waits (bounded by the publish timeout) until the bus has it:
    /// for callers that answer someone, like the admin API.
    pub async fn send_now(&self, msg: OutMessage) -> Result<(), BusError> {
        check_message(&msg)?;
        let targets = self.expand(&msg.to);
        for to_zone in targets {
            let envelope = envelope_for(&msg, to_zone);
            self.deliver_one(envelope).await?;
        }
        Ok(())
    }

    /// A fresh id for a message this host originates (admin input, transfers): sender
    /// `<prefix>:<host>`, the bus's boot epoch, and a sequence counted from 1.
    pub fn next_id(&self, prefix: &str) -> EnvelopeId {
        EnvelopeId {
            sender: format!("{prefix}:{}", self.shared.config.host),
            epoch: self.shared.epoch,
            seq: self
                .shared
                .seq
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed),
        }
    }

    /// This host's name on the bus.
    pub fn host(&self) -> &str {
        &self.shared.config.host
    }

    /// Sends a transfer note about `to_zone` to `host` (that zone's owner, or the source zone's
    /// owner for an answer), waiting at most the publish timeout for the bus to take it. The
    /// bytes are opaque to the bus; the receiving host takes them from
    /// [`BusHandle::take_transfer_deliveries`].
    ///
    /// Over NATS a note goes to the host's own subject, outside the stream: it reaches the host
    /// at once, whether or not the zone runs there yet (a zone's consumer is made only when the
    /// zone starts), and it is not kept for a host that is away. Transfers do not rely on notes
    /// arriving: the record in the store decides, and the source reads it while it waits. In
    /// process, only this host can be named ([`BusError::NoBus`] otherwise).
    pub async fn send_transfer(
        &self,
        host: &str,
        to_zone: &str,
        bytes: Vec<u8>,
    ) -> Result<(), BusError> {
        if !valid_name(to_zone) || !valid_name(host) {
            return Err(BusError::Invalid("zone id or host name"));
        }
        if bytes.len() > MAX_TRANSFER_BYTES {
            return Err(BusError::Invalid("transfer too large"));
        }
        let result = match &self.shared.backend {
            Backend::Local(_) if host != self.shared.config.host => Err(BusError::NoBus),
            Backend::Local(_) => self
                .shared
                .transfers_tx
                .try_send(TransferDelivery {
                    to_zone: to_zone.to_string(),
                    from: self.shared.config.host.clone(),
                    bytes,
                })
                .map_err(|_| BusError::ReceiverFull(to_zone.to_string())),
            Backend::Nats(nats) => {
                let envelope = Envelope {
                    id: self.next_id("host"),
                    origin: Origin::Host,
                    from: self.shared.config.host.clone(),
                    to_zone: to_zone.to_string(),
                    body: Body::Transfer(bytes),
                };
                nats.publish_note(&self.shared.config, host, &envelope)
                    .await
            }
        };
        match &result {
            Ok(()) => self.shared.stats.note_sent(),
            Err(e) => self.shared.stats.note_undeliverable(e),
        }
        result
    }

    /// The transfers delivered to zones this host runs, in arrival order per sender. Given
    /// once: the second call returns `None`.
    pub fn take_transfer_deliveries(&self) -> Option<mpsc::Receiver<TransferDelivery>> {
        self.shared
            .transfers_rx
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take()
    }

    async fn deliver_one(&self, envelope: Envelope) -> Result<(), BusError> {
        let result = match &self.shared.backend {
            Backend::Local(locator) => local_deliver(&self.shared, locator.as_ref(), envelope),
            Backend::Nats(nats) => {
                nats.publish(&self.shared.config, &self.shared.stats, &envelope)
                    .await
            }
        };
        match &result {
            Ok(()) => self.shared.stats.note_sent(),
            Err(e) => self.shared.stats.note_undeliverable(e),
        }
        result
    }

    /// Records that `zone` joined `group`: this host's sends see it at once; over NATS the
    /// fleet's bucket is updated in the background (retried until NATS takes it).
    pub fn join_group(&self, zone: &str, group: &str) -> Result<(), BusError> {
        if !valid_name(zone) || !valid_name(group) {
            return Err(BusError::Invalid("zone or group name"));
        }
        self.shared.groups.join(group, zone);
        if let Backend::Nats(nats) = &self.shared.backend {
            nats.membership(group, zone, true)?;
        }
        Ok(())
    }

    /// Records that `zone` left `group`.
    pub fn leave_group(&self, zone: &str, group: &str) -> Result<(), BusError> {
        if !valid_name(zone) || !valid_name(group) {
            return Err(BusError::Invalid("zone or group name"));
        }
        self.shared.groups.leave(group, zone);
        if let Backend::Nats(nats) = &self.shared.backend {
            nats.membership(group, zone, false)?;
        }
        Ok(())
    }

    /// The members of `group` as this host knows them now, sorted.
    pub fn group_members(&self, group: &str) -> Vec<String> {
        self.shared.groups.members(group)
    }

    /// Starts delivering `zone`'s envelopes to this host (the zone started here): in process,
    /// whatever waited for it; over NATS, the zone's durable consumer is bound, so envelopes
    /// left unacknowledged by its previous host are redelivered here.
    pub fn bind_zone(&self, zone: &str) -> Result<ZoneInbox, BusError> {
        if !valid_name(zone) {
            return Err(BusError::Invalid("zone id"));
        }
        let inbox = self.shared.registry.bind(zone)?;
        if let Backend::Nats(_) = &self.shared.backend {
            crate::nats::consume(self.shared.clone(), zone.to_string());
        }
        Ok(inbox)
    }

    /// Stops delivering to the zone here (it unloaded). Over NATS, what it had not yet
    /// acknowledged is redelivered to its next owner; in process, what waits in its inbox stays
    /// for its next start on this host.
    pub fn unbind_zone(&self, inbox: ZoneInbox) {
        let keep = matches!(self.shared.backend, Backend::Local(_));
        self.shared.registry.unbind(inbox, keep);
    }

    /// Acknowledges every envelope delivered to `zone` up to `token`: call it once the zone's
    /// state that applied them is safe (after a committed save; at once for a zone without
    /// persistence). Returns at once; the acknowledgements go out in the background.
    pub fn ack_upto(&self, zone: &str, token: AckToken) {
        let msgs = self.shared.registry.take_acks(zone, token);
        if msgs.is_empty() {
            return;
        }
        self.shared.rt.spawn(async move {
            for msg in msgs {
                if let Err(e) = msg.ack().await {
                    tracing::debug!(error = %e, "bus ack failed; NATS will redeliver");
                }
            }
        });
    }

    /// Zones that are not bound on this host and have messages waiting for them, at most
    /// `limit`: in process, those parked as [`Location::Asleep`]; over NATS, those with envelopes
    /// in the stream (which includes zones other hosts run and have not acknowledged yet). The
    /// host wakes the dormant ones among them and refuses the rest.
    pub async fn waiting_zones(&self, limit: usize) -> Result<Vec<String>, BusError> {
        match &self.shared.backend {
            Backend::Local(_) => Ok(self.shared.registry.parked(limit)),
            Backend::Nats(nats) => {
                let mut zones = nats.waiting_zones(&self.shared.config, limit).await?;
                zones.retain(|z| !self.shared.registry.is_bound(z));
                Ok(zones)
            }
        }
    }

    /// Refuses what waits for `zone` on this host in process (it is no zone this host can
    /// wake): each sender hears `reason`. Over NATS nothing is held here: the stream keeps
    /// the envelopes (for at most its age bound) in case the zone is made later.
    pub fn refuse_waiting(&self, zone: &str, reason: BusError) {
        if let Backend::Local(_) = &self.shared.backend {
            for envelope in self.shared.registry.unpark(zone) {
                let Body::Message { topic, .. } = envelope.body else {
                    continue;
                };
                self.shared.registry.notify(
                    &envelope.from,
                    Undeliverable {
                        id: envelope.id,
                        to: Target::Zone(envelope.to_zone),
                        topic,
                        reason: reason.clone(),
                    },
                );
            }
        }
    }

    /// Stops every task of the bus.
    pub fn shutdown(&self) {
        self.shared.cancel.cancel();
        self.shared.registry.cancel_all();
    }

    fn expand(&self, to: &Target) -> Vec<String> {
        expand(&self.shared, to)
    }
}

pub(crate) fn expand(shared: &Shared, to: &Target) -> Vec<String> {
    match to {
        Target::Zone(zone) => vec![zone.clone()],
        Target::Group(group) => shared.groups.members(group),
    }
}

pub(crate) fn envelope_for(msg: &OutMessage, to_zone: String) -> Envelope {
    Envelope {
        id: msg.id.clone(),
        origin: msg.origin,
        from: msg.from.clone(),
        to_zone,
        body: Body::Message {
            topic: msg.topic,
            payload: msg.payload.clone(),
            via_parent: msg.via_parent,
        },
    }
}

fn check_message(msg: &OutMessage) -> Result<(), BusError> {
    let to_ok = match &msg.to {
        Target::Zone(z) | Target::Group(z) => valid_name(z),
    };
    if !to_ok || !valid_name(&msg.from) || !valid_name(&msg.id.sender) {
        return Err(BusError::Invalid("zone, group or sender name"));
    }
    if msg.payload.len() > MAX_MESSAGE_PAYLOAD {
        return Err(BusError::Invalid("payload over 16 KiB"));
    }
    Ok(())
}

/// The in-process delivery of one envelope.
fn local_deliver(
    shared: &Shared,
    locator: &dyn ZoneLocator,
    envelope: Envelope,
) -> Result<(), BusError> {
    let zone = envelope.to_zone.clone();
    let here = shared.registry.is_bound(&zone)
        || match locator.locate(&zone) {
            Location::Here => true,
            Location::Elsewhere => return Err(BusError::NoBus),
            Location::Unknown => return Err(BusError::UnknownZone(zone)),
            Location::Asleep if matches!(envelope.body, Body::Message { .. }) => {
                return shared.registry.park(envelope)
            }
            Location::Asleep => return Err(BusError::UnknownZone(zone)),
        };
    debug_assert!(here);
    deliver_here(shared, envelope)
}

/// Puts an envelope into the inbox of a zone this host runs or is starting, or hands a transfer
/// to the host's channel.
fn deliver_here(shared: &Shared, envelope: Envelope) -> Result<(), BusError> {
    let zone = envelope.to_zone.clone();
    match envelope.body {
        Body::Message { .. } => shared.registry.try_deliver(envelope, true),
        Body::Transfer(bytes) => shared
            .transfers_tx
            .try_send(TransferDelivery {
                to_zone: zone.clone(),
                from: envelope.from,
                bytes,
            })
            .map_err(|_| BusError::ReceiverFull(zone)),
    }
}

/// The in-process bus's task: takes sends in order and puts each envelope into its zone's
/// inbox, reporting failures to the sender.
async fn local_dispatch(shared: Arc<Shared>, mut rx: mpsc::Receiver<Outgoing>) {
    let Backend::Local(locator) = &shared.backend else {
        return;
    };
    let locator = locator.clone();
    loop {
        let item = tokio::select! {
            _ = shared.cancel.cancelled() => return,
            item = rx.recv() => item,
        };
        let Some(Outgoing::Message(msg)) = item else {
            return;
        };
        for to_zone in expand(&shared, &msg.to) {
            match local_deliver(&shared, locator.as_ref(), envelope_for(&msg, to_zone)) {
                Ok(()) => shared.stats.note_sent(),
                Err(reason) => shared.registry.notify(
                    &msg.from,
                    Undeliverable {
                        id: msg.id.clone(),
                        to: msg.to.clone(),
                        topic: msg.topic,
                        reason,
                    },
                ),
            }
        }
    }
}
