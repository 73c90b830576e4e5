#!/usr/bin/env node
// SPDX-License-Identifier: BSD-3-Clause
// ref_node.js: where the npm memcached and memjs clients put keys, asked of
// the clients' own locators (no connection is made, no command is sent).
//
// Usage: node ref_node.js CLIENT   (CLIENT: node-memcached | memjs)
// Protocol: test/ref/README.md. The packages come from test/ref/package-lock.json
// (`npm ci` in test/ref): memcached 2.2.2 (with hashring 3.2.0), memjs 1.3.2.
//
// node-memcached: new Memcached(servers) with the client's defaults (ketama
//   compatibility, md5); servers as an array of "HOST:PORT" when every weight
//   is 1, else as the object {"HOST:PORT": WEIGHT} (both build the same ring).
//   The server is the one memcached.command picks: servers[0] when there is
//   one server, else client.HashRing.get(key) ("HOST:PORT" as written).
//   Keys that name a property of Object.prototype ("constructor", "__proto__",
//   "toString", ...) are asked through client.HashRing.range(key, 1) instead:
//   get() goes through hashring's LRU cache, a plain object, so for such keys
//   it reads and writes properties shared by every object of the process and
//   answers with whatever an earlier ring cached; range() is the same ring
//   lookup without the cache, i.e. what a fresh process answers.
// memjs: memjs.Client.create("HOST:PORT,..."), client.server(key) (which calls
//   client.getServer(key) when there is more than one server); the returned
//   Server is mapped back to its list index. memjs has no weights: a WEIGHT
//   other than 1 answers `config ID error`.
'use strict';

const fs = require('fs');
const path = require('path');
const readline = require('readline');

const here = __dirname;
function load(name, version) {
    const dir = path.join(here, 'node_modules', name);
    let pkg;
    try {
        pkg = JSON.parse(fs.readFileSync(path.join(dir, 'package.json'), 'utf8'));
    } catch (e) {
        die(`cannot read ${dir}/package.json (run \`npm ci\` in ${here}): ${e.message}`);
    }
    if (pkg.version !== version) {
        die(`${name} is ${pkg.version} in ${dir}, expected ${version} (run \`npm ci\` in ${here})`);
    }
    return require(dir);
}

function die(msg) {
    process.stderr.write(`ref_node.js: ${msg}\n`);
    process.exit(2);
}

function out(line) {
    // Synchronous write: the line is out before the next config is read.
    fs.writeSync(1, line + '\n');
}

const clients = {
    'node-memcached': function () {
        const Memcached = load('memcached', '2.2.2');
        // memcached resolves require('hashring') from its own directory (or
        // the top level, where npm puts it): check that is 3.2.0.
        const hrPkg = require.resolve('hashring/package.json',
                                      {paths: [path.join(here, 'node_modules', 'memcached')]});
        const hrVersion = JSON.parse(fs.readFileSync(hrPkg, 'utf8')).version;
        if (hrVersion !== '3.2.0') {
            die(`memcached uses hashring ${hrVersion} (${hrPkg}), expected 3.2.0`);
        }
        const inherited = {};
        return function place(servers, keys) {
            const labels = servers.map((s) => `${s.host}:${s.port}`);
            const allOne = servers.every((s) => s.weight === 1);
            let spec;
            if (allOne) {
                spec = labels;
            } else {
                spec = {};
                servers.forEach((s, i) => { spec[labels[i]] = s.weight; });
            }
            let client;
            try {
                client = new Memcached(spec);
            } catch (e) {
                return {error: e.message};
            }
            const index = new Map(labels.map((l, i) => [l, i]));
            const res = [];
            for (const key of keys) {
                let server;
                if (client.servers.length === 1) {
                    server = client.servers[0];
                } else if (key in inherited) {
                    server = client.HashRing.range(key, 1, true)[0];
                } else {
                    server = client.HashRing.get(key);
                }
                const i = index.get(server);
                if (i === undefined) {
                    return {error: `client chose an unknown server ${JSON.stringify(server)}`};
                }
                res.push(i);
            }
            return {ok: res};
        };
    },
    'memjs': function () {
        const memjs = load('memjs', '1.3.2');
        return function place(servers, keys) {
            for (const s of servers) {
                if (s.weight !== 1) {
                    return {error: `memjs has no weights (server ${s.host}:${s.port} weight ${s.weight})`};
                }
            }
            const labels = servers.map((s) => `${s.host}:${s.port}`);
            const client = memjs.Client.create(labels.join(','));
            const index = new Map(labels.map((l, i) => [l, i]));
            const res = [];
            for (const key of keys) {
                const serv = client.server(key);
                if (!serv) {
                    return {error: 'client chose no server'};
                }
                const i = index.get(`${serv.host}:${serv.port}`);
                if (i === undefined || client.servers[i] !== serv) {
                    return {error: `client chose an unknown server ${serv.host}:${serv.port}`};
                }
                res.push(i);
            }
            return {ok: res};
        };
    },
};

function main() {
    if (process.argv.length !== 3) {
        die('usage: node ref_node.js CLIENT (node-memcached | memjs)');
    }
    const name = process.argv[2];
    if (!Object.prototype.hasOwnProperty.call(clients, name)) {
        die(`unknown client ${JSON.stringify(name)} (node-memcached | memjs)`);
    }
    const place = clients[name]();
    const decoder = new TextDecoder('utf-8', {fatal: true, ignoreBOM: true});

    let lineNo = 0;
    let state = 'config';   // config | server | keys | key
    let cfg = null;
    const bad = (line, why) => die(`line ${lineNo}: ${why}: ${JSON.stringify(line)}`);

    function finish() {
        const r = cfg.servers.length === 0 ? {error: 'no servers'} : place(cfg.servers, cfg.keys);
        if (r.error !== undefined) {
            out(`config ${cfg.id} error ${r.error.replace(/[\r\n]+/g, ' ')}`);
        } else {
            out(`config ${cfg.id} ok${r.ok.map((i) => ' ' + i).join('')}`);
        }
        cfg = null;
        state = 'config';
    }

    const rl = readline.createInterface({input: process.stdin, crlfDelay: Infinity, terminal: false});
    rl.on('line', (line) => {
        lineNo++;
        let m;
        switch (state) {
        case 'config':
            m = /^config (\S+) (\d+)$/.exec(line);
            if (!m) bad(line, 'expected `config ID N`');
            cfg = {id: m[1], n: parseInt(m[2], 10), servers: [], seen: new Set(), m: 0, keys: []};
            state = cfg.n > 0 ? 'server' : 'keys';
            break;
        case 'server': {
            m = /^server (\S+) (\d+) (\d+)$/.exec(line);
            if (!m) bad(line, 'expected `server HOST PORT WEIGHT`');
            const port = parseInt(m[2], 10), weight = parseInt(m[3], 10);
            if (port < 1 || port > 65535) bad(line, 'port out of range');
            if (m[1].includes(':')) bad(line, 'HOST with a colon');
            const label = `${m[1]}:${port}`;
            if (cfg.seen.has(label)) bad(line, `server ${label} twice in a config`);
            cfg.seen.add(label);
            cfg.servers.push({host: m[1], port: port, weight: weight});
            if (cfg.servers.length === cfg.n) state = 'keys';
            break;
        }
        case 'keys':
            m = /^keys (\d+)$/.exec(line);
            if (!m) bad(line, 'expected `keys M`');
            cfg.m = parseInt(m[1], 10);
            if (cfg.m === 0) finish(); else state = 'key';
            break;
        case 'key': {
            if (!/^(?:[0-9a-fA-F]{2})+$/.test(line)) bad(line, 'expected a key in hex');
            const bytes = Buffer.from(line, 'hex');
            if (bytes.length > 250) bad(line, 'key longer than 250 bytes');
            for (const b of bytes) {
                if (b <= 0x20 || b === 0x7f) bad(line, 'key with a space or control byte');
            }
            let key;
            try {
                key = decoder.decode(bytes);
            } catch (e) {
                bad(line, 'key not valid UTF-8');
            }
            cfg.keys.push(key);
            if (cfg.keys.length === cfg.m) finish();
            break;
        }
        }
    });
    rl.on('close', () => {
        if (state !== 'config') die(`unexpected end of input in config ${cfg.id}`);
        process.exit(0);
    });
}

main();
