/**
 * A world cut into a grid of cells, one zone each (`cell-X-Y`), for pages whose players walk across
 * cell borders (the zone transfers them, PROTOCOL.md §5.3.2): the grid's geometry
 * ({@link CellGrid}), which neighbour cells a player near a border should observe
 * ({@link CellGrid.near}), the set of observer sessions kept open with a linger so walking along a
 * border does not open and close them over and over ({@link NeighbourSet}), and how to draw one
 * player seen by several cells once ({@link pickCopies}).
 *
 * Positions are world coordinates in every cell, so what several cells send is drawn together as is.
 */

/** A cell's column and row. */
export interface CellCoords {
  readonly cx: number;
  readonly cy: number;
}

/** The extent of a cell, world units: `x0 ≤ x < x1`, `y0 ≤ y < y1`. */
export interface CellBounds {
  readonly x0: number;
  readonly y0: number;
  readonly x1: number;
  readonly y1: number;
}

/** The grid's shape. */
export interface CellGridOptions {
  /** Cells across. */
  cols: number;
  /** Cells down. */
  rows: number;
  /** A cell's width, world units. */
  cellW: number;
  /** A cell's height, world units. */
  cellH: number;
  /** How far past its border a cell still holds a player (it moves it beyond), world units. */
  hysteresis?: number;
  /** Zone id prefix (default `cell-`): cell (x, y) is `${prefix}${x}-${y}`. */
  prefix?: string;
}

/** The geometry of a grid of cells. */
export class CellGrid {
  /** Cells across. */
  readonly cols: number;
  /** Cells down. */
  readonly rows: number;
  /** A cell's width. */
  readonly cellW: number;
  /** A cell's height. */
  readonly cellH: number;
  /** How far past its border a cell still holds a player. */
  readonly hysteresis: number;
  private readonly prefix: string;

  constructor(o: CellGridOptions) {
    this.cols = o.cols;
    this.rows = o.rows;
    this.cellW = o.cellW;
    this.cellH = o.cellH;
    this.hysteresis = o.hysteresis ?? 0;
    this.prefix = o.prefix ?? "cell-";
  }

  /** The world's width. */
  get width(): number {
    return this.cols * this.cellW;
  }

  /** The world's height. */
  get height(): number {
    return this.rows * this.cellH;
  }

  /** The zone id of cell `c`. */
  id(c: CellCoords): string {
    return `${this.prefix}${c.cx}-${c.cy}`;
  }

  /** The cell a zone id names, or null when it names none of this grid. */
  parse(id: string): CellCoords | null {
    if (!id.startsWith(this.prefix)) return null;
    const m = /^(\d{1,3})-(\d{1,3})$/.exec(id.slice(this.prefix.length));
    if (m === null) return null;
    const cx = Number(m[1]);
    const cy = Number(m[2]);
    return cx < this.cols && cy < this.rows ? { cx, cy } : null;
  }

  /** The cell a world position lies in, or null outside the world. */
  at(x: number, y: number): CellCoords | null {
    if (!(x >= 0 && y >= 0)) return null;
    const cx = Math.floor(x / this.cellW);
    const cy = Math.floor(y / this.cellH);
    return cx < this.cols && cy < this.rows ? { cx, cy } : null;
  }

  /** Cell `c`'s extent. */
  bounds(c: CellCoords): CellBounds {
    return { x0: c.cx * this.cellW, y0: c.cy * this.cellH, x1: (c.cx + 1) * this.cellW, y1: (c.cy + 1) * this.cellH };
  }

  /** Whether cell `c` still holds a player at `(x, y)`: inside it or less than the hysteresis past its border. */
  holds(c: CellCoords, x: number, y: number): boolean {
    const b = this.bounds(c);
    const h = this.hysteresis;
    return x >= b.x0 - h && x < b.x1 + h && y >= b.y0 - h && y < b.y1 + h;
  }

  /**
   * The ids of the cells around cell `c` (diagonals too) whose territory lies within `margin` of
   * `(x, y)`: the ones a player there should observe. Sorted, without `c` itself.
   */
  near(c: CellCoords, x: number, y: number, margin: number): string[] {
    const out: string[] = [];
    for (let dy = -1; dy <= 1; dy++) {
      for (let dx = -1; dx <= 1; dx++) {
        if (dx === 0 && dy === 0) continue;
        const n = { cx: c.cx + dx, cy: c.cy + dy };
        if (n.cx < 0 || n.cy < 0 || n.cx >= this.cols || n.cy >= this.rows) continue;
        const b = this.bounds(n);
        const ex = Math.max(b.x0 - x, 0, x - b.x1);
        const ey = Math.max(b.y0 - y, 0, y - b.y1);
        if (Math.hypot(ex, ey) <= margin) out.push(this.id(n));
      }
    }
    return out.sort();
  }
}

/**
 * Sessions opened per zone on demand and closed once they were not wanted for `lingerMs`: the
 * neighbour cells a page observes. `open` starts one (e.g. an observer connection and its replica),
 * `close` ends it. Time is handed in, so the set is driven by the page's frames or a test's clock.
 */
export class NeighbourSet<T> {
  private readonly open: (zone: string) => T;
  private readonly close: (zone: string, session: T) => void;
  private readonly lingerMs: number;
  private readonly sessions = new Map<string, { session: T; wantedAt: number }>();
  /** Sessions opened so far. */
  opened = 0;
  /** Sessions closed so far. */
  closed = 0;

  constructor(open: (zone: string) => T, close: (zone: string, session: T) => void, lingerMs: number) {
    this.open = open;
    this.close = close;
    this.lingerMs = Math.max(0, lingerMs);
  }

  /** Opens a session for each zone of `wanted` without one; closes those unwanted for longer than the linger. */
  update(wanted: readonly string[], nowMs: number): void {
    for (const zone of wanted) {
      const s = this.sessions.get(zone);
      if (s !== undefined) {
        s.wantedAt = nowMs;
        continue;
      }
      this.sessions.set(zone, { session: this.open(zone), wantedAt: nowMs });
      this.opened += 1;
    }
    for (const [zone, s] of [...this.sessions]) {
      if (nowMs - s.wantedAt > this.lingerMs) this.drop(zone, s.session);
    }
  }

  /** The session of `zone`, if open. */
  get(zone: string): T | undefined {
    return this.sessions.get(zone)?.session;
  }

  /** The open sessions by zone, in zone order. */
  entries(): Array<[string, T]> {
    return [...this.sessions.entries()].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)).map(([z, s]) => [z, s.session]);
  }

  /** Closes the session of `zone` now, if open (e.g. the zone the player just entered). */
  remove(zone: string): void {
    const s = this.sessions.get(zone);
    if (s !== undefined) this.drop(zone, s.session);
  }

  /** Closes every session. */
  clear(): void {
    for (const [zone, s] of [...this.sessions]) this.drop(zone, s.session);
  }

  private drop(zone: string, session: T): void {
    this.sessions.delete(zone);
    this.closed += 1;
    this.close(zone, session);
  }
}

/** One entity as one cell shows it. */
export interface CellCopy {
  /** Who it is, the same in every cell (e.g. a field the zones derive from the principal). */
  readonly identity: number | string;
  /** The zone that sent this copy. */
  readonly zone: string;
  /** World position. */
  readonly x: number;
  readonly y: number;
}

/**
 * One copy per identity out of what several cells show: the copy whose own cell holds its position
 * ({@link CellGrid.holds}) wins over one that lies past its cell's border (what a cell keeps of a
 * player that just walked out); among equals the first in `copies` wins. Order of first sight kept.
 */
export function pickCopies<C extends CellCopy>(grid: CellGrid, copies: readonly C[]): C[] {
  const best = new Map<number | string, { copy: C; home: boolean }>();
  for (const copy of copies) {
    const cell = grid.parse(copy.zone);
    const home = cell !== null && grid.holds(cell, copy.x, copy.y);
    const seen = best.get(copy.identity);
    if (seen === undefined || (home && !seen.home)) best.set(copy.identity, { copy, home });
  }
  return [...best.values()].map((b) => b.copy);
}
