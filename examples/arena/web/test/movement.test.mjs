// Replays the Rust-generated movement fixture through the page's movement step (the committed
// dist/movement.js running the committed dist/arena-rules.wasm, both of which dist-fresh.test.mjs
// proves are built from source) and asserts bit-identical results: the server's authoritative step
// and the client's prediction agree to the bit.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { dirname, resolve } from "node:path";
import { test } from "node:test";
import { fileURLToPath } from "node:url";

import * as movement from "../dist/movement.js";
import { posDecode, posEncode } from "../dist/sdk/index.js";

const here = dirname(fileURLToPath(import.meta.url));
await movement.loadRules(readFileSync(resolve(here, "../dist/arena-rules.wasm")));
const fixture = JSON.parse(readFileSync(resolve(here, "../../../../tests/fixtures/arena/movement.json"), "utf8"));

const buf = new DataView(new ArrayBuffer(4));
function fromBits(bits) {
  buf.setUint32(0, bits);
  return buf.getFloat32(0);
}
function toBits(v) {
  buf.setFloat32(0, v);
  return buf.getUint32(0);
}

test("constants match the Rust ones bit for bit", () => {
  for (const [name, bits] of Object.entries(fixture.constants)) {
    assert.ok(name in movement, `movement.ts exports ${name}`);
    assert.equal(toBits(movement[name]), bits, name);
    assert.equal(Math.fround(movement[name]), movement[name], `${name} is an f32`);
  }
});

test("every fixture case replays bit-identically", () => {
  let steps = 0;
  for (const c of fixture.cases) {
    const dt = fromBits(c.dt);
    const pillars = c.pillars.map(([x, y, r]) => ({ x: fromBits(x), y: fromBits(y), r: fromBits(r) }));
    let s = { x: fromBits(c.start[0]), y: fromBits(c.start[1]) };
    c.inputs.forEach(([dir, flags], i) => {
      s = movement.step(s, { dir, flags }, dt, pillars);
      const [wx, wy] = c.states[i];
      if (toBits(s.x) !== wx || toBits(s.y) !== wy) {
        assert.fail(
          `${c.name}, step ${i}: got (${s.x}, ${s.y}) = [${toBits(s.x)}, ${toBits(s.y)}], ` +
            `want (${fromBits(wx)}, ${fromBits(wy)}) = [${wx}, ${wy}]`,
        );
      }
      steps += 1;
    });
  }
  assert.ok(fixture.cases.length >= 20 && steps > 3000, `fixture too small: ${steps} steps`);
});

test("the step does not mutate its arguments and ignores unknown bits", () => {
  const s = Object.freeze({ x: 10, y: 10 });
  const pillars = Object.freeze([Object.freeze({ x: 12, y: 10, r: 1 })]);
  const a = movement.step(s, { dir: movement.DIR_RIGHT, flags: 0 }, movement.DT, pillars);
  assert.notDeepEqual(a, s);
  assert.deepEqual(movement.encodeInput({ dir: 0xff, flags: 0xff }), Uint8Array.of(15, 1));
  assert.deepEqual(movement.encodeInput({ dir: movement.DIR_UP, flags: 0 }), Uint8Array.of(1));
});

test("the page collides with the map's pillars", () => {
  // The page reads pillars from the world; the zone spawns exactly these (map_pillars).
  assert.equal(fixture.map_pillars.length, 10);
  const snap = (v) => posDecode(posEncode(v, movement.POS_STEP), movement.POS_STEP);
  for (const [x, y] of fixture.map_pillars) {
    assert.equal(snap(fromBits(x)), fromBits(x), "pillar centres are on the wire grid");
    assert.equal(snap(fromBits(y)), fromBits(y));
  }
});
