/* SPDX-License-Identifier: BSD-3-Clause */
/* compare_cmd.c: mixed fleets: mcroute clients (the clients --client reproduces) and mcroute compare (where each client puts each key, and how often each pair disagrees). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

const char cli_usage_compare[] =
    "Usage: mcroute compare --clients A,B,... (-s LIST | -f FILE) [--json] [KEY...]\n"
    "For every key, the server each client picks from the same server list\n"
    "(placed as that client does: see mcroute --client and mcr_client(3)):\n"
    "KEY<TAB>SERVER_A<TAB>SERVER_B..., in the order of --clients, then\n"
    "'<TAB>disagree' when they do not all agree. A first line '# key<TAB>A<TAB>B...'\n"
    "names the columns; after the keys, one line per pair of clients:\n"
    "'# A<TAB>B<TAB>N of M keys disagree<TAB>FRACTION'. With no KEY, reads keys\n"
    "from standard input, one per line. At least two clients, each at most once.\n"
    "With --json: {\"clients\": [...], \"keys\": [{\"key\": K, \"servers\": [S, ...],\n"
    "\"agree\": true}, ...], \"pairs\": [{\"a\": A, \"b\": B, \"disagree\": N, \"keys\": M,\n"
    "\"fraction\": F}, ...]}.\n"
    "Clients (mcroute clients says what each reproduces):\n"
    "         pymemcache python-memcached pylibmc pylibmc-ketama spymemcached\n"
    "         spymemcached-libmemcached spymemcached-arraymod dalli gomemcache\n"
    "         node-memcached memjs nginx nginx-consistent php-memcached\n"
    "         php-memcached-ketama php-memcache mcrouter-ch3 memcached-proxy-jump\n"
    "         envoy-maglev envoy-ring-hash memcached-proxy-ring-ketama\n"
    "         mcrouter-wch3\n";

const char cli_usage_clients[] =
    "Usage: mcroute clients [--json]\n"
    "List the clients that --client NAME (and compare --clients) places keys as,\n"
    "one line each: NAME<TAB>MODE<TAB>HASH<TAB>SUMMARY, where MODE and HASH are the\n"
    "--mode and --hash that the client sets and SUMMARY says what it reproduces\n"
    "(the client, its version and configuration). In the library's order, which\n"
    "stays the same from one release to the next; new clients come last.\n"
    "With --json: [{\"name\": N, \"mode\": M, \"hash\": H, \"summary\": S}, ...].\n";

/* The mode and key hash that client i sets, as mcr_config_set_client()
 * sets them: read from a ring of one server built with the client. The
 * server is "localhost", so that the one mode whose labels resolve a name
 * (spymemcached's, which Java's InetSocketAddress labels) asks only the
 * hosts file, and the one that looks an address up in reverse
 * (spymemcached-libmemcached) has none to look up. */
static void client_placement(size_t i, mcr_mode *mode, mcr_hash *hash)
{
    mcr_error err;
    mcr_ring *ring = NULL;
    mcr_config *cfg = mcr_config_new();
    if (cfg == NULL)
        cli_fail("out of memory");
    int rc = mcr_config_set_client(cfg, mcr_client_name(i), &err);
    if (rc == MCR_OK)
        rc = mcr_config_add_server(cfg, "localhost", MCR_DEFAULT_PORT, 1, &err);
    if (rc == MCR_OK)
        rc = mcr_ring_new(cfg, &ring, &err);
    mcr_config_free(cfg);
    if (rc != MCR_OK)
        cli_fail("clients: %s: %s", mcr_client_name(i), err.message);
    *mode = mcr_ring_mode(ring);
    *hash = mcr_ring_key_hash(ring);
    mcr_ring_free(ring);
}

int cli_cmd_clients(int argc, char **argv)
{
    cli_source src;
    int first = cli_parse_options(argc, argv, &src, cli_usage_clients, ALLOW_JSON | NO_HASH);
    if (first < argc)
        cli_die("clients: unexpected argument '%s'", argv[first]);
    if (src.json)
        putchar('[');
    for (size_t i = 0; mcr_client_name(i) != NULL; i++) {
        const char *name = mcr_client_name(i), *summary = mcr_client_summary(i);
        mcr_mode mode;
        mcr_hash hash;
        client_placement(i, &mode, &hash);
        const char *m = mcr_mode_name(mode), *h = mcr_hash_name(hash);
        if (src.json) {
            fputs(i ? ",\n  {\"name\": " : "\n  {\"name\": ", stdout);
            cli_json_string(stdout, name, strlen(name));
            fputs(", \"mode\": ", stdout);
            cli_json_string(stdout, m, strlen(m));
            fputs(", \"hash\": ", stdout);
            cli_json_string(stdout, h, strlen(h));
            fputs(", \"summary\": ", stdout);
            cli_json_string(stdout, summary, strlen(summary));
            putchar('}');
        } else {
            printf("%s\t%s\t%s\t%s\n", name, m, h, summary);
        }
    }
    if (src.json)
        fputs(mcr_client_name(0) != NULL ? "\n]\n" : "]\n", stdout);
    free(src.behaviors);
    return cli_finish_output();
}

/* At most this many clients in one comparison (there are fewer). */
#define COMPARE_MAX 64

typedef struct compare_ctx {
    size_t n;
    const char *name[COMPARE_MAX];
    mcr_ring *ring[COMPARE_MAX];
    uint32_t pick[COMPARE_MAX];
    size_t *disagree; /* n x n, upper triangle used */
    size_t keys;
    bool json;
} compare_ctx;

static void compare_one(const char *key, size_t len, void *arg)
{
    compare_ctx *c = arg;
    bool agree = true;

    for (size_t i = 0; i < c->n; i++)
        c->pick[i] = mcr_ring_locate(c->ring[i], key, len);
    /* every ring lists the same servers in the same order: compare indexes */
    for (size_t i = 0; i < c->n; i++)
        for (size_t j = i + 1; j < c->n; j++)
            if (c->pick[i] != c->pick[j]) {
                c->disagree[i * c->n + j]++;
                agree = false;
            }
    if (c->json) {
        fputs(c->keys ? ",\n  {" : "\n  {", stdout);
        cli_json_key_member(stdout, "key", key, len);
        fputs(", \"servers\": [", stdout);
        for (size_t i = 0; i < c->n; i++) {
            const char *s = mcr_ring_server_name(c->ring[i], c->pick[i]);
            if (i > 0)
                fputs(", ", stdout);
            cli_json_string(stdout, s, strlen(s));
        }
        printf("], \"agree\": %s}", agree ? "true" : "false");
    } else {
        cli_put_field(key, len);
        for (size_t i = 0; i < c->n; i++) {
            putchar('\t');
            fputs(mcr_ring_server_name(c->ring[i], c->pick[i]), stdout);
        }
        fputs(agree ? "\n" : "\tdisagree\n", stdout);
    }
    c->keys++;
}

/* Split --clients into c->name (pointers into the copy `list`). */
static void parse_clients(compare_ctx *c, char *list)
{
    for (char *tok = strtok(list, ","); tok != NULL; tok = strtok(NULL, ",")) {
        if (c->n == COMPARE_MAX)
            cli_die("compare: more than %d clients", COMPARE_MAX);
        for (size_t i = 0; i < c->n; i++)
            if (strcmp(c->name[i], tok) == 0)
                cli_die("compare: client '%s' given twice in --clients", tok);
        c->name[c->n++] = tok;
    }
    if (c->n < 2)
        cli_die("compare: --clients needs at least two clients, comma-separated");
}

int cli_cmd_compare(int argc, char **argv)
{
    cli_source src;
    compare_ctx c;
    mcr_error err;
    int first = cli_parse_options(argc, argv, &src, cli_usage_compare,
                                  ALLOW_SOURCE | ALLOW_JSON | ALLOW_CLIENTS);

    memset(&c, 0, sizeof(c));
    c.json = src.json;
    if (src.clients == NULL)
        cli_die("compare: --clients A,B,... is required");
    if (src.servers == NULL && src.server_file == NULL)
        cli_die("compare: give the server list with -s LIST or -f FILE (each client "
                "places keys over the same list)");
    if (src.mode != NULL || src.hash != NULL || src.client != NULL || src.snapshot != NULL ||
        src.libmemcached != NULL || src.twemproxy != NULL || src.ketama_file != NULL ||
        src.etcd != NULL)
        cli_die("compare: only -s LIST or -f FILE: each client of --clients sets its own "
                "placement");
    char *list = strdup(src.clients);
    if (list == NULL)
        cli_fail("out of memory");
    parse_clients(&c, list);
    for (size_t i = 0; i < c.n; i++) {
        src.client = c.name[i];
        mcr_config *cfg = cli_build_config(&src);
        if (mcr_ring_new(cfg, &c.ring[i], &err) != MCR_OK)
            cli_die("compare: %s: %s", c.name[i], err.message);
        mcr_config_free(cfg);
    }
    src.client = NULL;
    c.disagree = cli_xcalloc(c.n * c.n, sizeof(*c.disagree));
    if (c.json) {
        fputs("{\"clients\": [", stdout);
        for (size_t i = 0; i < c.n; i++) {
            if (i > 0)
                fputs(", ", stdout);
            cli_json_string(stdout, c.name[i], strlen(c.name[i]));
        }
        fputs("], \"keys\": [", stdout);
    } else {
        fputs("# key", stdout);
        for (size_t i = 0; i < c.n; i++)
            printf("\t%s", c.name[i]);
        putchar('\n');
    }
    if (first < argc)
        for (int i = first; i < argc; i++)
            compare_one(argv[i], strlen(argv[i]), &c);
    else
        cli_for_each_line(stdin, "compare", true, compare_one, &c);
    if (c.json)
        fputs(c.keys ? "\n], \"pairs\": [" : "], \"pairs\": [", stdout);
    size_t npairs = 0;
    for (size_t i = 0; i < c.n; i++) {
        for (size_t j = i + 1; j < c.n; j++) {
            size_t d = c.disagree[i * c.n + j];
            double f = c.keys ? (double)d / (double)c.keys : 0.0;
            if (c.json) {
                fputs(npairs++ ? ",\n  {\"a\": " : "\n  {\"a\": ", stdout);
                cli_json_string(stdout, c.name[i], strlen(c.name[i]));
                fputs(", \"b\": ", stdout);
                cli_json_string(stdout, c.name[j], strlen(c.name[j]));
                printf(", \"disagree\": %zu, \"keys\": %zu, \"fraction\": %.6f}", d, c.keys, f);
            } else {
                printf("# %s\t%s\t%zu of %zu keys disagree\t%.6f\n", c.name[i], c.name[j], d,
                       c.keys, f);
            }
        }
    }
    if (c.json)
        fputs("\n]}\n", stdout);
    for (size_t i = 0; i < c.n; i++)
        mcr_ring_free(c.ring[i]);
    free(c.disagree);
    free(list);
    free(src.behaviors);
    return cli_finish_output();
}
