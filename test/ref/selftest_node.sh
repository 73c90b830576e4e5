#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# selftest_node.sh: check ref_node.js (node-memcached, memjs) and ref_php.php
# (php-memcached, php-memcached-ketama, php-memcache) under netns.sh: well-formed
# answers for a few generated configs, exact answers for hand-checkable ones.
#
# Usage (as root): sh test/ref/selftest_node.sh    Exit 0 when every check passed.
# Runs `npm ci` in test/ref first when test/ref/node_modules lacks a package.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/selftest_node.XXXXXX")
trap 'rm -rf "$tmp"' EXIT INT TERM

for pkg in memcached memjs hashring; do
    if [ ! -f "$here/node_modules/$pkg/package.json" ]; then
        (cd "$here" && npm ci --no-audit --no-fund >&2)
        break
    fi
done

hex() { printf %s "$1" | od -An -v -tx1 | tr -d ' \n'; echo; }

cat > "$tmp/hosts" <<'EOF'
127.0.0.1 localhost
127.0.3.7 mc-a.test
127.0.3.8 mc-b.test
127.0.4.1 mc-c.test
EOF

# A 250-byte key of non-ASCII characters: 125 x U+00E9 (2 bytes each).
long=$(i=0; while [ $i -lt 125 ]; do printf 'c3a9'; i=$((i+1)); done)

# The general input (weights 1 only, every client takes it), with its
# expected answer count per config in $tmp/counts ("ID M N").
{
    echo "config one 1"
    echo "server mc-a.test 11211 1"
    echo "keys 4"
    hex foo; hex "h€llo"; hex "日本😀"; echo "$long"
    echo "config three 3"
    echo "server mc-a.test 11211 1"
    echo "server 127.0.0.5 11212 1"
    echo "server mc-b.test 20000 1"
    echo "keys 6"
    hex foo; hex bar; hex baz; hex "ß~x"; hex constructor; echo "$long"
    echo "config fifty 50"
    i=0; while [ $i -lt 50 ]; do
        if [ $((i % 2)) -eq 0 ]; then echo "server 127.0.9.$((i + 1)) 11211 1"; else echo "server mc-c.test $((30000 + i)) 1"; fi
        i=$((i + 1))
    done
    echo "keys 100"
    i=0; while [ $i -lt 100 ]; do hex "key:$i:ü"; i=$((i + 1)); done
    echo "config empty 2"
    echo "server mc-a.test 11211 1"
    echo "server mc-b.test 11211 1"
    echo "keys 0"
} > "$tmp/in"
printf '%s\n' "one 4 1" "three 6 3" "fifty 100 50" "empty 0 2" > "$tmp/counts"

# Weighted configs (only the clients with weights take them).
{
    echo "config w 3"
    echo "server mc-a.test 11211 3"
    echo "server 127.0.0.5 11212 1"
    echo "server mc-b.test 11213 2"
    echo "keys 50"
    i=0; while [ $i -lt 50 ]; do hex "w$i"; i=$((i + 1)); done
    echo "config w1 1"
    echo "server mc-a.test 11211 5"
    echo "keys 3"
    hex a; hex b; hex "é"
} > "$tmp/inw"
printf '%s\n' "w 50 3" "w1 3 1" > "$tmp/countsw"

fail=0
pass=0
ok() { pass=$((pass + 1)); }
bad() { echo "FAIL: $*" >&2; fail=$((fail + 1)); }

run() {    # run CLIENT INPUT OUTPUT
    case $1 in
        node-memcached|memjs) prog="node $here/ref_node.js" ;;
        *) prog="php $here/ref_php.php" ;;
    esac
    # shellcheck disable=SC2086
    sh "$here/netns.sh" "$tmp/hosts" $prog "$1" < "$2" > "$3"
}

# check CLIENT OUTPUT COUNTS: each config answered ok, in order, with M
# indexes each in 0..N-1; a 1-server config answers all 0.
check() {
    if awk -v client="$1" -v counts="$3" '
        BEGIN { while ((getline l < counts) > 0) { split(l, f, " "); id[++n] = f[1]; m[n] = f[2]; s[n] = f[3] } }
        {
            k++
            if ($1 != "config" || $2 != id[k] || $3 != "ok") { print client ": line " k ": " $0; bad = 1; next }
            if (NF - 3 != m[k]) { print client ": config " id[k] ": " NF - 3 " indexes, expected " m[k]; bad = 1 }
            for (i = 4; i <= NF; i++) {
                if ($i !~ /^[0-9]+$/ || $i + 0 >= s[k] || (s[k] == 1 && $i != 0)) {
                    print client ": config " id[k] ": index " $i " out of range"; bad = 1; break
                }
            }
        }
        END { if (k != n) { print client ": " k " lines, expected " n; bad = 1 } exit bad }
    ' "$2" >&2; then ok; else bad "$1: malformed answers (above)"; fi
}

for client in node-memcached memjs php-memcached php-memcached-ketama php-memcache; do
    if run "$client" "$tmp/in" "$tmp/out.$client"; then
        check "$client" "$tmp/out.$client" "$tmp/counts"
    else
        bad "$client: exit status $? on a valid input"
    fi
    case $client in
        memjs) ;;
        *)
            if run "$client" "$tmp/inw" "$tmp/outw.$client"; then
                check "$client" "$tmp/outw.$client" "$tmp/countsw"
            else
                bad "$client: exit status $? on a weighted input"
            fi ;;
    esac
    # Unknown client and malformed input: non-zero exit, nothing on stdout.
    case $client in
        node-memcached|memjs) prog="node $here/ref_node.js" ;;
        *) prog="php $here/ref_php.php" ;;
    esac
    printf 'config x 1\nserver mc-a.test 11211 1\nkeys 1\nzz\n' > "$tmp/malformed"
    # shellcheck disable=SC2086
    if $prog "$client" < "$tmp/malformed" > "$tmp/o" 2>/dev/null || [ -s "$tmp/o" ]; then
        bad "$client: a malformed key was accepted"
    else ok; fi
done
for prog in "node $here/ref_node.js" "php $here/ref_php.php"; do
    # shellcheck disable=SC2086
    if $prog no-such-client < /dev/null > /dev/null 2>&1; then bad "$prog: unknown client accepted"; else ok; fi
done

# memjs: no weights -> error for that config only; String.hashCode("a") = 97,
# ("b") = 98, ("é") = 233: with 2 servers 1, 0, 1.
printf '%s\n' "config w 2" "server mc-a.test 11211 2" "server mc-b.test 11211 1" "keys 1" "$(hex a)" \
    "config h 2" "server mc-a.test 11211 1" "server mc-b.test 11211 1" "keys 3" "$(hex a)" "$(hex b)" "$(hex é)" \
    > "$tmp/memjs"
run memjs "$tmp/memjs" "$tmp/out.memjs2" || bad "memjs: exit status $?"
if [ "$(sed -n 1p "$tmp/out.memjs2" | cut -d' ' -f1-3)" = "config w error" ] &&
   [ "$(sed -n 2p "$tmp/out.memjs2")" = "config h ok 1 0 1" ]; then ok; else
    bad "memjs: expected 'config w error ...' and 'config h ok 1 0 1', got: $(cat "$tmp/out.memjs2")"
fi

# node-memcached: an array spec (all weights 1) and the same servers as an
# object build the same ring; with all weights 2 the object spec gives the
# same answers as with weights 1 (only the ratios count).
sed 's/ 11213 2$/ 11213 1/; s/ 11211 3$/ 11211 1/' "$tmp/inw" | sed -n '1,/^config w1/p' | sed '$d' > "$tmp/w1"
sed '/^server /s/ 1$/ 2/' "$tmp/w1" > "$tmp/w2"
run node-memcached "$tmp/w1" "$tmp/o1" && run node-memcached "$tmp/w2" "$tmp/o2" || bad "node-memcached: exit status $?"
if cmp -s "$tmp/o1" "$tmp/o2"; then ok; else bad "node-memcached: weights 1 and 2 differ"; fi
(cd "$here" && node -e '
const M = require("memcached");
const a = new M(["mc-a.test:11211", "127.0.0.5:11212", "mc-b.test:11213"]);
const o = new M({"mc-a.test:11211": 1, "127.0.0.5:11212": 1, "mc-b.test:11213": 1});
process.exit(JSON.stringify(a.HashRing.ring) === JSON.stringify(o.HashRing.ring) ? 0 : 1);
') && ok || bad "node-memcached: array and object specs build different rings"

# node-memcached: "constructor" placed by the ring, not by a cache polluted
# by an earlier config (the cache of hashring is a plain object).
printf '%s\n' "config p 3" "server h1 1 1" "server h2 2 1" "server h3 3 1" "keys 1" "$(hex constructor)" \
    "config q 2" "server x1 1 1" "server x2 2 1" "keys 1" "$(hex constructor)" > "$tmp/proto"
run node-memcached "$tmp/proto" "$tmp/out.proto" || bad "node-memcached: exit status $?"
want=$(cd "$here" && node -e '
const M = require("memcached");
console.log(new M(["x1:1", "x2:2"]).HashRing.range("constructor", 1)[0] === "x1:1" ? 0 : 1);')
if [ "$(sed -n 2p "$tmp/out.proto")" = "config q ok $want" ]; then ok; else
    bad "node-memcached: constructor: got '$(sed -n 2p "$tmp/out.proto")', expected 'config q ok $want'"
fi

# php-memcached (MODULA) does not use weights: weights 3,1,2 answer as 1,1,1.
sed '/^server /s/ [0-9]*$/ 1/' "$tmp/inw" > "$tmp/inw1"
run php-memcached "$tmp/inw1" "$tmp/o3" || bad "php-memcached: exit status $?"
if cmp -s "$tmp/outw.php-memcached" "$tmp/o3"; then ok; else bad "php-memcached: weights changed MODULA's answers"; fi
# ... while the ketama continuum and php-memcache do use them.
for client in php-memcached-ketama php-memcache; do
    run "$client" "$tmp/inw1" "$tmp/o4" || bad "$client: exit status $?"
    if cmp -s "$tmp/outw.$client" "$tmp/o4"; then bad "$client: weights made no difference"; else ok; fi
done

echo "selftest_node: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
