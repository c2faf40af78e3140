//! The version-3 links section of the envelope (see the [module docs](super) for the layout): a
//! zone's parent, groups, message sequence, deduplication table and undelivered inbox, written
//! and read back as [`SavedLinks`].

use super::{len_u32, put_str, put_u32, put_u64, Reader, SavedLinks, SnapshotError};
use crate::message::{Inbound, InboundMessage, MessageFrom, MessageId, MessageTarget};

pub(super) fn put_links(body: &mut Vec<u8>, links: &SavedLinks) {
    match &links.parent {
        Some(p) => {
            body.push(1);
            put_str(body, p);
        }
        None => body.push(0),
    }
    put_u32(body, len_u32(links.groups.len()));
    for g in &links.groups {
        put_str(body, g);
    }
    put_u64(body, links.message_seq);
    put_u32(body, len_u32(links.dedup.len()));
    for id in &links.dedup {
        put_id(body, id);
    }
    put_u32(body, len_u32(links.inbox.len()));
    for item in &links.inbox {
        match item {
            Inbound::Message(m) => {
                body.push(0);
                put_id(body, &m.id);
                match &m.from {
                    MessageFrom::Zone(z) => {
                        body.push(0);
                        put_str(body, z);
                    }
                    MessageFrom::Admin => body.push(1),
                }
                body.extend_from_slice(&m.topic.to_le_bytes());
                body.push(u8::from(m.via_parent));
                put_u32(body, len_u32(m.payload.len()));
                body.extend_from_slice(&m.payload);
            }
            Inbound::Undeliverable {
                id,
                to,
                topic,
                reason,
            } => {
                body.push(1);
                put_id(body, id);
                let (kind, name) = match to {
                    MessageTarget::Zone(z) => (0, z),
                    MessageTarget::Group(g) => (1, g),
                };
                body.push(kind);
                put_str(body, name);
                body.extend_from_slice(&topic.to_le_bytes());
                put_str(body, reason);
            }
        }
    }
}

fn put_id(body: &mut Vec<u8>, id: &MessageId) {
    put_str(body, &id.sender);
    put_u64(body, id.epoch);
    put_u64(body, id.seq);
}

fn read_id(r: &mut Reader<'_>) -> Result<MessageId, SnapshotError> {
    Ok(MessageId {
        sender: r.string()?,
        epoch: r.u64()?,
        seq: r.u64()?,
    })
}

fn read_flag(r: &mut Reader<'_>, what: &str) -> Result<bool, SnapshotError> {
    match r.u8()? {
        0 => Ok(false),
        1 => Ok(true),
        b => Err(SnapshotError::Malformed(format!("{what} flag {b}"))),
    }
}

/// The version-3 links.
pub(super) fn read_links(r: &mut Reader<'_>) -> Result<SavedLinks, SnapshotError> {
    let parent = if read_flag(r, "parent")? {
        Some(r.string()?)
    } else {
        None
    };
    let count = r.u32()? as usize;
    // A group name takes at least 4 bytes, an id 20, an inbox entry 23.
    let mut groups = Vec::with_capacity(count.min(r.remaining() / 4));
    for _ in 0..count {
        groups.push(r.string()?);
    }
    let message_seq = r.u64()?;
    let count = r.u32()? as usize;
    let mut dedup = Vec::with_capacity(count.min(r.remaining() / 20));
    for _ in 0..count {
        dedup.push(read_id(r)?);
    }
    let count = r.u32()? as usize;
    let mut inbox = Vec::with_capacity(count.min(r.remaining() / 23));
    for _ in 0..count {
        let kind = r.u8()?;
        let id = read_id(r)?;
        inbox.push(match kind {
            0 => {
                let from = match r.u8()? {
                    0 => MessageFrom::Zone(r.string()?),
                    1 => MessageFrom::Admin,
                    b => return Err(SnapshotError::Malformed(format!("message sender {b}"))),
                };
                let topic = r.u16()?;
                let via_parent = read_flag(r, "via-parent")?;
                let len = r.u32()? as usize;
                let payload = r.take(len)?.to_vec();
                Inbound::Message(InboundMessage {
                    id,
                    from,
                    topic,
                    payload,
                    via_parent,
                })
            }
            1 => {
                let to = match r.u8()? {
                    0 => MessageTarget::Zone(r.string()?),
                    1 => MessageTarget::Group(r.string()?),
                    b => return Err(SnapshotError::Malformed(format!("message target {b}"))),
                };
                Inbound::Undeliverable {
                    id,
                    to,
                    topic: r.u16()?,
                    reason: r.string()?,
                }
            }
            b => return Err(SnapshotError::Malformed(format!("inbox entry kind {b}"))),
        });
    }
    Ok(SavedLinks {
        parent,
        groups,
        message_seq,
        dedup,
        inbox,
    })
}
