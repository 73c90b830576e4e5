/* SPDX-License-Identifier: BSD-3-Clause */
/* place_cmds.c: the commands that place keys: locate, dump, hash, snapshot and diff. */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mcroute.h"
#include "mcroute_snapshot.h"

#include "cli.h"

const char cli_usage_locate[] =
    "Usage: mcroute locate SOURCE [--replicas N] [--json] [KEY...]\n"
    "Print KEY<TAB>HOST:PORT for every key: the server that owns it, as it was\n"
    "configured. With no KEY, reads keys from standard input, one per line.\n"
    "SOURCE: -s LIST | -f FILE [--mode MODE] [--hash NAME] [--client NAME]\n"
    "        | -l 'OPTION STRING' [-b NAME=VALUE]...\n"
    "        | -t FILE [-p POOL] | -k FILE | --snapshot FILE | --state PATH\n"
    "        | --etcd URLS --pool NAME [--etcd-prefix P] [--etcd-timeout SECONDS]\n"
    "        (see mcroute --help)\n"
    "With --replicas N: KEY<TAB>PRIMARY<TAB>REPLICA..., '<TAB>under-replicated' last\n"
    "when fewer than N distinct servers (or zones) could be found.\n"
    "With --json: {\"keys\": [{\"key\": K, \"server\": S}, ...]}, or with --replicas\n"
    "{\"key\": K, \"servers\": [S, ...], \"under_replicated\": false}; a key that is not\n"
    "valid UTF-8 also gets \"key_hex\", its bytes in hexadecimal.\n";

const char cli_usage_dump[] =
    "Usage: mcroute dump SOURCE\n"
    "Print the continuum, one point per line: VALUE<TAB>HOST:PORT, ascending,\n"
    "VALUE in decimal. Modula placement has no continuum and is refused.\n"
    "SOURCE: -s LIST | -f FILE [--mode MODE] [--hash NAME] [--client NAME]\n"
    "        | -l 'OPTION STRING' [-b NAME=VALUE]...\n"
    "        | -t FILE [-p POOL] | -k FILE | --snapshot FILE | --state PATH\n"
    "        | --etcd URLS --pool NAME [--etcd-prefix P] [--etcd-timeout SECONDS]\n"
    "        (see mcroute --help)\n";

const char cli_usage_hash[] =
    "Usage: mcroute hash --hash NAME [KEY...]\n"
    "Print KEY<TAB>VALUE for every key, VALUE the decimal 32-bit hash.\n"
    "With no KEY, reads keys from standard input, one per line.\n"
    "NAME: default md5 crc fnv1_64 fnv1a_64 fnv1_32 fnv1a_32 hsieh murmur jenkins\n"
    "      murmur3 crc16 crc32a cmemcache hashcode hashcode_abs\n";

const char cli_usage_snapshot[] =
    "Usage: mcroute snapshot SOURCE -o FILE [--epoch N]\n"
    "Save the placement of SOURCE as a snapshot file (epoch 1 unless SOURCE is a\n"
    "snapshot): canonical text with its epoch and checksum, written atomically.\n"
    "  --epoch N  the epoch (1 to 2^63-1) of a server list or file's snapshot:\n"
    "             processes following the file take only a later epoch\n"
    "SOURCE: as for locate (see mcroute --help)\n";

const char cli_usage_diff[] =
    "Usage: mcroute diff OLD NEW [--keys FILE] [--mode MODE] [--hash NAME] [--json]\n"
    "       mcroute diff --etcd URLS --pool NAME NEW [OPTIONS]\n"
    "Compare two placements. OLD and NEW are each a server list, a server file, a\n"
    "snapshot file or a host's state (mcroute agent --state: its snapshot); --mode\n"
    "and --hash apply to lists and server files. With --etcd, OLD is the pool's\n"
    "current snapshot (what publishing NEW would move; --etcd-prefix and\n"
    "--etcd-timeout as for a SOURCE). Prints moved<TAB>FRACTION (share of the hash\n"
    "space whose owner changed, 6 decimals), then FROM<TAB>TO<TAB>FRACTION per pair\n"
    "of server ids, largest first; with --keys (one key per line, '-' for standard\n"
    "input), a last line keys_moved<TAB>N<TAB>TOTAL for the keys of FILE.\n"
    "With --json: {\"moved\": F, \"pairs\": [{\"from\": ID, \"to\": ID, \"fraction\": F},\n"
    "...], \"keys_moved\": N, \"keys_total\": TOTAL} (the last two with --keys).\n";

/* Call fn for every key: the arguments, or the lines of standard input. */
static void for_each_key(const char *cmd, int argc, char **argv, cli_key_fn fn, void *ctx)
{
    if (argc > 0) {
        for (int i = 0; i < argc; i++)
            fn(argv[i], strlen(argv[i]), ctx);
        return;
    }
    cli_for_each_line(stdin, cmd, true, fn, ctx);
}

/* What locate prints with: the placement, and for --json how many keys
 * are out (the separator of the next). */
typedef struct locate_ctx {
    cli_placement pl;
    const mcr_snapshot *snap; /* --replicas: the snapshot of SOURCE */
    size_t nreplicas;
    uint32_t *out;
    bool json;
    size_t count;
} locate_ctx;

static void json_item_start(locate_ctx *lc)
{
    fputs(lc->count++ ? ",\n  {" : "\n  {", stdout);
}

static void locate_one(const char *key, size_t len, void *ctx)
{
    locate_ctx *lc = ctx;
    const char *server = cli_server_label(&lc->pl, mcr_ring_locate(lc->pl.ring, key, len));
    if (lc->json) {
        json_item_start(lc);
        cli_json_key_member(stdout, "key", key, len);
        fputs(", \"server\": ", stdout);
        cli_json_string(stdout, server, strlen(server));
        putchar('}');
        return;
    }
    cli_put_field(key, len);
    putchar('\t');
    fputs(server, stdout);
    putchar('\n');
}

/* "host:port" of snapshot server i, brackets for IPv6, into buf. */
static const char *snapshot_address(const mcr_snapshot *snap, uint32_t i, char *buf, size_t cap)
{
    mcr_server_desc d;
    if (mcr_snapshot_server(snap, i, &d) != MCR_OK)
        return "?";
    snprintf(buf, cap, strchr(d.host, ':') ? "[%s]:%d" : "%s:%d", d.host, d.port);
    return buf;
}

static void locate_replicas_one(const char *key, size_t len, void *ctx)
{
    locate_ctx *lc = ctx;
    char buf[300];
    int under = 0;
    size_t got = mcr_snapshot_replicas(lc->snap, key, len, lc->nreplicas, lc->out, &under);
    if (lc->json) {
        json_item_start(lc);
        cli_json_key_member(stdout, "key", key, len);
        fputs(", \"servers\": [", stdout);
        for (size_t i = 0; i < got; i++) {
            const char *a = snapshot_address(lc->snap, lc->out[i], buf, sizeof(buf));
            if (i > 0)
                fputs(", ", stdout);
            cli_json_string(stdout, a, strlen(a));
        }
        printf("], \"under_replicated\": %s}", under ? "true" : "false");
        return;
    }
    cli_put_field(key, len);
    for (size_t i = 0; i < got; i++) {
        putchar('\t');
        fputs(snapshot_address(lc->snap, lc->out[i], buf, sizeof(buf)), stdout);
    }
    if (under)
        fputs("\tunder-replicated", stdout);
    putchar('\n');
}

int cli_cmd_locate(int argc, char **argv)
{
    cli_source src;
    int first = cli_parse_options(argc, argv, &src, cli_usage_locate,
                                  ALLOW_SOURCE | ALLOW_REPLICAS | ALLOW_JSON);
    locate_ctx lc;
    memset(&lc, 0, sizeof(lc));
    lc.json = src.json;
    cli_key_fn fn = locate_one;
    if (src.replicas > 0) {
        lc.snap = cli_build_snapshot(&src);
        lc.nreplicas = (size_t)src.replicas;
        lc.out = calloc(lc.nreplicas, sizeof(*lc.out));
        if (lc.out == NULL)
            cli_fail("out of memory");
        fn = locate_replicas_one;
    } else {
        lc.pl = cli_placement_build(&src);
    }
    if (lc.json)
        fputs("{\"keys\": [", stdout);
    for_each_key("locate", argc - first, argv + first, fn, &lc);
    if (lc.json)
        fputs(lc.count ? "\n]}\n" : "]}\n", stdout);
    free(lc.out);
    mcr_snapshot_unref((mcr_snapshot *)lc.snap);
    if (lc.pl.ring != NULL)
        cli_placement_free(&lc.pl);
    free(src.behaviors);
    return cli_finish_output();
}

int cli_cmd_snapshot(int argc, char **argv)
{
    cli_source src;
    mcr_error err;
    int first = cli_parse_options(argc, argv, &src, cli_usage_snapshot,
                                  ALLOW_SOURCE | ALLOW_OUTPUT);
    if (first < argc)
        cli_die("snapshot: unexpected argument '%s'", argv[first]);
    if (src.output == NULL)
        cli_die("snapshot: -o FILE is required");
    if (src.epoch != NULL) {
        /* configuration management writes each new membership with the next
         * epoch: followers of the file take only a later one */
        char *end;
        errno = 0;
        unsigned long long e = strtoull(src.epoch, &end, 10);
        if (errno != 0 || end == src.epoch || *end != '\0' || src.epoch[0] == '-' || e == 0 ||
            e > (unsigned long long)INT64_MAX)
            cli_die("snapshot: --epoch '%s' is not a number from 1 to 2^63-1", src.epoch);
        if (src.snapshot != NULL || src.state != NULL || src.etcd != NULL)
            cli_die("snapshot: --epoch applies to a server list or file: a snapshot, a state "
                    "and a pool in etcd keep their own epoch");
        src.build_epoch = e;
    }
    mcr_snapshot *snap = cli_build_snapshot(&src);
    int rc = mcr_snapshot_save(snap, src.output, &err);
    mcr_snapshot_unref(snap);
    free(src.behaviors);
    if (rc != MCR_OK) /* the placement was fine: writing it failed */
        cli_fail("%s", err.message);
    return cli_finish_output();
}

typedef struct diff_keys {
    const mcr_diff *d;
    size_t moved, total;
} diff_keys;

static void diff_key(const char *key, size_t len, void *ctx)
{
    diff_keys *dk = ctx;
    dk->moved += mcr_diff_key_moved(dk->d, key, len) != 0;
    dk->total++;
}

int cli_cmd_diff(int argc, char **argv)
{
    cli_source src;
    mcr_error err;
    int first = cli_parse_options(argc, argv, &src, cli_usage_diff,
                                  ALLOW_KEYS | MIXED_ARGS | ALLOW_JSON | ALLOW_ETCD);
    mcr_snapshot *a, *b;
    if (src.etcd != NULL || src.pool != NULL || src.etcd_prefix != NULL ||
        src.etcd_timeout != NULL) {
        /* OLD is the pool in etcd: what publishing NEW would move. */
        if (argc - first != 1)
            cli_die("diff: with --etcd, expected NEW only (a server list, a server file or a "
                    "snapshot file): OLD is the pool");
        if (src.etcd == NULL)
            cli_die("diff: --pool, --etcd-prefix and --etcd-timeout apply only to --etcd");
        cli_source pool = src;
        pool.mode = pool.hash = NULL; /* they are NEW's */
        a = cli_build_snapshot(&pool);
        b = cli_operand_snapshot("diff", argv[first], &src);
    } else {
        if (argc - first != 2)
            cli_die("diff: expected OLD and NEW (a server list, a server file or a snapshot "
                    "file)");
        a = cli_operand_snapshot("diff", argv[first], &src);
        b = cli_operand_snapshot("diff", argv[first + 1], &src);
    }
    mcr_diff *d = NULL;
    if (mcr_diff_new(a, b, &d, &err) != MCR_OK) {
        mcr_snapshot_unref(a);
        mcr_snapshot_unref(b);
        cli_die("diff: %s", err.message);
    }
    /* The keys are counted before anything is printed: a key file that
     * cannot be read is bad input, which prints nothing on stdout. */
    diff_keys dk = {d, 0, 0};
    if (src.keys != NULL)
        cli_for_each_line(cli_open_keys("diff", src.keys), "diff", false, diff_key, &dk);
    size_t np = mcr_diff_pair_count(d);
    if (src.json)
        printf("{\"moved\": %.6f, \"pairs\": [", mcr_diff_moved(d));
    else
        printf("moved\t%.6f\n", mcr_diff_moved(d));
    for (size_t i = 0; i < np; i++) {
        mcr_diff_pair pr;
        if (mcr_diff_pair_get(d, i, &pr) != MCR_OK)
            continue;
        if (src.json) {
            fputs(i ? ",\n  {\"from\": " : "\n  {\"from\": ", stdout);
            cli_json_string(stdout, pr.from, strlen(pr.from));
            fputs(", \"to\": ", stdout);
            cli_json_string(stdout, pr.to, strlen(pr.to));
            printf(", \"fraction\": %.6f}", pr.fraction);
        } else {
            printf("%s\t%s\t%.6f\n", pr.from, pr.to, pr.fraction);
        }
    }
    if (src.json) {
        fputs(np ? "\n]" : "]", stdout);
        if (src.keys != NULL)
            printf(",\n \"keys_moved\": %zu, \"keys_total\": %zu", dk.moved, dk.total);
        fputs("}\n", stdout);
    } else if (src.keys != NULL) {
        printf("keys_moved\t%zu\t%zu\n", dk.moved, dk.total);
    }
    mcr_diff_free(d);
    mcr_snapshot_unref(a);
    mcr_snapshot_unref(b);
    free(src.behaviors);
    return cli_finish_output();
}

int cli_cmd_dump(int argc, char **argv)
{
    cli_source src;
    int first = cli_parse_options(argc, argv, &src, cli_usage_dump, ALLOW_SOURCE);
    if (first < argc)
        cli_die("dump: unexpected argument '%s'", argv[first]);
    cli_placement pl = cli_placement_build(&src);
    mcr_mode m = mcr_ring_mode(pl.ring);
    if (m == MCR_MODE_MODULA || m == MCR_MODE_TWEMPROXY_MODULA) {
        cli_placement_free(&pl);
        free(src.behaviors);
        cli_die("dump: modula placement has no continuum (server = hash %% %s)",
            m == MCR_MODE_MODULA ? "server count" : "total weight");
    }
    size_t n = mcr_ring_point_count(pl.ring);
    for (size_t i = 0; i < n; i++) {
        uint32_t v, s;
        mcr_ring_point(pl.ring, i, &v, &s);
        printf("%u\t%s\n", (unsigned)v, cli_server_label(&pl, s));
    }
    cli_placement_free(&pl);
    free(src.behaviors);
    return cli_finish_output();
}

static void hash_one(const char *key, size_t len, void *ctx)
{
    mcr_hash h = *(const mcr_hash *)ctx;
    cli_put_field(key, len);
    printf("\t%u\n", (unsigned)mcr_hash_key(h, key, len));
}

int cli_cmd_hash(int argc, char **argv)
{
    cli_source src;
    int first = cli_parse_options(argc, argv, &src, cli_usage_hash, 0);
    if (src.hash == NULL)
        cli_die("hash: --hash NAME is required");
    mcr_hash h = cli_parse_hash(src.hash);
    for_each_key("hash", argc - first, argv + first, hash_one, &h);
    free(src.behaviors);
    return cli_finish_output();
}
