#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
# ref_nginx.py: where nginx's upstream `hash $key [consistent];` sends keys, asked of a real nginx (its $upstream_addr); protocol in test/ref/README.md.
#
# Usage: ref_nginx.py nginx|nginx-consistent < configs
#
# A real nginx (Debian's nginx-light, /usr/sbin/nginx) is started in a
# temporary prefix with, for configuration J,
#   upstream uJ { hash $http_x_key [consistent]; server HOST:PORT weight=W max_fails=0; ... }
#   location = /J { proxy_pass http://uJ; proxy_next_upstream off; error_page 502 504 = @pick; }
#   location @pick { return 200 "$upstream_addr"; }
# listening on a Unix socket (so it can never collide with a configured
# server). Each key is sent as the X-Key request header, its raw UTF-8 bytes,
# which is what $http_x_key holds and nginx hashes (no decoding). nginx picks
# the peer with its own hash code and connects to it; nothing listens on the
# configured addresses (the test's private network namespace, netns.sh), so the
# connection is refused at once, the request ends in 502 with no retry
# (proxy_next_upstream off), and the error page answers the address nginx
# tried, $upstream_addr, which maps back to the list index (a peer that did
# answer would fail too, or give a body that is no address: then we die).
# max_fails=0 keeps a refused peer from ever being marked down, so every key is
# placed on the intact configuration. The requests are pipelined on one
# persistent HTTP/1.1 connection. nginx's start is the slow part, so the
# configurations that have already arrived on stdin share one nginx (never
# waiting for more input while an answer is owed); if nginx refuses such a
# batch, each of its configurations is tried alone to tell which.
import os
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

NGINX = "/usr/sbin/nginx"
DEADLINE = 30.0  # seconds for nginx to start listening
BATCH = 128  # pipelined requests in flight
MAX_CONFIGS = 64  # configs served by one nginx
MAX_KEYS = 40000  # keys asked of one nginx
PROC = [None]  # the running nginx, stopped by PID on any exit


def die(msg):
    sys.stderr.write("ref_nginx.py: %s\n" % msg)
    sys.exit(2)


def stop_nginx():
    p = PROC[0]
    if p is not None:
        PROC[0] = None
        if p.poll() is None:
            p.terminate()
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()


def nginx_conf(client, batch, workdir, sock):
    """One nginx for a batch of configs: upstream uJ and location = /J for config J."""
    t = os.path.join(workdir, "tmp")
    hash_ = "    hash $http_x_key%s;" % (" consistent" if client == "nginx-consistent" else "")
    lines = ["daemon off;", "master_process off;", "worker_processes 1;",
             "error_log %s/error.log crit;" % workdir, "pid %s/nginx.pid;" % workdir,
             "events { worker_connections 1024; }",
             "http {",
             "  access_log off;",
             "  client_body_temp_path %s; proxy_temp_path %s; fastcgi_temp_path %s;" % (t, t, t),
             "  uwsgi_temp_path %s; scgi_temp_path %s;" % (t, t),
             "  keepalive_requests 100000000; keepalive_timeout 600s;"]
    for j, (_, servers, _) in enumerate(batch):
        lines += ["  upstream u%d {" % j, hash_]
        for host, port, weight in servers:
            lines.append("    server %s:%d weight=%d max_fails=0;" % (host, port, weight))
        lines.append("  }")
    lines += ["  server {", "    listen unix:%s;" % sock]
    for j in range(len(batch)):
        lines += ["    location = /%d {" % j,
                  "      proxy_pass http://u%d; proxy_next_upstream off;" % j,
                  "      proxy_connect_timeout 5s; error_page 502 504 = @pick;",
                  "    }"]
    lines += ["    location @pick { return 200 \"$upstream_addr\"; }", "  }", "}"]
    return "\n".join(lines) + "\n"


def read_responses(conn, buf, count):
    """Read count HTTP responses from conn (buf: bytes already read); return bodies, rest."""
    bodies = []
    while len(bodies) < count:
        end = buf.find(b"\r\n\r\n")
        if end >= 0:
            head = buf[:end].split(b"\r\n")
            status = head[0].split()
            length = None
            for h in head[1:]:
                name, _, value = h.partition(b":")
                if name.strip().lower() == b"content-length":
                    length = int(value)
            if length is None:
                die("nginx answered without Content-Length: %r" % buf[:200])
            if len(buf) >= end + 4 + length:
                body = buf[end + 4:end + 4 + length]
                if len(status) < 2 or status[1] != b"200":
                    die("nginx answered %r: %r" % (head[0], body[:200]))
                bodies.append(body.decode())
                buf = buf[end + 4 + length:]
                continue
        chunk = conn.recv(1 << 16)
        if not chunk:
            die("nginx closed the connection")
        buf += chunk
    return bodies, buf


def addresses(servers):
    """address text ("IP:PORT", as $upstream_addr writes it) -> list index, or an error."""
    index = {}
    for i, (host, port, _) in enumerate(servers):
        try:
            ip = socket.gethostbyname(host)
        except OSError as e:
            return "error cannot resolve %s: %s" % (host, e)
        a = "%s:%d" % (ip, port)
        if a in index:
            return "error servers %d and %d both are %s" % (index[a], i, a)
        index[a] = i
    return index


def run_batch(client, batch, workdir):
    """Answer the configs of batch [(ID, servers, keys)] from one nginx: the answer lines.

    None when nginx refused the configuration of a batch of more than one config
    (the caller then asks for each config alone, to tell which one it was)."""
    answers = [None] * len(batch)
    live = []
    for j, (_, servers, keys) in enumerate(batch):
        index = addresses(servers)
        if isinstance(index, str):
            answers[j] = index
        else:
            live.append((j, index))
    if not live:
        return answers
    sub = [batch[j] for j, _ in live]
    sock = os.path.join(workdir, "nginx.sock")
    log = os.path.join(workdir, "error.log")
    for f in (sock, log):
        if os.path.exists(f):
            os.unlink(f)
    conf = os.path.join(workdir, "nginx.conf")
    with open(conf, "w") as f:
        f.write(nginx_conf(client, sub, workdir, sock))
    PROC[0] = subprocess.Popen([NGINX, "-p", workdir + "/", "-e", log, "-c", conf],
                               stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                               stderr=subprocess.PIPE)
    try:
        end = time.monotonic() + DEADLINE
        while True:
            if PROC[0].poll() is not None:
                if len(sub) > 1:
                    return None
                err = PROC[0].stderr.read().decode(errors="replace")
                try:
                    with open(log) as f:
                        err += " " + f.read()
                except OSError:
                    pass
                answers[live[0][0]] = ("error nginx refused the configuration: %s"
                                       % " ".join(err.split())[:300])
                return answers
            conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                conn.connect(sock)
                break
            except OSError:
                conn.close()
                if time.monotonic() > end:
                    die("nginx did not listen within %g s" % DEADLINE)
                time.sleep(0.002)
        conn.settimeout(30)
        buf = b""
        for u, (j, index) in enumerate(live):
            keys = batch[j][2]
            out = ["ok"]
            for b in range(0, len(keys), BATCH):
                chunk = keys[b:b + BATCH]
                conn.sendall(b"".join(b"GET /%d HTTP/1.1\r\nHost: ref\r\nX-Key: %s\r\n\r\n"
                                      % (u, k) for k in chunk))
                bodies, buf = read_responses(conn, buf, len(chunk))
                for k, a in zip(chunk, bodies):
                    if a not in index:
                        die("nginx placed key %r on %r, not a configured address" % (k, a))
                    out.append(str(index[a]))
            answers[j] = " ".join(out)
        conn.close()
        return answers
    finally:
        stop_nginx()


class BadInput(Exception):
    pass


class Reader:
    """Configs from stdin; next(block=False) answers only from what has already arrived."""

    def __init__(self, fd):
        self.fd = fd
        self.lines = []  # complete lines not yet consumed from self.pos on
        self.pos = 0
        self.partial = b""  # the bytes after the last newline
        self.eof = False

    def fill(self, block):
        if self.eof or not (block or select.select([self.fd], [], [], 0)[0]):
            return False
        data = os.read(self.fd, 1 << 20)
        if not data:
            self.eof = True
            if self.partial:
                self.lines.append(self.partial)
                self.partial = b""
            return True
        pieces = (self.partial + data).split(b"\n")
        self.partial = pieces.pop()
        if self.pos > 100000:
            del self.lines[:self.pos]
            self.pos = 0
        self.lines += pieces
        return True

    def next(self, block):
        """The next (ID, servers, keys), or None (at end of input, or nothing complete yet)."""
        while True:
            cfg = self.parse()
            if cfg is not None:
                return cfg
            if not self.fill(block):
                if self.eof and any(x.strip() for x in self.lines[self.pos:]):
                    raise BadInput("input ends inside a config: %r"
                                   % b" ".join(self.lines[self.pos:self.pos + 3])[:80])
                return None

    def parse(self):
        lines = self.lines
        i = self.pos
        while i < len(lines) and not lines[i].strip():
            i += 1

        def line():
            nonlocal i
            if i >= len(lines):
                raise IndexError
            i += 1
            return lines[i - 1].split()

        try:
            f = line()
            if len(f) != 3 or f[0] != b"config":
                raise BadInput("expected 'config ID N', got %r" % b" ".join(f))
            cid = f[1].decode(errors="replace")
            n = number(f[2], "server count", cid)
            if n < 1:
                raise BadInput("config %s: no servers" % cid)
            if i + n + 1 > len(lines):
                return None  # not all of it has arrived
            servers = []
            for _ in range(n):
                s = line()
                if len(s) != 4 or s[0] != b"server":
                    raise BadInput("config %s: expected 'server HOST PORT WEIGHT'" % cid)
                servers.append((s[1].decode(), number(s[2], "port", cid),
                                number(s[3], "weight", cid)))
            k = line()
            if len(k) != 2 or k[0] != b"keys":
                raise BadInput("config %s: expected 'keys M'" % cid)
            m = number(k[1], "key count", cid)
            if i + m > len(lines):
                return None
            keys = []
            for _ in range(m):
                h = lines[i].strip()
                i += 1
                try:
                    key = bytes.fromhex(h.decode())
                except ValueError:
                    raise BadInput("config %s: bad hex key %r" % (cid, h))
                if not 1 <= len(key) <= 250 or any(c <= 32 or c == 127 for c in key):
                    raise BadInput("config %s: not a legal memcached key %r" % (cid, key))
                keys.append(key)
        except IndexError:
            return None  # not all of it has arrived
        self.pos = i
        return cid, servers, keys


def number(s, what, cid):
    try:
        return int(s)
    except ValueError:
        raise BadInput("config %s: bad %s %r" % (cid, what, s))


def main():
    if len(sys.argv) != 2 or sys.argv[1] not in ("nginx", "nginx-consistent"):
        die("usage: ref_nginx.py nginx|nginx-consistent < configs")
    if not os.access(NGINX, os.X_OK):
        die("%s not found (apt-get install nginx-light)" % NGINX)
    client = sys.argv[1]
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    workdir = tempfile.mkdtemp(prefix="mcr-ref-nginx-")
    os.mkdir(os.path.join(workdir, "tmp"))
    reader = Reader(sys.stdin.fileno())
    bad = None
    try:
        while bad is None:
            try:
                cfg = reader.next(block=True)
            except BadInput as e:
                die(str(e))
            if cfg is None:
                break
            # the configs that have already arrived share one nginx (nginx's start is
            # the slow part); never wait for more input while an answer is owed
            batch = [cfg]
            while len(batch) < MAX_CONFIGS and sum(len(c[2]) for c in batch) < MAX_KEYS:
                try:
                    cfg = reader.next(block=False)
                except BadInput as e:
                    bad = str(e)  # answer what came before it first
                    break
                if cfg is None:
                    break
                batch.append(cfg)
            answers = run_batch(client, batch, workdir)
            if answers is None:  # nginx refused one of them: which one?
                answers = [run_batch(client, [c], workdir)[0] for c in batch]
            for (cid, _, _), a in zip(batch, answers):
                sys.stdout.write("config %s %s\n" % (cid, a))
                sys.stdout.flush()
        if bad is not None:
            die(bad)
    finally:
        stop_nginx()
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
