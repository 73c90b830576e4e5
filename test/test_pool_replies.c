/* SPDX-License-Identifier: BSD-3-Clause */
/* test_pool_replies.c: Check suite of the connection pool: malformed replies from a scripted fake server, and reply safety. */
/*
 * The environment, the request tracking and the time rules are pool_env.h's.
 *
 * What is covered: malformed replies from a scripted fake server
 * (fakeserver.c); duplicate and oversized values; a pool freed with
 * requests in flight to a fake.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <event2/event.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "fakeserver.h"
#include "pool/pool_internal.h"
#include "mcroute.h"
#include "mcroute_pool.h"
#include "mcroute_router.h"
#include "mcroute_snapshot.h"
#include "pool_env.h"
#include "realserver.h"
#include "testutil.h"

/* ================================================================== malformed replies */

typedef struct fake_case {
    const char *name;
    fs_script script;
    int meta;
    int nkeys;          /* gets in flight at once (pipelined) */
    int multi;          /* 1: one multi-get of the keys instead */
    unsigned trickle_ms;
    int expect;         /* the status expected of every request */
    int alt, alt2;      /* other statuses accepted (1: none; MCR_OK: only with the
                           fake's correct value, delivered before the stream broke) */
    int prompt;         /* 1: fails well before the request timeout */
    int server_closes;  /* 1: the fake closes the connection itself */
} fake_case;

/* The pool's timeouts in a case that expects one to fire: long enough that
 * the fake's thread has read the get before it fires on a loaded machine.
 * Every other case gets opts_init's, which it never waits for. */
#define FK_TIMEOUT TMS(1500)
#define P MCR_ERR_PROTOCOL
#define T MCR_ERR_TIMEOUT
#define C MCR_ERR_CONNECT
#define N 1 /* no status: none accepted */

static const fake_case fake_cases[] = {
    /* name, script, meta, nkeys, multi, trickle, expect, alt, alt2, prompt, closes */
    {"garbage", FS_GARBAGE, 0, 5, 0, 0, P, N, N, 1, 0},
    {"garbage meta", FS_GARBAGE, 1, 5, 0, 0, P, N, N, 1, 0},
    {"garbage multi", FS_GARBAGE, 0, 5, 1, 0, P, N, N, 1, 0},
    {"other key", FS_OTHER_KEY, 0, 5, 0, 0, P, N, N, 1, 0},
    {"other key multi", FS_OTHER_KEY, 0, 5, 1, 0, P, N, N, 1, 0},
    {"wrong byte count", FS_WRONG_BYTES, 0, 5, 0, 0, P, N, N, 1, 0},
    {"wrong byte count meta", FS_WRONG_BYTES, 1, 5, 0, 0, P, N, N, 1, 0},
    {"truncated, closed", FS_TRUNCATE, 0, 5, 0, 0, C, P, N, 1, 1},
    {"truncated, closed meta", FS_TRUNCATE, 1, 5, 0, 0, C, P, N, 1, 1},
    {"huge length", FS_HUGE_LENGTH, 0, 5, 0, 0, P, N, N, 1, 0},
    {"huge length meta", FS_HUGE_LENGTH, 1, 5, 0, 0, P, N, N, 1, 0},
    /* a value may be delivered as soon as it is complete, before its END */
    {"END missing", FS_NO_END, 0, 1, 0, 0, T, MCR_OK, N, 0, 0},
    {"END missing, pipelined", FS_NO_END, 0, 5, 0, 0, P, T, MCR_OK, 0, 0},
    {"MN missing, meta multi", FS_NO_END, 1, 5, 1, 0, T, MCR_OK, N, 0, 0},
    {"wrong opaque", FS_WRONG_OPAQUE, 1, 5, 0, 0, P, N, N, 1, 0},
    {"wrong opaque multi", FS_WRONG_OPAQUE, 1, 5, 1, 0, P, N, N, 1, 0},
    {"reply with no request", FS_UNSOLICITED, 0, 1, 0, 0, MCR_OK, N, N, 0, 0},
    {"reply with no request meta", FS_UNSOLICITED, 1, 1, 0, 0, MCR_OK, N, N, 0, 0},
    {"slow trickle within the timeout", FS_TRICKLE, 0, 1, 0, 4, MCR_OK, N, N, 0, 0},
    {"slow trickle within the timeout meta", FS_TRICKLE, 1, 1, 0, 4, MCR_OK, N, N, 0, 0},
    /* about 30 bytes at 150 ms (both scaled): well past FK_TIMEOUT */
    {"trickle past the timeout", FS_TRICKLE, 0, 1, 0, 150, T, N, N, 0, 0},
    {"silent", FS_SILENT, 0, 5, 0, 0, T, N, N, 0, 0},
    {"closed without reply", FS_CLOSE, 0, 5, 0, 0, C, N, N, 1, 1},
    /* the key's value, then a second block for it: the first may be delivered */
    {"duplicate value", FS_DUP_VALUE, 0, 5, 0, 0, P, MCR_OK, N, 1, 0},
    {"duplicate value meta", FS_DUP_VALUE, 1, 5, 0, 0, P, MCR_OK, N, 1, 0},
    {"duplicate value multi", FS_DUP_VALUE, 0, 5, 1, 0, P, MCR_OK, N, 1, 0},
    {"duplicate value meta multi", FS_DUP_VALUE, 1, 5, 1, 0, P, MCR_OK, N, 1, 0},
};

#undef P
#undef T
#undef C
#undef N

typedef struct fs_wait {
    fs_server *fs;
    unsigned closed;
} fs_wait;

static int c_peer_closed(env *e, void *arg)
{
    (void)e;
    fs_wait *w = arg;
    return fs_peer_closed(w->fs) >= w->closed;
}

static int c_nothing_in_flight(env *e, void *arg)
{
    mcr_server_stats st;
    return stats_of(e->pool, arg, &st) == 0 && st.in_flight == 0;
}

/* Whether a case expects a timeout to fire (it then runs with FK_TIMEOUT). */
static int fake_times_out(const fake_case *c)
{
    return c->expect == MCR_ERR_TIMEOUT || c->alt == MCR_ERR_TIMEOUT ||
           c->alt2 == MCR_ERR_TIMEOUT;
}

static int status_ok_for(const fake_case *c, int status)
{
    return status == c->expect || status == c->alt || status == c->alt2;
}

/* The fake's value of a key. */
static int fake_value_ok(const char *key, const char *v, size_t vl)
{
    size_t kl = strlen(key);
    return v != NULL && vl == kl + 5 && memcmp(v, "fake:", 5) == 0 && memcmp(v + 5, key, kl) == 0;
}

static void fake_mt_key_cb(const mcr_result *res, void *arg)
{
    mtrack *m = arg;
    if (res->status == MCR_OK && res->reply == MCR_REPLY_HIT) {
        char k[300];
        snprintf(k, sizeof(k), "%.*s", (int)res->key_len, res->key);
        if (!fake_value_ok(k, res->value, res->value_len)) {
            m->t->foreign++;
            violation(m->t, "multi-get of \"%s\" returned \"%.*s\"", k,
                      (int)(res->value_len > 60 ? 60 : res->value_len),
                      res->value ? res->value : "");
        }
    }
    mt_key_cb(res, arg);
}

/* A scripted fake server answers the get family wrongly on its first
 * connection: the requests in flight fail (never with a wrong value), the
 * connection is closed, and the pool recovers (the fake's next connection
 * and a real server both serve). _i: the case. */
START_TEST(test_malformed_replies)
{
    const fake_case *c = &fake_cases[_i];
    env e;
    mcr_pool_options o;
    rec rs[8];
    char keys[8][32];
    fs_server *fs = fs_start(c->script, 1, (unsigned)TMS((int)c->trickle_ms));

    ck_assert_msg(fs != NULL, "fake server did not start");
    memset(rs, 0, sizeof(rs));
    memset(&e, 0, sizeof(e));
    e.n = 2;
    env_start_server(&e, 1, 0); /* a real memcached on 127.0.0.2 */
    snprintf(e.id[0], sizeof(e.id[0]), "127.0.0.1:%d", fs_port(fs));
    mcr_config *cfg = mcr_config_new();
    mcr_snapshot *s = NULL;
    ck_assert_int_eq(mcr_config_add_server(cfg, "127.0.0.1", fs_port(fs), 1, NULL), MCR_OK);
    ck_assert_int_eq(mcr_config_add_server(cfg, e.mc[1].addr, e.mc[1].port, 1, NULL), MCR_OK);
    ck_assert_int_eq(mcr_snapshot_new(cfg, 1, &s, NULL), MCR_OK);
    mcr_config_free(cfg);
    ck_assert_int_eq(mcr_router_new(s, &e.router, NULL), MCR_OK);
    mcr_snapshot_unref(s);
    env_base(&e);
    opts_init(&o);
    if (fake_times_out(c)) {
        o.request_timeout_ms = (unsigned)FK_TIMEOUT;
        o.connect_timeout_ms = (unsigned)FK_TIMEOUT;
    }
    o.protocol = c->meta ? MCR_PROTO_META : MCR_PROTO_TEXT;
    env_new_pool(&e, &o);
    e.t.raw_values = 1; /* the fake's values are "fake:<key>", checked here */

    for (int i = 0; i < c->nkeys; i++) {
        char stem[16];
        snprintf(stem, sizeof(stem), "fk%d:", i);
        key_on(&e, e.id[0], stem, keys[i], sizeof(keys[i]));
    }
    mtrack *m = NULL;
    long long t0 = mcr_test_now_ms();
    if (c->multi) {
        m = mt_new(&e.t, (size_t)c->nkeys);
        m->check_value = 0;
        for (int i = 0; i < c->nkeys; i++)
            mt_add(m, keys[i], strlen(keys[i]));
        ck_assert_int_eq(submit_multi_cb(&e, e.pool, m, MCR_OP_GET, fake_mt_key_cb), MCR_OK);
    } else {
        for (int i = 0; i < c->nkeys; i++)
            ck_assert_int_eq(submit(&e, &rs[i], &(mcr_request){.op = MCR_OP_GET, .key = keys[i],
                                                                 .key_len = strlen(keys[i])}),
                             MCR_OK);
    }
    WAIT_IDLE(&e, 60000); /* past every timeout the case has */
    long long took = mcr_test_now_ms() - t0;
    ck_assert_msg(fs_gets(fs) >= 1, "%s: the fake saw no get", c->name);

    if (c->multi) {
        mt_check(m);
        for (size_t d = 0; d < m->nd; d++)
            ck_assert_msg(status_ok_for(c, m->status[d]), "%s: multi-get key %s: status %d",
                          c->name, m->keys[m->first_of[d]], m->status[d]);
        ck_assert_msg(status_ok_for(c, m->done_status), "%s: done status %d", c->name,
                      m->done_status);
        if (c->expect != MCR_OK && c->alt != MCR_OK && c->alt2 != MCR_OK)
            ck_assert_int_eq(m->hits, 0);
    } else {
        for (int i = 0; i < c->nkeys; i++) {
            ck_assert_msg(status_ok_for(c, rs[i].status), "%s: get %d: status %d (%s) [%s]",
                          c->name, i, rs[i].status, mcr_strerror(rs[i].status), rs[i].message);
            if (rs[i].status == MCR_OK) {
                EXPECT_REPLY(&rs[i], MCR_OK, MCR_REPLY_HIT);
                ck_assert_msg(fake_value_ok(keys[i], rs[i].value, rs[i].value_len),
                              "%s: get of %s returned \"%s\"", c->name, keys[i], rs[i].value);
            } else {
                ck_assert_msg(rs[i].message[0] != '\0', "%s: no message", c->name);
                ck_assert_str_eq(rs[i].server, e.id[0]);
            }
        }
    }
    /* a prompt case fails on the bad reply, not by a timeout (of 30 s) */
    if (c->prompt)
        ck_assert_msg(took < (long long)o.request_timeout_ms / 2,
                      "%s: failed after %lld ms, not at once", c->name, took);
    /* never before the timeout: every send came after t0 (-1: the ms clock) */
    if (c->expect == MCR_ERR_TIMEOUT && c->alt == 1 && c->alt2 == 1)
        ck_assert_msg(took >= FK_TIMEOUT - 1, "%s: timed out after %lld ms, timeout %d ms",
                      c->name, took, FK_TIMEOUT);

    /* the bad connection was closed (by the pool, unless the fake did) */
    if (!c->server_closes && c->expect != MCR_OK) {
        fs_wait w = {fs, 1};
        ck_assert_msg(run_until(&e, c_peer_closed, &w, 10000),
                      "%s: the pool kept the connection open", c->name);
    }
    if (c->script == FS_UNSOLICITED) {
        fs_wait w = {fs, 1};
        ck_assert_msg(run_until(&e, c_peer_closed, &w, 10000),
                      "%s: a reply nobody asked for did not close the connection", c->name);
    }
    if (c->script == FS_TRICKLE && c->expect == MCR_OK)
        ck_assert_uint_eq(fs_peer_closed(fs), 0);
    mcr_server_stats st;
    /* a value may be delivered before the rest of its reply (END) arrives */
    ck_assert(run_until(&e, c_nothing_in_flight, e.id[0], 10000));
    ck_assert_int_eq(stats_of(e.pool, e.id[0], &st), 0);
    ck_assert_uint_eq(st.in_flight, 0);
    int failed = 0;
    if (c->multi) {
        for (size_t d = 0; d < m->nd; d++)
            failed += m->status[d] != MCR_OK;
    } else {
        for (int i = 0; i < c->nkeys; i++)
            failed += rs[i].status != MCR_OK;
    }
    if (failed > 0)
        ck_assert_msg(st.errors >= 1, "%s: %d requests failed, errors %llu", c->name, failed,
                      (unsigned long long)st.errors);

    /* recovery: the real server, then the fake's next (good) connection */
    char kb[32];
    rec r;
    memset(&r, 0, sizeof(r));
    key_on(&e, e.id[1], "real:", kb, sizeof(kb));
    EXPECT_REPLY(do1(&e, &r, rq(MCR_OP_GET, kb)), MCR_OK, MCR_REPLY_MISS);
    for (int i = 0; i < c->nkeys; i++) {
        EXPECT_REPLY(do1(&e, &r, rq(MCR_OP_GET, keys[i])), MCR_OK, MCR_REPLY_HIT);
        ck_assert_msg(fake_value_ok(keys[i], r.value, r.value_len),
                      "%s: after recovery, get of %s returned \"%s\"", c->name, keys[i], r.value);
    }
    if (c->expect != MCR_OK)
        ck_assert_uint_eq(fs_accepted(fs), 2);

    tally_ok(&e);
    rec_clear(&r);
    for (int i = 0; i < 8; i++)
        rec_clear(&rs[i]);
    mt_free(m);
    env_free(&e);
    fs_stop(fs);
}
END_TEST

/* ================================================================== reply safety */

/* A router over fake servers fs[0..n) only (ids "127.0.0.1:port", in e->id)
 * and a pool with options o. */
static void env_fakes(env *e, fs_server **fs, int n, const mcr_pool_options *o)
{
    mcr_config *cfg = mcr_config_new();
    mcr_snapshot *s = NULL;
    memset(e, 0, sizeof(*e));
    ck_assert_ptr_nonnull(cfg);
    e->n = n; /* no memcached: e->mc stays zero */
    for (int i = 0; i < n; i++) {
        ck_assert_msg(fs[i] != NULL, "fake server %d did not start", i);
        ck_assert_int_eq(mcr_config_add_server(cfg, "127.0.0.1", fs_port(fs[i]), 1, NULL),
                         MCR_OK);
        snprintf(e->id[i], sizeof(e->id[i]), "127.0.0.1:%d", fs_port(fs[i]));
    }
    ck_assert_int_eq(mcr_snapshot_new(cfg, 1, &s, NULL), MCR_OK);
    mcr_config_free(cfg);
    ck_assert_int_eq(mcr_router_new(s, &e->router, NULL), MCR_OK);
    mcr_snapshot_unref(s);
    env_base(e);
    env_new_pool(e, o);
    e->t.raw_values = 1; /* the fake's values are "fake:<key>", checked by the test */
}

static int c_fs_holding(env *e, void *arg)
{
    (void)e;
    return fs_holding(arg) != 0;
}

/* Two gets of one key share no text get line: a server that answers one
 * get with two VALUE blocks for its key cannot hand the second to the
 * other get. The fake answers each line's first key twice (the second
 * block "fake:dup:<key>"): that is a protocol error on the connection; no
 * request gets the second block, and the pool recovers. _i 0: two plain
 * gets of the key (coalescing off); 1: a multi-get and a plain get of the
 * key; 2, 3: the same in the meta protocol. */
START_TEST(test_duplicate_value)
{
    int meta = _i >= 2, with_multi = _i % 2 == 1;
    fs_server *fs = fs_start(FS_DUP_VALUE, 1, 0);
    env e;
    mcr_pool_options o;
    rec rs[2], r;
    mcr_pool_options_init(&o);
    o.no_coalesce = !with_multi; /* else the second get waits for the first's reply */
    o.protocol = meta ? MCR_PROTO_META : MCR_PROTO_TEXT;
    o.request_timeout_ms = 30000; /* not about timing */
    env_fakes(&e, &fs, 1, &o);
    memset(rs, 0, sizeof(rs));
    memset(&r, 0, sizeof(r));

    const char *k = "dupkey", *other = "dupother";
    mtrack *m = NULL;
    if (with_multi) {
        m = mt_new(&e.t, 2);
        m->check_value = 0;
        mt_add(m, k, strlen(k));
        mt_add(m, other, strlen(other));
        ck_assert_int_eq(submit_multi_cb(&e, e.pool, m, MCR_OP_GET, fake_mt_key_cb), MCR_OK);
    } else {
        ck_assert_int_eq(submit(&e, &rs[1], &(mcr_request){.op = MCR_OP_GET, .key = k,
                                                             .key_len = strlen(k)}),
                         MCR_OK);
    }
    ck_assert_int_eq(submit(&e, &rs[0], &(mcr_request){.op = MCR_OP_GET, .key = k,
                                                         .key_len = strlen(k)}),
                     MCR_OK);
    WAIT_IDLE(&e, 10000);
    tally_ok(&e);

    /* the first get of the key got its value or an error; the other get
     * never the second block */
    int protocol_errors = 0;
    for (int i = 0; i < 2; i++) {
        if (with_multi && i == 1)
            continue;
        if (rs[i].status == MCR_OK) {
            EXPECT_REPLY(&rs[i], MCR_OK, MCR_REPLY_HIT);
            ck_assert_msg(fake_value_ok(k, rs[i].value, rs[i].value_len),
                          "get %d of %s returned \"%s\"", i, k, rs[i].value);
        } else {
            ck_assert_msg(rs[i].status == MCR_ERR_PROTOCOL, "get %d: status %d (%s) [%s]", i,
                          rs[i].status, mcr_strerror(rs[i].status), rs[i].message);
            protocol_errors++;
        }
    }
    if (with_multi) {
        mt_check(m);
        for (size_t d = 0; d < m->nd; d++)
            ck_assert_msg(m->status[d] == MCR_OK || m->status[d] == MCR_ERR_PROTOCOL,
                          "multi-get key %s: status %d", m->keys[m->first_of[d]], m->status[d]);
        protocol_errors += m->done_status == MCR_ERR_PROTOCOL;
    }
    ck_assert_msg(protocol_errors >= 1, "a second VALUE for a key was not a protocol error");

    /* the connection was closed, and the fake's next one serves */
    fs_wait w = {fs, 1};
    ck_assert_msg(run_until(&e, c_peer_closed, &w, 5000), "the pool kept the connection open");
    EXPECT_REPLY(do1(&e, &r, rq(MCR_OP_GET, k)), MCR_OK, MCR_REPLY_HIT);
    ck_assert_msg(fake_value_ok(k, r.value, r.value_len), "after recovery: \"%s\"", r.value);
    ck_assert_uint_eq(fs_accepted(fs), 2);
    tally_ok(&e);

    rec_clear(&r);
    rec_clear(&rs[0]);
    rec_clear(&rs[1]);
    mt_free(m);
    env_free(&e);
    fs_stop(fs);
}
END_TEST

/* The most a read buffer may hold for a value over max_value_size: the
 * limit, one line and one read (mcroute_pool.h, max_value_size). */
#define OVER_LIMIT 100000u
#define READ_BOUND (OVER_LIMIT + 2048u + 4u + 64u * 1024u)

/* A value over max_value_size fails its key with MCR_ERR_TOO_BIG as soon
 * as its line arrives (the fake holds the rest of the 2,000,000 bytes back
 * until then), is dropped as it comes without being held, and the
 * connection stays in step: the key after it on the same reply, and the
 * next requests, are answered on the same connection. _i: text, meta. */
START_TEST(test_value_over_limit)
{
    int meta = _i == 1;
    fs_server *fs = fs_start(FS_BIG, 0, 0);
    env e;
    mcr_pool_options o;
    rec rs[2];
    mcr_pool_options_init(&o);
    o.max_value_size = OVER_LIMIT;
    o.protocol = meta ? MCR_PROTO_META : MCR_PROTO_TEXT;
    o.request_timeout_ms = 30000; /* not about timing */
    env_fakes(&e, &fs, 1, &o);
    memset(rs, 0, sizeof(rs));

    /* one text line "get big:1 sm:1" (meta: two mg), answered in order */
    ck_assert_int_eq(submit(&e, &rs[0], &(mcr_request){.op = MCR_OP_GET, .key = "big:1",
                                                         .key_len = 5}),
                     MCR_OK);
    ck_assert_int_eq(submit(&e, &rs[1], &(mcr_request){.op = MCR_OP_GET, .key = "sm:1",
                                                         .key_len = 4}),
                     MCR_OK);
    ck_assert_msg(run_until(&e, c_called, &rs[0], 10000),
                  "no result for the big value while the fake held most of it back");
    ck_assert_msg(rs[0].status == MCR_ERR_TOO_BIG, "big value: status %d (%s) [%s]",
                  rs[0].status, mcr_strerror(rs[0].status), rs[0].message);
    ck_assert_msg(strstr(rs[0].message, "2000000") != NULL, "message: %s", rs[0].message);
    ck_assert_int_eq(rs[1].calls, 0); /* its reply is behind the held bytes */
    ck_assert_msg(run_until(&e, c_fs_holding, fs, 10000), "the fake never held the value");
    run_ms(&e, 20); /* the pool reads what was sent so far */
    ck_assert_uint_le(mcr__pool_read_peak(e.pool), READ_BOUND);
    fs_release(fs);
    WAIT_IDLE(&e, 10000);
    EXPECT_REPLY(&rs[1], MCR_OK, MCR_REPLY_HIT);
    ck_assert_msg(fake_value_ok("sm:1", rs[1].value, rs[1].value_len), "sm:1: \"%s\"",
                  rs[1].value);

    /* a multi-get: the big key fails alone */
    mtrack *m = mt_new(&e.t, 2);
    m->check_value = 0;
    mt_add(m, "big:2", 5);
    mt_add(m, "sm:2", 4);
    ck_assert_int_eq(submit_multi_cb(&e, e.pool, m, MCR_OP_GET, fake_mt_key_cb), MCR_OK);
    WAIT_IDLE(&e, 10000);
    mt_check(m);
    ck_assert_int_eq(m->status[0], MCR_ERR_TOO_BIG);
    ck_assert_int_eq(m->status[1], MCR_OK);
    ck_assert_int_eq(m->reply[1], MCR_REPLY_HIT);
    ck_assert_int_eq(m->done_status, MCR_ERR_TOO_BIG);
    ck_assert_uint_eq(m->done_number, 1);

    /* never more than the bound held; one connection, never closed; the
     * server is healthy (a too-big value is an answer, not a failure) */
    ck_assert_uint_le(mcr__pool_read_peak(e.pool), READ_BOUND);
    ck_assert_uint_eq(fs_accepted(fs), 1);
    ck_assert_uint_eq(fs_peer_closed(fs), 0);
    mcr_server_stats st;
    ck_assert_int_eq(stats_of(e.pool, e.id[0], &st), 0);
    ck_assert_int_eq(st.health, MCR_HEALTH_UP);
    ck_assert_uint_eq(st.consecutive_failures, 0);
    ck_assert_uint_eq(st.errors, 2);
    ck_assert_uint_eq(st.hits, 2);
    tally_ok(&e);

    rec_clear(&rs[0]);
    rec_clear(&rs[1]);
    mt_free(m);
    env_free(&e);
    fs_stop(fs);
}
END_TEST

static int c_fs_gets(env *e, void *arg)
{
    (void)e;
    return fs_gets(((fs_wait *)arg)->fs) >= ((fs_wait *)arg)->closed;
}

/* mcr_pool_free() completes every request still pending exactly once,
 * inside the call, with MCR_ERR_CANCELLED: in flight, waiting for a
 * connection's turn, sharing another get's reply, not yet sent on a new
 * connection, and those already failed but not yet reported (a down
 * server's, a multi-get's bad key). */
START_TEST(test_free_cancels)
{
    fs_server *fs[3] = {fs_start(FS_SILENT, 0, 0), fs_start(FS_CLOSE, 0, 0),
                        fs_start(FS_SILENT, 0, 0)};
    env e;
    mcr_pool_options o;
    enum { R_DOWN_FIRST, R_FLIGHT, R_FLIGHT2, R_WAITING, R_SHARED, R_DOWN, R_NEW, R_N };
    rec rs[R_N];
    char k1[32], k1b[32], k1c[32], k2[32], k2b[32], k3[32];
    mcr_pool_options_init(&o);
    o.policy = MCR_POLICY_FAIL_FAST;
    o.server_failure_limit = 1;
    o.connections = 2;
    o.max_in_flight = 1;
    o.request_timeout_ms = 60000; /* nothing here may time out */
    o.connect_timeout_ms = 60000;
    env_fakes(&e, fs, 3, &o);
    memset(rs, 0, sizeof(rs));
    key_on(&e, e.id[0], "one:", k1, sizeof(k1));
    key_on(&e, e.id[0], "oneb:", k1b, sizeof(k1b));
    key_on(&e, e.id[0], "onec:", k1c, sizeof(k1c));
    key_on(&e, e.id[1], "two:", k2, sizeof(k2));
    key_on(&e, e.id[1], "twob:", k2b, sizeof(k2b));
    key_on(&e, e.id[2], "three:", k3, sizeof(k3));

    /* server 2 closes on a get: one failure downs it */
    EXPECT_REPLY(do1(&e, &rs[R_DOWN_FIRST], rq(MCR_OP_GET, k2)), MCR_ERR_CONNECT,
                 MCR_REPLY_HIT);
    mcr_server_stats st;
    ck_assert_int_eq(stats_of(e.pool, e.id[1], &st), 0);
    ck_assert_int_eq(st.health, MCR_HEALTH_DOWN);

    /* two gets in flight on server 1's two connections (it never answers) */
    ck_assert_int_eq(submit(&e, &rs[R_FLIGHT], &(mcr_request){.op = MCR_OP_GET, .key = k1,
                                                               .key_len = strlen(k1)}),
                     MCR_OK);
    ck_assert_int_eq(submit(&e, &rs[R_FLIGHT2], &(mcr_request){.op = MCR_OP_GET, .key = k1b,
                                                                .key_len = strlen(k1b)}),
                     MCR_OK);
    fs_wait w = {fs[0], 2};
    ck_assert_msg(run_until(&e, c_fs_gets, &w, 10000), "the fake saw %u gets of 2",
                  fs_gets(fs[0]));
    /* from here on the loop does not run until the pool is freed */
    ck_assert_int_eq(submit(&e, &rs[R_WAITING], &(mcr_request){.op = MCR_OP_GET, .key = k1c,
                                                                .key_len = strlen(k1c)}),
                     MCR_OK);
    ck_assert_int_eq(submit(&e, &rs[R_SHARED], &(mcr_request){.op = MCR_OP_GET, .key = k1,
                                                               .key_len = strlen(k1)}),
                     MCR_OK);
    ck_assert_int_eq(submit(&e, &rs[R_DOWN], &(mcr_request){.op = MCR_OP_GET, .key = k2b,
                                                             .key_len = strlen(k2b)}),
                     MCR_OK);
    ck_assert_int_eq(submit(&e, &rs[R_NEW], &(mcr_request){.op = MCR_OP_GET, .key = k3,
                                                            .key_len = strlen(k3)}),
                     MCR_OK);
    mtrack *m = mt_new(&e.t, 3);
    m->check_value = 0;
    mt_add(m, "bad key", 7);
    mt_add(m, k2, strlen(k2));
    mt_add(m, k1c, strlen(k1c));
    ck_assert_int_eq(submit_multi_cb(&e, e.pool, m, MCR_OP_GET, mt_key_cb), MCR_OK);
    for (int i = R_FLIGHT; i < R_N; i++)
        ck_assert_int_eq(rs[i].calls, 0);

    mcr_pool_free(e.pool);
    e.pool = NULL;
    for (int i = R_FLIGHT; i < R_N; i++)
        ck_assert_msg(rs[i].calls == 1 && rs[i].status == MCR_ERR_CANCELLED,
                      "request %d (%s): %d calls, status %d (%s) [%s]", i, rs[i].key,
                      rs[i].calls, rs[i].status, mcr_strerror(rs[i].status), rs[i].message);
    mt_check(m);
    for (size_t d = 0; d < m->nd; d++)
        ck_assert_msg(m->status[d] == MCR_ERR_CANCELLED, "multi-get key \"%s\": status %d (%s)",
                      m->keys[m->first_of[d]], m->status[d], mcr_strerror(m->status[d]));
    ck_assert_int_eq(m->done_status, MCR_ERR_CANCELLED);
    tally_ok(&e);

    for (int i = 0; i < R_N; i++)
        rec_clear(&rs[i]);
    mt_free(m);
    env_free(&e);
    for (int i = 0; i < 3; i++)
        fs_stop(fs[i]);
}
END_TEST

/* ================================================================== suite */

static Suite *suite(void)
{
    Suite *s = suite_create("pool_replies");
    PE_ADD_LOOP(s, malformed_replies, 0, (int)(sizeof(fake_cases) / sizeof(fake_cases[0])));
    PE_ADD_LOOP(s, duplicate_value, 0, 4);
    PE_ADD_LOOP(s, value_over_limit, 0, 2);
    PE_ADD(s, free_cancels);
    return s;
}

int main(void)
{
    /* SIGPIPE keeps its default action: the pool must never raise it */
    return tu_run(suite());
}
