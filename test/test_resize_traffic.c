/* SPDX-License-Identifier: BSD-3-Clause */
/* test_resize_traffic.c: Check suite of a whole resize under traffic: pools on both sides of the switch, the copy running meanwhile; no read older than an acknowledged write, and the hit ratio of a run without the change. */
/*
 * Five memcached servers; snapshot A holds four (epoch 1), B all five
 * (epoch 2). Three pools, each on a router of its own (three processes of
 * a fleet, in one thread), serve a read-through cache of KEYS keys: a get,
 * and on a miss a set; one op in ten is a set. Every value carries a
 * sequence number, and a read must return the last value acknowledged for
 * its key (ops on one key never overlap: a batch holds distinct keys).
 *
 * Baseline: the traffic without any change gives the hit ratio H0. Then
 * the resize: every router gets the transition (A, B) (copying), the copy
 * (mcr_migrate_run(), on a thread of its own) runs under the traffic, the
 * routers switch to B one after the other (while some are still on A),
 * the traffic goes on, and the transition ends. The hit ratio during and
 * after the resize must be at least 99.9% of H0, and no read may return
 * an older value.
 */
#include <event2/event.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mcroute.h"
#include "mcroute_migrate.h"
#include "mcroute_pool.h"
#include "mcroute_router.h"
#include "mcroute_snapshot.h"
#include "pool_env.h"
#include "realserver.h"
#include "testutil.h"

#define KEYS 3000
#define BATCH 64
#define NPOOLS 3

typedef struct traffic {
    env *e;
    mcr_pool *pools[NPOOLS];
    tu_rng rng;
    long seq;
    long last[KEYS];      /* the value acknowledged last, -1 none */
    long gets, hits, sets, stale, errors, fallback_hits;
    char first_stale[256];
    int outstanding;
} traffic;

typedef struct op {
    traffic *t;
    mcr_pool *pool;
    int key;
    long value;           /* the set's sequence number */
    int is_set;
    char kbuf[32];
    char vbuf[64];
} op;

static void op_set(op *o);

static void set_cb(const mcr_result *res, void *arg)
{
    op *o = arg;
    traffic *t = o->t;
    if (res->status == MCR_OK && res->reply == MCR_REPLY_STORED)
        t->last[o->key] = o->value;
    else
        t->errors++;
    t->outstanding--;
    free(o);
}

static void get_cb(const mcr_result *res, void *arg)
{
    op *o = arg;
    traffic *t = o->t;
    t->gets++;
    if (res->status != MCR_OK) {
        t->errors++;
    } else if (res->reply == MCR_REPLY_HIT) {
        t->hits++;
        t->fallback_hits += res->via_previous;
        char want[64];
        snprintf(want, sizeof(want), "v%ld", t->last[o->key]);
        if (t->last[o->key] < 0 || res->value_len != strlen(want) ||
            memcmp(res->value, want, res->value_len) != 0 || res->flags != (uint32_t)o->key) {
            if (t->stale++ == 0)
                snprintf(t->first_stale, sizeof(t->first_stale),
                         "key %s from %s (via previous %d): \"%.*s\" flags %u, want \"%s\"",
                         o->kbuf, res->server, res->via_previous,
                         (int)(res->value_len > 40 ? 40 : res->value_len), res->value,
                         res->flags, want);
        }
    } else {
        /* read-through: a miss is filled */
        op_set(o);
        return;
    }
    t->outstanding--;
    free(o);
}

static void op_set(op *o)
{
    traffic *t = o->t;
    o->is_set = 1;
    o->value = ++t->seq;
    snprintf(o->vbuf, sizeof(o->vbuf), "v%ld", o->value);
    mcr_request q;
    memset(&q, 0, sizeof(q));
    q.op = MCR_OP_SET;
    q.key = o->kbuf;
    q.key_len = strlen(o->kbuf);
    q.value = o->vbuf;
    q.value_len = strlen(o->vbuf);
    q.flags = (uint32_t)o->key;
    q.exptime = 3600;
    t->sets++;
    mcr_error err = {0};
    int rc = mcr_pool_submit(o->pool, &q, set_cb, o, &err);
    ck_assert_msg(rc == MCR_OK, "set: %s", err.message);
}

static int c_batch(env *e, void *arg)
{
    (void)e;
    return ((traffic *)arg)->outstanding == 0;
}

/* One batch of BATCH ops on distinct keys, spread over the pools. */
static void batch(traffic *t)
{
    int used[BATCH];
    for (int i = 0; i < BATCH; i++) {
        int k;
        int again;
        do {
            k = (int)tu_below(&t->rng, KEYS);
            again = 0;
            for (int j = 0; j < i; j++)
                again |= used[j] == k;
        } while (again);
        used[i] = k;
        op *o = calloc(1, sizeof(*o));
        ck_assert_ptr_nonnull(o);
        o->t = t;
        o->pool = t->pools[tu_below(&t->rng, NPOOLS)];
        o->key = k;
        snprintf(o->kbuf, sizeof(o->kbuf), "rt:%d", k);
        t->outstanding++;
        if (tu_below(&t->rng, 10) == 0) {
            op_set(o);
        } else {
            mcr_request q;
            memset(&q, 0, sizeof(q));
            q.op = MCR_OP_GET;
            q.key = o->kbuf;
            q.key_len = strlen(o->kbuf);
            mcr_error err = {0};
            int rc = mcr_pool_submit(o->pool, &q, get_cb, o, &err);
            ck_assert_msg(rc == MCR_OK, "get: %s", err.message);
        }
    }
    ck_assert_msg(run_until(t->e, c_batch, t, 60000), "%d ops not answered", t->outstanding);
}

static void counters_reset(traffic *t)
{
    t->gets = t->hits = t->sets = t->errors = t->fallback_hits = 0;
}

/* The copy, on a thread of its own. */
typedef struct copier {
    const mcr_snapshot *from, *to;
    atomic_int done;
    int rc;
    mcr_migrate_report rep;
    mcr_error err;
} copier;

static void *copier_main(void *arg)
{
    copier *c = arg;
    mcr_migrate_options o;
    mcr_migrate_options_init(&o);
    o.rate = 3000; /* slow enough that the traffic runs during the copy */
    o.timeout_ms = (unsigned)TMS(20000);
    c->rc = mcr_migrate_run(c->from, c->to, &o, &c->rep, &c->err);
    atomic_store(&c->done, 1);
    return NULL;
}


START_TEST(test_resize_under_traffic)
{
    env e;
    traffic *t = calloc(1, sizeof(*t));
    ck_assert_ptr_nonnull(t);
    env_init_k(&e, 5, 4, NULL);
    mcr_snapshot *a = mcr_router_current(e.router);
    mcr_snapshot *b = env_snapshot_at(&e, 5, NULL, 2);
    mcr_router *routers[NPOOLS] = {e.router, NULL, NULL};
    mcr_pool_options o;
    opts_init(&o);
    t->e = &e;
    t->pools[0] = e.pool;
    for (int i = 1; i < NPOOLS; i++) {
        ck_assert_int_eq(mcr_router_new(a, &routers[i], NULL), MCR_OK);
        o.protocol = i == 2 ? MCR_PROTO_META : MCR_PROTO_TEXT;
        ck_assert_int_eq(mcr_pool_new(e.base, routers[i], &o, &t->pools[i], NULL), MCR_OK);
    }
    tu_rng_init(&t->rng, 2024);
    for (int k = 0; k < KEYS; k++)
        t->last[k] = -1;
    /* warm the cache: every key read (and filled) once */
    while (t->sets < KEYS * 95 / 100)
        batch(t);
    for (int k = 0; k < KEYS; k += BATCH) {
        /* the keys the random batches missed */
        for (int j = k; j < k + BATCH && j < KEYS; j++)
            if (t->last[j] < 0) {
                op *op1 = calloc(1, sizeof(*op1));
                op1->t = t;
                op1->pool = e.pool;
                op1->key = j;
                snprintf(op1->kbuf, sizeof(op1->kbuf), "rt:%d", j);
                t->outstanding++;
                op_set(op1);
            }
        ck_assert(run_until(&e, c_batch, t, 60000));
    }

    /* baseline: no change */
    enum { PHASE_BATCHES = 60 };
    counters_reset(t);
    for (int i = 0; i < PHASE_BATCHES; i++)
        batch(t);
    double h0 = (double)t->hits / (double)t->gets;
    ck_assert_int_eq(t->stale, 0);
    ck_assert_int_eq(t->errors, 0);

    /* the resize: copying everywhere, the copy under traffic */
    counters_reset(t);
    for (int i = 0; i < NPOOLS; i++)
        ck_assert_int_eq(mcr_router_set_migration(routers[i], a, b, 0, 0, NULL),
                         MCR_OK);
    copier cp;
    memset(&cp, 0, sizeof(cp));
    cp.from = a;
    cp.to = b;
    atomic_init(&cp.done, 0);
    pthread_t th;
    ck_assert_int_eq(pthread_create(&th, NULL, copier_main, &cp), 0);
    int during_copy = 0;
    while (!atomic_load(&cp.done)) {
        batch(t);
        during_copy++;
    }
    pthread_join(th, NULL);
    ck_assert_msg(cp.rc == MCR_OK, "migrate: %s", cp.err.message);
    ck_assert_uint_gt(cp.rep.moved, KEYS / 10);
    ck_assert_uint_eq(cp.rep.failed, 0);
    /* the switch, one process after the other, traffic in between */
    for (int i = 0; i < NPOOLS; i++) {
        ck_assert_int_eq(mcr_router_publish(routers[i], b, NULL), MCR_OK);
        for (int j = 0; j < PHASE_BATCHES / NPOOLS; j++)
            batch(t);
    }
    double h_during = (double)t->hits / (double)t->gets;
    long stale_during = t->stale;
    /* the end of the transition: reads only at the new owners */
    for (int i = 0; i < NPOOLS; i++)
        ck_assert_int_eq(mcr_router_clear_migration(routers[i]), MCR_OK);
    counters_reset(t);
    for (int i = 0; i < PHASE_BATCHES; i++)
        batch(t);
    double h_after = (double)t->hits / (double)t->gets;
    fprintf(stderr,
            "resize under traffic: baseline hit ratio %.5f, during %.5f (%d batches during "
            "the copy; %llu moved, %llu copied, %llu present), after %.5f\n",
            h0, h_during, during_copy, (unsigned long long)cp.rep.moved,
            (unsigned long long)cp.rep.copied, (unsigned long long)cp.rep.skipped_present,
            h_after);
    ck_assert_msg(t->stale == 0 && stale_during == 0,
                  "%ld reads older than the last acknowledged write; first: %s", t->stale,
                  t->first_stale);
    ck_assert_int_eq(t->errors, 0);
    ck_assert_msg(h_during >= 0.999 * h0, "hit ratio during the resize %.5f, baseline %.5f",
                  h_during, h0);
    ck_assert_msg(h_after >= 0.999 * h0, "hit ratio after the resize %.5f, baseline %.5f",
                  h_after, h0);
    mcr_migrate_report_clear(&cp.rep);
    for (int i = 1; i < NPOOLS; i++) {
        mcr_pool_free(t->pools[i]);
        mcr_router_free(routers[i]);
    }
    mcr_snapshot_unref(a);
    mcr_snapshot_unref(b);
    env_free(&e);
    free(t);
}
END_TEST

/* The control: the same resize without the transition and the copy loses
 * about a fifth of the hits (so the test above measures something). */
START_TEST(test_resize_without_migration_misses)
{
    env e;
    traffic *t = calloc(1, sizeof(*t));
    ck_assert_ptr_nonnull(t);
    env_init_k(&e, 5, 4, NULL);
    mcr_snapshot *b = env_snapshot_at(&e, 5, NULL, 2);
    t->e = &e;
    for (int i = 0; i < NPOOLS; i++)
        t->pools[i] = e.pool;
    tu_rng_init(&t->rng, 2025);
    for (int k = 0; k < KEYS; k++)
        t->last[k] = -1;
    for (int k = 0; k < KEYS; k += BATCH) {
        for (int j = k; j < k + BATCH && j < KEYS; j++) {
            op *op1 = calloc(1, sizeof(*op1));
            op1->t = t;
            op1->pool = e.pool;
            op1->key = j;
            snprintf(op1->kbuf, sizeof(op1->kbuf), "rt:%d", j);
            t->outstanding++;
            op_set(op1);
        }
        ck_assert(run_until(&e, c_batch, t, 60000));
    }
    ck_assert_int_eq(mcr_router_publish(e.router, b, NULL), MCR_OK);
    counters_reset(t);
    for (int i = 0; i < 20; i++)
        batch(t);
    double h = (double)t->hits / (double)t->gets;
    ck_assert_msg(h < 0.95, "hit ratio %.4f right after a resize without migration", h);
    mcr_snapshot_unref(b);
    env_free(&e);
    free(t);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("resize_traffic");
    PE_ADD(s, resize_under_traffic);
    PE_ADD(s, resize_without_migration_misses);
    return s;
}

int main(void)
{
    return tu_run(suite());
}
