//! One patch: interest, diff against what each subscriber was sent, budget, frame assembly.

use super::budget::{send_selected, Cand};
use super::cache::Span;
use super::{
    BuildStats, Entry, FrameHead, FrameInput, ReplicateError, Replicator, Subscriber, SubscriberId,
};
use crate::interest::{Columns, ViewSpec};
use crate::stages::StageClock;
use crate::world::{EntityId, World};
use zonekeep_protocol::delta::{DeltaHeader, DeltaWriter};
use zonekeep_protocol::limits::MAX_SERVER_MESSAGE;

use super::share::{self, Sent};
use super::Focus;

/// Buffers reused by every subscriber of every build.
#[derive(Debug, Clone, Default)]
pub(super) struct Scratch {
    /// The stage clock, when the host times stages; interest and budget time accumulate below.
    pub(super) clock: Option<StageClock>,
    /// Whether this build is timed (the host times one build in several).
    pub(super) timing: bool,
    /// Time spent finding views since the timings were last taken.
    pub(super) interest: std::time::Duration,
    /// Time spent choosing updates under budgets since the timings were last taken.
    pub(super) budget: std::time::Duration,
    pub(super) entries: Vec<Entry>,
    pub(super) saved: Vec<Entry>,
    pub(super) despawns: Vec<u32>,
    pub(super) cands: Vec<Cand>,
    pub(super) order: Vec<(f32, u32)>,
    /// How far the last budget fill read down `order`.
    pub(super) read: usize,
    pub(super) indices: Vec<u32>,
    pub(super) records: Vec<u8>,
    pub(super) spawns: Vec<(u32, Span)>,
    pub(super) events: Vec<u32>,
    pub(super) out: Vec<u8>,
}

pub(super) fn build<'a, C, D, I, S>(
    r: &mut Replicator,
    world: &World,
    tick: u64,
    mut can_see: Option<C>,
    mut due: D,
    mut inputs: I,
    mut sink: S,
) -> Result<BuildStats, ReplicateError>
where
    C: FnMut(SubscriberId, EntityId) -> bool,
    D: FnMut(SubscriberId) -> bool,
    I: FnMut(SubscriberId) -> FrameInput<'a>,
    S: FnMut(SubscriberId, FrameHead, &[u8]),
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
        if !due(sid) {
            // Sits this patch out, untouched: its next frame diffs against what it holds.
            continue;
        }
        sub.rebase();
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
        let timed = r.scratch.clock.as_ref().filter(|_| r.scratch.timing);
        let started = timed.map(StageClock::now);
        match can_see.as_mut() {
            Some(f) => r
                .interest
                .update_view(&cols, &mut sub.view, &spec, |id| f(sid, EntityId(id))),
            None => r.interest.update_view_all(&cols, &mut sub.view, &spec),
        }
        if let (Some(clock), Some(started)) = (r.scratch.clock.as_ref(), started) {
            r.scratch.interest += clock.now().saturating_sub(started);
        }
        let mut input = inputs(sid);
        if sub.acked.is_some() {
            // A State may be lost: its subscriber's events travel on the caller's reliable path.
            input.events = &[];
        }
        let followed = r
            .share
            .follow(done_subs, sub, tick, &input, &mut r.scratch.out, &mut stats);
        let quiet = if let Some(quiet) = followed {
            quiet
        } else {
            let outer = sub.cfg.radius.max(0.0) + sub.cfg.margin.max(0.0);
            let d_max = if outer.is_finite() {
                outer
            } else {
                pd * 1000.0
            };
            let pre_state = sub.state;
            let was_baseline = sub.baseline;
            let lead = r.share.reserve(pre_state);
            let done = match frame(
                sub,
                world,
                &cols,
                tick,
                input,
                (cx, cy, d_max, pd),
                &mut r.cache,
                &mut r.scratch,
                &mut stats,
            ) {
                Ok(done) => done,
                Err(e) => {
                    // Its sent state may be half advanced: start it over with a BASELINE.
                    sub.reset();
                    return Err(e);
                }
            };
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
            done.quiet
        };
        sub.built_tick = tick;
        if !quiet {
            sub.changed_tick = tick;
        }
        let out = &r.scratch.out;
        stats.frames += 1;
        stats.bytes += out.len() as u64;
        let head = FrameHead {
            ack: input.ack,
            quiet,
            base: sub.acked.as_ref().map(|a| a.base),
        };
        sub.keep(tick);
        sink(sid, head, out);
    }
    stats.shared_bodies = r.share.shared;
    stats.cache_hits = r.cache.hits;
    stats.encodings = r.cache.encodings;
    Ok(stats)
}

/// What is pending for a known entity: its current quantized position and the mask of fields
/// changed since it was last sent, or `None` when nothing changed.
#[inline]
pub(super) fn pending(world: &World, rank: usize, e: &Entry) -> Option<(i32, i32, u32)> {
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
pub(super) fn push_small(out: &mut Vec<u8>, bytes: &[u8]) {
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
    /// The frame says nothing new (see [`FrameHead::quiet`]).
    quiet: bool,
}

/// Builds one subscriber's frame into `s.out` and advances what it was sent.
#[allow(clippy::too_many_arguments)]
fn frame(
    sub: &mut Subscriber,
    world: &World,
    cols: &Columns<'_>,
    tick: u64,
    input: FrameInput<'_>,
    geo: (f32, f32, f32, f32),
    cache: &mut super::cache::Cache,
    s: &mut Scratch,
    stats: &mut BuildStats,
) -> Result<Done, ReplicateError> {
    let baseline = sub.baseline;
    if baseline {
        // The client clears its known set on a BASELINE: nothing is sent, nothing to despawn.
        super::clear_entries(&mut sub.entries);
    }
    align(sub, baseline, s);

    // Events within protocol limits, and the header.
    share::filter_events(&input, &mut s.events, stats);
    let has_events = !s.events.is_empty();
    let want_control = sub.cfg.control.map(|c| c.0);
    let control = (sub.control_sent != Some(want_control)).then_some(want_control);
    let mut header = DeltaHeader {
        tick,
        ack: input.ack,
        baseline,
        control,
        has_events,
        base: sub.acked.as_ref().map(|a| a.base),
    };

    let before = *stats;
    let budget = sub.budget();
    let clean = if let (Some(budget), true) = (budget, sub.over_budget) {
        // Its last frame did not fit: most likely neither will this one, so it is chosen by
        // priority at once rather than built whole, undone and chosen (the choice still sends
        // everything when everything fits).
        choose_within(
            sub, world, cols, &header, &input, budget, geo, cache, s, stats,
        )?
    } else {
        if budget.is_some() {
            s.saved.clear();
            s.saved.extend_from_slice(&sub.entries);
        }
        // Send everything pending; with a budget this is the optimistic attempt.
        let known_len = send_all(sub, world, cache, s, stats)?;
        let written = write(s, cache, &header, known_len, &input);
        let mut clean = true;
        if budget.is_none() && (written.is_err() || s.out.len() > MAX_SERVER_MESSAGE) {
            // More than one message carries (a huge view, without a budget): start the client
            // over from a BASELINE holding what fits the protocol's cap, by priority; the rest
            // follows in later patches. Rare, so the unbudgeted steady state keeps no undo copy
            // for it.
            clean = false;
            *stats = before;
            header.baseline = true;
            s.despawns.clear();
            for e in std::sync::Arc::make_mut(&mut sub.entries).iter_mut() {
                *e = Entry {
                    id: e.id,
                    sent: false,
                    qx: 0,
                    qy: 0,
                    version: 0,
                    prio: 0.0,
                };
            }
            send_selected(
                sub,
                world,
                cols,
                &header,
                &input,
                MAX_SERVER_MESSAGE,
                geo,
                cache,
                s,
                stats,
            )?;
            write(s, cache, &header, 0, &input)?;
        } else {
            written?;
        }
        if let Some(budget) = budget {
            if s.out.len() > budget {
                // Over budget: undo, then choose by accumulated priority.
                clean = false;
                *stats = before;
                super::swap_entries(&mut sub.entries, &mut s.saved);
                choose_within(
                    sub, world, cols, &header, &input, budget, geo, cache, s, stats,
                )?;
            } else {
                sub.over_budget = false;
            }
        }
        clean
    };
    stats.despawns += s.despawns.len() as u64;
    sub.baseline = false;
    sub.control_sent = Some(want_control);
    let sent = Sent {
        updates: stats.updates - before.updates,
        spawns: stats.spawns - before.spawns,
        despawns: s.despawns.len() as u64,
    };
    Ok(Done {
        quiet: share::is_quiet(&header, &sent),
        clean,
        header_len: share::header_len(&header),
        events_len: share::events_len(&input, &s.events),
        sent,
    })
}

/// Chooses by accumulated priority what fits `budget`, writes the frame into `s.out` (timed as
/// budget work) and notes for the next frame whether everything fit, which it returns.
#[allow(clippy::too_many_arguments)]
fn choose_within(
    sub: &mut Subscriber,
    world: &World,
    cols: &Columns<'_>,
    header: &DeltaHeader,
    input: &FrameInput<'_>,
    budget: usize,
    geo: (f32, f32, f32, f32),
    cache: &mut super::cache::Cache,
    s: &mut Scratch,
    stats: &mut BuildStats,
) -> Result<bool, ReplicateError> {
    let started = s.clock.as_ref().filter(|_| s.timing).map(StageClock::now);
    let chosen = send_selected(
        sub, world, cols, header, input, budget, geo, cache, s, stats,
    )?;
    write(s, cache, header, chosen.known_len, input)?;
    if let (Some(clock), Some(started)) = (s.clock.as_ref(), started) {
        s.budget += clock.now().saturating_sub(started);
    }
    sub.over_budget = !chosen.all;
    Ok(chosen.all)
}

/// Aligns the entries with the view's new visible set; sent entries that left become despawns.
/// Unchanged runs are copied in bulk, driven by the view's (short) entered and left lists.
fn align(sub: &mut Subscriber, baseline: bool, s: &mut Scratch) {
    s.despawns.clear();
    let (visible, entered, left) = (sub.view.visible(), sub.view.entered(), sub.view.left());
    // Entries restored from a kept state are not what the entered and left lists describe.
    let rebased = std::mem::take(&mut sub.rebased);
    let consistent =
        !baseline && !rebased && sub.entries.len() + entered.len() == visible.len() + left.len();
    if consistent && entered.is_empty() && left.is_empty() {
        return; // the steady state: already aligned
    }
    s.entries.clear();
    let old = &sub.entries;
    let fresh = |id: u32| Entry {
        id,
        sent: false,
        qx: 0,
        qy: 0,
        version: 0,
        prio: 0.0,
    };
    if consistent {
        let (mut k, mut li, mut ei) = (0usize, 0usize, 0usize);
        loop {
            let l = left.get(li).copied();
            let e = entered.get(ei).copied();
            let stop = match (l, e) {
                (None, None) => u32::MAX,
                (Some(a), None) | (None, Some(a)) => a,
                (Some(a), Some(b)) => a.min(b),
            };
            let rest = old.get(k..).unwrap_or(&[]);
            // A scan, not a binary search: every entry is copied just below anyway, so the scan
            // reads memory the copy then finds in cache, in the order the prefetcher expects,
            // where a binary search's probes each wait for a line of a subscriber's cold
            // entries.
            let run = if stop == u32::MAX {
                rest.len()
            } else {
                rest.iter().position(|x| x.id >= stop).unwrap_or(rest.len())
            };
            s.entries.extend_from_slice(rest.get(..run).unwrap_or(&[]));
            k += run;
            if stop == u32::MAX {
                break;
            }
            if l == Some(stop) {
                if let Some(x) = old.get(k) {
                    if x.id == stop {
                        if x.sent {
                            s.despawns.push(stop);
                        }
                        k += 1;
                    }
                }
                li += 1;
            } else {
                s.entries.push(fresh(stop));
                ei += 1;
            }
        }
    } else {
        // General merge by id (after a BASELINE reset or any inconsistency).
        let mut k = 0usize;
        for &id in visible {
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
                _ => s.entries.push(fresh(id)),
            }
        }
        for e in old.get(k..).unwrap_or(&[]) {
            if e.sent {
                s.despawns.push(e.id);
            }
        }
    }
    super::swap_entries(&mut sub.entries, &mut s.entries);
}

/// Queues every pending update and spawn; returns the client's known-set length after despawns.
fn send_all(
    sub: &mut Subscriber,
    world: &World,
    cache: &mut super::cache::Cache,
    s: &mut Scratch,
    stats: &mut BuildStats,
) -> Result<u32, ReplicateError> {
    let version = world.version();
    s.indices.clear();
    s.records.clear();
    s.spawns.clear();
    let mut known_len = 0u32;
    // Counted locally: a store through `stats` per entity costs more than the rest of the check.
    let (mut updates, mut spawns) = (0u64, 0u64);
    let entries = std::sync::Arc::make_mut(&mut sub.entries);
    for (e, &rank) in entries.iter_mut().zip(sub.view.visible_ranks()) {
        let rank = rank as usize;
        if e.sent {
            if let Some((qx, qy, mask)) = pending(world, rank, e) {
                let span = cache.record(world, rank, e.qx, e.qy, mask)?;
                s.indices.push(known_len);
                push_small(&mut s.records, cache.bytes(span));
                updates += 1;
                e.qx = qx;
                e.qy = qy;
                e.version = version;
                e.prio = 0.0;
            }
            known_len += 1;
        } else {
            let span = cache.spawn(world, rank)?;
            s.spawns.push((e.id, span));
            spawns += 1;
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
    stats.updates += updates;
    stats.spawns += spawns;
    Ok(known_len)
}

/// Writes the queued sections into `s.out`.
fn write(
    s: &mut Scratch,
    cache: &super::cache::Cache,
    header: &DeltaHeader,
    known_len: u32,
    input: &FrameInput<'_>,
) -> Result<(), ReplicateError> {
    s.out.clear();
    let mut w = DeltaWriter::new(&mut s.out, header);
    w.despawns(&s.despawns)?;
    w.updates(known_len, &s.indices, &s.records)?;
    w.spawns(s.spawns.iter().map(|&(id, span)| (id, cache.bytes(span))))?;
    if header.has_events {
        let events = input.events;
        let kept: Vec<(u16, &[u8])> = s
            .events
            .iter()
            .filter_map(|&i| events.get(i as usize).copied())
            .collect();
        w.events(kept.into_iter())?;
    }
    w.finish()?;
    Ok(())
}
