#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# test/fuzz/run.sh: build the fuzz targets with clang (MCR_FUZZ=ON) and run
# each for SECONDS, then merge the inputs that found new coverage into its
# seed corpus (libFuzzer -merge=1: only inputs that add coverage are kept).
#
#   test/fuzz/run.sh [SECONDS] [TARGET...]     (default: 60 s, every target)
#
# Environment: MCR_FUZZ_BUILD (build directory, default build-fuzz),
# MCR_FUZZ_MERGE=0 (do not touch the corpora), MCR_FUZZ_ARGS (more libFuzzer
# options). Crashes, leaks, timeouts and broken invariants are written to
# $MCR_FUZZ_BUILD/artifacts/TARGET/; the script exits 1 when there is one.
# One process per target, one target at a time: the machine is shared.
set -euo pipefail

src=$(cd "$(dirname "$0")/../.." && pwd)
secs=${1:-60}
shift || true
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(reply lmc_options twemproxy server_list ketama_file snapshot)
build=${MCR_FUZZ_BUILD:-$src/build-fuzz}

command -v clang >/dev/null || { echo "run.sh: clang is needed (apt-get install clang)" >&2; exit 2; }
CC=clang cmake -S "$src" -B "$build" -DMCR_FUZZ=ON -DMCR_BUILD_BENCH=OFF \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$build" -j2 --target $(printf 'fuzz_%s ' "${targets[@]}") >/dev/null

found=0
for t in "${targets[@]}"; do
  corpus=$src/test/fuzz/corpus/$t
  scratch=$build/scratch/$t
  art=$build/artifacts/$t
  mkdir -p "$scratch" "$art"
  maxlen=4096
  # Snapshot files are long; the known slow forged maglev table (issue 11,
  # item 10) is skipped by the target itself.
  [ "$t" = snapshot ] && maxlen=16384
  echo "== $t: ${secs}s"
  set +e
  "$build/test/fuzz/fuzz_$t" -max_total_time="$secs" -max_len=$maxlen -timeout=20 \
    -rss_limit_mb=2048 -print_final_stats=1 -artifact_prefix="$art/" \
    ${MCR_FUZZ_ARGS:-} "$scratch" "$corpus" >"$build/fuzz-$t.log" 2>&1
  rc=$?
  set -e
  grep -E '^stat::number_of_executed_units|^stat::new_units_added|^#[0-9]+ *DONE' \
    "$build/fuzz-$t.log" || true
  if [ $rc -ne 0 ]; then
    found=1
    echo "$t: libFuzzer exited $rc: see $build/fuzz-$t.log and $art/"
    grep -m3 -E 'ERROR|invariant broken|SUMMARY' "$build/fuzz-$t.log" || true
  fi
  if [ "${MCR_FUZZ_MERGE:-1}" != 0 ]; then
    before=$(ls "$corpus" | wc -l)
    # -use_counters=0: an input is kept for a new edge, not a new hit count,
    # which keeps the corpus at dozens of files rather than hundreds.
    "$build/test/fuzz/fuzz_$t" -merge=1 -use_counters=0 -max_len=$maxlen -timeout=20 -rss_limit_mb=2048 \
      "$corpus" "$scratch" >"$build/merge-$t.log" 2>&1 || echo "$t: merge failed"
    echo "$t: corpus $before -> $(ls "$corpus" | wc -l) files"
  fi
done
exit $found
