# SPDX-License-Identifier: BSD-3-Clause
"""mcroute.pymemcache: pymemcache's HashClient with every key placed where mcroute places it.

Two one-line forms. This module's HashClient takes mcroute's server
source and follows both its placement and its membership:

    from mcroute.pymemcache import HashClient
    mc = HashClient(state="/run/mcroute/pool", connect_timeout=1, timeout=1)
    mc = HashClient(servers=["10.0.0.1:11211", "10.0.0.2:11211"], client="php-memcached")

or pymemcache's own HashClient keeps its server list and takes mcroute's
placement as its hasher:

    from pymemcache.client.hash import HashClient
    import mcroute.pymemcache
    mc = HashClient(SERVERS, hasher=mcroute.pymemcache.hasher(servers=SERVERS))

hasher(**source) takes mcroute.Client's source and placement keywords
(servers=, server_file=, snapshot=, state=, etcd= with pool=; mode=,
client=, hash= with a server list or file); servers may be pymemcache's
own list ((host, port) tuples or "host:port" strings). It returns a class:
HashClient makes one instance (it calls hasher() with no argument), and
each instance places keys with its own mcroute.Client, which opens no
connection. get_node(key) is the owner `mcroute locate` names with the same
source, written as HashClient's node key "host:port" (an IPv6 host without
brackets, as pymemcache writes it), so give both the same servers: one
HashClient spells otherwise (a host name for an address) is a node it does
not have. A snapshot file is re-read when it changes (at most once a
second), a state at every key. Before a state or an etcd pool has a
snapshot, locate raises mcroute.Error, and so does the HashClient call,
whatever ignore_exc says (it is no server's failure).

A key whose owner HashClient cannot reach fails; it never goes to another
server. get_node returns None when mcroute's owner is not a node of the
HashClient: one it was never given (a server the state added), or one
pymemcache removed as dead (remove_node). HashClient then raises
MemcacheError (this module's HashClient: OwnerUnavailable) or, with
ignore_exc=True, returns the call's default: get its default, set False,
get_many leaves the key out, set_many lists it as failed. pymemcache's own
hashers move a dead server's keys to another server; that other server
then holds copies no other process of the fleet reads or writes (they
still use the owner, or fail on it), and when pymemcache takes the server
back after dead_timeout its keys return to it with the values they had
before the failure, missing every write made meanwhile: a stale read.
Failing the key, as mcroute's fail-fast policy does, leaves one copy of
each key, on its owner.

key_prefix: HashClient gives get_node the key without its key_prefix
(pymemcache/client/hash.py, HashClient._get_client), and that is the key
placed: the server holding key_prefix + key is the one mcroute.Client
with the same key_prefix uses for the key, and libmemcached with a
namespace (unless HASH_WITH_NAMESPACE). Hashing the prefix too is the
snapshot's business (its key-prefix line), which locate applies.

This module's HashClient(servers=... | server_file= | snapshot= | state= |
etcd=, pool=, mode=, client=, hash=, **pymemcache_kwargs) takes every
keyword of pymemcache's HashClient but hasher. It starts with a client for
each server of mcroute's current snapshot whose id is its address (every
server of a list or a server file; a named server's id is not an address,
and one written like "host:port" gets a client at that address, used by
no key), adds one for any server mcroute places a key on that it has none
for, and, when the snapshot's epoch changes, drops those whose server left
it (a named server's client is dropped too, and made again for its next
key). It looks at the epoch at each key; flush_all, quit and close reach
the clients it has then. The servers pymemcache marks dead stay dead until
its dead_timeout, as in pymemcache; their keys raise OwnerUnavailable
meanwhile.
mc.hasher.client is the mcroute.Client placing keys (locate, servers,
epoch).

Threads: pymemcache's HashClient is not thread-safe (its failed and dead
servers, and each server's one socket, unless use_pooling), and an
mcroute.Client serves one thread at a time: give each thread its own
HashClient (threading.local), even with use_pooling=True. The class
hasher() returns may be shared: each HashClient makes its own instance.
Fork: make HashClients after forking; pymemcache's sockets are not
re-opened in a child.
"""

import contextlib

from pymemcache.client.hash import HashClient as _PymemcacheHashClient
from pymemcache.exceptions import MemcacheError

import mcroute

__all__ = ["HashClient", "MCRouteHasher", "OwnerUnavailable", "hasher"]

# mcroute.Client's keywords for where the servers are and how keys are
# placed: all a hasher takes, since it never talks to a server (a
# key_prefix or timeout given to it would be silently meaningless).
SOURCE_KEYWORDS = ("servers", "server_file", "snapshot", "state", "etcd", "pool", "mode",
                   "client", "hash")


class OwnerUnavailable(MemcacheError):
    """The key's owner is marked dead by pymemcache (or has no client): the
    key fails rather than be served by another server."""


def server_text(server):
    """A pymemcache server ((host, port), [host, port] or a str) as mcroute
    writes one: "host:port", "[v6]:port"."""
    if isinstance(server, (tuple, list)) and len(server) == 2:
        host, port = server
        return ("[%s]:%s" if ":" in host else "%s:%s") % (host, port)
    return server


def address(text):
    """(host, port) of "host:port" or "[v6]:port", brackets taken off as
    pymemcache's normalize_server_spec does; None for a text that is no
    address (a named server's id)."""
    host, sep, port = text.rpartition(":")
    if not sep or not (port.isascii() and port.isdigit()) or not 0 < int(port) < 65536:
        return None
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    elif ":" in host:
        return None
    return (host, int(port)) if host else None


def node_key(server):
    """HashClient's key for a (host, port) server ("host:port" unbracketed,
    as its _make_client_key writes it)."""
    return "%s:%s" % server


def source_of(keywords):
    """mcroute.Client's keywords from hasher()'s: None dropped, unknown
    names refused, a pymemcache server list written as mcroute's."""
    unknown = sorted(set(keywords) - set(SOURCE_KEYWORDS))
    if unknown:
        raise TypeError("mcroute.pymemcache: unknown keyword %s (a hasher takes %s)"
                        % (", ".join(unknown), ", ".join(SOURCE_KEYWORDS)))
    source = {k: v for k, v in keywords.items() if v is not None}
    servers = source.get("servers")
    if servers is not None and not isinstance(servers, str):
        source["servers"] = [server_text(s) for s in servers]
    return source


class MCRouteHasher:
    """pymemcache's hasher (add_node, remove_node, get_node) answered by an
    mcroute.Client's placement; hasher() makes subclasses with `source` set."""

    source = {}

    def __init__(self):
        self.client = mcroute.Client(**self.source)
        self.nodes = set()    # HashClient's node keys (add_node)
        self.dead = set()     # those it removed as dead (remove_node)
        self.adopt = None     # this module's HashClient: a client for a new owner
        self.refused = None   # the node of the last key get_node refused

    def add_node(self, node):
        self.nodes.add(node)
        self.dead.discard(node)

    def remove_node(self, node):
        # HashClient calls this only when it marks the server dead: its keys
        # now fail, until add_node brings it back (after dead_timeout).
        if node in self.nodes:
            self.nodes.discard(node)
            self.dead.add(node)

    def forget(self, node):
        """The node is gone from HashClient altogether (its server left)."""
        self.nodes.discard(node)
        self.dead.discard(node)

    def get_node(self, key):
        """The owner's node key, or None when HashClient cannot reach it."""
        server = address(self.client.locate(key))
        node = node_key(server)
        if node in self.nodes:
            return node
        if node not in self.dead and self.adopt is not None:
            return self.adopt(server)
        self.refused = node
        return None


def hasher(**source):
    """A hasher class for pymemcache's HashClient(..., hasher=) placing keys
    as mcroute.Client(**source) does (see the module's documentation)."""
    return type("MCRouteHasher", (MCRouteHasher,), {"source": source_of(source)})


class HashClient(_PymemcacheHashClient):
    """pymemcache's HashClient whose servers and placement are mcroute's."""

    def __init__(self, servers=None, *, server_file=None, snapshot=None, state=None, etcd=None,
                 pool=None, mode=None, client=None, hash=None, **kwargs):
        if "hasher" in kwargs:
            raise TypeError("mcroute.pymemcache.HashClient places keys by mcroute: it takes "
                            "no hasher")
        router = hasher(servers=servers, server_file=server_file, snapshot=snapshot,
                        state=state, etcd=etcd, pool=pool, mode=mode, client=client,
                        hash=hash)()
        self._epoch = None   # the epoch whose servers the clients are
        self._batch = 0      # get_many or set_many under way: no client dropped
        super().__init__([], hasher=lambda: router, **kwargs)
        router.adopt = self._adopt
        self._follow()

    def _adopt(self, server):
        """A client for a server mcroute places a key on; its node key."""
        self.add_server(server)
        return node_key(server)

    def _follow(self):
        # A batch looks its clients up again after placing every key
        # (self.clients[...] in get_many and set_many), so none may go
        # before it ends; the change is taken at the next key.
        if self._batch:
            return
        epoch = self.hasher.client.epoch()
        if epoch != self._epoch:
            self._epoch = epoch
            self._sync()

    def _sync(self):
        """Clients for the snapshot's servers whose ids are addresses; none
        for a server that left it."""
        servers = {}
        for sid in self.hasher.client.servers():
            server = address(sid)
            if server is not None:
                servers[node_key(server)] = server
        for node in [n for n in self.clients if n not in servers]:
            self._drop(node)
        for node, server in servers.items():
            if node not in self.clients:
                self.add_server(server)

    def _drop(self, node):
        client = self.clients.pop(node)
        self.hasher.forget(node)
        # pymemcache keeps its failed and dead servers by client.server
        # (hash.py); a dropped one must not be retried and re-added.
        self._failed_clients.pop(client.server, None)
        self._dead_clients.pop(client.server, None)
        client.close()

    def _get_client(self, key):
        self._follow()
        self.hasher.refused = None
        try:
            return super()._get_client(key)
        except MemcacheError:
            node = self.hasher.refused
            if node is None:
                raise
            raise OwnerUnavailable(
                "key %r: its server %s is marked dead; mcroute fails the key rather than "
                "serve it from another server (pymemcache tries the server again after "
                "dead_timeout=%s s)" % (key, node, self.dead_timeout)) from None

    @contextlib.contextmanager
    def _one_batch(self):
        self._batch += 1
        try:
            yield
        finally:
            self._batch -= 1

    def get_many(self, keys, *args, **kwargs):
        with self._one_batch():
            return super().get_many(keys, *args, **kwargs)

    def set_many(self, values, *args, **kwargs):
        with self._one_batch():
            return super().set_many(values, *args, **kwargs)

    # pymemcache binds these aliases to its own methods (hash.py); they must
    # reach the overrides above.
    get_multi = get_many
    set_multi = set_many
