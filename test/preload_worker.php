<?php
// SPDX-License-Identifier: BSD-3-Clause
// preload_worker.php: a PHP worker of test_preload's resize, run with the preload and
// MCROUTE_STATE. Arguments: PREFIX N STOP_FILE SEED. Keys PREFIX:0 .. PREFIX:N-1 are its own
// and hold "v0" when it starts. Until STOP_FILE exists it sets new versions, deletes, and
// reads them back, checking each read against its last acknowledged write: a miss of a key
// it holds, or another value (an older one, or a deleted one back), is counted. Prints
// "ready" once started, then "ops N misses M older O".
[$prefix, $n, $stop, $seed] = [$argv[1], (int)$argv[2], $argv[3], (int)$argv[4]];
mt_srand($seed);
$m = new Memcached();
$m->addServer("127.0.0.1", 1); // the program's own list: not applied
$ver = array_fill(0, $n, 0);   // last acknowledged version, -1: deleted
$ops = $misses = $older = 0;
echo "ready\n";
for ($i = 0; !file_exists($stop); $i++) {
    $k = mt_rand(0, $n - 1);
    $key = "$prefix:$k";
    $a = mt_rand(0, 9);
    if ($a < 4) {
        $v = max($ver[$k], 0) + 1;
        if ($m->set($key, "v$v")) {
            $ver[$k] = $v;
        }
    } elseif ($a == 4) {
        if ($m->delete($key) || $m->getResultCode() == Memcached::RES_NOTFOUND) {
            $ver[$k] = -1;
        }
    } else {
        $got = $m->get($key);
        if ($ver[$k] < 0) {
            if ($got !== false) {
                $older++;
                fwrite(STDERR, "$key: deleted, read $got\n");
            }
        } elseif ($got === false) {
            $misses++;
            fwrite(STDERR, "$key: miss (v{$ver[$k]}): " . $m->getResultMessage() . "\n");
        } elseif ($got !== "v{$ver[$k]}") {
            $older++;
            fwrite(STDERR, "$key: read $got, wrote v{$ver[$k]}\n");
        }
    }
    $ops++;
}
echo "ops $ops misses $misses older $older\n";
