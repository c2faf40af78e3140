//! Streaming Delta encoder: the host writes a subscriber's frame section by section straight into its
//! output buffer, splicing in update records and spawn bodies that were encoded once and shared by every
//! subscriber receiving the same change (see the replication layer).

use super::{field_bit, PosForm, FLAG_BASELINE, FLAG_CONTROL, FLAG_EVENTS, TAG_DELTA, TAG_STATE};
use crate::error::EncodeError;
use crate::limits::{MAX_DELTA_LIST, MAX_EVENTS, MAX_EVENT_PAYLOAD, MAX_SERVER_MESSAGE};
use crate::schema::{FieldValue, KindDef};
use crate::wire::{put_bytes_named, put_varint, put_zigzag32, varint_len, zigzag32};

/// The fixed part of a Delta.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DeltaHeader {
    /// Server tick of this patch.
    pub tick: u64,
    /// Last input `seq` processed for this player (0 = none).
    pub ack: u32,
    /// The client clears its known set first; such a Delta has no despawns and no updates.
    pub baseline: bool,
    /// `Some(c)` sends the CONTROL field: `c` is the controlled entity, `None` = none.
    pub control: Option<Option<u32>>,
    /// Whether an events section follows the spawns.
    pub has_events: bool,
    /// `Some(base)` writes a State (§5.8) instead of a Delta: the tick of the acknowledged state
    /// it applies to, 0 exactly when `baseline`. A State carries no events.
    pub base: Option<u64>,
}

/// A position change for an update record: the new quantized position and the one this subscriber
/// last received.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PosUpdate {
    /// New `qx`.
    pub qx: i32,
    /// New `qy`.
    pub qy: i32,
    /// `qx` this subscriber last received.
    pub last_qx: i32,
    /// `qy` this subscriber last received.
    pub last_qy: i32,
}

impl PosUpdate {
    /// True if the quantized position did not change (the record then carries no position).
    pub fn is_still(&self) -> bool {
        self.qx == self.last_qx && self.qy == self.last_qy
    }

    /// The canonical wire form (§5.5.3) for this change; `None` when the position did not change.
    pub fn canonical_form(&self, has_fields: bool) -> Option<PosForm> {
        if self.is_still() {
            return None;
        }
        let dx = i64::from(self.qx) - i64::from(self.last_qx);
        let dy = i64::from(self.qy) - i64::from(self.last_qy);
        let within = |lo: i64, hi: i64| (lo..=hi).contains(&dx) && (lo..=hi).contains(&dy);
        // Both fit i32 inside these ranges, so the casts are exact.
        if !has_fields && within(-5, 5) {
            return Some(PosForm::Tiny {
                dx: dx as i32,
                dy: dy as i32,
            });
        }
        if within(-8, 7) {
            return Some(PosForm::Nibbles {
                dx: dx as i32,
                dy: dy as i32,
            });
        }
        let abs_len = zz_len(self.qx) + zz_len(self.qy);
        if let (Ok(dx), Ok(dy)) = (i32::try_from(dx), i32::try_from(dy)) {
            if zz_len(dx) + zz_len(dy) <= abs_len {
                return Some(PosForm::Delta { dx, dy });
            }
        }
        Some(PosForm::Absolute {
            qx: self.qx,
            qy: self.qy,
        })
    }
}

fn zz_len(v: i32) -> usize {
    varint_len(u64::from(zigzag32(v)))
}

/// Appends one update record in exactly the given form: `pos` (or unchanged), then if `mask != 0` the
/// mask and `values` (the masked fields' values in ascending field order, checked against `kind`).
/// Used by [`write_update_record`] and by `Delta::encode`, which preserves a decoded record's form.
pub fn write_record_form<'v>(
    out: &mut Vec<u8>,
    pos: Option<PosForm>,
    mask: u32,
    kind: &KindDef,
    values: impl IntoIterator<Item = &'v FieldValue>,
) -> Result<(), EncodeError> {
    let start = out.len();
    let r = write_record_inner(out, pos, mask, kind, values);
    if r.is_err() {
        out.truncate(start);
    }
    r
}

fn check_mask(mask: u32, kind: &KindDef) -> Result<(), EncodeError> {
    if u64::from(mask) >> kind.fields.len().min(32) != 0 {
        return Err(EncodeError::Invalid(
            "mask names a field beyond the kind's count",
        ));
    }
    Ok(())
}

fn write_record_inner<'v>(
    out: &mut Vec<u8>,
    pos: Option<PosForm>,
    mask: u32,
    kind: &KindDef,
    values: impl IntoIterator<Item = &'v FieldValue>,
) -> Result<(), EncodeError> {
    check_mask(mask, kind)?;
    let fields_bit = if mask != 0 { 4u8 } else { 0 };
    match pos {
        Some(PosForm::Tiny { dx, dy }) => {
            if mask != 0 {
                return Err(EncodeError::Invalid("a tiny move carries no fields"));
            }
            if !(-5..=5).contains(&dx) || !(-5..=5).contains(&dy) {
                return Err(EncodeError::Invalid("tiny move out of -5..=5"));
            }
            // In range by the check above: 0..=120.
            out.push(((dx + 5) * 11 + (dy + 5)) as u8);
            return Ok(());
        }
        None => {
            if mask == 0 {
                return Err(EncodeError::Invalid("update record with nothing changed"));
            }
            out.push(0x80 | fields_bit);
        }
        Some(PosForm::Nibbles { dx, dy }) => {
            if !(-8..=7).contains(&dx) || !(-8..=7).contains(&dy) {
                return Err(EncodeError::Invalid("nibble move out of -8..=7"));
            }
            out.push(0x81 | fields_bit);
            out.push((dx as u8 & 0x0f) | ((dy as u8 & 0x0f) << 4));
        }
        Some(PosForm::Delta { dx, dy }) => {
            out.push(0x82 | fields_bit);
            put_zigzag32(out, dx);
            put_zigzag32(out, dy);
        }
        Some(PosForm::Absolute { qx, qy }) => {
            out.push(0x83 | fields_bit);
            put_zigzag32(out, qx);
            put_zigzag32(out, qy);
        }
    }
    if mask != 0 {
        put_varint(out, u64::from(mask));
        let mut values = values.into_iter();
        for (i, f) in kind.fields.iter().enumerate() {
            if mask & field_bit(i) != 0 {
                let v = values
                    .next()
                    .ok_or(EncodeError::Invalid("fewer values than mask bits"))?;
                f.ty.encode_value(v, out)?;
            }
        }
        if values.next().is_some() {
            return Err(EncodeError::Invalid("more values than mask bits"));
        }
    }
    Ok(())
}

/// Appends one update record in canonical form (§5.5.3). `values` are the entity's full current field
/// values (one per field of `kind`); only those named by `mask` are written. A still position (`pos`
/// equal to the last one sent) is sent as "unchanged"; a record with no position change and an empty
/// mask is an error — such an entity has no update to send.
pub fn write_update_record(
    out: &mut Vec<u8>,
    pos: Option<PosUpdate>,
    mask: u32,
    kind: &KindDef,
    values: &[FieldValue],
) -> Result<(), EncodeError> {
    if values.len() != kind.fields.len() {
        return Err(EncodeError::Invalid(
            "values do not match the kind's fields",
        ));
    }
    check_mask(mask, kind)?;
    let form = pos.and_then(|p| p.canonical_form(mask != 0));
    let masked = values
        .iter()
        .enumerate()
        .filter(|(i, _)| mask & field_bit(*i) != 0)
        .map(|(_, v)| v);
    write_record_form(out, form, mask, kind, masked)
}

/// Appends a spawn body (§5.5.4, everything after the id): kind index, absolute position, then every
/// field of the kind in order.
pub fn write_spawn_body(
    out: &mut Vec<u8>,
    kind_index: u32,
    kind: &KindDef,
    qx: i32,
    qy: i32,
    values: &[FieldValue],
) -> Result<(), EncodeError> {
    if values.len() != kind.fields.len() {
        return Err(EncodeError::Invalid(
            "values do not match the kind's fields",
        ));
    }
    let start = out.len();
    put_varint(out, u64::from(kind_index));
    put_zigzag32(out, qx);
    put_zigzag32(out, qy);
    for (f, v) in kind.fields.iter().zip(values) {
        if let Err(e) = f.ty.encode_value(v, out) {
            out.truncate(start);
            return Err(e);
        }
    }
    Ok(())
}

/// Bytes of the gap-coded form of an ascending index list (mode byte excluded).
fn gaps_len(indices: &[u32]) -> usize {
    let mut prev: Option<u32> = None;
    let mut n = 0;
    for &i in indices {
        let g = match prev {
            None => i,
            Some(p) => i - p - 1,
        };
        n += varint_len(u64::from(g));
        prev = Some(i);
    }
    n
}

/// Appends a strictly ascending id list in gap coding (§5.5.1), which the caller has validated.
fn put_gap(out: &mut Vec<u8>, prev: Option<u32>, v: u32) {
    let g = match prev {
        None => v,
        Some(p) => v - p - 1,
    };
    put_varint(out, u64::from(g));
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Stage {
    Despawns,
    Updates,
    Spawns,
    Events,
    Done,
}

/// Writes one Delta into `out`, section by section in wire order: [`despawns`](Self::despawns),
/// [`updates`](Self::updates), [`spawns`](Self::spawns), then [`events`](Self::events) only if the
/// header said so, then [`finish`](Self::finish). Every section must be written (possibly empty).
///
/// On any error the writer truncates `out` back to where the message began and refuses further calls,
/// so a failed frame never leaves half a message behind.
#[derive(Debug)]
pub struct DeltaWriter<'a> {
    out: &'a mut Vec<u8>,
    start: usize,
    stage: Stage,
    baseline: bool,
    has_events: bool,
    failed: bool,
    /// A header a decoder would refuse (a State with events, or whose base and BASELINE disagree),
    /// reported by the first section written.
    header_error: Option<&'static str>,
}

/// Why a State header (§5.8) is invalid, if it is.
pub(crate) fn state_header_error(
    base: Option<u64>,
    baseline: bool,
    events: bool,
) -> Option<&'static str> {
    match base {
        None => None,
        Some(_) if events => Some("a State carries no events"),
        Some(b) if (b == 0) != baseline => {
            Some("a State's base is 0 exactly when it is a BASELINE")
        }
        Some(_) => None,
    }
}

impl<'a> DeltaWriter<'a> {
    /// Appends the tag and header. The control id is sent as `id + 1` (a varint of up to 2^32).
    pub fn new(out: &'a mut Vec<u8>, h: &DeltaHeader) -> Self {
        let start = out.len();
        out.push(if h.base.is_some() {
            TAG_STATE
        } else {
            TAG_DELTA
        });
        put_varint(out, h.tick);
        if let Some(base) = h.base {
            put_varint(out, base);
        }
        put_varint(out, u64::from(h.ack));
        let mut flags = 0;
        if h.baseline {
            flags |= FLAG_BASELINE;
        }
        if h.control.is_some() {
            flags |= FLAG_CONTROL;
        }
        if h.has_events {
            flags |= FLAG_EVENTS;
        }
        out.push(flags);
        if let Some(c) = h.control {
            put_varint(out, c.map_or(0, |id| u64::from(id) + 1));
        }
        DeltaWriter {
            out,
            start,
            stage: Stage::Despawns,
            baseline: h.baseline,
            has_events: h.has_events,
            failed: false,
            header_error: state_header_error(h.base, h.baseline, h.has_events),
        }
    }

    fn fail(&mut self, e: EncodeError) -> EncodeError {
        self.out.truncate(self.start);
        self.failed = true;
        e
    }

    fn enter(&mut self, stage: Stage) -> Result<(), EncodeError> {
        if self.failed {
            return Err(EncodeError::Invalid("delta writer already failed"));
        }
        if let Some(e) = self.header_error {
            return Err(self.fail(EncodeError::Invalid(e)));
        }
        if self.stage != stage {
            return Err(self.fail(EncodeError::Invalid("delta sections written out of order")));
        }
        Ok(())
    }

    fn check_count(&mut self, what: &'static str, n: usize, max: usize) -> Result<(), EncodeError> {
        if n > max {
            return Err(self.fail(EncodeError::TooLong {
                what,
                len: n as u64,
                max: max as u64,
            }));
        }
        Ok(())
    }

    /// Writes the despawned ids, strictly ascending (they must be in the client's known set).
    pub fn despawns(&mut self, ids: &[u32]) -> Result<(), EncodeError> {
        self.enter(Stage::Despawns)?;
        self.check_count("despawns", ids.len(), MAX_DELTA_LIST)?;
        if self.baseline && !ids.is_empty() {
            return Err(self.fail(EncodeError::Invalid("a baseline Delta has no despawns")));
        }
        if ids.windows(2).any(|w| w[0] >= w[1]) {
            return Err(self.fail(EncodeError::Invalid("despawn ids not strictly ascending")));
        }
        put_varint(self.out, ids.len() as u64);
        let mut prev = None;
        for &id in ids {
            put_gap(self.out, prev, id);
            prev = Some(id);
        }
        self.stage = Stage::Updates;
        Ok(())
    }

    /// Writes the updates: `indices` strictly ascending into the known set after the despawns (whose
    /// length is `known_len`), and `records` the concatenated update records in the same order. The
    /// index set takes the shorter of gap and bitset coding (ties: gaps).
    pub fn updates(
        &mut self,
        known_len: u32,
        indices: &[u32],
        records: &[u8],
    ) -> Result<(), EncodeError> {
        self.enter(Stage::Updates)?;
        self.check_count("updates", indices.len(), MAX_DELTA_LIST)?;
        if self.baseline && !indices.is_empty() {
            return Err(self.fail(EncodeError::Invalid("a baseline Delta has no updates")));
        }
        if indices.windows(2).any(|w| w[0] >= w[1]) {
            return Err(self.fail(EncodeError::Invalid(
                "update indices not strictly ascending",
            )));
        }
        if indices.is_empty() != records.is_empty() {
            return Err(self.fail(EncodeError::Invalid(
                "update records do not match the indices",
            )));
        }
        put_varint(self.out, indices.len() as u64);
        if let Some(&last) = indices.last() {
            if last >= known_len {
                return Err(self.fail(EncodeError::Invalid("update index beyond the known set")));
            }
            let gaps = gaps_len(indices);
            let l = last as usize / 8 + 1;
            if varint_len(l as u64) + l < gaps {
                self.out.push(1);
                put_varint(self.out, l as u64);
                let base = self.out.len();
                self.out.resize(base + l, 0);
                for &i in indices {
                    if let Some(b) = self.out.get_mut(base + i as usize / 8) {
                        *b |= 1 << (i % 8);
                    }
                }
            } else {
                self.out.push(0);
                let mut prev = None;
                for &i in indices {
                    put_gap(self.out, prev, i);
                    prev = Some(i);
                }
            }
            self.out.extend_from_slice(records);
        }
        self.stage = Stage::Spawns;
        Ok(())
    }

    /// Writes the spawns: `(id, body)` pairs with ids strictly ascending and not in the known set after
    /// the despawns; each body from [`write_spawn_body`].
    pub fn spawns<'b>(
        &mut self,
        items: impl ExactSizeIterator<Item = (u32, &'b [u8])>,
    ) -> Result<(), EncodeError> {
        self.enter(Stage::Spawns)?;
        let n = items.len();
        self.check_count("spawns", n, MAX_DELTA_LIST)?;
        put_varint(self.out, n as u64);
        let mut prev: Option<u32> = None;
        let mut written = 0usize;
        for (id, body) in items {
            if prev.is_some_and(|p| p >= id) {
                return Err(self.fail(EncodeError::Invalid("spawn ids not strictly ascending")));
            }
            put_gap(self.out, prev, id);
            self.out.extend_from_slice(body);
            prev = Some(id);
            written += 1;
        }
        if written != n {
            return Err(self.fail(EncodeError::Invalid("spawn iterator length was wrong")));
        }
        self.stage = if self.has_events {
            Stage::Events
        } else {
            Stage::Done
        };
        Ok(())
    }

    /// Writes the events section (only when the header set `has_events`): `(topic, payload)` pairs.
    pub fn events<'b>(
        &mut self,
        events: impl ExactSizeIterator<Item = (u16, &'b [u8])>,
    ) -> Result<(), EncodeError> {
        self.enter(Stage::Events)?;
        let n = events.len();
        self.check_count("events", n, MAX_EVENTS)?;
        put_varint(self.out, n as u64);
        let mut written = 0usize;
        for (topic, payload) in events {
            put_varint(self.out, u64::from(topic));
            if let Err(e) = put_bytes_named(self.out, "event payload", payload, MAX_EVENT_PAYLOAD) {
                return Err(self.fail(e));
            }
            written += 1;
        }
        if written != n {
            return Err(self.fail(EncodeError::Invalid("event iterator length was wrong")));
        }
        self.stage = Stage::Done;
        Ok(())
    }

    /// Checks every section came and the message is within [`MAX_SERVER_MESSAGE`]; returns its length.
    pub fn finish(mut self) -> Result<usize, EncodeError> {
        self.enter(Stage::Done)?;
        let len = self.out.len() - self.start;
        if len > MAX_SERVER_MESSAGE {
            return Err(self.fail(EncodeError::TooLong {
                what: "server message",
                len: len as u64,
                max: MAX_SERVER_MESSAGE as u64,
            }));
        }
        Ok(len)
    }
}

#[cfg(test)]
#[path = "write_tests.rs"]
mod tests;
