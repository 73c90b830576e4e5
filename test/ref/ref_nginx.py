#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
# ref_nginx.py: where nginx's upstream `hash $key [consistent];` sends keys, asked of a real nginx proxying to one listener per server of the config.
#
# Usage: ref_nginx.py nginx|nginx-consistent < configs   (protocol: test/ref/README.md)
#
# For each configuration an nginx (Debian's nginx-light) is started with
#   upstream u { hash $http_x_key [consistent]; server HOST:PORT weight=W max_fails=0; ... }
# and a proxy_pass to it. Every server of the configuration is a small HTTP
# listener here, on the server's own (resolved) address and port, that answers
# its list index. Each key is sent as the X-Key header (its raw UTF-8 bytes,
# which nginx hashes as they are), and the index in the reply is where nginx
# placed it. No memcached is needed: nginx picks the peer before it connects.
# Runs inside test/ref/netns.sh (names resolve through the test's hosts file).
import http.client
import os
import selectors
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

NGINX = "/usr/sbin/nginx"
DEADLINE = 30.0  # seconds for nginx to listen


def die(msg):
    sys.stderr.write("ref_nginx.py: %s\n" % msg)
    sys.exit(2)


class Listeners:
    """One thread answering, on each (address, port), that server's index."""

    def __init__(self):
        self.sel = selectors.DefaultSelector()
        self.socks = []
        self.lock = threading.Lock()
        self.stop = False
        self.thread = threading.Thread(target=self.loop, daemon=True)
        self.thread.start()

    def open(self, addrs):
        with self.lock:
            for i, (ip, port) in enumerate(addrs):
                s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
                s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                s.bind((ip, port))
                s.listen(64)
                s.setblocking(False)
                self.sel.register(s, selectors.EVENT_READ, ("listen", i))
                self.socks.append(s)

    def close(self):
        with self.lock:
            for s in self.socks:
                self.sel.unregister(s)
                s.close()
            self.socks = []

    def loop(self):
        while not self.stop:
            with self.lock:
                events = self.sel.select(timeout=0.05) if self.socks else []
                for key, _ in events:
                    kind, data = key.data
                    if kind == "listen":
                        try:
                            c, _ = key.fileobj.accept()
                        except BlockingIOError:
                            continue
                        c.setblocking(False)
                        self.sel.register(c, selectors.EVENT_READ, ("conn", [data, b""]))
                    else:
                        c = key.fileobj
                        try:
                            chunk = c.recv(65536)
                        except BlockingIOError:
                            continue
                        data[1] += chunk
                        if chunk and b"\r\n\r\n" not in data[1]:
                            continue
                        body = str(data[0]).encode()
                        try:
                            c.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n"
                                      b"Connection: close\r\n\r\n%s" % (len(body), body))
                        except OSError:
                            pass
                        self.sel.unregister(c)
                        c.close()
            if not self.socks:
                time.sleep(0.01)


def free_port(ip):
    s = socket.socket()
    s.bind((ip, 0))
    p = s.getsockname()[1]
    s.close()
    return p


def run_config(client, servers, keys, listeners, workdir):
    addrs = []
    for host, port, _ in servers:
        try:
            addrs.append((socket.gethostbyname(host), port))
        except OSError as e:
            return "error cannot resolve %s: %s" % (host, e)
    if len(set(addrs)) != len(addrs):
        return "error two servers share an address"
    listen_ip = "127.0.0.1"
    listen_port = free_port(listen_ip)
    lines = ["daemon off;", "master_process off;", "worker_processes 1;",
             "error_log %s/error.log warn;" % workdir, "pid %s/nginx.pid;" % workdir,
             "events { worker_connections 1024; }", "http {", "  access_log off;",
             "  client_body_temp_path %s/tmp;" % workdir, "  proxy_temp_path %s/tmp;" % workdir,
             "  fastcgi_temp_path %s/tmp;" % workdir, "  uwsgi_temp_path %s/tmp;" % workdir,
             "  scgi_temp_path %s/tmp;" % workdir,
             "  upstream u {",
             "    hash $http_x_key%s;" % (" consistent" if client == "nginx-consistent" else "")]
    for host, port, weight in servers:
        lines.append("    server %s:%d weight=%d max_fails=0;" % (host, port, weight))
    lines += ["  }", "  server {", "    listen %s:%d;" % (listen_ip, listen_port),
              "    location / { proxy_pass http://u; proxy_next_upstream off; }", "  }", "}"]
    conf = os.path.join(workdir, "nginx.conf")
    with open(conf, "w") as f:
        f.write("\n".join(lines) + "\n")
    listeners.open(addrs)
    proc = subprocess.Popen([NGINX, "-p", workdir, "-c", conf], stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        end = time.monotonic() + DEADLINE
        while True:
            if proc.poll() is not None:
                err = proc.stderr.read().decode(errors="replace").strip()
                try:
                    with open(os.path.join(workdir, "error.log")) as f:
                        err += " " + f.read().strip()
                except OSError:
                    pass
                return "error nginx exited: %s" % " ".join(err.split())[:300]
            try:
                socket.create_connection((listen_ip, listen_port), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > end:
                    die("nginx did not listen within %g s" % DEADLINE)
                time.sleep(0.01)
        conn = http.client.HTTPConnection(listen_ip, listen_port, timeout=30)
        out = []
        for k in keys:
            conn.putrequest("GET", "/")
            conn.putheader("X-Key", k)
            conn.endheaders()
            r = conn.getresponse()
            body = r.read()
            if r.status != 200:
                die("nginx answered %d for key %r: %r" % (r.status, k, body[:100]))
            out.append(body.decode())
        conn.close()
        return "ok " + " ".join(out) if out else "ok"
    finally:
        proc.terminate()
        proc.wait()
        listeners.close()


def main():
    if len(sys.argv) != 2 or sys.argv[1] not in ("nginx", "nginx-consistent"):
        die("usage: ref_nginx.py nginx|nginx-consistent < configs")
    if not os.access(NGINX, os.X_OK):
        die("%s not found (apt-get install nginx-light)" % NGINX)
    client = sys.argv[1]
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    listeners = Listeners()
    workdir = tempfile.mkdtemp(prefix="mcr-ref-nginx-")
    os.mkdir(os.path.join(workdir, "tmp"))
    inp = sys.stdin.buffer
    try:
        while True:
            line = inp.readline()
            if not line:
                break
            f = line.split()
            if len(f) != 3 or f[0] != b"config":
                die("expected 'config ID N', got %r" % line)
            cid, n = f[1].decode(), int(f[2])
            servers = []
            for _ in range(n):
                s = inp.readline().split()
                if len(s) != 4 or s[0] != b"server":
                    die("config %s: expected 'server HOST PORT WEIGHT'" % cid)
                servers.append((s[1].decode(), int(s[2]), int(s[3])))
            k = inp.readline().split()
            if len(k) != 2 or k[0] != b"keys":
                die("config %s: expected 'keys M'" % cid)
            keys = [bytes.fromhex(inp.readline().strip().decode()) for _ in range(int(k[1]))]
            sys.stdout.write("config %s %s\n" % (cid, run_config(client, servers, keys,
                                                                 listeners, workdir)))
            sys.stdout.flush()
    finally:
        listeners.stop = True
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
