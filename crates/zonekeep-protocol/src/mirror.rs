//! The client-side known set: every entity the client holds, ascending by id, with its kind, quantized
//! position and field values, updated by applying Deltas exactly in PROTOCOL.md §5.5 order (baseline
//! clear, despawns, updates, spawns). The Rust client, the replication tests and the crowd benchmark use
//! it to see what a subscriber sees.

use crate::delta::{decode_delta, Delta};
use crate::error::DecodeError;
use crate::known::known_set_hash;
use crate::messages::{KnownSetCheck, ResumeFrom};
use crate::schema::{FieldValue, Schema};

/// One entity as the client holds it.
#[derive(Debug, Clone, PartialEq)]
pub struct MirrorEntity {
    /// Index of its kind in the schema.
    pub kind: u32,
    /// Quantized x as last received (`pos_decode(qx, pos_step)` gives the coordinate).
    pub qx: i32,
    /// Quantized y as last received.
    pub qy: i32,
    /// Every field of its kind, in order.
    pub fields: Vec<FieldValue>,
}

/// Why a Delta could not be applied. The mirror is unchanged when this is returned.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MirrorError {
    /// The bytes were not a valid Delta for this known set.
    #[error(transparent)]
    Decode(#[from] DecodeError),
    /// A Delta value that contradicts the known set (only possible for hand-built Deltas; a Delta from
    /// [`decode_delta`] against [`Mirror::known`] always applies).
    #[error("delta does not fit the known set: {0}")]
    Inconsistent(&'static str),
}

/// The client's known set (see the module docs).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Mirror {
    // Parallel vectors so `known()` can hand `decode_delta` its input without copying.
    known: Vec<(u32, u32)>,
    entities: Vec<MirrorEntity>,
    control: Option<u32>,
    tick: u64,
    ack: u32,
}

fn inconsistent(msg: &'static str) -> MirrorError {
    MirrorError::Inconsistent(msg)
}

impl Mirror {
    /// An empty mirror (what a client holds before its first BASELINE).
    pub fn new() -> Self {
        Self::default()
    }

    /// `(id, kind)` of every known entity, ascending by id: the `known` argument of [`decode_delta`].
    pub fn known(&self) -> &[(u32, u32)] {
        &self.known
    }

    /// Number of known entities.
    pub fn len(&self) -> usize {
        self.known.len()
    }

    /// True if no entity is known.
    pub fn is_empty(&self) -> bool {
        self.known.is_empty()
    }

    /// The entity with id `id`, if known.
    pub fn get(&self, id: u32) -> Option<&MirrorEntity> {
        let i = self.known.binary_search_by_key(&id, |e| e.0).ok()?;
        self.entities.get(i)
    }

    /// Every known entity, ascending by id.
    pub fn iter(&self) -> impl Iterator<Item = (u32, &MirrorEntity)> + '_ {
        self.known.iter().map(|e| e.0).zip(self.entities.iter())
    }

    /// The entity this player controls, as last announced by a Delta's CONTROL field.
    pub fn control(&self) -> Option<u32> {
        self.control
    }

    /// Tick of the last applied Delta.
    pub fn tick(&self) -> u64 {
        self.tick
    }

    /// Ack of the last applied Delta (the last input `seq` the zone processed).
    pub fn ack(&self) -> u32 {
        self.ack
    }

    /// Whether this known set is the one `check` describes (§5.7): same count and same
    /// [`known_set_hash`] of the ids. A mismatch means a Delta was mis-applied; the client sends
    /// Resync and waits for a BASELINE.
    pub fn matches(&self, check: &KnownSetCheck) -> bool {
        u32::try_from(self.known.len()).ok() == Some(check.count)
            && known_set_hash(self.known.iter().map(|e| e.0)) == check.hash
    }

    /// What a resuming Hello carries for this known set (§4.1.1): the tick of the last applied
    /// Delta and the count and hash a KnownSetCheck would state. `None` before any Delta was
    /// applied (tick 0), when there is nothing to resume from.
    pub fn resume_from(&self) -> Option<ResumeFrom> {
        if self.tick == 0 {
            return None;
        }
        Some(ResumeFrom {
            tick: self.tick,
            count: u32::try_from(self.known.len()).ok()?,
            hash: known_set_hash(self.known.iter().map(|e| e.0)),
        })
    }

    /// Decodes `bytes` against this mirror's known set and applies the result; returns the Delta so the
    /// caller can deliver its events.
    pub fn decode_apply(&mut self, bytes: &[u8], schema: &Schema) -> Result<Delta, MirrorError> {
        let d = decode_delta(bytes, schema, &self.known)?;
        self.apply(&d)?;
        Ok(d)
    }

    /// Applies a decoded Delta in §5.5 order: BASELINE clears, then despawns, updates (by index into
    /// the set after the despawns), spawns. Everything is checked before anything changes, so an error
    /// leaves the mirror as it was.
    pub fn apply(&mut self, d: &Delta) -> Result<(), MirrorError> {
        let base_len = if d.baseline { 0 } else { self.known.len() };
        let known = self.known.get(..base_len).unwrap_or(&[]);
        if d.baseline && (!d.despawns.is_empty() || !d.updates.is_empty()) {
            return Err(inconsistent("a baseline Delta has no despawns or updates"));
        }

        // Despawns: positions in the current set.
        let mut despawn_pos = Vec::with_capacity(d.despawns.len());
        for (i, id) in d.despawns.iter().enumerate() {
            if i > 0 && d.despawns.get(i - 1).is_some_and(|p| p >= id) {
                return Err(inconsistent("despawns not strictly ascending"));
            }
            let p = known
                .binary_search_by_key(id, |e| e.0)
                .map_err(|_| inconsistent("despawned id not known"))?;
            despawn_pos.push(p);
        }

        // Updates: resolve each index to a position in the current set and validate the change.
        let mut targets = Vec::with_capacity(d.updates.len());
        let mut skipped = 0usize;
        let mut prev_index: Option<u32> = None;
        for u in &d.updates {
            if prev_index.is_some_and(|p| p >= u.index) {
                return Err(inconsistent("update indices not strictly ascending"));
            }
            prev_index = Some(u.index);
            let mut p = u.index as usize + skipped;
            while despawn_pos.get(skipped).is_some_and(|&q| q <= p) {
                skipped += 1;
                p = u.index as usize + skipped;
            }
            let (id, _) = *known
                .get(p)
                .ok_or(inconsistent("update index beyond the known set"))?;
            if id != u.id {
                return Err(inconsistent("update id is not the entity at its index"));
            }
            let e = self
                .entities
                .get(p)
                .ok_or(inconsistent("update index beyond the known set"))?;
            let pos = match u.pos {
                Some(f) => f
                    .apply(e.qx, e.qy)
                    .ok_or(inconsistent("position leaves the i32 range"))?,
                None => (e.qx, e.qy),
            };
            for (fi, v) in &u.fields {
                let old = e
                    .fields
                    .get(usize::from(*fi))
                    .ok_or(inconsistent("field beyond the kind"))?;
                if std::mem::discriminant(old) != std::mem::discriminant(v) {
                    return Err(inconsistent("field value changes type"));
                }
            }
            targets.push((p, pos));
        }

        // Spawns: strictly ascending and new after the despawns.
        for (i, s) in d.spawns.iter().enumerate() {
            if i > 0 && d.spawns.get(i - 1).is_some_and(|p| p.id >= s.id) {
                return Err(inconsistent("spawns not strictly ascending"));
            }
            if known.binary_search_by_key(&s.id, |e| e.0).is_ok()
                && d.despawns.binary_search(&s.id).is_err()
            {
                return Err(inconsistent("spawned id already known"));
            }
        }

        // Everything checked: mutate.
        if d.baseline {
            self.known.clear();
            self.entities.clear();
        }
        for (u, (p, (qx, qy))) in d.updates.iter().zip(targets) {
            if let Some(e) = self.entities.get_mut(p) {
                e.qx = qx;
                e.qy = qy;
                for (fi, v) in &u.fields {
                    if let Some(slot) = e.fields.get_mut(usize::from(*fi)) {
                        *slot = v.clone();
                    }
                }
            }
        }
        if !despawn_pos.is_empty() {
            let mut k = 0usize;
            let mut i = 0usize;
            self.known.retain(|_| {
                let keep = despawn_pos.get(k) != Some(&i);
                if !keep {
                    k += 1;
                }
                i += 1;
                keep
            });
            let (mut k, mut i) = (0usize, 0usize);
            self.entities.retain(|_| {
                let keep = despawn_pos.get(k) != Some(&i);
                if !keep {
                    k += 1;
                }
                i += 1;
                keep
            });
        }
        if !d.spawns.is_empty() {
            // Merge two ascending sequences.
            let old_known = std::mem::take(&mut self.known);
            let old_entities = std::mem::take(&mut self.entities);
            let total = old_known.len() + d.spawns.len();
            self.known.reserve(total);
            self.entities.reserve(total);
            let mut old = old_known.into_iter().zip(old_entities).peekable();
            for s in &d.spawns {
                while let Some(((id, _), _)) = old.peek() {
                    if *id > s.id {
                        break;
                    }
                    if let Some((k, e)) = old.next() {
                        self.known.push(k);
                        self.entities.push(e);
                    }
                }
                self.known.push((s.id, s.kind));
                self.entities.push(MirrorEntity {
                    kind: s.kind,
                    qx: s.qx,
                    qy: s.qy,
                    fields: s.fields.clone(),
                });
            }
            for (k, e) in old {
                self.known.push(k);
                self.entities.push(e);
            }
        }
        if let Some(c) = d.control {
            self.control = c;
        }
        self.tick = d.tick;
        self.ack = d.ack;
        Ok(())
    }
}

#[cfg(test)]
#[path = "mirror_tests.rs"]
mod tests;
