/* SPDX-License-Identifier: BSD-3-Clause */
/* test_migrate_races.c: Check suite of the races between a resize's movers (the copier, the warm add) and clients' writes, each made to happen every time by a proxy that holds the old owner's reply: no deleted or older value may reach the new owner. */
/*
 * Two memcached servers: A (the old owner of every key, reached through a
 * delay proxy, delayproxy.h) and B (the new owner). Snapshot `from` holds
 * A alone (epoch 1), `to` holds B alone (epoch 2): every key moves.
 *
 * Each test stops a mover's read of A in flight (the server answered, the
 * mover has not seen it), makes a client write of the same key and waits
 * for its acknowledgement, then lets the read go on, and looks at what B
 * holds in the end, read straight from B:
 *   copier_delete  mcr_migrate_run()'s read of K, a delete of K through a
 *                  pool in the copying phase: B must not hold K;
 *   copier_incr    the same with an incr (10 -> 11): the copy is undone
 *                  and made again, B holds 11, a switched pool reads 11;
 *   copier_touch   the same with a touch: B's copy has the new TTL;
 *   fallback_delete  a switched pool's read of K misses at B and is read
 *                  at A, a delete of K through another switched pool
 *                  meanwhile: B never holds K (nothing read at A is
 *                  written to B: such a copy could be read before any
 *                  check removed it);
 *   interrupted    a copy that an interrupted run left unchecked at B
 *                  while A's value changed: the next run removes it, and
 *                  copies the key afresh;
 *   switched_ops   in the switched phase, an incr and an append of a key
 *                  the copy has not brought to B apply to A's value (the
 *                  result says so), and one of a key at B applies to both.
 * Without the rules these tests check (the copy verified by the source's
 * CAS, writes reaching the old owner first, the check of the new owners
 * before a copy), the first four fail.
 */
#include <check.h>
#include <event2/event.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "delayproxy.h"
#include "mcroute.h"
#include "mcroute_migrate.h"
#include "mcroute_pool.h"
#include "mcroute_router.h"
#include "mcroute_snapshot.h"
#include "realserver.h"
#include "testutil.h"

#define START_MS mcr_test_ms(20000)
#define IO_MS mcr_test_ms(10000)
#define KEY "race:key"

typedef struct env {
    rs_proc a, b;
    dp_proxy *px;
    mcr_snapshot *from, *to;
    struct event_base *base;
} env;

static void teardown(void)
{
    rs_stop_all();
}

static mcr_snapshot *snap(int port, uint64_t epoch)
{
    mcr_config *cfg = mcr_config_new();
    ck_assert_ptr_nonnull(cfg);
    ck_assert_int_eq(mcr_config_add_server(cfg, "127.0.0.1", port, 1, NULL), MCR_OK);
    mcr_snapshot *s = NULL;
    ck_assert_int_eq(mcr_snapshot_new(cfg, epoch, &s, NULL), MCR_OK);
    mcr_config_free(cfg);
    return s;
}

static void env_start(env *e)
{
    memset(e, 0, sizeof(*e));
    ck_assert_int_eq(rs_memcached_start(&e->a, "127.0.0.1", 0, NULL, START_MS), 0);
    ck_assert_int_eq(rs_memcached_start(&e->b, "127.0.0.1", 0, NULL, START_MS), 0);
    e->px = dp_start(e->a.port);
    ck_assert_ptr_nonnull(e->px);
    e->from = snap(dp_port(e->px), 1);
    e->to = snap(e->b.port, 2);
    e->base = event_base_new();
    ck_assert_ptr_nonnull(e->base);
}

static void env_free(env *e)
{
    dp_stop(e->px);
    mcr_snapshot_unref(e->from);
    mcr_snapshot_unref(e->to);
    event_base_free(e->base);
    rs_stop(&e->a);
    rs_stop(&e->b);
}

/* A raw line to server port, its reply's first line (CRLF kept) in out. */
static void raw(int port, const char *line, char *out, size_t cap)
{
    int fd = rs_connect("127.0.0.1", port, IO_MS);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(rs_mc_line(fd, line, out, cap, IO_MS), 0);
    close(fd);
}

/* K's value at server port: 1 (in val), 0 (miss). */
static int value_at(int port, char *val, size_t cap)
{
    int fd = rs_connect("127.0.0.1", port, IO_MS);
    ck_assert_int_ge(fd, 0);
    int rc = rs_mc_get(fd, KEY, val, cap, IO_MS);
    close(fd);
    ck_assert_int_ge(rc, 0);
    return rc;
}

/* A router at `cur` with the transition (from, to), and a pool on it. */
typedef struct client {
    mcr_router *r;
    mcr_pool *p;
} client;

static void client_new(env *e, client *c, const mcr_snapshot *cur)
{
    ck_assert_int_eq(mcr_router_new(cur, &c->r, NULL), MCR_OK);
    ck_assert_int_eq(mcr_router_set_migration(c->r, e->from, e->to, 0, 0, NULL),
                     MCR_OK);
    mcr_pool_options o;
    mcr_pool_options_init(&o);
    o.request_timeout_ms = (unsigned)IO_MS;
    o.connect_timeout_ms = (unsigned)IO_MS;
    ck_assert_int_eq(mcr_pool_new(e->base, c->r, &o, &c->p, NULL), MCR_OK);
}

static void client_free(client *c)
{
    mcr_pool_free(c->p);
    mcr_router_free(c->r);
}

typedef struct outcome {
    mcr_reply reply;
    uint64_t number;
    char value[64];
    size_t value_len;
} outcome;

static outcome exec(client *c, mcr_op op, const char *value, int64_t exptime, uint64_t delta)
{
    mcr_request q;
    memset(&q, 0, sizeof(q));
    q.op = op;
    q.key = KEY;
    q.key_len = strlen(KEY);
    q.value = value;
    q.value_len = value ? strlen(value) : 0;
    q.exptime = exptime;
    q.delta = delta;
    mcr_owned_result res;
    int rc = mcr_pool_exec(c->p, &q, &res);
    ck_assert_msg(rc == MCR_OK, "%s %s: %s", mcr_op_name(op), KEY, res.message);
    outcome o;
    memset(&o, 0, sizeof(o));
    o.reply = res.reply;
    o.number = res.number;
    o.value_len = res.value_len < sizeof(o.value) ? res.value_len : sizeof(o.value) - 1;
    if (res.value != NULL)
        memcpy(o.value, res.value, o.value_len);
    mcr_owned_result_clear(&res);
    return o;
}

/* ------------------------------------------------------------ the copier */

typedef struct copier {
    env *e;
    pthread_t t;
    int rc;
    mcr_migrate_report rep;
    mcr_error err;
} copier;

static void *copier_main(void *arg)
{
    copier *c = arg;
    mcr_migrate_options o;
    mcr_migrate_options_init(&o);
    o.timeout_ms = (unsigned)IO_MS;
    c->rc = mcr_migrate_run(c->e->from, c->e->to, &o, &c->rep, &c->err);
    return NULL;
}

/* The copier started with its read of K held; returns once held. */
static void copier_start_held(env *e, copier *c)
{
    memset(c, 0, sizeof(*c));
    c->e = e;
    dp_hold(e->px, KEY);
    ck_assert_int_eq(pthread_create(&c->t, NULL, copier_main, c), 0);
    ck_assert_msg(dp_wait_held(e->px, IO_MS) == 0, "the copier's read of %s never came", KEY);
}

static void copier_finish(env *e, copier *c)
{
    dp_release(e->px);
    pthread_join(c->t, NULL);
    ck_assert_msg(c->rc == MCR_OK, "mcr_migrate_run: %s", c->err.message);
    ck_assert_uint_eq(c->rep.moved, 1);
}

/* The race of the copier's read of K (set with `set_line` at A) with a
 * client's `op` of K, acknowledged while that read is held; the copier then
 * runs to its end. The client's answer. */
static outcome copier_race(env *e, copier *c, const char *set_line, mcr_op op, int64_t exptime,
                           uint64_t delta)
{
    char line[256];
    env_start(e);
    raw(e->a.port, set_line, line, sizeof(line));
    ck_assert_str_eq(line, "STORED\r\n");
    copier_start_held(e, c);
    client w;
    client_new(e, &w, e->from);
    outcome r = exec(&w, op, NULL, exptime, delta);
    copier_finish(e, c);
    client_free(&w);
    return r;
}

START_TEST(copier_delete)
{
    env e;
    copier c;
    char val[64];
    /* the copier read v1; a client deletes the key, acknowledged */
    outcome r = copier_race(&e, &c, "set " KEY " 0 0 2\r\nv1", MCR_OP_DELETE, 0, 0);
    ck_assert_int_eq(r.reply, MCR_REPLY_DELETED);
    ck_assert_msg(value_at(e.b.port, val, sizeof(val)) == 0,
                  "the new owner holds \"%s\", deleted before the copy ended", val);
    ck_assert_uint_eq(c.rep.copied, 0);
    ck_assert_uint_eq(c.rep.undone + c.rep.skipped_gone, 1);
    mcr_migrate_report_clear(&c.rep);
    env_free(&e);
}
END_TEST

START_TEST(copier_incr)
{
    env e;
    copier c;
    char val[64];
    outcome r = copier_race(&e, &c, "set " KEY " 0 0 2\r\n10", MCR_OP_INCR, 0, 1);
    ck_assert_int_eq(r.reply, MCR_REPLY_NUMBER);
    ck_assert_uint_eq(r.number, 11);
    /* the copy's own check saw the incr: undone, then copied again */
    ck_assert_uint_eq(c.rep.copied, 1);
    ck_assert_uint_eq(c.rep.undone, 0);
    ck_assert_int_eq(value_at(e.b.port, val, sizeof(val)), 1);
    ck_assert_msg(strcmp(val, "11") == 0, "the new owner holds %s, not 11", val);
    /* after the switch a reader gets 11 (from B, or through the fallback) */
    client rd;
    client_new(&e, &rd, e.to);
    r = exec(&rd, MCR_OP_GET, NULL, 0, 0);
    ck_assert_int_eq(r.reply, MCR_REPLY_HIT);
    ck_assert_msg(r.value_len == 2 && memcmp(r.value, "11", 2) == 0, "read %.*s, not 11",
                  (int)r.value_len, r.value);
    mcr_migrate_report_clear(&c.rep);
    client_free(&rd);
    env_free(&e);
}
END_TEST

START_TEST(copier_touch)
{
    env e;
    copier c;
    char line[256], val[64];
    outcome r = copier_race(&e, &c, "set " KEY " 0 100 2\r\nv1", MCR_OP_TOUCH, 5000, 0);
    ck_assert_int_eq(r.reply, MCR_REPLY_TOUCHED);
    ck_assert_uint_eq(c.rep.copied, 1); /* undone (the TTL moved), copied again */
    ck_assert_int_eq(value_at(e.b.port, val, sizeof(val)), 1);
    /* the copy has the TTL the touch gave (5000 s), not 100 */
    raw(e.b.port, "mg " KEY " t", line, sizeof(line));
    long ttl = -5;
    ck_assert_msg(sscanf(line, "HD t%ld", &ttl) == 1, "mg: %s", line);
    ck_assert_msg(ttl > 4000, "the new owner's copy expires in %ld s, not ~5000", ttl);
    mcr_migrate_report_clear(&c.rep);
    env_free(&e);
}
END_TEST

/* ------------------------------------------------------------ the warm add */

static int g_read_done;
static void on_read(const mcr_result *res, void *arg)
{
    (void)arg;
    ck_assert_int_eq(res->status, MCR_OK);
    g_read_done = 1;
}

START_TEST(fallback_delete)
{
    env e;
    env_start(&e);
    char line[256], val[64];
    raw(e.a.port, "set " KEY " 0 0 2\r\nv1", line, sizeof(line));
    client rd, w;
    client_new(&e, &rd, e.to); /* switched */
    client_new(&e, &w, e.to);
    /* the reader misses at B, reads A: that reply is held */
    dp_hold(e.px, KEY);
    g_read_done = 0;
    ck_assert_int_eq(mcr_pool_get(rd.p, KEY, strlen(KEY), on_read, NULL, NULL), MCR_OK);
    int64_t dl = mcr_test_now_ms() + IO_MS;
    while (dp_wait_held(e.px, 0) != 0 && mcr_test_now_ms() < dl)
        event_base_loop(e.base, EVLOOP_ONCE | EVLOOP_NONBLOCK), dp_wait_held(e.px, 5);
    ck_assert_msg(dp_wait_held(e.px, 0) == 0, "the fallback read never came");
    /* another process deletes the key, acknowledged */
    outcome r = exec(&w, MCR_OP_DELETE, NULL, 0, 0);
    ck_assert_int_eq(r.reply, MCR_REPLY_DELETED);
    dp_release(e.px);
    ck_assert_int_eq(mcr_pool_wait(rd.p), MCR_OK); /* the read and its fallback */
    ck_assert(g_read_done);
    ck_assert_msg(value_at(e.b.port, val, sizeof(val)) == 0,
                  "the new owner holds \"%s\", deleted while it was read at A", val);
    mcr_server_stats st;
    uint64_t fallback = 0;
    for (size_t i = 0; i < mcr_pool_server_count(rd.p); i++)
        if (mcr_pool_server_stats(rd.p, i, &st) == MCR_OK)
            fallback += st.fallback_hits;
    ck_assert_uint_eq(fallback, 1);
    client_free(&rd);
    client_free(&w);
    env_free(&e);
}
END_TEST

/* ------------------------------------------------------------ runs */

START_TEST(interrupted)
{
    env e;
    env_start(&e);
    char line[256], val[64];
    /* what a run stopped between its add and its check leaves: B holds
     * v1, and A's value changed (v2) through a write whose new-owner part
     * came before that add */
    raw(e.a.port, "set " KEY " 0 0 2\r\nv2", line, sizeof(line));
    raw(e.b.port, "set " KEY " 0 0 2\r\nv1", line, sizeof(line));
    mcr_migrate_options o;
    mcr_migrate_options_init(&o);
    o.timeout_ms = (unsigned)IO_MS;
    mcr_migrate_report rep;
    mcr_error err;
    ck_assert_int_eq(mcr_migrate_run(e.from, e.to, &o, &rep, &err), MCR_OK);
    ck_assert_uint_eq(rep.removed, 1);
    ck_assert_uint_eq(rep.copied, 1); /* removed, then copied afresh */
    ck_assert_int_eq(value_at(e.b.port, val, sizeof(val)), 1);
    ck_assert_str_eq(val, "v2");
    mcr_migrate_report_clear(&rep);
    /* the same when A lost the key (a delete) */
    raw(e.b.port, "set " KEY " 0 0 2\r\nv1", line, sizeof(line));
    raw(e.a.port, "delete " KEY, line, sizeof(line));
    ck_assert_int_eq(mcr_migrate_run(e.from, e.to, &o, &rep, &err), MCR_OK);
    ck_assert_uint_eq(rep.removed, 1);
    ck_assert_int_eq(value_at(e.b.port, val, sizeof(val)), 0);
    mcr_migrate_report_clear(&rep);
    /* a copy equal to its source stays; after the switch nothing is compared */
    raw(e.a.port, "set " KEY " 0 0 2\r\nv3", line, sizeof(line));
    ck_assert_int_eq(mcr_migrate_run(e.from, e.to, &o, &rep, &err), MCR_OK);
    ck_assert_uint_eq(rep.copied, 1);
    ck_assert_uint_eq(rep.removed, 0);
    mcr_migrate_report_clear(&rep);
    /* run again: the copy is found equal and kept */
    ck_assert_int_eq(mcr_migrate_run(e.from, e.to, &o, &rep, &err), MCR_OK);
    ck_assert_uint_eq(rep.verified, 1);
    ck_assert_uint_eq(rep.removed, 0);
    ck_assert_uint_eq(rep.skipped_present, 1);
    mcr_migrate_report_clear(&rep);
    env_free(&e);
}
END_TEST

START_TEST(switched_ops)
{
    env e;
    env_start(&e);
    char line[256], val[64];
    raw(e.a.port, "set " KEY " 0 0 2\r\n10", line, sizeof(line));
    client w;
    client_new(&e, &w, e.to); /* switched, the key not copied */
    outcome r = exec(&w, MCR_OP_INCR, NULL, 0, 5);
    ck_assert_int_eq(r.reply, MCR_REPLY_NUMBER);
    ck_assert_uint_eq(r.number, 15);
    ck_assert_int_eq(value_at(e.a.port, val, sizeof(val)), 1);
    ck_assert_str_eq(val, "15");
    ck_assert_int_eq(value_at(e.b.port, val, sizeof(val)), 0); /* nothing copied */
    r = exec(&w, MCR_OP_APPEND, "x", 0, 0);
    ck_assert_int_eq(r.reply, MCR_REPLY_STORED);
    r = exec(&w, MCR_OP_GET, NULL, 0, 0); /* the fallback serves it */
    ck_assert_int_eq(r.reply, MCR_REPLY_HIT);
    ck_assert_str_eq(r.value, "15x");
    /* a key at both: the same op to both, B first */
    raw(e.b.port, "set " KEY " 0 0 3\r\n15x", line, sizeof(line));
    r = exec(&w, MCR_OP_APPEND, "y", 0, 0);
    ck_assert_int_eq(r.reply, MCR_REPLY_STORED);
    ck_assert_int_eq(value_at(e.b.port, val, sizeof(val)), 1);
    ck_assert_str_eq(val, "15xy");
    ck_assert_int_eq(value_at(e.a.port, val, sizeof(val)), 1);
    ck_assert_str_eq(val, "15xy");
    /* B's copy differs from A's (an older copy): A's is deleted, B's answer stands */
    raw(e.a.port, "set " KEY " 0 0 1\r\n7", line, sizeof(line));
    raw(e.b.port, "set " KEY " 0 0 1\r\n9", line, sizeof(line));
    r = exec(&w, MCR_OP_INCR, NULL, 0, 1);
    ck_assert_uint_eq(r.number, 10);
    ck_assert_int_eq(value_at(e.a.port, val, sizeof(val)), 0);
    client_free(&w);
    env_free(&e);
}
END_TEST

/* Processes in both phases at once (a fleet adopting the switch): an incr
 * by a switched one is seen by a copying one, and the other way round. */
START_TEST(mixed_phases)
{
    env e;
    env_start(&e);
    char line[256], val[64];
    raw(e.a.port, "set " KEY " 0 0 2\r\n10", line, sizeof(line));
    raw(e.b.port, "set " KEY " 0 0 2\r\n10", line, sizeof(line)); /* copied */
    client cp, sw;
    client_new(&e, &cp, e.from); /* copying */
    client_new(&e, &sw, e.to);   /* switched */
    outcome r = exec(&sw, MCR_OP_INCR, NULL, 0, 1);
    ck_assert_uint_eq(r.number, 11);
    r = exec(&cp, MCR_OP_GET, NULL, 0, 0);
    ck_assert_int_eq(r.reply, MCR_REPLY_HIT);
    ck_assert_str_eq(r.value, "11");
    r = exec(&cp, MCR_OP_INCR, NULL, 0, 1);
    ck_assert_uint_eq(r.number, 12);
    r = exec(&sw, MCR_OP_GET, NULL, 0, 0);
    ck_assert_int_eq(r.reply, MCR_REPLY_HIT);
    ck_assert_str_eq(r.value, "12");
    ck_assert_int_eq(value_at(e.a.port, val, sizeof(val)), 1);
    ck_assert_str_eq(val, "12");
    ck_assert_int_eq(value_at(e.b.port, val, sizeof(val)), 1);
    ck_assert_str_eq(val, "12");
    client_free(&cp);
    client_free(&sw);
    env_free(&e);
}
END_TEST

/* A CAS belongs to one server: a cas, a delete by CAS and a gat reach the
 * other owner as a set, a delete and a touch; a switched touch of a key
 * only the previous owner holds touches it there. */
START_TEST(cas_and_touch)
{
    env e;
    env_start(&e);
    char line[256], val[64];
    /* the two servers' CAS counters apart (they count stores alike) */
    for (int i = 0; i < 3; i++)
        raw(e.b.port, "set other:key 0 0 1\r\nx", line, sizeof(line));
    client cp, sw;
    client_new(&e, &cp, e.from);
    client_new(&e, &sw, e.to);
    for (int phase = 0; phase < 2; phase++) {
        client *c = phase ? &sw : &cp;
        exec(c, MCR_OP_SET, "v1", 0, 0); /* both */
        mcr_request q;
        memset(&q, 0, sizeof(q));
        q.op = MCR_OP_GETS;
        q.key = KEY;
        q.key_len = strlen(KEY);
        mcr_owned_result g;
        ck_assert_int_eq(mcr_pool_exec(c->p, &q, &g), MCR_OK);
        uint64_t cas = g.cas;
        mcr_owned_result_clear(&g);
        q.op = MCR_OP_CAS;
        q.value = "v2";
        q.value_len = 2;
        q.cas = cas;
        ck_assert_int_eq(mcr_pool_exec(c->p, &q, &g), MCR_OK);
        ck_assert_int_eq(g.reply, MCR_REPLY_STORED);
        mcr_owned_result_clear(&g);
        ck_assert_int_eq(value_at(e.a.port, val, sizeof(val)), 1);
        ck_assert_str_eq(val, "v2");
        ck_assert_int_eq(value_at(e.b.port, val, sizeof(val)), 1);
        ck_assert_str_eq(val, "v2");
        /* a gat: the other owner's copy gets the TTL too */
        outcome r = exec(c, MCR_OP_GAT, NULL, 4000, 0);
        ck_assert_int_eq(r.reply, MCR_REPLY_HIT);
        ck_assert_str_eq(r.value, "v2");
        for (int s = 0; s < 2; s++) {
            raw(s ? e.b.port : e.a.port, "mg " KEY " t", line, sizeof(line));
            long ttl = -5;
            ck_assert_msg(sscanf(line, "HD t%ld", &ttl) == 1 && ttl > 3000, "%s: %s",
                          s ? "B" : "A", line);
        }
        /* a delete by CAS: both copies go */
        q.op = MCR_OP_GETS;
        ck_assert_int_eq(mcr_pool_exec(c->p, &q, &g), MCR_OK);
        cas = g.cas;
        mcr_owned_result_clear(&g);
        memset(&q, 0, sizeof(q));
        q.op = MCR_OP_DELETE;
        q.key = KEY;
        q.key_len = strlen(KEY);
        q.cas = cas;
        ck_assert_int_eq(mcr_pool_exec(c->p, &q, &g), MCR_OK);
        ck_assert_int_eq(g.reply, MCR_REPLY_DELETED);
        mcr_owned_result_clear(&g);
        ck_assert_int_eq(value_at(e.a.port, val, sizeof(val)), 0);
        ck_assert_int_eq(value_at(e.b.port, val, sizeof(val)), 0);
    }
    /* switched: a touch of a key at the previous owner only */
    raw(e.a.port, "set " KEY " 0 100 2\r\nv3", line, sizeof(line));
    outcome r = exec(&sw, MCR_OP_TOUCH, NULL, 5000, 0);
    ck_assert_int_eq(r.reply, MCR_REPLY_TOUCHED);
    raw(e.a.port, "mg " KEY " t", line, sizeof(line));
    long ttl = -5;
    ck_assert_msg(sscanf(line, "HD t%ld", &ttl) == 1 && ttl > 4000, "%s", line);
    client_free(&cp);
    client_free(&sw);
    env_free(&e);
}
END_TEST

/* A source without CAS (memcached -C): nothing is copied unverified. */
START_TEST(no_cas_source)
{
    rs_proc a, b;
    const char *const c_opt[] = {"-C", NULL};
    ck_assert_int_eq(rs_memcached_start_opts(&a, "127.0.0.1", 0, c_opt, NULL, START_MS), 0);
    ck_assert_int_eq(rs_memcached_start(&b, "127.0.0.1", 0, NULL, START_MS), 0);
    char line[256], val[64];
    raw(a.port, "set " KEY " 0 0 2\r\nv1", line, sizeof(line));
    mcr_snapshot *from = snap(a.port, 1), *to = snap(b.port, 2);
    mcr_migrate_options o;
    mcr_migrate_options_init(&o);
    o.timeout_ms = (unsigned)IO_MS;
    mcr_migrate_report rep;
    mcr_error err;
    int rc = mcr_migrate_run(from, to, &o, &rep, &err);
    ck_assert_int_eq(rc, MCR_ERR_UNSUPPORTED);
    ck_assert_msg(strstr(err.message, "memcached -C") != NULL, "%s", err.message);
    ck_assert_uint_eq(rep.copied, 0);
    ck_assert_int_eq(value_at(b.port, val, sizeof(val)), 0);
    mcr_migrate_report_clear(&rep);
    mcr_snapshot_unref(from);
    mcr_snapshot_unref(to);
    rs_stop(&a);
    rs_stop(&b);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("migrate_races");
    TCase *tc = tcase_create("races");
    tcase_set_timeout(tc, mcr_test_sec(120));
    tcase_add_checked_fixture(tc, NULL, teardown);
    tcase_add_test(tc, copier_delete);
    tcase_add_test(tc, copier_incr);
    tcase_add_test(tc, copier_touch);
    tcase_add_test(tc, fallback_delete);
    tcase_add_test(tc, interrupted);
    tcase_add_test(tc, switched_ops);
    tcase_add_test(tc, mixed_phases);
    tcase_add_test(tc, cas_and_touch);
    tcase_add_test(tc, no_cas_source);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return tu_run(suite());
}
