// Builds the operator console into a directory (default `dist/`): the page's TypeScript compiled to
// ES modules by tsc, the static files copied, and the ESM builds of Preact, its hooks, htm and uPlot
// (with uPlot's CSS and each library's licence) copied from node_modules into `vendor/`. No bundler:
// the browser loads plain ES modules, and the page imports the libraries by relative path
// (`./vendor/preact.js`), so the host serves exactly these files and nothing is fetched from
// anywhere else. Output is deterministic, so `dist/` is committed (the host embeds it) and a test
// rebuilds into a temporary directory and compares.
//
//   node build.mjs [outDir]
import { execFileSync } from "node:child_process";
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
const modules = join(here, "node_modules");
const STATIC = ["index.html", "style.css"];

/**
 * The vendored libraries: where each ESM build comes from, the name it is served as, and the type
 * declarations the page's imports of it are checked against. `rewrite` maps bare imports inside a
 * library to the vendored file's relative path (Preact's hooks import "preact").
 */
const VENDOR = [
  { from: "preact/dist/preact.mjs", to: "preact.js", types: 'export * from "preact";' },
  {
    from: "preact/hooks/dist/hooks.mjs",
    to: "hooks.js",
    types: 'export * from "preact/hooks";',
    rewrite: [['from"preact"', 'from"./preact.js"']],
  },
  { from: "htm/dist/htm.mjs", to: "htm.js", types: 'export { default } from "htm";' },
  { from: "uplot/dist/uPlot.esm.js", to: "uplot.js", types: 'import uPlot from "uplot";\nexport default uPlot;' },
  { from: "uplot/dist/uPlot.min.css", to: "uplot.css" },
  { from: "preact/LICENSE", to: "LICENSE-preact.txt" },
  { from: "htm/LICENSE", to: "LICENSE-htm.txt" },
  { from: "uplot/LICENSE", to: "LICENSE-uplot.txt" },
];

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
  const bin = join(modules, "typescript", "bin", "tsc");
  execFileSync(process.execPath, [bin, "-p", project], { stdio: "inherit" });
}

/** A vendored library's text as served: bare imports rewritten, the source-map comment dropped (no maps ship). */
function vendored(v) {
  let text = readFileSync(join(modules, v.from), "utf8");
  for (const [a, b] of v.rewrite ?? []) {
    if (!text.includes(a)) throw new Error(`${v.from}: expected to find ${a}`);
    text = text.split(a).join(b);
  }
  return text.replace(/\n?\/\/# sourceMappingURL=\S+\s*$/, "\n");
}

/** Builds the console into `outDir` (created or emptied). */
export function build(outDir) {
  const out = resolve(outDir);
  const work = mkdtempSync(join(tmpdir(), "zonekeep-console-"));
  try {
    // 1. Declarations for `./vendor/*.js`: the page's imports resolve to them through rootDirs and
    //    are left as they are in the output, where dist/vendor/*.js sits next to the page's modules.
    //    The declarations re-export the packages' own types, found from the console's node_modules.
    const types = join(work, "types");
    mkdirSync(join(types, "vendor"), { recursive: true });
    for (const v of VENDOR) {
      if (v.types !== undefined) writeFileSync(join(types, "vendor", v.to.replace(/\.js$/, ".d.ts")), `${v.types}\n`);
    }
    rmSync(out, { recursive: true, force: true });
    mkdirSync(join(out, "vendor"), { recursive: true });
    writeFileSync(
      join(work, "tsconfig.json"),
      JSON.stringify({
        compilerOptions: {
          ...compilerOptions,
          outDir: out,
          rootDir: join(here, "src"),
          rootDirs: [join(here, "src"), types],
          // The declarations above import the packages by name: look for them here.
          baseUrl: here,
          paths: { "*": [join(modules, "*")] },
        },
        include: [join(here, "src", "*.ts"), join(types, "vendor", "*.d.ts")],
      }),
    );
    tsc(join(work, "tsconfig.json"));

    // 2. The static files and the vendored libraries.
    for (const f of STATIC) copyFileSync(join(here, f), join(out, f));
    for (const v of VENDOR) {
      const text = v.from.endsWith(".js") || v.from.endsWith(".mjs") ? vendored(v) : readFileSync(join(modules, v.from), "utf8");
      writeFileSync(join(out, "vendor", v.to), text);
    }
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  build(process.argv[2] ?? join(here, "dist"));
}
