//! The zone's mailbox: its outbox and inbox, its groups and parent, the deduplication table and
//! the counters, with every limit checked on a send or a receive, and the mailbox's part of a
//! zone image. What a message is, and the limits themselves, live in the [module](super).

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use zonekeep_protocol::error::DecodeError;
use zonekeep_protocol::wire::{put_varint, Reader};

use super::{
    tier_code, valid_name, Delivery, GroupChange, Inbound, InboundMessage, MessageFrom, MessageId,
    MessageTarget, OutboundMessage, SendError, MAX_DEDUP_SENDERS, MAX_GROUPS, MAX_INBOX,
    MAX_MESSAGE_PAYLOAD, MAX_OUTBOX, MAX_SENDS_PER_TICK, MAX_UNDELIVERABLE_REASON, MAX_ZONE_ID_LEN,
    TIER_TOPIC,
};
use crate::tier::Tier;

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
