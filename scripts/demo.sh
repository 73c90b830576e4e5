#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# demo.sh: install what is missing, build mcroute, show where keys go and how a resize moves them, then use real memcached servers through the pool and add one live.
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=$(nproc 2>/dev/null || echo 2)
step() { echo "demo: $*"; }
elapsed() { echo "$(($(date +%s) - $1))s"; }

t0=$(date +%s)
step "1/3 Debian packages: scripts/deps.sh installs those that are missing..."
./scripts/deps.sh
# Its own build tree, and only the two programs the demo runs (not the tests
# and benchmarks, which ./scripts/test.sh builds in build-plain/).
build="build-demo"
mkdir -p "$build"
log=$build/demo-build.log
step "2/3 configuring ($build/, log in $log)..."
t=$(date +%s)
if ! cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DMCR_BUILD_BENCH=OFF >"$log" 2>&1; then
  tail -n 30 "$log" >&2; echo "demo: cmake failed (log: $log)" >&2; exit 1
fi
step "3/3 building the mcroute command and examples/pool_demo (under a minute on 2 idle cores)..."
if ! cmake --build "$build" -j"$jobs" --target mcroute_cli pool_demo >>"$log" 2>&1; then
  tail -n 30 "$log" >&2; echo "demo: the build failed (log: $log)" >&2; exit 1
fi
step "built in $(elapsed "$t") ($(elapsed "$t0") since the start)"
echo
M=./$build/mcroute

# table HEADER...: the command's tab-separated lines under a header row,
# the columns aligned (the command itself prints no header: scripts read it).
table() { { (IFS=$'\t'; echo "$*"); cat; } | expand -t 16; }
# diff's output: "moved F" first, then FROM TO FRACTION per pair, and with
# --keys a last "keys_moved N TOTAL".
diff_table() {
  awk -F'\t' 'NR == 1 { print; print "FROM\tTO\tFRACTION"; next } { print }' | expand -t 16
}

POOL="10.0.0.1:11211,10.0.0.2:11211,10.0.0.3:11211:2"
echo "\$ mcroute locate -s $POOL user:1 user:2 user:3 session:9 cart:77"
$M locate -s "$POOL" user:1 user:2 user:3 session:9 cart:77 | table KEY SERVER
echo
echo "# The same keys under libmemcached's weighted ketama, configured as a PHP or C client would:"
OPTS="--SERVER=10.0.0.1:11211 --SERVER=10.0.0.2:11211 --SERVER=10.0.0.3:11211/?2"
echo "\$ mcroute locate --libmemcached '$OPTS' --behavior KETAMA_WEIGHTED=1 user:1 user:2 user:3 session:9 cart:77"
$M locate --libmemcached "$OPTS" --behavior KETAMA_WEIGHTED=1 user:1 user:2 user:3 session:9 cart:77 |
  table KEY SERVER
echo "# Why they differ: both hash each server's labels \"LABEL-0\", \"LABEL-1\", ... with MD5,"
echo "# four points per digest, and both give these servers the same counts (120, 120, 240"
echo "# points); but libketama's LABEL always has the port (\"10.0.0.1:11211-0\") while"
echo "# libmemcached drops the default port 11211 (\"10.0.0.1-0\"), so every point lands"
echo "# elsewhere on the ring. With the servers on port 11212 both would hash"
echo "# \"10.0.0.1:11212-0\" and place every key alike. Each mode reproduces its own client."
echo
echo "# How many of 10000 keys move when a fourth server joins (ketama keeps ~1/4 moving):"
seq -f 'key:%g' 1 10000 > /tmp/mcroute-demo-keys.$$
$M locate -s "$POOL" < /tmp/mcroute-demo-keys.$$ > /tmp/mcroute-demo-a.$$
$M locate -s "$POOL,10.0.0.4:11211" < /tmp/mcroute-demo-keys.$$ > /tmp/mcroute-demo-b.$$
moved=$(paste /tmp/mcroute-demo-a.$$ /tmp/mcroute-demo-b.$$ | awk -F'\t' '$2 != $4' | wc -l)
echo "ketama: $moved of 10000 keys moved"
$M locate -s "$POOL" -m modula < /tmp/mcroute-demo-keys.$$ > /tmp/mcroute-demo-a.$$
$M locate -s "$POOL,10.0.0.4:11211" -m modula < /tmp/mcroute-demo-keys.$$ > /tmp/mcroute-demo-b.$$
moved=$(paste /tmp/mcroute-demo-a.$$ /tmp/mcroute-demo-b.$$ | awk -F'\t' '$2 != $4' | wc -l)
echo "modula: $moved of 10000 keys moved"
echo
echo "# The same question answered by diff: which arcs of the ring change hands. 'moved' is"
echo "# the share of the hash space whose owner changes, then each (FROM, TO) pair's share,"
echo "# and keys_moved: how many of the keys in keys.txt move, of how many."
echo "\$ mcroute diff $POOL $POOL,10.0.0.4:11211 --keys keys.txt"
$M diff "$POOL" "$POOL,10.0.0.4:11211" --keys /tmp/mcroute-demo-keys.$$ | diff_table
echo
echo "# libketama's normalisation also moved keys between the old servers; stable-ketama does not:"
echo "\$ mcroute diff -m stable-ketama $POOL $POOL,10.0.0.4:11211 --keys keys.txt"
$M diff -m stable-ketama "$POOL" "$POOL,10.0.0.4:11211" --keys /tmp/mcroute-demo-keys.$$ | diff_table
echo
echo "# Primary and two replicas per key, in distinct zones where possible:"
printf '10.0.0.1 zone=a\n10.0.0.2 zone=a\n10.0.0.3 weight=2 zone=b\n10.0.0.4 zone=c\n' > /tmp/mcroute-demo-servers.$$
echo "\$ mcroute locate -f servers.txt --replicas 3 user:1 user:2"
$M locate -f /tmp/mcroute-demo-servers.$$ --replicas 3 user:1 user:2 | table KEY PRIMARY REPLICA REPLICA
rm -f /tmp/mcroute-demo-*.$$
echo
echo "# The first points of the continuum (each point's 32-bit value, and the server owning"
echo "# the arc up to it):"
echo "\$ mcroute dump -s $POOL | head -5"
$M dump -s "$POOL" | sed -n 1,5p | table POINT SERVER
echo

# ---------------------------------------------------------------- live servers
# Five memcached servers on 127.0.0.1, on free ports, stopped when the demo
# ends (however it ends).
PIDS=()
trap 'if [ ${#PIDS[@]} -gt 0 ]; then kill "${PIDS[@]}" 2>/dev/null || true; fi' EXIT
MC_USER=()
[ "$(id -u)" -eq 0 ] && MC_USER=(-u root) # memcached refuses to run as root without -u
can_connect() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
start_memcached() { # appends its port to PORTS and its pid to PIDS
  local port pid
  for _ in 1 2 3 4 5 6 7 8 9 10; do
    port=$((20000 + RANDOM % 30000))
    can_connect "$port" && continue # taken
    memcached -l 127.0.0.1 -p "$port" -U 0 -t 1 -m 64 "${MC_USER[@]}" >/dev/null 2>&1 &
    pid=$!
    PIDS+=("$pid")
    for _ in $(seq 50); do
      if can_connect "$port"; then PORTS+=("$port"); return 0; fi
      kill -0 "$pid" 2>/dev/null || break # could not bind: try another port
      sleep 0.1
    done
  done
  echo "demo: could not start memcached" >&2
  exit 1
}
PORTS=()
for _ in 1 2 3 4 5; do start_memcached; done
LIVE="127.0.0.1:${PORTS[0]},127.0.0.1:${PORTS[1]},127.0.0.1:${PORTS[2]},127.0.0.1:${PORTS[3]}"
NEW="127.0.0.1:${PORTS[4]}"
echo "# Five memcached servers started on 127.0.0.1 (ports ${PORTS[*]}), stopped at the end."
echo "# LIVE is the first four, NEW the fifth:"
echo "LIVE=$LIVE"
echo "NEW=$NEW"
echo "# Through the connection pool: 10000 keys stored and read back on LIVE, then NEW added"
echo "# while the pool stays up. pool_demo places keys with stable-ketama, not the default"
echo "# ketama: there a server added takes keys only from the others and none move between"
echo "# two old servers (the diffs above: ketama moved keys between old servers too), so"
echo "# only the keys NEW now owns miss (about 1/5), exactly those the diff predicted:"
echo "\$ examples/pool_demo \$LIVE \$NEW 10000"
"./$build/examples/pool_demo" "$LIVE" "$NEW" 10000
echo
echo "# The same pool from the command line: store, read (a miss prints nothing), delete:"
echo "\$ printf 'user:1\\tAda Lovelace\\nuser:2\\tAlan Turing\\nuser:3\\tGrace Hopper\\n' | mcroute set -s \$LIVE"
printf 'user:1\tAda Lovelace\nuser:2\tAlan Turing\nuser:3\tGrace Hopper\n' | $M set -s "$LIVE"
echo "\$ mcroute get -s \$LIVE user:1 user:2 user:3 user:4"
$M get -s "$LIVE" user:1 user:2 user:3 user:4 | table KEY VALUE
echo "\$ mcroute delete -s \$LIVE user:3 && mcroute get -s \$LIVE user:3"
$M delete -s "$LIVE" user:3 && $M get -s "$LIVE" user:3
echo
# A key written by a client that knew only one server, not its owner.
OWNER=$($M locate -s "$LIVE" user:9 | cut -f2)
for p in "${PORTS[@]:0:4}"; do
  [ "127.0.0.1:$p" != "$OWNER" ] && { STRAY="127.0.0.1:$p"; break; }
done
echo "# probe asks every server: user:2 is where it belongs; user:9 was stored by a client"
echo "# that knew only $STRAY, which does not own it (every client of \$LIVE misses it)."
echo "# OWNER is the server the placement names, HOLDERS those that hold the key:"
echo "\$ printf 'user:9\\tstale\\n' | mcroute set -s $STRAY"
printf 'user:9\tstale\n' | $M set -s "$STRAY"
echo "\$ mcroute probe -s \$LIVE user:2 user:9"
$M probe -s "$LIVE" user:2 user:9 | table KEY OWNER HOLDERS
echo

# ---------------------------------------------------------------- a resize, twice
# 10,000 keys stored on LIVE; the five-server list then read as it is, and
# again after `mcroute migrate` copied the moving keys to NEW.
KEYS_FILE=$(mktemp /tmp/mcroute-demo-keys.XXXXXX)
trap 'if [ ${#PIDS[@]} -gt 0 ]; then kill "${PIDS[@]}" 2>/dev/null || true; fi; rm -f "$KEYS_FILE"' EXIT
seq 10000 | sed 's/^/resize:/' >"$KEYS_FILE"
ALL="$LIVE,$NEW"
echo "# A resize twice, with the same placement (stable-ketama) and 10000 keys of their own"
echo "# stored on LIVE. First without migration: read through the five servers at once,"
echo "# every key NEW now owns is a miss, a database read in production:"
echo "\$ sed 's/\$/\tvalue/' keys | mcroute set -m stable-ketama -s \$LIVE"
sed 's/$/\tvalue/' "$KEYS_FILE" | $M set -m stable-ketama -s "$LIVE"
HITS=$($M get -m stable-ketama -s "$ALL" <"$KEYS_FILE" | wc -l)
echo "\$ mcroute get -m stable-ketama -s \$LIVE,\$NEW < keys | wc -l"
echo "$HITS    # found; $((10000 - HITS)) misses ($(( (10000 - HITS) / 100 )).$(( (10000 - HITS) % 100 / 10 ))%)"
echo "# Then with migration: mcroute migrate lists the keys each old server holds"
echo "# (memcached's lru_crawler metadump), and copies those the change moves to their new"
echo "# owner with their flags and expiry, never over a value already there (the pool"
echo "# demo's keys are on these servers too: those it refilled at NEW count as PRESENT):"
echo "\$ mcroute migrate -m stable-ketama \$LIVE \$LIVE,\$NEW"
$M migrate -m stable-ketama "$LIVE" "$ALL"
HITS2=$($M get -m stable-ketama -s "$ALL" <"$KEYS_FILE" | wc -l)
echo "\$ mcroute get -m stable-ketama -s \$LIVE,\$NEW < keys | wc -l"
echo "$HITS2    # found; $((10000 - HITS2)) misses"
if [ "$HITS2" -ne 10000 ]; then
  echo "demo: $((10000 - HITS2)) keys missed after the migration" >&2
  exit 1
fi
echo "# During a live resize the pools also read through the transition (a miss at the new"
echo "# owner is read at the old one) and write both owners: mcroute get --previous shows it."
echo

# ---------------------------------------------------------------- one membership for a fleet
# One etcd member on 127.0.0.1 (free ports, a temporary data directory),
# stopped with the memcached servers at the end.
ETCD_DIR=$(mktemp -d /tmp/mcroute-demo-etcd.XXXXXX)
trap 'if [ ${#PIDS[@]} -gt 0 ]; then kill "${PIDS[@]}" 2>/dev/null || true; fi; rm -rf "$ETCD_DIR"; rm -f "$KEYS_FILE"' EXIT
start_etcd() { # sets ETCD and appends the pid to PIDS
  local cport pport pid
  for _ in 1 2 3 4 5 6 7 8 9 10; do
    cport=$((20000 + RANDOM % 30000)); pport=$((cport + 1))
    { can_connect "$cport" || can_connect "$pport"; } && continue
    etcd --name demo --data-dir "$ETCD_DIR/data" \
      --listen-client-urls "http://127.0.0.1:$cport" --advertise-client-urls "http://127.0.0.1:$cport" \
      --listen-peer-urls "http://127.0.0.1:$pport" --initial-advertise-peer-urls "http://127.0.0.1:$pport" \
      --initial-cluster "demo=http://127.0.0.1:$pport" >"$ETCD_DIR/etcd.log" 2>&1 &
    pid=$!
    PIDS+=("$pid")
    for _ in $(seq 100); do
      if ETCDCTL_API=3 etcdctl --endpoints "127.0.0.1:$cport" --dial-timeout 1s endpoint health >/dev/null 2>&1; then
        ETCD="http://127.0.0.1:$cport"; return 0
      fi
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.1
    done
    rm -rf "$ETCD_DIR/data"
  done
  echo "demo: could not start etcd (log: $ETCD_DIR/etcd.log)" >&2
  exit 1
}
start_etcd
echo "# One membership for a fleet: the pool kept in etcd ($ETCD), every change one"
echo "# compare-and-swap that makes exactly one new epoch, every process watching it."
echo "\$ mcroute members publish --etcd \$ETCD --pool web -m stable-ketama -s \$LIVE"
$M members publish --etcd "$ETCD" --pool web -m stable-ketama -s "$LIVE"
echo "# Two application processes follow the pool (here two 'mcroute watch'; an"
echo "# application embeds the same follower, see examples/fleet_follow.c). Each prints"
echo "# EPOCH, CHECKSUM and SERVERS for every snapshot it adopts:"
$M watch --etcd "$ETCD" --pool web --count 2 --timeout 60 >"$ETCD_DIR/app1" 2>"$ETCD_DIR/app1.err" &
W1=$!
$M watch --etcd "$ETCD" --pool web --count 2 --timeout 60 >"$ETCD_DIR/app2" 2>"$ETCD_DIR/app2.err" &
W2=$!
for _ in $(seq 300); do # until both have adopted epoch 1 and registered
  [ -s "$ETCD_DIR/app1" ] && [ -s "$ETCD_DIR/app2" ] &&
    [ "$($M members status --etcd "$ETCD" --pool web | grep -v '^#' | cut -f2)" = 2 ] && break
  sleep 0.1
done
echo "\$ mcroute members status --etcd \$ETCD --pool web    # the pool, then EPOCH CLIENTS"
$M members status --etcd "$ETCD" --pool web
echo "\$ mcroute members add --etcd \$ETCD --pool web '$NEW zone=b id=new'"
$M members add --etcd "$ETCD" --pool web "$NEW zone=b id=new"
wait "$W1" "$W2" || { cat "$ETCD_DIR"/app*.err >&2; echo "demo: a watcher failed" >&2; exit 1; }
echo "# Both processes adopted epoch 2, with the same checksum (EPOCH CHECKSUM SERVERS):"
echo "app1:"; cat "$ETCD_DIR/app1"
echo "app2:"; cat "$ETCD_DIR/app2"
cmp -s "$ETCD_DIR/app1" "$ETCD_DIR/app2" || { echo "demo: the two processes disagree" >&2; exit 1; }
echo "\$ mcroute members show --etcd \$ETCD --pool web"
$M members show --etcd "$ETCD" --pool web
echo "\$ mcroute locate --etcd \$ETCD --pool web user:1 user:2 user:3"
$M locate --etcd "$ETCD" --pool web user:1 user:2 user:3 | table KEY SERVER
