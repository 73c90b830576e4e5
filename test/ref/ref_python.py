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
# Live memcached processes listen on exactly the configs' addresses, each on many of
# them (never two of one config: see LiveServers), are reused across configs, and are
# all stopped by PID (kill, wait) before exiting, on errors too.
# Must run with Debian's python (/usr/bin/python3), where the python3-* clients are.

import io
import os
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import time
import queue
import re
import threading

MEMCACHED = "/usr/bin/memcached"
START_DEADLINE = 10.0   # seconds for a new memcached to accept a connection
MAX_PROCS = 128         # memcached processes kept at once (about 4.5 MB resident each)
LISTENERS = 100         # addresses one memcached listens on, at most
SOCK_TIMEOUT = 10.0     # raw-protocol socket timeout, seconds
ILLEGAL_KEY_BYTE = re.compile(rb"[\x00-\x20\x7f]")   # space and control bytes
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
            if not 1 <= len(b) <= 250 or ILLEGAL_KEY_BYTE.search(b):
                raise InputError("line %d: not a legal memcached key: %r" % (lineno, k))
            keys.append(k)
        yield cid, servers, keys


# ---------------------------------------------------------------- live servers

class Proc:
    """One memcached process: its listening addresses and a raw text-protocol socket."""

    def __init__(self, popen, addrs):
        self.popen = popen
        self.addrs = addrs
        self.sock = None


class LiveServers:
    """Real memcached processes listening on exactly the configs' (ip, port) pairs.

    Starting a memcached costs ~20 ms here, and the tests' ports are mostly random,
    so one process per address would mean thousands of starts. One process listens
    on many addresses instead (memcached -l ip:port,ip:port,...), under one rule:
    no config has two addresses of the same process, so within a config every
    server is a store of its own (a greedy colouring of the addresses that share a
    config; configs read ahead together are coloured together)."""

    def __init__(self):
        self.procs = []     # Proc, oldest first
        self.where = {}     # (ip, port) -> the Proc listening on it
        self.log = tempfile.TemporaryFile()

    def ensure(self, batch):
        """batch: lists of (ip, port), one per config. Makes every address listen, in
        processes that serve at most one address of each list; returns once they accept."""
        # a running process that serves two addresses of one config must go
        retire = set()
        for addrs in batch:
            seen = set()
            for a in set(addrs):
                p = self.where.get(a)
                if p is not None:
                    if p in seen:
                        retire.add(p)
                    seen.add(p)
        if len(self.procs) - len(retire) > MAX_PROCS:
            used = {self.where.get(a) for addrs in batch for a in addrs}
            retire.update(p for p in self.procs if p not in used)
        self.stop(retire)
        # colour the addresses no process serves
        adj, order = {}, []
        for addrs in batch:
            free = [a for a in dict.fromkeys(addrs) if a not in self.where]
            for a in free:
                if a not in adj:
                    adj[a] = set()
                    order.append(a)
                adj[a].update(free)
        colour, groups = {}, []
        for a in order:
            taken = {colour[n] for n in adj[a] if n in colour}
            c = next((c for c in range(len(groups))
                      if c not in taken and len(groups[c]) < LISTENERS), len(groups))
            if c == len(groups):
                groups.append([])
            groups[c].append(a)
            colour[a] = c
        new = []
        for addrs in groups:
            popen = subprocess.Popen(
                [MEMCACHED, "-u", "nobody",
                 "-l", ",".join("%s:%d" % a for a in addrs),
                 "-U", "0", "-m", "8", "-t", "1"],
                stdin=subprocess.DEVNULL, stdout=self.log, stderr=self.log)
            p = Proc(popen, addrs)
            self.procs.append(p)
            for a in addrs:
                self.where[a] = p
            new.append(p)
        deadline = time.monotonic() + START_DEADLINE
        for p in new:
            # memcached binds and listens on every -l entry, in order, before it
            # serves: the last one accepting means all do
            p.sock = self._connect(p, p.addrs[-1], deadline)

    def _connect(self, p, a, deadline):
        while True:
            if p.popen.poll() is not None:
                self.log.seek(0)
                raise Failure("memcached on %s exited with %d: %s" % (
                    ",".join("%s:%d" % x for x in p.addrs), p.popen.returncode,
                    self.log.read()[-500:].decode("utf-8", "replace")))
            try:
                s = socket.create_connection(a, timeout=SOCK_TIMEOUT)
                s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                return s
            except (ConnectionRefusedError, socket.timeout):
                if time.monotonic() > deadline:
                    raise Failure("memcached on %s:%d does not accept connections" % a)
                time.sleep(0.002)

    def store_indexes(self, addrs, keys):
        """Empties each server, then stores every key on server i with value i."""
        kb = [k.encode("utf-8") for k in dict.fromkeys(keys)]
        procs = [self.where[a] for a in addrs]
        if len(set(procs)) != len(procs):
            raise Failure("two servers of one config in one memcached (colouring bug)")
        for i, p in enumerate(procs):
            v = b"%d" % i
            # "set K 0 0 LEN noreply\r\nV\r\n" for every key K, built by one join.
            p.sock.sendall(
                b"flush_all noreply\r\nset "
                + (b" 0 0 %d noreply\r\n%s\r\nset " % (len(v), v)).join(kb)
                + b" 0 0 %d noreply\r\n%s\r\nversion\r\n" % (len(v), v))
        for a, p in zip(addrs, procs):
            buf = b""
            while not buf.endswith(b"\r\n"):
                chunk = p.sock.recv(4096)
                if not chunk:
                    raise Failure("memcached on %s:%d closed the connection" % a)
                buf += chunk
            if not buf.startswith(b"VERSION "):
                raise Failure("memcached on %s:%d answered %r" % (a[0], a[1], buf[:200]))

    def stop(self, procs):
        """Kills procs, then reaps them (a reap can take ~20 ms: overlapped)."""
        procs = list(procs)
        for p in procs:
            if p.sock is not None:
                p.sock.close()
            for a in p.addrs:
                del self.where[a]
            self.procs.remove(p)
            if p.popen.poll() is None:
                p.popen.kill()
        for p in procs:
            p.popen.wait()

    def stop_all(self):
        self.stop(list(self.procs))


_resolved = {}


def resolve(host):
    """The IPv4 address a host name (or literal) has in this namespace's /etc/hosts."""
    if host not in _resolved:
        try:
            _resolved[host] = socket.gethostbyname(host)
        except OSError as e:
            raise Failure("cannot resolve %s: %s" % (host, e))
    return _resolved[host]


def live_addrs(client, servers):
    """The (ip, port) of each server; None when the live way cannot tell two apart."""
    addrs = [(resolve(h), p) for h, p, _ in servers]
    # python-memcached is asked its _Host object: shared addresses do not matter
    if client != "python-memcached" and len(set(addrs)) != len(addrs):
        return None
    return addrs


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


def place_python_memcached(servers, keys):
    """Its servers must be listening already (LiveServers.ensure)."""
    import memcache
    mc = memcache.Client([("%s:%d" % (h, p), w) for h, p, w in servers])

    def check_alive():
        dead = [str(s) for s in mc.servers if s.deaduntil]
        if dead:
            raise Failure("python-memcached marked live servers dead: %s" % dead)

    try:
        index = {id(s): i for i, s in enumerate(mc.servers)}
        out = []
        for k in keys:
            server, _ = mc._get_server(mc._encode_key(k))
            if server is None:
                check_alive()
                raise Refused("python-memcached chose no server")
            out.append(index[id(server)])
        check_alive()
        return out
    finally:
        mc.disconnect_all()


def place_pylibmc(servers, keys, live, addrs, behaviors):
    import pylibmc
    if addrs is None:
        raise Refused("two servers share one address: the live way cannot tell them apart")
    live.store_indexes(addrs, keys)
    specs = ["%s:%d" % (h, p) if w == 1 else "%s:%d:%d" % (h, p, w)
             for h, p, w in servers]
    try:
        mc = pylibmc.Client(specs, behaviors=behaviors)
    except (ValueError, pylibmc.Error) as e:
        raise Refused("pylibmc.Client: %s" % e)
    try:
        # get_multi is libmemcached's mget, the very call get makes with one key
        # (memcached_get_by_key -> memcached_mget_by_key), each key placed by
        # memcached_generate_hash_with_redistribution; one call saves 500 round trips.
        try:
            got = mc.get_multi(list(dict.fromkeys(keys)))
        except (pylibmc.ConnectionError, pylibmc.ServerDown, pylibmc.ServerDead,
                pylibmc.Timeout, pylibmc.SocketCreateError) as e:
            raise Failure("pylibmc get_multi: %s" % e)
        except (ValueError, pylibmc.Error) as e:
            raise Refused("pylibmc get_multi: %s" % e)
        out = []
        for k in keys:
            v = got.get(k)
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
    """pymemcache hashes in pure Python: the configs are shared among the CPUs,
    one forked worker per CPU and batch, each answering its share through a
    pipe. Not multiprocessing.Pool: a Pool whose worker dies (a signal, the OOM
    killer) waits for that worker's result forever; here every worker is
    reaped and one that did not exit 0 fails this program, naming it."""
    workers = len(os.sched_getaffinity(0))
    for batch in read_ahead(configs):
        jobs = [c for c in batch if isinstance(c, tuple)]
        if workers < 2 or len(jobs) < 2:
            for cid, servers, keys in jobs:
                answer(cid, pymemcache_job(servers, keys))
        else:
            results = forked_map(lambda c: pymemcache_job(c[1], c[2]), jobs, workers)
            for c, r in zip(jobs, results):
                answer(c[0], r)
        if batch[-1] is None:
            return
        if isinstance(batch[-1], InputError):
            raise batch[-1]


def forked_map(fn, items, workers):
    """[fn(x) for x in items], x shared round-robin among up to `workers` forked
    children; each child sends its pickled results through its own pipe. Raises
    Failure when a child exits other than 0 (its traceback is on stderr) or its
    answer does not unpickle to one result per item."""
    import pickle
    import traceback
    n = min(workers, len(items))
    sys.stdout.flush()
    sys.stderr.flush()
    kids = []
    try:
        for w in range(n):
            r, wfd = os.pipe()
            pid = os.fork()
            if pid == 0:
                status = 1
                try:
                    os.close(r)
                    data = pickle.dumps([fn(x) for x in items[w::n]])
                    with os.fdopen(wfd, "wb") as out:
                        out.write(data)
                    status = 0
                except BaseException:
                    traceback.print_exc()
                finally:
                    sys.stderr.flush()
                    os._exit(status)
            os.close(wfd)
            kids.append((pid, r))
        parts = []
        for w, (pid, r) in enumerate(kids):
            kids[w] = (pid, None)
            with os.fdopen(r, "rb") as f:
                data = f.read()
            _, st = os.waitpid(pid, 0)
            kids[w] = (None, None)
            if os.waitstatus_to_exitcode(st) != 0:
                raise Failure("pymemcache worker %d of %d (pid %d) ended with %s"
                              % (w + 1, n, pid, describe_status(st)))
            try:
                part = pickle.loads(data)
            except Exception as e:
                raise Failure("pymemcache worker %d of %d: unreadable answer (%d bytes): %r"
                              % (w + 1, n, len(data), e))
            if not isinstance(part, list) or len(part) != len(items[w::n]):
                raise Failure("pymemcache worker %d of %d answered %s results for %d configs"
                              % (w + 1, n, len(part) if isinstance(part, list) else "no",
                                 len(items[w::n])))
            parts.append(part)
    finally:
        for pid, r in kids:  # after a failure: no worker outlives this program
            try:
                if r is not None:
                    os.close(r)
            except OSError:
                pass
            try:
                if pid is not None:
                    os.kill(pid, signal.SIGKILL)
                    os.waitpid(pid, 0)
            except OSError:
                pass
    out = [None] * len(items)
    for w, part in enumerate(parts):
        out[w::n] = part
    return out


def describe_status(st):
    if os.WIFSIGNALED(st):
        return "signal %d (%s)" % (os.WTERMSIG(st), signal.Signals(os.WTERMSIG(st)).name)
    return "exit status %d" % os.WEXITSTATUS(st)


def read_ahead(configs):
    """Yields lists of configs: each config read so far and not yet answered, with
    at least one; the last list ends with None (end of input) or the InputError of
    a malformed input, raised after the configs before it are answered. From a pipe
    a thread reads, so that a driver that waits for each answer is served."""
    if stat.S_ISREG(os.fstat(0).st_mode):
        # a file (as test_clients gives) holds every config already: one batch, so
        # one colouring, the fewest processes
        batch = []
        try:
            batch.extend(configs)
            batch.append(None)
        except InputError as e:
            batch.append(e)
        yield batch
        return
    q = queue.Queue()

    def reader():
        try:
            for c in configs:
                q.put(c)
            q.put(None)
        except InputError as e:
            q.put(e)
        except Exception as e:  # the main thread must not wait forever
            q.put(InputError("reading stdin: %r" % e))

    threading.Thread(target=reader, daemon=True).start()
    while True:
        batch = [q.get()]
        while isinstance(batch[-1], tuple):
            try:
                batch.append(q.get_nowait())
            except queue.Empty:
                break
        yield batch


def run_live(client, configs):
    behaviors = {"ketama": True} if client == "pylibmc-ketama" else None
    live = LiveServers()
    try:
        for batch in read_ahead(configs):
            work = [(c, live_addrs(client, c[1]) if c[2] else None)
                    for c in batch if isinstance(c, tuple)]
            live.ensure([addrs for _, addrs in work if addrs is not None])
            for (cid, servers, keys), addrs in work:
                try:
                    if not keys:
                        r = []
                    elif client == "python-memcached":
                        r = place_python_memcached(servers, keys)
                    else:
                        r = place_pylibmc(servers, keys, live, addrs, behaviors)
                    answer(cid, ("ok", r))
                except Refused as e:
                    answer(cid, ("error", str(e)))
            if batch[-1] is None:
                return
            if isinstance(batch[-1], InputError):
                raise batch[-1]
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
    configs = read_configs(io.TextIOWrapper(sys.stdin.buffer, encoding="utf-8",
                                            errors="replace"))
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
