/* SPDX-License-Identifier: BSD-3-Clause */
/* test_pool_chaos.c: Check suite of the connection pool: a chaos run of everything at once. */
/*
 * The environment, the request tracking and the time rules are pool_env.h's.
 *
 * What is covered: a chaos run of everything at once: kills, stops, restarts and
 * membership changes under gets, sets and multi-gets.
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

/* ================================================================== chaos */

#define CH_KEYS 400
#define CH_RECS 60000
#define CH_MULTI 3000

static int chaos_status_ok(int st)
{
    return st == MCR_OK || st == MCR_ERR_TIMEOUT || st == MCR_ERR_CONNECT ||
           st == MCR_ERR_DOWN || st == MCR_ERR_CANCELLED;
}

/* Everything at once for a few seconds: random sets, gets, gets, deletes
 * and multi-gets (values encoding their key) while servers are stopped,
 * resumed, killed, restarted, added and removed. No value for another key,
 * every callback exactly once, nothing left pending, and (under ASan)
 * nothing leaked. _i: bit 0 the protocol, bit 1 eject instead of fail-fast. */
START_TEST(test_chaos)
{
    env e;
    mcr_pool_options o;
    tu_rng rng;
    snap_book book;
    char keys[CH_KEYS][32], v[256];
    unsigned gen[CH_KEYS];
    rec *rs = calloc(CH_RECS, sizeof(rec));
    mtrack **ms = calloc(CH_MULTI, sizeof(mtrack *));
    size_t nr = 0, nm = 0;

    ck_assert(rs && ms);
    memset(gen, 0, sizeof(gen));
    tu_rng_init(&rng, 404 + (uint64_t)_i);
    opts_init(&o);
    o.policy = (_i & 2) ? MCR_POLICY_EJECT : MCR_POLICY_FAIL_FAST;
    o.request_timeout_ms = TMS(150);
    o.connect_timeout_ms = TMS(150);
    o.server_failure_limit = 2;
    o.retry_timeout_ms = TMS(200);
    o.connections = 2;
    o.protocol = (_i & 1) ? MCR_PROTO_META : MCR_PROTO_TEXT;
    env_init_k(&e, 4, 3, &o);
    book_init(&book, e.router);
    ck_assert_int_eq(mcr_router_add_hook(e.router, book_hook, &book), MCR_OK);
    for (int i = 0; i < CH_KEYS; i++) {
        char tail[16];
        tu_key(&rng, tail, 12);
        snprintf(keys[i], sizeof(keys[i]), "ch:%d:%s", i, tail);
    }
    int port2 = e.mc[2].port;

    enum { STOP, CONT, KILL, RESTART, ADD, REMOVE };
    static const int plan[][3] = {{400, STOP, 1},    {800, CONT, 1},  {1200, KILL, 2},
                                  {1700, RESTART, 2}, {2000, ADD, 3},  {2500, REMOVE, 0},
                                  {2900, STOP, 3},   {3100, CONT, 3}, {3300, ADD, 0},
                                  {3600, KILL, 1}};
    size_t next = 0, nplan = sizeof(plan) / sizeof(plan[0]);
    long long start = mcr_test_now_ms(), longest = 0, last = start;
    /* 4 s, and the whole plan (a loaded machine may run late) */
    while ((mcr_test_now_ms() - start < 4000 || next < nplan) && mcr_test_now_ms() - start < 15000 &&
           nr + 30 < CH_RECS && nm + 2 < CH_MULTI) {
        long long t = mcr_test_now_ms() - start;
        if (mcr_test_now_ms() - last > longest)
            longest = mcr_test_now_ms() - last;
        last = mcr_test_now_ms();
        while (next < nplan && t >= plan[next][0]) {
            int srv = plan[next][2];
            switch (plan[next][1]) {
            case STOP:
                ck_assert_int_eq(kill(e.mc[srv].pid, SIGSTOP), 0);
                break;
            case CONT:
                ck_assert_int_eq(kill(e.mc[srv].pid, SIGCONT), 0);
                break;
            case KILL:
                env_kill(&e, srv);
                break;
            case RESTART:
                env_start_server(&e, srv, port2);
                break;
            case ADD:
                apply_change(&e, 0, srv);
                break;
            case REMOVE:
                apply_change(&e, 1, srv);
                break;
            }
            next++;
        }
        for (int k = 0; k < 25; k++) {
            unsigned dice = tu_below(&rng, 100);
            int i = (int)tu_below(&rng, CH_KEYS);
            if (dice < 10) {
                mtrack *m = mt_new(&e.t, 30);
                int n = 2 + (int)tu_below(&rng, 29);
                for (int j = 0; j < n; j++) {
                    int x = (int)tu_below(&rng, CH_KEYS);
                    mt_add(m, keys[x], strlen(keys[x]));
                }
                ms[nm++] = m;
                ck_assert_int_eq(submit_multi(&e, e.pool, m,
                                              dice < 5 ? MCR_OP_GET : MCR_OP_GETS),
                                 MCR_OK);
                continue;
            }
            mcr_request q = rq(MCR_OP_GET, keys[i]);
            if (dice < 45) {
                q.op = MCR_OP_SET;
                q.value = v;
                q.value_len = make_value(v, sizeof(v), keys[i], strlen(keys[i]), ++gen[i],
                                         tu_below(&rng, 150));
            } else if (dice < 55) {
                q.op = MCR_OP_GETS;
            } else if (dice < 60) {
                q.op = MCR_OP_DELETE;
            } else if (dice < 65) {
                q.key = keys[0]; /* a hot key */
                q.key_len = strlen(keys[0]);
            }
            ck_assert_int_eq(submit(&e, &rs[nr++], &q), MCR_OK);
        }
        run_ms(&e, 5);
    }
    ck_assert_msg(next == nplan, "%zu of %zu chaos steps in %lld ms (%zu requests, %zu "
                  "multi-gets; longest iteration %lld ms)", next, nplan, mcr_test_now_ms() - start, nr,
                  nm, longest);
    WAIT_IDLE(&e, 10000);
    run_ms(&e, 50);

    long ok = 0, by_status[32];
    memset(by_status, 0, sizeof(by_status));
    for (size_t i = 0; i < nr; i++) {
        rec *r = &rs[i];
        ck_assert_msg(chaos_status_ok(r->status), "%s %s: status %d (%s)", mcr_op_name(r->op),
                      r->key, r->status, r->message);
        by_status[-r->status]++;
        ok += r->status == MCR_OK;
        /* With eject, an epoch has several current snapshots (the
         * ejections and re-adds are local states, within the epoch): the
         * server must be the key's owner in one of them. */
        if (r->server[0] != '\0') {
            const char *want = book_owner(&book, r->epoch, r->key, r->key_len);
            ck_assert_msg(book_routes_to(&book, r->epoch, r->key, r->key_len, r->server),
                          "%s %s routed with epoch %llu went to %s, the owner in no snapshot "
                          "of that epoch (in its first: %s)",
                          mcr_op_name(r->op), r->key, (unsigned long long)r->epoch, r->server,
                          want ? want : "?");
        }
    }
    for (size_t i = 0; i < nm; i++) {
        mt_check(ms[i]);
        for (size_t d = 0; d < ms[i]->nd; d++)
            ck_assert_msg(chaos_status_ok(ms[i]->status[d]), "multi-get key %s: %d",
                          ms[i]->keys[ms[i]->first_of[d]], ms[i]->status[d]);
        ck_assert(chaos_status_ok(ms[i]->done_status));
    }
    ck_assert_msg(ok > (long)nr / 3, "only %ld of %zu requests succeeded", ok, nr);
    ck_assert_msg(by_status[-MCR_ERR_TIMEOUT] + by_status[-MCR_ERR_CONNECT] +
                          by_status[-MCR_ERR_DOWN] > 0,
                  "the chaos did not show: %ld timeouts, %ld refusals, %ld down",
                  by_status[-MCR_ERR_TIMEOUT], by_status[-MCR_ERR_CONNECT],
                  by_status[-MCR_ERR_DOWN]);
    tally_ok(&e);
    ck_assert_uint_eq(mcr_pool_pending(e.pool), 0);
    ck_assert_msg(book.overflow == 0, "%d snapshots not recorded in the book", book.overflow);
    /* the ring changed only by the plan's membership changes: ejections
     * take no epoch */
    ck_assert_uint_eq(mcr_router_epoch(e.router), 4);

    mcr_router_remove_hook(e.router, book_hook, &book);
    book_free(&book);
    for (size_t i = 0; i < nm; i++)
        mt_free(ms[i]);
    free(ms);
    env_free(&e);
    recs_free(rs, CH_RECS);
}
END_TEST

/* ================================================================== suite */

static Suite *suite(void)
{
    Suite *s = suite_create("pool_chaos");
    PE_ADD_LOOP(s, chaos, 0, 4);
    return s;
}

int main(void)
{
    /* SIGPIPE keeps its default action: the pool must never raise it */
    return tu_run(suite());
}
