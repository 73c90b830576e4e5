#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# loaded-check.sh: run the suite several times in a row on a clean clone while stress-ng loads every core; stops at the first failure.
#
# usage: scripts/loaded-check.sh [--ref REF] [--runs N] [--load N] [--stages LIST] [--dir DIR] [--keep]
#   --ref REF      the commit to clone (default HEAD)
#   --runs N       runs in a row (default 3)
#   --load N       stress-ng CPU workers (default: one per core)
#   --stages LIST  comma-separated builds to run each time: plain, asan, tsan
#                  (default plain,asan,tsan; each as scripts/test.sh builds it)
#   --dir DIR      where to clone (default: a new directory under /var/tmp)
#   --keep         keep the clone afterwards
# Installs stress-ng (Debian) if it is missing. The load starts before the
# builds, so they are loaded too, and is stopped by PID on exit. Each run
# prints the load average and every stage's result; the exit status is 0
# only if every run of every stage passed.
set -euo pipefail
# The whole script is one block, parsed before any of it runs: bash reads a
# script as it goes, so editing this file during a run (which lasts an hour
# or more) would otherwise make it run the new text from an old offset.
{
cd "$(dirname "$0")/.."
src=$PWD
ref=HEAD runs=3 load=$(nproc 2>/dev/null || echo 2) stages=plain,asan,tsan dir= keep=0
while [ $# -gt 0 ]; do
  case $1 in
    --ref) ref=$2; shift 2 ;;
    --runs) runs=$2; shift 2 ;;
    --load) load=$2; shift 2 ;;
    --stages) stages=$2; shift 2 ;;
    --dir) dir=$2; shift 2 ;;
    --keep) keep=1; shift ;;
    -h|--help) sed -n '4,17p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "loaded-check: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
case $runs in ''|*[!0-9]*|0) echo "loaded-check: --runs: a positive number, not '$runs'" >&2; exit 2 ;; esac
case $load in ''|*[!0-9]*|0) echo "loaded-check: --load: a positive number, not '$load'" >&2; exit 2 ;; esac
IFS=, read -r -a stage_list <<<"$stages"
for s in "${stage_list[@]}"; do
  case $s in plain|asan|tsan) ;; *) echo "loaded-check: unknown stage '$s' (plain, asan, tsan)" >&2; exit 2 ;; esac
done
commit=$(git -C "$src" rev-parse --verify "$ref^{commit}") || { echo "loaded-check: no commit '$ref'" >&2; exit 2; }

if ! command -v stress-ng >/dev/null 2>&1; then
  echo "loaded-check: installing stress-ng"
  if [ "$(id -u)" -eq 0 ]; then
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q stress-ng >/dev/null
  else
    sudo DEBIAN_FRONTEND=noninteractive apt-get install -y -q stress-ng >/dev/null
  fi
fi
[ -n "$dir" ] || dir=$(mktemp -d /var/tmp/mcroute-loaded.XXXXXX)
stress_pid=
cleanup() {
  if [ -n "$stress_pid" ] && kill -0 "$stress_pid" 2>/dev/null; then
    kill -TERM "$stress_pid" 2>/dev/null || true
    wait "$stress_pid" 2>/dev/null || true
  fi
  if [ "$keep" -eq 0 ] && [ -d "$dir/repo" ]; then rm -rf "$dir"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

echo "loaded-check: $commit, $runs runs of [$stages], $load stress-ng CPU workers, in $dir"
git clone -q "$src" "$dir/repo"
git -C "$dir/repo" checkout -q "$commit"
cd "$dir/repo"
./scripts/deps.sh

stress-ng --cpu "$load" --timeout 0 --quiet &
stress_pid=$!

jobs=$(nproc 2>/dev/null || echo 2)
flags() { # stage -> cmake flags, as scripts/test.sh builds it
  case $1 in
    plain) echo "" ;;
    asan) echo "-DMCR_ASAN=ON -DMCR_BUILD_BENCH=OFF" ;;
    tsan) echo "-DMCR_TSAN=ON -DMCR_BUILD_BENCH=OFF" ;;
  esac
}
selection() { # stage -> ctest label selection, as scripts/test.sh runs it
  case $1 in
    plain) echo "" ;;
    asan) echo "-LE plain-only" ;;
    tsan) echo "-L ^(threads|example)\$" ;;
  esac
}
for s in "${stage_list[@]}"; do
  echo "=== build build-$s (loaded; $(cut -d' ' -f1-3 /proc/loadavg)) ==="
  # shellcheck disable=SC2046
  cmake -S . -B "build-$s" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DMCR_WERROR=ON $(flags "$s") >/dev/null
  cmake --build "build-$s" -j"$jobs" >/dev/null
done

for run in $(seq 1 "$runs"); do
  for s in "${stage_list[@]}"; do
    echo "=== run $run of $runs: $s (load average $(cut -d' ' -f1-3 /proc/loadavg)) ==="
    start=$(date +%s)
    rc=0
    (cd "build-$s" &&
      ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 \
      UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
      TSAN_OPTIONS=halt_on_error=1 \
      # shellcheck disable=SC2046
      ctest --output-on-failure -j"$jobs" $(selection "$s")) > "$dir/run$run-$s.log" 2>&1 || rc=$?
    grep -E "tests passed|tests failed|\*\*\*Failed|\*\*\*Timeout|Exception" "$dir/run$run-$s.log" || true
    echo "--- run $run $s: $([ $rc -eq 0 ] && echo PASSED || echo FAILED) in $(( $(date +%s) - start )) s"
    if [ $rc -ne 0 ]; then
      keep=1
      echo "loaded-check: FAILED; the log is $dir/run$run-$s.log"
      exit 1
    fi
  done
done
echo "loaded-check: all $runs runs of [$stages] passed under load"
exit 0
}
