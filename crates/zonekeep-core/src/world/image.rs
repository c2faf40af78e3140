//! The world's part of a zone image: every field of [`World`], bit-exact, so a world read back
//! behaves exactly as the one written (same hash, same ranks, same ids to come, same compactions).
//!
//! # Format
//!
//! The schema in its Welcome wire form ([`Schema::encode`]: `pos_step`, then the kinds), then
//! `varint next_id`, `varint version`, `varint layout`, `varint dead`, `varint R` and `R` rows in
//! column order, tombstones included. A row is `varint id`, `f32 x`, `f32 y` (bit patterns),
//! `zigzag qx`, `zigzag qy`, `u8 flags`, `varint kind`, `varint last_change`, `varint N`, then `N`
//! field values in their wire form ([`FieldType::encode_value`]) and `N` `varint` change stamps.
//! `N` is the kind's field count for a live row and 0 for a tombstone.
//!
//! [`FieldType::encode_value`]: zonekeep_protocol::schema::FieldType::encode_value
//!
//! The id map is not written: it is a function of the live rows and `next_id`
//! ([`IdMap::rebuild`]).

use super::{IdMap, World, COMPACT_MIN};
use crate::interest::{ALIVE, GLOBAL};
use zonekeep_protocol::error::{DecodeError, EncodeError};
use zonekeep_protocol::limits::MAX_FIELDS;
use zonekeep_protocol::schema::{FieldValue, Schema};
use zonekeep_protocol::wire::{put_f32, put_varint, put_zigzag32, Reader};

/// The fewest bytes a row takes (one-byte varints, two `f32`s, no values): what bounds the row
/// count against the input before anything is reserved.
const MIN_ROW_BYTES: usize = 15;

impl World {
    /// Appends the world's image (see the [module docs](self)).
    ///
    /// Every kind and value was checked when it entered the world, so the protocol's encoders
    /// cannot refuse them; were one ever to, the image written is a lone NaN `pos_step`, which
    /// [`World::get_image`] refuses at once rather than misreading what follows.
    pub(crate) fn put_image(&self, out: &mut Vec<u8>) {
        let start = out.len();
        if self.write_image(out).is_err() {
            out.truncate(start);
            put_f32(out, f32::NAN);
        }
    }

    /// The body of [`World::put_image`]; fails only if an encoder refuses a kind or a value.
    fn write_image(&self, out: &mut Vec<u8>) -> Result<(), EncodeError> {
        self.schema().encode(out)?;
        put_varint(out, u64::from(self.next_id));
        put_varint(out, self.version);
        put_varint(out, self.layout);
        put_varint(out, self.dead as u64);
        put_varint(out, self.ids.len() as u64);
        for r in 0..self.ids.len() {
            put_varint(out, u64::from(self.ids[r]));
            put_f32(out, self.xs[r]);
            put_f32(out, self.ys[r]);
            put_zigzag32(out, self.qxs[r]);
            put_zigzag32(out, self.qys[r]);
            out.push(self.flags[r]);
            put_varint(out, u64::from(self.kind_of[r]));
            put_varint(out, self.last_change[r]);
            let values = &self.values[r];
            let changed = &self.changed[r];
            if values.len() != changed.len() {
                return Err(EncodeError::Invalid(
                    "a row's values and stamps differ in count",
                ));
            }
            put_varint(out, values.len() as u64);
            if !values.is_empty() {
                let kind = self
                    .kinds
                    .get(self.kind_of[r] as usize)
                    .ok_or(EncodeError::Invalid("a row of an undeclared kind"))?;
                if kind.fields.len() != values.len() {
                    return Err(EncodeError::Invalid("a row's values do not match its kind"));
                }
                for (field, value) in kind.fields.iter().zip(values.iter()) {
                    field.ty.encode_value(value, out)?;
                }
            }
            for &stamp in changed.iter() {
                put_varint(out, stamp);
            }
        }
        Ok(())
    }

    /// Reads what [`World::put_image`] wrote, refusing anything no world could have been.
    ///
    /// Checked: the schema's own rules ([`Schema::decode`]); ids strictly ascending and below
    /// `next_id`; every row's kind declared; flags only `ALIVE` and `GLOBAL`, and a tombstone's
    /// none; a live row holding exactly its kind's values (each valid for its field) and stamps,
    /// a tombstone none; no stamp above its row's `last_change` nor that above `version`; `dead`
    /// equal to the tombstones, and not so many that a despawn would already have compacted them.
    pub(crate) fn get_image(r: &mut Reader<'_>) -> Result<World, DecodeError> {
        let Schema { pos_step, kinds } = Schema::decode(r)?;
        let next_id = r.varint_u32()?;
        let version = r.varint_u64()?;
        let layout = r.varint_u64()?;
        let dead = r.varint_u64()?;
        let rows = r.count("world rows", r.remaining() / MIN_ROW_BYTES)?;

        let mut ids = Vec::with_capacity(rows);
        let mut xs = Vec::with_capacity(rows);
        let mut ys = Vec::with_capacity(rows);
        let mut qxs = Vec::with_capacity(rows);
        let mut qys = Vec::with_capacity(rows);
        let mut flags = Vec::with_capacity(rows);
        let mut kind_of = Vec::with_capacity(rows);
        let mut values = Vec::with_capacity(rows);
        let mut changed = Vec::with_capacity(rows);
        let mut last_change = Vec::with_capacity(rows);
        let mut tombstones = 0usize;
        for _ in 0..rows {
            let id = r.varint_u32()?;
            if ids.last().is_some_and(|&prev| id <= prev) {
                return Err(DecodeError::Invalid("world ids are not ascending"));
            }
            if id >= next_id {
                return Err(DecodeError::Invalid("a world id was never issued"));
            }
            let x = r.f32()?;
            let y = r.f32()?;
            let qx = r.zigzag32()?;
            let qy = r.zigzag32()?;
            let f = r.u8()?;
            if f & !(ALIVE | GLOBAL) != 0 {
                return Err(DecodeError::Invalid("world row flags use unknown bits"));
            }
            let alive = f & ALIVE != 0;
            if !alive && f != 0 {
                return Err(DecodeError::Invalid("a world tombstone has flags"));
            }
            let kind = r.varint_u32()?;
            let def = kinds
                .get(kind as usize)
                .ok_or(DecodeError::Invalid("a world row of an undeclared kind"))?;
            let last = r.varint_u64()?;
            if last > version {
                return Err(DecodeError::Invalid(
                    "a world row changed after the version",
                ));
            }
            let n = r.count("world row values", MAX_FIELDS)?;
            let want = if alive { def.fields.len() } else { 0 };
            if n != want {
                return Err(DecodeError::Invalid(
                    "a world row's value count does not match its kind",
                ));
            }
            let row_values = def
                .fields
                .iter()
                .take(n)
                .map(|field| field.ty.decode_value(r))
                .collect::<Result<Vec<FieldValue>, _>>()?;
            let row_changed = (0..n)
                .map(|_| {
                    let stamp = r.varint_u64()?;
                    if stamp > last {
                        return Err(DecodeError::Invalid(
                            "a world field changed after its row's last change",
                        ));
                    }
                    Ok(stamp)
                })
                .collect::<Result<Vec<u64>, _>>()?;
            if !alive {
                tombstones += 1;
            }
            ids.push(id);
            xs.push(x);
            ys.push(y);
            qxs.push(qx);
            qys.push(qy);
            flags.push(f);
            kind_of.push(kind);
            values.push(row_values.into_boxed_slice());
            changed.push(row_changed.into_boxed_slice());
            last_change.push(last);
        }
        if tombstones as u64 != dead {
            return Err(DecodeError::Invalid(
                "the world's dead count does not match its tombstones",
            ));
        }
        // The last despawn compacts as soon as this holds, so no world is ever left in it.
        if tombstones > COMPACT_MIN && tombstones * 2 > rows {
            return Err(DecodeError::Invalid(
                "the world holds tombstones it would have compacted",
            ));
        }
        let live = ids
            .iter()
            .zip(&flags)
            .enumerate()
            .filter(|(_, (_, &f))| f & ALIVE != 0)
            .map(|(index, (&id, _))| (id, index));
        let map = IdMap::rebuild(live, next_id);
        Ok(World {
            pos_step,
            kinds,
            ids,
            xs,
            ys,
            qxs,
            qys,
            flags,
            kind_of,
            values,
            words: Default::default(),
            changed,
            last_change,
            map,
            next_id,
            version,
            dead: tombstones,
            layout,
            max_entities: super::DEFAULT_MAX_ENTITIES,
            spawns_refused: 0,
        })
    }
}
