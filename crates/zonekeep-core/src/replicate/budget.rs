//! The byte budget: candidates (pending updates and spawns) chosen by accumulated priority.
//! See the module docs of [`super`] for the priority rule and the starvation bound.

use super::build::{pending, push_small, Scratch};
use super::cache::{Cache, Span};
use super::share;
use super::{BuildStats, Entry, FrameInput, ReplicateError, Subscriber};
use crate::interest::Columns;
use crate::world::World;
use zonekeep_protocol::delta::DeltaHeader;
use zonekeep_protocol::wire::varint_len;

#[inline]
fn vlen(v: u64) -> usize {
    varint_len(v)
}

/// `known_index` of a spawn candidate.
const SPAWN: u32 = u32::MAX;

/// Fewest bytes an update record takes: a record always carries its form byte.
const MIN_RECORD: u64 = 1;

/// Fewest bytes a spawn body takes: its kind and both coordinates, a byte each at least.
const MIN_SPAWN_BODY: u64 = 3;

/// Candidates in a row that did not fit after which the greedy fill stops, once it has chosen
/// something: the frame is full to within a few bytes, and reading (and encoding) the rest of
/// the order to find one that still fits costs more than the bytes are worth. They wait with
/// their priority kept.
const MISSES_BEFORE_FULL: u32 = 16;

/// Fewest candidates put in order first; the order grows by doubling while the fill reads on.
/// The first step is sized by how far the subscriber's last fill read, since consecutive
/// frames of one subscriber read about as far.
const FIRST_ORDERED: usize = 64;

#[derive(Debug, Clone, Copy)]
pub(super) struct Cand {
    /// Index into the subscriber's entries.
    entry: u32,
    /// Index in the client's known set after despawns, or [`SPAWN`].
    known_index: u32,
    /// The entity's rank in the world.
    rank: u32,
    /// The fields pending (updates only).
    mask: u32,
    /// Its encoding, once [`Cand::encode`] made it: only candidates the fill reads are encoded.
    span: Option<Span>,
    /// The entity's current quantized position (what the client holds once this is sent).
    qx: i32,
    qy: i32,
    selected: bool,
}

impl Cand {
    /// The candidate's bytes (an update against what the client holds, or a spawn body),
    /// encoded once into the build's shared arena.
    fn encode(
        &mut self,
        e: &Entry,
        world: &World,
        cache: &mut Cache,
    ) -> Result<Span, ReplicateError> {
        if let Some(span) = self.span {
            return Ok(span);
        }
        let rank = self.rank as usize;
        let span = if self.known_index == SPAWN {
            cache.spawn(world, rank)?
        } else {
            cache.record(world, rank, e.qx, e.qy, self.mask)?
        };
        self.span = Some(span);
        Ok(span)
    }
}

/// What [`send_selected`] queued.
#[derive(Debug, Clone, Copy)]
pub(super) struct Selected {
    /// Everything pending fit: nothing was deferred and no priority changed.
    pub(super) all: bool,
    /// The client's known-set length after despawns.
    pub(super) known_len: u32,
}

/// Exact byte length of a gap-coded id list with its count.
fn id_list_len(ids: &[u32]) -> usize {
    let mut n = vlen(ids.len() as u64);
    let mut prev: Option<u32> = None;
    for &id in ids {
        let g = match prev {
            None => id,
            Some(p) => id.wrapping_sub(p).wrapping_sub(1),
        };
        n += vlen(u64::from(g));
        prev = Some(id);
    }
    n
}

/// Queues the pending updates and spawns that fit the budget, by accumulated priority.
#[allow(clippy::too_many_arguments)]
pub(super) fn send_selected(
    sub: &mut Subscriber,
    world: &World,
    cols: &Columns<'_>,
    header: &DeltaHeader,
    input: &FrameInput<'_>,
    budget: usize,
    geo: (f32, f32, f32, f32),
    cache: &mut Cache,
    s: &mut Scratch,
    stats: &mut BuildStats,
) -> Result<Selected, ReplicateError> {
    let version = world.version();
    let ranks = sub.view.visible_ranks();
    s.cands.clear();
    let mut known_len = 0u32;
    for (j, (e, &rank)) in sub.entries.iter().zip(ranks).enumerate() {
        if e.sent {
            if let Some((qx, qy, mask)) = pending(world, rank as usize, e) {
                s.cands.push(Cand {
                    entry: j as u32,
                    known_index: known_len,
                    rank,
                    mask,
                    span: None,
                    qx,
                    qy,
                    selected: false,
                });
            }
            known_len += 1;
        } else {
            let (qx, qy) = world.rank_qpos(rank as usize).unwrap_or((0, 0));
            s.cands.push(Cand {
                entry: j as u32,
                known_index: SPAWN,
                rank,
                mask: 0,
                span: None,
                qx,
                qy,
                selected: false,
            });
        }
    }
    let entries = std::sync::Arc::make_mut(&mut sub.entries);
    let fill = Fill {
        header,
        input: *input,
        known_len,
        budget,
        geo,
    };
    let first = (sub.fill_read as usize)
        .saturating_add(sub.fill_read as usize / 8)
        .max(FIRST_ORDERED);
    let all = select(entries, ranks, cols, world, cache, &fill, first, s, stats)?;
    sub.fill_read = u32::try_from(s.read).unwrap_or(u32::MAX);
    s.indices.clear();
    s.records.clear();
    s.spawns.clear();
    for c in &s.cands {
        let (true, Some(span)) = (c.selected, c.span) else {
            continue;
        };
        let Some(e) = entries.get_mut(c.entry as usize) else {
            continue;
        };
        if c.known_index == SPAWN {
            s.spawns.push((e.id, span));
            e.sent = true;
            stats.spawns += 1;
        } else {
            s.indices.push(c.known_index);
            push_small(&mut s.records, cache.bytes(span));
            stats.updates += 1;
        }
        e.qx = c.qx;
        e.qy = c.qy;
        e.version = version;
        e.prio = 0.0;
    }
    Ok(Selected { all, known_len })
}

/// What one frame's selection works within.
struct Fill<'h, 'i> {
    header: &'h DeltaHeader,
    input: FrameInput<'i>,
    /// The client's known-set length after despawns.
    known_len: u32,
    budget: usize,
    /// View centre, `d_max` and `priority_distance`.
    geo: (f32, f32, f32, f32),
}

/// Highest accumulated priority first; ties by entry order (lower id), so the choice is
/// deterministic however much of the order is sorted.
fn by_urgency(a: &(f32, u32), b: &(f32, u32)) -> std::cmp::Ordering {
    b.0.total_cmp(&a.0).then(a.1.cmp(&b.1))
}

/// Puts `order[from..]`'s next `count` most urgent candidates, in order, at `from..`: the
/// order up to there is then exactly the fully sorted one's.
fn order_next(order: &mut [(f32, u32)], from: usize, count: usize) -> usize {
    let rest = order.get_mut(from..).unwrap_or_default();
    if rest.len() > count {
        rest.select_nth_unstable_by(count, by_urgency);
        if let Some(head) = rest.get_mut(..count) {
            head.sort_unstable_by(by_urgency);
        }
        from + count
    } else {
        rest.sort_unstable_by(by_urgency);
        order.len()
    }
}

/// Marks which candidates fit the budget; whether all of them did. See the module docs for the
/// priority rule.
///
/// Only what the fill reads is encoded: when even the fewest bytes each candidate could take
/// exceed the budget, the exact total is never needed; the candidates are put in order only as
/// far as the fill reads; and the fill stops once the frame is full to within a few bytes
/// ([`MISSES_BEFORE_FULL`]). What it never reached waits, its priority kept, like any item
/// that did not fit.
#[allow(clippy::too_many_arguments)]
fn select(
    entries: &mut [Entry],
    ranks: &[u32],
    cols: &Columns<'_>,
    world: &World,
    cache: &mut Cache,
    fill: &Fill<'_, '_>,
    first: usize,
    s: &mut Scratch,
    stats: &mut BuildStats,
) -> Result<bool, ReplicateError> {
    s.read = 0;
    let budget = fill.budget as u64;
    // Fixed part: tag, tick, ack, flags, control, despawns, events, and the two list counts.
    let n_upd = s.cands.iter().filter(|c| c.known_index != SPAWN).count();
    let n_spawn = s.cands.len() - n_upd;
    let fixed = (share::header_len(fill.header)
        + id_list_len(&s.despawns)
        + vlen(n_upd as u64)
        + vlen(n_spawn as u64)
        + share::events_len(&fill.input, &s.events)) as u64;
    // Index set bound: the writer picks the shorter of gaps (each gap ≤ known_len) and a bitset of at
    // most ⌈known_len / 8⌉ bytes, so this never undercounts.
    let per_gap = vlen(u64::from(fill.known_len)) as u64;
    let full_bits = u64::from(fill.known_len).div_ceil(8);
    let bitset = vlen(full_bits) as u64 + full_bits;
    let index_cost = |n: u64| {
        if n == 0 {
            0
        } else {
            1 + bitset.min(n * per_gap)
        }
    };
    // A spawn's id goes in front of its body.
    let item_cost = |c: &Cand, e: &Entry, body: u64| -> u64 {
        if c.known_index == SPAWN {
            vlen(u64::from(e.id)) as u64 + body
        } else {
            body
        }
    };
    let least: u64 = s
        .cands
        .iter()
        .filter_map(|c| {
            let e = entries.get(c.entry as usize)?;
            let body = if c.known_index == SPAWN {
                MIN_SPAWN_BODY
            } else {
                MIN_RECORD
            };
            Some(item_cost(c, e, body))
        })
        .sum();
    if fixed + index_cost(n_upd as u64) + least <= budget {
        let mut all = fixed + index_cost(n_upd as u64);
        for c in s.cands.iter_mut() {
            if let Some(e) = entries.get(c.entry as usize) {
                let span = c.encode(e, world, cache)?;
                all += item_cost(c, e, u64::from(span.len));
            }
        }
        if all <= budget {
            for c in s.cands.iter_mut() {
                c.selected = true;
            }
            return Ok(true); // everything fits
        }
    }
    // Accumulate priority, then fill greedily from the highest.
    let (cx, cy, d_max, pd) = fill.geo;
    s.order.clear();
    for (ci, c) in s.cands.iter().enumerate() {
        let rank = ranks.get(c.entry as usize).copied().unwrap_or(0) as usize;
        let d = match (cols.xs.get(rank), cols.ys.get(rank)) {
            (Some(&x), Some(&y)) => ((x - cx) * (x - cx) + (y - cy) * (y - cy)).sqrt(),
            _ => d_max,
        };
        let d = if d.is_nan() { d_max } else { d.min(d_max) };
        if let Some(e) = entries.get_mut(c.entry as usize) {
            e.prio += 1.0 / (1.0 + d / pd);
            s.order.push((e.prio, ci as u32));
        }
    }
    let waiting = s.cands.len() as u64;
    if fixed > budget {
        stats.over_budget += 1;
        stats.deferred += waiting;
        return Ok(false);
    }
    let mut used = fixed;
    let mut upd_sel = 0u64;
    let mut chosen = 0u64;
    let mut misses = 0u32;
    let mut ordered = order_next(&mut s.order, 0, first);
    let mut at = 0usize;
    while let Some(&(_, ci)) = s.order.get(at) {
        if at + 1 == ordered {
            ordered = order_next(&mut s.order, ordered, ordered);
        }
        at += 1;
        let Some(c) = s.cands.get_mut(ci as usize) else {
            continue;
        };
        let Some(e) = entries.get(c.entry as usize) else {
            continue;
        };
        let span = c.encode(e, world, cache)?;
        let mut delta = item_cost(c, e, u64::from(span.len));
        if c.known_index != SPAWN {
            delta += index_cost(upd_sel + 1) - index_cost(upd_sel);
        }
        if used + delta <= budget {
            used += delta;
            c.selected = true;
            chosen += 1;
            misses = 0;
            if c.known_index != SPAWN {
                upd_sel += 1;
            }
            if used == budget {
                break;
            }
        } else {
            misses += 1;
            // Until something fits, read on: a smaller item further down may still fit where
            // the most urgent ones are each larger than the room left.
            if misses >= MISSES_BEFORE_FULL && chosen > 0 {
                break;
            }
        }
    }
    // An item that cannot fit even an otherwise empty frame (a spawn with long strings under a
    // tiny budget) would wait forever: when nothing was chosen, the most urgent item goes alone
    // and the frame is counted as over budget, so every entity in view is eventually sent. The
    // fill read it first, so it is encoded.
    if chosen == 0 {
        if let Some(c) = s
            .order
            .first()
            .and_then(|&(_, ci)| s.cands.get_mut(ci as usize))
        {
            c.selected = true;
            chosen = 1;
            stats.over_budget += 1;
        }
    }
    stats.deferred += waiting - chosen;
    s.read = at;
    Ok(false)
}
