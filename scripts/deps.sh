#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# deps.sh: install the Debian 12 packages that building mcroute and running its demo, tests and benchmarks use, only those that are missing.
#
# Every tool the build, scripts/*.sh, test/ and examples/ run is here, so
# that the README's two commands work on a fresh Debian 12 minbase system
# (scripts/fresh-check.sh proves it). A test that finds a tool missing
# fails saying so; it never skips. To add a dependency, add a line below
# with what needs it.
set -euo pipefail

PKGS=(
  build-essential  # gcc, make, libc headers; the sanitizer runtimes come with gcc
  binutils         # readelf (test_install)
  cmake
  pkg-config       # the build, and the .pc files test_install checks
  libssl-dev       # libcrypto: the tests' reference MD5
  libevent-dev     # the connection pool (libevent_core), http_cache (libevent_extra)
  libyaml-dev      # nutcracker YAML files
  liburcu-dev      # the router's lock-free readers (liburcu-bp)
  libxxhash-dev    # libmcroute: XXH3/XXH64 of the memcached proxy's and Envoy's placements
  libmemcached-dev # libmcroute_libmemcached, test_compat_libmemcached and test_compat_lmc_*, benchmarks
  libhashkit-dev   # test_hash: libhashkit's digests
  check            # every Check suite
  memcached        # real servers for the pool's tests, the examples and the demo
  nutcracker       # test_compat_twemproxy, test_compat_twem_parse, bench_pool
  libjansson-dev   # libmcroute_fleet: etcd's JSON gateway (requests, replies, watch events)
  etcd-server      # real etcd members for the fleet's tests, the demo, bench_fleet
  etcd-client      # etcdctl: the fleet tests write corrupt values, compact, read members
  valgrind         # scripts/test.sh, stage 4
  python3          # test_simulate, test_cli_stats (JSON), the http_cache example tests
  python3-prometheus-client # test_agent: a scrape of /metrics parsed by Prometheus's own parser
  perl-base        # test/check_docs.sh
  groff-base       # test/check_docs.sh: man pages render cleanly
  man-db           # test/check_docs.sh: `man -l`
  # test_clients: the real clients whose placement --client reproduces, and
  # what runs them (test/ref/); iproute2 for test/ref/netns.sh (`ip`)
  iproute2
  python3-pymemcache python3-memcache python3-pylibmc
  libspymemcached-java openjdk-17-jdk-headless
  ruby ruby-dalli
  golang-go golang-github-bradfitz-gomemcache-dev
  php-cli php-memcached php-memcache
  php8.2-fpm libfcgi-bin # test_preload: PHP-FPM workers with libmcroute_preload.so, by FastCGI
  nginx-light
  # python/: the mcroute package (its C extension, pip install from the
  # tree), its pytest suites and the Django cache backend's
  python3-dev python3-setuptools python3-pip python3-venv python3-pytest python3-django
  nginx-dev        # nginx/: the module, built against Debian's nginx's configure tree
  wrk              # bench_nginx: requests/s and latency of nginx with the module
  nodejs           # with npm (below): test/ref/package-lock.json's memcached, memjs
)

missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# Debian's npm, unless an npm is there already (a nodejs package of another
# origin brings its own, and conflicts with Debian's)
command -v npm >/dev/null 2>&1 || missing+=(npm)
here=$(cd "$(dirname "$0")/.." && pwd)
# The npm clients of test_clients (exact versions: test/ref/package-lock.json),
# into test/ref/node_modules, when missing or older than the lock file.
npm_clients() {
  local dir=$here/test/ref
  if [ -f "$dir/node_modules/.package-lock.json" ] &&
     [ "$dir/node_modules/.package-lock.json" -nt "$dir/package-lock.json" ]; then
    return 0
  fi
  echo "deps: npm ci in test/ref (memcached, memjs)..." >&2
  (cd "$dir" && npm ci --no-audit --no-fund --loglevel=error >&2) ||
    { echo "deps: npm ci in $dir failed" >&2; exit 1; }
}
if [ ${#missing[@]} -eq 0 ]; then
  npm_clients
  exit 0
fi
SUDO=()
if [ "$(id -u)" -ne 0 ]; then
  if ! command -v sudo >/dev/null 2>&1; then
    echo "deps: missing packages: ${missing[*]}" >&2
    echo "deps: run this script as root, or install sudo, to install them" >&2
    exit 1
  fi
  SUDO=(sudo)
fi
export DEBIAN_FRONTEND=noninteractive
log=$(mktemp "${TMPDIR:-/tmp}/mcroute-deps.XXXXXX")
# Another apt may hold the lock for a while (unattended upgrades, a second
# checkout running this script): wait for it rather than fail.
APT=("${SUDO[@]}" apt-get -o DPkg::Lock::Timeout=600)
fail() {
  echo "deps: $1 failed; the last lines of its output ($log):" >&2
  tail -n 30 "$log" >&2
  exit 1
}

echo "deps: ${#missing[@]} Debian packages missing: ${missing[*]}" >&2
echo "deps: apt-get update..." >&2
# (DPkg::Lock::Timeout does not cover the lists' lock that update takes.)
for i in $(seq 120); do
  "${APT[@]}" update >"$log" 2>&1 && break
  grep -q 'Could not get lock' "$log" || fail "apt-get update"
  [ "$i" -eq 1 ] && echo "deps: waiting for another apt to finish..." >&2
  [ "$i" -eq 120 ] && fail "apt-get update"
  sleep 5
done
# apt's own progress, one line per tenth of the packages it downloads and
# sets up (its full output is in $log).
echo "deps: apt-get install (with what they need)..." >&2
set +e
"${APT[@]}" install -y --no-install-recommends "${missing[@]}" 2>&1 | tee -a "$log" |
  awk '
    /newly installed/ { n = $3 + 0; printf "deps: %d packages to install\n", n > "/dev/stderr" }
    /^Get:/ { g++; if (n && (g == n || g % int(n / 10 + 1) == 0)) printf "deps: downloaded %d of %d\n", g, n > "/dev/stderr" }
    /^Setting up / { s++; if (n && (s == n || s % int(n / 10 + 1) == 0)) printf "deps: set up %d of %d\n", s, n > "/dev/stderr" }
  '
st=${PIPESTATUS[0]}
set -e
[ "$st" -eq 0 ] || fail "apt-get install"
rm -f "$log"
npm_clients
echo "deps: done" >&2
