#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
# ref_nginx.py: where nginx's upstream `hash $key [consistent];` sends keys, asked of a real nginx (its $upstream_addr); protocol in test/ref/README.md.
#
# Usage: ref_nginx.py nginx|nginx-consistent < configs
#
# For each configuration a real nginx (Debian's nginx-light, /usr/sbin/nginx)
# is started in a temporary prefix with
#   upstream u { hash $http_x_key [consistent]; server HOST:PORT weight=W max_fails=0; ... }
#   location / { proxy_pass http://u; proxy_next_upstream off; error_page 502 = @pick; }
#   location @pick { return 200 "$upstream_addr"; }
# listening on a Unix socket (so it can never collide with a configured
# server). Each key is sent as the X-Key request header, its raw UTF-8 bytes,
# which is what $http_x_key holds and nginx hashes (no decoding). nginx picks
# the peer with its own hash code and connects to it; nothing listens on the
# configured addresses (the test's private network namespace, netns.sh), so the
# connection is refused at once, the request ends in 502 with no retry
# (proxy_next_upstream off), and the error page answers the address nginx
# tried, $upstream_addr, which maps back to the list index. max_fails=0 keeps
# a refused peer from ever being marked down, so every key is placed on the
# intact configuration. The requests of a config are pipelined on one
# persistent HTTP/1.1 connection.
import os
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


def nginx_conf(client, servers, workdir, sock):
    t = os.path.join(workdir, "tmp")
    lines = ["daemon off;", "master_process off;", "worker_processes 1;",
             "error_log %s/error.log crit;" % workdir, "pid %s/nginx.pid;" % workdir,
             "events { worker_connections 1024; }",
             "http {",
             "  access_log off;",
             "  client_body_temp_path %s; proxy_temp_path %s; fastcgi_temp_path %s;" % (t, t, t),
             "  uwsgi_temp_path %s; scgi_temp_path %s;" % (t, t),
             "  keepalive_requests 100000000; keepalive_timeout 600s;",
             "  upstream u {",
             "    hash $http_x_key%s;" % (" consistent" if client == "nginx-consistent" else "")]
    for host, port, weight in servers:
        lines.append("    server %s:%d weight=%d max_fails=0;" % (host, port, weight))
    lines += ["  }",
              "  server {",
              "    listen unix:%s;" % sock,
              "    location / {",
              "      proxy_pass http://u; proxy_next_upstream off;",
              "      proxy_connect_timeout 5s; error_page 502 504 = @pick;",
              "    }",
              "    location @pick { return 200 \"$upstream_addr\"; }",
              "  }",
              "}"]
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


def run_config(client, servers, keys, workdir):
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
    sock = os.path.join(workdir, "nginx.sock")
    if os.path.exists(sock):
        os.unlink(sock)
    log = os.path.join(workdir, "error.log")
    if os.path.exists(log):
        os.unlink(log)
    conf = os.path.join(workdir, "nginx.conf")
    with open(conf, "w") as f:
        f.write(nginx_conf(client, servers, workdir, sock))
    PROC[0] = subprocess.Popen([NGINX, "-p", workdir + "/", "-e", log, "-c", conf], stdin=subprocess.DEVNULL,
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        end = time.monotonic() + DEADLINE
        while True:
            if PROC[0].poll() is not None:
                err = PROC[0].stderr.read().decode(errors="replace")
                try:
                    with open(log) as f:
                        err += " " + f.read()
                except OSError:
                    pass
                return "error nginx refused the configuration: %s" % " ".join(err.split())[:300]
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
        out = []
        buf = b""
        for b in range(0, len(keys), BATCH):
            batch = keys[b:b + BATCH]
            conn.sendall(b"".join(b"GET / HTTP/1.1\r\nHost: ref\r\nX-Key: %s\r\n\r\n" % k
                                  for k in batch))
            bodies, buf = read_responses(conn, buf, len(batch))
            for k, a in zip(batch, bodies):
                if a not in index:
                    die("nginx placed key %r on %r, not a configured address" % (k, a))
                out.append(str(index[a]))
        conn.close()
        return " ".join(["ok"] + out)
    finally:
        stop_nginx()


def parse_int(s, what, cid):
    try:
        return int(s)
    except ValueError:
        die("config %s: bad %s %r" % (cid, what, s))


def main():
    if len(sys.argv) != 2 or sys.argv[1] not in ("nginx", "nginx-consistent"):
        die("usage: ref_nginx.py nginx|nginx-consistent < configs")
    if not os.access(NGINX, os.X_OK):
        die("%s not found (apt-get install nginx-light)" % NGINX)
    client = sys.argv[1]
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    workdir = tempfile.mkdtemp(prefix="mcr-ref-nginx-")
    os.mkdir(os.path.join(workdir, "tmp"))
    inp = sys.stdin.buffer
    try:
        while True:
            line = inp.readline()
            if not line:
                break
            f = line.split()
            if not f:
                continue
            if len(f) != 3 or f[0] != b"config":
                die("expected 'config ID N', got %r" % line)
            cid = f[1].decode()
            n = parse_int(f[2], "server count", cid)
            if n < 1:
                die("config %s: no servers" % cid)
            servers = []
            for _ in range(n):
                s = inp.readline().split()
                if len(s) != 4 or s[0] != b"server":
                    die("config %s: expected 'server HOST PORT WEIGHT'" % cid)
                servers.append((s[1].decode(), parse_int(s[2], "port", cid),
                                parse_int(s[3], "weight", cid)))
            k = inp.readline().split()
            if len(k) != 2 or k[0] != b"keys":
                die("config %s: expected 'keys M'" % cid)
            keys = []
            for _ in range(parse_int(k[1], "key count", cid)):
                h = inp.readline().strip()
                try:
                    key = bytes.fromhex(h.decode())
                except ValueError:
                    die("config %s: bad hex key %r" % (cid, h))
                if not 1 <= len(key) <= 250 or any(c <= 32 or c == 127 for c in key):
                    die("config %s: not a legal memcached key %r" % (cid, key))
                keys.append(key)
            sys.stdout.write("config %s %s\n" % (cid, run_config(client, servers, keys, workdir)))
            sys.stdout.flush()
    finally:
        stop_nginx()
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
