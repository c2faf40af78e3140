//! One patch: interest, diff against what each subscriber was sent, budget, frame assembly.

use super::cache::Span;
use super::{BuildStats, Entry, FrameInput, ReplicateError, Replicator, Subscriber, SubscriberId};
use crate::interest::{Columns, ViewSpec};
use crate::world::{EntityId, World};
use zonekeep_protocol::delta::{DeltaHeader, DeltaWriter};
use zonekeep_protocol::wire::varint_len;

use super::share::{self, Sent};
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
    /// The entity's current quantized position (what the client holds once this is sent).
    qx: i32,
    qy: i32,
    selected: bool,
}

/// Buffers reused by every subscriber of every build.
#[derive(Debug, Clone, Default)]
pub(super) struct Scratch {
    entries: Vec<Entry>,
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
    r.share.begin();
    for i in 0..r.subs.len() {
        let (done_subs, rest) = r.subs.split_at_mut(i);
        let Some(sub) = rest.first_mut() else {
            break;
        };
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
        if !r
            .share
            .follow(done_subs, sub, tick, &input, &mut r.scratch.out, &mut stats)
        {
            let outer = sub.cfg.radius.max(0.0) + sub.cfg.margin.max(0.0);
            let d_max = if outer.is_finite() {
                outer
            } else {
                pd * 1000.0
            };
            let pre_state = sub.state;
            let was_baseline = sub.baseline;
            let lead = r.share.reserve(pre_state);
            let done = frame(
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
            sub.state = r.share.fresh_state();
            if done.clean {
                r.share.merge(done_subs, i, sub);
            }
            if lead && done.clean {
                let out = &r.scratch.out;
                let body = out
                    .get(done.header_len..out.len().saturating_sub(done.events_len))
                    .unwrap_or(&[]);
                r.share
                    .publish(pre_state, i, was_baseline, body, sub.state, done.sent);
            }
        }
        let out = &r.scratch.out;
        stats.frames += 1;
        stats.bytes += out.len() as u64;
        sink(sid, out);
    }
    stats.shared_bodies = r.share.shared;
    stats.cache_hits = r.cache.hits;
    stats.encodings = r.cache.encodings;
    Ok(stats)
}

/// What is pending for a known entity: its current quantized position and the mask of fields
/// changed since it was last sent, or `None` when nothing changed.
#[inline]
fn pending(world: &World, rank: usize, e: &Entry) -> Option<(i32, i32, u32)> {
    let (qx, qy) = world.rank_qpos(rank)?;
    let moved = qx != e.qx || qy != e.qy;
    let mut mask = 0u32;
    if world.rank_last_change(rank) > e.version {
        for (f, &c) in world.rank_changed(rank).unwrap_or(&[]).iter().enumerate() {
            if c > e.version {
                mask |= 1 << f;
            }
        }
    }
    (moved || mask != 0).then_some((qx, qy, mask))
}

/// Appends a short record; most are 1–3 bytes, where a byte loop beats a `memcpy` call.
#[inline]
fn push_small(out: &mut Vec<u8>, bytes: &[u8]) {
    if bytes.len() <= 4 {
        for &b in bytes {
            out.push(b);
        }
    } else {
        out.extend_from_slice(bytes);
    }
}

/// What [`frame`] produced, for body sharing.
struct Done {
    /// Nothing was deferred and no priority changed: the body depends only on the sent state.
    clean: bool,
    header_len: usize,
    events_len: usize,
    sent: Sent,
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
) -> Result<Done, ReplicateError> {
    let version = world.version();
    let baseline = sub.baseline;
    if baseline {
        // The client clears its known set on a BASELINE: nothing is sent, nothing to despawn.
        sub.entries.clear();
    }

    // 1. Align entries with the new visible set; sent entries that left become despawns. In the
    //    steady state (nothing entered or left) the entries are already aligned.
    s.despawns.clear();
    let aligned = !baseline
        && sub.view.entered().is_empty()
        && sub.view.left().is_empty()
        && sub.entries.len() == sub.view.visible().len();
    if !aligned {
        s.entries.clear();
        let old = &sub.entries;
        let mut k = 0usize;
        for &id in sub.view.visible() {
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
        }
        for e in old.get(k..).unwrap_or(&[]) {
            if e.sent {
                s.despawns.push(e.id);
            }
        }
        std::mem::swap(&mut sub.entries, &mut s.entries);
    }
    let ranks = sub.view.visible_ranks();

    // 2. Events within protocol limits, and the header.
    share::filter_events(&input, &mut s.events, stats);
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

    s.indices.clear();
    s.records.clear();
    s.spawns.clear();
    let mut known_len = 0u32;
    let mut clean = true;
    let updates0 = stats.updates;
    let spawns0 = stats.spawns;
    if sub.cfg.budget.is_none() {
        // 3a. Unbudgeted: one pass, everything pending goes.
        for (e, &rank) in sub.entries.iter_mut().zip(ranks) {
            let rank = rank as usize;
            if e.sent {
                if let Some((qx, qy, mask)) = pending(world, rank, e) {
                    let span = cache.record(world, rank, e.qx, e.qy, mask)?;
                    s.indices.push(known_len);
                    push_small(&mut s.records, cache.bytes(span));
                    stats.updates += 1;
                    e.qx = qx;
                    e.qy = qy;
                    e.version = version;
                }
                known_len += 1;
            } else {
                let span = cache.spawn(world, rank)?;
                s.spawns.push((e.id, span));
                stats.spawns += 1;
                let (qx, qy) = world.rank_qpos(rank).unwrap_or((0, 0));
                *e = Entry {
                    id: e.id,
                    sent: true,
                    qx,
                    qy,
                    version,
                    prio: 0.0,
                };
            }
        }
    } else {
        // 3b. Budgeted: candidates, assembled optimistically as if everything fits (the common
        //     case); only when the budget bites are they selected by priority and reassembled.
        s.cands.clear();
        for (j, (e, &rank)) in sub.entries.iter().zip(ranks).enumerate() {
            let rank = rank as usize;
            if e.sent {
                if let Some((qx, qy, mask)) = pending(world, rank, e) {
                    let span = cache.record(world, rank, e.qx, e.qy, mask)?;
                    s.indices.push(known_len);
                    push_small(&mut s.records, cache.bytes(span));
                    s.cands.push(Cand {
                        entry: j as u32,
                        known_index: known_len,
                        span,
                        qx,
                        qy,
                        selected: true,
                    });
                }
                known_len += 1;
            } else {
                let span = cache.spawn(world, rank)?;
                s.spawns.push((e.id, span));
                let (qx, qy) = world.rank_qpos(rank).unwrap_or((0, 0));
                s.cands.push(Cand {
                    entry: j as u32,
                    known_index: SPAWN,
                    span,
                    qx,
                    qy,
                    selected: true,
                });
            }
        }
        let budget = sub.cfg.budget.unwrap_or(usize::MAX);
        clean = select(
            &mut sub.entries,
            ranks,
            cols,
            &header,
            input,
            known_len,
            budget,
            (cx, cy, d_max, pd),
            s,
            stats,
        );
        if !clean {
            s.indices.clear();
            s.records.clear();
            s.spawns.clear();
        }
        for c in &s.cands {
            if !c.selected {
                continue;
            }
            let Some(e) = sub.entries.get_mut(c.entry as usize) else {
                continue;
            };
            if c.known_index == SPAWN {
                if !clean {
                    s.spawns.push((e.id, c.span));
                }
                e.sent = true;
                stats.spawns += 1;
            } else {
                if !clean {
                    s.indices.push(c.known_index);
                    push_small(&mut s.records, cache.bytes(c.span));
                }
                stats.updates += 1;
            }
            e.qx = c.qx;
            e.qy = c.qy;
            e.version = version;
            e.prio = 0.0;
        }
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
    Ok(Done {
        clean,
        header_len: share::header_len(&header),
        events_len: share::events_len(&input, &s.events),
        sent: Sent {
            updates: stats.updates - updates0,
            spawns: stats.spawns - spawns0,
            despawns: s.despawns.len() as u64,
        },
    })
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
        return true; // everything fits: all stay selected
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
    false
}
