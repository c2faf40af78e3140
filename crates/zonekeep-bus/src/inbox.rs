//! The zones this host runs, as the bus sees them: one bounded inbox per zone, drained by the
//! zone's simulation thread without waiting, and the acknowledgements still owed to NATS.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::{BusError, BusStats, Envelope, EnvelopeId, Target};

/// Names one delivered envelope within a zone's binding, in delivery order. The host acknowledges
/// everything up to a token at once ([`BusHandle::ack_upto`](crate::BusHandle::ack_upto)).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct AckToken(pub u64);

/// One envelope delivered to a zone on this host.
#[derive(Debug, Clone)]
pub struct Delivered {
    /// The envelope (its body is a [`Body::Message`](crate::Body::Message)).
    pub envelope: Envelope,
    /// Acknowledge it with this once the zone's state that applied it is safe.
    pub token: AckToken,
}

/// A message a zone on this host sent that the bus could not deliver.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Undeliverable {
    /// The message's id.
    pub id: EnvelopeId,
    /// Where it was going (the group, for a group send).
    pub to: Target,
    /// Its topic.
    pub topic: u16,
    /// Why.
    pub reason: BusError,
}

/// A zone's end of the bus, held by its simulation thread. Every call returns at once.
#[derive(Debug)]
pub struct ZoneInbox {
    zone: String,
    messages: mpsc::Receiver<Delivered>,
    notices: mpsc::Receiver<Undeliverable>,
    held: Option<Delivered>,
}

impl ZoneInbox {
    /// The zone this inbox delivers to.
    pub fn zone(&self) -> &str {
        &self.zone
    }

    /// The next envelope for the zone, if one is waiting.
    pub fn next_message(&mut self) -> Option<Delivered> {
        self.held.take().or_else(|| self.messages.try_recv().ok())
    }

    /// Waits for the next envelope (for tasks and tests; a simulation thread uses
    /// [`ZoneInbox::next_message`]). `None` once the bus dropped the zone's slot.
    pub async fn recv_message(&mut self) -> Option<Delivered> {
        match self.held.take() {
            Some(held) => Some(held),
            None => self.messages.recv().await,
        }
    }

    /// Waits for the next undeliverable report (for tasks and tests).
    pub async fn recv_notice(&mut self) -> Option<Undeliverable> {
        self.notices.recv().await
    }

    /// Puts back an envelope the zone could not take yet (its own queue was full): it is the
    /// next one [`ZoneInbox::next_message`] returns, so order is kept and nothing is dropped.
    pub fn hold(&mut self, delivered: Delivered) {
        self.held = Some(delivered);
    }

    /// The next report of a message this zone sent that could not be delivered.
    pub fn next_notice(&mut self) -> Option<Undeliverable> {
        self.notices.try_recv().ok()
    }
}

/// A NATS message waiting for its acknowledgement.
pub(crate) type PendingAck = async_nats::jetstream::Message;

/// Zones not running on this host that may have envelopes waiting for them at once (in
/// process), each within its inbox's bound.
pub const MAX_PARKED: usize = 1024;

/// One zone's slot.
pub(crate) struct Slot {
    pub(crate) messages_tx: mpsc::Sender<Delivered>,
    messages_rx: Option<mpsc::Receiver<Delivered>>,
    notices_tx: mpsc::Sender<Undeliverable>,
    notices_rx: Option<mpsc::Receiver<Undeliverable>>,
    held: Option<Delivered>,
    /// Whether a simulation thread holds the inbox now.
    pub(crate) bound: bool,
    /// Stops the binding's NATS consumer task.
    pub(crate) cancel: Option<CancellationToken>,
    /// Delivered but not yet acknowledged, oldest first.
    pub(crate) pending: Arc<Mutex<VecDeque<(AckToken, PendingAck)>>>,
    pub(crate) next_token: Arc<AtomicU64>,
}

impl Slot {
    /// Envelopes in the inbox's channel.
    fn waiting(&self) -> usize {
        self.messages_tx.max_capacity() - self.messages_tx.capacity()
    }
}

/// The slots of every zone the bus knows on this host.
pub(crate) struct Registry {
    slots: Mutex<HashMap<String, Slot>>,
    capacity: usize,
    stats: Arc<BusStats>,
}

impl Registry {
    pub(crate) fn new(capacity: usize, stats: Arc<BusStats>) -> Self {
        Registry {
            slots: Mutex::new(HashMap::new()),
            capacity,
            stats,
        }
    }

    pub(crate) fn lock(&self) -> MutexGuard<'_, HashMap<String, Slot>> {
        // A poisoned lock only means another thread panicked mid-update of plain maps; the
        // data is still consistent enough to keep delivering.
        self.slots.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn new_slot(&self) -> Slot {
        let (messages_tx, messages_rx) = mpsc::channel(self.capacity);
        let (notices_tx, notices_rx) = mpsc::channel(self.capacity);
        Slot {
            messages_tx,
            messages_rx: Some(messages_rx),
            notices_tx,
            notices_rx: Some(notices_rx),
            held: None,
            bound: false,
            cancel: None,
            pending: Arc::new(Mutex::new(VecDeque::new())),
            next_token: Arc::new(AtomicU64::new(1)),
        }
    }

    /// Hands the zone's inbox to its simulation thread. Envelopes that waited for the zone
    /// while it was not bound (in process) are in it.
    pub(crate) fn bind(&self, zone: &str) -> Result<ZoneInbox, BusError> {
        let mut slots = self.lock();
        let slot = slots
            .entry(zone.to_string())
            .or_insert_with(|| self.new_slot());
        if slot.bound {
            return Err(BusError::Invalid("zone is already bound on this host"));
        }
        let (Some(messages), Some(notices)) = (slot.messages_rx.take(), slot.notices_rx.take())
        else {
            return Err(BusError::Invalid("zone is already bound on this host"));
        };
        slot.bound = true;
        Ok(ZoneInbox {
            zone: zone.to_string(),
            messages,
            notices,
            held: slot.held.take(),
        })
    }

    /// Takes the inbox back. With `keep`, what it still holds waits for the zone's next
    /// binding (in process); otherwise the slot goes (NATS redelivers what was not acknowledged).
    pub(crate) fn unbind(&self, inbox: ZoneInbox, keep: bool) {
        let mut slots = self.lock();
        if !keep {
            if let Some(slot) = slots.remove(&inbox.zone) {
                if let Some(cancel) = slot.cancel {
                    cancel.cancel();
                }
            }
            return;
        }
        if let Some(slot) = slots.get_mut(&inbox.zone) {
            slot.bound = false;
            slot.messages_rx = Some(inbox.messages);
            slot.notices_rx = Some(inbox.notices);
            slot.held = inbox.held;
        }
    }

    /// Puts an envelope into a zone's inbox without waiting. With `create`, a slot is made for
    /// a zone that is starting here (it waits there until the zone binds).
    pub(crate) fn try_deliver(&self, envelope: Envelope, create: bool) -> Result<(), BusError> {
        let mut slots = self.lock();
        let slot = match slots.get_mut(&envelope.to_zone) {
            Some(slot) => slot,
            None if create => slots
                .entry(envelope.to_zone.clone())
                .or_insert_with(|| self.new_slot()),
            None => return Err(BusError::UnknownZone(envelope.to_zone)),
        };
        let zone = envelope.to_zone.clone();
        match slot.messages_tx.try_send(Delivered {
            envelope,
            token: AckToken(0),
        }) {
            Ok(()) => Ok(()),
            Err(_) => Err(BusError::ReceiverFull(zone)),
        }
    }

    /// Keeps an envelope for a zone that is not running here until the host wakes it or
    /// refuses it: in the zone's inbox, made unbound if need be. At most [`MAX_PARKED`] zones
    /// wait at once; past that, [`BusError::ReceiverFull`].
    pub(crate) fn park(&self, envelope: Envelope) -> Result<(), BusError> {
        {
            let slots = self.lock();
            if !slots.contains_key(&envelope.to_zone)
                && slots.values().filter(|s| !s.bound).count() >= MAX_PARKED
            {
                return Err(BusError::ReceiverFull(envelope.to_zone));
            }
        }
        self.try_deliver(envelope, true)
    }

    /// Unbound zones with envelopes waiting, at most `limit`.
    pub(crate) fn parked(&self, limit: usize) -> Vec<String> {
        let slots = self.lock();
        let mut zones: Vec<String> = slots
            .iter()
            .filter(|(_, s)| !s.bound && (s.waiting() > 0 || s.held.is_some()))
            .map(|(z, _)| z.clone())
            .collect();
        zones.sort();
        zones.truncate(limit);
        zones
    }

    /// Removes an unbound zone's slot and returns what waited in it, in order.
    pub(crate) fn unpark(&self, zone: &str) -> Vec<Envelope> {
        let mut slots = self.lock();
        if slots.get(zone).is_none_or(|s| s.bound) {
            return Vec::new();
        }
        let Some(mut slot) = slots.remove(zone) else {
            return Vec::new();
        };
        let mut out: Vec<Envelope> = slot.held.take().map(|d| d.envelope).into_iter().collect();
        if let Some(rx) = &mut slot.messages_rx {
            while let Ok(d) = rx.try_recv() {
                out.push(d.envelope);
            }
        }
        out
    }

    /// Whether the zone is bound here now.
    pub(crate) fn is_bound(&self, zone: &str) -> bool {
        self.lock().get(zone).is_some_and(|s| s.bound)
    }

    /// Tells a zone on this host that one of its messages was not delivered; dropped (and
    /// counted) when the zone no longer runs here or its notice queue is full.
    pub(crate) fn notify(&self, sender: &str, notice: Undeliverable) {
        self.stats.note_undeliverable(&notice.reason);
        let slots = self.lock();
        let sent = slots
            .get(sender)
            .is_some_and(|slot| slot.notices_tx.try_send(notice).is_ok());
        if !sent {
            self.stats.note_notice_dropped();
        }
    }

    /// The consumer task's handles for a bound zone: where to deliver, the pending list, the
    /// token counter and the cancellation.
    #[allow(clippy::type_complexity)]
    pub(crate) fn consumer_parts(
        &self,
        zone: &str,
    ) -> Option<(
        mpsc::Sender<Delivered>,
        Arc<Mutex<VecDeque<(AckToken, PendingAck)>>>,
        Arc<AtomicU64>,
        CancellationToken,
    )> {
        let mut slots = self.lock();
        let slot = slots.get_mut(zone)?;
        let cancel = CancellationToken::new();
        slot.cancel = Some(cancel.clone());
        Some((
            slot.messages_tx.clone(),
            slot.pending.clone(),
            slot.next_token.clone(),
            cancel,
        ))
    }

    /// Removes and returns the pending acknowledgements up to `token`.
    pub(crate) fn take_acks(&self, zone: &str, token: AckToken) -> Vec<PendingAck> {
        let pending = match self.lock().get(zone) {
            Some(slot) => slot.pending.clone(),
            None => return Vec::new(),
        };
        let mut pending = pending.lock().unwrap_or_else(|p| p.into_inner());
        let mut out = Vec::new();
        while pending.front().is_some_and(|(t, _)| *t <= token) {
            if let Some((_, msg)) = pending.pop_front() {
                out.push(msg);
            }
        }
        out
    }

    /// Cancels every consumer task (shutdown).
    pub(crate) fn cancel_all(&self) {
        for slot in self.lock().values() {
            if let Some(cancel) = &slot.cancel {
                cancel.cancel();
            }
        }
    }
}

/// Counts a token up for a delivery.
pub(crate) fn next_token(counter: &AtomicU64) -> AckToken {
    AckToken(counter.fetch_add(1, Ordering::Relaxed))
}
