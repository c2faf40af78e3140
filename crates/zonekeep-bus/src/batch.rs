//! Many envelopes for one zone in one NATS message.
//!
//! Under load the host's publisher finds many sends queued for the same zone; publishing them as
//! one stream message costs NATS one store, one delivery, one acknowledgement and one delete
//! instead of one each per envelope, which is most of the bus's cost on the server's side. A
//! single envelope still goes out alone in its own format ([`Envelope::encode`]), so a host that
//! never batches reads everything a lightly loaded host sends.
//!
//! Format: a version byte [`BATCH_VERSION`], a little-endian `u16` count (1..=[`MAX_BATCH`]),
//! then per envelope a `u32` length and the envelope's bytes. Every envelope of a batch is a zone
//! message for the same zone; anything else is a [`DecodeError`].

use crate::envelope::DecodeError;
use crate::{Body, Envelope};

/// The first byte of a batch (an envelope's is 1).
pub const BATCH_VERSION: u8 = 2;
/// The most envelopes one batch carries.
pub const MAX_BATCH: usize = 1024;
/// The most bytes a batch is filled to (under NATS's default 1 MiB message limit; an envelope
/// larger than this goes alone).
pub const MAX_BATCH_BYTES: usize = 256 * 1024;

/// Writes `envelopes` (at least two, at most [`MAX_BATCH`], all zone messages for one zone) as
/// one batch.
pub fn encode_batch(envelopes: &[Envelope]) -> Vec<u8> {
    let encoded: Vec<Vec<u8>> = envelopes.iter().map(Envelope::encode).collect();
    let mut out = Vec::with_capacity(3 + encoded.iter().map(|e| e.len() + 4).sum::<usize>());
    out.push(BATCH_VERSION);
    out.extend_from_slice(&(encoded.len().min(MAX_BATCH) as u16).to_le_bytes());
    for e in encoded.iter().take(MAX_BATCH) {
        out.extend_from_slice(&(e.len() as u32).to_le_bytes());
        out.extend_from_slice(e);
    }
    out
}

/// Reads what one NATS message on a zone's subject carries: one envelope, or a batch of zone
/// messages for one zone. Any other bytes are a typed error.
pub fn decode_any(bytes: &[u8]) -> Result<Vec<Envelope>, DecodeError> {
    match bytes.first() {
        Some(&BATCH_VERSION) => decode_batch(&bytes[1..]),
        _ => Envelope::decode(bytes).map(|e| vec![e]),
    }
}

fn decode_batch(bytes: &[u8]) -> Result<Vec<Envelope>, DecodeError> {
    let mut at = 0usize;
    let mut take = |n: usize| -> Result<&[u8], DecodeError> {
        let end = at.checked_add(n).filter(|e| *e <= bytes.len());
        let end = end.ok_or(DecodeError::Truncated)?;
        let head = &bytes[at..end];
        at = end;
        Ok(head)
    };
    let head = take(2)?;
    let count = usize::from(u16::from_le_bytes([head[0], head[1]]));
    if count == 0 || count > MAX_BATCH {
        return Err(DecodeError::BadBatch("count"));
    }
    let mut out: Vec<Envelope> = Vec::with_capacity(count);
    for _ in 0..count {
        let len = take(4)?;
        let len = u32::from_le_bytes([len[0], len[1], len[2], len[3]]) as usize;
        let envelope = Envelope::decode(take(len)?)?;
        if !matches!(envelope.body, Body::Message { .. }) {
            return Err(DecodeError::BadBatch("a batch carries zone messages only"));
        }
        if out.first().is_some_and(|f| f.to_zone != envelope.to_zone) {
            return Err(DecodeError::BadBatch("a batch is for one zone"));
        }
        out.push(envelope);
    }
    if at != bytes.len() {
        return Err(DecodeError::BadBatch("bytes after the last envelope"));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{EnvelopeId, Origin};

    fn message(to: &str, seq: u64) -> Envelope {
        Envelope {
            id: EnvelopeId {
                sender: "tx".into(),
                epoch: 1,
                seq,
            },
            origin: Origin::Zone,
            from: "tx".into(),
            to_zone: to.into(),
            body: Body::Message {
                topic: 2,
                payload: seq.to_le_bytes().to_vec(),
                via_parent: false,
            },
        }
    }

    #[test]
    fn a_batch_round_trips_and_a_single_envelope_reads_as_one() {
        let batch: Vec<Envelope> = (1..=5).map(|s| message("rx", s)).collect();
        assert_eq!(decode_any(&encode_batch(&batch)), Ok(batch.clone()));
        assert_eq!(decode_any(&batch[0].encode()), Ok(vec![batch[0].clone()]));
    }

    #[test]
    fn every_truncation_and_every_extra_byte_is_a_typed_error() {
        let bytes = encode_batch(&[message("rx", 1), message("rx", 2)]);
        for cut in 1..bytes.len() {
            assert!(decode_any(&bytes[..cut]).is_err(), "cut at {cut}");
        }
        let mut longer = bytes.clone();
        longer.push(0);
        assert_eq!(
            decode_any(&longer),
            Err(DecodeError::BadBatch("bytes after the last envelope"))
        );
    }

    #[test]
    fn hostile_batches_are_refused() {
        assert_eq!(
            decode_any(&[BATCH_VERSION, 0, 0]),
            Err(DecodeError::BadBatch("count"))
        );
        let mut over = vec![BATCH_VERSION];
        over.extend_from_slice(&((MAX_BATCH + 1) as u16).to_le_bytes());
        assert_eq!(decode_any(&over), Err(DecodeError::BadBatch("count")));
        // A length past the end.
        let mut long = vec![BATCH_VERSION, 1, 0];
        long.extend_from_slice(&u32::MAX.to_le_bytes());
        assert_eq!(decode_any(&long), Err(DecodeError::Truncated));
        // Two zones in one batch.
        assert_eq!(
            decode_any(&encode_batch(&[message("rx", 1), message("other", 2)])),
            Err(DecodeError::BadBatch("a batch is for one zone"))
        );
        // A transfer inside a batch.
        let mut t = message("rx", 3);
        t.body = Body::Transfer(vec![1]);
        assert_eq!(
            decode_any(&encode_batch(&[message("rx", 1), t])),
            Err(DecodeError::BadBatch("a batch carries zone messages only"))
        );
    }
}
