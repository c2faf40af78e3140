#!/usr/bin/env bash
# One benchmark run as docs/WORKLOADS.md (arena §6) describes it: the host in one process (with the
# bench zone kinds, --dev-kinds), the bots in another, on this machine over loopback; the bots read the
# host's CPU and memory from /proc/<pid>.
#
#   crates/zonekeep-bench/run-pair.sh NAME [serve flags...] -- [bench flags...]
#
# Writes target/bench/NAME.json (the full report) and NAME.txt (the table), and prints the table.
# Builds the release binary first unless ZONEKEEP_BIN points at one. The ticket secret is random
# per run unless ZONEKEEP_TICKET_SECRET is set. Example (arena scenario A):
#
#   crates/zonekeep-bench/run-pair.sh arena-a -- --workload arena --scenario a --zone arena-a --bots 100
set -euo pipefail

if [ $# -lt 1 ]; then
  sed -n '2,12p' "$0"
  exit 2
fi
NAME=$1
shift
SERVE=()
while [ $# -gt 0 ] && [ "$1" != "--" ]; do
  SERVE+=("$1")
  shift
done
[ $# -gt 0 ] && shift

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
OUT="$ROOT/target/bench"
mkdir -p "$OUT"
if [ -z "${ZONEKEEP_BIN:-}" ]; then
  cargo build --release -p zonekeep --manifest-path "$ROOT/Cargo.toml" >&2
  ZONEKEEP_BIN="$ROOT/target/release/zonekeep"
fi
if [ -z "${ZONEKEEP_TICKET_SECRET:-}" ]; then
  ZONEKEEP_TICKET_SECRET=$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n')
fi
export ZONEKEEP_TICKET_SECRET
PORT=${ZONEKEEP_BENCH_PORT:-7350}

"$ZONEKEEP_BIN" serve --listen "127.0.0.1:$PORT" --dev-kinds --max-connections-per-ip 100000 "${SERVE[@]}" \
  >"$OUT/$NAME.server.log" 2>&1 &
SERVER=$!
trap 'kill "$SERVER" 2>/dev/null || true' EXIT
# The host prints its address once it listens.
for _ in $(seq 1 100); do
  grep -q "listening" "$OUT/$NAME.server.log" && break
  kill -0 "$SERVER" 2>/dev/null || { cat "$OUT/$NAME.server.log" >&2; exit 1; }
  sleep 0.1
done
echo "load before the run: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
"$ZONEKEEP_BIN" bench --url "ws://127.0.0.1:$PORT" --server-pid "$SERVER" --no-progress \
  --report "$OUT/$NAME.json" "$@" | tee "$OUT/$NAME.txt"
