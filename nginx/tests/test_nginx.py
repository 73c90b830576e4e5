# SPDX-License-Identifier: BSD-3-Clause
"""test_nginx.py: Debian's nginx with ngx_http_mcroute_module and real memcached: pages
stored by `mcroute set` and by php-memcached through the preload are served by
memcached_pass; a snapshot file and a host agent's state are followed without a reload;
a key left only on its old owner is served during a resize's switched phase; bad
directives fail `nginx -t` naming the problem."""

import importlib.util
import json
import os
import signal
import socket
import subprocess
import threading
import time
import urllib.error
import urllib.request

import pytest

# the package's harness (memcached, etcd, the CLI, time limits), shared
_spec = importlib.util.spec_from_file_location(
    "mcr_harness", os.path.join(os.environ.get("MCR_TEST_SRC_DIR", ""), "python", "tests",
                                "conftest.py"))
h = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(h)
servers, etcd = h.servers, h.etcd  # fixtures

NGINX = "/usr/sbin/nginx"
PHP = "/usr/bin/php"


def module_path():
    m = os.environ.get("MCR_NGINX_MODULE")
    if not m or not os.path.exists(m):
        pytest.fail("MCR_NGINX_MODULE (the built ngx_http_mcroute_module.so) is not set or "
                    "missing: run from ctest")
    if not os.access(NGINX, os.X_OK):
        pytest.fail("nginx is not installed (Debian package nginx-light)")
    return m


def conf_text(work, port, upstream, location_extra="memcached_next_upstream not_found;",
              key="$uri"):
    t = os.path.join(work, "tmp")
    os.makedirs(t, exist_ok=True)
    return "\n".join([
        "load_module %s;" % module_path(),
        # as root, workers would run as nobody, who may not read the test's
        # files (a state's group, --group, serves that in production)
        "user root;" if os.getuid() == 0 else "",
        "daemon off;", "master_process on;", "worker_processes 1;",
        "error_log %s/error.log info;" % work, "pid %s/nginx.pid;" % work,
        "events { worker_connections 256; }",
        "http {",
        "  access_log off;",
        "  client_body_temp_path %s; proxy_temp_path %s; fastcgi_temp_path %s;" % (t, t, t),
        "  uwsgi_temp_path %s; scgi_temp_path %s;" % (t, t),
        "  upstream cache { %s }" % upstream,
        "  server {",
        "    listen 127.0.0.1:%d;" % port,
        "    location /page/ { set $memcached_key %s; memcached_pass cache; %s }" % (
            key, location_extra),
        "  }",
        "}", ""])


class Nginx:
    """nginx with the module on a port it picked, in `work`; stop() by PID."""

    def __init__(self, work, upstream, **kw):
        self.work = str(work)
        self.port = h.free_port()
        self.conf = os.path.join(self.work, "nginx.conf")
        with open(self.conf, "w") as f:
            f.write(conf_text(self.work, self.port, upstream, **kw))
        self.proc = subprocess.Popen([NGINX, "-p", self.work + "/", "-c", self.conf],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        h.wait_until(self._listening, 20, "nginx listens")

    def _listening(self):
        if self.proc.poll() is not None:
            pytest.fail("nginx exited: %s %s" % (self.proc.stderr.read().decode(),
                                                 self.log()))
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=1):
                return True
        except OSError:
            return False

    def get(self, path):
        """(status, body) of GET path."""
        try:
            with urllib.request.urlopen("http://127.0.0.1:%d%s" % (self.port, path),
                                        timeout=h.limit(10)) as r:
                return r.status, r.read()
        except urllib.error.HTTPError as e:
            return e.code, b""

    def log(self):
        try:
            with open(os.path.join(self.work, "error.log")) as f:
                return f.read()[-3000:]
        except OSError:
            return ""

    def stop(self):
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGQUIT)  # the master stops its workers
            try:
                self.proc.wait(h.limit(20))
            except subprocess.TimeoutExpired:
                os.killpg(os.getpgid(self.proc.pid), signal.SIGKILL)
                self.proc.wait()


@pytest.fixture
def nginx(tmp_path):
    started = []

    def start(upstream, **kw):
        work = tmp_path / ("nginx%d" % len(started))
        work.mkdir()
        n = Nginx(work, upstream, **kw)
        started.append(n)
        return n

    yield start
    for n in started:
        n.stop()


def store(source, pages):
    """`mcroute set SOURCE` of {path: body}."""
    r = subprocess.run([h.mcroute_bin(), "set"] + source,
                       input="".join("%s\t%s\n" % kv for kv in pages.items()),
                       capture_output=True, text=True, timeout=h.limit(60))
    assert r.returncode == 0, r.stderr


def served(n, pages):
    """Every page served with its body."""
    for path, body in pages.items():
        st, got = n.get(path)
        assert (st, got.decode()) == (200, body), "%s: %s %r\n%s" % (path, st, got, n.log())


def pages_of(tag, count):
    return {"/page/%s/%d" % (tag, i): "%s body %d" % (tag, i) for i in range(count)}


def nginx_t(tmp_path, upstream):
    """`nginx -t` of a configuration with this upstream: (status, output)."""
    work = tmp_path / ("t%d" % time.monotonic_ns())
    work.mkdir()
    conf = work / "nginx.conf"
    conf.write_text(conf_text(str(work), h.free_port(), upstream))
    r = subprocess.run([NGINX, "-t", "-p", str(work) + "/", "-c", str(conf)],
                       capture_output=True, text=True, timeout=h.limit(30))
    return r.returncode, r.stderr + r.stdout


def test_bad_directives_fail_nginx_t(tmp_path):
    cases = [
        ("mcroute servers=127.0.0.1:1 mode=nosuch;", "unknown mode"),
        ("mcroute state=/nonexistent/web.state;", "/nonexistent/web.state"),
        ("mcroute snapshot=/nonexistent/web.snap;", "/nonexistent/web.snap"),
        ("mcroute servers=127.0.0.1:99999;", "99999"),
        ("mcroute servers=,,;", "mcroute"),
        ("mcroute servers=127.0.0.1:1 client=nosuch;", "nosuch"),
        ("mcroute servers=127.0.0.1:1 colour=blue;", "unknown parameter \"colour=blue\""),
        ("mcroute servers=127.0.0.1:1 state=/x;", "only one of"),
        ("mcroute;", "invalid number of arguments in \"mcroute\""),
        ("mcroute mode=jump;", "no servers"),
        ("mcroute snapshot=/x mode=jump;", "apply to servers= only"),
        ("mcroute servers=127.0.0.1:1 mode=jump client=pylibmc;", "not both"),
        ("server 127.0.0.1:1; mcroute servers=127.0.0.1:1;", "\"server\" lines"),
        ("mcroute servers=127.0.0.1:1 key=$nosuchvariable;", "nosuchvariable"),
    ]
    for upstream, want in cases:
        st, out = nginx_t(tmp_path, upstream)
        assert st != 0 and want in out, (upstream, out)
    st, out = nginx_t(tmp_path, "mcroute servers=127.0.0.1:1,127.0.0.1:2 mode=jump;")
    assert st == 0, out


def test_pages_of_mcroute_set_and_php(servers, nginx, tmp_path):
    mcs = servers(4)
    lst = ",".join(m.addr for m in mcs)
    n = nginx("mcroute servers=%s client=php-memcached-ketama;" % lst)
    pages = pages_of("cli", 200)
    store(["-s", lst, "--client", "php-memcached-ketama"], pages)
    served(n, pages)
    # php-memcached through the preload, placing keys as nginx does
    preload = os.path.join(os.environ["MCR_TEST_BIN_DIR"], "libmcroute_preload.so")
    script = ("$m = new Memcached(); $m->addServer('127.0.0.1', 1);"
              "for ($i = 0; $i < 200; $i++) {"
              "  if (!$m->set(\"/page/php/$i\", \"php body $i\")) exit(1); }")
    env = dict(os.environ, LD_PRELOAD=preload, MCROUTE_SERVERS=lst,
               MCROUTE_CLIENT="php-memcached-ketama")
    r = subprocess.run([PHP, "-r", script], env=env, capture_output=True, text=True,
                       timeout=h.limit(60))
    assert r.returncode == 0, r.stdout + r.stderr
    served(n, pages_of("php", 200))
    # each page on the server `mcroute locate` names, and on no other
    where = h.locate(["-s", lst, "--client", "php-memcached-ketama"], list(pages))
    by = {m.addr: m for m in mcs}
    for path in list(pages)[:50]:
        assert [m.addr for m in mcs if m.raw_get(path) is not None] == [where[path]]
        assert by[where[path]].raw_get(path) == pages[path].encode()
    assert n.get("/page/missing")[0] == 404


def test_key_variable(servers, nginx):
    # key= routes by another variable than $memcached_key (libmemcached's
    # group key, _by_key): a page is fetched by its URI from the owner of its
    # group ?g=
    mcs = servers(3)
    lst = ",".join(m.addr for m in mcs)
    n = nginx("mcroute servers=%s mode=jump key=$arg_g;" % lst)
    groups = ["group:%d" % i for i in range(30)]
    owner = h.locate(["-s", lst, "--mode", "jump"], groups)
    by = {m.addr: m for m in mcs}
    for i, g in enumerate(groups):
        by[owner[g]].raw_set("/page/k/%d" % i, "k%d" % i)
    for i, g in enumerate(groups):
        assert n.get("/page/k/%d?g=%s" % (i, g)) == (200, b"k%d" % i)
    assert len(set(owner.values())) > 1


def save_snapshot(lst, path, epoch):
    r = subprocess.run([h.mcroute_bin(), "snapshot", "-s", lst, "--epoch", str(epoch), "-o",
                        path], capture_output=True, text=True, timeout=h.limit(30))
    assert r.returncode == 0, r.stderr


def test_snapshot_file_followed_without_reload(servers, nginx, tmp_path):
    mcs = servers(4)
    three = ",".join(m.addr for m in mcs[:3])
    four = ",".join(m.addr for m in mcs)
    snap = str(tmp_path / "web.snap")
    save_snapshot(three, snap, 1)
    n = nginx("mcroute snapshot=%s;" % snap)
    a = pages_of("a", 100)
    store(["--snapshot", snap], a)
    served(n, a)
    save_snapshot(four, snap, 2)
    b = pages_of("b", 200)
    store(["--snapshot", snap], b)
    # the worker looks at the file at most once a second
    h.wait_until(lambda: all(n.get(p)[0] == 200 for p in list(b)[:50]), 10,
                 "nginx serves pages placed by the new snapshot")
    served(n, b)
    assert any(mcs[3].raw_get(p) is not None for p in b)  # the fourth server has some
    # an older epoch is refused: the new placement stays
    save_snapshot(three, snap, 1)
    h.wait_until(lambda: n.get("/page/b/0")[0] == 200 and "not taken" in n.log(), 10,
                 "the worker refuses the older file")
    served(n, b)


def test_state_followed_and_switched_fallback(servers, etcd, nginx, tmp_path):
    mcs = servers(4)
    three = ",".join(m.addr for m in mcs[:3])
    four = ",".join(m.addr for m in mcs)
    r = h.cli("members", "publish", "--etcd", etcd.url, "--pool", "web", "-s", three)
    assert r.returncode == 0, r.stderr
    state = str(tmp_path / "web.state")
    agent = subprocess.Popen([h.mcroute_bin(), "agent", "--etcd", etcd.url, "--pool", "web",
                              "--state", state], stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL)
    migrate = None
    stop = threading.Event()
    try:
        h.wait_until(lambda: os.path.exists(state), 20, "the agent writes its state")
        n = nginx("mcroute state=%s;" % state)
        a = pages_of("a", 100)
        store(["--state", state], a)
        served(n, a)
        # php-memcached through the preload, following the same state
        preload = os.path.join(os.environ["MCR_TEST_BIN_DIR"], "libmcroute_preload.so")
        script = ("$m = new Memcached(); $m->addServer('127.0.0.1', 1);"
                  "for ($i = 0; $i < 100; $i++) {"
                  "  if (!$m->set(\"/page/php/$i\", \"php body $i\")) exit(1); }")
        env = dict(os.environ, LD_PRELOAD=preload, MCROUTE_STATE=state)
        rp = subprocess.run([PHP, "-r", script], env=env, capture_output=True, text=True,
                            timeout=h.limit(60))
        assert rp.returncode == 0, rp.stdout + rp.stderr
        served(n, pages_of("php", 100))

        # nginx's worker adopts each phase at its requests: keep it asked
        def poke():
            while not stop.is_set():
                n.get("/page/a/0")
                time.sleep(0.02)
        threading.Thread(target=poke, daemon=True).start()
        # a resize to four servers, held in its grace period (reads fall back)
        migrate = subprocess.Popen([h.mcroute_bin(), "migrate", "--etcd", etcd.url, "--pool",
                                    "web", four, "--grace", "600", "--wait",
                                    str(int(h.limit(60)))],
                                   stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)

        def phase():
            s = h.cli("members", "status", "--etcd", etcd.url, "--pool", "web", "--json")
            m = json.loads(s.stdout).get("migration") if s.returncode == 0 else None
            return m is not None and m.get("phase") == "grace"
        h.wait_until(phase, 90, "the migration reaches its grace period")
        # pages stored before the resize are served (copied, or read at the old owner)
        served(n, a)
        # keys that moved, stored only at their old owner: served through the fallback
        old = h.locate(["-s", three], ["/page/m/%d" % i for i in range(400)])
        new = h.locate(["-s", four], list(old))
        moved = [k for k in old if old[k] != new[k]][:20]
        assert moved
        by = {m.addr: m for m in mcs}
        for k in moved:
            by[old[k]].raw_set(k, "old " + k)
            assert by[new[k]].raw_get(k) is None
        for k in moved:
            assert n.get(k) == (200, ("old " + k).encode()), n.log()
        # pages stored now go to the four servers: served without a reload
        b = pages_of("b", 100)
        store(["--state", state], b)
        served(n, b)
        assert any(mcs[3].raw_get(p) is not None for p in b)
    finally:
        stop.set()
        for p in (migrate, agent):
            if p is not None and p.poll() is None:
                p.terminate()
                try:
                    p.wait(h.limit(30))
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()
