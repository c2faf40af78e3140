// The built page is committed (so `cargo run` needs no Node). This rebuilds it into a temporary
// directory and asserts the committed dist/ is byte-identical: edit src/ or the SDK, then run
// `npm run build` here and commit dist/.
import assert from "node:assert/strict";
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, relative, resolve } from "node:path";
import { test } from "node:test";
import { fileURLToPath } from "node:url";

import { build } from "../build.mjs";

const here = dirname(fileURLToPath(import.meta.url));

function files(dir) {
  const out = [];
  const walk = (d) => {
    for (const name of readdirSync(d).sort()) {
      const p = join(d, name);
      if (statSync(p).isDirectory()) walk(p);
      else out.push(relative(dir, p));
    }
  };
  walk(dir);
  return out;
}

test("committed dist/ equals a fresh build", () => {
  const tmp = mkdtempSync(join(tmpdir(), "arena-fresh-"));
  try {
    const fresh = join(tmp, "dist");
    build(fresh);
    const committed = resolve(here, "../dist");
    const want = files(fresh);
    assert.deepEqual(files(committed), want, "dist/ has a different file set: run `npm run build`");
    for (const f of want) {
      const same = readFileSync(join(fresh, f)).equals(readFileSync(join(committed, f)));
      assert.ok(same, `dist/${f} is stale: run \`npm run build\` in examples/arena/web`);
    }
    assert.ok(want.includes("index.html") && want.includes("main.js") && want.includes("sdk/index.js"));
  } finally {
    rmSync(tmp, { recursive: true, force: true });
  }
});
