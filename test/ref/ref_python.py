#!/usr/bin/python3
# ref_python.py: where pymemcache, python-memcached and pylibmc put keys, asked of the installed clients (test_clients' reference).
#
# Usage: ref_python.py CLIENT < configs     (protocol: test/ref/README.md)
# CLIENT: pymemcache | python-memcached | pylibmc | pylibmc-ketama
#
# Nothing here computes a placement; each answer comes from the client's own code:
# - pymemcache: HashClient._get_client(key), no connection made (the node name is
#   "host:port" from the (host, port) tuple; the hasher picks the node).
# - python-memcached: Client._get_server(key), which connects to the chosen server and
#   rehashes when that fails, so real memcached servers listen on every configured
#   address; a server marked dead is a failure of this program, not an answer.
# - pylibmc, pylibmc-ketama: no "which server" call is relied on; the key is stored on
#   every server of the config with value = that server's list index (raw text
#   protocol), then read through pylibmc: the value is the index of the server it chose.
#   Client.hash(key) (libmemcached's memcached_generate_hash) is asked too, and any
#   disagreement with the live answer is fatal.
# Live memcached processes are reused across configs that repeat an address, capped in
# number (least recently used stopped first) and all stopped by PID before exiting.
# Must run with Debian's python (/usr/bin/python3), where the python3-* clients are.

import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections import OrderedDict, deque

MEMCACHED = "/usr/bin/memcached"
START_DEADLINE = 10.0   # seconds for a new memcached to accept a connection
MAX_LIVE = 256          # memcached processes kept running at once
SOCK_TIMEOUT = 10.0     # raw-protocol socket timeout, seconds
CLIENTS = ("pymemcache", "python-memcached", "pylibmc", "pylibmc-ketama")


class InputError(Exception):
    """Malformed input: the program stops with status 2."""


class Failure(Exception):
    """This program (not the client) failed: status 1."""


class Refused(Exception):
    """The client refused the configuration: answered as `config ID error MSG`."""


# ---------------------------------------------------------------- input

def read_configs(stream):
    """Yields (ID, [(host, port, weight)], [key str]) per config; raises InputError."""
    lineno = 0

    def line():
        nonlocal lineno
        raw = stream.readline()
        if raw == "":
            raise InputError("line %d: unexpected end of input" % (lineno + 1))
        lineno += 1
        return raw.rstrip("\n").split()

    while True:
        raw = stream.readline()
        if raw == "":
            return
        lineno += 1
        f = raw.rstrip("\n").split()
        if len(f) != 3 or f[0] != "config" or not f[2].isdigit():
            raise InputError("line %d: expected 'config ID N', got %r" % (lineno, raw))
        cid, n = f[1], int(f[2])
        servers = []
        for _ in range(n):
            f = line()
            if (len(f) != 4 or f[0] != "server" or not f[2].isdigit()
                    or not f[3].isdigit()):
                raise InputError("line %d: expected 'server HOST PORT WEIGHT'" % lineno)
            port = int(f[2])
            if not 1 <= port <= 65535:
                raise InputError("line %d: port %d out of range" % (lineno, port))
            servers.append((f[1], port, int(f[3])))
        f = line()
        if len(f) != 2 or f[0] != "keys" or not f[1].isdigit():
            raise InputError("line %d: expected 'keys M'" % lineno)
        keys = []
        for _ in range(int(f[1])):
            f = line()
            try:
                if len(f) != 1:
                    raise ValueError("one hex word expected")
                b = bytes.fromhex(f[0])
                k = b.decode("utf-8")
            except ValueError as e:
                raise InputError("line %d: bad key: %s" % (lineno, e))
            if not 1 <= len(b) <= 250 or any(c <= 0x20 or c == 0x7f for c in b):
                raise InputError("line %d: not a legal memcached key: %r" % (lineno, k))
            keys.append(k)
        yield cid, servers, keys


# ---------------------------------------------------------------- live servers

class LiveServers:
    """Real memcached processes on loopback addresses, keyed by (ip, port)."""

    def __init__(self):
        self.procs = OrderedDict()   # (ip, port) -> Popen, least recently used first
        self.socks = {}              # (ip, port) -> raw text-protocol socket
        self.log = tempfile.TemporaryFile()

    def ensure(self, addrs):
        """Makes every (ip, port) of addrs listen; returns once each accepts."""
        want = set(addrs)
        for a in addrs:
            if a in self.procs:
                self.procs.move_to_end(a)
        new = [a for a in dict.fromkeys(addrs) if a not in self.procs]
        excess = len(self.procs) + len(new) - MAX_LIVE
        for a in list(self.procs):
            if excess <= 0:
                break
            if a not in want:
                self.stop(a)
                excess -= 1
        for ip, port in new:
            self.procs[(ip, port)] = subprocess.Popen(
                [MEMCACHED, "-u", "nobody", "-l", ip, "-p", str(port),
                 "-U", "0", "-m", "8", "-t", "1"],
                stdin=subprocess.DEVNULL, stdout=self.log, stderr=self.log)
        deadline = time.monotonic() + START_DEADLINE
        for a in new:
            self.socks[a] = self._connect(a, deadline)

    def _connect(self, a, deadline):
        while True:
            p = self.procs[a]
            if p.poll() is not None:
                self.log.seek(0)
                raise Failure("memcached on %s:%d exited with %d: %s" % (
                    a[0], a[1], p.returncode,
                    self.log.read()[-500:].decode("utf-8", "replace")))
            try:
                s = socket.create_connection(a, timeout=SOCK_TIMEOUT)
                s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                return s
            except (ConnectionRefusedError, socket.timeout):
                if time.monotonic() > deadline:
                    raise Failure("memcached on %s:%d does not accept connections"
                                  % a)
                time.sleep(0.002)

    def store_indexes(self, addrs, keys):
        """Empties each server, then stores every key on server i with value i."""
        kb = [k.encode("utf-8") for k in dict.fromkeys(keys)]
        for i, a in enumerate(addrs):
            v = b"%d" % i
            self.socks[a].sendall(
                b"flush_all noreply\r\n"
                + b"".join(b"set %s 0 0 %d noreply\r\n%s\r\n" % (k, len(v), v)
                           for k in kb)
                + b"version\r\n")
        for a in addrs:
            buf = b""
            while not buf.endswith(b"\r\n"):
                chunk = self.socks[a].recv(4096)
                if not chunk:
                    raise Failure("memcached on %s:%d closed the connection" % a)
                buf += chunk
            if not buf.startswith(b"VERSION "):
                raise Failure("memcached on %s:%d answered %r" % (a[0], a[1], buf[:200]))

    def stop(self, a):
        s = self.socks.pop(a, None)
        if s is not None:
            s.close()
        p = self.procs.pop(a)
        if p.poll() is None:
            p.kill()
        p.wait()

    def stop_all(self):
        for a in list(self.procs):
            self.stop(a)


def resolve(host):
    """The IPv4 address a host name (or literal) has in this namespace's /etc/hosts."""
    try:
        return socket.gethostbyname(host)
    except OSError as e:
        raise Failure("cannot resolve %s: %s" % (host, e))


# ---------------------------------------------------------------- clients

def place_pymemcache(servers, keys):
    from pymemcache.client.hash import HashClient
    from pymemcache.exceptions import MemcacheError
    for h, p, w in servers:
        if w != 1:
            raise Refused("pymemcache has no weights (server %s:%d weight %d)" % (h, p, w))
    # allow_unicode_keys only lets a non-ASCII key through check_key_helper; the
    # hasher is given the caller's key unchanged either way.
    hc = HashClient([(h, p) for h, p, _ in servers], use_pooling=False,
                    allow_unicode_keys=True)
    index = {(h, p): i for i, (h, p, _) in enumerate(servers)}
    try:
        return [index[hc._get_client(k).server] for k in keys]
    except MemcacheError as e:
        raise Refused("%s: %s" % (type(e).__name__, e))


def place_python_memcached(servers, keys, live):
    import memcache
    if not keys:
        return []
    live.ensure([(resolve(h), p) for h, p, _ in servers])
    mc = memcache.Client([("%s:%d" % (h, p), w) for h, p, w in servers])
    try:
        index = {id(s): i for i, s in enumerate(mc.servers)}
        out = []
        for k in keys:
            server, _ = mc._get_server(mc._encode_key(k))
            if server is None:
                raise Refused("python-memcached chose no server")
            out.append(index[id(server)])
        dead = [str(s) for s in mc.servers if s.deaduntil]
        if dead:
            raise Failure("python-memcached marked live servers dead: %s" % dead)
        return out
    finally:
        mc.disconnect_all()


def place_pylibmc(servers, keys, live, behaviors):
    import pylibmc
    if not keys:
        return []
    addrs = [(resolve(h), p) for h, p, _ in servers]
    seen = {}
    for i, a in enumerate(addrs):
        if a in seen:
            raise Refused("servers %d and %d are both %s:%d: one memcached, the live "
                          "way cannot tell them apart" % (seen[a], i, a[0], a[1]))
        seen[a] = i
    live.ensure(addrs)
    live.store_indexes(addrs, keys)
    specs = ["%s:%d" % (h, p) if w == 1 else "%s:%d:%d" % (h, p, w)
             for h, p, w in servers]
    try:
        mc = pylibmc.Client(specs, behaviors=behaviors)
    except (ValueError, pylibmc.Error) as e:
        raise Refused("pylibmc.Client: %s" % e)
    try:
        out = []
        for k in keys:
            try:
                v = mc.get(k)
            except (pylibmc.ConnectionError, pylibmc.ServerDown, pylibmc.ServerDead,
                    pylibmc.Timeout, pylibmc.SocketCreateError) as e:
                raise Failure("pylibmc get %r: %s" % (k, e))
            except (ValueError, pylibmc.Error) as e:
                raise Refused("pylibmc get %r: %s" % (k, e))
            if v is None or not v.isdigit() or int(v) >= len(servers):
                raise Failure("pylibmc get %r returned %r" % (k, v))
            i = int(v)
            h = mc.hash(k)
            if h != i:
                raise Failure("pylibmc get %r came from server %d but Client.hash says %d"
                              % (k, i, h))
            out.append(i)
        return out
    finally:
        mc.disconnect_all()


# ---------------------------------------------------------------- main

def answer(cid, result):
    kind, val = result
    if kind == "ok":
        line = " ".join(["config", cid, "ok"] + [str(i) for i in val])
    else:
        line = "config %s error %s" % (cid, " ".join(str(val).split()) or "refused")
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def pymemcache_job(servers, keys):
    try:
        return ("ok", place_pymemcache(servers, keys))
    except Refused as e:
        return ("error", str(e))


def run_pymemcache(configs):
    """pymemcache hashes in pure Python: the configs are shared among the CPUs."""
    workers = len(os.sched_getaffinity(0))
    if workers < 2:
        for cid, servers, keys in configs:
            answer(cid, pymemcache_job(servers, keys))
        return
    import multiprocessing
    with multiprocessing.get_context("fork").Pool(workers) as pool:
        pending = deque()
        try:
            for cid, servers, keys in configs:
                pending.append((cid, pool.apply_async(pymemcache_job, (servers, keys))))
                while len(pending) > 2 * workers:
                    cid0, r = pending.popleft()
                    answer(cid0, r.get())
        finally:
            # Configs read before a malformed line are still answered, in order.
            while pending:
                cid0, r = pending.popleft()
                answer(cid0, r.get())


def run_live(client, configs):
    live = LiveServers()
    try:
        for cid, servers, keys in configs:
            try:
                if client == "python-memcached":
                    r = place_python_memcached(servers, keys, live)
                else:
                    r = place_pylibmc(servers, keys, live,
                                      {"ketama": True} if client == "pylibmc-ketama"
                                      else None)
                answer(cid, ("ok", r))
            except Refused as e:
                answer(cid, ("error", str(e)))
    finally:
        live.stop_all()


def on_signal(signum, frame):
    raise SystemExit(128 + signum)


def main(argv):
    if len(argv) != 2 or argv[1] not in CLIENTS:
        sys.stderr.write("usage: ref_python.py CLIENT < configs  (CLIENT: %s)\n"
                         % " | ".join(CLIENTS))
        return 2
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGHUP, on_signal)
    configs = read_configs(sys.stdin)
    try:
        if argv[1] == "pymemcache":
            run_pymemcache(configs)
        else:
            run_live(argv[1], configs)
    except InputError as e:
        sys.stderr.write("ref_python.py: malformed input: %s\n" % e)
        return 2
    except Failure as e:
        sys.stderr.write("ref_python.py %s: %s\n" % (argv[1], e))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
