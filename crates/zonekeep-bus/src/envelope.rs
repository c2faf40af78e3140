//! What the bus carries: envelopes, their ids, and their bytes on the wire.
//!
//! One [`Envelope`] goes to exactly one zone. A message to a group is expanded at the sender's
//! host into one envelope per member zone, all with the message's one id, so every
//! sender→receiver pair keeps its own order and each receiver deduplicates by that id.

use thiserror::Error;

/// The most payload bytes one zone message may carry (the core refuses bigger sends first).
pub const MAX_MESSAGE_PAYLOAD: usize = 16 * 1024;
/// The most bytes a transfer body may carry: the core's 256 KiB of state and 16 KiB of claims,
/// with room for the transfer record around them, under NATS's default 1 MiB message limit.
pub const MAX_TRANSFER_BYTES: usize = 768 * 1024;
/// The longest zone id, group name or sender name the bus accepts (a zone id is at most 128
/// bytes; admin and host senders carry a prefix).
pub const MAX_NAME: usize = 256;

/// A message's identity, unique per sender: the sender's name, the epoch it booted in (a sender
/// restored from a save starts a higher epoch) and a sequence number counted from 1 per
/// (sender, epoch). Receivers drop a message whose (epoch, seq) they already applied.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct EnvelopeId {
    /// The zone id, or `admin:<…>` / `host:<…>` for messages no zone sent.
    pub sender: String,
    /// The sender's boot epoch.
    pub epoch: u64,
    /// The sender's sequence number within the epoch, from 1.
    pub seq: u64,
}

/// Who sent an envelope. A player never appears here: clients only reach a zone's inputs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    /// A zone; [`Envelope::from`] is its id.
    Zone,
    /// The operator, through the admin API; [`Envelope::from`] names the host that took it.
    Admin,
    /// A host itself (transfers); [`Envelope::from`] is whatever the host put there.
    Host,
}

/// Where a zone sends a message: one zone, or every zone in a group.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Target {
    /// One zone, by id.
    Zone(String),
    /// Every member of the group at the time the sender's host expands it.
    Group(String),
}

/// What an envelope carries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Body {
    /// A zone message: delivered into the receiving zone in order, deduplicated by id.
    Message {
        /// The application's topic (`0xFFFF` is the core's tier-change topic).
        topic: u16,
        /// At most [`MAX_MESSAGE_PAYLOAD`] bytes.
        payload: Vec<u8>,
        /// Sent with `to_parent`: the receiver hands it to `on_child`.
        via_parent: bool,
    },
    /// A transfer record, opaque to the bus; delivered to the host's transfer channel.
    Transfer(Vec<u8>),
}

/// One delivery unit: an id, a sender, one receiving zone and a body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Envelope {
    /// The message id (shared by the envelopes of one group send).
    pub id: EnvelopeId,
    /// Who sent it (see [`Origin`]).
    pub origin: Origin,
    /// The sending zone's id (or the admin/host name).
    pub from: String,
    /// The receiving zone's id.
    pub to_zone: String,
    /// The content.
    pub body: Body,
}

/// Why bytes from the bus are not an envelope. Anything may arrive on a subject, so every
/// malformed input ends here, never in a panic.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum DecodeError {
    /// The bytes end before the envelope does.
    #[error("envelope truncated")]
    Truncated,
    /// An envelope format this build does not know.
    #[error("unknown envelope version {0}")]
    Version(u8),
    /// A kind or origin byte outside the known values.
    #[error("unknown envelope {what} {value}")]
    Unknown {
        /// Which field.
        what: &'static str,
        /// The value found.
        value: u8,
    },
    /// A name that is empty, too long or not UTF-8.
    #[error("bad {0} name")]
    BadName(&'static str),
    /// A body over its limit.
    #[error("envelope body of {0} bytes is over its limit")]
    TooLarge(usize),
    /// A batch of envelopes that breaks its rules (see [`crate::batch`]).
    #[error("bad envelope batch: {0}")]
    BadBatch(&'static str),
}

const VERSION: u8 = 1;
const KIND_MESSAGE: u8 = 0;
const KIND_TRANSFER: u8 = 1;

impl Envelope {
    /// How many bytes [`Envelope::encode`] writes.
    pub fn encoded_len(&self) -> usize {
        let body_len = match &self.body {
            Body::Message { payload, .. } => payload.len() + 3,
            Body::Transfer(bytes) => bytes.len(),
        };
        3 + 6 + self.from.len() + self.to_zone.len() + self.id.sender.len() + 16 + body_len
    }

    /// The envelope's bytes on the wire: a version byte, kind, origin, the names and numbers,
    /// then the body. Fixed-width integers are little-endian; names carry a u16 length.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.encoded_len());
        out.push(VERSION);
        out.push(match self.body {
            Body::Message { .. } => KIND_MESSAGE,
            Body::Transfer(_) => KIND_TRANSFER,
        });
        out.push(match self.origin {
            Origin::Zone => 0,
            Origin::Admin => 1,
            Origin::Host => 2,
        });
        for name in [&self.from, &self.to_zone, &self.id.sender] {
            // Names are checked at the API (at most MAX_NAME bytes), so the length fits a u16.
            out.extend_from_slice(&(name.len().min(u16::MAX as usize) as u16).to_le_bytes());
            out.extend_from_slice(name.as_bytes());
        }
        out.extend_from_slice(&self.id.epoch.to_le_bytes());
        out.extend_from_slice(&self.id.seq.to_le_bytes());
        match &self.body {
            Body::Message {
                topic,
                payload,
                via_parent,
            } => {
                out.extend_from_slice(&topic.to_le_bytes());
                out.push(u8::from(*via_parent));
                out.extend_from_slice(payload);
            }
            Body::Transfer(bytes) => out.extend_from_slice(bytes),
        }
        out
    }

    /// Reads an envelope written by [`Envelope::encode`]; any other bytes give a typed error.
    pub fn decode(bytes: &[u8]) -> Result<Self, DecodeError> {
        let mut r = Reader(bytes);
        let version = r.u8()?;
        if version != VERSION {
            return Err(DecodeError::Version(version));
        }
        let kind = r.u8()?;
        let origin = match r.u8()? {
            0 => Origin::Zone,
            1 => Origin::Admin,
            2 => Origin::Host,
            value => {
                return Err(DecodeError::Unknown {
                    what: "origin",
                    value,
                })
            }
        };
        let from = r.name("from")?;
        let to_zone = r.name("to")?;
        let sender = r.name("sender")?;
        let epoch = r.u64()?;
        let seq = r.u64()?;
        let body = match kind {
            KIND_MESSAGE => {
                let topic = u16::from_le_bytes([r.u8()?, r.u8()?]);
                let via_parent = match r.u8()? {
                    0 => false,
                    1 => true,
                    value => {
                        return Err(DecodeError::Unknown {
                            what: "via_parent",
                            value,
                        })
                    }
                };
                if r.0.len() > MAX_MESSAGE_PAYLOAD {
                    return Err(DecodeError::TooLarge(r.0.len()));
                }
                Body::Message {
                    topic,
                    payload: r.0.to_vec(),
                    via_parent,
                }
            }
            KIND_TRANSFER => {
                if r.0.len() > MAX_TRANSFER_BYTES {
                    return Err(DecodeError::TooLarge(r.0.len()));
                }
                Body::Transfer(r.0.to_vec())
            }
            value => {
                return Err(DecodeError::Unknown {
                    what: "kind",
                    value,
                })
            }
        };
        Ok(Envelope {
            id: EnvelopeId { sender, epoch, seq },
            origin,
            from,
            to_zone,
            body,
        })
    }

    /// The JetStream `Nats-Msg-Id` of this envelope: unique per (receiver, sender, epoch, seq),
    /// so the stream's duplicate window drops a republished copy before any zone sees it.
    pub fn msg_id(&self) -> String {
        format!(
            "{}.{}.{}.{}",
            crate::naming::digest(&self.to_zone),
            crate::naming::digest(&self.id.sender),
            self.id.epoch,
            self.id.seq
        )
    }
}

/// A cursor over untrusted bytes.
struct Reader<'a>(&'a [u8]);

impl Reader<'_> {
    fn take(&mut self, n: usize) -> Result<&[u8], DecodeError> {
        if self.0.len() < n {
            return Err(DecodeError::Truncated);
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Ok(head)
    }

    fn u8(&mut self) -> Result<u8, DecodeError> {
        Ok(self.take(1)?[0])
    }

    fn u64(&mut self) -> Result<u64, DecodeError> {
        let mut b = [0u8; 8];
        b.copy_from_slice(self.take(8)?);
        Ok(u64::from_le_bytes(b))
    }

    fn name(&mut self, what: &'static str) -> Result<String, DecodeError> {
        let len = u16::from_le_bytes([self.u8()?, self.u8()?]) as usize;
        if len == 0 || len > MAX_NAME {
            return Err(DecodeError::BadName(what));
        }
        let bytes = self.take(len)?;
        String::from_utf8(bytes.to_vec()).map_err(|_| DecodeError::BadName(what))
    }
}

/// Whether `name` may be a zone id, group or sender on the bus: 1..=[`MAX_NAME`] bytes.
pub fn valid_name(name: &str) -> bool {
    !name.is_empty() && name.len() <= MAX_NAME
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(body: Body) -> Envelope {
        Envelope {
            id: EnvelopeId {
                sender: "a.b*c>".into(),
                epoch: 7,
                seq: 42,
            },
            origin: Origin::Zone,
            from: "a.b*c>".into(),
            to_zone: "z:1".into(),
            body,
        }
    }

    #[test]
    fn round_trips_both_bodies() {
        for body in [
            Body::Message {
                topic: 0xFFFF,
                payload: vec![1, 2, 3],
                via_parent: true,
            },
            Body::Transfer(vec![9; 1000]),
        ] {
            let env = sample(body);
            assert_eq!(env.encode().len(), env.encoded_len());
            assert_eq!(Envelope::decode(&env.encode()), Ok(env));
        }
    }

    #[test]
    fn every_truncation_is_a_typed_error() {
        let bytes = sample(Body::Message {
            topic: 1,
            payload: vec![],
            via_parent: false,
        })
        .encode();
        for cut in 0..bytes.len() {
            assert!(Envelope::decode(&bytes[..cut]).is_err(), "cut at {cut}");
        }
    }

    #[test]
    fn hostile_bytes_are_refused() {
        assert_eq!(Envelope::decode(&[2]), Err(DecodeError::Version(2)));
        assert_eq!(
            Envelope::decode(&[1, 0, 3]),
            Err(DecodeError::Unknown {
                what: "origin",
                value: 3
            })
        );
        let mut big = sample(Body::Message {
            topic: 1,
            payload: vec![0; MAX_MESSAGE_PAYLOAD + 1],
            via_parent: false,
        })
        .encode();
        assert!(matches!(
            Envelope::decode(&big),
            Err(DecodeError::TooLarge(_))
        ));
        big[1] = 7;
        assert!(matches!(
            Envelope::decode(&big),
            Err(DecodeError::Unknown { what: "kind", .. })
        ));
        // A name longer than the limit.
        let mut long = vec![1, 0, 0];
        long.extend_from_slice(&((MAX_NAME + 1) as u16).to_le_bytes());
        long.extend(std::iter::repeat_n(b'a', MAX_NAME + 1));
        assert_eq!(Envelope::decode(&long), Err(DecodeError::BadName("from")));
    }
}
