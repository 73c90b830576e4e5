/* SPDX-License-Identifier: BSD-3-Clause */
/* test_pool_membership.c: Check suite of the connection pool: membership changes under traffic, hot keys, counters, Unix sockets. */
/*
 * The environment, the request tracking and the time rules are pool_env.h's.
 *
 * What is covered: membership changes, draining and removal under traffic;
 * hot-key sharing; counters and latency percentiles; Unix sockets.
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

/* ================================================================== membership */

#define MB_KEYS 300
#define MB_RECS 12000

/* Servers added, removed, drained and re-added while requests flow: every
 * request completes once, OK, against the server its snapshot named; a
 * removed server's connections close and the pool forgets it. _i: the
 * protocol. */
START_TEST(test_membership)
{
    env e;
    mcr_pool_options o;
    snap_book book;
    tu_rng rng;
    char keys[MB_KEYS][24], v[128];
    unsigned gen[MB_KEYS];
    rec *rs = calloc(MB_RECS, sizeof(rec));
    size_t nr = 0;

    ck_assert_ptr_nonnull(rs);
    memset(gen, 0, sizeof(gen));
    tu_rng_init(&rng, 303 + (uint64_t)_i);
    opts_init(&o);
    o.protocol = _i ? MCR_PROTO_META : MCR_PROTO_TEXT;
    o.connections = 2;
    env_init_k(&e, 5, 3, &o);
    book_init(&book, e.router);
    ck_assert_int_eq(mcr_router_add_hook(e.router, book_hook, &book), MCR_OK);
    for (int i = 0; i < MB_KEYS; i++)
        snprintf(keys[i], sizeof(keys[i]), "mb:%d", i);

    conn_wait w4 = {raw_fd(&e, 4), 0};
    w4.baseline = rs_mc_stat(w4.fd, NULL, "curr_connections", IO_MS);
    ck_assert_int_gt(w4.baseline, 0);

    /* (time in ms, change: 0 add, 1 remove, 2 drain, 3 activate, server) */
    static const int plan[][3] = {{300, 0, 3},  {600, 0, 4},  {900, 1, 0},  {1200, 2, 1},
                                  {1500, 0, 0}, {1800, 3, 1}, {2100, 1, 4}};
    size_t next = 0, nplan = sizeof(plan) / sizeof(plan[0]);
    long long start = mcr_test_now_ms();
    while (mcr_test_now_ms() - start < 2400 && nr + 40 < MB_RECS) {
        long long t = mcr_test_now_ms() - start;
        while (next < nplan && t >= plan[next][0]) {
            apply_change(&e, plan[next][1], plan[next][2]);
            next++;
        }
        for (int k = 0; k < 30; k++) {
            int i = (int)tu_below(&rng, MB_KEYS);
            mcr_request q = rq(MCR_OP_GET, keys[i]);
            if (tu_below(&rng, 10) < 3) {
                q.op = MCR_OP_SET;
                q.value = v;
                q.value_len = make_value(v, sizeof(v), keys[i], strlen(keys[i]), ++gen[i],
                                         tu_below(&rng, 40));
            }
            ck_assert_int_eq(submit(&e, &rs[nr++], &q), MCR_OK);
        }
        run_ms(&e, 8);
    }
    ck_assert_uint_eq(next, nplan);
    WAIT_IDLE(&e, 5000);
    ck_assert_uint_eq(mcr_router_epoch(e.router), 1 + nplan);

    int hits = 0;
    for (size_t i = 0; i < nr; i++) {
        rec *r = &rs[i];
        ck_assert_msg(r->status == MCR_OK, "%s %s (epoch %llu, server %s): %d %s",
                      mcr_op_name(r->op), r->key, (unsigned long long)r->epoch, r->server,
                      r->status, r->message);
        const char *want = book_owner(&book, r->epoch, r->key, r->key_len);
        ck_assert_msg(want != NULL, "result epoch %llu never published",
                      (unsigned long long)r->epoch);
        ck_assert_msg(strcmp(r->server, want) == 0, "%s %s routed with epoch %llu: sent to %s, "
                      "that snapshot names %s", mcr_op_name(r->op), r->key,
                      (unsigned long long)r->epoch, r->server, want);
        hits += r->op == MCR_OP_GET && r->reply == MCR_REPLY_HIT;
    }
    ck_assert_int_gt(hits, 100);
    tally_ok(&e);

    /* the removed server: connections closed, forgotten once drained */
    ck_assert_msg(run_until(&e, c_conns_back, &w4, 3000),
                  "%s still has %lld connections (baseline %lld) after its removal", e.id[4],
                  rs_mc_stat(w4.fd, NULL, "curr_connections", IO_MS), w4.baseline);
    ck_assert_int_eq(mcr_pool_refresh(e.pool), MCR_OK);
    run_ms(&e, 50);
    mcr_server_stats st;
    ck_assert_msg(stats_of(e.pool, e.id[4], &st) != 0, "removed %s still listed (health %d)",
                  e.id[4], st.health);
    ck_assert_uint_eq(mcr_pool_server_count(e.pool), 4);
    for (int s = 0; s < 4; s++) {
        ck_assert_msg(stats_of(e.pool, e.id[s], &st) == 0, "%s not listed", e.id[s]);
        ck_assert_int_eq(st.health, MCR_HEALTH_UP);
        ck_assert_uint_eq(st.in_flight, 0);
    }
    close(w4.fd);

    mcr_router_remove_hook(e.router, book_hook, &book);
    book_free(&book);
    env_free(&e);
    recs_free(rs, MB_RECS);
}
END_TEST

/* ================================================================== hot keys */

/* 100 concurrent gets of one key: one request to the server, 100
 * callbacks with the value; a write of the key ends the sharing. */
START_TEST(test_hot_keys)
{
    env e;
    mcr_pool_options o;
    enum { HOT = 100 };
    rec *rs = calloc(HOT + 10, sizeof(rec));
    mcr_server_stats st;
    const char *k = "hot:key";

    ck_assert_ptr_nonnull(rs);
    opts_init(&o);
    o.protocol = _i ? MCR_PROTO_META : MCR_PROTO_TEXT;
    env_init(&e, 2, &o);
    e.t.raw_values = 1;
    const char *own = owner_id(&e, k);
    int oi = env_index(&e, own);
    EXPECT_REPLY(do1(&e, &rs[0], rq_store(MCR_OP_SET, k, "val|hot:key|1", 0)), MCR_OK,
           MCR_REPLY_STORED);
    int fd = raw_fd(&e, oi);
    long long before = rs_mc_stat(fd, NULL, "cmd_get", IO_MS);
    ck_assert_int_ge(before, 0);

    for (int i = 0; i < HOT; i++)
        ck_assert_int_eq(submit(&e, &rs[i], &(mcr_request){.op = MCR_OP_GET, .key = k,
                                                             .key_len = strlen(k)}),
                         MCR_OK);
    WAIT_IDLE(&e, 5000);
    for (int i = 0; i < HOT; i++) {
        EXPECT_REPLY(&rs[i], MCR_OK, MCR_REPLY_HIT);
        EXPECT_VALUE(&rs[i], "val|hot:key|1");
        ck_assert_str_eq(rs[i].server, own);
    }
    long long after = rs_mc_stat(fd, NULL, "cmd_get", IO_MS);
    ck_assert_msg(after - before == 1, "%lld gets reached the server for %d concurrent gets",
                  after - before, HOT);
    ck_assert_int_eq(stats_of(e.pool, own, &st), 0);
    ck_assert_uint_eq(st.coalesced, HOT - 1);
    ck_assert_uint_eq(st.hits, HOT);

    /* get, set, get, get: the later gets see the set's value */
    ck_assert_int_eq(submit(&e, &rs[0], &(mcr_request){.op = MCR_OP_GET, .key = k,
                                                         .key_len = strlen(k)}),
                     MCR_OK);
    mcr_request set = rq_store(MCR_OP_SET, k, "val|hot:key|2", 0);
    ck_assert_int_eq(submit(&e, &rs[1], &set), MCR_OK);
    for (int i = 2; i < 5; i++)
        ck_assert_int_eq(submit(&e, &rs[i], &(mcr_request){.op = MCR_OP_GET, .key = k,
                                                             .key_len = strlen(k)}),
                         MCR_OK);
    WAIT_IDLE(&e, 5000);
    EXPECT_VALUE(&rs[0], "val|hot:key|1");
    EXPECT_REPLY(&rs[1], MCR_OK, MCR_REPLY_STORED);
    for (int i = 2; i < 5; i++)
        EXPECT_VALUE(&rs[i], "val|hot:key|2");

    /* get, delete, get: the last one misses */
    ck_assert_int_eq(submit(&e, &rs[0], &(mcr_request){.op = MCR_OP_GET, .key = k,
                                                         .key_len = strlen(k)}),
                     MCR_OK);
    ck_assert_int_eq(submit(&e, &rs[1], &(mcr_request){.op = MCR_OP_DELETE, .key = k,
                                                         .key_len = strlen(k)}),
                     MCR_OK);
    ck_assert_int_eq(submit(&e, &rs[2], &(mcr_request){.op = MCR_OP_GET, .key = k,
                                                         .key_len = strlen(k)}),
                     MCR_OK);
    WAIT_IDLE(&e, 5000);
    EXPECT_REPLY(&rs[0], MCR_OK, MCR_REPLY_HIT);
    EXPECT_REPLY(&rs[1], MCR_OK, MCR_REPLY_DELETED);
    EXPECT_REPLY(&rs[2], MCR_OK, MCR_REPLY_MISS);

    /* gets share too, each with the cas */
    EXPECT_REPLY(do1(&e, &rs[0], rq_store(MCR_OP_SET, k, "val|hot:key|3", 0)), MCR_OK,
           MCR_REPLY_STORED);
    for (int i = 0; i < 10; i++)
        ck_assert_int_eq(submit(&e, &rs[i], &(mcr_request){.op = MCR_OP_GETS, .key = k,
                                                             .key_len = strlen(k)}),
                         MCR_OK);
    WAIT_IDLE(&e, 5000);
    for (int i = 0; i < 10; i++) {
        EXPECT_REPLY(&rs[i], MCR_OK, MCR_REPLY_HIT);
        EXPECT_VALUE(&rs[i], "val|hot:key|3");
        ck_assert_uint_ne(rs[i].cas, 0);
        ck_assert_uint_eq(rs[i].cas, rs[0].cas);
    }
    tally_ok(&e);
    mcr_pool_free(e.pool);
    e.pool = NULL;

    /* no_coalesce: every get goes out */
    o.no_coalesce = 1;
    env_new_pool(&e, &o);
    before = rs_mc_stat(fd, NULL, "cmd_get", IO_MS);
    for (int i = 0; i < HOT; i++)
        ck_assert_int_eq(submit(&e, &rs[i], &(mcr_request){.op = MCR_OP_GET, .key = k,
                                                             .key_len = strlen(k)}),
                         MCR_OK);
    WAIT_IDLE(&e, 5000);
    for (int i = 0; i < HOT; i++)
        EXPECT_VALUE(&rs[i], "val|hot:key|3");
    after = rs_mc_stat(fd, NULL, "cmd_get", IO_MS);
    ck_assert_int_eq(after - before, HOT);
    ck_assert_int_eq(stats_of(e.pool, own, &st), 0);
    ck_assert_uint_eq(st.coalesced, 0);

    close(fd);
    tally_ok(&e);
    env_free(&e);
    recs_free(rs, HOT + 10);
}
END_TEST

/* ================================================================== stats */

/* Counters match what was done, per server; latency percentiles ordered. */
START_TEST(test_stats)
{
    env e;
    mcr_pool_options o;
    enum { NS = 50, NR = 200 };
    rec *rs = calloc(NR, sizeof(rec));
    char keys[NS][48], miss[20][48], v[128];
    uint64_t want_req[2] = {0, 0}, want_hit[2] = {0, 0}, want_miss[2] = {0, 0};
    mcr_server_stats st;
    size_t nr = 0;

    ck_assert_ptr_nonnull(rs);
    opts_init(&o);
    o.protocol = _i ? MCR_PROTO_META : MCR_PROTO_TEXT;
    env_init(&e, 2, &o);
    for (int i = 0; i < NS; i++) {
        snprintf(keys[i], sizeof(keys[i]), "st:%d", i);
        int s = owner_of(e.router, keys[i], strlen(keys[i]));
        mcr_request q = rq(MCR_OP_SET, keys[i]);
        q.value = v;
        q.value_len = make_value(v, sizeof(v), keys[i], strlen(keys[i]), 0, (size_t)i * 10);
        ck_assert_int_eq(submit(&e, &rs[nr++], &q), MCR_OK);
        want_req[s]++;
    }
    WAIT_IDLE(&e, 5000);
    for (int i = 0; i < 30; i++) { /* hits */
        int s = owner_of(e.router, keys[i], strlen(keys[i]));
        ck_assert_int_eq(submit(&e, &rs[nr++], &(mcr_request){.op = MCR_OP_GET, .key = keys[i],
                                                                .key_len = strlen(keys[i])}),
                         MCR_OK);
        want_req[s]++;
        want_hit[s]++;
    }
    for (int i = 0; i < 20; i++) { /* misses */
        snprintf(miss[i], sizeof(miss[i]), "st:miss:%d", i);
        int s = owner_of(e.router, miss[i], strlen(miss[i]));
        ck_assert_int_eq(submit(&e, &rs[nr++], &(mcr_request){.op = MCR_OP_GET, .key = miss[i],
                                                                .key_len = strlen(miss[i])}),
                         MCR_OK);
        want_req[s]++;
        want_miss[s]++;
    }
    for (int i = 40; i < 50; i++) { /* deletes */
        int s = owner_of(e.router, keys[i], strlen(keys[i]));
        ck_assert_int_eq(submit(&e, &rs[nr++], &(mcr_request){.op = MCR_OP_DELETE,
                                                                .key = keys[i],
                                                                .key_len = strlen(keys[i])}),
                         MCR_OK);
        want_req[s]++;
    }
    WAIT_IDLE(&e, 5000);
    /* a multi-get: 40 stored (30 .. 39 hit, 40 .. 49 deleted) and 10 misses */
    mtrack *m = mt_new(&e.t, 40);
    for (int i = 10; i < 50; i++) {
        int s = owner_of(e.router, keys[i], strlen(keys[i]));
        mt_add(m, keys[i], strlen(keys[i]));
        want_req[s]++;
        if (i < 40)
            want_hit[s]++;
        else
            want_miss[s]++;
    }
    ck_assert_int_eq(submit_multi(&e, e.pool, m, MCR_OP_GET), MCR_OK);
    ck_assert(run_until(&e, c_mt_done, m, 5000));
    mt_check(m);
    ck_assert_int_eq(m->hits, 30);
    mt_free(m);
    for (size_t i = 0; i < nr; i++)
        ck_assert_int_eq(rs[i].status, MCR_OK);
    for (size_t i = NS; i < NS + 30; i++)
        EXPECT_REPLY(&rs[i], MCR_OK, MCR_REPLY_HIT);
    for (size_t i = NS + 30; i < NS + 50; i++)
        EXPECT_REPLY(&rs[i], MCR_OK, MCR_REPLY_MISS);
    for (size_t i = NS + 50; i < NS + 60; i++)
        EXPECT_REPLY(&rs[i], MCR_OK, MCR_REPLY_DELETED);

    ck_assert_uint_eq(mcr_pool_server_count(e.pool), 2);
    for (int s = 0; s < 2; s++) {
        ck_assert_int_eq(stats_of(e.pool, e.id[s], &st), 0);
        ck_assert_str_eq(st.host, e.mc[s].addr);
        ck_assert_int_eq(st.port, e.mc[s].port);
        ck_assert_int_eq(st.health, MCR_HEALTH_UP);
        ck_assert_msg(st.requests == want_req[s], "%s: %llu requests, %llu made", e.id[s],
                      (unsigned long long)st.requests, (unsigned long long)want_req[s]);
        ck_assert_msg(st.hits == want_hit[s] && st.misses == want_miss[s],
                      "%s: %llu hits %llu misses, expected %llu and %llu", e.id[s],
                      (unsigned long long)st.hits, (unsigned long long)st.misses,
                      (unsigned long long)want_hit[s], (unsigned long long)want_miss[s]);
        ck_assert_uint_eq(st.errors, 0);
        ck_assert_uint_eq(st.timeouts, 0);
        ck_assert_uint_eq(st.refusals, 0);
        ck_assert_uint_eq(st.ejections, 0);
        ck_assert_uint_eq(st.coalesced, 0);
        ck_assert_uint_eq(st.consecutive_failures, 0);
        ck_assert_uint_eq(st.connections, 1);
        ck_assert_uint_eq(st.in_flight, 0);
        ck_assert_uint_gt(st.latency_count, 0);
        ck_assert_uint_le(st.latency_count, st.requests);
        ck_assert_msg(st.p50_us > 0 && st.p50_us <= st.p90_us && st.p90_us <= st.p99_us &&
                          st.p99_us <= st.p999_us && st.p999_us <= st.max_us * 1.04,
                      "%s: p50 %g p90 %g p99 %g p999 %g max %g", e.id[s], st.p50_us, st.p90_us,
                      st.p99_us, st.p999_us, st.max_us);
        ck_assert_msg(st.max_us < 5e6, "max latency %g us", st.max_us);
    }
    ck_assert_int_eq(mcr_pool_server_stats(e.pool, 2, &st), MCR_ERR_INVALID);
    ck_assert_int_eq(mcr_pool_server_stats(e.pool, 0, NULL), MCR_ERR_INVALID);
    ck_assert_int_eq(mcr_pool_server_stats(NULL, 0, &st), MCR_ERR_INVALID);
    ck_assert_uint_eq(mcr_pool_server_count(NULL), 0);
    ck_assert_uint_eq(mcr_pool_pending(NULL), 0);

    /* errors: a killed server's failed gets */
    char kb[48];
    key_on(&e, e.id[1], "st:dead:", kb, sizeof(kb));
    env_kill(&e, 1);
    rec r;
    memset(&r, 0, sizeof(r));
    int failed = 0;
    for (int i = 0; i < 3; i++) {
        do1(&e, &r, rq(MCR_OP_GET, kb));
        ck_assert_int_ne(r.status, MCR_OK);
        failed++;
    }
    ck_assert_int_eq(stats_of(e.pool, e.id[1], &st), 0);
    ck_assert_uint_eq(st.errors, (uint64_t)failed);
    ck_assert_uint_ge(st.refusals, 1);
    ck_assert_uint_eq(st.connections, 0);
    rec_clear(&r);

    tally_ok(&e);
    env_free(&e);
    recs_free(rs, NR);
}
END_TEST

/* ================================================================== unix socket */

static int unix_connect(const char *path)
{
    struct sockaddr_un sa;
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    memset(&sa, 0, sizeof(sa));
    sa.sun_family = AF_UNIX;
    size_t len = strlen(path);
    if (len >= sizeof(sa.sun_path)) {
        close(fd);
        return -1;
    }
    memcpy(sa.sun_path, path, len + 1);
    if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

/* A memcached on a Unix socket (-s) under a server id whose TCP address
 * leads nowhere: mcr_pool_set_unix_path() makes the pool use the socket. */
START_TEST(test_unix_socket)
{
    env e;
    char *dir, path[128], buf[256];
    enum { NK = 200 };
    char keys[NK][24], v[64];
    rec *rs = calloc(NK * 2, sizeof(rec));

    ck_assert_ptr_nonnull(rs);
    dir = tu_tmpdir("pool");
    snprintf(path, sizeof(path), "%s/mc.sock", dir);
    char *argv[] = {(char *)rs_memcached_path(), "-s", path, "-U", "0", "-t", "1", "-m", "64",
                    geteuid() == 0 ? "-u" : NULL, "root", NULL};
    pid_t pid = rs_spawn(argv, NULL);
    ck_assert_int_gt(pid, 0);
    int ufd = -1;
    for (long long end = mcr_test_now_ms() + START_MS; ufd < 0 && mcr_test_now_ms() < end; sleep_ms(10))
        ufd = unix_connect(path);
    ck_assert_msg(ufd >= 0, "memcached -s %s did not start", path);

    /* server 0: TCP; server 1: 127.0.0.1 at a port nothing listens on */
    memset(&e, 0, sizeof(e));
    e.n = 1;
    env_start_server(&e, 0, 0);
    int dead_port = 0, dead_fd = -1;
    ck_assert_int_eq(rs_reserve_ports("127.0.0.1", 1, &dead_port, &dead_fd), 0);
    rs_release_ports(1, &dead_fd); /* free again: connecting there is refused */
    mcr_config *cfg = mcr_config_new();
    mcr_snapshot *s = NULL;
    const char *uid = "unix-one";
    ck_assert_int_eq(mcr_config_add_server(cfg, e.mc[0].addr, e.mc[0].port, 1, NULL), MCR_OK);
    mcr_server_desc d = {.id = uid, .host = "127.0.0.1", .port = dead_port, .weight = 1,
                         .state = MCR_STATE_ACTIVE};
    ck_assert_int_eq(mcr_config_add_server_desc(cfg, &d, NULL), MCR_OK);
    ck_assert_int_eq(mcr_snapshot_new(cfg, 1, &s, NULL), MCR_OK);
    mcr_config_free(cfg);
    ck_assert_int_eq(mcr_router_new(s, &e.router, NULL), MCR_OK);
    mcr_snapshot_unref(s);
    env_base(&e);
    env_new_pool(&e, NULL);

    char longpath[300];
    memset(longpath, 'x', sizeof(longpath) - 1);
    longpath[0] = '/';
    longpath[sizeof(longpath) - 1] = '\0';
    ck_assert_int_eq(mcr_pool_set_unix_path(e.pool, uid, longpath), MCR_ERR_TOO_LONG);
    ck_assert_int_eq(mcr_pool_set_unix_path(e.pool, NULL, path), MCR_ERR_INVALID);
    ck_assert_int_eq(mcr_pool_set_unix_path(NULL, uid, path), MCR_ERR_INVALID);
    ck_assert_int_eq(mcr_pool_set_unix_path(e.pool, uid, path), MCR_OK);

    for (int i = 0; i < NK; i++) {
        snprintf(keys[i], sizeof(keys[i]), "ux:%d", i);
        mcr_request q = rq(MCR_OP_SET, keys[i]);
        q.value = v;
        q.value_len = make_value(v, sizeof(v), keys[i], strlen(keys[i]), 0, 0);
        ck_assert_int_eq(submit(&e, &rs[i], &q), MCR_OK);
    }
    WAIT_IDLE(&e, 5000);
    int on_unix = 0;
    for (int i = 0; i < NK; i++) {
        EXPECT_REPLY(&rs[i], MCR_OK, MCR_REPLY_STORED);
        ck_assert_int_eq(submit(&e, &rs[NK + i], &(mcr_request){.op = MCR_OP_GET,
                                                                  .key = keys[i],
                                                                  .key_len = strlen(keys[i])}),
                         MCR_OK);
    }
    WAIT_IDLE(&e, 5000);
    int tfd = raw_fd(&e, 0);
    for (int i = 0; i < NK; i++) {
        EXPECT_REPLY(&rs[NK + i], MCR_OK, MCR_REPLY_HIT);
        int unix_owner = owns(&e, keys[i], uid);
        ck_assert_str_eq(rs[i].server, unix_owner ? uid : e.id[0]);
        ck_assert_int_eq(rs_mc_get(ufd, keys[i], buf, sizeof(buf), IO_MS), unix_owner);
        ck_assert_int_eq(rs_mc_get(tfd, keys[i], buf, sizeof(buf), IO_MS), !unix_owner);
        on_unix += unix_owner;
    }
    ck_assert_int_gt(on_unix, 10);
    rec r;
    memset(&r, 0, sizeof(r));
    mcr_request q = rq(MCR_OP_VERSION, NULL);
    q.server = uid;
    EXPECT_REPLY(do1(&e, &r, q), MCR_OK, MCR_REPLY_VERSION);
    q.op = MCR_OP_STATS;
    EXPECT_REPLY(do1(&e, &r, q), MCR_OK, MCR_REPLY_STATS);
    snprintf(buf, sizeof(buf), "pid %d", (int)pid);
    ck_assert_msg(stat_line(&r, buf), "stats through the socket are not its memcached's");
    tally_ok(&e);
    mcr_pool_free(e.pool);
    e.pool = NULL;

    /* a mapping for an id not in the snapshot yet waits for it */
    env_new_pool(&e, NULL);
    ck_assert_int_eq(mcr_pool_set_unix_path(e.pool, "unix-two", path), MCR_OK);
    mcr_changes *ch = mcr_changes_new();
    mcr_server_desc d2 = {.id = "unix-two", .host = "127.0.0.1",
                          .port = dead_port + 1 > 65535 ? 1 : dead_port + 1,
                          .weight = 1, .zone = NULL, .state = MCR_STATE_ACTIVE, .id_is_default = 0};
    ck_assert_int_eq(mcr_changes_add(ch, &d2, NULL), MCR_OK);
    ck_assert_int_eq(mcr_router_apply(e.router, ch, 0, NULL), MCR_OK);
    mcr_changes_free(ch);
    q = rq(MCR_OP_STATS, NULL);
    q.server = "unix-two";
    EXPECT_REPLY(do1(&e, &r, q), MCR_OK, MCR_REPLY_STATS);
    ck_assert_msg(stat_line(&r, buf), "stats of unix-two are not the socket's memcached's");
    tally_ok(&e);
    mcr_pool_free(e.pool);
    e.pool = NULL;

    /* without the mapping, a new pool uses the TCP address: refused */
    env_new_pool(&e, NULL);
    ck_assert_int_eq(mcr_pool_set_unix_path(e.pool, uid, path), MCR_OK);
    ck_assert_int_eq(mcr_pool_set_unix_path(e.pool, uid, NULL), MCR_OK);
    EXPECT_REPLY(do1(&e, &r, q), MCR_ERR_CONNECT, MCR_REPLY_OK);

    rec_clear(&r);
    close(ufd);
    close(tfd);
    tally_ok(&e);
    env_free(&e);
    rs_proc up = {pid, "", 0};
    rs_stop(&up);
    unlink(path);
    ck_assert_uint_eq(tu_tmpdir_free(dir), 0);
    recs_free(rs, NK * 2);
}
END_TEST

/* ================================================================== suite */

static Suite *suite(void)
{
    Suite *s = suite_create("pool_membership");
    PE_ADD_LOOP(s, membership, 0, 2);
    PE_ADD_LOOP(s, hot_keys, 0, 2);
    PE_ADD_LOOP(s, stats, 0, 2);
    PE_ADD(s, unix_socket);
    return s;
}

int main(void)
{
    /* SIGPIPE keeps its default action: the pool must never raise it */
    return tu_run(suite());
}
