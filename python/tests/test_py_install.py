# SPDX-License-Identifier: BSD-3-Clause
"""test_py_install.py: the package as its README installs it: `cmake --install` of the
build into a temporary prefix, a virtualenv, `pip install --no-build-isolation` of a copy
of python/ with PKG_CONFIG_PATH naming that prefix (no package index), then the
installed module (the stable ABI's _mcroute.abi3.so) placing keys as the installed
`mcroute locate` does."""

import os
import shutil
import subprocess
import sys

import pytest

from conftest import limit

PROGRAM = r"""
import sys, mcroute
c = mcroute.Client(servers=sys.argv[1], client="php-memcached-ketama")
for k, s in zip(sys.argv[2:], c.locate_many(sys.argv[2:])):
    print("%s\t%s" % (k, s))
print("module", mcroute._mcroute.__file__)
"""


def run(argv, **kw):
    r = subprocess.run(argv, capture_output=True, text=True, timeout=limit(300), **kw)
    assert r.returncode == 0, "%s: %s%s" % (" ".join(argv), r.stdout, r.stderr)
    return r.stdout


def test_pip_install_into_a_virtualenv(tmp_path):
    build = os.environ.get("MCR_TEST_BIN_DIR")
    src = os.environ.get("MCR_TEST_SRC_DIR")
    cmake = os.environ.get("MCR_TEST_CMAKE") or shutil.which("cmake")
    if not build or not src or not cmake:
        pytest.fail("MCR_TEST_BIN_DIR, MCR_TEST_SRC_DIR and cmake are needed: run from ctest")
    prefix = tmp_path / "inst"
    run([cmake, "--install", build, "--prefix", str(prefix)])
    libdir = next(p for p in prefix.glob("lib*") if (p / "pkgconfig" / "mcroute.pc").exists())
    venv = tmp_path / "venv"
    run([sys.executable, "-m", "venv", str(venv)])
    pkg = tmp_path / "python"
    shutil.copytree(os.path.join(src, "python"), pkg,
                    ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__"))
    env = dict(os.environ, PKG_CONFIG_PATH=str(libdir / "pkgconfig"), PIP_NO_INDEX="1")
    env.pop("PYTHONPATH", None)  # the build tree's package must not be what is imported
    py = str(venv / "bin" / "python")
    run([py, "-m", "pip", "install", "--no-build-isolation", str(pkg)], env=env)
    servers = "10.0.0.1:11211,10.0.0.2:11211,10.0.0.3:11211"
    keys = ["a", "b", "user:42", "ключ", "x" * 200]
    out = run([py, "-c", PROGRAM, servers] + keys, env=env, cwd=str(tmp_path))
    lines = out.splitlines()
    assert lines[-1].startswith("module " + str(venv)), lines[-1]
    # the stable ABI's module (Py_LIMITED_API): one file for every CPython >= 3.11
    assert lines[-1].endswith("/_mcroute.abi3.so"), lines[-1]
    want = run([str(prefix / "bin" / "mcroute"), "locate", "-s", servers, "--client",
                "php-memcached-ketama"] + keys, env=env)
    assert "\n".join(lines[:-1]) + "\n" == want
