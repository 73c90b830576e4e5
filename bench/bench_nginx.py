# SPDX-License-Identifier: BSD-3-Clause
"""bench_nginx.py: requests/s and latency of nginx serving pages from 4 memcached servers through ngx_http_mcroute_module against nginx's own `hash $memcached_key consistent;`, in one run."""

# What is measured, in one run.
#
#  Four memcached servers (-t 1 -m 64 -U 0) on loopback ports picked here,
#  and two nginx instances (Debian's binary, one worker each, access log
#  off), both on those servers: "mcroute" with `mcroute servers=LIST;` in
#  its upstream block (ketama, the module's default), "hash" with
#  `hash $memcached_key consistent;` and a `server` line per memcached.
#  PAGES pages of 1 KiB (/page/N) are stored twice, once where each placement
#  puts them (through the mcroute command with --client nginx-consistent for
#  the hash upstream: the same placement as nginx's), so every request hits.
#  wrk (Debian's) drives each nginx in turn for SECONDS with CONNS
#  connections on one thread, a random page per request (a Lua script);
#  repetitions interleaved, the side going first alternating; per side the
#  median requests/s and the median p99 latency over the repetitions, their
#  ranges, and GOAL mcroute/hash requests/s >= 0.97. Exit 1 when a setup step
#  fails or a response is not 200 (wrk's non-2xx count), never for speed.
#  --quick: one short repetition each, the smoke run ctest calls.

import argparse
import os
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time

NGINX = "/usr/sbin/nginx"
MEMCACHED = "/usr/bin/memcached"
WRK = "/usr/bin/wrk"
PAGES = 2000
LUA = """math.randomseed(os.time())
request = function() return wrk.format("GET", "/page/" .. math.random(0, %d)) end
""" % (PAGES - 1)


def fail(msg):
    print("bench_nginx: " + msg, file=sys.stderr)
    raise SystemExit(1)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port, proc, what):
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            fail("%s exited at start" % what)
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return
        except OSError:
            time.sleep(0.02)
    fail("%s does not listen" % what)


def start_memcached(procs):
    port = free_port()
    argv = [MEMCACHED, "-l", "127.0.0.1", "-p", str(port), "-U", "0", "-t", "1", "-m", "64"]
    if os.getuid() == 0:
        argv += ["-u", "nobody"]
    p = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    procs.append(p)
    wait_port(port, p, "memcached")
    return "127.0.0.1:%d" % port


def start_nginx(procs, work, module, upstream):
    port = free_port()
    t = os.path.join(work, "tmp")
    os.makedirs(t, exist_ok=True)
    conf = os.path.join(work, "nginx.conf")
    with open(conf, "w") as f:
        f.write("\n".join([
            "load_module %s;" % module, "user root;" if os.getuid() == 0 else "",
            "daemon off;", "master_process on;", "worker_processes 1;",
            "error_log %s/error.log warn;" % work, "pid %s/nginx.pid;" % work,
            "events { worker_connections 1024; }",
            "http { access_log off;",
            " client_body_temp_path %s; proxy_temp_path %s; fastcgi_temp_path %s;" % (t, t, t),
            " uwsgi_temp_path %s; scgi_temp_path %s;" % (t, t),
            " upstream cache { %s }" % upstream,
            " server { listen 127.0.0.1:%d;" % port,
            "  location /page/ { set $memcached_key $uri; memcached_pass cache; } } }", ""]))
    p = subprocess.Popen([NGINX, "-p", work + "/", "-c", conf], stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL)
    procs.append(p)
    wait_port(port, p, "nginx (%s/error.log)" % work)
    return port


def store(cli, source, value):
    lines = "".join("/page/%d\t%s\n" % (i, value) for i in range(PAGES))
    r = subprocess.run([cli, "set"] + source, input=lines, capture_output=True, text=True,
                       timeout=120)
    if r.returncode != 0:
        fail("mcroute set %s: %s" % (" ".join(source), r.stderr))


def run_wrk(port, seconds, conns, script):
    r = subprocess.run([WRK, "-t1", "-c%d" % conns, "-d%ds" % seconds, "--latency", "-s", script,
                        "http://127.0.0.1:%d/" % port], capture_output=True, text=True,
                       timeout=seconds + 60)
    out = r.stdout
    if r.returncode != 0 or "Non-2xx" in out or "Socket errors" in out:
        fail("wrk on port %d: %s%s" % (port, out, r.stderr))
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))
    m = re.search(r"99%\s+([\d.]+)(us|ms|s)", out)
    p99 = float(m.group(1)) * {"us": 1.0, "ms": 1e3, "s": 1e6}[m.group(2)]
    return rps, p99


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--module", required=True, help="the built ngx_http_mcroute_module.so")
    ap.add_argument("--cli", required=True, help="the built mcroute command")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--seconds", type=int, default=5)
    ap.add_argument("--conns", type=int, default=32)
    a = ap.parse_args()
    a.module, a.cli = os.path.abspath(a.module), os.path.abspath(a.cli)  # nginx -p is elsewhere
    for tool in (NGINX, MEMCACHED, WRK):
        if not os.access(tool, os.X_OK):
            fail("%s is not installed (nginx-light, memcached, wrk)" % tool)
    reps, seconds = (1, 1) if a.quick else (a.reps, a.seconds)
    procs = []
    work = tempfile.mkdtemp(prefix="bench-nginx-")
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))
    try:
        servers = [start_memcached(procs) for _ in range(4)]
        lst = ",".join(servers)
        value = "x" * 1024
        store(a.cli, ["-s", lst], value)
        store(a.cli, ["-s", lst, "--client", "nginx-consistent"], value)
        sides = {
            "mcroute": start_nginx(procs, os.path.join(work, "m"), a.module,
                                   "mcroute servers=%s;" % lst),
            "hash": start_nginx(procs, os.path.join(work, "h"), a.module,
                                "hash $memcached_key consistent; " +
                                " ".join("server %s;" % s for s in servers)),
        }
        script = os.path.join(work, "pages.lua")
        with open(script, "w") as f:
            f.write(LUA)
        print("INFO setup servers=4 pages=%d value_bytes=1024 conns=%d seconds=%d reps=%d" % (
            PAGES, a.conns, seconds, reps))
        res = {k: [] for k in sides}
        for rep in range(reps):
            order = list(sides) if rep % 2 == 0 else list(reversed(sides))
            for k in order:
                res[k].append(run_wrk(sides[k], seconds, a.conns, script))
        med = {}
        for k, rs in res.items():
            rps = [r[0] for r in rs]
            p99 = [r[1] for r in rs]
            med[k] = statistics.median(rps)
            print("RESULT %s rps=%.0f p99_us=%.0f rps_range=%.0f-%.0f p99_range=%.0f-%.0f "
                  "reps=%d" % (k, med[k], statistics.median(p99), min(rps), max(rps),
                               min(p99), max(p99), len(rs)))
        ratio = med["mcroute"] / med["hash"]
        print("GOAL nginx_rps_vs_hash target=>=0.97x measured=%.3fx %s" % (
            ratio, "PASS" if ratio >= 0.97 else "MISS"))
    finally:
        for p in procs:
            if p.poll() is None:
                p.send_signal(signal.SIGQUIT if p.args[0] == NGINX else signal.SIGKILL)
        for p in procs:
            try:
                p.wait(20)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
