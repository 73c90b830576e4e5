# SPDX-License-Identifier: BSD-3-Clause
"""mcroute: memcached clients placed by mcroute.

    import mcroute
    mc = mcroute.Client(servers=["10.0.0.1:11211", "10.0.0.2:11211"])
    mc.set("greeting", "hello")
    mc.get("greeting")            # b'hello'

Client(servers=LIST | server_file=PATH | snapshot=PATH | state=PATH |
       etcd=URLS, pool=NAME, mode=None, client=None, hash=None,
       connect_timeout=None, timeout=None, policy=None, protocol=None,
       key_prefix=None, max_value_size=None, connections=None, serde=None)

places every key where `mcroute locate` does with the same source (the
default mode is ketama, as the command's), follows a snapshot file, a
host's state or an etcd pool as they change, and talks to the servers
through mcroute's connection pool (libmcroute_pool). Values are bytes,
str or int without a serde and come back as bytes; PickleSerde (or any
object with pymemcache's serialize/deserialize) stores any object.

Threads: a client is used by one thread at a time (a client per thread,
or a lock around its calls); a second thread calling it while a call is
in progress gets mcroute.Error. The GIL is released while a call waits
for the servers. Fork: a client used in a forked child makes its own
connections (and router) there; the parent's are left to the parent.
"""

import pickle

from ._mcroute import (  # noqa: F401 (the package's names)
    KEY_MAX,
    Client,
    ConfigError,
    ConnectionError,
    Error,
    IllegalKeyError,
    ProtocolError,
    ServerDown,
    ServerError,
    TimeoutError,
    TooBigError,
)

__all__ = [
    "Client", "PickleSerde", "Error", "ConfigError", "IllegalKeyError", "TooBigError",
    "ServerError", "ConnectionError", "ServerDown", "TimeoutError", "ProtocolError",
    "KEY_MAX",
]

# The flags of pymemcache's pickle_serde (pymemcache/serde.py), so that
# values written by either read back through the other.
FLAG_BYTES = 0
FLAG_PICKLE = 1 << 0
FLAG_INTEGER = 1 << 1
FLAG_LONG = 1 << 2
FLAG_TEXT = 1 << 4


class PickleSerde:
    """bytes as they are, str as UTF-8, int as decimal, anything else
    pickled; the flags say which (pymemcache's pickle_serde flags)."""

    def __init__(self, pickle_version=pickle.DEFAULT_PROTOCOL):
        self.pickle_version = pickle_version

    def serialize(self, key, value):
        if isinstance(value, bytes):
            return value, FLAG_BYTES
        if isinstance(value, str):
            return value.encode("utf-8"), FLAG_TEXT
        if isinstance(value, int) and not isinstance(value, bool):
            return str(value).encode("ascii"), FLAG_INTEGER
        return pickle.dumps(value, self.pickle_version), FLAG_PICKLE

    def deserialize(self, key, value, flags):
        if flags == FLAG_BYTES:
            return value
        if flags & FLAG_TEXT:
            return value.decode("utf-8")
        if flags & (FLAG_INTEGER | FLAG_LONG):
            return int(value)
        if flags & FLAG_PICKLE:
            return pickle.loads(value)
        return value
