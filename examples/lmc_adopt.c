/* SPDX-License-Identifier: BSD-3-Clause */
/* lmc_adopt.c: example application that keeps its libmemcached handle and adopts its placement into mcroute, proving both agree key for key and that no key is missed.
 *
 * Usage: lmc_adopt -s HOST:PORT[,HOST:PORT...] [-n KEYS]
 *
 * The application configures libmemcached as it always has: an option
 * string with weighted servers (server i gets weight i + 1), then
 * KETAMA_WEIGHTED=1. It does not restate that configuration for mcroute:
 * mcr_memcached_st_ring() (mcroute_memcached_st.h, library
 * mcroute_libmemcached) reads the live memcached_st and returns a ring that
 * places every key where libmemcached does.
 *
 * The program then shows, for KEYS keys (default 1000), and prints:
 *
 *   agree N/N          memcached_generate_hash() and memcached_server_by_key()
 *                      name the same server as the adopted ring and as the
 *                      router's snapshot built from it;
 *   hits N/N           keys stored with memcached_set() are all found by an
 *                      mcroute pool (one multi-get per server), each on the
 *                      server libmemcached chose;
 *   lmc hits N/N       and the other way round: keys set through the pool are
 *                      all found by memcached_get().
 *
 * For contrast it also prints how many of the keys would be missed by a
 * ring restated by hand with a plausible slip: the same server list without
 * the weights, in mcroute's default mode ("ketama").
 *
 * The pool needs a snapshot, which is built from a config, not from a ring:
 * the config is restated from the ring's own description (mode, key hash,
 * servers and the weights the ring carries) and the snapshot's continuum is
 * checked point for point against the adopted ring before it is used.
 *
 * Exit status: 0 when everything agrees and every key is found, 1 otherwise
 * (or when a server cannot be used), 2 on a usage error.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/event.h>
#include <libmemcached/memcached.h>

#include <mcroute.h>
#include <mcroute_memcached_st.h>
#include <mcroute_pool.h>
#include <mcroute_router.h>
#include <mcroute_snapshot.h>

#define MAX_SERVERS 64
#define KEY_SIZE 64
#define ADDR_SIZE (MCR_HOSTNAME_MAX + 8)

typedef struct keyset {
    size_t n;
    char (*keys)[KEY_SIZE];
    const void **ptrs;        /* keys[i], for mcr_pool_get_multi() */
    size_t *lens;
    char (*owner)[ADDR_SIZE]; /* "host:port" libmemcached chose for key i */
} keyset;

/* What the pool's callbacks count. */
typedef struct tally {
    const keyset *ks;
    size_t hits, right_value, right_server, stored, errors;
    int done;
} tally;

static void value_of(const char *key, char *out, size_t cap)
{
    snprintf(out, cap, "value of %s", key);
}

/* The index of a key of the set, from its text ("...:<i>"). */
static size_t key_index(const char *key, size_t len)
{
    size_t i = len;
    while (i > 0 && key[i - 1] >= '0' && key[i - 1] <= '9')
        i--;
    size_t v = 0;
    for (; i < len; i++)
        v = v * 10 + (size_t)(key[i] - '0');
    return v;
}

static int keyset_init(keyset *ks, size_t n, const char *tag)
{
    ks->n = n;
    ks->keys = calloc(n, sizeof(*ks->keys));
    ks->ptrs = calloc(n, sizeof(*ks->ptrs));
    ks->lens = calloc(n, sizeof(*ks->lens));
    ks->owner = calloc(n, sizeof(*ks->owner));
    if (ks->keys == NULL || ks->ptrs == NULL || ks->lens == NULL || ks->owner == NULL)
        return -1;
    for (size_t i = 0; i < n; i++) {
        /* The process id keeps runs against shared servers apart. */
        snprintf(ks->keys[i], KEY_SIZE, "lmc_adopt:%ld:%s:%zu", (long)getpid(), tag, i);
        ks->ptrs[i] = ks->keys[i];
        ks->lens[i] = strlen(ks->keys[i]);
    }
    return 0;
}

static void keyset_free(keyset *ks)
{
    free(ks->keys);
    free(ks->ptrs);
    free(ks->lens);
    free(ks->owner);
}

/* ------------------------------------------------------------ adoption */

/* A snapshot placing keys exactly as `ring`: its config restated from the
 * ring, the continuum compared point for point. */
static int snapshot_from_ring(const mcr_ring *ring, mcr_snapshot **out, mcr_error *err)
{
    mcr_config *cfg = mcr_config_new();
    mcr_snapshot *snap = NULL;
    int rc = cfg == NULL ? MCR_ERR_NOMEM : MCR_OK;
    if (rc == MCR_OK)
        rc = mcr_config_set_mode(cfg, mcr_ring_mode(ring));
    if (rc == MCR_OK)
        rc = mcr_config_set_hash(cfg, mcr_ring_key_hash(ring));
    for (size_t i = 0; rc == MCR_OK && i < mcr_ring_server_count(ring); i++)
        rc = mcr_config_add_server(cfg, mcr_ring_server_host(ring, i),
                                   mcr_ring_server_port(ring, i),
                                   mcr_ring_server_weight(ring, i), err);
    if (rc == MCR_OK)
        rc = mcr_snapshot_new(cfg, 1, &snap, err);
    mcr_config_free(cfg);
    if (rc != MCR_OK)
        return rc;

    const mcr_ring *sr = mcr_snapshot_ring(snap);
    int same = mcr_ring_point_count(sr) == mcr_ring_point_count(ring);
    for (size_t i = 0; same && i < mcr_ring_point_count(ring); i++) {
        uint32_t v1, s1, v2, s2;
        same = mcr_ring_point(ring, i, &v1, &s1) == MCR_OK &&
               mcr_ring_point(sr, i, &v2, &s2) == MCR_OK && v1 == v2 && s1 == s2;
    }
    /* A key prefix or a label hash the ring does not describe would show
     * here (mcr_ring_hash) or in the points above. */
    static const char *const probes[] = {"a", "user:1", "lmc_adopt", "0123456789"};
    for (size_t i = 0; same && i < sizeof(probes) / sizeof(probes[0]); i++)
        same = mcr_ring_hash(sr, probes[i], strlen(probes[i])) ==
               mcr_ring_hash(ring, probes[i], strlen(probes[i]));
    if (!same) {
        mcr_snapshot_unref(snap);
        snprintf(err->message, sizeof(err->message),
                 "the adopted ring (mode %s) cannot be restated as a config",
                 mcr_mode_name(mcr_ring_mode(ring)));
        return err->code = MCR_ERR_UNSUPPORTED;
    }
    *out = snap;
    return MCR_OK;
}

/* ------------------------------------------------------------ pool callbacks */

static void got_key(const mcr_result *res, void *arg)
{
    tally *t = arg;
    if (res->status != MCR_OK) {
        t->errors++;
        fprintf(stderr, "lmc_adopt: get %.*s: %s\n", (int)res->key_len, res->key, res->message);
        return;
    }
    if (res->reply != MCR_REPLY_HIT)
        return;
    t->hits++;
    size_t i = key_index(res->key, res->key_len);
    char want[128];
    value_of(t->ks->keys[i], want, sizeof(want));
    if (res->value_len == strlen(want) && memcmp(res->value, want, res->value_len) == 0)
        t->right_value++;
    if (strcmp(res->server, t->ks->owner[i]) == 0)
        t->right_server++;
}

static void got_all(const mcr_result *res, void *arg)
{
    tally *t = arg;
    if (res->status != MCR_OK)
        fprintf(stderr, "lmc_adopt: multi-get: %s\n", res->message);
    t->done = 1;
}

static void stored(const mcr_result *res, void *arg)
{
    tally *t = arg;
    if (res->status == MCR_OK && res->reply == MCR_REPLY_STORED) {
        t->stored++;
    } else {
        t->errors++;
        fprintf(stderr, "lmc_adopt: set %.*s: %s\n", (int)res->key_len, res->key,
                res->status != MCR_OK ? res->message : mcr_reply_name(res->reply));
    }
}

/* ------------------------------------------------------------ main */

static void usage(void)
{
    fprintf(stderr, "usage: lmc_adopt -s HOST:PORT[,HOST:PORT...] [-n KEYS]\n");
    exit(2);
}

int main(int argc, char **argv)
{
    const char *servers = NULL;
    size_t n = 1000;
    int opt;
    setvbuf(stdout, NULL, _IOLBF, 0); /* in order with stderr, also into a pipe */
    while ((opt = getopt(argc, argv, "s:n:")) != -1) {
        if (opt == 's') {
            servers = optarg;
        } else if (opt == 'n') {
            char *end;
            errno = 0;
            unsigned long v = strtoul(optarg, &end, 10);
            if (*optarg == '\0' || *end != '\0' || errno != 0 || v == 0 || v > 1000000)
                usage();
            n = v;
        } else {
            usage();
        }
    }
    if (servers == NULL || optind != argc)
        usage();

    /* ---- the application's own libmemcached configuration */
    char options[MAX_SERVERS * 300] = "";
    size_t used = 0, nservers = 0;
    const char *p = servers;
    while (*p != '\0') {
        size_t len = strcspn(p, ",");
        if (len == 0 || len > 260 || nservers == MAX_SERVERS)
            usage();
        used += (size_t)snprintf(options + used, sizeof(options) - used, "%s--SERVER=%.*s/?%zu",
                                 used ? " " : "", (int)len, p, nservers + 1);
        nservers++;
        p += len + (p[len] == ',');
    }
    memcached_st *memc = memcached(options, strlen(options));
    if (memc == NULL) {
        fprintf(stderr, "lmc_adopt: libmemcached refuses the options \"%s\"\n", options);
        return 1;
    }
    memcached_behavior_set(memc, MEMCACHED_BEHAVIOR_KETAMA_WEIGHTED, 1);
    printf("libmemcached: memcached(\"%s\") + KETAMA_WEIGHTED=1\n", options);

    /* ---- adopt its placement */
    mcr_error err;
    memset(&err, 0, sizeof(err));
    mcr_ring *ring = NULL, *naive = NULL;
    mcr_snapshot *snap = NULL;
    mcr_router *router = NULL;
    struct event_base *base = NULL;
    mcr_pool *pool = NULL;
    keyset ks, rev;
    memset(&ks, 0, sizeof(ks));
    memset(&rev, 0, sizeof(rev));
    int status = 1;
    int rc = mcr_memcached_st_ring(memc, &ring, &err);
    if (rc != MCR_OK) {
        fprintf(stderr, "lmc_adopt: mcr_memcached_st_ring: %s\n", err.message);
        goto out;
    }
    printf("adopted ring: mode %s, key hash %s, %zu servers, %zu points\n",
           mcr_mode_name(mcr_ring_mode(ring)), mcr_hash_name(mcr_ring_key_hash(ring)),
           mcr_ring_server_count(ring), mcr_ring_point_count(ring));
    for (size_t i = 0; i < mcr_ring_server_count(ring); i++)
        printf("  %s weight %" PRIu32 "\n", mcr_ring_server_name(ring, i),
               mcr_ring_server_weight(ring, i));
    if ((rc = snapshot_from_ring(ring, &snap, &err)) != MCR_OK ||
        (rc = mcr_router_new(snap, &router, &err)) != MCR_OK) {
        fprintf(stderr, "lmc_adopt: %s\n", err.message);
        goto out;
    }
    mcr_config *plain = mcr_config_new();
    rc = plain == NULL ? MCR_ERR_NOMEM : mcr_config_add_servers(plain, servers, &err);
    if (rc == MCR_OK)
        rc = mcr_ring_new(plain, &naive, &err);
    mcr_config_free(plain);
    if (rc != MCR_OK || keyset_init(&ks, n, "lmc") != 0 || keyset_init(&rev, n, "pool") != 0) {
        fprintf(stderr, "lmc_adopt: %s\n", rc != MCR_OK ? err.message : "out of memory");
        goto out;
    }

    /* ---- 1. both name the same server for every key */
    size_t agree = 0, naive_same = 0;
    for (size_t i = 0; i < n; i++) {
        const char *k = ks.keys[i];
        size_t kl = ks.lens[i];
        memcached_return_t mrc;
        uint32_t lh = memcached_generate_hash(memc, k, kl);
        const memcached_instance_st *inst = memcached_server_by_key(memc, k, kl, &mrc);
        if (inst == NULL) {
            fprintf(stderr, "lmc_adopt: memcached_server_by_key: %s\n",
                    memcached_strerror(memc, mrc));
            goto out;
        }
        snprintf(ks.owner[i], ADDR_SIZE, "%s:%u", memcached_server_name(inst),
                 (unsigned)memcached_server_port(inst));
        uint32_t r = mcr_ring_locate(ring, k, kl);
        mcr_route route;
        int same = r == lh && strcmp(mcr_ring_server_name(ring, r), ks.owner[i]) == 0 &&
                   mcr_router_locate(router, k, kl, &route) == MCR_OK && route.index == lh;
        agree += same;
        if (!same)
            fprintf(stderr, "lmc_adopt: %s: libmemcached %s, mcroute %s\n", k, ks.owner[i],
                    mcr_ring_server_name(ring, r));
        naive_same += strcmp(mcr_ring_server_name(naive, mcr_ring_locate(naive, k, kl)),
                             ks.owner[i]) == 0;
    }
    printf("agree %zu/%zu\n", agree, n);
    printf("(restated by hand and without the weights, \"-s %s\" in mcroute's default "
           "mode, a ring would miss %zu/%zu)\n", servers, n - naive_same, n);

    /* ---- 2. stored by libmemcached, read through the pool */
    size_t lmc_stored = 0;
    for (size_t i = 0; i < n; i++) {
        char v[128];
        value_of(ks.keys[i], v, sizeof(v));
        memcached_return_t mrc = memcached_set(memc, ks.keys[i], ks.lens[i], v, strlen(v), 0, 0);
        if (mrc == MEMCACHED_SUCCESS)
            lmc_stored++;
        else
            fprintf(stderr, "lmc_adopt: memcached_set %s: %s\n", ks.keys[i],
                    memcached_strerror(memc, mrc));
    }
    printf("stored %zu/%zu keys with libmemcached\n", lmc_stored, n);

    base = event_base_new();
    if (base == NULL || (rc = mcr_pool_new(base, router, NULL, &pool, &err)) != MCR_OK) {
        fprintf(stderr, "lmc_adopt: %s\n", base == NULL ? "no event base" : err.message);
        goto out;
    }
    tally got = {&ks, 0, 0, 0, 0, 0, 0};
    rc = mcr_pool_get_multi(pool, MCR_OP_GET, ks.ptrs, ks.lens, n, got_key, got_all, &got, NULL);
    if (rc != MCR_OK) {
        fprintf(stderr, "lmc_adopt: mcr_pool_get_multi: %s\n", mcr_strerror(rc));
        goto out;
    }
    /* A batch program may run the loop until the pool is idle. */
    mcr_pool_wait(pool);
    printf("hits %zu/%zu through the pool (right value %zu, on libmemcached's server %zu, "
           "errors %zu)\n", got.hits, n, got.right_value, got.right_server, got.errors);

    /* ---- 3. stored through the pool, read by libmemcached */
    tally put = {&rev, 0, 0, 0, 0, 0, 0};
    for (size_t i = 0; i < n; i++) {
        char v[128];
        value_of(rev.keys[i], v, sizeof(v));
        rc = mcr_pool_set(pool, rev.keys[i], rev.lens[i], v, strlen(v), 0, 0, stored, &put, NULL);
        if (rc != MCR_OK) {
            fprintf(stderr, "lmc_adopt: mcr_pool_set: %s\n", mcr_strerror(rc));
            put.errors++;
        }
    }
    mcr_pool_wait(pool);
    size_t lmc_hits = 0;
    for (size_t i = 0; i < n; i++) {
        size_t vlen;
        uint32_t flags;
        memcached_return_t mrc;
        char want[128];
        char *v = memcached_get(memc, rev.keys[i], rev.lens[i], &vlen, &flags, &mrc);
        value_of(rev.keys[i], want, sizeof(want));
        lmc_hits += v != NULL && vlen == strlen(want) && memcmp(v, want, vlen) == 0;
        free(v);
    }
    printf("stored %zu/%zu keys through the pool\n", put.stored, n);
    printf("lmc hits %zu/%zu\n", lmc_hits, n);

    if (agree == n && lmc_stored == n && got.hits == n && got.right_value == n &&
        got.right_server == n && got.errors == 0 && put.stored == n && lmc_hits == n)
        status = 0;
    else
        fprintf(stderr, "lmc_adopt: the two clients do not agree\n");

out:
    mcr_pool_free(pool);
    if (base != NULL)
        event_base_free(base);
    mcr_router_free(router);
    mcr_snapshot_unref(snap);
    mcr_ring_free(ring);
    mcr_ring_free(naive);
    keyset_free(&ks);
    keyset_free(&rev);
    memcached_free(memc);
    return status;
}
