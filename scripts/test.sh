#!/usr/bin/env bash
# test.sh: install what is missing, build with warnings as errors, run every suite plain and under ASan+UBSan.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/deps.sh

jobs=$(nproc 2>/dev/null || echo 2)
run_suite() { # name, extra cmake args...
  local name=$1; shift
  local dir="build-$name"
  echo "=== $name build ==="
  cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DMCR_WERROR=ON "$@" >/dev/null
  cmake --build "$dir" -j"$jobs" >/dev/null
  echo "=== $name tests ==="
  (cd "$dir" && ctest --output-on-failure -j"$jobs")
}

run_suite plain
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  run_suite asan -DMCR_ASAN=ON -DMCR_BUILD_BENCH=OFF
echo "=== all suites passed (plain, asan+ubsan) ==="
