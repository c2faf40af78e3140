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

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use zonekeep_protocol::error::DecodeError;
use zonekeep_protocol::wire::{put_varint, Reader};

use crate::tier::Tier;

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

/// The highest message taken from one sender.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Seen {
    pub(crate) epoch: u64,
    pub(crate) seq: u64,
    /// When it was last seen (a counter, for forgetting the least recently seen sender).
    stamp: u64,
}

/// Per sender, the highest `(epoch, seq)` taken; bounded by [`MAX_DEDUP_SENDERS`].
#[derive(Debug, Clone, Default)]
pub(crate) struct Dedup {
    senders: BTreeMap<String, Seen>,
    /// `stamp -> sender`, oldest first.
    by_age: BTreeMap<u64, String>,
    next_stamp: u64,
}

impl Dedup {
    /// Whether `id` is new; when it is, remembers it.
    pub(crate) fn admit(&mut self, id: &MessageId) -> bool {
        if let Some(seen) = self.senders.get(&id.sender) {
            let new = id.epoch > seen.epoch || (id.epoch == seen.epoch && id.seq > seen.seq);
            if !new {
                return false;
            }
        }
        self.remember(id.sender.clone(), id.epoch, id.seq);
        true
    }

    fn remember(&mut self, sender: String, epoch: u64, seq: u64) {
        let stamp = self.next_stamp;
        self.next_stamp = self.next_stamp.saturating_add(1);
        if let Some(old) = self.senders.get(&sender) {
            self.by_age.remove(&old.stamp);
        }
        self.by_age.insert(stamp, sender.clone());
        self.senders.insert(sender, Seen { epoch, seq, stamp });
        while self.senders.len() > MAX_DEDUP_SENDERS {
            let Some((_, oldest)) = self.by_age.pop_first() else {
                break;
            };
            self.senders.remove(&oldest);
        }
    }

    /// Every sender with its `(epoch, seq)`, least recently seen first.
    pub(crate) fn entries(&self) -> impl Iterator<Item = (&str, u64, u64)> + '_ {
        self.by_age.values().filter_map(|s| {
            self.senders
                .get(s)
                .map(|seen| (s.as_str(), seen.epoch, seen.seq))
        })
    }

    /// A table holding `entries`, least recently seen first (what [`Dedup::entries`] lists).
    pub(crate) fn from_entries(entries: impl IntoIterator<Item = (String, u64, u64)>) -> Self {
        let mut d = Dedup::default();
        for (sender, epoch, seq) in entries {
            d.remember(sender, epoch, seq);
        }
        d
    }

    /// How many senders it remembers.
    pub(crate) fn len(&self) -> usize {
        self.senders.len()
    }
}

/// The zone's messaging state: its outbox, its inbox, its groups and parent, the deduplication
/// table and its counters. Hooks reach it through [`Ctx`](crate::Ctx); the host saves the parts
/// that must survive a restart.
#[derive(Debug)]
pub(crate) struct Mailbox {
    zone_id: String,
    epoch: u64,
    /// The sequence number of the last message sent under `epoch`.
    pub(crate) seq: u64,
    pub(crate) outbox: Vec<OutboundMessage>,
    /// The tick `sent_in_tick` counts for.
    sent_tick: u64,
    sent_in_tick: usize,
    pub(crate) groups: BTreeSet<String>,
    /// The groups the server was last told about ([`ZoneHost::group_changes`](crate::ZoneHost::group_changes)).
    pub(crate) groups_reported: BTreeSet<String>,
    pub(crate) parent: Option<String>,
    pub(crate) inbox: VecDeque<Inbound>,
    pub(crate) dedup: Dedup,
    /// Sends refused since the last report.
    pub(crate) sends_refused: u64,
    /// Inbound messages refused with [`Delivery::Full`] (or notices dropped) since the last report.
    pub(crate) inbox_full: u64,
    /// Host tier messages that found the outbox full, since the last report.
    pub(crate) tier_messages_dropped: u64,
}

impl Mailbox {
    pub(crate) fn new(zone_id: &str, epoch: u64) -> Self {
        Self {
            zone_id: zone_id.to_owned(),
            epoch,
            seq: 0,
            outbox: Vec::new(),
            sent_tick: 0,
            sent_in_tick: 0,
            groups: BTreeSet::new(),
            groups_reported: BTreeSet::new(),
            parent: None,
            inbox: VecDeque::new(),
            dedup: Dedup::default(),
            sends_refused: 0,
            inbox_full: 0,
            tier_messages_dropped: 0,
        }
    }

    /// The zone's own id.
    pub(crate) fn zone_id(&self) -> &str {
        &self.zone_id
    }

    fn refuse(&mut self, e: SendError) -> Result<(), SendError> {
        self.sends_refused = self.sends_refused.saturating_add(1);
        Err(e)
    }

    /// A zone's send, checked against every limit.
    pub(crate) fn send(
        &mut self,
        tick: u64,
        to: MessageTarget,
        topic: u16,
        payload: &[u8],
        via_parent: bool,
    ) -> Result<(), SendError> {
        let name = match &to {
            MessageTarget::Zone(z) | MessageTarget::Group(z) => z,
        };
        if !valid_name(name) {
            return self.refuse(SendError::BadTarget);
        }
        if topic == TIER_TOPIC {
            return self.refuse(SendError::ReservedTopic);
        }
        if payload.len() > MAX_MESSAGE_PAYLOAD {
            return self.refuse(SendError::TooLarge);
        }
        if self.sent_tick != tick {
            self.sent_tick = tick;
            self.sent_in_tick = 0;
        }
        if self.sent_in_tick >= MAX_SENDS_PER_TICK || self.outbox.len() >= MAX_OUTBOX {
            return self.refuse(SendError::RateLimited);
        }
        self.sent_in_tick += 1;
        self.push(tick, to, topic, payload.to_vec(), via_parent);
        Ok(())
    }

    fn push(
        &mut self,
        tick: u64,
        to: MessageTarget,
        topic: u16,
        payload: Vec<u8>,
        via_parent: bool,
    ) {
        self.seq = self.seq.saturating_add(1);
        self.outbox.push(OutboundMessage {
            id: MessageId {
                sender: self.zone_id.clone(),
                epoch: self.epoch,
                seq: self.seq,
            },
            to,
            topic,
            payload,
            tick,
            via_parent,
        });
    }

    /// The host's own message to the parent about a tier change (outside the per-tick limit,
    /// within the outbox bound).
    pub(crate) fn tier_changed(&mut self, tick: u64, from: Tier, to: Tier) {
        let Some(parent) = self.parent.clone() else {
            return;
        };
        if self.outbox.len() >= MAX_OUTBOX {
            self.tier_messages_dropped = self.tier_messages_dropped.saturating_add(1);
            return;
        }
        let payload = vec![tier_code(from), tier_code(to)];
        self.push(tick, MessageTarget::Zone(parent), TIER_TOPIC, payload, true);
    }

    /// Join `group`.
    pub(crate) fn join_group(&mut self, group: &str) -> Result<(), SendError> {
        if !valid_name(group) {
            return Err(SendError::BadTarget);
        }
        if self.groups.contains(group) {
            return Ok(());
        }
        if self.groups.len() >= MAX_GROUPS {
            return Err(SendError::TooLarge);
        }
        self.groups.insert(group.to_owned());
        Ok(())
    }

    /// What changed in the membership since the last call.
    pub(crate) fn take_group_changes(&mut self) -> Vec<GroupChange> {
        let mut changes: Vec<GroupChange> = self
            .groups_reported
            .difference(&self.groups)
            .map(|g| GroupChange::Left(g.clone()))
            .collect();
        changes.extend(
            self.groups
                .difference(&self.groups_reported)
                .map(|g| GroupChange::Joined(g.clone())),
        );
        self.groups_reported = self.groups.clone();
        changes
    }

    /// Queue an inbound message unless it is a duplicate or the inbox is full.
    pub(crate) fn receive(&mut self, msg: InboundMessage) -> Delivery {
        if let Some(seen) = self.dedup.senders.get(&msg.id.sender) {
            let new =
                msg.id.epoch > seen.epoch || (msg.id.epoch == seen.epoch && msg.id.seq > seen.seq);
            if !new {
                return Delivery::Duplicate;
            }
        }
        if self.inbox.len() >= MAX_INBOX {
            self.inbox_full = self.inbox_full.saturating_add(1);
            return Delivery::Full;
        }
        self.dedup.admit(&msg.id);
        self.inbox.push_back(Inbound::Message(msg));
        Delivery::Queued
    }

    /// Queue a notice that a message this zone sent could not be delivered.
    pub(crate) fn undeliverable(
        &mut self,
        id: MessageId,
        to: MessageTarget,
        topic: u16,
        mut reason: String,
    ) {
        if self.inbox.len() >= MAX_INBOX {
            self.inbox_full = self.inbox_full.saturating_add(1);
            return;
        }
        let kept = zonekeep_protocol::limits::clip(&reason, MAX_UNDELIVERABLE_REASON).len();
        reason.truncate(kept);
        self.inbox.push_back(Inbound::Undeliverable {
            id,
            to,
            topic,
            reason,
        });
    }

    /// What a snapshot keeps.
    pub(crate) fn saved_links(&self) -> crate::snapshot::SavedLinks {
        crate::snapshot::SavedLinks {
            parent: self.parent.clone(),
            groups: self.groups.iter().cloned().collect(),
            message_seq: self.seq,
            dedup: self
                .dedup
                .entries()
                .map(|(sender, epoch, seq)| MessageId {
                    sender: sender.to_owned(),
                    epoch,
                    seq,
                })
                .collect(),
            inbox: self.inbox.iter().cloned().collect(),
        }
    }

    /// Takes back what a snapshot written under `saved_epoch` kept. The sequence continues only
    /// under the same epoch (a new epoch starts it afresh, which receivers accept). Bounds are
    /// applied again: a damaged envelope cannot grow a table past its limit.
    pub(crate) fn restore_links(&mut self, links: crate::snapshot::SavedLinks, saved_epoch: u64) {
        self.parent = links.parent.filter(|p| valid_name(p));
        for g in links.groups {
            let _ = self.join_group(&g);
        }
        if saved_epoch == self.epoch {
            self.seq = links.message_seq;
        }
        self.dedup = Dedup::from_entries(
            links
                .dedup
                .into_iter()
                .map(|id| (id.sender, id.epoch, id.seq)),
        );
        self.inbox = links.inbox.into_iter().take(MAX_INBOX).collect();
    }

    /// Appends the mailbox's part of a zone image: the sequence number, the parent, the groups
    /// (and those reported), the deduplication table, the inbox, then the outbox not yet drained.
    pub(crate) fn put_image(&self, out: &mut Vec<u8>) {
        put_varint(out, self.seq);
        put_varint(out, self.sent_tick);
        put_varint(out, self.sent_in_tick as u64);
        put_opt_str(out, self.parent.as_deref());
        for set in [&self.groups, &self.groups_reported] {
            put_varint(out, set.len() as u64);
            for g in set {
                put_str(out, g);
            }
        }
        put_varint(out, self.dedup.len() as u64);
        for (s, epoch, seq) in self.dedup.entries() {
            put_str(out, s);
            put_varint(out, epoch);
            put_varint(out, seq);
        }
        put_varint(out, self.inbox.len() as u64);
        for i in &self.inbox {
            put_inbound(out, i);
        }
        put_varint(out, self.outbox.len() as u64);
        for m in &self.outbox {
            put_id(out, &m.id);
            put_target(out, &m.to);
            put_varint(out, u64::from(m.topic));
            put_blob(out, &m.payload);
            put_varint(out, m.tick);
            out.push(u8::from(m.via_parent));
        }
    }

    /// Reads what [`Mailbox::put_image`] wrote into a mailbox for `zone_id` under `epoch`.
    pub(crate) fn get_image(
        r: &mut Reader<'_>,
        zone_id: &str,
        epoch: u64,
    ) -> Result<Mailbox, DecodeError> {
        let mut m = Mailbox::new(zone_id, epoch);
        m.seq = r.varint_u64()?;
        m.sent_tick = r.varint_u64()?;
        m.sent_in_tick = r.count("sends this tick", MAX_SENDS_PER_TICK)?;
        m.parent = get_opt_str(r)?;
        for set in [&mut m.groups, &mut m.groups_reported] {
            let n = r.count("groups", MAX_GROUPS)?;
            for _ in 0..n {
                set.insert(get_name(r)?);
            }
        }
        let n = r.count("senders", MAX_DEDUP_SENDERS)?;
        let mut entries = Vec::with_capacity(n);
        for _ in 0..n {
            let s = r.str_named("sender", MAX_SENDER_LEN)?.to_owned();
            entries.push((s, r.varint_u64()?, r.varint_u64()?));
        }
        m.dedup = Dedup::from_entries(entries);
        let n = r.count("inbox", MAX_INBOX)?;
        for _ in 0..n {
            m.inbox.push_back(get_inbound(r)?);
        }
        let n = r.count("outbox", MAX_OUTBOX)?;
        for _ in 0..n {
            let id = get_id(r)?;
            let to = get_target(r)?;
            let topic = r.varint_u16()?;
            let payload = r.bytes_named("payload", MAX_MESSAGE_PAYLOAD)?.to_vec();
            let tick = r.varint_u64()?;
            let via_parent = get_flag(r)?;
            m.outbox.push(OutboundMessage {
                id,
                to,
                topic,
                payload,
                tick,
                via_parent,
            });
        }
        Ok(m)
    }
}

/// Longest sender a message id may carry (a zone id or `"admin:<something>"`).
pub(crate) const MAX_SENDER_LEN: usize = 2 * MAX_ZONE_ID_LEN;

fn put_blob(out: &mut Vec<u8>, b: &[u8]) {
    put_varint(out, b.len() as u64);
    out.extend_from_slice(b);
}

fn put_str(out: &mut Vec<u8>, s: &str) {
    put_blob(out, s.as_bytes());
}

fn put_opt_str(out: &mut Vec<u8>, s: Option<&str>) {
    match s {
        None => out.push(0),
        Some(s) => {
            out.push(1);
            put_str(out, s);
        }
    }
}

fn get_flag(r: &mut Reader<'_>) -> Result<bool, DecodeError> {
    match r.u8()? {
        0 => Ok(false),
        1 => Ok(true),
        _ => Err(DecodeError::Invalid("flag other than 0 or 1")),
    }
}

fn get_name(r: &mut Reader<'_>) -> Result<String, DecodeError> {
    let s = r.str_named("zone or group name", MAX_ZONE_ID_LEN)?;
    if s.is_empty() {
        return Err(DecodeError::Invalid("empty zone or group name"));
    }
    Ok(s.to_owned())
}

fn get_opt_str(r: &mut Reader<'_>) -> Result<Option<String>, DecodeError> {
    Ok(if get_flag(r)? {
        Some(get_name(r)?)
    } else {
        None
    })
}

fn put_id(out: &mut Vec<u8>, id: &MessageId) {
    put_str(out, &id.sender);
    put_varint(out, id.epoch);
    put_varint(out, id.seq);
}

fn get_id(r: &mut Reader<'_>) -> Result<MessageId, DecodeError> {
    Ok(MessageId {
        sender: r.str_named("sender", MAX_SENDER_LEN)?.to_owned(),
        epoch: r.varint_u64()?,
        seq: r.varint_u64()?,
    })
}

fn put_target(out: &mut Vec<u8>, t: &MessageTarget) {
    let (kind, name) = match t {
        MessageTarget::Zone(z) => (0, z),
        MessageTarget::Group(g) => (1, g),
    };
    out.push(kind);
    put_str(out, name);
}

fn get_target(r: &mut Reader<'_>) -> Result<MessageTarget, DecodeError> {
    match r.u8()? {
        0 => Ok(MessageTarget::Zone(get_name(r)?)),
        1 => Ok(MessageTarget::Group(get_name(r)?)),
        _ => Err(DecodeError::Invalid("unknown message target kind")),
    }
}

fn put_inbound(out: &mut Vec<u8>, i: &Inbound) {
    match i {
        Inbound::Message(m) => {
            out.push(0);
            put_id(out, &m.id);
            match &m.from {
                MessageFrom::Zone(z) => {
                    out.push(0);
                    put_str(out, z);
                }
                MessageFrom::Admin => out.push(1),
            }
            put_varint(out, u64::from(m.topic));
            put_blob(out, &m.payload);
            out.push(u8::from(m.via_parent));
        }
        Inbound::Undeliverable {
            id,
            to,
            topic,
            reason,
        } => {
            out.push(1);
            put_id(out, id);
            put_target(out, to);
            put_varint(out, u64::from(*topic));
            put_str(out, reason);
        }
    }
}

fn get_inbound(r: &mut Reader<'_>) -> Result<Inbound, DecodeError> {
    Ok(match r.u8()? {
        0 => {
            let id = get_id(r)?;
            let from = match r.u8()? {
                0 => MessageFrom::Zone(get_name(r)?),
                1 => MessageFrom::Admin,
                _ => return Err(DecodeError::Invalid("unknown message sender kind")),
            };
            Inbound::Message(InboundMessage {
                id,
                from,
                topic: r.varint_u16()?,
                payload: r.bytes_named("payload", MAX_MESSAGE_PAYLOAD)?.to_vec(),
                via_parent: get_flag(r)?,
            })
        }
        1 => Inbound::Undeliverable {
            id: get_id(r)?,
            to: get_target(r)?,
            topic: r.varint_u16()?,
            reason: r.str_named("reason", MAX_UNDELIVERABLE_REASON)?.to_owned(),
        },
        _ => return Err(DecodeError::Invalid("unknown inbox entry")),
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn id(sender: &str, epoch: u64, seq: u64) -> MessageId {
        MessageId {
            sender: sender.into(),
            epoch,
            seq,
        }
    }

    #[test]
    fn the_dedup_table_forgets_the_least_recently_seen_sender() {
        let mut d = Dedup::default();
        for i in 0..MAX_DEDUP_SENDERS {
            assert!(d.admit(&id(&format!("z{i}"), 1, 1)));
        }
        // z0 is seen again, so z1 is now the oldest.
        assert!(d.admit(&id("z0", 1, 2)));
        assert!(d.admit(&id("new", 1, 1)));
        assert_eq!(d.len(), MAX_DEDUP_SENDERS);
        assert!(!d.admit(&id("z0", 1, 2)), "z0 is still remembered");
        assert!(d.admit(&id("z1", 1, 1)), "z1 was forgotten");
    }

    #[test]
    fn a_mailbox_image_reads_back_and_damage_is_typed() {
        let mut m = Mailbox::new("zone-a", 3);
        m.parent = Some("world".into());
        m.join_group("g1").unwrap();
        m.send(4, MessageTarget::Group("g1".into()), 7, b"hi", false)
            .unwrap();
        m.receive(InboundMessage {
            id: id("zone-b", 2, 9),
            from: MessageFrom::Zone("zone-b".into()),
            topic: 1,
            payload: vec![1, 2],
            via_parent: true,
        });
        m.undeliverable(
            id("zone-a", 3, 1),
            MessageTarget::Zone("x".into()),
            7,
            "gone".into(),
        );
        let mut bytes = Vec::new();
        m.put_image(&mut bytes);
        let mut r = Reader::new(&bytes);
        let back = Mailbox::get_image(&mut r, "zone-a", 3).unwrap();
        r.finish().unwrap();
        let mut again = Vec::new();
        back.put_image(&mut again);
        assert_eq!(again, bytes);
        assert_eq!(back.outbox, m.outbox);
        for cut in 0..bytes.len() {
            let mut r = Reader::new(&bytes[..cut]);
            assert!(
                Mailbox::get_image(&mut r, "zone-a", 3).is_err(),
                "cut at {cut}"
            );
        }
    }
}
