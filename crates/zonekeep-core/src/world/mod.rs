//! The replicated entity store a zone writes.
//!
//! Kinds are declared with a schema ([`KindDef`]) before the first spawn; that schema is what Welcome
//! carries. Every value is stored **as the client will decode it**: positions keep both the true `f32`
//! (for interest and game logic) and the quantized integers sent on the wire; typed field setters
//! quantize on write. Each field write that changes a value stamps it with the world's version, so
//! replication can send each subscriber only the fields changed since it last received the entity.
//!
//! Layout: entities live in dense columns **sorted by id** (ids are monotonic, so a spawn appends).
//! A despawn leaves a tombstone that is compacted away once tombstones exceed half the columns, which
//! keeps despawn amortized O(1). Sorted columns are what let interest produce ascending ids without
//! sorting; see [`crate::interest`].

mod error;
mod fields;
mod idmap;
mod image;
mod replica;

pub use error::WorldError;

use std::cell::RefCell;

use crate::hash::WordHasher;
use crate::interest::{Columns, ALIVE, GLOBAL};
use idmap::IdMap;
use zonekeep_protocol::limits::MAX_KINDS;
use zonekeep_protocol::quant::pos_encode;
use zonekeep_protocol::schema::{FieldValue, KindDef, Schema};

/// An entity id: unique within a world, handed out in ascending order, never reused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct EntityId(pub u32);

/// An entity kind: its index in the schema.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct KindId(pub u32);

/// Tombstones are compacted once there are more than this many and they are half the columns.
const COMPACT_MIN: usize = 64;

/// The entity store. See the [module docs](self).
#[derive(Debug, Clone)]
pub struct World {
    pos_step: f32,
    kinds: Vec<KindDef>,
    ids: Vec<u32>,
    xs: Vec<f32>,
    ys: Vec<f32>,
    qxs: Vec<i32>,
    qys: Vec<i32>,
    flags: Vec<u8>,
    kind_of: Vec<u32>,
    values: Vec<Box<[FieldValue]>>,
    /// The state hash's per-entity field words, recomputed only for entities changed since the
    /// last hash (a recorded zone hashes its world every tick).
    words: RefCell<WordCache>,
    /// Per entity, per field: the world version at which the value last changed.
    changed: Vec<Box<[u64]>>,
    /// Per entity: the largest of its `changed` stamps (a quick "nothing changed" test).
    last_change: Vec<u64>,
    map: IdMap,
    next_id: u32,
    version: u64,
    dead: usize,
    /// Bumped by every compaction (the only time an id changes rank).
    layout: u64,
    /// Most live entities; a spawn beyond is refused (not part of the image: the zone's
    /// config sets it).
    max_entities: usize,
    /// Spawns refused by `max_entities` since the host last took the count.
    spawns_refused: u64,
}

/// The entity cap of a world made with [`World::new`]: the default
/// [`ZoneConfig::max_entities`](crate::ZoneConfig::max_entities).
pub const DEFAULT_MAX_ENTITIES: usize = 65_536;

/// An entity's field values folded into one word without a multiply (each value shifted by its
/// place, so a value that differs always shows); the entity's multiply mixes it in.
fn fields_word(values: &[FieldValue]) -> u64 {
    let mut fields = values.len() as u64;
    for value in values {
        let word = match value {
            FieldValue::Q(q) => u64::from(*q),
            FieldValue::U(u) => 1 << 32 | u64::from(*u),
            FieldValue::I(i) => 2 << 32 | u64::from(*i as u32),
            FieldValue::Bool(b) => 3 << 32 | u64::from(*b),
            FieldValue::Str(s) => {
                let mut t = WordHasher::new(4);
                t.bytes(s.as_bytes());
                t.finish()
            }
            FieldValue::F32(f) => 5 << 32 | u64::from(f.to_bits()),
        };
        fields = fields.rotate_left(19) ^ word;
    }
    fields
}

/// Each entity's [`fields_word`] as of world version `at` under column layout `layout`. An
/// entity whose `last_change` is later has changed (or was spawned) since; a compaction moves
/// rows, so a new layout starts the cache over.
#[derive(Debug, Clone, Default)]
struct WordCache {
    words: Vec<u64>,
    at: u64,
    /// `None` until the first refresh.
    layout: Option<u64>,
}

impl WordCache {
    /// Brings every word up to date with `world`, reading the values only of changed entities.
    fn refresh(&mut self, world: &World) {
        if self.layout != Some(world.layout) {
            self.words.clear();
            self.at = 0;
            self.layout = Some(world.layout);
        }
        // Rows only grow between compactions; a new row was stamped when it was spawned.
        self.words.resize(world.values.len(), 0);
        let rows = self
            .words
            .iter_mut()
            .zip(&world.last_change)
            .zip(&world.values);
        for ((word, &changed), values) in rows {
            if changed > self.at {
                *word = fields_word(values);
            }
        }
        self.at = world.version;
    }
}

/// A read-only view of one entity, as yielded by [`World::iter`].
#[derive(Debug, Clone, Copy)]
pub struct EntityRef<'a> {
    /// Id.
    pub id: EntityId,
    /// Kind.
    pub kind: KindId,
    /// True x.
    pub x: f32,
    /// True y.
    pub y: f32,
    /// Quantized x, as clients receive it.
    pub qx: i32,
    /// Quantized y, as clients receive it.
    pub qy: i32,
    /// Seen by every subscriber regardless of interest.
    pub global: bool,
    /// Field values in the kind's field order (quantized fields as their codes).
    pub values: &'a [FieldValue],
}

impl World {
    /// An empty world whose positions are quantized with `pos_step` world units (PROTOCOL.md §3.4).
    pub fn new(pos_step: f32) -> Result<Self, WorldError> {
        if !pos_step.is_finite() || pos_step <= 0.0 {
            return Err(WorldError::InvalidPosStep(pos_step));
        }
        Ok(Self {
            pos_step,
            kinds: Vec::new(),
            ids: Vec::new(),
            xs: Vec::new(),
            ys: Vec::new(),
            qxs: Vec::new(),
            qys: Vec::new(),
            flags: Vec::new(),
            kind_of: Vec::new(),
            values: Vec::new(),
            words: RefCell::default(),
            changed: Vec::new(),
            last_change: Vec::new(),
            map: IdMap::default(),
            next_id: 0,
            version: 0,
            dead: 0,
            layout: 0,
            max_entities: DEFAULT_MAX_ENTITIES,
            spawns_refused: 0,
        })
    }

    /// Sets the most live entities a spawn may bring the world to. Entities already alive stay
    /// (a world restored above a lowered cap refuses spawns until it is back under).
    pub fn set_max_entities(&mut self, max: usize) {
        self.max_entities = max;
    }

    /// The most live entities (see [`World::set_max_entities`]).
    pub fn max_entities(&self) -> usize {
        self.max_entities
    }

    /// Spawns refused by the entity cap since the last call.
    pub(crate) fn take_spawns_refused(&mut self) -> u64 {
        std::mem::take(&mut self.spawns_refused)
    }

    /// The position quantum.
    pub fn pos_step(&self) -> f32 {
        self.pos_step
    }

    /// Declares an entity kind. Kinds are frozen by the first spawn, since clients got the schema.
    pub fn declare_kind(&mut self, kind: KindDef) -> Result<KindId, WorldError> {
        if self.next_id != 0 {
            return Err(WorldError::SchemaFrozen);
        }
        if self.kinds.len() >= MAX_KINDS {
            return Err(WorldError::TooManyKinds);
        }
        kind.validate().map_err(WorldError::InvalidKind)?;
        self.kinds.push(kind);
        Ok(KindId(self.kinds.len() as u32 - 1))
    }

    /// The schema clients need (what Welcome carries).
    pub fn schema(&self) -> Schema {
        Schema {
            pos_step: self.pos_step,
            kinds: self.kinds.clone(),
        }
    }

    /// The declared kinds, by [`KindId`].
    pub fn kinds(&self) -> &[KindDef] {
        &self.kinds
    }

    /// Number of live entities.
    pub fn len(&self) -> usize {
        self.ids.len() - self.dead
    }

    /// Whether no entity is alive.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The world version: increases on every spawn, despawn and field value change.
    pub fn version(&self) -> u64 {
        self.version
    }

    /// Spawns an entity of `kind` at `(x, y)` with every field at its type's default. Refused
    /// with [`WorldError::EntityCap`] (and counted) when the world already holds
    /// [`max_entities`](World::max_entities) live entities.
    pub fn spawn(&mut self, kind: KindId, x: f32, y: f32) -> Result<EntityId, WorldError> {
        let def = self
            .kinds
            .get(kind.0 as usize)
            .ok_or(WorldError::UnknownKind(kind.0))?;
        if self.len() >= self.max_entities {
            self.spawns_refused = self.spawns_refused.saturating_add(1);
            return Err(WorldError::EntityCap {
                cap: self.max_entities,
            });
        }
        let id = self.next_id;
        self.next_id = id.checked_add(1).ok_or(WorldError::IdsExhausted)?;
        self.version += 1;
        let values = def.default_values().into_boxed_slice();
        let index = self.ids.len();
        self.ids.push(id);
        self.xs.push(x);
        self.ys.push(y);
        self.qxs.push(pos_encode(x, self.pos_step));
        self.qys.push(pos_encode(y, self.pos_step));
        self.flags.push(ALIVE);
        self.kind_of.push(kind.0);
        self.changed
            .push(vec![self.version; values.len()].into_boxed_slice());
        self.values.push(values);
        self.last_change.push(self.version);
        self.map.insert(id, index);
        Ok(EntityId(id))
    }

    /// Removes an entity. Its id is never reused.
    pub fn despawn(&mut self, id: EntityId) -> Result<(), WorldError> {
        let i = self.index(id)?;
        self.version += 1;
        self.flags[i] = 0;
        self.values[i] = Box::new([]);
        self.changed[i] = Box::new([]);
        self.map.remove(id.0);
        self.dead += 1;
        if self.dead > COMPACT_MIN && self.dead * 2 > self.ids.len() {
            self.compact();
        }
        Ok(())
    }

    /// Drops tombstones, keeping id order, and re-points the id map.
    fn compact(&mut self) {
        let mut w = 0;
        for r in 0..self.ids.len() {
            if self.flags[r] & ALIVE == 0 {
                continue;
            }
            if w != r {
                self.ids[w] = self.ids[r];
                self.xs[w] = self.xs[r];
                self.ys[w] = self.ys[r];
                self.qxs[w] = self.qxs[r];
                self.qys[w] = self.qys[r];
                self.flags[w] = self.flags[r];
                self.kind_of[w] = self.kind_of[r];
                self.values.swap(w, r);
                self.changed.swap(w, r);
                self.last_change[w] = self.last_change[r];
                self.map.set(self.ids[w], w);
            }
            w += 1;
        }
        self.ids.truncate(w);
        self.xs.truncate(w);
        self.ys.truncate(w);
        self.qxs.truncate(w);
        self.qys.truncate(w);
        self.flags.truncate(w);
        self.kind_of.truncate(w);
        self.values.truncate(w);
        self.changed.truncate(w);
        self.last_change.truncate(w);
        self.dead = 0;
        self.layout += 1;
    }

    #[inline]
    fn index(&self, id: EntityId) -> Result<usize, WorldError> {
        self.map.get(id.0).ok_or(WorldError::UnknownEntity(id.0))
    }

    /// The entity's rank: its index in [`World::columns`] until the next despawn.
    pub fn rank_of(&self, id: EntityId) -> Option<usize> {
        self.map.get(id.0)
    }

    /// Whether `id` is alive.
    pub fn contains(&self, id: EntityId) -> bool {
        self.map.get(id.0).is_some()
    }

    /// Moves an entity. The quantized position clients receive is computed here, once.
    pub fn set_pos(&mut self, id: EntityId, x: f32, y: f32) -> Result<(), WorldError> {
        let i = self.index(id)?;
        self.xs[i] = x;
        self.ys[i] = y;
        self.qxs[i] = pos_encode(x, self.pos_step);
        self.qys[i] = pos_encode(y, self.pos_step);
        Ok(())
    }

    /// The true position.
    pub fn pos(&self, id: EntityId) -> Result<(f32, f32), WorldError> {
        let i = self.index(id)?;
        Ok((self.xs[i], self.ys[i]))
    }

    /// The quantized position, as clients receive it.
    pub fn qpos(&self, id: EntityId) -> Result<(i32, i32), WorldError> {
        let i = self.index(id)?;
        Ok((self.qxs[i], self.qys[i]))
    }

    /// The entity's kind.
    pub fn kind_of(&self, id: EntityId) -> Result<KindId, WorldError> {
        let i = self.index(id)?;
        Ok(KindId(self.kind_of[i]))
    }

    /// Marks an entity global (seen by every subscriber regardless of interest) or not.
    pub fn set_global(&mut self, id: EntityId, global: bool) -> Result<(), WorldError> {
        let i = self.index(id)?;
        let f = self.flags[i];
        let nf = if global { f | GLOBAL } else { f & !GLOBAL };
        if nf != f {
            self.flags[i] = nf;
            self.version += 1;
        }
        Ok(())
    }

    /// Whether the entity is global.
    pub fn is_global(&self, id: EntityId) -> Result<bool, WorldError> {
        let i = self.index(id)?;
        Ok(self.flags[i] & GLOBAL != 0)
    }

    /// One entity.
    pub fn get(&self, id: EntityId) -> Result<EntityRef<'_>, WorldError> {
        let i = self.index(id)?;
        Ok(self.entity_at(i))
    }

    fn entity_at(&self, i: usize) -> EntityRef<'_> {
        EntityRef {
            id: EntityId(self.ids[i]),
            kind: KindId(self.kind_of[i]),
            x: self.xs[i],
            y: self.ys[i],
            qx: self.qxs[i],
            qy: self.qys[i],
            global: self.flags[i] & GLOBAL != 0,
            values: &self.values[i],
        }
    }

    /// Every live entity, ascending by id.
    pub fn iter(&self) -> impl Iterator<Item = EntityRef<'_>> + '_ {
        (0..self.ids.len())
            .filter(|&i| self.flags[i] & ALIVE != 0)
            .map(|i| self.entity_at(i))
    }

    /// The position snapshot interest works on (ranks are indices into these columns).
    pub fn columns(&self) -> Columns<'_> {
        Columns {
            ids: &self.ids,
            xs: &self.xs,
            ys: &self.ys,
            flags: &self.flags,
            layout: Some(self.layout),
        }
    }

    /// The default zone state hash over the replicated world: stable across platforms and runs.
    ///
    /// Word at a time, each entity on its own, the entity hashes folded in ascending id order (it
    /// runs after every tick of a recorded zone, over every entity): seeded with `pos_step` bits,
    /// for every live entity its id, kind and global flag, its quantized x and y, and each field
    /// value as a type tag and its content (codes and integers as u32/i32, bools, `f32` bits,
    /// strings as their bytes and length), then the count of entities. True (unquantized)
    /// positions are excluded: a move smaller than the quantum changes nothing any client can
    /// see, so it does not change the hash.
    pub fn hash(&self) -> u64 {
        let seed = u64::from(self.pos_step.to_bits());
        // Each entity is hashed on its own (no entity waits on the previous one's multiply), over
        // the columns directly, and the entity hashes are folded in order with a rotate and xor.
        let mut acc = seed;
        let mut count = 0u64;
        let mut cache = self.words.borrow_mut();
        cache.refresh(self);
        let columns = self
            .ids
            .iter()
            .zip(&self.kind_of)
            .zip(self.qxs.iter().zip(&self.qys))
            .zip(self.flags.iter().zip(&cache.words));
        for (((&id, &kind), (&qx, &qy)), (&flags, &fields)) in columns {
            if flags & ALIVE == 0 {
                continue;
            }
            // Kind ids are indices into a short list: their top bit is free for the global flag.
            let global = u64::from(flags & GLOBAL != 0);
            let head = u64::from(id) | u64::from(kind) << 32 | global << 63;
            let pos = u64::from(qx as u32) | u64::from(qy as u32) << 32;
            let h = crate::hash::mum(head ^ seed ^ fields.rotate_left(41), pos ^ !seed);
            acc = acc.rotate_left(23) ^ h;
            count += 1;
        }
        let mut h = WordHasher::new(seed);
        h.word(count);
        h.word(acc);
        h.finish()
    }

    // ---- rank-indexed access for replication (ranks = indices into `columns()`) ----

    #[inline]
    pub(crate) fn rank_qpos(&self, r: usize) -> Option<(i32, i32)> {
        Some((*self.qxs.get(r)?, *self.qys.get(r)?))
    }

    #[inline]
    pub(crate) fn rank_kind(&self, r: usize) -> Option<u32> {
        self.kind_of.get(r).copied()
    }

    #[inline]
    pub(crate) fn rank_values(&self, r: usize) -> Option<&[FieldValue]> {
        self.values.get(r).map(|v| &v[..])
    }

    #[inline]
    pub(crate) fn rank_changed(&self, r: usize) -> Option<&[u64]> {
        self.changed.get(r).map(|v| &v[..])
    }

    #[inline]
    pub(crate) fn rank_last_change(&self, r: usize) -> u64 {
        self.last_change.get(r).copied().unwrap_or(0)
    }
}

#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_image;
