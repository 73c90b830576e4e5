/* SPDX-License-Identifier: BSD-3-Clause */
/* test_pool_failures.c: Check suite of the connection pool: timeouts, refusals, connect timeouts, ejection and failover. */
/*
 * The environment, the request tracking and the time rules are pool_env.h's.
 *
 * What is covered: timeouts (SIGSTOP), refusals (a killed server) and connect
 * timeouts; requests cancelled by a removal; the three failure policies
 * (fail-fast, eject with its backoff, failover with its chain).
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
#include "router_count.h"
#include "testutil.h"

/* ================================================================== failures */

/* Store `n` keys "<stem><i>" (values encoding them) through the pool. */
static void store_keys(env *e, const char *stem, int n, char (*keys)[48])
{
    rec *rs = calloc((size_t)n, sizeof(rec));
    char v[128];
    ck_assert_ptr_nonnull(rs);
    for (int i = 0; i < n; i++) {
        snprintf(keys[i], 48, "%s%d", stem, i);
        mcr_request q = rq(MCR_OP_SET, keys[i]);
        q.value = v;
        q.value_len = make_value(v, sizeof(v), keys[i], strlen(keys[i]), 0, 0);
        ck_assert_int_eq(submit(e, &rs[i], &q), MCR_OK);
    }
    WAIT_IDLE(e, 10000);
    for (int i = 0; i < n; i++)
        EXPECT_REPLY(&rs[i], MCR_OK, MCR_REPLY_STORED);
    recs_free(rs, (size_t)n);
}

#define ST_KEYS 300
/* 1 s: a live server's reply must come within it on a loaded machine */
#define ST_TIMEOUT TMS(1000)

/* A server stopped with SIGSTOP: its requests fail with MCR_ERR_TIMEOUT
 * request_timeout_ms after the first of them was sent (the header: the
 * head request's timeout closes the connection and fails every request in
 * flight there), never earlier, and within a margin after; the others are
 * all answered before that. After SIGCONT it serves again. _i: the
 * protocol. */
START_TEST(test_sigstop_timeout)
{
    env e;
    mcr_pool_options o;
    char keys[ST_KEYS][48];
    int owner[ST_KEYS];
    rec *rs = calloc(ST_KEYS, sizeof(rec));
    mcr_server_stats st;

    ck_assert_ptr_nonnull(rs);
    opts_init(&o);
    o.request_timeout_ms = (unsigned)ST_TIMEOUT;
    o.protocol = _i ? MCR_PROTO_META : MCR_PROTO_TEXT;
    env_init(&e, 3, NULL); /* stored without the short timeout */
    store_keys(&e, "stop:", ST_KEYS, keys);
    mcr_pool_free(e.pool);
    env_new_pool(&e, &o);
    for (int i = 0; i < ST_KEYS; i++)
        owner[i] = owner_of(e.router, keys[i], strlen(keys[i]));

    env_sigstop(&e, 1);
    /* Submitting 300 requests takes tens of ms under a sanitizer on a busy
     * machine: a request's own submission is not when its timeout starts,
     * the first send on its connection is. No send to server 1 comes before
     * the first submission of one of its keys (first_t0, on the same clock,
     * read before the call). */
    long long first_t0 = -1;
    for (int i = 0; i < ST_KEYS; i++) {
        ck_assert_int_eq(submit(&e, &rs[i], &(mcr_request){.op = MCR_OP_GET, .key = keys[i],
                                                             .key_len = strlen(keys[i])}),
                         MCR_OK);
        if (owner[i] == 1 && first_t0 < 0)
            first_t0 = rs[i].t0;
    }
    WAIT_IDLE(&e, 3 * ST_TIMEOUT + 30000);
    long long last_ok = 0, first_timeout = -1, last_timeout = 0;
    int stopped = 0;
    for (int i = 0; i < ST_KEYS; i++) {
        if (owner[i] == 1) {
            long long since = rs[i].t1 - first_t0;
            stopped++;
            ck_assert_msg(rs[i].status == MCR_ERR_TIMEOUT,
                          "%s on the stopped server: %d (%s), %s \"%s\" from %s after %lld ms",
                          keys[i], rs[i].status, rs[i].message, mcr_reply_name(rs[i].reply),
                          rs[i].value ? rs[i].value : "", rs[i].server, since);
            /* never early: -1 for the ms clock's truncation of both ends */
            ck_assert_msg(since >= ST_TIMEOUT - 1,
                          "%s timed out %lld ms after the first send on its connection "
                          "(request_timeout_ms %d): the pool fired early: %s",
                          keys[i], since, ST_TIMEOUT, rs[i].message);
            ck_assert_msg(since <= ST_TIMEOUT + TMS(1000),
                          "%s timed out %lld ms after the first send on its connection "
                          "(request_timeout_ms %d, margin %d): %s",
                          keys[i], since, ST_TIMEOUT, TMS(1000), rs[i].message);
            ck_assert_str_eq(rs[i].server, e.id[1]);
            if (first_timeout < 0 || rs[i].t1 < first_timeout)
                first_timeout = rs[i].t1;
            if (rs[i].t1 > last_timeout)
                last_timeout = rs[i].t1;
        } else {
            EXPECT_REPLY(&rs[i], MCR_OK, MCR_REPLY_HIT);
            if (rs[i].t1 > last_ok)
                last_ok = rs[i].t1;
        }
    }
    ck_assert_int_gt(stopped, 10);
    /* one connection, one timeout: all its requests fail together */
    ck_assert_msg(last_timeout - first_timeout <= TMS(100),
                  "the stopped server's requests failed over %lld ms",
                  last_timeout - first_timeout);
    /* order, not speed: the live servers were not held up by the stopped one */
    ck_assert_msg(last_ok <= first_timeout,
                  "a live server's get was answered %lld ms after the first timeout",
                  last_ok - first_timeout);
    ck_assert_int_eq(stats_of(e.pool, e.id[1], &st), 0);
    ck_assert_uint_ge(st.timeouts, 1);
    ck_assert_uint_eq(st.errors, (uint64_t)stopped);
    ck_assert_uint_eq(st.in_flight, 0);
    ck_assert_int_eq(stats_of(e.pool, e.id[0], &st), 0);
    ck_assert_uint_eq(st.timeouts, 0);
    ck_assert_uint_eq(st.errors, 0);

    /* resumed: served again (one failure is under the limit of 2) */
    ck_assert_int_eq(kill(e.mc[1].pid, SIGCONT), 0);
    for (int i = 0; i < ST_KEYS; i++)
        if (owner[i] == 1) {
            rec r;
            memset(&r, 0, sizeof(r));
            EXPECT_REPLY(do1(&e, &r, rq(MCR_OP_GET, keys[i])), MCR_OK, MCR_REPLY_HIT);
            rec_clear(&r);
        }
    tally_ok(&e);
    env_free(&e);
    recs_free(rs, ST_KEYS);
}
END_TEST

/* Gets of `key` one at a time until one does not fail with `failing`
 * (at most `max`): the number that failed so. The last record in *r. */
static int fail_until(env *e, rec *r, const char *key, int failing, int max)
{
    int n = 0;
    for (; n < max; n++) {
        do1(e, r, rq(MCR_OP_GET, key));
        if (r->status != failing)
            break;
    }
    return n;
}

/* A killed server: MCR_ERR_CONNECT, counted as refusals; at the failure
 * limit fail-fast answers MCR_ERR_DOWN at once (in a callback, not at
 * submission) until retry_timeout_ms, then tries again: restarted on the
 * same port, it serves. _i: the protocol. */
START_TEST(test_kill_fail_fast)
{
    env e;
    mcr_pool_options o;
    rec r;
    char kb[48], kb0[48], buf[64];
    mcr_server_stats st;

    memset(&r, 0, sizeof(r));
    opts_init(&o);
    o.policy = MCR_POLICY_FAIL_FAST;
    o.server_failure_limit = 2;
    o.retry_timeout_ms = TMS(400);
    o.request_timeout_ms = TMS(300);
    o.connect_timeout_ms = TMS(300);
    o.protocol = _i ? MCR_PROTO_META : MCR_PROTO_TEXT;
    env_init(&e, 2, &o);
    key_on(&e, e.id[1], "ff:", kb, sizeof(kb));
    key_on(&e, e.id[0], "ff0:", kb0, sizeof(kb0));
    /* stored with the raw client: the pool has no connection to server 1 yet */
    make_value(buf, sizeof(buf), kb, strlen(kb), 0, 0);
    int fd = raw_fd(&e, 1);
    ck_assert_int_eq(rs_mc_set(fd, kb, buf, IO_MS), 0);
    close(fd);
    int port = e.mc[1].port;
    env_kill(&e, 1);

    EXPECT_REPLY(do1(&e, &r, rq(MCR_OP_GET, kb)), MCR_ERR_CONNECT, MCR_REPLY_MISS);
    ck_assert_str_eq(r.server, e.id[1]);
    ck_assert(r.message[0] != '\0');
    ck_assert_int_eq(stats_of(e.pool, e.id[1], &st), 0);
    ck_assert_uint_eq(st.refusals, 1);
    ck_assert_uint_eq(st.consecutive_failures, 1);
    ck_assert_int_eq(st.health, MCR_HEALTH_UP);
    EXPECT_REPLY(do1(&e, &r, rq(MCR_OP_GET, kb)), MCR_ERR_CONNECT, MCR_REPLY_MISS);
    ck_assert_int_eq(stats_of(e.pool, e.id[1], &st), 0);
    ck_assert_uint_eq(st.refusals, 2);
    ck_assert_int_eq(st.health, MCR_HEALTH_DOWN);
    /* The pool went down between the submission of that get and now: its
     * retry comes no earlier than retry_from and no later than down_at +
     * retry_timeout_ms. */
    long long retry_from = r.t0 + (long long)o.retry_timeout_ms;
    long long down_at = mcr_test_now_ms();
    /* down: at once, in a callback */
    do1(&e, &r, rq(MCR_OP_GET, kb));
    EXPECT_REPLY(&r, MCR_ERR_DOWN, MCR_REPLY_MISS);
    ck_assert_msg(r.t1 - r.t0 < TMS(250), "MCR_ERR_DOWN after %lld ms", r.t1 - r.t0);
    do1(&e, &r, rq_store(MCR_OP_SET, kb, buf, 0));
    EXPECT_REPLY(&r, MCR_ERR_DOWN, MCR_REPLY_MISS);
    /* the other server is not affected */
    EXPECT_REPLY(do1(&e, &r, rq(MCR_OP_GET, kb0)), MCR_OK, MCR_REPLY_MISS);

    /* back on the same port, but fail-fast waits for retry_timeout_ms */
    env_start_server(&e, 1, port);
    ck_assert_int_eq(e.mc[1].port, port);
    while (mcr_test_now_ms() < retry_from - TMS(100)) {
        do1(&e, &r, rq(MCR_OP_GET, kb));
        if (r.t0 + 1 < retry_from) { /* submitted before the retry may come */
            EXPECT_REPLY(&r, MCR_ERR_DOWN, MCR_REPLY_MISS);
        }
        run_ms(&e, 30);
    }
    long long left = down_at + (long long)o.retry_timeout_ms + TMS(50) - mcr_test_now_ms();
    if (left > 0) /* not: a loaded machine may be past it already */
        run_ms(&e, (unsigned)left);
    EXPECT_REPLY(do1(&e, &r, rq(MCR_OP_GET, kb)), MCR_OK, MCR_REPLY_MISS); /* a new, empty memcached */
    EXPECT_REPLY(do1(&e, &r, rq_store(MCR_OP_SET, kb, buf, 0)), MCR_OK, MCR_REPLY_STORED);
    EXPECT_REPLY(do1(&e, &r, rq(MCR_OP_GET, kb)), MCR_OK, MCR_REPLY_HIT);
    ck_assert_int_eq(stats_of(e.pool, e.id[1], &st), 0);
    ck_assert_int_eq(st.health, MCR_HEALTH_UP);
    ck_assert_uint_eq(st.consecutive_failures, 0);

    /* killed again (more than retry_timeout_ms after it came back, so no
     * backoff applies) and left dead: after the retry it is tried
     * (refused) and down again */
    run_ms(&e, o.retry_timeout_ms + 100);
    env_kill(&e, 1);
    int connects = fail_until(&e, &r, kb, MCR_ERR_CONNECT, 5);
    ck_assert_msg(connects >= 1 && connects <= 2, "%d refusals before down", connects);
    EXPECT_REPLY(&r, MCR_ERR_DOWN, MCR_REPLY_MISS);
    run_ms(&e, o.retry_timeout_ms + 100);
    EXPECT_REPLY(do1(&e, &r, rq(MCR_OP_GET, kb)), MCR_ERR_CONNECT, MCR_REPLY_MISS);
    EXPECT_REPLY(do1(&e, &r, rq(MCR_OP_GET, kb)), MCR_ERR_DOWN, MCR_REPLY_MISS);
    ck_assert_uint_eq(mcr_router_epoch(e.router), 1); /* fail-fast never changes the ring */

    tally_ok(&e);
    rec_clear(&r);
    env_free(&e);
}
END_TEST

/* What a router hook saw of one server. */
typedef struct pub_log {
    const char *id;
    int publishes;           /* hook calls: publishes and local-state changes */
    uint64_t last_epoch;     /* the epoch of the last new snapshot */
    int down, up;            /* publishes that set it DOWN, ACTIVE again */
    long long t_down[8], t_up[8];
} pub_log;

static void pub_hook(const mcr_snapshot *old_snap, const mcr_snapshot *new_snap,
                     const mcr_diff *diff, void *arg)
{
    pub_log *l = arg;
    mcr_server_desc a, b;
    (void)diff;
    l->publishes++;
    l->last_epoch = mcr_snapshot_epoch(new_snap);
    uint32_t i = mcr_snapshot_find(old_snap, l->id), j = mcr_snapshot_find(new_snap, l->id);
    if (i == MCR_NO_SERVER || j == MCR_NO_SERVER || mcr_snapshot_server(old_snap, (size_t)i, &a) != MCR_OK ||
        mcr_snapshot_server(new_snap, (size_t)j, &b) != MCR_OK)
        return;
    if (a.state != MCR_STATE_DOWN && b.state == MCR_STATE_DOWN && l->down < 8)
        l->t_down[l->down++] = mcr_test_now_ms();
    if (a.state == MCR_STATE_DOWN && b.state == MCR_STATE_ACTIVE && l->up < 8)
        l->t_up[l->up++] = mcr_test_now_ms();
}

typedef struct state_wait {
    const char *id;
    int state;
} state_wait;

static int c_state(env *e, void *arg)
{
    state_wait *w = arg;
    return state_of(e->router, w->id) == w->state;
}

/* Gets of a key of server `id` (each routed anew) until the router shows it
 * DOWN; at most `max` requests. Returns the requests made. */
static int eject_by_gets(env *e, const char *id, const char *key, int max)
{
    rec r;
    int n = 0;
    memset(&r, 0, sizeof(r));
    while (n < max && state_of(e->router, id) != MCR_STATE_DOWN) {
        do1(e, &r, rq(MCR_OP_GET, key));
        n++;
    }
    rec_clear(&r);
    return n;
}

#define EJ_RETRY TMS(200)

/* Eject: after the failure limit the pool sets the server DOWN in the
 * router's local overlay (the epoch stays, the published snapshot still
 * says ACTIVE), its keys move to the others (for every pool of the
 * router); while it stays dead it is not re-added; restarted, it is probed
 * after retry_timeout_ms and its local state cleared. */
START_TEST(test_eject)
{
    env e;
    mcr_pool_options o;
    rec r;
    char kb[48];
    pub_log log;
    mcr_server_stats st;

    memset(&r, 0, sizeof(r));
    memset(&log, 0, sizeof(log));
    opts_init(&o);
    o.policy = MCR_POLICY_EJECT;
    o.server_failure_limit = 2;
    o.retry_timeout_ms = EJ_RETRY;
    o.retry_max_ms = 4 * EJ_RETRY;
    o.request_timeout_ms = TMS(300);
    o.connect_timeout_ms = TMS(300);
    o.protocol = _i ? MCR_PROTO_META : MCR_PROTO_TEXT;
    env_init(&e, 3, &o);
    log.id = e.id[1];
    ck_assert_int_eq(mcr_router_add_hook(e.router, pub_hook, &log), MCR_OK);
    uint64_t gen0 = mcr_router_generation(e.router);
    mcr_pool *p2 = NULL; /* another pool of the same router */
    mcr_pool_options o2;
    opts_init(&o2);
    ck_assert_int_eq(mcr_pool_new(e.base, e.router, &o2, &p2, NULL), MCR_OK);

    key_on(&e, e.id[1], "ej:", kb, sizeof(kb));
    EXPECT_REPLY(do1(&e, &r, rq(MCR_OP_GET, kb)), MCR_OK, MCR_REPLY_MISS);
    int port = e.mc[1].port;
    env_kill(&e, 1);

    int n = eject_by_gets(&e, e.id[1], kb, 10);
    ck_assert_msg(state_of(e.router, e.id[1]) == MCR_STATE_DOWN,
                  "not ejected after %d failed gets", n);
    ck_assert_msg(n <= 3, "ejected after %d failed gets, limit 2", n);
    ck_assert_int_eq(log.publishes, 1);
    ck_assert_int_eq(log.down, 1);
    /* a local state, not an epoch */
    ck_assert_uint_eq(mcr_router_epoch(e.router), 1);
    ck_assert_uint_eq(log.last_epoch, 1);
    ck_assert_uint_eq(mcr_router_generation(e.router), gen0 + 1);
    ck_assert_int_eq(published_state_of(e.router, e.id[1]), MCR_STATE_ACTIVE);
    mcr_server_state lst;
    int applied = 0;
    ck_assert_int_eq(mcr_router_local_state(e.router, e.id[1], &lst, &applied), MCR_OK);
    ck_assert_int_eq(lst, MCR_STATE_DOWN);
    ck_assert_int_eq(applied, 1);
    ck_assert_int_eq(stats_of(e.pool, e.id[1], &st), 0);
    ck_assert_int_eq(st.health, MCR_HEALTH_EJECTED);
    ck_assert_uint_eq(st.ejections, 1);

    /* its keys go elsewhere, for both pools */
    do1(&e, &r, rq(MCR_OP_GET, kb));
    EXPECT_REPLY(&r, MCR_OK, MCR_REPLY_MISS);
    ck_assert_str_ne(r.server, e.id[1]);
    ck_assert_uint_eq(r.epoch, 1);
    rec r2;
    memset(&r2, 0, sizeof(r2));
    ck_assert_int_eq(submit_to(&e, p2, &r2, &(mcr_request){.op = MCR_OP_GET, .key = kb,
                                                           .key_len = strlen(kb)}),
                     MCR_OK);
    ck_assert(run_until(&e, c_called, &r2, 5000));
    EXPECT_REPLY(&r2, MCR_OK, MCR_REPLY_MISS);
    ck_assert_str_ne(r2.server, e.id[1]);
    ck_assert_uint_eq(r2.epoch, 1);

    /* dead for 6 retry periods: probed, never re-added */
    long long until = mcr_test_now_ms() + 6 * EJ_RETRY;
    while (mcr_test_now_ms() < until) {
        run_ms(&e, 20);
        ck_assert_msg(state_of(e.router, e.id[1]) == MCR_STATE_DOWN,
                      "a dead server was re-added: state %d", state_of(e.router, e.id[1]));
    }
    ck_assert_int_eq(log.publishes, 1);

    /* restarted: probed and re-added within the (backed off) retry */
    env_start_server(&e, 1, port);
    long long back = mcr_test_now_ms();
    state_wait w = {e.id[1], MCR_STATE_ACTIVE};
    ck_assert_msg(run_until(&e, c_state, &w, 4 * EJ_RETRY + 1500),
                  "not re-added within %d ms of restarting", 4 * EJ_RETRY + 1500);
    ck_assert_int_eq(log.up, 1);
    ck_assert_int_eq(log.publishes, 2);
    ck_assert_msg(log.t_up[0] - back <= 4 * EJ_RETRY + TMS(500), "re-added %lld ms after restart",
                  log.t_up[0] - back);
    do1(&e, &r, rq(MCR_OP_GET, kb));
    EXPECT_REPLY(&r, MCR_OK, MCR_REPLY_MISS);
    ck_assert_str_eq(r.server, e.id[1]);
    ck_assert_uint_eq(r.epoch, 1);
    ck_assert_uint_eq(mcr_router_epoch(e.router), 1);
    ck_assert_uint_eq(mcr_router_generation(e.router), gen0 + 2);
    ck_assert_int_eq(mcr_router_local_state(e.router, e.id[1], NULL, NULL), MCR_ERR_UNKNOWN);
    ck_assert_int_eq(stats_of(e.pool, e.id[1], &st), 0);
    ck_assert_int_eq(st.health, MCR_HEALTH_UP);

    /* a quiet period: nothing more is published */
    run_ms(&e, 3 * EJ_RETRY);
    ck_assert_int_eq(log.publishes, 2);
    /* the two snapshots the ejection and the re-add replaced were freed by
     * the loop itself (its publishes leave them to it, see
     * tu_router_collect()), with no call but the loop's */
    ck_assert_msg(run_until(&e, c_nothing_retired, e.router, 5000),
                  "%zu replaced snapshots still await the loop's collect",
                  tu_router_retired(e.router));

    ck_assert_int_eq(mcr_router_remove_hook(e.router, pub_hook, &log), MCR_OK);
    ck_assert(run_until(&e, c_idle, NULL, 1000));
    mcr_pool_free(p2);
    tally_ok(&e);
    rec_clear(&r);
    rec_clear(&r2);
    env_free(&e);
}
END_TEST

/* No flapping: a server that fails again within retry_timeout_ms of being
 * re-added waits twice as long for its next probe. */
START_TEST(test_eject_backoff)
{
    env e;
    mcr_pool_options o;
    char kb[48];
    pub_log log;

    memset(&log, 0, sizeof(log));
    opts_init(&o);
    o.policy = MCR_POLICY_EJECT;
    o.server_failure_limit = 1;
    o.retry_timeout_ms = EJ_RETRY;
    o.retry_max_ms = 16 * EJ_RETRY;
    o.request_timeout_ms = TMS(300);
    o.connect_timeout_ms = TMS(300);
    env_init(&e, 2, &o);
    log.id = e.id[1];
    ck_assert_int_eq(mcr_router_add_hook(e.router, pub_hook, &log), MCR_OK);
    key_on(&e, e.id[1], "bo:", kb, sizeof(kb));
    int port = e.mc[1].port;
    state_wait up = {e.id[1], MCR_STATE_ACTIVE};

    /* round 1: killed, ejected, restarted at once: re-added after ~retry */
    env_kill(&e, 1);
    eject_by_gets(&e, e.id[1], kb, 5);
    ck_assert_int_eq(log.down, 1);
    env_start_server(&e, 1, port);
    ck_assert(run_until(&e, c_state, &up, 10 * EJ_RETRY));
    long long gap1 = log.t_up[0] - log.t_down[0];

    /* round 2: fails again at once (within retry_timeout_ms of coming back) */
    env_kill(&e, 1);
    eject_by_gets(&e, e.id[1], kb, 5);
    ck_assert_int_eq(log.down, 2);
    ck_assert_msg(log.t_down[1] - log.t_up[0] < EJ_RETRY, "second failure %lld ms after",
                  log.t_down[1] - log.t_up[0]);
    env_start_server(&e, 1, port);
    ck_assert(run_until(&e, c_state, &up, 20 * EJ_RETRY));
    long long gap2 = log.t_up[1] - log.t_down[1];

    /* The lower bounds are the contract (never probed before the backoff);
     * the upper ones only say that the re-add came, with room for a loop
     * starved on a loaded machine (seen: 969 ms for a 200 ms retry at a
     * load average of 10 on 2 cores). */
    ck_assert_msg(gap1 >= EJ_RETRY - TMS(20) && gap1 <= EJ_RETRY + TMS(2000),
                  "first probe %lld ms after the ejection, retry %d", gap1, EJ_RETRY);
    ck_assert_msg(gap2 >= 2 * EJ_RETRY - TMS(20) && gap2 <= 2 * EJ_RETRY + TMS(2000),
                  "after failing again at once, re-added %lld ms after the ejection "
                  "(first time %lld ms), expected twice retry_timeout_ms (%d)",
                  gap2, gap1, 2 * EJ_RETRY);
    ck_assert_int_eq(log.publishes, 4);
    mcr_router_remove_hook(e.router, pub_hook, &log);
    tally_ok(&e);
    env_free(&e);
}
END_TEST

/* Failover: plain reads (get, gets, multi-gets) of a down server's keys go
 * to the next replica (which holds its own copy); writes, gat, gats and
 * touch fail with MCR_ERR_DOWN; the ring stays. */
START_TEST(test_failover)
{
    env e;
    mcr_pool_options o;
    rec r;
    enum { NK = 20 };
    char keys[NK][48], v[128];
    int replica[NK];
    mcr_server_stats st;

    memset(&r, 0, sizeof(r));
    opts_init(&o);
    o.policy = MCR_POLICY_FAILOVER;
    o.server_failure_limit = 2;
    o.retry_timeout_ms = TMS(30000);
    o.request_timeout_ms = TMS(300);
    o.connect_timeout_ms = TMS(300);
    o.protocol = _i ? MCR_PROTO_META : MCR_PROTO_TEXT;
    env_init(&e, 3, &o);
    e.t.raw_values = 1; /* checked below: "val|<key>|0|" primary, "|1|" replica */

    mcr_snapshot *s = mcr_router_current(e.router);
    for (int i = 0; i < NK; i++) {
        char stem[16];
        snprintf(stem, sizeof(stem), "fo%d:", i);
        key_on(&e, e.id[1], stem, keys[i], sizeof(keys[i]));
        uint32_t rep[2];
        ck_assert_uint_eq(mcr_snapshot_replicas(s, keys[i], strlen(keys[i]), 2, rep, NULL), 2);
        ck_assert_uint_eq(rep[0], 1);
        replica[i] = (int)rep[1];
        mcr_request q = rq(MCR_OP_SET, keys[i]);
        q.value = v;
        q.value_len = make_value(v, sizeof(v), keys[i], strlen(keys[i]), 0, 0);
        EXPECT_REPLY(do1(&e, &r, q), MCR_OK, MCR_REPLY_STORED);
        ck_assert_str_eq(r.server, e.id[1]);
        q.value_len = make_value(v, sizeof(v), keys[i], strlen(keys[i]), 1, 0);
        q.server = e.id[replica[i]];
        EXPECT_REPLY(do1(&e, &r, q), MCR_OK, MCR_REPLY_STORED);
        ck_assert_str_eq(r.server, e.id[replica[i]]);
    }
    mcr_snapshot_unref(s);
    EXPECT_REPLY(do1(&e, &r, rq(MCR_OP_GET, keys[0])), MCR_OK, MCR_REPLY_HIT);
    make_value(v, sizeof(v), keys[0], strlen(keys[0]), 0, 0);
    EXPECT_VALUE(&r, v);

    env_kill(&e, 1);
    int failed = fail_until(&e, &r, keys[0], MCR_ERR_CONNECT, 5);
    ck_assert_msg(failed >= 1 && failed <= 2, "%d refusals before failover", failed);
    ck_assert_int_eq(stats_of(e.pool, e.id[1], &st), 0);
    ck_assert_int_eq(st.health, MCR_HEALTH_DOWN);

    for (int i = 0; i < NK; i++) {
        make_value(v, sizeof(v), keys[i], strlen(keys[i]), 1, 0);
        EXPECT_REPLY(do1(&e, &r, rq(MCR_OP_GET, keys[i])), MCR_OK, MCR_REPLY_HIT);
        EXPECT_VALUE(&r, v);
        ck_assert_str_eq(r.server, e.id[replica[i]]);
        EXPECT_REPLY(do1(&e, &r, rq(MCR_OP_GETS, keys[i])), MCR_OK, MCR_REPLY_HIT);
        EXPECT_VALUE(&r, v);
        ck_assert_str_eq(r.server, e.id[replica[i]]);
        /* gat, gats and touch change the item: no failover */
        mcr_request q = rq(MCR_OP_GAT, keys[i]);
        q.exptime = 500;
        EXPECT_REPLY(do1(&e, &r, q), MCR_ERR_DOWN, MCR_REPLY_MISS);
        q.op = MCR_OP_GATS;
        EXPECT_REPLY(do1(&e, &r, q), MCR_ERR_DOWN, MCR_REPLY_MISS);
        q.op = MCR_OP_TOUCH;
        EXPECT_REPLY(do1(&e, &r, q), MCR_ERR_DOWN, MCR_REPLY_MISS);
        /* writes fail */
        EXPECT_REPLY(do1(&e, &r, rq_store(MCR_OP_SET, keys[i], v, 0)), MCR_ERR_DOWN, MCR_REPLY_MISS);
        EXPECT_REPLY(do1(&e, &r, rq_store(MCR_OP_ADD, keys[i], v, 0)), MCR_ERR_DOWN, MCR_REPLY_MISS);
        EXPECT_REPLY(do1(&e, &r, rq_store(MCR_OP_APPEND, keys[i], v, 0)), MCR_ERR_DOWN,
               MCR_REPLY_MISS);
        EXPECT_REPLY(do1(&e, &r, rq(MCR_OP_DELETE, keys[i])), MCR_ERR_DOWN, MCR_REPLY_MISS);
        q = rq(MCR_OP_INCR, keys[i]);
        q.delta = 1;
        EXPECT_REPLY(do1(&e, &r, q), MCR_ERR_DOWN, MCR_REPLY_MISS);
    }
    /* a multi-get of them: from the replicas too */
    mtrack *m = mt_new(&e.t, NK);
    for (int i = 0; i < NK; i++)
        mt_add(m, keys[i], strlen(keys[i]));
    ck_assert_int_eq(submit_multi(&e, e.pool, m, MCR_OP_GET), MCR_OK);
    ck_assert(run_until(&e, c_mt_done, m, 5000));
    mt_check(m);
    ck_assert_int_eq(m->done_status, MCR_OK);
    ck_assert_int_eq(m->hits, NK);
    mt_free(m);
    /* a request naming the down server: no failover */
    mcr_request q = rq(MCR_OP_GET, keys[0]);
    q.server = e.id[1];
    do1(&e, &r, q);
    ck_assert_msg(r.status == MCR_ERR_DOWN || r.status == MCR_ERR_CONNECT,
                  "get sent to the down server: %d", r.status);
    /* the ring is never changed */
    ck_assert_uint_eq(mcr_router_epoch(e.router), 1);
    ck_assert_int_eq(state_of(e.router, e.id[1]), MCR_STATE_ACTIVE);

    tally_ok(&e);
    rec_clear(&r);
    env_free(&e);
}
END_TEST

/* A connection that cannot be made in time (a listener whose accept queue
 * is full drops the SYN): MCR_ERR_TIMEOUT after connect_timeout_ms, counted
 * as a timeout; the other server is not affected. */
START_TEST(test_connect_timeout)
{
    env e;
    mcr_pool_options o;
    struct sockaddr_in sa;
    socklen_t sl = sizeof(sa);
    int lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), filler[4];
    rec r;

    memset(&r, 0, sizeof(r));
    memset(&sa, 0, sizeof(sa));
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ck_assert(lfd >= 0 && bind(lfd, (struct sockaddr *)&sa, sizeof(sa)) == 0 &&
              listen(lfd, 0) == 0 && getsockname(lfd, (struct sockaddr *)&sa, &sl) == 0);
    int port = ntohs(sa.sin_port);
    for (int i = 0; i < 4; i++) /* fill the accept queue; never accepted */
        filler[i] = rs_connect("127.0.0.1", port, 100);

    memset(&e, 0, sizeof(e));
    e.n = 2;
    env_start_server(&e, 1, 0);
    snprintf(e.id[0], sizeof(e.id[0]), "127.0.0.1:%d", port);
    mcr_config *cfg = mcr_config_new();
    mcr_snapshot *s = NULL;
    ck_assert_int_eq(mcr_config_add_server(cfg, "127.0.0.1", port, 1, NULL), MCR_OK);
    ck_assert_int_eq(mcr_config_add_server(cfg, e.mc[1].addr, e.mc[1].port, 1, NULL), MCR_OK);
    ck_assert_int_eq(mcr_snapshot_new(cfg, 1, &s, NULL), MCR_OK);
    mcr_config_free(cfg);
    ck_assert_int_eq(mcr_router_new(s, &e.router, NULL), MCR_OK);
    mcr_snapshot_unref(s);
    env_base(&e);
    opts_init(&o);
    o.connect_timeout_ms = TMS(300);
    o.request_timeout_ms = TMS(2000);
    o.server_failure_limit = 10;
    env_new_pool(&e, &o);

    char kb[32], kb1[32];
    key_on(&e, e.id[0], "ct:", kb, sizeof(kb));
    key_on(&e, e.id[1], "ct1:", kb1, sizeof(kb1));
    rec other;
    memset(&other, 0, sizeof(other));
    ck_assert_int_eq(submit(&e, &r, &(mcr_request){.op = MCR_OP_GET, .key = kb,
                                                     .key_len = strlen(kb)}),
                     MCR_OK);
    ck_assert_int_eq(submit(&e, &other, &(mcr_request){.op = MCR_OP_GET, .key = kb1,
                                                         .key_len = strlen(kb1)}),
                     MCR_OK);
    WAIT_IDLE(&e, 5000);
    long long took = r.t1 - r.t0;
    ck_assert_msg(r.status == MCR_ERR_TIMEOUT, "connect to a full listener: %d (%s)", r.status,
                  r.message);
    /* the connect starts after r.t0: never early (-1: the ms clock) */
    ck_assert_msg(took >= TMS(300) - 1 && took <= TMS(300) + TMS(500),
                  "connect timed out after %lld ms, connect_timeout_ms %d", took, TMS(300));
    EXPECT_REPLY(&other, MCR_OK, MCR_REPLY_MISS);
    /* order, not speed: the other server did not wait for the timeout */
    ck_assert_msg(other.t1 <= r.t1, "the other server's get took %lld ms, the timeout %lld",
                  other.t1 - other.t0, took);
    mcr_server_stats st;
    ck_assert_int_eq(stats_of(e.pool, e.id[0], &st), 0);
    ck_assert_uint_eq(st.timeouts, 1);
    ck_assert_uint_eq(st.errors, 1);
    ck_assert_uint_eq(st.consecutive_failures, 1);
    tally_ok(&e);
    rec_clear(&r);
    rec_clear(&other);
    env_free(&e);
    for (int i = 0; i < 4; i++)
        if (filler[i] >= 0)
            close(filler[i]);
    close(lfd);
}
END_TEST

/* Requests still waiting for a connection to a server that a new snapshot
 * removes end with MCR_ERR_CANCELLED, without waiting for the connect
 * timeout. */
START_TEST(test_cancel_on_removal)
{
    env e;
    mcr_pool_options o;
    struct sockaddr_in sa;
    socklen_t sl = sizeof(sa);
    int lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), filler[4];
    enum { NQ = 10 };
    rec rs[NQ];

    memset(rs, 0, sizeof(rs));
    memset(&sa, 0, sizeof(sa));
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ck_assert(lfd >= 0 && bind(lfd, (struct sockaddr *)&sa, sizeof(sa)) == 0 &&
              listen(lfd, 0) == 0 && getsockname(lfd, (struct sockaddr *)&sa, &sl) == 0);
    int port = ntohs(sa.sin_port);
    for (int i = 0; i < 4; i++)
        filler[i] = rs_connect("127.0.0.1", port, 100);
    memset(&e, 0, sizeof(e));
    e.n = 2;
    env_start_server(&e, 1, 0);
    snprintf(e.id[0], sizeof(e.id[0]), "127.0.0.1:%d", port);
    mcr_config *cfg = mcr_config_new();
    mcr_snapshot *s = NULL;
    ck_assert_int_eq(mcr_config_add_server(cfg, "127.0.0.1", port, 1, NULL), MCR_OK);
    ck_assert_int_eq(mcr_config_add_server(cfg, e.mc[1].addr, e.mc[1].port, 1, NULL), MCR_OK);
    ck_assert_int_eq(mcr_snapshot_new(cfg, 1, &s, NULL), MCR_OK);
    mcr_config_free(cfg);
    ck_assert_int_eq(mcr_router_new(s, &e.router, NULL), MCR_OK);
    mcr_snapshot_unref(s);
    env_base(&e);
    opts_init(&o);
    o.connect_timeout_ms = TMS(3000);
    o.request_timeout_ms = TMS(3000);
    env_new_pool(&e, &o);

    char keys[NQ][32];
    for (int i = 0; i < NQ; i++) {
        char stem[16];
        snprintf(stem, sizeof(stem), "cr%d:", i);
        key_on(&e, e.id[0], stem, keys[i], sizeof(keys[i]));
        ck_assert_int_eq(submit(&e, &rs[i], &(mcr_request){.op = i % 2 ? MCR_OP_GET : MCR_OP_SET,
                                                             .key = keys[i],
                                                             .key_len = strlen(keys[i]),
                                                             .value = "val|", .value_len = 4}),
                         MCR_OK);
    }
    run_ms(&e, 100); /* connecting */
    for (int i = 0; i < NQ; i++)
        ck_assert_int_eq(rs[i].calls, 0);
    apply_change(&e, 1, 0);
    ck_assert_int_eq(mcr_pool_refresh(e.pool), MCR_OK);
    WAIT_IDLE(&e, 5000);
    for (int i = 0; i < NQ; i++) {
        ck_assert_msg(rs[i].status == MCR_ERR_CANCELLED, "%s waiting for a connection to a "
                      "removed server: %d (%s)", keys[i], rs[i].status, rs[i].message);
        ck_assert_msg(rs[i].t1 - rs[i].t0 < 1000, "cancelled after %lld ms",
                      rs[i].t1 - rs[i].t0);
    }
    /* the keys now go to the other server */
    rec r;
    memset(&r, 0, sizeof(r));
    EXPECT_REPLY(do1(&e, &r, rq(MCR_OP_GET, keys[1])), MCR_OK, MCR_REPLY_MISS);
    ck_assert_str_eq(r.server, e.id[1]);
    tally_ok(&e);
    rec_clear(&r);
    for (int i = 0; i < NQ; i++)
        rec_clear(&rs[i]);
    env_free(&e);
    for (int i = 0; i < 4; i++)
        if (filler[i] >= 0)
            close(filler[i]);
    close(lfd);
}
END_TEST

/* Eject after timeouts (a SIGSTOPped server): its probes connect (the
 * kernel accepts for a stopped process) but get no answer, so it is not
 * re-added while stopped; resumed, it is. */
START_TEST(test_eject_stopped)
{
    env e;
    mcr_pool_options o;
    char kb[48];
    pub_log log;

    memset(&log, 0, sizeof(log));
    opts_init(&o);
    o.policy = MCR_POLICY_EJECT;
    o.server_failure_limit = 2;
    o.retry_timeout_ms = EJ_RETRY;
    o.retry_max_ms = 2 * EJ_RETRY;
    o.request_timeout_ms = TMS(150);
    o.connect_timeout_ms = TMS(150);
    env_init(&e, 3, &o);
    log.id = e.id[1];
    ck_assert_int_eq(mcr_router_add_hook(e.router, pub_hook, &log), MCR_OK);
    key_on(&e, e.id[1], "es:", kb, sizeof(kb));
    rec r;
    memset(&r, 0, sizeof(r));
    EXPECT_REPLY(do1(&e, &r, rq(MCR_OP_GET, kb)), MCR_OK, MCR_REPLY_MISS);

    env_sigstop(&e, 1);
    int n = eject_by_gets(&e, e.id[1], kb, 10);
    ck_assert_msg(state_of(e.router, e.id[1]) == MCR_STATE_DOWN,
                  "not ejected after %d timed out gets", n);
    mcr_server_stats st;
    ck_assert_int_eq(stats_of(e.pool, e.id[1], &st), 0);
    ck_assert_uint_ge(st.timeouts, 2);
    /* stopped for 8 retry periods: probed, never re-added */
    long long until = mcr_test_now_ms() + 8 * EJ_RETRY;
    while (mcr_test_now_ms() < until) {
        run_ms(&e, 20);
        ck_assert_msg(state_of(e.router, e.id[1]) == MCR_STATE_DOWN,
                      "a stopped server (probes unanswered) was re-added");
    }
    ck_assert_int_eq(log.publishes, 1);
    ck_assert_int_eq(kill(e.mc[1].pid, SIGCONT), 0);
    state_wait w = {e.id[1], MCR_STATE_ACTIVE};
    ck_assert_msg(run_until(&e, c_state, &w, 6 * EJ_RETRY + 1000),
                  "resumed server not re-added");
    ck_assert_int_eq(log.publishes, 2);
    EXPECT_REPLY(do1(&e, &r, rq(MCR_OP_GET, kb)), MCR_OK, MCR_REPLY_MISS);
    ck_assert_str_eq(r.server, e.id[1]);
    mcr_router_remove_hook(e.router, pub_hook, &log);
    tally_ok(&e);
    rec_clear(&r);
    env_free(&e);
}
END_TEST

/* Two eject pools on one router: the server is set DOWN once, and back
 * once, and both pools follow. */
START_TEST(test_eject_two_pools)
{
    env e;
    mcr_pool_options o;
    char kb[48];
    pub_log log;
    rec r, r2;

    memset(&log, 0, sizeof(log));
    memset(&r, 0, sizeof(r));
    memset(&r2, 0, sizeof(r2));
    opts_init(&o);
    o.policy = MCR_POLICY_EJECT;
    o.server_failure_limit = 1;
    o.retry_timeout_ms = EJ_RETRY;
    o.retry_max_ms = 2 * EJ_RETRY;
    o.request_timeout_ms = TMS(300);
    o.connect_timeout_ms = TMS(300);
    env_init(&e, 3, &o);
    mcr_pool *p2 = NULL;
    ck_assert_int_eq(mcr_pool_new(e.base, e.router, &o, &p2, NULL), MCR_OK);
    log.id = e.id[1];
    ck_assert_int_eq(mcr_router_add_hook(e.router, pub_hook, &log), MCR_OK);
    key_on(&e, e.id[1], "e2:", kb, sizeof(kb));
    int port = e.mc[1].port;
    env_kill(&e, 1);

    /* both pools send a get to the dead server before either has ejected it */
    mcr_request q = rq(MCR_OP_GET, kb);
    ck_assert_int_eq(submit(&e, &r, &q), MCR_OK);
    ck_assert_int_eq(submit_to(&e, p2, &r2, &q), MCR_OK);
    ck_assert(run_until(&e, c_called, &r, 3000) && run_until(&e, c_called, &r2, 3000));
    ck_assert_int_eq(r.status, MCR_ERR_CONNECT);
    ck_assert_int_eq(r2.status, MCR_ERR_CONNECT);
    run_ms(&e, 50);
    ck_assert_int_eq(state_of(e.router, e.id[1]), MCR_STATE_DOWN);
    ck_assert_msg(log.publishes == 1, "%d publishes for one server going down",
                  log.publishes);
    /* both route its keys elsewhere */
    EXPECT_REPLY(do1(&e, &r, q), MCR_OK, MCR_REPLY_MISS);
    ck_assert_str_ne(r.server, e.id[1]);
    ck_assert_int_eq(submit_to(&e, p2, &r2, &q), MCR_OK);
    ck_assert(run_until(&e, c_called, &r2, 3000));
    EXPECT_REPLY(&r2, MCR_OK, MCR_REPLY_MISS);
    ck_assert_str_ne(r2.server, e.id[1]);

    env_start_server(&e, 1, port);
    state_wait w = {e.id[1], MCR_STATE_ACTIVE};
    ck_assert(run_until(&e, c_state, &w, 10 * EJ_RETRY));
    run_ms(&e, 4 * EJ_RETRY);
    ck_assert_msg(log.publishes == 2 && log.up == 1, "%d publishes, %d re-adds", log.publishes,
                  log.up);
    EXPECT_REPLY(do1(&e, &r, q), MCR_OK, MCR_REPLY_MISS);
    ck_assert_str_eq(r.server, e.id[1]);
    ck_assert_int_eq(submit_to(&e, p2, &r2, &q), MCR_OK);
    ck_assert(run_until(&e, c_called, &r2, 3000));
    EXPECT_REPLY(&r2, MCR_OK, MCR_REPLY_MISS);
    ck_assert_str_eq(r2.server, e.id[1]);
    mcr_server_stats st;
    ck_assert_int_eq(stats_of(p2, e.id[1], &st), 0);
    ck_assert_int_eq(st.health, MCR_HEALTH_UP);

    mcr_router_remove_hook(e.router, pub_hook, &log);
    ck_assert(run_until(&e, c_idle, NULL, 1000));
    mcr_pool_free(p2);
    tally_ok(&e);
    rec_clear(&r);
    rec_clear(&r2);
    env_free(&e);
}
END_TEST

/* A snapshot of servers idx[0..n) of e, in that order, with epoch `epoch`:
 * what a fleet would publish. */
static mcr_snapshot *fleet_snapshot(env *e, const int *idx, int n, uint64_t epoch)
{
    mcr_error err = {0};
    mcr_config *cfg = mcr_config_new();
    mcr_snapshot *s = NULL;
    ck_assert_ptr_nonnull(cfg);
    for (int i = 0; i < n; i++)
        ck_assert_msg(mcr_config_add_server(cfg, e->mc[idx[i]].addr, e->mc[idx[i]].port, 1,
                                            &err) == MCR_OK,
                      "%s", err.message);
    ck_assert_msg(mcr_snapshot_new(cfg, epoch, &s, &err) == MCR_OK, "%s", err.message);
    mcr_config_free(cfg);
    return s;
}

static void fleet_publish(env *e, const int *idx, int n, uint64_t epoch)
{
    mcr_error err = {0};
    mcr_snapshot *s = fleet_snapshot(e, idx, n, epoch);
    ck_assert_msg(mcr_router_publish(e->router, s, &err) == MCR_OK,
                  "the fleet's epoch %llu refused: %s", (unsigned long long)epoch, err.message);
    mcr_snapshot_unref(s);
    ck_assert_uint_eq(mcr_router_epoch(e->router), epoch);
}

/* The clash the local overlay removes: a router fed by a fleet's epochs,
 * and a pool that ejects a server between two of them. The ejection takes
 * no epoch (it was epoch + 1, and the fleet's next epoch was then refused
 * as stale), so the fleet's epoch 6 is published, and in it the server
 * stays DOWN for this process while the published snapshot says ACTIVE.
 * The pool still re-adds it when it answers; a fleet epoch that no longer
 * lists an ejected server drops its local state; a pool freed with an
 * ejection outstanding clears it. */
START_TEST(test_eject_fleet_epochs)
{
    env e;
    mcr_pool_options o;
    rec r;
    char kb[48], k3[48];
    mcr_server_stats st;
    mcr_server_state lst;
    int applied = 0;

    memset(&r, 0, sizeof(r));
    opts_init(&o);
    o.policy = MCR_POLICY_EJECT;
    o.server_failure_limit = 2;
    o.retry_timeout_ms = EJ_RETRY;
    o.retry_max_ms = 4 * EJ_RETRY;
    o.request_timeout_ms = TMS(300);
    o.connect_timeout_ms = TMS(300);
    env_init_k(&e, 4, 3, &o); /* servers 0..3 running, 0..2 in the snapshot */
    const int five[] = {0, 1, 2}, six[] = {0, 1, 2, 3}, seven[] = {0, 2, 3};
    fleet_publish(&e, five, 3, 5);

    key_on(&e, e.id[1], "fl:", kb, sizeof(kb));
    EXPECT_REPLY(do1(&e, &r, rq(MCR_OP_GET, kb)), MCR_OK, MCR_REPLY_MISS);
    ck_assert_uint_eq(r.epoch, 5);
    int port = e.mc[1].port;
    env_kill(&e, 1);
    int n = eject_by_gets(&e, e.id[1], kb, 10);
    ck_assert_msg(state_of(e.router, e.id[1]) == MCR_STATE_DOWN,
                  "not ejected after %d failed gets", n);
    ck_assert_uint_eq(mcr_router_epoch(e.router), 5);
    ck_assert_int_eq(published_state_of(e.router, e.id[1]), MCR_STATE_ACTIVE);
    ck_assert_int_eq(stats_of(e.pool, e.id[1], &st), 0);
    ck_assert_int_eq(st.health, MCR_HEALTH_EJECTED);
    ck_assert_uint_eq(st.ejections, 1);

    /* the fleet's next epoch: accepted, the ejection re-applied to it */
    fleet_publish(&e, six, 4, 6);
    ck_assert_int_eq(state_of(e.router, e.id[1]), MCR_STATE_DOWN);
    ck_assert_int_eq(published_state_of(e.router, e.id[1]), MCR_STATE_ACTIVE);
    ck_assert_int_eq(mcr_router_local_state(e.router, e.id[1], &lst, &applied), MCR_OK);
    ck_assert_int_eq(lst, MCR_STATE_DOWN);
    ck_assert_int_eq(applied, 1);
    EXPECT_REPLY(do1(&e, &r, rq(MCR_OP_GET, kb)), MCR_OK, MCR_REPLY_MISS);
    ck_assert_str_ne(r.server, e.id[1]);
    ck_assert_uint_eq(r.epoch, 6);
    key_on(&e, e.id[3], "fl3:", k3, sizeof(k3)); /* the server epoch 6 added */
    EXPECT_REPLY(do1(&e, &r, rq(MCR_OP_GET, k3)), MCR_OK, MCR_REPLY_MISS);
    ck_assert_str_eq(r.server, e.id[3]);
    ck_assert_int_eq(stats_of(e.pool, e.id[1], &st), 0);
    ck_assert_int_eq(st.health, MCR_HEALTH_EJECTED);

    /* restarted: this pool's probe re-adds it, in epoch 6 */
    env_start_server(&e, 1, port);
    state_wait w = {e.id[1], MCR_STATE_ACTIVE};
    ck_assert_msg(run_until(&e, c_state, &w, 4 * EJ_RETRY + 1500),
                  "not re-added within %d ms of restarting", 4 * EJ_RETRY + 1500);
    ck_assert_uint_eq(mcr_router_epoch(e.router), 6);
    ck_assert_int_eq(mcr_router_local_state(e.router, e.id[1], NULL, NULL), MCR_ERR_UNKNOWN);
    key_on(&e, e.id[1], "fl1:", kb, sizeof(kb)); /* epoch 6 may have moved the first one */
    EXPECT_REPLY(do1(&e, &r, rq(MCR_OP_GET, kb)), MCR_OK, MCR_REPLY_MISS);
    ck_assert_str_eq(r.server, e.id[1]);

    /* ejected again, then an epoch without it: its local state goes */
    env_kill(&e, 1);
    eject_by_gets(&e, e.id[1], kb, 10);
    ck_assert_int_eq(mcr_router_local_state(e.router, e.id[1], NULL, NULL), MCR_OK);
    fleet_publish(&e, seven, 3, 7);
    ck_assert_int_eq(mcr_router_local_state(e.router, e.id[1], NULL, NULL), MCR_ERR_UNKNOWN);
    ck_assert_int_eq(state_of(e.router, e.id[1]), -1);
    EXPECT_REPLY(do1(&e, &r, rq(MCR_OP_GET, kb)), MCR_OK, MCR_REPLY_MISS);
    ck_assert_uint_eq(r.epoch, 7);

    /* a pool freed with an ejection outstanding takes it back */
    char k2[48];
    key_on(&e, e.id[2], "fl2:", k2, sizeof(k2));
    env_kill(&e, 2);
    eject_by_gets(&e, e.id[2], k2, 10);
    ck_assert_int_eq(state_of(e.router, e.id[2]), MCR_STATE_DOWN);
    ck_assert(run_until(&e, c_idle, NULL, 1000));
    tally_ok(&e);
    mcr_pool_free(e.pool);
    e.pool = NULL;
    ck_assert_int_eq(mcr_router_local_state(e.router, e.id[2], NULL, NULL), MCR_ERR_UNKNOWN);
    ck_assert_int_eq(state_of(e.router, e.id[2]), MCR_STATE_ACTIVE);
    ck_assert_uint_eq(mcr_router_epoch(e.router), 7);
    rec_clear(&r);
    env_free(&e);
}
END_TEST

/* Failover skips replicas that are down too: primary and first replica
 * killed, reads are answered by the second replica. */
START_TEST(test_failover_chain)
{
    env e;
    mcr_pool_options o;
    rec r;
    char kb[48], v[128];
    uint32_t rep[3];

    memset(&r, 0, sizeof(r));
    opts_init(&o);
    o.policy = MCR_POLICY_FAILOVER;
    o.server_failure_limit = 1;
    o.retry_timeout_ms = TMS(30000);
    o.request_timeout_ms = TMS(300);
    o.connect_timeout_ms = TMS(300);
    env_init(&e, 4, &o);
    key_on(&e, e.id[1], "fc:", kb, sizeof(kb));
    mcr_snapshot *s = mcr_router_current(e.router);
    ck_assert_uint_eq(mcr_snapshot_replicas(s, kb, strlen(kb), 3, rep, NULL), 3);
    mcr_snapshot_unref(s);
    ck_assert_uint_eq(rep[0], 1);
    /* a copy on the second replica only */
    mcr_request q = rq(MCR_OP_SET, kb);
    q.value = v;
    q.value_len = make_value(v, sizeof(v), kb, strlen(kb), 2, 0);
    q.server = e.id[rep[2]];
    EXPECT_REPLY(do1(&e, &r, q), MCR_OK, MCR_REPLY_STORED);

    env_kill(&e, 1);
    env_kill(&e, (int)rep[1]);
    /* the first replica fails a request sent to it by name: down (limit 1) */
    q = rq(MCR_OP_GET, kb);
    q.server = e.id[rep[1]];
    EXPECT_REPLY(do1(&e, &r, q), MCR_ERR_CONNECT, MCR_REPLY_MISS);
    /* the primary: one refusal, then failover */
    int failed = fail_until(&e, &r, kb, MCR_ERR_CONNECT, 3);
    ck_assert_int_eq(failed, 1);
    EXPECT_REPLY(&r, MCR_OK, MCR_REPLY_HIT);
    ck_assert_str_eq(r.server, e.id[rep[2]]);
    EXPECT_VALUE(&r, v);
    tally_ok(&e);
    rec_clear(&r);
    env_free(&e);
}
END_TEST

/* ================================================================== suite */

static Suite *suite(void)
{
    Suite *s = suite_create("pool_failures");
    PE_ADD_LOOP(s, sigstop_timeout, 0, 2);
    PE_ADD_LOOP(s, kill_fail_fast, 0, 2);
    PE_ADD(s, connect_timeout);
    PE_ADD(s, cancel_on_removal);
    PE_ADD_LOOP(s, eject, 0, 2);
    PE_ADD(s, eject_backoff);
    PE_ADD(s, eject_stopped);
    PE_ADD(s, eject_two_pools);
    PE_ADD(s, eject_fleet_epochs);
    PE_ADD_LOOP(s, failover, 0, 2);
    PE_ADD(s, failover_chain);
    return s;
}

int main(void)
{
    /* SIGPIPE keeps its default action: the pool must never raise it */
    return tu_run(suite());
}
