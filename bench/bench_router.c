/* SPDX-License-Identifier: BSD-3-Clause */
/* bench_router.c: times lookups through an mcr_router against a bare snapshot, and publishing an added server against a rebuild (mcroute) and memcached_server_add (libmemcached). */
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <libmemcached/memcached.h>

#include "benchutil.h"
#include "mcroute.h"
#include "mcroute_router.h"
#include "mcroute_snapshot.h"

/*
 * What is compared, and why it is fair:
 *
 *  - Lookups: the same snapshot and keys, looked up through the router
 *    (mcr_router_acquire + mcr_snapshot_locate + mcr_router_release for each
 *    key, or one acquire around a batch of keys) and directly with
 *    mcr_snapshot_locate on the snapshot. The difference is what the router
 *    costs a reader: the check of its thread cache (an RCU read-side section
 *    and a reference only after a change; lib/router/router.c). Both
 *    sides must return the same server for every key, in every repetition
 *    (checksums).
 *  - Publishing one more server to 1,000: mcr_router_apply() (incremental
 *    mcr_snapshot_apply() + publish with its grace period) against building
 *    the same 1,001-server snapshot from a prepared config with
 *    mcr_snapshot_new() and publishing it. Both results are checked to place
 *    every key on the same server id.
 *  - The 100th server, against libmemcached: memcached_server_add() on a
 *    handle already holding 99 servers with KETAMA_WEIGHTED (it rebuilds its
 *    continuum), against mcr_router_apply() on a router holding the same 99
 *    servers in the same placement ("weighted", libmemcached's own). Both
 *    are checked to send every key to the same host and port. 100 is as far
 *    as libmemcached goes: its consistent distributions abort (assertion in
 *    update_continuum) when a 101st server is added.
 *  - One operation per timing for publishes (a handle or router reset
 *    between them, untimed); repetitions of the two sides interleaved, the
 *    side going first alternating; medians reported.
 */


#define KEYS_FULL 65536
#define KEYS_QUICK 8192
#define KEY_LEN_MAX 40
/* Keys per section in the batch case: a large multi-get. */
#define BATCH 64
/* Lookup cases: servers in the snapshot (lookups hardly depend on it). */
#define LOOKUP_SERVERS 100
#define BIG 1000
/* libmemcached's limit: 100 servers, so 99 plus the one added. */
#define SMALL 99
#define KEY_SEED 0x6d63726f75746521ull

typedef struct settings {
    bool quick;
    const char *filter;
    unsigned lookup_reps, big_reps, small_reps;
    size_t nkeys;
} settings;

typedef struct keyset {
    size_t n;
    char *bytes;
    const void **key;
    size_t *len;
} keyset;

typedef struct goal {
    const char *name;
    double target;   /* speedup (reference_ns / mcroute_ns) to reach */
    double measured; /* < 0: not measured; the worst of its cases */
    bool failed;
    /* Cases of the goal run, and reported: a goal may cover several cases
     * (each must reach the target), and fails if one of them failed. */
    unsigned cases, reported;
    const char *worst; /* the case of `measured` */
} goal;

enum { GOAL_LOOKUP, GOAL_BATCH, GOAL_ADD_1000, GOAL_ADD_100_LMC, GOAL_COUNT };

/* For the lookups "mcroute" is the router and "reference" the bare
 * snapshot: the goal "at most 5% overhead" is a speedup of at least
 * 1/1.05 = 0.952. router_lookup_overhead covers both single-key cases of
 * the one-call lookup (mcr_router_locate_index()), MD5 (ketama) and the
 * cheap fnv1a_32 (consistent), where the router's fixed cost weighs most:
 * its measure is the worse of the two. The same lookups as a section of
 * their own (acquire, mcr_snapshot_locate(), release) are printed too,
 * without a goal. */
static goal goals[GOAL_COUNT] = {
    [GOAL_LOOKUP] = {"router_lookup_overhead", 1.0 / 1.05, -1.0, false},
    [GOAL_BATCH] = {"router_batch_overhead", 1.0 / 1.05, -1.0, false},
    [GOAL_ADD_1000] = {"publish_add_1_to_1000_vs_rebuild", 10.0, -1.0, false},
    [GOAL_ADD_100_LMC] = {"publish_add_100th_vs_libmemcached", 30.0, -1.0, false},
};

static settings opt;
static int failures;
static volatile uint64_t g_sink;

/* ------------------------------------------------------------ utilities */

const char *bench_program = "bench_router";

static bool any_selected;

static bool selected(const char *name)
{
    bool yes = opt.filter == NULL || strstr(name, opt.filter) != NULL;
    any_selected |= yes;
    return yes;
}

static void fail(const char *name, const char *what, const char *detail)
{
    printf("FAIL %s: %s%s%s\n", name, what, detail ? ": " : "", detail ? detail : "");
    fflush(stdout);
    failures++;
}

static void report(const char *name, double m, double r, int goal_id)
{
    double speedup = r / m;
    printf("RESULT %s mcroute_ns=%.2f reference_ns=%.2f speedup=%.3f\n", name, m, r, speedup);
    fflush(stdout);
    if (goal_id >= 0) {
        goal *gl = &goals[goal_id];
        if (gl->reported == 0 || speedup < gl->measured) {
            gl->measured = speedup;
            gl->worst = name;
        }
        gl->reported++;
        gl->failed = gl->reported < gl->cases;
    }
}

/* Keys of the shapes of bench_placement (ids, sessions, composite keys). */
static void keyset_init(keyset *ks, size_t n)
{
    uint64_t rng = KEY_SEED;
    char *p;

    ks->n = n;
    ks->bytes = bench_xmalloc(n * (KEY_LEN_MAX + 1));
    ks->key = bench_xmalloc(n * sizeof(*ks->key));
    ks->len = bench_xmalloc(n * sizeof(*ks->len));
    p = ks->bytes;
    for (size_t i = 0; i < n; i++) {
        uint64_t r = bench_next_rand(&rng), s = bench_next_rand(&rng);
        unsigned a = (unsigned)(s % 100000000u);
        int len;
        switch (r % 4) {
        case 0:
            len = snprintf(p, KEY_LEN_MAX + 1, "user:%08u", a);
            break;
        case 1:
            len = snprintf(p, KEY_LEN_MAX + 1, "session:%016" PRIx64, s);
            break;
        case 2:
            len = snprintf(p, KEY_LEN_MAX + 1, "cart:%u:items:%u", a, (unsigned)(s >> 40) % 100u);
            break;
        default:
            len = snprintf(p, KEY_LEN_MAX + 1, "page:/c/%u/item/%u?v=2",
                           (unsigned)(s >> 32) % 1000u, a % 1000000u);
            break;
        }
        if (len < 0 || len > KEY_LEN_MAX)
            len = KEY_LEN_MAX;
        ks->key[i] = p;
        ks->len[i] = (size_t)len;
        p += len + 1;
    }
}

static void keyset_free(keyset *ks)
{
    free(ks->bytes);
    free(ks->key);
    free(ks->len);
}

static void host_of(char *out, size_t cap, size_t i)
{
    snprintf(out, cap, "10.%u.%u.%u", (unsigned)(i / 65536 + 1), (unsigned)(i / 256 % 256),
             (unsigned)(i % 256));
}

/* A config of servers 0..n-1 (weight 1, port 11211) in `mode`. */
static mcr_config *config_of(const char *name, mcr_mode mode, mcr_hash hash, size_t n)
{
    mcr_config *cfg = mcr_config_new();
    mcr_error err = {0};
    char host[32];
    int rc = cfg ? mcr_config_set_mode(cfg, mode) : MCR_ERR_NOMEM;

    if (rc == MCR_OK)
        rc = mcr_config_set_hash(cfg, hash);
    for (size_t i = 0; i < n && rc == MCR_OK; i++) {
        host_of(host, sizeof host, i);
        rc = mcr_config_add_server(cfg, host, MCR_DEFAULT_PORT, 1, &err);
    }
    if (rc != MCR_OK) {
        fail(name, "config", err.code ? err.message : mcr_strerror(rc));
        mcr_config_free(cfg);
        return NULL;
    }
    return cfg;
}

static mcr_snapshot *snapshot_of(const char *name, const mcr_config *cfg, uint64_t epoch)
{
    mcr_snapshot *s = NULL;
    mcr_error err = {0};
    int rc = mcr_snapshot_new(cfg, epoch, &s, &err);
    if (rc != MCR_OK) {
        fail(name, "mcr_snapshot_new", err.code ? err.message : mcr_strerror(rc));
        return NULL;
    }
    return s;
}

/* One timed publish of `add`, then `del` untimed to get back to where it
 * started. False (and a FAIL line) if either is refused. */
static bool timed_add(const char *name, mcr_router *r, const mcr_changes *add,
                      const mcr_changes *del, double *ns)
{
    mcr_error err = {0};
    uint64_t t0 = bench_now_ns();
    int rc = mcr_router_apply(r, add, 0, &err);
    *ns = (double)(bench_now_ns() - t0);
    if (rc != MCR_OK || mcr_router_apply(r, del, 0, &err) != MCR_OK) {
        fail(name, "mcr_router_apply", err.message);
        return false;
    }
    return true;
}

/* ------------------------------------------------------------ lookups */

static NOINLINE uint64_t loop_bare(const mcr_snapshot *snap, const keyset *ks)
{
    uint64_t sum = 0;
    for (size_t i = 0; i < ks->n; i++)
        sum += mcr_snapshot_locate(snap, ks->key[i], ks->len[i]);
    return sum;
}

static NOINLINE uint64_t loop_router(mcr_router *r, const keyset *ks)
{
    uint64_t sum = 0;
    for (size_t i = 0; i < ks->n; i++) {
        const mcr_snapshot *snap = mcr_router_acquire(r);
        sum += mcr_snapshot_locate(snap, ks->key[i], ks->len[i]);
        mcr_router_release(r, snap);
    }
    return sum;
}

static NOINLINE uint64_t loop_router_batch(mcr_router *r, const keyset *ks)
{
    uint64_t sum = 0;
    for (size_t i = 0; i < ks->n; i += BATCH) {
        size_t m = ks->n - i < BATCH ? ks->n - i : BATCH;
        const mcr_snapshot *snap = mcr_router_acquire(r);
        for (size_t j = 0; j < m; j++)
            sum += mcr_snapshot_locate(snap, ks->key[i + j], ks->len[i + j]);
        mcr_router_release(r, snap);
    }
    return sum;
}

static NOINLINE uint64_t loop_route(mcr_router *r, const keyset *ks)
{
    uint64_t sum = 0;
    mcr_route route;
    for (size_t i = 0; i < ks->n; i++)
        if (mcr_router_locate(r, ks->key[i], ks->len[i], &route) == MCR_OK)
            sum += route.index;
    return sum;
}

/* The one-call lookup, with the epoch an application checks its
 * connection table against. */
static NOINLINE uint64_t loop_index(mcr_router *r, const keyset *ks)
{
    uint64_t sum = 0, epochs = 0;
    for (size_t i = 0; i < ks->n; i++) {
        uint64_t e;
        sum += mcr_router_locate_index(r, ks->key[i], ks->len[i], &e);
        epochs += e;
    }
    g_sink += epochs;
    return sum;
}

enum { VIA_ROUTER, VIA_BATCH, VIA_ROUTE, VIA_INDEX };

static uint64_t run_via(int via, mcr_router *r, const keyset *ks)
{
    switch (via) {
    case VIA_ROUTER:
        return loop_router(r, ks);
    case VIA_BATCH:
        return loop_router_batch(r, ks);
    case VIA_INDEX:
        return loop_index(r, ks);
    default:
        return loop_route(r, ks);
    }
}

static void case_lookup(const char *name, mcr_mode mode, mcr_hash hash, int via, const keyset *ks,
                        int goal_id)
{
    mcr_config *cfg;
    mcr_snapshot *snap = NULL;
    mcr_router *router = NULL;
    double *tm, *tr;
    uint64_t want;
    bool ok = true;

    if (!selected(name))
        return;
    if (goal_id >= 0) {
        goals[goal_id].cases++;
        goals[goal_id].failed = true;
    }
    cfg = config_of(name, mode, hash, LOOKUP_SERVERS);
    snap = cfg ? snapshot_of(name, cfg, 1) : NULL;
    mcr_config_free(cfg);
    if (snap == NULL)
        return;
    if (mcr_router_new(snap, &router, NULL) != MCR_OK) {
        fail(name, "mcr_router_new", NULL);
        mcr_snapshot_unref(snap);
        return;
    }
    want = loop_bare(snap, ks);
    if (run_via(via, router, ks) != want) {
        fail(name, "the router and the bare snapshot disagree", NULL);
        ok = false;
    }
    tm = bench_xmalloc(opt.lookup_reps * sizeof *tm);
    tr = bench_xmalloc(opt.lookup_reps * sizeof *tr);
    for (unsigned i = 0; i < opt.lookup_reps && ok; i++) {
        uint64_t cm = 0, cr = 0, t0;
        for (int side = 0; side < 2; side++) {
            if ((side ^ (int)(i & 1)) == 0) {
                t0 = bench_now_ns();
                cm = run_via(via, router, ks);
                tm[i] = (double)(bench_now_ns() - t0) / (double)ks->n;
            } else {
                t0 = bench_now_ns();
                cr = loop_bare(snap, ks);
                tr[i] = (double)(bench_now_ns() - t0) / (double)ks->n;
            }
        }
        g_sink += cm + cr;
        if (cm != want || cr != want) {
            fail(name, "checksum changed between repetitions", NULL);
            ok = false;
        }
    }
    if (ok)
        report(name, bench_median(tm, opt.lookup_reps), bench_median(tr, opt.lookup_reps), goal_id);
    free(tm);
    free(tr);
    mcr_router_free(router);
    mcr_snapshot_unref(snap);
}

/* ------------------------------------------------------------ publishes */

/* Do two snapshots send every key to the same server id? */
static bool same_placement(const char *name, const mcr_snapshot *a, const mcr_snapshot *b,
                           const keyset *ks)
{
    for (size_t i = 0; i < ks->n; i++) {
        mcr_server_desc da, db;
        mcr_snapshot_server(a, mcr_snapshot_locate(a, ks->key[i], ks->len[i]), &da);
        mcr_snapshot_server(b, mcr_snapshot_locate(b, ks->key[i], ks->len[i]), &db);
        if (strcmp(da.id, db.id) != 0) {
            char msg[200];
            snprintf(msg, sizeof msg, "key \"%.*s\": %.60s incrementally, %.60s from scratch",
                     (int)ks->len[i], (const char *)ks->key[i], da.id, db.id);
            fail(name, "placements differ, case not timed", msg);
            return false;
        }
    }
    return true;
}

static mcr_changes *one_change(const char *host, bool add)
{
    mcr_changes *ch = mcr_changes_new();
    char id[48];
    mcr_server_desc d = {.host = host, .port = MCR_DEFAULT_PORT, .weight = 1,
                         .state = MCR_STATE_ACTIVE};
    int rc;

    if (ch == NULL)
        return NULL;
    snprintf(id, sizeof id, "%s:%d", host, MCR_DEFAULT_PORT);
    rc = add ? mcr_changes_add(ch, &d, NULL) : mcr_changes_remove(ch, id, NULL);
    if (rc != MCR_OK) {
        mcr_changes_free(ch);
        return NULL;
    }
    return ch;
}

/* The mode in which adding a server changes no other server's points: the
 * native stable-weight mode where the library has it, else libmemcached's
 * weighted ketama with equal weights (160 points each whatever the count). */
static mcr_mode incremental_mode(void)
{
    mcr_mode m;
    if (mcr_mode_from_name("stable-ketama", &m) == MCR_OK)
        return m;
    return MCR_MODE_WEIGHTED;
}

/* Adding server BIG to servers 0..BIG-1: incremental against from scratch. */
static void case_add_1000(const keyset *ks)
{
    const char *name = "publish_add_1_to_1000_vs_rebuild";
    mcr_mode mode = incremental_mode();
    mcr_config *cfg_big = NULL, *cfg_full = NULL;
    mcr_snapshot *base = NULL, *inc = NULL, *full = NULL;
    mcr_router *ri = NULL, *rf = NULL;
    mcr_changes *add = NULL, *del = NULL;
    mcr_error err = {0};
    char host[32];
    double *tm = NULL, *tr = NULL;
    unsigned reps = opt.big_reps;
    bool ok = false;

    if (!selected(name))
        return;
    goals[GOAL_ADD_1000].failed = true;
    host_of(host, sizeof host, BIG);
    cfg_big = config_of(name, mode, MCR_HASH_MD5, BIG);
    cfg_full = config_of(name, mode, MCR_HASH_MD5, BIG + 1);
    base = cfg_big ? snapshot_of(name, cfg_big, 1) : NULL;
    add = one_change(host, true);
    del = one_change(host, false);
    if (base == NULL || cfg_full == NULL || add == NULL || del == NULL ||
        mcr_router_new(base, &ri, NULL) != MCR_OK || mcr_router_new(NULL, &rf, NULL) != MCR_OK) {
        fail(name, "setup", NULL);
        goto out;
    }
    /* The check: the incremental result against the rebuilt one. */
    if (mcr_router_apply(ri, add, 0, &err) != MCR_OK) {
        fail(name, "mcr_router_apply", err.message);
        goto out;
    }
    inc = mcr_router_current(ri);
    full = snapshot_of(name, cfg_full, 1);
    if (full == NULL || !same_placement(name, inc, full, ks))
        goto out;
    if (mcr_router_apply(ri, del, 0, &err) != MCR_OK) {
        fail(name, "mcr_router_apply (remove)", err.message);
        goto out;
    }

    tm = bench_xmalloc(reps * sizeof *tm);
    tr = bench_xmalloc(reps * sizeof *tr);
    ok = true;
    for (unsigned i = 0; i < reps && ok; i++) {
        for (int side = 0; side < 2 && ok; side++) {
            if ((side ^ (int)(i & 1)) == 0) {
                ok = timed_add(name, ri, add, del, &tm[i]);
            } else {
                mcr_snapshot *s = NULL;
                uint64_t t0 = bench_now_ns();
                int rc = mcr_snapshot_new(cfg_full, mcr_router_epoch(rf) + 1, &s, &err);
                if (rc == MCR_OK)
                    rc = mcr_router_publish(rf, s, &err);
                tr[i] = (double)(bench_now_ns() - t0);
                mcr_snapshot_unref(s); /* the router's reference keeps it */
                if (rc != MCR_OK) {
                    fail(name, "rebuild", err.message);
                    ok = false;
                }
            }
        }
    }
    if (ok) {
        printf("INFO %s mode=%s servers=%d reps=%u\n", name, mcr_mode_name(mode), BIG, reps);
        report(name, bench_median(tm, reps), bench_median(tr, reps), GOAL_ADD_1000);
    }
out:
    free(tm);
    free(tr);
    mcr_changes_free(add);
    mcr_changes_free(del);
    mcr_snapshot_unref(inc);
    mcr_snapshot_unref(full);
    mcr_snapshot_unref(base);
    mcr_router_free(ri);
    mcr_router_free(rf);
    mcr_config_free(cfg_big);
    mcr_config_free(cfg_full);
}

/* libmemcached with servers 0..n-1, weighted ketama (md5), as an
 * application sets it up. */
static memcached_st *lmc_new(const char *name, size_t n)
{
    memcached_st *memc = memcached_create(NULL);
    memcached_return_t rc = memc ? MEMCACHED_SUCCESS : MEMCACHED_FAILURE;
    char host[32];

    for (size_t i = 0; i < n && rc == MEMCACHED_SUCCESS; i++) {
        host_of(host, sizeof host, i);
        rc = memcached_server_add_with_weight(memc, host, MCR_DEFAULT_PORT, 1);
    }
    if (rc == MEMCACHED_SUCCESS)
        rc = memcached_behavior_set(memc, MEMCACHED_BEHAVIOR_KETAMA_WEIGHTED, 1);
    if (rc != MEMCACHED_SUCCESS) {
        fail(name, "libmemcached setup", memc ? memcached_strerror(memc, rc) : "create");
        memcached_free(memc);
        return NULL;
    }
    return memc;
}

/* Every key to the same host and port in the router and in libmemcached. */
static bool same_as_lmc(const char *name, mcr_router *r, memcached_st *memc, const keyset *ks)
{
    for (size_t i = 0; i < ks->n; i++) {
        mcr_route route;
        uint32_t at = memcached_generate_hash(memc, (const char *)ks->key[i], ks->len[i]);
        const memcached_instance_st *inst = memcached_server_instance_by_position(memc, at);
        if (mcr_router_locate(r, ks->key[i], ks->len[i], &route) != MCR_OK || inst == NULL ||
            strcmp(route.host, memcached_server_name(inst)) != 0 ||
            route.port != (int)memcached_server_port(inst)) {
            char msg[700];
            snprintf(msg, sizeof msg, "key \"%.*s\": mcroute %s:%d, libmemcached %s:%d",
                     (int)ks->len[i], (const char *)ks->key[i], route.host, route.port,
                     inst ? memcached_server_name(inst) : "?",
                     inst ? (int)memcached_server_port(inst) : 0);
            fail(name, "placements differ, case not timed", msg);
            return false;
        }
    }
    return true;
}

static void case_add_100_lmc(const keyset *ks)
{
    const char *name = "publish_add_100th_vs_libmemcached";
    mcr_config *cfg = NULL;
    mcr_snapshot *base = NULL;
    mcr_router *r = NULL;
    mcr_changes *add = NULL, *del = NULL;
    memcached_st *check = NULL;
    mcr_error err = {0};
    char host[32];
    double *tm = NULL, *tr = NULL;
    unsigned reps = opt.small_reps;
    bool ok = false;

    if (!selected(name))
        return;
    goals[GOAL_ADD_100_LMC].failed = true;
    host_of(host, sizeof host, SMALL);
    cfg = config_of(name, MCR_MODE_WEIGHTED, MCR_HASH_MD5, SMALL);
    base = cfg ? snapshot_of(name, cfg, 1) : NULL;
    check = lmc_new(name, SMALL);
    add = one_change(host, true);
    del = one_change(host, false);
    if (base == NULL || check == NULL || add == NULL || del == NULL ||
        mcr_router_new(base, &r, NULL) != MCR_OK) {
        fail(name, "setup", NULL);
        goto out;
    }
    /* The check, after one add on each side. */
    if (memcached_server_add_with_weight(check, host, MCR_DEFAULT_PORT, 1) !=
                             MEMCACHED_SUCCESS ||
        mcr_router_apply(r, add, 0, &err) != MCR_OK) {
        fail(name, "first add", err.code ? err.message : "libmemcached");
        goto out;
    }
    if (!same_as_lmc(name, r, check, ks))
        goto out;
    if (mcr_router_apply(r, del, 0, &err) != MCR_OK) {
        fail(name, "mcr_router_apply (remove)", err.message);
        goto out;
    }

    tm = bench_xmalloc(reps * sizeof *tm);
    tr = bench_xmalloc(reps * sizeof *tr);
    ok = true;
    for (unsigned i = 0; i < reps && ok; i++) {
        for (int side = 0; side < 2 && ok; side++) {
            if ((side ^ (int)(i & 1)) == 0) {
                ok = timed_add(name, r, add, del, &tm[i]);
            } else {
                /* A fresh handle with the 99 servers (untimed), then the
                 * add that rebuilds its continuum. Not memcached_clone():
                 * the clone loses KETAMA_WEIGHTED. */
                memcached_st *memc = lmc_new(name, SMALL);
                memcached_return_t rc = MEMCACHED_FAILURE;
                uint64_t t0 = bench_now_ns();
                if (memc != NULL)
                    rc = memcached_server_add_with_weight(memc, host, MCR_DEFAULT_PORT, 1);
                tr[i] = (double)(bench_now_ns() - t0);
                g_sink += memcached_server_count(memc);
                memcached_free(memc);
                if (rc != MEMCACHED_SUCCESS) {
                    fail(name, "memcached_server_add", NULL);
                    ok = false;
                }
            }
        }
    }
    if (ok) {
        printf("INFO %s mode=weighted servers=%d reps=%u\n", name, SMALL, reps);
        report(name, bench_median(tm, reps), bench_median(tr, reps), GOAL_ADD_100_LMC);
    }
out:
    free(tm);
    free(tr);
    mcr_changes_free(add);
    mcr_changes_free(del);
    mcr_snapshot_unref(base);
    mcr_router_free(r);
    memcached_free(check);
    mcr_config_free(cfg);
}

/* ------------------------------------------------------------ main */

static void usage(FILE *f)
{
    fprintf(f,
            "usage: bench_router [--quick] [--filter SUBSTR]\n"
            "  Lookups through an mcr_router against mcr_snapshot_locate() on the bare\n"
            "  snapshot; publishing one added server (incremental) against rebuilding the\n"
            "  snapshot, and against libmemcached's memcached_server_add().\n"
            "  --quick          few repetitions and keys: a smoke run of a few seconds\n"
            "  --filter SUBSTR  only the cases whose name contains SUBSTR\n"
            "Output: RESULT <case> mcroute_ns=<x> reference_ns=<y> speedup=<y/x> (ns per\n"
            "lookup or per publish, medians; for lookups 'mcroute' is the router and\n"
            "'reference' the bare snapshot), INFO and GOAL lines. Exit status 1 when a\n"
            "case fails its placement check, never because of speed.\n");
}

static void parse_args(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--quick") == 0) {
            opt.quick = true;
        } else if (strcmp(argv[i], "--filter") == 0 && i + 1 < argc) {
            opt.filter = argv[++i];
        } else if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            usage(stdout);
            exit(0);
        } else {
            fprintf(stderr, "bench_router: unknown argument '%s'\n", argv[i]);
            usage(stderr);
            exit(2);
        }
    }
    opt.nkeys = opt.quick ? KEYS_QUICK : KEYS_FULL;
    opt.lookup_reps = opt.quick ? 3 : 41;
    opt.big_reps = opt.quick ? 3 : 31;
    opt.small_reps = opt.quick ? 5 : 201;
}

int main(int argc, char **argv)
{
    keyset ks;

    parse_args(argc, argv);
    keyset_init(&ks, opt.nkeys);
    printf("INFO setup keys=%zu lookup_servers=%d lookup_reps=%u build_type=%s mcroute=%s "
           "libmemcached=%s\n",
           ks.n, LOOKUP_SERVERS, opt.lookup_reps, MCR_BENCH_BUILD_TYPE, mcr_version_string(),
           memcached_lib_version());
    fflush(stdout);

    case_lookup("router_lookup_index_ketama_md5", MCR_MODE_KETAMA, MCR_HASH_MD5, VIA_INDEX, &ks,
                GOAL_LOOKUP);
    case_lookup("router_lookup_index_consistent_fnv1a_32", MCR_MODE_CONSISTENT,
                MCR_HASH_FNV1A_32, VIA_INDEX, &ks, GOAL_LOOKUP);
    /* acquire, mcr_snapshot_locate(), release: the section of a caller
     * that looks several keys up, or needs more than the index. */
    case_lookup("router_lookup_ketama_md5", MCR_MODE_KETAMA, MCR_HASH_MD5, VIA_ROUTER, &ks, -1);
    case_lookup("router_batch_ketama_md5", MCR_MODE_KETAMA, MCR_HASH_MD5, VIA_BATCH, &ks,
                GOAL_BATCH);
    /* A key hash several times cheaper than MD5: the same fixed cost per
     * section weighs more. */
    case_lookup("router_lookup_consistent_fnv1a_32", MCR_MODE_CONSISTENT, MCR_HASH_FNV1A_32,
                VIA_ROUTER, &ks, -1);
    case_lookup("router_batch_consistent_fnv1a_32", MCR_MODE_CONSISTENT, MCR_HASH_FNV1A_32,
                VIA_BATCH, &ks, -1);
    /* mcr_router_locate(): a section and a copy of the host per key. */
    case_lookup("router_locate_route_ketama_md5", MCR_MODE_KETAMA, MCR_HASH_MD5, VIA_ROUTE, &ks,
                -1);
    case_add_1000(&ks);
    case_add_100_lmc(&ks);

    for (int g = 0; g < GOAL_COUNT; g++) {
        const goal *gl = &goals[g];
        if (gl->failed)
            printf("GOAL %s target=%.3fx measured=none MISS (the case failed)\n", gl->name,
                   gl->target);
        else if (gl->measured >= 0 && gl->reported > 1)
            printf("GOAL %s target=%.3fx measured=%.3fx %s (the worse of %u cases: %s)\n",
                   gl->name, gl->target, gl->measured,
                   gl->measured >= gl->target ? "PASS" : "MISS", gl->reported, gl->worst);
        else if (gl->measured >= 0)
            printf("GOAL %s target=%.3fx measured=%.3fx %s\n", gl->name, gl->target,
                   gl->measured, gl->measured >= gl->target ? "PASS" : "MISS");
    }
    if (!any_selected) {
        printf("FAIL no case matches --filter '%s'\n", opt.filter);
        failures++;
    }
    if (failures)
        printf("FAILED %d case(s), see the FAIL lines\n", failures);
    fflush(stdout);
    keyset_free(&ks);
    return failures ? 1 : 0;
}
