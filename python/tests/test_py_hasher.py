# SPDX-License-Identifier: BSD-3-Clause
"""test_py_hasher.py: pymemcache placing keys by mcroute.pymemcache, checked on real memcached."""

import os
import random
import subprocess

import pytest
from pymemcache.client.hash import HashClient as PymemcacheHashClient
from pymemcache.exceptions import MemcacheError

import mcroute
from conftest import limit, locate, mcroute_bin, wait_until
from mcroute.pymemcache import HashClient, OwnerUnavailable, hasher

# pymemcache's keywords for every client of the suite: non-ASCII keys, and
# sets that wait for STORED, so that a direct read right after sees them.
PM = {"allow_unicode_keys": True, "default_noreply": False}

ASCII = [chr(c) for c in range(0x21, 0x7f)]  # no space, no control byte
WIDE = "éßøñжщλπ中文字😀🚀"                  # 2, 3 and 4 bytes in UTF-8


@pytest.fixture
def rng():
    """A random generator; its seed is printed (pytest shows it when a test
    fails) and MCR_TEST_SEED replays it."""
    seed = int(os.environ.get("MCR_TEST_SEED") or random.SystemRandom().randrange(1 << 32))
    print("MCR_TEST_SEED=%d" % seed)
    return random.Random(seed)


def make_key(rng):
    """A str key of 1 to 200 UTF-8 bytes; about a third hold non-ASCII."""
    target = rng.randint(1, 200)
    wide = rng.random() < 0.35
    out, size = [], 0
    while True:
        ch = rng.choice(WIDE) if wide and rng.random() < 0.5 else rng.choice(ASCII)
        if size + len(ch.encode()) > target:
            break
        out.append(ch)
        size += len(ch.encode())
    return "".join(out) or rng.choice(ASCII)


def make_keys(rng, n=500):
    keys = set()
    while len(keys) < n:
        keys.add(make_key(rng))
    keys = sorted(keys)
    rng.shuffle(keys)
    return keys


def value(key):
    """What a key is set to: it names the key, so a copy cannot pass for another's."""
    return b"v:" + key.encode()


def server_list(mcs):
    return ",".join(m.addr for m in mcs)


def holders(mcs, key):
    """The servers of mcs holding `key` (read directly), as "host:port"."""
    return [m.addr for m in mcs if m.raw_get(key) is not None]


def assert_only_on_owners(mcs, keys, owners, prefix=""):
    """Each key is on exactly its owner, with its value, and on no other."""
    by_addr = {m.addr: m for m in mcs}
    for k in keys:
        on = holders(mcs, prefix + k)
        assert on == [owners[k]], "key %r: on %s, mcroute locate says %s" % (k, on, owners[k])
        assert by_addr[owners[k]].raw_get(prefix + k) == value(k)


def poke(client):
    """One call through `client`, so that it looks at its source again."""
    client.get("mcroute-test-poke")
    return True


def flush(mcs):
    for m in mcs:
        assert m.command(b"flush_all\r\n") == b"OK\r\n"


def write_snapshot(path, source, epoch):
    """`mcroute snapshot SOURCE --epoch N -o PATH`: a file that a process
    following PATH takes (only a later epoch is), written atomically."""
    r = subprocess.run([mcroute_bin(), "snapshot"] + source + ["--epoch", str(epoch), "-o", path],
                       capture_output=True, text=True, timeout=limit(30))
    assert r.returncode == 0, "mcroute snapshot: %s" % r.stderr


def test_hasher_places_keys_where_locate_does(servers, rng):
    """HashClient(servers, hasher=hasher(servers=...)) with pymemcache's
    (host, port) servers: every key on exactly `mcroute locate -s LIST`'s
    server; set, set_many, get and get_many agree."""
    mcs = servers(4)
    pm_servers = [("127.0.0.1", m.port) for m in mcs]
    keys = make_keys(rng)
    owners = locate(["-s", server_list(mcs)], keys)
    assert set(owners.values()) == {m.addr for m in mcs}, "500 keys missed a server"
    hc = PymemcacheHashClient(pm_servers, hasher=hasher(servers=pm_servers), **PM)
    half = len(keys) // 2
    for k in keys[:half]:
        assert hc.set(k, value(k)) is True
    assert hc.set_many({k: value(k) for k in keys[half:]}) == []
    assert_only_on_owners(mcs, keys, owners)
    assert hc.get_many(keys) == {k: value(k) for k in keys}
    assert all(hc.get(k) == value(k) for k in keys[:50])


# Placements other than the default ketama (php-memcached-ketama, libketama
# compatible, places every key as it does: it could not tell a hasher that
# ignores the option).
@pytest.mark.parametrize("option,name", [("client", "dalli"), ("mode", "jump")])
def test_hasher_places_like_locate_with_placement_option(servers, rng, option, name):
    """hasher(servers=..., client=/mode=) places as `mcroute locate -s LIST
    --client/--mode NAME`, which differs from the default ketama."""
    mcs = servers(4)
    lst = server_list(mcs)
    keys = make_keys(rng)
    owners = locate(["-s", lst, "--" + option, name], keys)
    assert owners != locate(["-s", lst], keys), "the option changes no key: it proves nothing"
    hc = PymemcacheHashClient(lst.split(","), hasher=hasher(servers=lst, **{option: name}), **PM)
    assert hc.set_many({k: value(k) for k in keys}) == []
    assert_only_on_owners(mcs, keys, owners)
    assert hc.get_many(keys) == {k: value(k) for k in keys}


def test_hash_client_takes_mcroute_source(servers, rng):
    """mcroute.pymemcache.HashClient(servers=LIST): a client per server of
    the list from the start, keys where locate says."""
    mcs = servers(4)
    lst = server_list(mcs)
    hc = HashClient(servers=lst, **PM)
    assert sorted(hc.clients) == sorted(m.addr for m in mcs)
    keys = make_keys(rng)
    owners = locate(["-s", lst], keys)
    assert hc.set_many({k: value(k) for k in keys}) == []
    assert_only_on_owners(mcs, keys, owners)
    assert hc.get_many(keys) == {k: value(k) for k in keys}


def test_hash_client_adopts_named_servers(servers, rng, tmp_path):
    """Servers with names for ids (twemproxy's) have no address among
    servers(): HashClient starts without their clients and makes each one
    when mcroute first places a key on it."""
    mcs = servers(4)
    yml = tmp_path / "nutcracker.yml"
    yml.write_text("alpha:\n  listen: 127.0.0.1:22121\n  hash: fnv1a_64\n"
                   "  distribution: ketama\n  servers:\n" +
                   "".join("    - %s:1 cache-%d\n" % (m.addr, i) for i, m in enumerate(mcs)))
    snap = str(tmp_path / "named.snap")
    write_snapshot(snap, ["-t", str(yml)], 1)
    hc = HashClient(snapshot=snap, **PM)
    assert hc.hasher.client.servers() == ["cache-%d" % i for i in range(4)]
    assert hc.clients == {}
    keys = make_keys(rng)
    owners = locate(["--snapshot", snap], keys)
    assert set(owners.values()) == {m.addr for m in mcs}, "500 keys missed a server"
    assert hc.set_many({k: value(k) for k in keys}) == []
    assert sorted(hc.clients) == sorted(m.addr for m in mcs)
    assert_only_on_owners(mcs, keys, owners)


def test_snapshot_changes_are_followed(servers, rng, tmp_path):
    """A snapshot file going from 3 servers to 4, then losing one: the
    subclass makes a client for the new server and drops the removed one;
    pymemcache's HashClient with hasher(snapshot=) follows the placement.
    New keys land where locate with the new file says."""
    mcs = servers(4)
    path = str(tmp_path / "pool.snap")
    write_snapshot(path, ["-s", server_list(mcs[:3])], 1)
    hc = HashClient(snapshot=path, **PM)
    plain = PymemcacheHashClient([m.addr for m in mcs], hasher=hasher(snapshot=path), **PM)
    assert sorted(hc.clients) == sorted(m.addr for m in mcs[:3])
    keys = make_keys(rng)
    owners = locate(["--snapshot", path], keys)
    assert hc.set_many({k: value(k) for k in keys}) == []
    assert_only_on_owners(mcs, keys, owners)

    write_snapshot(path, ["-s", server_list(mcs)], 2)
    wait_until(lambda: poke(hc) and mcs[3].addr in hc.clients, 5,
               "HashClient taking the 4-server snapshot")
    wait_until(lambda: poke(plain) and plain.hasher.client.epoch() == 2, 5,
               "hasher(snapshot=) taking the 4-server snapshot")
    flush(mcs)
    owners = locate(["--snapshot", path], keys)
    assert mcs[3].addr in owners.values()
    for client in (hc, plain):
        assert client.set_many({k: value(k) for k in keys}) == []
        assert_only_on_owners(mcs, keys, owners)
        flush(mcs)

    gone = mcs[2]
    write_snapshot(path, ["-s", server_list([mcs[0], mcs[1], mcs[3]])], 3)
    wait_until(lambda: poke(hc) and gone.addr not in hc.clients, 5,
               "HashClient dropping the removed server")
    owners = locate(["--snapshot", path], keys)
    assert gone.addr not in owners.values()
    assert hc.set_many({k: value(k) for k in keys}) == []
    assert_only_on_owners(mcs, keys, owners)


class MovingRouter:
    """An mcroute.Client whose servers() and epoch() say a server left once
    `n` keys were placed, while it still places keys as before: a change
    that lands in the middle of a get_many or set_many."""

    def __init__(self, client, n, gone):
        self.client, self.n, self.gone, self.placed = client, n, gone, 0

    def locate(self, key):
        self.placed += 1
        return self.client.locate(key)

    def epoch(self):
        return self.client.epoch() + (self.placed >= self.n)

    def servers(self):
        ids = self.client.servers()
        return [i for i in ids if i != self.gone] if self.placed >= self.n else ids


def test_membership_change_waits_for_the_batch(servers, rng):
    """A server leaving while get_many or set_many places keys, after it
    placed one on that server: its client stays until the batch has used
    it (pymemcache looks the batch's clients up by server at the end),
    then goes."""
    mcs = servers(3)
    lst = server_list(mcs)
    keys = make_keys(rng, 200)
    owners = locate(["-s", lst], keys)
    gone = mcs[0].addr
    # one key of the leaving server first; no other of its keys, so that
    # nothing in the batch makes its client again
    batch = [k for k in keys if owners[k] == gone][:1] + [k for k in keys if owners[k] != gone]
    for call in ("set_many", "get_many"):
        hc = HashClient(servers=lst, **PM)
        assert hc.set_many({k: value(k) for k in batch}) == []
        hc.hasher.client = MovingRouter(hc.hasher.client, 5, gone)
        if call == "set_many":
            assert hc.set_many({k: value(k) for k in batch}) == []
        else:
            assert hc.get_many(batch) == {k: value(k) for k in batch}
        assert hc.get(batch[-1]) == value(batch[-1])  # the next call takes the change
        assert gone not in hc.clients, "the server's client was not dropped"
    assert_only_on_owners(mcs, batch, owners)


def test_owner_without_client_fails(servers, rng):
    """pymemcache's HashClient given 3 of the 4 servers mcroute places on:
    the 4th's keys fail (MemcacheError; the call's default with
    ignore_exc) and are stored nowhere; the others' keys are placed as usual."""
    mcs = servers(4)
    lst = server_list(mcs)
    keys = make_keys(rng)
    owners = locate(["-s", lst], keys)
    orphans = [k for k in keys if owners[k] == mcs[3].addr]
    placed = [k for k in keys if owners[k] != mcs[3].addr]
    hc = PymemcacheHashClient([m.addr for m in mcs[:3]], hasher=hasher(servers=lst), **PM)
    for k in orphans[:20]:
        with pytest.raises(MemcacheError):
            hc.set(k, value(k))
    quiet = PymemcacheHashClient([m.addr for m in mcs[:3]], hasher=hasher(servers=lst),
                                 ignore_exc=True, **PM)
    assert sorted(quiet.set_many({k: value(k) for k in keys})) == sorted(orphans)
    assert quiet.set(orphans[0], value(orphans[0])) is False
    assert quiet.get(orphans[0], default=b"dflt") == b"dflt"
    assert quiet.get_many(keys) == {k: value(k) for k in placed}
    assert_only_on_owners(mcs, placed, owners)
    assert all(holders(mcs, k) == [] for k in orphans)


def test_killed_server_keys_fail_and_do_not_move(servers, rng):
    """A server killed: once pymemcache marks it dead (remove_node), its keys
    raise OwnerUnavailable (ignore_exc: the default) instead of going to
    another server, and the other servers' keys are served as before."""
    mcs = servers(4)
    lst = server_list(mcs)
    keys = make_keys(rng)
    owners = locate(["-s", lst], keys)
    victim = mcs[1]
    lost = [k for k in keys if owners[k] == victim.addr]
    kept = [k for k in keys if owners[k] != victim.addr]
    # retry_attempts=0: dead at its first socket error; dead_timeout: not
    # taken back while the test runs.
    opts = dict(PM, retry_attempts=0, dead_timeout=limit(600))
    hc = HashClient(servers=lst, **opts)
    quiet = HashClient(servers=lst, ignore_exc=True, **opts)
    assert hc.set_many({k: value(k) for k in keys}) == []
    assert quiet.get_many(keys) == {k: value(k) for k in keys}  # connected to all four
    victim.stop()

    def marked_dead():
        # The first call on a connection the kill closed fails without
        # marking (pymemcache closes it); the reconnection is refused and marks.
        try:
            hc.set(lost[0], b"new")
        except OwnerUnavailable:
            return True
        except (OSError, MemcacheError):
            return False
        pytest.fail("a set to the killed server succeeded")

    wait_until(marked_dead, 5, "pymemcache marking the killed server dead")
    wait_until(lambda: quiet.get(lost[0]) is None and victim.addr in quiet.hasher.dead, 5,
               "pymemcache (ignore_exc) marking the killed server dead")
    assert victim.addr in hc.hasher.dead
    for k in lost:
        with pytest.raises(OwnerUnavailable):
            hc.set(k, b"new")
        assert quiet.set(k, b"new") is False
    assert quiet.get_many(lost) == {}
    assert quiet.set_many({k: b"new" for k in lost}) == lost
    survivors = [m for m in mcs if m is not victim]
    assert all(holders(survivors, k) == [] for k in lost)
    assert hc.get_many(kept) == {k: value(k) for k in kept}
    assert hc.set_many({k: value(k) for k in kept}) == []
    assert_only_on_owners(survivors, kept, owners)


def test_remove_node_fails_keys_until_add_node(servers, rng):
    """The hasher's side of pymemcache's dead-server protocol, on a live
    server: after remove_node (HashClient.remove_server) its keys fail and
    nothing is written elsewhere; after add_node (_retry_dead) they are
    read from it again, unchanged."""
    mcs = servers(3)
    lst = server_list(mcs)
    keys = make_keys(rng, 200)
    owners = locate(["-s", lst], keys)
    hc = PymemcacheHashClient(lst.split(","), hasher=hasher(servers=lst), **PM)
    assert hc.set_many({k: value(k) for k in keys}) == []
    node = mcs[0].addr
    lost = [k for k in keys if owners[k] == node]
    hc.hasher.remove_node(node)
    for k in lost:
        with pytest.raises(MemcacheError):
            hc.set(k, b"new")
    assert all(holders(mcs, k) == [node] for k in lost)
    hc.hasher.add_node(node)
    assert hc.get_many(lost) == {k: value(k) for k in lost}


def test_key_prefix_placed_as_mcroute_client_places_it(servers, rng):
    """key_prefix: the server holding key_prefix + key is the owner of the
    key without the prefix, as mcroute.Client(key_prefix=) places it; each
    client reads what the other wrote."""
    mcs = servers(4)
    lst = server_list(mcs)
    keys = make_keys(rng)
    owners = locate(["-s", lst], keys)
    hc = HashClient(servers=lst, key_prefix=b"app:", **PM)
    assert hc.set_many({k: value(k) for k in keys}) == []
    assert_only_on_owners(mcs, keys, owners, prefix="app:")
    assert all(holders(mcs, k) == [] for k in keys[:50])
    mc = mcroute.Client(servers=lst, key_prefix="app:")
    assert mc.get_many(keys) == {k: value(k) for k in keys}
    flush(mcs)
    assert all(mc.set(k, value(k)) for k in keys)
    assert hc.get_many(keys) == {k: value(k) for k in keys}


def test_ipv6_servers_are_pymemcache_node_keys():
    """An IPv6 server is "[v6]:port" to mcroute and "v6:port" to pymemcache:
    get_node answers the node key of HashClient's own client (placement
    only: no connection is made)."""
    pm_servers = [("::1", 11311), ("127.0.0.1", 11312), "[::1]:11313"]
    lst = "[::1]:11311,127.0.0.1:11312,[::1]:11313"
    keys = ["k%d" % i for i in range(200)]
    owners = locate(["-s", lst], keys)
    hc = PymemcacheHashClient(pm_servers, hasher=hasher(servers=pm_servers), **PM)
    assert sorted(hc.clients) == ["127.0.0.1:11312", "::1:11311", "::1:11313"]
    for k in keys:
        node = hc.hasher.get_node(k)
        assert node in hc.clients
        assert node == owners[k].replace("[", "").replace("]", "")


def test_arguments_refused():
    """A hasher takes only where the servers are and how keys are placed;
    the subclass takes no hasher."""
    with pytest.raises(TypeError, match="key_prefix"):
        hasher(servers="127.0.0.1:11311", key_prefix="p:")
    with pytest.raises(TypeError, match="hasher"):
        HashClient(servers="127.0.0.1:11311", hasher=hasher(servers="127.0.0.1:11311"))
    with pytest.raises(mcroute.ConfigError):
        PymemcacheHashClient([], hasher=hasher())
