/* SPDX-License-Identifier: BSD-3-Clause */
/* test_pool_queue.c: Check suite of the connection pool: the bound on requests queued behind max_in_flight (queue_timeout_ms). */
/*
 * The environment, the request tracking and the time rules are pool_env.h's.
 *
 * What is covered: gets queued behind max_in_flight 1 to a server that
 * accepts connections and never answers a get (fakeserver.c's FS_SILENT)
 * fail with MCR_ERR_TIMEOUT queue_timeout_ms after their submission, never
 * earlier and never sent, first in first out, while those sent still time
 * out by request_timeout_ms; a queue timeout is not a failure of the server
 * (the counters, the health); the default, 4 x request_timeout_ms; a
 * connect that hangs (a listener whose accept queue is full): the request
 * written to the connection waits for connect_timeout_ms, those queued
 * behind it for queue_timeout_ms only; a healthy server's queued requests
 * in the same pool, submitted all along, are all answered; a multi-get's
 * keys queued; a pool freed with requests queued after others timed out
 * there; the option's range and its default's cap.
 *
 * Time. Every bound is measured from the submission (rec.t0, read before
 * the call on the pool's clock, CLOCK_MONOTONIC): a request cannot start
 * waiting in the queue before it, so a queue timeout must come no earlier
 * than queue_timeout_ms after it (-1 for the ms clock's truncation of both
 * ends), and within QUEUE_MARGIN after. The pool's timeouts and the margin
 * are TMS() values; waits are on events (a callback, the fake's count of
 * gets read, the pool idle), each with a deadline.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <event2/event.h>
#include <limits.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "fakeserver.h"
#include "mcroute.h"
#include "mcroute_pool.h"
#include "mcroute_router.h"
#include "mcroute_snapshot.h"
#include "pool_env.h"
#include "realserver.h"
#include "testutil.h"

/* How late a queue timeout may be reported: the timer's own delay, the
 * loop pass that reports it, and the 5 ms tick of the test's loop. */
#define QUEUE_MARGIN TMS(400)

/* ================================================================== helpers */

/* A pool whose server 0 is 127.0.0.1:port (a fake, or a hung listener),
 * with a real memcached as server 1 when `real` is set. */
static void env_port(env *e, int port, int real, const mcr_pool_options *o)
{
    mcr_config *cfg = mcr_config_new();
    mcr_snapshot *s = NULL;
    memset(e, 0, sizeof(*e));
    ck_assert_ptr_nonnull(cfg);
    e->n = real ? 2 : 1; /* e->mc[0] stays zero: no process of ours */
    snprintf(e->id[0], sizeof(e->id[0]), "127.0.0.1:%d", port);
    ck_assert_int_eq(mcr_config_add_server(cfg, "127.0.0.1", port, 1, NULL), MCR_OK);
    if (real) {
        env_start_server(e, 1, 0);
        ck_assert_int_eq(mcr_config_add_server(cfg, e->mc[1].addr, e->mc[1].port, 1, NULL),
                         MCR_OK);
    }
    ck_assert_int_eq(mcr_snapshot_new(cfg, 1, &s, NULL), MCR_OK);
    mcr_config_free(cfg);
    ck_assert_int_eq(mcr_router_new(s, &e->router, NULL), MCR_OK);
    mcr_snapshot_unref(s);
    env_base(e);
    env_new_pool(e, o);
}

/* One connection per server, one request in flight on it: the rest
 * queue. A failure limit that is never reached, so that the server is
 * never down and the queue's bound is what ends a queued request. */
static void queue_opts(mcr_pool_options *o, int request_ms, int queue_ms)
{
    opts_init(o);
    o->connections = 1;
    o->max_in_flight = 1;
    o->server_failure_limit = 1000;
    o->request_timeout_ms = (unsigned)request_ms;
    o->queue_timeout_ms = (unsigned)queue_ms;
}

/* Whether r failed in the queue of server `id`, never sent: what the
 * header says of such a failure (MCR_ERR_TIMEOUT, the server, the queue). */
static int queued_out(const rec *r, const char *id)
{
    return r->status == MCR_ERR_TIMEOUT && strstr(r->message, id) != NULL &&
           strstr(r->message, " in the queue without being sent") != NULL;
}

/* r failed in the queue no earlier than q ms after its submission, and
 * within QUEUE_MARGIN after that. */
static void check_queue_bound(const rec *r, int q)
{
    long long took = r->t1 - r->t0;
    ck_assert_msg(took >= q - 1,
                  "get \"%s\" failed %lld ms after its submission, queue_timeout_ms %d: "
                  "early [%s]",
                  r->key, took, q, r->message);
    ck_assert_msg(took <= q + QUEUE_MARGIN,
                  "get \"%s\" failed %lld ms after its submission, queue_timeout_ms %d, "
                  "margin %d: late [%s]",
                  r->key, took, q, QUEUE_MARGIN, r->message);
}

typedef struct fs_count {
    fs_server *fs;
    unsigned n;
} fs_count;

static int c_fs_gets(env *e, void *arg)
{
    (void)e;
    const fs_count *w = arg;
    return fs_gets(w->fs) >= w->n;
}

static int submit_get(env *e, rec *r, const char *key)
{
    mcr_request q = rq(MCR_OP_GET, key);
    return submit(e, r, &q);
}

/* A get of key0 in flight on the fake's one connection, read by the fake:
 * whatever is submitted next to that server is queued. */
static void fill_connection(env *e, fs_server *fs, rec *r, const char *key0)
{
    ck_assert_int_eq(submit_get(e, r, key0), MCR_OK);
    fs_count w = {fs, 1};
    ck_assert_msg(run_until(e, c_fs_gets, &w, 10000), "the fake read no get");
}

/* ================================================================== a black hole */

#define BH_N 12

/* Gets queued behind max_in_flight 1 to a server that never answers:
 * request_timeout_ms R = 200, queue_timeout_ms Q = 500 (both scaled).
 * The first get is in flight; its timeout closes the connection, the next
 * queued get goes out on a new one, and so on: without a bound on the
 * queue, the k-th would wait k x R. Each get fails with MCR_ERR_TIMEOUT,
 * within Q + R of its submission: either sent in time (its request timeout,
 * "no reply within") or failed in the queue Q after its submission (never
 * earlier), never sent (the fake read exactly the others), and the queue
 * is first in, first out: once one fails there, no later one is sent. Those
 * queue timeouts are not failures of the server: `timeouts` and the
 * consecutive count are the connections' timeouts alone, `errors` counts
 * every get, and the server stays up. _i: the protocol. */
START_TEST(test_black_hole)
{
    fs_server *fs = fs_start(FS_SILENT, 0, 0);
    const int R = TMS(200), Q = TMS(500);
    env e;
    mcr_pool_options o;
    rec rs[BH_N];
    char keys[BH_N][32];
    mcr_server_stats st;

    ck_assert_msg(fs != NULL, "fake server did not start");
    queue_opts(&o, R, Q);
    o.protocol = _i ? MCR_PROTO_META : MCR_PROTO_TEXT;
    env_port(&e, fs_port(fs), 0, &o);
    memset(rs, 0, sizeof(rs));
    for (int i = 0; i < BH_N; i++)
        snprintf(keys[i], sizeof(keys[i]), "bh:%d", i);

    fill_connection(&e, fs, &rs[0], keys[0]);
    for (int i = 1; i < BH_N; i++)
        ck_assert_int_eq(submit_get(&e, &rs[i], keys[i]), MCR_OK);
    WAIT_IDLE(&e, 30000);

    int queued = 0, first_queued = -1;
    for (int i = 0; i < BH_N; i++) {
        const rec *r = &rs[i];
        ck_assert_msg(r->status == MCR_ERR_TIMEOUT, "get %d: status %d (%s) [%s]", i, r->status,
                      mcr_strerror(r->status), r->message);
        ck_assert_str_eq(r->server, e.id[0]);
        if (queued_out(r, e.id[0])) {
            queued++;
            if (first_queued < 0)
                first_queued = i;
            check_queue_bound(r, Q);
        } else {
            ck_assert_msg(first_queued < 0,
                          "get %d was sent after get %d had timed out in the queue [%s]", i,
                          first_queued, r->message);
            ck_assert_msg(strstr(r->message, "no reply within") != NULL, "get %d: [%s]", i,
                          r->message);
            ck_assert_msg(r->t1 - r->t0 <= Q + R + QUEUE_MARGIN,
                          "get %d failed %lld ms after its submission: over queue_timeout_ms "
                          "%d + request_timeout_ms %d (margin %d)",
                          i, r->t1 - r->t0, Q, R, QUEUE_MARGIN);
        }
    }
    /* the first in flight; two or three more sent, one a round of R */
    ck_assert_int_gt(first_queued, 0);
    ck_assert_msg(queued >= BH_N / 2, "only %d of %d gets timed out in the queue", queued, BH_N);
    /* never sent: the fake read the others, and only those */
    fs_count sent = {fs, (unsigned)(BH_N - queued)};
    ck_assert_msg(run_until(&e, c_fs_gets, &sent, 10000), "the fake read %u gets, %d sent",
                  fs_gets(fs), BH_N - queued);
    ck_assert_uint_eq(fs_gets(fs), (unsigned)(BH_N - queued));
    ck_assert_int_eq(stats_of(e.pool, e.id[0], &st), 0);
    ck_assert_uint_eq(st.requests, (uint64_t)(BH_N - queued));
    ck_assert_uint_eq(st.timeouts, (uint64_t)(BH_N - queued)); /* one per connection */
    ck_assert_uint_eq(st.consecutive_failures, (unsigned)(BH_N - queued));
    ck_assert_uint_eq(st.errors, BH_N);
    ck_assert_int_eq(st.health, MCR_HEALTH_UP);
    ck_assert_uint_eq(st.in_flight, 0);
    tally_ok(&e);
    for (int i = 0; i < BH_N; i++)
        rec_clear(&rs[i]);
    env_free(&e);
    fs_stop(fs);
}
END_TEST

#define DEF_N 8

/* queue_timeout_ms left 0 is 4 x request_timeout_ms: with R = 150
 * (scaled), gets queued behind a silent server's connection fail in the
 * queue 4 R after their submission, saying so; those sent before (one a
 * round of R) by their request timeout, within 5 R. */
START_TEST(test_default_bound)
{
    fs_server *fs = fs_start(FS_SILENT, 0, 0);
    const int R = TMS(150);
    env e;
    mcr_pool_options o;
    rec rs[DEF_N];
    char keys[DEF_N][32], want[64];

    ck_assert_msg(fs != NULL, "fake server did not start");
    queue_opts(&o, R, 0);
    env_port(&e, fs_port(fs), 0, &o);
    memset(rs, 0, sizeof(rs));
    for (int i = 0; i < DEF_N; i++)
        snprintf(keys[i], sizeof(keys[i]), "def:%d", i);
    snprintf(want, sizeof(want), "(queue_timeout_ms %d;", 4 * R);

    fill_connection(&e, fs, &rs[0], keys[0]);
    for (int i = 1; i < DEF_N; i++)
        ck_assert_int_eq(submit_get(&e, &rs[i], keys[i]), MCR_OK);
    WAIT_IDLE(&e, 30000);

    int queued = 0;
    for (int i = 0; i < DEF_N; i++) {
        const rec *r = &rs[i];
        ck_assert_msg(r->status == MCR_ERR_TIMEOUT, "get %d: status %d [%s]", i, r->status,
                      r->message);
        if (queued_out(r, e.id[0])) {
            queued++;
            ck_assert_msg(strstr(r->message, want) != NULL, "get %d: not %s [%s]", i, want,
                          r->message);
            check_queue_bound(r, 4 * R);
        } else {
            ck_assert_msg(strstr(r->message, "no reply within") != NULL, "get %d: [%s]", i,
                          r->message);
            ck_assert_msg(r->t1 - r->t0 <= 5 * R + QUEUE_MARGIN,
                          "get %d failed %lld ms after its submission (request_timeout_ms %d)",
                          i, r->t1 - r->t0, R);
        }
    }
    ck_assert_msg(queued >= 1, "no get timed out in the queue");
    tally_ok(&e);
    for (int i = 0; i < DEF_N; i++)
        rec_clear(&rs[i]);
    env_free(&e);
    fs_stop(fs);
}
END_TEST

/* ================================================================== a connect that hangs */

/* A listener on 127.0.0.1 whose accept queue is full (backlog 0, never
 * accepting, filled by connections of ours): the kernel drops the SYN of
 * any further connect, which hangs. fds[0] is the listener, the rest the
 * fillers; *nfds of them in all. Returns the port. */
static int hung_listener(int *fds, int cap, int *nfds)
{
    struct sockaddr_in a;
    socklen_t alen = sizeof(a);
    int l = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    ck_assert_int_ge(l, 0);
    memset(&a, 0, sizeof(a));
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ck_assert_int_eq(bind(l, (struct sockaddr *)&a, sizeof(a)), 0);
    ck_assert_int_eq(listen(l, 0), 0);
    ck_assert_int_eq(getsockname(l, (struct sockaddr *)&a, &alen), 0);
    int n = 0;
    fds[n++] = l;
    for (;;) {
        ck_assert_msg(n < cap, "the accept queue of a listener of backlog 0 never filled");
        int c = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        ck_assert_int_ge(c, 0);
        fds[n++] = c;
        if (connect(c, (struct sockaddr *)&a, sizeof(a)) == 0)
            continue;
        ck_assert_msg(errno == EINPROGRESS, "connect: %s", strerror(errno));
        /* a loopback handshake the queue takes completes at once */
        struct pollfd pf = {c, POLLOUT, 0};
        if (poll(&pf, 1, 200) == 0)
            break; /* this one hangs: so will the pool's */
    }
    *nfds = n;
    return ntohs(a.sin_port);
}

#define HANG_N 6

/* Requests waiting for a connection to be made. The server's connection
 * hangs in connect (connect_timeout_ms C = 1500, scaled): the first get,
 * written to it, is in flight and fails when the connect times out ("no
 * connection within", C after its submission, never earlier); the gets
 * queued behind it (max_in_flight 1) fail queue_timeout_ms Q = 300 after
 * theirs, before the connect has timed out: the connect's bound is not
 * theirs. One failure counted: the connect's. */
START_TEST(test_connect_hangs)
{
    int fds[16], nfds = 0;
    int port = hung_listener(fds, 16, &nfds);
    const int C = TMS(1500), Q = TMS(300);
    env e;
    mcr_pool_options o;
    rec rs[HANG_N];
    char keys[HANG_N][32];
    mcr_server_stats st;

    queue_opts(&o, TMS(30000), Q);
    o.connect_timeout_ms = (unsigned)C;
    env_port(&e, port, 0, &o);
    memset(rs, 0, sizeof(rs));
    for (int i = 0; i < HANG_N; i++) {
        snprintf(keys[i], sizeof(keys[i]), "hang:%d", i);
        ck_assert_int_eq(submit_get(&e, &rs[i], keys[i]), MCR_OK);
    }
    WAIT_IDLE(&e, 30000);

    ck_assert_msg(rs[0].status == MCR_ERR_TIMEOUT &&
                      strstr(rs[0].message, "no connection within") != NULL,
                  "the get written to the connection: status %d [%s]", rs[0].status,
                  rs[0].message);
    ck_assert_msg(rs[0].t1 - rs[0].t0 >= C - 1 && rs[0].t1 - rs[0].t0 <= C + QUEUE_MARGIN,
                  "the get written to the connection failed %lld ms after its submission, "
                  "connect_timeout_ms %d",
                  rs[0].t1 - rs[0].t0, C);
    for (int i = 1; i < HANG_N; i++) {
        ck_assert_msg(queued_out(&rs[i], e.id[0]), "queued get %d: status %d [%s]", i,
                      rs[i].status, rs[i].message);
        check_queue_bound(&rs[i], Q);
        ck_assert_msg(rs[i].t1 <= rs[0].t1, "queued get %d failed after the connect's timeout",
                      i);
    }
    ck_assert_int_eq(stats_of(e.pool, e.id[0], &st), 0);
    ck_assert_uint_eq(st.timeouts, 1);
    ck_assert_uint_eq(st.consecutive_failures, 1);
    ck_assert_uint_eq(st.requests, 1);
    ck_assert_uint_eq(st.errors, HANG_N);
    tally_ok(&e);
    for (int i = 0; i < HANG_N; i++)
        rec_clear(&rs[i]);
    env_free(&e);
    for (int i = 0; i < nfds; i++)
        close(fds[i]);
}
END_TEST

/* ================================================================== a healthy server beside */

#define LANES 50
#define HQ_N 5

/* Lanes of requests to the healthy server: each lane resubmits from its
 * own callback (a set of its key, then a get of it, in turn) until the
 * silent server's queued gets have all been reported, so that the healthy
 * server's queue (max_in_flight 1: LANES - 1 requests queued there) is full
 * the whole time that the silent server's queue times out. */
typedef struct lanes {
    env *e;
    rec rs[LANES];
    char key[LANES][32];
    char val[LANES][64];
    unsigned round[LANES];
    rec *silent;           /* the silent server's queued gets: HQ_N */
    long done, failed, running;
} lanes;

static lanes *g_lanes;

static void lane_cb(const mcr_result *res, void *arg);

static void lane_submit(lanes *L, int i)
{
    mcr_request q;
    mcr_error err = {0};
    if (L->round[i] % 2 == 0) {
        size_t vl = make_value(L->val[i], sizeof(L->val[i]), L->key[i], strlen(L->key[i]),
                               L->round[i], 0);
        q = rq(MCR_OP_SET, L->key[i]);
        q.value = L->val[i];
        q.value_len = vl;
    } else {
        q = rq(MCR_OP_GET, L->key[i]);
    }
    L->round[i]++;
    rec_prepare(&L->rs[i], &L->e->t, &q);
    g_submitting++;
    int rc = mcr_pool_submit(L->e->pool, &q, lane_cb, ticket_for(&L->e->t, &L->rs[i]), &err);
    g_submitting--;
    ck_assert_msg(rc == MCR_OK, "lane %d: %d %s", i, rc, err.message);
    L->e->t.submitted++;
    L->running++;
}

static int silent_all_called(const lanes *L)
{
    for (int k = 0; k < HQ_N; k++)
        if (L->silent[k].calls == 0)
            return 0;
    return 1;
}

static void lane_cb(const mcr_result *res, void *arg)
{
    lanes *L = g_lanes;
    rec *r = ((ticket *)arg)->r;
    int i = (int)(r - L->rs);
    rec_cb(res, arg);
    L->running--;
    L->done++;
    int want = r->op == MCR_OP_SET ? MCR_REPLY_STORED : MCR_REPLY_HIT;
    if (r->status != MCR_OK || (int)r->reply != want) {
        L->failed++;
        violation(r->t, "lane %d: %s \"%s\": status %d, reply %s [%s]", i, mcr_op_name(r->op),
                  r->key, r->status, mcr_reply_name(r->reply), r->message);
    }
    if (!silent_all_called(L))
        lane_submit(L, i);
}

static int c_lanes_stopped(env *e, void *arg)
{
    (void)e;
    const lanes *L = arg;
    return silent_all_called(L) && L->running == 0;
}

/* One pool, a silent server (its connection held by a get in flight, with
 * a request timeout that never fires here) and a healthy memcached, both
 * at max_in_flight 1, queue_timeout_ms Q = 300 (scaled). The silent
 * server's queued gets fail Q after their submission; the healthy
 * server's requests, LANES at a time (LANES - 1 of them queued at any
 * moment, submitted before, during and after that), are all answered, none
 * failed or counted as a timeout: the bound is per server, and a queue
 * that moves is never cut. */
START_TEST(test_healthy_unaffected)
{
    fs_server *fs = fs_start(FS_SILENT, 0, 0);
    const int Q = TMS(300);
    env e;
    mcr_pool_options o;
    lanes *L = calloc(1, sizeof(*L));
    rec held, silent[HQ_N];
    char kheld[32], ksilent[HQ_N][32];
    mcr_server_stats st;

    ck_assert_msg(fs != NULL, "fake server did not start");
    ck_assert_ptr_nonnull(L);
    queue_opts(&o, TMS(30000), Q);
    env_port(&e, fs_port(fs), 1, &o);
    memset(&held, 0, sizeof(held));
    memset(silent, 0, sizeof(silent));
    L->e = &e;
    L->silent = silent;
    g_lanes = L;
    for (int i = 0; i < LANES; i++) {
        char stem[16];
        snprintf(stem, sizeof(stem), "lane%d:", i);
        key_on(&e, e.id[1], stem, L->key[i], sizeof(L->key[i]));
    }
    key_on(&e, e.id[0], "held:", kheld, sizeof(kheld));
    for (int k = 0; k < HQ_N; k++) {
        char stem[16];
        snprintf(stem, sizeof(stem), "sq%d:", k);
        key_on(&e, e.id[0], stem, ksilent[k], sizeof(ksilent[k]));
    }

    fill_connection(&e, fs, &held, kheld);
    for (int i = 0; i < LANES; i++)
        lane_submit(L, i);
    for (int k = 0; k < HQ_N; k++)
        ck_assert_int_eq(submit_get(&e, &silent[k], ksilent[k]), MCR_OK);
    ck_assert_msg(run_until(&e, c_lanes_stopped, L, 30000),
                  "the silent server's queued gets: not all failed (%ld lane requests done)",
                  L->done);

    for (int k = 0; k < HQ_N; k++) {
        ck_assert_msg(queued_out(&silent[k], e.id[0]), "queued get %d: status %d [%s]", k,
                      silent[k].status, silent[k].message);
        check_queue_bound(&silent[k], Q);
    }
    ck_assert_msg(L->failed == 0, "%ld lane requests failed: %s", L->failed, e.t.first);
    ck_assert_msg(L->done >= 2 * LANES, "only %ld lane requests done", L->done);
    ck_assert_int_eq(stats_of(e.pool, e.id[1], &st), 0);
    ck_assert_uint_eq(st.errors, 0);
    ck_assert_uint_eq(st.timeouts, 0);
    ck_assert_uint_eq(st.requests, (uint64_t)L->done);
    ck_assert_int_eq(stats_of(e.pool, e.id[0], &st), 0);
    ck_assert_uint_eq(st.timeouts, 0); /* its queue timed out: no failure of its own */
    ck_assert_uint_eq(st.errors, HQ_N);

    /* the held get is cancelled by the free, once */
    mcr_pool_free(e.pool);
    e.pool = NULL;
    ck_assert_int_eq(held.calls, 1);
    ck_assert_int_eq(held.status, MCR_ERR_CANCELLED);
    tally_ok(&e);
    g_lanes = NULL;
    rec_clear(&held);
    for (int k = 0; k < HQ_N; k++)
        rec_clear(&silent[k]);
    for (int i = 0; i < LANES; i++)
        rec_clear(&L->rs[i]);
    free(L);
    env_free(&e);
    fs_stop(fs);
}
END_TEST

/* ================================================================== multi-gets */

/* What the key callbacks of a multi-get saw of the silent server's keys. */
typedef struct mq_seen {
    const char *id;        /* the silent server */
    const char *prefix;    /* its keys start so */
    int calls, bad;        /* its keys reported; of them, not a queue timeout */
    long long first, last; /* when */
    char bad_msg[256];
} mq_seen;

static mq_seen g_mq;

static void mq_key_cb(const mcr_result *res, void *arg)
{
    size_t pl = strlen(g_mq.prefix);
    if (res->key_len >= pl && memcmp(res->key, g_mq.prefix, pl) == 0) {
        long long now = mcr_test_now_ms();
        if (g_mq.calls++ == 0)
            g_mq.first = now;
        g_mq.last = now;
        if (res->status != MCR_ERR_TIMEOUT || res->message == NULL ||
            strstr(res->message, g_mq.id) == NULL ||
            strstr(res->message, " in the queue without being sent") == NULL) {
            g_mq.bad++;
            snprintf(g_mq.bad_msg, sizeof(g_mq.bad_msg), "status %d [%s]", res->status,
                     res->message ? res->message : "");
        }
    }
    mt_key_cb(res, arg);
}

/* A multi-get whose keys are split between the silent server (its
 * connection held by a get) and a healthy one: its request to the silent
 * server is queued, and its keys there (one of them given twice) fail
 * queue_timeout_ms Q after the call, each reported once per occurrence,
 * never sent; its keys on the healthy server are answered; done_cb says
 * MCR_ERR_TIMEOUT. Nothing counted against the silent server but the
 * errors. */
START_TEST(test_multiget_queued)
{
    fs_server *fs = fs_start(FS_SILENT, 0, 0);
    const int Q = TMS(300);
    env e;
    mcr_pool_options o;
    rec held;
    char kheld[32], ks[5][32], kr[5][32];
    mcr_server_stats st;

    ck_assert_msg(fs != NULL, "fake server did not start");
    queue_opts(&o, TMS(30000), Q);
    env_port(&e, fs_port(fs), 1, &o);
    memset(&held, 0, sizeof(held));
    key_on(&e, e.id[0], "held:", kheld, sizeof(kheld));
    for (int k = 0; k < 5; k++) {
        char stem[16];
        snprintf(stem, sizeof(stem), "mqs%d:", k);
        key_on(&e, e.id[0], stem, ks[k], sizeof(ks[k]));
        snprintf(stem, sizeof(stem), "mqr%d:", k);
        key_on(&e, e.id[1], stem, kr[k], sizeof(kr[k]));
    }
    fill_connection(&e, fs, &held, kheld);

    mtrack *m = mt_new(&e.t, 12);
    for (int k = 0; k < 5; k++) {
        mt_add(m, ks[k], strlen(ks[k]));
        mt_add(m, kr[k], strlen(kr[k]));
    }
    mt_add(m, ks[2], strlen(ks[2]));
    mt_add(m, kr[3], strlen(kr[3]));
    memset(&g_mq, 0, sizeof(g_mq));
    g_mq.id = e.id[0];
    g_mq.prefix = "mqs";
    long long t0 = mcr_test_now_ms();
    ck_assert_int_eq(submit_multi_cb(&e, e.pool, m, MCR_OP_GET, mq_key_cb), MCR_OK);
    ck_assert_msg(run_until(&e, c_mt_done, m, 30000), "the multi-get did not complete");

    mt_check(m);
    ck_assert_msg(g_mq.bad == 0, "%d of the silent server's keys: %s", g_mq.bad, g_mq.bad_msg);
    ck_assert_int_eq(g_mq.calls, 6);
    ck_assert_msg(g_mq.first - t0 >= Q - 1, "the queued keys failed %lld ms after the call: "
                  "early (queue_timeout_ms %d)", g_mq.first - t0, Q);
    ck_assert_msg(g_mq.last - t0 <= Q + QUEUE_MARGIN,
                  "the queued keys failed %lld ms after the call: late (queue_timeout_ms %d)",
                  g_mq.last - t0, Q);
    for (size_t d = 0; d < m->nd; d++) {
        const char *k = m->keys[m->first_of[d]];
        if (strncmp(k, "mqr", 3) == 0)
            ck_assert_msg(m->status[d] == MCR_OK && m->reply[d] == MCR_REPLY_MISS,
                          "healthy key %s: status %d", k, m->status[d]);
        else
            ck_assert_int_eq(m->status[d], MCR_ERR_TIMEOUT);
    }
    ck_assert_int_eq(m->done_status, MCR_ERR_TIMEOUT);
    ck_assert_uint_eq(fs_gets(fs), 1); /* the held get only */
    ck_assert_int_eq(stats_of(e.pool, e.id[0], &st), 0);
    ck_assert_uint_eq(st.requests, 1);
    ck_assert_uint_eq(st.timeouts, 0);
    ck_assert_uint_eq(st.consecutive_failures, 0);
    ck_assert_uint_eq(st.errors, 6);

    mcr_pool_free(e.pool);
    e.pool = NULL;
    ck_assert_int_eq(held.status, MCR_ERR_CANCELLED);
    tally_ok(&e);
    rec_clear(&held);
    mt_free(m);
    env_free(&e);
    fs_stop(fs);
}
END_TEST

/* ================================================================== freeing */

#define FQ_FIRST 4
#define FQ_SECOND 4

/* mcr_pool_free() with requests queued behind a silent server, after
 * earlier ones timed out there: those reported keep their MCR_ERR_TIMEOUT;
 * the get in flight, the gets queued since (one shared by a second get of
 * its key), and a multi-get queued since, complete inside the free, once
 * each, with MCR_ERR_CANCELLED. */
START_TEST(test_free_queued)
{
    fs_server *fs = fs_start(FS_SILENT, 0, 0);
    const int Q = TMS(300);
    env e;
    mcr_pool_options o;
    rec held, first[FQ_FIRST], second[FQ_SECOND], shared;
    char keys[FQ_FIRST + FQ_SECOND][32];

    ck_assert_msg(fs != NULL, "fake server did not start");
    queue_opts(&o, TMS(30000), Q);
    env_port(&e, fs_port(fs), 0, &o);
    memset(&held, 0, sizeof(held));
    memset(first, 0, sizeof(first));
    memset(second, 0, sizeof(second));
    memset(&shared, 0, sizeof(shared));
    for (int i = 0; i < FQ_FIRST + FQ_SECOND; i++)
        snprintf(keys[i], sizeof(keys[i]), "fq:%d", i);
    fill_connection(&e, fs, &held, "fq:held");

    for (int i = 0; i < FQ_FIRST; i++)
        ck_assert_int_eq(submit_get(&e, &first[i], keys[i]), MCR_OK);
    mtrack *m1 = mt_new(&e.t, 3);
    mt_add(m1, "fq:m1a", 6);
    mt_add(m1, "fq:m1b", 6);
    mt_add(m1, "fq:m1a", 6);
    ck_assert_int_eq(submit_multi(&e, e.pool, m1, MCR_OP_GET), MCR_OK);
    ck_assert_msg(run_until(&e, c_called, &first[FQ_FIRST - 1], 30000),
                  "the queued gets did not time out");
    ck_assert_msg(run_until(&e, c_mt_done, m1, 30000), "the queued multi-get did not time out");
    for (int i = 0; i < FQ_FIRST; i++) {
        ck_assert_msg(queued_out(&first[i], e.id[0]), "get %d: status %d [%s]", i,
                      first[i].status, first[i].message);
        check_queue_bound(&first[i], Q);
    }
    mt_check(m1);
    ck_assert_int_eq(m1->done_status, MCR_ERR_TIMEOUT);

    /* queued again, behind the same get in flight, then freed */
    for (int i = 0; i < FQ_SECOND; i++)
        ck_assert_int_eq(submit_get(&e, &second[i], keys[FQ_FIRST + i]), MCR_OK);
    ck_assert_int_eq(submit_get(&e, &shared, keys[FQ_FIRST]), MCR_OK);
    mtrack *m2 = mt_new(&e.t, 2);
    mt_add(m2, "fq:m2a", 6);
    mt_add(m2, "fq:m2b", 6);
    ck_assert_int_eq(submit_multi(&e, e.pool, m2, MCR_OP_GET), MCR_OK);
    /* one pass: the gets are routed to the server's queue */
    event_base_loop(e.base, EVLOOP_NONBLOCK);
    ck_assert_int_eq(second[0].calls, 0);
    mcr_pool_free(e.pool);
    e.pool = NULL;

    ck_assert_int_eq(held.calls, 1);
    ck_assert_int_eq(held.status, MCR_ERR_CANCELLED);
    for (int i = 0; i < FQ_SECOND; i++) {
        ck_assert_int_eq(second[i].calls, 1);
        ck_assert_int_eq(second[i].status, MCR_ERR_CANCELLED);
    }
    ck_assert_int_eq(shared.calls, 1);
    ck_assert_int_eq(shared.status, MCR_ERR_CANCELLED);
    for (int i = 0; i < FQ_FIRST; i++) {
        ck_assert_int_eq(first[i].calls, 1);
        ck_assert_int_eq(first[i].status, MCR_ERR_TIMEOUT);
    }
    mt_check(m2);
    ck_assert_int_eq(m2->done_status, MCR_ERR_CANCELLED);
    ck_assert_uint_eq(fs_gets(fs), 1);
    tally_ok(&e);
    rec_clear(&held);
    rec_clear(&shared);
    for (int i = 0; i < FQ_FIRST; i++)
        rec_clear(&first[i]);
    for (int i = 0; i < FQ_SECOND; i++)
        rec_clear(&second[i]);
    mt_free(m1);
    mt_free(m2);
    env_free(&e);
    fs_stop(fs);
}
END_TEST

/* ================================================================== the option */

/* queue_timeout_ms: over MCR_POOL_TIMEOUT_MAX_MS is MCR_ERR_RANGE, named in
 * the message, *out unchanged; the maximum itself is taken; left 0, its
 * default (4 x request_timeout_ms) is capped at the maximum, so a request
 * timeout of a quarter of a day or more is still accepted. */
START_TEST(test_option_range)
{
    static const struct {
        unsigned request_ms, queue_ms;
        int rc;
    } cases[] = {
        {0, MCR_POOL_TIMEOUT_MAX_MS + 1, MCR_ERR_RANGE},
        {0, UINT_MAX, MCR_ERR_RANGE},
        {5, MCR_POOL_TIMEOUT_MAX_MS + 1, MCR_ERR_RANGE},
        {0, MCR_POOL_TIMEOUT_MAX_MS, MCR_OK},
        {0, 1, MCR_OK},
        {MCR_POOL_TIMEOUT_MAX_MS, 0, MCR_OK},
        {MCR_POOL_TIMEOUT_MAX_MS / 4 + 1, 0, MCR_OK},
        {MCR_POOL_TIMEOUT_MAX_MS / 4, 0, MCR_OK},
    };
    env e;
    mcr_config *cfg = mcr_config_new();
    mcr_snapshot *s = NULL;

    memset(&e, 0, sizeof(e));
    ck_assert_ptr_nonnull(cfg);
    ck_assert_int_eq(mcr_config_add_server(cfg, "127.0.0.1", 1, 1, NULL), MCR_OK);
    ck_assert_int_eq(mcr_snapshot_new(cfg, 1, &s, NULL), MCR_OK);
    mcr_config_free(cfg);
    ck_assert_int_eq(mcr_router_new(s, &e.router, NULL), MCR_OK);
    mcr_snapshot_unref(s);
    env_base(&e);
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        mcr_pool_options o;
        mcr_error err = {0};
        mcr_pool *p = (mcr_pool *)&e; /* a sentinel: must stay as it is on an error */
        mcr_pool_options_init(&o);
        o.request_timeout_ms = cases[i].request_ms;
        o.queue_timeout_ms = cases[i].queue_ms;
        int rc = mcr_pool_new(e.base, e.router, &o, &p, &err);
        ck_assert_msg(rc == cases[i].rc, "request_timeout_ms %u, queue_timeout_ms %u: %d (%s), "
                      "expected %d", cases[i].request_ms, cases[i].queue_ms, rc, err.message,
                      cases[i].rc);
        if (rc == MCR_OK) {
            mcr_pool_free(p);
            continue;
        }
        ck_assert_int_eq(err.code, rc);
        ck_assert_msg(strstr(err.message, "queue_timeout_ms") != NULL, "message: %s",
                      err.message);
        ck_assert_ptr_eq(p, (mcr_pool *)&e);
    }
    env_free(&e);
}
END_TEST

/* ================================================================== suite */

static Suite *suite(void)
{
    Suite *s = suite_create("pool_queue");
    PE_ADD_LOOP(s, black_hole, 0, 2);
    PE_ADD(s, default_bound);
    PE_ADD(s, connect_hangs);
    PE_ADD(s, healthy_unaffected);
    PE_ADD(s, multiget_queued);
    PE_ADD(s, free_queued);
    PE_ADD(s, option_range);
    return s;
}

int main(void)
{
    /* SIGPIPE keeps its default action: the pool must never raise it */
    return tu_run(suite());
}
