# SPDX-License-Identifier: BSD-3-Clause
"""setup.py: build the mcroute package's C extension against mcroute's installed libraries,
found with pkg-config (PKG_CONFIG_PATH serves another prefix):

    python3 -m pip install --no-build-isolation ./python
"""

import shlex
import subprocess

from setuptools import Extension, setup

MODULES = ["mcroute-pool", "mcroute-fleet", "mcroute", "libevent_core"]
# Directories the dynamic linker searches anyway: no RPATH for them.
SYSTEM_LIBDIRS = {"/usr/lib", "/lib", "/usr/lib64", "/lib64", "/usr/lib/x86_64-linux-gnu",
                  "/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu"}


def pkg_config(*args):
    cmd = ["pkg-config", *args]
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, check=True)
    except FileNotFoundError:
        raise SystemExit("mcroute: pkg-config is not installed (Debian package pkg-config)")
    except subprocess.CalledProcessError as e:
        raise SystemExit("mcroute: pkg-config does not find mcroute's libraries (%s): install "
                         "them (cmake --install), or point PKG_CONFIG_PATH at their "
                         "lib/pkgconfig directory\n%s" % (" ".join(cmd), e.stderr.strip()))
    return r.stdout.strip()


def flags(option, prefix):
    return [f[len(prefix):] for f in shlex.split(pkg_config(option, *MODULES))
            if f.startswith(prefix)]


libdir = pkg_config("--variable=libdir", "mcroute")
ext = Extension(
    "mcroute._mcroute",
    sources=["mcroute/%s.c" % f for f in ("module", "client", "values", "calls", "many", "info")],
    include_dirs=flags("--cflags-only-I", "-I"),
    library_dirs=flags("--libs-only-L", "-L"),
    libraries=flags("--libs-only-l", "-l"),
    # an installed prefix outside the linker's search path: found at run time
    runtime_library_dirs=[] if libdir in SYSTEM_LIBDIRS else [libdir],
    extra_compile_args=["-std=c11", "-fvisibility=hidden"],
    # the stable ABI, the limited API of 3.11 (the buffer protocol joined it
    # then): one _mcroute.abi3.so, in a cp311-abi3 wheel, for every CPython
    # from 3.11 on
    define_macros=[("Py_LIMITED_API", "0x030B0000")],
    py_limited_api=True,
)

setup(
    name="mcroute",
    version=pkg_config("--modversion", "mcroute"),
    description="memcached clients placed by mcroute (servers, snapshots, a host's state, "
                "etcd), with a Django cache backend and a pymemcache hasher",
    license="BSD-3-Clause",
    packages=["mcroute"],
    ext_modules=[ext],
    python_requires=">=3.11",
    options={"bdist_wheel": {"py_limited_api": "cp311"}},
)
