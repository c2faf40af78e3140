//! The uniform spatial grid, rebuilt from every position each patch by a counting sort.
//!
//! Entries are stored bucket by bucket in flat structure-of-arrays form (`xs`, `ys`, `ranks`), so a
//! query walks contiguous memory. Two bucket mappings:
//!
//! - **dense**: when the bounding box of occupied cells has at most `max(4 × entities, 4096)` cells,
//!   bucket = row-major cell index inside that box. Cells of one row are adjacent, so a query scans
//!   one contiguous span per row.
//! - **hashed**: otherwise (a huge, sparse world) cells are hashed into a power-of-two table of about
//!   two buckets per entity, so rebuild cost follows the entity count and not the world's area. Each
//!   entry keeps its cell so a query can drop entries of a colliding cell.
//!
//! The scatter runs in rank order, so inside a bucket entries are ascending by rank.

use super::Columns;

/// Cells in the dense box may be up to this many times the entity count before we switch to hashing.
const DENSE_CELLS_PER_ENTITY: u64 = 4;
/// Dense boxes of up to this many cells are always fine (a few KB of bucket starts).
const DENSE_CELLS_MIN: u64 = 4096;

#[derive(Debug, Clone, Copy)]
enum Mapping {
    /// No entries.
    Empty,
    /// Row-major buckets over the occupied cell box.
    Dense {
        x0: i32,
        y0: i32,
        cols: u32,
        rows: u32,
    },
    /// Hashed buckets; `mask + 1` buckets.
    Hashed { mask: u32 },
}

/// A spatial grid of the alive entities of one [`Columns`] snapshot.
#[derive(Debug, Clone)]
pub struct Grid {
    cell: f32,
    inv_cell: f32,
    mapping: Mapping,
    /// `starts[b]..starts[b + 1]` are bucket `b`'s entries.
    starts: Vec<u32>,
    xs: Vec<f32>,
    ys: Vec<f32>,
    ranks: Vec<u32>,
    /// Cell of each entry, packed; only filled in hashed mode.
    cells: Vec<u64>,
    /// Per rank scratch: the entity's bucket (or `u32::MAX` when not alive).
    bucket_of: Vec<u32>,
    /// Per rank scratch: the entity's cell column and row.
    cx_of: Vec<i32>,
    cy_of: Vec<i32>,
}

/// Packs a cell coordinate pair into one comparable key.
#[inline]
fn pack(cx: i32, cy: i32) -> u64 {
    (u64::from(cx as u32) << 32) | u64::from(cy as u32)
}

/// Multiplicative hash of a cell; the high bits are the well mixed ones.
#[inline]
fn cell_hash(cx: i32, cy: i32) -> u32 {
    let k = pack(cx, cy).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    (k >> 32) as u32 ^ (k as u32)
}

/// The cell coordinate of a world coordinate: `floor(v / cell)`. `as` saturates and maps NaN to 0,
/// which is what we want: a wild coordinate lands in an edge cell instead of panicking. The floor is
/// done by truncation plus a correction because `f32::floor` is a libm call on baseline x86-64.
#[inline]
fn cell_coord(v: f32, inv_cell: f32) -> i32 {
    let t = v * inv_cell;
    let i = t as i32;
    i.saturating_sub(i32::from((i as f32) > t))
}

impl Grid {
    /// A grid with square cells of `cell_size` world units (values that are not finite and positive
    /// are replaced by 1.0, so a misconfiguration degrades instead of dividing by zero).
    pub fn new(cell_size: f32) -> Self {
        let cell = if cell_size.is_finite() && cell_size > 0.0 {
            cell_size
        } else {
            1.0
        };
        Self {
            cell,
            inv_cell: 1.0 / cell,
            mapping: Mapping::Empty,
            starts: Vec::new(),
            xs: Vec::new(),
            ys: Vec::new(),
            ranks: Vec::new(),
            cells: Vec::new(),
            bucket_of: Vec::new(),
            cx_of: Vec::new(),
            cy_of: Vec::new(),
        }
    }

    /// The cell size in world units.
    pub fn cell_size(&self) -> f32 {
        self.cell
    }

    /// Number of entities in the grid.
    pub fn len(&self) -> usize {
        self.ranks.len()
    }

    /// Whether the grid holds no entity.
    pub fn is_empty(&self) -> bool {
        self.ranks.is_empty()
    }

    /// Rebuilds the grid from the alive entities of `cols` (allocations are reused across calls).
    pub fn rebuild(&mut self, cols: &Columns<'_>) {
        let n = cols.len();
        let inv = self.inv_cell;
        // Pass 1: every alive entity's cell (computed once) and the bounds of occupied cells.
        let (mut minx, mut miny, mut maxx, mut maxy) = (i32::MAX, i32::MAX, i32::MIN, i32::MIN);
        let mut alive = 0usize;
        self.cx_of.clear();
        self.cy_of.clear();
        for ((&x, &y), &f) in cols.xs.iter().zip(cols.ys).zip(cols.flags) {
            let (cx, cy) = (cell_coord(x, inv), cell_coord(y, inv));
            self.cx_of.push(cx);
            self.cy_of.push(cy);
            if f & super::ALIVE != 0 {
                alive += 1;
                minx = minx.min(cx);
                maxx = maxx.max(cx);
                miny = miny.min(cy);
                maxy = maxy.max(cy);
            }
        }
        if alive == 0 {
            self.mapping = Mapping::Empty;
            self.starts.clear();
            self.xs.clear();
            self.ys.clear();
            self.ranks.clear();
            self.cells.clear();
            return;
        }
        let cols_n = (i64::from(maxx) - i64::from(minx) + 1) as u64;
        let rows_n = (i64::from(maxy) - i64::from(miny) + 1) as u64;
        let dense_cap = (alive as u64 * DENSE_CELLS_PER_ENTITY).max(DENSE_CELLS_MIN);
        let buckets;
        self.bucket_of.clear();
        let cells = self.cx_of.iter().zip(&self.cy_of).zip(cols.flags);
        if cols_n.saturating_mul(rows_n) <= dense_cap {
            let cw = cols_n as u32;
            self.mapping = Mapping::Dense {
                x0: minx,
                y0: miny,
                cols: cw,
                rows: rows_n as u32,
            };
            buckets = (cols_n * rows_n) as usize;
            self.bucket_of.extend(cells.map(|((&cx, &cy), &f)| {
                if f & super::ALIVE != 0 {
                    (cy.wrapping_sub(miny) as u32) * cw + cx.wrapping_sub(minx) as u32
                } else {
                    u32::MAX
                }
            }));
        } else {
            buckets = (alive * 2).next_power_of_two().max(1024);
            let mask = (buckets - 1) as u32;
            self.mapping = Mapping::Hashed { mask };
            self.bucket_of.extend(cells.map(|((&cx, &cy), &f)| {
                if f & super::ALIVE != 0 {
                    cell_hash(cx, cy) & mask
                } else {
                    u32::MAX
                }
            }));
        }
        // Counting sort: histogram, exclusive prefix sum, stable scatter.
        self.starts.clear();
        self.starts.resize(buckets + 1, 0);
        for &b in &self.bucket_of {
            if b != u32::MAX {
                self.starts[b as usize + 1] += 1;
            }
        }
        let mut acc = 0u32;
        for s in self.starts.iter_mut() {
            acc += *s;
            *s = acc;
        }
        // Now starts[b] = start and starts[b + 1] = end of bucket b. Shift right by one so that
        // starts[b + 1] = start of bucket b serves as bucket b's write cursor; after the scatter it has
        // advanced to the end of bucket b, which is the final layout (starts[0] = 0).
        self.starts.rotate_right(1);
        self.starts[0] = 0;
        self.xs.clear();
        self.xs.resize(alive, 0.0);
        self.ys.clear();
        self.ys.resize(alive, 0.0);
        self.ranks.clear();
        self.ranks.resize(alive, 0);
        let hashed = matches!(self.mapping, Mapping::Hashed { .. });
        if hashed {
            self.cells.clear();
            self.cells.resize(alive, 0);
        }
        for r in 0..n {
            let b = self.bucket_of[r];
            if b == u32::MAX {
                continue;
            }
            let slot = &mut self.starts[b as usize + 1];
            let at = *slot as usize;
            *slot += 1;
            self.xs[at] = cols.xs[r];
            self.ys[at] = cols.ys[r];
            self.ranks[at] = r as u32;
            if hashed {
                self.cells[at] = pack(self.cx_of[r], self.cy_of[r]);
            }
        }
    }

    /// Calls `f(first, end)` for every contiguous span of entries that may lie within `r` of `(x, y)`,
    /// with `cell_key` set in hashed mode (`Some(packed cell)`: entries whose cell differs must be
    /// skipped) and `None` in dense mode.
    #[inline]
    fn spans(&self, x: f32, y: f32, r: f32, mut f: impl FnMut(usize, usize, Option<u64>)) {
        let inv = self.inv_cell;
        let cx0 = cell_coord(x - r, inv);
        let cx1 = cell_coord(x + r, inv);
        let cy0 = cell_coord(y - r, inv);
        let cy1 = cell_coord(y + r, inv);
        match self.mapping {
            Mapping::Empty => {}
            Mapping::Dense { x0, y0, cols, rows } => {
                let lx = i64::from(cx0).max(i64::from(x0));
                let hx = i64::from(cx1).min(i64::from(x0) + i64::from(cols) - 1);
                let ly = i64::from(cy0).max(i64::from(y0));
                let hy = i64::from(cy1).min(i64::from(y0) + i64::from(rows) - 1);
                if lx > hx || ly > hy {
                    return;
                }
                let c0 = (lx - i64::from(x0)) as usize;
                let c1 = (hx - i64::from(x0)) as usize;
                let width = cols as usize;
                for row in (ly - i64::from(y0)) as usize..=(hy - i64::from(y0)) as usize {
                    let b0 = row * width + c0;
                    let b1 = row * width + c1;
                    let (Some(&s), Some(&e)) = (self.starts.get(b0), self.starts.get(b1 + 1))
                    else {
                        continue;
                    };
                    if s < e {
                        f(s as usize, e as usize, None);
                    }
                }
            }
            Mapping::Hashed { mask } => {
                let span_cells = (i64::from(cx1) - i64::from(cx0) + 1)
                    .saturating_mul(i64::from(cy1) - i64::from(cy0) + 1);
                if span_cells > i64::from(mask) + 1 {
                    // The query covers more cells than there are buckets: scan everything once.
                    f(0, self.ranks.len(), None);
                    return;
                }
                for cy in cy0..=cy1 {
                    for cx in cx0..=cx1 {
                        let b = (cell_hash(cx, cy) & mask) as usize;
                        let (Some(&s), Some(&e)) = (self.starts.get(b), self.starts.get(b + 1))
                        else {
                            continue;
                        };
                        if s < e {
                            f(s as usize, e as usize, Some(pack(cx, cy)));
                        }
                    }
                }
            }
        }
    }

    /// Appends `(rank, squared distance)` of every entity within `r` of `(x, y)` to `out`.
    pub fn query(&self, x: f32, y: f32, r: f32, out: &mut Vec<(u32, f32)>) {
        let base = out.len();
        out.resize(base + self.len(), (0, 0.0));
        let n = self.query_into(x, y, r, out.get_mut(base..).unwrap_or(&mut []));
        out.truncate(base + n);
    }

    /// Writes `(rank, squared distance)` of every entity within `r` of `(x, y)` to the front of
    /// `buf` and returns how many. A query never yields more than [`Grid::len`] entries, so a buffer
    /// that long (kept across queries) always suffices; a shorter one drops the excess.
    ///
    /// Each span is filtered branch-free (write every entry, advance the cursor only on a hit), which
    /// beats a branch per entry when about a third of the candidates hit, as in a crowd.
    pub fn query_into(&self, x: f32, y: f32, r: f32, buf: &mut [(u32, f32)]) -> usize {
        let rr = r * r;
        let mut n = 0usize;
        self.spans(x, y, r, |s, e, key| {
            let (Some(xs), Some(ys), Some(ranks)) =
                (self.xs.get(s..e), self.ys.get(s..e), self.ranks.get(s..e))
            else {
                return;
            };
            match key {
                None => {
                    for ((&ex, &ey), &rank) in xs.iter().zip(ys).zip(ranks) {
                        let dx = ex - x;
                        let dy = ey - y;
                        let d2 = dx * dx + dy * dy;
                        if let Some(slot) = buf.get_mut(n) {
                            *slot = (rank, d2);
                            n += usize::from(d2 <= rr);
                        }
                    }
                }
                Some(cell) => {
                    let cells = self.cells.get(s..e).unwrap_or(&[]);
                    for (((&ex, &ey), &rank), &c) in xs.iter().zip(ys).zip(ranks).zip(cells) {
                        let dx = ex - x;
                        let dy = ey - y;
                        let d2 = dx * dx + dy * dy;
                        if let Some(slot) = buf.get_mut(n) {
                            *slot = (rank, d2);
                            n += usize::from(d2 <= rr && c == cell);
                        }
                    }
                }
            }
        });
        n
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    fn brute(cols: &Columns<'_>, x: f32, y: f32, r: f32) -> Vec<u32> {
        let mut v: Vec<u32> = (0..cols.len())
            .filter(|&i| {
                cols.is_alive(i) && {
                    let dx = cols.xs[i] - x;
                    let dy = cols.ys[i] - y;
                    dx * dx + dy * dy <= r * r
                }
            })
            .map(|i| i as u32)
            .collect();
        v.sort_unstable();
        v
    }

    fn check(world: f32, n: usize, cell: f32, r: f32) {
        let mut s = 0x1234_5678_9abc_def1u64;
        let mut next = || {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            (s >> 40) as f32 / 16_777_216.0
        };
        let ids: Vec<u32> = (0..n as u32).collect();
        let xs: Vec<f32> = (0..n).map(|_| next() * world - world / 4.0).collect();
        let ys: Vec<f32> = (0..n).map(|_| next() * world).collect();
        let flags: Vec<u8> = (0..n)
            .map(|i| if i % 7 == 3 { 0 } else { super::super::ALIVE })
            .collect();
        let cols = Columns::new(&ids, &xs, &ys, &flags).unwrap();
        let mut g = Grid::new(cell);
        g.rebuild(&cols);
        let mut out = Vec::new();
        for q in 0..50 {
            let (x, y) = (next() * world, next() * world);
            out.clear();
            g.query(x, y, r, &mut out);
            let mut got: Vec<u32> = out.iter().map(|p| p.0).collect();
            got.sort_unstable();
            assert_eq!(got, brute(&cols, x, y, r), "query {q}");
        }
    }

    #[test]
    fn cell_coord_is_floor() {
        for v in [
            0.0f32, -0.0, 0.5, -0.5, 1.0, -1.0, 9.999, 10.0, -10.0, -10.001, 1e9, -1e9, 3e38,
        ] {
            let expect = (v * 0.1).floor() as i32;
            assert_eq!(cell_coord(v, 0.1), expect, "{v}");
        }
        assert_eq!(cell_coord(f32::NAN, 0.1), 0);
        assert_eq!(cell_coord(f32::INFINITY, 0.1), i32::MAX);
        assert_eq!(cell_coord(f32::NEG_INFINITY, 0.1), i32::MIN);
    }

    #[test]
    fn dense_grid_matches_brute_force() {
        check(500.0, 800, 50.0, 70.0);
    }

    #[test]
    fn hashed_grid_matches_brute_force() {
        check(1_000_000.0, 3000, 10.0, 50_000.0);
        check(100_000.0, 3000, 100.0, 150.0);
    }

    #[test]
    fn infinite_radius_sees_everything() {
        let ids = [1u32, 5, 9];
        let xs = [0.0f32, 1e9, -1e9];
        let ys = [0.0f32, -1e9, 1e9];
        let flags = [super::super::ALIVE; 3];
        let cols = Columns::new(&ids, &xs, &ys, &flags).unwrap();
        let mut g = Grid::new(10.0);
        g.rebuild(&cols);
        let mut out = Vec::new();
        g.query(0.0, 0.0, f32::INFINITY, &mut out);
        assert_eq!(out.len(), 3);
    }
}
