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

#[derive(Debug, Clone, Copy)]
pub(super) struct Cand {
    /// Index into the subscriber's entries.
    entry: u32,
    /// Index in the client's known set after despawns, or [`SPAWN`].
    known_index: u32,
    span: Span,
    /// The entity's current quantized position (what the client holds once this is sent).
    qx: i32,
    qy: i32,
    selected: bool,
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
) -> Result<(), ReplicateError> {
    let version = world.version();
    let ranks = sub.view.visible_ranks();
    s.cands.clear();
    let mut known_len = 0u32;
    for (j, (e, &rank)) in sub.entries.iter().zip(ranks).enumerate() {
        let rank = rank as usize;
        if e.sent {
            if let Some((qx, qy, mask)) = pending(world, rank, e) {
                let span = cache.record(world, rank, e.qx, e.qy, mask)?;
                s.cands.push(Cand {
                    entry: j as u32,
                    known_index: known_len,
                    span,
                    qx,
                    qy,
                    selected: false,
                });
            }
            known_len += 1;
        } else {
            let span = cache.spawn(world, rank)?;
            let (qx, qy) = world.rank_qpos(rank).unwrap_or((0, 0));
            s.cands.push(Cand {
                entry: j as u32,
                known_index: SPAWN,
                span,
                qx,
                qy,
                selected: false,
            });
        }
    }
    let entries = std::sync::Arc::make_mut(&mut sub.entries);
    select(
        entries, ranks, cols, header, *input, known_len, budget, geo, s, stats,
    );
    s.indices.clear();
    s.records.clear();
    s.spawns.clear();
    for c in &s.cands {
        if !c.selected {
            continue;
        }
        let Some(e) = entries.get_mut(c.entry as usize) else {
            continue;
        };
        if c.known_index == SPAWN {
            s.spawns.push((e.id, c.span));
            e.sent = true;
            stats.spawns += 1;
        } else {
            s.indices.push(c.known_index);
            push_small(&mut s.records, cache.bytes(c.span));
            stats.updates += 1;
        }
        e.qx = c.qx;
        e.qy = c.qy;
        e.version = version;
        e.prio = 0.0;
    }
    Ok(())
}

/// Marks which candidates fit the budget. See the module docs for the priority rule.
#[allow(clippy::too_many_arguments)]
fn select(
    entries: &mut [Entry],
    ranks: &[u32],
    cols: &Columns<'_>,
    header: &DeltaHeader,
    input: FrameInput<'_>,
    known_len: u32,
    budget: usize,
    (cx, cy, d_max, pd): (f32, f32, f32, f32),
    s: &mut Scratch,
    stats: &mut BuildStats,
) -> bool {
    // Fixed part: tag, tick, ack, flags, control, despawns, events, and the two list counts.
    let n_upd = s.cands.iter().filter(|c| c.known_index != SPAWN).count();
    let n_spawn = s.cands.len() - n_upd;
    let fixed = share::header_len(header)
        + id_list_len(&s.despawns)
        + vlen(n_upd as u64)
        + vlen(n_spawn as u64)
        + share::events_len(&input, &s.events);
    // Index set bound: the writer picks the shorter of gaps (each gap ≤ known_len) and a bitset of at
    // most ⌈known_len / 8⌉ bytes, so this never undercounts.
    let per_gap = vlen(u64::from(known_len)) as u64;
    let full_bits = u64::from(known_len).div_ceil(8);
    let bitset = vlen(full_bits) as u64 + full_bits;
    let index_cost = |n: u64| {
        if n == 0 {
            0
        } else {
            1 + bitset.min(n * per_gap)
        }
    };
    let item_cost = |c: &Cand, e: &Entry| -> u64 {
        if c.known_index == SPAWN {
            vlen(u64::from(e.id)) as u64 + u64::from(c.span.len)
        } else {
            u64::from(c.span.len)
        }
    };
    let mut all = fixed as u64 + index_cost(n_upd as u64);
    for c in &s.cands {
        if let Some(e) = entries.get(c.entry as usize) {
            all += item_cost(c, e);
        }
    }
    if all <= budget as u64 {
        for c in s.cands.iter_mut() {
            c.selected = true;
        }
        return true; // everything fits
    }
    // Accumulate priority, then fill greedily from the highest.
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
    // Highest priority first; ties by entry order (lower id) so the choice is deterministic.
    s.order
        .sort_unstable_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
    for c in s.cands.iter_mut() {
        c.selected = false;
    }
    if fixed > budget {
        stats.over_budget += 1;
        stats.deferred += s.cands.len() as u64;
        return false;
    }
    let mut used = fixed as u64;
    let mut upd_sel = 0u64;
    for &(_, ci) in &s.order {
        let Some(c) = s.cands.get_mut(ci as usize) else {
            continue;
        };
        let Some(e) = entries.get(c.entry as usize) else {
            continue;
        };
        let mut delta = item_cost(c, e);
        if c.known_index != SPAWN {
            delta += index_cost(upd_sel + 1) - index_cost(upd_sel);
        }
        if used + delta <= budget as u64 {
            used += delta;
            c.selected = true;
            if c.known_index != SPAWN {
                upd_sel += 1;
            }
        } else {
            stats.deferred += 1;
        }
    }
    // An item that cannot fit even an otherwise empty frame (a spawn with long strings under a
    // tiny budget) would wait forever: when nothing was chosen, the most urgent item goes alone
    // and the frame is counted as over budget, so every entity in view is eventually sent.
    if !s.cands.iter().any(|c| c.selected) {
        if let Some(c) = s
            .order
            .first()
            .and_then(|&(_, ci)| s.cands.get_mut(ci as usize))
        {
            c.selected = true;
            stats.deferred = stats.deferred.saturating_sub(1);
            stats.over_budget += 1;
        }
    }
    false
}
