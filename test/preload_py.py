# SPDX-License-Identifier: BSD-3-Clause
"""preload_py.py: pylibmc as a Python application uses it, run by test_preload under
LD_PRELOAD=libmcroute_preload.so. Commands, in order, from the arguments:
  set TAG N         set TAG:i = TAG:i for i < N, read them back with get_multi
  clone TAG N       the same through a clone of the client (pylibmc's pools clone)
  own HOST:PORT     the client made anew with this server (with no MCROUTE_* variable
                    the preload changes nothing: the keys go there)
Prints a line per command; exit 1 on a key not read back."""
import sys

import pylibmc


def store(client, tag, n):
    keys = ["%s:%d" % (tag, k) for k in range(n)]
    for key in keys:
        if not client.set(key, key):
            sys.exit("set %s failed" % key)
    got = client.get_multi(keys)
    for key in keys:
        if got.get(key) != key:
            sys.exit("get_multi: %s missing" % key)
    print("%s %d" % (tag, n))


def main(args):
    # The application's own setup: a server of its own, the ketama behaviours.
    client = pylibmc.Client(["127.0.0.1:1"], binary=False,
                            behaviors={"ketama": True, "tcp_nodelay": True})
    i = 0
    while i < len(args):
        cmd = args[i]
        if cmd == "set":
            store(client, args[i + 1], int(args[i + 2]))
            i += 3
        elif cmd == "clone":
            store(client.clone(), args[i + 1], int(args[i + 2]))
            i += 3
        elif cmd == "own":
            client = pylibmc.Client([args[i + 1]], binary=False)
            i += 2
        else:
            sys.exit("unknown command %s" % cmd)


main(sys.argv[1:])
