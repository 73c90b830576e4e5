#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# selftest_ng.sh: runs ref_nginx.py (nginx, nginx-consistent) and ref_gomemcache.sh (gomemcache) under netns.sh on a few configs and checks the answers' form, the hand-checkable ones exactly, and that no nginx is left.
#
# Usage (as root): sh test/ref/selftest_ng.sh     exit status 0 when every check passes
set -eu
here=$(cd "$(dirname "$0")" && pwd)
py=/usr/bin/python3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir "$tmp/nginx-tmp"

# names on 127.0.9.x, literals on 127.0.10.x
$py - "$tmp" <<'EOF'
import random, sys
d = sys.argv[1]
with open(d + "/hosts", "w") as f:
    f.write("127.0.0.1 localhost\n")
    for i in range(1, 21):
        f.write("127.0.9.%d ng-%d.test\n" % (i, i))
r = random.Random(22)
keys = ["k", "b" * 250, "\u00e9" * 125, "\U0001f600" * 62, "\u043a\u043b\u044e\u0447",
        "\u4e2d\u6587", "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~"]
keys += ["key:%d:%s" % (i, "y" * r.randint(0, 80)) for i in range(60)]
hexkeys = [k.encode().hex() for k in keys]
def config(f, cid, servers):
    f.write("config %s %d\n" % (cid, len(servers)))
    f.write("".join("server %s %d %d\n" % s for s in servers))
    f.write("keys %d\n" % len(hexkeys) + "".join(k + "\n" for k in hexkeys))
names = [("ng-%d.test" % i, 11211 if i % 2 else 20000 + i, 1) for i in range(1, 6)]
# the same five servers, written as their IPv4 literals
literals = [("127.0.9.%d" % i, p, w) for i, (_, p, w) in enumerate(names, 1)]
fifty = [("ng-%d.test" % i, 11211, 1) for i in range(1, 21)] + \
        [("127.0.10.%d" % i, 30000 + i, 1) for i in range(1, 31)]
for weighted in (0, 1):
    with open(d + "/in%d" % weighted, "w") as f:
        config(f, "one", [("ng-1.test", 11211, 1)])
        config(f, "one-literal", [("127.0.10.9", 22122, 1)])
        config(f, "five", names)
        config(f, "five-literal", literals)
        config(f, "fifty", fifty)
        if weighted:
            config(f, "weights", [(h, p, 1 + i % 4) for i, (h, p, _) in enumerate(names)])
            config(f, "weights-literal", [(h, p, 1 + i % 4) for i, (h, p, _) in enumerate(literals)])
        else:
            config(f, "weight2", names[:4] + [(names[4][0], names[4][1], 2)])
        config(f, "five-again", names)
EOF

check() { # CLIENT INPUT OUTPUT
    $py - "$@" <<'EOF'
import sys
client, inp, outp = sys.argv[1:]
lines = open(inp).read().split("\n")
configs, i = [], 0
while i < len(lines) and lines[i]:
    cid, n = lines[i].split()[1], int(lines[i].split()[2])
    m = int(lines[i + 1 + n].split()[1])
    configs.append((cid, n, m))
    i += 2 + n + m
text = open(outp).read()
assert text.endswith("\n"), "output does not end with a newline"
out = text[:-1].split("\n")
assert len(out) == len(configs), "%d answers for %d configs" % (len(out), len(configs))
got = {}
for (cid, n, m), line in zip(configs, out):
    f = line.split()
    assert f[:2] == ["config", cid], "expected config %s, got %r" % (cid, line[:60])
    if cid == "weight2":  # gomemcache has no weights
        assert f[2] == "error" and len(f) > 3, "weight 2 not refused: %r" % line[:80]
        continue
    assert f[2] == "ok", "config %s: %r" % (cid, line[:100])
    idx = [int(x) for x in f[3:]]
    assert len(idx) == m, "config %s: %d indexes for %d keys" % (cid, len(idx), m)
    assert all(0 <= x < n for x in idx), "config %s: index out of range" % cid
    if cid.startswith("one"):
        assert set(idx) == {0}, "config %s: one server, yet %r" % (cid, sorted(set(idx)))
    else:
        assert len(set(idx)) > 1, "config %s: every key on one server" % cid
    got[cid] = idx
assert got["five"] == got["five-again"], "the same config answered twice differently"
# exact relations: gomemcache (crc32 % N) and nginx's plain hash (weights only) never
# look at how a server is written; nginx consistent hashes the server text, so a
# name and its IPv4 literal place keys differently
pairs = [("five", "five-literal")] + ([("weights", "weights-literal")] if "weights" in got else [])
for a, b in pairs:
    if client == "nginx-consistent":
        assert got[a] != got[b], "%s and %s agree though the texts differ" % (a, b)
    else:
        assert got[a] == got[b], "%s and %s differ though only the texts do" % (a, b)
if "weights" in got:
    assert got["weights"] != got["five"], "weights changed nothing"
print("ok %s: %d configs, %d keys" % (client, len(configs), sum(m for _, _, m in configs)))
EOF
}

fail=0
for client in nginx nginx-consistent gomemcache; do
    case $client in
        gomemcache) in=$tmp/in0; set -- sh "$here/ref_gomemcache.sh" ;;
        *) in=$tmp/in1; set -- env TMPDIR="$tmp/nginx-tmp" $py "$here/ref_nginx.py" ;;
    esac
    if ! sh "$here/netns.sh" "$tmp/hosts" "$@" "$client" <"$in" >"$tmp/out" 2>"$tmp/err"; then
        echo "FAIL $client: exit status non-zero: $(cat "$tmp/err")"
        fail=1
        continue
    fi
    if ! check "$client" "$in" "$tmp/out"; then
        echo "FAIL $client: $(head -n 3 "$tmp/out" | cut -c1-100)"
        fail=1
    fi
    # unknown client, malformed key: refused with a non-zero status
    if sh "$here/netns.sh" "$tmp/hosts" "$@" nosuch </dev/null 2>/dev/null; then
        echo "FAIL: $1 accepted an unknown client"
        fail=1
    fi
    if printf 'config x 1\nserver ng-1.test 11211 1\nkeys 1\nzz\n' |
            sh "$here/netns.sh" "$tmp/hosts" "$@" "$client" >/dev/null 2>&1; then
        echo "FAIL $client: a malformed key was accepted"
        fail=1
    fi
done

# ref_nginx.py's nginx processes were all stopped and its temp dirs removed
if ps -eo args | grep -F -- "$tmp/nginx-tmp/" | grep -v grep >/dev/null; then
    echo "FAIL: nginx processes left running"
    fail=1
fi
if [ -n "$(ls -A "$tmp/nginx-tmp")" ]; then
    echo "FAIL: ref_nginx.py left $(ls "$tmp/nginx-tmp") in its TMPDIR"
    fail=1
fi
[ $fail -eq 0 ] && echo "selftest_ng: all checks pass"
exit $fail
