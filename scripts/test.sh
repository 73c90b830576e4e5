#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# test.sh: install what is missing, build with warnings as errors, run every suite plain, those that run library code under ASan+UBSan, those with threads under TSan, and the valgrind-labelled ones under valgrind.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/deps.sh

jobs=$(nproc 2>/dev/null || echo 2)
build() { # dir, target ("all": everything), extra cmake args...
  local dir=$1 target=$2; shift 2
  echo "=== build $dir${target:+ ($target)} ==="
  cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DMCR_WERROR=ON "$@" >/dev/null
  cmake --build "$dir" -j"$jobs" --target "$target" >/dev/null
}
run_ctest() { # dir [ctest args: a label selection]
  local dir=$1; shift
  echo "=== tests in $dir${*:+ ($*)} ==="
  (cd "$dir" && ctest --output-on-failure -j"$jobs" "$@")
}

# 1. Plain: the fast unit lane first (no server process, about a minute),
#    so that a broken change fails early; then every other suite, the docs
#    check and the benchmarks' smoke runs.
build build-plain all
run_ctest build-plain -L unit
run_ctest build-plain -LE unit

# 2. AddressSanitizer + UndefinedBehaviorSanitizer (leaks included): every
#    suite that runs library or CLI code, the fuzz corpora and the examples.
#    Not those labelled plain-only, which run none worth a sanitizer: the docs
#    checks, check_layout (nm over objects), test_install (the installed
#    tree) and test_cli_completion (bash logic, whose mcroute runs other CLI
#    suites make here); test/CMakeLists.txt says, for each, which suites run
#    its C calls under ASan. The single-threaded differential loops draw a
#    quarter of their random cases here (testutil.h, tu_cases()): every kind
#    of case still runs, and the plain stage runs the full counts.
build build-asan all -DMCR_ASAN=ON -DMCR_BUILD_BENCH=OFF
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 \
UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  run_ctest build-asan -LE plain-only

# 3. ThreadSanitizer: rings are read by many threads at once without locks.
#    TSan finds races between threads, so this stage builds and runs only the
#    suites with more than one thread (label threads: their own threads,
#    liburcu's call_rcu thread behind every router, the watcher's, the fleet
#    follower's, or the mcroute commands they run) and the examples (pools and
#    routers, each with its threads); a single-threaded suite cannot race, and
#    runs in the plain and ASan stages. Each suite's labels are written where
#    test/CMakeLists.txt registers it (mcr_add_suite). Of the suites whose
#    threads are in a few tests (THREADS_CASE there: test_ring,
#    test_snapshot, test_placement, test_compat_ketama) a TSan build runs
#    only the TCase "threads", which holds every test of theirs that reaches
#    a thread.
build build-tsan mcr_threads_targets -DMCR_TSAN=ON -DMCR_BUILD_BENCH=OFF
[ -n "$(cd build-tsan && ctest -N -L threads | sed -n 's/^ *Test  *#[0-9]*: *//p')" ] ||
  { echo "test.sh: no suite is labelled threads" >&2; exit 1; }
TSAN_OPTIONS=halt_on_error=1 run_ctest build-tsan -L '^(threads|example)$'

# 4. valgrind on the plain build: memory errors and leaks, the CLI included.
#    (test_compat_libmemcached and test_compat_twemproxy run under ASan above:
#    the first is too slow here (test_compat_lmc_options and
#    test_compat_lmc_cases, split from it, stay with it), the second drives
#    real servers (test_compat_twem_parse, split from it, stays with it: it
#    runs nutcracker -t, which --trace-children would trace). test_router and
#    test_watcher run under ASan and TSan: valgrind runs one thread at a time,
#    so their readers starve the writer's RCU grace periods and the stress
#    tests cannot publish. test_cli_pool
#    runs the CLI under valgrind against real memcached servers, which are
#    not traced, nor is python3 (test_cli_stats checks the JSON output with
#    it). The test_pool_* suites run under ASan and TSan: their timeouts
#    are 100-300 ms, which valgrind's slowdown would turn into false
#    failures.)
#    The suites are those labelled valgrind in test/CMakeLists.txt.
echo "=== valgrind ==="
valgrind_suites=$(cd build-plain && ctest -N -L valgrind | sed -n 's/^ *Test  *#[0-9]*: *//p')
[ -n "$valgrind_suites" ] || { echo "test.sh: no suite is labelled valgrind" >&2; exit 1; }
#    valgrind runs a process on one core at a time, so the programs run
#    $jobs at once (each its own process and servers, as under ctest -j),
#    the longest first (vg_first: their order in a run on 2 loaded cores,
#    174 to 48 s; the rest 30 s at most); each one's output is printed whole
#    when it ends, and the stage fails once all have run if any failed.
vg_first="test_cli_stats test_cli test_compat_ketama test_cli_pool test_cli_migrate test_diff test_ring"
vg_list=$(for t in $vg_first; do
            if [[ $'\n'$valgrind_suites$'\n' == *$'\n'$t$'\n'* ]]; then echo "$t"; fi
          done
          for t in $valgrind_suites; do
            if [[ " $vg_first " != *" $t "* ]]; then echo "$t"; fi
          done
          for t in build-plain/test/fuzz/replay_*; do echo "fuzz:$t"; done)
vg_dir=$(mktemp -d)
trap 'rm -rf "$vg_dir"' EXIT
vg_one() { # suite name, or fuzz:path of a replay program
  local t=$1 name=${1##*/} st=0 t0=$SECONDS
  if [[ $t == fuzz:* ]]; then
    # The fuzz targets' corpus replay: every corpus through every target.
    valgrind -q --error-exitcode=99 --leak-check=full --errors-for-leak-kinds=definite,indirect \
      "${t#fuzz:}" test/fuzz/corpus/*/ >"$vg_dir/$name.log" 2>&1 || st=$?
  else
    (cd build-plain && CK_FORK=no MCR_TEST_BIN_DIR="$PWD" MCR_TEST_SRC_DIR="$(cd .. && pwd)" \
       valgrind -q --error-exitcode=99 --leak-check=full --errors-for-leak-kinds=definite,indirect \
         --trace-children=yes --trace-children-skip='*/memcached,*/python3*' "./test/$t") \
      >"$vg_dir/$name.log" 2>&1 || st=$?
  fi
  [ "$st" -eq 0 ] || echo "$name: status $st" >>"$vg_dir/failed"
  flock "$vg_dir/lock" sh -c 'echo "--- valgrind $1 ($2 s, status $3)"; cat "$4"' sh \
    "$name" $((SECONDS - t0)) "$st" "$vg_dir/$name.log"
}
running=0
for t in $vg_list; do
  if [ "$running" -ge "$jobs" ]; then
    wait -n || true
    running=$((running - 1))
  fi
  vg_one "$t" &
  running=$((running + 1))
done
wait
if [ -s "$vg_dir/failed" ]; then
  echo "test.sh: failed under valgrind:" >&2
  cat "$vg_dir/failed" >&2
  exit 1
fi
echo "=== all suites passed (plain, asan+ubsan, tsan, valgrind) ==="
