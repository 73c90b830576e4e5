/* SPDX-License-Identifier: BSD-3-Clause */
/* test_pool_transition.c: Check suite of a router's transitions and the pool reading and writing through them, against real memcached servers. */
/*
 * The environment and the time rules are pool_env.h's. A resize from 4
 * servers (snapshot A, epoch 1) to 5 (B, epoch 2): the keys B moves are
 * read through the transition (a miss at the new owner read at the old
 * one, warmed), written to both owners, and never read older than the
 * last acknowledged write, by pools on either side of the switch.
 */
#include <event2/event.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "mcroute.h"
#include "mcroute_pool.h"
#include "mcroute_router.h"
#include "mcroute_snapshot.h"
#include "pool_env.h"
#include "realserver.h"
#include "testutil.h"

#define TX_KEYS 1000
/* Seconds a TTL may have run down between a set and a later read: the
 * test's run time, with the time scale. */
#define TTL_SLACK (TMS(120000) / 1000)


/* What one callback said. */
typedef struct cap {
    int calls;
    int status;
    mcr_reply reply;
    char value[256];
    size_t value_len;
    uint32_t flags;
    int64_t ttl;
    int via_previous;
    char server[64];
} cap;

static void cap_cb(const mcr_result *res, void *arg)
{
    cap *c = arg;
    c->calls++;
    c->status = res->status;
    c->reply = res->reply;
    c->value_len = res->value_len < sizeof(c->value) - 1 ? res->value_len : sizeof(c->value) - 1;
    if (res->value != NULL)
        memcpy(c->value, res->value, c->value_len);
    c->value[res->value != NULL ? c->value_len : 0] = '\0';
    c->flags = res->flags;
    c->ttl = res->ttl;
    c->via_previous = res->via_previous;
    snprintf(c->server, sizeof(c->server), "%s", res->server ? res->server : "");
}

static int c_cap(env *e, void *arg)
{
    (void)e;
    return ((cap *)arg)->calls > 0;
}

/* One request on pool p, waited for. */
static cap run1(env *e, mcr_pool *p, mcr_request q)
{
    cap c;
    mcr_error err = {0};
    memset(&c, 0, sizeof(c));
    int rc = mcr_pool_submit(p, &q, cap_cb, &c, &err);
    ck_assert_msg(rc == MCR_OK, "submit %s: %s", mcr_op_name(q.op), err.message);
    ck_assert_int_eq(c.calls, 0); /* never from inside the call */
    ck_assert_msg(run_until(e, c_cap, &c, 20000), "%s not answered", mcr_op_name(q.op));
    ck_assert_int_eq(c.calls, 1);
    return c;
}

static mcr_request req(mcr_op op, const char *key, const char *value, uint32_t flags,
                       int64_t exptime)
{
    mcr_request q;
    memset(&q, 0, sizeof(q));
    q.op = op;
    q.key = key;
    q.key_len = strlen(key);
    q.value = value;
    q.value_len = value ? strlen(value) : 0;
    q.flags = flags;
    q.exptime = exptime;
    return q;
}

/* The id of key's owner in snapshot s. */
static const char *owner_in(const mcr_snapshot *s, const char *key)
{
    mcr_server_desc d;
    mcr_snapshot_server(s, mcr_snapshot_locate(s, key, strlen(key)), &d);
    return d.id;
}

/* What server `id` (an env server) holds for key: 1 and val, 0 miss. */
static int raw_get(env *e, const char *id, const char *key, char *val, size_t cap_)
{
    int i = env_index(e, id);
    ck_assert_int_ge(i, 0);
    int r = rs_mc_get(raw_fd(e, i), key, val, cap_, IO_MS);
    ck_assert_int_ge(r, 0);
    return r;
}

/* Delete key at server `id` (an env server), which must hold it. */
static void raw_delete(env *e, const char *id, const char *key)
{
    char line[300], reply[64];
    snprintf(line, sizeof(line), "delete %s", key);
    ck_assert_int_eq(rs_mc_command(raw_fd(e, env_index(e, id)), line, reply, sizeof(reply), IO_MS),
                     0);
    ck_assert_str_eq(reply, "DELETED");
}

/* ================================================================== router API */

START_TEST(test_router_api)
{
    env e;
    memset(&e, 0, sizeof(e));
    e.n = 0;
    /* snapshots need servers' addresses only: no process */
    mcr_config *cfg = mcr_config_new();
    mcr_snapshot *a = NULL, *b = NULL, *b1 = NULL;
    mcr_error err = {0};
    ck_assert_int_eq(mcr_config_add_server(cfg, "127.0.0.1", 11211, 1, &err), MCR_OK);
    ck_assert_int_eq(mcr_snapshot_new(cfg, 1, &a, &err), MCR_OK);
    ck_assert_int_eq(mcr_snapshot_new(cfg, 1, &b1, &err), MCR_OK);
    ck_assert_int_eq(mcr_config_add_server(cfg, "127.0.0.2", 11211, 1, &err), MCR_OK);
    ck_assert_int_eq(mcr_snapshot_new(cfg, 2, &b, &err), MCR_OK);
    mcr_config_free(cfg);
    mcr_router *r = NULL;
    ck_assert_int_eq(mcr_router_new(a, &r, NULL), MCR_OK);
    mcr_router_migration t;
    ck_assert_int_eq(mcr_router_get_migration(r, &t), MCR_ERR_EMPTY);
    ck_assert_ptr_null(t.from);
    ck_assert_int_eq(mcr_router_clear_migration(r), MCR_ERR_EMPTY);
    /* refused: the same epoch, unknown flags, NULL */
    ck_assert_int_eq(mcr_router_set_migration(r, a, b1, 0, 0, &err), MCR_ERR_INVALID);
    ck_assert_msg(strstr(err.message, "higher epoch") != NULL, "%s", err.message);
    ck_assert_int_eq(mcr_router_set_migration(r, a, b, 0, 0x80, &err), MCR_ERR_INVALID);
    ck_assert_int_eq(mcr_router_set_migration(r, NULL, b, 0, 0, &err), MCR_ERR_INVALID);
    ck_assert_int_eq(mcr_router_set_migration(NULL, a, b, 0, 0, &err), MCR_ERR_INVALID);
    ck_assert_int_eq(mcr_router_get_migration(r, NULL), MCR_ERR_INVALID);

    uint64_t g0 = mcr_router_generation(r);
    ck_assert_int_eq(mcr_router_set_migration(r, a, b, 0, 1u, &err), MCR_ERR_INVALID); /* was WARM */
    ck_assert_int_eq(mcr_router_set_migration(r, a, b, 0, 0, &err), MCR_OK);
    ck_assert_uint_gt(mcr_router_generation(r), g0);
    ck_assert_uint_eq(mcr_router_epoch(r), 1); /* the current snapshot is unchanged */
    ck_assert_int_eq(mcr_router_get_migration(r, &t), MCR_OK);
    ck_assert_ptr_eq(t.from, a);
    ck_assert_ptr_eq(t.to, b);
    ck_assert_uint_eq(t.flags, 0);
    ck_assert_uint_eq(t.remaining_ms, 0);
    uint64_t serial = t.serial;
    ck_assert_int_eq(mcr_migration_phase_at(&t, 0), MCR_MIGRATION_NONE);
    ck_assert_int_eq(mcr_migration_phase_at(&t, 1), MCR_MIGRATION_COPYING);
    ck_assert_int_eq(mcr_migration_phase_at(&t, 2), MCR_MIGRATION_SWITCHED);
    ck_assert_int_eq(mcr_migration_phase_at(&t, 9), MCR_MIGRATION_SWITCHED);
    ck_assert_int_eq(mcr_migration_phase_at(NULL, 1), MCR_MIGRATION_NONE);
    ck_assert_str_eq(mcr_migration_phase_name(MCR_MIGRATION_COPYING), "copying");
    ck_assert_str_eq(mcr_migration_phase_name(MCR_MIGRATION_SWITCHED), "switched");
    ck_assert_str_eq(mcr_migration_phase_name(MCR_MIGRATION_NONE), "none");
    ck_assert_str_eq(mcr_migration_phase_name(MCR_MIGRATION_CLOSING), "closing");
    {
        mcr_router_migration tc = t;
        tc.flags = MCR_MIGRATION_FLAG_CLOSING;
        ck_assert_int_eq(mcr_migration_phase_at(&tc, 0), MCR_MIGRATION_NONE);
        ck_assert_int_eq(mcr_migration_phase_at(&tc, 1), MCR_MIGRATION_COPYING);
        ck_assert_int_eq(mcr_migration_phase_at(&tc, 2), MCR_MIGRATION_CLOSING);
        ck_assert_int_eq(mcr_migration_phase_at(&tc, 9), MCR_MIGRATION_CLOSING);
    }
    ck_assert_str_eq(mcr_migration_phase_name(MCR_MIGRATION_ABORTED), "aborted");
    ck_assert_str_eq(mcr_migration_phase_name((mcr_migration_phase)8), "unknown");
    mcr_router_migration_clear(&t);
    mcr_router_migration_clear(NULL);

    /* a grace period ends it by itself; another set replaces it */
    ck_assert_int_eq(mcr_router_set_migration(r, a, b, (uint64_t)TMS(200), 0, &err), MCR_OK);
    ck_assert_int_eq(mcr_router_get_migration(r, &t), MCR_OK);
    ck_assert_uint_ne(t.serial, serial);
    ck_assert_uint_gt(t.remaining_ms, 0);
    ck_assert_uint_le(t.remaining_ms, (uint64_t)TMS(200));
    mcr_router_migration_clear(&t);
    long long until = mcr_test_now_ms() + TMS(20000);
    g0 = mcr_router_generation(r);
    while (mcr_router_get_migration(r, &t) == MCR_OK && mcr_test_now_ms() < until) {
        mcr_router_migration_clear(&t);
        sleep_ms(10);
    }
    ck_assert_int_eq(mcr_router_get_migration(r, &t), MCR_ERR_EMPTY);
    ck_assert_uint_gt(mcr_router_generation(r), g0); /* pools notice the end */
    ck_assert_int_eq(mcr_router_set_migration(r, a, b, 0, 0, &err), MCR_OK);
    ck_assert_int_eq(mcr_router_clear_migration(r), MCR_OK);
    ck_assert_int_eq(mcr_router_clear_migration(r), MCR_ERR_EMPTY);
    /* freeing a router with a transition drops its references (valgrind) */
    ck_assert_int_eq(mcr_router_set_migration(r, a, b, 0, 0, &err), MCR_OK);
    mcr_router_free(r);
    mcr_snapshot_unref(a);
    mcr_snapshot_unref(b);
    mcr_snapshot_unref(b1);
}
END_TEST


/* Readers take the transition (counted references) while a writer sets
 * and ends it: every reader sees a whole pair or none (TSan and valgrind
 * runs check the references and the mutex). */
typedef struct tx_reader {
    mcr_router *r;
    const mcr_snapshot *a, *b;
    atomic_int *stop;
    atomic_long seen;
    long bad;
} tx_reader;

static void *reader_main(void *arg)
{
    tx_reader *t = arg;
    while (!atomic_load(t->stop)) {
        mcr_router_migration tr;
        if (mcr_router_get_migration(t->r, &tr) == MCR_OK) {
            atomic_fetch_add(&t->seen, 1);
            if (tr.from != t->a || tr.to != t->b ||
                mcr_migration_phase_at(&tr, mcr_router_epoch(t->r)) != MCR_MIGRATION_COPYING)
                t->bad++;
            mcr_router_migration_clear(&tr);
        }
    }
    return NULL;
}

START_TEST(test_router_threads)
{
    mcr_config *cfg = mcr_config_new();
    mcr_snapshot *a = NULL, *b = NULL;
    ck_assert_int_eq(mcr_config_add_server(cfg, "127.0.0.1", 11211, 1, NULL), MCR_OK);
    ck_assert_int_eq(mcr_snapshot_new(cfg, 1, &a, NULL), MCR_OK);
    ck_assert_int_eq(mcr_config_add_server(cfg, "127.0.0.2", 11211, 1, NULL), MCR_OK);
    ck_assert_int_eq(mcr_snapshot_new(cfg, 2, &b, NULL), MCR_OK);
    mcr_config_free(cfg);
    mcr_router *r = NULL;
    ck_assert_int_eq(mcr_router_new(a, &r, NULL), MCR_OK);
    atomic_int stop;
    atomic_init(&stop, 0);
    tx_reader rd[3];
    pthread_t th[3];
    for (int i = 0; i < 3; i++) {
        rd[i].r = r;
        rd[i].a = a;
        rd[i].b = b;
        rd[i].stop = &stop;
        atomic_init(&rd[i].seen, 0);
        rd[i].bad = 0;
        ck_assert_int_eq(pthread_create(&th[i], NULL, reader_main, &rd[i]), 0);
    }
    for (int i = 0; i < 3000; i++) {
        ck_assert_int_eq(mcr_router_set_migration(r, a, b, 0, 0, NULL), MCR_OK);
        if (i % 2)
            ck_assert_int_eq(mcr_router_clear_migration(r), MCR_OK);
    }
    /* the pair left in force until every reader has taken it at least once */
    ck_assert_int_eq(mcr_router_set_migration(r, a, b, 0, 0, NULL), MCR_OK);
    long long until = mcr_test_now_ms() + TMS(20000);
    for (int i = 0; i < 3; i++)
        while (atomic_load(&rd[i].seen) == 0 && mcr_test_now_ms() < until)
            sleep_ms(1);
    atomic_store(&stop, 1);
    long seen = 0;
    for (int i = 0; i < 3; i++) {
        pthread_join(th[i], NULL);
        ck_assert_int_eq(rd[i].bad, 0);
        ck_assert_int_gt(atomic_load(&rd[i].seen), 0);
        seen += atomic_load(&rd[i].seen);
    }
    ck_assert_int_gt(seen + 1, 0);
    mcr_router_free(r);
    mcr_snapshot_unref(a);
    mcr_snapshot_unref(b);
}
END_TEST

/* ================================================================== reads */

/* Keys written on 4 servers, the router switched to 5 with the transition:
 * every key is a hit; the moved ones come from their old owner (via
 * previous), are warmed at the new one with their flags and TTL, and the
 * next read finds them there. _i: the protocol (fallbacks are meta in
 * both). */
START_TEST(test_fallback_reads)
{
    env e;
    mcr_pool_options o;
    char key[32], val[64], got[256];
    opts_init(&o);
    o.protocol = _i ? MCR_PROTO_META : MCR_PROTO_TEXT;
    env_init_k(&e, 5, 4, &o);
    mcr_snapshot *a = mcr_router_current(e.router);
    mcr_snapshot *b = env_snapshot_at(&e, 5, NULL, 2);
    for (int k = 0; k < TX_KEYS; k++) {
        snprintf(key, sizeof(key), "tx:%d", k);
        snprintf(val, sizeof(val), "v%d", k);
        cap c = run1(&e, e.pool, req(MCR_OP_SET, key, val, (uint32_t)k, k % 2 ? 3000 : 0));
        ck_assert_int_eq(c.reply, MCR_REPLY_STORED);
    }
    ck_assert_int_eq(mcr_router_set_migration(e.router, a, b, 0, 0, NULL),
                     MCR_OK);
    ck_assert_int_eq(mcr_router_publish(e.router, b, NULL), MCR_OK);
    int moved = 0;
    for (int pass = 0; pass < 2; pass++) {
        for (int k = 0; k < TX_KEYS; k++) {
            snprintf(key, sizeof(key), "tx:%d", k);
            snprintf(val, sizeof(val), "v%d", k);
            int mv = strcmp(owner_in(a, key), owner_in(b, key)) != 0;
            cap c = run1(&e, e.pool, req(MCR_OP_GET, key, NULL, 0, 0));
            ck_assert_msg(c.status == MCR_OK && c.reply == MCR_REPLY_HIT,
                          "pass %d: %s: status %d reply %s", pass, key, c.status,
                          mcr_reply_name(c.reply));
            ck_assert_str_eq(c.value, val);
            ck_assert_uint_eq(c.flags, (uint32_t)k);
            /* nothing read at the old owner is written to the new one:
             * the second pass reads there again */
            ck_assert_int_eq(c.via_previous, mv);
            ck_assert_str_eq(c.server, mv ? owner_in(a, key) : owner_in(b, key));
            if (mv) {
                moved += pass == 0;
                if (k % 2) /* the seconds since the set, on a slow machine too */
                    ck_assert_msg(c.ttl > 3000 - TTL_SLACK && c.ttl <= 3000, "%s ttl %lld", key,
                                  (long long)c.ttl);
                else
                    ck_assert_int_eq(c.ttl, -1);
            }
        }
        WAIT_IDLE(&e, 20000);
    }
    ck_assert_int_gt(moved, TX_KEYS / 10);
    /* the warmed items carry the TTL: a meta read at the new owner */
    mcr_router *rb = NULL;
    mcr_pool *pb = NULL;
    mcr_pool_options om;
    opts_init(&om);
    om.protocol = MCR_PROTO_META;
    ck_assert_int_eq(mcr_router_new(b, &rb, NULL), MCR_OK);
    ck_assert_int_eq(mcr_pool_new(e.base, rb, &om, &pb, NULL), MCR_OK);
    uint64_t fb_hits = 0;
    for (int i = 0; i < 5; i++) {
        mcr_server_stats st;
        ck_assert_int_eq(stats_of(e.pool, e.id[i], &st), 0);
        fb_hits += st.fallback_hits;
    }
    ck_assert_uint_eq(fb_hits, 2 * (uint64_t)moved);
    /* the new owners hold none of the moved keys */
    for (int k = 0; k < TX_KEYS; k += 7) {
        snprintf(key, sizeof(key), "tx:%d", k);
        cap c = run1(&e, pb, req(MCR_OP_GET, key, NULL, 0, 0));
        int mv = strcmp(owner_in(a, key), owner_in(b, key)) != 0;
        ck_assert_int_eq(c.reply, mv ? MCR_REPLY_MISS : MCR_REPLY_HIT);
    }
    (void)got;
    mcr_pool_free(pb);
    mcr_router_free(rb);
    mcr_snapshot_unref(a);
    mcr_snapshot_unref(b);
    tally_ok(&e);
    env_free(&e);
}
END_TEST

/* Nothing read at the old owner is written: the second read is a
 * fallback again. After the grace period the fallback ends: a moved key
 * never copied is a miss. A multi-get falls back key by key. */
START_TEST(test_cold_grace_multiget)
{
    env e;
    char key[32], val[64];
    env_init_k(&e, 5, 4, NULL);
    mcr_snapshot *a = mcr_router_current(e.router);
    mcr_snapshot *b = env_snapshot_at(&e, 5, NULL, 2);
    const char *moved_key = NULL;
    static char mk[32];
    for (int k = 0; k < 200; k++) {
        snprintf(key, sizeof(key), "cg:%d", k);
        snprintf(val, sizeof(val), "v%d", k);
        run1(&e, e.pool, req(MCR_OP_SET, key, val, 0, 0));
        if (moved_key == NULL && strcmp(owner_in(a, key), owner_in(b, key)) != 0) {
            snprintf(mk, sizeof(mk), "%s", key);
            moved_key = mk;
        }
    }
    ck_assert_ptr_nonnull(moved_key);
    ck_assert_int_eq(mcr_router_set_migration(e.router, a, b, 0, 0, NULL), MCR_OK);
    ck_assert_int_eq(mcr_router_publish(e.router, b, NULL), MCR_OK);
    for (int pass = 0; pass < 2; pass++) {
        cap c = run1(&e, e.pool, req(MCR_OP_GET, moved_key, NULL, 0, 0));
        ck_assert_int_eq(c.reply, MCR_REPLY_HIT);
        ck_assert_int_eq(c.via_previous, 1);
    }
    WAIT_IDLE(&e, 20000);
    char tmp[64];
    ck_assert_int_eq(raw_get(&e, owner_in(b, moved_key), moved_key, tmp, sizeof(tmp)), 0);

    /* a multi-get: every key a hit, `number` counts the fallback hits */
    mtrack *m = mt_new(&e.t, 200);
    for (int k = 0; k < 200; k++) {
        snprintf(key, sizeof(key), "cg:%d", k);
        mt_add(m, key, strlen(key));
    }
    e.t.raw_values = 1;
    m->check_value = 0; /* the values are raw_set's, not the suite's format */
    ck_assert_int_eq(submit_multi(&e, e.pool, m, MCR_OP_GET), MCR_OK);
    ck_assert(run_until(&e, c_mt_done, m, 20000));
    mt_check(m);
    ck_assert_int_eq(m->done_status, MCR_OK);
    ck_assert_uint_eq(m->done_number, 200);
    ck_assert_int_eq(m->hits, 200);
    mt_free(m);

    /* the grace period: ended, a moved key not copied misses */
    ck_assert_int_eq(mcr_router_set_migration(e.router, a, b, (uint64_t)TMS(300), 0, NULL),
                     MCR_OK);
    cap c = run1(&e, e.pool, req(MCR_OP_GET, moved_key, NULL, 0, 0));
    ck_assert_int_eq(c.reply, MCR_REPLY_HIT);
    long long until = mcr_test_now_ms() + TMS(20000);
    mcr_router_migration t;
    while (mcr_router_get_migration(e.router, &t) == MCR_OK && mcr_test_now_ms() < until) {
        mcr_router_migration_clear(&t);
        run_ms(&e, 10);
    }
    c = run1(&e, e.pool, req(MCR_OP_GET, moved_key, NULL, 0, 0));
    ck_assert_int_eq(c.reply, MCR_REPLY_MISS);
    ck_assert_int_eq(c.via_previous, 0);
    mcr_snapshot_unref(a);
    mcr_snapshot_unref(b);
    tally_ok(&e);
    env_free(&e);
}
END_TEST

/* ================================================================== writes */

/* Writes of a moved key reach both owners, in both phases; deletes remove
 * both copies; conditional writes drop the other copy. */
START_TEST(test_dual_writes)
{
    env e;
    char key[32], got[256];
    env_init_k(&e, 5, 4, NULL);
    mcr_snapshot *a = mcr_router_current(e.router);
    mcr_snapshot *b = env_snapshot_at(&e, 5, NULL, 2);
    ck_assert_int_eq(mcr_router_set_migration(e.router, a, b, 0, 0, NULL), MCR_OK);
    /* a key that moves */
    int k = 0;
    do
        snprintf(key, sizeof(key), "dw:%d", k++);
    while (strcmp(owner_in(a, key), owner_in(b, key)) == 0);
    const char *oa = owner_in(a, key), *ob = owner_in(b, key);
    for (int phase = 0; phase < 2; phase++) {
        if (phase == 1)
            ck_assert_int_eq(mcr_router_publish(e.router, b, NULL), MCR_OK);
        const char *cur = phase ? ob : oa, *other = phase ? oa : ob;
        cap c = run1(&e, e.pool, req(MCR_OP_SET, key, phase ? "s1" : "s0", 5, 0));
        ck_assert_int_eq(c.reply, MCR_REPLY_STORED);
        ck_assert_str_eq(c.server, cur);
        ck_assert_int_eq(raw_get(&e, oa, key, got, sizeof(got)), 1);
        ck_assert_str_eq(got, phase ? "s1" : "s0");
        ck_assert_int_eq(raw_get(&e, ob, key, got, sizeof(got)), 1);
        ck_assert_str_eq(got, phase ? "s1" : "s0");
        /* append: at the current owner, then the same at the other */
        c = run1(&e, e.pool, req(MCR_OP_APPEND, key, "+", 0, 0));
        ck_assert_int_eq(c.reply, MCR_REPLY_STORED);
        ck_assert_int_eq(raw_get(&e, cur, key, got, sizeof(got)), 1);
        ck_assert_str_eq(got, phase ? "s1+" : "s0+");
        ck_assert_int_eq(raw_get(&e, other, key, got, sizeof(got)), 1);
        ck_assert_str_eq(got, phase ? "s1+" : "s0+");
        /* the other holding another value: its copy goes */
        run1(&e, e.pool, req(MCR_OP_SET, key, "7", 0, 0));
        ck_assert_int_eq(rs_mc_set(raw_fd(&e, env_index(&e, other)), key, "9", IO_MS), 0);
        c = run1(&e, e.pool, req(MCR_OP_INCR, key, NULL, 0, 0));
        ck_assert_int_eq(c.reply, MCR_REPLY_NUMBER);
        /* the other answered 9, not 7: it held an older value, now gone */
        ck_assert_int_eq(raw_get(&e, other, key, got, sizeof(got)), 0);
        /* delete: both; DELETED when either had it */
        run1(&e, e.pool, req(MCR_OP_SET, key, "d", 0, 0));
        c = run1(&e, e.pool, req(MCR_OP_DELETE, key, NULL, 0, 0));
        ck_assert_int_eq(c.reply, MCR_REPLY_DELETED);
        ck_assert_int_eq(raw_get(&e, oa, key, got, sizeof(got)), 0);
        ck_assert_int_eq(raw_get(&e, ob, key, got, sizeof(got)), 0);
        ck_assert_int_eq(rs_mc_set(raw_fd(&e, env_index(&e, other)), key, "x", IO_MS), 0);
        c = run1(&e, e.pool, req(MCR_OP_DELETE, key, NULL, 0, 0));
        ck_assert_int_eq(c.reply, MCR_REPLY_DELETED);
        c = run1(&e, e.pool, req(MCR_OP_DELETE, key, NULL, 0, 0));
        ck_assert_int_eq(c.reply, MCR_REPLY_MISS);
    }
    mcr_server_stats st;
    ck_assert_int_eq(stats_of(e.pool, oa, &st), 0);
    ck_assert_uint_gt(st.dual_writes, 0);
    /* the other owner down: the write is not acknowledged, and says why */
    env_kill(&e, env_index(&e, oa));
    cap c = run1(&e, e.pool, req(MCR_OP_SET, key, "z", 0, 0));
    ck_assert_int_ne(c.status, MCR_OK);
    mcr_snapshot_unref(a);
    mcr_snapshot_unref(b);
    tally_ok(&e);
    env_free(&e);
}
END_TEST

/* Two pools, one still copying (router at A) and one switched (router at
 * B), write and read the same keys in turn, while a third reads through
 * the switch with warm writes: no read after an acknowledged write returns
 * an older value, whichever pool wrote and whichever reads. */
START_TEST(test_no_older_value)
{
    env e;
    char key[32], val[64];
    tu_rng rng;
    tu_rng_init(&rng, 1414);
    env_init_k(&e, 5, 4, NULL);
    mcr_snapshot *a = mcr_router_current(e.router);
    mcr_snapshot *b = env_snapshot_at(&e, 5, NULL, 2);
    /* e.router: copying; rb: switched */
    ck_assert_int_eq(mcr_router_set_migration(e.router, a, b, 0, 0, NULL),
                     MCR_OK);
    mcr_router *rb = NULL;
    mcr_pool *pb = NULL;
    mcr_pool_options o;
    opts_init(&o);
    ck_assert_int_eq(mcr_router_new(a, &rb, NULL), MCR_OK);
    ck_assert_int_eq(mcr_router_set_migration(rb, a, b, 0, 0, NULL), MCR_OK);
    ck_assert_int_eq(mcr_router_publish(rb, b, NULL), MCR_OK);
    ck_assert_int_eq(mcr_pool_new(e.base, rb, &o, &pb, NULL), MCR_OK);
    mcr_pool *pools[2] = {e.pool, pb};
    enum { NK = 60, ROUNDS = 1500 };
    int last[NK];
    for (int i = 0; i < NK; i++) {
        last[i] = -1;
        /* an old value at the old owner: what a copy or a warm read may bring */
        snprintf(key, sizeof(key), "nov:%d", i);
        ck_assert_int_eq(rs_mc_set(raw_fd(&e, env_index(&e, owner_in(a, key))), key, "old",
                                   IO_MS),
                         0);
    }
    int stale = 0, misses = 0;
    for (int round = 0; round < ROUNDS; round++) {
        int i = (int)tu_below(&rng, NK);
        snprintf(key, sizeof(key), "nov:%d", i);
        mcr_pool *w = pools[tu_below(&rng, 2)];
        if (tu_below(&rng, 3) == 0) {
            snprintf(val, sizeof(val), "g%d", round);
            cap c = run1(&e, w, req(tu_below(&rng, 4) ? MCR_OP_SET : MCR_OP_DELETE, key,
                                    val, 0, 0));
            if (c.status == MCR_OK)
                last[i] = c.reply == MCR_REPLY_STORED ? round : -2; /* -2: deleted */
        } else {
            cap c = run1(&e, w, req(MCR_OP_GET, key, NULL, 0, 0));
            ck_assert_int_eq(c.status, MCR_OK);
            if (c.reply == MCR_REPLY_MISS) {
                misses++;
                continue;
            }
            char want[32];
            snprintf(want, sizeof(want), "g%d", last[i]);
            if (last[i] == -2 || (last[i] >= 0 && strcmp(c.value, want) != 0))
                stale++;
        }
    }
    ck_assert_msg(stale == 0, "%d reads returned a value older than the last acknowledged write",
                  stale);
    WAIT_IDLE(&e, 20000);
    (void)misses;
    mcr_pool_free(pb);
    mcr_router_free(rb);
    mcr_snapshot_unref(a);
    mcr_snapshot_unref(b);
    tally_ok(&e);
    env_free(&e);
}
END_TEST

/* The end of a transition, processes at different steps of it: ra still
 * switched (reads fall back), rb closing, rc ended. An ended process
 * deleting at the new owner only lets a switched one read the old copy
 * (the hazard the closing step is for); a closing one reads no old owner
 * and keeps the old owners in step with its writes, so a switched one
 * reads nothing older than what it acknowledged. */
static mcr_pool *pool_on(env *e, const mcr_snapshot *cur, const mcr_snapshot *a,
                         const mcr_snapshot *b, unsigned flags, mcr_router **r)
{
    mcr_pool *p = NULL;
    mcr_pool_options o;
    opts_init(&o);
    ck_assert_int_eq(mcr_router_new(cur, r, NULL), MCR_OK);
    if (a != NULL)
        ck_assert_int_eq(mcr_router_set_migration(*r, a, b, 0, flags, NULL), MCR_OK);
    ck_assert_int_eq(mcr_pool_new(e->base, *r, &o, &p, NULL), MCR_OK);
    return p;
}

START_TEST(test_closing)
{
    env e;
    char key[32], got[256];
    env_init_k(&e, 5, 4, NULL);
    mcr_snapshot *a = mcr_router_current(e.router);
    mcr_snapshot *b = env_snapshot_at(&e, 5, NULL, 2);
    mcr_router *ra, *rb, *rc;
    mcr_pool *pa = pool_on(&e, b, a, b, 0, &ra);
    mcr_pool *pb = pool_on(&e, b, a, b, MCR_MIGRATION_FLAG_CLOSING, &rb);
    mcr_pool *pc = pool_on(&e, b, NULL, NULL, 0, &rc);
    mcr_router_migration t;
    ck_assert_int_eq(mcr_router_get_migration(rb, &t), MCR_OK);
    ck_assert_int_eq(mcr_migration_phase_at(&t, 2), MCR_MIGRATION_CLOSING);
    mcr_router_migration_clear(&t);
    /* moved keys, each on both owners ("both"), as after the copy */
    enum { NK = 40 };
    char keys[NK][32];
    int n = 0;
    for (int k = 0; n < NK; k++) {
        snprintf(key, sizeof(key), "cl:%d", k);
        if (strcmp(owner_in(a, key), owner_in(b, key)) == 0)
            continue;
        snprintf(keys[n++], sizeof(keys[0]), "%s", key);
        cap c = run1(&e, pa, req(MCR_OP_SET, key, "both", 0, 0));
        ck_assert_int_eq(c.reply, MCR_REPLY_STORED);
    }
    /* the hazard: an ended process deletes at the new owner only; a
     * switched one reads the old copy */
    cap c = run1(&e, pc, req(MCR_OP_DELETE, keys[0], NULL, 0, 0));
    ck_assert_int_eq(c.reply, MCR_REPLY_DELETED);
    c = run1(&e, pa, req(MCR_OP_GET, keys[0], NULL, 0, 0));
    ck_assert_msg(c.reply == MCR_REPLY_HIT && c.via_previous == 1,
                  "the switched pool read %s at the old owner: %s", keys[0],
                  mcr_reply_name(c.reply));
    /* closing: a miss at the new owner is the answer, nothing is read at
     * the old one */
    c = run1(&e, pb, req(MCR_OP_GET, keys[0], NULL, 0, 0));
    ck_assert_int_eq(c.reply, MCR_REPLY_MISS);
    ck_assert_int_eq(c.via_previous, 0);
    ck_assert_str_eq(c.server, owner_in(b, keys[0]));
    uint64_t fb = 0;
    for (int i = 0; i < 5; i++) {
        mcr_server_stats st;
        ck_assert_int_eq(stats_of(pb, e.id[i], &st), 0);
        fb += st.fallback_reads;
    }
    ck_assert_uint_eq(fb, 0);
    /* a closing multi-get does not fall back either: keys[0] misses, the
     * others hit at their new owners */
    mtrack *m = mt_new(&e.t, 8);
    for (int k = 0; k < 8; k++)
        mt_add(m, keys[k], strlen(keys[k]));
    e.t.raw_values = 1;
    m->check_value = 0;
    ck_assert_int_eq(submit_multi(&e, pb, m, MCR_OP_GET), MCR_OK);
    ck_assert(run_until(&e, c_mt_done, m, 20000));
    mt_check(m);
    ck_assert_int_eq(m->done_status, MCR_OK);
    ck_assert_int_eq(m->hits, 7);
    mt_free(m);
    for (int i = 0; i < 5; i++) {
        mcr_server_stats st;
        ck_assert_int_eq(stats_of(pb, e.id[i], &st), 0);
        ck_assert_uint_eq(st.fallback_reads, 0);
    }
    /* closing writes reach both owners: a delete, a set */
    c = run1(&e, pb, req(MCR_OP_DELETE, keys[1], NULL, 0, 0));
    ck_assert_int_eq(c.reply, MCR_REPLY_DELETED);
    ck_assert_int_eq(raw_get(&e, owner_in(a, keys[1]), keys[1], got, sizeof(got)), 0);
    ck_assert_int_eq(raw_get(&e, owner_in(b, keys[1]), keys[1], got, sizeof(got)), 0);
    c = run1(&e, pa, req(MCR_OP_GET, keys[1], NULL, 0, 0));
    ck_assert_int_eq(c.reply, MCR_REPLY_MISS);
    c = run1(&e, pb, req(MCR_OP_SET, keys[2], "new", 0, 0));
    ck_assert_int_eq(c.reply, MCR_REPLY_STORED);
    ck_assert_int_eq(raw_get(&e, owner_in(a, keys[2]), keys[2], got, sizeof(got)), 1);
    ck_assert_str_eq(got, "new");
    ck_assert_int_eq(raw_get(&e, owner_in(b, keys[2]), keys[2], got, sizeof(got)), 1);
    ck_assert_str_eq(got, "new");
    /* a closing write that misses at the new owner (the key never got
     * there) deletes the old owner's copy: a switched reader then misses
     * as a closing one does */
    raw_delete(&e, owner_in(b, keys[3]), keys[3]);
    c = run1(&e, pb, req(MCR_OP_APPEND, keys[3], "+x", 0, 0));
    ck_assert_int_eq(c.reply, MCR_REPLY_NOT_STORED);
    ck_assert_int_eq(c.via_previous, 0);
    ck_assert_int_eq(raw_get(&e, owner_in(a, keys[3]), keys[3], got, sizeof(got)), 0);
    c = run1(&e, pa, req(MCR_OP_GET, keys[3], NULL, 0, 0));
    ck_assert_int_eq(c.reply, MCR_REPLY_MISS);
    /* the same miss switched goes to the old owner (its answer) */
    raw_delete(&e, owner_in(b, keys[4]), keys[4]);
    c = run1(&e, pa, req(MCR_OP_APPEND, keys[4], "+x", 0, 0));
    ck_assert_int_eq(c.reply, MCR_REPLY_STORED);
    ck_assert_int_eq(c.via_previous, 1);

    /* mixed traffic, switched and closing: nothing older than the last
     * acknowledged write */
    tu_rng rng;
    tu_rng_init(&rng, 2718);
    mcr_pool *pools[2] = {pa, pb};
    int last[NK];
    for (int i = 0; i < NK; i++)
        last[i] = -1; /* "both" or anything before: not checked */
    int stale = 0;
    for (int round = 0; round < 1500; round++) {
        int i = 5 + (int)tu_below(&rng, NK - 5);
        mcr_pool *w = pools[tu_below(&rng, 2)];
        if (tu_below(&rng, 3) == 0) {
            char val[32];
            snprintf(val, sizeof(val), "g%d", round);
            int del = tu_below(&rng, 3) == 0;
            c = run1(&e, w, req(del ? MCR_OP_DELETE : MCR_OP_SET, keys[i], val, 0, 0));
            ck_assert_int_eq(c.status, MCR_OK);
            last[i] = del ? -2 : round;
        } else {
            c = run1(&e, w, req(MCR_OP_GET, keys[i], NULL, 0, 0));
            ck_assert_int_eq(c.status, MCR_OK);
            char want[32];
            snprintf(want, sizeof(want), "g%d", last[i]);
            if (c.reply == MCR_REPLY_HIT &&
                (last[i] == -2 || (last[i] >= 0 && strcmp(c.value, want) != 0)))
                stale++;
            if (c.reply == MCR_REPLY_MISS && last[i] >= 0)
                stale++;
        }
    }
    ck_assert_msg(stale == 0, "%d reads not the last acknowledged write", stale);
    WAIT_IDLE(&e, 20000);
    mcr_pool_free(pa);
    mcr_pool_free(pb);
    mcr_pool_free(pc);
    mcr_router_free(ra);
    mcr_router_free(rb);
    mcr_router_free(rc);
    mcr_snapshot_unref(a);
    mcr_snapshot_unref(b);
    tally_ok(&e);
    env_free(&e);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("pool_transition");
    PE_ADD(s, router_api);
    PE_ADD(s, router_threads);
    PE_ADD_LOOP(s, fallback_reads, 0, 2);
    PE_ADD(s, cold_grace_multiget);
    PE_ADD(s, dual_writes);
    PE_ADD(s, no_older_value);
    PE_ADD(s, closing);
    return s;
}

int main(void)
{
    return tu_run(suite());
}
