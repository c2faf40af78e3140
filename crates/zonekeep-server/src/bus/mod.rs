//! The cross-zone bus in the host: what each zone's simulation thread hands the bus after an
//! advance, what it takes from the bus before one, and when it acknowledges.
//!
//! Nothing here waits. After each `advance` the thread drains the zone's outgoing messages
//! (`ZoneHost::drain_messages`) and group changes into the bus with `try_send`; a send the bus
//! refuses at once (its outgoing queue is full, a name or size out of bounds) goes straight back
//! to the zone as undeliverable. Before each `advance` it moves what the zone's bounded inbox holds
//! into `ZoneHost::handle_message` (stopping, without dropping, when the zone's own queue is
//! full) and the bus's undeliverable reports into `ZoneHost::handle_undeliverable`.
//!
//! Acknowledgement: a zone that persists acknowledges what it applied once a save taken after
//! it committed, so after a crash the zone's next owner gets again exactly what its restored
//! dedup table has not seen; a zone without saves acknowledges on delivery.

mod admin;
mod metrics;
pub(crate) mod wake;

pub(crate) use admin::post_message;
pub(crate) use metrics::encode as encode_metrics;

use std::collections::VecDeque;
use std::sync::Arc;

use zonekeep_bus::{
    AckToken, BusHandle, EnvelopeId, Location, Origin, OutMessage, Target, ZoneInbox, ZoneLocator,
};
use zonekeep_core::{
    Delivery, GroupChange, InboundMessage, MessageFrom, MessageId, MessageTarget, ZoneHost,
};

use crate::sim::Registry;

/// Applied deliveries after which a persisting zone saves early, so that acknowledgements (and
/// with them the consumer's `max_ack_pending` window) keep flowing under load.
const SAVE_AFTER_UNSAVED: usize = 512;

/// One zone's end of the bus on its simulation thread.
pub(crate) struct ZoneBus {
    inbox: ZoneInbox,
    /// Acknowledge at saves (true) or on delivery.
    persistent: bool,
    /// The last delivery handed to the zone.
    last_applied: Option<AckToken>,
    /// Saves taken (their sequence numbers) and the last delivery each covers.
    marks: VecDeque<(u64, AckToken)>,
    /// Deliveries applied since the last save was taken.
    unsaved: usize,
}

impl ZoneBus {
    /// Binds the zone on the bus. `persistent`: the zone writes saves, and acknowledges at them.
    pub(crate) fn bind(bus: &BusHandle, zone: &str, persistent: bool) -> Option<Self> {
        match bus.bind_zone(zone) {
            Ok(inbox) => Some(ZoneBus {
                inbox,
                persistent,
                last_applied: None,
                marks: VecDeque::new(),
                unsaved: 0,
            }),
            Err(e) => {
                tracing::warn!(zone = %zone, error = %e, "zone not bound on the bus");
                None
            }
        }
    }

    /// Before an advance: undeliverable reports and new messages into the zone.
    pub(crate) fn deliver(&mut self, bus: &BusHandle, zone: &str, host: &mut ZoneHost) {
        while let Some(n) = self.inbox.next_notice() {
            host.handle_undeliverable(
                core_id(n.id),
                core_target(n.to),
                n.topic,
                n.reason.to_string(),
            );
        }
        let mut applied = false;
        while let Some(d) = self.inbox.next_message() {
            let Some(msg) = inbound(&d.envelope) else {
                continue;
            };
            match host.handle_message(msg) {
                Delivery::Queued => bus.stats().note_delivered(),
                Delivery::Duplicate => bus.stats().note_duplicate(),
                Delivery::Full => {
                    // The zone's queue is full: keep it for the next tick, in order.
                    self.inbox.hold(d);
                    break;
                }
            }
            self.last_applied = Some(d.token);
            self.unsaved += 1;
            applied = true;
        }
        if applied && !self.persistent {
            if let Some(token) = self.last_applied {
                bus.ack_upto(zone, token);
            }
        }
    }

    /// Whether the zone should save now so its acknowledgements keep flowing.
    pub(crate) fn wants_save(&self) -> bool {
        self.persistent && self.unsaved >= SAVE_AFTER_UNSAVED
    }

    /// A save with sequence number `seq` was taken now: it covers every delivery applied so far.
    pub(crate) fn saved(&mut self, seq: u64) {
        self.unsaved = 0;
        if let Some(token) = self.last_applied {
            self.marks.push_back((seq, token));
        }
    }

    /// Acknowledges what the committed save `last_saved` covers.
    pub(crate) fn committed(&mut self, bus: &BusHandle, zone: &str, last_saved: Option<u64>) {
        let Some(last_saved) = last_saved else {
            return;
        };
        let mut upto = None;
        while self
            .marks
            .front()
            .is_some_and(|(seq, _)| *seq <= last_saved)
        {
            upto = self.marks.pop_front().map(|(_, token)| token);
        }
        if let Some(token) = upto {
            bus.ack_upto(zone, token);
        }
    }

    /// After an advance (or a dispose): the zone's messages and group changes to the bus.
    pub(crate) fn carry(bus: &BusHandle, zone: &str, host: &mut ZoneHost) {
        for change in host.group_changes() {
            let done = match &change {
                GroupChange::Joined(g) => bus.join_group(zone, g),
                GroupChange::Left(g) => bus.leave_group(zone, g),
            };
            if let Err(e) = done {
                tracing::warn!(zone = %zone, change = ?change, error = %e, "group change not recorded on the bus");
            }
        }
        for m in host.drain_messages() {
            let out = OutMessage {
                id: EnvelopeId {
                    sender: m.id.sender.clone(),
                    epoch: m.id.epoch,
                    seq: m.id.seq,
                },
                origin: Origin::Zone,
                from: zone.to_string(),
                to: match &m.to {
                    MessageTarget::Zone(z) => Target::Zone(z.clone()),
                    MessageTarget::Group(g) => Target::Group(g.clone()),
                },
                topic: m.topic,
                payload: m.payload,
                via_parent: m.via_parent,
            };
            if let Err(e) = bus.send(out) {
                host.handle_undeliverable(m.id, m.to, m.topic, e.to_string());
            }
        }
    }

    /// The zone leaves this host.
    pub(crate) fn unbind(self, bus: &BusHandle) {
        bus.unbind_zone(self.inbox);
    }
}

fn core_id(id: EnvelopeId) -> MessageId {
    MessageId {
        sender: id.sender,
        epoch: id.epoch,
        seq: id.seq,
    }
}

fn core_target(t: Target) -> MessageTarget {
    match t {
        Target::Zone(z) => MessageTarget::Zone(z),
        Target::Group(g) => MessageTarget::Group(g),
    }
}

/// The core's view of a delivered envelope; `None` for anything but a zone or admin message.
fn inbound(e: &zonekeep_bus::Envelope) -> Option<InboundMessage> {
    let zonekeep_bus::Body::Message {
        topic,
        payload,
        via_parent,
    } = &e.body
    else {
        return None;
    };
    let from = match e.origin {
        Origin::Zone => MessageFrom::Zone(e.from.clone()),
        Origin::Admin => MessageFrom::Admin,
        Origin::Host => return None,
    };
    Some(InboundMessage {
        id: core_id(e.id.clone()),
        from,
        topic: *topic,
        payload: payload.clone(),
        via_parent: *via_parent,
    })
}

/// Where a zone is, for the in-process bus: here when this host runs (or is starting) it; with a
/// directory (a host with a store), otherwise asleep: its messages wait while [`wake`] asks the
/// directory whether to wake it here or refuse them; without one, unknown.
pub(crate) struct HostLocator {
    pub registry: Arc<Registry>,
    pub fleet: bool,
}

impl ZoneLocator for HostLocator {
    fn locate(&self, zone: &str) -> Location {
        if self.registry.get(zone).is_some() {
            Location::Here
        } else if self.fleet {
            Location::Asleep
        } else {
            Location::Unknown
        }
    }
}
