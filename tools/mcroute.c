/* SPDX-License-Identifier: BSD-3-Clause */
/* mcroute.c: the mcroute command line: main, its help, and the dispatch to every command. */
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mcroute.h"

#include "cli.h"

static const char usage_main[] =
    "Usage: mcroute COMMAND [OPTIONS] [ARGS]\n"
    "\n"
    "Client-side memcached key placement, bit-exact with libmemcached, twemproxy\n"
    "and libketama, and a client that routes through it.\n"
    "\n"
    "Commands:\n"
    "  locate SOURCE [KEY...]      print KEY<TAB>HOST:PORT for each key\n"
    "  dump SOURCE                 print the continuum, VALUE<TAB>HOST:PORT per point\n"
    "  hash --hash NAME [KEY...]   print KEY<TAB>VALUE (decimal uint32) for each key\n"
    "  stats SOURCE [--keys FILE]  each server's share of the ring and of the keys\n"
    "  snapshot SOURCE -o FILE     save the placement as a snapshot file\n"
    "  diff OLD NEW [--keys FILE]  what moves between two placements\n"
    "  set SOURCE [--ttl SECONDS]  store the KEY<TAB>VALUE lines of standard input\n"
    "  get SOURCE [KEY...]         print KEY<TAB>VALUE for each key found\n"
    "  delete SOURCE [KEY...]      delete keys from the servers that own them\n"
    "  probe SOURCE [KEY...]       print KEY<TAB>OWNER<TAB>HOLDERS for each key\n"
    "  simulate SERVERS CHANGE...  compare placement modes on a workload and a change\n"
    "  members SUBCOMMAND ...      publish, change and show a pool kept in etcd\n"
    "  watch --etcd URLS --pool P  follow a pool (or --state PATH): a line per epoch\n"
    "  agent --etcd URLS --pool P --state PATH  follow a pool for a host's processes\n"
    "  migrate OLD NEW             copy the keys a change moves to their new owners\n"
    "  compare --clients A,B,... SOURCE  where each client puts each key\n"
    "  clients [--json]            the clients of --client: NAME, MODE, HASH, summary\n"
    "  help [COMMAND]              show help\n"
    "\n"
    "SOURCE (exactly one):\n"
    "  -s, --servers LIST          comma-separated host[:port[:weight]], [v6addr]:port\n"
    "                              for IPv6; default port 11211, weight 1\n"
    "  -f, --server-file FILE      one host[:port[:weight]] per line, '#' comments\n"
    "  -l, --libmemcached OPTIONS  a libmemcached option string (--SERVER=h:p/?w ...),\n"
    "                              followed by any number of:\n"
    "  -b, --behavior NAME=VALUE   DISTRIBUTION (modula consistent ketama spy\n"
    "                              weighted),\n"
    "                              HASH, KETAMA_HASH (hash names), KETAMA,\n"
    "                              KETAMA_WEIGHTED, SORT_HOSTS, HASH_WITH_NAMESPACE\n"
    "                              (0 or 1); applied in order\n"
    "  -t, --twemproxy FILE        a nutcracker (twemproxy) YAML configuration;\n"
    "  -p, --pool NAME             with -t: the pool to use (default: the first);\n"
    "                              with --etcd: the pool's name\n"
    "  -k, --ketama-file FILE      a libketama server file: 'address<TAB>memory' lines\n"
    "      --snapshot FILE         a snapshot file (see mcroute snapshot)\n"
    "      --state PATH            a host's shared state, as mcroute agent writes it\n"
    "      --etcd URLS             a pool kept in etcd (see mcroute help members):\n"
    "                              its current snapshot; URLS are etcd client URLs\n"
    "                              http://HOST:PORT, comma-separated; with --pool\n"
    "      --etcd-prefix PREFIX    with --etcd: the key prefix (default\n"
    "                              /mcroute/pools/)\n"
    "      --etcd-timeout SECONDS  with --etcd: how long to keep trying the endpoints\n"
    "                              before giving up (default 10)\n"
    "  -m, --mode MODE             with -s/-f: ketama (default, libketama),\n"
    "                              stable-ketama, consistent, weighted, spy,\n"
    "                              spy-weighted, modula, twemproxy-ketama,\n"
    "                              twemproxy-modula, jump, rendezvous, maglev,\n"
    "                              slots, bounded, pymemcache, buckets,\n"
    "                              spymemcached, spymemcached-libmemcached, dalli,\n"
    "                              hashring, nginx-consistent, php-memcache,\n"
    "                              memcached-proxy-jump, mcrouter-ch3, envoy-maglev,\n"
    "                              envoy-ring-hash, memcached-proxy-ring-ketama,\n"
    "                              mcrouter-wch3\n"
    "      --client NAME           with -s/-f: place keys as client NAME does (sets\n"
    "                              mode and hash; mcroute clients, mcr_client(3)):\n"
    "                              pymemcache, python-memcached, pylibmc,\n"
    "                              pylibmc-ketama, spymemcached,\n"
    "                              spymemcached-libmemcached, spymemcached-arraymod,\n"
    "                              dalli, gomemcache, node-memcached, memjs, nginx,\n"
    "                              nginx-consistent, php-memcached,\n"
    "                              php-memcached-ketama, php-memcache, mcrouter-ch3,\n"
    "                              memcached-proxy-jump, envoy-maglev, envoy-ring-hash,\n"
    "                              memcached-proxy-ring-ketama, mcrouter-wch3\n"
    "      --hash NAME             with -s/-f: key hash (default: the mode's client's,\n"
    "                              as the library's: 'default' for consistent, spy,\n"
    "                              modula; fnv1a_64 for twemproxy-*; md5 otherwise)\n"
    "\n"
    "Options of some commands:\n"
    "      --replicas N            locate: KEY<TAB>PRIMARY<TAB>REPLICA..., distinct\n"
    "                              servers (and zones first), '<TAB>under-replicated'\n"
    "                              when fewer than N could be found\n"
    "  -o, --output FILE           snapshot: the file to write\n"
    "      --keys FILE             stats, diff: keys to count, one per line ('-' for\n"
    "                              standard input)\n"
    "      --top N                 stats: the N most frequent keys (of --keys FILE,\n"
    "                              else of standard input), one a line:\n"
    "                              KEY<TAB>COUNT<TAB>SHARE<TAB>SERVER\n"
    "      --rate KEYS_PER_S       migrate: at most this many moved keys a second\n"
    "      --dry-run               migrate: count the keys that move, copy nothing\n"
    "      --json                  locate, stats, diff, probe, migrate, compare,\n"
    "                              clients: one JSON document instead of lines (see\n"
    "                              mcroute help COMMAND)\n"
    "\n"
    "set, get, delete and probe connect to the servers of SOURCE; also:\n"
    "      --timeout MS            connect and request timeout, 1 to 86400000 ms\n"
    "                              (default 1000; migrate: 5000, also the longest\n"
    "                              a server's key listing may stall)\n"
    "      --failure-policy NAME   what a server that keeps failing costs: fail-fast\n"
    "                              (default: its keys fail), eject (its keys move to\n"
    "                              the others), failover (reads go to a replica)\n"
    "      --ttl SECONDS           set: expiry, 0 (default: never) to 2147483647;\n"
    "                              above 30 days it is a Unix time\n"
    "\n"
    "Hashes: default md5 crc fnv1_64 fnv1a_64 fnv1_32 fnv1a_32 hsieh murmur jenkins\n"
    "        murmur3 crc16 crc32a cmemcache hashcode hashcode_abs\n"
    "\n"
    "With no KEY, keys are read from standard input, one per line (the line without\n"
    "its newline; every other byte is kept). Keys and values are written byte for\n"
    "byte into a pipe or a file; on a terminal, and in KEY<TAB>error lines, their\n"
    "control bytes, bytes that are not UTF-8 and backslashes are written as \\xHH.\n"
    "OLD, NEW and --previous OLD: a file that exists (snapshot or server file), else\n"
    "a server list; an operand with a '/' or ending in .snap must be a file.\n"
    "Bad input prints a message on stderr, nothing on stdout, and exits with\n"
    "status 2. In set, get, delete and probe, a key that fails on the servers, and\n"
    "a bad key or line (which is not sent: the others are), prints\n"
    "KEY<TAB>error<TAB>REASON on stderr, and the exit status is then 1.\n"
    "Long options may be written --option=VALUE or --option VALUE, and abbreviated.\n"
    "\n"
    "Exit status: 0 success; 1 something failed (a key, on the servers or bad,\n"
    "writing the output or a snapshot file); 2 bad input (nothing done), which\n"
    "with --etcd includes etcd unreachable, no such pool, a stored value that\n"
    "does not verify.\n"
    "\n"
    "Options: -h, --help (also after a command), -V, --version.\n";

/* The commands, in the order of the help. */
static const struct command {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *usage;
} commands[] = {
    {"locate", cli_cmd_locate, cli_usage_locate},
    {"dump", cli_cmd_dump, cli_usage_dump},
    {"hash", cli_cmd_hash, cli_usage_hash},
    {"stats", cli_cmd_stats, cli_usage_stats},
    {"snapshot", cli_cmd_snapshot, cli_usage_snapshot},
    {"diff", cli_cmd_diff, cli_usage_diff},
    {"compare", cli_cmd_compare, cli_usage_compare},
    {"clients", cli_cmd_clients, cli_usage_clients},
    {"set", cli_cmd_set, cli_usage_set},
    {"get", cli_cmd_get, cli_usage_get},
    {"delete", cli_cmd_delete, cli_usage_delete},
    {"probe", cli_cmd_probe, cli_usage_probe},
    {"simulate", cli_simulate, cli_usage_simulate},
    {"members", cli_cmd_members, cli_usage_members},
    {"watch", cli_cmd_watch, cli_usage_watch},
    {"agent", cli_cmd_agent, cli_usage_agent},
    {"migrate", cli_cmd_migrate, cli_usage_migrate},
};

static const struct command *find_command(const char *name)
{
    for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
        if (strcmp(commands[i].name, name) == 0)
            return &commands[i];
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc < 2)
        cli_die("no command given (see mcroute --help)");
    const char *cmd = argv[1];
    if (strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0 || strcmp(cmd, "help") == 0) {
        if (argc > 3)
            cli_die("help: unexpected argument '%s'", argv[3]);
        if (argc == 2)
            cli_print_usage_and_exit(usage_main);
        const struct command *c = find_command(argv[2]);
        if (c == NULL) {
            char names[256];
            size_t o = 0;
            for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]) && o < sizeof(names);
                 i++)
                o += (size_t)snprintf(names + o, sizeof(names) - o, i ? " %s" : "%s",
                                      commands[i].name);
            cli_die("help: unknown command '%s' (commands: %s)", argv[2], names);
        }
        cli_print_usage_and_exit(c->usage);
    }
    if (strcmp(cmd, "--version") == 0 || strcmp(cmd, "-V") == 0) {
        if (argc > 2)
            cli_die("%s: unexpected argument '%s'", cmd, argv[2]);
        /* The CLI is built with the headers of MCR_VERSION_STRING; the
         * library it runs with says its own version, which differs only
         * when a shared library of another release was loaded. */
        printf("mcroute %s", MCR_VERSION_STRING);
        if (strcmp(mcr_version_string(), MCR_VERSION_STRING) != 0)
            printf(" (libmcroute %s)", mcr_version_string());
        putchar('\n');
        return cli_finish_output();
    }
    /* A reader that goes away (mcroute locate ... | head) makes the next
     * write fail with EPIPE rather than kill the process: every command
     * then stops and exits with status 1, as for any lost output. */
    signal(SIGPIPE, SIG_IGN);
    const struct command *c = find_command(cmd);
    if (c == NULL) {
        if (cmd[0] == '-')
            cli_die("unknown option '%s' before the command (see mcroute --help)", cmd);
        cli_die("unknown command '%s' (see mcroute --help)", cmd);
    }
    return c->run(argc - 1, argv + 1);
}
