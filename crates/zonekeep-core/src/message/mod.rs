//! Zone messages: what a zone sends other zones (or groups of zones), what it receives, the
//! groups it belongs to and the parent it reports to.
//!
//! The core never moves a message anywhere: a zone queues one with [`Ctx::send`](crate::Ctx::send)
//! (or [`Ctx::to_parent`](crate::Ctx::to_parent)), the server takes it with
//! [`ZoneHost::drain_messages`](crate::ZoneHost::drain_messages) and carries it, durably and
//! at least once, to its target, whose server hands it to
//! [`ZoneHost::handle_message`](crate::ZoneHost::handle_message). The receiving host
//! deduplicates by [`MessageId`] and delivers each new message at the start of its zone's next
//! tick (after fact settlements, before inputs), in arrival order, to
//! [`Zone::on_message`](crate::Zone::on_message), or to [`Zone::on_child`](crate::Zone::on_child)
//! when it was sent to the receiver as its child's parent.
//!
//! # Ids and deduplication
//!
//! A message's id is `(sender, epoch, seq)`: the sending zone's id, the owner epoch its host runs
//! under ([`ZoneHost::boot_epoch`](crate::ZoneHost::boot_epoch)) and a sequence number counting
//! from 1 for each message that run of the zone sends. The receiver remembers, per sender, the
//! highest `(epoch, seq)` it took: the same epoch with a sequence number not above it is a
//! [`Delivery::Duplicate`]; a higher epoch starts the sender's sequence afresh (the sender was
//! restarted from a save, under a new epoch); a lower epoch is a duplicate from a run that has
//! ended. The table is part of the zone's save and image, with the messages queued and not yet
//! delivered, so at-least-once delivery plus this check gives each message's effect once per
//! committed save. It remembers at most [`MAX_DEDUP_SENDERS`] senders, forgetting the one seen
//! least recently first.
//!
//! # Limits
//!
//! A payload is at most [`MAX_MESSAGE_PAYLOAD`] bytes; a zone sends at most
//! [`MAX_SENDS_PER_TICK`] messages per tick and at most [`MAX_OUTBOX`] wait for the server;
//! zone and group names are 1 to [`MAX_ZONE_ID_LEN`] bytes; a zone belongs to at most
//! [`MAX_GROUPS`] groups; at most [`MAX_INBOX`] received messages wait for delivery (more are
//! refused with [`Delivery::Full`] and counted).
//!
//! # Hierarchy
//!
//! A zone names its parent with [`Ctx::set_parent`](crate::Ctx::set_parent) (saved with it). Its
//! host then tells the parent of every tier change with a message of the reserved topic
//! [`TIER_TOPIC`] and payload `[from, to]` ([`tier_code`]); zones cannot send that topic.

mod mailbox;

use crate::tier::Tier;

pub(crate) use mailbox::Mailbox;

/// Longest zone id or group name a message may name, in bytes.
pub const MAX_ZONE_ID_LEN: usize = 128;
/// Largest message payload, in bytes.
pub const MAX_MESSAGE_PAYLOAD: usize = 16 * 1024;
/// Most messages a zone may send in one tick.
pub const MAX_SENDS_PER_TICK: usize = 256;
/// Most messages waiting for the server to drain them.
pub const MAX_OUTBOX: usize = 4096;
/// Most received messages waiting for the zone's next tick.
pub const MAX_INBOX: usize = 1024;
/// Most groups a zone belongs to.
pub const MAX_GROUPS: usize = 32;
/// Most senders the deduplication table remembers (the least recently seen is forgotten).
pub const MAX_DEDUP_SENDERS: usize = 4096;
/// Longest reason an undeliverable notice keeps, in bytes (longer ones are cut).
pub const MAX_UNDELIVERABLE_REASON: usize = 1024;
/// The reserved topic of the tier messages a host sends a zone's parent (payload `[from, to]`).
pub const TIER_TOPIC: u16 = 0xFFFF;

/// Where a message goes.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum MessageTarget {
    /// One zone, by id.
    Zone(String),
    /// Every zone that joined the group.
    Group(String),
}

/// Who sent a message. Never a player: clients only reach
/// [`Zone::on_input`](crate::Zone::on_input).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum MessageFrom {
    /// Another zone, by id.
    Zone(String),
    /// The operator (the admin API).
    Admin,
}

/// A message's identity: deduplication is by this.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct MessageId {
    /// The sending zone's id, or `"admin:<something>"`.
    pub sender: String,
    /// The owner epoch the sender ran under when it sent the message.
    pub epoch: u64,
    /// Counts from 1 per (sender, epoch).
    pub seq: u64,
}

/// A message a zone sent, for the server to carry ([`ZoneHost::drain_messages`](crate::ZoneHost::drain_messages)).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutboundMessage {
    /// Its id.
    pub id: MessageId,
    /// Where it goes.
    pub to: MessageTarget,
    /// Game-defined topic ([`TIER_TOPIC`] is the host's).
    pub topic: u16,
    /// Game-defined bytes.
    pub payload: Vec<u8>,
    /// The tick that sent it (the last tick run, when sent outside a tick).
    pub tick: u64,
    /// Sent to the zone's parent ([`Ctx::to_parent`](crate::Ctx::to_parent) or a tier change):
    /// the receiver hands it to [`Zone::on_child`](crate::Zone::on_child).
    pub via_parent: bool,
}

/// A message for this zone, as its server hands it in ([`ZoneHost::handle_message`](crate::ZoneHost::handle_message)).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InboundMessage {
    /// Its id (deduplication is by this).
    pub id: MessageId,
    /// Who sent it.
    pub from: MessageFrom,
    /// Game-defined topic.
    pub topic: u16,
    /// Game-defined bytes.
    pub payload: Vec<u8>,
    /// Sent by a child to this zone as its parent: delivered to [`Zone::on_child`](crate::Zone::on_child).
    pub via_parent: bool,
}

/// Why a send (or a group change) was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum SendError {
    /// The zone or group name is empty or longer than [`MAX_ZONE_ID_LEN`] bytes.
    #[error("target must be 1..={MAX_ZONE_ID_LEN} bytes")]
    BadTarget,
    /// The payload is longer than [`MAX_MESSAGE_PAYLOAD`] bytes, or joining one more group
    /// would pass [`MAX_GROUPS`].
    #[error("message payload or group membership too large")]
    TooLarge,
    /// More than [`MAX_SENDS_PER_TICK`] sends this tick, or [`MAX_OUTBOX`] messages wait for
    /// the server already.
    #[error("too many messages")]
    RateLimited,
    /// [`Ctx::to_parent`](crate::Ctx::to_parent) without a parent.
    #[error("the zone has no parent")]
    NoParent,
    /// Topic [`TIER_TOPIC`] is reserved for the host's tier messages.
    #[error("topic 0xFFFF is reserved")]
    ReservedTopic,
}

/// What [`ZoneHost::handle_message`](crate::ZoneHost::handle_message) did with a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Delivery {
    /// New: it will be delivered at the start of the next tick.
    Queued,
    /// Already taken (same sender, epoch, and a sequence number not above the last one).
    Duplicate,
    /// [`MAX_INBOX`] messages already wait; refused and counted. The sender's server may retry.
    Full,
}

/// A change of the zone's group membership, for the server's fleet-wide table
/// ([`ZoneHost::group_changes`](crate::ZoneHost::group_changes)).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum GroupChange {
    /// The zone joined the group.
    Joined(String),
    /// The zone left the group.
    Left(String),
}

/// What a child zone told its parent ([`Zone::on_child`](crate::Zone::on_child)).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChildEvent<'a> {
    /// The child's tier changed.
    Tier {
        /// Tier before.
        from: Tier,
        /// Tier after.
        to: Tier,
    },
    /// The child sent a message with [`Ctx::to_parent`](crate::Ctx::to_parent).
    Message {
        /// Game-defined topic.
        topic: u16,
        /// Game-defined bytes.
        payload: &'a [u8],
    },
}

/// A tier's code in a tier message: Hot 0, Idle 1, Dormant 2.
pub fn tier_code(t: Tier) -> u8 {
    match t {
        Tier::Hot => 0,
        Tier::Idle => 1,
        Tier::Dormant => 2,
    }
}

/// The tier of a code written by [`tier_code`].
pub fn tier_from_code(c: u8) -> Option<Tier> {
    match c {
        0 => Some(Tier::Hot),
        1 => Some(Tier::Idle),
        2 => Some(Tier::Dormant),
        _ => None,
    }
}

/// Whether `name` is a valid zone id or group name for a message.
pub(crate) fn valid_name(name: &str) -> bool {
    (1..=MAX_ZONE_ID_LEN).contains(&name.len())
}

/// Something waiting for the zone's next tick.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Inbound {
    /// A message from another zone or the operator.
    Message(InboundMessage),
    /// A message this zone sent could not be delivered.
    Undeliverable {
        /// The message's id.
        id: MessageId,
        /// Where it was going.
        to: MessageTarget,
        /// Its topic.
        topic: u16,
        /// What the server said.
        reason: String,
    },
}

#[cfg(test)]
mod tests;
