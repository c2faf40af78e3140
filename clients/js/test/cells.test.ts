import assert from "node:assert/strict";
import { describe, it } from "node:test";

import { CellGrid, NeighbourSet, pickCopies } from "../src/index.js";

const grid = new CellGrid({ cols: 3, rows: 3, cellW: 120, cellH: 80, hysteresis: 1 });

describe("CellGrid", () => {
  it("names, parses and finds cells, and nothing outside the grid", () => {
    assert.equal(grid.id({ cx: 1, cy: 2 }), "cell-1-2");
    assert.deepEqual(grid.parse("cell-1-2"), { cx: 1, cy: 2 });
    for (const bad of ["cell-3-0", "cell-0-3", "cell-1", "cell--1-0", "cell-a-b", "arena-1", "cell-1-2-3"]) {
      assert.equal(grid.parse(bad), null, bad);
    }
    assert.deepEqual(grid.at(120, 79.99), { cx: 1, cy: 0 });
    assert.equal(grid.at(360, 1), null);
    assert.equal(grid.at(Number.NaN, 1), null);
    assert.equal(grid.at(-0.01, 1), null);
  });

  it("holds a player up to the hysteresis past the border, like the zone", () => {
    const c = { cx: 0, cy: 0 };
    assert.ok(grid.holds(c, 120.99, 5));
    assert.ok(!grid.holds(c, 121, 5));
    assert.ok(grid.holds(c, -0.5, 5));
  });

  it("names the neighbours within the margin, diagonals included, never past the world's edge", () => {
    const c = { cx: 1, cy: 1 };
    assert.deepEqual(grid.near(c, 180, 120, 10), []);
    assert.deepEqual(grid.near(c, 235, 120, 10), ["cell-2-1"]);
    assert.deepEqual(grid.near(c, 235, 85, 10), ["cell-1-0", "cell-2-0", "cell-2-1"]);
    // A corner cell has no neighbours beyond the world.
    assert.deepEqual(grid.near({ cx: 0, cy: 0 }, 2, 2, 10), []);
  });
});

describe("NeighbourSet", () => {
  it("opens what is wanted once and closes it only after the linger", () => {
    const log: string[] = [];
    const set = new NeighbourSet(
      (z) => {
        log.push(`open ${z}`);
        return { zone: z };
      },
      (z, s) => log.push(`close ${z} ${s.zone}`),
      1000,
    );
    set.update(["cell-1-0"], 0);
    set.update(["cell-1-0"], 500);
    set.update([], 1400);
    assert.deepEqual(log, ["open cell-1-0"], "still within the linger");
    set.update(["cell-0-1"], 1501);
    assert.deepEqual(log, ["open cell-1-0", "open cell-0-1", "close cell-1-0 cell-1-0"]);
    assert.deepEqual(
      set.entries().map(([z]) => z),
      ["cell-0-1"],
    );
    set.remove("cell-0-1");
    set.clear();
    assert.equal(set.get("cell-0-1"), undefined);
    assert.deepEqual([set.opened, set.closed], [2, 2]);
  });
});

describe("pickCopies", () => {
  it("draws each identity once, preferring the copy its own cell holds", () => {
    // A walker just moved from cell-0-0 to cell-1-0: the old cell still shows it past its border.
    const ghost = { identity: 7, zone: "cell-0-0", x: 121.2, y: 10, tag: "ghost" };
    const real = { identity: 7, zone: "cell-1-0", x: 121.2, y: 10, tag: "real" };
    const other = { identity: 8, zone: "cell-0-0", x: 50, y: 10, tag: "other" };
    assert.deepEqual(
      pickCopies(grid, [ghost, other, real]).map((c) => c.tag),
      ["real", "other"],
    );
    assert.deepEqual(
      pickCopies(grid, [real, ghost]).map((c) => c.tag),
      ["real"],
    );
    // With no copy at home, the first one seen is drawn.
    const unknown = { identity: 9, zone: "not-a-cell", x: 1, y: 1, tag: "a" };
    assert.deepEqual(
      pickCopies(grid, [unknown, { ...unknown, tag: "b" }]).map((c) => c.tag),
      ["a"],
    );
  });
});
