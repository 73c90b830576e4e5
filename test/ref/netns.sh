#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# netns.sh: run a command in a private network namespace (as root; only a loopback interface, up) with its host names resolved from HOSTS alone, by the resolver shim hosts_shim.c (LD_PRELOAD).
#
# Usage: netns.sh HOSTS COMMAND [ARG...]
# The differential tests of the clients' placements run their reference
# programs this way, so that host names resolve through a hosts file of the
# test's own to 127.0.0.0/8 addresses, servers may listen on any loopback
# address and port (11211 included) without meeting anything else on the
# machine, and no packet can leave it: the namespace has no other interface.
#
# No mount namespace and no /etc/hosts: a chroot (where pbuilder and sbuild
# build packages) may refuse the first and lack the second. COMMAND runs with
# MCR_TEST_HOSTS=HOSTS and the shim in LD_PRELOAD, which answers getaddrinfo,
# getnameinfo and gethostby*() from HOSTS only (hosts_shim.c): the libc
# lookups of Python, Ruby, the JVM, Go's cgo resolver (ref_gomemcache.sh
# asks for it), nginx and libmemcached. A name it does not list resolves
# nowhere else, and the namespace reaches no DNS server, so a client that
# resolves another way fails rather than use another address.
#
# The shim is $MCR_TEST_HOSTS_SHIM (test_clients gives the one the build
# makes, target mcr_test_hosts_shim); unset, it is compiled here with cc into
# a cache under ${TMPDIR:-/tmp} when missing or older than its source, as
# ref_spy.sh and ref_gomemcache.sh compile theirs (the selftest_*.sh scripts
# run without a build that way). MCR_TEST_NETNS=1 is set inside.
set -eu
if [ $# -lt 2 ]; then
    echo "usage: netns.sh HOSTS COMMAND [ARG...]" >&2
    exit 2
fi
hosts=$1
shift
if [ ! -r "$hosts" ]; then
    echo "netns.sh: cannot read the hosts file $hosts" >&2
    exit 2
fi
case $hosts in
/*) ;;
*) hosts=$(cd "$(dirname "$hosts")" && pwd)/$(basename "$hosts") ;;
esac
if [ "$(id -u)" -ne 0 ]; then
    echo "netns.sh: must run as root (unshare --net)" >&2
    exit 2
fi
for tool in unshare ip; do
    command -v "$tool" >/dev/null 2>&1 || {
        echo "netns.sh: $tool not found (util-linux, iproute2: scripts/deps.sh installs them)" >&2
        exit 2
    }
done
here=$(cd "$(dirname "$0")" && pwd)
shim=${MCR_TEST_HOSTS_SHIM:-}
if [ -z "$shim" ]; then
    src=$here/hosts_shim.c
    cache=${TMPDIR:-/tmp}/mcr-ref-shim-$(id -u)
    mkdir -p "$cache"
    shim=$cache/hosts_shim.so
    if [ ! -f "$shim" ] || [ "$src" -nt "$shim" ]; then
        command -v cc >/dev/null 2>&1 ||
            { echo "netns.sh: cc not found (apt-get install build-essential)" >&2; exit 2; }
        tmp=$(mktemp "$cache/build.XXXXXX")
        if ! cc -O2 -Wall -Wextra -shared -fPIC -o "$tmp" "$src" -ldl >&2; then
            rm -f "$tmp"
            echo "netns.sh: cc failed on $src" >&2
            exit 2
        fi
        mv -f "$tmp" "$shim" # atomic: a concurrent run never sees half a library
    fi
fi
case $shim in
/*) ;;
*) shim=$(cd "$(dirname "$shim")" && pwd)/$(basename "$shim") ;;
esac
if [ ! -r "$shim" ]; then
    echo "netns.sh: cannot read the resolver shim $shim" >&2
    exit 2
fi
exec unshare --net --fork -- /bin/sh -c '
    set -e
    ip link set lo up
    MCR_TEST_HOSTS=$0
    LD_PRELOAD="$1${LD_PRELOAD:+ $LD_PRELOAD}"
    MCR_TEST_NETNS=1
    export MCR_TEST_HOSTS LD_PRELOAD MCR_TEST_NETNS
    shift
    exec "$@"' "$hosts" "$shim" "$@"
