/* SPDX-License-Identifier: BSD-3-Clause */
/* test_pool_basic.c: Check suite of the connection pool: round trips, every command, multi-gets, input rules, the callback contract. */
/*
 * The environment, the request tracking and the time rules are pool_env.h's.
 *
 * What is covered: round trips of thousands of keys checked on the servers
 * themselves; every command in the text and meta protocols; multi-gets;
 * key, value and option rules; the callback contract (libuv's).
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

#include "mcroute.h"
#include "mcroute_pool.h"
#include "mcroute_router.h"
#include "mcroute_snapshot.h"
#include "pool_env.h"
#include "realserver.h"
#include "testutil.h"

/* ================================================================== round trip */

/* The sample of metric `name` (with its `{...}` labels) for server id, or
 * -1 when missing; `le` NULL for a sample without one. */
static double sample(const char *text, const char *name, const char *id, const char *le)
{
    char head[400];
    int n = snprintf(head, sizeof(head), "%s{server=\"%s\"", name, id);
    for (const char *p = strstr(text, head); p != NULL; p = strstr(p + 1, head)) {
        if (p != text && p[-1] != '\n')
            continue;
        const char *end = strchr(p, '}'), *lep = strstr(p, ",le=\"");
        if (end == NULL)
            return -1;
        if (le != NULL && (lep == NULL || lep > end || strncmp(lep + 5, le, strlen(le)) != 0 ||
                           lep[5 + strlen(le)] != '"'))
            continue;
        if (le == NULL && lep != NULL && lep < end)
            continue;
        (void)n;
        return strtod(end + 1, NULL);
    }
    return -1;
}

/* mcr_pool_metrics() says what mcr_pool_server_stats() says, with the
 * labels given (escaped), and histograms that add up. */
static void check_metrics(env *e)
{
    const char *labels[] = {"pool", "web \"a\\b\"", NULL};
    char *text = NULL;
    size_t len = 0;
    mcr_error err;
    ck_assert_int_eq(mcr_pool_metrics(e->pool, labels, &text, &len, &err), MCR_OK);
    ck_assert_uint_eq(strlen(text), len);
    ck_assert_ptr_nonnull(strstr(text, ",pool=\"web \\\"a\\\\b\\\"\"}"));
    for (size_t i = 0; i < mcr_pool_server_count(e->pool); i++) {
        mcr_server_stats st;
        ck_assert_int_eq(mcr_pool_server_stats(e->pool, i, &st), MCR_OK);
        ck_assert(sample(text, "mcroute_server_requests_total", st.id, NULL) == (double)st.requests);
        ck_assert(sample(text, "mcroute_server_hits_total", st.id, NULL) == (double)st.hits);
        ck_assert(sample(text, "mcroute_server_misses_total", st.id, NULL) == (double)st.misses);
        ck_assert(sample(text, "mcroute_server_up", st.id, NULL) == 1);
        double count = sample(text, "mcroute_server_request_duration_seconds_count", st.id, NULL);
        ck_assert(count == (double)st.latency_count && count > 0);
        ck_assert(sample(text, "mcroute_server_request_duration_seconds_bucket", st.id, "+Inf") ==
                  count);
        double prev = 0;
        static const char *const les[] = {"5e-05", "0.0001", "0.00025", "0.0005", "0.001",
                                          "0.0025", "0.005", "0.01", "0.025", "0.05", "0.1",
                                          "0.25", "0.5", "1", "2.5", "5"};
        for (size_t b = 0; b < sizeof(les) / sizeof(les[0]); b++) {
            double v = sample(text, "mcroute_server_request_duration_seconds_bucket", st.id, les[b]);
            ck_assert_msg(v >= prev && v <= count, "bucket le=%s: %g after %g of %g", les[b], v,
                          prev, count);
            prev = v;
        }
        ck_assert(prev > 0); /* loopback replies come well within 5 s */
    }
    free(text);
    const char *bad[] = {"le", "x", NULL};
    ck_assert_int_eq(mcr_pool_metrics(e->pool, bad, &text, NULL, &err), MCR_ERR_INVALID);
    const char *bad2[] = {"9x", "x", NULL};
    ck_assert_int_eq(mcr_pool_metrics(e->pool, bad2, &text, NULL, &err), MCR_ERR_INVALID);
}

#define RT_KEYS 3000

/* Thousands of sets then gets, all submitted before the loop runs (so they
 * are pipelined), values of several sizes encoding their key; then the raw
 * client finds each key on the server mcr_snapshot_locate() names, and on
 * no other. _i: the protocol. */
START_TEST(test_round_trip)
{
    env e;
    mcr_pool_options o;
    tu_rng rng;
    static char keys[RT_KEYS][64];
    size_t lens[RT_KEYS];
    int owner[RT_KEYS];
    char *val = malloc(8192);
    rec *sets = calloc(RT_KEYS, sizeof(rec)), *gets = calloc(RT_KEYS, sizeof(rec));

    ck_assert(val && sets && gets);
    tu_rng_init(&rng, 101 + (uint64_t)_i);
    opts_init(&o);
    o.protocol = _i ? MCR_PROTO_META : MCR_PROTO_TEXT;
    env_init(&e, 3, &o);

    for (int i = 0; i < RT_KEYS; i++) {
        char tail[40];
        tu_key(&rng, tail, 30);
        lens[i] = (size_t)snprintf(keys[i], sizeof(keys[i]), "rt:%d:%s", i, tail);
        owner[i] = owner_of(e.router, keys[i], lens[i]);
    }
    for (int i = 0; i < RT_KEYS; i++) {
        size_t pad = i % 97 == 0 ? 5000 : (size_t)(i % 40);
        size_t vl = make_value(val, 8192, keys[i], lens[i], (unsigned)i, pad);
        mcr_request q = rq(MCR_OP_SET, keys[i]);
        q.value = val;
        q.value_len = vl;
        q.flags = (uint32_t)i * 7u;
        ck_assert_int_eq(submit(&e, &sets[i], &q), MCR_OK);
    }
    ck_assert_uint_eq(mcr_pool_pending(e.pool), RT_KEYS);
    WAIT_IDLE(&e, 15000);
    for (int i = 0; i < RT_KEYS; i++) {
        EXPECT_REPLY(&sets[i], MCR_OK, MCR_REPLY_STORED);
        ck_assert_str_eq(sets[i].server, e.id[owner[i]]);
        ck_assert_uint_eq(sets[i].epoch, 1);
    }

    for (int i = 0; i < RT_KEYS; i++) {
        mcr_request q = rq(MCR_OP_GET, keys[i]);
        ck_assert_int_eq(submit(&e, &gets[i], &q), MCR_OK);
    }
    WAIT_IDLE(&e, 15000);
    for (int i = 0; i < RT_KEYS; i++) {
        size_t pad = i % 97 == 0 ? 5000 : (size_t)(i % 40);
        size_t vl = make_value(val, 8192, keys[i], lens[i], (unsigned)i, pad);
        EXPECT_REPLY(&gets[i], MCR_OK, MCR_REPLY_HIT);
        ck_assert_uint_eq(gets[i].value_len, vl);
        ck_assert(memcmp(gets[i].value, val, vl) == 0);
        ck_assert_uint_eq(gets[i].flags, (uint32_t)i * 7u);
        ck_assert_str_eq(gets[i].server, e.id[owner[i]]);
    }

    /* Where the keys really are. */
    const char *kp[RT_KEYS];
    unsigned char *hit = malloc(RT_KEYS);
    ck_assert_ptr_nonnull(hit);
    for (int i = 0; i < RT_KEYS; i++)
        kp[i] = keys[i];
    for (int s = 0; s < e.n; s++) {
        char err[256] = "";
        int fd = raw_fd(&e, s);
        ck_assert_msg(rs_mc_hits(fd, kp, lens, RT_KEYS, hit, IO_MS, err, sizeof(err)) == 0,
                      "%s", err);
        close(fd);
        int held = 0;
        for (int i = 0; i < RT_KEYS; i++) {
            ck_assert_msg(hit[i] == (owner[i] == s), "key %s: on %s %d, owner %s", keys[i],
                          e.id[s], hit[i], e.id[owner[i]]);
            held += hit[i];
        }
        ck_assert_int_gt(held, RT_KEYS / 10); /* the keys are spread */
    }
    free(hit);
    check_metrics(&e);
    tally_ok(&e);
    env_free(&e);
    recs_free(sets, RT_KEYS);
    recs_free(gets, RT_KEYS);
    free(val);
}
END_TEST

/* ================================================================== commands */

/* Every command in both protocols (_i 0: text, 1: meta), keyed ones routed
 * by key or sent to a named server, server commands by id. */
START_TEST(test_commands)
{
    env e;
    mcr_pool_options o;
    rec r;
    char buf[2048];
    memset(&r, 0, sizeof(r));
    opts_init(&o);
    o.protocol = _i ? MCR_PROTO_META : MCR_PROTO_TEXT;
    env_init(&e, 2, &o);
    e.t.raw_values = 1; /* values here are checked one by one */

    const char *k = "cmd:k", *miss = "cmd:missing", *num = "cmd:n";
    int ko = env_index(&e, owner_id(&e, k));
    int fd[2] = {raw_fd(&e, 0), raw_fd(&e, 1)};

    /* flags: all 32 bits; a value that looks like protocol */
    const char *tricky = "x\r\nEND\r\nVALUE cmd:k 0 1\r\nz\r\nEN\r\nHD O1\r\n";
    EXPECT_REPLY(do1(&e, &r, rq_store(MCR_OP_SET, "cmd:flags", tricky, 0xffffffffu)), MCR_OK,
           MCR_REPLY_STORED);
    EXPECT_REPLY(do1(&e, &r, rq(MCR_OP_GET, "cmd:flags")), MCR_OK, MCR_REPLY_HIT);
    EXPECT_VALUE(&r, tricky);
    ck_assert_uint_eq(r.flags, 0xffffffffu);
    EXPECT_REPLY(do1(&e, &r, rq(MCR_OP_GETS, "cmd:flags")), MCR_OK, MCR_REPLY_HIT);
    EXPECT_VALUE(&r, tricky);
    ck_assert_uint_eq(r.flags, 0xffffffffu);

    /* delete / get of a missing key */
    EXPECT_REPLY(do1(&e, &r, rq(MCR_OP_DELETE, k)), MCR_OK, MCR_REPLY_MISS);
    ck_assert_str_eq(r.server, e.id[ko]);
    EXPECT_REPLY(do1(&e, &r, rq(MCR_OP_GET, k)), MCR_OK, MCR_REPLY_MISS);
    ck_assert_ptr_null(r.value);
    EXPECT_REPLY(do1(&e, &r, rq(MCR_OP_GETS, k)), MCR_OK, MCR_REPLY_MISS);

    /* add, replace, append, prepend */
    EXPECT_REPLY(do1(&e, &r, rq_store(MCR_OP_ADD, k, "v1", 7)), MCR_OK, MCR_REPLY_STORED);
    EXPECT_REPLY(do1(&e, &r, rq_store(MCR_OP_ADD, k, "v1b", 7)), MCR_OK, MCR_REPLY_NOT_STORED);
    EXPECT_REPLY(do1(&e, &r, rq(MCR_OP_GET, k)), MCR_OK, MCR_REPLY_HIT);
    EXPECT_VALUE(&r, "v1");
    ck_assert_uint_eq(r.flags, 7);
    EXPECT_REPLY(do1(&e, &r, rq_store(MCR_OP_REPLACE, k, "v2", 8)), MCR_OK, MCR_REPLY_STORED);
    EXPECT_REPLY(do1(&e, &r, rq_store(MCR_OP_REPLACE, miss, "x", 0)), MCR_OK, MCR_REPLY_NOT_STORED);
    EXPECT_REPLY(do1(&e, &r, rq_store(MCR_OP_APPEND, k, "+a", 0)), MCR_OK, MCR_REPLY_STORED);
    EXPECT_REPLY(do1(&e, &r, rq_store(MCR_OP_PREPEND, k, "p-", 0)), MCR_OK, MCR_REPLY_STORED);
    EXPECT_REPLY(do1(&e, &r, rq_store(MCR_OP_APPEND, miss, "x", 0)), MCR_OK, MCR_REPLY_NOT_STORED);
    EXPECT_REPLY(do1(&e, &r, rq_store(MCR_OP_PREPEND, miss, "x", 0)), MCR_OK, MCR_REPLY_NOT_STORED);
    ck_assert_int_eq(rs_mc_get(fd[ko], k, buf, sizeof(buf), IO_MS), 1);
    ck_assert_str_eq(buf, "p-v2+a");
    ck_assert_int_eq(rs_mc_get(fd[ko], miss, buf, sizeof(buf), IO_MS), 0);

    /* gets and cas: match, then mismatch */
    rec g;
    memset(&g, 0, sizeof(g));
    do1(&e, &g, rq(MCR_OP_GETS, k));
    EXPECT_REPLY(&g, MCR_OK, MCR_REPLY_HIT);
    EXPECT_VALUE(&g, "p-v2+a");
    ck_assert_uint_eq(g.flags, 8);
    ck_assert_uint_ne(g.cas, 0);
    uint64_t cas1 = g.cas;
    mcr_request q = rq_store(MCR_OP_CAS, k, "v3", 9);
    q.cas = cas1;
    EXPECT_REPLY(do1(&e, &r, q), MCR_OK, MCR_REPLY_STORED);
    q.value = "v4";
    q.value_len = 2;
    EXPECT_REPLY(do1(&e, &r, q), MCR_OK, MCR_REPLY_EXISTS);
    do1(&e, &g, rq(MCR_OP_GETS, k));
    EXPECT_REPLY(&g, MCR_OK, MCR_REPLY_HIT);
    EXPECT_VALUE(&g, "v3");
    ck_assert_uint_eq(g.flags, 9);
    ck_assert_uint_ne(g.cas, 0);
    ck_assert_uint_ne(g.cas, cas1);
    /* cas of a missing key: memcached says NOT_FOUND (meta: NF); the header
     * lists MISS as "no such key". NOT_STORED would also be defensible. */
    q = rq_store(MCR_OP_CAS, miss, "x", 0);
    q.cas = cas1;
    do1(&e, &r, q);
    ck_assert_msg(r.status == MCR_OK &&
                      (r.reply == MCR_REPLY_MISS || r.reply == MCR_REPLY_NOT_STORED),
                  "cas of a missing key: status %d reply %s", r.status, mcr_reply_name(r.reply));
    ck_assert_int_eq(rs_mc_get(fd[ko], miss, buf, sizeof(buf), IO_MS), 0);

    /* gat, gats, touch: value and the new TTL */
    q = rq(MCR_OP_GAT, k);
    q.exptime = 1000;
    EXPECT_REPLY(do1(&e, &r, q), MCR_OK, MCR_REPLY_HIT);
    EXPECT_VALUE(&r, "v3");
    ck_assert_uint_eq(r.flags, 9);
    ck_assert_int_eq(rs_mc_line(fd[ko], "mg cmd:k t", buf, sizeof(buf), IO_MS), 0);
    ck_assert_msg(strcmp(buf, "HD t1000\r\n") == 0 || strcmp(buf, "HD t999\r\n") == 0,
                  "after gat 1000: %s", buf);
    q = rq(MCR_OP_GATS, k);
    q.exptime = 2000;
    EXPECT_REPLY(do1(&e, &r, q), MCR_OK, MCR_REPLY_HIT);
    EXPECT_VALUE(&r, "v3");
    ck_assert_uint_ne(r.cas, 0);
    ck_assert_int_eq(rs_mc_line(fd[ko], "mg cmd:k t", buf, sizeof(buf), IO_MS), 0);
    ck_assert_msg(strcmp(buf, "HD t2000\r\n") == 0 || strcmp(buf, "HD t1999\r\n") == 0,
                  "after gats 2000: %s", buf);
    q = rq(MCR_OP_TOUCH, k);
    q.exptime = 3000;
    EXPECT_REPLY(do1(&e, &r, q), MCR_OK, MCR_REPLY_TOUCHED);
    ck_assert_int_eq(rs_mc_line(fd[ko], "mg cmd:k t", buf, sizeof(buf), IO_MS), 0);
    ck_assert_msg(strcmp(buf, "HD t3000\r\n") == 0 || strcmp(buf, "HD t2999\r\n") == 0,
                  "after touch 3000: %s", buf);
    q = rq(MCR_OP_TOUCH, miss);
    q.exptime = 10;
    EXPECT_REPLY(do1(&e, &r, q), MCR_OK, MCR_REPLY_MISS);
    q.op = MCR_OP_GAT;
    EXPECT_REPLY(do1(&e, &r, q), MCR_OK, MCR_REPLY_MISS);
    q.op = MCR_OP_GATS;
    EXPECT_REPLY(do1(&e, &r, q), MCR_OK, MCR_REPLY_MISS);

    /* incr / decr */
    EXPECT_REPLY(do1(&e, &r, rq_store(MCR_OP_SET, num, "10", 0)), MCR_OK, MCR_REPLY_STORED);
    q = rq(MCR_OP_INCR, num);
    q.delta = 5;
    EXPECT_REPLY(do1(&e, &r, q), MCR_OK, MCR_REPLY_NUMBER);
    ck_assert_uint_eq(r.number, 15);
    q.op = MCR_OP_DECR;
    q.delta = 20;
    EXPECT_REPLY(do1(&e, &r, q), MCR_OK, MCR_REPLY_NUMBER);
    ck_assert_uint_eq(r.number, 0); /* memcached stops at 0 */
    q.op = MCR_OP_INCR;
    q.delta = 18446744073709551615ull;
    EXPECT_REPLY(do1(&e, &r, q), MCR_OK, MCR_REPLY_NUMBER);
    ck_assert_uint_eq(r.number, 18446744073709551615ull);
    q.delta = 3;
    EXPECT_REPLY(do1(&e, &r, q), MCR_OK, MCR_REPLY_NUMBER); /* 64-bit wrap */
    ck_assert_uint_eq(r.number, 2);
    ck_assert_int_eq(rs_mc_get(fd[env_index(&e, owner_id(&e, num))], num, buf, sizeof(buf), IO_MS), 1);
    ck_assert_uint_eq(strtoull(buf, NULL, 10), 2); /* memcached pads a shorter number */
    q = rq(MCR_OP_INCR, miss);
    q.delta = 1;
    EXPECT_REPLY(do1(&e, &r, q), MCR_OK, MCR_REPLY_MISS);
    q.op = MCR_OP_DECR;
    EXPECT_REPLY(do1(&e, &r, q), MCR_OK, MCR_REPLY_MISS);
    q = rq(MCR_OP_INCR, k); /* "v3" is no number: the server refuses */
    q.delta = 1;
    do1(&e, &r, q);
    ck_assert_msg(r.status == MCR_ERR_SERVER, "incr of a non-number: %d (%s)", r.status,
                  r.message);
    ck_assert(r.message[0] != '\0');
    /* the connection is still usable after a server error */
    EXPECT_REPLY(do1(&e, &r, rq(MCR_OP_GET, k)), MCR_OK, MCR_REPLY_HIT);
    EXPECT_VALUE(&r, "v3");

    /* delete hit, then miss */
    EXPECT_REPLY(do1(&e, &r, rq(MCR_OP_DELETE, k)), MCR_OK, MCR_REPLY_DELETED);
    EXPECT_REPLY(do1(&e, &r, rq(MCR_OP_GET, k)), MCR_OK, MCR_REPLY_MISS);
    EXPECT_REPLY(do1(&e, &r, rq(MCR_OP_DELETE, k)), MCR_OK, MCR_REPLY_MISS);
    ck_assert_int_eq(rs_mc_get(fd[ko], k, buf, sizeof(buf), IO_MS), 0);

    /* server commands, by id */
    for (int s = 0; s < 2; s++) {
        char want[128], line[160];
        ck_assert_int_eq(rs_mc_line(fd[s], "version", buf, sizeof(buf), IO_MS), 0);
        ck_assert(strncmp(buf, "VERSION ", 8) == 0);
        snprintf(want, sizeof(want), "%.*s", (int)strlen(buf) - 10, buf + 8);

        q = rq(MCR_OP_VERSION, NULL);
        q.server = e.id[s];
        EXPECT_REPLY(do1(&e, &r, q), MCR_OK, MCR_REPLY_VERSION);
        EXPECT_VALUE(&r, want);
        ck_assert_str_eq(r.server, e.id[s]);

        q.op = MCR_OP_STATS;
        EXPECT_REPLY(do1(&e, &r, q), MCR_OK, MCR_REPLY_STATS);
        snprintf(line, sizeof(line), "pid %d", (int)e.mc[s].pid);
        ck_assert_msg(stat_line(&r, line), "stats of %s lack \"%s\": %.200s", e.id[s], line,
                      r.value ? r.value : "(null)");
        ck_assert_str_eq(r.server, e.id[s]);
        q.key = "slabs";
        q.key_len = 5;
        EXPECT_REPLY(do1(&e, &r, q), MCR_OK, MCR_REPLY_STATS);
        ck_assert_msg(r.value != NULL && strstr(r.value, "active_slabs ") != NULL,
                      "stats slabs: %.200s", r.value ? r.value : "(null)");
        ck_assert_msg(strstr(r.value, "STAT") == NULL && strstr(r.value, "END") == NULL,
                      "stats value holds protocol words: %.200s", r.value);

        q = rq(MCR_OP_NOOP, NULL);
        q.server = e.id[s];
        EXPECT_REPLY(do1(&e, &r, q), MCR_OK, MCR_REPLY_OK);
        ck_assert_str_eq(r.server, e.id[s]);
    }

    /* a keyed op with `server` goes to that server */
    int other = 1 - ko;
    q = rq_store(MCR_OP_SET, "cmd:pinned", "val|cmd:pinned|1|", 3);
    int pin_owner = env_index(&e, owner_id(&e, "cmd:pinned"));
    q.server = e.id[1 - pin_owner];
    EXPECT_REPLY(do1(&e, &r, q), MCR_OK, MCR_REPLY_STORED);
    ck_assert_str_eq(r.server, e.id[1 - pin_owner]);
    ck_assert_int_eq(rs_mc_get(fd[1 - pin_owner], "cmd:pinned", buf, sizeof(buf), IO_MS), 1);
    ck_assert_int_eq(rs_mc_get(fd[pin_owner], "cmd:pinned", buf, sizeof(buf), IO_MS), 0);
    q = rq(MCR_OP_GET, "cmd:pinned");
    q.server = e.id[1 - pin_owner];
    EXPECT_REPLY(do1(&e, &r, q), MCR_OK, MCR_REPLY_HIT);
    EXPECT_VALUE(&r, "val|cmd:pinned|1|");
    q.server = NULL;
    EXPECT_REPLY(do1(&e, &r, q), MCR_OK, MCR_REPLY_MISS);
    ck_assert_str_eq(r.server, e.id[pin_owner]);

    /* flush_all empties one server only */
    ck_assert_int_eq(rs_mc_set(fd[0], "cmd:f0", "a", IO_MS), 0);
    ck_assert_int_eq(rs_mc_set(fd[1], "cmd:f1", "b", IO_MS), 0);
    q = rq(MCR_OP_FLUSH_ALL, NULL);
    q.server = e.id[other];
    EXPECT_REPLY(do1(&e, &r, q), MCR_OK, MCR_REPLY_OK);
    ck_assert_int_eq(rs_mc_get(fd[other], other == 0 ? "cmd:f0" : "cmd:f1", buf, sizeof(buf), IO_MS), 0);
    ck_assert_int_eq(rs_mc_get(fd[ko], ko == 0 ? "cmd:f0" : "cmd:f1", buf, sizeof(buf), IO_MS), 1);

    /* flush_all with a delay: nothing is flushed yet */
    ck_assert_int_eq(rs_mc_set(fd[ko], "cmd:later", "c", IO_MS), 0);
    q = rq(MCR_OP_FLUSH_ALL, NULL);
    q.server = e.id[ko];
    q.exptime = 100;
    EXPECT_REPLY(do1(&e, &r, q), MCR_OK, MCR_REPLY_OK);
    ck_assert_int_eq(rs_mc_get(fd[ko], "cmd:later", buf, sizeof(buf), IO_MS), 1);

    /* server commands need a server of the snapshot */
    rec bad;
    memset(&bad, 0, sizeof(bad));
    q = rq(MCR_OP_VERSION, NULL);
    ck_assert_int_eq(submit(&e, &bad, &q), MCR_ERR_INVALID);
    q.server = "127.0.0.9:1";
    ck_assert_int_eq(submit(&e, &bad, &q), MCR_ERR_UNKNOWN);
    q = rq(MCR_OP_GET, "cmd:x");
    q.server = "127.0.0.9:1";
    ck_assert_int_eq(submit(&e, &bad, &q), MCR_ERR_UNKNOWN);
    run_ms(&e, 50);

    close(fd[0]);
    close(fd[1]);
    tally_ok(&e);
    rec_clear(&r);
    rec_clear(&g);
    rec_clear(&bad);
    env_free(&e);
}
END_TEST

/* ================================================================== multi-get */

#define MG_KEYS 400

/* Hundreds of keys over three servers, hits and misses, duplicates and one
 * bad key. _i: bit 0 the protocol, bit 1 gets instead of get. */
START_TEST(test_get_multi)
{
    env e;
    mcr_pool_options o;
    tu_rng rng;
    char keys[MG_KEYS][48], val[128];
    rec *sets = calloc(MG_KEYS, sizeof(rec));
    mcr_op op = (_i & 2) ? MCR_OP_GETS : MCR_OP_GET;

    ck_assert_ptr_nonnull(sets);
    tu_rng_init(&rng, 202 + (uint64_t)_i);
    opts_init(&o);
    o.protocol = (_i & 1) ? MCR_PROTO_META : MCR_PROTO_TEXT;
    env_init(&e, 3, &o);

    /* every key but each fourth is stored */
    for (int i = 0; i < MG_KEYS; i++) {
        char tail[24];
        tu_key(&rng, tail, 20);
        snprintf(keys[i], sizeof(keys[i]), "mg:%d:%s", i, tail);
        if (i % 4 != 0) {
            mcr_request q = rq(MCR_OP_SET, keys[i]);
            q.value = val;
            q.value_len = make_value(val, sizeof(val), keys[i], strlen(keys[i]), (unsigned)i, 3);
            ck_assert_int_eq(submit(&e, &sets[i], &q), MCR_OK);
        }
    }
    WAIT_IDLE(&e, 10000);
    for (int i = 0; i < MG_KEYS; i++)
        if (i % 4 != 0)
            EXPECT_REPLY(&sets[i], MCR_OK, MCR_REPLY_STORED);

    /* the keys, 20 duplicates and a bad key, shuffled */
    size_t order[MG_KEYS + 21];
    size_t n = 0;
    for (size_t i = 0; i < MG_KEYS; i++)
        order[n++] = i;
    for (size_t i = 0; i < 20; i++)
        order[n++] = i * 7;
    order[n++] = SIZE_MAX; /* the bad key */
    for (size_t i = n - 1; i > 0; i--) {
        size_t j = tu_below(&rng, (uint32_t)(i + 1)), x = order[i];
        order[i] = order[j];
        order[j] = x;
    }
    mtrack *m = mt_new(&e.t, n);
    for (size_t i = 0; i < n; i++) {
        if (order[i] == SIZE_MAX)
            mt_add(m, "bad key", 7);
        else
            mt_add(m, keys[order[i]], strlen(keys[order[i]]));
    }
    ck_assert_int_eq(submit_multi(&e, e.pool, m, op), MCR_OK);
    ck_assert_msg(run_until(&e, c_mt_done, m, 10000), "multi-get: no done_cb in 10 s");
    run_ms(&e, 20); /* late or repeated callbacks would show now */
    mt_check(m);
    long distinct_hits = 0, occurrence_hits = 0;
    for (size_t d = 0; d < m->nd; d++) {
        const char *key = m->keys[m->first_of[d]];
        if (strcmp(key, "bad key") == 0) {
            ck_assert_msg(m->status[d] == MCR_ERR_KEY, "bad key: status %d", m->status[d]);
            continue;
        }
        int i = atoi(key + 3);
        ck_assert_msg(m->status[d] == MCR_OK, "%s: status %d", key, m->status[d]);
        if (i % 4 == 0) {
            ck_assert_msg(m->reply[d] == MCR_REPLY_MISS, "%s: %s, not stored", key,
                          mcr_reply_name((mcr_reply)m->reply[d]));
        } else {
            ck_assert_msg(m->reply[d] == MCR_REPLY_HIT, "%s: %s, stored", key,
                          mcr_reply_name((mcr_reply)m->reply[d]));
            if (op == MCR_OP_GETS)
                ck_assert_uint_ne(m->cas[d], 0);
            distinct_hits++;
            occurrence_hits += m->want[d];
        }
    }
    /* the first error met: the bad key's */
    ck_assert_int_eq(m->done_status, MCR_ERR_KEY);
    ck_assert_uint_eq(m->done_key_len, 0);
    /* "the count of hits": per occurrence or per distinct key, the header
     * does not say which */
    ck_assert_msg(m->done_number == (uint64_t)occurrence_hits ||
                      m->done_number == (uint64_t)distinct_hits,
                  "done number %llu; hits %ld (%ld distinct)",
                  (unsigned long long)m->done_number, occurrence_hits, distinct_hits);
    mt_free(m);

    /* all good keys: MCR_OK and the exact hit count */
    m = mt_new(&e.t, MG_KEYS);
    for (int i = 0; i < MG_KEYS; i++)
        mt_add(m, keys[i], strlen(keys[i]));
    ck_assert_int_eq(submit_multi(&e, e.pool, m, op), MCR_OK);
    ck_assert(run_until(&e, c_mt_done, m, 10000));
    mt_check(m);
    ck_assert_int_eq(m->done_status, MCR_OK);
    ck_assert_uint_eq(m->done_number, MG_KEYS - MG_KEYS / 4);
    ck_assert_int_eq(m->hits, MG_KEYS - MG_KEYS / 4);
    mt_free(m);

    /* one key only, and that one bad: still called back, later */
    m = mt_new(&e.t, 1);
    mt_add(m, "", 0);
    ck_assert_int_eq(submit_multi(&e, e.pool, m, op), MCR_OK);
    ck_assert_int_eq(m->key_calls, 0);
    ck_assert(run_until(&e, c_mt_done, m, 5000));
    mt_check(m);
    ck_assert_int_eq(m->status[0], MCR_ERR_KEY);
    ck_assert_int_eq(m->done_status, MCR_ERR_KEY);
    mt_free(m);

    /* refused: no callback at all */
    m = mt_new(&e.t, 2);
    mt_add(m, keys[1], strlen(keys[1]));
    mt_add(m, keys[2], strlen(keys[2]));
    g_submitting++;
    mcr_error err;
    ck_assert_int_eq(mcr_pool_get_multi(e.pool, op, (const void *const *)m->keys, m->lens, 0,
                                        mt_key_cb, mt_done_cb, m, &err),
                     MCR_ERR_INVALID);
    ck_assert_msg(strstr(err.message, "n is 0") != NULL, "%s", err.message);
    ck_assert_int_eq(mcr_pool_get_multi(e.pool, MCR_OP_SET, (const void *const *)m->keys,
                                        m->lens, 2, mt_key_cb, mt_done_cb, m, &err),
                     MCR_ERR_INVALID);
    ck_assert_msg(strstr(err.message, "op set, not get or gets") != NULL, "%s", err.message);
    ck_assert_int_eq(mcr_pool_get_multi(e.pool, MCR_OP_GAT, (const void *const *)m->keys,
                                        m->lens, 2, mt_key_cb, mt_done_cb, m, NULL),
                     MCR_ERR_INVALID);
    ck_assert_int_eq(mcr_pool_get_multi(e.pool, op, NULL, m->lens, 2, mt_key_cb, mt_done_cb, m, NULL),
                     MCR_ERR_INVALID);
    ck_assert_int_eq(mcr_pool_get_multi(e.pool, op, (const void *const *)m->keys, NULL, 2,
                                        mt_key_cb, mt_done_cb, m, NULL),
                     MCR_ERR_INVALID);
    ck_assert_int_eq(mcr_pool_get_multi(e.pool, op, (const void *const *)m->keys, m->lens, 2,
                                        NULL, mt_done_cb, m, NULL),
                     MCR_ERR_INVALID);
    ck_assert_int_eq(mcr_pool_get_multi(e.pool, op, (const void *const *)m->keys, m->lens, 2,
                                        mt_key_cb, NULL, m, NULL),
                     MCR_ERR_INVALID);
    ck_assert_int_eq(mcr_pool_get_multi(NULL, op, (const void *const *)m->keys, m->lens, 2,
                                        mt_key_cb, mt_done_cb, m, NULL),
                     MCR_ERR_INVALID);
    g_submitting--;
    m->refused = MCR_ERR_INVALID;
    run_ms(&e, 50);
    ck_assert_int_eq(m->key_calls, 0);
    ck_assert_int_eq(m->done_calls, 0);
    mt_free(m);

    tally_ok(&e);
    env_free(&e);
    recs_free(sets, MG_KEYS);
}
END_TEST

/* ================================================================== input rules */

/* Every keyed op refuses key `k` with MCR_ERR_KEY, before anything is sent. */
static void refuse_key(env *e, mcr_pool *p, const char *k, size_t len, rec *r)
{
    static const mcr_op ops[] = {MCR_OP_GET,    MCR_OP_GETS,    MCR_OP_GAT,  MCR_OP_GATS,
                                 MCR_OP_SET,    MCR_OP_ADD,     MCR_OP_REPLACE,
                                 MCR_OP_APPEND, MCR_OP_PREPEND, MCR_OP_CAS,  MCR_OP_DELETE,
                                 MCR_OP_INCR,   MCR_OP_DECR,    MCR_OP_TOUCH};
    for (size_t i = 0; i < sizeof(ops) / sizeof(ops[0]); i++) {
        mcr_request q = rq_store(ops[i], NULL, "val", 0);
        q.key = k;
        q.key_len = len;
        q.delta = 1;
        q.cas = 1;
        int rc = submit_to(e, p, r, &q);
        ck_assert_msg(rc == MCR_ERR_KEY, "%s of a bad key (%zu bytes, byte 1 = 0x%02x): %d",
                      mcr_op_name(ops[i]), len, len > 1 ? (unsigned char)k[1] : 0, rc);
    }
    g_submitting++;
    mcr_error err;
    ck_assert_int_eq(mcr_pool_get(p, k, len, rec_cb, ticket_for(&e->t, r), &err), MCR_ERR_KEY);
    ck_assert_int_eq(err.code, MCR_ERR_KEY);
    ck_assert_int_eq(mcr_pool_set(p, k, len, "v", 1, 0, 0, rec_cb, ticket_for(&e->t, r), NULL),
                     MCR_ERR_KEY);
    ck_assert_int_eq(mcr_pool_delete(p, k, len, rec_cb, ticket_for(&e->t, r), NULL), MCR_ERR_KEY);
    g_submitting--;
}

/* Key and value rules, the key prefix on the wire, option checks, an empty
 * router, the name functions. */
START_TEST(test_input_rules)
{
    env e;
    mcr_pool_options o;
    rec r, *rs = calloc(64, sizeof(rec));
    char buf[600], big[300];
    mcr_error err;

    ck_assert_ptr_nonnull(rs);
    memset(&r, 0, sizeof(r));
    opts_init(&o);
    o.max_value_size = 1000;
    o.protocol = _i ? MCR_PROTO_META : MCR_PROTO_TEXT;
    env_init(&e, 3, &o);

    /* reserved areas (mcroute.h): refused unless zero */
    {
        mcr_pool_options ro = o;
        mcr_pool *np = NULL;
        ro.reserved[7] = 1;
        ck_assert_int_eq(mcr_pool_new(e.base, e.router, &ro, &np, &err), MCR_ERR_INVALID);
        ck_assert_ptr_null(np);
        ck_assert_ptr_nonnull(strstr(err.message, "mcr_pool_options: the reserved area"));
        mcr_request rq;
        memset(&rq, 0, sizeof(rq));
        rq.op = MCR_OP_GET;
        rq.key = "k";
        rq.key_len = 1;
        rq.reserved[0] = 1;
        ck_assert_int_eq(mcr_pool_submit(e.pool, &rq, rec_cb, ticket_for(&e.t, &r), &err),
                         MCR_ERR_INVALID);
        ck_assert_ptr_nonnull(strstr(err.message, "mcr_request: the reserved area"));
        ck_assert_int_eq(r.calls, 0);
        mcr_server_stats st;
        memset(&st, 0xa5, sizeof(st));
        ck_assert_int_eq(mcr_pool_server_stats(e.pool, 0, &st), MCR_OK);
        ck_assert(mcr_test_zeroed(st.reserved, sizeof(st.reserved)));
    }

    /* bad keys */
    memset(big, 'a', sizeof(big));
    refuse_key(&e, e.pool, "", 0, &r);
    refuse_key(&e, e.pool, big, 251, &r);
    refuse_key(&e, e.pool, big, 290, &r);
    static const char bad_bytes[] = {' ', '\r', '\n', '\0', 0x7f, '\t', 0x01, 0x1f};
    for (size_t i = 0; i < sizeof(bad_bytes); i++) {
        char k[4] = {'a', bad_bytes[i], 'b', 0};
        refuse_key(&e, e.pool, k, 3, &r);
        k[0] = bad_bytes[i]; /* first byte */
        refuse_key(&e, e.pool, k, 3, &r);
        char k250[250];
        memset(k250, 'z', sizeof(k250));
        k250[249] = bad_bytes[i]; /* last byte of the longest key */
        refuse_key(&e, e.pool, k250, 250, &r);
    }
    /* "get a b": a key cannot inject a command */
    refuse_key(&e, e.pool, "x 0 0 1\r\nset y", 14, &r);

    /* good edge keys: 250 bytes, bytes over 0x7f, punctuation */
    memset(big, 'k', 250);
    memcpy(big, "ok:", 3);
    big[250] = '\0';
    const char *good[] = {big, "ok:\xc3\xa9t\xc3\xa9", "ok:!#$%&'()*+,-./:;<=>?@[\\]^_`{|}~", "o"};
    for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
        char v[600];
        mcr_request q = rq(MCR_OP_SET, good[i]);
        q.value = v;
        q.value_len = make_value(v, sizeof(v), good[i], strlen(good[i]), 1, 0);
        EXPECT_REPLY(do1(&e, &rs[0], q), MCR_OK, MCR_REPLY_STORED);
        EXPECT_REPLY(do1(&e, &rs[1], rq(MCR_OP_GET, good[i])), MCR_OK, MCR_REPLY_HIT);
        ck_assert_uint_eq(rs[1].value_len, q.value_len);
        int fd = raw_fd(&e, env_index(&e, owner_id(&e, good[i])));
        ck_assert_int_eq(rs_mc_get(fd, good[i], buf, sizeof(buf), IO_MS), 1);
        close(fd);
    }

    /* values over max_value_size (1000 here) */
    char *v = malloc(1 << 21);
    ck_assert_ptr_nonnull(v);
    memset(v, 'v', 1 << 21);
    static const mcr_op stores[] = {MCR_OP_SET, MCR_OP_ADD, MCR_OP_REPLACE, MCR_OP_APPEND,
                                    MCR_OP_PREPEND, MCR_OP_CAS};
    for (size_t i = 0; i < sizeof(stores) / sizeof(stores[0]); i++) {
        mcr_request q = rq(stores[i], "val:big");
        q.value = v;
        q.value_len = 1001;
        q.cas = 1;
        ck_assert_int_eq(submit(&e, &r, &q), MCR_ERR_TOO_BIG);
    }
    g_submitting++;
    ck_assert_int_eq(mcr_pool_set(e.pool, "val:big", 7, v, 1001, 0, 0, rec_cb,
                                  ticket_for(&e.t, &r), NULL),
                     MCR_ERR_TOO_BIG);
    g_submitting--;
    make_value(v, 1001, "val:big", 7, 1, 2000); /* 1000 bytes: fits */
    mcr_request q = rq(MCR_OP_SET, "val:big");
    q.value = v;
    q.value_len = 1000;
    EXPECT_REPLY(do1(&e, &rs[0], q), MCR_OK, MCR_REPLY_STORED);
    EXPECT_REPLY(do1(&e, &rs[1], rq(MCR_OP_GET, "val:big")), MCR_OK, MCR_REPLY_HIT);
    ck_assert_uint_eq(rs[1].value_len, 1000);
    ck_assert(memcmp(rs[1].value, v, 1000) == 0);

    /* other refusals */
    q = rq(MCR_OP_GAT, "x");
    q.exptime = -1;
    ck_assert_int_eq(submit(&e, &r, &q), MCR_ERR_INVALID);
    q.exptime = 2147483648LL;
    ck_assert_int_eq(submit(&e, &r, &q), MCR_ERR_INVALID);
    q = rq_store(MCR_OP_SET, "x", "v", 0);
    q.exptime = -5;
    ck_assert_int_eq(submit(&e, &r, &q), MCR_ERR_INVALID);
    q = rq(MCR_OP_COUNT, "x");
    ck_assert_int_eq(submit(&e, &r, &q), MCR_ERR_INVALID);
    q = rq(MCR_OP_GET, "x");
    g_submitting++;
    ck_assert_int_eq(mcr_pool_submit(e.pool, &q, NULL, &r, NULL), MCR_ERR_INVALID);
    ck_assert_int_eq(mcr_pool_submit(e.pool, NULL, rec_cb, ticket_for(&e.t, &r), NULL),
                     MCR_ERR_INVALID);
    ck_assert_int_eq(mcr_pool_submit(NULL, &q, rec_cb, ticket_for(&e.t, &r), NULL),
                     MCR_ERR_INVALID);
    g_submitting--;
    q = rq(MCR_OP_GET, NULL);
    q.key_len = 3; /* NULL key with a length */
    ck_assert_int_eq(submit(&e, &r, &q), MCR_ERR_INVALID);
    q = rq(MCR_OP_SET, "x");
    q.value_len = 3; /* NULL value with a length */
    ck_assert_int_eq(submit(&e, &r, &q), MCR_ERR_INVALID);
    q = rq(MCR_OP_SET, "x"); /* an empty value is a value */
    EXPECT_REPLY(do1(&e, &rs[2], q), MCR_OK, MCR_REPLY_STORED);
    q = rq(MCR_OP_TOUCH, "x");
    q.exptime = 2147483647LL;
    EXPECT_REPLY(do1(&e, &rs[2], q), MCR_OK, MCR_REPLY_TOUCHED);

    run_ms(&e, 50);
    ck_assert_int_eq(r.calls, 0);
    tally_ok(&e);

    /* the key prefix: on the wire, not in results; key length counts it */
    mcr_pool *pp = NULL;
    opts_init(&o);
    o.key_prefix = "ns1:";
    o.protocol = _i ? MCR_PROTO_META : MCR_PROTO_TEXT;
    ck_assert_int_eq(mcr_pool_new(e.base, e.router, &o, &pp, NULL), MCR_OK);
    memset(big, 'p', 247);
    refuse_key(&e, pp, big, 247, &r);
    big[246] = '\0';
    q = rq_store(MCR_OP_SET, big, "val|", 0);
    ck_assert_int_eq(submit_to(&e, pp, &rs[3], &q), MCR_OK); /* 4 + 246 = 250 bytes */
    ck_assert(run_until(&e, c_called, &rs[3], 5000));
    EXPECT_REPLY(&rs[3], MCR_OK, MCR_REPLY_STORED);
    char pk[40][32];
    for (int i = 0; i < 40; i++) {
        snprintf(pk[i], sizeof(pk[i]), "kp%d", i);
        char vv[64];
        mcr_request s = rq(MCR_OP_SET, pk[i]);
        s.value = vv;
        s.value_len = make_value(vv, sizeof(vv), pk[i], strlen(pk[i]), 5, 0);
        ck_assert_int_eq(submit_to(&e, pp, &rs[4], &s), MCR_OK);
        ck_assert(run_until(&e, c_called, &rs[4], 5000));
        EXPECT_REPLY(&rs[4], MCR_OK, MCR_REPLY_STORED);
        ck_assert_int_eq(submit_to(&e, pp, &rs[5], &(mcr_request){.op = MCR_OP_GET,
                                                                  .key = pk[i],
                                                                  .key_len = strlen(pk[i])}),
                         MCR_OK);
        ck_assert(run_until(&e, c_called, &rs[5], 5000));
        EXPECT_REPLY(&rs[5], MCR_OK, MCR_REPLY_HIT); /* rec_cb checked the result's key */
        int own = env_index(&e, owner_id(&e, pk[i]));
        ck_assert_str_eq(rs[5].server, e.id[own]);
        char wire[64];
        snprintf(wire, sizeof(wire), "ns1:%s", pk[i]);
        for (int s2 = 0; s2 < e.n; s2++) {
            int fd = raw_fd(&e, s2);
            ck_assert_int_eq(rs_mc_get(fd, wire, buf, sizeof(buf), IO_MS), s2 == own);
            ck_assert_int_eq(rs_mc_get(fd, pk[i], buf, sizeof(buf), IO_MS), 0);
            close(fd);
        }
    }
    /* a multi-get through the prefixed pool reports keys without it */
    mtrack *m = mt_new(&e.t, 41);
    for (int i = 0; i < 40; i++)
        mt_add(m, pk[i], strlen(pk[i]));
    mt_add(m, "kp-none", 7);
    ck_assert_int_eq(submit_multi(&e, pp, m, MCR_OP_GET), MCR_OK);
    ck_assert(run_until(&e, c_mt_done, m, 5000));
    mt_check(m);
    ck_assert_int_eq(m->hits, 40);
    ck_assert_int_eq(m->done_status, MCR_OK);
    mt_free(m);
    /* the same keys through the pool without prefix: not there */
    EXPECT_REPLY(do1(&e, &rs[6], rq(MCR_OP_GET, "kp1")), MCR_OK, MCR_REPLY_MISS);
    ck_assert(run_until(&e, c_idle, NULL, 1000));
    mcr_pool_free(pp);

    /* options out of range: MCR_ERR_RANGE, no pool */
    struct {
        const char *what;
        mcr_pool_options o;
    } bad[10];
    memset(bad, 0, sizeof(bad));
    bad[0].what = "65 connections";
    bad[0].o.connections = 65;
    bad[1].what = "prefix with a space";
    bad[1].o.key_prefix = "a b";
    memset(big, 'q', 129);
    big[129] = '\0';
    bad[2].what = "prefix of 129 bytes";
    bad[2].o.key_prefix = big;
    bad[3].what = "failure limit 1001";
    bad[3].o.server_failure_limit = 1001;
    bad[4].what = "request timeout over a day";
    bad[4].o.request_timeout_ms = 86400001u;
    bad[5].what = "max_value_size over 1 GiB";
    bad[5].o.max_value_size = (1u << 30) + 1;
    bad[6].what = "prefix with a control byte";
    bad[6].o.key_prefix = "a\x01";
    bad[7].what = "retry timeout over a day";
    bad[7].o.retry_timeout_ms = 86400001u;
    bad[8].what = "unknown policy";
    bad[8].o.policy = (mcr_policy)7;
    bad[9].what = "unknown protocol";
    bad[9].o.protocol = (mcr_protocol)5;
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        mcr_pool *np = NULL;
        memset(&err, 0, sizeof(err));
        int rc = mcr_pool_new(e.base, e.router, &bad[i].o, &np, &err);
        ck_assert_msg(rc == MCR_ERR_RANGE, "%s: %d", bad[i].what, rc);
        ck_assert_ptr_null(np);
        ck_assert_int_eq(err.code, MCR_ERR_RANGE);
        ck_assert(err.message[0] != '\0');
    }
    mcr_pool *np = NULL;
    ck_assert_int_eq(mcr_pool_new(NULL, e.router, NULL, &np, NULL), MCR_ERR_INVALID);
    ck_assert_int_eq(mcr_pool_new(e.base, NULL, NULL, &np, NULL), MCR_ERR_INVALID);
    ck_assert_int_eq(mcr_pool_new(e.base, e.router, NULL, NULL, NULL), MCR_ERR_INVALID);
    ck_assert_ptr_null(np);
    mcr_pool_free(NULL);

    /* a router without snapshot: MCR_ERR_EMPTY at submission, until one is published */
    mcr_router *er = NULL;
    ck_assert_int_eq(mcr_router_new(NULL, &er, NULL), MCR_OK);
    ck_assert_int_eq(mcr_pool_new(e.base, er, NULL, &np, NULL), MCR_OK);
    ck_assert_int_eq(submit_to(&e, np, &r, &(mcr_request){.op = MCR_OP_GET, .key = "e",
                                                          .key_len = 1}),
                     MCR_ERR_EMPTY);
    ck_assert_int_eq(mcr_pool_refresh(np), MCR_ERR_EMPTY);
    mtrack *em = mt_new(&e.t, 1);
    mt_add(em, "e", 1);
    ck_assert_int_eq(submit_multi(&e, np, em, MCR_OP_GET), MCR_ERR_EMPTY);
    mcr_snapshot *s = env_snapshot(&e, 1, NULL);
    ck_assert_int_eq(mcr_router_publish(er, s, NULL), MCR_OK);
    mcr_snapshot_unref(s);
    ck_assert_int_eq(submit_to(&e, np, &rs[7], &(mcr_request){.op = MCR_OP_GET, .key = "e",
                                                              .key_len = 1}),
                     MCR_OK);
    ck_assert(run_until(&e, c_called, &rs[7], 5000));
    EXPECT_REPLY(&rs[7], MCR_OK, MCR_REPLY_MISS);
    ck_assert_str_eq(rs[7].server, e.id[0]);
    mcr_pool_free(np);
    mcr_router_free(er);
    run_ms(&e, 20);
    ck_assert_int_eq(em->key_calls + em->done_calls, 0);
    mt_free(em);
    ck_assert_int_eq(r.calls, 0);

    /* names */
    ck_assert_str_eq(mcr_op_name(MCR_OP_GET), "get");
    ck_assert_str_eq(mcr_op_name(MCR_OP_FLUSH_ALL), "flush_all");
    ck_assert_str_eq(mcr_reply_name(MCR_REPLY_HIT), "hit");
    ck_assert_str_eq(mcr_reply_name(MCR_REPLY_NOT_STORED), "not_stored");
    mcr_policy pol;
    ck_assert_int_eq(mcr_policy_from_name("eject", &pol), MCR_OK);
    ck_assert_int_eq(pol, MCR_POLICY_EJECT);
    ck_assert_int_eq(mcr_policy_from_name("fail-fast", &pol), MCR_OK);
    ck_assert_int_eq(pol, MCR_POLICY_FAIL_FAST);
    ck_assert_int_eq(mcr_policy_from_name("failover", &pol), MCR_OK);
    ck_assert_int_eq(pol, MCR_POLICY_FAILOVER);
    ck_assert_int_eq(mcr_policy_from_name("nope", &pol), MCR_ERR_UNKNOWN);
    ck_assert_int_eq(mcr_policy_from_name("EJECT", &pol), MCR_ERR_UNKNOWN);
    ck_assert_int_eq(pol, MCR_POLICY_FAILOVER); /* unchanged */
    ck_assert_str_eq(mcr_op_name(MCR_OP_COUNT), "unknown");
    ck_assert_str_eq(mcr_reply_name((mcr_reply)99), "unknown");
    ck_assert_str_eq(mcr_op_name(MCR_OP_NOOP), "noop");
    ck_assert_int_eq(mcr_policy_from_name(NULL, &pol), MCR_ERR_INVALID);
    ck_assert_str_eq(mcr_policy_name(MCR_POLICY_FAILOVER), "failover");
    ck_assert_str_eq(mcr_policy_name((mcr_policy)99), "unknown");
    ck_assert_str_ne(mcr_strerror(MCR_ERR_CANCELLED), "unknown error");

    tally_ok(&e);
    free(v);
    rec_clear(&r);
    recs_free(rs, 64);
    env_free(&e);
}
END_TEST

/* ================================================================== callback contract */

/* A chain: each callback submits the next get from inside the callback. */
typedef struct chain {
    env *e;
    int depth, max;
    rec recs[64];
    int wait_rc;        /* mcr_pool_wait() called from a callback */
    int once_rc;        /* mcr_pool_run_once() called from a callback */
    int exec_rc;
} chain;

static void chain_cb(const mcr_result *res, void *arg)
{
    chain *c = arg;
    rec *r = &c->recs[c->depth];
    rec_record(res, r);
    if (c->depth == 0) {
        c->wait_rc = mcr_pool_wait(c->e->pool);
        c->once_rc = mcr_pool_run_once(c->e->pool);
    }
    if (++c->depth < c->max) {
        mcr_request q = rq(MCR_OP_GET, "chain:key");
        rec_prepare(&c->recs[c->depth], &c->e->t, &q);
        g_submitting++;
        int rc = mcr_pool_submit(c->e->pool, &q, chain_cb, c, NULL);
        g_submitting--;
        if (rc == MCR_OK)
            c->e->t.submitted++;
        else
            violation(&c->e->t, "submission from a callback: %d", rc);
    }
}

static int c_chain_done(env *e, void *arg)
{
    (void)e;
    chain *c = arg;
    return c->depth >= c->max;
}

/* A callback that calls mcr_pool_exec() on its own pool: refused. */
typedef struct inner_exec {
    mcr_pool *pool;
    int calls, rc;
} inner_exec;

static void inner_exec_cb(const mcr_result *res, void *arg)
{
    (void)res;
    inner_exec *x = arg;
    mcr_request q = rq(MCR_OP_GET, "own:inner");
    mcr_owned_result out;
    x->calls++;
    x->rc = mcr_pool_exec(x->pool, &q, &out);
    mcr_owned_result_clear(&out);
}

/* A callback that submits again on its pool: from mcr_pool_free() that is
 * refused (MCR_ERR_INVALID). */
typedef struct resubmit {
    env *e;
    mcr_pool *pool;
    int calls, status, rc;
    rec nested;
} resubmit;

static void resubmit_cb(const mcr_result *res, void *arg)
{
    resubmit *x = arg;
    x->calls++;
    x->status = res->status;
    mcr_request q = rq(MCR_OP_GET, "resubmitted");
    rec_prepare(&x->nested, &x->e->t, &q);
    g_submitting++;
    x->rc = mcr_pool_submit(x->pool, &q, rec_cb, ticket_for(&x->e->t, &x->nested), NULL);
    g_submitting--;
    if (x->rc == MCR_OK)
        x->e->t.submitted++;
    else
        x->nested.refused = x->rc;
}

/* Callbacks: never inside the submitting call, never after a refusal,
 * exactly once; requests in flight or queued when the pool is freed get
 * MCR_ERR_CANCELLED inside mcr_pool_free(); a callback may submit. */
START_TEST(test_callback_contract)
{
    env e;
    mcr_pool_options o;
    char kb[64];
    enum { N0 = 100, N1 = 100, NQ = 50 };
    rec *recs = calloc(N0 + N1 + NQ, sizeof(rec));

    ck_assert_ptr_nonnull(recs);
    opts_init(&o);
    o.request_timeout_ms = TMS(5000); /* no timeout while server 0 is stopped */
    env_init(&e, 2, &o);

    /* a chain of 50 gets, each submitted from the previous one's callback */
    chain *c = calloc(1, sizeof(*c));
    ck_assert_ptr_nonnull(c);
    c->e = &e;
    c->max = 50;
    mcr_request q = rq(MCR_OP_GET, "chain:key");
    rec_prepare(&c->recs[0], &e.t, &q);
    g_submitting++;
    ck_assert_int_eq(mcr_pool_submit(e.pool, &q, chain_cb, c, NULL), MCR_OK);
    g_submitting--;
    e.t.submitted++;
    ck_assert_int_eq(c->depth, 0);
    ck_assert_msg(run_until(&e, c_chain_done, c, 5000), "chain stopped at %d", c->depth);
    ck_assert(run_until(&e, c_idle, NULL, 5000));
    ck_assert_int_eq(c->wait_rc, MCR_ERR_INVALID);
    ck_assert_int_eq(c->once_rc, MCR_ERR_INVALID);
    for (int i = 0; i < c->max; i++) {
        EXPECT_REPLY(&c->recs[i], MCR_OK, MCR_REPLY_MISS);
        rec_clear(&c->recs[i]);
    }
    free(c);
    tally_ok(&e);

    /* mcr_pool_wait() from outside: runs until nothing is pending */
    for (int i = 0; i < 20; i++) {
        snprintf(kb, sizeof(kb), "w:%d", i);
        q = rq(MCR_OP_GET, kb);
        ck_assert_int_eq(submit(&e, &recs[i], &q), MCR_OK);
    }
    ck_assert_int_eq(mcr_pool_wait(e.pool), MCR_OK);
    ck_assert_uint_eq(mcr_pool_pending(e.pool), 0);
    for (int i = 0; i < 20; i++)
        EXPECT_REPLY(&recs[i], MCR_OK, MCR_REPLY_MISS);
    tally_ok(&e);

    /* mcr_pool_run_once(): a pass at a time, each blocking until an event
     * (replies, mostly: a pass may also run one of the pool's timers, so
     * the count of passes is bounded loosely); with nothing pending it
     * returns at once */
    for (int i = 0; i < 20; i++) {
        snprintf(kb, sizeof(kb), "once:%d", i);
        q = rq(MCR_OP_GET, kb);
        ck_assert_int_eq(submit(&e, &recs[20 + i], &q), MCR_OK);
    }
    int passes = 0;
    while (mcr_pool_pending(e.pool) > 0) {
        ck_assert_int_eq(mcr_pool_run_once(e.pool), MCR_OK);
        ck_assert_int_le(++passes, 200);
    }
    ck_assert_int_ge(passes, 1);
    for (int i = 0; i < 20; i++)
        EXPECT_REPLY(&recs[20 + i], MCR_OK, MCR_REPLY_MISS);
    tally_ok(&e);
    ck_assert_int_eq(mcr_pool_run_once(e.pool), MCR_OK);
    ck_assert_uint_eq(mcr_pool_pending(e.pool), 0);
    ck_assert_int_eq(mcr_pool_run_once(NULL), MCR_ERR_INVALID);

    /* exec: synchronous, an owned copy */
    mcr_owned_result out;
    memset(&out, 0, sizeof(out));
    q = rq_store(MCR_OP_SET, "exec:k", "val|exec:k|1", 5);
    ck_assert_int_eq(mcr_pool_exec(e.pool, &q, &out), MCR_OK);
    ck_assert_int_eq(out.status, MCR_OK);
    ck_assert_int_eq(out.reply, MCR_REPLY_STORED);
    ck_assert_str_eq(out.server, owner_id(&e, "exec:k"));
    ck_assert_uint_eq(out.epoch, 1);
    mcr_owned_result_clear(&out);
    q = rq(MCR_OP_GET, "exec:k");
    ck_assert_int_eq(mcr_pool_exec(e.pool, &q, &out), MCR_OK);
    ck_assert_int_eq(out.reply, MCR_REPLY_HIT);
    ck_assert_ptr_nonnull(out.value);
    ck_assert_uint_eq(out.value_len, 12);
    ck_assert_str_eq(out.value, "val|exec:k|1");
    ck_assert_uint_eq(out.flags, 5);
    mcr_owned_result_clear(&out);
    ck_assert_ptr_null(out.value);
    ck_assert_int_eq(out.status, 0);
    q = rq(MCR_OP_GET, "bad key");
    ck_assert_int_eq(mcr_pool_exec(e.pool, &q, &out), MCR_ERR_KEY);
    ck_assert_int_eq(out.status, MCR_ERR_KEY);
    ck_assert(out.message[0] != '\0');
    mcr_owned_result_clear(&out);
    mcr_owned_result_clear(NULL);
    ck_assert_int_eq(mcr_pool_exec(e.pool, &q, NULL), MCR_ERR_INVALID);
    ck_assert_int_eq(mcr_pool_exec(NULL, &q, &out), MCR_ERR_INVALID);
    ck_assert_int_eq(out.status, MCR_ERR_INVALID);
    mcr_owned_result_clear(&out);

    /* mcr_pool_set_own_loop(): the same calls without the re-entry probe;
     * from one of the pool's own callbacks exec is still refused */
    ck_assert_int_eq(mcr_pool_set_own_loop(NULL, 1), MCR_ERR_INVALID);
    ck_assert_int_eq(mcr_pool_set_own_loop(e.pool, 1), MCR_OK);
    q = rq(MCR_OP_GET, "exec:k");
    ck_assert_int_eq(mcr_pool_exec(e.pool, &q, &out), MCR_OK);
    ck_assert_int_eq(out.reply, MCR_REPLY_HIT);
    ck_assert_str_eq(out.value, "val|exec:k|1");
    mcr_owned_result_clear(&out);
    for (int i = 0; i < 20; i++) {
        snprintf(kb, sizeof(kb), "own:%d", i);
        q = rq(MCR_OP_GET, kb);
        ck_assert_int_eq(submit(&e, &recs[i], &q), MCR_OK);
    }
    ck_assert_int_eq(mcr_pool_wait(e.pool), MCR_OK);
    ck_assert_uint_eq(mcr_pool_pending(e.pool), 0);
    for (int i = 0; i < 20; i++)
        EXPECT_REPLY(&recs[i], MCR_OK, MCR_REPLY_MISS);
    tally_ok(&e);
    inner_exec ie = {e.pool, 0, 0};
    q = rq(MCR_OP_GET, "own:outer");
    ck_assert_int_eq(mcr_pool_submit(e.pool, &q, inner_exec_cb, &ie, NULL), MCR_OK);
    ck_assert_int_eq(mcr_pool_wait(e.pool), MCR_OK);
    ck_assert_int_eq(ie.calls, 1);
    ck_assert_int_eq(ie.rc, MCR_ERR_INVALID);
    ck_assert_int_eq(mcr_pool_set_own_loop(e.pool, 0), MCR_OK);

    /* cancelled by mcr_pool_free(): in flight on a stopped server, in
     * flight on a live one just answered, and queued */
    const char *id0 = e.id[0];
    env_sigstop(&e, 0);
    for (int i = 0; i < N0; i++) {
        snprintf(kb, sizeof(kb), "stop:%d", i);
        key_on(&e, id0, kb, kb, sizeof(kb));
        q = rq(MCR_OP_GET, kb);
        ck_assert_int_eq(submit(&e, &recs[i], &q), MCR_OK);
    }
    for (int i = 0; i < N1; i++) {
        snprintf(kb, sizeof(kb), "live:%d:", i);
        key_on(&e, e.id[1], kb, kb, sizeof(kb));
        q = rq(MCR_OP_GET, kb);
        ck_assert_int_eq(submit(&e, &recs[N0 + i], &q), MCR_OK);
    }
    run_ms(&e, 150);
    for (int i = 0; i < N1; i++)
        EXPECT_REPLY(&recs[N0 + i], MCR_OK, MCR_REPLY_MISS);
    for (int i = 0; i < N0; i++)
        ck_assert_msg(recs[i].calls == 0,
                      "get %s to the stopped server called back after %lld ms: %d (%s), %s, "
                      "value \"%s\", from %s", recs[i].key, recs[i].t1 - recs[i].t0,
                      recs[i].status, recs[i].message, mcr_reply_name(recs[i].reply),
                      recs[i].value ? recs[i].value : "", recs[i].server);
    for (int i = 0; i < NQ; i++) {
        snprintf(kb, sizeof(kb), "queued:%d", i);
        q = rq(i % 2 ? MCR_OP_GET : MCR_OP_SET, kb);
        q.value = "val|";
        q.value_len = 4;
        ck_assert_int_eq(submit(&e, &recs[N0 + N1 + i], &q), MCR_OK);
    }
    ck_assert_uint_eq(mcr_pool_pending(e.pool), N0 + NQ);
    mcr_pool_free(e.pool);
    e.pool = NULL;
    /* every one called back inside mcr_pool_free() */
    for (int i = 0; i < N0; i++) {
        ck_assert_int_eq(recs[i].calls, 1);
        ck_assert_msg(recs[i].status == MCR_ERR_CANCELLED, "in flight at free: %d",
                      recs[i].status);
    }
    for (int i = 0; i < NQ; i++) {
        rec *r = &recs[N0 + N1 + i];
        ck_assert_int_eq(r->calls, 1);
        ck_assert_msg(r->status == MCR_ERR_CANCELLED, "queued at free: %d", r->status);
    }
    tally_ok(&e);
    kill(e.mc[0].pid, SIGCONT);

    /* freed at once after submitting: nothing ran yet */
    env_new_pool(&e, &o);
    for (int i = 0; i < 30; i++) {
        snprintf(kb, sizeof(kb), "now:%d", i);
        q = rq(MCR_OP_GET, kb);
        ck_assert_int_eq(submit(&e, &recs[i], &q), MCR_OK);
    }
    mtrack *m = mt_new(&e.t, 10);
    for (int i = 0; i < 10; i++) {
        snprintf(kb, sizeof(kb), "now:m%d", i);
        mt_add(m, kb, strlen(kb));
    }
    ck_assert_int_eq(submit_multi(&e, e.pool, m, MCR_OP_GET), MCR_OK);
    resubmit *x = calloc(1, sizeof(*x));
    ck_assert_ptr_nonnull(x);
    x->e = &e;
    x->pool = e.pool;
    q = rq(MCR_OP_GET, "now:x");
    g_submitting++;
    ck_assert_int_eq(mcr_pool_submit(e.pool, &q, resubmit_cb, x, NULL), MCR_OK);
    g_submitting--;
    ck_assert_int_eq(e.t.calls, e.t.submitted - 31);
    mcr_pool_free(e.pool);
    e.pool = NULL;
    ck_assert_int_eq(x->calls, 1);
    ck_assert_int_eq(x->status, MCR_ERR_CANCELLED);
    ck_assert_msg(x->rc == MCR_ERR_INVALID, "submission from a callback run by "
                  "mcr_pool_free(): %d", x->rc);
    rec_clear(&x->nested);
    free(x);
    for (int i = 0; i < 30; i++) {
        ck_assert_int_eq(recs[i].calls, 1);
        ck_assert_int_eq(recs[i].status, MCR_ERR_CANCELLED);
    }
    mt_check(m);
    for (size_t d = 0; d < m->nd; d++)
        ck_assert_int_eq(m->status[d], MCR_ERR_CANCELLED);
    ck_assert_int_eq(m->done_status, MCR_ERR_CANCELLED);
    mt_free(m);
    tally_ok(&e);

    env_free(&e);
    recs_free(recs, N0 + N1 + NQ);
}
END_TEST

/* ================================================================== suite */

static Suite *suite(void)
{
    Suite *s = suite_create("pool_basic");
    PE_ADD_LOOP(s, round_trip, 0, 2);
    PE_ADD_LOOP(s, commands, 0, 2);
    PE_ADD_LOOP(s, get_multi, 0, 4);
    PE_ADD_LOOP(s, input_rules, 0, 2);
    PE_ADD(s, callback_contract);
    return s;
}

int main(void)
{
    /* SIGPIPE keeps its default action: the pool must never raise it */
    return tu_run(suite());
}
