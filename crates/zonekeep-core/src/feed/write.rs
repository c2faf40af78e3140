//! The origin's side: what changed in the world since the previous patch, encoded once.

use super::{FeedError, FIELDS, GLOBAL, MOVE, SPAWN};
use crate::interest::{ALIVE, GLOBAL as GLOBAL_FLAG};
use crate::world::World;
use zonekeep_protocol::error::EncodeError;
use zonekeep_protocol::wire::{put_f32, put_varint};

/// What the feed last carried of one entity: enough to see that it moved or changed its global
/// flag (field changes are read from the world's stamps).
#[derive(Debug, Clone, Copy)]
struct Sent {
    id: u32,
    x: u32,
    y: u32,
    global: bool,
}

/// Writes a world's feed (see the [module docs](super)): one delta per patch, shared by every
/// replica following the world.
#[derive(Debug, Clone)]
pub struct WorldFeed {
    /// Every live entity as of `at`, ascending by id.
    sent: Vec<Sent>,
    /// The world version the last delta (or the start) brought replicas to.
    at: u64,
}

impl WorldFeed {
    /// Starts following `world` as it is now: the first delta carries what changes after this.
    /// A replica starting now starts from [`WorldFeed::image`] of the same world.
    pub fn new(world: &World) -> Self {
        Self {
            sent: snapshot(world).0,
            at: world.version(),
        }
    }

    /// The world version replicas are at after the last delta.
    pub fn version(&self) -> u64 {
        self.at
    }

    /// Appends `world`'s image, where a replica starts. Take it when the feed is at the world's
    /// version (right after [`WorldFeed::delta`] or [`WorldFeed::new`]), so the next delta
    /// follows on.
    pub fn image(world: &World, out: &mut Vec<u8>) {
        world.put_image(out);
    }

    /// Appends the delta from the last one (or the start) to `world` as it is now, and moves the
    /// feed on to it. On an error nothing is appended and the feed stays where it was.
    pub fn delta(&mut self, world: &World, out: &mut Vec<u8>) -> Result<(), FeedError> {
        let start = out.len();
        let (now, ranks) = snapshot(world);
        match self.write(world, &now, &ranks, out) {
            Ok(()) => {
                self.sent = now;
                self.at = world.version();
                Ok(())
            }
            Err(e) => {
                out.truncate(start);
                Err(e)
            }
        }
    }

    fn write(
        &self,
        world: &World,
        now: &[Sent],
        ranks: &[usize],
        out: &mut Vec<u8>,
    ) -> Result<(), FeedError> {
        put_varint(out, self.at);
        put_varint(out, world.version());
        put_varint(out, u64::from(world.next_id()));

        // Despawned: sent before, not alive now (both lists ascend by id).
        let mut gone = Vec::new();
        let mut j = 0;
        for s in &self.sent {
            while now.get(j).is_some_and(|n| n.id < s.id) {
                j += 1;
            }
            if now.get(j).is_none_or(|n| n.id != s.id) {
                gone.push(s.id);
            }
        }
        put_varint(out, gone.len() as u64);
        let mut prev = 0;
        for (k, &id) in gone.iter().enumerate() {
            put_varint(out, u64::from(if k == 0 { id } else { id - prev }));
            prev = id;
        }

        // Rows: spawned, moved, changed or flagged since `at`. Counted first, written after.
        let mut rows = Vec::new();
        let mut i = 0;
        for (n, &rank) in now.iter().zip(ranks) {
            while self.sent.get(i).is_some_and(|s| s.id < n.id) {
                i += 1;
            }
            let mut parts = if n.global { GLOBAL } else { 0 };
            match self.sent.get(i).filter(|s| s.id == n.id) {
                None => parts |= SPAWN | FIELDS,
                Some(b) => {
                    let mut changed = b.global != n.global;
                    if b.x != n.x || b.y != n.y {
                        parts |= MOVE;
                        changed = true;
                    }
                    let stamps = world.rank_changed(rank).unwrap_or(&[]);
                    if stamps.iter().any(|&s| s > self.at) {
                        parts |= FIELDS;
                        changed = true;
                    }
                    if !changed {
                        continue;
                    }
                }
            }
            rows.push((n, rank, parts));
        }
        put_varint(out, rows.len() as u64);
        let mut prev = 0;
        for (k, &(n, rank, parts)) in rows.iter().enumerate() {
            put_varint(out, u64::from(if k == 0 { n.id } else { n.id - prev }));
            prev = n.id;
            out.push(parts);
            let kind = world.rank_kind(rank).unwrap_or(0);
            if parts & SPAWN != 0 {
                put_varint(out, u64::from(kind));
            }
            if parts & (SPAWN | MOVE) != 0 {
                put_f32(out, f32::from_bits(n.x));
                put_f32(out, f32::from_bits(n.y));
            }
            if parts & FIELDS != 0 {
                let values = world.rank_values(rank).unwrap_or(&[]);
                let stamps = world.rank_changed(rank).unwrap_or(&[]);
                let def = world
                    .kinds()
                    .get(kind as usize)
                    .ok_or(EncodeError::Invalid("an entity of no kind"))?;
                let spawn = parts & SPAWN != 0;
                let fields = def
                    .fields
                    .iter()
                    .zip(values.iter().zip(stamps))
                    .enumerate()
                    .filter(|(_, (_, (_, &stamp)))| spawn || stamp > self.at);
                put_varint(out, fields.clone().count() as u64);
                for (f, (def, (value, &stamp))) in fields {
                    put_varint(out, f as u64);
                    def.ty.encode_value(value, out)?;
                    put_varint(out, stamp);
                }
            }
        }
        Ok(())
    }
}

/// Every live entity of `world` as the feed carries it, ascending by id, and its rank.
fn snapshot(world: &World) -> (Vec<Sent>, Vec<usize>) {
    let cols = world.columns();
    (0..cols.ids.len())
        .filter(|&r| cols.flags[r] & ALIVE != 0)
        .map(|r| {
            let sent = Sent {
                id: cols.ids[r],
                x: cols.xs[r].to_bits(),
                y: cols.ys[r].to_bits(),
                global: cols.flags[r] & GLOBAL_FLAG != 0,
            };
            (sent, r)
        })
        .unzip()
}
