# SPDX-License-Identifier: BSD-3-Clause
"""conftest.py: what the package's pytest suites share: real memcached servers on
loopback ports they pick (stopped by PID), the built `mcroute` command, the time scale,
and direct reads of a server (to see where a key really is).

The suites run from ctest (python/tests/CMakeLists.txt registers them) with PYTHONPATH
set to the package built in the build tree and MCR_TEST_BIN_DIR to the build directory.
A tool they need that is missing fails the test with its name; nothing skips.
"""

import os
import shutil
import signal
import socket
import subprocess
import time

import pytest

MEMCACHED = shutil.which("memcached") or "/usr/bin/memcached"


def time_scale():
    """MCR_TEST_TIME_SCALE, the factor of every time limit (1 when unset)."""
    v = os.environ.get("MCR_TEST_TIME_SCALE") or os.environ.get("MCR_TEST_TIME_SCALE_CTEST")
    if not v:
        return 1.0
    s = float(v)
    if not 0 < s <= 1000:
        raise ValueError("MCR_TEST_TIME_SCALE=%r is not a factor from 0 to 1000" % v)
    return s


def limit(seconds):
    """A time limit scaled by MCR_TEST_TIME_SCALE."""
    return seconds * time_scale()


def mcroute_bin():
    d = os.environ.get("MCR_TEST_BIN_DIR")
    if not d:
        pytest.fail("MCR_TEST_BIN_DIR is not set: run the suite from ctest")
    path = os.path.join(d, "mcroute")
    if not os.access(path, os.X_OK):
        pytest.fail("%s is not built" % path)
    return path


def wait_until(pred, seconds, what):
    """Poll pred() until it is true; fail naming `what` after the scaled limit."""
    deadline = time.monotonic() + limit(seconds)
    while True:
        v = pred()
        if v:
            return v
        if time.monotonic() > deadline:
            pytest.fail("%s: not within %.1f s" % (what, limit(seconds)))
        time.sleep(0.01)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Memcached:
    """One real memcached on 127.0.0.1, a port it picked; stop() by PID."""

    def __init__(self):
        if not os.access(MEMCACHED, os.X_OK):
            pytest.fail("memcached is not installed (Debian package memcached)")
        for _ in range(20):
            self.port = free_port()
            argv = [MEMCACHED, "-l", "127.0.0.1", "-p", str(self.port), "-U", "0", "-t", "1",
                    "-m", "64"]
            if os.getuid() == 0:
                argv += ["-u", "nobody"]
            self.proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL,
                                         stderr=subprocess.DEVNULL)
            if self._wait_listening():
                return
            self.stop()
        pytest.fail("memcached did not start on a free port in 20 tries")

    def _wait_listening(self):
        deadline = time.monotonic() + limit(10)
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                return False  # the port was taken meanwhile: try another
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1):
                    return True
            except OSError:
                time.sleep(0.01)
        return False

    @property
    def addr(self):
        return "127.0.0.1:%d" % self.port

    def stop(self):
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait()

    def command(self, line, end=(b"END\r\n", b"STORED\r\n", b"DELETED\r\n", b"NOT_FOUND\r\n",
                                 b"OK\r\n")):
        """One text command; the whole reply (bytes)."""
        with socket.create_connection(("127.0.0.1", self.port), timeout=limit(5)) as s:
            s.sendall(line)
            buf = b""
            while not buf.endswith(end):
                chunk = s.recv(65536)
                if not chunk:
                    break
                buf += chunk
            return buf

    def raw_get(self, key):
        """The value this server holds for `key` (bytes), or None; read directly."""
        k = key.encode() if isinstance(key, str) else key
        r = self.command(b"get " + k + b"\r\n")
        if r == b"END\r\n":
            return None
        head, _, rest = r.partition(b"\r\n")
        n = int(head.split()[3])
        return rest[:n]

    def raw_set(self, key, value, flags=0):
        k = key.encode() if isinstance(key, str) else key
        v = value.encode() if isinstance(value, str) else value
        r = self.command(b"set %s %d 0 %d\r\n%s\r\n" % (k, flags, len(v), v))
        assert r == b"STORED\r\n", r


@pytest.fixture
def servers():
    """servers(n): n new memcached servers, stopped when the test ends."""
    started = []

    def start(n):
        new = [Memcached() for _ in range(n)]
        started.extend(new)
        return new

    yield start
    for m in started:
        m.stop()


def locate(args, keys):
    """{key: "host:port"} as `mcroute locate ARGS` prints it (keys on stdin)."""
    r = subprocess.run([mcroute_bin(), "locate"] + list(args), input="\n".join(keys) + "\n",
                       capture_output=True, text=True, timeout=limit(60))
    if r.returncode != 0:
        pytest.fail("mcroute locate %s: %s" % (" ".join(args), r.stderr))
    out = {}
    for line in r.stdout.splitlines():
        k, _, server = line.partition("\t")
        out[k] = server
    return out


ETCD = shutil.which("etcd") or "/usr/bin/etcd"


class Etcd:
    """One real etcd member on 127.0.0.1 (ports it picked, a data directory
    under `tmp`); stop() by PID."""

    def __init__(self, tmp):
        if not os.access(ETCD, os.X_OK):
            pytest.fail("etcd is not installed (Debian package etcd-server)")
        for _ in range(10):
            cport, pport = free_port(), free_port()
            self.url = "http://127.0.0.1:%d" % cport
            peer = "http://127.0.0.1:%d" % pport
            data = os.path.join(str(tmp), "etcd-%d" % cport)
            self.log = open(data + ".log", "w")
            self.proc = subprocess.Popen(
                [ETCD, "--name=n1", "--data-dir=" + data, "--listen-client-urls=" + self.url,
                 "--advertise-client-urls=" + self.url, "--listen-peer-urls=" + peer,
                 "--initial-advertise-peer-urls=" + peer, "--initial-cluster=n1=" + peer,
                 "--initial-cluster-state=new", "--logger=zap", "--log-outputs=stderr"],
                stdout=self.log, stderr=self.log)
            if self._wait_healthy():
                return
            self.stop()
        pytest.fail("etcd did not start on free ports in 10 tries")

    def _wait_healthy(self):
        import urllib.request
        deadline = time.monotonic() + limit(20)
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                return False
            try:
                with urllib.request.urlopen(self.url + "/health", timeout=1) as r:
                    if b'"true"' in r.read():
                        return True
            except OSError:
                pass
            time.sleep(0.05)
        return False

    def stop(self):
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait()
        self.log.close()


@pytest.fixture
def etcd(tmp_path):
    e = Etcd(tmp_path)
    yield e
    e.stop()


def cli(*args, timeout=60):
    """Run the built mcroute with args; the CompletedProcess (text)."""
    return subprocess.run([mcroute_bin()] + list(args), capture_output=True, text=True,
                          timeout=limit(timeout))
