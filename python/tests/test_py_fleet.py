# SPDX-License-Identifier: BSD-3-Clause
"""test_py_fleet.py: Python clients following a pool in etcd, directly (etcd=, pool=)
and through a host agent's state (state=), go through a resize made by `mcroute migrate
--etcd` while they write, read and delete: no miss, no older value."""

import json
import multiprocessing
import os
import random
import signal
import subprocess
import time

import pytest

import mcroute
from conftest import cli, limit, locate, mcroute_bin, wait_until

KEYS = 400


def worker(name, source, conn, progress, stop):
    """Write, read and delete keys of its own ("name:i") with the client of
    `source`, checking each read against its last write; report counts."""
    rnd = random.Random(name)
    counts = {"ops": 0, "misses": 0, "older": 0, "errors": 0, "first": ""}
    try:
        c = mcroute.Client(timeout=5, **source)
        want = {}
        for i in range(KEYS):  # before the resize: the keys it will move
            k = "%s:%d" % (name, i)
            c.set(k, k + ":0")
            want[k] = k + ":0"
        version = 1
        while not stop.is_set():
            k = "%s:%d" % (name, rnd.randrange(KEYS))
            r = rnd.random()
            if r < 0.3:
                v = "%s:%d" % (k, version)
                version += 1
                c.set(k, v)
                want[k] = v
            elif r < 0.35:
                c.delete(k)
                want[k] = None
            else:
                got = c.get(k)
                got = got.decode() if got is not None else None
                if got != want[k]:
                    counts["misses" if got is None else "older"] += 1
                    if not counts["first"]:
                        counts["first"] = "%s: got %r, wrote %r (epoch %d)" % (
                            k, got, want[k], c.epoch())
            counts["ops"] += 1
            progress.value = counts["ops"]
    except Exception as e:  # noqa: BLE001 (reported to the test)
        counts["errors"] += 1
        counts["first"] = counts["first"] or repr(e)
    conn.send(counts)
    conn.close()


def start_workers(sources):
    ctx = multiprocessing.get_context("fork")
    stop = ctx.Event()
    ws = []
    for name, source in sources:
        parent, child = ctx.Pipe(duplex=False)
        progress = ctx.Value("l", 0)
        p = ctx.Process(target=worker, args=(name, source, child, progress, stop))
        p.start()
        ws.append((name, p, parent, progress))
    return stop, ws


def advanced(ws, by):
    """A predicate: every worker made `by` more operations than now."""
    marks = [w[3].value + by for w in ws]
    return lambda: all(w[3].value >= m for w, m in zip(ws, marks))


def test_resize_under_traffic(servers, etcd, tmp_path):
    mcs = servers(5)
    four = ",".join(m.addr for m in mcs[:4])
    five = ",".join(m.addr for m in mcs)
    r = cli("members", "publish", "--etcd", etcd.url, "--pool", "web", "-s", four)
    assert r.returncode == 0, r.stderr
    state = str(tmp_path / "web.state")
    agent = subprocess.Popen([mcroute_bin(), "agent", "--etcd", etcd.url, "--pool", "web",
                              "--state", state], stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, text=True)
    stop = None
    ws = []
    try:
        wait_until(lambda: os.path.exists(state), 20, "the agent writes its state")
        stop, ws = start_workers([("etcd", {"etcd": etcd.url, "pool": "web"}),
                                  ("state", {"state": state}),
                                  ("state2", {"state": state})])
        wait_until(advanced(ws, KEYS + 500), 60, "the workers run")
        r = cli("migrate", "--etcd", etcd.url, "--pool", "web", five, "--grace", "1",
                "--wait", str(int(limit(60))), "--json", timeout=300)
        assert r.returncode == 0, r.stdout + r.stderr
        result = json.loads(r.stdout)
        assert result["result"] == "done", result
        wait_until(advanced(ws, 500), 60, "the workers run after the resize")
    finally:
        if stop is not None:
            stop.set()
        counts = {}
        for name, p, conn, _ in ws:
            if conn.poll(limit(60)):
                counts[name] = conn.recv()
            p.join(limit(30))
            if p.is_alive():
                os.kill(p.pid, signal.SIGKILL)
                p.join()
        agent.terminate()
        agent.wait(limit(30))
    print("migrate:", {k: result.get(k) for k in ("result", "phase", "copy")})
    for name, c in counts.items():
        print(name, c)
        assert c["errors"] == 0 and c["misses"] == 0 and c["older"] == 0, (name, c)
        assert c["ops"] > KEYS + 1000, (name, c)
    assert sorted(counts) == ["etcd", "state", "state2"]
    # every client routes by the five servers now, as `mcroute locate` does
    keys = ["k%d" % i for i in range(300)]
    where = locate(["--etcd", etcd.url, "--pool", "web"], keys)
    for source in ({"etcd": etcd.url, "pool": "web"}, {"state": state}):
        c = mcroute.Client(**source)
        assert len(c.servers()) == 5
        assert c.locate_many(keys) == [where[k] for k in keys]
