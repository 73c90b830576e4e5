#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# selftest_py.sh: runs ref_python.py for each of its clients under netns.sh on a few configs and checks the answers' form, the hand-checkable ones exactly, and that no memcached is left.
#
# Usage (as root): sh test/ref/selftest_py.sh     exit status 0 when every check passes
set -eu
here=$(cd "$(dirname "$0")" && pwd)
py=/usr/bin/python3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# names on 127.0.7.x, literals on 127.0.8.x: addresses of this test only
$py - "$tmp" <<'EOF'
import random, sys
d = sys.argv[1]
with open(d + "/hosts", "w") as f:
    f.write("127.0.0.1 localhost\n")
    for i in range(1, 21):
        f.write("127.0.7.%d st-%d.test\n" % (i, i))
r = random.Random(15)
# a key of 250 bytes, non-ASCII keys of every UTF-8 length, ASCII ones
keys = ["k", "a" * 250, "é" * 125, "ключ", "中文字", "😀𝄞x", "~!@#$%^&*()_+{}|:<>?"]
keys += ["key-%d-%s" % (i, "x" * r.randint(0, 60)) for i in range(30)]
hexkeys = [k.encode().hex() for k in keys]
def config(cid, servers, f):
    f.write("config %s %d\n" % (cid, len(servers)))
    for h, p, w in servers:
        f.write("server %s %d %d\n" % (h, p, w))
    f.write("keys %d\n" % len(hexkeys))
    f.write("".join(k + "\n" for k in hexkeys))
five = [("st-1.test", 11211, 1), ("127.0.8.2", 11211, 1), ("st-3.test", 20001, 1),
        ("127.0.8.4", 31000, 1), ("st-5.test", 11212, 1)]
many = [("st-%d.test" % i, 11211, 1) for i in range(1, 21)] + \
       [("127.0.8.%d" % i, 20000 + i, 1) for i in range(1, 31)]
for weighted in (0, 1):
    with open(d + "/in%d" % weighted, "w") as f:
        config("one", [("st-1.test", 11211, 1)], f)                 # all 0
        config("one-literal", [("127.0.8.9", 22122, 1)], f)         # all 0
        config("five", five, f)
        config("fifty", many, f)
        if weighted:
            config("weights", [(h, p, 1 + i % 4) for i, (h, p, _) in enumerate(five)], f)
        else:
            config("weight2", five[:4] + [("st-5.test", 11212, 2)], f)  # refused
        config("five-again", five, f)                                 # same as "five"
EOF

fail=0
for client in pymemcache python-memcached pylibmc pylibmc-ketama; do
    case $client in pymemcache) in=$tmp/in0 ;; *) in=$tmp/in1 ;; esac
    if ! sh "$here/netns.sh" "$tmp/hosts" $py "$here/ref_python.py" "$client" \
            <"$in" >"$tmp/out" 2>"$tmp/err"; then
        echo "FAIL $client: exit status non-zero: $(cat "$tmp/err")"
        fail=1
        continue
    fi
    if ! $py - "$client" "$in" "$tmp/out" <<'EOF'
import sys
client, inp, outp = sys.argv[1:]
lines = open(inp).read().split("\n")
configs, i = [], 0
while i < len(lines) and lines[i]:
    cid, n = lines[i].split()[1], int(lines[i].split()[2])
    m = int(lines[i + 1 + n].split()[1])
    configs.append((cid, n, m))
    i += 2 + n + m
out = open(outp).read().split("\n")
assert out[-1] == "", "output does not end with a newline"
out = out[:-1]
assert len(out) == len(configs), "%d answers for %d configs" % (len(out), len(configs))
got = {}
for (cid, n, m), line in zip(configs, out):
    f = line.split()
    assert f[:2] == ["config", cid], "expected config %s, got %r" % (cid, line[:60])
    if cid == "weight2":
        assert f[2] == "error" and len(f) > 3, "weight 2 not refused: %r" % line[:60]
        continue
    assert f[2] == "ok", "config %s: %r" % (cid, line[:80])
    idx = [int(x) for x in f[3:]]
    assert len(idx) == m, "config %s: %d indexes for %d keys" % (cid, len(idx), m)
    assert all(0 <= x < n for x in idx), "config %s: index out of range" % cid
    if cid.startswith("one"):
        assert set(idx) == {0}, "config %s: one server, yet %r" % (cid, sorted(set(idx)))
    if n > 1:
        assert len(set(idx)) > 1, "config %s: every key on one server" % cid
    got[cid] = idx
assert got["five"] == got["five-again"], "the same config answered twice differently"
print("ok %s: %d configs, %d keys" % (client, len(configs), sum(m for _, _, m in configs)))
EOF
    then
        echo "FAIL $client: $(head -n 3 "$tmp/out" | cut -c1-100)"
        fail=1
    fi
done

# an unknown client and a malformed input are refused with a non-zero status
if sh "$here/netns.sh" "$tmp/hosts" $py "$here/ref_python.py" nosuch </dev/null 2>/dev/null; then
    echo "FAIL: an unknown client was accepted"
    fail=1
fi
if printf 'config x 1\nserver st-1.test 11211 1\nkeys 1\nzz\n' |
        sh "$here/netns.sh" "$tmp/hosts" $py "$here/ref_python.py" pylibmc >/dev/null 2>&1; then
    echo "FAIL: a malformed key was accepted"
    fail=1
fi
# every memcached of the live clients was stopped (addresses only this test uses)
if ps -eo args | grep -E '[m]emcached .*127\.0\.8\.(9:22122|4:31000)' >/dev/null; then
    echo "FAIL: memcached processes left running"
    fail=1
fi
[ $fail -eq 0 ] && echo "selftest_py: all checks pass"
exit $fail
