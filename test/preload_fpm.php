<?php
// SPDX-License-Identifier: BSD-3-Clause
// preload_fpm.php: a PHP-FPM page, as an application writes it, that test_preload requests
// through FastCGI (cgi-fcgi) while PHP-FPM runs with LD_PRELOAD=libmcroute_preload.so and
// MCROUTE_STATE. Query: tag=TAG&n=N[&servers=S]: with servers, first call until the
// persistent handle has S servers (at most 10 s); then set TAG:i = TAG:i for i < N and read
// them back. Prints "pid PID servers S set TAG N" or "error ...".
$m = new Memcached("fpm-test");
if (count($m->getServerList()) == 0) {
    $m->setOption(Memcached::OPT_DISTRIBUTION, Memcached::DISTRIBUTION_CONSISTENT);
    $m->addServer("127.0.0.1", 1);
}
$tag = $_GET["tag"];
$n = (int)$_GET["n"];
if (isset($_GET["servers"])) {
    $want = (int)$_GET["servers"];
    $end = microtime(true) + 10;
    do {
        $m->set("probe", "p");
    } while (count($m->getServerList()) != $want && microtime(true) < $end && usleep(20000) === null);
}
$keys = [];
for ($k = 0; $k < $n; $k++) {
    $key = "$tag:$k";
    if (!$m->set($key, $key)) {
        echo "error set $key: " . $m->getResultMessage() . "\n";
        exit;
    }
    $keys[] = $key;
}
$got = $m->getMulti($keys);
foreach ($keys as $key) {
    if (!isset($got[$key]) || $got[$key] !== $key) {
        echo "error getMulti $key\n";
        exit;
    }
}
echo "pid " . getmypid() . " servers " . count($m->getServerList()) . " set $tag $n\n";
