// Builds the demo pages (the arena, the shooting gallery) into a directory (default `dist/`): the SDK sources of clients/js compiled to
// `sdk/`, the page's TypeScript compiled beside them, the arena's movement rule compiled to
// WebAssembly by cargo (`arena-rules.wasm`, from examples/arena-rules; needs rustup's
// wasm32-unknown-unknown target), and the static files copied. No bundler: the
// browser loads plain ES modules. Output is deterministic, so `dist/` is committed and a test rebuilds
// into a temporary directory and compares (a fresh clone needs only cargo to run the demo).
//
//   node build.mjs [outDir]
import { execFileSync } from "node:child_process";
import { copyFileSync, mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
const sdkSrc = resolve(here, "../../../clients/js/src");
const root = resolve(here, "../../..");
const STATIC = ["index.html", "gallery.html", "cells.html", "play.html", "style.css"];

const compilerOptions = {
  target: "ES2022",
  module: "ES2022",
  moduleResolution: "Bundler",
  lib: ["ES2022", "DOM", "DOM.Iterable"],
  types: [],
  strict: true,
  noUncheckedIndexedAccess: true,
  noImplicitOverride: true,
  noFallthroughCasesInSwitch: true,
  skipLibCheck: true,
  forceConsistentCasingInFileNames: true,
  newLine: "lf",
  removeComments: false,
};

function tsc(project) {
  const bin = join(here, "node_modules", "typescript", "bin", "tsc");
  execFileSync(process.execPath, [bin, "-p", project], { stdio: "inherit" });
}

/** Builds the page into `outDir` (created or emptied). */
export function build(outDir) {
  const out = resolve(outDir);
  const work = mkdtempSync(join(tmpdir(), "arena-web-"));
  try {
    // 1. The SDK: JS and declarations into the work dir; only the JS ships.
    const sdkTypes = join(work, "types");
    writeFileSync(
      join(work, "tsconfig.sdk.json"),
      JSON.stringify({
        compilerOptions: { ...compilerOptions, declaration: true, outDir: join(sdkTypes, "sdk"), rootDir: sdkSrc },
        include: [join(sdkSrc, "*.ts")],
      }),
    );
    tsc(join(work, "tsconfig.sdk.json"));

    // 2. The page: `./sdk/index.js` resolves through rootDirs to the SDK declarations, and is left
    //    as is in the output, where dist/sdk/index.js sits next to it.
    rmSync(out, { recursive: true, force: true });
    mkdirSync(join(out, "sdk"), { recursive: true });
    writeFileSync(
      join(work, "tsconfig.page.json"),
      JSON.stringify({
        compilerOptions: {
          ...compilerOptions,
          outDir: out,
          rootDir: join(here, "src"),
          rootDirs: [join(here, "src"), sdkTypes],
        },
        include: [join(here, "src", "*.ts")],
      }),
    );
    tsc(join(work, "tsconfig.page.json"));

    for (const f of readdirSync(join(sdkTypes, "sdk")).sort()) {
      if (f.endsWith(".js")) copyFileSync(join(sdkTypes, "sdk", f), join(out, "sdk", f));
    }
    for (const f of STATIC) copyFileSync(join(here, f), join(out, f));

    // 3. The movement rule, the zone's own Rust code, for the prediction.
    const target = join(root, "target", "modules");
    execFileSync(
      process.env.CARGO ?? "cargo",
      ["build", "--quiet", "-p", "zonekeep-arena-rules", "--target", "wasm32-unknown-unknown", "--profile", "module", "--target-dir", target],
      { cwd: root, stdio: "inherit" },
    );
    copyFileSync(join(target, "wasm32-unknown-unknown", "module", "zonekeep_arena_rules.wasm"), join(out, "arena-rules.wasm"));
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  build(process.argv[2] ?? join(here, "dist"));
}
