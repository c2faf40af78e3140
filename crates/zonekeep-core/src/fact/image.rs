//! A fact book's part of a zone image ([`crate::image`]): every field, so a zone restored from
//! its image re-sends the same facts under the same keys.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use zonekeep_protocol::error::DecodeError;
use zonekeep_protocol::wire::{put_varint, Reader};

use super::{Fact, FactBook, FactKey, FactLimits, FactOutcome, Settlement};

/// The longest text an image holds: the reader's lengths are `u32`, and each is checked against
/// the bytes present before anything is copied.
const MAX_IMAGE_TEXT: usize = u32::MAX as usize;

/// Appends `s` as the protocol's `string`: varint byte length, then the UTF-8 bytes. No limit
/// applies to text the host itself holds; one longer than [`MAX_IMAGE_TEXT`] would make a length
/// the reader refuses, never one it misreads.
pub(crate) fn put_text(out: &mut Vec<u8>, s: &str) {
    put_varint(out, s.len() as u64);
    out.extend_from_slice(s.as_bytes());
}

/// Appends `v` as JSON text. Serializing a JSON value cannot fail; were it to, the empty text
/// written is not JSON, so the image is refused on reading rather than misread.
pub(crate) fn put_json(out: &mut Vec<u8>, v: &serde_json::Value) {
    put_text(out, &serde_json::to_string(v).unwrap_or_default());
}

/// Reads what [`put_text`] wrote.
pub(crate) fn get_text(r: &mut Reader<'_>) -> Result<String, DecodeError> {
    Ok(r.str(MAX_IMAGE_TEXT)?.to_owned())
}

/// Reads what [`put_json`] wrote; text that is not JSON is refused.
pub(crate) fn get_json(r: &mut Reader<'_>) -> Result<serde_json::Value, DecodeError> {
    serde_json::from_str(r.str(MAX_IMAGE_TEXT)?)
        .map_err(|_| DecodeError::Invalid("a fact image holds text that is not JSON"))
}

/// The fewest bytes an in-flight fact takes in an image (order, empty key and kind, principal
/// flag, a one-character payload with its length, tick): what bounds the count against the
/// input before reserving.
const MIN_IMAGE_FACT: usize = 7;

impl FactBook {
    /// Appends the book's part of a zone image, every field: `str zone_id`, then `varint`
    /// `boot_epoch`, `counter`, `capacity`, `next_order`, `overflowed` and
    /// `unknown_settlements`; `varint F` and the in-flight facts by emission order, each
    /// `varint order`, `str key`, `str kind`, `u8 0` or `u8 1, str principal`, `str payload`
    /// (JSON text) and `varint tick`; `varint U` and the unsent orders, oldest first; `varint S`
    /// and the queued settlements, each `str key` then `u8 0, str result` (JSON text) or
    /// `u8 1, str reason`. `by_key` is not written: it is the in-flight keys.
    ///
    /// JSON text keeps every value exactly except possibly a float's last bit: serde_json reads
    /// floats back exactly only with its `float_roundtrip` feature.
    pub(crate) fn put_image(&self, out: &mut Vec<u8>) {
        put_text(out, &self.zone_id);
        for v in [
            self.boot_epoch,
            self.counter,
            self.capacity as u64,
            self.next_order,
            self.overflowed,
            self.unknown_settlements,
        ] {
            put_varint(out, v);
        }
        put_varint(out, self.in_flight.len() as u64);
        for (&order, fact) in &self.in_flight {
            put_varint(out, order);
            put_text(out, fact.key.as_str());
            put_text(out, &fact.kind);
            match &fact.principal {
                None => out.push(0),
                Some(p) => {
                    out.push(1);
                    put_text(out, p);
                }
            }
            put_json(out, &fact.payload);
            put_varint(out, fact.tick);
        }
        put_varint(out, self.unsent.len() as u64);
        for &order in &self.unsent {
            put_varint(out, order);
        }
        put_varint(out, self.settlements.len() as u64);
        for s in &self.settlements {
            put_text(out, s.key.as_str());
            match &s.outcome {
                FactOutcome::Ok(result) => {
                    out.push(0);
                    put_json(out, result);
                }
                FactOutcome::Refused(reason) => {
                    out.push(1);
                    put_text(out, reason);
                }
            }
        }
    }

    /// Reads what [`FactBook::put_image`] wrote. Refused: in-flight or unsent orders not
    /// strictly ascending or not below `next_order`, a key in flight twice, and a queued
    /// settlement whose key is not in flight or is queued twice (the book drops those on
    /// arrival, so it never holds one).
    pub(crate) fn get_image(r: &mut Reader<'_>) -> Result<FactBook, DecodeError> {
        let zone_id = get_text(r)?;
        let boot_epoch = r.varint_u64()?;
        let counter = r.varint_u64()?;
        let capacity = usize::try_from(r.varint_u64()?).map_err(|_| DecodeError::Overflow)?;
        let next_order = r.varint_u64()?;
        let overflowed = r.varint_u64()?;
        let unknown_settlements = r.varint_u64()?;

        let n = r.count("facts in flight", r.remaining() / MIN_IMAGE_FACT)?;
        let mut in_flight = BTreeMap::new();
        let mut by_key = BTreeMap::new();
        let mut last = None;
        for _ in 0..n {
            let order = r.varint_u64()?;
            if last.is_some_and(|l| l >= order) || order >= next_order {
                return Err(DecodeError::Invalid("fact orders out of sequence"));
            }
            last = Some(order);
            let key = FactKey(get_text(r)?);
            let kind = get_text(r)?;
            let principal = match r.u8()? {
                0 => None,
                1 => Some(get_text(r)?),
                _ => {
                    return Err(DecodeError::Invalid(
                        "fact principal flag other than 0 or 1",
                    ))
                }
            };
            let payload = get_json(r)?;
            let tick = r.varint_u64()?;
            if by_key.insert(key.clone(), order).is_some() {
                return Err(DecodeError::Invalid("a fact key in flight twice"));
            }
            in_flight.insert(
                order,
                Fact {
                    key,
                    kind,
                    payload,
                    principal,
                    tick,
                },
            );
        }

        let n = r.count("unsent facts", r.remaining())?;
        let mut unsent = VecDeque::with_capacity(n);
        for _ in 0..n {
            let order = r.varint_u64()?;
            if unsent.back().is_some_and(|&l| l >= order) || order >= next_order {
                return Err(DecodeError::Invalid("unsent fact orders out of sequence"));
            }
            unsent.push_back(order);
        }

        // A settlement takes at least a key length, an outcome byte and a text length.
        let n = r.count("settlements", r.remaining() / 3)?;
        let mut settlements = VecDeque::with_capacity(n);
        let mut queued = BTreeSet::new();
        for _ in 0..n {
            let key = FactKey(get_text(r)?);
            let outcome = match r.u8()? {
                0 => FactOutcome::Ok(get_json(r)?),
                1 => FactOutcome::Refused(get_text(r)?),
                _ => return Err(DecodeError::Invalid("unknown settlement outcome")),
            };
            if !by_key.contains_key(&key) || !queued.insert(key.clone()) {
                return Err(DecodeError::Invalid(
                    "a queued settlement for a fact not in flight, or queued twice",
                ));
            }
            settlements.push_back(Settlement { key, outcome });
        }
        Ok(FactBook {
            zone_id,
            boot_epoch,
            counter,
            capacity,
            in_flight,
            by_key,
            next_order,
            unsent,
            settlements,
            overflowed,
            unknown_settlements,
            limits: FactLimits::default(),
            window: (0, 0),
            refused: crate::report::FactRefusals::default(),
        })
    }
}
