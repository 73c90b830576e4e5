# SPDX-License-Identifier: BSD-3-Clause
"""mcroute.django: MCRouteCache, a Django cache backend whose keys mcroute places."""

import re
import threading
import time

from django.core.cache.backends.base import (
    DEFAULT_TIMEOUT,
    BaseCache,
    InvalidCacheKey,
    memcache_key_warnings,
)
from django.core.exceptions import ImproperlyConfigured

import mcroute

__all__ = ["MCRouteCache"]

# memcached reads an expiration time above 30 days as a Unix time
# (REALTIME_MAXDELTA in memcached.h).
MAX_RELATIVE_EXPIRE = 60 * 60 * 24 * 30

# What memcached itself makes of a negative expiration time
# (EXPTIME_TO_POSITIVE_TIME in memcached.h): a Unix time long past, so the
# item is stored already expired. mcroute.Client takes no negative expire,
# so the backend sends this where Django's memcached backends send -1.
EXPIRED = MAX_RELATIVE_EXPIRE + 1

# The OPTIONS that say where the servers come from instead of LOCATION.
SOURCES = ("servers", "server_file", "snapshot", "state", "etcd")


def servers_of(location):
    """LOCATION as a list of "host:port" strings ([] when empty): a str is
    split on ';' and ',' as Django's memcached backends split it."""
    if not location:
        return []
    items = re.split("[;,]", location) if isinstance(location, str) else list(location)
    for item in items:
        if not isinstance(item, str):
            raise ImproperlyConfigured("MCRouteCache: LOCATION holds %r, not a \"host:port\" "
                                       "string" % (item,))
    return [item.strip() for item in items if item.strip()]


def client_options(servers, options):
    """mcroute.Client's keyword arguments from LOCATION's servers and OPTIONS."""
    options = dict(options)
    named = [name for name in SOURCES if options.get(name) is not None]
    if servers and named:
        raise ImproperlyConfigured(
            "MCRouteCache: LOCATION %r and OPTIONS %s both say where the servers are: "
            "leave LOCATION empty when OPTIONS names the source" % (";".join(servers),
                                                                   ", ".join(named)))
    if servers:
        options["servers"] = servers
    elif not named:
        raise ImproperlyConfigured(
            "MCRouteCache: no servers: give LOCATION (\"host:port;host:port\" or a list) or "
            "one of OPTIONS %s" % ", ".join(SOURCES[1:]))
    if options.get("serde") is None:
        # Django caches any picklable object, not just bytes, str and int.
        options["serde"] = mcroute.PickleSerde()
    return options


class MCRouteCache(BaseCache):
    """A Django cache on memcached servers, each key on the server mcroute
    places its full key (after KEY_PREFIX, VERSION and KEY_FUNCTION) on.

        CACHES = {"default": {
            "BACKEND": "mcroute.django.MCRouteCache",
            "LOCATION": "10.0.0.1:11211;10.0.0.2:11211",     # or a list
            "OPTIONS": {"client": "php-memcached-ketama"},   # mcroute.Client's
        }}

    LOCATION (split on ';' or ',', or a list) is mcroute.Client's servers=;
    leave it empty when OPTIONS names another source (server_file,
    snapshot, state, etcd with pool). The other OPTIONS go to
    mcroute.Client as they are; values are pickled by mcroute.PickleSerde
    unless OPTIONS gives a serde. It behaves as Django 3.2's memcached
    backends do (django/core/cache/backends/memcached.py): a key memcached
    cannot take raises InvalidCacheKey before anything is sent, timeouts
    follow memcached's rules, close() keeps the connections. Each thread
    gets its own mcroute.Client: a client serves one thread at a time.
    """

    def __init__(self, server, params):
        super().__init__(params)
        self._servers = servers_of(server)
        self._options = client_options(self._servers, params.get("OPTIONS") or {})
        self._local = threading.local()
        # Made now so that a bad configuration fails when the cache is made,
        # rather than at its first call.
        self._local.client = self._new_client()

    def _new_client(self):
        try:
            return mcroute.Client(**self._options)
        except (mcroute.ConfigError, TypeError) as e:
            # TypeError: an option mcroute.Client has no keyword for.
            raise ImproperlyConfigured("MCRouteCache: OPTIONS: %s" % e) from e

    @property
    def _cache(self):
        """This thread's mcroute.Client, made on the thread's first call."""
        client = getattr(self._local, "client", None)
        if client is None:
            client = self._local.client = self._new_client()
        return client

    # ------------------------------------------------------------ keys and timeouts

    def validate_key(self, key):
        # Django 3.2's memcached backends raise where the other backends
        # only warn: memcached would refuse the key anyway.
        problem = next(memcache_key_warnings(key), None)
        if problem is not None:
            raise InvalidCacheKey(problem)

    def _key(self, key, version):
        key = self.make_key(key, version=version)
        self.validate_key(key)
        return key

    def get_backend_timeout(self, timeout=DEFAULT_TIMEOUT):
        """The expiration time to send: 0 (never) for None, EXPIRED for 0
        or less, a Unix time above 30 days, as memcached reads them."""
        if timeout == DEFAULT_TIMEOUT:
            timeout = self.default_timeout
        if timeout is None:
            return 0
        if int(timeout) <= 0:
            return EXPIRED
        if timeout > MAX_RELATIVE_EXPIRE:
            timeout += int(time.time())
        return int(timeout)

    # ------------------------------------------------------------ one key

    def add(self, key, value, timeout=DEFAULT_TIMEOUT, version=None):
        key = self._key(key, version)
        return self._cache.add(key, value, self.get_backend_timeout(timeout))

    def get(self, key, default=None, version=None):
        key = self._key(key, version)
        return self._cache.get(key, default)

    def set(self, key, value, timeout=DEFAULT_TIMEOUT, version=None):
        key = self._key(key, version)
        try:
            stored = self._cache.set(key, value, self.get_backend_timeout(timeout))
        except mcroute.TooBigError:
            # Refused before it was sent. memcached, refusing a value too
            # big, drops the key's old value; Django relies on that (a
            # session must not keep its old data), so drop it here too.
            self._cache.delete(key)
            raise
        if not stored:
            self._cache.delete(key)

    def touch(self, key, timeout=DEFAULT_TIMEOUT, version=None):
        key = self._key(key, version)
        return bool(self._cache.touch(key, self.get_backend_timeout(timeout)))

    def delete(self, key, version=None):
        key = self._key(key, version)
        return bool(self._cache.delete(key))

    def incr(self, key, delta=1, version=None):
        return self._count(self._key(key, version), delta)

    def decr(self, key, delta=1, version=None):
        return self._count(self._key(key, version), -delta)

    def _count(self, key, delta):
        # memcached adds or subtracts a delta of 0 or more (and stops at 0).
        if delta >= 0:
            value = self._cache.incr(key, delta)
        else:
            value = self._cache.decr(key, -delta)
        if value is None:
            raise ValueError("Key '%s' not found" % key)
        return value

    # ------------------------------------------------------------ many keys

    def get_many(self, keys, version=None):
        given = {self._key(key, version): key for key in keys}
        found = self._cache.get_many(list(given))
        return {given[key]: value for key, value in found.items()}

    def set_many(self, data, timeout=DEFAULT_TIMEOUT, version=None):
        given, values = {}, {}
        for key, value in data.items():
            full = self._key(key, version)
            given[full] = key
            values[full] = value
        failed = self._cache.set_many(values, self.get_backend_timeout(timeout))
        return [given[key] for key in failed]

    def delete_many(self, keys, version=None):
        # Every key checked before any is sent, as Django's backends do.
        self._cache.delete_many([self._key(key, version) for key in keys])

    def clear(self):
        self._cache.flush_all()

    def close(self, **kwargs):
        # Django calls this at the end of every request. mcroute.Client's
        # close() is for good, and its pool keeps and mends its own
        # connections, so there is nothing to do (as PyLibMCCache does).
        pass
