//! Encode-once storage for one build: update records keyed by (entity rank, base position, mask) and
//! spawn bodies keyed by entity rank, encoded into one shared arena.
//!
//! Each rank has one record slot: the first key asked for in a build owns it and later subscribers
//! with the same key copy its bytes; a subscriber with a different base (only possible after a budget
//! deferred something) gets its own encoding in the arena, not cached. Slots are invalidated by a
//! build stamp, so nothing is cleared between builds except the arena.

use crate::world::World;
use zonekeep_protocol::delta::{write_spawn_body, write_update_record, PosUpdate};
use zonekeep_protocol::EncodeError;

#[derive(Debug, Clone, Copy, Default)]
struct RecordSlot {
    stamp: u32,
    bqx: i32,
    bqy: i32,
    mask: u32,
    off: u32,
    len: u32,
}

#[derive(Debug, Clone, Copy, Default)]
struct SpawnSlot {
    stamp: u32,
    off: u32,
    len: u32,
}

/// Bytes in the arena: `off..off + len`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct Span {
    pub(super) off: u32,
    pub(super) len: u32,
}

#[derive(Debug, Clone, Default)]
pub(super) struct Cache {
    stamp: u32,
    records: Vec<RecordSlot>,
    spawns: Vec<SpawnSlot>,
    pub(super) arena: Vec<u8>,
    pub(super) hits: u64,
    pub(super) encodings: u64,
}

impl Cache {
    /// Starts a build over `ranks` ranks.
    pub(super) fn begin(&mut self, ranks: usize) {
        self.stamp = self.stamp.wrapping_add(1);
        if self.stamp == 0 {
            // Wrapped: stale slots could carry the new stamp, so wipe them once every 2^32 builds.
            self.records.clear();
            self.spawns.clear();
            self.stamp = 1;
        }
        if self.records.len() < ranks {
            self.records.resize(ranks, RecordSlot::default());
            self.spawns.resize(ranks, SpawnSlot::default());
        }
        self.arena.clear();
        self.hits = 0;
        self.encodings = 0;
    }

    fn push<F>(&mut self, f: F) -> Result<Span, EncodeError>
    where
        F: FnOnce(&mut Vec<u8>) -> Result<(), EncodeError>,
    {
        let off = self.arena.len();
        f(&mut self.arena)?;
        self.encodings += 1;
        Ok(Span {
            off: off as u32,
            len: (self.arena.len() - off) as u32,
        })
    }

    /// The update record of the entity at `rank` for a client holding `(bqx, bqy)`, sending `mask`.
    #[inline]
    pub(super) fn record(
        &mut self,
        world: &World,
        rank: usize,
        bqx: i32,
        bqy: i32,
        mask: u32,
    ) -> Result<Span, EncodeError> {
        let stamp = self.stamp;
        if let Some(s) = self.records.get(rank) {
            if s.stamp == stamp && s.bqx == bqx && s.bqy == bqy && s.mask == mask {
                self.hits += 1;
                return Ok(Span {
                    off: s.off,
                    len: s.len,
                });
            }
        }
        self.record_miss(world, rank, bqx, bqy, mask)
    }

    /// Encodes a record not yet in the cache (the first subscriber, or a different base).
    #[cold]
    #[inline(never)]
    fn record_miss(
        &mut self,
        world: &World,
        rank: usize,
        bqx: i32,
        bqy: i32,
        mask: u32,
    ) -> Result<Span, EncodeError> {
        let stamp = self.stamp;
        let (qx, qy) = world
            .rank_qpos(rank)
            .ok_or(EncodeError::Invalid("replicated rank out of range"))?;
        let kind = world
            .rank_kind(rank)
            .and_then(|k| world.kinds().get(k as usize))
            .ok_or(EncodeError::Invalid("replicated entity has no kind"))?;
        let values = world
            .rank_values(rank)
            .ok_or(EncodeError::Invalid("replicated rank out of range"))?;
        let pos = PosUpdate {
            qx,
            qy,
            last_qx: bqx,
            last_qy: bqy,
        };
        let span = self.push(|out| write_update_record(out, Some(pos), mask, kind, values))?;
        if let Some(s) = self.records.get_mut(rank) {
            if s.stamp != stamp {
                *s = RecordSlot {
                    stamp,
                    bqx,
                    bqy,
                    mask,
                    off: span.off,
                    len: span.len,
                };
            }
        }
        Ok(span)
    }

    /// The spawn body of the entity at `rank`.
    #[inline]
    pub(super) fn spawn(&mut self, world: &World, rank: usize) -> Result<Span, EncodeError> {
        let stamp = self.stamp;
        if let Some(s) = self.spawns.get(rank) {
            if s.stamp == stamp {
                self.hits += 1;
                return Ok(Span {
                    off: s.off,
                    len: s.len,
                });
            }
        }
        let (qx, qy) = world
            .rank_qpos(rank)
            .ok_or(EncodeError::Invalid("replicated rank out of range"))?;
        let k = world
            .rank_kind(rank)
            .ok_or(EncodeError::Invalid("replicated rank out of range"))?;
        let kind = world
            .kinds()
            .get(k as usize)
            .ok_or(EncodeError::Invalid("replicated entity has no kind"))?;
        let values = world
            .rank_values(rank)
            .ok_or(EncodeError::Invalid("replicated rank out of range"))?;
        let span = self.push(|out| write_spawn_body(out, k, kind, qx, qy, values))?;
        if let Some(s) = self.spawns.get_mut(rank) {
            *s = SpawnSlot {
                stamp,
                off: span.off,
                len: span.len,
            };
        }
        Ok(span)
    }

    #[inline]
    pub(super) fn bytes(&self, span: Span) -> &[u8] {
        self.arena
            .get(span.off as usize..(span.off + span.len) as usize)
            .unwrap_or(&[])
    }
}
