/* SPDX-License-Identifier: BSD-3-Clause */
/* fleet_follow.c: example of an application whose pool follows a membership kept in etcd, through a change made by another writer.
 *
 * Usage: fleet_follow --etcd URLS --pool NAME -s HOST:PORT,...,HOST:PORT [-k KEYS]
 *
 * What it does, in one process:
 *
 *   1. as an operator would with `mcroute members publish`, publishes
 *      every server given but the last as the pool's first epoch
 *      ("stable-ketama") when the pool does not exist yet;
 *   2. follows the pool (mcr_fleet_follow) into a router, and runs a
 *      connection pool over that router on a libevent loop;
 *   3. stores KEYS keys (default 2000) through the pool;
 *   4. as a second operator would with `mcroute members add`, adds the last
 *      server by compare-and-swap (mcr_fleet_change), and runs the loop
 *      until the follower's thread has published the new epoch to the
 *      router (no polling of etcd by the application: the follower's watch
 *      delivers it);
 *   5. reads every key back through the pool, which routes them with the
 *      new epoch, and checks: no error; a miss only for a key the new
 *      server now owns (a cache that moved keys is cold only there); every
 *      other key a hit.
 *
 * Threads: the pool and its callbacks live in the main thread (the loop's);
 * the follower's own thread watches etcd and publishes to the router; the
 * main thread sees the change through mcr_router_epoch() (lock-free).
 *
 * Exit status: 0 when every check held, 1 otherwise, 2 on a usage error.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

#include <mcroute.h>
#include <mcroute_fleet.h>
#include <mcroute_pool.h>
#include <mcroute_router.h>
#include <mcroute_snapshot.h>

#define KEY_SIZE 32
#define WAIT_MS 30000 /* the most the change may take to arrive */

typedef struct app {
    struct event_base *base;
    mcr_router *router;
    mcr_pool *pool;
    size_t pending;
    size_t errors, hits, misses, misses_elsewhere;
    const char *new_id;     /* the server added */
    uint64_t epoch_seen;    /* the epoch of the replies read back */
} app;

static void usage(void)
{
    fprintf(stderr, "usage: fleet_follow --etcd URLS --pool NAME -s HOST:PORT,...[,NEW] "
                    "[-k KEYS]\n");
    exit(2);
}

static void on_event(const mcr_fleet_event *ev, void *arg)
{
    (void)arg;
    static const char *kinds[] = {"adopted",   "refused", "disconnected", "connected",
                                  "resync",    "cached",  "register",     "cache"};
    /* the follower's thread: only print */
    fprintf(stderr, "fleet: %s epoch %" PRIu64 "%s%s\n", kinds[ev->kind], ev->epoch,
            ev->err ? ": " : "", ev->err ? ev->err->message : "");
}

static void stored(const mcr_result *r, void *arg)
{
    app *a = arg;
    a->pending--;
    if (r->status != MCR_OK || r->reply != MCR_REPLY_STORED) {
        a->errors++;
        fprintf(stderr, "set %.*s: %s\n", (int)r->key_len, r->key,
                r->message ? r->message : mcr_reply_name(r->reply));
    }
}

static void read_back(const mcr_result *r, void *arg)
{
    app *a = arg;
    a->pending--;
    a->epoch_seen = r->epoch;
    if (r->status != MCR_OK) {
        a->errors++;
        fprintf(stderr, "get %.*s: %s\n", (int)r->key_len, r->key, r->message);
    } else if (r->reply == MCR_REPLY_HIT) {
        a->hits++;
    } else {
        a->misses++;
        if (r->server == NULL || strcmp(r->server, a->new_id) != 0)
            a->misses_elsewhere++;
    }
}

/* Run the loop until no request is pending. */
static void drain(app *a)
{
    while (a->pending > 0)
        event_base_loop(a->base, EVLOOP_ONCE);
}

/* Run the loop (a 10 ms timer keeps it turning) until the router reaches
 * `epoch` or WAIT_MS passes. */
static void tick(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    (void)arg;
}

static int wait_epoch(app *a, uint64_t epoch)
{
    struct event *t = event_new(a->base, -1, EV_PERSIST, tick, NULL);
    struct timeval tv = {0, 10000};
    event_add(t, &tv);
    for (int i = 0; i < WAIT_MS / 10 && mcr_router_epoch(a->router) < epoch; i++)
        event_base_loop(a->base, EVLOOP_ONCE);
    event_free(t);
    return mcr_router_epoch(a->router) >= epoch ? 0 : -1;
}

int main(int argc, char **argv)
{
    const char *etcd = NULL, *pool_name = NULL, *servers = NULL;
    size_t nkeys = 2000;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--etcd") == 0 && i + 1 < argc)
            etcd = argv[++i];
        else if (strcmp(argv[i], "--pool") == 0 && i + 1 < argc)
            pool_name = argv[++i];
        else if (strcmp(argv[i], "-s") == 0 && i + 1 < argc)
            servers = argv[++i];
        else if (strcmp(argv[i], "-k") == 0 && i + 1 < argc)
            nkeys = strtoul(argv[++i], NULL, 10);
        else
            usage();
    }
    const char *last = servers ? strrchr(servers, ',') : NULL;
    if (etcd == NULL || pool_name == NULL || last == NULL || nkeys == 0)
        usage();

    mcr_error err;
    mcr_fleet_options fo;
    mcr_fleet_options_init(&fo);
    fo.endpoints = etcd;
    fo.pool = pool_name;

    /* 1. The first epoch, as an operator publishes it. */
    char *first = strndup(servers, (size_t)(last - servers));
    mcr_config *cfg = mcr_config_new();
    uint64_t epoch = 0;
    if (first == NULL || cfg == NULL || mcr_config_set_mode(cfg, MCR_MODE_STABLE_KETAMA) ||
        mcr_config_add_servers(cfg, first, &err) != MCR_OK ||
        mcr_fleet_publish(&fo, cfg, &epoch, &err) != MCR_OK) {
        fprintf(stderr, "publish: %s\n", err.message);
        return 1;
    }
    mcr_config_free(cfg);
    free(first);
    printf("pool %s at epoch %" PRIu64 "\n", pool_name, epoch);

    /* 2. Follow it; a pool over the router. */
    app a;
    memset(&a, 0, sizeof(a));
    a.new_id = last + 1;
    a.base = event_base_new();
    mcr_fleet *fleet = NULL;
    mcr_fleet_follow_options follow = {0};
    follow.on_event = on_event;
    if (a.base == NULL || mcr_router_new(NULL, &a.router, &err) != MCR_OK ||
        mcr_fleet_follow(&fo, &follow, a.router, &fleet, &err) != MCR_OK ||
        mcr_pool_new(a.base, a.router, NULL, &a.pool, &err) != MCR_OK) {
        fprintf(stderr, "start: %s\n", err.message);
        return 1;
    }
    uint64_t before = mcr_router_epoch(a.router);
    printf("following as %s, epoch %" PRIu64 "\n", mcr_fleet_client_id(fleet), before);

    /* 3. Store the keys. */
    char key[KEY_SIZE];
    for (size_t i = 0; i < nkeys; i++) {
        int n = snprintf(key, sizeof(key), "key:%zu", i);
        if (mcr_pool_set(a.pool, key, (size_t)n, key, (size_t)n, 0, 0, stored, &a, &err) !=
            MCR_OK) {
            fprintf(stderr, "set: %s\n", err.message);
            return 1;
        }
        a.pending++;
        if (a.pending >= 256)
            drain(&a);
    }
    drain(&a);

    /* 4. Another writer adds the last server; the follower brings it here. */
    mcr_changes *ch = mcr_changes_new();
    mcr_server_desc d = {.host = NULL, .port = 0, .weight = 1, .state = MCR_STATE_ACTIVE};
    char host[256];
    const char *colon = strrchr(a.new_id, ':');
    if (ch == NULL || colon == NULL || (size_t)(colon - a.new_id) >= sizeof(host))
        usage();
    memcpy(host, a.new_id, (size_t)(colon - a.new_id));
    host[colon - a.new_id] = '\0';
    d.host = host;
    d.port = atoi(colon + 1);
    if (mcr_changes_add(ch, &d, &err) != MCR_OK || mcr_fleet_change(&fo, ch, &epoch, &err)) {
        fprintf(stderr, "change: %s\n", err.message);
        return 1;
    }
    mcr_changes_free(ch);
    if (wait_epoch(&a, epoch) != 0) {
        fprintf(stderr, "the change (epoch %" PRIu64 ") did not arrive\n", epoch);
        return 1;
    }
    printf("epoch %" PRIu64 " -> %" PRIu64 "\n", before, mcr_router_epoch(a.router));

    /* 5. Read everything back through the new epoch. */
    for (size_t i = 0; i < nkeys; i++) {
        int n = snprintf(key, sizeof(key), "key:%zu", i);
        if (mcr_pool_get(a.pool, key, (size_t)n, read_back, &a, &err) != MCR_OK) {
            fprintf(stderr, "get: %s\n", err.message);
            return 1;
        }
        a.pending++;
        if (a.pending >= 256)
            drain(&a);
    }
    drain(&a);
    printf("hits %zu, misses %zu (on the new server: %zu), errors %zu.\n", a.hits, a.misses,
           a.misses - a.misses_elsewhere, a.errors);
    int ok = a.errors == 0 && a.misses_elsewhere == 0 && a.hits + a.misses == nkeys &&
             a.misses > 0 && a.epoch_seen == epoch;
    mcr_pool_free(a.pool);
    mcr_fleet_free(fleet);
    mcr_router_free(a.router);
    event_base_free(a.base);
    printf("%s\n", ok ? "all checks passed" : "CHECKS FAILED");
    return ok ? 0 : 1;
}
