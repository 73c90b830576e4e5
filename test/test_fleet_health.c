/* SPDX-License-Identifier: BSD-3-Clause */
/* test_fleet_health.c: a pool's ejections under a router fed by etcd: a local state by default (the fleet's epoch unchanged), written to etcd with publish_local_states; real etcd and memcached. */
#include <check.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

#include "etcdserver.h"
#include "mcroute.h"
#include "mcroute_fleet.h"
#include "mcroute_pool.h"
#include "mcroute_router.h"
#include "realserver.h"
#include "testutil.h"

#define WAIT_MS 20000 /* times the time scale */

typedef struct env {
    es_cluster *etcd;
    rs_proc mc[2];
    char ids[2][64];
    mcr_fleet_options fo;
    struct event_base *base;
    mcr_router *router;
    mcr_fleet *fleet;
    mcr_pool *pool;
    int done;
} env;

static void tick(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    (void)arg;
}

static void got(const mcr_result *r, void *arg)
{
    (void)r;
    ((env *)arg)->done++;
}

/* One get of a key that server `s` owns, run to completion. */
static void get_on(env *e, int s)
{
    char key[32];
    mcr_snapshot *snap = mcr_router_published(e->router);
    uint32_t want = mcr_snapshot_find(snap, e->ids[s]);
    ck_assert_int_ge(want, 0);
    for (int i = 0;; i++) {
        int n = snprintf(key, sizeof(key), "k%d", i);
        if (mcr_snapshot_locate(snap, key, (size_t)n) == (uint32_t)want) {
            mcr_error err;
            int before = e->done;
            ck_assert_int_eq(mcr_pool_get(e->pool, key, (size_t)n, got, e, &err), MCR_OK);
            while (e->done == before)
                event_base_loop(e->base, EVLOOP_ONCE);
            break;
        }
        ck_assert_int_lt(i, 100000);
    }
    mcr_snapshot_unref(snap);
}

/* Run the loop (a timer keeps it turning) until pred(e) or the deadline. */
static int run_until(env *e, int (*pred)(env *))
{
    struct event *t = event_new(e->base, -1, EV_PERSIST, tick, NULL);
    struct timeval tv = {0, 5000};
    event_add(t, &tv);
    int64_t end = mcr_test_now_ms() + mcr_test_ms(WAIT_MS);
    while (!pred(e) && mcr_test_now_ms() < end)
        event_base_loop(e->base, EVLOOP_ONCE);
    event_free(t);
    return pred(e);
}

static mcr_server_state state_in(const mcr_snapshot *s, const char *id)
{
    mcr_server_desc d;
    uint32_t i = mcr_snapshot_find(s, id);
    ck_assert_int_ge(i, 0);
    ck_assert_int_eq(mcr_snapshot_server(s, (size_t)i, &d), MCR_OK);
    return d.state;
}

static mcr_server_state effective_state(env *e, const char *id)
{
    mcr_snapshot *s = mcr_router_current(e->router);
    mcr_server_state st = state_in(s, id);
    mcr_snapshot_unref(s);
    return st;
}

static void setup(env *e, int publish_local)
{
    memset(e, 0, sizeof(*e));
    e->etcd = es_start(1, "health");
    ck_assert_msg(e->etcd != NULL, "etcd: %s", es_last_error());
    char list[160];
    for (int i = 0; i < 2; i++) {
        ck_assert_msg(rs_memcached_start(&e->mc[i], "127.0.0.1", 0, NULL, mcr_test_ms(5000)) == 0,
                      "memcached (%s) did not start", rs_memcached_path());
        snprintf(e->ids[i], sizeof(e->ids[i]), "127.0.0.1:%d", e->mc[i].port);
    }
    snprintf(list, sizeof(list), "%s,%s", e->ids[0], e->ids[1]);
    mcr_fleet_options_init(&e->fo);
    e->fo.endpoints = es_endpoints(e->etcd);
    e->fo.pool = "health";
    mcr_error err;
    mcr_config *cfg = mcr_config_new();
    ck_assert_int_eq(mcr_config_set_mode(cfg, MCR_MODE_STABLE_KETAMA), MCR_OK);
    ck_assert_int_eq(mcr_config_add_servers(cfg, list, &err), MCR_OK);
    uint64_t epoch = 0;
    ck_assert_msg(mcr_fleet_publish(&e->fo, cfg, &epoch, &err) == MCR_OK, "%s", err.message);
    ck_assert_uint_eq(epoch, 1);
    mcr_config_free(cfg);

    e->base = event_base_new();
    ck_assert_int_eq(mcr_router_new(NULL, &e->router, &err), MCR_OK);
    mcr_fleet_follow_options ff = {0};
    ff.publish_local_states = publish_local;
    ck_assert_msg(mcr_fleet_follow(&e->fo, &ff, e->router, &e->fleet, &err) == MCR_OK, "%s",
                  err.message);
    mcr_pool_options po;
    mcr_pool_options_init(&po);
    po.policy = MCR_POLICY_EJECT;
    po.server_failure_limit = 1;
    po.retry_timeout_ms = 50;
    po.retry_max_ms = 50;
    po.connect_timeout_ms = (unsigned)mcr_test_ms(1000);
    po.request_timeout_ms = (unsigned)mcr_test_ms(1000);
    ck_assert_int_eq(mcr_pool_new(e->base, e->router, &po, &e->pool, &err), MCR_OK);
}

static void teardown(env *e)
{
    mcr_pool_free(e->pool);
    mcr_fleet_free(e->fleet);
    mcr_router_free(e->router);
    event_base_free(e->base);
    for (int i = 0; i < 2; i++)
        rs_stop(&e->mc[i]);
    es_free(e->etcd);
}

static int b_down(env *e)
{
    return effective_state(e, e->ids[1]) == MCR_STATE_DOWN;
}

static int b_active(env *e)
{
    return effective_state(e, e->ids[1]) == MCR_STATE_ACTIVE;
}

static int fleet_epoch2(env *e)
{
    return mcr_router_epoch(e->router) >= 2;
}

static int fleet_epoch3(env *e)
{
    return mcr_router_epoch(e->router) >= 3;
}

static mcr_snapshot *pool_in_etcd(env *e)
{
    mcr_snapshot *s = NULL;
    mcr_error err;
    ck_assert_msg(mcr_fleet_read(&e->fo, &s, NULL, &err) == MCR_OK, "%s", err.message);
    return s;
}

/* Bring server 1 back on its port (its pool probes and re-adds it). */
static void restart_b(env *e)
{
    int port = e->mc[1].port;
    ck_assert_msg(rs_memcached_start(&e->mc[1], "127.0.0.1", port, NULL, mcr_test_ms(5000)) == 0,
                  "memcached did not restart on port %d", port);
}

/* Default: the ejection is this process's business only. */
START_TEST(ejection_stays_local)
{
    env e;
    setup(&e, 0);
    rs_stop(&e.mc[1]);
    get_on(&e, 1);
    ck_assert_msg(run_until(&e, b_down), "server 1 was not ejected");
    ck_assert_uint_eq(mcr_router_epoch(e.router), 1);
    mcr_snapshot *s = pool_in_etcd(&e);
    ck_assert_uint_eq(mcr_snapshot_epoch(s), 1);
    ck_assert_int_eq(state_in(s, e.ids[1]), MCR_STATE_ACTIVE);
    mcr_snapshot_unref(s);
    /* The fleet's next epoch is adopted on top of the local state. */
    mcr_changes *ch = mcr_changes_new();
    mcr_error err;
    uint64_t epoch = 0;
    ck_assert_int_eq(mcr_changes_set_weight(ch, e.ids[0], 2, &err), MCR_OK);
    ck_assert_int_eq(mcr_fleet_change(&e.fo, ch, &epoch, &err), MCR_OK);
    mcr_changes_free(ch);
    ck_assert_uint_eq(epoch, 2);
    ck_assert_msg(run_until(&e, fleet_epoch2), "epoch 2 not adopted");
    ck_assert_int_eq(effective_state(&e, e.ids[1]), MCR_STATE_DOWN);
    /* Back: re-added locally, etcd never saw it. */
    restart_b(&e);
    ck_assert_msg(run_until(&e, b_active), "server 1 was not re-added");
    s = pool_in_etcd(&e);
    ck_assert_uint_eq(mcr_snapshot_epoch(s), 2);
    mcr_snapshot_unref(s);
    teardown(&e);
}
END_TEST

/* publish_local_states: DOWN and then ACTIVE again, each one fleet epoch. */
START_TEST(ejection_written_to_etcd)
{
    env e;
    setup(&e, 1);
    rs_stop(&e.mc[1]);
    get_on(&e, 1);
    ck_assert_msg(run_until(&e, fleet_epoch2), "the ejection did not reach etcd");
    mcr_snapshot *s = pool_in_etcd(&e);
    ck_assert_uint_eq(mcr_snapshot_epoch(s), 2);
    ck_assert_int_eq(state_in(s, e.ids[1]), MCR_STATE_DOWN);
    ck_assert_int_eq(state_in(s, e.ids[0]), MCR_STATE_ACTIVE);
    mcr_snapshot_unref(s);
    /* The pool's own state stays (it probes, and clears it on the re-add). */
    mcr_server_state st;
    int applied = 0;
    ck_assert_int_eq(mcr_router_local_state(e.router, e.ids[1], &st, &applied), MCR_OK);
    ck_assert_int_eq(st, MCR_STATE_DOWN);
    restart_b(&e);
    ck_assert_msg(run_until(&e, fleet_epoch3), "the re-add did not reach etcd");
    s = pool_in_etcd(&e);
    ck_assert_uint_eq(mcr_snapshot_epoch(s), 3);
    ck_assert_int_eq(state_in(s, e.ids[1]), MCR_STATE_ACTIVE);
    mcr_snapshot_unref(s);
    ck_assert_msg(run_until(&e, b_active), "server 1 not active here");
    teardown(&e);
}
END_TEST

int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    Suite *s = suite_create("fleet_health");
    TCase *tc = tcase_create("health");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, ejection_stays_local);
    tcase_add_test(tc, ejection_written_to_etcd);
    suite_add_tcase(s, tc);
    return tu_run(s);
}
