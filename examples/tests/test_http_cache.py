#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""test_http_cache.py: drives examples/http_cache against real memcached servers (run by with_memcached).

Usage: test_http_cache.py --service PATH --cli PATH --servers H:P,H:P,... [--meta]

Starts the service on 127.0.0.1, port 0, reads the port it prints, then:
PUT / GET / DELETE on 120 keys (binary values, one empty, percent-encoded
keys), each value checked; every key found on the memcached that
`mcroute locate -s SERVERS` names and on no other (asked directly over a
socket); 404s, 400s naming the problem (bad keys, bad ttl), 405, 413, a ttl that
expires; concurrent clients; a timeout (504) while one memcached is stopped
with SIGSTOP; a request in flight when SIGTERM arrives (503, then exit 0).
A second service, pointed at a port nobody listens on, must answer 502 then
503. curl, when installed, does one PUT and one GET as well.

Every failed check is printed; the exit status is 1 when any failed.
"""
import argparse
import concurrent.futures
import http.client
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.parse

FAILURES = []


def check(cond, what):
    if not cond:
        FAILURES.append(what)
        print("FAIL: " + what, flush=True)
    return cond


class Service:
    """One http_cache process; its port read from its first line of output."""

    def __init__(self, path, servers, timeout_ms, extra=()):
        self.proc = subprocess.Popen(
            [path, "-s", servers, "--listen", "127.0.0.1:0", "--timeout-ms", str(timeout_ms)]
            + list(extra),
            stdout=subprocess.PIPE, stderr=None, text=True)
        line = self.proc.stdout.readline()
        if not line.startswith("listening on 127.0.0.1:"):
            self.proc.kill()
            self.proc.wait()
            raise RuntimeError("service did not start: %r" % line)
        self.port = int(line.rsplit(":", 1)[1])

    def request(self, method, path, body=None, timeout=5):
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        try:
            conn.request(method, path, body=body)
            r = conn.getresponse()
            return r.status, r.read(), r.getheader("X-Cache-Server")
        finally:
            conn.close()

    def stop(self):
        """SIGTERM; the exit status (None when it had to be killed)."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            return None
        finally:
            self.proc.stdout.close()


def freeze(pid):
    """SIGSTOP pid and wait until every thread of it is stopped: kill()
    only queues the signal, and a thread may still answer a request."""
    os.kill(pid, signal.SIGSTOP)
    deadline = time.monotonic() + 2
    while time.monotonic() < deadline:
        states = []
        for tid in os.listdir("/proc/%d/task" % pid):
            with open("/proc/%d/task/%s/stat" % (pid, tid)) as f:
                states.append(f.read().rsplit(")", 1)[1].split()[0])
        if all(st in ("T", "t") for st in states):
            return
        time.sleep(0.005)
    raise RuntimeError("memcached %d did not stop" % pid)


def quote_key(key):
    return "/cache/" + urllib.parse.quote_from_bytes(key, safe="")


def mc_get(addr, key):
    """The value memcached at addr holds for key, or None."""
    host, port = addr.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=3) as s:
        s.sendall(b"get " + key + b"\r\n")
        buf = b""
        while True:
            if buf == b"END\r\n":
                return None
            if buf.startswith(b"VALUE ") and b"\r\n" in buf:
                header, rest = buf.split(b"\r\n", 1)
                n = int(header.split()[3])
                if len(rest) >= n + 7:
                    if rest[n:n + 7] != b"\r\nEND\r\n":
                        raise RuntimeError("memcached %s: malformed reply to get" % addr)
                    return rest[:n]
            chunk = s.recv(65536)
            if not chunk:
                raise RuntimeError("memcached %s closed the connection" % addr)
            buf += chunk


def locate(cli, servers, keys):
    """Owner (HOST:PORT) of each key according to `mcroute locate -s`."""
    out = subprocess.run([cli, "locate", "-s", servers], input=b"\n".join(keys) + b"\n",
                         stdout=subprocess.PIPE, check=True, timeout=10).stdout
    owners = {}
    for line in out.split(b"\n"):
        if line:
            k, addr = line.rsplit(b"\t", 1)
            owners[k] = addr.decode()
    return owners


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--service", required=True)
    ap.add_argument("--cli", required=True)
    ap.add_argument("--servers", required=True)
    ap.add_argument("--meta", action="store_true", help="the service speaks the meta protocol")
    a = ap.parse_args()
    servers = a.servers.split(",")
    pids = [int(p) for p in os.environ.get("MCR_EXAMPLE_PIDS", "").split(",") if p]
    rng = random.Random(6)

    extra = ["--meta"] if a.meta else []
    svc = Service(a.service, a.servers, timeout_ms=400, extra=extra)
    try:
        # ---- PUT, GET, placement, on 120 keys
        keys = [b"user:%d" % i for i in range(100)]
        keys += [b"caf\xc3\xa9:%d" % i for i in range(10)]        # UTF-8, percent-encoded
        keys += [b"path/with%%2f/slash:%d" % i for i in range(10)]  # '%' and '/' in keys
        values = {}
        for i, k in enumerate(keys):
            values[k] = b"" if i == 7 else bytes(rng.randrange(256) for _ in range(rng.randrange(1, 3000)))
        for k in keys:
            st, body, _ = svc.request("PUT", quote_key(k), values[k])
            check(st == 201, "PUT %r (new) gave %d %r, not 201" % (k, st, body))
        k0 = keys[0]
        values[k0] = b"replaced"
        st, _, _ = svc.request("PUT", quote_key(k0), values[k0])
        check(st == 204, "PUT %r (existing) gave %d, not 204" % (k0, st))

        owners = locate(a.cli, a.servers, keys)
        check(len(owners) == len(keys), "mcroute locate named %d owners for %d keys" % (len(owners), len(keys)))
        good = placed = 0
        for k in keys:
            st, body, server = svc.request("GET", quote_key(k))
            if check(st == 200 and body == values[k], "GET %r gave %d, %d bytes (want 200, %d bytes)"
                     % (k, st, len(body), len(values[k]))):
                good += 1
            check(server == owners.get(k), "GET %r served by %s, ring names %s" % (k, server, owners.get(k)))
            on = [s for s in servers if mc_get(s, k) is not None]
            if check(on == [owners.get(k)] and mc_get(on[0], k) == values[k],
                     "key %r is on %s, ring names %s" % (k, on, owners.get(k))):
                placed += 1
        print("GET %d/%d values, %d/%d keys on the owner named by mcroute locate only"
              % (good, len(keys), placed, len(keys)), flush=True)
        per_server = {s: sum(1 for k in keys if owners.get(k) == s) for s in servers}
        print("keys per server: %s" % per_server, flush=True)
        check(all(n > 0 for n in per_server.values()), "a server got no key")

        # ---- concurrent clients
        def get_one(k):
            return svc.request("GET", quote_key(k))[:2]
        with concurrent.futures.ThreadPoolExecutor(16) as ex:
            results = list(ex.map(get_one, keys * 3))
        ok = sum(1 for (st, body), k in zip(results, keys * 3) if st == 200 and body == values[k])
        check(ok == len(results), "concurrent GETs: %d/%d right" % (ok, len(results)))
        print("concurrent GETs (16 clients): %d/%d right" % (ok, len(results)), flush=True)

        # ---- DELETE and 404s
        for k in keys[:40]:
            st, _, _ = svc.request("DELETE", quote_key(k))
            check(st == 204, "DELETE %r gave %d, not 204" % (k, st))
        for k in keys[:40]:
            st, _, _ = svc.request("GET", quote_key(k))
            check(st == 404, "GET deleted %r gave %d, not 404" % (k, st))
            check(all(mc_get(s, k) is None for s in servers), "deleted %r still on a server" % k)
        st, _, _ = svc.request("DELETE", quote_key(keys[0]))
        check(st == 404, "DELETE of a missing key gave %d, not 404" % st)
        st, _, _ = svc.request("GET", "/cache/never-set")
        check(st == 404, "GET of a key never set gave %d, not 404" % st)
        for k in keys[40:]:
            st, body, _ = svc.request("GET", quote_key(k))
            check(st == 200 and body == values[k], "GET %r after the deletes gave %d" % (k, st))

        # ---- 400s name the problem; 404 and 405 for other paths and methods
        for path, word in [("/cache/has%20space", b"key"), ("/cache/", b"key"),
                           ("/cache/" + "x" * 251, b"key"), ("/cache/ctl%0Abyte", b"key")]:
            for method in ("GET", "PUT", "DELETE"):
                st, body, _ = svc.request(method, path, b"v" if method == "PUT" else None)
                check(st == 400 and word in body, "%s %s gave %d %r, not 400 naming the %s"
                      % (method, path[:30], st, body[:80], word.decode()))
        st, body, _ = svc.request("GET", "/cache/has%20space")
        print("bad key: 400 %s" % body.decode(errors="replace").strip(), flush=True)
        for q in ("ttl=abc", "ttl=-1", "ttl=99999999"):
            st, body, _ = svc.request("PUT", "/cache/ttlkey?" + q, b"v")
            check(st == 400 and b"ttl" in body, "PUT ?%s gave %d %r, not 400 naming ttl" % (q, st, body))
        # evhttp answers from the Content-Length and closes the connection
        # before the body is sent: a raw socket reads that answer.
        with socket.create_connection(("127.0.0.1", svc.port), timeout=5) as s:
            s.sendall(b"PUT /cache/too-big HTTP/1.1\r\nHost: t\r\nContent-Length: 1000001\r\n\r\n")
            status_line = s.recv(4096).split(b"\r\n", 1)[0]
        check(status_line.startswith(b"HTTP/1.1 413"), "PUT of 1000001 bytes: %r, not 413" % status_line)
        st, _, _ = svc.request("GET", "/elsewhere")
        check(st == 404, "GET /elsewhere gave %d, not 404" % st)
        st, _, _ = svc.request("POST", "/cache/k", b"v")
        check(st == 405, "POST gave %d, not 405" % st)
        st, body, _ = svc.request("GET", "/stats")
        check(st == 200 and body.count(b"\n") == len(servers), "GET /stats gave %d %r" % (st, body))

        # ---- a ttl that expires (checked at the end)
        st, _, _ = svc.request("PUT", "/cache/short-lived?ttl=1", b"soon gone")
        check(st == 201, "PUT ?ttl=1 gave %d, not 201" % st)
        set_at = time.monotonic()

        # ---- curl, when installed
        curl = shutil.which("curl")
        if curl:
            url = "http://127.0.0.1:%d/cache/curl-key" % svc.port
            put = subprocess.run([curl, "-s", "-o", "/dev/null", "-w", "%{http_code}", "-X", "PUT",
                                  "--data-binary", "from curl", url], stdout=subprocess.PIPE, timeout=10)
            get = subprocess.run([curl, "-s", "-w", " %{http_code}", url], stdout=subprocess.PIPE, timeout=10)
            check(put.stdout == b"201" and get.stdout == b"from curl 200",
                  "curl PUT/GET gave %r / %r" % (put.stdout, get.stdout))
            print("curl: PUT %s, GET %r" % (put.stdout.decode(), get.stdout.decode()), flush=True)

        # ---- one memcached frozen: its keys time out (504), then recover
        if check(len(pids) == len(servers), "MCR_EXAMPLE_PIDS lists %d pids" % len(pids)):
            victim = servers[1]
            k = next(k for k in keys[40:] if owners[k] == victim)
            freeze(pids[1])
            try:
                t0 = time.monotonic()
                st, body, _ = svc.request("GET", quote_key(k))
                took = time.monotonic() - t0
                check(st == 504, "GET while %s is stopped gave %d %r, not 504" % (victim, st, body))
                print("memcached %s stopped: %d %s (%.2f s)" % (victim, st, body.decode(errors="replace").strip(), took),
                      flush=True)
                other = next(k2 for k2 in keys[40:] if owners[k2] != victim)
                st, _, _ = svc.request("GET", quote_key(other))
                check(st == 200, "GET of a key on a running server gave %d meanwhile" % st)
            finally:
                os.kill(pids[1], signal.SIGCONT)
            st, body, _ = svc.request("GET", quote_key(k))
            check(st == 200 and body == values[k], "GET after SIGCONT gave %d, not 200" % st)

        # ---- the ttl has expired
        time.sleep(max(0.0, 2.2 - (time.monotonic() - set_at)))
        st, _, _ = svc.request("GET", "/cache/short-lived")
        check(st == 404, "GET after the ttl gave %d, not 404" % st)

        # ---- SIGTERM while a request waits for a frozen memcached: 503, exit 0
        if len(pids) == len(servers):
            k = next(k for k in keys[40:] if owners[k] == servers[2])
            freeze(pids[2])
            try:
                box = {}
                t = threading.Thread(target=lambda: box.update(r=svc.request("GET", quote_key(k))))
                t.start()
                time.sleep(0.15)
                rc = svc.stop()
                t.join(5)
                st, body, _ = box.get("r", (None, b"", None))
                check(st == 503 and b"cancel" in body,
                      "request in flight at SIGTERM gave %s %r, not 503 cancelled" % (st, body))
                print("in flight at SIGTERM: %s %s" % (st, body.decode(errors="replace").strip()), flush=True)
            finally:
                os.kill(pids[2], signal.SIGCONT)
        rc = svc.stop()
        check(rc == 0, "service exit status %s after SIGTERM, not 0" % rc)
        print("SIGTERM: exit status %s" % rc, flush=True)
    finally:
        if svc.proc.poll() is None:
            svc.proc.kill()
            svc.proc.wait()

    # ---- nobody listens: refused (502), then down for the pool (503)
    hole = socket.socket()
    hole.bind(("127.0.0.1", 0))  # bound, never listening: connections are refused
    try:
        dead = Service(a.service, "127.0.0.1:%d" % hole.getsockname()[1], timeout_ms=400, extra=extra)
        try:
            st1, body1, _ = dead.request("GET", "/cache/k")
            st2, body2, _ = dead.request("GET", "/cache/k")
            st3, body3, _ = dead.request("GET", "/cache/k")
            check(st1 == 502 and b"connect" in body1, "refused: %d %r, not 502" % (st1, body1))
            check(st3 == 503 and b"down" in body3, "down: %d %r, not 503" % (st3, body3))
            print("refused: %d %s / %d %s / %d %s" % (st1, body1.decode(errors="replace").strip(), st2, body2.decode(errors="replace").strip(),
                                                      st3, body3.decode(errors="replace").strip()), flush=True)
        finally:
            rc = dead.stop()
            check(rc == 0, "second service exit status %s, not 0" % rc)
    finally:
        hole.close()

    if FAILURES:
        print("%d checks failed" % len(FAILURES))
        return 1
    print("all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
