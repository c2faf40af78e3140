// The npm package as published: `npm pack --dry-run --json` lists exactly what a user downloads. It
// must hold the library only (no tests, no sources the maps cannot reach), its licence, and the
// metadata a registry and a bundler need.
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { dirname, join, posix, resolve } from "node:path";
import { describe, it } from "node:test";
import { fileURLToPath } from "node:url";

// dist/test/ → package root.
const PACKAGE_ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "..", "..");

interface PackedFile {
  path: string;
}

function packedFiles(): string[] {
  // `npm` is a script on some platforms; run it through the shell so PATH lookup works everywhere.
  const out = execFileSync("npm", ["pack", "--dry-run", "--json", "--ignore-scripts"], {
    cwd: PACKAGE_ROOT,
    encoding: "utf8",
    shell: process.platform === "win32",
  });
  const report = JSON.parse(out) as Array<{ files: PackedFile[] }>;
  assert.equal(report.length, 1);
  return report[0]!.files.map((f) => f.path).sort();
}

describe("npm package", () => {
  const files = packedFiles();
  const lib = files.filter((f) => f.startsWith("dist/src/"));

  it("ships the library, its licence, README and manifest, and nothing else", () => {
    const others = files.filter((f) => !f.startsWith("dist/src/"));
    assert.deepEqual(others, ["LICENSE", "README.md", "package.json"]);
    for (const f of lib) {
      assert.match(f, /^dist\/src\/[a-z]+\.(js|js\.map|d\.ts)$/, `unexpected file in the package: ${f}`);
    }
    for (const f of ["dist/src/index.js", "dist/src/index.d.ts", "dist/src/index.js.map"]) {
      assert.ok(files.includes(f), `${f} is missing`);
    }
    // Every module comes with its declarations and its map.
    for (const js of lib.filter((f) => f.endsWith(".js"))) {
      assert.ok(files.includes(js.replace(/\.js$/, ".d.ts")), `${js} has no declarations`);
      assert.ok(files.includes(`${js}.map`), `${js} has no source map`);
    }
  });

  it("has source maps that resolve inside the package", () => {
    for (const map of lib.filter((f) => f.endsWith(".js.map"))) {
      const m = JSON.parse(readFileSync(join(PACKAGE_ROOT, map), "utf8")) as {
        file: string;
        sources: string[];
        sourcesContent?: Array<string | null>;
      };
      assert.ok(files.includes(posix.join(posix.dirname(map), m.file)), `${map}: its file ${m.file} is not packed`);
      m.sources.forEach((src, i) => {
        const packed = files.includes(posix.normalize(posix.join(posix.dirname(map), src)));
        const inline = typeof m.sourcesContent?.[i] === "string" && m.sourcesContent[i]!.length > 0;
        assert.ok(packed || inline, `${map}: source ${src} is neither packed nor inlined`);
      });
    }
  });

  it("declarations need no Node types", () => {
    for (const dts of lib.filter((f) => f.endsWith(".d.ts"))) {
      const text = readFileSync(join(PACKAGE_ROOT, dts), "utf8");
      assert.doesNotMatch(text, /reference types="node"|from "node:/, `${dts} refers to Node`);
    }
  });

  it("carries the repository's licence, a repository, and what bundlers and publishing need", () => {
    const pkg = JSON.parse(readFileSync(join(PACKAGE_ROOT, "package.json"), "utf8")) as Record<string, unknown>;
    assert.equal(pkg.license, "MIT OR Apache-2.0");
    assert.equal(pkg.sideEffects, false);
    assert.equal(typeof (pkg.repository as { url?: unknown } | undefined)?.url, "string");
    assert.match(String((pkg.scripts as Record<string, string>).prepublishOnly), /npm run build/);
    const licence = readFileSync(join(PACKAGE_ROOT, "LICENSE"), "utf8");
    assert.match(licence, /MIT License/);
    assert.match(licence, /Apache License\s+Version 2\.0/);
  });
});
