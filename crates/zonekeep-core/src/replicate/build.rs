//! One patch: interest, diff against what each subscriber was sent, budget, frame assembly.

use super::cache::Span;
use super::{BuildStats, Entry, FrameInput, ReplicateError, Replicator, Subscriber, SubscriberId};
use crate::interest::{Columns, ViewSpec};
use crate::world::{EntityId, World};
use zonekeep_protocol::delta::{DeltaHeader, DeltaWriter};
use zonekeep_protocol::limits::{MAX_EVENTS, MAX_EVENT_PAYLOAD};
use zonekeep_protocol::wire::varint_len;

use super::Focus;

/// `known_index` of a spawn candidate.
const SPAWN: u32 = u32::MAX;

#[derive(Debug, Clone, Copy)]
struct Cand {
    /// Index into the subscriber's entries.
    entry: u32,
    /// Index in the client's known set after despawns, or [`SPAWN`].
    known_index: u32,
    span: Span,
    selected: bool,
}

/// Buffers reused by every subscriber of every build.
#[derive(Debug, Clone, Default)]
pub(super) struct Scratch {
    entries: Vec<Entry>,
    ranks: Vec<u32>,
    despawns: Vec<u32>,
    cands: Vec<Cand>,
    order: Vec<(f32, u32)>,
    indices: Vec<u32>,
    records: Vec<u8>,
    spawns: Vec<(u32, Span)>,
    events: Vec<u32>,
    out: Vec<u8>,
}

#[inline]
fn vlen(v: u64) -> usize {
    varint_len(v)
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

pub(super) fn build<'a, C, I, S>(
    r: &mut Replicator,
    world: &World,
    tick: u64,
    mut can_see: C,
    mut inputs: I,
    mut sink: S,
) -> Result<BuildStats, ReplicateError>
where
    C: FnMut(SubscriberId, EntityId) -> bool,
    I: FnMut(SubscriberId) -> FrameInput<'a>,
    S: FnMut(SubscriberId, &[u8]),
{
    let cols = world.columns();
    r.interest.rebuild(&cols);
    r.cache.begin(cols.len());
    let mut stats = BuildStats::default();
    let pd = if r.cfg.priority_distance.is_finite() && r.cfg.priority_distance > 0.0 {
        r.cfg.priority_distance
    } else {
        1.0
    };
    for sub in r.subs.iter_mut() {
        let sid = sub.id;
        let centre = match sub.cfg.focus {
            Focus::Point(x, y) => Some((x, y)),
            Focus::Entity(e) => world
                .rank_of(e)
                .and_then(|rk| Some((*cols.xs.get(rk)?, *cols.ys.get(rk)?)))
                .or(sub.centre),
        };
        sub.centre = centre;
        let (cx, cy) = centre.unwrap_or((f32::NAN, f32::NAN));
        let spec = ViewSpec {
            x: cx,
            y: cy,
            radius: sub.cfg.radius,
            margin: sub.cfg.margin,
            own: sub
                .cfg
                .control
                .and_then(|c| world.rank_of(c))
                .map(|rk| rk as u32),
        };
        r.interest
            .update_view(&cols, &mut sub.view, &spec, |id| can_see(sid, EntityId(id)));
        let input = inputs(sid);
        let outer = sub.cfg.radius.max(0.0) + sub.cfg.margin.max(0.0);
        let d_max = if outer.is_finite() {
            outer
        } else {
            pd * 1000.0
        };
        frame(
            sub,
            world,
            &cols,
            tick,
            input,
            (cx, cy, d_max, pd),
            &mut r.cache,
            &mut r.scratch,
            &mut stats,
        )?;
        let out = &r.scratch.out;
        stats.frames += 1;
        stats.bytes += out.len() as u64;
        sink(sid, out);
    }
    stats.cache_hits = r.cache.hits;
    stats.encodings = r.cache.encodings;
    Ok(stats)
}

/// Builds one subscriber's frame into `s.out` and advances what it was sent.
#[allow(clippy::too_many_arguments)]
fn frame(
    sub: &mut Subscriber,
    world: &World,
    cols: &Columns<'_>,
    tick: u64,
    input: FrameInput<'_>,
    (cx, cy, d_max, pd): (f32, f32, f32, f32),
    cache: &mut super::cache::Cache,
    s: &mut Scratch,
    stats: &mut BuildStats,
) -> Result<(), ReplicateError> {
    let version = world.version();
    let baseline = sub.baseline;
    if baseline {
        // The client clears its known set on a BASELINE: nothing is sent, nothing to despawn.
        sub.entries.clear();
    }

    // 1. Align entries with the new visible set; sent entries that left become despawns.
    s.despawns.clear();
    s.entries.clear();
    s.ranks.clear();
    {
        let old = &sub.entries;
        let mut k = 0usize;
        for (&id, &rank) in sub.view.visible().iter().zip(sub.view.visible_ranks()) {
            while let Some(e) = old.get(k) {
                if e.id >= id {
                    break;
                }
                if e.sent {
                    s.despawns.push(e.id);
                }
                k += 1;
            }
            match old.get(k) {
                Some(e) if e.id == id => {
                    s.entries.push(*e);
                    k += 1;
                }
                _ => s.entries.push(Entry {
                    id,
                    sent: false,
                    qx: 0,
                    qy: 0,
                    version: 0,
                    prio: 0.0,
                }),
            }
            s.ranks.push(rank);
        }
        for e in old.get(k..).unwrap_or(&[]) {
            if e.sent {
                s.despawns.push(e.id);
            }
        }
    }
    std::mem::swap(&mut sub.entries, &mut s.entries);

    // 2. Candidates: changed known entities (updates) and unsent visible ones (spawns).
    s.cands.clear();
    let mut known_len = 0u32;
    for (j, (e, &rank)) in sub.entries.iter().zip(&s.ranks).enumerate() {
        let rank = rank as usize;
        if e.sent {
            let (qx, qy) = world.rank_qpos(rank).unwrap_or((e.qx, e.qy));
            let fields_pending = world.rank_last_change(rank) > e.version;
            if qx != e.qx || qy != e.qy || fields_pending {
                let mut mask = 0u32;
                if fields_pending {
                    for (f, &c) in world.rank_changed(rank).unwrap_or(&[]).iter().enumerate() {
                        if c > e.version {
                            mask |= 1 << f;
                        }
                    }
                }
                if mask != 0 || qx != e.qx || qy != e.qy {
                    let span = cache.record(world, rank, e.qx, e.qy, mask)?;
                    s.cands.push(Cand {
                        entry: j as u32,
                        known_index: known_len,
                        span,
                        selected: true,
                    });
                }
            }
            known_len += 1;
        } else {
            let span = cache.spawn(world, rank)?;
            s.cands.push(Cand {
                entry: j as u32,
                known_index: SPAWN,
                span,
                selected: true,
            });
        }
    }

    // 3. Events within protocol limits.
    s.events.clear();
    for (i, (_, payload)) in input.events.iter().enumerate() {
        if s.events.len() < MAX_EVENTS && payload.len() <= MAX_EVENT_PAYLOAD {
            s.events.push(i as u32);
        } else {
            stats.events_dropped += 1;
        }
    }
    let has_events = !s.events.is_empty();
    let want_control = sub.cfg.control.map(|c| c.0);
    let control = (sub.control_sent != Some(want_control)).then_some(want_control);
    let header = DeltaHeader {
        tick,
        ack: input.ack,
        baseline,
        control,
        has_events,
    };

    // 4. Budget: choose candidates by accumulated priority.
    if let Some(budget) = sub.cfg.budget {
        select(
            sub,
            cols,
            &header,
            input,
            known_len,
            budget,
            (cx, cy, d_max, pd),
            s,
            stats,
        );
    }

    // 5. Assemble and advance the sent state.
    s.indices.clear();
    s.records.clear();
    s.spawns.clear();
    for c in &s.cands {
        if !c.selected {
            continue;
        }
        let Some(e) = sub.entries.get_mut(c.entry as usize) else {
            continue;
        };
        let rank = s.ranks.get(c.entry as usize).copied().unwrap_or(0) as usize;
        let (qx, qy) = world.rank_qpos(rank).unwrap_or((e.qx, e.qy));
        if c.known_index == SPAWN {
            s.spawns.push((e.id, c.span));
            e.sent = true;
            stats.spawns += 1;
        } else {
            s.indices.push(c.known_index);
            s.records.extend_from_slice(cache.bytes(c.span));
            stats.updates += 1;
        }
        e.qx = qx;
        e.qy = qy;
        e.version = version;
        e.prio = 0.0;
    }
    stats.despawns += s.despawns.len() as u64;
    s.out.clear();
    let mut w = DeltaWriter::new(&mut s.out, &header);
    w.despawns(&s.despawns)?;
    w.updates(known_len, &s.indices, &s.records)?;
    w.spawns(s.spawns.iter().map(|&(id, span)| (id, cache.bytes(span))))?;
    if has_events {
        let events = &input.events;
        w.events(
            s.events
                .iter()
                .filter_map(|&i| events.get(i as usize).map(|&(t, p)| (t, p)))
                .collect::<Vec<_>>()
                .into_iter(),
        )?;
    }
    w.finish()?;
    sub.baseline = false;
    sub.control_sent = Some(want_control);
    Ok(())
}

/// Marks which candidates fit the budget. See the module docs for the priority rule.
#[allow(clippy::too_many_arguments)]
fn select(
    sub: &mut Subscriber,
    cols: &Columns<'_>,
    header: &DeltaHeader,
    input: FrameInput<'_>,
    known_len: u32,
    budget: usize,
    (cx, cy, d_max, pd): (f32, f32, f32, f32),
    s: &mut Scratch,
    stats: &mut BuildStats,
) {
    // Fixed part: tag, tick, ack, flags, control, despawns, events, and the two list counts.
    let n_upd = s.cands.iter().filter(|c| c.known_index != SPAWN).count();
    let n_spawn = s.cands.len() - n_upd;
    let mut fixed = 1
        + vlen(header.tick)
        + vlen(u64::from(header.ack))
        + 1
        + header
            .control
            .map_or(0, |c| vlen(c.map_or(0, |id| u64::from(id) + 1)))
        + id_list_len(&s.despawns)
        + vlen(n_upd as u64)
        + vlen(n_spawn as u64);
    if header.has_events {
        fixed += vlen(s.events.len() as u64);
        for &i in &s.events {
            if let Some((t, p)) = input.events.get(i as usize) {
                fixed += vlen(u64::from(*t)) + vlen(p.len() as u64) + p.len();
            }
        }
    }
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
        if let Some(e) = sub.entries.get(c.entry as usize) {
            all += item_cost(c, e);
        }
    }
    if all <= budget as u64 {
        return; // everything fits: all stay selected
    }
    // Accumulate priority, then fill greedily from the highest.
    s.order.clear();
    for (ci, c) in s.cands.iter().enumerate() {
        let rank = s.ranks.get(c.entry as usize).copied().unwrap_or(0) as usize;
        let d = match (cols.xs.get(rank), cols.ys.get(rank)) {
            (Some(&x), Some(&y)) => ((x - cx) * (x - cx) + (y - cy) * (y - cy)).sqrt(),
            _ => d_max,
        };
        let d = if d.is_nan() { d_max } else { d.min(d_max) };
        if let Some(e) = sub.entries.get_mut(c.entry as usize) {
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
        return;
    }
    let mut used = fixed as u64;
    let mut upd_sel = 0u64;
    for &(_, ci) in &s.order {
        let Some(c) = s.cands.get_mut(ci as usize) else {
            continue;
        };
        let Some(e) = sub.entries.get(c.entry as usize) else {
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
}
