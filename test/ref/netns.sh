#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# netns.sh: run a command in private mount and network namespaces (as root): HOSTS bind-mounted over /etc/hosts, only a loopback interface, up.
#
# Usage: netns.sh HOSTS COMMAND [ARG...]
# The differential tests of the clients' placements run their reference
# programs (and themselves) this way, so that host names resolve through a
# hosts file of the test's own to 127.0.0.0/8 addresses, servers may listen
# on any loopback address and port (11211 included) without meeting anything
# else on the machine, and no packet can leave it: the namespace has no other
# interface. MCR_TEST_NETNS=1 is set inside.
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
if [ "$(id -u)" -ne 0 ]; then
    echo "netns.sh: must run as root (unshare --mount --net, mount --bind)" >&2
    exit 2
fi
for tool in unshare mount ip; do
    command -v "$tool" >/dev/null 2>&1 || {
        echo "netns.sh: $tool not found (util-linux, mount, iproute2: scripts/deps.sh installs them)" >&2
        exit 2
    }
done
exec unshare --mount --net --fork -- /bin/sh -c '
    set -e
    mount --bind "$0" /etc/hosts
    ip link set lo up
    MCR_TEST_NETNS=1
    export MCR_TEST_NETNS
    exec "$@"' "$hosts" "$@"
