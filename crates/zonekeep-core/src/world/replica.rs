//! Writes a world replica takes from its origin's feed ([`crate::feed`]): the origin's own change
//! stamps and version instead of the replica's, so the replicator reads the replica exactly as it
//! reads the origin.
//!
//! The feed's reader checks a whole delta against the replica before it calls any of these, so
//! each one only re-checks what keeps the world itself consistent (an unknown id, a field past its
//! kind, an id out of order) and otherwise cannot fail.

use super::{World, WorldError, ALIVE, GLOBAL};
use zonekeep_protocol::quant::pos_encode;
use zonekeep_protocol::schema::FieldValue;

impl World {
    /// The id the next spawn takes.
    pub(crate) fn next_id(&self) -> u32 {
        self.next_id
    }

    /// Appends an entity the origin spawned: `id` above every id so far, every field's value and
    /// stamp given (in the kind's field order).
    pub(crate) fn replica_spawn(
        &mut self,
        id: u32,
        kind: u32,
        (x, y): (f32, f32),
        global: bool,
        values: Box<[FieldValue]>,
        stamps: Box<[u64]>,
    ) -> Result<(), WorldError> {
        let def = self
            .kinds
            .get(kind as usize)
            .ok_or(WorldError::UnknownKind(kind))?;
        if id < self.next_id {
            return Err(WorldError::UnknownEntity(id));
        }
        if values.len() != def.fields.len() || stamps.len() != values.len() {
            return Err(WorldError::UnknownField {
                kind,
                field: values.len(),
            });
        }
        if self.len() >= self.max_entities {
            return Err(WorldError::EntityCap {
                cap: self.max_entities,
            });
        }
        self.next_id = id.checked_add(1).ok_or(WorldError::IdsExhausted)?;
        let index = self.ids.len();
        self.ids.push(id);
        self.xs.push(x);
        self.ys.push(y);
        self.qxs.push(pos_encode(x, self.pos_step));
        self.qys.push(pos_encode(y, self.pos_step));
        self.flags.push(if global { ALIVE | GLOBAL } else { ALIVE });
        self.kind_of.push(kind);
        self.last_change
            .push(stamps.iter().copied().max().unwrap_or(0));
        self.changed.push(stamps);
        self.values.push(values);
        self.map.insert(id, index);
        Ok(())
    }

    /// Sets a field to the value the origin holds, stamped as the origin stamped it.
    pub(crate) fn replica_set(
        &mut self,
        id: u32,
        field: usize,
        value: FieldValue,
        stamp: u64,
    ) -> Result<(), WorldError> {
        let i = self.map.get(id).ok_or(WorldError::UnknownEntity(id))?;
        let kind = self.kind_of[i];
        let (Some(slot), Some(c)) = (
            self.values[i].get_mut(field),
            self.changed[i].get_mut(field),
        ) else {
            return Err(WorldError::UnknownField { kind, field });
        };
        *slot = value;
        *c = stamp;
        self.last_change[i] = self.last_change[i].max(stamp);
        Ok(())
    }

    /// Sets the global flag as the origin holds it (the origin's version carries the change).
    pub(crate) fn replica_global(&mut self, id: u32, global: bool) -> Result<(), WorldError> {
        let i = self.map.get(id).ok_or(WorldError::UnknownEntity(id))?;
        if global {
            self.flags[i] |= GLOBAL;
        } else {
            self.flags[i] &= !GLOBAL;
        }
        Ok(())
    }

    /// Takes the origin's version and next id once a delta is applied; the replica's own
    /// despawns counted versions of their own on the way.
    pub(crate) fn replica_clock(&mut self, version: u64, next_id: u32) {
        self.version = version;
        self.next_id = self.next_id.max(next_id);
    }
}
