# SPDX-License-Identifier: BSD-3-Clause
"""preload_worker.py: a Python worker (pylibmc) of test_preload's resize, run with the
preload and MCROUTE_STATE: preload_worker.php's loop (its header says what it checks).
Arguments: PREFIX N STOP_FILE SEED."""
import os
import random
import sys

import pylibmc

prefix, n, stop, seed = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4])
rnd = random.Random(seed)
client = pylibmc.Client(["127.0.0.1:1"], binary=False)  # not applied
ver = [0] * n
ops = misses = older = 0
print("ready", flush=True)
while not os.path.exists(stop):
    k = rnd.randrange(n)
    key = "%s:%d" % (prefix, k)
    a = rnd.randrange(10)
    if a < 4:
        v = max(ver[k], 0) + 1
        if client.set(key, "v%d" % v):
            ver[k] = v
    elif a == 4:
        client.delete(key)  # True, or False when it was not there: gone either way
        ver[k] = -1
    else:
        got = client.get(key)
        if isinstance(got, bytes):  # the test's own v0, stored without pylibmc's str flag
            got = got.decode()
        if ver[k] < 0:
            if got is not None:
                older += 1
                print("%s: deleted, read %r" % (key, got), file=sys.stderr)
        elif got is None:
            misses += 1
            print("%s: miss (v%d)" % (key, ver[k]), file=sys.stderr)
        elif got != "v%d" % ver[k]:
            older += 1
            print("%s: read %r, wrote v%d" % (key, got, ver[k]), file=sys.stderr)
    ops += 1
print("ops %d misses %d older %d" % (ops, misses, older), flush=True)
