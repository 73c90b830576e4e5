<?php
// SPDX-License-Identifier: BSD-3-Clause
// preload_php.php: php-memcached as a PHP application uses it, run by test_preload under
// LD_PRELOAD=libmcroute_preload.so. Commands, in order, from the arguments:
//   set TAG N        set TAG:i = TAG:i for i < N, read them back with getMulti: "set TAG N"
//   byk N            "bykey KEY HOST:PORT" for N keys (getServerByKey)
//   servers          "servers S": the handle's server count
//   wait S MS        call until the handle has S servers (at most MS ms): "servers S"
//   line             print "ready", read a line from standard input (the test's go)
//   rename FROM TO   rename a file (a snapshot file replaced)
//   fail             a set that must fail: "fail CODE MESSAGE"
// The application's own setup, as applications write it: a persistent handle, servers
// added when it has none, the consistent (ketama) distribution asked for.
$m = new Memcached("preload-test");
if (count($m->getServerList()) == 0) {
    $m->setOption(Memcached::OPT_DISTRIBUTION, Memcached::DISTRIBUTION_CONSISTENT);
    $m->setOption(Memcached::OPT_LIBKETAMA_COMPATIBLE, true);
    $m->addServer("127.0.0.1", 1);
}
$a = array_slice($argv, 1);
for ($i = 0; $i < count($a); $i++) {
    switch ($a[$i]) {
    case "set":
        $tag = $a[++$i];
        $n = (int)$a[++$i];
        $keys = [];
        for ($k = 0; $k < $n; $k++) {
            $key = "$tag:$k";
            if (!$m->set($key, $key)) {
                fwrite(STDERR, "set $key: " . $m->getResultMessage() . "\n");
                exit(1);
            }
            $keys[] = $key;
        }
        $got = $m->getMulti($keys);
        foreach ($keys as $key) {
            if (!isset($got[$key]) || $got[$key] !== $key) {
                fwrite(STDERR, "getMulti: $key missing\n");
                exit(1);
            }
        }
        echo "set $tag $n\n";
        break;
    case "byk":
        $n = (int)$a[++$i];
        for ($k = 0; $k < $n; $k++) {
            $s = $m->getServerByKey("bk:$k");
            echo "bykey bk:$k {$s['host']}:{$s['port']}\n";
        }
        break;
    case "servers":
        echo "servers " . count($m->getServerList()) . "\n";
        break;
    case "wait":
        $want = (int)$a[++$i];
        $end = microtime(true) + (int)$a[++$i] / 1000.0;
        do {
            $m->set("probe", "p"); // a call that starts a request takes a new list
        } while (count($m->getServerList()) != $want && microtime(true) < $end && usleep(20000) === null);
        echo "servers " . count($m->getServerList()) . "\n";
        break;
    case "line":
        echo "ready\n";
        fgets(STDIN);
        break;
    case "rename":
        $from = $a[++$i];
        $to = $a[++$i];
        if (!rename($from, $to)) {
            exit(1);
        }
        break;
    case "fail":
        $ok = $m->set("nowhere", "x");
        echo "fail " . ($ok ? "none" : $m->getResultCode() . " " . $m->getResultMessage()) . "\n";
        break;
    default:
        fwrite(STDERR, "unknown command {$a[$i]}\n");
        exit(2);
    }
}
