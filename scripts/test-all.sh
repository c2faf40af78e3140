#!/usr/bin/env bash
# Runs every test of the project: the Rust workspace (unit, integration, doc tests), the TypeScript SDK's
# tests, the C# SDK's tests (with Mono), and the browser tests. Services: PostgreSQL tests need ZONEKEEP_TEST_POSTGRES; bus tests need
# ZONEKEEP_TEST_NATS (NATS with JetStream; the NATS restart test also runs its own `nats-server`, from
# ZONEKEEP_NATS_SERVER or PATH); the matchmaker's fleet test runs its own `redis-server` (from
# ZONEKEEP_REDIS_SERVER), which it flushes and stops; browser tests need ZONEKEEP_CHROMIUM or /usr/bin/chromium. A test whose
# service is missing is reported as SKIPPED (listed at the end of the run), or fails when CI=true.
# `.ci/run` sets up every service.
set -euo pipefail
cd "$(dirname "$0")/.."

# Tests that skip append a line here; the list is printed however the run ends.
ZONEKEEP_SKIPPED_LOG="$(mktemp -t zonekeep-skipped.XXXXXX)"
export ZONEKEEP_SKIPPED_LOG
report_skipped() {
  if [ -s "$ZONEKEEP_SKIPPED_LOG" ]; then
    echo "== skipped (a missing service; these did NOT run)"
    sort "$ZONEKEEP_SKIPPED_LOG" | sed 's/^SKIPPED: /  /'
    echo "$(wc -l <"$ZONEKEEP_SKIPPED_LOG") skipped"
  else
    echo "== skipped: none"
  fi
  rm -f "$ZONEKEEP_SKIPPED_LOG"
}
trap report_skipped EXIT

# The module tests build the example zone modules for WebAssembly.
if command -v rustup >/dev/null 2>&1 && ! rustup target list --installed | grep -qx wasm32-unknown-unknown; then
  echo "== installing the wasm32-unknown-unknown target (zone modules)"
  rustup target add wasm32-unknown-unknown
fi

for service in ZONEKEEP_TEST_POSTGRES ZONEKEEP_TEST_NATS; do
  [ -n "${!service:-}" ] || echo "== note: $service is not set; the tests that need it will be SKIPPED"
done

echo "== rust workspace"
# cargo-nextest (.config/nextest.toml) runs test binaries side by side; without it, cargo test
# runs the same tests one binary after another.
if cargo nextest --version >/dev/null 2>&1; then
  rust_failed=0
  cargo nextest run --workspace --no-fail-fast || rust_failed=$?
  echo "== rust doc tests"
  cargo test --workspace --doc --no-fail-fast || rust_failed=$?
  [ "$rust_failed" -eq 0 ] || exit "$rust_failed"
else
  echo "== note: cargo-nextest is not installed; running the Rust tests with cargo test"
  cargo test --workspace --no-fail-fast
fi

if [ -f clients/js/package.json ]; then
  echo "== typescript sdk"
  (cd clients/js && { [ -d node_modules ] || npm ci --no-audit --no-fund; } && npm test)
fi

echo "== c# sdk"
bash clients/csharp/build.sh

echo "== arena page (movement parity with the Rust fixture, committed dist/ is fresh)"
(cd examples/arena/web && { [ -d node_modules ] || npm ci --no-audit --no-fund; } && npm test)

echo "== operator console (committed dist/ is fresh, imports resolve)"
(cd crates/zonekeep-server/console && { [ -d node_modules ] || npm ci --no-audit --no-fund; } && npm test)

echo "== browser and SDK end-to-end tests (real zonekeep binary, headless Chromium)"
# The Rust tests above built target/debug/zonekeep; building it again here with the binary's own
# feature set would compile much of the tree a second time.
[ -x target/debug/zonekeep ] || cargo build -p zonekeep
(cd tests/browser && { [ -d node_modules ] || npm ci --no-audit --no-fund; } && npm test)
