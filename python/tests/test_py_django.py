# SPDX-License-Identifier: BSD-3-Clause
"""test_py_django.py: MCRouteCache (mcroute.django) with Debian's Django on real memcached."""

import contextlib
import os
import subprocess
import threading
import warnings

import django
import pytest
from django.conf import settings
from django.core import signals
from django.core.cache import CacheKeyWarning, InvalidCacheKey, caches
from django.core.exceptions import ImproperlyConfigured
from django.test.utils import override_settings

import mcroute
from conftest import cli, limit, locate, mcroute_bin, wait_until
from mcroute.django import MCRouteCache

# Django needs settings before its cache handler builds anything; each test
# puts its own CACHES in place with override_settings.
if not settings.configured:
    settings.configure(CACHES={"default": {
        "BACKEND": "django.core.cache.backends.locmem.LocMemCache"}})
    django.setup()

BACKEND = "mcroute.django.MCRouteCache"
DAY = 24 * 60 * 60


@contextlib.contextmanager
def django_cache(location=None, **params):
    """caches["default"] as Django builds it from CACHES naming MCRouteCache
    (no LOCATION entry at all when location is None)."""
    entry = dict(BACKEND=BACKEND, **params)
    if location is not None:
        entry["LOCATION"] = location
    with override_settings(CACHES={"default": entry}):
        yield caches["default"]


def addrs(mcs):
    return ",".join(m.addr for m in mcs)


@pytest.fixture
def three(servers):
    """A cache (LOCATION "a;b;c") on three new servers: (cache, servers)."""
    mcs = servers(3)
    with django_cache(";".join(m.addr for m in mcs)) as cache:
        yield cache, mcs


def holders(mcs, key):
    """The addresses of the servers that hold `key` (read directly)."""
    return [m.addr for m in mcs if m.raw_get(key) is not None]


def ttl(mcs, key):
    """The seconds `key` has left on the server holding it: -1 forever, None
    when no server holds it (memcached's meta get with the t flag)."""
    for m in mcs:
        reply = m.command(b"mg " + key.encode() + b" t\r\n", end=(b"\r\n",))
        if reply.startswith(b"HD "):
            return int(reply.split()[1][1:])
    return None


def counters(mcs):
    """Every server's count of the key commands it has served."""
    names = ("cmd_get", "cmd_set", "cmd_touch", "delete_hits", "delete_misses",
             "incr_hits", "incr_misses", "decr_hits", "decr_misses")
    total = dict.fromkeys(names, 0)
    for m in mcs:
        for line in m.command(b"stats\r\n").decode().splitlines():
            parts = line.split()
            if len(parts) == 3 and parts[1] in total:
                total[parts[1]] += int(parts[2])
    return total


def check_placement(cache, mcs, keys, values, locate_args):
    """Each key is on the server `mcroute locate` names for its full key,
    read back raw from it, and on no other server."""
    full = [cache.make_key(k) for k in keys]
    owners = locate(locate_args, full)
    assert len(owners) == len(full)
    for k, value in zip(full, values):
        raw = {m.addr: m.raw_get(k) for m in mcs}
        assert raw[owners[k]] == value.encode(), (k, owners[k], raw)
        assert [a for a, v in raw.items() if v is not None] == [owners[k]], (k, raw)
    return owners


# ------------------------------------------------------------ configuration


def test_location_forms_give_the_servers(servers):
    mcs = servers(2)
    a, b = mcs[0].addr, mcs[1].addr
    for location in ("%s;%s" % (a, b), "%s,%s" % (a, b), [a, b], " %s ; %s ;" % (a, b)):
        with django_cache(location) as cache:
            assert isinstance(cache, MCRouteCache)
            assert cache._servers == [a, b]
            assert cache._cache.servers() == [a, b]
            cache.set("form", location)
            assert cache.get("form") == location


@pytest.mark.parametrize("options, location, match", [
    ({"state": "/run/mcroute/web.state"}, "127.0.0.1:11211", "LOCATION"),
    ({"snapshot": "/tmp/x.snap"}, ["127.0.0.1:11211"], "LOCATION"),
    ({}, None, "no servers"),
    ({}, "", "no servers"),
    ({"mode": "no-such-mode"}, "127.0.0.1:11211", "unknown mode"),
    ({"client": "no-such-client"}, "127.0.0.1:11211", "unknown client"),
    ({"client": "pymemcache", "mode": "ketama"}, "127.0.0.1:11211", "give client or mode"),
    ({"colour": "blue"}, "127.0.0.1:11211", "colour"),
    ({"timeout": -1}, "127.0.0.1:11211", "timeout"),
    ({"snapshot": "/nonexistent/pool.snap"}, "", "/nonexistent/pool.snap"),
    ({}, ["127.0.0.1:11211", 11212], "11212"),
])
def test_bad_configuration_is_refused_clearly(options, location, match):
    with pytest.raises(ImproperlyConfigured, match=match):
        with django_cache(location, OPTIONS=options):
            pass


# ------------------------------------------------------------ one key


def test_values_of_several_types_round_trip(three):
    cache, _ = three
    values = {"str": "héllo wörld", "empty": "", "bytes": b"\x00\xffraw", "int": 42,
              "negative": -7, "huge": 2 ** 70, "float": 1.5, "bool": True,
              "dict": {"a": [1, 2], "b": {"c": None}}, "list": [1, "two", 3.0],
              "tuple": (1, 2), "set": {3, 4}, "none": None, "big": "x" * 500000}
    for key, value in values.items():
        assert cache.set(key, value) is None
    for key, value in values.items():
        got = cache.get(key, "default")
        assert got == value and type(got) is type(value), key
    assert cache.get("absent") is None
    assert cache.get("absent", "default") == "default"
    # None is a value like any other: stored, found, not the default
    assert cache.has_key("none") and "none" in cache


def test_add_and_get_or_set(three):
    cache, mcs = three
    assert cache.add("a", "first") is True
    assert cache.add("a", "second") is False
    assert cache.get("a") == "first"
    assert cache.get_or_set("g", "made") == "made"
    assert cache.get_or_set("g", "other") == "made"
    calls = []

    def compute():
        calls.append(1)
        return {"computed": len(calls)}

    assert cache.get_or_set("c", compute, timeout=None) == {"computed": 1}
    assert cache.get_or_set("c", compute) == {"computed": 1}
    assert calls == [1]
    assert ttl(mcs, cache.make_key("c")) == -1
    assert cache.get_or_set("c", compute, version=2) == {"computed": 2}


def test_delete_has_key_and_touch(three):
    cache, mcs = three
    cache.set("k", "v", 100)
    assert cache.has_key("k") and "k" in cache
    assert cache.delete("k") is True
    assert cache.delete("k") is False
    assert not cache.has_key("k") and "k" not in cache
    assert holders(mcs, cache.make_key("k")) == []
    assert cache.touch("k") is False
    cache.set("t", "v", 100)
    assert cache.touch("t", None) is True
    assert ttl(mcs, cache.make_key("t")) == -1
    assert cache.touch("t", 50) is True
    assert 45 <= ttl(mcs, cache.make_key("t")) <= 50
    assert cache.touch("t", 0) is True  # touched to expire at once
    assert cache.get("t") is None


def test_incr_and_decr(three):
    cache, _ = three
    cache.set("n", 10)
    assert cache.incr("n") == 11
    assert cache.incr("n", 5) == 16
    assert cache.decr("n") == 15
    assert cache.decr("n", 4) == 11
    assert cache.incr("n", -1) == 10
    assert cache.decr("n", -2) == 12
    assert cache.decr("n", 100) == 0  # memcached stops at 0
    got = cache.get("n")
    assert got == 0 and type(got) is int
    for call, delta in (("incr", 1), ("decr", 1), ("incr", -1), ("decr", -1)):
        with pytest.raises(ValueError, match="Key ':1:missing' not found"):
            getattr(cache, call)("missing", delta)
    assert not cache.has_key("missing")
    cache.set("text", "abc")
    cache.set("pickled", {"n": 1})
    for key in ("text", "pickled"):
        with pytest.raises(mcroute.ServerError, match="non-numeric"):
            cache.incr(key)
    assert cache.get("text") == "abc"


def test_a_value_too_big_drops_the_old_one(three):
    cache, mcs = three
    cache.set("session", "small")
    with pytest.raises(mcroute.TooBigError):
        cache.set("session", "x" * (2 ** 20 + 1))
    assert cache.get("session") is None
    assert holders(mcs, cache.make_key("session")) == []


# ------------------------------------------------------------ many keys


def test_get_set_and_delete_many(three):
    cache, mcs = three
    data = {"a": 1, "b": "two", "c": {"three": 3}, "d": None, "e": b"five"}
    assert cache.set_many(data) == []
    assert cache.get_many(list(data) + ["absent"]) == data
    assert cache.get_many(iter(["a", "e"])) == {"a": 1, "e": b"five"}
    assert cache.get_many([]) == {}
    assert cache.delete_many(["a", "b", "absent"]) is None
    assert cache.get_many(["a", "b", "c"]) == {"c": {"three": 3}}
    assert holders(mcs, cache.make_key("a")) == []
    assert cache.set_many({"a": "v2"}, timeout=None, version=2) == []
    assert cache.get_many(["a"], version=2) == {"a": "v2"}
    assert cache.get_many(["a"]) == {}
    assert ttl(mcs, cache.make_key("a", version=2)) == -1


def test_set_many_returns_the_keys_not_stored(three):
    cache, mcs = three
    down = mcs[2]
    down.stop()
    keys = ["user:%d" % i for i in range(40)]
    owners = locate(["-s", addrs(mcs)], [cache.make_key(k) for k in keys])
    lost = sorted(k for k in keys if owners[cache.make_key(k)] == down.addr)
    assert lost, "no key of 40 placed on the stopped server"
    failed = cache.set_many({k: k for k in keys})
    assert sorted(failed) == lost  # the keys as given, not the full keys
    by_addr = {m.addr: m for m in mcs}
    for k in keys:
        if k not in lost:  # stored on its owner all the same
            assert by_addr[owners[cache.make_key(k)]].raw_get(cache.make_key(k)) == k.encode()


# ------------------------------------------------------------ timeouts


def test_timeouts_follow_memcached_rules(three):
    cache, mcs = three
    cache.set("default", 1)  # TIMEOUT: Django's 300 s
    assert 295 <= ttl(mcs, cache.make_key("default")) <= 300
    cache.set("forever", 1, None)
    assert ttl(mcs, cache.make_key("forever")) == -1
    cache.set("float", 1, 100.2)
    assert 95 <= ttl(mcs, cache.make_key("float")) <= 100
    # above 30 days memcached wants a Unix time: sent as it is, 31 days
    # would be read as a day of 1970 and expire at once. memcached turns a
    # Unix time into its own clock, which ticks once a second and may be a
    # second behind time(): the time left can read one second more.
    cache.set("month", 1, 31 * DAY)
    assert 31 * DAY - 10 <= ttl(mcs, cache.make_key("month")) <= 31 * DAY + 1
    assert cache.add("added", 1, 31 * DAY) is True
    assert cache.touch("added", 40 * DAY) is True
    assert 40 * DAY - 10 <= ttl(mcs, cache.make_key("added")) <= 40 * DAY + 1


@pytest.mark.parametrize("timeout", [0, -5, 0.5])
def test_zero_or_negative_timeout_stores_nothing(three, timeout):
    cache, mcs = three
    cache.set("k", "old")
    cache.set("k", "new", timeout)  # replaces the old value, then is gone
    assert cache.get("k") is None
    assert holders(mcs, cache.make_key("k")) == []
    assert cache.add("fresh", 1, timeout) is True  # memcached stores it expired
    assert cache.get("fresh") is None
    cache.set("kept", "v")
    assert cache.add("kept", "other", timeout) is False
    assert cache.get("kept") == "v"
    assert cache.set_many({"m1": 1, "m2": 2}, timeout) == []
    assert cache.get_many(["m1", "m2"]) == {}
    assert cache.touch("kept", timeout) is True
    assert cache.get("kept") is None


def test_default_timeout_from_settings(servers):
    mcs = servers(1)
    with django_cache(mcs[0].addr, TIMEOUT=None) as cache:
        cache.set("k", 1)
        assert ttl(mcs, cache.make_key("k")) == -1
    with django_cache(mcs[0].addr, TIMEOUT=20) as cache:
        cache.set("k", 1)
        assert 15 <= ttl(mcs, cache.make_key("k")) <= 20


def test_a_short_timeout_expires(three):
    # 2 s, not 1: memcached's clock ticks once a second, so an item given n
    # seconds may expire after n - 1 and a bit; with 1 s a tick between the
    # set and the get would make the item gone before the check that it is
    # there
    cache, _ = three
    cache.set("brief", "v", 2)
    cache.set_many({"brief-many": "v"}, 2)
    cache.set("touched", "v", None)
    assert cache.touch("touched", 2) is True
    assert cache.get_many(["brief", "brief-many", "touched"]) == {
        "brief": "v", "brief-many": "v", "touched": "v"}
    wait_until(lambda: cache.get_many(["brief", "brief-many", "touched"]) == {}, 6,
               "keys set for 2 s expire")


# ------------------------------------------------------------ keys


def test_versioned_keys(servers):
    mcs = servers(3)
    with django_cache(addrs(mcs), KEY_PREFIX="site", VERSION=2) as cache:
        cache.set("k", "v2")
        assert cache.make_key("k") == "site:2:k"
        assert holders(mcs, "site:2:k") != []
        assert cache.get("k", version=1) is None
        cache.set("k", "v1", version=1)
        assert cache.get("k", version=1) == "v1" and cache.get("k") == "v2"
        assert cache.incr_version("k") == 3
        assert cache.get("k") is None and cache.get("k", version=3) == "v2"
        assert holders(mcs, "site:2:k") == [] and holders(mcs, "site:3:k") != []
        assert cache.decr_version("k", version=3) == 2
        assert cache.get("k") == "v2" and holders(mcs, "site:3:k") == []
        assert cache.get("k", version=1) == "v1"
        with pytest.raises(ValueError, match="not found"):
            cache.incr_version("missing")


def test_key_function(servers):
    mcs = servers(3)

    def key_func(key, prefix, version):
        return "kf|%s|%s|%s" % (prefix, version, key)

    with django_cache(addrs(mcs), KEY_PREFIX="p", KEY_FUNCTION=key_func) as cache:
        keys = ["key%d" % i for i in range(30)]
        cache.set_many({k: "val-" + k for k in keys})
        assert cache.make_key("key0") == "kf|p|1|key0"
        check_placement(cache, mcs, keys, ["val-" + k for k in keys], ["-s", addrs(mcs)])


def invalid_key_calls(key):
    return [("add", (key, 1)), ("get", (key,)), ("set", (key, 1)), ("incr", (key,)),
            ("decr", (key,)), ("touch", (key,)), ("delete", (key,)), ("has_key", (key,)),
            ("get_or_set", (key, 1)), ("incr_version", (key,)),
            # the bad key last: every key is checked before any is sent
            ("get_many", (["b", key],)), ("set_many", ({"b": 2, key: 1},)),
            ("delete_many", (["b", key],))]


@pytest.mark.parametrize("key, why", [
    ("with space", "contains characters"),
    ("tab\tkey", "contains characters"),
    ("del\x7fkey", "contains characters"),
    ("a" * 248, "longer than 250"),  # 251 with ":1:"
], ids=["space", "tab", "del", "too-long"])
def test_invalid_keys_raise_and_send_nothing(three, key, why):
    """Django 3.2's memcached backends raise InvalidCacheKey (with the text
    of memcache_key_warnings) where other backends warn with
    CacheKeyWarning; nothing reaches a server, not even set_many's good
    key."""
    cache, mcs = three
    full = cache.make_key(key)
    if why == "longer than 250":
        message = ("Cache key will cause errors if used with memcached: %r "
                   "(longer than 250)" % full)
    else:
        message = ("Cache key contains characters that will cause errors if used with "
                   "memcached: %r" % full)
    before = counters(mcs)
    for name, args in invalid_key_calls(key):
        with warnings.catch_warnings():
            warnings.simplefilter("error", CacheKeyWarning)
            with pytest.raises(InvalidCacheKey) as raised:
                getattr(cache, name)(*args)
        assert str(raised.value) == message, name
    assert isinstance(raised.value, ValueError)
    assert counters(mcs) == before
    assert holders(mcs, cache.make_key("b")) == []


def test_keys_at_the_limit_and_beyond_ascii(three):
    cache, mcs = three
    longest = "a" * 247  # 250 with ":1:"
    cache.set(longest, "v")
    assert cache.get(longest) == "v"
    assert holders(mcs, cache.make_key(longest)) != []
    cache.set("clé-ü", "v")
    assert cache.get("clé-ü") == "v"
    # Django counts characters; memcached and mcroute count UTF-8 bytes:
    # 130 characters, 263 bytes, refused by mcroute before it is sent
    wide = "é" * 130
    before = counters(mcs)
    with pytest.raises(mcroute.IllegalKeyError):
        cache.set(wide, "v")
    assert counters(mcs) == before


# ------------------------------------------------------------ placement


@pytest.mark.parametrize("options, locate_args", [
    ({}, []),
    ({"client": "php-memcached-ketama"}, ["--client", "php-memcached-ketama"]),
    ({"mode": "jump"}, ["-m", "jump"]),
])
def test_every_key_is_where_mcroute_locate_puts_it(servers, options, locate_args):
    mcs = servers(3)
    with django_cache(";".join(m.addr for m in mcs), OPTIONS=options) as cache:
        keys = ["user:%d" % i for i in range(100)] + ["päth/%d?q=ü" % i for i in range(50)]
        keys += ["s%d" % i for i in range(50)]
        values = ["value-%d" % i for i in range(len(keys))]
        for k, v in zip(keys[:100], values[:100]):
            cache.set(k, v)
        assert cache.set_many(dict(zip(keys[100:], values[100:]))) == []
        owners = check_placement(cache, mcs, keys, values, ["-s", addrs(mcs)] + locate_args)
        assert len(set(owners.values())) == 3
        assert cache.get_many(keys) == dict(zip(keys, values))


@pytest.mark.parametrize("source", ["snapshot", "server_file"])
def test_servers_from_a_snapshot_or_a_server_file(servers, tmp_path, source):
    mcs = servers(3)
    if source == "snapshot":
        path = tmp_path / "pool.snap"
        subprocess.run([mcroute_bin(), "snapshot", "-s", addrs(mcs), "--client",
                        "php-memcached-ketama", "-o", str(path)], check=True,
                       timeout=limit(30))
        locate_args = ["--snapshot", str(path)]
    else:
        path = tmp_path / "servers"
        path.write_text("# the pool\n" + "".join(m.addr + "\n" for m in mcs))
        locate_args = ["-f", str(path)]
    with django_cache(None, OPTIONS={source: str(path)}) as cache:
        assert cache._cache.servers() == [m.addr for m in mcs]
        keys = ["key-%d" % i for i in range(100)]
        values = ["v%d" % i for i in range(100)]
        assert cache.set_many(dict(zip(keys, values))) == []
        check_placement(cache, mcs, keys, values, locate_args)


def test_servers_from_etcd_and_a_host_state(servers, etcd, tmp_path):
    """OPTIONS etcd= with pool=, and state= as `mcroute agent` writes it
    from the same pool: each key where `mcroute locate` puts it."""
    mcs = servers(3)
    r = cli("members", "publish", "--etcd", etcd.url, "--pool", "web", "-s", addrs(mcs))
    assert r.returncode == 0, r.stderr
    state = str(tmp_path / "web.state")
    agent = subprocess.Popen([mcroute_bin(), "agent", "--etcd", etcd.url, "--pool", "web",
                              "--state", state], stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL)
    try:
        wait_until(lambda: os.path.exists(state), 20, "the agent writes its state")
        keys = ["key-%d" % i for i in range(100)]
        for source, args in (({"etcd": etcd.url, "pool": "web"}, ["--etcd", etcd.url,
                                                                   "--pool", "web"]),
                             ({"state": state}, ["--state", state])):
            with django_cache("", OPTIONS=source) as cache:
                values = ["%s-%d" % (list(source)[0], i) for i in range(100)]
                assert cache.set_many(dict(zip(keys, values))) == []
                check_placement(cache, mcs, keys, values, args)
    finally:
        agent.terminate()
        agent.wait(limit(30))


# ------------------------------------------------------------ clear, close, threads


def test_clear_flushes_every_server(three):
    cache, mcs = three
    keys = ["k%d" % i for i in range(60)]
    cache.set_many({k: k for k in keys})
    assert {h for k in keys for h in holders(mcs, cache.make_key(k))} == {
        m.addr for m in mcs}
    cache.clear()
    assert cache.get_many(keys) == {}
    assert all(holders(mcs, cache.make_key(k)) == [] for k in keys)


def test_close_keeps_the_client(three):
    cache, _ = three
    client = cache._cache
    cache.set("k", "v")
    cache.close()
    signals.request_finished.send(sender=None)  # Django's close_caches
    assert cache._cache is client
    assert cache.get("k") == "v"
    cache.set("k", "after")
    assert cache.get("k") == "after"


def test_threads_share_a_cache_each_with_its_own_client(three):
    cache, _ = three
    n, rounds = 6, 300
    start = threading.Barrier(n)
    clients, errors = [None] * n, []

    def work(t):
        try:
            start.wait(timeout=limit(10))
            clients[t] = cache._cache
            for i in range(rounds):
                key = "t%d-%d" % (t, i)
                cache.set(key, {"t": t, "i": i})
                assert cache.get(key) == {"t": t, "i": i}
                assert cache.get_many([key, "shared"]).get(key) == {"t": t, "i": i}
                cache.incr("counter")
        except Exception as e:  # reported by the main thread
            errors.append((t, repr(e)))

    cache.set("counter", 0)
    threads = [threading.Thread(target=work, args=(t,)) for t in range(n)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(timeout=limit(60))
    assert not any(th.is_alive() for th in threads)
    assert errors == []
    assert len({id(c) for c in clients + [cache._cache]}) == n + 1
    assert cache.get("counter") == n * rounds
