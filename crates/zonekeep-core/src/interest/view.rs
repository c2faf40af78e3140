//! One subscriber's view and its per-patch update (distance with hysteresis, filter, diff).

use super::{Columns, Grid};

/// Where a view looks from this patch and how far.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ViewSpec {
    /// View centre x.
    pub x: f32,
    /// View centre y.
    pub y: f32,
    /// View radius: an entity within it enters the view (`f32::INFINITY` = sees everything).
    pub radius: f32,
    /// Leave hysteresis: an entity in view leaves only beyond `radius + margin`.
    pub margin: f32,
    /// Rank of the subscriber's own entity in this snapshot, always visible.
    pub own: Option<u32>,
}

/// A subscriber's visible set and what changed in it at the last update.
#[derive(Debug, Clone, Default)]
pub struct View {
    visible: Vec<u32>,
    ranks: Vec<u32>,
    entered: Vec<u32>,
    left: Vec<u32>,
    next_visible: Vec<u32>,
    next_ranks: Vec<u32>,
    /// Layout epoch of the snapshot `ranks` refer to.
    layout: Option<u64>,
    /// The [`All`] list `visible` and `ranks` were last copied from (0 = none): a view that
    /// already holds the current list skips comparing it again.
    all_gen: u64,
}

impl View {
    /// An empty view (everything will enter on the first update).
    pub fn new() -> Self {
        Self::default()
    }

    /// Visible entity ids, ascending.
    pub fn visible(&self) -> &[u32] {
        &self.visible
    }

    /// Ranks of [`View::visible`] in the snapshot of the last update, position for position.
    pub fn visible_ranks(&self) -> &[u32] {
        &self.ranks
    }

    /// Ids that entered at the last update, ascending.
    pub fn entered(&self) -> &[u32] {
        &self.entered
    }

    /// Ids that left at the last update (out of range, hidden, or gone from the world), ascending.
    pub fn left(&self) -> &[u32] {
        &self.left
    }

    /// Forgets everything, so every visible entity enters again at the next update.
    pub fn clear(&mut self) {
        self.visible.clear();
        self.ranks.clear();
        self.entered.clear();
        self.left.clear();
        self.layout = None;
        self.all_gen = 0;
    }
}

/// Rank-indexed bitsets reused by every view update; all words are zero between updates.
#[derive(Debug, Clone, Default)]
pub(super) struct Scratch {
    /// Rank within the radius (or forced: own, global).
    near: Vec<u64>,
    /// Rank within radius + margin but not the radius.
    far: Vec<u64>,
    /// Word indices that have a bit set.
    touched: Vec<u32>,
    /// Query output buffer, at least as long as the grid (only the front is meaningful).
    cands: Vec<(u32, f32)>,
}

impl Scratch {
    pub(super) fn prepare(&mut self, ranks: usize, grid_len: usize) {
        if self.cands.len() < grid_len {
            self.cands.resize(grid_len, (0, 0.0));
        }
        let words = ranks.div_ceil(64);
        self.near.clear();
        self.near.resize(words, 0);
        self.far.clear();
        self.far.resize(words, 0);
        self.touched.clear();
    }

    #[inline]
    fn set(&mut self, rank: u32, near: bool) {
        let w = (rank >> 6) as usize;
        let bit = 1u64 << (rank & 63);
        let (Some(n), Some(f)) = (self.near.get_mut(w), self.far.get_mut(w)) else {
            return;
        };
        if *n | *f == 0 {
            self.touched.push(w as u32);
        }
        if near {
            *n |= bit;
            *f &= !bit;
        } else if *n & bit == 0 {
            *f |= bit;
        }
    }
}

/// Every alive entity of one snapshot that an unbounded view centred on a finite point sees:
/// alive, and global or with a position whose distance is not NaN. Ids ascend with ranks.
#[derive(Debug, Clone, Default)]
pub(super) struct All {
    ready: bool,
    ids: Vec<u32>,
    ranks: Vec<u32>,
    /// Names this content: a new one whenever a fill changes it (never 0). Views that copied
    /// the list under the current generation hold it exactly, so with many subscribers seeing
    /// everything the list is compared once per patch here instead of once per view.
    generation: u64,
    next_ids: Vec<u32>,
    next_ranks: Vec<u32>,
}

/// Generations of every [`All`] of the process, so that no two contents share one, even
/// across replicators (a view is only ever updated by one, but nothing needs to rely on it).
static ALL_GENERATION: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

impl All {
    pub(super) fn invalidate(&mut self) {
        self.ready = false;
    }

    pub(super) fn fill(&mut self, cols: &Columns<'_>) {
        if self.ready {
            return;
        }
        self.next_ids.clear();
        self.next_ranks.clear();
        let rows = cols.ids.iter().zip(cols.xs).zip(cols.ys).zip(cols.flags);
        for (r, (((&id, x), y), &f)) in rows.enumerate() {
            let alive = f & super::ALIVE != 0;
            if alive && (f & super::GLOBAL != 0 || !(x.is_nan() || y.is_nan())) {
                self.next_ids.push(id);
                self.next_ranks.push(r as u32);
            }
        }
        if self.generation == 0 || self.next_ids != self.ids || self.next_ranks != self.ranks {
            std::mem::swap(&mut self.ids, &mut self.next_ids);
            std::mem::swap(&mut self.ranks, &mut self.next_ranks);
            self.generation = ALL_GENERATION.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
        self.ready = true;
    }
}

/// The unbounded, unfiltered update: the view becomes `all`; entered and left are the difference.
pub(super) fn update_all(all: &All, cols: &Columns<'_>, view: &mut View) {
    view.entered.clear();
    view.left.clear();
    view.layout = cols.layout;
    if view.all_gen == all.generation {
        return;
    }
    view.all_gen = all.generation;
    if view.visible != all.ids {
        // Both lists ascend: one merge yields what entered and what left.
        let (old, new) = (&view.visible, &all.ids);
        let (mut i, mut j) = (0usize, 0usize);
        loop {
            match (old.get(i), new.get(j)) {
                (None, None) => break,
                (Some(&a), None) => {
                    view.left.push(a);
                    i += 1;
                }
                (None, Some(&b)) => {
                    view.entered.push(b);
                    j += 1;
                }
                (Some(&a), Some(&b)) => {
                    if a < b {
                        view.left.push(a);
                        i += 1;
                    } else if b < a {
                        view.entered.push(b);
                        j += 1;
                    } else {
                        i += 1;
                        j += 1;
                    }
                }
            }
        }
        view.visible.clone_from(&all.ids);
    }
    if view.ranks != all.ranks {
        view.ranks.clone_from(&all.ranks);
    }
}

pub(super) fn update<F: FnMut(u32) -> bool>(
    grid: &Grid,
    globals: &[u32],
    s: &mut Scratch,
    cols: &Columns<'_>,
    view: &mut View,
    spec: &ViewSpec,
    mut can_see: F,
) {
    view.all_gen = 0;
    let radius = if spec.radius.is_nan() {
        0.0
    } else {
        spec.radius.max(0.0)
    };
    let margin = if spec.margin.is_nan() {
        0.0
    } else {
        spec.margin.max(0.0)
    };
    let outer = radius + margin;
    let rr_in = radius * radius;
    // Candidates within the outer radius, then the filter, then the bitsets.
    let mut cands = std::mem::take(&mut s.cands);
    let n = if spec.x.is_finite() && spec.y.is_finite() {
        grid.query_into(spec.x, spec.y, outer, &mut cands)
    } else {
        0
    };
    for &(rank, d2) in cands.get(..n).unwrap_or(&[]) {
        let Some(&id) = cols.ids.get(rank as usize) else {
            continue;
        };
        if can_see(id) {
            s.set(rank, d2 <= rr_in);
        }
    }
    s.cands = cands;
    for &g in globals {
        s.set(g, true);
    }
    if let Some(own) = spec.own {
        if cols.is_alive(own as usize) {
            s.set(own, true);
        }
    }

    // Visit touched words in ascending order: scan the range when dense, sort the list when sparse.
    let touched = &mut s.touched;
    if touched.len() > 1 {
        let (lo, hi) = touched
            .iter()
            .fold((u32::MAX, 0), |(lo, hi), &w| (lo.min(w), hi.max(w)));
        if (hi - lo + 1) as usize <= touched.len() * 4 {
            touched.clear();
            touched.extend(lo..=hi);
        } else {
            touched.sort_unstable();
        }
    }

    // Merge the bitsets (ascending ids) with the previous visible list.
    view.entered.clear();
    view.left.clear();
    let mut next = std::mem::take(&mut view.next_visible);
    let mut next_ranks = std::mem::take(&mut view.next_ranks);
    next.clear();
    next_ranks.clear();
    let trusted = cols.layout.is_some() && view.layout == cols.layout;
    if trusted {
        merge_by_rank(s, cols, view, &mut next, &mut next_ranks);
    } else {
        merge_by_id(s, cols, view, &mut next, &mut next_ranks);
    }
    s.touched.clear();
    view.next_visible = std::mem::replace(&mut view.visible, next);
    view.next_ranks = std::mem::replace(&mut view.ranks, next_ranks);
    view.layout = cols.layout;
}

/// Merge when last patch's ranks are still valid: per 64-rank word, rebuild the previous word from
/// the previous ranks; an unchanged word is copied as a run (the steady state), a changed one is
/// walked bit by bit.
fn merge_by_rank(
    s: &mut Scratch,
    cols: &Columns<'_>,
    view: &mut View,
    next: &mut Vec<u32>,
    next_ranks: &mut Vec<u32>,
) {
    let prev_ids = &view.visible;
    let prev_ranks = &view.ranks;
    let mut p = 0usize;
    // prev[copy..p] are kept unchanged and not yet copied: runs are flushed in one go, so the
    // steady state costs one bulk copy per view instead of one per word.
    let mut copy = 0usize;
    let flush = |from: usize, to: usize, next: &mut Vec<u32>, next_ranks: &mut Vec<u32>| {
        if let (Some(ids), Some(ranks)) = (prev_ids.get(from..to), prev_ranks.get(from..to)) {
            next.extend_from_slice(ids);
            next_ranks.extend_from_slice(ranks);
        }
    };
    for &w in s.touched.iter() {
        let wi = w as usize;
        let (Some(nw), Some(fw)) = (s.near.get_mut(wi), s.far.get_mut(wi)) else {
            continue;
        };
        let (near, far) = (*nw, *fw);
        *nw = 0;
        *fw = 0;
        let base = w << 6;
        // Previous entries in earlier, untouched words have left.
        if prev_ranks.get(p).is_some_and(|&r| r < base) {
            flush(copy, p, next, next_ranks);
            while let (Some(&r), Some(&id)) = (prev_ranks.get(p), prev_ids.get(p)) {
                if r >= base {
                    break;
                }
                view.left.push(id);
                p += 1;
            }
            copy = p;
        }
        let start = p;
        let mut was = 0u64;
        while let Some(&r) = prev_ranks.get(p) {
            if r >> 6 != w {
                break;
            }
            was |= 1u64 << (r & 63);
            p += 1;
        }
        let keep = near | (far & was);
        if keep == was {
            continue; // unchanged: stays in the pending run
        }
        flush(copy, start, next, next_ranks);
        copy = p;
        let mut q = start;
        let mut bits = keep | was;
        while bits != 0 {
            let b = bits.trailing_zeros();
            bits &= bits - 1;
            let m = 1u64 << b;
            let rank = base | b;
            let old = was & m != 0;
            let id = if old {
                let id = prev_ids.get(q).copied();
                q += 1;
                id
            } else {
                cols.ids.get(rank as usize).copied()
            };
            let Some(id) = id else {
                continue;
            };
            if keep & m != 0 {
                if !old {
                    view.entered.push(id);
                }
                next.push(id);
                next_ranks.push(rank);
            } else {
                view.left.push(id);
            }
        }
    }
    flush(copy, p, next, next_ranks);
    if let Some(rest) = prev_ids.get(p..) {
        view.left.extend_from_slice(rest);
    }
}

/// Merge by id, for when ranks may have moved since the previous update.
fn merge_by_id(
    s: &mut Scratch,
    cols: &Columns<'_>,
    view: &mut View,
    next: &mut Vec<u32>,
    next_ranks: &mut Vec<u32>,
) {
    let prev = &view.visible;
    let mut p = 0usize;
    for &w in s.touched.iter() {
        let wi = w as usize;
        let (Some(nw), Some(fw)) = (s.near.get_mut(wi), s.far.get_mut(wi)) else {
            continue;
        };
        let near = *nw;
        let mut bits = near | *fw;
        *nw = 0;
        *fw = 0;
        while bits != 0 {
            let b = bits.trailing_zeros();
            bits &= bits - 1;
            let rank = (w << 6) | b;
            let Some(&id) = cols.ids.get(rank as usize) else {
                continue;
            };
            while let Some(&old) = prev.get(p) {
                if old >= id {
                    break;
                }
                view.left.push(old);
                p += 1;
            }
            let was = prev.get(p) == Some(&id);
            if was {
                p += 1;
            }
            if was || near & (1u64 << b) != 0 {
                if !was {
                    view.entered.push(id);
                }
                next.push(id);
                next_ranks.push(rank);
            }
        }
    }
    if let Some(rest) = prev.get(p..) {
        view.left.extend_from_slice(rest);
    }
}
