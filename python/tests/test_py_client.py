# SPDX-License-Identifier: BSD-3-Clause
"""test_py_client.py: mcroute.Client against real memcached servers: placement as
`mcroute locate` has it (read back from the servers), every call, bad input, a dead
server, fork, threads, a snapshot file followed, and no leak over a million calls."""

import gc
import os
import random
import resource
import socket
import subprocess
import threading
import tracemalloc

import pytest

import mcroute
from conftest import limit, locate, mcroute_bin, wait_until


def random_keys(n, seed):
    """n distinct keys of 1 to 200 bytes: ASCII, non-ASCII UTF-8, and bytes."""
    rnd = random.Random(seed)
    alphabet = "abcdefghijklmnopqrstuvwxyz0123456789:_-.ÄéЖ漢"
    keys = set()
    while len(keys) < n:
        k = "".join(rnd.choice(alphabet) for _ in range(rnd.randint(1, 60)))
        if len(k.encode()) <= 200:
            keys.add(k)
    return sorted(keys)


def holders(mcs, key):
    """The servers (indices) holding `key`, read directly."""
    return [i for i, m in enumerate(mcs) if m.raw_get(key) is not None]


def check_placed(mcs, keys, where):
    """Each key is on the server `where` names and on no other."""
    by_addr = {m.addr: i for i, m in enumerate(mcs)}
    for k in keys:
        assert holders(mcs, k) == [by_addr[where[k]]], "%r: held by %s, placed on %s" % (
            k, holders(mcs, k), where[k])


@pytest.mark.parametrize("placement", [[], ["--client", "php-memcached-ketama"],
                                       ["--mode", "jump"], ["--client", "pylibmc"]])
def test_placement_is_locate(servers, placement):
    mcs = servers(4)
    lst = ",".join(m.addr for m in mcs)
    kw = {}
    if placement:
        kw[placement[0][2:]] = placement[1]
    c = mcroute.Client(servers=[m.addr for m in mcs], **kw)
    keys = random_keys(400, 7)
    for k in keys:
        assert c.set(k, k) is True
    where = locate(["-s", lst] + placement, keys)
    check_placed(mcs, keys, where)
    assert c.locate_many(keys) == [where[k] for k in keys]
    assert c.get_many(keys) == {k: k.encode() for k in keys}


def test_server_file_and_string_list(servers, tmp_path):
    mcs = servers(3)
    f = tmp_path / "servers"
    f.write_text("# three\n" + "\n".join(m.addr for m in mcs) + "\n")
    a = mcroute.Client(server_file=str(f))
    b = mcroute.Client(servers=",".join(m.addr for m in mcs))
    keys = random_keys(100, 3)
    assert a.locate_many(keys) == b.locate_many(keys)
    assert b.servers() == [m.addr for m in mcs]


def test_calls(servers):
    mcs = servers(2)
    c = mcroute.Client(servers=[m.addr for m in mcs])
    assert c.get("k") is None and c.get("k", 5) == 5
    assert c.set("k", "v") is True and c.get("k") == b"v"
    assert c.set(b"b\xc3\xa4", b"\x00\xff") and c.get("bä") == b"\x00\xff"
    assert c.add("k", "x") is False and c.add("k2", "x") is True
    assert c.replace("nokey", "x") is False and c.replace("k2", "y") is True
    assert c.append("k", "!") is True and c.prepend("k", "<") is True
    assert c.get("k") == b"<v!"
    assert c.append("nokey", "x") is False
    v, cas = c.gets("k")
    assert v == b"<v!" and isinstance(cas, int)
    assert c.gets("nokey") == (None, None)
    assert c.cas("k", "new", cas) is True
    assert c.cas("k", "newer", cas) is False
    assert c.cas("nokey", "x", 1) is None
    assert c.get("k") == b"new"
    assert c.set("n", 5) and c.incr("n") == 6 and c.incr("n", 10) == 16
    assert c.decr("n", 100) == 0 and c.incr("nokey") is None and c.decr("nokey") is None
    assert c.touch("k", 100) is True and c.touch("nokey") is False
    assert c.delete("k") is True and c.delete("k") is False
    assert c.set("f", b"x", flags=7)
    assert c.gets_many(["f", "nokey"])["f"][0] == b"x"
    assert c.set_many({"m1": "1", "m2": b"2", "m3": 3}) == []
    assert c.get_many(["m1", "m2", "m3", "nokey"]) == {"m1": b"1", "m2": b"2", "m3": b"3"}
    assert c.get_many([]) == {}
    assert c.delete_many(["m1", "m2"]) is True
    assert c.get_many(["m1", "m2", "m3"]) == {"m3": b"3"}
    stats = c.stats()
    assert sorted(stats) == sorted(m.addr for m in mcs)
    assert all(int(s["pid"]) > 0 for s in stats.values())
    assert c.epoch() == 1
    assert c.flush_all() is True
    wait_until(lambda: c.get("m3") is None, 5, "flush_all empties the servers")
    c.close()
    with pytest.raises(mcroute.Error, match="closed"):
        c.get("k")


def test_serde_and_values(servers):
    mcs = servers(2)
    c = mcroute.Client(servers=[m.addr for m in mcs], serde=mcroute.PickleSerde())
    for k, v in [("d", {"a": [1, 2]}), ("s", "text ä"), ("i", 42), ("b", b"raw"),
                 ("n", None), ("f", 1.5)]:
        assert c.set(k, v) and c.get(k) == v
    plain = mcroute.Client(servers=[m.addr for m in mcs])
    assert plain.get("s") == "text ä".encode()  # stored as UTF-8, flag 16
    with pytest.raises(TypeError, match="serde"):
        plain.set("x", {"no": "serde"})

    class Odd(int):  # an int whose text is no UTF-8: an error, nothing sent
        def __str__(self):
            return "\udcff"
    with pytest.raises(UnicodeEncodeError):
        plain.set("odd", Odd(5))
    assert plain.get("odd") is None
    with pytest.raises(mcroute.ConfigError, match="serde"):
        mcroute.Client(servers=mcs[0].addr, serde=object())


def test_bad_keys_change_nothing(servers):
    mcs = servers(2)
    c = mcroute.Client(servers=[m.addr for m in mcs], max_value_size=1000)
    for bad in ["", "a b", "a\nb", "a\x00", "x" * 251, "\x7f"]:
        with pytest.raises(mcroute.IllegalKeyError):
            c.set(bad, "v")
        with pytest.raises(mcroute.IllegalKeyError):
            c.get(bad)
    with pytest.raises(ValueError):  # IllegalKeyError is a ValueError too
        c.delete("a b")
    with pytest.raises(mcroute.IllegalKeyError, match="nothing was sent"):
        c.set_many({"good1": "1", "bad key": "2", "good2": "3"})
    with pytest.raises(mcroute.IllegalKeyError):
        c.delete_many(["good1", "bad key"])
    with pytest.raises(mcroute.TooBigError):
        c.set("big", b"x" * 1001)
    with pytest.raises(mcroute.TooBigError, match="nothing was sent"):
        c.set_many({"good3": "1", "big": b"x" * 1001})
    with pytest.raises(mcroute.IllegalKeyError):
        c.get_many(["good1", "a b"])
    with pytest.raises(mcroute.IllegalKeyError):
        c.get(42)
    for k in ["good1", "good2", "good3", "big"]:
        assert holders(mcs, k) == []
    assert c.set("x" * 250, "v") and c.get("x" * 250) == b"v"


def test_bad_configuration():
    cases = [
        ({}, "no servers"),
        ({"servers": "127.0.0.1:1", "state": "/x"}, "only one"),
        ({"servers": "127.0.0.1:1", "mode": "nosuch"}, "unknown mode"),
        ({"servers": "127.0.0.1:1", "client": "nosuch"}, "nosuch"),
        ({"servers": "127.0.0.1:1", "client": "pylibmc", "mode": "jump"}, "not both"),
        ({"servers": "127.0.0.1:99999"}, "99999"),
        ({"servers": ["127.0.0.1:1,127.0.0.1:2"]}, "comma"),
        ({"servers": [1]}, "not a string"),
        ({"etcd": "http://127.0.0.1:1"}, "pool"),
        ({"snapshot": "/nonexistent/snap"}, "/nonexistent/snap"),
        ({"state": "/nonexistent/state"}, "/nonexistent/state"),
        ({"servers": "127.0.0.1:1", "timeout": -1}, "timeout"),
        ({"servers": "127.0.0.1:1", "protocol": "binary"}, "protocol"),
        ({"servers": "127.0.0.1:1", "policy": "sometimes"}, "policy"),
        ({"servers": "127.0.0.1:1", "key_prefix": "a b"}, "prefix"),
        ({"servers": "127.0.0.1:1", "hash": "nosuch"}, "hash"),
    ]
    for kw, msg in cases:
        with pytest.raises(mcroute.Error, match=msg):
            mcroute.Client(**kw)
    with pytest.raises(mcroute.ConfigError, match="apply only"):
        mcroute.Client(state="/x", mode="jump")


def test_key_prefix(servers):
    # the prefix goes on the wire; the key is placed without it, as the
    # pool's key_prefix (libmemcached's namespace without HASH_WITH_NAMESPACE)
    mcs = servers(2)
    c = mcroute.Client(servers=[m.addr for m in mcs], key_prefix="app:")
    assert c.set("k", "v") and c.get("k") == b"v"
    owner = [m.addr for m in mcs].index(c.locate("k"))
    assert holders(mcs, "app:k") == [owner] and holders(mcs, "k") == []
    assert c.get_many(["k"]) == {"k": b"v"}


def test_get_many_across_servers(servers):
    """get_many turns each server's values into objects while the others'
    replies come (without a serializer): every key with its own value, over
    4 servers, with misses, duplicates and str and bytes keys; with a
    serializer, the values are made at the end, so its deserialize() may
    call the same client."""
    mcs = servers(4)
    addrs = [m.addr for m in mcs]
    c = mcroute.Client(servers=addrs)
    keys = random_keys(300, 23)
    want = {k: ("value of %s|" % k).encode() * (1 + i % 40) for i, k in enumerate(keys)}
    assert c.set_many(want) == []
    assert len(set(c.locate_many(keys))) == 4
    asked = keys + ["missing:%d" % i for i in range(50)] + keys[:20]
    assert c.get_many(asked) == want
    as_bytes = [k.encode() for k in keys[:30]]
    assert c.get_many(as_bytes) == {k.encode(): want[k] for k in keys[:30]}
    got = c.gets_many(keys)
    assert {k: v for k, (v, _) in got.items()} == want
    assert all(isinstance(cas, int) for _, cas in got.values())

    class Lookup(mcroute.PickleSerde):
        def __init__(self):
            super().__init__()
            self.client = None

        def deserialize(self, key, value, flags):
            self.client.get("side:" + key)  # the same client, inside get_many
            return super().deserialize(key, value, flags)

    serde = Lookup()
    s = mcroute.Client(servers=addrs, serde=serde)
    serde.client = s
    objs = {k: {"n": i, "k": k} for i, k in enumerate(keys[:100])}
    assert s.set_many(objs) == []
    assert s.get_many(keys[:100] + ["missing"]) == objs


def test_dead_server_fails_its_keys_only(servers):
    mcs = servers(3)
    c = mcroute.Client(servers=[m.addr for m in mcs], timeout=1, connect_timeout=1)
    keys = random_keys(200, 11)
    for k in keys:
        c.set(k, "v")
    dead = mcs[1]
    dead.stop()
    owners = dict(zip(keys, c.locate_many(keys)))
    bad = good = 0
    for k in keys:
        if owners[k] == dead.addr:
            with pytest.raises(mcroute.ServerError):
                c.get(k)
            bad += 1
        else:
            assert c.get(k) == b"v"
            good += 1
    assert bad > 0 and good > 0
    with pytest.raises(mcroute.ServerError):
        c.get_many(keys)


def test_fork_child_reconnects(servers):
    mcs = servers(2)
    c = mcroute.Client(servers=[m.addr for m in mcs])
    c.set("before", "parent")
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: its own connections
        status = 1
        try:
            ok = c.get("before") == b"parent" and c.set("child", "yes")
            ok = ok and c.get("child") == b"yes"
            status = 0 if ok else 3
        finally:
            os.write(w, b"%d" % status)
            os._exit(status)
    os.close(w)
    _, st = os.waitpid(pid, 0)
    assert os.read(r, 8) == b"0" and os.WEXITSTATUS(st) == 0
    os.close(r)
    # the parent's connections were left alone
    assert c.get("child") == b"yes" and c.set("after", "1") and c.get("after") == b"1"


def test_threads_each_their_client(servers):
    mcs = servers(3)
    errors = []

    def work(t):
        try:
            c = mcroute.Client(servers=[m.addr for m in mcs])
            for i in range(500):
                k = "t%d:%d" % (t, i)
                assert c.set(k, k) and c.get(k) == k.encode()
            assert len(c.get_many(["t%d:%d" % (t, i) for i in range(500)])) == 500
        except Exception as e:  # noqa: BLE001 (reported below)
            errors.append(repr(e))

    ts = [threading.Thread(target=work, args=(t,)) for t in range(4)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert errors == []


def test_one_client_two_threads_refused():
    # A server that accepts and never answers: the first thread's get waits
    # in the loop (GIL released) until its timeout; the second is refused.
    lsock = socket.socket()
    lsock.bind(("127.0.0.1", 0))
    lsock.listen(8)
    addr = "127.0.0.1:%d" % lsock.getsockname()[1]
    c = mcroute.Client(servers=addr, timeout=limit(3), connect_timeout=limit(3))
    first = []
    t = threading.Thread(target=lambda: first.append(pytest.raises(mcroute.TimeoutError,
                                                                   c.get, "k")))
    t.start()
    conn, _ = lsock.accept()  # the first call is in progress
    try:
        with pytest.raises(mcroute.Error, match="two threads"):
            c.get("k")
    finally:
        t.join()
        conn.close()
        lsock.close()
    assert first


def save_snapshot(lst, path, epoch):
    """A snapshot file of the servers `lst` with `epoch`, written by the CLI."""
    r = subprocess.run([mcroute_bin(), "snapshot", "-s", lst, "--epoch", str(epoch), "-o",
                        path], capture_output=True, text=True, timeout=limit(30))
    assert r.returncode == 0, r.stderr


def test_snapshot_file_followed(servers, tmp_path):
    mcs = servers(4)
    three = ",".join(m.addr for m in mcs[:3])
    four = ",".join(m.addr for m in mcs)
    path = str(tmp_path / "web.snap")
    save_snapshot(three, path, 1)
    c = mcroute.Client(snapshot=path)
    assert c.servers() == [m.addr for m in mcs[:3]] and c.epoch() == 1
    save_snapshot(four, path, 2)  # written atomically by the CLI
    wait_until(lambda: c.epoch() == 2, 5, "the client takes the new snapshot")
    keys = random_keys(300, 5)
    for k in keys:
        c.set(k, k)
    check_placed(mcs, keys, locate(["--snapshot", path], keys))
    # an older epoch, then a bad file: refused with a warning; epoch 2 stays
    for bad in ("old", "garbage"):
        if bad == "old":
            save_snapshot(three, path, 1)
        else:
            with open(path + ".new", "w") as f:
                f.write("not a snapshot\n")
            os.replace(path + ".new", path)
        with pytest.warns(RuntimeWarning, match="not taken") as rec:
            wait_until(lambda: c.get(keys[0]) is not None and len(rec) > 0, 5,
                       "the %s file refused" % bad)
        assert c.epoch() == 2 and len(c.servers()) == 4


def test_no_leak_over_a_million_calls(servers):
    mcs = servers(2)
    c = mcroute.Client(servers=[m.addr for m in mcs], serde=mcroute.PickleSerde())
    keys = ["leak:%d" % i for i in range(100)]
    c.set_many({k: {"v": k} for k in keys})

    def rounds(n):
        for i in range(n):
            k = keys[i % 100]
            c.get(k)
            c.get("missing")
            if i % 50 == 0:
                c.get_many(keys)
                c.set(k, {"v": k})
                c.locate(k)
                try:
                    c.get("bad key")
                except mcroute.IllegalKeyError:
                    pass

    rounds(20000)  # warm up: caches, the allocator's arenas
    gc.collect()
    tracemalloc.start()
    snap0 = tracemalloc.take_snapshot()
    rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    rounds(500000)  # a million gets, 10,000 multi-gets of 100 keys, 10,000 sets
    gc.collect()
    snap1 = tracemalloc.take_snapshot()
    tracemalloc.stop()
    grown = sum(s.size_diff for s in snap1.compare_to(snap0, "filename"))
    rss1 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    assert grown < 64 * 1024, "Python objects grew by %d bytes" % grown
    assert rss1 - rss0 < 8 * 1024, "RSS grew by %d KiB" % (rss1 - rss0)
