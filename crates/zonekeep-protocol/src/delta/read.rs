//! Delta decoding against the client's known set (PROTOCOL.md §5.5) and the owned [`Delta`] value, whose
//! [`Delta::encode`] re-emits a decoded Delta byte for byte when its index set used the canonical form.

use super::write::state_header_error;
use super::write::{write_record_form, write_spawn_body, DeltaHeader, DeltaWriter};
use super::{field_bit, PosForm, FLAG_BASELINE, FLAG_CONTROL, FLAG_EVENTS, TAG_DELTA, TAG_STATE};
use crate::error::{DecodeError, EncodeError};
use crate::limits::{MAX_DELTA_LIST, MAX_EVENTS, MAX_EVENT_PAYLOAD, MAX_SERVER_MESSAGE};
use crate::schema::{FieldValue, KindDef, Schema};
use crate::wire::Reader;

/// An update of an entity the client already knows.
#[derive(Debug, Clone, PartialEq)]
pub struct Update {
    /// Index in the known set after the despawns.
    pub index: u32,
    /// The entity id that index names (resolved by the decoder).
    pub id: u32,
    /// The position change in its exact wire form, or `None` if the position did not change.
    pub pos: Option<PosForm>,
    /// Changed-field mask (bit `i` = field `i`); 0 when only the position changed.
    pub mask: u32,
    /// `(field index, new value)` for every bit of `mask`, ascending.
    pub fields: Vec<(u8, FieldValue)>,
}

/// An entity entering the view, with full state.
#[derive(Debug, Clone, PartialEq)]
pub struct Spawn {
    /// Entity id.
    pub id: u32,
    /// Index of its kind in the schema.
    pub kind: u32,
    /// Quantized x.
    pub qx: i32,
    /// Quantized y.
    pub qy: i32,
    /// Every field of the kind, in order.
    pub fields: Vec<FieldValue>,
}

/// A zone event for this subscriber.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    /// Game-defined topic.
    pub topic: u16,
    /// Opaque payload (≤ 16 KiB).
    pub payload: Vec<u8>,
}

/// A decoded Delta.
#[derive(Debug, Clone, PartialEq)]
pub struct Delta {
    /// Server tick of this patch.
    pub tick: u64,
    /// Last input `seq` processed (0 = none).
    pub ack: u32,
    /// Clear the known set first.
    pub baseline: bool,
    /// `Some(c)` if the CONTROL field was present; `c` is the controlled entity (`None` = none).
    pub control: Option<Option<u32>>,
    /// Ids removed, ascending.
    pub despawns: Vec<u32>,
    /// Updates, by ascending index.
    pub updates: Vec<Update>,
    /// Spawns, by ascending id.
    pub spawns: Vec<Spawn>,
    /// Events, if the EVENTS flag was set.
    pub events: Option<Vec<Event>>,
    /// `Some(base)` for a State (§5.8): the tick of the state it applies to (0 = the empty state,
    /// exactly when `baseline`); `None` for a Delta, which applies to the previous one.
    pub base: Option<u64>,
}

fn invalid(msg: &'static str) -> DecodeError {
    DecodeError::Invalid(msg)
}

fn check_known(known: &[(u32, u32)]) -> Result<(), &'static str> {
    if known.windows(2).any(|w| w[0].0 >= w[1].0) {
        return Err("known set not strictly ascending by id");
    }
    Ok(())
}

/// Reads a gap-coded strictly ascending list element (§5.5.1).
fn next_gap(r: &mut Reader, prev: Option<u32>) -> Result<u32, DecodeError> {
    let g = r.varint_u32()?;
    match prev {
        None => Ok(g),
        Some(p) => p
            .checked_add(g)
            .and_then(|v| v.checked_add(1))
            .ok_or(invalid("id or index beyond u32")),
    }
}

/// Reads the update index set (§5.5.2) for `n > 0` updates over a known set of `known_len`.
fn read_index_set(r: &mut Reader, n: usize, known_len: usize) -> Result<Vec<u32>, DecodeError> {
    if n > known_len {
        return Err(invalid("more updates than known entities"));
    }
    let mut out = Vec::with_capacity(n);
    match r.u8()? {
        0 => {
            let mut prev = None;
            for _ in 0..n {
                let i = next_gap(r, prev)?;
                if i as usize >= known_len {
                    return Err(invalid("update index beyond the known set"));
                }
                out.push(i);
                prev = Some(i);
            }
        }
        1 => {
            let l = r.count("update bitset", known_len.div_ceil(8))?;
            let bytes = r.take(l)?;
            for (j, &b) in bytes.iter().enumerate() {
                for bit in 0..8 {
                    if b & (1 << bit) != 0 {
                        let i = j * 8 + bit;
                        if i >= known_len {
                            return Err(invalid("update bit beyond the known set"));
                        }
                        if out.len() == n {
                            return Err(invalid("more update bits than the update count"));
                        }
                        out.push(i as u32);
                    }
                }
            }
            if out.len() != n {
                return Err(invalid("fewer update bits than the update count"));
            }
        }
        _ => return Err(invalid("unknown update index mode")),
    }
    Ok(out)
}

/// A decoded update record: position form, mask, masked field values.
type Record = (Option<PosForm>, u32, Vec<(u8, FieldValue)>);

/// Reads one update record (§5.5.3) for an entity of `kind`.
fn read_record(r: &mut Reader, kind: &KindDef) -> Result<Record, DecodeError> {
    let h = r.u8()?;
    if h & 0x80 == 0 {
        if h > 120 {
            return Err(invalid("tiny move header above 120"));
        }
        let dx = i32::from(h / 11) - 5;
        let dy = i32::from(h % 11) - 5;
        return Ok((Some(PosForm::Tiny { dx, dy }), 0, Vec::new()));
    }
    if h & 0x78 != 0 {
        return Err(invalid("reserved update header bits set"));
    }
    if h == 0x80 {
        return Err(invalid("update record with nothing changed"));
    }
    let pos = match h & 3 {
        0 => None,
        1 => {
            let b = r.u8()?;
            // Sign-extend each 4-bit two's complement nibble.
            let dx = i32::from(((b << 4) as i8) >> 4);
            let dy = i32::from((b as i8) >> 4);
            Some(PosForm::Nibbles { dx, dy })
        }
        2 => {
            let dx = r.zigzag32()?;
            Some(PosForm::Delta {
                dx,
                dy: r.zigzag32()?,
            })
        }
        _ => {
            let qx = r.zigzag32()?;
            Some(PosForm::Absolute {
                qx,
                qy: r.zigzag32()?,
            })
        }
    };
    let mut fields = Vec::new();
    let mut mask = 0;
    if h & 4 != 0 {
        mask = r.varint_u32()?;
        if mask == 0 {
            return Err(invalid("empty field mask"));
        }
        if u64::from(mask) >> kind.fields.len().min(32) != 0 {
            return Err(invalid("mask names a field beyond the kind's count"));
        }
        fields.reserve(mask.count_ones() as usize);
        for (i, f) in kind.fields.iter().enumerate().take(32) {
            if mask & field_bit(i) != 0 {
                // i < 32 by the `take`, so it fits a u8.
                fields.push((i as u8, f.ty.decode_value(r)?));
            }
        }
    }
    Ok((pos, mask, fields))
}

/// The fixed start of a Delta message: what a client that keeps no replica (a load bot) reads,
/// with the same code [`decode_delta`] starts with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DeltaHead {
    /// Server tick of this patch.
    pub tick: u64,
    /// Last input `seq` processed (0 = none).
    pub ack: u32,
    /// The flags byte (BASELINE, CONTROL, EVENTS), checked for unknown bits.
    pub flags: u8,
    /// A State's base tick (§5.8); `None` for a Delta.
    pub base: Option<u64>,
}

/// Reads the tag, tick, base (a State's), ack and flags of a Delta or State message, leaving `r`
/// at the rest.
fn read_head(r: &mut Reader<'_>) -> Result<DeltaHead, DecodeError> {
    let tag = r.u8()?;
    if tag != TAG_DELTA && tag != TAG_STATE {
        return Err(DecodeError::UnknownTag(tag));
    }
    let tick = r.varint_u64()?;
    let base = if tag == TAG_STATE {
        Some(r.varint_u64()?)
    } else {
        None
    };
    let ack = r.varint_u32()?;
    let flags = r.u8()?;
    if flags & !(FLAG_BASELINE | FLAG_CONTROL | FLAG_EVENTS) != 0 {
        return Err(invalid("unknown Delta flag bits"));
    }
    let (baseline, events) = (flags & FLAG_BASELINE != 0, flags & FLAG_EVENTS != 0);
    if let Some(e) = state_header_error(base, baseline, events) {
        return Err(invalid(e));
    }
    Ok(DeltaHead {
        tick,
        ack,
        flags,
        base,
    })
}

/// Decodes only the fixed start of a Delta or State message (tag included); see [`DeltaHead`].
pub fn decode_delta_head(bytes: &[u8]) -> Result<DeltaHead, DecodeError> {
    read_head(&mut Reader::new(bytes))
}

/// Decodes a Delta or State message (tag included). `known` is the client's known set BEFORE this Delta:
/// `(id, kind)` pairs strictly ascending by id. The decoder applies the despawns to resolve update
/// indices to ids and kinds and checks every rule of §5.5: despawned ids known, indices in range,
/// spawned ids new, kinds and field values valid for `schema`.
pub fn decode_delta(
    bytes: &[u8],
    schema: &Schema,
    known: &[(u32, u32)],
) -> Result<Delta, DecodeError> {
    if bytes.len() > MAX_SERVER_MESSAGE {
        return Err(DecodeError::TooLong {
            what: "server message",
            len: bytes.len() as u64,
            max: MAX_SERVER_MESSAGE as u64,
        });
    }
    check_known(known).map_err(invalid)?;
    let mut r = Reader::new(bytes);
    let DeltaHead {
        tick,
        ack,
        flags,
        base,
    } = read_head(&mut r)?;
    let baseline = flags & FLAG_BASELINE != 0;
    let control = if flags & FLAG_CONTROL != 0 {
        let c = r.varint_u64()?;
        if c > 1 << 32 {
            return Err(DecodeError::Overflow);
        }
        Some(c.checked_sub(1).map(|id| id as u32))
    } else {
        None
    };
    let known: &[(u32, u32)] = if baseline { &[] } else { known };

    // Despawns, remembering where each sits in the known set to resolve update indices.
    let nd = r.count("despawns", MAX_DELTA_LIST)?;
    if baseline && nd > 0 {
        return Err(invalid("a baseline Delta has no despawns"));
    }
    if nd > known.len() {
        return Err(invalid("more despawns than known entities"));
    }
    let mut despawns = Vec::with_capacity(nd);
    let mut despawn_pos = Vec::with_capacity(nd);
    let mut prev = None;
    for _ in 0..nd {
        let id = next_gap(&mut r, prev)?;
        let p = known
            .binary_search_by_key(&id, |e| e.0)
            .map_err(|_| invalid("despawned id not in the known set"))?;
        despawns.push(id);
        despawn_pos.push(p);
        prev = Some(id);
    }
    let known_len = known.len() - nd;

    // Updates.
    let nu = r.count("updates", MAX_DELTA_LIST)?;
    if baseline && nu > 0 {
        return Err(invalid("a baseline Delta has no updates"));
    }
    let mut updates = Vec::new();
    if nu > 0 {
        let indices = read_index_set(&mut r, nu, known_len)?;
        updates.reserve(nu);
        let mut skipped = 0usize;
        for index in indices {
            // Map the post-despawn index to the position in `known`, stepping over despawned slots
            // (both lists ascend, so one forward walk suffices).
            let mut p = index as usize + skipped;
            while despawn_pos.get(skipped).is_some_and(|&d| d <= p) {
                skipped += 1;
                p = index as usize + skipped;
            }
            let &(id, kind_index) = known
                .get(p)
                .ok_or(invalid("update index beyond the known set"))?;
            let kind = schema
                .kind(kind_index)
                .ok_or(invalid("known entity has a kind the schema lacks"))?;
            let (pos, mask, fields) = read_record(&mut r, kind)?;
            updates.push(Update {
                index,
                id,
                pos,
                mask,
                fields,
            });
        }
    }

    // Spawns.
    let ns = r.count("spawns", MAX_DELTA_LIST)?;
    let mut spawns = Vec::with_capacity(ns.min(r.remaining()));
    let mut prev = None;
    for _ in 0..ns {
        let id = next_gap(&mut r, prev)?;
        prev = Some(id);
        if known.binary_search_by_key(&id, |e| e.0).is_ok() && despawns.binary_search(&id).is_err()
        {
            return Err(invalid("spawned id already in the known set"));
        }
        let kind = r.varint_u32()?;
        let kd = schema
            .kind(kind)
            .ok_or(invalid("spawn kind not in the schema"))?;
        let qx = r.zigzag32()?;
        let qy = r.zigzag32()?;
        let mut fields = Vec::with_capacity(kd.fields.len());
        for f in &kd.fields {
            fields.push(f.ty.decode_value(&mut r)?);
        }
        spawns.push(Spawn {
            id,
            kind,
            qx,
            qy,
            fields,
        });
    }

    // Events.
    let events = if flags & FLAG_EVENTS != 0 {
        let ne = r.count("events", MAX_EVENTS)?;
        let mut ev = Vec::with_capacity(ne.min(r.remaining()));
        for _ in 0..ne {
            let topic = r.varint_u16()?;
            let payload = r.bytes_named("event payload", MAX_EVENT_PAYLOAD)?.to_vec();
            ev.push(Event { topic, payload });
        }
        Some(ev)
    } else {
        None
    };
    r.finish()?;
    Ok(Delta {
        base,
        tick,
        ack,
        baseline,
        control,
        despawns,
        updates,
        spawns,
        events,
    })
}

impl Delta {
    /// The header this Delta is written with.
    pub fn header(&self) -> DeltaHeader {
        DeltaHeader {
            tick: self.tick,
            ack: self.ack,
            baseline: self.baseline,
            control: self.control,
            has_events: self.events.is_some(),
            base: self.base,
        }
    }

    /// Appends this Delta's bytes, built on [`DeltaWriter`], after checking it against `schema` and the
    /// known set before it (the same rules the decoder enforces; an update's `id` must be the entity at
    /// its `index`). Position forms are kept as given, so a decoded Delta re-encodes to its own bytes
    /// whenever its update index set used the shorter form (which every conforming encoder emits).
    /// On error `out` is left as it was.
    pub fn encode(
        &self,
        schema: &Schema,
        known: &[(u32, u32)],
        out: &mut Vec<u8>,
    ) -> Result<usize, EncodeError> {
        let start = out.len();
        let r = self.encode_inner(schema, known, out);
        if r.is_err() {
            out.truncate(start);
        }
        r
    }

    fn encode_inner(
        &self,
        schema: &Schema,
        known: &[(u32, u32)],
        out: &mut Vec<u8>,
    ) -> Result<usize, EncodeError> {
        check_known(known).map_err(EncodeError::Invalid)?;
        let known: &[(u32, u32)] = if self.baseline { &[] } else { known };
        for id in &self.despawns {
            if known.binary_search_by_key(id, |e| e.0).is_err() {
                return Err(EncodeError::Invalid("despawned id not in the known set"));
            }
        }
        let after: Vec<(u32, u32)> = known
            .iter()
            .filter(|e| self.despawns.binary_search(&e.0).is_err())
            .copied()
            .collect();

        let mut records = Vec::new();
        let mut indices = Vec::with_capacity(self.updates.len());
        for u in &self.updates {
            let &(id, kind_index) = after
                .get(u.index as usize)
                .ok_or(EncodeError::Invalid("update index beyond the known set"))?;
            if id != u.id {
                return Err(EncodeError::Invalid(
                    "update id is not the entity at its index",
                ));
            }
            let kind = schema.kind(kind_index).ok_or(EncodeError::Invalid(
                "known entity has a kind the schema lacks",
            ))?;
            let mut mask_from_fields = 0u32;
            let mut prev: Option<u8> = None;
            for (i, _) in &u.fields {
                if prev.is_some_and(|p| p >= *i) || *i >= 32 {
                    return Err(EncodeError::Invalid("update fields not strictly ascending"));
                }
                mask_from_fields |= 1 << i;
                prev = Some(*i);
            }
            if mask_from_fields != u.mask {
                return Err(EncodeError::Invalid("update fields do not match the mask"));
            }
            write_record_form(
                &mut records,
                u.pos,
                u.mask,
                kind,
                u.fields.iter().map(|(_, v)| v),
            )?;
            indices.push(u.index);
        }

        let mut bodies = Vec::new();
        let mut ranges = Vec::with_capacity(self.spawns.len());
        for s in &self.spawns {
            if after.binary_search_by_key(&s.id, |e| e.0).is_ok() {
                return Err(EncodeError::Invalid("spawned id already in the known set"));
            }
            let kind = schema
                .kind(s.kind)
                .ok_or(EncodeError::Invalid("spawn kind not in the schema"))?;
            let b = bodies.len();
            write_spawn_body(&mut bodies, s.kind, kind, s.qx, s.qy, &s.fields)?;
            ranges.push((s.id, b, bodies.len()));
        }

        let mut w = DeltaWriter::new(out, &self.header());
        w.despawns(&self.despawns)?;
        let known_len =
            u32::try_from(after.len()).map_err(|_| EncodeError::Invalid("known set too large"))?;
        w.updates(known_len, &indices, &records)?;
        w.spawns(
            ranges
                .iter()
                .map(|&(id, a, b)| (id, bodies.get(a..b).unwrap_or(&[]))),
        )?;
        if let Some(ev) = &self.events {
            w.events(ev.iter().map(|e| (e.topic, e.payload.as_slice())))?;
        }
        w.finish()
    }
}

#[cfg(test)]
#[path = "read_tests.rs"]
mod tests;
