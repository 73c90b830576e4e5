#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# test.sh: install what is missing, build with warnings as errors, run every suite plain, under ASan+UBSan, TSan and valgrind.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/deps.sh

jobs=$(nproc 2>/dev/null || echo 2)
build() { # dir, extra cmake args...
  local dir=$1; shift
  echo "=== build $dir ==="
  cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DMCR_WERROR=ON "$@" >/dev/null
  cmake --build "$dir" -j"$jobs" >/dev/null
}
run_ctest() { # dir [ctest args: a label selection]
  local dir=$1; shift
  echo "=== tests in $dir${*:+ ($*)} ==="
  (cd "$dir" && ctest --output-on-failure -j"$jobs" "$@")
}

# 1. Plain: the fast unit lane first (no server process, about a minute),
#    so that a broken change fails early; then every other suite, the docs
#    check and the benchmarks' smoke runs.
build build-plain
run_ctest build-plain -L unit
run_ctest build-plain -LE unit

# 2. AddressSanitizer + UndefinedBehaviorSanitizer (leaks included). Every
#    suite but the docs check, which runs no library code (its one program,
#    mcroute --help, is run by test_cli in every stage). The single-threaded
#    differential loops draw half of their random cases here (testutil.h,
#    tu_cases()): every kind of case still runs.
build build-asan -DMCR_ASAN=ON -DMCR_BUILD_BENCH=OFF
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 \
UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  run_ctest build-asan -LE docs

# 3. ThreadSanitizer: rings are read by many threads at once without locks.
#    The single-threaded differential suites draw a quarter of their random
#    cases here (testutil.h, tu_cases()): every kind of case still runs, and
#    the full counts run in the plain build.
build build-tsan -DMCR_TSAN=ON -DMCR_BUILD_BENCH=OFF
TSAN_OPTIONS=halt_on_error=1 run_ctest build-tsan -LE docs

# 4. valgrind on the plain build: memory errors and leaks, the CLI included.
#    (test_compat_libmemcached and test_compat_twemproxy run under ASan above:
#    the first is too slow here, the second drives real servers. test_router
#    runs under ASan and TSan: valgrind runs one thread at a time, so its
#    readers starve the writer's RCU grace periods and the stress test
#    cannot publish. test_cli_pool runs the CLI under valgrind against real
#    memcached servers, which are not traced, nor is python3 (test_cli_stats
#    checks the JSON output with it). The test_pool_* suites run under ASan
#    and TSan: their timeouts are 100-300 ms, which valgrind's slowdown would
#    turn into false failures.)
#    The suites are those labelled valgrind in test/CMakeLists.txt.
echo "=== valgrind ==="
valgrind_suites=$(cd build-plain && ctest -N -L valgrind | sed -n 's/^ *Test  *#[0-9]*: *//p')
[ -n "$valgrind_suites" ] || { echo "test.sh: no suite is labelled valgrind" >&2; exit 1; }
for t in $valgrind_suites; do
  echo "--- valgrind $t"
  (cd build-plain && CK_FORK=no MCR_TEST_BIN_DIR="$PWD" MCR_TEST_SRC_DIR="$(cd .. && pwd)" \
     valgrind -q --error-exitcode=99 --leak-check=full --errors-for-leak-kinds=definite,indirect \
       --trace-children=yes --trace-children-skip='*/memcached,*/python3*' "./test/$t")
done
# The fuzz targets' corpus replay: every corpus through every target.
for t in build-plain/test/fuzz/replay_*; do
  echo "--- valgrind $(basename "$t")"
  valgrind -q --error-exitcode=99 --leak-check=full --errors-for-leak-kinds=definite,indirect \
    "$t" test/fuzz/corpus/*/
done
echo "=== all suites passed (plain, asan+ubsan, tsan, valgrind) ==="
