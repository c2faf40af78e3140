#!/usr/bin/env bash
# Runs every test of the project: the Rust workspace (unit, integration, doc tests), the TypeScript SDK's
# tests, and the browser tests. Services: PostgreSQL tests need ZONEKEEP_TEST_POSTGRES (skipped without
# it); browser tests need ZONEKEEP_CHROMIUM or /usr/bin/chromium (skipped without it). `.ci/run` sets both.
set -euo pipefail
cd "$(dirname "$0")/.."

echo "== rust workspace"
cargo test --workspace --no-fail-fast

if [ -f clients/js/package.json ]; then
  echo "== typescript sdk"
  (cd clients/js && { [ -d node_modules ] || npm ci --no-audit --no-fund; } && npm test)
fi

echo "== arena page (movement parity with the Rust fixture, committed dist/ is fresh)"
(cd examples/arena/web && { [ -d node_modules ] || npm ci --no-audit --no-fund; } && npm test)

echo "== browser and SDK end-to-end tests (real zonekeep binary, headless Chromium)"
cargo build -p zonekeep
(cd tests/browser && { [ -d node_modules ] || npm ci --no-audit --no-fund; } && npm test)
