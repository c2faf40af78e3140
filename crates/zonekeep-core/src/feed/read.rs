//! The replica's side: a delta read whole and checked against the replica, then applied.

use super::{FeedError, FIELDS, GLOBAL, MOVE, SPAWN};
use crate::world::{EntityId, World};
use zonekeep_protocol::error::DecodeError;
use zonekeep_protocol::limits::MAX_FIELDS;
use zonekeep_protocol::schema::FieldValue;
use zonekeep_protocol::wire::Reader;

/// The fewest bytes a row takes (a one-byte gap and its parts).
const MIN_ROW_BYTES: usize = 2;

/// A copy of a zone's world kept in step by its feed (see the [module docs](super)).
#[derive(Debug, Clone)]
pub struct Replica {
    world: World,
}

/// One row of a delta, checked.
struct Row {
    id: u32,
    /// The kind, for a spawn.
    spawn: Option<u32>,
    pos: Option<(f32, f32)>,
    fields: Vec<(usize, FieldValue, u64)>,
    global: bool,
}

/// A delta, checked against the replica and ready to apply.
struct Plan {
    version: u64,
    next_id: u32,
    gone: Vec<u32>,
    rows: Vec<Row>,
}

/// Reads an ascending id list's next id: the first as itself, then gaps of at least 1.
fn next_id(r: &mut Reader<'_>, prev: Option<u32>) -> Result<u32, DecodeError> {
    let v = r.varint_u32()?;
    match prev {
        None => Ok(v),
        Some(_) if v == 0 => Err(DecodeError::Invalid("feed ids do not ascend")),
        Some(p) => p.checked_add(v).ok_or(DecodeError::Overflow),
    }
}

impl Replica {
    /// A replica starting from a world image ([`super::WorldFeed::image`]).
    pub fn from_image(image: &[u8]) -> Result<Self, FeedError> {
        let mut r = Reader::new(image);
        let world = World::get_image(&mut r)?;
        r.finish()?;
        Ok(Self { world })
    }

    /// The replica's world: what the replicator reads.
    pub fn world(&self) -> &World {
        &self.world
    }

    /// The origin's world version the replica is at.
    pub fn version(&self) -> u64 {
        self.world.version()
    }

    /// Caps the entities the replica holds: a delta that would spawn past it is refused
    /// ([`FeedError::EntityCap`]). The origin's own cap is the zone's; this one bounds what a
    /// replica takes from its link whatever the link says.
    pub fn set_max_entities(&mut self, max: usize) {
        self.world.set_max_entities(max);
    }

    /// Applies one delta. A delta refused leaves the replica as it was; after
    /// [`FeedError::Gap`] (a delta missed or repeated) it needs a fresh image to go on.
    pub fn apply(&mut self, delta: &[u8]) -> Result<(), FeedError> {
        let plan = self.check(delta)?;
        let w = &mut self.world;
        for id in plan.gone {
            w.despawn(EntityId(id))?;
        }
        for row in plan.rows {
            match row.spawn {
                Some(kind) => {
                    let (values, stamps): (Vec<_>, Vec<_>) =
                        row.fields.into_iter().map(|(_, v, s)| (v, s)).unzip();
                    w.replica_spawn(
                        row.id,
                        kind,
                        row.pos.unwrap_or_default(),
                        row.global,
                        values.into_boxed_slice(),
                        stamps.into_boxed_slice(),
                    )?;
                }
                None => {
                    if let Some((x, y)) = row.pos {
                        w.set_pos(EntityId(row.id), x, y)?;
                    }
                    for (field, value, stamp) in row.fields {
                        w.replica_set(row.id, field, value, stamp)?;
                    }
                    w.replica_global(row.id, row.global)?;
                }
            }
        }
        w.replica_clock(plan.version, plan.next_id);
        Ok(())
    }

    /// Reads `delta` whole and checks it against the replica, changing nothing.
    fn check(&self, delta: &[u8]) -> Result<Plan, FeedError> {
        let w = &self.world;
        let mut r = Reader::new(delta);
        let base = r.varint_u64()?;
        if base != w.version() {
            return Err(FeedError::Gap {
                expected: w.version(),
                got: base,
            });
        }
        let version = r.varint_u64()?;
        if version < base {
            return Err(DecodeError::Invalid("a feed delta goes back in versions").into());
        }
        let next = r.varint_u32()?;
        if next < w.next_id() {
            return Err(DecodeError::Invalid("a feed delta takes back issued ids").into());
        }

        let despawns = r.count("feed despawns", w.len())?;
        let mut gone = Vec::with_capacity(despawns);
        for _ in 0..despawns {
            let id = next_id(&mut r, gone.last().copied())?;
            if !w.contains(EntityId(id)) {
                return Err(DecodeError::Invalid("a feed delta despawns an unknown entity").into());
            }
            gone.push(id);
        }

        let count = r.count("feed rows", r.remaining() / MIN_ROW_BYTES)?;
        let mut rows: Vec<Row> = Vec::with_capacity(count);
        let mut spawns = 0usize;
        for _ in 0..count {
            let id = next_id(&mut r, rows.last().map(|row| row.id))?;
            let parts = r.u8()?;
            if parts & !(SPAWN | MOVE | FIELDS | GLOBAL) != 0 {
                return Err(DecodeError::Invalid("a feed row uses unknown bits").into());
            }
            let spawn = parts & SPAWN != 0;
            let kind = if spawn {
                if id < w.next_id() || id >= next {
                    return Err(DecodeError::Invalid("a feed spawn under an id not new").into());
                }
                if parts & FIELDS == 0 {
                    return Err(DecodeError::Invalid("a feed spawn without its fields").into());
                }
                spawns += 1;
                r.varint_u32()?
            } else {
                if !w.contains(EntityId(id)) || gone.binary_search(&id).is_ok() {
                    return Err(DecodeError::Invalid("a feed row for an unknown entity").into());
                }
                w.kind_of(EntityId(id))?.0
            };
            let def = w
                .kinds()
                .get(kind as usize)
                .ok_or(DecodeError::Invalid("a feed spawn of an undeclared kind"))?;
            let pos = if parts & (SPAWN | MOVE) != 0 {
                Some((r.f32()?, r.f32()?))
            } else {
                None
            };
            let mut fields = Vec::new();
            if parts & FIELDS != 0 {
                let n = r.count("feed row fields", MAX_FIELDS)?;
                if spawn && n != def.fields.len() {
                    return Err(
                        DecodeError::Invalid("a feed spawn does not list every field").into(),
                    );
                }
                fields.reserve(n);
                for k in 0..n {
                    let field = r.varint_u32()? as usize;
                    let in_order = match fields.last() {
                        None => !spawn || field == 0,
                        Some((prev, _, _)) => field > *prev && (!spawn || field == k),
                    };
                    if !in_order {
                        return Err(DecodeError::Invalid("feed row fields out of order").into());
                    }
                    let ty = def
                        .fields
                        .get(field)
                        .ok_or(DecodeError::Invalid(
                            "a feed row names a field past its kind",
                        ))?
                        .ty;
                    let value = ty.decode_value(&mut r)?;
                    let stamp = r.varint_u64()?;
                    if stamp <= base || stamp > version {
                        return Err(DecodeError::Invalid(
                            "a feed field stamp outside the delta's versions",
                        )
                        .into());
                    }
                    fields.push((field, value, stamp));
                }
            }
            rows.push(Row {
                id,
                spawn: spawn.then_some(kind),
                pos,
                fields,
                global: parts & GLOBAL != 0,
            });
        }
        r.finish()?;
        let live = w.len() - gone.len() + spawns;
        if spawns > 0 && live > w.max_entities() {
            return Err(FeedError::EntityCap {
                cap: w.max_entities(),
            });
        }
        Ok(Plan {
            version,
            next_id: next,
            gone,
            rows,
        })
    }
}
