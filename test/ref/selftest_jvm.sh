#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# selftest_jvm.sh: the reference programs ref_spy.sh (spymemcached, three clients) and
# ref_dalli.rb (dalli) run under netns.sh on a small generated input; every answer must be
# well formed (one index per key, each within the server list) and a few hand-checkable
# ones exact: one server -> all 0, weight 2 -> an error for spymemcached-arraymod,
# ArrayModNodeLocator = (String.hashCode & 0xffffffff) % N for one-letter keys, equal
# points: the server listed later wins (spymemcached's LIBMEMCACHED labels of a name and
# of its address are the same text; two dalli labels whose SHA-1 prefixes are equal).
# dalli runs with REF_DALLI_VERIFY=1: each answer is also checked by storing the key on
# every server and reading it through Dalli::Client#get.
# Needs root (netns.sh), javac/java, libspymemcached-java, ruby, ruby-dalli, memcached.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d "${TMPDIR:-/tmp}/selftest_jvm.XXXXXX")
trap 'rm -rf "$work"' EXIT INT TERM
pass=0
fail=0
ok() { pass=$((pass + 1)); echo "ok - $1"; }
bad() { fail=$((fail + 1)); echo "FAIL - $1"; }

cat > "$work/hosts" <<'EOF'
127.0.0.1 localhost
127.0.3.7 mc-a.test
127.0.3.8 mc-b.test
127.0.3.9 mc-c.test
127.0.4.1 rev-a.test
127.0.6.89 d102.test
127.0.6.104 d1374.test
EOF

long=$(awk 'BEGIN { for (i = 0; i < 125; i++) printf "c3a9"; }')  # 250 bytes: "é" x 125
long_ascii=$(awk 'BEGIN { for (i = 0; i < 250; i++) printf "7a"; }')
keys6="61
62
63
e282ac
$long
$long_ascii"
# config ID, then "HOST PORT WEIGHT" lines; keys6 as the keys
config() {
    id=$1
    shift
    echo "config $id $#"
    for s in "$@"; do echo "server $s"; done
    echo "keys 6"
    echo "$keys6"
}
{
    config one "mc-a.test 11211 1"
    config oneip "127.0.3.9 20000 1"
    config three "mc-a.test 11211 1" "127.0.3.8 11211 1" "rev-a.test 11300 1"
    config mixed "mc-a.test 11211 1" "mc-b.test 11212 1" "127.0.3.9 11211 1" "127.0.4.1 11211 1" \
        "127.0.5.1 11211 1" "127.0.5.2 20001 1" "mc-c.test 20002 1" "127.0.5.3 11211 1" \
        "127.0.5.4 11211 1" "127.0.5.5 11211 1" "127.0.5.6 11211 1" "127.0.5.7 11211 1" "127.0.5.8 11213 1"
    config weighted "mc-a.test 11211 1" "mc-b.test 11211 2"
} > "$work/in"
# equal labels under LIBMEMCACHED (name and its address, both port 11211), both orders
{
    config tie_ab "mc-a.test 11211 1" "127.0.3.7 11211 1"
    config tie_ba "127.0.3.7 11211 1" "mc-a.test 11211 1"
} > "$work/in_spytie"
# dalli: d102.test:11211:93 and d1374.test:11211:157 have the same point 0xebeee5f5; the
# keys' CRC32 lies between it and the next point
dtie="746965373436
74696532363536"
{
    printf 'config dtie_ab 2\nserver d102.test 11211 1\nserver d1374.test 11211 1\nkeys 2\n%s\n' "$dtie"
    printf 'config dtie_ba 2\nserver d1374.test 11211 1\nserver d102.test 11211 1\nkeys 2\n%s\n' "$dtie"
} > "$work/in_dtie"

# check_shape INPUT OUTPUT: one line per config, "config ID ok I..." with M indexes < N, or error
check_shape() {
    awk -v out="$2" '
        $1 == "config" { id[++c] = $2; n[c] = $3 }
        $1 == "keys" { m[c] = $2 }
        END {
            bad = 0
            while ((getline line < out) > 0) {
                k++
                split(line, f, " ")
                if (f[1] != "config" || f[2] != id[k]) { print "line " k ": " line; bad = 1; continue }
                if (f[3] == "error") continue
                if (f[3] != "ok") { print "line " k ": " line; bad = 1; continue }
                cnt = split(line, g, " ") - 3
                if (cnt != m[k]) { print id[k] ": " cnt " indexes, want " m[k]; bad = 1 }
                for (i = 4; i <= cnt + 3; i++)
                    if (g[i] !~ /^[0-9]+$/ || g[i] + 0 >= n[k]) { print id[k] ": index " g[i]; bad = 1 }
            }
            if (k != c) { print k " lines for " c " configs"; bad = 1 }
            exit bad
        }' "$1"
}
# expect OUTPUT ID TEXT: the line of config ID is exactly "config ID TEXT"
expect() {
    if grep -qx "config $2 $3" "$1"; then ok "$4"; else bad "$4: got $(grep "^config $2 " "$1" || echo nothing)"; fi
}
run() { # NAME INPUT PROGRAM...
    name=$1
    input=$2
    shift 2
    if sh "$here/netns.sh" "$work/hosts" "$@" < "$input" > "$work/out.$name" 2> "$work/err.$name"; then
        ok "$name: exit 0"
    else
        bad "$name: exit status $? ($(head -c 300 "$work/err.$name"))"
    fi
    if check_shape "$input" "$work/out.$name" > "$work/shape.$name"; then
        ok "$name: well formed"
    else
        bad "$name: malformed output: $(head -c 300 "$work/shape.$name")"
    fi
}

for c in spymemcached spymemcached-libmemcached spymemcached-arraymod; do
    run "$c" "$work/in" sh "$here/ref_spy.sh" "$c"
    o=$work/out.$c
    expect "$o" one "ok 0 0 0 0 0 0" "$c: one server (name): all 0"
    expect "$o" oneip "ok 0 0 0 0 0 0" "$c: one server (address, port 20000): all 0"
done
grep -q '^config weighted ok ' "$work/out.spymemcached" && ok "spymemcached: weights accepted" ||
    bad "spymemcached: weights refused"
expect "$work/out.spymemcached-arraymod" weighted "error spymemcached-arraymod has no weights" \
    "spymemcached-arraymod: weight 2 is an error"
# "a" 97, "b" 98, "c" 99, "€" 8364: (hashCode & 0xffffffff) % 3
grep -q '^config three ok 1 2 0 0 ' "$work/out.spymemcached-arraymod" && ok "spymemcached-arraymod: hashCode % 3" ||
    bad "spymemcached-arraymod: hashCode % 3: $(grep '^config three' "$work/out.spymemcached-arraymod")"
run spytie "$work/in_spytie" sh "$here/ref_spy.sh" spymemcached-libmemcached
expect "$work/out.spytie" tie_ab "ok 1 1 1 1 1 1" "spymemcached-libmemcached: equal labels, later server wins (ab)"
expect "$work/out.spytie" tie_ba "ok 1 1 1 1 1 1" "spymemcached-libmemcached: equal labels, later server wins (ba)"
run spytie-spy "$work/in_spytie" sh "$here/ref_spy.sh" spymemcached
if grep -q '^config tie_ab ok .*0' "$work/out.spytie-spy"; then
    ok "spymemcached: name and address labels differ (both servers get keys)"
else
    bad "spymemcached: tie_ab $(cat "$work/out.spytie-spy")"
fi

run dalli "$work/in" env REF_DALLI_VERIFY=1 ruby "$here/ref_dalli.rb" dalli
expect "$work/out.dalli" one "ok 0 0 0 0 0 0" "dalli: one server: all 0"
expect "$work/out.dalli" oneip "ok 0 0 0 0 0 0" "dalli: one server (address): all 0"
grep -q '^config weighted ok ' "$work/out.dalli" && ok "dalli: weights accepted" || bad "dalli: weights refused"
run dalli-tie "$work/in_dtie" env REF_DALLI_VERIFY=1 ruby "$here/ref_dalli.rb" dalli
expect "$work/out.dalli-tie" dtie_ab "ok 1 1" "dalli: equal points, later server wins (ab)"
expect "$work/out.dalli-tie" dtie_ba "ok 1 1" "dalli: equal points, later server wins (ba)"

# refusals: an unknown client and a malformed input exit non-zero
for p in "sh $here/ref_spy.sh" "ruby $here/ref_dalli.rb"; do
    if echo "" | sh "$here/netns.sh" "$work/hosts" $p nosuchclient > /dev/null 2>&1; then
        bad "$p: unknown client accepted"
    else
        ok "$p: unknown client refused"
    fi
done
printf 'config x 1\nserver mc-a.test 11211 1\nkeys 1\nzz\n' > "$work/in_bad"
if sh "$here/netns.sh" "$work/hosts" sh "$here/ref_spy.sh" spymemcached < "$work/in_bad" > /dev/null 2>&1; then
    bad "ref_spy.sh: malformed input accepted"
else
    ok "ref_spy.sh: malformed input refused"
fi
if sh "$here/netns.sh" "$work/hosts" ruby "$here/ref_dalli.rb" dalli < "$work/in_bad" > /dev/null 2>&1; then
    bad "ref_dalli.rb: malformed input accepted"
else
    ok "ref_dalli.rb: malformed input refused"
fi

echo "selftest_jvm: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
