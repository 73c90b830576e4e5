# SPDX-License-Identifier: BSD-3-Clause
"""bench_python.py: the mcroute Python package timed against pylibmc and pymemcache on the same real memcached servers in one run."""

# What is measured, in one run.
#
#  Four memcached servers (-t 1 -m 64 -U 0) on loopback ports picked here,
#  stopped by PID at the end (also on an error or SIGTERM). Five clients on
#  them: pylibmc (Client(servers, binary=False, behaviors={"ketama": True,
#  "tcp_nodelay": True})), pymemcache (HashClient(servers,
#  default_noreply=False): its sets wait for STORED as the others' do; its
#  default sends them noreply, which is not the same operation), mcroute
#  (Client(servers=...), the default text protocol), mcroute_meta (the same
#  with protocol="meta", an extra line without goals), loop_floor: the
#  same loops calling a dict's C methods instead of a client (no I/O: what
#  the interpreter's loop, one call and the check cost alone), and
#  raw_floor: the same rounds made by bench_pool's raw epoll client in C
#  (pool_floor.c, no library, no interpreter; bench_pyfloor.so, loaded with
#  ctypes, a whole loop per call) on keys of its own of the same sizes: what
#  no client can go under on these servers at this moment. Each GOAL line
#  gives the raw floor's own ratio beside mcroute's: a goal the floor misses
#  too is out of any client's reach on this host. It also gives
#  python_floor, a bound derived from the same repetition: a Python client
#  whose calls cost the raw floor plus the interpreter's loop (loop_floor)
#  and nothing more (keys/s from the two times added, CPU the two added).
#
#  Cases, on 10,000 keys of 10 bytes with 100-byte values (each client
#  stores them all before the timing: the placements differ): `get` and
#  `set` of 15,000 keys in a fixed pseudo-random order, `get_many100` and
#  `set_many100` (get_multi / set_multi for pylibmc), 600 calls of 100
#  distinct keys (--quick: 500 keys, 300 and 6 calls, 1 repetition). Every
#  get must return its key's value and every set must be stored (one
#  C-level compare a call, the same in every client's loop, the floor's
#  too); anything else, or an exception, exits 1.
#
#  Per case and client: keys/s (wall clock over the loop) and client CPU per
#  key (time.process_time_ns(): user + system of this process over the loop
#  only; getrusage splits it into user and system, by the kernel's ticks,
#  so the split is a sample). The servers run in other processes, but on
#  loopback the kernel's TCP receive work for what this process sends runs
#  in its send calls: its system time holds part of the servers' network
#  work, alike for every client. The garbage collector is off in the loops.
#
#  Repetitions interleaved: for each repetition, every client in an order
#  that rotates, each running every case. Medians over the repetitions and
#  their min-max range; the GOAL ratios are the medians of the
#  repetitions' ratios (a client against another in the same repetition,
#  so that a slow spell of the shared host cancels in the pair), the ratio
#  of the medians printed beside them, and that of the best repetitions
#  (the highest keys/s, the lowest CPU: on a shared host, the figures other
#  work touched least: a single get's CPU is bimodal there, about 6 us, or
#  13-21 us while other work runs, whatever the client).
#
#  Where the rest of the time goes: bench_pool (when built) times the C pool
#  and its raw epoll floor on the same rounds (one get or set in flight; a
#  100-key multi-get at a time; sets 100 in flight for set_many), in runs
#  of its own after this one's: INFO where lines put mcroute's CPU per key
#  beside the interpreter's loop (loop_floor) and the pool's own, and give
#  the kernel's share of each.

import argparse
import ctypes
import gc
import os
import platform
import random
import resource
import signal
import socket
import statistics
import subprocess
import sys
import time
import traceback
from pathlib import Path

NSERVERS = 4
MEMCACHED = "/usr/bin/memcached"
MANY = 100
VALUE_BYTES = 100
SEED = 7
CLIENTS = ["pylibmc", "pymemcache", "mcroute", "mcroute_meta", "loop_floor", "raw_floor"]
CASES = ["set", "get", "set_many100", "get_many100"]


class BenchFail(Exception):
    """A call failed or returned a wrong answer, or the setup did: exit 1."""


# ------------------------------------------------------------ options


def parse_args(argv):
    p = argparse.ArgumentParser(
        prog="bench_python",
        description="keys/s and client CPU per key of get, set, 100-key get_many and set_many: "
        "mcroute's Python package against pylibmc and pymemcache on %d real memcached "
        "servers. Output: INFO, RESULT and GOAL lines; exit 1 when a call fails or returns "
        "a wrong value, or the setup fails, never because of speed." % NSERVERS)
    p.add_argument("--quick", action="store_true", help="1 repetition, few keys: a smoke run")
    p.add_argument("--reps", type=int, default=7, help="repetitions (default 7)")
    p.add_argument("--bench-pool", default=None,
                   help="bench_pool, for the C pool's own figures (default: the build "
                        "tree's, beside the package; none: not run)")
    p.add_argument("--floor", default=None,
                   help="bench_pyfloor.so, the raw C client timed as raw_floor (default: the "
                        "build tree's, beside the package; its absence is a failure)")
    p.add_argument("--build-type", default=None, help="the build's CMAKE_BUILD_TYPE")
    p.add_argument("--verbose", action="store_true", help="a line per repetition and case")
    a = p.parse_args(argv)
    if not 1 <= a.reps <= 1001:
        p.error("--reps: from 1 to 1001")
    a.keys, a.gets, a.calls = (10000, 15000, 600) if not a.quick else (500, 300, 6)
    a.pool_keys, a.pool_reps = (5000, 5) if not a.quick else (1000, 1)
    if a.quick:
        a.reps = 1
    return a


# ------------------------------------------------------------ servers


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def listening(proc, port, seconds=10):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            return False  # the port was taken meanwhile
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return True
        except OSError:
            time.sleep(0.01)
    return False


def start_memcached(procs):
    """One memcached on a free port (appended to procs): its port."""
    if not os.access(MEMCACHED, os.X_OK):
        raise BenchFail("memcached is not installed (Debian package memcached)")
    for _ in range(20):
        port = free_port()
        argv = [MEMCACHED, "-l", "127.0.0.1", "-p", str(port), "-t", "1", "-m", "64", "-U", "0"]
        if os.getuid() == 0:
            argv += ["-u", "nobody"]
        proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        procs.append(proc)
        if listening(proc, port):
            return port
    raise BenchFail("memcached did not start on a free port in 20 tries")


def stop_all(procs):
    for proc in procs:
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGKILL)
        proc.wait()


# ------------------------------------------------------------ clients


def import_clients():
    try:
        import pylibmc
        import pymemcache
        from pymemcache.client.hash import HashClient
        import mcroute
    except ImportError as e:
        raise BenchFail("%s (pylibmc and pymemcache: Debian packages python3-pylibmc and "
                        "python3-pymemcache; mcroute: PYTHONPATH=BUILD/python)" % e)
    return pylibmc, pymemcache, HashClient, mcroute


class Ops:
    """A client's four calls as bound methods (no wrapper in the loops)."""

    def __init__(self, get, set_, get_many, set_many, close=None):
        self.get, self.set, self.get_many, self.set_many = get, set_, get_many, set_many
        self.close = close or (lambda: None)


def floor_ops():
    store = {}

    def set_many(values):
        store.update(values)
        return []

    def get_many(keys):
        return dict(zip(keys, map(store.__getitem__, keys)))

    return Ops(store.get, store.setdefault, get_many, set_many)


class RawFloor:
    """bench_pyfloor.so through ctypes: each call runs a whole loop in C
    (pool_floor.c checks every reply); its keys are its own, flr0000000 ..,
    enough for every case (get and set of keys 0..n-1; multi-gets of 100
    consecutive keys; set_many as sets 100 in flight)."""

    def __init__(self, path, ports, data):
        if not os.path.exists(path):
            raise BenchFail("%s is not built: cmake --build BUILD --target bench_pyfloor, or "
                            "give --floor" % path)
        lib = ctypes.CDLL(path)
        c = ctypes
        lib.pyfloor_new.restype = c.c_void_p
        lib.pyfloor_new.argtypes = [c.POINTER(c.c_int), c.c_size_t, c.c_size_t, c.c_size_t,
                                    c.c_char_p, c.c_size_t]
        for f in (lib.pyfloor_set, lib.pyfloor_get, lib.pyfloor_get_many):
            f.restype = c.c_uint
            f.argtypes = [c.c_void_p, c.c_size_t, c.c_uint]
        lib.pyfloor_error.restype = c.c_char_p
        lib.pyfloor_error.argtypes = [c.c_void_p]
        lib.pyfloor_free.argtypes = [c.c_void_p]
        self.lib = lib
        self.nkeys = max(len(data.pairs), len(data.batches) * MANY)
        err = c.create_string_buffer(512)
        self.h = lib.pyfloor_new((c.c_int * len(ports))(*ports), len(ports), self.nkeys,
                                 VALUE_BYTES, err, len(err))
        if not self.h:
            raise BenchFail("raw_floor: %s" % err.value.decode(errors="replace"))

    def check(self, problems):
        if problems:
            raise BenchFail("raw_floor: %d problems, the first: %s" % (
                problems, self.lib.pyfloor_error(self.h).decode(errors="replace")))

    def store(self):
        self.check(self.lib.pyfloor_set(self.h, self.nkeys, MANY))
        self.check(self.lib.pyfloor_get(self.h, self.nkeys, MANY))

    def get(self, n):
        self.check(self.lib.pyfloor_get(self.h, n, 1))
        return n

    def set(self, n):
        self.check(self.lib.pyfloor_set(self.h, n, 1))
        return n

    def get_many(self, calls):
        self.check(self.lib.pyfloor_get_many(self.h, calls, MANY))
        return calls * MANY

    def set_many(self, calls):
        self.check(self.lib.pyfloor_set(self.h, calls * MANY, MANY))
        return calls * MANY

    def close(self):
        if self.h:
            self.lib.pyfloor_free(self.h)
            self.h = None


def make_clients(ports, floor):
    pylibmc, _, HashClient, mcroute = import_clients()
    servers = ["127.0.0.1:%d" % p for p in ports]
    lmc = pylibmc.Client(servers, binary=False, behaviors={"ketama": True, "tcp_nodelay": True})
    pym = HashClient([("127.0.0.1", p) for p in ports], default_noreply=False)
    mcr = mcroute.Client(servers=servers)
    meta = mcroute.Client(servers=servers, protocol="meta")
    return {
        "pylibmc": Ops(lmc.get, lmc.set, lmc.get_multi, lmc.set_multi, lmc.disconnect_all),
        "pymemcache": Ops(pym.get, pym.set, pym.get_many, pym.set_many, pym.close),
        "mcroute": Ops(mcr.get, mcr.set, mcr.get_many, mcr.set_many, mcr.close),
        "mcroute_meta": Ops(meta.get, meta.set, meta.get_many, meta.set_many, meta.close),
        "loop_floor": floor_ops(),
        "raw_floor": floor,
    }


# ------------------------------------------------------------ data


class Data:
    """The keys, their values and the calls' arguments, the same for all."""

    def __init__(self, opt):
        rnd = random.Random(SEED)
        self.keys = ["key%07d" % i for i in range(opt.keys)]
        self.value = {k: ((k + ".") * 10).encode()[:VALUE_BYTES] for k in self.keys}
        self.pairs = [(k, self.value[k]) for k in (rnd.choice(self.keys) for _ in range(opt.gets))]
        self.batches = [rnd.sample(self.keys, MANY) for _ in range(opt.calls)]
        self.expect = [{k: self.value[k] for k in b} for b in self.batches]


def store_all(name, ops, data):
    """Every key stored through `ops`, read back: untimed."""
    if name == "raw_floor":
        ops.store()
        return
    for i in range(0, len(data.keys), MANY):
        chunk = {k: data.value[k] for k in data.keys[i:i + MANY]}
        if ops.set_many(chunk):
            raise BenchFail("%s: set_many of the keys failed for some" % name)
        if ops.get_many(list(chunk)) != chunk:
            raise BenchFail("%s: keys just stored do not read back" % name)


# ------------------------------------------------------------ the loops


def loop_get(name, ops, data):
    get = ops.get
    for k, v in data.pairs:
        if get(k) != v:
            raise BenchFail("%s get %s: %r, not its value" % (name, k, get(k)))
    return len(data.pairs)


def loop_set(name, ops, data):
    set_ = ops.set
    for k, v in data.pairs:
        if not set_(k, v):
            raise BenchFail("%s set %s: not stored" % (name, k))
    return len(data.pairs)


def loop_get_many(name, ops, data):
    get_many = ops.get_many
    for keys, expect in zip(data.batches, data.expect):
        if get_many(keys) != expect:
            raise BenchFail("%s get_many of %d keys: not every key with its value"
                            % (name, len(keys)))
    return len(data.batches) * MANY


def loop_set_many(name, ops, data):
    set_many = ops.set_many
    for values in data.expect:
        failed = set_many(values)
        if failed:
            raise BenchFail("%s set_many: not stored: %r" % (name, failed[:5]))
    return len(data.expect) * MANY


LOOPS = {"get": loop_get, "set": loop_set, "get_many100": loop_get_many,
         "set_many100": loop_set_many}
FLOOR_LOOPS = {"get": lambda name, fl, data: fl.get(len(data.pairs)),
               "set": lambda name, fl, data: fl.set(len(data.pairs)),
               "get_many100": lambda name, fl, data: fl.get_many(len(data.batches)),
               "set_many100": lambda name, fl, data: fl.set_many(len(data.expect))}


def timed(loop, name, ops, data):
    """(keys/s, CPU ns/key, user ns/key, system ns/key) of one loop."""
    gc.disable()
    r0, c0, w0 = resource.getrusage(resource.RUSAGE_SELF), time.process_time_ns(), \
        time.perf_counter_ns()
    n = loop(name, ops, data)
    w1, c1, r1 = time.perf_counter_ns(), time.process_time_ns(), \
        resource.getrusage(resource.RUSAGE_SELF)
    gc.enable()
    user = (r1.ru_utime - r0.ru_utime) * 1e9 / n
    sys_ = (r1.ru_stime - r0.ru_stime) * 1e9 / n
    return n * 1e9 / max(w1 - w0, 1), (c1 - c0) / n, user, sys_


def run_reps(opt, clients, data):
    """samples[case][client]: a (keys/s, cpu, user, sys) per repetition."""
    samples = {c: {n: [] for n in CLIENTS} for c in CASES}
    for rep in range(opt.reps):
        order = CLIENTS[rep % len(CLIENTS):] + CLIENTS[:rep % len(CLIENTS)]
        for name in order:
            for case in CASES:
                loop = (FLOOR_LOOPS if name == "raw_floor" else LOOPS)[case]
                s = timed(loop, name, clients[name], data)
                samples[case][name].append(s)
                if opt.verbose:
                    print("REP %d %s %s keys_per_s=%.0f cpu_ns=%.0f user_ns=%.0f sys_ns=%.0f"
                          % ((rep, case, name) + s), flush=True)
    return samples


# ------------------------------------------------------------ results


def med(xs):
    return statistics.median(xs)


def result_line(case, name, ss):
    kps, cpu = [s[0] for s in ss], [s[1] for s in ss]
    print("RESULT %s %s keys_per_s=%.0f cpu_ns_per_key=%.0f user_ns=%.0f sys_ns=%.0f "
          "keys_per_s_range=%.0f-%.0f cpu_ns_range=%.0f-%.0f reps=%d"
          % (case, name, med(kps), med(cpu), med([s[2] for s in ss]), med([s[3] for s in ss]),
             min(kps), max(kps), min(cpu), max(cpu), len(ss)))


def paired(samples, case, a, b, field):
    """The median of the repetitions' ratios a/b of `field`, and the ratio
    of the medians."""
    xa = [s[field] for s in samples[case][a]]
    xb = [s[field] for s in samples[case][b]]
    return med([x / y for x, y in zip(xa, xb)]), med(xa) / med(xb)


def best(samples, case, a, b):
    """a/b of the best repetitions: keys/s (the highest) and CPU (the lowest)."""
    sa, sb = samples[case][a], samples[case][b]
    return (max(s[0] for s in sa) / max(s[0] for s in sb),
            min(s[1] for s in sa) / min(s[1] for s in sb))


def ratio_lines(samples):
    for case in CASES:
        for ref in ("pylibmc", "pymemcache"):
            k, k_of = paired(samples, case, "mcroute", ref, 0)
            c, c_of = paired(samples, case, "mcroute", ref, 1)
            bk, bc = best(samples, case, "mcroute", ref)
            print("INFO ratio %s mcroute_vs_%s keys_per_s=%.2fx cpu=%.2fx "
                  "(of_medians keys_per_s=%.2fx cpu=%.2fx; of_best keys_per_s=%.2fx cpu=%.2fx)"
                  % (case, ref, k, c, k_of, c_of, bk, bc))
        for a, b in (("raw_floor", "pylibmc"), ("raw_floor", "pymemcache"),
                     ("mcroute", "raw_floor")):
            k, _ = paired(samples, case, a, b, 0)
            c, _ = paired(samples, case, a, b, 1)
            print("INFO ratio %s %s_vs_%s keys_per_s=%.2fx cpu=%.2fx" % (case, a, b, k, c))


GOALS = [  # name, case, reference, field (0 keys/s, 1 CPU), at least (True) or most, target
    ("get_many_keys_per_s_vs_pylibmc", "get_many100", "pylibmc", 0, True, 1.2),
    ("get_many_cpu_vs_pylibmc", "get_many100", "pylibmc", 1, False, 0.8),
    ("get_cpu_vs_pylibmc", "get", "pylibmc", 1, False, 0.8),
    ("set_cpu_vs_pylibmc", "set", "pylibmc", 1, False, 0.8),
    ("get_many_keys_per_s_vs_pymemcache", "get_many100", "pymemcache", 0, True, 10.0),
    ("get_keys_per_s_vs_pymemcache", "get", "pymemcache", 0, True, 10.0),
]


def python_floor(samples, case, ref, field):
    """The median over the repetitions of the ratio to `ref` of a Python
    client at the C floor: one whose calls cost the raw floor's time and
    CPU plus the interpreter's loop (loop_floor) and nothing else. A bound
    derived from two measured clients of the same repetition, not a
    client of its own."""
    rs = []
    for raw, loop, r in zip(samples[case]["raw_floor"], samples[case]["loop_floor"],
                            samples[case][ref]):
        if field == 0:
            x = 1.0 / (1.0 / raw[0] + 1.0 / loop[0])  # keys/s: the times add
        else:
            x = raw[1] + loop[1]
        rs.append(x / r[field])
    return med(rs)


def goal_lines(samples):
    """mcroute's ratio against the target, the raw floor's and a Python
    client's at that floor: a goal the floor misses too is beyond any
    client on this host at this moment, one that python_floor misses is
    beyond any Python client."""
    def meets(r, at_least, target):
        return r >= target if at_least else r <= target
    for name, case, ref, field, at_least, target in GOALS:
        r, _ = paired(samples, case, "mcroute", ref, field)
        f, _ = paired(samples, case, "raw_floor", ref, field)
        pf = python_floor(samples, case, ref, field)
        why = ""
        if not meets(f, at_least, target):
            why = " (the raw C floor misses it too: no client can meet it here)"
        elif not meets(pf, at_least, target):
            why = " (a Python client at the C floor misses it too)"
        print("GOAL python_%s target=%s%.2fx measured=%.2fx raw_floor=%.2fx python_floor=%.2fx "
              "%s%s" % (name, ">=" if at_least else "<=", target, r, f, pf,
                        "PASS" if meets(r, at_least, target) else "MISS", why))


# ------------------------------------------------------------ the C pool's own figures


def pool_runs(opt):
    """The bench_pool runs: (our case, its phase, its arguments)."""
    common = ["--keys", str(opt.pool_keys), "--reps", str(opt.pool_reps)]
    depth1 = common + ["--depth", "1", "--mget-keys", str(MANY), "--mget-depth", "1"]
    return [("get", "get_pipelined", depth1), ("set", "set_pipelined", depth1),
            ("get_many100", "multiget", depth1),
            ("set_many100", "set_pipelined", common + ["--phase", "set", "--depth", str(MANY)])]


def parse_pool(out, phase, system):
    """(client CPU ns, user ns, system ns) per request of bench_pool's output."""
    cpu = user = sys_ = None
    for line in out.splitlines():
        w = line.split()
        kv = dict(x.split("=", 1) for x in w if "=" in x)
        if w[:3] == ["RESULT", phase, system]:
            cpu = float(kv["client_cpu_ns"])
        elif w[:4] == ["INFO", "cpu", phase, system]:
            user, sys_ = float(kv["user_ns"]), float(kv["sys_ns"])
    if cpu is None or user is None:
        raise ValueError("no RESULT or INFO cpu line for %s %s" % (phase, system))
    return cpu, user, sys_


def pool_output(path, args, system, timeout, cache):
    """bench_pool's output for `args` and `system`, run once."""
    key = (tuple(args), system)
    if key not in cache:
        r = subprocess.run([path, "--system", system] + args, capture_output=True, text=True,
                           timeout=timeout)
        if r.returncode != 0:
            raise ValueError("exit %d: %s" % (r.returncode,
                                              (r.stderr or r.stdout)[-300:].strip()))
        cache[key] = r.stdout
    return cache[key]


def pool_figures(opt, path):
    """{case: {system: (cpu, user, sys)}} from bench_pool, or None (said)."""
    if path in ("", "none") or not os.access(path, os.X_OK):
        why = "--bench-pool none" if path in ("", "none") else "%s is not built" % path
        print("INFO pool not_measured reason=\"%s\"" % why)
        return None
    out, cache = {}, {}
    timeout = 60 if opt.quick else 300
    try:
        for case, phase, args in pool_runs(opt):
            for system in ("mcroute", "floor"):
                text = pool_output(path, args, system, timeout, cache)
                out.setdefault(case, {})[system] = parse_pool(text, phase, system)
    except (ValueError, KeyError, OSError, subprocess.TimeoutExpired) as e:
        print("INFO pool not_measured reason=\"%s: %s\"" % (path, str(e).replace("\n", " ")))
        return None
    return out


def share(user, sys_):
    return sys_ / (user + sys_) if user + sys_ > 0 else 0.0


def where_lines(samples, pool):
    """mcroute's CPU per key beside the interpreter's loop and the C pool's."""
    for case in CASES:
        ss, fl = samples[case]["mcroute"], samples[case]["loop_floor"]
        cpu, user, sys_ = (med([s[i] for s in ss]) for i in (1, 2, 3))
        loop = med([s[1] for s in fl])
        rf = samples[case]["raw_floor"]
        rcpu, ruser, rsys = (med([s[i] for s in rf]) for i in (1, 2, 3))
        line = ("INFO where %s mcroute_cpu_ns=%.0f user_ns=%.0f kernel_share=%.2f "
                "loop_floor_ns=%.0f raw_floor_ns=%.0f raw_floor_user_ns=%.0f "
                "raw_floor_kernel_share=%.2f" % (case, cpu, user, share(user, sys_), loop,
                                                  rcpu, ruser, share(ruser, rsys)))
        if pool is not None:
            (pc, pu, ps), (fc, fu, fs) = pool[case]["mcroute"], pool[case]["floor"]
            line += (" pool_c_ns=%.0f pool_user_ns=%.0f pool_kernel_share=%.2f "
                     "raw_epoll_ns=%.0f raw_epoll_kernel_share=%.2f rest_ns=%.0f "
                     "rest_user_ns=%.0f" % (pc, pu, share(pu, ps), fc, share(fu, fs),
                                            cpu - loop - pc, user - loop - pu))
        print(line)
    print("INFO where: kernel_share is system / (user + system), getrusage's tick-sampled "
          "split; loop_floor_ns the same loop on a dict (the interpreter, a call, the check); "
          "raw_floor_* the raw C client's, in the same repetitions" +
          ("" if pool is None else
           "; pool_* and raw_epoll_* bench_pool's client CPU per request (key) on the same "
           "rounds (one get or set in flight, a 100-key multi-get at a time, sets 100 in "
           "flight): its median (user and system: means), in its own runs after this "
           "one's; rest_ns = mcroute_cpu_ns - loop_floor_ns - pool_c_ns and rest_user_ns "
           "the same in user time: the extension's share (arguments, objects, the GIL, "
           "getpid), within the noise of two runs (the user part is the steadier)"))


# ------------------------------------------------------------ versions


def mcroute_version():
    """mcr_version_string() of the libmcroute the extension loaded, and its path."""
    with open("/proc/self/maps") as f:
        libs = [ln.split()[-1] for ln in f if "/libmcroute.so" in ln]
    if not libs:
        return "unknown", "not-loaded"
    lib = ctypes.CDLL(libs[0])
    lib.mcr_version_string.restype = ctypes.c_char_p
    return lib.mcr_version_string().decode(), libs[0]


def build_type(opt, pkg):
    """The build's CMAKE_BUILD_TYPE: given, or from the build tree's cache."""
    if opt.build_type:
        return opt.build_type
    cache = pkg.parent.parent / "CMakeCache.txt"
    try:
        for line in cache.read_text().splitlines():
            if line.startswith("CMAKE_BUILD_TYPE:"):
                return line.split("=", 1)[1] or "none"
    except OSError:
        pass
    return "unknown"


def commit_of(src):
    try:
        r = subprocess.run(["git", "-C", str(src), "describe", "--always", "--dirty"],
                           capture_output=True, text=True, timeout=10)
        return r.stdout.strip() or "unknown"
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"


def info_lines(opt, ports):
    pylibmc, pymemcache, _, mcroute = import_clients()
    pkg = Path(mcroute.__file__).resolve().parent
    version, lib = mcroute_version()
    bt = build_type(opt, pkg)
    print("INFO versions python=%s pylibmc=%s libmemcached=%s pymemcache=%s mcroute=%s "
          "build_type=%s commit=%s package=%s libmcroute=%s"
          % (platform.python_version(), pylibmc.__version__, pylibmc.libmemcached_version,
             pymemcache.__version__, version, bt, commit_of(Path(__file__).resolve().parent),
             pkg, lib))
    if bt == "Debug":
        print("INFO warning: a Debug build: libmcroute is not optimized, timings are meaningless")
    with open("/proc/loadavg") as f:
        print("INFO machine cpus=%d loadavg=\"%s\"" % (os.cpu_count(), f.read().strip()))
    print("INFO setup servers=%d ports=%s keys=%d key_bytes=10 value_bytes=%d gets=%d sets=%d "
          "many_calls=%d many_keys=%d reps=%d memcached=\"-t 1 -m 64 -U 0\""
          % (NSERVERS, ",".join(map(str, ports)), opt.keys, VALUE_BYTES, opt.gets, opt.gets,
             opt.calls, MANY, opt.reps))
    print("INFO clients pylibmc=\"Client(servers, binary=False, behaviors={ketama, "
          "tcp_nodelay})\" pymemcache=\"HashClient(servers, default_noreply=False)\" "
          "mcroute=\"Client(servers=...)\" mcroute_meta=\"protocol=meta\" "
          "loop_floor=\"the same loops on a dict: no I/O\" "
          "raw_floor=\"bench_pyfloor.so: pool_floor.c's raw epoll client in C, no library\"",
          flush=True)
    return pkg


# ------------------------------------------------------------ main


def default_pool(opt, pkg):
    if opt.bench_pool is not None:
        return opt.bench_pool
    return str(pkg.parent.parent / "bench" / "bench_pool")


def default_floor(opt, pkg):
    if opt.floor is not None:
        return opt.floor
    return str(pkg.parent.parent / "bench" / "bench_pyfloor.so")


def bench(opt, procs):
    ports = [start_memcached(procs) for _ in range(NSERVERS)]
    pkg = info_lines(opt, ports)
    data = Data(opt)
    clients = make_clients(ports, RawFloor(default_floor(opt, pkg), ports, data))
    for name in CLIENTS:
        store_all(name, clients[name], data)
    samples = run_reps(opt, clients, data)
    for name in CLIENTS:
        clients[name].close()
    stop_all(procs)  # bench_pool starts servers of its own
    for case in CASES:
        for name in CLIENTS:
            result_line(case, name, samples[case][name])
    ratio_lines(samples)
    where_lines(samples, pool_figures(opt, default_pool(opt, pkg)))
    goal_lines(samples)


def on_term(signum, frame):
    raise SystemExit("bench_python: signal %d" % signum)


def main(argv):
    opt = parse_args(argv)
    signal.signal(signal.SIGTERM, on_term)
    procs = []
    try:
        bench(opt, procs)
    except BenchFail as e:
        print("bench_python: %s" % e, file=sys.stderr)
        return 1
    except Exception:  # a client's call raised: a failure, as a wrong answer is
        print("bench_python: a call raised:", file=sys.stderr)
        traceback.print_exc()
        return 1
    finally:
        stop_all(procs)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
