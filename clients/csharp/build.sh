#!/usr/bin/env bash
# Builds the C# SDK with Mono's compiler and runs its tests: the library (build/Zonekeep.dll), the test
# runner (build/Zonekeep.Tests.exe) and the console sample (build/ZonekeepConsole.exe), then the tests
# with mono. The loopback tests start the real host (ZONEKEEP_BIN, default target/debug/zonekeep, built
# here with `cargo build -p zonekeep` when it is missing); the fleet test needs ZONEKEEP_TEST_POSTGRES.
#
# mcs speaks C# up to 7.2 (a subset of 7.3, the language level Unity 2021 and the csproj use). Without
# mcs/mono (Debian: mono-mcs, mono-devel) the tests are reported as skipped, or fail when CI=true.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
cd "$here"

if ! command -v mcs >/dev/null 2>&1 || ! command -v mono >/dev/null 2>&1; then
  line="SKIPPED: C# SDK tests (Debian's mono-mcs/mono-devel are not installed)"
  echo "$line"
  if [ -n "${ZONEKEEP_SKIPPED_LOG:-}" ]; then echo "$line" >>"$ZONEKEEP_SKIPPED_LOG"; fi
  if [ "${CI:-}" = "true" ]; then exit 1; fi
  exit 0
fi

out="$here/build"
mkdir -p "$out"
flags=(-langversion:7.2 -warnaserror -nologo -r:System.dll -r:System.Core.dll)

echo "== c# sdk: library"
mcs "${flags[@]}" -target:library -doc:"$out/Zonekeep.xml" -out:"$out/Zonekeep.dll" Runtime/*.cs
echo "== c# sdk: tests and console sample"
# The test runner's assembly is named by its file, Zonekeep.Tests: the name Runtime/AssemblyInfo.cs lets
# see the library's internals (the tests read JSON with its MiniJson).
mcs "${flags[@]}" -target:exe -r:System.Net.Http.dll -r:"$out/Zonekeep.dll" -out:"$out/Zonekeep.Tests.exe" Tests/*.cs Tests/Generated/*.cs Samples/ArenaRules.cs Samples/Generated/*.cs
mcs "${flags[@]}" -target:exe -r:System.Net.Http.dll -r:"$out/Zonekeep.dll" -out:"$out/ZonekeepConsole.exe" Samples/Console/Program.cs Samples/ArenaRules.cs Samples/Generated/*.cs

bin="${ZONEKEEP_BIN:-$repo/target/debug/zonekeep}"
if [ ! -x "$bin" ] && [ -z "${ZONEKEEP_BIN:-}" ] && command -v cargo >/dev/null 2>&1; then
  echo "== c# sdk: building the zonekeep binary for the loopback tests"
  (cd "$repo" && cargo build -p zonekeep)
fi

echo "== c# sdk: tests"
ZONEKEEP_REPO="$repo" ZONEKEEP_BIN="$bin" mono --debug "$out/Zonekeep.Tests.exe" "$@"
