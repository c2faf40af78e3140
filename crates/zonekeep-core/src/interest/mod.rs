//! Interest management: which entities each subscriber sees this patch.
//!
//! Every patch the [`Interest`] rebuilds a uniform [`Grid`] from all positions, then updates each
//! subscriber's [`View`]: the entities within its radius (an entity already in view stays until it is
//! `margin` past the radius, so edges do not flicker), minus those a `can_see` filter hides, plus the
//! subscriber's own entity and every global entity, which are always visible. Each view keeps its
//! visible ids ascending and the ids that entered and left since its previous update.
//!
//! Entities are addressed by **rank**: their index in a [`Columns`] snapshot whose ids ascend. Ranks
//! are only valid for one snapshot; views store ids, and ranks beside them for the current snapshot.
//!
//! Cost model (what the layout is for): a query walks contiguous SoA spans of the grid and compacts
//! hits branch-free; hits set bits in a rank-indexed bitset (so iterating it yields ascending ids with
//! no sort), and one linear merge of that bitset with the previous visible list yields the new list and
//! the entered/left lists. All buffers are reused across patches.

mod grid;
mod view;

pub use grid::Grid;
pub use view::{View, ViewSpec};

use thiserror::Error;

/// Flag bit in [`Columns::flags`]: the entity exists (a dead slot is skipped).
pub const ALIVE: u8 = 1;
/// Flag bit in [`Columns::flags`]: the entity is global (visible to every subscriber).
pub const GLOBAL: u8 = 2;

/// Columns whose lengths differ cannot form a snapshot.
#[derive(Debug, Error, Clone, Copy, PartialEq, Eq)]
#[error("interest columns have different lengths (ids {ids}, xs {xs}, ys {ys}, flags {flags})")]
pub struct ColumnsMismatch {
    /// Length of `ids`.
    pub ids: usize,
    /// Length of `xs`.
    pub xs: usize,
    /// Length of `ys`.
    pub ys: usize,
    /// Length of `flags`.
    pub flags: usize,
}

/// A read-only snapshot of entity positions in structure-of-arrays form, indexed by rank.
///
/// `ids` must be strictly ascending (the [`World`](crate::world::World) keeps them so); that is what
/// lets a rank-ordered bitset produce ascending ids without sorting.
#[derive(Debug, Clone, Copy)]
pub struct Columns<'a> {
    /// Entity ids, strictly ascending.
    pub ids: &'a [u32],
    /// X coordinates.
    pub xs: &'a [f32],
    /// Y coordinates.
    pub ys: &'a [f32],
    /// [`ALIVE`] / [`GLOBAL`] bits.
    pub flags: &'a [u8],
    /// Layout epoch: `Some(e)` promises that while `e` stays the same, an id keeps its rank (new
    /// ids may only be appended). Views then reuse last patch's ranks and copy unchanged runs
    /// instead of re-deriving them. `None` promises nothing (always correct, a little slower).
    pub layout: Option<u64>,
}

impl<'a> Columns<'a> {
    /// A snapshot over equally long columns.
    pub fn new(
        ids: &'a [u32],
        xs: &'a [f32],
        ys: &'a [f32],
        flags: &'a [u8],
    ) -> Result<Self, ColumnsMismatch> {
        let n = ids.len();
        if xs.len() != n || ys.len() != n || flags.len() != n {
            return Err(ColumnsMismatch {
                ids: n,
                xs: xs.len(),
                ys: ys.len(),
                flags: flags.len(),
            });
        }
        Ok(Self {
            ids,
            xs,
            ys,
            flags,
            layout: None,
        })
    }

    /// The same snapshot with a layout epoch (see [`Columns::layout`]).
    pub fn with_layout(self, layout: u64) -> Self {
        Self {
            layout: Some(layout),
            ..self
        }
    }

    /// Number of ranks (alive or not).
    pub fn len(&self) -> usize {
        self.ids.len()
    }

    /// Whether there is no rank at all.
    pub fn is_empty(&self) -> bool {
        self.ids.is_empty()
    }

    /// Whether rank `r` is an alive entity.
    #[inline]
    pub fn is_alive(&self, r: usize) -> bool {
        self.flags.get(r).is_some_and(|f| f & ALIVE != 0)
    }

    /// The rank of entity `id`, if it is in the snapshot and alive (binary search).
    pub fn rank_of(&self, id: u32) -> Option<usize> {
        let r = self.ids.binary_search(&id).ok()?;
        self.is_alive(r).then_some(r)
    }
}

/// The grid plus the per-patch scratch shared by every view update.
#[derive(Debug, Clone)]
pub struct Interest {
    grid: Grid,
    globals: Vec<u32>,
    scratch: view::Scratch,
    /// What an unbounded, unfiltered view sees this snapshot (see [`Interest::update_view_all`]),
    /// computed on first use after each rebuild.
    all: view::All,
}

impl Interest {
    /// An interest index whose grid has square cells of `cell_size` world units. A cell size near
    /// the typical view radius keeps a query to about 3 × 3 cells.
    pub fn new(cell_size: f32) -> Self {
        Self {
            grid: Grid::new(cell_size),
            globals: Vec::new(),
            scratch: view::Scratch::default(),
            all: view::All::default(),
        }
    }

    /// The grid (rebuilt by [`Interest::rebuild`]).
    pub fn grid(&self) -> &Grid {
        &self.grid
    }

    /// Rebuilds the grid and the list of global entities from a snapshot. Call once per patch before
    /// updating views against the same snapshot.
    pub fn rebuild(&mut self, cols: &Columns<'_>) {
        self.grid.rebuild(cols);
        self.globals.clear();
        for (r, &f) in cols.flags.iter().enumerate() {
            if f & (ALIVE | GLOBAL) == ALIVE | GLOBAL {
                self.globals.push(r as u32);
            }
        }
        self.scratch.prepare(cols.len(), self.grid.len());
        self.all.invalidate();
    }

    /// Updates `view` against the snapshot last passed to [`Interest::rebuild`] (which must be `cols`).
    ///
    /// `can_see(id)` hides in-range entities (stealth, fog of war); it is not asked about the own
    /// entity or global entities, which are always visible. It is called at most once per in-range
    /// entity and inlines when it is a closure.
    pub fn update_view<F: FnMut(u32) -> bool>(
        &mut self,
        cols: &Columns<'_>,
        view: &mut View,
        spec: &ViewSpec,
        can_see: F,
    ) {
        view::update(
            &self.grid,
            &self.globals,
            &mut self.scratch,
            cols,
            view,
            spec,
            can_see,
        );
    }

    /// Updates a view that no `can_see` filter restricts, like [`Interest::update_view`] with a
    /// filter that shows everything, but cheaper when the radius is unbounded (`f32::INFINITY`)
    /// and the centre finite: such a view sees every alive entity (bar any with a NaN position),
    /// so there is no grid query and no per-view merge — a view that already sees exactly that
    /// costs one comparison of its id list. Other views take the general path.
    pub fn update_view_all(&mut self, cols: &Columns<'_>, view: &mut View, spec: &ViewSpec) {
        let own_has_pos = spec.own.is_none_or(|r| {
            let r = r as usize;
            !cols.is_alive(r)
                || cols.flags.get(r).is_some_and(|f| f & GLOBAL != 0)
                || matches!((cols.xs.get(r), cols.ys.get(r)), (Some(x), Some(y)) if !x.is_nan() && !y.is_nan())
        });
        let unbounded = spec.radius == f32::INFINITY && spec.x.is_finite() && spec.y.is_finite();
        if !unbounded || !own_has_pos {
            self.update_view(cols, view, spec, |_| true);
            return;
        }
        self.all.fill(cols);
        view::update_all(&self.all, cols, view);
    }
}

#[cfg(test)]
mod tests;
