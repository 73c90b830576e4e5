#!/usr/bin/env bash
# demo.sh: install what is missing, build mcroute, and show where keys go and how a resize moves them.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/deps.sh
cmake -S . -B build-plain -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build-plain -j"$(nproc 2>/dev/null || echo 2)" >/dev/null
M=./build-plain/mcroute

POOL="10.0.0.1:11211,10.0.0.2:11211,10.0.0.3:11211:2"
echo "\$ mcroute locate -s $POOL user:1 user:2 user:3 session:9 cart:77"
$M locate -s "$POOL" user:1 user:2 user:3 session:9 cart:77
echo
echo "# The same keys under libmemcached's weighted ketama, configured as a PHP or C client would:"
OPTS="--SERVER=10.0.0.1:11211 --SERVER=10.0.0.2:11211 --SERVER=10.0.0.3:11211/?2"
echo "\$ mcroute locate --libmemcached '$OPTS' --behavior KETAMA_WEIGHTED=1 user:1 user:2 user:3 session:9 cart:77"
$M locate --libmemcached "$OPTS" --behavior KETAMA_WEIGHTED=1 user:1 user:2 user:3 session:9 cart:77
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
echo "# The same question answered by diff: which arcs of the ring change hands"
echo "\$ mcroute diff $POOL $POOL,10.0.0.4:11211 --keys keys.txt"
$M diff "$POOL" "$POOL,10.0.0.4:11211" --keys /tmp/mcroute-demo-keys.$$
echo
echo "# libketama's normalisation also moved keys between the old servers; stable-ketama does not:"
echo "\$ mcroute diff -m stable-ketama $POOL $POOL,10.0.0.4:11211 --keys keys.txt"
$M diff -m stable-ketama "$POOL" "$POOL,10.0.0.4:11211" --keys /tmp/mcroute-demo-keys.$$
echo
echo "# Primary and two replicas per key, in distinct zones where possible:"
printf '10.0.0.1 zone=a\n10.0.0.2 zone=a\n10.0.0.3 weight=2 zone=b\n10.0.0.4 zone=c\n' > /tmp/mcroute-demo-servers.$$
echo "\$ mcroute locate -f servers.txt --replicas 3 user:1 user:2"
$M locate -f /tmp/mcroute-demo-servers.$$ --replicas 3 user:1 user:2
rm -f /tmp/mcroute-demo-*.$$
echo
echo "# The first points of the continuum:"
echo "\$ mcroute dump -s $POOL | head -5"
$M dump -s "$POOL" | sed -n 1,5p
