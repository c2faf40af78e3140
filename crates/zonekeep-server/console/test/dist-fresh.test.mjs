// The built console is committed (the host embeds it, so `cargo build` needs no Node). This
// rebuilds it into a temporary directory and asserts the committed dist/ is byte-identical: edit
// src/, index.html or style.css (or bump a library), then run `npm run build` here and commit dist/.
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
  const tmp = mkdtempSync(join(tmpdir(), "console-fresh-"));
  try {
    const fresh = join(tmp, "dist");
    build(fresh);
    const committed = resolve(here, "../dist");
    const want = files(fresh);
    assert.deepEqual(files(committed), want, "dist/ has a different file set: run `npm run build`");
    for (const f of want) {
      const same = readFileSync(join(fresh, f)).equals(readFileSync(join(committed, f)));
      assert.ok(same, `dist/${f} is stale: run \`npm run build\` in crates/zonekeep-server/console`);
    }
    for (const f of ["index.html", "app.js", "vendor/preact.js", "vendor/hooks.js", "vendor/htm.js", "vendor/uplot.js", "vendor/uplot.css"]) {
      assert.ok(want.includes(f), `the build makes ${f}`);
    }
  } finally {
    rmSync(tmp, { recursive: true, force: true });
  }
});

test("the page loads nothing from elsewhere: every import is relative and every vendored one is built", () => {
  const dist = resolve(here, "../dist");
  const built = new Set(files(dist));
  for (const f of built) {
    if (!f.endsWith(".js")) continue;
    const text = readFileSync(join(dist, f), "utf8");
    for (const m of text.matchAll(/(?:import|export)\s*(?:[\w*{}\s,$]+from\s*)?["']([^"']+)["']/g)) {
      const spec = m[1];
      assert.ok(spec.startsWith("./") || spec.startsWith("../"), `${f} imports ${spec}: only relative imports reach the host`);
      const target = join(dirname(f), spec);
      assert.ok(built.has(target), `${f} imports ${spec}, which the build does not make`);
    }
  }
  const index = readFileSync(join(dist, "index.html"), "utf8");
  for (const m of index.matchAll(/(?:src|href)="([^"]+)"/g)) {
    assert.ok(m[1].startsWith("/console/"), `index.html loads ${m[1]}`);
    assert.ok(built.has(m[1].slice("/console/".length)), `index.html loads ${m[1]}, which the build does not make`);
  }
  assert.doesNotMatch(index, /<script>|style=/, "no inline script or style: the policy allows none");
});
