<?php
// SPDX-License-Identifier: BSD-3-Clause
// ref_php.php: where the PHP memcached and memcache extensions put keys, asked
// of the extensions' own locators (no connection is made, no name resolved).
//
// Usage: php ref_php.php CLIENT
//   CLIENT: php-memcached | php-memcached-ketama | php-memcache
// Protocol: test/ref/README.md. Debian 12 packages php8.2-memcached (3.2.0, on
// libmemcached 1.1.4) and php8.2-memcache (4.0.5.2).
//
// php-memcached: new Memcached() with its defaults (MODULA, HASH_DEFAULT =
//   one-at-a-time), addServer(HOST, PORT, WEIGHT) in list order,
//   getServerByKey(key) -> ["host" => HOST, "port" => PORT] -> list index.
//   The weights are passed; libmemcached's MODULA does not use them.
// php-memcached-ketama: the same after
//   setOption(Memcached::OPT_LIBKETAMA_COMPATIBLE, true) (libmemcached's
//   weighted ketama continuum, MD5), set before the servers are added.
// php-memcache: new Memcache() with the default ini (memcache.hash_strategy
//   consistent, memcache.hash_function crc32, checked at start),
//   addServer(HOST, PORT, false, WEIGHT), findServer(key) -> "HOST:PORT" ->
//   list index.

declare(strict_types=1);

function die_msg(string $msg): void
{
    fwrite(STDERR, "ref_php.php: $msg\n");
    exit(2);
}

// Any warning or notice of an extension call becomes an exception, so that
// a refused configuration is answered `config ID error ...`.
// (Deprecations are not refusals: php-memcache 4.0.5.2 on PHP 8.2 raises
// "Creation of dynamic property Memcache::$connection is deprecated" in
// addServer; they are neither thrown nor shown.)
error_reporting(E_ALL & ~E_DEPRECATED);
set_error_handler(function (int $no, string $str): bool {
    throw new ErrorException($str, 0, $no);
}, E_ALL & ~E_DEPRECATED);

function check_ext(string $ext, string $version): void
{
    if (!extension_loaded($ext)) {
        die_msg("the PHP extension $ext is not loaded (Debian: php-$ext)");
    }
    $v = phpversion($ext);
    if ($v !== $version) {
        die_msg("the PHP extension $ext is $v, expected $version");
    }
}

/** @return array{0: ?string, 1: ?array} [error, indexes] */
function place_memcached(array $servers, array $keys, bool $ketama): array
{
    $m = new Memcached();
    if ($ketama && !$m->setOption(Memcached::OPT_LIBKETAMA_COMPATIBLE, true)) {
        return ["setOption(OPT_LIBKETAMA_COMPATIBLE) failed: " . $m->getResultMessage(), null];
    }
    $index = [];
    foreach ($servers as $i => [$host, $port, $weight]) {
        if (!$m->addServer($host, $port, $weight)) {
            return ["addServer($host, $port, $weight) failed: " . $m->getResultMessage(), null];
        }
        $index["$host:$port"] = $i;
    }
    $res = [];
    foreach ($keys as $k => $key) {
        $s = $m->getServerByKey($key);
        if ($s === false) {
            return ["getServerByKey refused key " . bin2hex($key) . ": " . $m->getResultMessage(), null];
        }
        $label = $s['host'] . ':' . $s['port'];
        if (!isset($index[$label])) {
            return ["client chose an unknown server $label", null];
        }
        $res[] = $index[$label];
    }
    return [null, $res];
}

function place_memcache(array $servers, array $keys): array
{
    $m = new Memcache();
    $index = [];
    foreach ($servers as $i => [$host, $port, $weight]) {
        if (!$m->addServer($host, $port, false, $weight)) {
            return ["addServer($host, $port, false, $weight) failed", null];
        }
        $index["$host:$port"] = $i;
    }
    $res = [];
    foreach ($keys as $key) {
        $label = $m->findServer($key);
        if (!is_string($label) || !isset($index[$label])) {
            return ["findServer(" . bin2hex($key) . ") answered " . var_export($label, true), null];
        }
        $res[] = $index[$label];
    }
    return [null, $res];
}

function main(array $argv): void
{
    $clients = ['php-memcached', 'php-memcached-ketama', 'php-memcache'];
    if (count($argv) !== 2) {
        die_msg("usage: php ref_php.php CLIENT (" . implode(' | ', $clients) . ")");
    }
    $name = $argv[1];
    if (!in_array($name, $clients, true)) {
        die_msg("unknown client \"$name\" (" . implode(' | ', $clients) . ")");
    }
    if ($name === 'php-memcache') {
        check_ext('memcache', '4.0.5.2');
        foreach (['memcache.hash_strategy' => 'consistent', 'memcache.hash_function' => 'crc32'] as $k => $want) {
            $v = ini_get($k);
            if ($v !== $want) {
                die_msg("$k is \"$v\", expected the default \"$want\"");
            }
        }
        $place = fn(array $s, array $k): array => place_memcache($s, $k);
    } else {
        check_ext('memcached', '3.2.0');
        $ketama = $name === 'php-memcached-ketama';
        $place = fn(array $s, array $k): array => place_memcached($s, $k, $ketama);
    }

    $in = STDIN;
    $lineNo = 0;
    $next = function () use ($in, &$lineNo): ?string {
        $line = fgets($in);
        if ($line === false) {
            return null;
        }
        $lineNo++;
        return rtrim($line, "\r\n");
    };
    $need = function (string $what) use ($next, &$lineNo): string {
        $line = $next();
        if ($line === null) {
            die_msg("unexpected end of input (expected $what)");
        }
        return $line;
    };
    $bad = function (string $line, string $why) use (&$lineNo): void {
        die_msg("line $lineNo: $why: " . json_encode($line));
    };

    while (($line = $next()) !== null) {
        if (!preg_match('/^config (\S+) (\d+)$/D', $line, $m)) {
            $bad($line, 'expected `config ID N`');
        }
        $id = $m[1];
        $n = (int)$m[2];
        $servers = [];
        $seen = [];
        for ($i = 0; $i < $n; $i++) {
            $line = $need('`server HOST PORT WEIGHT`');
            if (!preg_match('/^server ([^\s:]+) (\d+) (\d+)$/D', $line, $m)) {
                $bad($line, 'expected `server HOST PORT WEIGHT`');
            }
            $port = (int)$m[2];
            if ($port < 1 || $port > 65535) {
                $bad($line, 'port out of range');
            }
            $label = $m[1] . ':' . $port;
            if (isset($seen[$label])) {
                $bad($line, "server $label twice in a config");
            }
            $seen[$label] = true;
            $servers[] = [$m[1], $port, (int)$m[3]];
        }
        $line = $need('`keys M`');
        if (!preg_match('/^keys (\d+)$/D', $line, $m)) {
            $bad($line, 'expected `keys M`');
        }
        $keys = [];
        for ($i = 0, $mk = (int)$m[1]; $i < $mk; $i++) {
            $line = $need('a key in hex');
            if (!preg_match('/^(?:[0-9a-fA-F]{2})+$/D', $line)) {
                $bad($line, 'expected a key in hex');
            }
            $key = hex2bin($line);
            if (strlen($key) > 250) {
                $bad($line, 'key longer than 250 bytes');
            }
            if (preg_match('/[\x00-\x20\x7f]/', $key)) {
                $bad($line, 'key with a space or control byte');
            }
            if (preg_match('//u', $key) !== 1) {
                $bad($line, 'key not valid UTF-8');
            }
            $keys[] = $key;
        }
        if (count($servers) === 0) {
            [$err, $res] = ['no servers', null];
        } else {
            try {
                [$err, $res] = $place($servers, $keys);
            } catch (Throwable $e) {
                [$err, $res] = [get_class($e) . ': ' . $e->getMessage(), null];
            }
        }
        if ($err !== null) {
            fwrite(STDOUT, "config $id error " . preg_replace('/[\r\n]+/', ' ', $err) . "\n");
        } else {
            fwrite(STDOUT, "config $id ok" . ($res ? ' ' . implode(' ', $res) : '') . "\n");
        }
        fflush(STDOUT);
    }
    exit(0);
}

main($argv);
