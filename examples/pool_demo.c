/* SPDX-License-Identifier: BSD-3-Clause */
/* pool_demo.c: example: keys through a connection pool, a server added live, and how many keys moved (measured, predicted by the diff, and 1/(N+1)).
 *
 * Usage: pool_demo SERVERS NEW_SERVER [KEYS]
 *
 *   SERVERS     memcached servers, "host:port,host:port,..." (N of them)
 *   NEW_SERVER  one more memcached server, "host:port", added while running
 *   KEYS        how many keys (default 10000)
 *
 * It builds a router over the N servers (stable-ketama), stores KEYS keys
 * through a pool and reads them back (all hit). Then, while the pool stays
 * up, it publishes a snapshot with the new server added (mcr_router_apply();
 * a hook receives the diff) and reads every key again: the keys whose owner
 * changed now go to the new, empty server and miss; the others still hit.
 * It prints the moved fraction measured, the one the diff predicts
 * (mcr_diff_moved()) and 1/(N+1), checks that the misses are exactly the
 * keys the diff says moved, refills them, and reads everything once more.
 * Exit status 0 when every check holds, 1 otherwise, 2 on bad arguments.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <event2/event.h>

#include "mcroute.h"
#include "mcroute_pool.h"
#include "mcroute_router.h"
#include "mcroute_snapshot.h"

/* Requests submitted and not yet answered while storing: enough to keep
 * every connection busy, bounded so memory stays small. */
#define IN_FLIGHT 1000

typedef struct demo {
    size_t nkeys;
    char **keys;
    size_t *lens;
    unsigned char *moved;  /* per key: the diff of the last publish says it moved */
    unsigned char *hit;    /* per key: the last get hit */
    double predicted;      /* mcr_diff_moved() of the last publish */
    size_t hits, misses, failed, wrong;
    struct event_base *base;
    mcr_pool *pool;
} demo;

/* The key's index: keys are "demo:RUN:INDEX". */
static size_t key_index(const char *key, size_t len)
{
    size_t i = 0, p = len;
    while (p > 0 && key[p - 1] != ':')
        p--;
    for (; p < len; p++)
        i = i * 10 + (size_t)(key[p] - '0');
    return i;
}

static void value_of(const demo *d, size_t i, char *buf, size_t cap)
{
    snprintf(buf, cap, "value of %s", d->keys[i]);
}

/* ---------------------------------------------------------------- hook */

/* Called by mcr_router_apply() in this thread, with the old and the new
 * snapshot and their diff: what an application would use to warm the new
 * server or count what it is about to lose. */
static void on_publish(const mcr_snapshot *old_snap, const mcr_snapshot *new_snap,
                       const mcr_diff *diff, void *arg)
{
    demo *d = arg;
    (void)old_snap;
    (void)new_snap;
    d->predicted = mcr_diff_moved(diff);
    for (size_t i = 0; i < d->nkeys; i++)
        d->moved[i] = diff != NULL && mcr_diff_key_moved(diff, d->keys[i], d->lens[i]);
}

/* ---------------------------------------------------------------- requests */

static void stored(const mcr_result *res, void *arg)
{
    demo *d = arg;
    if (res->status != MCR_OK || res->reply != MCR_REPLY_STORED) {
        if (d->failed++ == 0)
            fprintf(stderr, "pool_demo: set %.*s: %s\n", (int)res->key_len, res->key,
                    res->message ? res->message : mcr_reply_name(res->reply));
    }
}

static void fetched(const mcr_result *res, void *arg)
{
    demo *d = arg;
    size_t i = key_index(res->key, res->key_len);
    if (res->status != MCR_OK) {
        if (d->failed++ == 0)
            fprintf(stderr, "pool_demo: get %.*s: %s\n", (int)res->key_len, res->key,
                    res->message ? res->message : mcr_strerror(res->status));
        return;
    }
    if (res->reply != MCR_REPLY_HIT) {
        d->misses++;
        return;
    }
    char want[300];
    value_of(d, i, want, sizeof(want));
    if (res->value_len != strlen(want) || memcmp(res->value, want, res->value_len) != 0)
        d->wrong++;
    d->hits++;
    d->hit[i] = 1;
}

static void all_fetched(const mcr_result *res, void *arg)
{
    (void)res;
    (void)arg;
}

/* Store keys[i] for every i with which[i] (NULL: all), pipelined. */
static size_t set_keys(demo *d, const unsigned char *which)
{
    size_t sent = 0;
    d->failed = 0;
    for (size_t i = 0; i < d->nkeys; i++) {
        if (which != NULL && !which[i])
            continue;
        while (mcr_pool_pending(d->pool) >= IN_FLIGHT)
            event_base_loop(d->base, EVLOOP_ONCE);
        char v[300];
        value_of(d, i, v, sizeof(v));
        if (mcr_pool_set(d->pool, d->keys[i], d->lens[i], v, strlen(v), 0, 0, stored, d, NULL) != MCR_OK)
            d->failed++;
        sent++;
    }
    mcr_pool_wait(d->pool);
    return sent;
}

/* Get every key with one multi-get (the pool splits it by server). */
static void get_all(demo *d)
{
    d->hits = d->misses = d->failed = d->wrong = 0;
    memset(d->hit, 0, d->nkeys);
    if (mcr_pool_get_multi(d->pool, MCR_OP_GET, (const void *const *)d->keys, d->lens, d->nkeys,
                           fetched, all_fetched, d, NULL) != MCR_OK)
        d->failed = d->nkeys;
    mcr_pool_wait(d->pool);
}

static void print_servers(const demo *d)
{
    printf("  %-24s %9s %7s %7s\n", "server", "requests", "hits", "misses");
    for (size_t i = 0; i < mcr_pool_server_count(d->pool); i++) {
        mcr_server_stats st;
        if (mcr_pool_server_stats(d->pool, i, &st) == MCR_OK)
            printf("  %-24s %9llu %7llu %7llu\n", st.id, (unsigned long long)st.requests,
                   (unsigned long long)st.hits, (unsigned long long)st.misses);
    }
}

/* ---------------------------------------------------------------- main */

static int usage(void)
{
    fprintf(stderr, "usage: pool_demo HOST:PORT,HOST:PORT,... NEW_HOST:PORT [KEYS]\n");
    return 2;
}

int main(int argc, char **argv)
{
    if (argc < 3 || argc > 4)
        return usage();
    demo d;
    memset(&d, 0, sizeof(d));
    d.nkeys = argc == 4 ? strtoul(argv[3], NULL, 10) : 10000;
    if (d.nkeys == 0 || d.nkeys > 10000000)
        return usage();

    /* The new server, "host:port": split at the last ':'. */
    char newhost[MCR_HOSTNAME_MAX + 1];
    const char *colon = strrchr(argv[2], ':');
    int newport = colon ? atoi(colon + 1) : 0;
    if (colon == NULL || colon == argv[2] || (size_t)(colon - argv[2]) > MCR_HOSTNAME_MAX ||
        newport <= 0 || newport > 65535)
        return usage();
    memcpy(newhost, argv[2], (size_t)(colon - argv[2]));
    newhost[colon - argv[2]] = '\0';

    /* The placement: stable-ketama, where adding a server moves keys only
     * to that server. */
    mcr_error err = {.code = 0, .message = "out of memory"};
    mcr_config *cfg = mcr_config_new();
    mcr_snapshot *snap = NULL;
    mcr_router *router = NULL;
    if (cfg == NULL || mcr_config_set_mode(cfg, MCR_MODE_STABLE_KETAMA) != MCR_OK ||
        mcr_config_add_servers(cfg, argv[1], &err) != MCR_OK ||
        mcr_snapshot_new(cfg, 1, &snap, &err) != MCR_OK ||
        mcr_router_new(snap, &router, &err) != MCR_OK) {
        fprintf(stderr, "pool_demo: %s\n", err.message);
        return 2;
    }
    size_t nservers = mcr_config_server_count(cfg);
    mcr_config_free(cfg);

    d.base = event_base_new();
    mcr_pool_options opts;
    mcr_pool_options_init(&opts);
    opts.request_timeout_ms = 5000;
    if (d.base == NULL || mcr_pool_new(d.base, router, &opts, &d.pool, &err) != MCR_OK) {
        fprintf(stderr, "pool_demo: cannot create the pool\n");
        return 1;
    }
    mcr_router_add_hook(router, on_publish, &d);

    /* Keys unique to this run, so that a second run against the same
     * servers starts from nothing. */
    unsigned run = (unsigned)getpid() ^ (unsigned)time(NULL);
    d.keys = calloc(d.nkeys, sizeof(*d.keys));
    d.lens = calloc(d.nkeys, sizeof(*d.lens));
    d.moved = calloc(d.nkeys, 1);
    d.hit = calloc(d.nkeys, 1);
    for (size_t i = 0; i < d.nkeys; i++) {
        char k[64];
        d.lens[i] = (size_t)snprintf(k, sizeof(k), "demo:%08x:%zu", run, i);
        d.keys[i] = strdup(k);
    }
    int ok = 1;

    /* Why stable-ketama, in one line: what the misses below rely on. */
    printf("%zu memcached servers, stable-ketama (a server added takes keys only from the "
           "others; none move between them), %zu keys\n",
           nservers, d.nkeys);
    size_t sent = set_keys(&d, NULL);
    printf("set %zu keys: %zu stored, %zu failed\n", sent, sent - d.failed, d.failed);
    get_all(&d);
    printf("get %zu keys: %zu hits, %zu misses, %zu failed\n", d.nkeys, d.hits, d.misses, d.failed);
    ok &= d.hits == d.nkeys && d.wrong == 0;

    /* Add server N+1 while the pool stays up: one new snapshot, published
     * to the router; the pool takes it at its next request. */
    mcr_changes *ch = mcr_changes_new();
    mcr_server_desc nd = {.host = newhost, .port = newport, .weight = 1};
    if (ch == NULL || mcr_changes_add(ch, &nd, &err) != MCR_OK ||
        mcr_router_apply(router, ch, 0, &err) != MCR_OK) {
        fprintf(stderr, "pool_demo: adding %s: %s\n", argv[2], err.message);
        return 1;
    }
    mcr_changes_free(ch);
    printf("added %s live: epoch %llu, %zu servers\n", argv[2],
           (unsigned long long)mcr_router_epoch(router), nservers + 1);

    get_all(&d);
    printf("get %zu keys: %zu hits, %zu misses, %zu failed\n", d.nkeys, d.hits, d.misses, d.failed);
    size_t moved = 0, agree = 0;
    for (size_t i = 0; i < d.nkeys; i++) {
        moved += d.moved[i];
        agree += d.moved[i] == !d.hit[i];
    }
    printf("moved: measured %.4f (%zu of %zu keys missed), predicted %.4f (mcr_diff_moved), "
           "1/(N+1) = %.4f\n",
           (double)d.misses / (double)d.nkeys, d.misses, d.nkeys, d.predicted,
           1.0 / (double)(nservers + 1));
    printf("misses are exactly the keys the diff says moved: %s\n",
           agree == d.nkeys && moved == d.misses ? "yes" : "NO");
    ok &= agree == d.nkeys && moved == d.misses && d.failed == 0 && d.wrong == 0;

    /* What a cache-aside application does next: refill the misses. */
    unsigned char *refill = calloc(d.nkeys, 1);
    for (size_t i = 0; i < d.nkeys; i++)
        refill[i] = !d.hit[i];
    sent = set_keys(&d, refill);
    free(refill);
    get_all(&d);
    printf("refilled %zu keys, get %zu keys: %zu hits, %zu misses, %zu failed\n", sent, d.nkeys,
           d.hits, d.misses, d.failed);
    ok &= d.hits == d.nkeys && d.wrong == 0;
    print_servers(&d);

    mcr_pool_free(d.pool);
    mcr_router_remove_hook(router, on_publish, &d);
    mcr_router_free(router);
    mcr_snapshot_unref(snap);
    event_base_free(d.base);
    for (size_t i = 0; i < d.nkeys; i++)
        free(d.keys[i]);
    free(d.keys);
    free(d.lens);
    free(d.moved);
    free(d.hit);
    printf("%s\n", ok ? "ok" : "FAILED");
    return ok ? 0 : 1;
}
